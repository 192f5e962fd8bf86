// Where the router meets the published adapters: ownership on re-resolve, what a
// classifier sees, and a broken install told apart from a missing one. Each guard as a
// must-fire / must-not-fire pair.
import test from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import {
  InMemoryProviderRegistry,
  InMemoryMappingStore,
  SandboxRouter,
  createSandboxRouter,
  ProviderRuntimeError,
  ProviderPackageMissingError,
} from '../index.mjs';
import { CANARY, definition, leaks } from './fixtures.mjs';

/**
 * A fake adapter that keeps the port's ownership rule exactly (sandbox-runtime-port.md,
 * point 4): `launch` records an owned handle; `getById`/`findByLabels` record an attached
 * one unless asked `{ owned: true }`, replacing the record for that id; on an attached
 * handle `destroy` only forgets the record and `stop`/`start` do nothing. `cloud` is the
 * provider's side, shared by every instance.
 */
class PortFaithfulAdapter {
  #records = new Map();
  #n = 0;
  constructor(cloud, name = 'a') {
    this.id = 'faithful';
    this.cloud = cloud;
    this.name = name;
    this.lookups = [];
  }
  async launch(options) {
    const id = `remote-${this.name}-${++this.#n}`;
    this.cloud.set(id, { labels: { ...options?.labels }, state: 'started' });
    this.#records.set(id, { owned: true });
    return { id, state: 'started' };
  }
  async getById(id, options) {
    this.lookups.push(options);
    if (!this.cloud.has(id)) return null;
    this.#records.set(id, { owned: options?.owned === true });
    return { id, state: this.cloud.get(id).state };
  }
  async findByLabels(labels, options) {
    for (const [id, s] of this.cloud) {
      if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) return this.getById(id, options);
    }
    return null;
  }
  async findAllByLabels() {
    return [];
  }
  async countByLabels() {
    return 0;
  }
  async uploadBundle() {}
  async runScript(handle, options) {
    return { output: options.command, exitCode: 0 };
  }
  async stop(handle) {
    if (this.#records.get(handle.id)?.owned) this.cloud.get(handle.id).state = 'stopped';
  }
  async start(handle) {
    if (this.#records.get(handle.id)?.owned) this.cloud.get(handle.id).state = 'started';
    return handle;
  }
  async destroy(handle) {
    const record = this.#records.get(handle.id);
    if (record?.owned) this.cloud.delete(handle.id);
    this.#records.delete(handle.id);
  }
}

function routerOn(adapter, mappings) {
  return new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('pool', { runtime: adapter })]), mappings });
}

test('ownership must-fire: the port-faithful fake leaks on an attached re-resolve, as the published Daytona adapter does', async () => {
  const cloud = new Map();
  const adapter = new PortFaithfulAdapter(cloud);
  const h = await adapter.launch({});
  // What a router that re-resolves without { owned: true } does:
  const attached = await adapter.getById(h.id);
  await adapter.destroy(attached);
  assert.equal(cloud.has(h.id), true, 'the fake must leak here, or the must-not-fire tests prove nothing');
});

test('ownership must-not-fire: after a restart, destroy re-resolves owned and deletes the sandbox', async () => {
  const cloud = new Map();
  const mappings = new InMemoryMappingStore();
  const s = await routerOn(new PortFaithfulAdapter(cloud, 'before'), mappings).provision({});
  const { providerSandboxId } = await mappings.get(s.id);
  // A new process: a new router and a new adapter instance, the same store and cloud.
  const fresh = new PortFaithfulAdapter(cloud, 'after');
  const restarted = routerOn(fresh, mappings);
  await restarted.stop(s.id);
  assert.equal(cloud.get(providerSandboxId).state, 'stopped', 'stop reached the provider');
  await restarted.destroy(s.id);
  assert.equal(cloud.has(providerSandboxId), false, 'the sandbox was deleted, not forgotten');
  assert.deepEqual(fresh.lookups, [{ owned: true }, { owned: true }]);
  assert.equal(await mappings.get(s.id), null);
});

test('ownership must-not-fire: a second router on the same adapter instance does not downgrade the first router\'s handle', async () => {
  const cloud = new Map();
  const mappings = new InMemoryMappingStore();
  const adapter = new PortFaithfulAdapter(cloud);
  const a = routerOn(adapter, mappings);
  const b = routerOn(adapter, mappings);
  const s = await a.provision({});
  const { providerSandboxId } = await mappings.get(s.id);
  assert.equal((await b.runScript(s.id, { command: 'echo hi' })).output, 'echo hi');
  await a.destroy(s.id);
  assert.equal(cloud.has(providerSandboxId), false, 'the launching router still owns it after the other looked it up');
  assert.ok(adapter.lookups.every((o) => o?.owned === true));
});

test('ownership must-not-fire: a sandbox destroyed by the second router is deleted too', async () => {
  const cloud = new Map();
  const mappings = new InMemoryMappingStore();
  const adapter = new PortFaithfulAdapter(cloud);
  const s = await routerOn(adapter, mappings).provision({});
  const { providerSandboxId } = await mappings.get(s.id);
  await routerOn(adapter, mappings).destroy(s.id);
  assert.equal(cloud.has(providerSandboxId), false);
});

// --- what a classifier sees ---------------------------------------------------------------

class QuotaError extends Error {
  constructor() {
    super(`429 quota exceeded for key ${CANARY}`);
    this.status = 429;
    this.config = { headers: { authorization: `Bearer ${CANARY}` } };
  }
}

function failingPools(thrown) {
  return [
    definition('a', {
      runtime: {
        id: 'x',
        launch: async () => {
          throw thrown;
        },
        destroy: async () => {},
      },
      signals: { estimatedCost: 0.01 },
    }),
    definition('b', { signals: { estimatedCost: 0.5 } }),
  ];
}

test('classifier must-fire: on the registry path it receives the very value the runtime threw', async () => {
  for (const thrown of [new QuotaError(), `Bearer ${CANARY}`, { status: 429, body: CANARY }]) {
    const seen = [];
    const events = [];
    const mappings = new InMemoryMappingStore();
    const defs = failingPools(thrown);
    const router = new SandboxRouter({
      registry: new InMemoryProviderRegistry(defs),
      mappings,
      observer: (e) => events.push(e),
      classifyProviderFailure: (error, provider) => {
        seen.push({ error, provider });
        const status = typeof error === 'object' ? error.status : undefined;
        return status === 429 ? { code: 'PROVIDER_RATE_LIMITED', retryable: true } : { code: 'OTHER', retryable: false };
      },
    });
    const s = await router.provision({}).catch((e) => e);
    assert.equal(seen.length, 1);
    assert.equal(seen[0].error, thrown, 'the original thrown value');
    assert.equal(seen[0].provider, defs[0], 'and the caller\'s own definition');
    if (typeof thrown === 'object') assert.equal(s.providerId, 'b', 'a 429 the caller recognised advanced the fallback');
    else assert.equal(s.code, 'OTHER');
    // ...and it reaches nothing else the router produces.
    const explanation = await router.explain({});
    for (const v of [s, events, await mappings.list(), explanation, router]) assert.equal(leaks(v), false);
  }
});

test('classifier must-not-fire: the raw error reaches no thrown error, event or record when the failure is terminal', async () => {
  const events = [];
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry(failingPools(new QuotaError())),
    observer: (e) => events.push(e),
    classifyProviderFailure: (error) => {
      assert.ok(leaks(error), 'the classifier does see the provider text');
      return { code: 'PROVIDER_QUOTA', retryable: false };
    },
  });
  const err = await router.provision({}).catch((e) => e);
  assert.equal(err.code, 'PROVIDER_QUOTA');
  assert.equal(leaks(err), false);
  assert.equal(err.cause, undefined);
  assert.equal(leaks(events), false);
});

/** A fake `@agent-relay/sandbox` whose E2B adapter's launch throws `thrown`. */
function throwingModules(thrown) {
  class E2BSandboxRuntime {
    constructor() {
      this.id = 'e2b';
    }
    async launch() {
      throw thrown;
    }
    async destroy() {}
  }
  const modules = { '@agent-relay/sandbox': { E2BSandboxRuntime }, e2b: {} };
  return async (name) => modules[name];
}

async function classifiedOnFactoryPath(thrown) {
  let seen;
  const router = createSandboxRouter({
    providers: { e2b: { apiKey: `${CANARY}-key` } },
    moduleLoader: throwingModules(thrown),
    classifyProviderFailure: (error) => {
      seen = error;
      return { code: 'X', retryable: false };
    },
  });
  const err = await router.provision({}).catch((e) => e);
  return { seen, err };
}

test('credential-first classifier must-fire: it gets the sanitized error with the numeric status and the SDK class name', async () => {
  const { seen, err } = await classifiedOnFactoryPath(new QuotaError());
  assert.ok(seen instanceof ProviderRuntimeError);
  assert.equal(seen.code, 'PROVIDER_RUNTIME_ERROR');
  assert.equal(seen.operation, 'launch');
  assert.equal(seen.status, 429);
  assert.equal(seen.errorClass, 'QuotaError');
  assert.equal(leaks(seen), false, 'no provider text, header or key');
  assert.equal(leaks(err), false);
  const viaResponse = await classifiedOnFactoryPath(Object.assign(new Error(CANARY), { response: { status: 503 } }));
  assert.equal(viaResponse.seen.status, 503);
});

test('credential-first classifier must-not-fire: no status when the SDK error has no numeric one; no class name that is not an identifier', async () => {
  for (const thrown of [new Error(CANARY), Object.assign(new Error('x'), { status: '429' }), Object.assign(new Error('x'), { status: 42 }), `text ${CANARY}`]) {
    const { seen } = await classifiedOnFactoryPath(thrown);
    assert.ok(seen instanceof ProviderRuntimeError);
    assert.equal(seen.status, undefined);
    assert.equal(leaks(seen), false);
  }
  const weird = new Error('x');
  Object.defineProperty(weird, 'constructor', { value: { name: `evil ${CANARY}` } });
  const { seen } = await classifiedOnFactoryPath(weird);
  assert.equal(seen.errorClass, undefined);
  assert.equal(leaks(seen), false);
});

test("adapter method read once must-fire: a launch getter that throws on its second read still launches, and one that throws at once is a typed error without its text / must-not-fire: a plain method launches", async () => {
  const run = async (launchOf) => {
    let reads = 0;
    class E2BSandboxRuntime {
      constructor() {
        this.id = 'e2b';
      }
      get launch() {
        reads++;
        return launchOf(reads);
      }
      async destroy() {}
    }
    const modules = { '@agent-relay/sandbox': { E2BSandboxRuntime }, e2b: {} };
    const router = createSandboxRouter({ providers: { e2b: { apiKey: `${CANARY}-key` } }, moduleLoader: async (name) => modules[name] });
    const out = await router.provision({}).then((s) => ({ s }), (e) => ({ e }));
    return { ...out, reads };
  };
  const sandbox = async () => ({ id: 'remote-1' });
  const flipping = await run((n) => {
    if (n > 1) throw new Error(`read twice ${CANARY}`);
    return sandbox;
  });
  assert.ok(flipping.s, `launched, got ${flipping.e?.code}`);
  assert.equal(flipping.reads, 1);
  const throwing = await run(() => {
    throw new Error(`getter ${CANARY}`);
  });
  assert.ok(throwing.e, 'a typed failure');
  assert.equal(typeof throwing.e.code, 'string');
  assert.equal(leaks(throwing.e), false);
  const plain = await run(() => sandbox);
  assert.ok(plain.s);
});

// --- a broken install is not a missing package ---------------------------------------------

/** A project folder with real packages, and a loader that resolves and imports from it. */
function project(files) {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-router-pkg-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const require = createRequire(join(dir, 'index.js'));
  const moduleLoader = async (name) => import(pathToFileURL(require.resolve(name)).href);
  return { dir, moduleLoader };
}

const SANDBOX_PKG = 'node_modules/@agent-relay/sandbox';
const workingSandbox = `export class E2BSandboxRuntime { constructor() { this.id = 'e2b'; } async launch() { return { id: 'r1' }; } async destroy() {} }`;

async function firstLaunchError(files) {
  const { dir, moduleLoader } = project(files);
  try {
    const router = createSandboxRouter({ providers: { e2b: { apiKey: CANARY } }, moduleLoader });
    return await router.provision({}).then(
      (s) => ({ ok: s }),
      (e) => e,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('package must-fire: the package itself absent is PROVIDER_PACKAGE_MISSING', async () => {
  const err = await firstLaunchError({ 'package.json': '{}' });
  assert.ok(err instanceof ProviderPackageMissingError);
  assert.equal(err.code, 'PROVIDER_PACKAGE_MISSING');
  assert.equal(err.packageName, '@agent-relay/sandbox');
  assert.equal(err.missingModule, undefined);
});

test('package must-fire: installed, but a module it imports is missing, is PROVIDER_PACKAGE_LOAD_FAILED naming that module', async () => {
  const err = await firstLaunchError({
    [`${SANDBOX_PKG}/package.json`]: JSON.stringify({ name: '@agent-relay/sandbox', type: 'module', main: 'index.js' }),
    [`${SANDBOX_PKG}/index.js`]: `import 'ghost-dependency';\n${workingSandbox}`,
  });
  assert.ok(err instanceof ProviderPackageMissingError);
  assert.equal(err.code, 'PROVIDER_PACKAGE_LOAD_FAILED');
  assert.equal(err.packageName, '@agent-relay/sandbox');
  assert.equal(err.missingModule, 'ghost-dependency');
  assert.doesNotMatch(err.message, /Cannot find|imported from/, 'a module name, never the loader\'s message');
});

test('package must-fire: installed, but its entry file is missing, is LOAD_FAILED naming the file inside the package (no absolute path)', async () => {
  const err = await firstLaunchError({
    [`${SANDBOX_PKG}/package.json`]: JSON.stringify({ name: '@agent-relay/sandbox', type: 'module', main: 'index.js' }),
    [`${SANDBOX_PKG}/other.js`]: workingSandbox,
  });
  assert.equal(err.code, 'PROVIDER_PACKAGE_LOAD_FAILED');
  assert.equal(err.missingModule, '@agent-relay/sandbox/index.js');
  assert.doesNotMatch(err.message, /tmp|sandbox-router-pkg/, 'no absolute path');
});

test('package must-fire: installed, but it throws while being imported, is LOAD_FAILED without its text', async () => {
  const err = await firstLaunchError({
    [`${SANDBOX_PKG}/package.json`]: JSON.stringify({ name: '@agent-relay/sandbox', type: 'module', main: 'index.js' }),
    [`${SANDBOX_PKG}/index.js`]: `throw new Error('boom ${CANARY}');`,
  });
  assert.equal(err.code, 'PROVIDER_PACKAGE_LOAD_FAILED');
  assert.equal(err.missingModule, undefined);
  assert.equal(leaks(err), false);
});

test('package must-not-fire: a working install loads and launches', async () => {
  const r = await firstLaunchError({
    [`${SANDBOX_PKG}/package.json`]: JSON.stringify({ name: '@agent-relay/sandbox', type: 'module', main: 'index.js' }),
    [`${SANDBOX_PKG}/index.js`]: workingSandbox,
    'node_modules/e2b/package.json': JSON.stringify({ name: 'e2b', type: 'module', main: 'index.js' }),
    'node_modules/e2b/index.js': 'export const Sandbox = {};',
  });
  assert.ok(r.ok, `expected a sandbox, got ${r.code}`);
  assert.equal(r.ok.providerId, 'e2b');
});
