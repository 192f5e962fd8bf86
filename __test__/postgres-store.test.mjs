// PostgresMappingStore against a real PostgreSQL started by this file (postgres-server.mjs):
// the mapping seam, the schema and its migration race, the password canary, typed faults
// within deadlines, and the shared capacity ledger in one process (the fleet test runs four).
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  PostgresMappingStore,
  SandboxRouter,
  InMemoryProviderRegistry,
  MappingPersistenceError,
  ProviderCapacityExhaustedError,
  SandboxRouterConfigurationError,
} from '../index.mjs';
import { startPostgres } from './postgres-server.mjs';
import { definition, fakeRuntime, leaks, recorder } from './fixtures.mjs';

/** @type {Awaited<ReturnType<typeof startPostgres>>} */
let pg;
let dbs = 0;
/** A fresh database for one test. */
async function freshDb() {
  const name = `t${++dbs}`;
  await pg.createDatabase(name);
  return name;
}
const stores = [];
function store(db, extra = {}) {
  const s = new PostgresMappingStore({ connection: pg.url(db), timeoutMs: 3_000, ...extra });
  stores.push(s);
  return s;
}

before(async () => {
  pg = await startPostgres();
});
after(async () => {
  for (const s of stores) await s.close().catch(() => {});
  pg?.stop();
});

const id = (n) => `sbx_${String(n).padStart(32, '0')}`;
const record = (n, extra = {}) => ({
  id: id(n),
  providerId: 'a',
  providerSandboxId: `remote-${n}`,
  labels: { team: 'x' },
  createdAt: '2026-01-01T00:00:00.000Z',
  detached: false,
  ...extra,
});
const slots = (used, limit) => ({
  status: 'known',
  resources: [{ resource: 'sandboxes', used, limit, unit: 'sandboxes', headroom: limit - used, required: 1 }],
});

test('pg store: put, get, delete, list, count and intents round-trip', async () => {
  const s = store(await freshDb());
  assert.equal(await s.open(), 8);
  await s.put(record(2));
  await s.put(record(1, { labels: { a: 'b' }, detached: true }));
  assert.deepEqual(await s.get(id(1)), record(1, { labels: { a: 'b' }, detached: true }));
  assert.equal(await s.get(id(9)), null);
  assert.deepEqual((await s.list()).map((r) => r.id), [id(1), id(2)]);
  assert.equal(await s.count(), 2);
  const intent = { id: id(3), providerId: 'a', state: 'launching', startedAt: 1, expiresAt: 2, ownerHost: 'h', ownerPid: 7, ownerSession: 's' };
  await s.intent(intent);
  assert.deepEqual(await s.intents(), [intent]);
  // put of a mapping removes its intent
  await s.put(record(3));
  assert.deepEqual(await s.intents(), []);
  assert.equal(await s.delete(id(1)), true);
  assert.equal(await s.delete(id(1)), false);
  assert.equal(await s.count(), 2);
});

test('pg store: a record written by one store is read by another (one truth)', async () => {
  const db = await freshDb();
  const a = store(db);
  const b = store(db);
  await a.put(record(5));
  assert.deepEqual(await b.get(id(5)), record(5));
});

test('pg store: invalid records are INVALID_INPUT before anything is sent', async () => {
  const s = store(await freshDb());
  await assert.rejects(s.put({ ...record(1), id: 'nope' }), (e) => e.code === 'INVALID_INPUT' && e.field === 'id');
  await assert.rejects(s.put({ ...record(1), labels: { a: 1 } }), (e) => e.code === 'INVALID_INPUT');
  assert.equal(await s.count(), 0);
});

test('pg store: four processes opening a fresh database at once migrate it once (no race)', async () => {
  const db = await freshDb();
  const script = `
    const { PostgresMappingStore } = require(${JSON.stringify(fileURLToPath(new URL('../index.js', import.meta.url)))});
    const s = new PostgresMappingStore(process.argv[1]);
    s.open().then((v) => s.close().then(() => { console.log(v); }), (e) => { console.log('ERR ' + e.code); process.exitCode = 1; });
  `;
  const outs = await Promise.all(
    Array.from({ length: 4 }, () => {
      const child = spawn(process.execPath, ['-e', script, pg.url(db)], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      return new Promise((resolve) => child.on('close', (code) => resolve({ code, out: out.trim() })));
    }),
  );
  assert.deepEqual(outs, Array.from({ length: 4 }, () => ({ code: 0, out: '8' })));
  assert.equal(await pg.psql('SELECT version FROM sandbox_router_schema', db), '8');
  assert.equal(await pg.psql('SELECT count(*) FROM sandbox_router_schema', db), '1');
});

test('pg store: a database with a newer schema is refused (MAPPING_STORE_SCHEMA_TOO_NEW), a current one is not', async () => {
  const db = await freshDb();
  await store(db).open();
  await pg.psql('UPDATE sandbox_router_schema SET version = 99', db);
  await assert.rejects(store(db).open(), (e) => e instanceof MappingPersistenceError && e.code === 'MAPPING_STORE_SCHEMA_TOO_NEW');
  await assert.rejects(store(db).put(record(1)), (e) => e.code === 'MAPPING_STORE_SCHEMA_TOO_NEW');
  await pg.psql('UPDATE sandbox_router_schema SET version = 8', db);
  assert.equal(await store(db).open(), 8);
});

test('pg store: options are validated with typed errors', () => {
  assert.throws(() => new PostgresMappingStore(/** @type {any} */ (null)), SandboxRouterConfigurationError);
  assert.throws(() => new PostgresMappingStore({ connection: 'not a url at all ://' }), (e) => e.code === 'INVALID_CONFIGURATION');
  assert.throws(() => new PostgresMappingStore({ connection: { host: 'h', user: 'u', bogus: 1 } }), (e) => e.field === 'connection.bogus');
  assert.throws(() => new PostgresMappingStore({ connection: { user: 'u' } }), (e) => e.field === 'connection.host');
  assert.throws(() => new PostgresMappingStore({ connection: { host: 'h' } }), (e) => e.field === 'connection.user');
  assert.throws(() => new PostgresMappingStore({ connection: 'postgres://u@h/db?sslmode=allow' }), (e) => e.field === 'connection.sslmode');
  assert.throws(() => new PostgresMappingStore({ connection: pg.url(), timeoutMs: 0 }), (e) => e.field === 'timeoutMs');
  assert.throws(() => new SandboxRouter({ registry: new InMemoryProviderRegistry([]), capacity: { providerOrder: ['a'], coordinator: {} } }), (e) => e.field === 'capacity.coordinator');
  // must-not-fire: valid forms construct
  new PostgresMappingStore(pg.url());
  new PostgresMappingStore({ connection: { host: pg.socketDir, port: pg.port, user: 'postgres', database: 'postgres' } });
});

test('pg store: an object connection over the unix socket works', async () => {
  const db = await freshDb();
  const s = store(db);
  const viaSocket = new PostgresMappingStore({ connection: { host: pg.socketDir, port: pg.port, user: 'postgres', database: db } });
  stores.push(viaSocket);
  await s.put(record(1));
  assert.equal((await viaSocket.get(id(1)))?.providerSandboxId, 'remote-1');
});

test('pg store canary: the password never appears in errors, inspect or JSON (wrong password, bad URL, down database)', async () => {
  const canary = `canary-${pg.password.slice(3, 15)}`;
  const wrong = new PostgresMappingStore({ connection: `postgres://postgres:${canary}@127.0.0.1:${pg.port}/postgres`, timeoutMs: 3_000 });
  const asObject = new PostgresMappingStore({ connection: { host: '127.0.0.1', port: pg.port, user: 'postgres', password: canary }, timeoutMs: 3_000 });
  const down = new PostgresMappingStore({ connection: `postgres://postgres:${canary}@127.0.0.1:1/postgres`, timeoutMs: 1_000 });
  for (const s of [wrong, asObject, down]) {
    assert.equal(leaks(s, canary), false, 'store object');
    const errs = await Promise.all([s.open(), s.put(record(1)), s.get(id(1)), s.list()].map((p) => p.then(() => null, (e) => e)));
    for (const e of errs) {
      assert.ok(e instanceof MappingPersistenceError, String(e));
      assert.equal(leaks(e, canary), false, `error ${e.code}`);
    }
  }
  let thrown;
  try {
    new PostgresMappingStore({ connection: `postgres://postgres:${canary}@127.0.0.1:notaport/postgres` });
  } catch (e) {
    thrown = e;
  }
  assert.ok(thrown instanceof SandboxRouterConfigurationError);
  assert.equal(leaks(thrown, canary), false);
  // must-fire: the right password does connect (the canary test is not vacuous)
  assert.equal(await store('postgres').open(), 8);
  // and the router's events carry no password either
  const rec = recorder();
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a')]), mappings: down, observer: rec.observer });
  await assert.rejects(router.provision({}), MappingPersistenceError);
  assert.equal(leaks(rec.events, canary), false);
});

test('pg store faults: database down → writes MAPPING_PERSISTENCE_FAILED, reads MAPPING_READ_FAILED, fast', async () => {
  const down = new PostgresMappingStore({ connection: `postgres://postgres:x@127.0.0.1:1/postgres`, timeoutMs: 2_000 });
  const t0 = Date.now();
  await assert.rejects(down.put(record(1)), (e) => e.code === 'MAPPING_PERSISTENCE_FAILED');
  await assert.rejects(down.delete(id(1)), (e) => e.code === 'MAPPING_PERSISTENCE_FAILED');
  await assert.rejects(down.intent({ id: id(1), providerId: 'a', state: 'launching', startedAt: 1, expiresAt: 2, ownerHost: 'h', ownerPid: 1, ownerSession: 's' }), (e) => e.code === 'MAPPING_PERSISTENCE_FAILED');
  await assert.rejects(down.get(id(1)), (e) => e.code === 'MAPPING_READ_FAILED');
  await assert.rejects(down.list(), (e) => e.code === 'MAPPING_READ_FAILED');
  await assert.rejects(down.intents(), (e) => e.code === 'MAPPING_READ_FAILED');
  await assert.rejects(down.open(), (e) => e.code === 'MAPPING_STORE_OPEN_FAILED');
  assert.ok(Date.now() - t0 < 5_000);
});

test('pg store faults: a server that accepts and never answers is bounded by timeoutMs (nothing hangs)', async () => {
  const sockets = [];
  const silent = net.createServer((s) => sockets.push(s));
  await new Promise((r) => silent.listen(0, '127.0.0.1', r));
  const port = /** @type {net.AddressInfo} */ (silent.address()).port;
  try {
    const slow = new PostgresMappingStore({ connection: `postgres://postgres:x@127.0.0.1:${port}/postgres`, timeoutMs: 300 });
    const t0 = Date.now();
    await assert.rejects(slow.put(record(1)), (e) => e.code === 'MAPPING_PERSISTENCE_FAILED' && e.timedOut === true);
    await assert.rejects(slow.get(id(1)), (e) => e.code === 'MAPPING_READ_FAILED' && e.timedOut === true);
    const took = Date.now() - t0;
    assert.ok(took >= 500 && took < 3_000, `took ${took} ms`);
  } finally {
    for (const s of sockets) s.destroy();
    silent.close();
  }
});

test('pg store faults: a slow database (a row lock held elsewhere) is bounded by timeoutMs', async () => {
  const db = await freshDb();
  const s = store(db, { timeoutMs: 400 });
  await s.put(record(1));
  // Another session holds the row's lock (until released).
  const holder = await pg.hold(`SELECT id FROM sandbox_router_mappings WHERE id = '${id(1)}' FOR UPDATE`, db);
  const t0 = Date.now();
  await assert.rejects(s.put(record(1, { providerSandboxId: 'changed' })), (e) => e.code === 'MAPPING_PERSISTENCE_FAILED');
  assert.ok(Date.now() - t0 < 2_000);
  await holder.release();
  // must-not-fire: once the lock is gone, the same store writes again (the failed connection
  // was discarded), the locked row included
  await s.put(record(2));
  await s.put(record(1, { providerSandboxId: 'changed' }));
  assert.equal(await s.count(), 2);
  assert.equal((await s.get(id(1)))?.providerSandboxId, 'changed');
});

test('pg router: a mapping write that fails mid-provision destroys the sandbox (cleanup: destroyed); a down database launches nothing; a read fails as MAPPING_READ_FAILED', async () => {
  const db = await freshDb();
  const rt = fakeRuntime();
  const good = store(db);
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]), mappings: good });
  const sbx = await router.provision({});
  assert.equal((await good.get(sbx.id))?.providerId, 'a');
  // A second router on the same database reads it
  const other = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]), mappings: store(db) });
  const seen = await other.getSandbox(sbx.id);
  assert.equal(seen?.id, sbx.id);
  assert.equal(rt.calls.filter((c) => c.op === 'launch').length, 1);
  // The database fails between the launch intent and the mapping write (the table is gone
  // while the launch runs): the sandbox is destroyed and the error says so.
  const failing = fakeRuntime({
    launch: async () => {
      await pg.psql('ALTER TABLE sandbox_router_mappings RENAME TO moved_away', db);
      return { id: 'remote-doomed' };
    },
    destroy: async () => {
      await pg.psql('ALTER TABLE moved_away RENAME TO sandbox_router_mappings', db);
    },
  });
  const midway = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: failing })]), mappings: store(db) });
  await assert.rejects(midway.provision({}), (e) => e instanceof MappingPersistenceError && e.code === 'MAPPING_PERSISTENCE_FAILED' && e.cleanup === 'destroyed');
  assert.equal(failing.calls.filter((c) => c.op === 'destroy').length, 1);
  // The sandbox was destroyed, so its intent is removed (not left `failed` for reconcile).
  assert.deepEqual(await good.intents(), []);
  // With the database down from the start, the launch intent cannot be written: nothing is launched.
  const down = new PostgresMappingStore({ connection: `postgres://postgres:x@127.0.0.1:1/postgres`, timeoutMs: 1_000 });
  const rt2 = fakeRuntime();
  const broken = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: rt2 })]), mappings: down });
  await assert.rejects(broken.provision({}), (e) => e instanceof MappingPersistenceError && e.code === 'MAPPING_INTENT_FAILED' && e.cleanup === 'none');
  assert.equal(rt2.calls.length, 0);
  await assert.rejects(broken.getSandbox(sbx.id), (e) => e.code === 'MAPPING_READ_FAILED');
});

// --- the shared capacity ledger, in one process --------------------------------------------

function ledgerRouter(coordinator, reader, runtime = fakeRuntime(), extra = {}) {
  return new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime, capacity: reader })]),
    mappings: coordinator,
    capacity: { providerOrder: ['a'], coordinator, reservationTtlMs: 60_000 },
    ...extra,
  });
}

test('pg ledger: two routers on one database share holds (must-fire: the second is refused; must-not-fire: a lone router admits)', async () => {
  const db = await freshDb();
  const reader = { getCapacity: async () => slots(0, 1) };
  const first = ledgerRouter(store(db), reader);
  const second = ledgerRouter(store(db), reader);
  assert.equal((await first.provision({})).providerId, 'a');
  await assert.rejects(second.provision({}), (e) => e instanceof ProviderCapacityExhaustedError && e.rejections[0].reason === 'sandboxes');
  // must-not-fire: another pool name / another database admits
  const elsewhere = ledgerRouter(store(await freshDb()), reader);
  assert.equal((await elsewhere.provision({})).providerId, 'a');
});

test('pg ledger: a proven pre-allocation failure releases its hold; an outcome-unknown one keeps it', async () => {
  const db = await freshDb();
  const s = store(db);
  let fail = true;
  const rt = fakeRuntime({
    launch: async () => {
      if (fail) throw new Error('refused');
      return { id: 'ok' };
    },
  });
  const reader = { getCapacity: async () => slots(0, 1) };
  const released = ledgerRouter(s, reader, rt, { classifyProviderFailure: () => ({ code: 'QUOTA', retryable: true }) });
  await assert.rejects(released.provision({}));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(await s.held('a'), 0);
  const kept = ledgerRouter(s, reader, rt);
  await assert.rejects(kept.provision({}));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(await s.held('a'), 1);
  fail = false;
  await assert.rejects(kept.provision({}), ProviderCapacityExhaustedError);
});

// A launch that never settles keeps its deadline timer (and so this file's process) alive
// until the deadline: a short one, past the end of the test that uses it.
const HANGING = { routing: { acquisitionTimeoutMs: 8_000 } };

test('pg ledger: an in-flight hold lives while its session is renewed (must-not-expire) and expires with a lapsed lease (must-fire)', async () => {
  const db = await freshDb();
  const never = fakeRuntime({ launch: () => new Promise(() => {}) });
  const reader = { getCapacity: async () => slots(0, 1) };
  const holder = store(db, { leaseMs: 600 });
  void ledgerRouter(holder, reader, never).provision(HANGING).catch(() => {});
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await holder.held('a'), 1);
  const r2 = ledgerRouter(store(db), reader);
  // Past several lease periods: renewed on tokio, the hold stands.
  await new Promise((r) => setTimeout(r, 1_500));
  await assert.rejects(r2.provision({}), ProviderCapacityExhaustedError);
  // A process that dies stops renewing: simulate the lapse of the holder's lease (a
  // lease of 60 s, so no renewal runs in between), then the hold frees itself.
  const lapsing = store(db, { leaseMs: 60_000 });
  const db2 = await freshDb();
  const h2 = store(db2, { leaseMs: 60_000 });
  void ledgerRouter(h2, reader, never).provision(HANGING).catch(() => {});
  await new Promise((r) => setTimeout(r, 300));
  const r3 = ledgerRouter(store(db2), reader);
  await assert.rejects(r3.provision({}), ProviderCapacityExhaustedError);
  await pg.psql(`UPDATE sandbox_router_sessions SET lease_until = now() - interval '1 second' WHERE session IN (SELECT session FROM sandbox_router_holds)`, db2);
  assert.equal((await r3.provision({})).providerId, 'a');
  void lapsing;
  // close() ends the holder's session: its in-flight hold is released at once.
  await holder.close();
  assert.equal((await r2.provision({})).providerId, 'a');
});

// The admission's sweep reads expired holds through (pool, expires_at) (schema v6): an
// in-flight hold whose time is up frees the pool although its process's lease is alive.
async function expiredHold(expire) {
  const db = await freshDb();
  const never = fakeRuntime({ launch: () => new Promise(() => {}) });
  const reader = { getCapacity: async () => slots(0, 1) };
  const holder = store(db, { leaseMs: 60_000 });
  void ledgerRouter(holder, reader, never).provision(HANGING).catch(() => {});
  for (let i = 0; i < 100 && (await holder.held('a')) === 0; i++) await new Promise((r) => setTimeout(r, 20));
  if (expire) await pg.psql(`UPDATE sandbox_router_holds SET expires_at = now() - interval '1 second'`, db);
  const other = ledgerRouter(store(db), reader);
  return other.provision({}).then((s) => s.providerId, (e) => e.code);
}

test('pg ledger expired hold must-fire: an in-flight hold past its expiry is swept by the next admission (lease alive)', async () => {
  assert.equal(await expiredHold(true), 'a');
});

test('pg ledger expired hold must-not-fire: an in-flight hold before its expiry keeps the pool full', async () => {
  assert.equal(await expiredHold(false), 'PROVIDER_CAPACITY_EXHAUSTED');
});

test('pg ledger: a settlement that could not be written is retried with the lease renewal (held until then, released after)', async () => {
  const db = await freshDb();
  const s = store(db, { leaseMs: 6_000 });
  await s.open();
  const rt = fakeRuntime({
    launch: async () => {
      // The holds table is gone while the launch fails: the release cannot be written.
      await pg.psql('ALTER TABLE sandbox_router_holds RENAME TO holds_away', db);
      throw new Error('refused before allocating');
    },
  });
  const router = ledgerRouter(s, { getCapacity: async () => slots(0, 5) }, rt, { classifyProviderFailure: () => ({ code: 'QUOTA', retryable: true }) });
  await assert.rejects(router.provision({}));
  await new Promise((r) => setTimeout(r, 200));
  await pg.psql('ALTER TABLE holds_away RENAME TO sandbox_router_holds', db);
  // must-fire: the release was not written, so the hold is still there
  assert.equal(await pg.psql('SELECT count(*) FROM sandbox_router_holds', db), '1');
  // the next renewal (every 2 s) writes it
  let left = '1';
  for (let i = 0; i < 40 && left !== '0'; i++) {
    await new Promise((r) => setTimeout(r, 200));
    left = await pg.psql('SELECT count(*) FROM sandbox_router_holds', db);
  }
  assert.equal(left, '0');
});

test('pg ledger: coordinator down → the pool is skipped as COORDINATOR_UNAVAILABLE (retry later), within the deadline', async () => {
  const down = new PostgresMappingStore({ connection: `postgres://postgres:x@127.0.0.1:1/postgres`, timeoutMs: 500 });
  const rt = fakeRuntime();
  const router = ledgerRouter(down, { getCapacity: async () => slots(0, 5) }, rt, { mappings: undefined });
  const t0 = Date.now();
  await assert.rejects(router.provision({}), (e) => e instanceof ProviderCapacityExhaustedError && e.rejections[0].status === 'UNKNOWN' && e.rejections[0].reason === 'COORDINATOR_UNAVAILABLE');
  assert.ok(Date.now() - t0 < 3_000);
  assert.equal(rt.calls.length, 0, 'nothing launched');
});

test('pg ledger: a connection killed mid-admission is COORDINATOR_UNAVAILABLE, and the next admission works', async () => {
  const db = await freshDb();
  const s = store(db, { timeoutMs: 3_000 });
  const reader = { getCapacity: async () => slots(0, 5) };
  const router = ledgerRouter(s, reader);
  assert.equal((await router.provision({})).providerId, 'a');
  // Hold the pool's admission lock elsewhere, then kill the router's waiting backend.
  const holder = await pg.hold(`SELECT pool FROM sandbox_router_pools WHERE pool = 'a' FOR UPDATE`, db);
  // (the refusal's handler is attached now: it can arrive while the kill below is awaited)
  const refused = assert.rejects(router.provision({}), (e) => e instanceof ProviderCapacityExhaustedError && e.rejections[0].reason === 'COORDINATOR_UNAVAILABLE');
  // Once the router's backend waits on the lock, kill exactly it (not a timeout's doing).
  const waitingOnLock = `FROM pg_stat_activity WHERE application_name = 'agent-relay-sandbox-router' AND wait_event_type = 'Lock'`;
  let waiting = '0';
  for (let i = 0; i < 40 && waiting === '0'; i++) {
    await new Promise((r) => setTimeout(r, 50));
    waiting = await pg.psql(`SELECT count(*) ${waitingOnLock}`, db);
  }
  assert.equal(waiting, '1');
  assert.equal(await pg.psql(`SELECT pg_terminate_backend(pid) ${waitingOnLock}`, db), 't');
  await refused;
  await holder.release();
  assert.equal((await router.provision({})).providerId, 'a');
});

test('pg ledger: without a coordinator, holds stay in-process (no database touched)', async () => {
  const db = await freshDb();
  const s = store(db);
  const reader = { getCapacity: async () => slots(0, 1) };
  const plain = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { capacity: reader })]), mappings: s, capacity: { providerOrder: ['a'] } });
  await plain.provision({});
  await assert.rejects(plain.provision({}), ProviderCapacityExhaustedError);
  assert.equal(await pg.psql('SELECT count(*) FROM sandbox_router_holds', db), '0');
});
