// Explanations as users read them: the documented shape as plain data (JSON.stringify,
// util.inspect and deepStrictEqual see ordinary objects), the decision events built from
// the same core answer, buffers that grow for large explanations, and routeProviders'
// cache of parsed definitions (reused only while a definition is unchanged).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { SandboxRouter, InMemoryProviderRegistry, routeProviders, ProviderRegistryError } from '../index.mjs';
import { explainPlain } from '../bench/plain-router.mjs';
import { definition, signals, recorder, leaks } from './fixtures.mjs';

const router = (defs, options = {}) => new SandboxRouter({ registry: new InMemoryProviderRegistry(defs), ...options });
const plainDefs = (defs) => defs.map(({ id, capabilities, signals: s }) => ({ id, capabilities, signals: s }));

test('explain: the documented shape as plain data, deepStrictEqual to a literal, same JSON text as 0.7', async () => {
  const e = await router([
    definition('b', { capabilities: { regions: ['eu-west'] } }),
    definition('a', { capabilities: { supported: ['pty'] }, signals: { estimatedCost: 0.2 } }),
  ]).explain({ requires: { forbiddenCapabilities: ['pty'] }, region: { preferred: ['eu-west'] } });
  const expected = {
    summary: '1/2 providers eligible: 1 forbidden capability pty',
    strategy: 'balanced',
    latencyObjective: 'ready',
    maxAcquisitionAttempts: 3,
    acquisitionFallback: 'allowed',
    eligible: [
      {
        breakdown: {
          cost: { normalized: 1, raw: 0.1, weight: 0.35 },
          latency: { normalized: 1, objective: 'ready', raw: 1000, weight: 0.25 },
          reliability: { normalized: 1, raw: 0.99, weight: 0.4 },
        },
        providerId: 'b',
        providerOrderPosition: null,
        rank: 1,
        regionTier: 0,
        score: 1,
        tieBreak: null,
      },
    ],
    rejected: [{ providerId: 'a', reasons: [{ code: 'FORBIDDEN_CAPABILITY_PRESENT', detail: 'pty' }] }],
  };
  assert.deepStrictEqual(e, expected);
  // Key for key and in the 0.7 order (the JSON text users may have stored or diffed).
  assert.equal(JSON.stringify(e), JSON.stringify(expected));
  for (const o of [e, e.eligible[0], e.eligible[0].breakdown, e.eligible[0].breakdown.cost, e.rejected[0], e.rejected[0].reasons[0]]) {
    assert.equal(Object.getPrototypeOf(o), Object.prototype);
  }
  assert.match(inspect(e, { depth: 5 }), /raw: 0\.1/);
  assert.doesNotMatch(inspect(e, { depth: 5 }), /Getter/);
});

test('explain: every strategy, objective and fallback policy reads back by name; weights only under balanced', async () => {
  const r = router([definition('a'), definition('b', { signals: { estimatedCost: 0.5 } })]);
  for (const strategy of ['cost', 'latency', 'reliability', 'balanced']) {
    for (const latencyObjective of ['cold', 'ready']) {
      const e = await r.explain({ routing: { strategy, latencyObjective, acquisitionFallback: 'forbidden' } });
      assert.equal(e.strategy, strategy);
      assert.equal(e.latencyObjective, latencyObjective);
      assert.equal(e.acquisitionFallback, 'forbidden');
      assert.equal(e.maxAcquisitionAttempts, 1);
      assert.equal(e.eligible[0].breakdown.latency.objective, latencyObjective);
      assert.equal(e.eligible[0].breakdown.cost.weight, strategy === 'balanced' ? 0.35 : null);
    }
  }
});

test('explain: capacity order gives providerOrderPosition and a null regionTier', async () => {
  const r = router([definition('a'), definition('b'), definition('c')], { capacity: { providerOrder: ['c', 'a'] } });
  const e = await r.explain({});
  assert.deepEqual(e.eligible.map((x) => [x.providerId, x.providerOrderPosition, x.regionTier]), [
    ['c', 0, null],
    ['a', 1, null],
  ]);
  assert.deepEqual(e.rejected, [{ providerId: 'b', reasons: [{ code: 'NOT_IN_PROVIDER_ORDER', detail: 'capacity routing lists only providerOrder' }] }]);
});

test('explain: a large explanation grows the lent buffers and stays exact (must-fire of the retry)', async () => {
  // 600 pools, each rejected for four reasons: far more than the first buffers hold.
  const defs = Array.from({ length: 600 }, (_, i) => definition(`p${String(i).padStart(3, '0')}`, { capabilities: { resources: { cpu: i % 4 } } }));
  defs.push(definition('ok', { capabilities: { supported: ['pty', 'ssh', 'docker'], resources: { cpu: 8 } } }));
  const request = { requires: { requiredCapabilities: ['pty', 'ssh', 'docker'] }, resources: { cpu: 4 } };
  const e = await router(defs).explain(request);
  assert.equal(e.rejected.length, 600);
  assert.equal(e.rejected[5].reasons.length, 4);
  assert.deepStrictEqual(e, explainPlain(request, plainDefs(defs)));
  // And a small one afterwards is still right (the grown buffers are reused).
  assert.equal((await router([definition('x')]).explain({})).summary, '1/1 providers eligible');
});

test('events must-fire: provision.ranked carries the summary and provider.rejected each reason, from the same decision as explain', async () => {
  const rec = recorder();
  const defs = [definition('a'), definition('b', { capabilities: { regions: ['us-east'] } }), definition('c', { signals: { available: false } })];
  const r = router(defs, { observer: rec.observer });
  const request = { region: { preferred: ['us-east'], required: true } };
  await r.provision(request);
  const e = await r.explain(request);
  const ranked = rec.events.find((x) => x.type === 'provision.ranked');
  assert.equal(ranked.summary, e.summary);
  assert.deepEqual(ranked.providerIds, ['b']);
  const rejected = rec.events.filter((x) => x.type === 'provider.rejected').map(({ providerId, reasons }) => ({ providerId, reasons }));
  assert.deepStrictEqual(rejected, e.rejected);
  assert.deepEqual(rejected[1].reasons, [
    { code: 'REGION_MISMATCH', detail: '[] not in [us-east]' },
  ]);
});

test('events must-not-fire: no provider.rejected when every pool is eligible', async () => {
  const rec = recorder();
  await router([definition('a'), definition('b')], { observer: rec.observer }).provision({});
  assert.equal(rec.types().filter((t) => t === 'provider.rejected').length, 0);
  assert.equal(rec.events.find((x) => x.type === 'provision.ranked').summary, '2/2 providers eligible');
});

test('explain with credentials and a resolver: their reasons, and nothing of the thrown error', async () => {
  const r = router([definition('a'), definition('b'), definition('c')], {
    provisioning: { hasAvailableCredentials: (id) => id !== 'a' },
    resolveRoutingSignals: (p) => {
      if (p.id === 'b') throw new Error('canary-secret-7f3a9c1e');
      return signals();
    },
  });
  const e = await r.explain({});
  assert.deepEqual(e.rejected.map((x) => [x.providerId, x.reasons[0].code]), [
    ['a', 'CREDENTIALS_UNAVAILABLE'],
    ['b', 'SIGNALS_UNRESOLVED'],
  ]);
  assert.equal(leaks(e), false);
});

// --- routeProviders: the definition cache ------------------------------------------------

const fresh = () => [
  { id: 'a', capabilities: { supported: ['pty'], timeout: { semantics: ['idle'], maxSandboxLifetimeMs: null }, resources: { cpu: 2 } }, signals: signals() },
  { id: 'b', capabilities: { supported: [], regions: ['eu-west'] }, signals: signals({ estimatedCost: 0.5 }) },
];
const req = { requires: { requiredCapabilities: ['pty'] } };
const eligibleIds = (out) => out.eligible.map((x) => x.providerId);

test('routeProviders cache must-not-fire: unchanged definitions (same array or a fresh one) give the same explanation', () => {
  const defs = fresh();
  const first = routeProviders(req, defs);
  assert.deepStrictEqual(routeProviders(req, defs), first);
  assert.deepStrictEqual(routeProviders(req, [...defs]), first);
  assert.deepStrictEqual(routeProviders(req, [defs[1], defs[0]]).eligible, first.eligible);
  assert.deepStrictEqual(first, explainPlain(req, defs));
});

for (const [name, change, expectEligible] of [
  ['a capability added to the array', (d) => d[1].capabilities.supported.push('pty'), ['a', 'b']],
  ['a capability removed', (d) => d[0].capabilities.supported.pop(), []],
  ['a nested object replaced', (d) => (d[1].capabilities = { supported: ['pty'] }), ['a', 'b']],
  ['a signal changed', (d) => (d[0].signals.available = false), []],
  ['signals removed', (d) => delete d[0].signals, []],
  ['a declared key deleted', (d) => delete d[0].capabilities.supported, []],
  ['the id changed', (d) => (d[1].id = 'c'), ['a']],
]) {
  test(`routeProviders cache must-fire: ${name} after a call is seen by the next call`, () => {
    const defs = fresh();
    assert.deepEqual(eligibleIds(routeProviders(req, defs)), ['a']);
    change(defs);
    const out = routeProviders(req, defs);
    assert.deepEqual(eligibleIds(out), expectEligible);
    assert.deepStrictEqual(out, explainPlain(req, defs));
  });
}

test('routeProviders cache must-fire: an unknown key, a NaN or a function added later is refused or rejected as it would be on a first call', () => {
  const defs = fresh();
  routeProviders(req, defs);
  defs[0].capabilities.suported = ['ssh'];
  assert.throws(() => routeProviders(req, defs), (e) => e instanceof ProviderRegistryError && e.code === 'INVALID_PROVIDER_DEFINITION');
  delete defs[0].capabilities.suported;
  assert.deepEqual(eligibleIds(routeProviders(req, defs)), ['a']);
  // A key swapped for an unknown one: same number of keys, still refused.
  delete defs[0].capabilities.resources;
  defs[0].capabilities.resourses = { cpu: 2 };
  assert.throws(() => routeProviders(req, defs), (e) => e.code === 'INVALID_PROVIDER_DEFINITION');
  const again = fresh();
  routeProviders(req, again);
  again[0].capabilities.timeout.maxSandboxLifetimeMs = Number.NaN;
  assert.throws(() => routeProviders(req, again), (e) => e.code === 'INVALID_PROVIDER_DEFINITION');
  const third = fresh();
  routeProviders(req, third);
  third[0].signals.estimatedCost = () => 1;
  assert.equal(routeProviders(req, third).rejected[0].reasons[0].code, 'INVALID_SIGNALS');
});

test('routeProviders cache: a getter is read once per call and its new answer is used', () => {
  let reads = 0;
  let cost = 0.1;
  const def = {
    id: 'g',
    capabilities: { supported: ['pty'] },
    get signals() {
      reads++;
      return signals({ estimatedCost: cost });
    },
  };
  const out1 = routeProviders(req, [def]);
  assert.equal(out1.eligible[0].breakdown.cost.raw, 0.1);
  const before = reads;
  cost = 0.7;
  const out2 = routeProviders(req, [def]);
  assert.equal(out2.eligible[0].breakdown.cost.raw, 0.7);
  assert.ok(reads - before >= 1);
});

test('routeProviders: a class instance is read afresh every call, a Proxy is checked through its traps; changes are seen', () => {
  class Caps {
    constructor() {
      this.supported = ['pty'];
    }
  }
  const defs = [{ id: 'k', capabilities: new Caps(), signals: signals() }];
  assert.deepEqual(eligibleIds(routeProviders(req, defs)), ['k']);
  defs[0].capabilities.supported = [];
  assert.deepEqual(eligibleIds(routeProviders(req, defs)), []);
  const target = { id: 'p', capabilities: { supported: ['pty'] }, signals: signals() };
  const proxy = new Proxy(target, {});
  assert.deepEqual(eligibleIds(routeProviders(req, [proxy])), ['p']);
  target.capabilities.supported = [];
  assert.deepEqual(eligibleIds(routeProviders(req, [proxy])), []);
});

test('explain: the text table starts over past its bound and explanations stay exact (must-fire of the reset)', async () => {
  // 5,000 distinct details ("cpu 10 > 0.001", …): more than the core keeps (4,096).
  const defs = Array.from({ length: 5000 }, (_, i) => definition(`p${i}`, { capabilities: { resources: { cpu: (i + 1) / 1000 } } }));
  const request = { resources: { cpu: 10 } };
  const r = router(defs);
  for (let round = 0; round < 2; round++) {
    const e = await r.explain(request);
    assert.equal(e.rejected.length, 5000);
    assert.equal(e.rejected[4999].reasons[0].detail, 'cpu 10 > 5');
    assert.deepStrictEqual(e, explainPlain(request, plainDefs(defs)));
  }
  // Texts from before the reset are never mixed into a later explanation.
  const small = await router([definition('a', { capabilities: { resources: { cpu: 1 } } })]).explain({ resources: { cpu: 2 } });
  assert.deepEqual(small.rejected[0].reasons, [{ code: 'RESOURCES_INSUFFICIENT', detail: 'cpu 2 > 1' }]);
  assert.equal(small.summary, '0/1 providers eligible: 1 insufficient cpu');
});

test('routeProviders cache: a remembered definition still parses into a new registry when a neighbour changes', () => {
  const defs = fresh();
  routeProviders(req, defs);
  defs[1].capabilities.supported = ['pty'];
  // defs[0] comes from the cache (its text was dropped after parsing); the registry is new.
  const out = routeProviders(req, defs);
  assert.deepEqual(eligibleIds(out), ['a', 'b']);
  assert.deepStrictEqual(out, explainPlain(req, defs));
  assert.deepStrictEqual(routeProviders(req, [defs[0]]), explainPlain(req, [defs[0]]));
});
