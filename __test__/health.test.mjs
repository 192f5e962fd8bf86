// Live health from real outcomes (issue 17): statistics, the circuit breaker and its
// half-open trial, events, explain, exact providerId, observed signals, option errors, and
// the chaos run. Every threshold and transition has a must-fire / must-not-fire pair. The
// clock is injected: the same outcomes at the same instants give the same states.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  InMemoryProviderRegistry,
  SandboxRouter,
  NoEligibleProviderError,
  AcquisitionTimeoutError,
  ProviderProvisioningError,
  SandboxRouterConfigurationError,
} from '../index.mjs';
import { CANARY, definition, fakeRuntime, recorder, leaks } from './fixtures.mjs';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');

/** A clock the test moves. */
function fakeClock() {
  const c = { now: T0, advance: (ms) => (c.now += ms) };
  c.read = () => c.now;
  return c;
}

/**
 * A runtime whose behaviour the test switches: 'ok' (a handle after `latencyMs` of the
 * fake clock), 'throw' (outcome unknown unless classified), 'hang' (never settles),
 * 'malformed', or 'retryable' (throws; the classifier below proves it pre-allocation).
 */
function switchable(clock, latencyMs = 100) {
  let n = 0;
  const rt = fakeRuntime({
    launch: async () => {
      switch (rt.mode) {
        case 'hang':
          return new Promise(() => {});
        case 'throw':
          throw new Error(`provider exploded ${CANARY}`);
        case 'retryable':
          throw Object.assign(new Error(`pre-allocation ${CANARY}`), { preAllocation: true });
        case 'capacity':
          throw Object.assign(new Error(`quota ${CANARY}`), { capacity: true });
        case 'malformed':
          return { nope: true };
        default:
          clock.advance(latencyMs);
          return { id: `remote-${++n}` };
      }
    },
  });
  rt.mode = 'ok';
  return rt;
}

const classify = (error) => {
  if (error?.preAllocation) return { code: 'PROVIDER_PRE_ALLOCATION', retryable: true };
  if (error?.capacity) return { code: 'PROVIDER_CAPACITY_EXHAUSTED', retryable: true };
  return null;
};

/** Three pools, `a` cheapest (first under `cost`), then `b`, then `c`. */
function setup(health = {}, extra = {}) {
  const clock = fakeClock();
  const rts = { a: switchable(clock), b: switchable(clock), c: switchable(clock) };
  const defs = [
    definition('a', { runtime: rts.a, signals: { estimatedCost: 0.01 } }),
    definition('b', { runtime: rts.b, signals: { estimatedCost: 0.02 } }),
    definition('c', { runtime: rts.c, signals: { estimatedCost: 0.03 } }),
  ];
  const rec = recorder();
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry(defs),
    observer: rec.observer,
    classifyProviderFailure: classify,
    health: { clock: clock.read, failureThreshold: 3, retryableFailureThreshold: 4, cooldownMs: 10_000, maxCooldownMs: 25_000, ...health },
    ...extra,
  });
  return { router, rts, clock, rec };
}

const CHEAP = { routing: { strategy: 'cost', acquisitionTimeoutMs: 30 } };
const poolOf = (router, id) => router.health().find((p) => p.providerId === id);
const settle = (p) => p.then((v) => ({ ok: v }), (e) => ({ error: e }));

async function failTimes(router, n, request = CHEAP) {
  for (let i = 0; i < n; i++) await settle(router.provision(request));
}

test('health(): plain data per pool, numbers and codes only, from real outcomes', async () => {
  const { router, rts } = setup();
  const fresh = router.health();
  assert.deepEqual(
    fresh.map((p) => [p.providerId, p.state, p.samples, p.successRate, p.latencyMs]),
    [
      ['a', 'closed', 0, null, null],
      ['b', 'closed', 0, null, null],
      ['c', 'closed', 0, null, null],
    ],
  );
  await router.provision(CHEAP);
  await router.provision(CHEAP);
  rts.a.mode = 'throw';
  await settle(router.provision(CHEAP));
  const a = poolOf(router, 'a');
  assert.equal(a.samples, 3);
  assert.equal(a.latencyMs, 100, 'launch to handle, measured on the injected clock');
  assert.ok(a.p95LatencyMs >= 100 && a.p95LatencyMs <= 120, String(a.p95LatencyMs));
  assert.ok(a.successRate > 0.9 && a.successRate < 1, String(a.successRate));
  assert.equal(a.consecutiveFailures, 1);
  assert.equal(a.retryAt, null);
  assert.equal(leaks(router.health()), false, 'no provider text in health data');
  assert.deepEqual(Object.keys(a).sort(), [
    'consecutiveFailures',
    'consecutiveRetryableFailures',
    'cooldownMs',
    'latencyMs',
    'p95LatencyMs',
    'providerId',
    'retryAt',
    'samples',
    'state',
    'successRate',
    'trialInFlight',
    'cause',
  ].sort());
});

test('must fire: failureThreshold consecutive outcome-unknown failures open the circuit (CIRCUIT_OPEN, event, retry time)', async () => {
  const { router, rts, rec } = setup();
  rts.a.mode = 'throw';
  await failTimes(router, 3);
  const a = poolOf(router, 'a');
  assert.equal(a.state, 'open');
  assert.equal(a.cause, 'CONSECUTIVE_FAILURES');
  assert.equal(a.retryAt, new Date(T0 + 10_000).toISOString());
  const opened = rec.events.filter((e) => e.type === 'health.circuit.opened');
  assert.equal(opened.length, 1);
  assert.deepEqual(
    { ...opened[0], at: undefined, sandboxId: undefined },
    { type: 'health.circuit.opened', at: undefined, sandboxId: undefined, providerId: 'a', reason: 'CONSECUTIVE_FAILURES', consecutiveFailures: 3, cooldownMs: 10_000, retryAt: a.retryAt },
  );
  assert.deepEqual(router.route(CHEAP), ['b', 'c'], 'routed around');
  const x = await router.explain(CHEAP);
  const rejected = x.rejected.find((r) => r.providerId === 'a');
  assert.deepEqual(rejected.reasons, [{ code: 'CIRCUIT_OPEN', detail: `circuit open (CONSECUTIVE_FAILURES); retry at ${a.retryAt}` }]);
  assert.match(x.summary, /2\/3 providers eligible: 1 circuit open/);
  const served = await router.provision(CHEAP);
  assert.equal(served.providerId, 'b');
});

test('must not fire: one failure short of the threshold, or a success in between, keeps it closed', async () => {
  const { router, rts, rec } = setup();
  rts.a.mode = 'throw';
  await failTimes(router, 2);
  rts.a.mode = 'ok';
  await router.provision(CHEAP);
  rts.a.mode = 'throw';
  await failTimes(router, 2);
  assert.equal(poolOf(router, 'a').state, 'closed');
  assert.equal(poolOf(router, 'a').consecutiveFailures, 2);
  assert.deepEqual(router.route(CHEAP), ['a', 'b', 'c']);
  assert.equal(rec.types().includes('health.circuit.opened'), false);
});

test('must fire: acquisition timeouts and malformed handles count toward the threshold', async () => {
  const { router, rts } = setup();
  rts.a.mode = 'hang';
  for (let i = 0; i < 2; i++) {
    const r = await settle(router.provision(CHEAP));
    assert.ok(r.error instanceof AcquisitionTimeoutError);
  }
  rts.a.mode = 'malformed';
  await settle(router.provision(CHEAP));
  assert.equal(poolOf(router, 'a').state, 'open');
});

test('must fire: retryable pre-allocation failures open the circuit at their own threshold; must not: below it, nor toward the other', async () => {
  const { router, rts } = setup();
  rts.a.mode = 'retryable';
  await failTimes(router, 3);
  assert.equal(poolOf(router, 'a').state, 'closed', 'below retryableFailureThreshold (4)');
  assert.equal(poolOf(router, 'a').consecutiveRetryableFailures, 3);
  assert.equal(poolOf(router, 'a').consecutiveFailures, 0, 'counted separately');
  await failTimes(router, 1);
  assert.equal(poolOf(router, 'a').state, 'open');
  assert.equal(poolOf(router, 'a').cause, 'CONSECUTIVE_RETRYABLE_FAILURES');
});

test('must not fire: capacity exhaustion is not a health failure', async () => {
  const { router, rts } = setup();
  rts.a.mode = 'capacity';
  await failTimes(router, 10);
  const a = poolOf(router, 'a');
  assert.equal(a.state, 'closed');
  assert.equal(a.samples, 0);
});

test('half-open: after the cooldown exactly one trial may use the pool; success closes it', async () => {
  const { router, rts, clock, rec } = setup();
  rts.a.mode = 'throw';
  await failTimes(router, 3);
  clock.advance(9_999);
  assert.deepEqual(router.route(CHEAP), ['b', 'c'], 'must not fire: before retryAt');
  clock.advance(1);
  assert.equal(poolOf(router, 'a').state, 'half-open');
  assert.deepEqual(router.route(CHEAP), ['a', 'b', 'c'], 'must fire: the trial may use it');
  // The trial hangs until we let it go; meanwhile every other provision is routed around.
  let release;
  rts.a.launch = () => new Promise((resolve) => (release = () => resolve({ id: 'recovered' })));
  const trial = router.provision({ routing: { strategy: 'cost', acquisitionTimeoutMs: 5_000 } });
  await new Promise((r) => setImmediate(r));
  assert.equal(poolOf(router, 'a').trialInFlight, true);
  assert.deepEqual(router.route(CHEAP), ['b', 'c'], 'exactly one trial at a time');
  const other = await router.provision(CHEAP);
  assert.equal(other.providerId, 'b');
  const x = await router.explain(CHEAP);
  assert.deepEqual(x.rejected[0].reasons, [{ code: 'CIRCUIT_OPEN', detail: 'circuit half-open: a trial provision is in flight' }]);
  release();
  assert.equal((await trial).providerId, 'a');
  assert.equal(poolOf(router, 'a').state, 'closed');
  const types = rec.types();
  assert.ok(types.indexOf('health.circuit.half-open') < types.indexOf('health.circuit.closed'));
  assert.deepEqual(router.route(CHEAP), ['a', 'b', 'c']);
});

test('a failed trial reopens the circuit with a longer, bounded cooldown', async () => {
  const { router, rts, clock, rec } = setup();
  rts.a.mode = 'throw';
  await failTimes(router, 3);
  const cooldowns = [];
  for (let i = 0; i < 3; i++) {
    clock.now = Date.parse(poolOf(router, 'a').retryAt);
    const r = await settle(router.provision(CHEAP));
    assert.ok(r.error instanceof ProviderProvisioningError, 'the trial ran on a');
    cooldowns.push(poolOf(router, 'a').cooldownMs);
  }
  assert.deepEqual(cooldowns, [20_000, 25_000, 25_000]);
  assert.deepEqual(
    rec.events.filter((e) => e.type === 'health.circuit.opened').map((e) => e.reason),
    ['CONSECUTIVE_FAILURES', 'TRIAL_FAILED', 'TRIAL_FAILED', 'TRIAL_FAILED'],
  );
});

test('must fire: an exact providerId on an open circuit is refused with CIRCUIT_OPEN; must not: rerouted', async () => {
  const { router, rts } = setup();
  rts.a.mode = 'throw';
  await failTimes(router, 3);
  const launchesOnB = rts.b.calls.length;
  const r = await settle(router.provision({ providerId: 'a' }));
  assert.ok(r.error instanceof NoEligibleProviderError);
  const a = r.error.rejections.find((x) => x.providerId === 'a');
  assert.equal(a.reasons[0].code, 'CIRCUIT_OPEN');
  assert.match(a.reasons[0].detail, /retry at 2026-01-01T00:00:10.000Z/);
  assert.equal(rts.b.calls.length, launchesOnB, 'never silently rerouted');
  assert.throws(() => router.route({ providerId: 'a' }), NoEligibleProviderError);
});

test('must fire: a candidate whose circuit opened after the route was decided is passed over (health.skipped), never launched', async () => {
  const clock = fakeClock();
  const rts = { a: switchable(clock), b: switchable(clock), c: switchable(clock) };
  // Under `cost`: a, b, c. Under `latency` (cold start): b, a, c.
  const defs = [
    definition('a', { runtime: rts.a, signals: { estimatedCost: 0.01, coldStartLatencyMs: 200, readyLatencyMs: 200 } }),
    definition('b', { runtime: rts.b, signals: { estimatedCost: 0.02, coldStartLatencyMs: 100, readyLatencyMs: 100 } }),
    definition('c', { runtime: rts.c, signals: { estimatedCost: 0.03, coldStartLatencyMs: 300, readyLatencyMs: 300 } }),
  ];
  const rec = recorder();
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry(defs),
    observer: rec.observer,
    classifyProviderFailure: classify,
    health: { clock: clock.read, failureThreshold: 3 },
  });
  rts.a.mode = 'throw';
  await failTimes(router, 2);
  // The latency-ranked provision launches on b first; b fails later, proven pre-allocation,
  // so it falls back to a, whose circuit a third failure opened in the meantime.
  let releaseB = () => {};
  rts.b.launch = () => new Promise((_, reject) => (releaseB = () => reject(Object.assign(new Error(CANARY), { preAllocation: true }))));
  const viaB = router.provision({ routing: { strategy: 'latency', maxAcquisitionAttempts: 3 } });
  await new Promise((r) => setImmediate(r));
  await settle(router.provision(CHEAP));
  assert.equal(poolOf(router, 'a').state, 'open');
  const launchesOnA = rts.a.calls.length;
  releaseB();
  const r = await viaB;
  assert.equal(r.providerId, 'c', 'served by the next candidate');
  assert.equal(rts.a.calls.length, launchesOnA, 'a was not launched');
  const skipped = rec.events.filter((e) => e.type === 'health.skipped');
  assert.deepEqual(skipped.map((e) => [e.providerId, e.reason, e.sandboxId]), [['a', 'CIRCUIT_OPEN', r.id]]);
});

test('must not fire: a candidate whose circuit stays closed is launched, not passed over', async () => {
  const { router, rts, rec } = setup();
  rts.a.mode = 'retryable';
  const r = await router.provision({ routing: { strategy: 'cost', maxAcquisitionAttempts: 3 } });
  assert.equal(r.providerId, 'b');
  assert.equal(rec.types().includes('health.skipped'), false);
});

test('observed signals: off by default (declared only); opted in, ranking blends them once a pool has minSamples', async () => {
  const { router: plain } = setup();
  for (let i = 0; i < 5; i++) await plain.provision(CHEAP);
  const declaredOnly = await plain.explain({ routing: { strategy: 'latency', latencyObjective: 'ready' } });
  assert.equal('observed' in declaredOnly.eligible[0].breakdown.latency, false, 'must not fire: not opted in');

  const { router } = setup({ observedSignals: true, minSamples: 3 });
  // a declares 1000 ms ready latency like the others; it really answers in 100 ms.
  for (let i = 0; i < 2; i++) await router.provision(CHEAP);
  let x = await router.explain({ routing: { strategy: 'latency', latencyObjective: 'ready' } });
  let a = x.eligible.find((p) => p.providerId === 'a');
  assert.deepEqual([a.breakdown.latency.raw, a.breakdown.latency.declared, a.breakdown.latency.observed], [1000, 1000, null], 'must not fire: below minSamples');
  await router.provision(CHEAP);
  x = await router.explain({ routing: { strategy: 'latency', latencyObjective: 'ready' } });
  a = x.eligible.find((p) => p.providerId === 'a');
  assert.equal(a.breakdown.latency.declared, 1000);
  assert.equal(a.breakdown.latency.observed, 100);
  assert.equal(a.breakdown.latency.raw, 550, 'blend: n/(n+minSamples) = 3/6 of observed');
  assert.equal(a.breakdown.reliability.declared, 0.99);
  assert.equal(a.breakdown.reliability.observed, 1);
  assert.equal(x.eligible[0].providerId, 'a', 'ranked first on its observed latency');
  assert.deepEqual(router.route({ routing: { strategy: 'latency', latencyObjective: 'ready' } })[0], 'a', 'route agrees with explain');
});

test('tracking off (health: false): no statistics, no circuit, health() is empty', async () => {
  const clock = fakeClock();
  const rt = switchable(clock);
  rt.mode = 'throw';
  const off = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]), health: false });
  for (let i = 0; i < 10; i++) await settle(off.provision(CHEAP));
  assert.deepEqual(off.health(), []);
  assert.deepEqual(off.route(CHEAP), ['a'], 'must not fire: ten outcome-unknown failures open nothing');
});

test('bad health options are typed INVALID_CONFIGURATION errors naming the field', () => {
  const registry = new InMemoryProviderRegistry([definition('a')]);
  const cases = [
    [{ health: 'yes' }, 'health'],
    [{ health: { failureThreshold: 0 } }, 'health.failureThreshold'],
    [{ health: { retryableFailureThreshold: 1.5 } }, 'health.retryableFailureThreshold'],
    [{ health: { cooldownMs: -1 } }, 'health.cooldownMs'],
    [{ health: { cooldownMs: 1000, maxCooldownMs: 10 } }, 'health.maxCooldownMs'],
    [{ health: { halfLife: 0 } }, 'health.halfLife'],
    [{ health: { minSamples: 'x' } }, 'health.minSamples'],
    [{ health: { observedSignals: 1 } }, 'health.observedSignals'],
    [{ health: { clock: 5 } }, 'health.clock'],
    [{ health: { nope: 1 } }, 'health.nope'],
  ];
  for (const [options, field] of cases) {
    assert.throws(
      () => new SandboxRouter({ registry, ...options }),
      (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field === field,
      field,
    );
  }
  // Must not fire: valid forms.
  for (const health of [undefined, true, false, {}, { failureThreshold: 1, cooldownMs: 1, maxCooldownMs: 1 }]) {
    assert.ok(new SandboxRouter({ registry, health }));
  }
});

test('a clock that throws or answers nonsense fails the provision with a typed error, never a crash', async () => {
  const registry = new InMemoryProviderRegistry([definition('a')]);
  const router = new SandboxRouter({ registry, health: { clock: () => NaN } });
  const r = await settle(router.provision({}));
  assert.ok(r.error instanceof SandboxRouterConfigurationError);
  assert.equal(r.error.field, 'health.clock');
  const throwing = new SandboxRouter({
    registry,
    health: {
      clock: () => {
        throw new Error(CANARY);
      },
    },
  });
  const t = await settle(throwing.provision({}));
  assert.ok(t.error instanceof SandboxRouterConfigurationError);
  assert.equal(leaks(t.error), false);
  assert.throws(() => throwing.route({}), SandboxRouterConfigurationError);
  // Must not fire: a clock answering numbers is used as is.
  assert.equal((await new SandboxRouter({ registry, health: { clock: () => 0 } }).provision({})).providerId, 'a');
});

test('the default clock (read natively, no clock option): retry times are wall-clock times', async () => {
  const rt = fakeRuntime({
    launch: async () => {
      throw new Error(CANARY);
    },
  });
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]), health: { failureThreshold: 1, cooldownMs: 60_000 } });
  const before = Date.now();
  await settle(router.provision({}));
  const after = Date.now();
  const [a] = router.health();
  assert.equal(a.state, 'open');
  const retryAt = Date.parse(a.retryAt);
  assert.ok(retryAt >= before + 60_000 - 1 && retryAt <= after + 60_000 + 1, `${a.retryAt} vs ${new Date(before).toISOString()}`);
  assert.throws(() => router.route({}), NoEligibleProviderError);
});

test('determinism: the same outcome sequence at the same instants gives the same health', async () => {
  async function replay() {
    const { router, rts, clock } = setup();
    const script = ['ok', 'throw', 'ok', 'retryable', 'throw', 'throw', 'throw', 'ok', 'malformed', 'ok'];
    for (const mode of script) {
      rts.a.mode = mode;
      await settle(router.provision(CHEAP));
      clock.advance(3_000);
    }
    return router.health();
  }
  assert.deepEqual(await replay(), await replay());
});

test('chaos: the best of three pools starts hanging mid-run; routed around within the threshold, probed after the cooldown, returned to once it recovers', async () => {
  const { router, rts, clock, rec } = setup({ failureThreshold: 3, cooldownMs: 10_000 });
  const TIMEOUT = 40;
  const request = { routing: { strategy: 'cost', acquisitionTimeoutMs: TIMEOUT } };
  const served = [];
  const timed = async () => {
    const start = performance.now();
    const r = await settle(router.provision(request));
    const took = performance.now() - start;
    // No provision waits more than one acquisition timeout because of the hanging pool.
    assert.ok(took < TIMEOUT + 200, `took ${took} ms`);
    served.push(r.ok?.providerId ?? r.error.code);
    clock.advance(100);
    return r;
  };
  for (let i = 0; i < 5; i++) await timed();
  rts.a.mode = 'hang';
  for (let i = 0; i < 10; i++) await timed();
  assert.deepEqual(served.slice(0, 5), ['a', 'a', 'a', 'a', 'a']);
  assert.deepEqual(served.slice(5, 8), ['ACQUISITION_TIMEOUT', 'ACQUISITION_TIMEOUT', 'ACQUISITION_TIMEOUT'], 'exactly the threshold');
  assert.deepEqual(served.slice(8, 15), Array(7).fill('b'), 'served from the others');
  // After the cooldown: one probe, still hanging: reopened.
  clock.now = Date.parse(poolOf(router, 'a').retryAt);
  await timed();
  assert.equal(served.at(-1), 'ACQUISITION_TIMEOUT', 'the probe');
  await timed();
  assert.equal(served.at(-1), 'b');
  // It recovers; after the (longer) cooldown the probe succeeds and the router returns to it.
  rts.a.mode = 'ok';
  clock.now = Date.parse(poolOf(router, 'a').retryAt);
  for (let i = 0; i < 3; i++) await timed();
  assert.deepEqual(served.slice(-3), ['a', 'a', 'a']);
  assert.deepEqual(
    rec.types().filter((t) => t.startsWith('health.circuit')),
    ['health.circuit.opened', 'health.circuit.half-open', 'health.circuit.opened', 'health.circuit.half-open', 'health.circuit.closed'],
  );
});

test('router clock must-fire: without health.clock, health reads the router option clock (retryAt on its time)', async () => {
  const rt = fakeRuntime({
    launch: async () => {
      throw new Error(CANARY);
    },
  });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]),
    clock: () => T0,
    health: { failureThreshold: 1, cooldownMs: 60_000 },
  });
  await settle(router.provision({}));
  assert.equal(poolOf(router, 'a').retryAt, new Date(T0 + 60_000).toISOString());
});

test('router clock must-not-fire: health.clock, when given, wins over the router clock', async () => {
  const rt = fakeRuntime({
    launch: async () => {
      throw new Error(CANARY);
    },
  });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]),
    clock: () => T0,
    health: { failureThreshold: 1, cooldownMs: 60_000, clock: () => T0 + 5_000 },
  });
  await settle(router.provision({}));
  assert.equal(poolOf(router, 'a').retryAt, new Date(T0 + 65_000).toISOString());
});

test('router clock: a clock that is not a function, throws or answers nonsense is a typed error naming clock', async () => {
  const registry = new InMemoryProviderRegistry([definition('a')]);
  assert.throws(
    () => new SandboxRouter({ registry, clock: 5 }),
    (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field === 'clock',
  );
  const throwing = new SandboxRouter({
    registry,
    clock: () => {
      throw new Error(CANARY);
    },
  });
  const r = await settle(throwing.provision({}));
  assert.ok(r.error instanceof SandboxRouterConfigurationError);
  assert.equal(r.error.field, 'clock');
  assert.equal(leaks(r.error), false);
  const nan = await settle(new SandboxRouter({ registry, clock: () => NaN }).provision({}));
  assert.equal(nan.error?.field, 'clock');
});
