'use strict';
// Provider registration. A definition's runtime stays here, in JS, untouched: it is the
// caller's adapter object and is called as-is. Its declared capabilities and signals are
// parsed once by the native core, which from then on decides over plain structs.

const { binding } = require('./binding.js');
const { ProviderRegistryError, callNative } = require('./errors.js');
const { serialize } = require('./serialize.js');

/**
 * Validates and brands a provider id: non-empty, `[a-z0-9][a-z0-9._-]*`, at most 64 chars.
 * @param {string} id
 */
function asProviderId(id) {
  if (typeof id !== 'string') {
    throw new ProviderRegistryError('invalid provider id: must be a string', 'INVALID_PROVIDER_ID');
  }
  callNative(() => binding.checkProviderId(id));
  return id;
}

function checkDefinition(def, position) {
  if (def === null || typeof def !== 'object') {
    throw new ProviderRegistryError(`provider definition at position ${position} must be an object`, 'INVALID_PROVIDER_DEFINITION', {
      field: `providers[${position}]`,
    });
  }
  const id = asProviderId(def.id);
  const rt = def.runtime;
  if (rt === null || typeof rt !== 'object' || typeof rt.launch !== 'function' || typeof rt.destroy !== 'function') {
    throw new ProviderRegistryError(
      `invalid provider definition ${id}: runtime must be a SandboxRuntime (an object with launch and destroy methods)`,
      'INVALID_PROVIDER_DEFINITION',
      { providerId: id, field: 'runtime' },
    );
  }
  if (def.capacity !== undefined && (def.capacity === null || typeof def.capacity.getCapacity !== 'function')) {
    throw new ProviderRegistryError(
      `invalid provider definition ${id}: capacity must be a CapacityReader (an object with getCapacity)`,
      'INVALID_PROVIDER_DEFINITION',
      { providerId: id, field: 'capacity' },
    );
  }
  return id;
}

/** The JSON the native core reads for one definition. */
function definitionJson(def) {
  return serialize({ id: def.id, capabilities: def.capabilities, signals: def.signals });
}

function addTo(native, def) {
  const json = definitionJson(def);
  if (json === null) {
    throw new ProviderRegistryError(`invalid provider definition ${def.id}: not serializable`, 'INVALID_PROVIDER_DEFINITION', {
      providerId: def.id,
    });
  }
  callNative(() => native.addPool(json, typeof def.runtime.launchDetached === 'function'));
}

const NATIVE = Symbol('sandbox-router.native-registry');

/**
 * A registry held in memory. A test/local reference: production callers with dynamic
 * fleets may implement `ProviderRegistry` themselves (`list()` and `get(id)`).
 */
class InMemoryProviderRegistry {
  #native = new binding.NativeRegistry();
  /** @type {object[]} */
  #definitions = [];
  // `version` changes with every registration, so cached decisions know they are stale.
  #view = { native: this.#native, key: this.#native.key, definitions: this.#definitions, version: 0 };
  /** @type {Map<string, object>} */
  #byId = new Map();

  /** @param {readonly object[]} [definitions] */
  constructor(definitions = []) {
    if (!Array.isArray(definitions)) {
      throw new ProviderRegistryError('InMemoryProviderRegistry expects an array of provider definitions', 'INVALID_PROVIDER_DEFINITION');
    }
    definitions.forEach((def, i) => this.#register(def, i));
  }

  #register(def, position) {
    const id = checkDefinition(def, position);
    if (this.#byId.has(id)) {
      throw new ProviderRegistryError(`duplicate provider id: ${id}`, 'DUPLICATE_PROVIDER', { providerId: id });
    }
    addTo(this.#native, def);
    this.#definitions.push(def);
    this.#byId.set(id, def);
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
    return this.#byId.get(id);
  }

  /** Number of definitions. */
  get size() {
    return this.#definitions.length;
  }

  /** @internal the parsed registry, its hot-path key and the definitions by native index. */
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
function nativeView(registry) {
  if (registry instanceof InMemoryProviderRegistry) return registry[NATIVE]();
  const definitions = registry.list();
  if (!Array.isArray(definitions)) {
    throw new ProviderRegistryError('registry.list() must return an array', 'INVALID_PROVIDER_DEFINITION');
  }
  const fresh = new InMemoryProviderRegistry(definitions);
  return fresh[NATIVE]();
}

module.exports = { asProviderId, InMemoryProviderRegistry, nativeView, checkDefinition, definitionJson };
