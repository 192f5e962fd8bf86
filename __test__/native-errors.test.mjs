// Errors, defaults and option rules that lib/ used to decide and the core decides now
// (issue 31): each rule as a must-fire / must-not-fire pair, seen through the public API
// (or the lib module that reads the caller's value), with canary secrets where a
// credential passes through.
import test from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createSandboxRouter,
  createProviderRuntime,
  createCapacityReader,
  summarizeDaytonaCapacity,
  InMemoryMappingStore,
  SqliteMappingStore,
  PostgresMappingStore,
  ProviderRuntimeError,
  ManifestStartError,
  MANIFEST_START_REASONS,
  SandboxRouterConfigurationError,
  SandboxRequestValidationError,
  ProviderPackageMissingError,
  SandboxRouterInternalError,
  DEFAULT_CAPABILITIES,
  DEFAULT_SIGNALS,
  SUPPORTED_PROVIDERS,
} from '../index.mjs';
import errors from '../lib/errors.js';
import bindingModule from '../lib/binding.js';
import finders from '../lib/finders.js';
import telemetry from '../lib/telemetry.js';
import { CANARY, leaks } from './fixtures.mjs';

const { binding } = bindingModule;
const ID = `sbx_${'ab'.repeat(16)}`;
const record = (over = {}) => ({ id: ID, providerId: 'pool', providerSandboxId: 'remote-1', labels: { team: 'a' }, createdAt: '2026-01-01T00:00:00.000Z', ...over });
const configError = (field) => (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field === field && !leaks(e);
const inputError = (field) => (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_INPUT' && e.field === field && !leaks(e);

// --- the class table --------------------------------------------------------------------------

test('class table must-fire: lib/errors.js maps exactly the core ErrorClass names, each to the class of that name', () => {
  const core = binding.errorClassNames();
  assert.deepEqual(Object.keys(errors.NATIVE_CLASSES).sort(), [...core].sort(), 'a name on one side only');
  for (const name of core) assert.equal(errors.NATIVE_CLASSES[name].name, name);
});

test('class table must-not-fire: a native package error becomes its class through fromNative, fields kept', () => {
  const e = errors.fromNative(binding.packageLoadError('e2b', true, `Cannot find package 'e2b' imported from /x ${CANARY}`));
  assert.ok(e instanceof ProviderPackageMissingError);
  assert.deepEqual({ code: e.code, packageName: e.packageName }, { code: 'PROVIDER_PACKAGE_MISSING', packageName: 'e2b' });
  assert.equal(leaks(e), false);
  const unsupported = errors.fromNative(binding.operationUnsupported('e2b', 'stop'));
  assert.ok(unsupported instanceof errors.ProviderOperationUnsupportedError && unsupported instanceof ProviderPackageMissingError);
  assert.equal(unsupported.message, 'the e2b adapter does not implement stop');
});

test('internal error must-fire: a value that is not a native error is the core internal error', () => {
  const e = errors.fromNative({ code: 'X', message: CANARY });
  assert.ok(e instanceof SandboxRouterInternalError);
  assert.equal(e.code, 'INTERNAL_ERROR');
  assert.equal(errors.codeOf(new Error(CANARY)), 'INTERNAL_ERROR');
  assert.equal(leaks(e), false);
});

test('internal error must-not-fire: codeOf keeps the code of our own error', () => {
  assert.equal(errors.codeOf(new ProviderRuntimeError('e2b', 'launch')), 'PROVIDER_RUNTIME_ERROR');
});

// --- constructors users call --------------------------------------------------------------------

test('ProviderRuntimeError must-fire: the core words a timeout and keeps the deadline', () => {
  const e = new ProviderRuntimeError('e2b', 'destroy', 5000);
  assert.deepEqual({ code: e.code, message: e.message, timeoutMs: e.timeoutMs }, {
    code: 'OPERATION_TIMEOUT',
    message: 'provider e2b did not settle destroy within 5000 ms; outcome unknown',
    timeoutMs: 5000,
  });
});

test('ProviderRuntimeError must-not-fire: without a deadline it is a failure, with the facts as given', () => {
  const e = new ProviderRuntimeError('e2b', 'launch', undefined, { status: 429, errorClass: 'QuotaError' });
  assert.deepEqual({ ...e, message: e.message }, {
    code: 'PROVIDER_RUNTIME_ERROR',
    providerId: 'e2b',
    operation: 'launch',
    status: 429,
    errorClass: 'QuotaError',
    message: 'provider e2b failed during launch',
  });
});

test('ManifestStartError must-fire: the core words each reason; must-not-fire: an unknown reason only says it failed', () => {
  const e = new ManifestStartError('web', MANIFEST_START_REASONS.READINESS_TIMEOUT, { timeoutMs: 10 });
  assert.equal(e.code, 'MANIFEST_START_FAILED');
  assert.equal(e.message, 'manifest start failed: process web did not pass its readiness probe in time (READINESS_TIMEOUT)');
  assert.deepEqual({ process: e.process, reason: e.reason, timeoutMs: e.timeoutMs }, { process: 'web', reason: 'READINESS_TIMEOUT', timeoutMs: 10 });
  assert.equal(new ManifestStartError('web', 'OTHER').message, 'manifest start failed: process web failed (OTHER)');
  assert.deepEqual(Object.keys(MANIFEST_START_REASONS), ['READINESS_TIMEOUT', 'PROCESS_EXITED', 'PROBE_UNAVAILABLE', 'START_FAILED', 'RUNTIME_ERROR']);
});

// --- the factory --------------------------------------------------------------------------------

test('factory must-fire: a non-object daytona entry is INVALID_CONFIGURATION naming providers.daytona', () => {
  assert.throws(() => createSandboxRouter({ providers: { daytona: `${CANARY}` } }), (e) => configError('providers.daytona.(entry)')(e) && e.providerId === 'daytona');
});

test('factory must-not-fire: a valid daytona entry builds, with the core defaults and no load', () => {
  const router = createSandboxRouter({ providers: { daytona: { apiKey: CANARY } }, moduleLoader: async () => ({}) });
  assert.deepEqual(router.providerIds, ['daytona']);
  assert.equal(leaks(router), false);
  assert.deepEqual(DEFAULT_CAPABILITIES, { supported: ['syncExec', 'fileTransfer'] });
  assert.deepEqual(DEFAULT_SIGNALS, { estimatedCost: 1, coldStartLatencyMs: 60_000, readyLatencyMs: 60_000, completionWithinBudgetRate: 0.5, available: true });
  assert.ok(Object.isFrozen(DEFAULT_SIGNALS) && Object.isFrozen(DEFAULT_CAPABILITIES.supported));
  assert.deepEqual(SUPPORTED_PROVIDERS, ['daytona', 'e2b', 'vercel', 'freestyle', 'agent37', 'microsandbox', 'local']);
});

test('factory must-fire: a value JSON cannot carry in warm is refused at its field; a cycle cannot be read', () => {
  assert.throws(() => createSandboxRouter({ providers: { local: { warm: { size: 1, maxIdleMs: Number.NaN } } } }), configError('providers.local.warm.maxIdleMs'));
  const cycle = { size: 1 };
  cycle.refill = { back: cycle };
  assert.throws(() => createSandboxRouter({ providers: { local: { warm: cycle } } }), (e) => configError('providers.local.warm')(e) && /could not be read/.test(e.message));
});

test('factory must-not-fire: adapterOptions may hold functions and class instances, which are not read', () => {
  class Agent {
    get secret() {
      throw new Error(CANARY);
    }
  }
  const entry = { apiKey: CANARY, adapterOptions: { fetch: () => {}, agent: new Agent() } };
  assert.ok(createSandboxRouter({ providers: { e2b: entry }, moduleLoader: async () => ({}) }));
  assert.ok(createProviderRuntime('e2b', entry));
});

test('provider runtime must-fire: an adapter without a method is PROVIDER_OPERATION_UNSUPPORTED', async () => {
  const modules = { '@agent-relay/sandbox': { E2BSandboxRuntime: class {} }, e2b: {} };
  const rt = createProviderRuntime('e2b', { apiKey: CANARY }, { moduleLoader: async (name) => modules[name] });
  await assert.rejects(rt.stop({ id: 'x' }), (e) => e instanceof errors.ProviderOperationUnsupportedError && e.code === 'PROVIDER_OPERATION_UNSUPPORTED' && !leaks(e));
});

test('provider runtime must-not-fire: an adapter with the method is called through', async () => {
  const modules = { '@agent-relay/sandbox': { E2BSandboxRuntime: class { async stop() { return 'stopped'; } } }, e2b: {} };
  const rt = createProviderRuntime('e2b', { apiKey: CANARY }, { moduleLoader: async (name) => modules[name] });
  assert.equal(await rt.stop({ id: 'x' }), 'stopped');
});

test('package ranges must-fire: each optional package the core names takes the range package.json declares', () => {
  const { peerDependencies } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  for (const [name, range] of Object.entries(peerDependencies)) {
    const e = errors.fromNative(binding.packageLoadError(name, false, null));
    assert.equal(e.code, 'PROVIDER_PACKAGE_LOAD_FAILED', name);
    const said = /satisfies (.*)$/.exec(e.message)[1];
    assert.equal(said, range === '*' ? '(see @agent-relay/sandbox peer dependencies)' : range, name);
  }
});

test('package ranges must-not-fire: a package the core does not load is a bug, not a guess', () => {
  assert.throws(() => binding.packageLoadError('left-pad', true, null), (e) => e.code === 'INTERNAL_ERROR');
});

test('package must-fire: an adapter class missing from @agent-relay/sandbox is PROVIDER_PACKAGE_MISSING naming the range', async () => {
  const rt = createProviderRuntime('agent37', { apiKey: CANARY, baseUrl: 'http://127.0.0.1:9', defaultHomeDir: '/h' }, { moduleLoader: async () => ({}) });
  await assert.rejects(rt.launch({}), (e) => e instanceof ProviderPackageMissingError && e.code === 'PROVIDER_PACKAGE_MISSING' && /Agent37Runtime.*npm install @agent-relay\/sandbox@">=0.1.10"/.test(e.message));
});

// --- mapping records and stores -----------------------------------------------------------------

test('mapping record must-fire: a record field that is not a string, or labels JSON cannot carry, is INVALID_INPUT naming it', async () => {
  const store = new InMemoryMappingStore();
  await assert.rejects(store.put(record({ providerId: 7 })), inputError('providerId'));
  await assert.rejects(store.put(record({ labels: { team: () => CANARY } })), inputError('labels.team'));
  await assert.rejects(store.put(new Proxy({}, { ownKeys() { throw new Error(CANARY); } })), inputError('record'));
});

test('mapping record must-not-fire: a well-formed record is stored and read back', async () => {
  const store = new InMemoryMappingStore();
  await store.put(record());
  assert.deepEqual((await store.get(ID)).labels, { team: 'a' });
});

test('durable record must-fire: labels that are not strings, a bad id or intent state are refused before the batch', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-router-native-errors-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteMappingStore(join(dir, 'm.db'));
  const good = store.put(record());
  await assert.rejects(store.put(record({ labels: { team: 1 } })), inputError('labels'));
  await assert.rejects(store.put(record({ id: 'sbx_nope' })), inputError('id'));
  await assert.rejects(store.intent({ id: ID, providerId: 'pool', state: 'done' }), inputError('state'));
  await good;
  assert.equal(await store.count(), 1, 'the good record was not failed by its neighbours');
  store.close();
});

test('store options must-fire: each bad SqliteMappingStore / PostgresMappingStore option is named, never its value', () => {
  assert.throws(() => new SqliteMappingStore({ path: '' }), configError('path'));
  assert.throws(() => new SqliteMappingStore({ path: 'a.db', durability: 'off' }), configError('durability'));
  assert.throws(() => new PostgresMappingStore({ connection: { password: 5 } }), configError('connection.password'));
  assert.throws(() => new PostgresMappingStore({ connection: { ssl: { mode: 'allow', ca: CANARY } } }), configError('connection.ssl.mode'));
  assert.throws(() => new PostgresMappingStore({ connection: `postgres://u:${CANARY}@h/db`, poolSize: 0 }), configError('poolSize'));
});

test('store options must-not-fire: a path, or a URL with its defaults, make a store', () => {
  const pg = new PostgresMappingStore(`postgres://u:${CANARY}@127.0.0.1:9/db`);
  assert.deepEqual(pg.toJSON(), { type: 'PostgresMappingStore', timeoutMs: 5000, leaseMs: 30000 });
  assert.equal(leaks(pg), false);
  assert.ok(new SqliteMappingStore({ path: join(tmpdir(), 'never-opened.db'), durability: 'full' }));
});

// --- readers, telemetry, finders ----------------------------------------------------------------

test('reader option must-fire: an option JSON cannot carry is INVALID_CONFIGURATION in the reader wording', () => {
  assert.throws(
    () => createCapacityReader('e2b', { apiKey: CANARY, limits: { sandboxes: () => 1 } }),
    (e) => configError('limits.sandboxes')(e) && e.message === 'invalid capacity reader option limits.sandboxes: must be JSON data (a function is not)',
  );
  assert.throws(() => summarizeDaytonaCapacity(undefined), inputError('items'));
});

test('reader option must-not-fire: plain options make a reader; a summary of nothing is answered', () => {
  assert.equal(createCapacityReader('e2b', { apiKey: CANARY, limits: { sandboxes: 2 } }).provider, 'e2b');
  assert.equal(summarizeDaytonaCapacity([]).provider, 'daytona');
});

test('telemetry option must-fire: anything but true, false or a known object is INVALID_CONFIGURATION naming the field', () => {
  assert.throws(() => telemetry.telemetryOf(1, null), configError('telemetry'));
  assert.throws(() => telemetry.telemetryOf({ meter: {} }, null), configError('telemetry.meter'));
  assert.throws(() => telemetry.telemetryOf({ propagateToLabels: 'yes' }, null), configError('telemetry.propagateToLabels'));
  assert.throws(() => telemetry.telemetryOf({ meterProvider: {} }, null), (e) => configError('telemetry.meterProvider')(e) && /getMeter\(name, version\)/.test(e.message));
});

test('telemetry option must-not-fire: absent and false are off, true is on', () => {
  assert.equal(telemetry.telemetryOf(undefined, null), null);
  assert.equal(telemetry.telemetryOf(false, null), null);
  assert.ok(telemetry.telemetryOf(true, null));
});

test('finder must-fire: the core names why a runtime could not be listed; must-not-fire: a list is no reason', async () => {
  const reason = async (runtime) => (await finders.finderFor({ runtime }).find('blue', 50)).reason;
  assert.equal(await reason({}), 'NOT_SUPPORTED');
  assert.equal(await reason({ findAllByLabels: async () => { throw new Error(CANARY); } }), 'READ_FAILED');
  assert.equal(await reason({ findAllByLabels: () => new Promise(() => {}) }), 'TIMEOUT');
  assert.equal(await reason({ findAllByLabels: async () => [] }), null);
});
