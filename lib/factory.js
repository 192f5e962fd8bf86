'use strict';
// Credential-first construction: createSandboxRouter({ providers: { daytona: { apiKey }, … } }).
// The rule is the core's (src/core/factory.rs, catalogue in providers.rs): which options exist,
// what each entry holds, every default, how a pool's reader and finder are wired. This file reads
// the options once, in a guard, hands them to the core as facts, and builds what its plan names.
// Credentials stay in the runtimes' closures: never on an object we return, in an error, an event
// or a mapping (the plan names fields, never their values).

const { callNative } = require('./errors.js');
const { binding } = require('./binding.js');
const { readFacts } = require('./facts.js');
const { InMemoryProviderRegistry } = require('./registry.js');
const { SandboxRouter } = require('./router.js');
const { createCapacityReader } = require('./capacity-readers.js');
const { attachFinder } = require('./finders.js');
const { defaultLoader, lazyRuntime } = require('./provider-adapters.js');

/** Capabilities a factory pool declares when the caller declares none (the core's). */
const DEFAULT_CAPABILITIES = Object.freeze({ supported: Object.freeze(binding.defaultCapabilities().supported) });

/** Routing signals a factory pool declares when the caller declares none: placeholders, not measurements. */
const DEFAULT_SIGNALS = Object.freeze({ ...binding.defaultSignals() });

const { CapacitySourceName } = binding;

/** The local runtime module, required lazily: only when `local` is configured. */
const localModule = () => require('../local/index.js');

function localRuntime({ rootDir }) {
  return localModule().createLocalRuntime(rootDir === undefined ? undefined : { rootDir });
}

/** The options a plan names (`{ option, from }`), each taken from the entry's field at `from`. */
function copied(plan, entry) {
  const out = {};
  for (const { option, from } of plan) out[option] = from.reduce((value, key) => value[key], entry);
  return out;
}

/** The adapter's options: the provider's defaults, the entry's own fields over them, then its adapterOptions. */
function adapterOptions(plan, entry) {
  const options = Object.fromEntries(plan.recipe.defaults.map((d) => [d.key, d.value]));
  for (const key of plan.adapterKeys) options[key] = entry[key];
  return Object.assign(options, entry.adapterOptions);
}

/** A builtin provider's lazy runtime, with reconcile's native finder when the plan has one. */
function builtinRuntime(plan, entry, loader) {
  const runtime = lazyRuntime(plan.recipe, adapterOptions(plan, entry), loader);
  if (plan.finder) attachFinder(runtime, plan.name, copied(plan.reader, entry));
  return runtime;
}

/** The local pool's reader: its live sandboxes against its limit (the core measures). */
function localCapacityReader(runtime, plan) {
  return {
    async getCapacity() {
      const used = plan.localLimit === null ? null : await runtime.countByLabels({});
      return binding.localMeasurement(plan.localLimit, plan.localRequired, used);
    },
  };
}

function capacityOf(plan, entry, runtime) {
  if (plan.capacity === CapacitySourceName.Custom) return entry.capacity;
  if (plan.capacity === CapacitySourceName.Local) return localCapacityReader(runtime, plan);
  return createCapacityReader(plan.name, copied(plan.reader, entry));
}

/** A pool's capabilities with the adapter's sandbox lifetime unless declared (warm members expire first). */
function capabilitiesOf(plan, entry) {
  if (plan.recipe === null) return entry.capabilities ?? localModule().LOCAL_CAPABILITIES;
  const caps = entry.capabilities ?? DEFAULT_CAPABILITIES;
  const timeout = caps.timeout;
  const declared = timeout !== undefined && (timeout === null || typeof timeout !== 'object' || timeout.maxSandboxLifetimeMs !== undefined);
  const createTimeoutMs = adapterOptions(plan, entry).createTimeoutMs;
  const ms = binding.factoryLifetimeMs(plan.name, typeof createTimeoutMs === 'number' ? createTimeoutMs : undefined, declared);
  return ms === null ? caps : { ...caps, timeout: { ...timeout, maxSandboxLifetimeMs: ms } };
}

/** A provider definition from the core's plan of one pool. */
function definitionOf(plan, entry, loader) {
  const runtime = plan.recipe === null ? localRuntime(entry) : builtinRuntime(plan, entry, loader);
  return {
    id: plan.id,
    runtime,
    capabilities: capabilitiesOf(plan, entry),
    signals: entry.signals ?? DEFAULT_SIGNALS,
    capacity: capacityOf(plan, entry, runtime),
    ...(entry.warm === undefined ? {} : { warm: entry.warm }),
    ...(entry.rateLimit === undefined ? {} : { rateLimit: entry.rateLimit }),
  };
}

/** A credential-safe runtime for one provider, as the factory builds it (for callers with their own registry). */
function createProviderRuntime(provider, input, internals = {}) {
  const { copy: options, facts } = readFacts({ provider, options: input, internals }, 6);
  const plan = callNative(() => binding.runtimePlan(facts));
  if (plan.recipe === null) return localRuntime(options.options ?? {});
  return builtinRuntime(plan, options.options, options.internals?.moduleLoader ?? defaultLoader);
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

/** Builds a router from provider credentials, synchronously; adapters and SDKs load on first use. */
function createSandboxRouter(input) {
  const { copy: options, facts } = readFacts(input, 5);
  const plans = callNative(() => binding.factoryPlan(facts));
  const { providers, moduleLoader, ...routerOptions } = options;
  const loader = moduleLoader ?? defaultLoader;
  const definitions = plans.map((plan) => definitionOf(plan, providers[plan.name], loader));
  const registry = new InMemoryProviderRegistry(definitions);
  return new ConfiguredSandboxRouter({ ...routerOptions, registry }, definitions.map((d) => d.id));
}

module.exports = {
  createSandboxRouter,
  createProviderRuntime,
  ConfiguredSandboxRouter,
  DEFAULT_CAPABILITIES,
  DEFAULT_SIGNALS,
  SUPPORTED_PROVIDERS: Object.freeze(binding.supportedProviders()),
};
