'use strict';
// Provider registration. A definition's runtime stays here, in JS, untouched: it is the
// caller's adapter object and is called as-is. Its declared capabilities and signals are
// parsed once by the native core, which from then on decides over plain structs.

const { binding } = require('./binding.js');
const { callNative, refuse } = require('./errors.js');
const { serializeDefinition, NotJson } = require('./serialize.js');
const { guarded } = require('./guard.js');

/** Why a registry or a definition is refused, by name: the numbers the core's refusals take. */
const REFUSAL = binding.registryRefusals();

/**
 * Validates and brands a provider id by the native rule (src/core/ids.rs): non-empty,
 * `[a-z0-9][a-z0-9._-]*`, at most 64 characters.
 * @param {string} id
 */
function asProviderId(id) {
  if (typeof id !== 'string') refuse(() => binding.registryRefused(REFUSAL.IdNotAString));
  callNative(() => binding.checkProviderId(id));
  return id;
}

/**
 * Reads one definition once, inside a guard (see guard.js), into the router's own entry:
 * `{ id, runtime, capacity, detachable, json, definition }`. `definition` is the caller's
 * object, handed back only to the caller's own callbacks (classifier, resolver).
 */
function readDefinition(def, position) {
  const refused = (what, id) => refuse(() => binding.registryRefused(what, position, id));
  let raw;
  try {
    raw = guarded(() => {
      if (def === null || typeof def !== 'object') return null;
      const rt = def.runtime;
      const rtOk = rt !== null && typeof rt === 'object' && typeof rt.launch === 'function' && typeof rt.destroy === 'function';
      const capacity = def.capacity;
      const warm = def.warm;
      return {
        id: def.id,
        runtime: rt,
        rtOk,
        detachable: rtOk && typeof rt.launchDetached === 'function',
        capacity,
        capacityOk: capacity === undefined || (capacity !== null && typeof capacity === 'object' && typeof capacity.getCapacity === 'function'),
        // A pool's `warm` option (docs/warm-pools.md) is read by the core with the rest.
        json: serializeDefinition(def.id, def.capabilities, def.signals, warm),
        warm: warm !== undefined,
      };
    });
  } catch {
    refused(REFUSAL.Unreadable);
  }
  if (raw === null) refused(REFUSAL.NotAnObject);
  const id = asProviderId(raw.id);
  if (!raw.rtOk) refused(REFUSAL.NoRuntime, id);
  if (!raw.capacityOk) refused(REFUSAL.NoCapacityReader, id);
  if (raw.json === null) refused(REFUSAL.NotSerializable, id);
  return { id, runtime: raw.runtime, capacity: raw.capacity, detachable: raw.detachable, json: raw.json, definition: def, warm: raw.warm };
}

/**
 * The definition's text for the native registry (read by `serializeDefinition`), or its
 * typed error where the native parse would have refused it: a value JSON cannot carry in
 * its `capabilities` (or `id`) is INVALID_PROVIDER_DEFINITION at that field.
 * @param {string} id the definition's id, already valid
 * @param {string | NotJson} json
 */
function definitionText(id, json) {
  if (!(json instanceof NotJson)) return json;
  return refuse(() => binding.definitionNotJson(id, json.segments, json.what));
}

const NATIVE = Symbol('sandbox-router.native-registry');
const ENTRY = Symbol('sandbox-router.registry-entry');

/**
 * A registry held in memory. A test/local reference: production callers with dynamic
 * fleets may implement `ProviderRegistry` themselves (`list()` and `get(id)`).
 */
class InMemoryProviderRegistry {
  #native = binding.createRegistry();
  /** @type {object[]} */
  #definitions = [];
  /** @type {object[]} the router's entries (readDefinition), by native index */
  #entries = [];
  // `version` changes with every registration, so cached decisions know they are stale.
  #view = { native: this.#native, definitions: this.#entries, version: 0 };
  /** @type {Map<string, object>} entries by id */
  #byId = new Map();

  /** @param {readonly object[]} [definitions] */
  constructor(definitions = []) {
    let list;
    try {
      list = guarded(() => (Array.isArray(definitions) ? [...definitions] : null));
    } catch {
      list = null;
    }
    if (list === null) refuse(() => binding.registryRefused(REFUSAL.NotAList));
    list.forEach((def, i) => this.#register(def, i));
  }

  #register(def, position) {
    const entry = readDefinition(def, position);
    callNative(() => binding.registryCheckNew(this.#native, entry.id));
    const json = definitionText(entry.id, entry.json);
    callNative(() => binding.registryAddPool(this.#native, json, entry.detachable, entry.capacity !== undefined));
    this.#definitions.push(def);
    this.#entries.push(entry);
    this.#byId.set(entry.id, entry);
    this.#view.version++;
  }

  /** Adds one definition; a duplicate id is a `ProviderRegistryError`. */
  register(definition) {
    this.#register(definition, this.#definitions.length);
    return this;
  }

  /** Every definition, in registration order (a copy). */
  list() {
    return this.#definitions.slice();
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
    return this.#definitions.length;
  }

  /** @internal the parsed registry and the definitions by native index. */
  [NATIVE]() {
    return this.#view;
  }

  toJSON() {
    return { providers: this.#definitions.map((d) => d.id) };
  }
}

/**
 * The parsed form of any registry. Ours is parsed once; a caller's own registry is
 * parsed on each call (its contents may change between calls).
 */
/** Whether `registry` is ours (guarded: a hostile registry's prototype trap may throw). */
function isOurs(registry) {
  // The guard is this try itself (no closure: this runs on every provision).
  try {
    return registry instanceof InMemoryProviderRegistry;
  } catch {
    refuse(() => binding.registryRefused(REFUSAL.RegistryUnreadable));
  }
}

function nativeView(registry) {
  if (isOurs(registry)) return registry[NATIVE]();
  return fromList(registry)[NATIVE]();
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

/**
 * The native registry a new router starts on: ours, or (a caller's own registry, read only
 * when a call needs it) an empty one.
 */
function firstNative(registry) {
  return isOurs(registry) ? registry[NATIVE]().native : binding.createRegistry();
}

/**
 * The parsed view of router context `ctx`'s registry, which the router then decides on
 * (a caller's own registry is parsed on each call: the router is told of each new view).
 */
function viewOf(ctx) {
  const view = nativeView(ctx.registry);
  if (view.native !== ctx.view) {
    binding.routerUseRegistry(ctx.native, view.native);
    ctx.view = view.native;
  }
  return view;
}

/**
 * The router's entry for pool `id` (an operation by id), or undefined. A caller's own
 * registry is asked with `get(id)` when it has one, else through `list()`.
 */
function entryOf(registry, id) {
  if (isOurs(registry)) return registry[ENTRY](id);
  let def;
  try {
    def = guarded(() => (typeof registry.get === 'function' ? registry.get(id) : undefined));
  } catch {
    refuse(() => binding.registryRefused(REFUSAL.GetThrew, 0, id));
  }
  if (def === undefined || def === null) return fromList(registry)[ENTRY](id);
  const entry = readDefinition(def, 0);
  return entry.id === id ? entry : undefined;
}

module.exports = { REFUSAL, asProviderId, InMemoryProviderRegistry, nativeView, viewOf, firstNative, entryOf, readDefinition, definitionText };
