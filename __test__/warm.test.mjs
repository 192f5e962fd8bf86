// Warm pools (docs/warm-pools.md): configuration, warmUp, claims, hygiene, close. Each rule
// as a must-fire / must-not-fire pair, named so the pair is visible.
import test from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  InMemoryProviderRegistry,
  InMemoryMappingStore,
  SqliteMappingStore,
  SandboxRouter,
  createSandboxRouter,
  SANDBOX_ID_LABEL,
  ProviderRegistryError,
  SandboxRouterConfigurationError,
  MappingPersistenceError,
} from '../index.mjs';
import { CANARY, definition, fakeRuntime, recorder, leaks } from './fixtures.mjs';

const WARM_LABEL = 'agent-relay-sbx-warm';
const SBX = /^sbx_[0-9a-f]{32}$/;

function clock(start = 1_700_000_000_000) {
  const c = { t: start, now: () => c.t };
  return c;
}

function router({ warm = { size: 2 }, runtime = fakeRuntime(), extra = [], ...options } = {}) {
  const registry = new InMemoryProviderRegistry([definition('hot', { runtime, warm }), ...extra]);
  return new SandboxRouter({ registry, ...options });
}

/** A runtime whose handles carry their labels (as the local runtime's do): reconcile verifies stamps. */
function labelled() {
  let n = 0;
  const rt = fakeRuntime({
    launch: async (options) => {
      const handle = { id: `l-${++n}`, labels: { ...options.labels }, createdAt: new Date(0).toISOString() };
      rt.live.set(handle.id, { handle, labels: handle.labels });
      return handle;
    },
  });
  return rt;
}

const launches = (rt) => rt.calls.filter((c) => c.op === 'launch').length;
const destroys = (rt) => rt.calls.filter((c) => c.op === 'destroy').length;

// --- 1. configuration -------------------------------------------------------------------

test('warm option: a valid option is accepted (must-not-fire) / an invalid one is a typed error naming the field (must-fire)', () => {
  assert.doesNotThrow(() => router({ warm: { size: 3, maxIdleMs: 60_000, checkIntervalMs: 1_000, refill: { concurrency: 1, pauseAfterFailures: 2 } } }));
  for (const [warm, field] of [
    [{ size: -1 }, 'warm.size'],
    [{ size: 2, maxIdleMs: 'x' }, 'warm.maxIdleMs'],
    [{ size: 2, refill: { concurrency: 0 } }, 'warm.refill.concurrency'],
    [{ size: 2, bogus: 1 }, 'warm.bogus'],
    [{ size: 2, refill: { pauseAfterFailures: 1.5 } }, 'warm.refill.pauseAfterFailures'],
  ]) {
    assert.throws(() => router({ warm }), (e) => e instanceof ProviderRegistryError && e.code === 'INVALID_PROVIDER_DEFINITION' && e.field === field, JSON.stringify(warm));
  }
});

test('factory warm option: valid accepted (must-not-fire) / invalid names providers.local.warm.* (must-fire)', () => {
  assert.doesNotThrow(() => createSandboxRouter({ providers: { local: { warm: { size: 1 } } } }));
  assert.throws(
    () => createSandboxRouter({ providers: { local: { warm: { size: 1, refill: { concurrency: -2 } } } } }),
    (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field === 'providers.local.warm.refill.concurrency',
  );
});

test('nothing is launched at construction (must-not-fire) / warmUp() fills every pool to its size (must-fire)', async () => {
  const rt = fakeRuntime();
  const r = router({ runtime: rt, warm: { size: 3 } });
  await new Promise((res) => setTimeout(res, 20));
  assert.equal(launches(rt), 0);
  const report = await r.warmUp();
  assert.equal(report.ready, true);
  assert.deepEqual(report.pools, [{ providerId: 'hot', target: 3, idle: 3, ready: true, reason: null, lastFailureCode: null }]);
  assert.equal(launches(rt), 3);
  const labels = rt.calls[0].options.labels;
  assert.match(labels[SANDBOX_ID_LABEL], SBX);
  assert.equal(labels[WARM_LABEL], 'hot');
  const [s] = await r.warmStatus();
  assert.equal(s.idle, 3);
  assert.equal(s.launched, 3);
  await r.close();
});

// --- 3. claims --------------------------------------------------------------------------

test('claim: a compatible request takes an idle member (must-fire) / an env or name request launches cold (must-not-fire)', async () => {
  const rt = fakeRuntime();
  const events = recorder();
  const mappings = new InMemoryMappingStore();
  const r = router({ runtime: rt, warm: { size: 1 }, observer: events.observer, mappings });
  await r.warmUp();
  const launchedBefore = launches(rt);
  const member = (await mappings.list())[0];
  assert.equal(member.labels[WARM_LABEL], 'hot');
  const res = await r.provision({ launch: { labels: { owner: 'me' } } });
  assert.equal(res.id, member.id, 'the member is the result');
  assert.equal(res.providerId, 'hot');
  assert.equal(res.labels.owner, 'me');
  assert.equal(launches(rt), launchedBefore, 'no launch for a claim');
  const rec = await r.getSandbox(res.id);
  assert.equal(rec.labels.owner, 'me', 'the mapping carries the caller labels');
  assert.equal(rec.labels[WARM_LABEL], undefined, 'the claimed record is no idle member');
  assert.ok(events.types().includes('warm.claimed'));

  await r.warmUp(); // the claim's refill
  for (const launch of [{ env: { SECRET: CANARY } }, { name: 'x' }]) {
    const before = launches(rt);
    const cold = await r.provision({ launch });
    assert.notEqual(cold.id, member.id);
    assert.equal(launches(rt), before + 1, `cold launch for ${Object.keys(launch)}`);
  }
  const misses = events.events.filter((e) => e.type === 'warm.miss').map((e) => e.reason);
  assert.deepEqual(misses, ['LAUNCH_ENV', 'LAUNCH_NAME']);
  const [s] = await r.warmStatus();
  assert.equal(s.claims, 1);
  assert.equal(s.misses.incompatible, 2);
  assert.equal(leaks(events.events), false);
  assert.equal(leaks(s), false);
  await r.close();
});

test('budgets: a claim is charged and destroy(claimed id) gives the slot back (must-fire) / refills are charged to nobody (must-not-fire)', async () => {
  const rt = fakeRuntime();
  const budgets = [{ id: 'tenant', key: { label: 'tenant' }, limit: { concurrent: 1, launches: 10 }, window: { slidingMs: 60_000 } }];
  const r = router({ runtime: rt, warm: { size: 2 }, budgets });
  await r.warmUp();
  assert.deepEqual(await r.budgetStatus(), [], 'two refills, no key charged');
  const claimed = await r.provision({ launch: { labels: { tenant: 'a' } } });
  const [row] = await r.budgetStatus();
  assert.deepEqual([row.key, row.used.launches, row.used.concurrent], [{ label: 'tenant', value: 'a' }, 1, 1], 'the claim is charged');
  await assert.rejects(r.provision({ launch: { labels: { tenant: 'a' } } }), (e) => e.code === 'BUDGET_EXHAUSTED' && e.rule === 'tenant');
  await r.destroy(claimed.id);
  assert.equal((await r.budgetStatus())[0].used.concurrent, 0, 'the charge followed the member id');
  await r.provision({ launch: { labels: { tenant: 'a' } } });
  await r.close();
});

test('claim: each claim triggers a refill (must-fire) / no refill without a claim (must-not-fire)', async () => {
  const rt = fakeRuntime();
  const r = router({ runtime: rt, warm: { size: 2 } });
  await r.warmUp();
  await new Promise((res) => setTimeout(res, 30));
  assert.equal(launches(rt), 2, 'no claim, no refill');
  await r.provision({});
  await new Promise((res) => setTimeout(res, 30));
  assert.equal(launches(rt), 3, 'the claim triggered one refill');
  const [s] = await r.warmStatus();
  assert.equal(s.idle, 2);
  await r.close();
});

test('claim: an empty pool falls back to a cold launch with no error (must-fire miss EMPTY) / before warmUp no miss at all (must-not-fire)', async () => {
  const rt = fakeRuntime();
  const events = recorder();
  const r = router({ runtime: rt, warm: { size: 1 }, observer: events.observer });
  await r.provision({});
  assert.equal(events.types().includes('warm.miss'), false, 'not started: no claim step');
  await r.warmUp();
  await r.provision({});
  const second = await r.provision({}); // the pool is empty until its refill lands
  assert.match(second.id, SBX);
  assert.ok(events.events.some((e) => e.type === 'warm.miss' && e.reason === 'EMPTY'));
  await r.close();
});

test('exact providerId: claims only from that pool (must-fire) / another pool’s members stay idle (must-not-fire)', async () => {
  const hot = fakeRuntime();
  const other = fakeRuntime();
  const registry = new InMemoryProviderRegistry([
    definition('hot', { runtime: hot, warm: { size: 1 }, signals: { estimatedCost: 0.01 } }),
    definition('other', { runtime: other, warm: { size: 1 }, signals: { estimatedCost: 0.9 } }),
  ]);
  const r = new SandboxRouter({ registry });
  await r.warmUp();
  const res = await r.provision({ providerId: 'other' });
  assert.equal(res.providerId, 'other');
  const status = Object.fromEntries((await r.warmStatus()).map((s) => [s.providerId, s]));
  assert.equal(status.other.claims, 1);
  assert.equal(status.hot.claims, 0);
  assert.equal(status.hot.idle, 1);
  await r.close();
});

test('lifetime: a request whose required lifetime fits the member claims (must-fire) / one that does not launches cold (must-not-fire)', async () => {
  const rt = fakeRuntime();
  const c = clock();
  // The pool's declared lifetime is in its capabilities.
  const registry = new InMemoryProviderRegistry([definition('hot', { runtime: rt, warm: { size: 1, maxIdleMs: 3_000_000 }, capabilities: { timeout: { maxSandboxLifetimeMs: 3_600_000 } } })]);
  const router2 = new SandboxRouter({ registry, clock: c.now });
  await router2.warmUp();
  c.t += 600_000; // the member is 10 minutes old: 50 minutes left
  const before = launches(rt);
  const cold = await router2.provision({ requires: { timeout: { requiredSandboxLifetimeMs: 3_300_000 } } });
  assert.equal(launches(rt), before + 1, '55 minutes needed: cold');
  const warm = await router2.provision({ requires: { timeout: { requiredSandboxLifetimeMs: 1_800_000 } } });
  assert.notEqual(warm.id, cold.id);
  const [s] = await router2.warmStatus();
  assert.equal(s.claims, 1);
  assert.equal(s.misses.incompatible, 1);
  await router2.close();
});

// --- 4. hygiene -------------------------------------------------------------------------

test('expiry: a member idle past maxIdleMs is destroyed and replaced (must-fire) / a fresh one is kept (must-not-fire)', async () => {
  const rt = fakeRuntime();
  const c = clock();
  const events = recorder();
  const r = router({ runtime: rt, warm: { size: 1, maxIdleMs: 60_000 }, clock: c.now, observer: events.observer });
  await r.warmUp();
  c.t += 30_000;
  await r.warmUp();
  assert.equal(destroys(rt), 0, 'fresh: kept');
  c.t += 31_000;
  await r.warmUp();
  assert.equal(destroys(rt), 1, 'expired: destroyed');
  assert.equal(launches(rt), 2, 'and replaced');
  assert.ok(events.types().includes('warm.member.expired'));
  const [s] = await r.warmStatus();
  assert.equal(s.expired, 1);
  assert.equal(s.idle, 1);
  await r.close();
});

test('check: a member gone at the provider is dropped, never handed out (must-fire) / a live one stays (must-not-fire)', async () => {
  const rt = fakeRuntime();
  const c = clock();
  const events = recorder();
  const r = router({ runtime: rt, warm: { size: 2, checkIntervalMs: 1_000 }, clock: c.now, observer: events.observer });
  await r.warmUp();
  const [gone] = [...rt.live.keys()];
  rt.live.delete(gone); // the provider lost it
  c.t += 1_500;
  await r.warmUp();
  assert.ok(events.events.some((e) => e.type === 'warm.member.lost'));
  const [s] = await r.warmStatus();
  assert.equal(s.lost, 1, 'one dropped');
  assert.equal(s.idle, 2, 'replaced; the live one stayed');
  for (let i = 0; i < 2; i++) {
    const res = await r.provision({});
    const rec = await r.getSandbox(res.id);
    assert.notEqual(rec.providerSandboxId, gone);
  }
  await r.close();
});

test('pause: refills stop after pauseAfterFailures failures (must-fire) / resume once a launch on the pool succeeds (must-not-fire stays paused)', async () => {
  let failing = true;
  const events = recorder();
  let n = 0;
  const rt = fakeRuntime({
    launch: async () => {
      if (failing) throw new Error(`down ${CANARY}`);
      return { id: `ok-${++n}` };
    },
  });
  const r = router({ runtime: rt, warm: { size: 2, refill: { concurrency: 1, pauseAfterFailures: 2 } }, observer: events.observer, health: false });
  const report = await r.warmUp();
  assert.equal(report.ready, false);
  assert.equal(report.pools[0].reason, 'PAUSED');
  assert.equal(launches(rt), 2, 'exactly pauseAfterFailures launches');
  await r.warmUp();
  assert.equal(launches(rt), 2, 'paused: no more refills');
  assert.ok(events.types().includes('warm.refill.paused'));
  assert.equal(leaks(events.events), false);
  failing = false;
  await r.provision({}); // a cold launch succeeds: evidence the pool is back
  const again = await r.warmUp();
  assert.equal(again.ready, true);
  assert.ok(events.types().includes('warm.refill.resumed'));
  await r.close();
});

test('circuit: an open circuit pauses refills (must-fire) / a closed one lets them run (must-not-fire)', async () => {
  const rt = fakeRuntime({
    launch: async () => {
      throw new Error('down');
    },
  });
  const r = router({ runtime: rt, warm: { size: 1, refill: { pauseAfterFailures: 100, concurrency: 1 } }, health: { failureThreshold: 2 } });
  const report = await r.warmUp();
  assert.equal(report.pools[0].reason, 'CIRCUIT_OPEN');
  assert.equal(launches(rt), 2, 'the circuit opened after 2 failures and stopped refills');
  const [h] = r.health();
  assert.equal(h.state, 'open', 'refill failures count in live health');
  await r.close();
});

// --- 7. faults --------------------------------------------------------------------------

test('store fault: a member whose record cannot be written is destroyed and the refill failed (must-fire) / a writable store keeps it (must-not-fire)', async () => {
  const rt = fakeRuntime();
  let broken = true;
  class Flaky extends InMemoryMappingStore {
    async put(record) {
      if (broken) throw new Error(`db down ${CANARY}`);
      return super.put(record);
    }
  }
  const r = router({ runtime: rt, warm: { size: 1, refill: { pauseAfterFailures: 1 } }, mappings: new Flaky() });
  const report = await r.warmUp();
  assert.equal(report.ready, false);
  assert.equal(report.pools[0].lastFailureCode, 'MAPPING_PERSISTENCE_FAILED');
  assert.equal(destroys(rt), 1);
  assert.equal(leaks(report), false);
  broken = false;
  const ok = router({ runtime: rt, warm: { size: 1 }, mappings: new Flaky() });
  assert.equal((await ok.warmUp()).ready, true);
  await r.close();
  await ok.close();
});

// --- close ------------------------------------------------------------------------------

test('close(): idle members are destroyed (must-fire) / close({ keepWarm: true }) with a durable store keeps them for the next process (must-not-fire)', async () => {
  const rt = fakeRuntime();
  const r = router({ runtime: rt, warm: { size: 2 } });
  await r.warmUp();
  assert.deepEqual(await r.close(), { destroyed: 2, failed: 0, kept: 0 });
  assert.equal(destroys(rt), 2);
  assert.equal(rt.live.size, 0);

  await assert.rejects(router({ warm: { size: 1 } }).close({ keepWarm: true }), (e) => e instanceof SandboxRouterConfigurationError && e.field === 'keepWarm');

  const dir = mkdtempSync(join(tmpdir(), 'warm-'));
  try {
    const path = join(dir, 'm.db');
    const rt2 = fakeRuntime();
    const first = router({ runtime: rt2, warm: { size: 2 }, mappings: new SqliteMappingStore({ path }) });
    await first.warmUp();
    assert.deepEqual(await first.close({ keepWarm: true }), { destroyed: 0, failed: 0, kept: 2 });
    assert.equal(destroys(rt2), 0);
    const next = router({ runtime: rt2, warm: { size: 2 }, mappings: new SqliteMappingStore({ path }) });
    const report = await next.warmUp();
    assert.equal(report.ready, true);
    assert.equal(launches(rt2), 2, 'adopted: nothing launched');
    const res = await next.provision({});
    assert.ok([...rt2.live.keys()].includes((await next.getSandbox(res.id)).providerSandboxId));
    await next.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('adoption reads each field of a store record once: a getter that answers differently the second time (must-fire) / plain records (must-not-fire) adopt the same', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'warm-'));
  try {
    const path = join(dir, 'm.db');
    const rt = fakeRuntime();
    const first = router({ runtime: rt, warm: { size: 2 }, mappings: new SqliteMappingStore({ path }) });
    await first.warmUp();
    await first.close({ keepWarm: true });
    const reads = [];
    class Flipping extends SqliteMappingStore {
      async list(...args) {
        const records = await super.list(...args);
        return records.map((r) => {
          const seen = new Map();
          reads.push(seen);
          return new Proxy(r, {
            get(target, key, receiver) {
              const n = (seen.get(key) ?? 0) + 1;
              seen.set(key, n);
              // A second read of the id answers something else: adoption must not see it.
              if (key === 'id' && n > 1) return 42;
              return Reflect.get(target, key, receiver);
            },
          });
        });
      }
    }
    const flipping = router({ runtime: rt, warm: { size: 2 }, mappings: new Flipping({ path }) });
    const report = await flipping.warmUp();
    assert.equal(report.ready, true);
    assert.equal(launches(rt), 2, 'both members adopted: nothing launched');
    assert.ok(reads.length >= 2);
    for (const seen of reads) for (const key of ['id', 'labels', 'createdAt', 'providerId', 'providerSandboxId']) assert.ok((seen.get(key) ?? 0) <= 1, `${key} read ${seen.get(key)} times`);
    await flipping.close({ keepWarm: true });
    const plain = router({ runtime: rt, warm: { size: 2 }, mappings: new SqliteMappingStore({ path }) });
    assert.equal((await plain.warmUp()).ready, true);
    assert.equal(launches(rt), 2, 'plain records adopted the same way');
    await plain.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('reconcile: idle members are ours (must-not-fire orphan) / a member of a pool without warm any more is reclaimed (must-fire)', async () => {
  const rt = labelled();
  const mappings = new InMemoryMappingStore();
  const r = router({ runtime: rt, warm: { size: 1 }, mappings });
  await r.warmUp();
  const report = await r.reconcile();
  const pool = report.pools.hot;
  assert.equal(pool.orphan.length, 0);
  assert.equal(pool.mapped.length, 1);
  const cold = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('hot', { runtime: rt })]), mappings });
  const again = await cold.reconcile({ graceMs: 0 });
  const p2 = again.pools.hot;
  assert.equal(p2.orphan.length, 1);
  assert.equal(p2.orphan[0].reason, 'WARM_POOL_GONE');
  const reclaimed = await cold.reconcile({ graceMs: 0, reclaim: true });
  assert.deepEqual(reclaimed.outcomes.map((o) => o.outcome), ['DESTROYED']);
  assert.equal(rt.live.size, 0);
  assert.equal((await mappings.list()).length, 0, 'its record is removed');
  await r.close();
});

test('explain: says per pool whether a claim would be warm (must-fire) / and why not (must-not-fire)', async () => {
  const r = router({ warm: { size: 1 } });
  const before = await r.explain({});
  assert.deepEqual(before.eligible[0].warm, { claim: false, reason: 'NOT_STARTED' });
  await r.warmUp();
  assert.deepEqual((await r.explain({})).eligible[0].warm, { claim: true, reason: null });
  assert.deepEqual((await r.explain({ launch: { env: { A: '1' } } })).eligible[0].warm, { claim: false, reason: 'LAUNCH_ENV' });
  await r.close();
});

test('provisionDetached: claims a warm member too (must-fire) / a router without warm pools has no warm field in explain (must-not-fire)', async () => {
  const rt = fakeRuntime({ detached: true });
  const r = router({ runtime: rt, warm: { size: 1 } });
  await r.warmUp();
  const before = launches(rt);
  const res = await r.provisionDetached({});
  assert.equal(launches(rt), before);
  assert.equal((await r.getSandbox(res.id)).detached, true);
  await r.close();
  const plain = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('x')]) });
  assert.equal('warm' in (await plain.explain({})).eligible[0], false);
});

test('destroy of a claimed sandbox behaves as today (must-fire) / MappingPersistenceError stays typed', async () => {
  const rt = fakeRuntime();
  const r = router({ runtime: rt, warm: { size: 1 } });
  await r.warmUp();
  const res = await r.provision({});
  await r.destroy(res.id);
  await assert.rejects(r.getSandbox(res.id), (e) => e.code === 'SANDBOX_NOT_FOUND');
  assert.ok(MappingPersistenceError);
  await r.close();
});

// --- telemetry (docs/telemetry.md) --------------------------------------------------------

test('telemetry: a claim is launch_type warm and a hit (must-fire) / a cold launch stays cold and its miss is counted (must-not-fire)', async () => {
  const { MeterProvider, InMemoryMetricExporter, PeriodicExportingMetricReader, AggregationTemporality } = await import('@opentelemetry/sdk-metrics');
  const { BasicTracerProvider } = await import('@opentelemetry/sdk-trace-base');
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const tracerProvider = new BasicTracerProvider();
  const r = router({ warm: { size: 1 }, telemetry: { meterProvider, tracerProvider } });
  await r.warmUp();
  await r.provision({});
  await r.provision({ launch: { env: { SECRET: CANARY } } });
  await r.warmUp();
  await reader.forceFlush();
  const points = exporter
    .getMetrics()
    .at(-1)
    .scopeMetrics.flatMap((s) => s.metrics.flatMap((m) => m.dataPoints.map((p) => ({ name: m.descriptor.name, attributes: p.attributes, value: p.value }))));
  const durations = points.filter((p) => p.name === 'sandbox_router_provision_duration_seconds').map((p) => `${p.attributes.launch_type}:${p.value.count}`);
  assert.deepEqual(durations.sort(), ['cold:1', 'warm:1']);
  const claims = points.filter((p) => p.name === 'sandbox_router_warm_claims').map((p) => `${p.attributes.result}:${p.attributes.reason ?? ''}:${p.value}`);
  assert.deepEqual(claims.sort(), ['hit::1', 'miss:LAUNCH_ENV:1']);
  const idle = points.find((p) => p.name === 'sandbox_router_warm_idle_members');
  assert.deepEqual([idle.attributes.pool, idle.value], ['hot', 1]);
  assert.equal(leaks(points), false);
  await r.close();
  await meterProvider.shutdown();
});

// --- issue 35: liveness through the provider, lifetimes, close, warmUp's bound --------------

/** A loopback copy of E2B's list API (what the native finder reads) over `live`: id → metadata. */
async function e2bList(live) {
  const http = await import('node:http');
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    const want = new URLSearchParams(u.searchParams.get('metadata') ?? '');
    const items = [...live]
      .filter(([, md]) => [...want].every(([k, v]) => md[k] === v))
      .map(([id, metadata]) => ({ sandboxID: id, templateID: 'base', metadata, startedAt: new Date(0).toISOString(), state: 'running' }));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(items));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { base: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => (server.closeAllConnections?.(), server.close(r))) };
}

/** A fake `@agent-relay/sandbox` whose E2B adapter answers getById from its own cache, as the published one does. */
function cachingE2b(live) {
  class E2BSandboxRuntime {
    constructor() {
      this.id = 'e2b';
      this.cache = new Map();
      this.n = 0;
    }
    async launch(options) {
      const id = `e2b-${++this.n}`;
      live.set(id, { ...options.labels });
      this.cache.set(id, { id });
      return { id, state: 'STARTED' };
    }
    async getById(id) {
      return this.cache.get(id) ?? null; // never asks the provider
    }
    async destroy(h) {
      live.delete(h.id);
      this.cache.delete(h.id);
    }
  }
  const modules = { '@agent-relay/sandbox': { E2BSandboxRuntime }, e2b: {} };
  return async (name) => modules[name];
}

const waitFor = async (check, ms = 5_000) => {
  const until = Date.now() + ms;
  while (!(await check()) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  return check();
};

test('liveness: a member the native finder no longer lists is dropped, never claimed (must-fire) / a listed one is kept and claimed, though getById answers from a cache (must-not-fire)', async () => {
  const live = new Map();
  const api = await e2bList(live);
  const events = recorder();
  const router = createSandboxRouter({
    providers: { e2b: { apiKey: 'k', warm: { size: 2, checkIntervalMs: 200 }, capacity: { baseUrl: api.base, limits: { sandboxes: 100 } } } },
    moduleLoader: cachingE2b(live),
    observer: events.observer,
  });
  try {
    assert.equal((await router.warmUp()).ready, true);
    const [gone, kept] = [...live.keys()];
    live.delete(gone); // killed behind the router's back
    assert.equal(await waitFor(async () => (await router.warmStatus())[0].lost === 1), true, 'dropped within a check interval');
    assert.ok(events.events.some((e) => e.type === 'warm.member.lost'));
    const first = await router.provision({});
    const got = (await router.getSandbox(first.id)).providerSandboxId;
    assert.notEqual(got, gone, 'must-fire: the deleted member is never handed out');
    assert.equal(got, kept, 'must-not-fire: the listed member is claimed');
    await router.destroy(first.id);
  } finally {
    await router.close();
    await api.close();
  }
});

test('lifetime: a factory E2B pool declares the adapter’s 120 s lifetime (must-fire) / a declared lifetime is kept (must-not-fire)', () => {
  const lifetime = (ms) => ({ requires: { timeout: { requiredSandboxLifetimeMs: ms } } });
  const e2b = createSandboxRouter({ providers: { e2b: { apiKey: 'k', warm: { size: 1 } } } });
  assert.deepEqual(e2b.route(lifetime(100_000)), ['e2b'], 'within 120 s');
  assert.throws(() => e2b.route(lifetime(130_000)), (e) => e.code === 'NO_ELIGIBLE_PROVIDER', 'beyond the adapter’s own timeout');
  const longer = createSandboxRouter({ providers: { e2b: { apiKey: 'k', createTimeoutMs: 300_000 } } });
  assert.deepEqual(longer.route(lifetime(200_000)), ['e2b'], 'the entry’s createTimeoutMs');
  const declared = createSandboxRouter({ providers: { e2b: { apiKey: 'k', capabilities: { supported: ['syncExec'], timeout: { maxSandboxLifetimeMs: 3_600_000 } } } } });
  assert.deepEqual(declared.route(lifetime(1_800_000)), ['e2b'], 'the caller’s declaration is kept');
});

test('close(): a failed destroy is counted failed and its record kept (must-fire) / a successful one destroyed (must-not-fire)', async () => {
  let refuse = null;
  const rt = fakeRuntime({
    destroy: async (h) => {
      if (h.id === refuse) throw new Error(`provider down ${CANARY}`);
      rt.live.delete(h.id);
    },
  });
  const mappings = new InMemoryMappingStore();
  const r = router({ runtime: rt, warm: { size: 2 }, mappings });
  await r.warmUp();
  refuse = [...rt.live.keys()][0];
  const result = await r.close();
  assert.deepEqual(result, { destroyed: 1, failed: 1, kept: 0 });
  const records = await mappings.list();
  assert.deepEqual(records.map((m) => m.providerSandboxId), [refuse], 'reconcile finds it');
});

test('warmUp(): members that expire before the pool fills settle it with EXPIRING (must-fire) / a pool that fills settles ready (must-not-fire)', async () => {
  const c = clock();
  let pending = [];
  const rt = fakeRuntime({
    launch: (options) =>
      new Promise((resolve) => {
        pending.push(() => {
          const handle = { id: `x-${Math.random()}` };
          rt.live.set(handle.id, { handle, labels: options.labels });
          resolve(handle);
        });
      }),
  });
  const r = router({ runtime: rt, warm: { size: 6, maxIdleMs: 1_000, refill: { concurrency: 2 } }, clock: c.now });
  const report = r.warmUp();
  // Two at a time; each round of creates takes 800 ms on the router's clock: the first
  // round's members expire (at 1.8 s) before the third lands (2.4 s).
  for (let round = 0; round < 3; round++) {
    await waitFor(() => pending.length > 0);
    c.t += 800;
    const now = pending;
    pending = [];
    for (const land of now) land();
    await new Promise((res) => setTimeout(res, 20));
  }
  const settled = await report;
  assert.equal(settled.ready, false);
  assert.equal(settled.pools[0].reason, 'EXPIRING');
  for (const land of pending) land();
  await r.close();
  const ok = router({ warm: { size: 2, maxIdleMs: 1_000 } });
  assert.equal((await ok.warmUp()).ready, true);
  await ok.close();
});
