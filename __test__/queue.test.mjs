// The wait queue (issue 33, part 3, and the in-process half of part 5): option `queue`,
// `provision(request, { signal })`, `close()`, `queueStatus()`, the queue's events. Each
// guard has its must-fire / must-not-fire pair, named so. Real timers, short waits.
import test from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import {
  InMemoryProviderRegistry,
  SandboxRouter,
  ProviderCapacityExhaustedError,
  ProvisionAbortedError,
  QueueTimeoutError,
  SandboxRequestValidationError,
  SandboxRouterConfigurationError,
  NoEligibleProviderError,
  BudgetExhaustedError,
} from '../index.mjs';
import { CANARY, definition, fakeRuntime, leaks, recorder } from './fixtures.mjs';

const FAST = { launchesPerSecond: 20 }; // a token every 50 ms

/** A router over pool `a` (and `more` pools), with `queue` and the rest of `options`. */
function setup({ limit = FAST, queue = { maxWaitMs: 2_000 }, runtime = fakeRuntime(), def = {}, more = [], ...options } = {}) {
  const rec = recorder();
  const defs = [definition('a', { runtime, ...(limit ? { rateLimit: limit } : {}), ...def }), ...more];
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs), observer: rec.observer, ...(queue ? { queue } : {}), ...options });
  return { router, rec, runtime };
}

const ofType = (rec, type) => rec.events.filter((e) => e.type === type);
const launches = (rt) => rt.calls.filter((c) => c.op === 'launch').length;
const ticks = async (n = 20) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

test('queue must-fire: a burst over the rate limit waits its turn and every provision is served, first come first served', async () => {
  const { router, rec, runtime } = setup();
  const served = [];
  const all = Array.from({ length: 6 }, (_, i) => router.provision({}).then((s) => served.push(i) && s));
  const out = await Promise.all(all);
  assert.equal(out.length, 6);
  assert.deepEqual(served, [0, 1, 2, 3, 4, 5], 'FIFO');
  assert.equal(launches(runtime), 6);
  assert.equal(ofType(rec, 'queue.entered').length, 5, 'the first had a token');
  assert.equal(ofType(rec, 'queue.admitted').length, 5);
  assert.ok(ofType(rec, 'queue.admitted').every((e) => e.waitedMs >= 0 && typeof e.sandboxId === 'string'));
  assert.equal(ofType(rec, 'provision.exhausted').length, 0, 'a wait is no ending');
  assert.equal(router.queueStatus().depth, 0);
});

test('queue must-not-fire: without the option a provision with no token fails at once, as before', async () => {
  const { router, rec } = setup({ queue: null });
  await router.provision({});
  await assert.rejects(router.provision({}), (e) => e instanceof ProviderCapacityExhaustedError && e.code === 'LAUNCH_RATE_LIMITED');
  assert.equal(ofType(rec, 'queue.entered').length, 0);
  assert.equal(router.queueStatus().enabled, false);
});

test('waitable must-fire: capacity full waits, and a destroy in this process admits it at once (no re-check delay)', async () => {
  const runtime = fakeRuntime();
  const capacity = { getCapacity: async () => ({ status: 'known', resources: [{ resource: 'sandboxes', used: runtime.live.size, limit: 1, unit: 'sandboxes', headroom: 1 - runtime.live.size, required: 1 }] }) };
  const { router, rec } = setup({ limit: null, runtime, def: { capacity }, capacity: { providerOrder: ['a'] } });
  const first = await router.provision({});
  let second = null;
  const waiting = router.provision({}).then((s) => (second = s));
  await ticks();
  assert.equal(router.queueStatus().depth, 1);
  assert.equal(second, null);
  runtime.live.clear(); // the provider's count drops with the destroy below
  await router.destroy(first.id);
  await ticks();
  assert.notEqual(second, null, 'woken by the release, not by the 1 s re-check');
  await waiting;
  assert.equal(ofType(rec, 'queue.admitted').length, 1);
});

test('waitable must-not-fire: no eligible pool or an unreadable capacity fail at once with a queue', async () => {
  const { router } = setup({ limit: null });
  await assert.rejects(router.provision({ requires: { requiredCapabilities: ['pty'] } }), NoEligibleProviderError);
  const unknown = setup({ limit: null, def: { capacity: { getCapacity: async () => ({ status: 'unknown', reason: 'READ_FAILED' }) } }, capacity: { providerOrder: ['a'] } });
  await assert.rejects(unknown.router.provision({}), (e) => e.code === 'PROVIDER_CAPACITY_EXHAUSTED');
  assert.equal(ofType(unknown.rec, 'queue.entered').length, 0);
});

test('waitable must-fire: a budget concurrent slot waits for the release; must-not-fire: a spent cost window fails at once', async () => {
  const tenant = (value) => ({ launch: { labels: { tenant: value } } });
  const slot = setup({ limit: null, budgets: [{ id: 'live', key: { label: 'tenant' }, limit: { concurrent: 1 } }] });
  const first = await slot.router.provision(tenant('acme'));
  const waiting = slot.router.provision(tenant('acme'));
  await ticks();
  assert.equal(slot.router.queueStatus().depth, 1);
  // Another tenant is not held back by acme's slot.
  assert.equal((await slot.router.provision(tenant('zeta'))).providerId, 'a');
  await slot.router.destroy(first.id);
  assert.equal((await waiting).providerId, 'a');
  const spend = setup({ limit: null, budgets: [{ id: 'spend', key: { label: 'tenant' }, limit: { cost: 0.01 }, window: { slidingMs: 3_600_000 } }], def: { signals: { estimatedCost: 0.01 } } });
  await spend.router.provision(tenant('acme'));
  await assert.rejects(spend.router.provision(tenant('acme')), BudgetExhaustedError);
  assert.equal(ofType(spend.rec, 'queue.entered').length, 0);
});

test('timeout must-fire: past maxWaitMs a QueueTimeoutError, retryable, with the wait and what blocked; no secret in it', async () => {
  const { router, rec } = setup({ limit: { launchesPerSecond: 1 }, queue: { maxWaitMs: 150 }, def: { env: { TOKEN: CANARY } } });
  await router.provision({});
  const started = Date.now();
  await assert.rejects(router.provision({}), (e) => {
    assert.ok(e instanceof QueueTimeoutError);
    assert.equal(e.code, 'QUEUE_TIMEOUT');
    assert.equal(e.retryable, true);
    assert.ok(e.waitedMs >= 150 && e.waitedMs < 1_000, `${e.waitedMs}`);
    assert.deepEqual(e.capacityRejections.map((r) => [r.providerId, r.reason]), [['a', 'RATE_LIMITED']]);
    assert.equal(leaks(e), false);
    return true;
  });
  assert.ok(Date.now() - started >= 140);
  assert.equal(ofType(rec, 'queue.timeout').length, 1);
  assert.deepEqual(ofType(rec, 'provision.exhausted').map((e) => e.code), ['QUEUE_TIMEOUT']);
  assert.equal(router.queueStatus().depth, 0);
});

test('timeout must-not-fire: a wait shorter than maxWaitMs is admitted', async () => {
  const { router, rec } = setup({ limit: { launchesPerSecond: 10 }, queue: { maxWaitMs: 1_000 } });
  await router.provision({});
  assert.equal((await router.provision({})).providerId, 'a');
  assert.equal(ofType(rec, 'queue.timeout').length, 0);
  assert.ok(ofType(rec, 'queue.admitted')[0].waitedMs >= 50);
});

test('depth must-fire: past maxDepth QUEUE_FULL at once; must-not-fire: at the depth every one waits', async () => {
  const { router, runtime } = setup({ queue: { maxWaitMs: 2_000, maxDepth: 2 } });
  await router.provision({});
  const waiters = [router.provision({}), router.provision({})];
  await assert.rejects(router.provision({}), (e) => e instanceof ProviderCapacityExhaustedError && e.code === 'QUEUE_FULL' && e.retryable === true);
  assert.equal((await Promise.all(waiters)).length, 2, 'the two within the depth are served');
  assert.equal(launches(runtime), 3);
});

test('abort must-fire: a waiting provision aborted ends ABORTED, nothing launched, nothing held, the listener removed', async () => {
  const { router, runtime } = setup({ limit: { launchesPerSecond: 1 } });
  await router.provision({});
  const ac = new AbortController();
  const waiting = router.provision({}, { signal: ac.signal });
  await ticks();
  assert.equal(router.queueStatus().depth, 1);
  ac.abort();
  await assert.rejects(waiting, (e) => e instanceof ProvisionAbortedError && e.code === 'ABORTED');
  assert.equal(launches(runtime), 1);
  assert.equal(router.queueStatus().depth, 0);
  assert.equal(getEventListeners(ac.signal, 'abort').length, 0);
  // Already aborted: ends before anything is asked.
  await assert.rejects(router.provision({}, { signal: AbortSignal.abort() }), (e) => e.code === 'ABORTED');
  assert.equal(launches(runtime), 1);
  // The token it did not take is still there for the next.
  await new Promise((r) => setTimeout(r, 1_000));
  assert.equal((await router.provision({})).providerId, 'a');
});

test('abort must-not-fire: after admission the launch under way finishes and the provision succeeds; a long-lived signal keeps no listener', async () => {
  let release;
  const gate = new Promise((r) => (release = r));
  const runtime = fakeRuntime({ launch: async () => (await gate, { id: 'remote-slow' }) });
  const { router } = setup({ limit: null, runtime });
  const ac = new AbortController();
  const p = router.provision({}, { signal: ac.signal });
  await ticks();
  ac.abort();
  release();
  assert.equal((await p).providerId, 'a');
  const shared = new AbortController();
  const quick = setup({ limit: null });
  for (let i = 0; i < 20; i++) await quick.router.provision({}, { signal: shared.signal });
  assert.equal(getEventListeners(shared.signal, 'abort').length, 0);
});

test('signal must-fire: a signal that is not an AbortSignal is INVALID_REQUEST; must-not-fire: an absent one is fine', async () => {
  const { router } = setup({ limit: null });
  await assert.rejects(router.provision({}, { signal: { aborted: false } }), (e) => e instanceof SandboxRequestValidationError && e.field === 'options.signal');
  assert.equal((await router.provision({}, {})).providerId, 'a');
  assert.equal((await router.provision({}, undefined)).providerId, 'a');
});

test('close must-fire: close() rejects waiting provisions with ROUTER_CLOSED; must-not-fire: later provisions do not wait', async () => {
  const { router, runtime } = setup({ limit: { launchesPerSecond: 1 } });
  await router.provision({});
  const waiting = [router.provision({}), router.provision({})];
  await ticks();
  await router.close();
  for (const w of waiting) await assert.rejects(w, (e) => e instanceof ProvisionAbortedError && e.code === 'ROUTER_CLOSED');
  await assert.rejects(router.provision({}), (e) => e.code === 'LAUNCH_RATE_LIMITED');
  assert.equal(launches(runtime), 1);
});

test('fairness must-fire: with fairBy a burst of one tenant waits behind itself and a quiet tenant goes next; must-not-fire: FIFO without it', async () => {
  const order = async (queue) => {
    const { router } = setup({ limit: { launchesPerSecond: 50 }, queue });
    await router.provision({});
    const served = [];
    const burst = Array.from({ length: 6 }, () => router.provision({ launch: { labels: { tenant: 'burst' } } }).then(() => served.push('burst')));
    await ticks(2);
    const steady = router.provision({ launch: { labels: { tenant: 'steady' } } }).then(() => served.push('steady'));
    const status = router.queueStatus();
    await Promise.all([...burst, steady]);
    return { served, status };
  };
  const fair = await order({ maxWaitMs: 5_000, fairBy: { label: 'tenant' } });
  assert.ok(fair.served.indexOf('steady') <= 1, `steady served at ${fair.served.indexOf('steady')}: ${fair.served}`);
  assert.deepEqual(fair.status.byKey.map((l) => [l.value, l.depth]), [['burst', 6], ['steady', 1]]);
  const fifo = await order({ maxWaitMs: 5_000 });
  assert.equal(fifo.served.indexOf('steady'), 6, `${fifo.served}`);
  assert.deepEqual(fifo.status.byKey, []);
});

test('Retry-After with a queue: the 429ed provision waits out the cooldown and retries; the others wait too; one create per window', async () => {
  const creates = [];
  let refusedAt = 0;
  const runtime = fakeRuntime({
    launch: async () => {
      creates.push(Date.now());
      if (creates.length === 1) {
        refusedAt = Date.now();
        throw Object.assign(new Error('429'), { status: 429, retryAfterMs: 200 });
      }
      return { id: `r-${creates.length}` };
    },
  });
  const classifyProviderFailure = (e) => ({ code: 'PROVIDER_RATE_LIMITED', retryable: true, retryAfterMs: e.retryAfterMs });
  const { router, rec } = setup({ limit: null, runtime, classifyProviderFailure });
  const first = router.provision({});
  await ticks();
  const out = await Promise.all([first, router.provision({}), router.provision({})]);
  assert.equal(out.length, 3);
  assert.equal(creates.length, 4, 'one 429, then the three creates');
  assert.ok(creates.slice(1).every((t) => t >= refusedAt + 195), 'none during the cooldown');
  assert.equal(ofType(rec, 'pool.cooldown.started').length, 1);
  assert.equal(ofType(rec, 'pool.cooldown.ended').length, 1);
});

test('queueStatus: depth, oldest wait and each pool tokens and cooldown', async () => {
  const classifyProviderFailure = () => ({ code: 'PROVIDER_RATE_LIMITED', retryable: true, retryAfterMs: 60_000 });
  const runtime = fakeRuntime({ launch: async () => Promise.reject(new Error('429')) });
  const { router } = setup({ limit: { launchesPerSecond: 1, burst: 3 }, runtime, classifyProviderFailure, more: [definition('b')] });
  const before = router.queueStatus();
  assert.deepEqual(before.pools, [{ providerId: 'a', tokens: 3 }, { providerId: 'b' }]);
  await assert.rejects(router.provision({ routing: { maxAcquisitionAttempts: 1 } }));
  const after = router.queueStatus().pools[0];
  assert.equal(after.tokens, 0, 'cooling: no token');
  assert.ok(Date.parse(after.coolingUntil) > Date.now() + 50_000);
});

test('options must-fire: a bad queue option names its field; must-not-fire: true and {} take the defaults', () => {
  const registry = new InMemoryProviderRegistry([definition('a')]);
  for (const [queue, field] of [
    [{ maxWaitMs: 0 }, 'queue.maxWaitMs'],
    [{ maxDepth: 1.5 }, 'queue.maxDepth'],
    [{ fairBy: { label: '' } }, 'queue.fairBy.label'],
    [{ fairby: {} }, 'queue.fairby'],
    ['yes', 'queue'],
  ]) {
    assert.throws(() => new SandboxRouter({ registry, queue }), (e) => e instanceof SandboxRouterConfigurationError && e.field === field, field);
  }
  assert.equal(new SandboxRouter({ registry, queue: true }).queueStatus().enabled, true);
  assert.equal(new SandboxRouter({ registry, queue: {} }).queueStatus().enabled, true);
  assert.equal(new SandboxRouter({ registry, queue: false }).queueStatus().enabled, false);
});
