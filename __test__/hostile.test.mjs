// Hostile input: every value that crosses in from a caller is read once, inside a guard,
// and any throw while reading it becomes the documented typed error. One must-fire /
// must-not-fire pair per class of defect (issue: "every failure typed, bounded work").
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  InMemoryProviderRegistry,
  InMemoryMappingStore,
  SandboxRouter,
  SandboxRouterError,
  ProviderPackageMissingError,
  createSandboxRouter,
  routeProviders,
} from '../index.mjs';
import { CANARY, definition, fakeRuntime, leaks, trapAll, revoked, jsonCalls } from './fixtures.mjs';

/** A typed router error with this code, leaking nothing. */
function typed(code) {
  return (e) => {
    assert.ok(e instanceof SandboxRouterError, `expected a SandboxRouterError, got ${Object.prototype.toString.call(e)}`);
    assert.equal(e.code, code);
    assert.equal(leaks(e), false);
    return true;
  };
}

function routerWith(runtime, extra = {}) {
  return new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime })]), ...extra });
}

// --- 1. hostile thrown values ---------------------------------------------------------------

for (const [name, make] of [
  ['a Proxy that throws on every trap', trapAll],
  ['a revoked Proxy', revoked],
]) {
  test(`thrown must-fire: launch rejecting with ${name} is a typed outcome-unknown failure`, async () => {
    const rt = fakeRuntime({ launch: () => Promise.reject(make()) });
    await assert.rejects(routerWith(rt).provision({}), typed('PROVIDER_LAUNCH_OUTCOME_UNKNOWN'));
    const sync = fakeRuntime();
    sync.launch = () => {
      throw make();
    };
    await assert.rejects(routerWith(sync).provision({}), typed('PROVIDER_LAUNCH_OUTCOME_UNKNOWN'));
  });

  test(`thrown must-fire: operations by id (and the getById behind them) rejecting with ${name} are typed`, async () => {
    const rt = fakeRuntime({ runScript: () => Promise.reject(make()) });
    rt.uploadBundle = () => Promise.reject(make());
    const mappings = new InMemoryMappingStore();
    const s = await routerWith(rt, { mappings }).provision({});
    const router = routerWith(rt, { mappings });
    await assert.rejects(router.runScript(s.id, { command: 'x' }), typed('PROVIDER_RUNTIME_ERROR'));
    rt.getById = () => Promise.reject(make());
    await assert.rejects(router.uploadBundle(s.id, { files: [] }), typed('PROVIDER_RUNTIME_ERROR'));
    await assert.rejects(router.destroy(s.id), typed('PROVIDER_RUNTIME_ERROR'));
    rt.getById = async (id) => ({ id });
    rt.destroy = () => Promise.reject(make());
    await assert.rejects(router.destroy(s.id), typed('PROVIDER_RUNTIME_ERROR'));
  });
}

test('thrown must-not-fire: our own package error still passes through as itself', async () => {
  const missing = new ProviderPackageMissingError('x is not installed', 'PROVIDER_PACKAGE_MISSING', { packageName: 'x' });
  const rt = fakeRuntime({ launch: () => Promise.reject(missing) });
  await assert.rejects(routerWith(rt).provision({}), (e) => e === missing);
});

// --- 2. runScript's bound ---------------------------------------------------------------------

test('runScript must-fire: a short timeoutMs of its own is bounded by operationTimeoutMs, not a minute', async () => {
  const rt = fakeRuntime({ runScript: () => new Promise(() => {}) });
  const router = routerWith(rt, { operationTimeoutMs: 200 });
  const s = await router.provision({});
  const started = Date.now();
  await assert.rejects(router.runScript(s.id, { command: 'sleep', timeoutMs: 100 }), (e) => e.code === 'OPERATION_TIMEOUT' && e.timeoutMs === 200);
  assert.ok(Date.now() - started < 10_000, 'settled in about 200 ms');
});

test('runScript must-not-fire: a timeoutMs longer than the operation deadline keeps its own bound', async () => {
  const rt = fakeRuntime({ runScript: () => new Promise((resolve) => setTimeout(resolve, 400, { output: 'late', exitCode: 0 })) });
  const router = routerWith(rt, { operationTimeoutMs: 200 });
  const s = await router.provision({});
  assert.equal((await router.runScript(s.id, { command: 'sleep', timeoutMs: 1000 })).output, 'late');
});

// --- 3. a resolver's unreadable answer -----------------------------------------------------------

function resolverRouter(answerForA) {
  return new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { signals: { estimatedCost: 0.01 } }), definition('b', { signals: { estimatedCost: 0.5 } })]),
    resolveRoutingSignals: (p) => (p.id === 'a' ? answerForA() : p.signals),
  });
}

const cyclic = () => {
  const o = { estimatedCost: 0.01 };
  o.self = o;
  return o;
};
const throwingToJSON = () => ({
  toJSON() {
    throw new Error(CANARY);
  },
});
const throwingGetter = () => ({
  get estimatedCost() {
    throw new Error(CANARY);
  },
});

for (const [name, answer] of [
  ['a cyclic object', cyclic],
  ['an object whose toJSON throws', throwingToJSON],
  ['an object with a throwing getter', throwingGetter],
  ['a Proxy that throws on every trap', trapAll],
  ['a BigInt', () => 10n],
]) {
  test(`resolver must-fire: ${name} for one pool excludes only that pool`, async () => {
    const router = resolverRouter(answer);
    assert.equal((await router.provision({})).providerId, 'b');
    const x = await router.explain({});
    assert.deepEqual(
      x.eligible.map((e) => e.providerId),
      ['b'],
    );
    assert.equal(x.rejected[0].providerId, 'a');
    assert.equal(leaks(x), false);
  });
}

test('resolver must-not-fire: a readable answer for the same pool is used', async () => {
  const router = resolverRouter(() => ({ estimatedCost: 0.01, coldStartLatencyMs: 1, readyLatencyMs: 1, completionWithinBudgetRate: 1, available: true }));
  assert.equal((await router.provision({})).providerId, 'a');
});

// --- 4. store records ---------------------------------------------------------------------------

function storeAnswering(record) {
  const inner = new InMemoryMappingStore();
  return {
    put: (r) => inner.put(r),
    delete: (id) => inner.delete(id),
    get: async (id) => ((await inner.get(id)) ? record(await inner.get(id)) : null),
  };
}

for (const [name, make] of [
  ['a throwing providerId getter', (r) => ({ ...r, get providerId() {
    throw new Error(CANARY);
  } })],
  ['a throwing labels getter', (r) => ({ ...r, get labels() {
    throw new Error(CANARY);
  } })],
  ['a Proxy record', () => trapAll()],
  ['a revoked Proxy record', () => revoked()],
  ['a record without a providerSandboxId', (r) => ({ ...r, providerSandboxId: undefined })],
]) {
  test(`store must-fire: ${name} is MAPPING_READ_FAILED for getSandbox, runScript and destroy`, async () => {
    const router = routerWith(fakeRuntime(), { mappings: storeAnswering(make) });
    const s = await router.provision({});
    for (const call of [() => router.getSandbox(s.id), () => router.runScript(s.id, { command: 'x' }), () => router.destroy(s.id)]) {
      await assert.rejects(call(), typed('MAPPING_READ_FAILED'));
    }
  });
}

test('store must-not-fire: a plain record with getters that answer is read once and used', async () => {
  let reads = 0;
  const router = routerWith(fakeRuntime(), {
    mappings: storeAnswering((r) => ({
      ...r,
      get providerId() {
        reads++;
        return r.providerId;
      },
    })),
  });
  const s = await router.provision({});
  const m = await router.getSandbox(s.id);
  assert.equal(m.providerId, 'a');
  assert.equal(reads, 1, 'read once');
  assert.equal((await router.runScript(s.id, { command: 'x' })).exitCode, 0);
});

// --- 5. hostile requests --------------------------------------------------------------------------

for (const [name, make] of [
  ['a Proxy that throws on every trap', trapAll],
  ['a revoked Proxy', revoked],
  ['an object with a throwing getter', () => ({ get launch() {
    throw new Error(CANARY);
  } })],
]) {
  test(`request must-fire: ${name} is INVALID_REQUEST from route, provision and explain`, async () => {
    const router = routerWith(fakeRuntime());
    assert.throws(() => router.route(make()), typed('INVALID_REQUEST'));
    await assert.rejects(router.provision(make()), typed('INVALID_REQUEST'));
    await assert.rejects(router.explain(make()), typed('INVALID_REQUEST'));
    assert.throws(() => routeProviders(make(), [definition('a')]), typed('INVALID_REQUEST'));
  });
}

test('request must-not-fire: a getter that answers once and then throws is read once, and the launch uses that answer', async () => {
  let reads = 0;
  const request = {
    get launch() {
      if (++reads > 1) throw new Error(CANARY);
      return { labels: { team: 'infra' } };
    },
  };
  const rt = fakeRuntime();
  const s = await routerWith(rt).provision(request);
  assert.equal(reads, 1);
  assert.equal(s.labels.team, 'infra');
  assert.equal(rt.calls[0].options.labels.team, 'infra');
});

// --- 6. options of route and explain ----------------------------------------------------------------

test('options must-not-fire: explain and route accept null and undefined options', async () => {
  const router = routerWith(fakeRuntime());
  assert.equal((await router.explain({}, null)).eligible.length, 1);
  assert.equal((await router.explain({}, undefined)).eligible.length, 1);
  assert.deepEqual(router.route({}, null), ['a']);
});

test('options must-fire: unreadable options are INVALID_REQUEST', async () => {
  const router = routerWith(fakeRuntime());
  await assert.rejects(router.explain({}, trapAll()), typed('INVALID_REQUEST'));
  assert.throws(() => router.route({}, revoked()), typed('INVALID_REQUEST'));
});

// --- 7. bounded work and echo ---------------------------------------------------------------------

test('echo must-fire: a 10 MB unknown key is refused quickly, its echo cut and marked', async () => {
  const key = `requiredCapabilities${'x'.repeat(10 * 1024 * 1024)}`;
  const router = routerWith(fakeRuntime());
  const err = await router.provision({ requires: { [key]: ['pty'] } }).catch((e) => e);
  assert.equal(err.code, 'INVALID_REQUEST');
  assert.ok(err.field.length < 200 && err.message.length < 400, `field ${err.field.length}, message ${err.message.length}`);
  assert.match(err.field, /…\[\+\d+ bytes\]$/);
  assert.doesNotMatch(err.message, /did you mean/);
});

test('echo must-not-fire: a short misspelt key is shown whole, with its suggestion', async () => {
  const err = await routerWith(fakeRuntime()).provision({ requires: { requiredCapabilites: ['pty'] } }).catch((e) => e);
  assert.equal(err.field, 'requires.requiredCapabilites');
  assert.match(err.message, /did you mean requiredCapabilities/);
});

test('echo must-fire: huge unknown option keys are cut in router and factory errors', () => {
  const key = 'k'.repeat(1_000_000);
  const registry = new InMemoryProviderRegistry([definition('a')]);
  for (const make of [() => new SandboxRouter({ registry, [key]: 1 }), () => createSandboxRouter({ providers: { [key]: {} } }), () => createSandboxRouter({ providers: { local: { [key]: 1 } } })]) {
    assert.throws(make, (e) => e.code === 'INVALID_CONFIGURATION' && e.message.length < 400 && e.field.length < 200);
  }
});

// --- entry points that read caller objects -------------------------------------------------------

test('options must-fire: hostile router options, factory options and definitions are typed errors', () => {
  assert.throws(() => new SandboxRouter(trapAll()), typed('INVALID_CONFIGURATION'));
  assert.throws(() => new SandboxRouter({ registry: trapAll() }), typed('INVALID_CONFIGURATION'));
  assert.throws(() => new SandboxRouter({ registry: new InMemoryProviderRegistry([]), observer: trapAll() }), typed('INVALID_CONFIGURATION'));
  assert.throws(() => createSandboxRouter(trapAll()), typed('INVALID_CONFIGURATION'));
  assert.throws(() => createSandboxRouter({ providers: { local: trapAll() } }), typed('INVALID_CONFIGURATION'));
  assert.throws(() => new InMemoryProviderRegistry([trapAll()]), typed('INVALID_PROVIDER_DEFINITION'));
  assert.throws(() => new InMemoryProviderRegistry(revoked()), typed('INVALID_PROVIDER_DEFINITION'));
  assert.throws(() => new InMemoryProviderRegistry([{ id: 'a', get runtime() {
    throw new Error(CANARY);
  } }]), typed('INVALID_PROVIDER_DEFINITION'));
});

test('options must-not-fire: the same entry points with plain values work', () => {
  const registry = new InMemoryProviderRegistry([definition('a')]);
  assert.ok(new SandboxRouter({ registry, observer: { emit() {} } }));
  assert.ok(createSandboxRouter({ providers: { local: {} } }));
});

test('registry must-fire: a caller registry whose list() throws is REGISTRY_READ_FAILED', async () => {
  const router = new SandboxRouter({ registry: { list: () => {
    throw new Error(CANARY);
  } } });
  assert.throws(() => router.route({}), typed('REGISTRY_READ_FAILED'));
  await assert.rejects(router.provision({}), typed('REGISTRY_READ_FAILED'));
});

test('registry must-not-fire: a caller registry that answers is routed', () => {
  const defs = [definition('a')];
  assert.deepEqual(new SandboxRouter({ registry: { list: () => defs } }).route({}), ['a']);
});

// --- route/explain reuse a request object seen before, only while it reads the same -------

function twoPoolRouter() {
  return new SandboxRouter({
    registry: new InMemoryProviderRegistry([
      definition('a', { capabilities: { supported: ['pty'] }, signals: { estimatedCost: 0.5 } }),
      definition('b', { signals: { estimatedCost: 0.1 } }),
    ]),
  });
}

test('identity cache must-not-fire: an unchanged request object is read once per call and answered from the cache', () => {
  const router = twoPoolRouter();
  let reads = 0;
  const request = {
    get requires() {
      reads++;
      return { requiredCapabilities: [] };
    },
  };
  assert.deepEqual(router.route(request), ['b', 'a']);
  reads = 0;
  for (let i = 0; i < 5; i++) assert.deepEqual(router.route(request), ['b', 'a']);
  assert.equal(reads, 5, 'one read per call: the comparison, no second serialization');
});

test('identity snapshot must-not-fire: a request object routed once (a fresh one per call) is never snapshotted', () => {
  const router = twoPoolRouter();
  for (let i = 0; i < 3; i++) assert.equal(jsonCalls('parse', () => assert.deepEqual(router.route({ requires: { requiredCapabilities: [] } }), ['b', 'a'])).calls, 0);
});

test('identity snapshot must-fire: the second time an object comes it is snapshotted, and answered from the snapshot after', () => {
  const router = twoPoolRouter();
  const request = { requires: { requiredCapabilities: [] } };
  assert.equal(jsonCalls('parse', () => router.route(request)).calls, 0, 'first sight: marked only');
  assert.equal(jsonCalls('parse', () => router.route(request)).calls, 1, 'second sight: snapshot');
  assert.equal(jsonCalls('parse', () => assert.deepEqual(router.route(request), ['b', 'a'])).calls, 0, 'then: compared with it');
});

test('identity cache must-fire: every kind of change to a reused request object is seen', async () => {
  const router = twoPoolRouter();
  const request = { requires: { requiredCapabilities: [] } };
  assert.deepEqual(router.route(request), ['b', 'a']);
  request.requires.requiredCapabilities.push('pty');
  assert.deepEqual(router.route(request), ['a'], 'a nested array grew');
  request.requires.requiredCapabilities = [];
  assert.deepEqual(router.route(request), ['b', 'a'], 'a value replaced');
  request.requires.requiredCapabilities = () => ['pty'];
  assert.throws(() => router.route(request), typed('INVALID_REQUEST'), 'a function is refused, not dropped');
  delete request.requires;
  request.providerId = 'a';
  assert.deepEqual(router.route(request), ['a'], 'a key deleted and another added');
  assert.equal((await router.explain(request)).eligible.length, 1);
  let n = 0;
  const flaky = {
    get providerId() {
      return ++n === 1 ? 'a' : 'b';
    },
  };
  assert.deepEqual(router.route(flaky), ['a']);
  assert.deepEqual(router.route(flaky), ['b'], 'a getter that answers differently is a change');
});
