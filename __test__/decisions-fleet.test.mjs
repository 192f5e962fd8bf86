// A fleet's decision history (issue 32 part 2): PostgresMappingStore.decisionSink() keeps each
// record in one table of the fleet's database, store.decisions() reads it back newest first,
// and the retention (count and age) holds. Against a real PostgreSQL (postgres-server.mjs).
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { InMemoryProviderRegistry, PostgresMappingStore, SandboxRouter, SandboxRouterConfigurationError, SandboxRequestValidationError } from '../index.mjs';
import { startPostgres } from './postgres-server.mjs';
import { CANARY, definition, fakeRuntime, leaks } from './fixtures.mjs';

/** @type {Awaited<ReturnType<typeof startPostgres>>} */
let pg;
let dbs = 0;
const stores = [];
async function freshStore() {
  const name = `d${++dbs}`;
  await pg.createDatabase(name);
  const url = pg.url(name);
  const store = () => {
    const s = new PostgresMappingStore({ connection: url, timeoutMs: 5_000 });
    stores.push(s);
    return s;
  };
  return { name, store };
}

before(async () => {
  pg = await startPostgres();
});
after(async () => {
  for (const s of stores) await s.close().catch(() => {});
  pg?.stop();
});

/** A router over two pools whose records go to `sink`; the writes it started are kept in `writes`. */
function routerTo(sink, writes, pools = ['e2b', 'daytona']) {
  return new SandboxRouter({
    registry: new InMemoryProviderRegistry(pools.map((id, i) => definition(id, { signals: { estimatedCost: 0.01 * (i + 1) }, runtime: fakeRuntime() }))),
    decisions: { sink: (record) => writes.push(sink(record)) },
  });
}

const count = async (db) => Number(await pg.psql('SELECT count(*) FROM sandbox_router_decisions', db));

test('fleet history: two processes’ routers keep their records in one table; store.decisions() reads them newest first, by sandbox, since an instant, up to a limit', async () => {
  const { name, store } = await freshStore();
  const [a, b] = [store(), store()];
  const writes = [];
  const routers = [routerTo(a.decisionSink(), writes), routerTo(b.decisionSink(), writes)];
  const made = [];
  for (let i = 0; i < 6; i++) made.push(await routers[i % 2].provision({ routing: { strategy: 'cost' } }));
  await Promise.all(writes);
  assert.equal(await count(name), 6);
  const all = await a.decisions();
  assert.equal(all.length, 6);
  assert.deepEqual(new Set(all.map((r) => r.sandboxId)), new Set(made.map((s) => s.id)), 'every process’s records are in the one history');
  for (let i = 1; i < all.length; i++) assert.ok(all[i - 1].at >= all[i].at, 'newest first');
  const one = await b.decisions({ sandboxId: made[3].id });
  assert.equal(one.length, 1);
  assert.equal(one[0].outcome.providerId, 'e2b');
  assert.equal(one[0].schema, 'sandbox-router.decision/1');
  assert.equal((await a.decisions({ limit: 2 })).length, 2);
  assert.equal((await a.decisions({ since: all[0].at + 1 })).length, 0);
  assert.equal((await a.decisions({ since: new Date(all[5].at).toISOString() })).length, 6);
});

test('fleet history: a record read back from the table replays the same on an identically configured router (the table keeps it faithfully)', async () => {
  const { store } = await freshStore();
  const s = store();
  const writes = [];
  const router = routerTo(s.decisionSink(), writes);
  await router.provision({ routing: { strategy: 'cost' }, launch: { labels: { tenant: 'acme' } } });
  await router.provision({ requires: { requiredCapabilities: ['gpu'] } }).catch(() => {});
  await Promise.all(writes);
  const kept = await s.decisions();
  assert.equal(kept.length, 2);
  for (const record of kept) assert.equal(router.replay(record).same, true, JSON.stringify(router.replay(record)));
  const cheaper = routerTo(() => {}, [], ['daytona', 'e2b']);
  assert.equal(cheaper.replay(kept.find((r) => 'providerId' in r.outcome)).same, false, 'must-fire: a changed configuration still differs');
});

test('retention by count must-fire: past `keep`, a write prunes to the newest `keep` records', async () => {
  const { name, store } = await freshStore();
  const s = store();
  const sink = s.decisionSink({ keep: 5 });
  const writes = [];
  const router = routerTo(sink, writes);
  for (let i = 0; i < 12; i++) await router.provision({});
  await Promise.all(writes);
  await new Promise((r) => setTimeout(r, 1_100)); // a process prunes at most once a second
  const last = await router.provision({});
  await Promise.all(writes);
  assert.equal(await count(name), 5);
  assert.equal((await s.decisions())[0].sandboxId, last.id, 'the newest is kept');
});

test('retention by count must-not-fire: within `keep`, every record stays', async () => {
  const { name, store } = await freshStore();
  const writes = [];
  const router = routerTo(store().decisionSink({ keep: 100 }), writes);
  for (let i = 0; i < 12; i++) await router.provision({});
  await Promise.all(writes);
  await new Promise((r) => setTimeout(r, 1_100));
  await router.provision({});
  await Promise.all(writes);
  assert.equal(await count(name), 13);
});

test('retention by age must-fire: records older than `maxAgeMs` are pruned; must-not-fire: a younger one stays', async () => {
  const { name, store } = await freshStore();
  const writes = [];
  const router = routerTo(store().decisionSink({ maxAgeMs: 1_000 }), writes);
  for (let i = 0; i < 3; i++) await router.provision({});
  await Promise.all(writes);
  await new Promise((r) => setTimeout(r, 1_300));
  const young = await router.provision({});
  await Promise.all(writes);
  assert.equal(await count(name), 1);
  assert.equal(await pg.psql('SELECT sandbox_id FROM sandbox_router_decisions', name), young.id);
});

test('fleet history: bad retention options and queries are typed errors naming the field', async () => {
  const { store } = await freshStore();
  const s = store();
  for (const [options, field] of [
    [{ keep: 0 }, 'keep'],
    [{ keep: 1.5 }, 'keep'],
    [{ maxAgeMs: 10 }, 'maxAgeMs'],
    [{ maxAgeMs: Number.NaN }, 'maxAgeMs'],
    [{ other: 1 }, 'other'],
    ['7d', 'options'],
  ]) {
    assert.throws(() => s.decisionSink(options), (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field === field, JSON.stringify(options));
  }
  assert.equal(typeof s.decisionSink(), 'function', 'must-not-fire: no options take the defaults');
  for (const [query, field] of [
    [{ limit: 0 }, 'limit'],
    [{ sandboxId: 'nope' }, 'sandboxId'],
    [{ since: 'yesterday' }, 'since'],
  ]) {
    await assert.rejects(s.decisions(query), (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_INPUT' && e.field === field);
  }
});

test('fleet history: a database that cannot be written changes no provision (must-not-fire of the sink on the outcome)', async () => {
  const dead = new PostgresMappingStore({ connection: 'postgres://nobody@127.0.0.1:1/none', timeoutMs: 300 });
  const writes = [];
  const router = routerTo(dead.decisionSink(), writes);
  const sandbox = await router.provision({});
  assert.match(sandbox.id, /^sbx_/);
  assert.deepEqual(await Promise.all(writes), [undefined], 'the failed write is dropped, as a throwing sink’s');
  await dead.close().catch(() => {});
});

test('fleet history: a canary secret in a label, the launch env and name, and a provider error appears nowhere in the table', async () => {
  const { name, store } = await freshStore();
  const s = store();
  const writes = [];
  const failing = fakeRuntime({ launch: async () => { throw Object.assign(new Error(`rate ${CANARY}`), { status: 429, token: CANARY }); } });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('bad', { runtime: failing, signals: { estimatedCost: 0.001 } }), definition('good')]),
    classifyProviderFailure: () => ({ code: 'RATE_LIMITED_BEFORE_CREATE', retryable: true }),
    decisions: { sink: (record) => writes.push(s.decisionSink()(record)) },
  });
  await router.provision({ routing: { strategy: 'cost' }, launch: { labels: { tenant: CANARY }, env: { TOKEN: CANARY }, name: CANARY } });
  await Promise.all(writes);
  const dump = await pg.psql('SELECT record::text FROM sandbox_router_decisions', name);
  assert.ok(dump.includes('RATE_LIMITED_BEFORE_CREATE'), 'must-not-fire: the table holds the decision (the classifier’s code)');
  assert.equal(dump.includes(CANARY), false, 'the canary is in no row');
  assert.equal(leaks(await s.decisions()), false, 'nor in what decisions() answers');
});
