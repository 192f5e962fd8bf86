'use strict';
// Router options: read once (guard.js), validated, turned into the context every part of
// the router works from (`RouterContext`). Nothing here is decided per request.

const os = require('node:os');
const { binding } = require('./binding.js');
const { SandboxRouterConfigurationError, callNative } = require('./errors.js');
const { InMemoryMappingStore, SqliteMappingStore, NATIVE_STORE } = require('./mappings.js');
const { guarded, copyOptions, shown } = require('./guard.js');
const { serialize, NotJson } = require('./serialize.js');
const { telemetryOf } = require('./telemetry.js');
const { firstNative } = require('./registry.js');

/** A router's budgets (null without): whether they live in the shared ledger. */
const budgetsOf = (shared) => (shared === null || shared === undefined ? null : { shared });

/** Default bound on caller callbacks (readiness, resolver, classifier, mapping store). */
const DEFAULT_CALLBACK_TIMEOUT_MS = 10_000;
/** Default deadline of one capacity read. */
const DEFAULT_CAPACITY_TIMEOUT_MS = 5_000;
/** Default life of a post-launch capacity assumption that no read has reflected yet. */
const DEFAULT_RESERVATION_TTL_MS = 60_000;
/** Default bound on one runtime call made for an operation by id (or a cleanup). */
const DEFAULT_OPERATION_TIMEOUT_MS = 600_000;

const ROUTER_OPTIONS = [
  'registry',
  'mappings',
  'observer',
  'classifyProviderFailure',
  'resolveRoutingSignals',
  'provisioning',
  'capacity',
  'callbackTimeoutMs',
  'operationTimeoutMs',
  'fleet',
  'health',
  'clock',
  'budgets',
  'telemetry',
];

/** Default fleet name: the value of the fleet label stamped into every launch (src/core/request.rs). */
const { DEFAULT_FLEET } = binding;

function configError(field, expectation) {
  return new SandboxRouterConfigurationError(`invalid router options: ${field} ${expectation}`, 'INVALID_CONFIGURATION', { field });
}

function isFn(x) {
  return typeof x === 'function';
}

/** Whether `value` has every method in `names` (guarded: a throwing getter means no). */
function hasMethods(value, names) {
  if (value === null || typeof value !== 'object') return false;
  try {
    return guarded(() => names.every((n) => isFn(value[n])));
  } catch {
    return false;
  }
}

function observerOf(observer) {
  if (observer === undefined || observer === null) return null;
  if (isFn(observer)) return observer;
  let method = null;
  if (typeof observer === 'object') {
    try {
      method = guarded(() => ['emit', 'onEvent', 'event'].find((m) => isFn(observer[m])) ?? null);
    } catch {
      method = null;
    }
  }
  if (method === null) throw configError('observer', 'must be a function or an object with emit(event)');
  return (e) => observer[method](e);
}

function intOption(value, def, field, max) {
  const v = value === undefined ? def : value;
  if (!Number.isInteger(v) || v < 1 || v > max) throw configError(field, `must be an integer from 1 to ${max}`);
  return v;
}

function capacityPolicyOf(policy) {
  if (policy === undefined) return null;
  if (policy === null || typeof policy !== 'object') throw configError('capacity', 'must be an object');
  const { providerOrder, timeoutMs, reservationTtlMs, coordinator } = policy;
  if (!Array.isArray(providerOrder) || providerOrder.length === 0) {
    throw configError('capacity.providerOrder', 'must be a non-empty array of provider ids');
  }
  const seen = new Set();
  providerOrder.forEach((id, i) => {
    if (typeof id !== 'string' || !binding.isProviderId(id)) throw configError(`capacity.providerOrder[${i}]`, 'must be a valid provider id');
    if (seen.has(id)) throw configError(`capacity.providerOrder[${i}]`, 'must be a distinct provider id');
    seen.add(id);
  });
  let shared = null;
  if (coordinator !== undefined) {
    shared = require('./postgres.js').coordinatorOf(coordinator);
    if (shared === null) throw configError('capacity.coordinator', 'must be a PostgresMappingStore');
  }
  const reservationTtl = intOption(reservationTtlMs, DEFAULT_RESERVATION_TTL_MS, 'capacity.reservationTtlMs', 86_400_000);
  return {
    providerOrder: [...providerOrder],
    timeoutMs: intOption(timeoutMs, DEFAULT_CAPACITY_TIMEOUT_MS, 'capacity.timeoutMs', 600_000),
    reservationTtlMs: reservationTtl,
    coordinator: shared,
  };
}

/**
 * The `health` option, read for the native side: its JSON text (the caller's `clock`
 * taken out), validated natively against the ranges and defaults of src/core/health.rs
 * (the only copy), and the clock health reads: its own `clock`, else the router's
 * (`routerClock`, null for the wall clock). `enabled`: tracking is on.
 * @returns {{ json: string, clock: (() => number) | null, enabled: boolean }}
 */
function healthOf(option, routerClock) {
  if (option === undefined || option === true || option === false) return { json: String(option ?? true), clock: routerClock, enabled: option !== false };
  if (option === null || typeof option !== 'object' || Array.isArray(option)) return { json: 'null', clock: routerClock, enabled: true };
  const { clock, ...rest } = option;
  if (clock !== undefined && !isFn(clock)) throw configError('health.clock', 'must be a function returning milliseconds since the epoch');
  const json = serialize(rest);
  if (json instanceof NotJson) throw configError(json.field('health'), json.expectation);
  return { json: json ?? '0', clock: clock === undefined ? routerClock : clockOf(clock, 'health.clock'), enabled: true };
}

/**
 * The `budgets` option as JSON text for the native side, which validates every rule
 * (src/core/budget.rs `rules_of_option`, the only copy of the rules); undefined without it.
 */
function budgetsJsonOf(budgets) {
  if (budgets === undefined) return undefined;
  const json = budgets === null ? 'null' : serialize(budgets);
  if (json instanceof NotJson) throw configError(json.field('budgets'), json.expectation);
  if (json === null) throw configError('budgets', 'could not be read (a property access threw)');
  return json;
}

/**
 * The router's `clock` option: the caller's clock, read inside a guard, or null for the
 * wall clock (read natively: no call into JavaScript).
 */
function routerClockOf(clock) {
  if (clock === undefined) return null;
  if (!isFn(clock)) throw configError('clock', 'must be a function returning milliseconds since the epoch');
  return clockOf(clock, 'clock');
}

/**
 * What native calls get as `now` for the router's clock: its reading, or undefined (the
 * wall clock, which the native side reads itself).
 * @param {{ clock: (() => number) | null }} ctx
 */
function routerNow(ctx) {
  return ctx.clock === null ? undefined : ctx.clock();
}

/**
 * What native calls get as `now`: the injected clock's reading, or undefined (health off,
 * or the default clock, which the native side reads itself).
 * @param {{ clock: (() => number) | null } | null} health
 */
function healthNow(health) {
  return health === null || health.clock === null ? undefined : health.clock();
}

/**
 * The caller's clock (option `field`), read inside a guard: a throw or a non-finite answer
 * is a typed error naming the option.
 */
function clockOf(clock, field) {
  return () => {
    let t;
    try {
      t = clock();
    } catch {
      t = NaN;
    }
    if (typeof t !== 'number' || !Number.isFinite(t)) {
      throw new SandboxRouterConfigurationError(`invalid router options: ${field} must return a finite number of milliseconds`, 'INVALID_CONFIGURATION', {
        field,
      });
    }
    return t;
  };
}

/**
 * @typedef {object} RouterContext What every part of a router works from.
 * @property {object} registry the caller's registry (ours or their own)
 * @property {object} mappings the mapping store
 * @property {boolean} fastMappings the exact default store: written synchronously
 * @property {object} native the router's native state (src/binding/router.rs NativeRouter):
 *   fleet, health, capacity ledger, and the default store when `fastMappings`
 * @property {number} handle its handle, for the provision path's native calls
 * @property {((e: object) => unknown) | null} observer
 * @property {Function | null} classifier
 * @property {Function | null} resolver
 * @property {{ hasAvailableCredentials(id: string): unknown } | null} provisioning
 * @property {number} callbackTimeoutMs
 * @property {number} operationTimeoutMs
 * @property {{ providerOrder: string[], timeoutMs: number, reservationTtlMs: number, coordinator: any } | null} capacity
 * @property {number} capacityTimeoutMs
 * @property {Map<string, object>} handles handles from launch, by sbx id (process-local; at most
 *   the router's HANDLE_LIMIT, src/core/router/operation.rs; oldest dropped first)
 * @property {string} fleet the fleet name stamped into every launch
 * @property {boolean} intents whether the store takes intent records (`intent` and `intents`)
 * @property {string} session this router's random session id (in intent records)
 * @property {{ clock: (() => number) | null } | null} health live pool health's clock (null:
 *   `health: false`; `clock` null: the wall clock, which the native side reads itself)
 * @property {(() => number) | null} clock the router's clock (option `clock`; null: the wall
 *   clock, read natively): what budgets, warm pools and health (without `health.clock`) read
 * @property {object | null} warm the router's warm pools once `warmUp()` started them
 *   (lib/warm.js); null before, so a router without them pays nothing
 * @property {{ shared: boolean } | null} budgets the router has budget rules (option
 *   `budgets`); `shared`: they live in the coordinator's database
 * @property {import('./telemetry.js').Telemetry | null} telemetry OpenTelemetry metrics and
 *   traces (option `telemetry`; null: off, and nothing of it runs)
 * @property {boolean} events whether the machines record events (an observer or telemetry reads them)
 */

/**
 * The routers of this process, held weakly: whether a sandbox id is being made is asked of
 * every one (ids are 128 random bits, so another router's provision never answers for
 * this one's), as `reconcile` must not call another router's launch in flight an orphan.
 */
const ROUTERS = new Set();
const FORGET = new FinalizationRegistry((ref) => ROUTERS.delete(ref));

function track(native) {
  const ref = new WeakRef(native);
  ROUTERS.add(ref);
  FORGET.register(native, ref);
}

/** Whether a router of this process is making sandbox `id` now. */
function inFlight(id) {
  for (const ref of ROUTERS) {
    const native = ref.deref();
    if (native !== undefined && binding.routerInFlight(native, id)) return true;
  }
  return false;
}

/** Jobs in flight over every router of this process (the leak tests count them). */
function jobsInFlight() {
  let n = 0;
  for (const ref of ROUTERS) {
    const native = ref.deref();
    if (native !== undefined) n += binding.routerJobsInFlight(native);
  }
  return n;
}

/** The sandbox ids the routers of this process other than `self` are making now. */
function othersInFlight(self) {
  const out = [];
  for (const ref of ROUTERS) {
    const native = ref.deref();
    if (native !== undefined && native !== self) out.push(...binding.routerInFlightIds(native));
  }
  return out;
}

/**
 * Reads and validates router options into a context. Throws INVALID_CONFIGURATION.
 * @returns {RouterContext}
 */
function contextOf(input) {
  if (input === null || typeof input !== 'object') throw configError('options', 'must be an object');
  let options;
  try {
    options = copyOptions(input, 3);
  } catch {
    throw configError('options', 'could not be read (a property access threw)');
  }
  for (const key of Object.keys(options)) {
    if (!ROUTER_OPTIONS.includes(key)) throw configError(shown(key), 'is not a known option');
  }
  const { registry, mappings, observer, classifyProviderFailure, resolveRoutingSignals, provisioning } = options;
  if (!hasMethods(registry, ['list'])) throw configError('registry', 'must be a ProviderRegistry (an object with list())');
  if (mappings !== undefined && !hasMethods(mappings, ['put', 'get', 'delete'])) {
    throw configError('mappings', 'must be a mapping store (put, get and delete methods)');
  }
  if (classifyProviderFailure !== undefined && !isFn(classifyProviderFailure)) throw configError('classifyProviderFailure', 'must be a function');
  if (resolveRoutingSignals !== undefined && !isFn(resolveRoutingSignals)) throw configError('resolveRoutingSignals', 'must be a function');
  if (provisioning !== undefined && !hasMethods(provisioning, ['hasAvailableCredentials'])) {
    throw configError('provisioning', 'must have hasAvailableCredentials(providerId)');
  }
  const store = mappings ?? new InMemoryMappingStore();
  let fastMappings;
  try {
    // Only the exact default class takes the synchronous path: a subclass may override put.
    fastMappings = guarded(() => Object.getPrototypeOf(store) === InMemoryMappingStore.prototype);
  } catch {
    throw configError('mappings', 'could not be read');
  }
  const capacity = capacityPolicyOf(options.capacity);
  const observerFn = observerOf(observer);
  const callbackTimeoutMs = intOption(options.callbackTimeoutMs, DEFAULT_CALLBACK_TIMEOUT_MS, 'callbackTimeoutMs', 3_600_000);
  const fleet = options.fleet === undefined ? DEFAULT_FLEET : options.fleet;
  if (typeof fleet !== 'string') throw configError('fleet', 'must be 1-63 characters of [a-z0-9][a-z0-9._-]* (a label-safe name)');
  const clock = routerClockOf(options.clock);
  const health = healthOf(options.health, clock);
  const budgetsJson = budgetsJsonOf(options.budgets);
  let sqlite;
  try {
    // Budgets without a coordinator keep their charges in the router's SQLite file.
    sqlite = budgetsJson !== undefined && guarded(() => store instanceof SqliteMappingStore) ? store[NATIVE_STORE]() : undefined;
  } catch {
    sqlite = undefined;
  }
  const telemetry = telemetryOf(options.telemetry, clock);
  const firstRegistry = firstNative(registry);
  const session = require('node:crypto').randomBytes(8).toString('hex');
  const operationTimeoutMs = intOption(options.operationTimeoutMs, DEFAULT_OPERATION_TIMEOUT_MS, 'operationTimeoutMs', 86_400_000);
  const intents = !fastMappings && hasMethods(store, ['intent', 'intents']);
  const native = callNative(
    () =>
      binding.createRouter(
        {
          fleet,
          healthJson: health.json,
          capacity:
            capacity === null
              ? undefined
              : { providerOrder: capacity.providerOrder, reservationTtlMs: capacity.reservationTtlMs, coordinated: capacity.coordinator !== null },
          callbackTimeoutMs,
          operationTimeoutMs,
          capacityTimeoutMs: capacity?.timeoutMs ?? DEFAULT_CAPACITY_TIMEOUT_MS,
          intents,
          classifier: classifyProviderFailure !== undefined,
          observe: observerFn !== null || telemetry !== null,
          ownerHost: os.hostname(),
          ownerPid: process.pid,
          session,
          budgetsJson,
        },
        firstRegistry,
        fastMappings ? store[NATIVE_STORE]() : undefined,
        sqlite,
      ),
  );
  track(native);
  const ctx = {
    registry,
    native,
    /** the registry view the native router decides on (lib/registry.js viewOf) */
    view: firstRegistry,
    mappings: store,
    fastMappings,
    observer: observerFn,
    classifier: classifyProviderFailure ?? null,
    resolver: resolveRoutingSignals ?? null,
    provisioning: provisioning ?? null,
    callbackTimeoutMs,
    operationTimeoutMs,
    capacity,
    capacityTimeoutMs: capacity?.timeoutMs ?? DEFAULT_CAPACITY_TIMEOUT_MS,
    handles: new Map(),
    fleet,
    intents,
    session,
    health: health.enabled ? { clock: health.clock } : null,
    clock,
    warm: null,
    budgets: budgetsOf(binding.routerBudgetsShared(native)),
    telemetry,
    events: observerFn !== null || telemetry !== null,
  };
  if (telemetry !== null) telemetry.observeCircuits(ctx, healthNow);
  return ctx;
}

// The shape anchor (docs/performance.md): one idle router context, held by this module's
// exports for the life of the process. V8's optimized provision path embeds the shape of
// the router context it ran with; when the last context of that shape is collected (every
// router dropped, then a full GC), the code is thrown away and the next burst starts over
// in the interpreter. A process that keeps its router never pays that; one that makes a
// router per burst (as the bench's 10,000-concurrent section does) paid it every burst:
// 0.54-0.64x the plain floor's throughput without the anchor, 0.63-0.69x with it (three
// runs each of npm run bench -- --only=provision). __test__/shape-anchor.test.mjs holds
// both ways.
const SHAPE_ANCHORS = { context: contextOf({ registry: { list: () => [] } }) };

module.exports = { contextOf, hasMethods, isFn, healthNow, routerNow, inFlight, othersInFlight, jobsInFlight, DEFAULT_FLEET, SHAPE_ANCHORS };
