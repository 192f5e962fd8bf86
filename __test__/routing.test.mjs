// The routing decision through the public JS surface: registry, validation, filters,
// ranking, explain, routeProviders and the placement guardrails.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as esm from '../index.mjs';
import { definition, fakeRuntime, signals } from './fixtures.mjs';

const {
  asProviderId,
  InMemoryProviderRegistry,
  SandboxRouter,
  routeProviders,
  ProviderRegistryError,
  SandboxRequestValidationError,
  RoutingNotApplicableError,
  NoEligibleProviderError,
  SandboxRouterError,
} = esm;

const router = (defs) => new SandboxRouter({ registry: new InMemoryProviderRegistry(defs) });

test('asProviderId: valid ids are accepted (must-not-fire)', () => {
  for (const id of ['primary-eu', 'e2b', 'pool.1_x', '0a', 'a'.repeat(64)]) assert.equal(asProviderId(id), id);
});

test('asProviderId: invalid ids are a typed error (must-fire)', () => {
  for (const bad of ['', 'Primary', '-a', 'a b', 'a/b', 'a'.repeat(65), 42, undefined]) {
    assert.throws(
      () => asProviderId(bad),
      (e) => e instanceof ProviderRegistryError && e instanceof SandboxRouterError && e.code === 'INVALID_PROVIDER_ID',
      String(bad),
    );
  }
});

test('registry: distinct ids register (must-not-fire)', () => {
  const r = new InMemoryProviderRegistry([definition('a'), definition('b')]);
  assert.equal(r.size, 2);
  assert.deepEqual(r.list().map((d) => d.id), ['a', 'b']);
  assert.equal(r.get('b').id, 'b');
});

test('registry: a duplicate id is a typed error (must-fire)', () => {
  assert.throws(
    () => new InMemoryProviderRegistry([definition('a'), definition('a')]),
    (e) => e instanceof ProviderRegistryError && e.code === 'DUPLICATE_PROVIDER' && e.providerId === 'a',
  );
});

test('registry: a definition id is read once, a getter answering differently later included (must-fire)', () => {
  let reads = 0;
  const def = definition('x');
  Object.defineProperty(def, 'id', {
    enumerable: true,
    get() {
      reads++;
      if (reads > 1) throw new Error('read twice');
      return 'a';
    },
  });
  const r = new InMemoryProviderRegistry([def]);
  assert.equal(reads, 1);
  assert.equal(r.size, 1);
  assert.deepEqual(r.toJSON(), { providers: ['a'] });
  assert.deepEqual(new SandboxRouter({ registry: r }).route({}), ['a']);
  assert.equal(reads, 1);
});

test('registry: a plain definition id registers as before (must-not-fire)', () => {
  const r = new InMemoryProviderRegistry([definition('a')]);
  assert.deepEqual(r.toJSON(), { providers: ['a'] });
  assert.deepEqual(new SandboxRouter({ registry: r }).route({}), ['a']);
});

test("registry: a caller's registry.get is read once, a getter answering differently later included (must-fire) / a plain get works as before (must-not-fire)", async () => {
  const def = definition('a', { runtime: fakeRuntime() });
  const plain = { list: () => [def], get: (id) => (id === 'a' ? def : undefined) };
  let reads = 0;
  // A class instance: kept by reference (a plain object's getter would be read by the options' copy).
  class Flipping {
    list() {
      return [def];
    }
    get get() {
      reads++;
      if (reads > 1) throw new Error('read twice');
      return plain.get;
    }
  }
  for (const registry of [plain, new Flipping()]) {
    const router = new SandboxRouter({ registry });
    const s = await router.provision({});
    reads = 0;
    assert.equal((await router.getSandbox(s.id)).providerId, 'a');
  }
  assert.equal(reads, 1, 'the operation read get once');
});

test('registry: a port-shaped runtime is accepted unchanged, by identity (must-not-fire)', () => {
  const runtime = fakeRuntime();
  const keys = Object.keys(runtime).sort();
  const r = new InMemoryProviderRegistry([definition('a', { runtime })]);
  assert.equal(r.get('a').runtime, runtime);
  assert.deepEqual(Object.keys(runtime).sort(), keys);
});

test('registry: a runtime without launch/destroy is refused (must-fire)', () => {
  assert.throws(
    () => new InMemoryProviderRegistry([{ id: 'a', runtime: {}, capabilities: {}, signals: signals() }]),
    (e) => e.code === 'INVALID_PROVIDER_DEFINITION' && e.field === 'runtime',
  );
});

test('registry: a misspelled declared capability is refused with its path (must-fire)', () => {
  assert.throws(
    () => new InMemoryProviderRegistry([definition('a', { capabilities: { supported: ['ptty'] } })]),
    (e) => e.code === 'INVALID_PROVIDER_DEFINITION' && e.field === 'capabilities.supported[0]',
  );
});

test('registry: NaN in a declared lifetime is refused, not read as unbounded (must-fire)', () => {
  assert.throws(
    () => new InMemoryProviderRegistry([definition('a', { capabilities: { timeout: { maxSandboxLifetimeMs: NaN } } })]),
    (e) => e.code === 'INVALID_PROVIDER_DEFINITION' && e.field === 'capabilities.timeout.maxSandboxLifetimeMs',
  );
});

test('validation: maxAcquisitionAttempts 1 and 10 are accepted (must-not-fire)', () => {
  const r = router([definition('a')]);
  for (const n of [1, 10]) assert.deepEqual(r.route({ routing: { maxAcquisitionAttempts: n } }), ['a']);
});

test('validation: maxAcquisitionAttempts outside 1..10 names the field (must-fire)', () => {
  const r = router([definition('a')]);
  for (const n of [0, 11, 2.5, -1, NaN, '3']) {
    assert.throws(
      () => r.route({ routing: { maxAcquisitionAttempts: n } }),
      (e) =>
        e instanceof SandboxRequestValidationError &&
        e.code === 'INVALID_REQUEST' &&
        e.field === 'routing.maxAcquisitionAttempts' &&
        e.message.includes('routing.maxAcquisitionAttempts'),
      String(n),
    );
  }
});

test('validation: unknown strategy / objective / negative and non-finite resources are typed errors (must-fire)', () => {
  const r = router([definition('a')]);
  const cases = [
    [{ routing: { strategy: 'cheapest' } }, 'routing.strategy'],
    [{ routing: { latencyObjective: 'warm' } }, 'routing.latencyObjective'],
    [{ resources: { cpu: -1 } }, 'resources.cpu'],
    [{ resources: { memoryMb: Infinity } }, 'resources.memoryMb'],
    [{ resources: { diskMb: NaN } }, 'resources.diskMb'],
    [{ resources: { gpu: () => 1 } }, 'resources.gpu'],
  ];
  for (const [req, field] of cases) {
    assert.throws(() => r.route(req), (e) => e.code === 'INVALID_REQUEST' && e.field === field, field);
  }
});

test('validation: a misspelled key in requires/routing/resources is an error, never a wider match (must-fire)', () => {
  const r = router([definition('a')]);
  for (const [req, field] of [
    [{ requires: { requiredCapabilites: ['pty'] } }, 'requires.requiredCapabilites'],
    [{ routing: { stratgy: 'cost' } }, 'routing.stratgy'],
    [{ resources: { cpus: 64 } }, 'resources.cpus'],
  ]) {
    assert.throws(
      () => r.route(req),
      (e) => e.code === 'INVALID_REQUEST' && e.field === field && /did you mean|not a known field/.test(e.message),
    );
  }
});

test('validation: correctly spelled keys route normally (must-not-fire)', () => {
  const r = router([definition('a', { capabilities: { supported: ['pty'], resources: { cpu: 64 } } })]);
  assert.deepEqual(r.route({ requires: { requiredCapabilities: ['pty'] }, routing: { strategy: 'cost' }, resources: { cpu: 64 } }), [
    'a',
  ]);
});

test('placement: fleet, none or nodeAffinity refuse before validation (must-fire)', () => {
  const r = router([definition('a')]);
  for (const req of [
    { placement: { authority: 'fleet' }, routing: { strategy: 'bogus' } },
    { placement: { authority: 'none' } },
    { nodeAffinity: 'node-7' },
    { placement: { nodeAffinity: { node: 'x' } } },
  ]) {
    assert.throws(() => r.route(req), (e) => e instanceof RoutingNotApplicableError && e.code === 'ROUTING_NOT_APPLICABLE');
  }
});

test('placement: authority router is routed (must-not-fire)', () => {
  assert.deepEqual(router([definition('a')]).route({ placement: { authority: 'router' } }), ['a']);
});

test('ranking: registration order never breaks a tie; provider id bytes do', () => {
  const same = signals();
  const a = router([definition('zeta', { signals: same }), definition('alpha', { signals: same }), definition('beta', { signals: same })]);
  const b = router([definition('beta', { signals: same }), definition('zeta', { signals: same }), definition('alpha', { signals: same })]);
  assert.deepEqual(a.route({ routing: { maxAcquisitionAttempts: 10 } }), ['alpha', 'beta', 'zeta']);
  assert.deepEqual(b.route({ routing: { maxAcquisitionAttempts: 10 } }), ['alpha', 'beta', 'zeta']);
});

test('ranking: each strategy orders by its own dimension', () => {
  const defs = [
    definition('cheap', { signals: { estimatedCost: 0.01, readyLatencyMs: 9000, completionWithinBudgetRate: 0.9 } }),
    definition('fast', { signals: { estimatedCost: 0.5, readyLatencyMs: 100, completionWithinBudgetRate: 0.95 } }),
    definition('solid', { signals: { estimatedCost: 0.3, readyLatencyMs: 5000, completionWithinBudgetRate: 0.999 } }),
  ];
  const r = router(defs);
  assert.deepEqual(r.route({ routing: { strategy: 'cost' } }), ['cheap', 'solid', 'fast']);
  assert.deepEqual(r.route({ routing: { strategy: 'latency' } }), ['fast', 'solid', 'cheap']);
  assert.deepEqual(r.route({ routing: { strategy: 'reliability' } }), ['solid', 'fast', 'cheap']);
});

test('signals: invalid values make only that pool ineligible with INVALID_SIGNALS (must-fire)', async () => {
  const r = router([
    definition('nan', { signals: { estimatedCost: NaN } }),
    definition('neg', { signals: { readyLatencyMs: -5 } }),
    definition('rate', { signals: { completionWithinBudgetRate: 1.2 } }),
    definition('ok'),
  ]);
  const e = await r.explain({});
  assert.deepEqual(e.eligible.map((x) => x.providerId), ['ok']);
  assert.deepEqual(e.rejected.map((x) => [x.providerId, x.reasons[0].code]), [
    ['nan', 'INVALID_SIGNALS'],
    ['neg', 'INVALID_SIGNALS'],
    ['rate', 'INVALID_SIGNALS'],
  ]);
  for (const x of e.eligible) assert.ok(Number.isFinite(x.score));
});

test('signals: valid signals keep the pool eligible (must-not-fire)', async () => {
  const e = await router([definition('ok')]).explain({});
  assert.equal(e.rejected.length, 0);
});

test('filters: latency budget applies to the chosen objective', () => {
  const r = router([definition('p', { signals: { coldStartLatencyMs: 100, readyLatencyMs: 5000 } })]);
  assert.throws(() => r.route({ requires: { timeout: { maxReadyLatencyMs: 1000 } } }), NoEligibleProviderError);
  assert.deepEqual(r.route({ requires: { timeout: { maxReadyLatencyMs: 1000 } }, routing: { latencyObjective: 'cold' } }), ['p']);
});

test('filters: sandbox lifetime unknown or short is rejected (must-fire)', async () => {
  const r = router([
    definition('unknown'),
    definition('short', { capabilities: { timeout: { maxSandboxLifetimeMs: 999 } } }),
  ]);
  const e = await r.explain({ requires: { timeout: { requiredSandboxLifetimeMs: 1000 } } });
  assert.deepEqual(e.rejected.map((x) => x.reasons[0]), [
    { code: 'SANDBOX_LIFETIME', detail: 'unknown' },
    { code: 'SANDBOX_LIFETIME', detail: '999 ms < 1000 ms' },
  ]);
});

test('filters: inclusive cap and null (unbounded) lifetime pass (must-not-fire)', () => {
  const r = router([
    definition('exact', { capabilities: { timeout: { maxSandboxLifetimeMs: 1000 } } }),
    definition('unbounded', { capabilities: { timeout: { maxSandboxLifetimeMs: null } } }),
  ]);
  assert.deepEqual(r.route({ requires: { timeout: { requiredSandboxLifetimeMs: 1000 } } }).sort(), ['exact', 'unbounded']);
});

test('filters: region required rejects pools elsewhere; preference alone only orders', async () => {
  const defs = [
    definition('us', { capabilities: { regions: ['us-east'] }, signals: { estimatedCost: 0.01 } }),
    definition('eu', { capabilities: { regions: ['eu-west'] }, signals: { estimatedCost: 0.9 } }),
  ];
  const r = router(defs);
  assert.deepEqual(r.route({ region: { preferred: ['eu-west'] }, routing: { strategy: 'cost' } }), ['eu', 'us']);
  assert.deepEqual(r.route({ region: { preferred: ['eu-west'], required: true } }), ['eu']);
  const e = await r.explain({ region: { preferred: ['eu-west'], required: true } });
  assert.equal(e.rejected[0].reasons[0].code, 'REGION_MISMATCH');
});

test('explain: eligible pools carry rank, raw and normalized breakdown and tie-break', async () => {
  const r = router([definition('b'), definition('a'), definition('c', { signals: { estimatedCost: 1 } })]);
  const e = await r.explain({});
  assert.deepEqual(e.eligible.map((x) => [x.providerId, x.rank]), [
    ['a', 1],
    ['b', 2],
    ['c', 3],
  ]);
  assert.equal(e.eligible[0].tieBreak, 'providerId');
  assert.equal(e.eligible[2].tieBreak, null);
  assert.deepEqual(e.eligible[2].breakdown.cost, { raw: 1, normalized: 0, weight: 0.35 });
  assert.equal(e.summary, '3/3 providers eligible');
});

test('explain: the no-eligible error carries the same summary and per-pool codes', async () => {
  const r = router([
    definition('a', { capabilities: { regions: ['us-east'] } }),
    definition('b', { capabilities: { supported: ['pty'], regions: ['us-east'] } }),
    definition('c', { capabilities: { regions: ['eu-west'] } }),
  ]);
  const req = { requires: { requiredCapabilities: ['pty'] }, region: { preferred: ['eu-west'], required: true } };
  const e = await r.explain(req);
  assert.equal(e.summary, '0/3 providers eligible: 2 missing capability pty, 2 region not in [eu-west]');
  await assert.rejects(r.provision(req), (err) => {
    assert.ok(err instanceof NoEligibleProviderError);
    assert.equal(err.summary, e.summary);
    assert.equal(err.message, e.summary);
    assert.deepEqual(err.rejections.map((x) => x.providerId), ['a', 'b', 'c']);
    assert.deepEqual(err.rejections[1].reasons, [{ code: 'REGION_MISMATCH', detail: '[us-east] not in [eu-west]' }]);
    return true;
  });
});

test('routeProviders: pure and synchronous, same order as the router', () => {
  const defs = [definition('b'), definition('a', { signals: { estimatedCost: 0.5 } }), definition('x', { capabilities: { supported: ['pty'] } })];
  const out = routeProviders({ requires: { forbiddenCapabilities: ['pty'] } }, defs);
  assert.deepEqual(out.eligible.map((x) => x.providerId), ['b', 'a']);
  assert.deepEqual(out.rejected.map((x) => [x.providerId, x.reasons[0].code]), [['x', 'FORBIDDEN_CAPABILITY_PRESENT']]);
  assert.deepEqual(router(defs).route({ requires: { forbiddenCapabilities: ['pty'] } }), ['b', 'a']);
  assert.equal(defs[0].runtime.calls.length, 0, 'no runtime call');
});

test('routeProviders: nothing in the result holds a runtime (credentials stay out)', () => {
  const out = routeProviders({}, [definition('a')]);
  assert.ok(!JSON.stringify(out).includes('runtime'));
});

test('errors: the same classes from ESM and CommonJS', () => {
  const cjs = createRequire(import.meta.url)('../index.js');
  for (const name of Object.keys(cjs)) assert.equal(esm[name], cjs[name], name);
  assert.throws(() => cjs.asProviderId('BAD'), esm.ProviderRegistryError);
});

test('a native panic surfaces as a typed INTERNAL_ERROR, not a crash', async () => {
  const { binding } = createRequire(import.meta.url)('../lib/binding.js');
  const { callNative, SandboxRouterInternalError } = createRequire(import.meta.url)('../lib/errors.js');
  assert.throws(() => callNative(() => binding.debugPanic()), (e) => e instanceof SandboxRouterInternalError && e.code === 'INTERNAL_ERROR');
});
