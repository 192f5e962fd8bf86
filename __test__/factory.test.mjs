// createSandboxRouter: credential-first construction, lazy adapters through the module
// loader seam, honest defaults, capacity wiring and credential safety.
import test from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import {
  createSandboxRouter,
  createProviderRuntime,
  SandboxRouter,
  SandboxRouterConfigurationError,
  ProviderPackageMissingError,
  NoEligibleProviderError,
} from '../index.mjs';
import { CANARY } from './fixtures.mjs';

const VALID = {
  daytona: { apiKey: `${CANARY}-daytona` },
  e2b: { apiKey: `${CANARY}-e2b` },
  vercel: { token: `${CANARY}-vercel`, teamId: 'team_1', projectId: 'prj_1', defaultHomeDir: '/vercel/sandbox', namePrefix: 'relay' },
  freestyle: { apiKey: `${CANARY}-freestyle`, defaultHomeDir: '/root', namePrefix: 'relay', persistence: { type: 'ephemeral' } },
  agent37: { apiKey: `${CANARY}-agent37`, baseUrl: 'http://127.0.0.1:9', defaultHomeDir: '/home/agent' },
  microsandbox: { apiKey: `${CANARY}-microsandbox`, homeDir: '/root', image: 'python:3.12', url: 'http://127.0.0.1:9' },
};
const REQUIRED = {
  daytona: ['apiKey'],
  e2b: ['apiKey'],
  vercel: ['token', 'teamId', 'projectId', 'defaultHomeDir', 'namePrefix'],
  freestyle: ['apiKey', 'defaultHomeDir', 'namePrefix', 'persistence'],
  agent37: ['apiKey', 'baseUrl', 'defaultHomeDir'],
  microsandbox: ['apiKey', 'homeDir', 'image'],
};

/** A fake `@agent-relay/sandbox` (and SDKs) served by the module-loader seam. */
function fakeModules({ missing = [] } = {}) {
  const constructed = [];
  const loads = [];
  class FakeAdapter {
    #live = new Map();
    #n = 0;
    constructor(kind, options) {
      this.id = kind;
      constructed.push({ kind, options });
    }
    async launch(o) {
      const h = { id: `${this.id}-${++this.#n}` };
      this.#live.set(h.id, { h, labels: o?.labels ?? {} });
      return h;
    }
    async launchDetached(o) {
      return this.launch(o);
    }
    async getById(id) {
      return this.#live.get(id)?.h ?? null;
    }
    async runScript(h, o) {
      return { output: `${this.id}:${o.command}`, exitCode: 0 };
    }
    async destroy(h) {
      this.#live.delete(h.id);
    }
  }
  const adapter = (kind) =>
    class extends FakeAdapter {
      constructor(options) {
        super(kind, options);
      }
    };
  const modules = {
    '@agent-relay/sandbox': {
      DaytonaRuntime: adapter('daytona'),
      E2BSandboxRuntime: adapter('e2b'),
      VercelSandboxRuntime: adapter('vercel'),
      FreestyleRuntime: adapter('freestyle'),
      Agent37Runtime: adapter('agent37'),
      MicrosandboxRuntime: adapter('microsandbox'),
    },
    '@daytonaio/sdk': {
      Daytona: class {
        constructor(o) {
          constructed.push({ kind: 'daytona-sdk', options: o });
        }
      },
    },
    e2b: {},
    '@vercel/sandbox': {},
    'freestyle-sandboxes': {},
    microsandbox: {},
  };
  const moduleLoader = async (name) => {
    loads.push(name);
    if (missing.includes(name) || !(name in modules)) {
      throw Object.assign(new Error(`Cannot find package '${name}' ${CANARY}`), { code: 'ERR_MODULE_NOT_FOUND' });
    }
    return modules[name];
  };
  return { moduleLoader, constructed, loads };
}

test('config: a minimal valid entry per provider constructs synchronously and loads nothing (must-not-fire)', () => {
  for (const [provider, entry] of Object.entries(VALID)) {
    const { moduleLoader, loads } = fakeModules();
    const router = createSandboxRouter({ providers: { [provider]: entry }, moduleLoader });
    assert.ok(router instanceof SandboxRouter);
    assert.deepEqual(router.providerIds, [provider]);
    assert.equal(loads.length, 0, `${provider} loaded at construction`);
  }
});

test('config: each missing required field names the provider and the field, never the value (must-fire)', () => {
  for (const [provider, fields] of Object.entries(REQUIRED)) {
    for (const field of fields) {
      const entry = { ...VALID[provider] };
      delete entry[field];
      assert.throws(
        () => createSandboxRouter({ providers: { [provider]: entry } }),
        (e) =>
          e instanceof SandboxRouterConfigurationError &&
          e.code === 'INVALID_CONFIGURATION' &&
          e.field === `providers.${provider}.${field}` &&
          e.message.includes(provider) &&
          !e.message.includes(CANARY),
        `${provider}.${field}`,
      );
    }
  }
});

test('config: a wrong-typed field is a typed error that does not echo the value (must-fire)', () => {
  for (const [provider, fields] of Object.entries(REQUIRED)) {
    const entry = { ...VALID[provider], [fields[0]]: 12345 };
    assert.throws(
      () => createSandboxRouter({ providers: { [provider]: entry } }),
      (e) => e.field === `providers.${provider}.${fields[0]}` && !e.message.includes('12345'),
    );
  }
  assert.throws(() => createSandboxRouter({ providers: { e2b: { apiKey: '' } } }), (e) => e.field === 'providers.e2b.apiKey');
  assert.throws(() => createSandboxRouter({ providers: { freestyle: { ...VALID.freestyle, persistence: 'ephemeral' } } }), (e) => e.field === 'providers.freestyle.persistence');
});

test('config: unknown providers, options and empty provider sets are refused (must-fire)', () => {
  assert.throws(() => createSandboxRouter({ providers: { modal: { apiKey: 'x' } } }), (e) => e.field === 'providers.modal');
  assert.throws(() => createSandboxRouter({ providers: { e2b: { ...VALID.e2b, apikey: 'typo' } } }), (e) => e.field === 'providers.e2b.apikey');
  assert.throws(() => createSandboxRouter({ providers: {} }), SandboxRouterConfigurationError);
  assert.throws(() => createSandboxRouter({ providers: VALID, registry: {} }), (e) => e.field === 'registry');
});

test('lazy load: the first operation constructs the adapter with credentials and defaults, once', async () => {
  const { moduleLoader, constructed, loads } = fakeModules();
  const router = createSandboxRouter({ providers: { e2b: VALID.e2b, daytona: { ...VALID.daytona, signals: { estimatedCost: 9, coldStartLatencyMs: 1, readyLatencyMs: 1, completionWithinBudgetRate: 1, available: true } } }, moduleLoader });
  const s = await router.provision({ routing: { strategy: 'cost' } });
  assert.equal(s.providerId, 'e2b', 'placeholder signals (cost 1) beat the declared cost 9');
  const out = await router.runScript(s.id, { command: 'echo hello' });
  assert.equal(out.output, 'e2b:echo hello');
  await router.destroy(s.id);
  const e2b = constructed.filter((c) => c.kind === 'e2b');
  assert.equal(e2b.length, 1);
  assert.deepEqual(e2b[0].options, { template: 'base', apiKey: VALID.e2b.apiKey });
  assert.deepEqual(loads, ['@agent-relay/sandbox', 'e2b']);
  const d = await router.provision({ providerId: 'daytona' });
  const sdk = constructed.find((c) => c.kind === 'daytona-sdk');
  assert.deepEqual(sdk.options, { apiKey: VALID.daytona.apiKey, apiUrl: 'https://app.daytona.io/api', target: 'us' });
  const day = constructed.find((c) => c.kind === 'daytona');
  assert.equal(day.options.defaultHomeDir, '/home/daytona');
  assert.ok(day.options.daytona);
  assert.equal(day.options.apiKey, undefined, 'the adapter gets the SDK client, not the raw key');
  await router.destroy(d.id);
});

test('lazy load: a missing @agent-relay/sandbox fails the first operation with a typed error naming it (must-fire)', async () => {
  const events = [];
  const { moduleLoader } = fakeModules({ missing: ['@agent-relay/sandbox'] });
  const router = createSandboxRouter({ providers: { e2b: VALID.e2b }, moduleLoader, observer: (e) => events.push(e) });
  const err = await router.provision({}).catch((e) => e);
  assert.ok(err instanceof ProviderPackageMissingError);
  assert.equal(err.code, 'PROVIDER_PACKAGE_MISSING');
  assert.equal(err.packageName, '@agent-relay/sandbox');
  assert.match(err.message, /npm install @agent-relay\/sandbox/);
  for (const text of [err.message, err.stack, JSON.stringify(err), inspect(err, { showHidden: true, depth: Infinity }), JSON.stringify(events)]) {
    assert.ok(!text.includes(CANARY));
  }
});

test('lazy load: a missing provider SDK names that SDK (must-fire)', async () => {
  const { moduleLoader } = fakeModules({ missing: ['e2b'] });
  const router = createSandboxRouter({ providers: { e2b: VALID.e2b }, moduleLoader });
  await assert.rejects(router.provision({}), (e) => e instanceof ProviderPackageMissingError && e.packageName === 'e2b' && /npm install e2b/.test(e.message));
});

test('lazy load: createProviderRuntime builds the same lazy, credential-free runtime', async () => {
  const { moduleLoader, constructed } = fakeModules();
  const rt = createProviderRuntime('agent37', VALID.agent37, { moduleLoader });
  assert.equal(rt.id, 'agent37');
  assert.ok(!JSON.stringify(rt).includes(CANARY) && !inspect(rt, { showHidden: true, depth: Infinity }).includes(CANARY));
  assert.equal(constructed.length, 0);
  const h = await rt.launch({ labels: { a: 'b' } });
  assert.equal(h.id, 'agent37-1');
  assert.deepEqual(constructed[0].options, VALID.agent37);
  assert.throws(() => createProviderRuntime('agent37', { apiKey: 'k' }), (e) => e.field === 'providers.agent37.baseUrl');
});

test('honest defaults: an undeclared factory pool serves plain requests (must-not-fire) but not pty, regions or resources (must-fire)', async () => {
  const { moduleLoader } = fakeModules();
  const router = createSandboxRouter({ providers: { e2b: VALID.e2b }, moduleLoader });
  assert.deepEqual(router.route({ requires: { requiredCapabilities: ['syncExec', 'fileTransfer'] } }), ['e2b']);
  for (const req of [
    { requires: { requiredCapabilities: ['pty'] } },
    { resources: { cpu: 1 } },
    { region: { preferred: ['us'], required: true } },
    { requires: { isolation: 'container' } },
    { requires: { timeout: { maxReadyLatencyMs: 30_000 } } },
  ]) {
    assert.throws(() => router.route(req), NoEligibleProviderError, JSON.stringify(req));
  }
});

test('declared metadata: capabilities and signals on an entry are used as given', () => {
  const { moduleLoader } = fakeModules();
  const router = createSandboxRouter({
    moduleLoader,
    providers: {
      e2b: { ...VALID.e2b, capabilities: { supported: ['pty'], resources: { cpu: 2 } } },
      daytona: { ...VALID.daytona, signals: { estimatedCost: 0.01, coldStartLatencyMs: 186, readyLatencyMs: 367, completionWithinBudgetRate: 0.99, available: true } },
    },
  });
  assert.deepEqual(router.route({ requires: { requiredCapabilities: ['pty'] }, resources: { cpu: 2 } }), ['e2b']);
  assert.deepEqual(router.route({}), ['daytona', 'e2b']);
});

test('capacity: builtin readers are attached with the same credentials; custom readers win', async () => {
  const { moduleLoader } = fakeModules();
  const custom = { getCapacity: async () => ({ status: 'known', resources: [{ resource: 'sandboxes', used: 1, limit: 4, unit: 'sandboxes', headroom: 3, required: 1 }] }) };
  const router = createSandboxRouter({
    moduleLoader,
    providers: { e2b: VALID.e2b, vercel: VALID.vercel, freestyle: VALID.freestyle, microsandbox: { ...VALID.microsandbox, capacity: custom } },
  });
  const m = await router.getCapacity();
  assert.deepEqual(m.e2b, { status: 'unknown', reason: 'LIMIT_NOT_CONFIGURED' });
  assert.deepEqual(m.vercel, { status: 'unknown', reason: 'NOT_SUPPORTED' });
  assert.deepEqual(m.freestyle, { status: 'unknown', reason: 'NOT_SUPPORTED' });
  assert.equal(m.microsandbox.status, 'known');
});

test('canary: keys for all six providers appear nowhere: router, events, errors, mappings, capacity reads', async () => {
  const events = [];
  const { moduleLoader } = fakeModules();
  const providers = {
    ...VALID,
    // A capacity read against a closed loopback port fails: its measurement must not carry the key.
    agent37: { ...VALID.agent37, capacity: { limits: { sandboxes: 5 } } },
    microsandbox: { ...VALID.microsandbox, capacity: { limits: { sandboxes: 5 } } },
  };
  const router = createSandboxRouter({ providers, moduleLoader, observer: (e) => events.push(e) });
  const texts = [JSON.stringify(router), inspect(router, { depth: Infinity, showHidden: true })];
  const s = await router.provision({ providerId: 'e2b' });
  texts.push(JSON.stringify(s), JSON.stringify(await router.getSandbox(s.id)), JSON.stringify(await router.explain({})));
  texts.push(JSON.stringify(await router.getCapacity()));
  await router.destroy(s.id);
  const failing = createSandboxRouter({ providers: VALID, moduleLoader: fakeModules({ missing: ['@agent-relay/sandbox'] }).moduleLoader, observer: (e) => events.push(e) });
  const err = await failing.provision({}).catch((e) => e);
  texts.push(err.message, err.stack, JSON.stringify(err), inspect(err, { depth: Infinity, showHidden: true }), inspect(failing, { depth: Infinity, showHidden: true }));
  texts.push(JSON.stringify(events));
  for (const t of texts) assert.ok(!t.includes(CANARY), t.slice(0, 200));
  // The detector is live: the configuration itself does contain the canary.
  assert.ok(JSON.stringify(VALID).includes(CANARY));
});

test('local provider: provisions on real processes through the factory', async () => {
  const router = createSandboxRouter({ providers: { local: {} } });
  const s = await router.provision({});
  assert.equal(s.providerId, 'local');
  const out = await router.runScript(s.id, { command: 'echo hello' });
  assert.equal(out.stdout, 'hello\n');
  assert.equal(out.exitCode, 0);
  await router.destroy(s.id);
  assert.deepEqual(await router.getCapacity(), { local: { status: 'unknown', reason: 'LIMIT_NOT_CONFIGURED' } });
});
