// Values JSON cannot carry (a function, a symbol, a BigInt, NaN, ±Infinity) at every kind of
// position of every entry point that serializes caller data (issue 22: no string protocol
// crosses the seam). Strict entry points refuse such a value with their own typed error,
// at the exact field (regression: a marker object used to be sent, and where an object was
// expected the native reader named the marker's key, `routing.$invalid`). Lenient ones
// (signals, a resolver's answer) read it as null: only that pool is ineligible.
// Each must-fire case has its must-not-fire twin: the same position with a valid value.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import {
  SandboxRouter,
  InMemoryProviderRegistry,
  InMemoryMappingStore,
  ProviderRegistryError,
  SandboxRequestValidationError,
  SandboxRouterConfigurationError,
  createCapacityReader,
  routeProviders,
} from '../index.mjs';
import { definition, signals } from './fixtures.mjs';

const require = createRequire(import.meta.url);
const { validateManifest, checkIdle, teardownManifest } = require('../lib/manifest.js');

const KINDS = [
  ['a function', () => () => 1],
  ['a symbol', () => Symbol('s')],
  ['a BigInt', () => 10n],
  ['NaN', () => NaN],
  ['Infinity', () => Infinity],
];

/** The typed refusal of a value JSON cannot carry: class, code, the field, and a message naming both. */
function refusedAt(Class, code, field, what) {
  return (e) => {
    assert.ok(e instanceof Class, `${field}: expected ${Class.name}, got ${e?.constructor?.name} ${e?.message}`);
    assert.equal(e.code, code);
    assert.equal(e.field, field);
    assert.ok(e.message.includes(`${field}`) && e.message.includes(`must be JSON data (${what} is not)`), e.message);
    assert.ok(!e.message.includes('$invalid') && !String(e.field).includes('$invalid'), e.message);
    return true;
  };
}

/** `{ a: { b: value } }` for path ['a', 'b'] (numbers: array elements, the rest `fill`ed). */
function at(path, value, fill = {}) {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  if (typeof head === 'number') {
    const out = Array.isArray(fill) ? [...fill] : [];
    out[head] = at(rest, value, out[head] ?? {});
    return out;
  }
  return { ...fill, [head]: at(rest, value, fill?.[head] ?? {}) };
}

// --- requests ---------------------------------------------------------------------------

const registry = () =>
  new InMemoryProviderRegistry([definition('a', { capabilities: { supported: ['pty', 'ssh'], resources: { cpu: 8 } } }), definition('b')]);

/** [position, field, make(bad) -> request, the same request with a valid value]. */
const REQUEST_POSITIONS = [
  ['the root (an object expected)', '(root)', (x) => x, {}],
  ['an object field', 'routing', (x) => ({ routing: x }), { routing: { strategy: 'cost' } }],
  ['a nested object field', 'requires.timeout', (x) => ({ requires: { timeout: x } }), { requires: { timeout: { maxReadyLatencyMs: 5000 } } }],
  ['a number field', 'resources.cpu', (x) => ({ resources: { cpu: x } }), { resources: { cpu: 1 } }],
  ['a deep number field', 'requires.timeout.maxReadyLatencyMs', (x) => ({ requires: { timeout: { maxReadyLatencyMs: x } } }), { requires: { timeout: { maxReadyLatencyMs: 5000 } } }],
  ['a string field', 'launch.name', (x) => ({ launch: { name: x } }), { launch: { name: 'job' } }],
  ['an array element', 'requires.requiredCapabilities[1]', (x) => ({ requires: { requiredCapabilities: ['pty', x] } }), { requires: { requiredCapabilities: ['pty', 'ssh'] } }],
  ['the labels object', 'launch.labels', (x) => ({ launch: { labels: x } }), { launch: { labels: {} } }],
  ['a label value', 'launch.labels.team', (x) => ({ launch: { name: 'job', labels: { team: x } } }), { launch: { name: 'job', labels: { team: 'x' } } }],
];

for (const [position, field, make, valid] of REQUEST_POSITIONS) {
  test(`request must-fire: a value JSON cannot carry at ${position} is INVALID_REQUEST at ${field}`, async () => {
    const router = new SandboxRouter({ registry: registry() });
    for (const [what, bad] of KINDS) {
      const refused = refusedAt(SandboxRequestValidationError, 'INVALID_REQUEST', field, what);
      assert.throws(() => router.route(make(bad())), refused);
      await assert.rejects(router.explain(make(bad())), refused);
      assert.throws(() => routeProviders(make(bad()), [definition('a')]), refused);
      await assert.rejects(router.provision(make(bad())), refused);
    }
  });

  test(`request must-not-fire: a valid value at ${position} routes and provisions`, async () => {
    const router = new SandboxRouter({ registry: registry() });
    assert.deepEqual(router.route(valid)[0], 'a');
    assert.equal((await router.explain(valid)).eligible[0].providerId, 'a');
    const sandbox = await router.provision(valid);
    assert.equal(sandbox.providerId, 'a');
  });
}

test('request regression: a marker-shaped object is ordinary data (refused as an unknown key, as any)', async () => {
  const router = new SandboxRouter({ registry: registry() });
  assert.throws(() => router.route({ routing: { $invalid: 'function' } }), (e) => e.code === 'INVALID_REQUEST' && e.field === 'routing.$invalid');
  // Before: `launch.labels` holding a function crossed as the label `$invalid: "function"`, accepted.
  assert.throws(() => router.route({ launch: { labels: () => 1 } }), (e) => e.code === 'INVALID_REQUEST' && e.field === 'launch.labels');
  await assert.rejects(router.provision({ launch: { labels: () => 1 } }), (e) => e.code === 'INVALID_REQUEST' && e.field === 'launch.labels');
});

// --- provider definitions ---------------------------------------------------------------

/** [position, path in the definition, valid value]. */
const DEFINITION_POSITIONS = [
  ['the capabilities object', ['capabilities'], {}],
  ['a nested object field', ['capabilities', 'timeout'], { maxSandboxLifetimeMs: 60000 }],
  ['a number field', ['capabilities', 'timeout', 'maxSandboxLifetimeMs'], 60000],
  ['another number field', ['capabilities', 'resources', 'cpu'], 4],
  ['a string field', ['capabilities', 'image', 'identity'], 'node:20'],
  ['an array element', ['capabilities', 'supported', 1], 'ssh'],
];

function fieldOf(path) {
  return path.reduce((out, s) => (typeof s === 'number' ? `${out}[${s}]` : out === '' ? s : `${out}.${s}`), '');
}

function defWith(path, value) {
  const base = { capabilities: { supported: ['pty', 'ssh'] } };
  const made = at(path, value, base);
  return definition('b', { capabilities: made.capabilities });
}

for (const [position, path, valid] of DEFINITION_POSITIONS) {
  const field = fieldOf(path);
  test(`definition must-fire: a value JSON cannot carry at ${position} is INVALID_PROVIDER_DEFINITION at ${field}`, () => {
    for (const [what, bad] of KINDS) {
      const refused = refusedAt(ProviderRegistryError, 'INVALID_PROVIDER_DEFINITION', field, what);
      assert.throws(() => new InMemoryProviderRegistry([definition('a'), defWith(path, bad())]), refused);
      assert.throws(() => new InMemoryProviderRegistry([definition('a')]).register(defWith(path, bad())), refused);
      assert.throws(() => routeProviders({}, [definition('a'), defWith(path, bad())]), refused);
      // A caller's own registry is read the same way.
    }
  });

  test(`definition must-fire: a caller's own registry holding a value JSON cannot carry at ${position} is refused at ${field}`, () => {
    for (const [what, bad] of KINDS) {
      const own = { list: () => [definition('a'), defWith(path, bad())] };
      assert.throws(() => new SandboxRouter({ registry: own }).route({}), refusedAt(ProviderRegistryError, 'INVALID_PROVIDER_DEFINITION', field, what));
    }
  });

  test(`definition must-not-fire: a valid value at ${position} registers and routes`, () => {
    const reg = new InMemoryProviderRegistry([definition('a'), defWith(path, valid)]);
    assert.equal(reg.size, 2);
    assert.deepEqual(new SandboxRouter({ registry: reg }).route({}).sort(), ['a', 'b']);
    const own = { list: () => [definition('a'), defWith(path, valid)] };
    assert.deepEqual(new SandboxRouter({ registry: own }).route({}).sort(), ['a', 'b']);
    assert.equal(routeProviders({}, [definition('a'), defWith(path, valid)]).eligible.length, 2);
  });
}

test('definition: an id JSON cannot carry is still INVALID_PROVIDER_ID (the id rule comes first) / a valid id registers', () => {
  for (const [, bad] of KINDS) {
    const def = { ...definition('x'), id: bad() };
    assert.throws(() => new InMemoryProviderRegistry([def]), (e) => e instanceof ProviderRegistryError && e.code === 'INVALID_PROVIDER_ID');
    assert.throws(() => routeProviders({}, [def]), (e) => e instanceof ProviderRegistryError && e.code === 'INVALID_PROVIDER_ID');
  }
  assert.equal(new InMemoryProviderRegistry([definition('x')]).size, 1);
});

test('definition: a duplicate id is still DUPLICATE_PROVIDER when the duplicate also holds a NaN (the order of checks)', () => {
  const nan = definition('a', { capabilities: { timeout: { maxSandboxLifetimeMs: NaN } } });
  assert.throws(() => new InMemoryProviderRegistry([definition('a'), nan]), (e) => e.code === 'DUPLICATE_PROVIDER');
});

/** [position, signals with a bad value, the detail of the rejection]. */
const SIGNAL_POSITIONS = [
  ['a number field', (x) => signals({ estimatedCost: x }), 'signals.estimatedCost must be a finite number >= 0 (null, NaN and Infinity are refused)'],
  ['a boolean field', (x) => signals({ available: x }), 'signals.available must be a boolean'],
  ['the signals object', (x) => x, 'signals must be an object'],
];

for (const [position, make, detail] of SIGNAL_POSITIONS) {
  test(`signals must-fire (lenient): a value JSON cannot carry at ${position} makes only that pool ineligible (INVALID_SIGNALS)`, async () => {
    for (const [, bad] of KINDS) {
      const defs = [{ ...definition('a'), signals: make(bad()) }, definition('b')];
      const x = routeProviders({}, defs);
      assert.deepEqual(
        x.eligible.map((e) => e.providerId),
        ['b'],
      );
      assert.deepEqual(
        x.rejected.map((r) => [r.providerId, r.reasons[0].code, r.reasons[0].detail]),
        [['a', 'INVALID_SIGNALS', detail]],
      );
      const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs) });
      assert.deepEqual(router.route({}), ['b']);
      // A resolver's answer is read the same way.
      const resolved = new SandboxRouter({
        registry: new InMemoryProviderRegistry([definition('a'), definition('b')]),
        resolveRoutingSignals: (p) => (p.id === 'a' ? make(bad()) : p.signals),
      });
      const e = await resolved.explain({});
      assert.deepEqual(
        e.rejected.map((r) => [r.providerId, r.reasons[0].code, r.reasons[0].detail]),
        [['a', 'INVALID_SIGNALS', detail]],
      );
      assert.equal((await resolved.provision({})).providerId, 'b');
    }
  });
}

test('signals must-not-fire: valid signals (registered or resolved) keep the pool eligible', async () => {
  const defs = [definition('a', { signals: { estimatedCost: 0.01 } }), definition('b')];
  assert.deepEqual(
    routeProviders({}, defs).eligible.map((e) => e.providerId),
    ['a', 'b'],
  );
  const resolved = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs), resolveRoutingSignals: (p) => p.signals });
  assert.equal((await resolved.provision({})).providerId, 'a');
});

// --- router health options --------------------------------------------------------------

const HEALTH_POSITIONS = [
  ['a number field', 'cooldownMs', 1000],
  ['another number field', 'failureThreshold', 3],
  ['a boolean field', 'observedSignals', true],
];

for (const [position, key, valid] of HEALTH_POSITIONS) {
  test(`health must-fire: a value JSON cannot carry at ${position} is INVALID_CONFIGURATION at health.${key}`, () => {
    for (const [what, bad] of KINDS) {
      assert.throws(
        () => new SandboxRouter({ registry: registry(), health: { [key]: bad() } }),
        refusedAt(SandboxRouterConfigurationError, 'INVALID_CONFIGURATION', `health.${key}`, what),
      );
    }
  });

  test(`health must-not-fire: a valid value at ${position} makes a router`, () => {
    assert.ok(new SandboxRouter({ registry: registry(), health: { [key]: valid } }));
  });
}

// --- capacity reader options ------------------------------------------------------------

const KEY = 'sk-not-json-test';
/** [position, field, make(bad) -> [provider, options], valid]. */
const READER_POSITIONS = [
  ['the options (an object expected)', 'options', (x) => ['daytona', x], ['daytona', { apiKey: KEY }]],
  ['the provider (a string field)', 'provider', (x) => [x, { apiKey: KEY }], ['daytona', { apiKey: KEY }]],
  ['an object field', 'limits', (x) => ['daytona', { apiKey: KEY, limits: x }], ['daytona', { apiKey: KEY, limits: { cpu: 4 } }]],
  ['a number field', 'limits.cpu', (x) => ['daytona', { apiKey: KEY, limits: { cpu: x } }], ['daytona', { apiKey: KEY, limits: { cpu: 4 } }]],
  ['an integer field', 'maxPages', (x) => ['daytona', { apiKey: KEY, maxPages: x }], ['daytona', { apiKey: KEY, maxPages: 10 }]],
  ['a string field', 'apiKey', (x) => ['daytona', { apiKey: x }], ['daytona', { apiKey: KEY }]],
  ['another string field', 'baseUrl', (x) => ['daytona', { apiKey: KEY, baseUrl: x }], ['daytona', { apiKey: KEY, baseUrl: 'http://127.0.0.1:1' }]],
];

for (const [position, field, make, valid] of READER_POSITIONS) {
  test(`reader must-fire: a value JSON cannot carry at ${position} is INVALID_CONFIGURATION at ${field}`, () => {
    for (const [what, bad] of KINDS) {
      assert.throws(
        () => createCapacityReader(.../** @type {[any, any]} */ (make(bad()))),
        refusedAt(SandboxRouterConfigurationError, 'INVALID_CONFIGURATION', field, what),
      );
    }
  });

  test(`reader must-not-fire: a valid value at ${position} makes a reader`, () => {
    assert.equal(createCapacityReader(.../** @type {[any, any]} */ (valid)).provider, 'daytona');
  });
}

test('reader getCapacity must-fire: a read option JSON cannot carry is refused at getCapacity.timeoutMs (or getCapacity), without a read', async () => {
  const reader = createCapacityReader('e2b', { apiKey: KEY, baseUrl: 'http://127.0.0.1:1' });
  for (const [what, bad] of KINDS) {
    await assert.rejects(reader.getCapacity({ timeoutMs: bad() }), refusedAt(SandboxRouterConfigurationError, 'INVALID_CONFIGURATION', 'getCapacity.timeoutMs', what));
    await assert.rejects(reader.getCapacity(bad()), refusedAt(SandboxRouterConfigurationError, 'INVALID_CONFIGURATION', 'getCapacity', what));
  }
});

test('reader getCapacity must-not-fire: a valid read option reads (an unreachable account is a measurement, not an error)', async () => {
  const reader = createCapacityReader('e2b', { apiKey: KEY, baseUrl: 'http://127.0.0.1:1' });
  const m = await reader.getCapacity({ timeoutMs: 2000 });
  assert.equal(m.status, 'unknown');
});

// --- process manifests ------------------------------------------------------------------

const MANIFEST_POSITIONS = [
  ['the manifest (an object expected)', 'manifest', (x) => x, { processes: [{ name: 'a', command: 'x' }] }],
  ['an object field', 'processes[0].readiness', (x) => ({ processes: [{ name: 'a', command: 'x', readiness: x }] }), { processes: [{ name: 'a', command: 'x', readiness: { logLine: 'up', timeoutMs: 1000, intervalMs: 100 } }] }],
  ['a number field', 'processes[0].readiness.timeoutMs', (x) => ({ processes: [{ name: 'a', command: 'x', readiness: { logLine: 'up', timeoutMs: x, intervalMs: 100 } }] }), { processes: [{ name: 'a', command: 'x', readiness: { logLine: 'up', timeoutMs: 1000, intervalMs: 100 } }] }],
  ['a string field', 'processes[0].command', (x) => ({ processes: [{ name: 'a', command: x }] }), { processes: [{ name: 'a', command: 'x' }] }],
  ['an array element', 'processes[1].dependsOn[0]', (x) => ({ processes: [{ name: 'a', command: 'x' }, { name: 'b', command: 'y', dependsOn: [x] }] }), { processes: [{ name: 'a', command: 'x' }, { name: 'b', command: 'y', dependsOn: ['a'] }] }],
  ['an element of idle.evidence', 'idle.evidence[0]', (x) => ({ processes: [{ name: 'a', command: 'x' }], idle: { quietMs: 1000, evidence: [x] } }), { processes: [{ name: 'a', command: 'x' }], idle: { quietMs: 1000, evidence: ['no-file-change'] } }],
];

for (const [position, field, make, valid] of MANIFEST_POSITIONS) {
  test(`manifest must-fire: a value JSON cannot carry at ${position} is INVALID_INPUT at ${field}`, () => {
    for (const [what, bad] of KINDS) {
      assert.throws(() => validateManifest(make(bad())), refusedAt(SandboxRequestValidationError, 'INVALID_INPUT', field, what));
    }
  });

  test(`manifest must-not-fire: a valid value at ${position} validates`, () => {
    assert.ok(validateManifest(valid).processes.length >= 1);
  });
}

/** A router stand-in whose every script fails: the manifest calls go on with "no answer". */
const silent = { runScript: async () => Promise.reject(new Error('no sandbox here')) };
const SBX = `sbx_${'0'.repeat(32)}`;
const IDLE = { processes: [{ name: 'a', command: 'x' }], idle: { quietMs: 1000, evidence: ['no-file-change'] } };

test('manifest options, state and started must-fire: a value JSON cannot carry is INVALID_INPUT at its field', async () => {
  const first = await checkIdle(silent, SBX, IDLE);
  for (const [what, bad] of KINDS) {
    const refused = (field) => refusedAt(SandboxRequestValidationError, 'INVALID_INPUT', field, what);
    await assert.rejects(checkIdle(silent, SBX, IDLE, null, { timeoutMs: bad() }), refused('options.timeoutMs'));
    await assert.rejects(checkIdle(silent, SBX, IDLE, null, [bad()]), refused('options.0'));
    await assert.rejects(checkIdle(silent, SBX, IDLE, { ...first.state, token: bad() }), refused('state.token'));
    await assert.rejects(teardownManifest(silent, SBX, { manifest: IDLE, processes: [{ name: 'a', pid: bad(), pgid: 50 }] }), refused('started.processes[0].pid'));
    await assert.rejects(teardownManifest(silent, SBX, { manifest: IDLE, processes: [] }, { flushTimeoutMs: bad() }), refused('options.flushTimeoutMs'));
  }
});

test('manifest options, state and started must-not-fire: valid values go through', async () => {
  const first = await checkIdle(silent, SBX, IDLE, null, { timeoutMs: 1000 });
  assert.equal(first.idle, false);
  assert.equal((await checkIdle(silent, SBX, IDLE, first.state, { timeoutMs: 1000 })).idle, false);
  const report = await teardownManifest(silent, SBX, { manifest: IDLE, processes: [{ name: 'a', pid: 50, pgid: 50 }] }, { flushTimeoutMs: 1000 });
  assert.equal(report.steps.length, 1);
});

// --- store records ----------------------------------------------------------------------

test('store record must-fire: a label JSON cannot carry is INVALID_INPUT at labels.<key> (before: dropped, or an untyped error)', async () => {
  const store = new InMemoryMappingStore();
  const record = (labels) => ({ id: SBX, providerId: 'a', providerSandboxId: 'p', createdAt: new Date().toISOString(), labels });
  for (const [what, bad] of KINDS) {
    await assert.rejects(store.put(record({ team: bad() })), refusedAt(SandboxRequestValidationError, 'INVALID_INPUT', 'labels.team', what));
    await assert.rejects(store.put(record(bad())), refusedAt(SandboxRequestValidationError, 'INVALID_INPUT', 'labels', what));
  }
  assert.equal(await store.get(SBX), null);
});

test('store record must-not-fire: string labels are stored', async () => {
  const store = new InMemoryMappingStore();
  await store.put({ id: SBX, providerId: 'a', providerSandboxId: 'p', createdAt: new Date().toISOString(), labels: { team: 'x' } });
  assert.deepEqual((await store.get(SBX)).labels, { team: 'x' });
});
