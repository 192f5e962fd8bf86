// Decision records (issue 32, parts 1, 2 and 6): router option `decisions`, `router.decisions()`,
// the sink, `jsonLinesSink`, the record id on the provision.* events. Pairs are named
// must-fire / must-not-fire.
import test from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { InMemoryProviderRegistry, SandboxRouter, SandboxRouterConfigurationError, jsonLinesSink } from '../index.mjs';
import { CANARY, definition, fakeRuntime, leaks, recorder } from './fixtures.mjs';

/** Two pools: `e2b` (cheaper, no pty) and `daytona` (pty). */
function pools(overrides = {}) {
  return [
    definition('e2b', { signals: { estimatedCost: 0.01 }, ...overrides.e2b }),
    definition('daytona', { capabilities: { supported: ['pty'] }, signals: { estimatedCost: 0.02 }, ...overrides.daytona }),
  ];
}

function router(decisions, extra = {}) {
  return new SandboxRouter({ registry: new InMemoryProviderRegistry(extra.pools ?? pools()), decisions, ...extra.options });
}

test('records must-fire: with decisions on, each provision leaves one record (request, registry, inputs, steps, outcome)', async () => {
  const r = router(true);
  const s = await r.provision({ requires: { requiredCapabilities: ['pty'] }, launch: { labels: { tenant: 'acme' } } });
  const [rec] = r.decisions();
  assert.equal(rec.schema, 'sandbox-router.decision/1');
  assert.equal(rec.id, `dec_${s.id.slice('sbx_'.length)}`);
  assert.equal(rec.sandboxId, s.id);
  assert.deepEqual(rec.outcome, { providerId: 'daytona' });
  assert.deepEqual(rec.order, ['daytona']);
  assert.deepEqual(rec.request.requires, { requiredCapabilities: ['pty'] });
  assert.match(rec.registry.digest, /^[0-9a-f]{16}$/);
  assert.deepEqual(rec.registry.ids, ['e2b', 'daytona']);
  assert.deepEqual(rec.registry.pools.map((p) => p.id), ['daytona'], 'the facts of the pools it ranked');
  assert.deepEqual(rec.registry.pools[0].capabilities.supported, ['pty']);
  assert.deepEqual(rec.steps.map((x) => x.type), ['attempt.started', 'attempt.succeeded', 'mapping.persisted']);
  assert.equal(typeof rec.inputs.clock.router, 'number');
  assert.equal(r.decisions().length, 1);
});

test('records must-not-fire: without decisions nothing is recorded, and decisions() answers []', async () => {
  const r = router(undefined);
  await r.provision({});
  assert.deepEqual(r.decisions(), []);
  const off = router(false);
  await off.provision({});
  assert.deepEqual(off.decisions(), []);
});

test('records: a provision no pool can serve is recorded with its code and no step; a failed launch with its code', async () => {
  const failing = fakeRuntime({ launch: async () => { throw new Error(`boom ${CANARY}`); } });
  const r = router({ labels: 'drop' }, { pools: [definition('e2b', { runtime: failing })] });
  await assert.rejects(r.provision({ requires: { requiredCapabilities: ['gpu'] } }), (e) => e.code === 'NO_ELIGIBLE_PROVIDER');
  await assert.rejects(r.provision({}));
  const [failed, refused] = r.decisions();
  assert.deepEqual(refused.outcome, { code: 'NO_ELIGIBLE_PROVIDER' });
  assert.deepEqual(refused.order, []);
  assert.deepEqual(refused.steps, []);
  assert.equal(refused.sandboxId, undefined);
  assert.equal(failed.outcome.code, 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN');
  assert.ok(failed.steps.some((x) => x.type === 'attempt.failed' && x.code === 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN'));
  assert.equal(leaks(r.decisions()), false, 'the provider error text is not in the record');
});

test('ring must-fire: past keep the oldest records are dropped; must-not-fire: within keep all are kept', async () => {
  const r = router({ keep: 3 });
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push((await r.provision({})).id);
  assert.deepEqual(r.decisions().map((d) => d.sandboxId), ids.slice(2).reverse(), 'the three newest, newest first');
  const wide = router({ keep: 10 });
  for (let i = 0; i < 5; i++) await wide.provision({});
  assert.equal(wide.decisions().length, 5);
});

test('query: sandboxId, since and limit filter the records; a bad query is INVALID_INPUT naming the field', async () => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const r = router(true, { options: { clock: () => now } });
  const a = await r.provision({});
  now += 1_000;
  const b = await r.provision({});
  assert.deepEqual(r.decisions({ sandboxId: a.id }).map((d) => d.sandboxId), [a.id]);
  assert.deepEqual(r.decisions({ since: now }).map((d) => d.sandboxId), [b.id]);
  assert.deepEqual(r.decisions({ since: '2026-01-01T00:00:00.500Z' }).map((d) => d.sandboxId), [b.id]);
  assert.deepEqual(r.decisions({ limit: 1 }).map((d) => d.sandboxId), [b.id]);
  for (const [bad, field] of [
    [{ sandboxId: 'nope' }, 'sandboxId'],
    [{ since: 'yesterday' }, 'since'],
    [{ limit: 0 }, 'limit'],
    [{ limit: 1.5 }, 'limit'],
    [{ sinse: 1 }, 'sinse'],
    [5, 'options'],
  ]) {
    assert.throws(() => r.decisions(bad), (e) => e.code === 'INVALID_INPUT' && e.field === field, JSON.stringify(bad));
  }
});

test('labels must-fire: the default hashes each value (equal values equal, never the value); keep writes it; drop writes keys only', async () => {
  const req = { launch: { labels: { tenant: CANARY, team: 'red' } } };
  const hashed = router(true);
  await hashed.provision(req);
  await hashed.provision(req);
  const [x, y] = hashed.decisions();
  assert.match(x.request.launch.labels.tenant, /^h:[0-9a-f]{24}$/);
  assert.equal(x.request.launch.labels.tenant, y.request.launch.labels.tenant, 'equal values stay equal');
  assert.notEqual(x.request.launch.labels.tenant, x.request.launch.labels.team);
  assert.equal(leaks(hashed.decisions()), false);
  const kept = router({ labels: 'keep' });
  await kept.provision(req);
  assert.equal(kept.decisions()[0].request.launch.labels.tenant, CANARY, 'must-not-fire: keep writes the value');
  const dropped = router({ labels: 'drop' });
  await dropped.provision(req);
  assert.deepEqual(dropped.decisions()[0].request.launch.labels, { tenant: null, team: null });
  // Another router hashes with another key.
  const other = router(true);
  await other.provision(req);
  assert.notEqual(other.decisions()[0].request.launch.labels.tenant, x.request.launch.labels.tenant);
});

test('canary: a launch env, a label value, a provider error and a budget key never appear in a record, the ring, the sink or the file', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'decisions-'));
  const file = path.join(dir, 'records.jsonl');
  const toFile = jsonLinesSink(file);
  const sunk = [];
  const failing = fakeRuntime({ launch: async () => { throw Object.assign(new Error(`rate ${CANARY}`), { status: 429, token: CANARY }); } });
  const r = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: failing }), definition('b', { signals: { estimatedCost: 0.5 } })]),
    classifyProviderFailure: () => ({ code: 'PROVIDER_RATE_LIMITED', retryable: true }),
    budgets: [{ id: 'spend', key: { label: 'tenant' }, limit: { cost: 100 }, window: { every: 'day' } }],
    decisions: { sink: (rec) => { sunk.push(rec); toFile(rec); } },
  });
  await r.provision({ launch: { labels: { tenant: CANARY }, env: { TOKEN: CANARY }, name: CANARY } });
  await toFile.close();
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  assert.equal(lines.length, 1);
  assert.equal(JSON.parse(lines[0]).id, sunk[0].id);
  for (const where of [r.decisions(), sunk, lines]) assert.equal(leaks(where), false);
  const rec = r.decisions()[0];
  assert.deepEqual(rec.outcome, { providerId: 'b' });
  assert.ok(rec.steps.some((x) => x.type === 'attempt.failed' && x.code === 'PROVIDER_RATE_LIMITED'));
  assert.ok(rec.inputs.budgets.some((b) => b.rule === 'spend' && /^h:/.test(b.key)));
});

test('sink must-fire: it is handed each record as its provision settles; must-not-fire: a throwing or rejecting sink changes no outcome', async () => {
  const seen = [];
  const r = router({ sink: (rec) => seen.push(rec.id) });
  const s = await r.provision({});
  assert.deepEqual(seen, [`dec_${s.id.slice(4)}`]);
  await assert.rejects(r.provision({ providerId: 'nope' }));
  assert.equal(seen.length, 2, 'a refused provision is handed over too');
  for (const sink of [() => { throw new Error(CANARY); }, () => Promise.reject(new Error(CANARY))]) {
    const t = router({ sink });
    const made = await t.provision({});
    assert.equal(made.providerId, 'e2b');
    assert.equal(t.decisions().length, 1);
  }
});

test('events must-fire: with decisions the provision.* events name the record; must-not-fire: without, they do not', async () => {
  const rec = recorder();
  const r = router(true, { options: { observer: rec.observer } });
  const s = await r.provision({});
  const named = rec.events.filter((e) => e.type.startsWith('provision.'));
  assert.ok(named.length >= 2);
  for (const e of named) assert.equal(e.decisionId, `dec_${s.id.slice(4)}`);
  assert.deepEqual(r.decisions()[0].steps.map((x) => x.type), ['attempt.started', 'attempt.succeeded', 'mapping.persisted'], 'an observer does not change the record');
  const plain = recorder();
  const q = router(undefined, { options: { observer: plain.observer } });
  await q.provision({});
  assert.ok(plain.events.filter((e) => e.type.startsWith('provision.')).every((e) => !('decisionId' in e)));
});

test('option: decisions is validated naming the field', () => {
  for (const [decisions, field] of [
    [{ keep: 0 }, 'decisions.keep'],
    [{ keep: 100_001 }, 'decisions.keep'],
    [{ labels: 'hide' }, 'decisions.labels'],
    [{ sink: 'file.jsonl' }, 'decisions.sink'],
    [{ keeep: 1 }, 'decisions.keeep'],
    ['yes', 'decisions'],
  ]) {
    assert.throws(() => router(decisions), (e) => e instanceof SandboxRouterConfigurationError && e.field === field, JSON.stringify(decisions));
  }
  assert.throws(() => jsonLinesSink(''), (e) => e instanceof SandboxRouterConfigurationError && e.field === 'path');
});

test('registry facts must-fire: a caller’s own registry whose pool changes (as many pools) is recorded with its new facts; must-not-fire: an unchanged one keeps its digest', async () => {
  let cost = 0.01;
  const runtime = fakeRuntime();
  // A registry of the caller's own: `list()` is read again on every call.
  const registry = { list: () => [definition('e2b', { runtime, signals: { estimatedCost: cost } }), definition('daytona', { runtime, signals: { estimatedCost: 0.02 } })] };
  const r = new SandboxRouter({ registry, decisions: true });
  await r.provision({});
  await r.provision({});
  cost = 0.05;
  await r.provision({});
  const [changed, second, first] = r.decisions();
  assert.equal(second.registry.digest, first.registry.digest, 'must-not-fire: the same definitions, the same digest');
  assert.notEqual(changed.registry.digest, first.registry.digest, 'must-fire: a changed definition, another digest');
  assert.equal(changed.registry.pools.find((p) => p.id === 'e2b').signals.estimatedCost, 0.05);
  assert.equal(first.registry.pools.find((p) => p.id === 'e2b').signals.estimatedCost, 0.01);
  assert.equal(r.replay(changed).same, true, 'the record replays on the router as it is now');
});

test('jsonLinesSink must-fire: the record is in the file before the provision’s promise settles; after close() nothing more is written (must-not-fire)', async () => {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'decisions-')), 'records.jsonl');
  const toFile = jsonLinesSink(file);
  const r = router({ sink: toFile });
  const first = await r.provision({});
  assert.equal(JSON.parse(readFileSync(file, 'utf8').trim()).sandboxId, first.id, 'written synchronously, before the caller resumed');
  await toFile.close();
  await r.provision({});
  assert.equal(readFileSync(file, 'utf8').trim().split('\n').length, 1, 'a closed sink writes nothing');
});
