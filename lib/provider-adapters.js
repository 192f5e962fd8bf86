'use strict';
// The builtin providers: what each one's configuration holds, which packages its adapter
// needs, and the runtime that loads them on first use.
//
// Why apart from the factory? This is the part that touches optional packages and provider
// SDK errors: loading `@agent-relay/sandbox` and a vendor SDK through a replaceable module
// loader, telling a missing package from a broken install, and keeping nothing of an SDK
// error but its HTTP status and class name. lib/factory.js validates what the caller wrote
// and assembles the router from it; it asks this file for the catalogue and a runtime.
//
// Why lazy adapters? The provider adapters live in `@agent-relay/sandbox` and each needs
// its vendor SDK; a caller using two providers must not need all six SDKs installed, and
// constructing a router must not load anything. So each configured provider becomes a
// port-shaped runtime whose first operation imports the adapter (and SDK), constructs it
// with the credentials from its closure, and delegates. Credentials live only in these
// closures: never on an object we return, in an error, an event or a mapping.

const { ProviderPackageMissingError, ProviderRuntimeError, isRouterError } = require('./errors.js');
const { guarded } = require('./guard.js');

const SANDBOX_PACKAGE = '@agent-relay/sandbox';
const SANDBOX_RANGE = '>=0.1.10';

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
    throw packageError(error, name, range, 'this provider');
  }
}

/**
 * The typed error for optional package `name` (wanted at `range`, for `purpose`: "this
 * provider", "telemetry") that failed to load with `error` (never read but for its code
 * and the module it names; see missingModuleOf).
 */
function packageError(error, name, range, purpose) {
  const missing = missingModuleOf(error);
  // undefined: not a module-not-found error at all; null: one whose module is unknown
  // (treated as the package itself, the common case).
  const absent = missing === null || missing === name || missing === `${name}/package.json`;
  if (absent) {
    return new ProviderPackageMissingError(
      `${name} is not installed; install it to use ${purpose}: npm install ${name}${/^[>=<^~\d]/.test(range) ? `@"${range}"` : ''}`,
      'PROVIDER_PACKAGE_MISSING',
      { packageName: name },
    );
  }
  return new ProviderPackageMissingError(
    typeof missing === 'string'
      ? `${name} is installed but could not be loaded: the module ${missing} it needs was not found; reinstall it (npm install ${name}) and check that its version satisfies ${range}`
      : `${name} is installed but failed to load (it threw while being imported); check that its version satisfies ${range}`,
    'PROVIDER_PACKAGE_LOAD_FAILED',
    typeof missing === 'string' ? { packageName: name, missingModule: missing } : { packageName: name },
  );
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

module.exports = { PROVIDERS, SANDBOX_PACKAGE, defaultLoader, lazyRuntime, packageError };
