'use strict';
// Credential-first construction: createSandboxRouter({ providers: { daytona: { apiKey }, … } }).
//
// This file is the factory's surface: it reads the caller's options once, validates each
// provider entry against the builtin catalogue (lib/provider-adapters.js, which also builds
// the lazy, credential-safe runtime of each entry and loads its packages on first use), and
// assembles the router: runtimes, declared capabilities and signals, capacity readers, and
// reconcile's finders. Credentials stay in the runtimes' closures: never on an object we
// return, in an error, an event or a mapping.

const { SandboxRouterConfigurationError, callNative } = require('./errors.js');
const { binding } = require('./binding.js');
const { serialize, NotJson } = require('./serialize.js');
const { copyOptions, shown } = require('./guard.js');
const { InMemoryProviderRegistry } = require('./registry.js');
const { SandboxRouter } = require('./router.js');
const { createCapacityReader } = require('./capacity-readers.js');
const { attachFinder } = require('./finders.js');
const { PROVIDERS, defaultLoader, lazyRuntime } = require('./provider-adapters.js');

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

/** Keys every provider entry may hold besides its own (lib/provider-adapters.js lists those). */
const COMMON_KEYS = ['id', 'capabilities', 'signals', 'capacity', 'adapterOptions', 'warm'];

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
  // A warm pool's option (docs/warm-pools.md), by the core's one rule, naming the field.
  if (entry.warm !== undefined) {
    const text = serialize(entry.warm);
    if (text === null) throw configError(provider, 'warm', 'could not be read');
    if (text instanceof NotJson) throw configError(provider, text.field('warm'), text.expectation);
    callNative(() => binding.checkWarmOption(text, `providers.${shown(provider)}.warm`));
  }
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

/**
 * A factory pool's capabilities: the caller's (or the defaults), with the adapter's own
 * sandbox lifetime (`timeout.maxSandboxLifetimeMs`: E2B's create timeout, from the options
 * the adapter is given) unless the caller declared one, so that warm members expire before
 * the provider kills them (the rule: src/core/warm.rs `factory_lifetime_ms`).
 */
function capabilitiesFor(provider, entry, adapterOptions) {
  if (provider === 'local') return entry.capabilities ?? require('../local/index.js').LOCAL_CAPABILITIES;
  const caps = entry.capabilities ?? DEFAULT_CAPABILITIES;
  const timeout = caps.timeout;
  const declared = timeout !== undefined && (!isObject(timeout) || timeout.maxSandboxLifetimeMs !== undefined);
  const createTimeoutMs = typeof adapterOptions.createTimeoutMs === 'number' ? adapterOptions.createTimeoutMs : undefined;
  const ms = binding.factoryLifetimeMs(provider, createTimeoutMs, declared);
  return ms === null ? caps : { ...caps, timeout: { ...timeout, maxSandboxLifetimeMs: ms } };
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

const ROUTER_KEYS = ['providers', 'capacity', 'mappings', 'fleet', 'observer', 'provisioning', 'resolveRoutingSignals', 'classifyProviderFailure', 'callbackTimeoutMs', 'operationTimeoutMs', 'health', 'clock', 'budgets', 'telemetry', 'moduleLoader'];

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
    let adapterOptions = {};
    if (provider === 'local') {
      if (!isObject(entry)) throw configError(provider, '(entry)', 'must be an object');
      for (const key of Object.keys(entry)) {
        if (![...COMMON_KEYS, 'rootDir'].includes(key)) throw configError(provider, key, 'is not a known option');
      }
      if (entry.rootDir !== undefined) checkType(provider, 'rootDir', entry.rootDir, 'string');
      checkCommon(provider, entry);
      runtime = localRuntime(entry);
    } else {
      adapterOptions = validateEntry(provider, entry);
      runtime = lazyRuntime(provider, adapterOptions, loader);
      withFinder(runtime, provider, entry);
    }
    definitions.push({
      id: entry.id ?? provider,
      runtime,
      capabilities: capabilitiesFor(provider, entry, adapterOptions),
      signals: entry.signals ?? DEFAULT_SIGNALS,
      capacity: capacityFor(provider, entry, runtime),
      ...(entry.warm === undefined ? {} : { warm: entry.warm }),
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
