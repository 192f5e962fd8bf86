'use strict';
// Provider registration. A definition's runtime stays here, in JS, untouched: it is the
// caller's adapter object and is called as-is. Its declared capabilities and signals are
// parsed once by the native core, which from then on decides over plain structs.

const { binding } = require('./binding.js');
const { callNative, refuse } = require('./errors.js');
const { serializeDefinition, NotJson } = require('./serialize.js');
const { guarded, readOr } = require('./guard.js');

/** Why a registry or a definition is refused, by name: the numbers the core's refusals take. */
const REFUSAL = binding.registryRefusals();

/** Validates and brands a provider id by the native rule (src/core/ids.rs): `[a-z0-9][a-z0-9._-]*`, 1-64 chars. */
function asProviderId(id) {
  if (typeof id !== 'string') refuse(() => binding.registryRefused(REFUSAL.IdNotAString));
  callNative(() => binding.checkProviderId(id));
  return id;
}

/** Reads one definition once, in a guard, into the router's entry (`definition`: the caller's, for its callbacks). */
function readDefinition(def, position) {
  const refused = (what, id) => refuse(() => binding.registryRefused(what, position, id));
  const raw = readOr(() => {
    if (def === null || typeof def !== 'object') return null;
    const id = def.id;
    const rt = def.runtime;
    const rtOk = rt !== null && typeof rt === 'object' && typeof rt.launch === 'function' && typeof rt.destroy === 'function';
    const capacity = def.capacity;
    const warm = def.warm;
    return {
      id,
      runtime: rt,
      rtOk,
      detachable: rtOk && typeof rt.launchDetached === 'function',
      capacity,
      capacityOk: capacity === undefined || (capacity !== null && typeof capacity === 'object' && typeof capacity.getCapacity === 'function'),
      json: serializeDefinition(id, def.capabilities, def.signals, warm, def.rateLimit),
      warm: warm !== undefined,
    };
  }, undefined);
  if (raw === undefined) refused(REFUSAL.Unreadable);
  if (raw === null) refused(REFUSAL.NotAnObject);
  const id = asProviderId(raw.id);
  if (!raw.rtOk) refused(REFUSAL.NoRuntime, id);
  if (!raw.capacityOk) refused(REFUSAL.NoCapacityReader, id);
  if (raw.json === null) refused(REFUSAL.NotSerializable, id);
  return { id, runtime: raw.runtime, capacity: raw.capacity, detachable: raw.detachable, json: raw.json, definition: def, warm: raw.warm };
}

/** A definition's text, or (a NotJson) INVALID_PROVIDER_DEFINITION at its field, as the native parse refuses it. */
function definitionText(id, json) {
  if (!(json instanceof NotJson)) return json;
  return refuse(() => binding.definitionNotJson(id, json.segments, json.what));
}

const NATIVE = Symbol('sandbox-router.native-registry');
const ENTRY = Symbol('sandbox-router.registry-entry');

/** A registry held in memory; callers with dynamic fleets may implement `ProviderRegistry` (`list()`, `get(id)`). */
class InMemoryProviderRegistry {
  /** @type {object[]} the router's entries (readDefinition), by native index; `definition`: the caller's */
  #entries = [];
  #view = { native: binding.createRegistry(), definitions: this.#entries };
  /** @type {Map<string, object>} entries by id */
  #byId = new Map();

  /** @param {readonly object[]} [definitions] */
  constructor(definitions = []) {
    const list = readOr(() => (Array.isArray(definitions) ? [...definitions] : null), null);
    if (list === null) refuse(() => binding.registryRefused(REFUSAL.NotAList));
    list.forEach((def, i) => this.#register(def, i));
  }

  #register(def, position) {
    const entry = readDefinition(def, position);
    callNative(() => binding.registryCheckNew(this.#view.native, entry.id));
    const json = definitionText(entry.id, entry.json);
    callNative(() => binding.registryAddPool(this.#view.native, json, entry.detachable, entry.capacity !== undefined));
    this.#entries.push(entry);
    this.#byId.set(entry.id, entry);
  }

  /** Adds one definition; a duplicate id is a `ProviderRegistryError`. */
  register(definition) {
    this.#register(definition, this.#entries.length);
    return this;
  }

  /** Every definition, in registration order (a copy). */
  list() {
    return this.#entries.map((e) => e.definition);
  }

  /** The definition with this id, if any. */
  get(id) {
    return this.#byId.get(id)?.definition;
  }

  /** @internal the router's entry for this id, if any. */
  [ENTRY](id) {
    return this.#byId.get(id);
  }

  /** Number of definitions. */
  get size() {
    return this.#entries.length;
  }

  /** @internal the parsed registry and the definitions by native index. */
  [NATIVE]() {
    return this.#view;
  }

  toJSON() {
    return { providers: this.#entries.map((e) => e.id) };
  }
}

/** Whether `registry` is ours (guarded: a hostile registry's prototype trap may throw). */
function isOurs(registry) {
  // The guard is this try itself (no closure: this runs on every provision).
  try {
    return registry instanceof InMemoryProviderRegistry;
  } catch {
    refuse(() => binding.registryRefused(REFUSAL.RegistryUnreadable));
  }
}

function fromList(registry) {
  let definitions;
  try {
    definitions = guarded(() => registry.list());
  } catch {
    refuse(() => binding.registryRefused(REFUSAL.ListThrew));
  }
  if (!Array.isArray(definitions)) refuse(() => binding.registryRefused(REFUSAL.ListNotAnArray));
  return new InMemoryProviderRegistry(definitions);
}

/** The native registry a new router starts on: ours, or an empty one (a caller's own is read when a call needs it). */
function firstNative(registry) {
  return isOurs(registry) ? registry[NATIVE]().native : binding.createRegistry();
}

/** The parsed view of `ctx`'s registry (ours parsed once, a caller's own on each call), told to the router. */
function viewOf(ctx) {
  const registry = ctx.registry;
  const view = isOurs(registry) ? registry[NATIVE]() : fromList(registry)[NATIVE]();
  if (view.native !== ctx.view) {
    binding.routerUseRegistry(ctx.native, view.native);
    ctx.view = view.native;
  }
  return view;
}

/** The router's entry for pool `id`, or undefined; a caller's own registry is asked `get(id)`, else `list()`. */
function entryOf(registry, id) {
  if (isOurs(registry)) return registry[ENTRY](id);
  let def;
  try {
    def = guarded(() => {
      const get = registry.get;
      return typeof get === 'function' ? get.call(registry, id) : undefined;
    });
  } catch {
    refuse(() => binding.registryRefused(REFUSAL.GetThrew, 0, id));
  }
  if (def === undefined || def === null) return fromList(registry)[ENTRY](id);
  const entry = readDefinition(def, 0);
  return entry.id === id ? entry : undefined;
}

module.exports = { REFUSAL, asProviderId, InMemoryProviderRegistry, viewOf, firstNative, entryOf, definitionText };
