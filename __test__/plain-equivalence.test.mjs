// The native router and the plain-JS baseline (bench/plain-router.mjs) make the same
// decision: same eligible order, same rejected set, same error code and field for an
// invalid request, on randomly generated pools, signals and requests.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { routeProviders, InMemoryProviderRegistry, SandboxRouter } from '../index.js';
import { routePlain, routePrepared, prepareRegistry, parseRequest, explainPlain, explainPrepared, NAMED_CAPABILITIES } from '../bench/plain-router.mjs';

const RUNS = 3000;

// Vocabulary (capabilities.rs). A few names recur often so requirements do match pools.
const COMMON_CAPS = ['pty', 'ssh', 'docker', 'fileTransfer', 'syncExec', 'snapshots', 'x-fpga'];
const RARE_CAPS = NAMED_CAPABILITIES.filter((c) => !COMMON_CAPS.includes(c)).concat(['x-tpu']);
const REGIONS = ['eu-west', 'us-east', 'ap-south', 'eu-central'];
const BINARIES = ['node', 'git', 'python3', 'bash'];
const IMAGES = ['agent-v4', 'agent-v5'];
const RESTRICTIONS = ['read-only-root', 'no-new-privileges'];
const EGRESS = ['none', 'allowlist', 'open'];
const SEMANTICS = ['command-lifetime', 'sandbox-lifetime', 'idle'];
const DURABILITY = ['ephemeral', 'session', 'persistent'];
const ISOLATION = ['none', 'process', 'container', 'gvisor', 'microvm', 'vm'];

// Round numbers (ties), short decimals, and full-precision doubles: JSON text carries the
// shortest round-trip form, which the native side must read back as the very same double.
const round = (digits) => (x) => Math.round(x * 10 ** digits) / 10 ** digits;
const amount = fc.oneof(
  fc.constantFrom(0, 0.5, 1, 2, 10, 100),
  fc.integer({ min: 0, max: 5000 }),
  fc.double({ min: 0, max: 1000, noNaN: true }).map(round(3)),
  fc.double({ min: 0, max: 1e6, noNaN: true }),
);
const latency = fc.oneof(fc.constantFrom(0, 100, 250, 900, 2000), fc.integer({ min: 0, max: 10_000 }), fc.double({ min: 0, max: 10_000, noNaN: true }));
const rate = fc.oneof(fc.constantFrom(0, 0.5, 0.9, 0.99, 1), fc.double({ min: 0, max: 1, noNaN: true }).map(round(4)), fc.double({ min: 0, max: 1, noNaN: true }));
const ms = fc.constantFrom(0, 100, 500, 1000, 5000, 60_000, 3_600_000);

const pick = (obj, keys) => Object.fromEntries(keys.map((k) => [k, obj[k]]));
/** A record that declares most of its keys: all but at most `maxDropped` (omitted, not undefined). */
const mostly = (model, maxDropped) =>
  fc.tuple(fc.record(model), fc.subarray(Object.keys(model), { maxLength: maxDropped })).map(([full, dropped]) =>
    pick(full, Object.keys(model).filter((k) => !dropped.includes(k))),
  );
/** A record with at most `maxKeys` of its keys. */
const few = (model, maxKeys) =>
  fc.tuple(fc.record(model), fc.subarray(Object.keys(model), { maxLength: maxKeys })).map(([full, keys]) => pick(full, keys));

const capabilitiesArb = mostly(
  {
    supported: fc.tuple(fc.subarray(COMMON_CAPS), fc.subarray(RARE_CAPS, { maxLength: 3 })).map(([a, b]) => [...a, ...b]),
    image: fc.record({ identity: fc.constantFrom(...IMAGES), binaries: fc.subarray(BINARIES) }, { requiredKeys: [] }),
    egress: fc.constantFrom(...EGRESS),
    timeout: fc.record(
      {
        semantics: fc.subarray(SEMANTICS),
        granularityMs: ms,
        maxSandboxLifetimeMs: fc.oneof(fc.constant(null), ms),
      },
      { requiredKeys: [] },
    ),
    stateDurability: fc.constantFrom(...DURABILITY),
    restrictions: fc.subarray(RESTRICTIONS),
    regions: fc.shuffledSubarray(REGIONS, { maxLength: 2 }),
    resources: fc.record(
      {
        cpu: fc.constantFrom(1, 2, 4, 8),
        memoryMb: fc.constantFrom(1024, 4096, 16384),
        diskMb: fc.constantFrom(10_240, 102_400),
        gpu: fc.constantFrom(0, 1, 2),
      },
      { requiredKeys: [] },
    ),
    isolation: fc.constantFrom(...ISOLATION),
  },
  3,
);

const validSignals = fc.record({
  estimatedCost: amount,
  coldStartLatencyMs: latency,
  readyLatencyMs: latency,
  completionWithinBudgetRate: rate,
  available: fc.oneof({ weight: 5, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
});

// Invalid signals: the pool is rejected (INVALID_SIGNALS), routing goes on.
const invalidSignals = validSignals.chain((s) =>
  fc.constantFrom(
    { ...s, estimatedCost: -1 },
    { ...s, completionWithinBudgetRate: 1.5 },
    { ...s, readyLatencyMs: Number.NaN },
    { ...s, coldStartLatencyMs: Number.POSITIVE_INFINITY },
    { ...s, readyLatencyMs: null },
    { ...s, available: 'yes' },
    { ...s, estimatedCost: '0.1' },
    { ...s, extra: 1 },
    (({ coldStartLatencyMs, ...rest }) => rest)(s),
    (({ available, ...rest }) => rest)(s),
    null,
    [],
    undefined,
  ),
);

const poolArb = fc.record({
  id: fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,6}$/),
  capabilities: capabilitiesArb,
  signals: fc.oneof({ weight: 6, arbitrary: validSignals }, { weight: 1, arbitrary: invalidSignals }),
});
const poolsArb = fc.uniqueArray(poolArb, { selector: (p) => p.id, maxLength: 12 });

const requiresArb = few(
  {
    requiredCapabilities: fc.subarray(COMMON_CAPS, { maxLength: 2 }),
    forbiddenCapabilities: fc.subarray([...RARE_CAPS, 'docker'], { maxLength: 1 }),
    image: fc.record({ identity: fc.constantFrom(...IMAGES), requiredBinaries: fc.subarray(BINARIES, { maxLength: 2 }) }, { requiredKeys: [] }),
    egress: fc.oneof(fc.constantFrom(...EGRESS), fc.subarray(EGRESS, { minLength: 1 })),
    timeout: few(
      {
        semantics: fc.subarray(SEMANTICS, { maxLength: 1 }),
        granularityMs: ms,
        maxReadyLatencyMs: fc.oneof(latency, fc.constantFrom(500, 1000, 5000)),
        completionBudgetMs: ms,
        requiredSandboxLifetimeMs: ms,
      },
      2,
    ),
    stateDurability: fc.constantFrom(...DURABILITY),
    restrictions: fc.subarray(RESTRICTIONS, { maxLength: 1 }),
    isolation: fc.constantFrom(...ISOLATION),
  },
  2,
);

const validRequest = fc.record(
  {
    requires: requiresArb,
    resources: few({ cpu: fc.constantFrom(0, 1, 2, 4), memoryMb: fc.constantFrom(512, 4096), diskMb: fc.constant(10_240), gpu: fc.constantFrom(0, 1) }, 2),
    region: fc.record(
      { preferred: fc.shuffledSubarray(REGIONS, { maxLength: 3 }), required: fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, fc.constant(true)) },
      { requiredKeys: [] },
    ),
    routing: fc.record(
      {
        strategy: fc.constantFrom('cost', 'latency', 'reliability', 'balanced'),
        latencyObjective: fc.constantFrom('cold', 'ready'),
        maxAcquisitionAttempts: fc.integer({ min: 1, max: 10 }),
        acquisitionFallback: fc.constantFrom('allowed', 'forbidden'),
      },
      { requiredKeys: [] },
    ),
  },
  { requiredKeys: [] },
);

// A valid request with one fault: both sides must refuse it with the same code and field.
const invalidRequest = validRequest.chain((r) =>
  fc.constantFrom(
    { ...r, resources: { cpu: -1 } },
    { ...r, resources: { memoryMb: null } },
    { ...r, routing: { strategy: 'cheapest' } },
    { ...r, routing: { latencyObjective: 'warm' } },
    { ...r, routing: { maxAcquisitionAttempts: 11 } },
    { ...r, routing: { stratgy: 'cost' } },
    { ...r, requires: { requiredCapabilites: ['pty'] } },
    { ...r, requires: { requiredCapabilities: ['ptty'] } },
    { ...r, requires: { requiredCapabilities: ['pty'], forbiddenCapabilities: ['pty'] } },
    { ...r, requires: { egress: [] } },
    { ...r, requires: { timeout: { maxReadyLatencyMs: Number.NaN } } },
    { ...r, region: { required: true } },
    { ...r, placement: { authority: 'fleet' } },
    { ...r, nodeAffinity: 'node-7' },
    { ...r, launch: { labels: { 'agent-relay-sbx-id': 'x' } } },
    [],
  ),
);

const requestArb = fc.oneof({ weight: 12, arbitrary: validRequest }, { weight: 1, arbitrary: invalidRequest });

const runtime = { launch: async () => ({ id: 'x' }), destroy: async () => {} };

function attempt(fn) {
  try {
    return { value: fn() };
  } catch (error) {
    return { error };
  }
}

test(`native and plain-JS routers agree on ${RUNS} random cases`, (t) => {
  const stats = { cases: 0, invalidRequests: 0, multiEligible: 0, someRejected: 0, registryChecked: 0 };
  fc.assert(
    fc.property(poolsArb, requestArb, (pools, request) => {
      stats.cases++;
      const native = attempt(() => routeProviders(request, pools));
      const plain = attempt(() => routePlain(request, pools));
      if (native.error || plain.error) {
        assert.ok(native.error, `plain threw ${plain.error?.code} but native did not`);
        assert.ok(plain.error, `native threw ${native.error?.code} (${native.error?.message}) but plain did not`);
        assert.equal(plain.error.code, native.error.code);
        assert.equal(plain.error.field, native.error.field);
        stats.invalidRequests++;
        return;
      }
      const nativeEligible = native.value.eligible.map((e) => e.providerId);
      assert.deepEqual(plain.value.eligible, nativeEligible);
      assert.deepEqual(
        [...plain.value.rejected].sort(),
        native.value.rejected.map((r) => r.providerId).sort(),
      );
      if (nativeEligible.length >= 2) stats.multiEligible++;
      if (plain.value.rejected.length > 0) stats.someRejected++;

      // The registry-backed path (top-k by maxAcquisitionAttempts): router.route vs routePrepared.
      const registry = new InMemoryProviderRegistry(pools.map((p) => ({ ...p, runtime })));
      const router = new SandboxRouter({ registry });
      const routed = attempt(() => router.route(request));
      const limit = parseRequest(request).maxAttempts;
      const prepared = routePrepared(prepareRegistry(pools), request, { limit });
      if (routed.error) {
        assert.equal(routed.error.code, 'NO_ELIGIBLE_PROVIDER');
        assert.deepEqual(prepared, []);
      } else {
        assert.deepEqual(prepared, routed.value);
      }
      assert.deepEqual(prepared, nativeEligible.slice(0, limit));
      stats.registryChecked++;
    }),
    { numRuns: RUNS },
  );
  // Not vacuous: many cases rank two or more pools, reject some, or refuse the request.
  assert.equal(stats.cases, RUNS);
  assert.ok(stats.multiEligible >= RUNS / 10, `only ${stats.multiEligible} cases with >= 2 eligible pools`);
  assert.ok(stats.someRejected >= RUNS / 4, `only ${stats.someRejected} cases with rejected pools`);
  assert.ok(stats.invalidRequests >= RUNS / 100, `only ${stats.invalidRequests} invalid requests`);
  t.diagnostic(`equivalence: ${JSON.stringify(stats)}`);
});

// The full explanation (ranks, scores, tiers, breakdowns, tie-breaks, every reason with
// its detail, the summary) is the same object on both sides, key for key and in the same
// key order (so the same JSON text): what the bench compares, and what lib/explain.js builds
// from the core's typed arrays.
test(`full explanations agree with the plain-JS oracle on ${RUNS / 3} random cases`, async (t) => {
  const stats = { explained: 0, withReasons: 0, ties: 0 };
  await fc.assert(
    fc.asyncProperty(poolsArb, requestArb, async (pools, request) => {
      const native = attempt(() => routeProviders(request, pools));
      const plain = attempt(() => explainPlain(request, pools));
      if (native.error || plain.error) {
        assert.equal(native.error?.code, plain.error?.code);
        return;
      }
      assert.deepStrictEqual(native.value, plain.value);
      assert.equal(JSON.stringify(native.value), JSON.stringify(plain.value));
      const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(pools.map((p) => ({ ...p, runtime }))) });
      const explained = await router.explain(request);
      assert.deepStrictEqual(explained, explainPrepared(prepareRegistry(pools), request));
      stats.explained++;
      if (explained.rejected.some((r) => r.reasons.length > 1)) stats.withReasons++;
      if (explained.eligible.some((e) => e.tieBreak !== null)) stats.ties++;
    }),
    { numRuns: RUNS / 3 },
  );
  assert.ok(stats.explained >= RUNS / 4, `only ${stats.explained} explained`);
  assert.ok(stats.withReasons >= RUNS / 30, `only ${stats.withReasons} cases with pools rejected for several reasons`);
  assert.ok(stats.ties >= RUNS / 100, `only ${stats.ties} cases with a tie-break`);
  t.diagnostic(`full explanations: ${JSON.stringify(stats)}`);
});

test('ties fall to the provider id in byte order, whatever the registration order', () => {
  const s = { estimatedCost: 1, coldStartLatencyMs: 100, readyLatencyMs: 100, completionWithinBudgetRate: 0.9, available: true };
  const pools = ['b', 'a-2', 'a.1', 'a_3', '9z', 'a'].map((id) => ({ id, capabilities: {}, signals: s }));
  const native = routeProviders({}, pools).eligible.map((e) => e.providerId);
  assert.deepEqual(native, ['9z', 'a', 'a-2', 'a.1', 'a_3', 'b']);
  assert.deepEqual(routePlain({}, pools).eligible, native);
});

// Regression: serde_json without `float_roundtrip` parsed some 17-digit JSON numbers to a
// neighbouring double, so the core compared values the caller never gave (a ready latency
// one ulp over maxReadyLatencyMs was accepted in ~9% of random draws). Values one ulp apart
// must stay apart across the seam.
const nextUp = (x) => {
  const f = new Float64Array([x]);
  const u = new BigUint64Array(f.buffer);
  u[0] += 1n;
  return f[0];
};
const signalsWith = (o) => ({ estimatedCost: 1, coldStartLatencyMs: 1, readyLatencyMs: 1, completionWithinBudgetRate: 1, available: true, ...o });

test('a latency one ulp over the budget is over the budget (exact float parsing)', () => {
  fc.assert(
    fc.property(fc.double({ min: 1e-3, max: 1e9, noNaN: true }), (budget) => {
      const pools = [{ id: 'a', capabilities: {}, signals: signalsWith({ readyLatencyMs: nextUp(budget) }) }];
      const request = { requires: { timeout: { maxReadyLatencyMs: budget } } };
      assert.deepEqual(routeProviders(request, pools).eligible, []);
      assert.deepEqual(routePlain(request, pools).eligible, []);
    }),
    { numRuns: 2000 },
  );
});

test('costs one ulp apart rank by cost, not by id (exact float parsing)', () => {
  fc.assert(
    fc.property(fc.double({ min: 1e-3, max: 1e9, noNaN: true }), (cost) => {
      // 'a' would win a tie; it must lose on cost.
      const pools = [
        { id: 'a', capabilities: {}, signals: signalsWith({ estimatedCost: nextUp(cost) }) },
        { id: 'b', capabilities: {}, signals: signalsWith({ estimatedCost: cost }) },
      ];
      const request = { routing: { strategy: 'cost' } };
      assert.deepEqual(routeProviders(request, pools).eligible.map((e) => e.providerId), ['b', 'a']);
      assert.deepEqual(routePlain(request, pools).eligible, ['b', 'a']);
    }),
    { numRuns: 2000 },
  );
});

test('a rate one ulp over 1 is invalid', () => {
  const pools = [{ id: 'a', capabilities: {}, signals: signalsWith({ completionWithinBudgetRate: nextUp(1) }) }];
  assert.deepEqual(routeProviders({}, pools).rejected.map((r) => r.reasons[0].code), ['INVALID_SIGNALS']);
  assert.deepEqual(routePlain({}, pools).rejected, ['a']);
});
