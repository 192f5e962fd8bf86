// The provisioning lifecycle: attempts, bounded fallback, ids, mappings, operations by id,
// deadlines and events, each guard as a must-fire / must-not-fire pair.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  InMemoryProviderRegistry,
  InMemoryMappingStore,
  SandboxRouter,
  SANDBOX_ID_LABEL,
  SANDBOX_FLEET_LABEL,
  ProviderProvisioningError,
  ProviderRuntimeError,
  ProvisioningAvailabilityError,
  MappingPersistenceError,
  SandboxNotFoundError,
  SandboxRequestValidationError,
  AcquisitionTimeoutError,
  NoEligibleProviderError,
} from '../index.mjs';
import { CANARY, definition, fakeRuntime, recorder } from './fixtures.mjs';

const SBX = /^sbx_[0-9a-f]{32}$/;
const failing = (error = new Error(`quota exceeded for key ${CANARY}`)) =>
  fakeRuntime({
    launch: async () => {
      throw error;
    },
  });
const retryable = () => ({ code: 'PROVIDER_CAPACITY_PRE_ALLOCATION', retryable: true });

function setup(defs, options = {}) {
  const rec = recorder(options.observerMode);
  const registry = new InMemoryProviderRegistry(defs);
  const router = new SandboxRouter({ registry, observer: rec.observer, ...options.router });
  return { router, rec, registry };
}

// Two pools: "a" ranks first (cheaper), "b" second.
const twoPools = (aRuntime, bRuntime = fakeRuntime()) => [
  definition('a', { runtime: aRuntime, signals: { estimatedCost: 0.01 } }),
  definition('b', { runtime: bRuntime, signals: { estimatedCost: 0.5 } }),
];

test('provision returns an sbx id, never the provider id, and stamps it into the labels', async () => {
  const rt = fakeRuntime();
  const { router } = setup([definition('a', { runtime: rt })]);
  const s = await router.provision({ launch: { labels: { team: 'infra' } } });
  assert.match(s.id, SBX);
  assert.equal(s.providerId, 'a');
  assert.deepEqual(s.labels, { team: 'infra', [SANDBOX_ID_LABEL]: s.id, [SANDBOX_FLEET_LABEL]: 'default' });
  assert.deepEqual(rt.calls[0].options.labels, s.labels);
  const m = await router.getSandbox(s.id);
  assert.equal(m.providerSandboxId, 'remote-1');
  assert.notEqual(s.id, m.providerSandboxId);
  assert.equal(m.detached, false);
  assert.match(m.createdAt, /^\d{4}-\d\d-\d\dT/);
});

test('labels: a caller label on the stamp key is a typed error (must-fire)', async () => {
  const rt = fakeRuntime();
  const { router } = setup([definition('a', { runtime: rt })]);
  await assert.rejects(router.provision({ launch: { labels: { [SANDBOX_ID_LABEL]: 'mine' } } }), (e) => {
    return e instanceof SandboxRequestValidationError && e.field === `launch.labels.${SANDBOX_ID_LABEL}`;
  });
  assert.equal(rt.calls.length, 0);
});

test('labels: a caller label on the fleet stamp key is a typed error, in provision, route and explain (must-fire)', async () => {
  const rt = fakeRuntime();
  const { router } = setup([definition('a', { runtime: rt })]);
  const request = { launch: { labels: { team: 't', [SANDBOX_FLEET_LABEL]: 'other' } } };
  const isFleetField = (e) => e instanceof SandboxRequestValidationError && e.field === `launch.labels.${SANDBOX_FLEET_LABEL}`;
  await assert.rejects(router.provision(request), isFleetField);
  assert.throws(() => router.route(request), isFleetField);
  await assert.rejects(router.explain(request), isFleetField);
  assert.equal(rt.calls.length, 0);
});

test('labels: the fleet option is stamped beside the id; a fleet name outside [a-z0-9._-] is INVALID_CONFIGURATION (must-fire / must-not-fire)', async () => {
  const rt = fakeRuntime();
  const { router } = setup([definition('a', { runtime: rt })], { router: { fleet: 'prod-eu.1' } });
  const s = await router.provision({});
  assert.deepEqual(rt.calls[0].options.labels, { [SANDBOX_ID_LABEL]: s.id, [SANDBOX_FLEET_LABEL]: 'prod-eu.1' });
  assert.equal((await router.getSandbox(s.id)).labels[SANDBOX_FLEET_LABEL], 'prod-eu.1');
  for (const fleet of ['', 'Prod', 'a b', 'x'.repeat(64), 7]) {
    assert.throws(() => setup([definition('a')], { router: { fleet } }), (e) => e.code === 'INVALID_CONFIGURATION' && e.field === 'fleet');
  }
});

test('labels: other caller labels are kept (must-not-fire)', async () => {
  const { router } = setup([definition('a')]);
  const s = await router.provision({ launch: { labels: { 'agent-relay-sbx': 'x' } } });
  assert.equal(s.labels['agent-relay-sbx'], 'x');
});

test('orphan-proof: a launch that allocates then throws is findable by the stamped label', async () => {
  const rt = fakeRuntime();
  const original = rt.launch;
  rt.launch = async (options) => {
    await original(options);
    throw new Error('allocated then failed');
  };
  const { router, rec } = setup([definition('a', { runtime: rt })]);
  await assert.rejects(router.provision({}), ProviderProvisioningError);
  const sandboxId = rec.events.find((e) => e.type === 'attempt.failed').sandboxId;
  const found = await rt.findAllByLabels({ [SANDBOX_ID_LABEL]: sandboxId });
  assert.equal(found.length, 1);
});

test('fallback: retryable classification advances to the next pool when allowed (must-fire)', async () => {
  const { router, rec } = setup(twoPools(failing()), { router: { classifyProviderFailure: retryable } });
  const s = await router.provision({});
  assert.equal(s.providerId, 'b');
  assert.deepEqual(rec.types().filter((t) => t.startsWith('attempt') || t.startsWith('fallback')), [
    'attempt.started',
    'attempt.failed',
    'fallback.advanced',
    'attempt.started',
    'attempt.succeeded',
  ]);
  const failed = rec.events.find((e) => e.type === 'attempt.failed');
  assert.equal(failed.code, 'PROVIDER_CAPACITY_PRE_ALLOCATION');
  assert.equal(failed.retryable, true);
});

test('fallback: forbidden means exactly one launch even when retryable (must-not-fire)', async () => {
  const b = fakeRuntime();
  const { router } = setup(twoPools(failing(), b), { router: { classifyProviderFailure: retryable } });
  await assert.rejects(router.provision({ routing: { acquisitionFallback: 'forbidden' } }), (e) => {
    return e instanceof ProviderProvisioningError && e.code === 'PROVIDER_CAPACITY_PRE_ALLOCATION' && e.attempts.length === 1;
  });
  assert.equal(b.calls.length, 0);
});

test('fallback: a non-retryable classification is terminal (must-not-fire)', async () => {
  const b = fakeRuntime();
  const { router, rec } = setup(twoPools(failing(), b), {
    router: { classifyProviderFailure: () => ({ code: 'PROVIDER_QUOTA', retryable: false }) },
  });
  await assert.rejects(router.provision({}), (e) => e.code === 'PROVIDER_QUOTA');
  assert.equal(b.calls.length, 0);
  assert.equal(rec.events.find((e) => e.type === 'attempt.failed').retryable, false);
});

test('fallback: without a classifier every launch failure is terminal and outcome-unknown', async () => {
  const b = fakeRuntime();
  const { router, rec } = setup(twoPools(failing(), b));
  await assert.rejects(router.provision({}), (e) => {
    assert.ok(e instanceof ProviderProvisioningError);
    assert.equal(e.code, 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN');
    assert.deepEqual(e.attempts, [{ providerId: 'a', code: 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN', retryable: false }]);
    return true;
  });
  assert.equal(b.calls.length, 0);
  assert.equal(rec.events.find((e) => e.type === 'attempt.failed').retryable, false);
});

test('fallback: a classifier that throws, rejects or answers nonsense is terminal', async () => {
  for (const classify of [
    () => {
      throw new Error(CANARY);
    },
    async () => Promise.reject(new Error(CANARY)),
    () => ({ code: 'lowercase', retryable: true }),
    () => ({ code: 'OK', retryable: 'yes' }),
    () => 'RETRY',
    () => undefined,
  ]) {
    const b = fakeRuntime();
    const { router } = setup(twoPools(failing(), b), { router: { classifyProviderFailure: classify } });
    await assert.rejects(router.provision({}), (e) => e.code === 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN');
    assert.equal(b.calls.length, 0);
  }
});

test('fallback: the classifier receives the runtime\'s own thrown value and the definition (registry path; 0.7 sanitized it, see docs/migrating.md)', async () => {
  let seen;
  const thrown = new Error(`quota exceeded for key ${CANARY}`);
  const defs = twoPools(failing(thrown));
  const { router } = setup(defs, {
    router: {
      classifyProviderFailure: (error, provider) => {
        seen = { error, provider };
        return retryable();
      },
    },
  });
  await router.provision({});
  assert.equal(seen.error, thrown);
  assert.equal(seen.provider, defs[0]);
});

test('attempts: the bound stops retryable failures and the error lists per-attempt codes', async () => {
  const defs = ['a', 'b', 'c', 'd'].map((id) => definition(id, { runtime: failing() }));
  const { router } = setup(defs, { router: { classifyProviderFailure: retryable } });
  await assert.rejects(router.provision({ routing: { maxAcquisitionAttempts: 2 } }), (e) => {
    assert.equal(e.code, 'PROVIDER_ACQUISITION_EXHAUSTED');
    assert.deepEqual(e.attempts.map((a) => a.providerId), ['a', 'b']);
    assert.ok(e.attempts.every((a) => a.code === 'PROVIDER_CAPACITY_PRE_ALLOCATION'));
    assert.ok(!JSON.stringify(e).includes('quota exceeded'));
    return true;
  });
  assert.equal(defs[2].runtime.calls.length, 0);
});

test('attempts: default bound is 3', async () => {
  const defs = ['a', 'b', 'c', 'd'].map((id) => definition(id, { runtime: failing() }));
  const { router } = setup(defs, { router: { classifyProviderFailure: retryable } });
  await assert.rejects(router.provision({}), (e) => e.attempts.length === 3);
});

test('readiness: true keeps the pool (must-not-fire)', async () => {
  const { router } = setup(twoPools(fakeRuntime()), { router: { provisioning: { hasAvailableCredentials: async () => true } } });
  assert.equal((await router.provision({})).providerId, 'a');
});

test('readiness: false excludes the pool with CREDENTIALS_UNAVAILABLE (must-fire)', async () => {
  const a = fakeRuntime();
  const provisioning = { hasAvailableCredentials: (id) => id !== 'a' };
  const { router } = setup(twoPools(a), { router: { provisioning } });
  assert.equal((await router.provision({})).providerId, 'b');
  assert.equal(a.calls.length, 0);
  const e = await router.explain({});
  assert.deepEqual(e.rejected[0], { providerId: 'a', reasons: [{ code: 'CREDENTIALS_UNAVAILABLE', detail: 'readiness port answered false' }] });
});

test('readiness: a throw or a non-boolean aborts with ProvisioningAvailabilityError before signals or launch', async () => {
  for (const answer of [
    () => {
      throw new Error(CANARY);
    },
    async () => 'yes',
    async () => undefined,
  ]) {
    let resolved = 0;
    const a = fakeRuntime();
    const { router } = setup(twoPools(a), {
      router: {
        provisioning: { hasAvailableCredentials: answer },
        resolveRoutingSignals: (p) => {
          resolved++;
          return p.signals;
        },
      },
    });
    await assert.rejects(router.provision({}), (e) => {
      return e instanceof ProvisioningAvailabilityError && e.code === 'PROVISIONING_AVAILABILITY_FAILED' && !e.message.includes(CANARY);
    });
    assert.equal(resolved, 0);
    assert.equal(a.calls.length, 0);
  }
});

test('resolver: runs only for pools that passed requirements, and its signals rank', async () => {
  const asked = [];
  const defs = [...twoPools(fakeRuntime()), definition('c', { capabilities: { supported: ['pty'] } })];
  const { router } = setup(defs, {
    router: {
      resolveRoutingSignals: (p, request) => {
        asked.push(p.id);
        assert.deepEqual(request.requires, { forbiddenCapabilities: ['pty'] });
        return { ...p.signals, estimatedCost: p.id === 'b' ? 0 : 1 };
      },
    },
  });
  const s = await router.provision({ requires: { forbiddenCapabilities: ['pty'] } });
  assert.equal(s.providerId, 'b', 'resolved signals reorder a (registered cheaper) behind b');
  assert.deepEqual(asked.sort(), ['a', 'b']);
});

test('resolver: a throwing or invalid resolver excludes that pool, not the request (must-fire)', async () => {
  const { router } = setup(twoPools(fakeRuntime()), {
    router: {
      resolveRoutingSignals: (p) => {
        if (p.id === 'a') throw new Error(CANARY);
        return p.signals;
      },
    },
  });
  assert.equal((await router.provision({})).providerId, 'b');
  const e = await router.explain({});
  assert.equal(e.rejected[0].reasons[0].code, 'SIGNALS_UNRESOLVED');
  assert.ok(!JSON.stringify(e).includes(CANARY));
  const bad = setup(twoPools(fakeRuntime()), {
    router: { resolveRoutingSignals: (p) => (p.id === 'a' ? { ...p.signals, completionWithinBudgetRate: 2 } : p.signals) },
  });
  assert.equal((await bad.router.provision({})).providerId, 'b');
  assert.equal((await bad.router.explain({})).rejected[0].reasons[0].code, 'INVALID_SIGNALS');
});

test('detached: pools without launchDetached are ineligible with a reason (must-fire)', async () => {
  const { router } = setup([definition('plain')]);
  await assert.rejects(router.provisionDetached({}), (e) => {
    return e instanceof NoEligibleProviderError && e.rejections[0].reasons[0].code === 'DETACHED_UNSUPPORTED';
  });
});

test('detached: a pool with launchDetached is used and the mapping says detached (must-not-fire)', async () => {
  const rt = fakeRuntime({ detached: true });
  const { router } = setup([definition('d', { runtime: rt })]);
  const s = await router.provisionDetached({});
  assert.equal(rt.calls[0].op, 'launchDetached');
  assert.equal((await router.getSandbox(s.id)).detached, true);
});

class FailingStore extends InMemoryMappingStore {
  async put() {
    throw new Error(`db down ${CANARY}`);
  }
}

test('mapping: persistence failure destroys the sandbox and says so (cleanup ok)', async () => {
  const rt = fakeRuntime();
  const { router, rec } = setup([definition('a', { runtime: rt })], { router: { mappings: new FailingStore() } });
  await assert.rejects(router.provision({}), (e) => {
    return e instanceof MappingPersistenceError && e.code === 'MAPPING_PERSISTENCE_FAILED' && e.cleanup === 'destroyed' && /destroyed/.test(e.message);
  });
  assert.equal(rt.live.size, 0);
  const cleanup = rec.events.find((e) => e.type === 'cleanup.completed');
  assert.equal(cleanup.succeeded, true);
  assert.ok(rec.types().includes('mapping.failed'));
});

test('mapping: persistence failure with failing cleanup says the sandbox may remain', async () => {
  const rt = fakeRuntime({
    destroy: async () => {
      throw new Error(CANARY);
    },
  });
  const { router, rec } = setup([definition('a', { runtime: rt })], { router: { mappings: new FailingStore() } });
  await assert.rejects(router.provision({}), (e) => {
    return e.code === 'MAPPING_PERSISTENCE_FAILED' && e.cleanup === 'failed' && e.message.includes(SANDBOX_ID_LABEL) && !e.message.includes(CANARY);
  });
  assert.equal(rec.events.find((e) => e.type === 'cleanup.completed').succeeded, false);
});

test('mapping: a caller store receives the full record (must-not-fire)', async () => {
  const records = new Map();
  const mappings = {
    put: async (r) => void records.set(r.id, r),
    get: async (id) => records.get(id) ?? null,
    delete: async (id) => records.delete(id),
  };
  const { router } = setup([definition('a')], { router: { mappings } });
  const s = await router.provision({});
  const r = records.get(s.id);
  assert.deepEqual(Object.keys(r).sort(), ['createdAt', 'detached', 'id', 'labels', 'providerId', 'providerSandboxId']);
  await router.destroy(s.id);
  assert.equal(records.size, 0);
});

test('operations by id resolve the original provider and never reroute', async () => {
  const a = fakeRuntime();
  const b = fakeRuntime();
  const { router } = setup(twoPools(a, b));
  const s = await router.provision({});
  assert.equal(s.providerId, 'a');
  const out = await router.runScript(s.id, { command: 'echo hello' });
  assert.equal(out.output, 'ran echo hello');
  await router.uploadBundle(s.id, { files: [{ source: 'x', destination: 'f.txt' }] });
  assert.deepEqual(a.calls.map((c) => c.op), ['launch', 'runScript', 'uploadBundle']);
  assert.equal(b.calls.length, 0);
});

test('operations by id: a runtime failure is sanitized to provider id + operation', async () => {
  const rt = fakeRuntime({
    runScript: async () => {
      throw Object.assign(new Error(`boom ${CANARY}`), { secret: CANARY });
    },
  });
  const { router } = setup([definition('a', { runtime: rt })]);
  const s = await router.provision({});
  await assert.rejects(router.runScript(s.id, { command: 'x' }), (e) => {
    return e instanceof ProviderRuntimeError && e.operation === 'runScript' && !JSON.stringify(e).includes(CANARY) && e.cause === undefined;
  });
});

test('operations by id: unknown ids are SANDBOX_NOT_FOUND, malformed ids a validation error', async () => {
  const { router } = setup([definition('a')]);
  await assert.rejects(router.runScript(`sbx_${'0'.repeat(32)}`, { command: 'x' }), (e) => e instanceof SandboxNotFoundError && e.code === 'SANDBOX_NOT_FOUND');
  for (const bad of ['remote-1', 'sbx_XYZ', `sbx_${'A'.repeat(32)}`, 42]) {
    await assert.rejects(router.destroy(bad), (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_SANDBOX_ID');
  }
});

test('destroy: removes the mapping after the provider destroys (must-not-fire)', async () => {
  const rt = fakeRuntime();
  const { router } = setup([definition('a', { runtime: rt })]);
  const s = await router.provision({});
  await router.destroy(s.id);
  assert.equal(rt.live.size, 0);
  await assert.rejects(router.getSandbox(s.id), SandboxNotFoundError);
});

test('destroy: an already-deleted provider sandbox is tolerated and unmapped', async () => {
  const rt = fakeRuntime({
    destroy: async () => {
      throw Object.assign(new Error('not found'), { status: 404 });
    },
  });
  const { router } = setup([definition('a', { runtime: rt })]);
  const s = await router.provision({});
  await router.destroy(s.id);
  await assert.rejects(router.getSandbox(s.id), SandboxNotFoundError);
});

test('destroy: other failures keep the mapping for a retry (must-fire)', async () => {
  let fail = true;
  const rt = fakeRuntime({
    destroy: async (h) => {
      if (fail) throw new Error(`500 ${CANARY}`);
    },
  });
  const { router } = setup([definition('a', { runtime: rt })]);
  const s = await router.provision({});
  await assert.rejects(router.destroy(s.id), (e) => e instanceof ProviderRuntimeError && e.operation === 'destroy');
  assert.equal((await router.getSandbox(s.id)).id, s.id);
  fail = false;
  await router.destroy(s.id);
  await assert.rejects(router.getSandbox(s.id), SandboxNotFoundError);
});

test('operation deadline: a runScript that never settles ends with OPERATION_TIMEOUT (must-fire)', async () => {
  const rt = fakeRuntime({ runScript: () => new Promise(() => {}) });
  const { router } = setup([definition('a', { runtime: rt })], { router: { operationTimeoutMs: 50 } });
  const s = await router.provision({});
  const started = Date.now();
  await assert.rejects(router.runScript(s.id, { command: 'sleep forever' }), (e) => {
    return e instanceof ProviderRuntimeError && e.code === 'OPERATION_TIMEOUT' && e.operation === 'runScript' && e.timeoutMs === 50;
  });
  assert.ok(Date.now() - started < 2000);
});

test('operation deadline: a runScript that settles in time is not affected (must-not-fire)', async () => {
  const rt = fakeRuntime({ runScript: () => new Promise((r) => setTimeout(r, 10, { output: 'late but fine', exitCode: 0 })) });
  const { router } = setup([definition('a', { runtime: rt })], { router: { operationTimeoutMs: 1000 } });
  const s = await router.provision({});
  assert.equal((await router.runScript(s.id, { command: 'x' })).output, 'late but fine');
});

test('operation deadline: a runScript given a longer timeoutMs of its own keeps it (must-not-fire)', async () => {
  const rt = fakeRuntime({ runScript: () => new Promise((r) => setTimeout(r, 120, { output: 'long command', exitCode: 0 })) });
  const { router } = setup([definition('a', { runtime: rt })], { router: { operationTimeoutMs: 30 } });
  const s = await router.provision({});
  assert.equal((await router.runScript(s.id, { command: 'x', timeoutMs: 5000 })).output, 'long command');
  await assert.rejects(router.runScript(s.id, { command: 'x' }), (e) => e.code === 'OPERATION_TIMEOUT');
});

test('operation deadline: a destroy that never settles keeps the mapping for a retry (must-fire)', async () => {
  let hang = true;
  const rt = fakeRuntime({ destroy: (h) => (hang ? new Promise(() => {}) : undefined) });
  const { router } = setup([definition('a', { runtime: rt })], { router: { operationTimeoutMs: 50 } });
  const s = await router.provision({});
  await assert.rejects(router.destroy(s.id), (e) => e instanceof ProviderRuntimeError && e.code === 'OPERATION_TIMEOUT' && e.operation === 'destroy');
  assert.equal((await router.getSandbox(s.id)).id, s.id);
  hang = false;
  await router.destroy(s.id);
  await assert.rejects(router.getSandbox(s.id), SandboxNotFoundError);
});

test('operation deadline: other operations are bounded too (uploadBundle, stop)', async () => {
  const rt = fakeRuntime();
  rt.uploadBundle = () => new Promise(() => {});
  rt.stop = () => new Promise(() => {});
  const { router } = setup([definition('a', { runtime: rt })], { router: { operationTimeoutMs: 30 } });
  const s = await router.provision({});
  await assert.rejects(router.uploadBundle(s.id, { files: [] }), (e) => e.code === 'OPERATION_TIMEOUT' && e.operation === 'uploadBundle');
  await assert.rejects(router.stop(s.id), (e) => e.code === 'OPERATION_TIMEOUT' && e.operation === 'stop');
});

test('operation deadline: operationTimeoutMs is validated', () => {
  const registry = new InMemoryProviderRegistry([definition('a')]);
  for (const bad of [0, -1, 1.5, '100', 86_400_001, null]) {
    assert.throws(() => new SandboxRouter({ registry, operationTimeoutMs: bad }), (e) => e.code === 'INVALID_CONFIGURATION' && e.field === 'operationTimeoutMs');
  }
  assert.ok(new SandboxRouter({ registry, operationTimeoutMs: 86_400_000 }));
});

test('deadline: a launch that never settles ends with AcquisitionTimeoutError and no fallback (must-fire)', async () => {
  const b = fakeRuntime();
  const never = fakeRuntime({ launch: () => new Promise(() => {}) });
  const { router } = setup(twoPools(never, b), { router: { classifyProviderFailure: retryable } });
  const started = Date.now();
  await assert.rejects(router.provision({ routing: { acquisitionTimeoutMs: 50 } }), (e) => {
    return e instanceof AcquisitionTimeoutError && e.code === 'ACQUISITION_TIMEOUT' && e.timeoutMs === 50;
  });
  assert.ok(Date.now() - started < 2000);
  assert.equal(b.calls.length, 0);
});

test('deadline: a launch that settles in time is not affected (must-not-fire)', async () => {
  const slowish = fakeRuntime({ launch: () => new Promise((r) => setTimeout(r, 10, { id: 'ok-1' })) });
  const { router } = setup([definition('a', { runtime: slowish })]);
  const s = await router.provision({ routing: { acquisitionTimeoutMs: 2000 } });
  assert.equal((await router.getSandbox(s.id)).providerSandboxId, 'ok-1');
});

test('deadline: a late success is destroyed, not left running unrecorded', async () => {
  const destroyed = [];
  const late = fakeRuntime({
    launch: () => new Promise((r) => setTimeout(r, 80, { id: 'late-1' })),
    destroy: async (h) => void destroyed.push(h.id),
  });
  const { router, rec } = setup([definition('a', { runtime: late })]);
  await assert.rejects(router.provision({ routing: { acquisitionTimeoutMs: 20 } }), AcquisitionTimeoutError);
  await new Promise((r) => setTimeout(r, 150));
  assert.deepEqual(destroyed, ['late-1']);
  const cleanup = rec.events.find((e) => e.type === 'cleanup.completed');
  assert.equal(cleanup.reason, 'late-launch');
  assert.equal(cleanup.succeeded, true);
});

/** A launch that settles 60 ms after a 20 ms deadline; its destroy takes `destroyMs`. */
async function lateCleanup(destroyMs, operationTimeoutMs) {
  const late = fakeRuntime({
    launch: () => new Promise((r) => setTimeout(r, 60, { id: 'late-2' })),
    destroy: () => new Promise((r) => setTimeout(r, destroyMs)),
  });
  const { router, rec } = setup([definition('a', { runtime: late })], { router: { operationTimeoutMs } });
  await assert.rejects(router.provision({ routing: { acquisitionTimeoutMs: 20 } }), AcquisitionTimeoutError);
  await new Promise((r) => setTimeout(r, 60 + destroyMs + 150));
  return rec.events.find((e) => e.type === 'cleanup.completed');
}

test('deadline must-not-fire: a late success\'s destroy that takes 80 ms is waited for (operationTimeoutMs bounds it)', async () => {
  const cleanup = await lateCleanup(80, 5_000);
  assert.equal(cleanup.reason, 'late-launch');
  assert.equal(cleanup.succeeded, true);
});

test('deadline must-fire: a late success\'s destroy slower than operationTimeoutMs is reported as failed', async () => {
  const cleanup = await lateCleanup(300, 50);
  assert.equal(cleanup.reason, 'late-launch');
  assert.equal(cleanup.succeeded, false);
});

test('robustness: sync throws, non-Error rejections and malformed handles become typed outcomes', async () => {
  const cases = [
    [() => {
      throw new Error(CANARY);
    }, 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN'],
    [() => Promise.reject(CANARY), 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN'],
    [() => Promise.reject({ message: CANARY }), 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN'],
    [() => Promise.reject(undefined), 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN'],
    [async () => ({}), 'PROVIDER_MALFORMED_HANDLE'],
    [async () => ({ id: 42 }), 'PROVIDER_MALFORMED_HANDLE'],
    [async () => null, 'PROVIDER_MALFORMED_HANDLE'],
    [async () => ({ id: '' }), 'PROVIDER_MALFORMED_HANDLE'],
  ];
  for (const [launch, code] of cases) {
    const rt = fakeRuntime();
    rt.launch = launch;
    const { router } = setup([definition('a', { runtime: rt })]);
    await assert.rejects(router.provision({}), (e) => {
      return e instanceof ProviderProvisioningError && e.code === code && !JSON.stringify(e).includes(CANARY) && !e.stack.includes(CANARY);
    });
  }
});

test('observer: a throwing or rejecting observer never changes the outcome', async () => {
  let unhandled = 0;
  const onUnhandled = () => unhandled++;
  process.on('unhandledRejection', onUnhandled);
  try {
    for (const mode of ['throw', 'reject']) {
      const { router, rec } = setup(twoPools(failing()), { observerMode: mode, router: { classifyProviderFailure: retryable } });
      const s = await router.provision({});
      assert.equal(s.providerId, 'b');
      assert.ok(rec.events.length > 5);
      await router.destroy(s.id);
    }
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(unhandled, 0);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});

test('observer: events for every step carry ids and codes in order', async () => {
  const { router, rec } = setup([...twoPools(failing()), definition('x', { capabilities: { supported: ['pty'] } })], {
    router: { classifyProviderFailure: retryable },
  });
  await router.provision({ requires: { forbiddenCapabilities: ['pty'] } });
  assert.deepEqual(rec.types(), [
    'provision.validated',
    'provider.rejected',
    'provision.ranked',
    'attempt.started',
    'attempt.failed',
    'fallback.advanced',
    'attempt.started',
    'attempt.succeeded',
    'mapping.persisted',
  ]);
  const rejected = rec.events[1];
  assert.deepEqual(rejected.reasons, [{ code: 'FORBIDDEN_CAPABILITY_PRESENT', detail: 'pty' }]);
  assert.deepEqual(rec.events[2].providerIds, ['a', 'b']);
  const ids = new Set(rec.events.map((e) => e.sandboxId));
  assert.equal(ids.size, 1);
  assert.match([...ids][0], SBX);
});

test('observer: an object sink with emit() works too', async () => {
  const seen = [];
  const registry = new InMemoryProviderRegistry([definition('a')]);
  const router = new SandboxRouter({ registry, observer: { emit: (e) => seen.push(e.type) } });
  await router.provision({});
  assert.ok(seen.includes('attempt.succeeded'));
});

test('caches: a request object mutated between calls is routed by its new content (must-fire)', async () => {
  const { router } = setup([definition('a', { capabilities: { supported: ['pty'] } }), definition('b', { signals: { estimatedCost: 0 } })]);
  const request = { requires: { requiredCapabilities: ['pty'] } };
  assert.equal((await router.provision(request)).providerId, 'a');
  request.requires.requiredCapabilities.pop();
  assert.equal((await router.provision(request)).providerId, 'b', 'the cached compile must not be reused');
  request.requires.requiredCapabilities = ['pty'];
  assert.deepEqual(router.route(request), ['a']);
});

test('caches: an unchanged request and registry reuse the decision (must-not-fire) until a registration changes it', async () => {
  const registry = new InMemoryProviderRegistry([definition('a', { signals: { estimatedCost: 0.5 } })]);
  const router = new SandboxRouter({ registry });
  const request = { routing: { strategy: 'cost' } };
  assert.equal((await router.provision(request)).providerId, 'a');
  assert.equal((await router.provision({ routing: { strategy: 'cost' } })).providerId, 'a');
  registry.register(definition('cheaper', { signals: { estimatedCost: 0.01 } }));
  assert.equal((await router.provision(request)).providerId, 'cheaper', 'a new registration invalidates the cached order');
});

test('configuration: an unknown router option is a typed error (must-fire); known ones construct (must-not-fire)', () => {
  const registry = new InMemoryProviderRegistry([definition('a')]);
  assert.throws(() => new SandboxRouter({ registry, classifyProviderFaliure: () => ({}) }), (e) => e.code === 'INVALID_CONFIGURATION' && e.field === 'classifyProviderFaliure');
  assert.ok(new SandboxRouter({ registry, callbackTimeoutMs: 500, observer: () => {} }));
});

// --- guards added after a review of the lifecycle against the list --------------

/** A caller mapping store over a Map; `over` replaces methods. */
function mapStore(over = {}) {
  const records = new Map();
  return {
    records,
    put: async (r) => void records.set(r.id, r),
    get: async (id) => records.get(id) ?? null,
    delete: async (id) => records.delete(id),
    ...over,
  };
}

test('destroy: a mapping store whose delete never settles ends with MAPPING_PERSISTENCE_FAILED (must-fire)', async () => {
  const store = mapStore({ delete: () => new Promise(() => {}) });
  const { router } = setup([definition('a')], { router: { mappings: store, callbackTimeoutMs: 50 } });
  const s = await router.provision({});
  const started = Date.now();
  await assert.rejects(router.destroy(s.id), (e) => e instanceof MappingPersistenceError && e.code === 'MAPPING_PERSISTENCE_FAILED');
  assert.ok(Date.now() - started < 2000);
});

test('destroy: a mapping store whose delete settles in time removes the record (must-not-fire)', async () => {
  const store = mapStore({ delete: (id) => new Promise((r) => setTimeout(() => r(store.records.delete(id)), 10)) });
  const { router } = setup([definition('a')], { router: { mappings: store, callbackTimeoutMs: 1000 } });
  const s = await router.provision({});
  await router.destroy(s.id);
  assert.equal(store.records.size, 0);
});

test('robustness: a handle whose id getter throws is a malformed handle, and its text never surfaces', async () => {
  const rt = fakeRuntime();
  rt.launch = async () => ({
    get id() {
      throw new Error(`token=${CANARY}`);
    },
  });
  const { router, rec } = setup([definition('a', { runtime: rt })]);
  await assert.rejects(router.provision({}), (e) => {
    return e instanceof ProviderProvisioningError && e.code === 'PROVIDER_MALFORMED_HANDLE' && !e.stack.includes(CANARY) && !JSON.stringify(e).includes(CANARY);
  });
  assert.ok(rec.types().includes('provision.exhausted'));
});

test('destroy: a rejection whose getters throw is a sanitized ProviderRuntimeError, mapping kept', async () => {
  const hostile = {};
  for (const k of ['status', 'statusCode', 'response', 'code', 'message']) {
    Object.defineProperty(hostile, k, {
      get() {
        throw new Error(`secret ${CANARY}`);
      },
    });
  }
  const rt = fakeRuntime({ destroy: () => Promise.reject(hostile) });
  delete rt.getById;
  const { router } = setup([definition('a', { runtime: rt })]);
  const s = await router.provision({});
  await assert.rejects(router.destroy(s.id), (e) => {
    return e instanceof ProviderRuntimeError && e.code === 'PROVIDER_RUNTIME_ERROR' && !e.stack.includes(CANARY) && !JSON.stringify(e).includes(CANARY);
  });
  assert.equal((await router.getSandbox(s.id)).id, s.id);
});

test('destroy from a router with no cached handle: getById rejecting "not found" means gone, mapping removed (must-fire)', async () => {
  const store = mapStore();
  const rt = fakeRuntime();
  const registry = new InMemoryProviderRegistry([definition('a', { runtime: rt })]);
  const s = await new SandboxRouter({ registry, mappings: store }).provision({});
  rt.getById = async () => {
    throw Object.assign(new Error('sandbox not found'), { status: 404 });
  };
  rt.destroy = async () => {
    throw Object.assign(new Error('sandbox not found'), { status: 404 });
  };
  await new SandboxRouter({ registry, mappings: store }).destroy(s.id);
  assert.equal(store.records.size, 0);
});

test('destroy from a router with no cached handle: getById failing otherwise keeps the mapping (must-not-fire)', async () => {
  const store = mapStore();
  const rt = fakeRuntime();
  const registry = new InMemoryProviderRegistry([definition('a', { runtime: rt })]);
  const s = await new SandboxRouter({ registry, mappings: store }).provision({});
  rt.getById = async () => {
    throw Object.assign(new Error(`upstream 500 ${CANARY}`), { status: 500 });
  };
  await assert.rejects(new SandboxRouter({ registry, mappings: store }).destroy(s.id), (e) => {
    return e instanceof ProviderRuntimeError && e.operation === 'destroy: getById' && !JSON.stringify(e).includes(CANARY);
  });
  assert.equal(store.records.size, 1);
});

test('labels: a runtime that changes the labels it was given changes neither the result nor the next launch', async () => {
  const seen = [];
  const vandal = fakeRuntime({
    launch: async (options) => {
      seen.push({ ...options.labels });
      delete options.labels[SANDBOX_ID_LABEL];
      options.labels.injected = 'x';
      throw new Error('fails after mutating');
    },
  });
  const b = fakeRuntime();
  const { router } = setup(twoPools(vandal, b), { router: { classifyProviderFailure: retryable } });
  const s = await router.provision({ launch: { labels: { team: 't' } } });
  assert.deepEqual(s.labels, { team: 't', [SANDBOX_ID_LABEL]: s.id, [SANDBOX_FLEET_LABEL]: 'default' });
  assert.deepEqual(b.calls[0].options.labels, { team: 't', [SANDBOX_ID_LABEL]: s.id, [SANDBOX_FLEET_LABEL]: 'default' });
  assert.deepEqual(seen[0], { team: 't', [SANDBOX_ID_LABEL]: s.id, [SANDBOX_FLEET_LABEL]: 'default' });
});

test('labels: a request changed after validation (here by the signal resolver) launches what was validated', async () => {
  const rt = fakeRuntime();
  const resolveRoutingSignals = async (provider, request) => {
    request.launch.labels = { team: { nested: true } };
    request.launch.env = { STOLEN: 'yes' };
    return provider.signals;
  };
  const { router } = setup([definition('a', { runtime: rt })], { router: { resolveRoutingSignals } });
  const request = { launch: { labels: { team: 't' }, env: { A: '1' } } };
  const s = await router.provision(request);
  assert.deepEqual(rt.calls[0].options.labels, { team: 't', [SANDBOX_ID_LABEL]: s.id, [SANDBOX_FLEET_LABEL]: 'default' });
  assert.deepEqual(rt.calls[0].options.env, { A: '1' });
  assert.deepEqual((await router.getSandbox(s.id)).labels, { team: 't', [SANDBOX_ID_LABEL]: s.id, [SANDBOX_FLEET_LABEL]: 'default' });
});

test('mapping: a write that times out and lands later is removed again (no record of a destroyed sandbox)', async () => {
  const store = mapStore();
  store.put = (r) => new Promise((resolve) => setTimeout(() => resolve(void store.records.set(r.id, r)), 80));
  const rt = fakeRuntime();
  const { router } = setup([definition('a', { runtime: rt })], { router: { mappings: store, callbackTimeoutMs: 20 } });
  await assert.rejects(router.provision({}), (e) => e.code === 'MAPPING_PERSISTENCE_FAILED' && e.cleanup === 'destroyed');
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(store.records.size, 0);
  assert.equal(rt.live.size, 0);
});

test('mapping: cleanup after a failed write is bounded by operationTimeoutMs, not callbackTimeoutMs (must-not-fire)', async () => {
  const rt = fakeRuntime({ destroy: (h) => new Promise((r) => setTimeout(r, 120)) });
  const { router } = setup([definition('a', { runtime: rt })], {
    router: { mappings: new FailingStore(), callbackTimeoutMs: 30, operationTimeoutMs: 5000 },
  });
  await assert.rejects(router.provision({}), (e) => e.code === 'MAPPING_PERSISTENCE_FAILED' && e.cleanup === 'destroyed');
});

test('mapping: cleanup that outlasts operationTimeoutMs is reported as failed (must-fire)', async () => {
  const rt = fakeRuntime({ destroy: () => new Promise(() => {}) });
  const { router } = setup([definition('a', { runtime: rt })], { router: { mappings: new FailingStore(), operationTimeoutMs: 40 } });
  await assert.rejects(router.provision({}), (e) => e.code === 'MAPPING_PERSISTENCE_FAILED' && e.cleanup === 'failed');
});

test('readiness failure ends the provision with an exhausted event carrying the sandbox id', async () => {
  const provisioning = { hasAvailableCredentials: async () => 'yes' };
  const { router, rec } = setup([definition('a')], { router: { provisioning } });
  let id;
  await assert.rejects(router.provision({}), (e) => {
    id = e.sandboxId;
    return e instanceof ProvisioningAvailabilityError;
  });
  const ev = rec.events.find((e) => e.type === 'provision.exhausted');
  assert.equal(ev.code, 'PROVISIONING_AVAILABILITY_FAILED');
  assert.equal(ev.sandboxId, id);
});

// Acquisitions live natively under integer keys (src/binding/acquisition.rs); the JS side must
// end each exactly once, whatever way the provision ends.
test('machines must-fire: a provision in flight holds one native acquisition', async () => {
  const { jobsInFlight } = await import('../lib/options.js');
  const before = jobsInFlight();
  let release;
  const rt = fakeRuntime({ launch: () => new Promise((resolve) => (release = resolve)) });
  const { router } = setup([definition('a', { runtime: rt })]);
  const pending = router.provision({});
  await new Promise((r) => setImmediate(r));
  assert.equal(jobsInFlight(), before + 1);
  release({ id: 'remote-x' });
  await pending;
  assert.equal(jobsInFlight(), before);
});

test('machines must-not-fire: every ending (success, failure, fallback, timeout, no eligible, malformed) leaves none behind', async () => {
  const { jobsInFlight } = await import('../lib/options.js');
  const before = jobsInFlight();
  const never = fakeRuntime({ launch: () => new Promise(() => {}) });
  const malformed = fakeRuntime({ launch: async () => ({ id: 42 }) });
  const cases = [
    setup(twoPools(fakeRuntime())).router.provision({}),
    setup(twoPools(failing())).router.provision({}),
    setup(twoPools(failing()), { router: { classifyProviderFailure: retryable } }).router.provision({}),
    setup(twoPools(never)).router.provision({ routing: { acquisitionTimeoutMs: 50 } }),
    setup(twoPools(fakeRuntime())).router.provision({ providerId: 'nope' }),
    setup(twoPools(malformed)).router.provision({}),
  ];
  const settled = await Promise.allSettled(cases);
  assert.deepEqual(
    settled.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled', 'rejected', 'rejected', 'rejected'],
  );
  assert.equal(jobsInFlight(), before);
});

// The handle cache is bounded (lib/operations.js HANDLE_LIMIT): a sandbox that ends without
// the router hearing of it would otherwise keep its handle for the life of the router.
const { HANDLE_LIMIT } = (await import('../lib/operations.js')).default;

function ownedRuntime() {
  let n = 0;
  const resolved = [];
  const runtime = {
    resolved,
    launch: async () => ({ id: `r${n++}` }),
    destroy: async () => {},
    getById: async (id, options) => {
      resolved.push({ id, owned: options?.owned === true });
      return { id };
    },
  };
  return runtime;
}

test("operations read a runtime's method once: getters that answer a function first and throw after (must-fire) / plain methods (must-not-fire) run the same operations", async () => {
  const plain = ownedRuntime();
  let reads = 0;
  const methods = ownedRuntime();
  // A class instance: the registry keeps it by reference, so its getters run at each read.
  class Flipping {
    get launch() {
      return methods.launch;
    }
    get destroy() {
      return this.#once(methods.destroy);
    }
    get getById() {
      return this.#once(methods.getById);
    }
    #once(f) {
      reads++;
      if (this.#read.has(f)) throw new Error('read twice');
      this.#read.add(f);
      return f;
    }
    #read = new Set();
    /** A new operation: each method may be read once more. */
    fresh() {
      this.#read.clear();
    }
  }
  for (const rt of [plain, new Flipping()]) {
    const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]), mappings: new InMemoryMappingStore() });
    const first = await router.provision({});
    let last;
    for (let i = 0; i < HANDLE_LIMIT; i++) last = await router.provision({});
    // The oldest handle is gone: destroy re-resolves it owned (getById), then destroys it.
    rt.fresh?.();
    await router.destroy(first.id);
    await assert.rejects(router.getSandbox(first.id), (e) => e.code === 'SANDBOX_NOT_FOUND');
    rt.fresh?.();
    await router.destroy(last.id);
  }
  assert.deepEqual(methods.resolved, [{ id: 'r0', owned: true }], 'the flipping runtime was re-resolved once, owned');
  assert.ok(reads >= 2, 'its getters ran');
});

test('handle cache must-not-fire: under the limit, an operation by id uses the handle from launch', async () => {
  const rt = ownedRuntime();
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]) });
  const s = await router.provision({});
  await router.destroy(s.id);
  assert.deepEqual(rt.resolved, []);
});

test('handle cache must-fire: past the limit the oldest handle is dropped, and re-resolved owned when needed', async () => {
  const rt = ownedRuntime();
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]) });
  const first = await router.provision({});
  let last;
  for (let i = 0; i < HANDLE_LIMIT; i++) last = await router.provision({});
  await router.destroy(last.id);
  assert.deepEqual(rt.resolved, [], 'the newest handle is still kept');
  await router.destroy(first.id);
  assert.deepEqual(rt.resolved, [{ id: 'r0', owned: true }]);
});
