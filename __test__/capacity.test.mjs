// Capacity: measurement, admission with ordered spillover, reservations.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  InMemoryProviderRegistry,
  SandboxRouter,
  ProviderCapacityExhaustedError,
  ProviderProvisioningError,
  SandboxRouterConfigurationError,
} from '../index.mjs';
import { definition, fakeRuntime, recorder } from './fixtures.mjs';

const slots = (used, limit, required = 1) => ({
  status: 'known',
  resources: [{ resource: 'sandboxes', used, limit, unit: 'sandboxes', headroom: limit - used, required }],
});
const reader = (m) => {
  const r = { reads: 0, getCapacity: async () => (r.reads++, typeof m === 'function' ? m() : m) };
  return r;
};

function setup(defs, capacity, extra = {}) {
  const rec = recorder();
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs), observer: rec.observer, capacity, ...extra });
  return { router, rec };
}

test('getCapacity: reads every reader concurrently and never launches', async () => {
  const a = fakeRuntime();
  const defs = [
    definition('a', { runtime: a, capacity: { getCapacity: () => new Promise((r) => setTimeout(r, 100, slots(1, 5))) } }),
    definition('b', { capacity: { getCapacity: () => new Promise((r) => setTimeout(r, 100, { status: 'unknown', reason: 'LIMIT_NOT_CONFIGURED' })) } }),
    definition('c'),
  ];
  const { router } = setup(defs);
  const t0 = Date.now();
  const m = await router.getCapacity();
  assert.ok(Date.now() - t0 < 190, 'concurrent');
  assert.deepEqual(Object.keys(m), ['a', 'b']);
  assert.deepEqual(m.a, slots(1, 5));
  assert.deepEqual(m.b, { status: 'unknown', reason: 'LIMIT_NOT_CONFIGURED' });
  assert.equal(a.calls.length, 0);
});

test('getCapacity: failing, slow and malformed readers become unknown with a reason', async () => {
  const defs = [
    definition('fails', { capacity: { getCapacity: async () => Promise.reject(new Error('x')) } }),
    definition('throws', {
      capacity: {
        getCapacity: () => {
          throw new Error('sync');
        },
      },
    }),
    definition('slow', { capacity: { getCapacity: () => new Promise(() => {}) } }),
    definition('nan', { capacity: reader({ ...slots(1, 5), resources: [{ ...slots(1, 5).resources[0], used: NaN }] }) }),
    definition('lies', { capacity: reader({ ...slots(1, 5), resources: [{ ...slots(1, 5).resources[0], headroom: 99 }] }) }),
    definition('empty', { capacity: reader({ status: 'known', resources: [] }) }),
  ];
  const { router } = setup(defs, { providerOrder: ['fails'], timeoutMs: 50 });
  const m = await router.getCapacity();
  assert.deepEqual(
    Object.fromEntries(Object.entries(m).map(([k, v]) => [k, v.reason])),
    { empty: 'MALFORMED', fails: 'READ_FAILED', lies: 'MALFORMED', nan: 'MALFORMED', slow: 'TIMEOUT', throws: 'READ_FAILED' },
  );
});

test('admission: a pool with room is launched (must-not-fire)', async () => {
  const a = fakeRuntime();
  const { router } = setup([definition('a', { runtime: a, capacity: reader(slots(9, 10)) })], { providerOrder: ['a'] });
  assert.equal((await router.provision({})).providerId, 'a');
});

test('admission: a full pool is skipped without launching (must-fire)', async () => {
  const a = fakeRuntime();
  const b = fakeRuntime();
  const { router, rec } = setup(
    [definition('a', { runtime: a, capacity: reader(slots(10, 10)) }), definition('b', { runtime: b, capacity: reader(slots(0, 10)) })],
    { providerOrder: ['a', 'b'] },
  );
  assert.equal((await router.provision({})).providerId, 'b');
  assert.equal(a.calls.length, 0);
  const skipped = rec.events.find((e) => e.type === 'capacity.skipped');
  assert.deepEqual([skipped.providerId, skipped.status, skipped.reason], ['a', 'EXHAUSTED', 'sandboxes']);
});

test('admission: unknown, malformed, failed or timed-out capacity is skipped (must-fire)', async () => {
  for (const cap of [
    reader({ status: 'unknown', reason: 'LIMIT_NOT_CONFIGURED' }),
    reader({ status: 'known' }),
    { getCapacity: async () => Promise.reject(new Error('down')) },
    { getCapacity: () => new Promise(() => {}) },
    undefined,
  ]) {
    const a = fakeRuntime();
    const { router } = setup(
      [definition('a', { runtime: a, capacity: cap }), definition('b', { capacity: reader(slots(0, 1)) })],
      { providerOrder: ['a', 'b'], timeoutMs: 30 },
    );
    assert.equal((await router.provision({})).providerId, 'b');
    assert.equal(a.calls.length, 0);
  }
});

test('admission: providerOrder replaces strategy ranking', async () => {
  const defs = [
    definition('cheap', { signals: { estimatedCost: 0.001 }, capacity: reader(slots(0, 5)) }),
    definition('dear', { signals: { estimatedCost: 9 }, capacity: reader(slots(0, 5)) }),
  ];
  const { router } = setup(defs, { providerOrder: ['dear', 'cheap'] });
  assert.equal((await router.provision({ routing: { strategy: 'cost' } })).providerId, 'dear');
  assert.deepEqual(router.route({}), ['dear', 'cheap']);
});

test('admission: an unlisted pool is never selected (must-fire) while listed ones are (must-not-fire)', async () => {
  const unlisted = fakeRuntime();
  const defs = [
    definition('unlisted', { runtime: unlisted, signals: { estimatedCost: 0 }, capacity: reader(slots(0, 99)) }),
    definition('listed', { capacity: reader(slots(10, 10)) }),
  ];
  const { router } = setup(defs, { providerOrder: ['listed'] });
  await assert.rejects(router.provision({}), ProviderCapacityExhaustedError);
  assert.equal(unlisted.calls.length, 0);
  const e = await router.explain({});
  assert.equal(e.rejected.find((r) => r.providerId === 'unlisted').reasons[0].code, 'NOT_IN_PROVIDER_ORDER');
  assert.equal(e.eligible[0].providerOrderPosition, 0);
});

test('admission: request resources above headroom skip (must-fire); within headroom admit (must-not-fire)', async () => {
  const cpu = (used, limit) => ({
    status: 'known',
    resources: [{ resource: 'cpu', used, limit, unit: 'vCPU', headroom: limit - used, required: 2 }],
  });
  const defs = [
    definition('a', { capabilities: { resources: { cpu: 16 } }, capacity: reader(cpu(6, 10)) }),
    definition('b', { capabilities: { resources: { cpu: 16 } }, capacity: reader(cpu(0, 100)) }),
  ];
  const { router } = setup(defs, { providerOrder: ['a', 'b'] });
  assert.equal((await router.provision({ resources: { cpu: 5 } })).providerId, 'b', 'needs max(2, 5) = 5 > 4 headroom');
  assert.equal((await router.provision({ resources: { cpu: 1 } })).providerId, 'a', 'needs max(2, 1) = 2 <= 4');
});

test('admission: capacity skips consume no attempt', async () => {
  const defs = ['a', 'b', 'c', 'd'].map((id) => definition(id, { capacity: reader(slots(id === 'd' ? 0 : 5, 5)) }));
  const { router } = setup(defs, { providerOrder: ['a', 'b', 'c', 'd'] });
  assert.equal((await router.provision({ routing: { maxAcquisitionAttempts: 1 } })).providerId, 'd');
});

test('admission: fallback forbidden limits actual launches to one', async () => {
  const failing = () => fakeRuntime({ launch: async () => Promise.reject(new Error('no')) });
  const a = failing();
  const b = failing();
  const defs = [
    definition('full', { capacity: reader(slots(1, 1)) }),
    definition('a', { runtime: a, capacity: reader(slots(0, 1)) }),
    definition('b', { runtime: b, capacity: reader(slots(0, 1)) }),
  ];
  const { router } = setup(defs, { providerOrder: ['full', 'a', 'b'] }, { classifyProviderFailure: () => ({ code: 'PRE_ALLOC', retryable: true }) });
  await assert.rejects(router.provision({ routing: { acquisitionFallback: 'forbidden' } }), ProviderProvisioningError);
  assert.equal(a.calls.length + b.calls.length, 1);
});

test('admission: an exact provider constraint never spills elsewhere', async () => {
  const other = fakeRuntime();
  const defs = [definition('pinned', { capacity: reader(slots(3, 3)) }), definition('other', { runtime: other, capacity: reader(slots(0, 9)) })];
  const { router } = setup(defs, { providerOrder: ['pinned', 'other'] });
  await assert.rejects(router.provision({ providerId: 'pinned' }), (e) => {
    assert.ok(e instanceof ProviderCapacityExhaustedError);
    assert.equal(e.code, 'PROVIDER_CAPACITY_EXHAUSTED');
    assert.deepEqual(e.rejections, [{ providerId: 'pinned', status: 'EXHAUSTED', reason: 'sandboxes' }]);
    return true;
  });
  assert.equal(other.calls.length, 0);
});

test('admission: none fits → ProviderCapacityExhaustedError with sanitized UNKNOWN / EXHAUSTED rejections', async () => {
  const defs = [
    definition('a', { capacity: reader(slots(2, 2)) }),
    definition('b', { capacity: { getCapacity: async () => Promise.reject(new Error('secret text')) } }),
  ];
  const { router } = setup(defs, { providerOrder: ['a', 'b'] });
  await assert.rejects(router.provision({}), (e) => {
    assert.deepEqual(e.rejections, [
      { providerId: 'a', status: 'EXHAUSTED', reason: 'sandboxes' },
      { providerId: 'b', status: 'UNKNOWN', reason: 'READ_FAILED' },
    ]);
    assert.ok(!JSON.stringify(e).includes('secret text'));
    return true;
  });
});

test('admission: provisionDetached follows the same capacity rules', async () => {
  const full = fakeRuntime({ detached: true });
  const roomy = fakeRuntime({ detached: true });
  const defs = [definition('full', { runtime: full, capacity: reader(slots(1, 1)) }), definition('roomy', { runtime: roomy, capacity: reader(slots(0, 1)) })];
  const { router } = setup(defs, { providerOrder: ['full', 'roomy'] });
  assert.equal((await router.provisionDetached({})).providerId, 'roomy');
  assert.equal(full.calls.length, 0);
});

test('no capacity policy: routing unchanged and readers not consulted on provision; measurement still works', async () => {
  const cap = reader(slots(100, 1));
  const { router } = setup([definition('a', { capacity: cap })]);
  assert.equal((await router.provision({})).providerId, 'a');
  assert.equal(cap.reads, 0);
  assert.equal((await router.getCapacity()).a.status, 'known');
  assert.equal(cap.reads, 1);
});

test('reservations: 50 concurrent provisions against 10 slots and a lagging reader never exceed 10 launches', async () => {
  let launched = 0;
  let lagged = 0;
  const rt = fakeRuntime({
    launch: async () => {
      await new Promise((r) => setTimeout(r, 5));
      launched++;
      return { id: `r${launched}` };
    },
  });
  // The reader reports usage as it was 3 launches ago, and answers asynchronously.
  const lagging = {
    getCapacity: async () => {
      await new Promise((r) => setTimeout(r, 1));
      lagged = Math.max(lagged, launched - 3);
      return slots(Math.max(0, launched - 3), 10);
    },
  };
  const { router } = setup([definition('a', { runtime: rt, capacity: lagging })], { providerOrder: ['a'] });
  const results = await Promise.allSettled(Array.from({ length: 50 }, () => router.provision({})));
  const ok = results.filter((r) => r.status === 'fulfilled').length;
  assert.ok(launched <= 10, `launched ${launched}`);
  assert.ok(launched >= 7, `capacity is used, not starved: launched ${launched}`);
  assert.equal(ok, launched);
  assert.ok(ok >= 1);
  for (const r of results.filter((x) => x.status === 'rejected')) assert.ok(r.reason instanceof ProviderCapacityExhaustedError);
});

test('reservations: a failure proven pre-allocation releases its hold (must-not-fire on later provisions)', async () => {
  let fail = true;
  const rt = fakeRuntime({
    launch: async () => {
      if (fail) throw new Error('boom');
      return { id: 'ok' };
    },
  });
  const classifyProviderFailure = () => ({ code: 'PRE_ALLOCATION_REFUSAL', retryable: true });
  const { router } = setup([definition('a', { runtime: rt, capacity: reader(slots(0, 1)) })], { providerOrder: ['a'] }, { classifyProviderFailure });
  await assert.rejects(router.provision({}), ProviderProvisioningError);
  fail = false;
  assert.equal((await router.provision({})).providerId, 'a');
});

test('reservations: an outcome-unknown failure keeps its hold, like a success (must-fire)', async () => {
  let fail = true;
  const rt = fakeRuntime({
    launch: async () => {
      if (fail) throw new Error('boom after maybe allocating');
      return { id: 'ok' };
    },
  });
  // The reader lags: it never sees the sandbox the failed launch may have made.
  const { router } = setup([definition('a', { runtime: rt, capacity: reader(slots(0, 1)) })], { providerOrder: ['a'] });
  await assert.rejects(router.provision({}), (e) => e.code === 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN');
  fail = false;
  await assert.rejects(router.provision({}), ProviderCapacityExhaustedError);
});

test('configuration: a bad capacity policy is a typed error', () => {
  for (const capacity of [{}, { providerOrder: [] }, { providerOrder: ['A'] }, { providerOrder: ['a', 'a'] }, { providerOrder: ['a'], timeoutMs: 0 }]) {
    assert.throws(
      () => new SandboxRouter({ registry: new InMemoryProviderRegistry([]), capacity }),
      (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field.startsWith('capacity'),
    );
  }
});
