// router.reconcile(): classification (orphan / stale-mapping / mapped / pending, unknown
// pools), reclaim (owned destroys, unmaps, re-checks, concurrency, deadline), intent
// records, and the native finders against loopback mock servers with each provider's wire
// shape (pagination, labels that do not match). Pairs are named must-fire / must-not-fire.
import test from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  InMemoryProviderRegistry,
  InMemoryMappingStore,
  SandboxRouter,
  SANDBOX_ID_LABEL,
  SANDBOX_FLEET_LABEL,
  createSandboxRouter,
  SandboxRequestValidationError,
  MappingPersistenceError,
} from '../index.mjs';
import { CANARY, definition, leaks, recorder } from './fixtures.mjs';

const KEY = 'sk_live_CANARY_reconcile_41d2';
const sbx = (n) => `sbx_${n.toString(16).padStart(32, '0')}`;
const OLD = new Date(Date.now() - 3_600_000).toISOString();
const stamp = (id, fleet = 'default') => ({ [SANDBOX_ID_LABEL]: id, [SANDBOX_FLEET_LABEL]: fleet });

/**
 * A port-shaped runtime whose handles carry their labels and createdAt (as the local
 * runtime's do). `seed(labels, createdAt)` adds a sandbox made "by someone else".
 * getById records whether it was asked for an owned handle.
 */
function labelledRuntime(behaviour = {}) {
  let n = 0;
  const live = new Map();
  const calls = [];
  const rt = {
    id: 'fake',
    live,
    calls,
    seed(labels, createdAt = OLD) {
      const id = `remote-${++n}`;
      live.set(id, { id, labels: { ...labels }, createdAt });
      return id;
    },
    async launch(options) {
      calls.push({ op: 'launch', options });
      if (behaviour.launch) return behaviour.launch(options, rt);
      const id = rt.seed(options.labels, new Date().toISOString());
      return { id };
    },
    async findAllByLabels(labels) {
      calls.push({ op: 'findAllByLabels', labels });
      if (behaviour.find) return behaviour.find(labels);
      return [...live.values()]
        .filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .map((s) => ({ id: s.id, createdAt: s.createdAt, labels: { ...s.labels } }));
    },
    async getById(id, options) {
      calls.push({ op: 'getById', id, owned: options?.owned === true });
      const s = live.get(id);
      return s ? { id: s.id } : null;
    },
    async destroy(handle) {
      calls.push({ op: 'destroy', id: handle.id });
      if (behaviour.destroy) return behaviour.destroy(handle);
      live.delete(handle.id);
    },
  };
  return rt;
}

function setup(runtime, routerOptions = {}) {
  const rec = recorder();
  const registry = new InMemoryProviderRegistry([definition('a', { runtime })]);
  const router = new SandboxRouter({ registry, observer: rec.observer, ...routerOptions });
  return { router, rec };
}

/** A mapping store of our own (the seam: put/get/delete/list, optional intents). */
function memoryStore({ intents = false } = {}) {
  const records = new Map();
  const intentRecords = new Map();
  const s = {
    records,
    intentRecords,
    async put(r) {
      records.set(r.id, structuredClone(r));
      intentRecords.delete(r.id);
    },
    async get(id) {
      return records.get(id) ?? null;
    },
    async delete(id) {
      intentRecords.delete(id);
      return records.delete(id);
    },
    async list() {
      return [...records.values()];
    },
  };
  if (intents) {
    s.intent = async (i) => void intentRecords.set(i.id, { ...i });
    s.intents = async () => [...intentRecords.values()];
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// classification

test('orphan must-fire: a stamped sandbox without mapping, older than graceMs, is an orphan (GRACE_ELAPSED)', async () => {
  const rt = labelledRuntime();
  const remote = rt.seed(stamp(sbx(1)));
  const { router } = setup(rt);
  const r = await router.reconcile();
  assert.deepEqual(r.pools.a.orphan, [{ sandboxId: sbx(1), providerSandboxId: remote, reason: 'GRACE_ELAPSED' }]);
  assert.deepEqual(r.pools.a.counts, { orphan: 1, staleMapping: 0, mapped: 0, pending: 0 });
  assert.equal(r.graceMs, 15 * 60_000, 'the documented default');
});

test('orphan must-not-fire: younger than graceMs it is pending (WITHIN_GRACE); without a createdAt, AGE_UNKNOWN', async () => {
  const rt = labelledRuntime();
  rt.seed(stamp(sbx(1)), new Date().toISOString());
  rt.seed(stamp(sbx(2)), undefined);
  rt.live.get('remote-2').createdAt = undefined;
  const { router } = setup(rt);
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(r.pools.a.pending.map((p) => p.reason).sort(), ['AGE_UNKNOWN', 'WITHIN_GRACE']);
  assert.equal(r.pools.a.counts.orphan, 0);
  assert.equal(rt.calls.filter((c) => c.op === 'destroy').length, 0);
});

test('mapped must-not-fire: a provisioned sandbox is mapped, never an orphan, even with graceMs 0', async () => {
  const rt = labelledRuntime();
  const { router } = setup(rt);
  const s = await router.provision({});
  const r = await router.reconcile({ graceMs: 0, reclaim: true });
  assert.deepEqual(r.pools.a.mapped, [s.id]);
  assert.deepEqual(r.outcomes, []);
  assert.equal(rt.live.size, 1);
});

test('stamp must-not-fire: another fleet, a missing or malformed id label, or no fleet label is never touched (graceMs 0, reclaim)', async () => {
  const rt = labelledRuntime({
    // A label search that ignores its filter: returns everything.
    find: () => [...rt.live.values()].map((s) => ({ id: s.id, createdAt: s.createdAt, labels: s.labels })),
  });
  rt.seed(stamp(sbx(1), 'other-fleet'));
  rt.seed({ [SANDBOX_FLEET_LABEL]: 'default' });
  rt.seed({ [SANDBOX_FLEET_LABEL]: 'default', [SANDBOX_ID_LABEL]: 'sbx_NOT_AN_ID' });
  rt.seed({ [SANDBOX_ID_LABEL]: sbx(2) });
  rt.seed({ team: 'x' });
  const { router } = setup(rt);
  const r = await router.reconcile({ graceMs: 0, reclaim: true });
  assert.deepEqual(r.totals, { orphan: 0, staleMapping: 0, mapped: 0, pending: 0, unknownPools: 0 });
  assert.equal(rt.calls.filter((c) => c.op === 'destroy' || c.op === 'getById').length, 0);
  assert.equal(rt.live.size, 5);
});

test('stamp must-fire: the fleet option selects which stamps are ours', async () => {
  const rt = labelledRuntime();
  rt.seed(stamp(sbx(1), 'blue'));
  rt.seed(stamp(sbx(2), 'green'));
  const { router } = setup(rt, { fleet: 'blue' });
  const r = await router.reconcile();
  assert.deepEqual(r.pools.a.orphan.map((o) => o.sandboxId), [sbx(1)]);
  assert.equal(r.fleet, 'blue');
  assert.deepEqual(rt.calls.find((c) => c.op === 'findAllByLabels').labels, { [SANDBOX_FLEET_LABEL]: 'blue' });
});

test('dry run must-not-fire: without reclaim nothing is destroyed or unmapped', async () => {
  const rt = labelledRuntime();
  rt.seed(stamp(sbx(1)));
  const store = memoryStore();
  store.records.set(sbx(2), { id: sbx(2), providerId: 'a', providerSandboxId: 'gone', labels: stamp(sbx(2)), createdAt: OLD, detached: false });
  const { router } = setup(rt, { mappings: store });
  const r = await router.reconcile();
  assert.equal(r.reclaim, false);
  assert.equal(r.pools.a.counts.orphan, 1);
  assert.equal(r.pools.a.counts.staleMapping, 1);
  assert.deepEqual(r.outcomes, []);
  assert.equal(rt.live.size, 1);
  assert.equal(store.records.size, 1);
  assert.equal(rt.calls.filter((c) => c.op === 'destroy').length, 0);
});

test('reclaim must-fire: orphans are destroyed through getById(owned: true), stale mappings removed, events emitted', async () => {
  const rt = labelledRuntime();
  const orphan = rt.seed(stamp(sbx(1)));
  const store = memoryStore();
  store.records.set(sbx(2), { id: sbx(2), providerId: 'a', providerSandboxId: 'gone', labels: stamp(sbx(2)), createdAt: OLD, detached: false });
  const { router, rec } = setup(rt, { mappings: store });
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(
    r.outcomes.map((o) => [o.class, o.sandboxId, o.outcome]).sort(),
    [['orphan', sbx(1), 'DESTROYED'], ['stale-mapping', sbx(2), 'UNMAPPED']],
  );
  assert.equal(rt.live.size, 0);
  assert.equal(store.records.size, 0);
  assert.ok(rt.calls.some((c) => c.op === 'getById' && c.id === orphan && c.owned === true));
  assert.ok(rt.calls.filter((c) => c.op === 'getById').every((c) => c.owned === true), 'every re-resolve is owned');
  const types = rec.types();
  assert.deepEqual(types.filter((t) => t.startsWith('reconcile.')), ['reconcile.listed', 'reconcile.reclaimed', 'reconcile.reclaimed', 'reconcile.completed']);
  const completed = rec.events.find((e) => e.type === 'reconcile.completed');
  assert.equal(completed.orphan, 1);
  assert.equal(completed.staleMapping, 1);
});

test('stale-mapping must-not-fire: a mapping the list does not show but getById still finds is kept (STILL_EXISTS)', async () => {
  const rt = labelledRuntime({ find: () => [] }); // an eventually consistent list that lags
  const remote = rt.seed(stamp(sbx(3)));
  const store = memoryStore();
  store.records.set(sbx(3), { id: sbx(3), providerId: 'a', providerSandboxId: remote, labels: stamp(sbx(3)), createdAt: OLD, detached: false });
  const { router } = setup(rt, { mappings: store });
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(r.outcomes.map((o) => o.outcome), ['STILL_EXISTS']);
  assert.equal(store.records.size, 1);
});

test('stale-mapping must-not-fire: a young mapping not listed yet is pending, and another fleet\'s mapping is not ours', async () => {
  const rt = labelledRuntime();
  const store = memoryStore();
  store.records.set(sbx(4), { id: sbx(4), providerId: 'a', providerSandboxId: 'x', labels: stamp(sbx(4)), createdAt: new Date().toISOString() });
  store.records.set(sbx(5), { id: sbx(5), providerId: 'a', providerSandboxId: 'y', labels: stamp(sbx(5), 'other'), createdAt: OLD });
  store.records.set(sbx(6), { id: sbx(6), providerId: 'a', providerSandboxId: 'z', labels: { [SANDBOX_ID_LABEL]: sbx(6) }, createdAt: OLD });
  const { router } = setup(rt, { mappings: store });
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(r.pools.a.pending, [{ sandboxId: sbx(4), providerSandboxId: 'x', reason: 'NOT_LISTED_YET' }]);
  assert.equal(r.pools.a.counts.staleMapping, 0);
  assert.equal(store.records.size, 3);
});

test('in-flight must-not-fire: a provision still launching in this router is pending IN_FLIGHT, even with graceMs 0', async () => {
  let release;
  const rt = labelledRuntime({
    launch: (options, self) => {
      const id = self.seed(options.labels, OLD);
      return new Promise((r) => (release = () => r({ id })));
    },
  });
  const { router } = setup(rt);
  await pendingInFlightUntilReleased(router, () => release);
});

/**
 * Provisions; while `released()` is not yet callable, the provision is stuck somewhere; then
 * reconcile (graceMs 0, reclaim) must call its sandbox IN_FLIGHT and touch nothing. Released,
 * the provision completes and its sandbox is mapped.
 */
async function pendingInFlightUntilReleased(router, released) {
  const pending = router.provision({});
  while (released() === undefined) await new Promise((r) => setImmediate(r));
  const r = await router.reconcile({ graceMs: 0, reclaim: true });
  assert.deepEqual(r.pools.a.pending.map((p) => p.reason), ['IN_FLIGHT']);
  assert.deepEqual(r.outcomes, []);
  released()();
  const s = await pending;
  assert.deepEqual((await router.reconcile({ graceMs: 0 })).pools.a.mapped, [s.id]);
}

test('in-flight must-not-fire: a launched sandbox whose record a caller\'s store is still writing is pending IN_FLIGHT', async () => {
  // The machine has ended (the launch succeeded); only the store's write is outstanding.
  const rt = labelledRuntime();
  const store = memoryStore();
  let release;
  const realPut = store.put;
  store.put = (r) => new Promise((resolve) => (release = () => resolve(realPut(r))));
  const { router } = setup(rt, { mappings: store });
  await pendingInFlightUntilReleased(router, () => release);
});

test('in-flight must-fire: once the provision has settled, a stamped sandbox without a record is an orphan again', async () => {
  // Same store write, which now fails: the router destroys the sandbox, and one that
  // survives that (the runtime's destroy is refused here) is an orphan, not in flight.
  const rt = labelledRuntime({ destroy: async () => false });
  const store = memoryStore();
  store.put = async () => {
    throw new Error('store down');
  };
  const { router } = setup(rt, { mappings: store });
  await assert.rejects(router.provision({}), { code: 'MAPPING_PERSISTENCE_FAILED' });
  const r = await router.reconcile({ graceMs: 0 });
  assert.equal(r.pools.a.pending.length, 0);
  assert.equal(r.pools.a.counts.orphan, 1);
});

test('re-check must-not-fire: a mapping written after the listing saves the sandbox (NOW_MAPPED)', async () => {
  const rt = labelledRuntime();
  const remote = rt.seed(stamp(sbx(7)));
  const store = memoryStore();
  const realList = store.list;
  // The store's list answers before the record exists; the record lands right after.
  store.list = async () => {
    const l = await realList();
    store.records.set(sbx(7), { id: sbx(7), providerId: 'a', providerSandboxId: remote, labels: stamp(sbx(7)), createdAt: OLD });
    return l;
  };
  const { router } = setup(rt, { mappings: store });
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(r.outcomes.map((o) => o.outcome), ['NOW_MAPPED']);
  assert.equal(rt.live.size, 1);
});

test('duplicate must-fire: a stamped sandbox whose id is mapped to ANOTHER sandbox is an orphan at once (DUPLICATE_OF_MAPPED)', async () => {
  const rt = labelledRuntime();
  const leftover = rt.seed(stamp(sbx(8)), new Date().toISOString());
  const kept = rt.seed(stamp(sbx(8)), new Date().toISOString());
  const store = memoryStore();
  store.records.set(sbx(8), { id: sbx(8), providerId: 'a', providerSandboxId: kept, labels: stamp(sbx(8)), createdAt: OLD });
  const { router } = setup(rt, { mappings: store });
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(r.pools.a.mapped, [sbx(8)]);
  assert.deepEqual(r.pools.a.orphan, [{ sandboxId: sbx(8), providerSandboxId: leftover, reason: 'DUPLICATE_OF_MAPPED' }]);
  assert.deepEqual([...rt.live.keys()], [kept]);
});

test('lookup must-fire: a getById that rejects with a 404 means gone: the orphan is ALREADY_GONE, the stale mapping UNMAPPED', async () => {
  const rt = labelledRuntime();
  rt.seed(stamp(sbx(30)));
  rt.getById = async () => {
    throw Object.assign(new Error(`not found ${CANARY}`), { status: 404 });
  };
  const store = memoryStore();
  store.records.set(sbx(31), { id: sbx(31), providerId: 'a', providerSandboxId: 'gone', labels: stamp(sbx(31)), createdAt: OLD });
  const { router } = setup(rt, { mappings: store });
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(r.outcomes.map((o) => [o.sandboxId, o.outcome]).sort(), [[sbx(30), 'ALREADY_GONE'], [sbx(31), 'UNMAPPED']]);
  assert.equal(store.records.size, 0);
  assert.equal(leaks(r), false);
});

test('lookup must-not-fire: a getById that rejects otherwise destroys nothing and keeps the mapping (DESTROY_FAILED, LOOKUP_FAILED)', async () => {
  const rt = labelledRuntime();
  rt.seed(stamp(sbx(32)));
  rt.getById = async () => {
    throw Object.assign(new Error(`boom ${CANARY}`), { status: 500 });
  };
  const store = memoryStore();
  store.records.set(sbx(33), { id: sbx(33), providerId: 'a', providerSandboxId: 'gone', labels: stamp(sbx(33)), createdAt: OLD });
  const { router } = setup(rt, { mappings: store });
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(r.outcomes.map((o) => [o.sandboxId, o.outcome]).sort(), [[sbx(32), 'DESTROY_FAILED'], [sbx(33), 'LOOKUP_FAILED']]);
  assert.equal(store.records.size, 1);
  assert.equal(rt.live.size, 1);
  assert.equal(rt.calls.filter((c) => c.op === 'destroy').length, 0);
});

// ---------------------------------------------------------------------------------------
// unknown pools, deadline, concurrency, options

test('unknown must-fire: a label search that throws is READ_FAILED, without its text; none at all is NOT_SUPPORTED', async () => {
  const throwing = labelledRuntime({ find: () => Promise.reject(new Error(`provider said ${CANARY}`)) });
  const { router, rec } = setup(throwing);
  const r = await router.reconcile();
  assert.deepEqual({ status: r.pools.a.status, reason: r.pools.a.reason }, { status: 'unknown', reason: 'READ_FAILED' });
  assert.equal(r.totals.unknownPools, 1);
  assert.equal(leaks(r), false);
  assert.equal(leaks(rec.events), false);
  const bare = labelledRuntime();
  delete bare.findAllByLabels;
  const r2 = await setup(bare).router.reconcile();
  assert.equal(r2.pools.a.reason, 'NOT_SUPPORTED');
});

test('unknown must-not-fire: handles without labels are matched to mappings but never reclaimed (STAMP_UNVERIFIED)', async () => {
  const rt = labelledRuntime({ find: () => [...rt.live.values()].map((s) => ({ id: s.id })) });
  const { router } = setup(rt);
  const s = await router.provision({});
  rt.seed(stamp(sbx(9)));
  const r = await router.reconcile({ graceMs: 0, reclaim: true });
  assert.deepEqual(r.pools.a.mapped, [s.id]);
  assert.deepEqual(r.pools.a.pending.map((p) => p.reason), ['STAMP_UNVERIFIED']);
  assert.deepEqual(r.outcomes, []);
});

test('deadline must-fire: a label search that never answers ends as unknown TIMEOUT within timeoutMs', async () => {
  const rt = labelledRuntime({ find: () => new Promise(() => {}) });
  const { router } = setup(rt);
  const t0 = Date.now();
  const r = await router.reconcile({ timeoutMs: 150 });
  assert.ok(Date.now() - t0 < 1500, `took ${Date.now() - t0} ms`);
  assert.equal(r.pools.a.reason, 'TIMEOUT');
});

test('concurrency must-fire: at most `concurrency` destroys are in flight; each outcome is typed', async () => {
  let inFlight = 0;
  let peak = 0;
  const rt = labelledRuntime({
    destroy: async (h) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, 10));
      inFlight--;
      if (h.id === 'remote-3') throw new Error(`cannot ${CANARY}`);
      rt.live.delete(h.id);
    },
  });
  for (let i = 1; i <= 12; i++) rt.seed(stamp(sbx(100 + i)));
  const { router } = setup(rt);
  const r = await router.reconcile({ reclaim: true, concurrency: 3 });
  assert.equal(peak, 3);
  assert.equal(r.outcomes.filter((o) => o.outcome === 'DESTROYED').length, 11);
  assert.deepEqual(r.outcomes.filter((o) => o.outcome !== 'DESTROYED').map((o) => o.outcome), ['DESTROY_FAILED']);
  assert.equal(leaks(r), false);
});

test('options must-fire: unknown options, bad types and unregistered pools are INVALID_REQUEST; a store without list() is MAPPING_READ_FAILED', async () => {
  const { router } = setup(labelledRuntime());
  for (const [o, field] of [
    [{ reclaimAll: true }, 'reclaimAll'],
    [{ reclaim: 'yes' }, 'reclaim'],
    [{ graceMs: -1 }, 'graceMs'],
    [{ concurrency: 0 }, 'concurrency'],
    [{ timeoutMs: 1.5 }, 'timeoutMs'],
    [{ providers: ['nope'] }, 'providers[0]'],
  ]) {
    await assert.rejects(router.reconcile(o), (e) => e instanceof SandboxRequestValidationError && e.field === field, JSON.stringify(o));
  }
  const noList = { put: async () => {}, get: async () => null, delete: async () => false };
  await assert.rejects(setup(labelledRuntime(), { mappings: noList }).router.reconcile(), (e) => e instanceof MappingPersistenceError && e.code === 'MAPPING_READ_FAILED');
});

test('options must-not-fire: providers narrows the run to the named pools', async () => {
  const a = labelledRuntime();
  const b = labelledRuntime();
  const registry = new InMemoryProviderRegistry([definition('a', { runtime: a }), definition('b', { runtime: b })]);
  const router = new SandboxRouter({ registry });
  const r = await router.reconcile({ providers: ['b'] });
  assert.deepEqual(Object.keys(r.pools), ['b']);
  assert.equal(a.calls.length, 0);
});

// ---------------------------------------------------------------------------------------
// intent records

test('intent must-fire: a launch that throws (outcome unknown) leaves a failed intent, and its sandbox is an orphan at once (LAUNCH_FAILED)', async () => {
  const rt = labelledRuntime({
    launch: (options, self) => {
      self.seed(options.labels, new Date().toISOString()); // allocated, then…
      throw new Error(`timeout talking to ${CANARY}`);
    },
  });
  const store = memoryStore({ intents: true });
  const { router } = setup(rt, { mappings: store });
  const err = await router.provision({}).catch((e) => e);
  assert.equal(err.code, 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN');
  assert.equal(store.intentRecords.get(err.sandboxId).state, 'failed');
  const r = await router.reconcile({ reclaim: true }); // default grace: 15 minutes
  assert.deepEqual(r.pools.a.orphan.map((o) => [o.sandboxId, o.reason]), [[err.sandboxId, 'LAUNCH_FAILED']]);
  assert.equal(rt.live.size, 0);
});

test('intent must-not-fire: a live writer\'s launching intent (another router, this process) keeps the sandbox pending', async () => {
  const rt = labelledRuntime();
  const store = memoryStore({ intents: true });
  const { router } = setup(rt, { mappings: store });
  rt.seed(stamp(sbx(20)), new Date().toISOString());
  const now = Date.now();
  await store.intent({ id: sbx(20), providerId: 'a', state: 'launching', startedAt: now, expiresAt: now + 600_000, ownerHost: (await import('node:os')).hostname(), ownerPid: process.pid, ownerSession: 'another-router' });
  const r = await router.reconcile({ reclaim: true, graceMs: 0 });
  assert.deepEqual(r.pools.a.pending.map((p) => p.reason), ['IN_FLIGHT_ELSEWHERE']);
  assert.equal(rt.live.size, 1);
});

test('intent must-fire: a launching intent whose writer process is gone is an orphan without grace (WRITER_GONE); an expired one too', async () => {
  const rt = labelledRuntime();
  const store = memoryStore({ intents: true });
  const { router } = setup(rt, { mappings: store });
  const os = await import('node:os');
  const { spawnSync } = await import('node:child_process');
  const deadPid = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
  const now = Date.now();
  rt.seed(stamp(sbx(21)), new Date().toISOString());
  rt.seed(stamp(sbx(22)), new Date().toISOString());
  await store.intent({ id: sbx(21), providerId: 'a', state: 'launching', startedAt: now, expiresAt: now + 600_000, ownerHost: os.hostname(), ownerPid: Number(deadPid), ownerSession: 'dead' });
  await store.intent({ id: sbx(22), providerId: 'a', state: 'launching', startedAt: now - 10, expiresAt: now - 1, ownerHost: 'another-host', ownerPid: 1, ownerSession: 'x' });
  const r = await router.reconcile();
  assert.deepEqual(r.pools.a.orphan.map((o) => o.reason).sort(), ['INTENT_EXPIRED', 'WRITER_GONE']);
});

test('intent must-fire: a store that cannot write the intent fails the provision before any launch (MAPPING_INTENT_FAILED)', async () => {
  const rt = labelledRuntime();
  const store = memoryStore({ intents: true });
  store.intent = async () => {
    throw new Error(`disk full ${CANARY}`);
  };
  const { router, rec } = setup(rt, { mappings: store });
  const err = await router.provision({}).catch((e) => e);
  assert.ok(err instanceof MappingPersistenceError);
  assert.equal(err.code, 'MAPPING_INTENT_FAILED');
  assert.equal(err.cleanup, 'none');
  assert.equal(rt.calls.filter((c) => c.op === 'launch').length, 0, 'nothing launched, so nothing can be lost');
  assert.equal(leaks(err), false);
  assert.equal(leaks(rec.events), false);
});

test('intent must-not-fire: a successful provision completes its intent (no intent left beside the mapping)', async () => {
  const rt = labelledRuntime();
  const store = memoryStore({ intents: true });
  const seen = [];
  const intent = store.intent;
  store.intent = async (i) => {
    seen.push(i.state);
    return intent(i);
  };
  const { router } = setup(rt, { mappings: store });
  const s = await router.provision({});
  assert.deepEqual(seen, ['launching']);
  assert.equal(store.intentRecords.size, 0);
  assert.ok(store.records.has(s.id));
});

// ---------------------------------------------------------------------------------------
// one "launch is over" predicate (src/core/reconcile.rs launch_over), for orphans and stale
// intents alike. This router's own `launching` intent whose provision is no longer in
// flight is over: its sandbox is an orphan (INTENT_ABANDONED) and, when nothing was
// listed, the intent is stale. (Before the predicate was one, such an intent was kept
// until it expired.)

/** A store whose `failed` intent writes fail: a launch that ends unknown leaves `launching`. */
function failedWritesFail() {
  const store = memoryStore({ intents: true });
  const write = store.intent;
  store.intent = async (i) => {
    if (i.state === 'failed') throw new Error(`store down ${CANARY}`);
    return write(i);
  };
  return store;
}

test('own intent must-fire: this router\'s launching intent, its provision over, is stale at once (nothing listed) and removed', async () => {
  const rt = labelledRuntime({
    launch: () => {
      throw new Error(`timeout talking to ${CANARY}`); // outcome unknown; nothing allocated here
    },
  });
  const store = failedWritesFail();
  const { router } = setup(rt, { mappings: store });
  const err = await router.provision({}).catch((e) => e);
  assert.equal(err.code, 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN');
  assert.equal(store.intentRecords.get(err.sandboxId).state, 'launching', 'the failed write failed');
  assert.ok(store.intentRecords.get(err.sandboxId).expiresAt > Date.now(), 'not expired: the own-session rule decides');
  const dry = await router.reconcile();
  assert.deepEqual(dry.staleIntents, [err.sandboxId]);
  const done = await router.reconcile({ reclaim: true });
  assert.deepEqual(done.outcomes.map((o) => [o.class, o.sandboxId, o.providerSandboxId, o.outcome]), [['stale-intent', err.sandboxId, null, 'INTENT_REMOVED']]);
  assert.equal(store.intentRecords.size, 0);
});

test('own intent must-not-fire: this router\'s launching intent is not stale while its provision is in flight', async () => {
  let fail;
  const rt = labelledRuntime({ launch: () => new Promise((_, reject) => (fail = () => reject(new Error('boom')))) });
  const store = failedWritesFail();
  const { router } = setup(rt, { mappings: store });
  const pending = router.provision({}).catch((e) => e);
  while (fail === undefined) await new Promise((r) => setImmediate(r));
  const r = await router.reconcile({ reclaim: true, graceMs: 0 });
  assert.deepEqual(r.staleIntents, []);
  assert.deepEqual(r.outcomes, []);
  assert.equal(store.intentRecords.size, 1);
  fail();
  const err = await pending;
  assert.deepEqual((await router.reconcile()).staleIntents, [err.sandboxId], 'over now: the same intent is stale');
});

test('own intent must-fire: this router\'s launching intent, its provision over, makes its listed sandbox an orphan (INTENT_ABANDONED)', async () => {
  const rt = labelledRuntime({
    launch: (options, self) => {
      self.seed(options.labels, new Date().toISOString()); // allocated, then…
      throw new Error(`timeout talking to ${CANARY}`);
    },
  });
  const store = failedWritesFail();
  const { router } = setup(rt, { mappings: store });
  const err = await router.provision({}).catch((e) => e);
  const r = await router.reconcile({ reclaim: true }); // default grace: 15 minutes
  assert.deepEqual(r.pools.a.orphan.map((o) => [o.sandboxId, o.reason]), [[err.sandboxId, 'INTENT_ABANDONED']]);
  assert.deepEqual(r.outcomes.map((o) => o.outcome), ['DESTROYED']);
  assert.equal(rt.live.size, 0);
  assert.equal(store.intentRecords.size, 0, 'its intent is settled with it');
});

test('stale-intent re-check must-not-fire: a record of its id written after the store was read saves it (NOW_MAPPED)', async () => {
  const rt = labelledRuntime();
  const store = memoryStore({ intents: true });
  const now = Date.now();
  await store.intent({ id: sbx(40), providerId: 'a', state: 'failed', startedAt: now, expiresAt: now + 600_000, ownerHost: 'another-host', ownerPid: 1, ownerSession: 'x' });
  const realIntents = store.intents;
  // The intents answer before the record exists; the record lands right after.
  store.intents = async () => {
    const l = await realIntents();
    store.records.set(sbx(40), { id: sbx(40), providerId: 'a', providerSandboxId: 'late', labels: stamp(sbx(40)), createdAt: new Date().toISOString() });
    return l;
  };
  const { router } = setup(rt, { mappings: store });
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(r.staleIntents, [sbx(40)]);
  assert.deepEqual(r.outcomes.map((o) => [o.class, o.outcome]), [['stale-intent', 'NOW_MAPPED']]);
  assert.ok(store.records.has(sbx(40)), 'the record written meanwhile is kept');
});

test('stale-intent re-check must-fire: without such a record the stale intent is removed (INTENT_REMOVED)', async () => {
  const rt = labelledRuntime();
  const store = memoryStore({ intents: true });
  const now = Date.now();
  await store.intent({ id: sbx(41), providerId: 'a', state: 'failed', startedAt: now, expiresAt: now + 600_000, ownerHost: 'another-host', ownerPid: 1, ownerSession: 'x' });
  const { router } = setup(rt, { mappings: store });
  const r = await router.reconcile({ reclaim: true });
  assert.deepEqual(r.outcomes.map((o) => [o.class, o.outcome]), [['stale-intent', 'INTENT_REMOVED']]);
  assert.equal(store.intentRecords.size, 0);
});

// ---------------------------------------------------------------------------------------
// native finders: loopback mock servers with each provider's wire shape

const FLEET = 'default';

/** Serves `handler(url) → [status, body, headers?]`, checking auth; records queries. */
async function mock(auth, handler) {
  const requests = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    requests.push({ path: url.pathname, query: Object.fromEntries(url.searchParams) });
    const [status, body, headers = {}] = auth(req.headers) ? handler(url) : [401, { error: 'invalid_api_key' }];
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

const bearer = (h) => h.authorization === `Bearer ${KEY}`;
const stamped = (i) => stamp(sbx(1000 + i), FLEET);
/** Labels that do not match: another fleet, a partial stamp, nothing of ours. */
const foreign = [stamp(sbx(5000), 'other'), { [SANDBOX_ID_LABEL]: sbx(5001) }, { [SANDBOX_FLEET_LABEL]: FLEET }, { team: 'x' }];

function fakeModules(calls) {
  class Adapter {
    async getById(id, options) {
      calls.push({ op: 'getById', id, owned: options?.owned === true });
      return { id };
    }
    async destroy(handle) {
      calls.push({ op: 'destroy', id: handle.id });
    }
  }
  const modules = {
    '@agent-relay/sandbox': { DaytonaRuntime: Adapter, E2BSandboxRuntime: Adapter, MicrosandboxRuntime: Adapter, Agent37Runtime: Adapter },
    '@daytonaio/sdk': { Daytona: class {} },
    e2b: {},
    microsandbox: {},
  };
  return async (name) => modules[name];
}

async function reconcileOn(provider, entry, options) {
  const calls = [];
  const router = createSandboxRouter({ providers: { [provider]: { apiKey: KEY, ...entry } }, moduleLoader: fakeModules(calls) });
  const report = await router.reconcile(options);
  assert.equal(leaks(report, KEY), false);
  return { report, calls, pool: report.pools[provider] };
}

test('finder daytona must-fire: cursor pages with the labels filter; must-not-fire: non-matching labels are not found', async () => {
  const pages = [
    { items: [{ id: 'd1', labels: stamped(1), createdAt: OLD }, ...foreign.map((labels, i) => ({ id: `f${i}`, labels, createdAt: OLD }))], nextCursor: 'c1' },
    { items: [{ id: 'd2', labels: stamped(2), createdAt: OLD }], nextCursor: null },
  ];
  const s = await mock(bearer, (url) => [200, pages[url.searchParams.get('cursor') === 'c1' ? 1 : 0]]);
  try {
    const { pool, report, calls } = await reconcileOn('daytona', { apiUrl: s.base }, { reclaim: true });
    assert.equal(pool.finder, 'native');
    assert.deepEqual(pool.orphan.map((o) => o.providerSandboxId), ['d1', 'd2']);
    assert.deepEqual(s.requests.map((r) => r.query), [
      { limit: '200', labels: JSON.stringify({ [SANDBOX_FLEET_LABEL]: FLEET }) },
      { limit: '200', labels: JSON.stringify({ [SANDBOX_FLEET_LABEL]: FLEET }), cursor: 'c1' },
    ]);
    assert.deepEqual(report.outcomes.map((o) => o.outcome), ['DESTROYED', 'DESTROYED']);
    assert.deepEqual(calls.filter((c) => c.op === 'getById').map((c) => [c.id, c.owned]), [['d1', true], ['d2', true]]);
    assert.deepEqual(calls.filter((c) => c.op === 'destroy').map((c) => c.id), ['d1', 'd2']);
  } finally {
    await s.close();
  }
});

test('finder e2b must-fire: metadata filter, X-Next-Token pages, running and paused; must-not-fire: foreign metadata', async () => {
  const s = await mock((h) => h['x-api-key'] === KEY, (url) => {
    const t = url.searchParams.get('nextToken');
    if (t === null) return [200, [{ sandboxID: 'e1', metadata: stamped(1), startedAt: OLD, state: 'paused' }, ...foreign.map((metadata, i) => ({ sandboxID: `f${i}`, metadata }))], { 'X-Next-Token': 'tok/1' }];
    return [200, [{ sandboxID: 'e2', metadata: stamped(2), startedAt: OLD, state: 'running' }]];
  });
  try {
    const { pool } = await reconcileOn('e2b', { capacity: { baseUrl: s.base } });
    assert.deepEqual(pool.orphan.map((o) => [o.providerSandboxId, o.sandboxId]), [['e1', sbx(1001)], ['e2', sbx(1002)]]);
    const own = s.requests.filter((r) => r.query.metadata !== undefined);
    assert.deepEqual(own.map((r) => r.query), [
      { metadata: `${SANDBOX_FLEET_LABEL}=${FLEET}`, limit: '100' },
      { metadata: `${SANDBOX_FLEET_LABEL}=${FLEET}`, limit: '100', nextToken: 'tok/1' },
    ]);
    assert.ok(own.every((r) => r.query.state === undefined), 'no state filter: paused sandboxes cost too');
  } finally {
    await s.close();
  }
});

test('finder microsandbox must-fire: spec.labels across cursors; must-not-fire: null spec and foreign labels', async () => {
  const s = await mock(bearer, (url) => {
    if (url.searchParams.get('cursor') === null) {
      return [200, { data: [{ id: 'm1', created_at: OLD, spec: { labels: stamped(1) } }, { id: 'n', spec: null }, ...foreign.map((labels, i) => ({ id: `f${i}`, spec: { labels } }))], has_more: true, next_cursor: 'n1' }];
    }
    return [200, { data: [{ id: 'm2', created_at: OLD, spec: { labels: stamped(2) } }], has_more: false, next_cursor: null }];
  });
  try {
    const { pool } = await reconcileOn('microsandbox', { homeDir: '/root', image: 'python', url: s.base });
    assert.deepEqual(pool.orphan.map((o) => o.providerSandboxId), ['m1', 'm2']);
    assert.deepEqual(s.requests.map((r) => r.query.labels), [JSON.stringify({ [SANDBOX_FLEET_LABEL]: FLEET }), JSON.stringify({ [SANDBOX_FLEET_LABEL]: FLEET })]);
  } finally {
    await s.close();
  }
});

test('finder agent37 must-fire: instance metadata (unix-second created); must-not-fire: foreign and missing metadata', async () => {
  const created = Math.floor(Date.now() / 1000) - 3600;
  const s = await mock(bearer, () => [200, { data: [{ id: 'inst_1', status: 'running', metadata: stamped(1), created }, { id: 'inst_x' }, ...foreign.map((metadata, i) => ({ id: `f${i}`, metadata }))] }]);
  try {
    const { pool } = await reconcileOn('agent37', { baseUrl: s.base, defaultHomeDir: '/home' });
    assert.deepEqual(pool.orphan.map((o) => o.providerSandboxId), ['inst_1']);
    assert.equal(s.requests.length, 1);
  } finally {
    await s.close();
  }
});

test('finder must-fire: a wrong key is an unknown pool (UNAUTHORIZED), the key never in the report', async () => {
  const s = await mock(() => false, () => [200, []]);
  try {
    const { pool } = await reconcileOn('daytona', { apiUrl: s.base });
    assert.deepEqual({ status: pool.status, reason: pool.reason }, { status: 'unknown', reason: 'UNAUTHORIZED' });
  } finally {
    await s.close();
  }
});
