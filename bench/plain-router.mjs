// A plain-JavaScript implementation of the native routing core's decision
// (src/core/{request,capabilities,signals,requirements,ranking,registry}.rs): the
// baseline the native code is benchmarked against, and the oracle of
// __test__/plain-equivalence.test.mjs.
//
// Same validation semantics for the fields it reads (strict keys, `null` refused,
// non-finite numbers refused, the same error code and field path), the same filters in
// the same order, the same INVALID_SIGNALS rejection, the same ranking (cost / latency /
// reliability / balanced 0.35/0.25/0.40 over min-max normalization of the eligible set,
// "no spread" = 1.0, region-preference tiers first, ties by provider id in byte order).
//
// Inputs are plain JSON-like data, as the native side sees them after JSON.stringify with
// lib/serialize.js's replacer: `undefined` properties are absent, functions, symbols,
// bigints and non-finite numbers are invalid wherever they appear. (Objects with a
// `toJSON` method, such as Date, are not converted: pass plain data.)
//
// Written to be fast the ordinary way: declarations are parsed once into flat objects
// (prepareRegistry), a decision is one pass over the pools plus a top-k selection.

/** Named capabilities (capabilities.rs NAMED_CAPABILITIES). */
export const NAMED_CAPABILITIES = [
  'syncExec',
  'asyncExec',
  'fileTransfer',
  'pty',
  'publicPorts',
  'tailnet',
  'longRunningProcesses',
  'stablePid',
  'processRestart',
  'unattendedEnrollment',
  'nestedUserNamespaces',
  'privileged',
  'docker',
  'gpu',
  'snapshots',
  'warmLease',
  'lifecycle',
  'persistentVolumes',
  'ssh',
];
export const TIMEOUT_SEMANTICS = ['command-lifetime', 'sandbox-lifetime', 'idle'];
export const EGRESS_CLASSES = ['none', 'allowlist', 'open'];
export const DURABILITY_LEVELS = ['ephemeral', 'session', 'persistent'];
export const ISOLATION_LEVELS = ['none', 'process', 'container', 'gvisor', 'microvm', 'vm'];
export const COST_WEIGHT = 0.35;
export const LATENCY_WEIGHT = 0.25;
export const RELIABILITY_WEIGHT = 0.4;

const NAMED = new Set(NAMED_CAPABILITIES);
const STRATEGIES = ['cost', 'latency', 'reliability', 'balanced'];
const COST = 0;
const LATENCY = 1;
const RELIABILITY = 2;
const BALANCED = 3;
const MAX_ATTEMPTS_LIMIT = 10;
const MAX_ACQUISITION_TIMEOUT_MS = 3_600_000;
const DEFAULT_ACQUISITION_TIMEOUT_MS = 300_000;
const SANDBOX_ID_LABEL = 'agent-relay-sbx-id';

const LIFETIME_UNKNOWN = 0;
const LIFETIME_UNBOUNDED = 1;
const LIFETIME_CAPPED = 2;

const TOP_KEYS = new Set(['providerId', 'requires', 'resources', 'region', 'routing', 'placement', 'nodeAffinity', 'launch']);
const REQUIRES_KEYS = new Set([
  'requiredCapabilities',
  'forbiddenCapabilities',
  'image',
  'egress',
  'timeout',
  'stateDurability',
  'restrictions',
  'isolation',
]);
const TIMEOUT_KEYS = new Set(['semantics', 'granularityMs', 'maxReadyLatencyMs', 'completionBudgetMs', 'requiredSandboxLifetimeMs']);
const ROUTING_KEYS = new Set(['strategy', 'latencyObjective', 'acquisitionFallback', 'maxAcquisitionAttempts', 'acquisitionTimeoutMs']);
const LAUNCH_KEYS = new Set(['name', 'env', 'labels', 'createTimeoutSeconds']);
const PLACEMENT_KEYS = new Set(['authority']);
const REQ_IMAGE_KEYS = new Set(['identity', 'requiredBinaries']);
const REGION_KEYS = new Set(['preferred', 'required']);
const RESOURCE_KEYS = new Set(['cpu', 'memoryMb', 'diskMb', 'gpu']);
const CAPABILITY_KEYS = new Set([
  'supported',
  'image',
  'egress',
  'timeout',
  'stateDurability',
  'restrictions',
  'regions',
  'resources',
  'isolation',
]);
const CAP_IMAGE_KEYS = new Set(['identity', 'binaries']);
const CAP_TIMEOUT_KEYS = new Set(['semantics', 'granularityMs', 'maxSandboxLifetimeMs']);
const SIGNAL_KEYS = new Set(['estimatedCost', 'coldStartLatencyMs', 'readyLatencyMs', 'completionWithinBudgetRate', 'available']);

/** An error with the native core's stable `code` and `field`. */
export class PlainRouterError extends Error {
  constructor(code, message, field) {
    super(message);
    this.name = 'PlainRouterError';
    this.code = code;
    if (field !== undefined) this.field = field;
  }
}

// A field that failed validation (json.rs FieldError); callers give it its code.
class FieldError {
  constructor(field, expectation) {
    this.field = field;
    this.expectation = expectation;
  }
}

// ---------------------------------------------------------------------------------------
// Strict reading of JSON-like objects (json.rs).

function join(path, key) {
  return path === '' ? key : `${path}.${key}`;
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function oneOf(choices) {
  return `must be one of ${choices.join(', ')}`;
}

/**
 * Checks that `v` is an object whose (defined) keys all belong to `allowed`. Its path is
 * `join(parent, key)`, only built for an error message.
 */
function object(v, parent, key, allowed) {
  if (!isObject(v)) {
    const path = key === undefined ? parent : join(parent, key);
    throw new FieldError(path === '' ? '(root)' : path, 'must be an object');
  }
  let unknown;
  for (const k in v) {
    if (!allowed.has(k) && Object.hasOwn(v, k) && v[k] !== undefined) {
      // serde_json's map iterates keys in sorted order: the smallest unknown key is named.
      if (unknown === undefined || k < unknown) unknown = k;
    }
  }
  if (unknown !== undefined) throw new FieldError(join(key === undefined ? parent : join(parent, key), unknown), 'is not a known field');
  return v;
}

/** A nested object at `o[key]`, or undefined. */
function sub(o, key, path, allowed) {
  const v = o[key];
  return v === undefined ? undefined : object(v, path, key, allowed);
}

function nonNegative(o, key, path) {
  const v = o[key];
  if (v === undefined) return undefined;
  if (typeof v === 'number' && Number.isFinite(v)) {
    if (v >= 0) return v;
    throw new FieldError(join(path, key), 'must be a finite number >= 0');
  }
  throw new FieldError(join(path, key), 'must be a finite number >= 0 (null, NaN and Infinity are refused)');
}

function integerIn(o, key, path, min, max) {
  const v = o[key];
  if (v === undefined) return undefined;
  if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) return v;
  throw new FieldError(join(path, key), `must be an integer from ${min} to ${max}`);
}

function boolean(o, key, path) {
  const v = o[key];
  if (v === undefined || typeof v === 'boolean') return v;
  throw new FieldError(join(path, key), 'must be a boolean');
}

function string(o, key, path) {
  const v = o[key];
  if (v === undefined) return undefined;
  if (typeof v === 'string' && v !== '') return v;
  throw new FieldError(join(path, key), 'must be a non-empty string');
}

function choice(o, key, path, choices) {
  const v = o[key];
  if (v === undefined) return undefined;
  if (typeof v === 'string' && choices.includes(v)) return v;
  throw new FieldError(join(path, key), oneOf(choices));
}

/** An array of non-empty strings, duplicates removed, order kept. */
function strings(o, key, path) {
  const v = o[key];
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) throw new FieldError(join(path, key), 'must be an array of strings');
  const out = [];
  for (let i = 0; i < v.length; i++) {
    const s = v[i];
    if (typeof s !== 'string' || s === '') throw new FieldError(`${join(path, key)}[${i}]`, 'must be a non-empty string');
    if (!out.includes(s)) out.push(s);
  }
  return out;
}

/** Like `strings`, each drawn from `choices` (indices refer to the de-duplicated list, as natively). */
function choicesOf(o, key, path, choices) {
  const items = strings(o, key, path);
  if (items === undefined) return undefined;
  for (let i = 0; i < items.length; i++) {
    if (!choices.includes(items[i])) throw new FieldError(`${join(path, key)}[${i}]`, oneOf(choices));
  }
  return items;
}

function stringMap(o, key, path) {
  const v = o[key];
  if (v === undefined) return undefined;
  if (!isObject(v)) throw new FieldError(join(path, key), 'must be an object of strings');
  const out = [];
  for (const k of Object.keys(v)) {
    const s = v[k];
    if (s === undefined) continue;
    if (typeof s !== 'string') throw new FieldError(join(join(path, key), k), 'must be a string');
    out.push([k, s]);
  }
  return out;
}

function isCapabilityName(name) {
  return NAMED.has(name) || (name.length > 2 && name.startsWith('x-'));
}

function capabilityNames(o, key, path) {
  const names = strings(o, key, path) ?? [];
  for (let i = 0; i < names.length; i++) {
    if (!isCapabilityName(names[i])) {
      throw new FieldError(`${join(path, key)}[${i}]`, 'must be a known capability name or start with x-');
    }
  }
  return names;
}

/** Reads `{ cpu?, memoryMb?, diskMb?, gpu? }` into `into` (undeclared = 0). */
function readResources(o, path, into) {
  into.cpu = nonNegative(o, 'cpu', path) ?? 0;
  into.memoryMb = nonNegative(o, 'memoryMb', path) ?? 0;
  into.diskMb = nonNegative(o, 'diskMb', path) ?? 0;
  into.gpu = nonNegative(o, 'gpu', path) ?? 0;
}

// ---------------------------------------------------------------------------------------
// Requests (request.rs).

function checkPlacement(v) {
  if (!isObject(v)) return;
  if (v.nodeAffinity !== undefined) {
    throw new PlainRouterError('ROUTING_NOT_APPLICABLE', 'routing not applicable: nodeAffinity selects a concrete node');
  }
  const p = v.placement;
  if (isObject(p)) {
    if (p.nodeAffinity !== undefined) {
      throw new PlainRouterError('ROUTING_NOT_APPLICABLE', 'routing not applicable: placement.nodeAffinity selects a concrete node');
    }
    if (p.authority === 'fleet' || p.authority === 'none') {
      throw new PlainRouterError('ROUTING_NOT_APPLICABLE', `routing not applicable: placement.authority is ${p.authority}`);
    }
  }
}

const EMPTY = Object.freeze([]);

function readRequest(value) {
  const top = object(value, '', undefined, TOP_KEYS);
  const req = {
    providerId: string(top, 'providerId', ''),
    requiredCapabilities: EMPTY,
    forbiddenCapabilities: EMPTY,
    imageIdentity: undefined,
    requiredBinaries: EMPTY,
    egress: EMPTY,
    timeoutSemantics: EMPTY,
    timeoutGranularityMs: undefined,
    maxReadyLatencyMs: undefined,
    completionBudgetMs: undefined,
    requiredLifetimeMs: undefined,
    durabilityRank: -1,
    restrictions: EMPTY,
    isolationRank: -1,
    cpu: 0,
    memoryMb: 0,
    diskMb: 0,
    gpu: 0,
    regionPreferred: EMPTY,
    regionRequired: false,
    strategy: BALANCED,
    coldObjective: false,
    fallbackAllowed: true,
    maxAttempts: 3,
    acquisitionTimeoutMs: DEFAULT_ACQUISITION_TIMEOUT_MS,
    labels: EMPTY,
  };
  const placement = sub(top, 'placement', '', PLACEMENT_KEYS);
  if (placement !== undefined) choice(placement, 'authority', 'placement', ['router']);
  const r = sub(top, 'requires', '', REQUIRES_KEYS);
  if (r !== undefined) {
    const P = 'requires';
    req.requiredCapabilities = capabilityNames(r, 'requiredCapabilities', P);
    req.forbiddenCapabilities = capabilityNames(r, 'forbiddenCapabilities', P);
    const both = req.requiredCapabilities.find((c) => req.forbiddenCapabilities.includes(c));
    if (both !== undefined) {
      throw new FieldError('requires.forbiddenCapabilities', `must not also list a required capability (${both})`);
    }
    const image = sub(r, 'image', P, REQ_IMAGE_KEYS);
    if (image !== undefined) {
      req.imageIdentity = string(image, 'identity', 'requires.image');
      req.requiredBinaries = strings(image, 'requiredBinaries', 'requires.image') ?? EMPTY;
    }
    const egress = r.egress;
    if (egress !== undefined) {
      req.egress = Array.isArray(egress) ? choicesOf(r, 'egress', P, EGRESS_CLASSES) : [choice(r, 'egress', P, EGRESS_CLASSES)];
      if (req.egress.length === 0) throw new FieldError('requires.egress', 'must name at least one egress class');
    }
    const t = sub(r, 'timeout', P, TIMEOUT_KEYS);
    if (t !== undefined) {
      const T = 'requires.timeout';
      req.timeoutSemantics = choicesOf(t, 'semantics', T, TIMEOUT_SEMANTICS) ?? EMPTY;
      req.timeoutGranularityMs = nonNegative(t, 'granularityMs', T);
      req.maxReadyLatencyMs = nonNegative(t, 'maxReadyLatencyMs', T);
      req.completionBudgetMs = nonNegative(t, 'completionBudgetMs', T);
      req.requiredLifetimeMs = nonNegative(t, 'requiredSandboxLifetimeMs', T);
    }
    const durability = choice(r, 'stateDurability', P, DURABILITY_LEVELS);
    if (durability !== undefined) req.durabilityRank = DURABILITY_LEVELS.indexOf(durability);
    req.restrictions = strings(r, 'restrictions', P) ?? EMPTY;
    const isolation = choice(r, 'isolation', P, ISOLATION_LEVELS);
    if (isolation !== undefined) req.isolationRank = ISOLATION_LEVELS.indexOf(isolation);
  }
  const res = sub(top, 'resources', '', RESOURCE_KEYS);
  if (res !== undefined) readResources(res, 'resources', req);
  const region = sub(top, 'region', '', REGION_KEYS);
  if (region !== undefined) {
    req.regionPreferred = strings(region, 'preferred', 'region') ?? EMPTY;
    req.regionRequired = boolean(region, 'required', 'region') ?? false;
    if (req.regionRequired && req.regionPreferred.length === 0) {
      throw new FieldError('region.preferred', 'must name at least one region when region.required is true');
    }
  }
  const routing = sub(top, 'routing', '', ROUTING_KEYS);
  if (routing !== undefined) {
    const R = 'routing';
    const strategy = choice(routing, 'strategy', R, STRATEGIES);
    req.strategy = strategy === undefined ? BALANCED : STRATEGIES.indexOf(strategy);
    req.coldObjective = choice(routing, 'latencyObjective', R, ['cold', 'ready']) === 'cold';
    req.fallbackAllowed = choice(routing, 'acquisitionFallback', R, ['allowed', 'forbidden']) !== 'forbidden';
    req.maxAttempts = integerIn(routing, 'maxAcquisitionAttempts', R, 1, MAX_ATTEMPTS_LIMIT) ?? 3;
    const ms = integerIn(routing, 'acquisitionTimeoutMs', R, 1, MAX_ACQUISITION_TIMEOUT_MS);
    if (ms !== undefined) req.acquisitionTimeoutMs = ms;
  }
  if (!req.fallbackAllowed) req.maxAttempts = 1;
  const launch = sub(top, 'launch', '', LAUNCH_KEYS);
  if (launch !== undefined) {
    string(launch, 'name', 'launch');
    stringMap(launch, 'env', 'launch');
    const cts = launch.createTimeoutSeconds;
    if (cts !== undefined && !(typeof cts === 'number' && Number.isFinite(cts) && cts > 0)) {
      throw new FieldError('launch.createTimeoutSeconds', 'must be a finite number > 0');
    }
    req.labels = stringMap(launch, 'labels', 'launch') ?? EMPTY;
    if (req.labels.some(([k]) => k === SANDBOX_ID_LABEL)) {
      throw new FieldError(`launch.labels.${SANDBOX_ID_LABEL}`, 'is reserved: the router stamps its own sandbox id under this key');
    }
  }
  return req;
}

/**
 * Parses and validates a request (`undefined`/`null` mean "no requirements"). Throws a
 * PlainRouterError with code ROUTING_NOT_APPLICABLE or INVALID_REQUEST (and `field`).
 */
export function parseRequest(request) {
  const value = request === undefined || request === null ? {} : request;
  checkPlacement(value);
  try {
    return readRequest(value);
  } catch (e) {
    if (e instanceof FieldError) throw new PlainRouterError('INVALID_REQUEST', `invalid request: ${e.field} ${e.expectation}`, e.field);
    throw e;
  }
}

// ---------------------------------------------------------------------------------------
// Provider definitions (capabilities.rs, signals.rs, ids.rs, registry.rs Pool::from_json).

function validProviderId(id) {
  return typeof id === 'string' && id.length > 0 && id.length <= 64 && /^[a-z0-9][a-z0-9._-]*$/.test(id);
}

function readCapabilities(value, pool) {
  const P = 'capabilities';
  const o = object(value, P, undefined, CAPABILITY_KEYS);
  const supported = strings(o, 'supported', P) ?? EMPTY;
  for (let i = 0; i < supported.length; i++) {
    if (!isCapabilityName(supported[i])) {
      throw new FieldError(`capabilities.supported[${i}]`, 'must be a known capability name or start with x-');
    }
  }
  pool.supported = new Set(supported);
  const image = sub(o, 'image', P, CAP_IMAGE_KEYS);
  if (image !== undefined) {
    pool.imageIdentity = string(image, 'identity', 'capabilities.image');
    pool.binaries = strings(image, 'binaries', 'capabilities.image') ?? EMPTY;
  }
  pool.egress = choice(o, 'egress', P, EGRESS_CLASSES);
  const t = sub(o, 'timeout', P, CAP_TIMEOUT_KEYS);
  if (t !== undefined) {
    const T = 'capabilities.timeout';
    pool.timeoutSemantics = choicesOf(t, 'semantics', T, TIMEOUT_SEMANTICS) ?? EMPTY;
    pool.timeoutGranularityMs = nonNegative(t, 'granularityMs', T);
    const life = t.maxSandboxLifetimeMs;
    if (life === null) {
      pool.lifetime = LIFETIME_UNBOUNDED;
    } else if (life !== undefined) {
      if (!(typeof life === 'number' && Number.isFinite(life) && life >= 0)) {
        throw new FieldError('capabilities.timeout.maxSandboxLifetimeMs', 'must be a finite number >= 0, or null for unbounded');
      }
      pool.lifetime = LIFETIME_CAPPED;
      pool.lifetimeMs = life;
    }
  }
  const durability = choice(o, 'stateDurability', P, DURABILITY_LEVELS);
  if (durability !== undefined) pool.durabilityRank = DURABILITY_LEVELS.indexOf(durability);
  pool.restrictions = strings(o, 'restrictions', P) ?? EMPTY;
  pool.regions = strings(o, 'regions', P) ?? EMPTY;
  const res = sub(o, 'resources', P, RESOURCE_KEYS);
  if (res !== undefined) readResources(res, 'capabilities.resources', pool);
  const isolation = choice(o, 'isolation', P, ISOLATION_LEVELS);
  if (isolation !== undefined) pool.isolationRank = ISOLATION_LEVELS.indexOf(isolation);
}

/** Validates signals into `pool`; an invalid value makes the pool ineligible (INVALID_SIGNALS). */
function readSignals(value, pool) {
  if (value === undefined) {
    pool.signalsDetail = 'signals is required';
    return;
  }
  try {
    const o = object(value, 'signals', undefined, SIGNAL_KEYS);
    const need = (key) => {
      const x = nonNegative(o, key, 'signals');
      if (x === undefined) throw new FieldError(`signals.${key}`, 'is required');
      return x;
    };
    const rate = need('completionWithinBudgetRate');
    if (rate > 1) throw new FieldError('signals.completionWithinBudgetRate', 'must be between 0 and 1');
    const cost = need('estimatedCost');
    const cold = need('coldStartLatencyMs');
    const ready = need('readyLatencyMs');
    const available = boolean(o, 'available', 'signals');
    if (available === undefined) throw new FieldError('signals.available', 'is required');
    pool.signalsValid = true;
    pool.estimatedCost = cost;
    pool.coldStartLatencyMs = cold;
    pool.readyLatencyMs = ready;
    pool.completionWithinBudgetRate = rate;
    pool.available = available;
  } catch (e) {
    if (!(e instanceof FieldError)) throw e;
    pool.signalsDetail = `${e.field} ${e.expectation}`;
  }
}

/** Parses one `{ id, capabilities, signals }` definition (Pool::from_json). */
export function preparePool(def) {
  const id = def !== null && typeof def === 'object' && typeof def.id === 'string' ? def.id : '';
  if (!validProviderId(id)) throw new PlainRouterError('INVALID_PROVIDER_ID', 'invalid provider id');
  // One flat shape for every pool, so the routing loop stays monomorphic.
  const pool = {
    id,
    supported: undefined,
    imageIdentity: undefined,
    binaries: EMPTY,
    egress: undefined,
    timeoutSemantics: EMPTY,
    timeoutGranularityMs: undefined,
    lifetime: LIFETIME_UNKNOWN,
    lifetimeMs: 0,
    durabilityRank: -1,
    restrictions: EMPTY,
    regions: EMPTY,
    cpu: 0,
    memoryMb: 0,
    diskMb: 0,
    gpu: 0,
    isolationRank: -1,
    signalsValid: false,
    signalsDetail: '',
    estimatedCost: 0,
    coldStartLatencyMs: 0,
    readyLatencyMs: 0,
    completionWithinBudgetRate: 0,
    available: false,
  };
  if (def.capabilities === undefined) {
    throw new PlainRouterError('INVALID_PROVIDER_DEFINITION', `invalid provider definition ${id}: capabilities is required`, 'capabilities');
  }
  try {
    readCapabilities(def.capabilities, pool);
  } catch (e) {
    if (e instanceof FieldError) {
      throw new PlainRouterError('INVALID_PROVIDER_DEFINITION', `invalid provider definition ${id}: ${e.field} ${e.expectation}`, e.field);
    }
    throw e;
  }
  readSignals(def.signals, pool);
  return pool;
}

/**
 * The plain equivalent of InMemoryProviderRegistry: every definition parsed once.
 * Throws INVALID_PROVIDER_ID, INVALID_PROVIDER_DEFINITION or DUPLICATE_PROVIDER.
 */
export function prepareRegistry(definitions) {
  if (!Array.isArray(definitions)) {
    throw new PlainRouterError('INVALID_PROVIDER_DEFINITION', 'expects an array of provider definitions', 'providers');
  }
  const pools = [];
  const byId = new Map();
  for (const def of definitions) {
    const pool = preparePool(def);
    if (byId.has(pool.id)) throw new PlainRouterError('DUPLICATE_PROVIDER', `duplicate provider id: ${pool.id}`);
    byId.set(pool.id, pools.length);
    pools.push(pool);
  }
  return { pools, byId };
}

// ---------------------------------------------------------------------------------------
// The decision (requirements.rs check, registry.rs route/operational, ranking.rs rank).

function hasAll(have, need) {
  for (let i = 0; i < need.length; i++) if (!have.includes(need[i])) return false;
  return true;
}

/** Every hard requirement, in the native order; true when the pool passes them all. */
function satisfies(p, r) {
  if (r.providerId !== undefined && r.providerId !== p.id) return false;
  const req = r.requiredCapabilities;
  for (let i = 0; i < req.length; i++) if (!p.supported.has(req[i])) return false;
  const forb = r.forbiddenCapabilities;
  for (let i = 0; i < forb.length; i++) if (p.supported.has(forb[i])) return false;
  if (r.imageIdentity !== undefined && p.imageIdentity !== r.imageIdentity) return false;
  if (r.requiredBinaries.length !== 0 && !hasAll(p.binaries, r.requiredBinaries)) return false;
  if (r.egress.length !== 0 && (p.egress === undefined || !r.egress.includes(p.egress))) return false;
  if (r.timeoutSemantics.length !== 0 && !hasAll(p.timeoutSemantics, r.timeoutSemantics)) return false;
  if (r.timeoutGranularityMs !== undefined && !(p.timeoutGranularityMs !== undefined && p.timeoutGranularityMs <= r.timeoutGranularityMs)) {
    return false;
  }
  if (r.requiredLifetimeMs !== undefined) {
    if (p.lifetime === LIFETIME_UNKNOWN) return false;
    if (p.lifetime === LIFETIME_CAPPED && !(p.lifetimeMs >= r.requiredLifetimeMs)) return false;
  }
  if (r.durabilityRank >= 0 && !(p.durabilityRank >= 0 && p.durabilityRank >= r.durabilityRank)) return false;
  if (r.restrictions.length !== 0 && !hasAll(p.restrictions, r.restrictions)) return false;
  if (r.regionRequired) {
    let any = false;
    for (let i = 0; i < p.regions.length; i++) {
      if (r.regionPreferred.includes(p.regions[i])) {
        any = true;
        break;
      }
    }
    if (!any) return false;
  }
  if (r.cpu > 0 && r.cpu > p.cpu) return false;
  if (r.memoryMb > 0 && r.memoryMb > p.memoryMb) return false;
  if (r.diskMb > 0 && r.diskMb > p.diskMb) return false;
  if (r.gpu > 0 && r.gpu > p.gpu) return false;
  if (r.isolationRank >= 0 && !(p.isolationRank >= 0 && p.isolationRank >= r.isolationRank)) return false;
  return true;
}

/** Signals, availability and the latency budget, for a pool that met every requirement. */
function operational(p, r) {
  if (!p.signalsValid || !p.available) return false;
  if (r.maxReadyLatencyMs !== undefined) {
    const latency = r.coldObjective ? p.coldStartLatencyMs : p.readyLatencyMs;
    if (latency > r.maxReadyLatencyMs) return false;
  }
  return true;
}

function clamp01(x) {
  return x < 0 ? 0 : x > 1 ? 1 : x;
}

function regionTier(regions, preferred) {
  for (let i = 0; i < preferred.length; i++) if (regions.includes(preferred[i])) return i;
  return preferred.length;
}

// Candidate order: region tier, then a key (lower first), then provider id (byte order;
// ids are ASCII, so `<` on JS strings is byte order).
function before(tierA, keyA, idA, tierB, keyB, idB) {
  if (tierA !== tierB) return tierA < tierB;
  if (keyA !== keyB) return keyA < keyB;
  return idA < idB;
}

/**
 * Ranks eligible pools (`cands`) with the spreads of the eligible set; returns ids, best
 * first, at most `limit` of them.
 */
function rank(cands, r, limit, lo) {
  const n = cands.length;
  const k = limit === undefined || limit > n ? n : limit;
  if (k <= 0) return [];
  const strategy = r.strategy;
  const cold = r.coldObjective;
  const preferred = r.regionPreferred;
  const tiers = preferred.length !== 0;
  const costSpread = lo.costHi > lo.costLo;
  const latSpread = lo.latHi > lo.latLo;
  const relSpread = lo.relHi > lo.relLo;
  // The sort key: lower is better. Cost and latency rank by raw value, reliability by
  // raw value descending, balanced by score descending.
  const keyOf = (p) => {
    switch (strategy) {
      case COST:
        return p.estimatedCost;
      case LATENCY:
        return cold ? p.coldStartLatencyMs : p.readyLatencyMs;
      case RELIABILITY:
        return -p.completionWithinBudgetRate;
      default: {
        const lat = cold ? p.coldStartLatencyMs : p.readyLatencyMs;
        const c = costSpread ? clamp01((lo.costHi - p.estimatedCost) / (lo.costHi - lo.costLo)) : 1;
        const l = latSpread ? clamp01((lo.latHi - lat) / (lo.latHi - lo.latLo)) : 1;
        const rel = relSpread ? clamp01((p.completionWithinBudgetRate - lo.relLo) / (lo.relHi - lo.relLo)) : 1;
        return -clamp01(COST_WEIGHT * c + LATENCY_WEIGHT * l + RELIABILITY_WEIGHT * rel);
      }
    }
  };
  if (k < n && k <= 16) {
    // Top-k by insertion into a small sorted buffer: O(n·k), no full sort.
    const top = new Array(k);
    const topKey = new Array(k);
    const topTier = new Array(k);
    let size = 0;
    for (let i = 0; i < n; i++) {
      const p = cands[i];
      const key = keyOf(p);
      const tier = tiers ? regionTier(p.regions, preferred) : 0;
      if (size === k && !before(tier, key, p.id, topTier[k - 1], topKey[k - 1], top[k - 1].id)) continue;
      let j = size < k ? size++ : k - 1;
      while (j > 0 && before(tier, key, p.id, topTier[j - 1], topKey[j - 1], top[j - 1].id)) {
        top[j] = top[j - 1];
        topKey[j] = topKey[j - 1];
        topTier[j] = topTier[j - 1];
        j--;
      }
      top[j] = p;
      topKey[j] = key;
      topTier[j] = tier;
    }
    const ids = new Array(k);
    for (let i = 0; i < k; i++) ids[i] = top[i].id;
    return ids;
  }
  const entries = new Array(n);
  for (let i = 0; i < n; i++) {
    const p = cands[i];
    entries[i] = { id: p.id, key: keyOf(p), tier: tiers ? regionTier(p.regions, preferred) : 0 };
  }
  entries.sort((a, b) => {
    if (a.tier !== b.tier) return a.tier - b.tier;
    if (a.key !== b.key) return a.key < b.key ? -1 : 1;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
  const ids = new Array(k);
  for (let i = 0; i < k; i++) ids[i] = entries[i].id;
  return ids;
}

/** One pass: filters every pool; collects the eligible ones and the spreads. */
function decide(pools, r, rejected) {
  const cands = [];
  const lo = { costLo: Infinity, costHi: -Infinity, latLo: Infinity, latHi: -Infinity, relLo: Infinity, relHi: -Infinity };
  const cold = r.coldObjective;
  for (let i = 0; i < pools.length; i++) {
    const p = pools[i];
    if (!satisfies(p, r) || !operational(p, r)) {
      if (rejected !== undefined) rejected.push(p.id);
      continue;
    }
    cands.push(p);
    const cost = p.estimatedCost;
    const lat = cold ? p.coldStartLatencyMs : p.readyLatencyMs;
    const rel = p.completionWithinBudgetRate;
    if (cost < lo.costLo) lo.costLo = cost;
    if (cost > lo.costHi) lo.costHi = cost;
    if (lat < lo.latLo) lo.latLo = lat;
    if (lat > lo.latHi) lo.latHi = lat;
    if (rel < lo.relLo) lo.relLo = rel;
    if (rel > lo.relHi) lo.relHi = rel;
  }
  return { cands, lo };
}

/**
 * The registry-backed decision: ordered eligible provider ids for `request` over a
 * prepared registry, the first `limit` only when given (router.route uses the request's
 * maxAcquisitionAttempts). Throws on an invalid request, like the native router.
 */
export function routePrepared(registry, request, options) {
  const r = parseRequest(request);
  const { cands, lo } = decide(registry.pools, r, undefined);
  return rank(cands, r, options === undefined ? undefined : options.limit, lo);
}

/**
 * The provision plan over a prepared registry (the plain equivalent of the native
 * `plan`): the request's attempt bound, fallback and deadline, and the attempt order
 * (at most maxAcquisitionAttempts ids, best first).
 */
export function planPrepared(registry, request) {
  const r = parseRequest(request);
  const { cands, lo } = decide(registry.pools, r, undefined);
  return {
    order: rank(cands, r, r.maxAttempts, lo),
    maxAttempts: r.maxAttempts,
    fallbackAllowed: r.fallbackAllowed,
    acquisitionTimeoutMs: r.acquisitionTimeoutMs,
  };
}

/**
 * Everything per call, like routeProviders: validates the request, parses every
 * definition, decides. Returns `{ eligible, rejected }` (provider ids; eligible best first,
 * rejected in definition order).
 */
export function routePlain(request, definitions) {
  if (!Array.isArray(definitions)) {
    throw new PlainRouterError('INVALID_PROVIDER_DEFINITION', 'routePlain expects an array of provider definitions', 'providers');
  }
  const r = parseRequest(request);
  const registry = prepareRegistry(definitions);
  const rejected = [];
  const { cands, lo } = decide(registry.pools, r, rejected);
  return { eligible: rank(cands, r, undefined, lo), rejected };
}

// ---------------------------------------------------------------------------------------
// The full explanation (explain.rs summary, requirements.rs check in collect mode,
// registry.rs operational, ranking.rs rank with breakdowns and tie-breaks): the same
// documented object, key for key and in the same key order, as the native
// `router.explain` / `routeProviders`.

/** A double as Rust's `{}` prints it: the shortest round-trip digits, never an exponent. */
function rustFloat(x) {
  let s = String(x);
  if (!s.includes('e')) return s;
  const neg = s.startsWith('-');
  if (neg) s = s.slice(1);
  const [mantissa, e] = s.split('e');
  const [ip, fp = ''] = mantissa.split('.');
  const digits = ip + fp;
  const point = ip.length + Number(e);
  let out;
  if (point <= 0) out = `0.${'0'.repeat(-point)}${digits}`;
  else if (point >= digits.length) out = digits + '0'.repeat(point - digits.length);
  else out = `${digits.slice(0, point)}.${digits.slice(point)}`;
  return (neg ? '-' : '') + out;
}

/** `x as i64` (saturating) as text. */
function asI64(x) {
  if (x >= 9223372036854775807) return '9223372036854775807';
  if (x <= -9223372036854775808) return '-9223372036854775808';
  return BigInt(Math.trunc(x)).toString();
}

/** requirements.rs `Num`. */
function num(x) {
  return Number.isInteger(x) && Math.abs(x) < 1e15 ? asI64(x) : rustFloat(x);
}

/** registry.rs `Ms`. */
function ms(x) {
  return Number.isInteger(x) ? asI64(x) : rustFloat(x);
}

const list = (xs) => `[${xs.join(', ')}]`;

/** Every reason pool `p` fails request `r`, in the native order: `[code, detail, phrase]` triples. */
function reasonsOf(p, r) {
  const out = [];
  const add = (code, detail, phrase) => out.push(code, detail, phrase);
  if (r.providerId !== undefined && r.providerId !== p.id) add('PROVIDER_ID_MISMATCH', `request names ${r.providerId}`, `not provider ${r.providerId}`);
  for (const cap of r.requiredCapabilities) if (!p.supported.has(cap)) add('REQUIRED_CAPABILITY_MISSING', cap, `missing capability ${cap}`);
  for (const cap of r.forbiddenCapabilities) if (p.supported.has(cap)) add('FORBIDDEN_CAPABILITY_PRESENT', cap, `forbidden capability ${cap}`);
  if (r.imageIdentity !== undefined && p.imageIdentity !== r.imageIdentity) {
    add('IMAGE_MISMATCH', `${p.imageIdentity ?? 'undeclared'} != ${r.imageIdentity}`, `image not ${r.imageIdentity}`);
  }
  for (const bin of r.requiredBinaries) if (!p.binaries.includes(bin)) add('REQUIRED_BINARY_MISSING', bin, `missing binary ${bin}`);
  if (r.egress.length !== 0 && (p.egress === undefined || !r.egress.includes(p.egress))) {
    add('EGRESS_MISMATCH', `${p.egress ?? 'undeclared'} not in ${list(r.egress)}`, `egress not in ${list(r.egress)}`);
  }
  for (const sem of r.timeoutSemantics) if (!p.timeoutSemantics.includes(sem)) add('TIMEOUT_SEMANTICS_MISSING', sem, `missing timeout semantics ${sem}`);
  if (r.timeoutGranularityMs !== undefined && !(p.timeoutGranularityMs !== undefined && p.timeoutGranularityMs <= r.timeoutGranularityMs)) {
    const detail = p.timeoutGranularityMs === undefined ? 'undeclared' : `${num(p.timeoutGranularityMs)} ms > ${num(r.timeoutGranularityMs)} ms`;
    add('TIMEOUT_GRANULARITY', detail, `timeout granularity coarser than ${num(r.timeoutGranularityMs)} ms`);
  }
  if (r.requiredLifetimeMs !== undefined) {
    if (p.lifetime === LIFETIME_UNKNOWN) add('SANDBOX_LIFETIME', 'unknown', 'sandbox lifetime unknown');
    else if (p.lifetime === LIFETIME_CAPPED && !(p.lifetimeMs >= r.requiredLifetimeMs)) {
      add('SANDBOX_LIFETIME', `${num(p.lifetimeMs)} ms < ${num(r.requiredLifetimeMs)} ms`, `sandbox lifetime under ${num(r.requiredLifetimeMs)} ms`);
    }
  }
  if (r.durabilityRank >= 0 && !(p.durabilityRank >= 0 && p.durabilityRank >= r.durabilityRank)) {
    const min = DURABILITY_LEVELS[r.durabilityRank];
    add('STATE_DURABILITY', `${p.durabilityRank >= 0 ? DURABILITY_LEVELS[p.durabilityRank] : 'undeclared'} < ${min}`, `state durability below ${min}`);
  }
  for (const x of r.restrictions) if (!p.restrictions.includes(x)) add('RESTRICTION_MISSING', x, `missing restriction ${x}`);
  if (r.regionRequired && !p.regions.some((x) => r.regionPreferred.includes(x))) {
    add('REGION_MISMATCH', `${list(p.regions)} not in ${list(r.regionPreferred)}`, `region not in ${list(r.regionPreferred)}`);
  }
  for (const name of ['cpu', 'memoryMb', 'diskMb', 'gpu']) {
    const need = r[name];
    if (need > 0 && need > p[name]) add('RESOURCES_INSUFFICIENT', `${name} ${num(need)} > ${num(p[name])}`, `insufficient ${name}`);
  }
  if (r.isolationRank >= 0 && !(p.isolationRank >= 0 && p.isolationRank >= r.isolationRank)) {
    const min = ISOLATION_LEVELS[r.isolationRank];
    add('ISOLATION_INSUFFICIENT', `${p.isolationRank >= 0 ? ISOLATION_LEVELS[p.isolationRank] : 'undeclared'} < ${min}`, `isolation below ${min}`);
  }
  if (out.length !== 0) return out;
  if (!p.signalsValid) {
    add('INVALID_SIGNALS', p.signalsDetail, 'invalid signals');
  } else if (!p.available) {
    add('UNAVAILABLE', 'signals.available is false', 'unavailable');
  } else if (r.maxReadyLatencyMs !== undefined) {
    const objective = r.coldObjective ? 'cold' : 'ready';
    const latency = r.coldObjective ? p.coldStartLatencyMs : p.readyLatencyMs;
    if (latency > r.maxReadyLatencyMs) {
      add('LATENCY_BUDGET', `${objective} latency ${ms(latency)} ms > ${ms(r.maxReadyLatencyMs)} ms`, `${objective} latency over ${ms(r.maxReadyLatencyMs)} ms`);
    }
  }
  return out;
}

/** explain.rs `summary`: each phrase counted once per pool, most frequent first, ties by phrase. */
function summaryOf(eligible, total, phrasesPerPool) {
  const counts = new Map();
  for (const phrases of phrasesPerPool) {
    const seen = new Set(phrases);
    for (const p of seen) counts.set(p, (counts.get(p) ?? 0) + 1);
  }
  const parts = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const head = `${eligible}/${total} providers eligible`;
  return parts.length === 0 ? head : `${head}: ${parts.map(([p, n]) => `${n} ${p}`).join(', ')}`;
}

/**
 * The full explanation over a prepared registry (the plain equivalent of
 * `router.explain(request)` without readiness, resolver or capacity order).
 */
export function explainPrepared(registry, request) {
  const r = parseRequest(request);
  const pools = registry.pools;
  const rejected = [];
  const phrasesPerPool = [];
  const cands = [];
  const lo = { costLo: Infinity, costHi: -Infinity, latLo: Infinity, latHi: -Infinity, relLo: Infinity, relHi: -Infinity };
  const cold = r.coldObjective;
  for (let i = 0; i < pools.length; i++) {
    const p = pools[i];
    const found = reasonsOf(p, r);
    if (found.length !== 0) {
      const reasons = [];
      const phrases = [];
      for (let j = 0; j < found.length; j += 3) {
        reasons.push({ code: found[j], detail: found[j + 1] });
        phrases.push(found[j + 2]);
      }
      rejected.push({ providerId: p.id, reasons });
      phrasesPerPool.push(phrases);
      continue;
    }
    cands.push(p);
    const lat = cold ? p.coldStartLatencyMs : p.readyLatencyMs;
    if (p.estimatedCost < lo.costLo) lo.costLo = p.estimatedCost;
    if (p.estimatedCost > lo.costHi) lo.costHi = p.estimatedCost;
    if (lat < lo.latLo) lo.latLo = lat;
    if (lat > lo.latHi) lo.latHi = lat;
    if (p.completionWithinBudgetRate < lo.relLo) lo.relLo = p.completionWithinBudgetRate;
    if (p.completionWithinBudgetRate > lo.relHi) lo.relHi = p.completionWithinBudgetRate;
  }
  const balanced = r.strategy === BALANCED;
  const objective = cold ? 'cold' : 'ready';
  const lower = (x, a, b) => (b > a ? clamp01((b - x) / (b - a)) : 1);
  const higher = (x, a, b) => (b > a ? clamp01((x - a) / (b - a)) : 1);
  const entries = cands.map((p) => {
    const lat = cold ? p.coldStartLatencyMs : p.readyLatencyMs;
    const c = lower(p.estimatedCost, lo.costLo, lo.costHi);
    const l = lower(lat, lo.latLo, lo.latHi);
    const rel = higher(p.completionWithinBudgetRate, lo.relLo, lo.relHi);
    const score =
      r.strategy === COST ? c : r.strategy === LATENCY ? l : r.strategy === RELIABILITY ? rel : clamp01(COST_WEIGHT * c + LATENCY_WEIGHT * l + RELIABILITY_WEIGHT * rel);
    const key = r.strategy === COST ? p.estimatedCost : r.strategy === LATENCY ? lat : r.strategy === RELIABILITY ? -p.completionWithinBudgetRate : -score;
    return { p, lat, c, l, rel, score, key, tier: regionTier(p.regions, r.regionPreferred) };
  });
  const primaryEqual = (a, b) => a.tier === b.tier && a.key === b.key;
  entries.sort((a, b) => a.tier - b.tier || (a.key < b.key ? -1 : a.key > b.key ? 1 : a.p.id < b.p.id ? -1 : a.p.id > b.p.id ? 1 : 0));
  const eligible = entries.map((e, k) => ({
    breakdown: {
      cost: { normalized: e.c, raw: e.p.estimatedCost, weight: balanced ? COST_WEIGHT : null },
      latency: { normalized: e.l, objective, raw: e.lat, weight: balanced ? LATENCY_WEIGHT : null },
      reliability: { normalized: e.rel, raw: e.p.completionWithinBudgetRate, weight: balanced ? RELIABILITY_WEIGHT : null },
    },
    providerId: e.p.id,
    providerOrderPosition: null,
    rank: k + 1,
    regionTier: e.tier,
    score: e.score,
    tieBreak: (k > 0 && primaryEqual(entries[k - 1], e)) || (k + 1 < entries.length && primaryEqual(e, entries[k + 1])) ? 'providerId' : null,
  }));
  return {
    summary: summaryOf(eligible.length, pools.length, phrasesPerPool),
    strategy: STRATEGIES[r.strategy],
    latencyObjective: objective,
    maxAcquisitionAttempts: r.maxAttempts,
    acquisitionFallback: r.fallbackAllowed ? 'allowed' : 'forbidden',
    eligible,
    rejected,
  };
}

/** Everything per call, like routeProviders: parses every definition, then the full explanation. */
export function explainPlain(request, definitions) {
  if (!Array.isArray(definitions)) {
    throw new PlainRouterError('INVALID_PROVIDER_DEFINITION', 'explainPlain expects an array of provider definitions', 'providers');
  }
  parseRequest(request);
  return explainPrepared(prepareRegistry(definitions), request);
}
