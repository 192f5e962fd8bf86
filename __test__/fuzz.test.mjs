// Fuzz: hostile values (Proxies that throw on every trap, revoked Proxies, throwing getters,
// cycles, BigInt, Symbols, huge strings, deep nesting, arbitrary data) at every public entry
// point and in every callback answer. Each outcome must be a success or a SandboxRouterError
// with a documented code, never anything else, never a hang, never a leaked canary.
import test from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  InMemoryProviderRegistry,
  InMemoryMappingStore,
  SandboxRouter,
  SandboxRouterError,
  createSandboxRouter,
  createProviderRuntime,
  createCapacityReader,
  routeProviders,
  validateManifest,
  planStartup,
  planTeardown,
  startManifest,
  teardownManifest,
  checkIdle,
  asProviderId,
} from '../index.mjs';
import { createLocalRuntime, LocalRuntimeError, LOCAL_ERROR_CODES } from '../local/index.mjs';
import { CANARY, definition, fakeRuntime, leaks, trapAll, revoked } from './fixtures.mjs';

// The README's error table (plus the code our fuzzing classifier answers).
const DOCUMENTED = new Set([
  'INVALID_REQUEST',
  'RESERVED_LABEL',
  'INVALID_SANDBOX_ID',
  'INVALID_INPUT',
  'ROUTING_NOT_APPLICABLE',
  'NO_ELIGIBLE_PROVIDER',
  'INVALID_PROVIDER_ID',
  'DUPLICATE_PROVIDER',
  'INVALID_PROVIDER_DEFINITION',
  'PROVIDER_NOT_REGISTERED',
  'REGISTRY_READ_FAILED',
  'INVALID_CONFIGURATION',
  'PROVISIONING_AVAILABILITY_FAILED',
  'PROVIDER_CAPACITY_EXHAUSTED',
  'PROVIDER_LAUNCH_OUTCOME_UNKNOWN',
  'PROVIDER_MALFORMED_HANDLE',
  'PROVIDER_ACQUISITION_EXHAUSTED',
  'ACQUISITION_TIMEOUT',
  'PROVIDER_RUNTIME_ERROR',
  'OPERATION_TIMEOUT',
  'MAPPING_PERSISTENCE_FAILED',
  'MAPPING_READ_FAILED',
  'SANDBOX_NOT_FOUND',
  'PROVIDER_PACKAGE_MISSING',
  'PROVIDER_PACKAGE_LOAD_FAILED',
  'PROVIDER_OPERATION_UNSUPPORTED',
  'FUZZ_CLASSIFIED',
]);

function deep(depth) {
  let v = {};
  for (let i = 0; i < depth; i++) v = { a: [v] };
  return v;
}

const MAKERS = {
  trap: trapAll,
  revoked,
  getter: () => ({
    get launch() {
      throw new Error(CANARY);
    },
    get id() {
      throw new Error(CANARY);
    },
  }),
  flaky: () => {
    let n = 0;
    return {
      get labels() {
        if (++n > 1) throw new Error(CANARY);
        return { a: 'b' };
      },
    };
  },
  cycle: () => {
    const o = { a: 1 };
    o.o = o;
    return o;
  },
  toJSON: () => ({
    toJSON() {
      throw new Error(CANARY);
    },
  }),
  bigint: () => 10n ** 30n,
  symbol: () => Symbol(CANARY),
  huge: () => 'x'.repeat(2_000_000),
  hugeKey: () => ({ ['k'.repeat(2_000_000)]: 1 }),
  deep: () => deep(20_000),
  fn: () => () => {
    throw new Error(CANARY);
  },
  nan: () => NaN,
  secretText: () => `Bearer ${CANARY}`,
};

/** A hostile value: one of the makers, or arbitrary data (fresh per use). */
const hostile = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...Object.keys(MAKERS)).map((k) => ({ make: MAKERS[k], label: k })) },
  { weight: 1, arbitrary: fc.anything({ maxDepth: 3, withBigInt: true, withNullPrototype: true, withObjectString: true }).map((v) => ({ make: () => v, label: 'anything' })) },
);

const HANG_MS = 5_000;

/** Runs `fn`; checks its outcome is a success or a documented, non-leaking typed error, within HANG_MS. */
async function outcome(fn) {
  let timer;
  const hang = new Promise((resolve) => {
    timer = setTimeout(resolve, HANG_MS, 'HANG');
  });
  let result;
  try {
    result = await Promise.race([
      (async () => {
        try {
          await fn();
          return 'ok';
        } catch (error) {
          return { error };
        }
      })(),
      hang,
    ]);
  } finally {
    clearTimeout(timer);
  }
  assert.notEqual(result, 'HANG', 'the call never settled');
  if (result !== 'ok') {
    const { error } = result;
    assert.ok(error instanceof SandboxRouterError, `not a SandboxRouterError: ${Object.prototype.toString.call(error)}`);
    assert.ok(DOCUMENTED.has(error.code), `undocumented code ${error.code}`);
    assert.equal(leaks(error), false, `${error.code} leaks the canary`);
  }
  return result;
}

const SHORT = { callbackTimeoutMs: 200, operationTimeoutMs: 200 };
const RUNS = { numRuns: 40 };

test('fuzz: requests and options at route, provision, explain and routeProviders', async () => {
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a'), definition('b')]), ...SHORT });
  await fc.assert(
    fc.asyncProperty(hostile, hostile, async (req, opts) => {
      await outcome(() => router.route(req.make()));
      await outcome(() => router.route({}, opts.make()));
      await outcome(() => router.provision(req.make()));
      await outcome(() => router.provisionDetached(req.make()));
      await outcome(() => router.explain(req.make(), opts.make()));
      await outcome(() => routeProviders(req.make(), [definition('a')]));
      await outcome(() => routeProviders({}, opts.make()));
      await outcome(() => routeProviders({}, [opts.make()]));
    }),
    RUNS,
  );
});

test('fuzz: constructors and factories (router, registry, factory, runtime, capacity reader, manifests, ids)', async () => {
  const registry = new InMemoryProviderRegistry([definition('a')]);
  await fc.assert(
    fc.asyncProperty(hostile, async (v) => {
      await outcome(() => new SandboxRouter(v.make()));
      for (const key of ['registry', 'mappings', 'observer', 'classifyProviderFailure', 'resolveRoutingSignals', 'provisioning', 'capacity', 'callbackTimeoutMs', 'operationTimeoutMs']) {
        await outcome(() => new SandboxRouter({ registry, [key]: v.make() }));
      }
      await outcome(() => new InMemoryProviderRegistry(v.make()));
      await outcome(() => new InMemoryProviderRegistry([v.make()]));
      await outcome(() => new InMemoryProviderRegistry([{ ...definition('a'), capabilities: v.make() }]));
      await outcome(() => new InMemoryProviderRegistry([{ ...definition('a'), signals: v.make() }]));
      await outcome(() => createSandboxRouter(v.make()));
      await outcome(() => createSandboxRouter({ providers: v.make() }));
      await outcome(() => createSandboxRouter({ providers: { local: v.make() } }));
      await outcome(() => createSandboxRouter({ providers: { e2b: v.make() } }));
      await outcome(() => createProviderRuntime('daytona', v.make()));
      await outcome(() => createCapacityReader('e2b', v.make()));
      await outcome(() => validateManifest(v.make()));
      await outcome(() => planStartup(v.make()));
      await outcome(() => asProviderId(v.make()));
    }),
    RUNS,
  );
});

test('fuzz: process manifests against a real local sandbox', async () => {
  const router = createSandboxRouter({ providers: { local: {} }, ...SHORT, operationTimeoutMs: 5_000 });
  const s = await router.provision({});
  const manifest = { processes: [{ name: 'a', command: 'sleep 5' }] };
  try {
    await fc.assert(
      fc.asyncProperty(hostile, async (v) => {
        await outcome(() => planTeardown(v.make()));
        await outcome(() => startManifest(v.make(), s.id, manifest));
        await outcome(() => startManifest(router, v.make(), manifest));
        await outcome(() => startManifest(router, s.id, manifest, v.make()));
        await outcome(() => teardownManifest(router, s.id, v.make()));
        await outcome(() => teardownManifest(router, s.id, { manifest, processes: [v.make()] }));
        await outcome(() => checkIdle(router, s.id, v.make()));
        await outcome(() => checkIdle(router, s.id, { ...manifest, idle: { quietMs: 1, evidence: ['no-running-command'] } }, v.make()));
      }),
      { numRuns: 15 },
    );
  } finally {
    await router.destroy(s.id);
  }
});

test('fuzz: the local runtime answers hostile arguments with its own typed errors', async () => {
  const rt = createLocalRuntime();
  const h = await rt.launch({});
  const local = async (fn) => {
    try {
      await fn();
    } catch (error) {
      assert.ok(error instanceof LocalRuntimeError, `not a LocalRuntimeError: ${Object.prototype.toString.call(error)}`);
      assert.ok(LOCAL_ERROR_CODES.includes(error.code), `undocumented code ${error.code}`);
      assert.ok(error.message.length < 2_000, 'bounded message');
      assert.equal(leaks(error), false);
    }
  };
  try {
    await fc.assert(
      fc.asyncProperty(hostile, async (v) => {
        await local(() => createLocalRuntime(v.make()));
        await local(() => rt.launch(v.make()));
        for (const op of ['getById', 'findAllByLabels', 'countByLabels', 'stop', 'start']) await local(() => rt[op](v.make()));
        await local(() => rt.runScript(v.make(), { command: 'true' }));
        await local(() => rt.runScript(h, v.make()));
        await local(() => rt.runScript(h, { command: 'true', env: v.make() }));
        await local(() => rt.uploadBundle(h, v.make()));
        await local(() => rt.uploadBundle(h, { files: [v.make()] }));
      }),
      { numRuns: 30 },
    );
  } finally {
    await rt.destroy(h);
  }
});

test('fuzz: operations by id with hostile ids and arguments', async () => {
  const rt = fakeRuntime();
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: rt })]), ...SHORT });
  const s = await router.provision({});
  await fc.assert(
    fc.asyncProperty(hostile, async (v) => {
      for (const op of ['getSandbox', 'destroy', 'stop', 'start']) await outcome(() => router[op](v.make()));
      await outcome(() => router.runScript(v.make(), { command: 'x' }));
      await outcome(() => router.runScript(s.id, v.make()));
      await outcome(() => router.runScript(s.id, { command: 'x', env: v.make() }));
      await outcome(() => router.runScript(s.id, { command: 'x', timeoutMs: v.make() }));
      await outcome(() => router.uploadBundle(s.id, v.make()));
      await outcome(() => router.uploadBundle(s.id, { files: [v.make()] }));
    }),
    RUNS,
  );
});

/**
 * A router whose callback or runtime answer at `place` is drawn from `v` (fresh per call)
 * while `state.armed` is true.
 */
function hostileRouter(v, place, state = { armed: true }) {
  const at = () => (state.armed ? place : 'none');
  const answer = (name) => () => (at() === name ? v.make() : undefined);
  const throws = (name) => () => {
    if (at() === `${name}:throw`) throw v.make();
    if (at() === `${name}:reject`) return Promise.reject(v.make());
    return null;
  };
  const rt = fakeRuntime();
  const launch = rt.launch;
  rt.launch = async (o) => {
    await throws('launch')();
    if (at() === 'launch:resolve') return v.make();
    return launch(o);
  };
  for (const op of ['runScript', 'uploadBundle', 'destroy', 'getById']) {
    const original = rt[op];
    rt[op] = async (...args) => {
      await throws(op)();
      if (at() === `${op}:resolve`) return v.make();
      return original(...args);
    };
  }
  const inner = new InMemoryMappingStore();
  const mappings = {
    put: async (r) => {
      await throws('put')();
      return inner.put(r);
    },
    get: async (id) => {
      await throws('get')();
      if (at() === 'get:resolve') return v.make();
      return inner.get(id);
    },
    delete: async (id) => {
      await throws('delete')();
      return inner.delete(id);
    },
  };
  const withReader = (id) => definition(id, { runtime: rt, capacity: { getCapacity: async () => (at() === 'capacity' ? v.make() : { status: 'known', resources: [{ resource: 'sandboxes', used: 0, limit: 5, unit: 'sandboxes', headroom: 5, required: 1 }] }) } });
  return new SandboxRouter({
    registry: new InMemoryProviderRegistry([withReader('a'), withReader('b')]),
    mappings,
    ...SHORT,
    observer: () => {
      if (at() === 'observer') throw v.make();
      return answer('observer:return')();
    },
    classifyProviderFailure: () => (at() === 'classifier' ? v.make() : { code: 'FUZZ_CLASSIFIED', retryable: true }),
    resolveRoutingSignals: (p) => (at() === 'resolver' ? v.make() : p.signals),
    provisioning: { hasAvailableCredentials: () => (at() === 'readiness' ? v.make() : true) },
    capacity: place === 'capacity' ? { providerOrder: ['a', 'b'] } : undefined,
  });
}

const PLACES = [
  'launch:throw',
  'launch:reject',
  'launch:resolve',
  'runScript:throw',
  'runScript:reject',
  'uploadBundle:reject',
  'destroy:reject',
  'destroy:throw',
  'getById:reject',
  'getById:resolve',
  'put:throw',
  'put:reject',
  'get:reject',
  'get:resolve',
  'delete:reject',
  'observer',
  'observer:return',
  'classifier',
  'resolver',
  'readiness',
  'capacity',
];

test('fuzz: hostile answers and thrown values in every callback and runtime call', async () => {
  await fc.assert(
    fc.asyncProperty(hostile, fc.constantFrom(...PLACES), async (v, place) => {
      const router = hostileRouter(v, place);
      await outcome(() => router.provision({}));
      await outcome(() => router.explain({}));
      await outcome(() => router.getCapacity());
    }),
    { numRuns: 100 },
  );
  // Operations by id: provisioned cleanly, then the runtime or store turns hostile.
  await fc.assert(
    fc.asyncProperty(hostile, fc.constantFrom(...PLACES.filter((p) => !p.startsWith('launch'))), async (v, place) => {
      const state = { armed: false };
      const router = hostileRouter(v, place, state);
      const s = await router.provision({});
      state.armed = true;
      await outcome(() => router.runScript(s.id, { command: 'x' }));
      await outcome(() => router.uploadBundle(s.id, { files: [] }));
      await outcome(() => router.getSandbox(s.id));
      await outcome(() => router.destroy(s.id));
    }),
    { numRuns: 40 },
  );
});
