'use strict';
// Credential-first construction: createSandboxRouter({ providers: { daytona: { apiKey }, … } }).
//
// Why lazy adapters? The provider adapters live in `@agent-relay/sandbox` and each needs
// its vendor SDK; a caller using two providers must not need all six SDKs installed, and
// constructing a router must not load anything. So each configured provider becomes a
// port-shaped runtime whose first operation imports the adapter (and SDK) through a
// replaceable module loader, constructs it with the credentials from this closure, and
// delegates. Credentials live only in these closures: never on an object we return, in an
// error, an event or a mapping.

const {
  SandboxRouterConfigurationError,
  ProviderPackageMissingError,
  ProviderRuntimeError,
  isRouterError,
} = require('./errors.js');
const { guarded, copyOptions, shown } = require('./guard.js');
const { InMemoryProviderRegistry } = require('./registry.js');
const { SandboxRouter } = require('./router.js');
const { createCapacityReader } = require('./capacity-readers.js');
const { attachFinder } = require('./finders.js');

const SANDBOX_PACKAGE = '@agent-relay/sandbox';
const SANDBOX_RANGE = '>=0.1.10';

/**
 * Capabilities a factory pool declares when the caller declares none: synchronous
 * execution and file transfer, nothing else. Resources are zero and region, image,
 * isolation and durability are undeclared, so requests needing them are refused until
 * the caller declares the configured pool's real envelope.
 */
const DEFAULT_CAPABILITIES = Object.freeze({ supported: Object.freeze(['syncExec', 'fileTransfer']) });

/**
 * Equal placeholders, not measurements. Latencies are pessimistic (60 s) so that an
 * unmeasured pool never meets a latency budget by accident.
 */
const DEFAULT_SIGNALS = Object.freeze({
  estimatedCost: 1,
  coldStartLatencyMs: 60_000,
  readyLatencyMs: 60_000,
  completionWithinBudgetRate: 0.5,
  available: true,
});

const COMMON_KEYS = ['id', 'capabilities', 'signals', 'capacity', 'adapterOptions'];

// Per provider: required string fields, optional fields (with their check), defaults,
// the adapter export and the SDK (if any) the adapter needs.
const PROVIDERS = {
  daytona: {
    required: ['apiKey'],
    optional: {
      apiUrl: 'string',
      target: 'string',
      snapshot: 'string',
      defaultHomeDir: 'string',
      organizationId: 'string',
      createParams: 'object',
    },
    defaults: { apiUrl: 'https://app.daytona.io/api', target: 'us', defaultHomeDir: '/home/daytona' },
    adapter: 'DaytonaRuntime',
    sdk: { name: '@daytonaio/sdk', range: '>=0.180.0 <0.206.0' },
    secrets: ['apiKey'],
    capacityKey: 'apiKey',
    capacityBaseUrl: 'apiUrl',
  },
  e2b: {
    required: ['apiKey'],
    optional: { template: 'string', runBudgetMs: 'number', createTimeoutMs: 'number' },
    defaults: { template: 'base' },
    adapter: 'E2BSandboxRuntime',
    sdk: { name: 'e2b', range: '>=2.35.0 <3.0.0' },
    secrets: ['apiKey'],
    capacityKey: 'apiKey',
  },
  vercel: {
    required: ['token', 'teamId', 'projectId', 'defaultHomeDir', 'namePrefix'],
    optional: { source: 'object', vcpus: 'number', sandboxTimeoutMs: 'number', persistent: 'boolean', ports: 'array', env: 'object' },
    defaults: {},
    adapter: 'VercelSandboxRuntime',
    sdk: { name: '@vercel/sandbox', range: '(see @agent-relay/sandbox peer dependencies)' },
    secrets: ['token'],
    noDetached: true,
  },
  freestyle: {
    required: ['apiKey', 'defaultHomeDir', 'namePrefix'],
    optional: { baseUrl: 'string', snapshotId: 'string', idleTimeoutSeconds: 'number|null' },
    requiredObjects: ['persistence'],
    defaults: {},
    adapter: 'FreestyleRuntime',
    sdk: { name: 'freestyle-sandboxes', range: '(see @agent-relay/sandbox peer dependencies)' },
    secrets: ['apiKey'],
  },
  agent37: {
    required: ['apiKey', 'baseUrl', 'defaultHomeDir'],
    optional: {},
    defaults: {},
    adapter: 'Agent37Runtime',
    sdk: null,
    secrets: ['apiKey'],
    capacityKey: 'apiKey',
    capacityBaseUrl: 'baseUrl',
  },
  microsandbox: {
    required: ['apiKey', 'homeDir', 'image'],
    optional: { url: 'string' },
    defaults: {},
    adapter: 'MicrosandboxRuntime',
    sdk: { name: 'microsandbox', range: '(see @agent-relay/sandbox peer dependencies)' },
    secrets: ['apiKey'],
    capacityKey: 'apiKey',
    capacityBaseUrl: 'url',
  },
};

function configError(provider, field, expectation) {
  const where = provider ? `providers.${shown(provider)}.${shown(field)}` : shown(field);
  return new SandboxRouterConfigurationError(`invalid configuration: ${where} ${expectation}`, 'INVALID_CONFIGURATION', {
    providerId: provider || undefined,
    field: where,
  });
}

function isObject(x) {
  return x !== null && typeof x === 'object' && !Array.isArray(x);
}

function checkType(provider, field, value, type) {
  const ok =
    (type === 'string' && typeof value === 'string' && value.length > 0) ||
    (type === 'number' && typeof value === 'number' && Number.isFinite(value) && value >= 0) ||
    (type === 'number|null' && (value === null || (typeof value === 'number' && Number.isFinite(value) && value >= 0))) ||
    (type === 'boolean' && typeof value === 'boolean') ||
    (type === 'object' && isObject(value)) ||
    (type === 'array' && Array.isArray(value));
  if (!ok) {
    const what = { string: 'a non-empty string', number: 'a finite number >= 0', 'number|null': 'a finite number >= 0 or null', boolean: 'a boolean', object: 'an object', array: 'an array' }[type];
    throw configError(provider, field, `must be ${what}`);
  }
}

/** Validates one provider entry; returns the adapter options (with defaults). */
function validateEntry(provider, entry) {
  const spec = PROVIDERS[provider];
  if (!isObject(entry)) throw configError(provider, '(entry)', 'must be an object');
  const known = new Set([...COMMON_KEYS, ...spec.required, ...(spec.requiredObjects ?? []), ...Object.keys(spec.optional)]);
  for (const key of Object.keys(entry)) {
    if (!known.has(key)) throw configError(provider, key, 'is not a known option');
  }
  for (const field of spec.required) {
    if (entry[field] === undefined) throw configError(provider, field, 'is required');
    checkType(provider, field, entry[field], 'string');
  }
  for (const field of spec.requiredObjects ?? []) {
    if (entry[field] === undefined) throw configError(provider, field, 'is required');
    if (!isObject(entry[field]) || typeof entry[field].type !== 'string') throw configError(provider, field, 'must be an object with a type');
  }
  for (const [field, type] of Object.entries(spec.optional)) {
    if (entry[field] !== undefined) checkType(provider, field, entry[field], type);
  }
  checkCommon(provider, entry);
  const options = { ...spec.defaults };
  for (const key of [...spec.required, ...(spec.requiredObjects ?? []), ...Object.keys(spec.optional)]) {
    if (entry[key] !== undefined) options[key] = entry[key];
  }
  if (entry.adapterOptions !== undefined) Object.assign(options, entry.adapterOptions);
  return options;
}

function checkCommon(provider, entry) {
  if (entry.id !== undefined) checkType(provider, 'id', entry.id, 'string');
  if (entry.capabilities !== undefined) checkType(provider, 'capabilities', entry.capabilities, 'object');
  if (entry.signals !== undefined) checkType(provider, 'signals', entry.signals, 'object');
  if (entry.adapterOptions !== undefined) checkType(provider, 'adapterOptions', entry.adapterOptions, 'object');
  if (entry.capacity !== undefined) {
    if (!isObject(entry.capacity)) throw configError(provider, 'capacity', 'must be an object');
    const c = entry.capacity;
    const custom = typeof c.getCapacity === 'function';
    for (const key of Object.keys(c)) {
      if (!(custom ? ['getCapacity'] : ['limits', 'demand', 'baseUrl', 'maxPages', 'pageSize']).includes(key)) {
        throw configError(provider, `capacity.${key}`, custom ? 'is not allowed beside getCapacity' : 'is not a known option');
      }
    }
    if (!custom) {
      if (c.limits !== undefined) checkType(provider, 'capacity.limits', c.limits, 'object');
      if (c.demand !== undefined) checkType(provider, 'capacity.demand', c.demand, 'object');
    }
  }
}

/** The default module loader: a dynamic import, resolved from this package. */
const defaultLoader = (specifier) => import(specifier);

// "Cannot find package 'x' imported from …" (ESM), "Cannot find module 'x'" (CommonJS).
const NOT_FOUND_TEXT = /^Cannot find (?:package|module) '([^']{1,1024})'/;
// An npm package name, optionally with a subpath: what we may name in an error.
const MODULE_NAME = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*(?:\/[A-Za-z0-9._~@-]+)*$/;

/**
 * Which module a module-not-found error is about, as a module name (never a message): the
 * specifier Node names, cut to the part after the last `node_modules/` for a file path.
 * Null when it cannot be told.
 */
function missingModuleOf(error) {
  let text;
  try {
    text = guarded(() => {
      const code = error !== null && typeof error === 'object' ? error.code : undefined;
      if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return undefined;
      const m = typeof error.message === 'string' ? NOT_FOUND_TEXT.exec(error.message) : null;
      return m ? m[1] : null;
    });
  } catch {
    return undefined;
  }
  if (typeof text !== 'string') return text;
  let name = text.replace(/\\/g, '/');
  const at = name.lastIndexOf('node_modules/');
  if (at >= 0) name = name.slice(at + 'node_modules/'.length);
  name = name.replace(/^file:\/\//, '');
  return MODULE_NAME.test(name) && name.length <= 214 ? name : null;
}

/**
 * Imports `name` through the loader. Tells apart a package that is absent
 * (PROVIDER_PACKAGE_MISSING) from one that is installed but fails to load
 * (PROVIDER_PACKAGE_LOAD_FAILED: one of its own modules is missing, or it throws at import),
 * and names the missing module when it is known.
 */
async function loadPackage(loader, name, range) {
  try {
    return await loader(name);
  } catch (error) {
    const missing = missingModuleOf(error);
    // undefined: not a module-not-found error at all; null: one whose module is unknown
    // (treated as the package itself, the common case).
    const absent = missing === null || missing === name || missing === `${name}/package.json`;
    if (absent) {
      throw new ProviderPackageMissingError(
        `${name} is not installed; install it to use this provider: npm install ${name}${/^[>=<^~\d]/.test(range) ? `@"${range}"` : ''}`,
        'PROVIDER_PACKAGE_MISSING',
        { packageName: name },
      );
    }
    throw new ProviderPackageMissingError(
      typeof missing === 'string'
        ? `${name} is installed but could not be loaded: the module ${missing} it needs was not found; reinstall it (npm install ${name}) and check that its version satisfies ${range}`
        : `${name} is installed but failed to load (it threw while being imported); check that its version satisfies ${range}`,
      'PROVIDER_PACKAGE_LOAD_FAILED',
      typeof missing === 'string' ? { packageName: name, missingModule: missing } : { packageName: name },
    );
  }
}


/**
 * Builds the adapter for `provider` from already-validated options. Runs once, on the
 * first operation. `options` holds the credentials; it is never stored elsewhere.
 */
async function buildAdapter(provider, options, loader) {
  const spec = PROVIDERS[provider];
  const sandbox = await loadPackage(loader, SANDBOX_PACKAGE, SANDBOX_RANGE);
  const Adapter = sandbox[spec.adapter] ?? sandbox.default?.[spec.adapter];
  if (typeof Adapter !== 'function') {
    throw new ProviderPackageMissingError(
      `${SANDBOX_PACKAGE} does not export ${spec.adapter}; install a version that supports ${provider}: npm install ${SANDBOX_PACKAGE}@"${SANDBOX_RANGE}"`,
      'PROVIDER_PACKAGE_MISSING',
      { packageName: SANDBOX_PACKAGE },
    );
  }
  if (provider === 'daytona') {
    const sdk = await loadPackage(loader, spec.sdk.name, spec.sdk.range);
    const Daytona = sdk.Daytona ?? sdk.default?.Daytona;
    if (typeof Daytona !== 'function') {
      throw new ProviderPackageMissingError(`${spec.sdk.name} does not export Daytona; install ${spec.sdk.name}@"${spec.sdk.range}"`, 'PROVIDER_PACKAGE_MISSING', {
        packageName: spec.sdk.name,
      });
    }
    const { apiKey, apiUrl, target, organizationId, ...rest } = options;
    const daytona = new Daytona({ apiKey, apiUrl, target, ...(organizationId ? { organizationId } : {}) });
    return new Adapter({ ...rest, daytona });
  }
  if (spec.sdk) await loadPackage(loader, spec.sdk.name, spec.sdk.range);
  return new Adapter(options);
}

const PORT_METHODS = [
  'getById',
  'findByLabels',
  'findAllByLabels',
  'countByLabels',
  'uploadBundle',
  'runScript',
  'startScript',
  'getScriptStatus',
  'getScriptLogs',
  'start',
  'stop',
  'destroy',
];

class ProviderOperationUnsupportedError extends ProviderPackageMissingError {}

// A class name we may repeat: an identifier, short. Anything else is not reported.
const CLASS_NAME = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/;

/**
 * What the credential-first surface keeps of an SDK error: a ProviderRuntimeError with the
 * provider and operation, plus the facts a classifier can use without provider text: the
 * numeric HTTP status when the error exposes one (`status`, `statusCode` or
 * `response.status`, an integer 100–599) and the error's class name (`errorClass`). Its
 * message, stack, cause and every other property are dropped. Our own typed errors (a
 * missing package) pass through unchanged.
 */
function sanitized(provider, operation, error) {
  if (isRouterError(error)) return error;
  let facts = {};
  try {
    facts = guarded(() => {
      const out = {};
      if (error === null || typeof error !== 'object') return out;
      const status = [error.status, error.statusCode, error.response?.status].find((x) => Number.isInteger(x) && x >= 100 && x <= 599);
      if (status !== undefined) out.status = status;
      const name = error.constructor?.name;
      if (typeof name === 'string' && CLASS_NAME.test(name)) out.errorClass = name;
      return out;
    });
  } catch {
    facts = {};
  }
  return new ProviderRuntimeError(provider, operation, undefined, facts);
}

/**
 * A port-shaped runtime for `provider` that constructs the real adapter on first use.
 * The returned object holds no credential: they stay in this function's closure.
 */
function lazyRuntime(provider, options, loader) {
  let pending = null;
  const adapter = () => {
    if (pending === null) {
      pending = buildAdapter(provider, options, loader);
      // A failed load is retried on the next operation (e.g. after installing the package).
      pending.catch(() => {
        pending = null;
      });
    }
    return pending;
  };
  const runtime = { id: provider };
  const delegate = (method) =>
    async function (...args) {
      let a;
      try {
        a = await adapter();
      } catch (error) {
        throw sanitized(provider, 'construct', error);
      }
      if (typeof a[method] !== 'function') {
        throw new ProviderOperationUnsupportedError(`the ${provider} adapter does not implement ${method}`, 'PROVIDER_OPERATION_UNSUPPORTED', {
          packageName: SANDBOX_PACKAGE,
        });
      }
      try {
        return await a[method](...args);
      } catch (error) {
        throw sanitized(provider, method, error);
      }
    };
  runtime.launch = delegate('launch');
  if (!PROVIDERS[provider].noDetached) runtime.launchDetached = delegate('launchDetached');
  for (const m of PORT_METHODS) runtime[m] = delegate(m);
  return Object.freeze(runtime);
}

/** Caller options, copied once inside a guard (a throwing getter or Proxy trap is a typed error). */
function readOptions(input) {
  try {
    return copyOptions(input, 5);
  } catch {
    throw configError(null, 'options', 'could not be read (a property access threw)');
  }
}

function checkLoader(loader) {
  if (loader !== undefined && typeof loader !== 'function') throw configError(null, 'moduleLoader', 'must be a function (specifier) => Promise<module>');
  return loader ?? defaultLoader;
}

/**
 * Builds a credential-safe runtime for one provider, as the factory does, for callers
 * that keep their own registry. The adapter loads on the first operation.
 */
function createProviderRuntime(provider, input, internals = {}) {
  const options = readOptions(input);
  if (typeof provider !== 'string') throw configError(null, 'provider', `must be one of ${[...Object.keys(PROVIDERS), 'local'].join(', ')}`);
  if (provider === 'local') return localRuntime(options ?? {});
  if (!Object.hasOwn(PROVIDERS, provider)) {
    throw configError(null, 'provider', `must be one of ${[...Object.keys(PROVIDERS), 'local'].join(', ')}`);
  }
  const adapterOptions = validateEntry(provider, options);
  const runtime = lazyRuntime(provider, adapterOptions, checkLoader(readOptions(internals)?.moduleLoader));
  withFinder(runtime, provider, options);
  return runtime;
}

function localRuntime(entry) {
  // Required lazily: the local runtime module is only needed when `local` is configured.
  const { createLocalRuntime } = require('../local/index.js');
  const { rootDir } = entry;
  return createLocalRuntime(rootDir === undefined ? undefined : { rootDir });
}

/** Capacity reader for the local pool: counts its live sandboxes against `limits.sandboxes`. */
function localCapacityReader(runtime, capacity = {}) {
  const limit = capacity.limits?.sandboxes;
  const required = capacity.demand?.sandboxes ?? 1;
  return {
    async getCapacity() {
      if (limit === undefined) return { status: 'unknown', reason: 'LIMIT_NOT_CONFIGURED' };
      const used = await runtime.countByLabels({});
      return { status: 'known', resources: [{ resource: 'sandboxes', used, limit, unit: 'sandboxes', headroom: limit - used, required }] };
    },
  };
}

function capacityFor(provider, entry, runtime) {
  const c = entry.capacity;
  if (c && typeof c.getCapacity === 'function') return c;
  if (provider === 'local') return localCapacityReader(runtime, c);
  const spec = PROVIDERS[provider];
  if (!spec.capacityKey) return createCapacityReader(provider, {});
  const baseUrl = c?.baseUrl ?? (spec.capacityBaseUrl ? entry[spec.capacityBaseUrl] : undefined);
  return createCapacityReader(provider, {
    apiKey: entry[spec.capacityKey],
    ...(baseUrl !== undefined ? { baseUrl } : {}),
    ...(provider === 'daytona' && entry.organizationId ? { organizationId: entry.organizationId } : {}),
    ...(c?.limits !== undefined ? { limits: c.limits } : {}),
    ...(c?.demand !== undefined ? { demand: c.demand } : {}),
    ...(c?.maxPages !== undefined ? { maxPages: c.maxPages } : {}),
    ...(c?.pageSize !== undefined ? { pageSize: c.pageSize } : {}),
  });
}

/**
 * Registers reconcile's native finder for a runtime of a provider with a list API (see
 * finders.js), with the credentials and base URL its capacity reader uses.
 */
function withFinder(runtime, provider, entry) {
  const spec = PROVIDERS[provider];
  if (!spec.capacityKey) return;
  const c = entry.capacity;
  const baseUrl = c?.baseUrl ?? (spec.capacityBaseUrl ? entry[spec.capacityBaseUrl] : undefined);
  attachFinder(runtime, provider, {
    apiKey: entry[spec.capacityKey],
    baseUrl,
    organizationId: entry.organizationId,
    maxPages: c?.maxPages,
    pageSize: c?.pageSize,
  });
}

/** The router `createSandboxRouter` returns: a `SandboxRouter` over the configured pools. */
class ConfiguredSandboxRouter extends SandboxRouter {
  #providerIds;

  constructor(options, providerIds) {
    super(options);
    this.#providerIds = Object.freeze([...providerIds]);
  }

  /** Ids of the configured pools. */
  get providerIds() {
    return this.#providerIds;
  }

  toJSON() {
    return { type: 'SandboxRouter', providers: [...this.#providerIds] };
  }
}

const ROUTER_KEYS = ['providers', 'capacity', 'mappings', 'fleet', 'observer', 'provisioning', 'resolveRoutingSignals', 'classifyProviderFailure', 'callbackTimeoutMs', 'operationTimeoutMs', 'health', 'moduleLoader'];

/**
 * Builds a router from provider credentials, synchronously. Adapters and SDKs load on
 * the first operation of each provider.
 */
function createSandboxRouter(input) {
  // Read once, inside a guard (guard.js); only the copy is consulted from here on.
  const options = readOptions(input);
  if (!isObject(options)) throw configError(null, 'options', 'must be an object');
  for (const key of Object.keys(options)) {
    if (!ROUTER_KEYS.includes(key)) throw configError(null, key, 'is not a known option');
  }
  const { providers, moduleLoader, ...routerOptions } = options;
  const loader = checkLoader(moduleLoader);
  if (!isObject(providers) || Object.keys(providers).length === 0) {
    throw configError(null, 'providers', 'must be an object naming at least one provider');
  }
  const definitions = [];
  for (const [provider, entry] of Object.entries(providers)) {
    if (entry === undefined) continue;
    if (provider !== 'local' && !Object.hasOwn(PROVIDERS, provider)) {
      throw configError(null, `providers.${provider}`, `is not a supported provider (${[...Object.keys(PROVIDERS), 'local'].join(', ')})`);
    }
    let runtime;
    if (provider === 'local') {
      if (!isObject(entry)) throw configError(provider, '(entry)', 'must be an object');
      for (const key of Object.keys(entry)) {
        if (![...COMMON_KEYS, 'rootDir'].includes(key)) throw configError(provider, key, 'is not a known option');
      }
      if (entry.rootDir !== undefined) checkType(provider, 'rootDir', entry.rootDir, 'string');
      checkCommon(provider, entry);
      runtime = localRuntime(entry);
    } else {
      runtime = lazyRuntime(provider, validateEntry(provider, entry), loader);
      withFinder(runtime, provider, entry);
    }
    definitions.push({
      id: entry.id ?? provider,
      runtime,
      capabilities: entry.capabilities ?? (provider === 'local' ? require('../local/index.js').LOCAL_CAPABILITIES : DEFAULT_CAPABILITIES),
      signals: entry.signals ?? DEFAULT_SIGNALS,
      capacity: capacityFor(provider, entry, runtime),
    });
  }
  const registry = new InMemoryProviderRegistry(definitions);
  return new ConfiguredSandboxRouter({ ...routerOptions, registry }, definitions.map((d) => d.id));
}

module.exports = {
  createSandboxRouter,
  createProviderRuntime,
  ConfiguredSandboxRouter,
  DEFAULT_CAPABILITIES,
  DEFAULT_SIGNALS,
  SUPPORTED_PROVIDERS: Object.freeze([...Object.keys(PROVIDERS), 'local']),
};
