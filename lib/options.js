'use strict';
// Router options: read once (guard.js), validated, turned into the context every part of
// the router works from (`RouterContext`). Nothing here is decided per request.

const os = require('node:os');
const { binding } = require('./binding.js');
const { callNative, refuse } = require('./errors.js');
const { InMemoryMappingStore, SqliteMappingStore, NATIVE_STORE } = require('./mappings.js');
const { guarded, copyOptions } = require('./guard.js');
const { serialize, NotJson } = require('./serialize.js');
const { telemetryOf } = require('./telemetry.js');
const { firstNative } = require('./registry.js');
const { coordinatorOf } = require('./postgres.js');

/** The methods whose presence the core decides options by (src/core/router/options.rs). */
const METHODS = binding.routerOptionMethods();

/** Default fleet name: the value of the fleet label stamped into every launch. */
const { DEFAULT_FLEET } = binding;

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

/**
 * What kind of value `v` is, as the core reads options: `typeof`, or `null` / `array`
 * (`unreadable`: a revoked Proxy, which even Array.isArray cannot read).
 */
function kindOf(v) {
  if (v === null) return 'null';
  try {
    return Array.isArray(v) ? 'array' : typeof v;
  } catch {
    return 'unreadable';
  }
}

/** Which of the methods that matter `v` has (a getter that throws counts as none). */
function methodsOf(v) {
  if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return [];
  return METHODS.filter((m) => {
    try {
      return guarded(() => isFn(v[m]));
    } catch {
      return false;
    }
  });
}

/** The facts of every option given: its kind and methods (and the coordinator's class). */
function givenOf(options) {
  /** @type {{ key: string, kind: string, methods: string[], postgres?: boolean }[]} */
  const out = Object.keys(options).map((key) => ({ key, kind: kindOf(options[key]), methods: methodsOf(options[key]) }));
  const capacity = options.capacity;
  if (capacity !== null && typeof capacity === 'object' && capacity.coordinator !== undefined) {
    out.find((g) => g.key === 'capacity').postgres = coordinatorOf(capacity.coordinator) !== null;
  }
  return out;
}

/**
 * The options JSON can carry, as text for the core (which validates every one): a value it
 * cannot carry is refused at its field, natively (`field`: the option it is under).
 */
function textOf(value, field) {
  const json = serialize(value);
  if (json instanceof NotJson) refuse(() => binding.notJsonError('router', json.segments, json.what, field));
  return json;
}

/** The `health` option as text for the core: `true` / `false`, or the object without its `clock`. */
function healthTextOf(h) {
  if (h === undefined || h === true || h === false) return String(h ?? true);
  if (h === null || typeof h !== 'object' || Array.isArray(h)) return 'null';
  const { clock, ...rest } = h;
  return textOf(rest, 'health') ?? '0';
}

/** The data options: `capacity` without its coordinator, the timeouts, `fleet`. */
function dataOf(options) {
  const { capacity, callbackTimeoutMs, operationTimeoutMs, fleet, limits } = options;
  let c = capacity;
  if (capacity !== null && typeof capacity === 'object' && !Array.isArray(capacity)) ({ coordinator: c, ...c } = capacity);
  return textOf({ capacity: c, callbackTimeoutMs, operationTimeoutMs, fleet, limits }, '') ?? 'null';
}

/**
 * A caller's clock (option `field`), read inside a guard: a throw or a non-finite answer is
 * the typed error the core names it by.
 */
function clockOf(clock, field) {
  return () => {
    let t;
    try {
      t = clock();
    } catch {
      t = NaN;
    }
    return typeof t === 'number' && Number.isFinite(t) ? t : callNative(() => binding.clockReading(NaN, field));
  };
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
 * @typedef {object} RouterContext What every part of a router works from.
 * @property {object} registry the caller's registry (ours or their own)
 * @property {object} mappings the mapping store
 * @property {boolean} fastMappings the exact default store: written synchronously
 * @property {object} native the router's native state (the ExternalObject of
 *   src/binding/router.rs RouterState: the core's Router)
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
 * Reads router options into a context; the core validates every one (the typed
 * INVALID_CONFIGURATION error names the field). Throws.
 * @returns {RouterContext}
 */
function contextOf(input) {
  let options = null;
  let root = kindOf(input);
  if (root === 'object') {
    try {
      options = copyOptions(input, 3);
    } catch {
      root = 'unreadable';
    }
  }
  if (options === null) callNative(() => binding.routerOptionsRefused(root));
  const h = options.health;
  const healthClock = h !== null && typeof h === 'object' && !Array.isArray(h) ? kindOf(h.clock) : undefined;
  const o = callNative(() => binding.readRouterOptions(givenOf(options), healthClock, dataOf(options)));
  const { registry, mappings, observer, health: healthOption } = options;
  const store = mappings ?? new InMemoryMappingStore();
  let fastMappings;
  let sqlite;
  try {
    // Only the exact default class takes the synchronous path: a subclass may override put.
    fastMappings = guarded(() => Object.getPrototypeOf(store) === InMemoryMappingStore.prototype);
    // Budgets without a coordinator keep their charges in the router's SQLite file.
    sqlite = options.budgets !== undefined && guarded(() => store instanceof SqliteMappingStore) ? store[NATIVE_STORE]() : undefined;
  } catch {
    callNative(() => binding.routerOptionsRefused('mappings'));
  }
  const clock = o.clock ? clockOf(options.clock, 'clock') : null;
  const healthJson = healthTextOf(healthOption);
  const budgetsJson = options.budgets === undefined ? undefined : (textOf(options.budgets, 'budgets') ?? callNative(() => binding.routerOptionsRefused('budgets')));
  const telemetry = telemetryOf(options.telemetry, clock);
  const firstRegistry = firstNative(registry);
  const session = require('node:crypto').randomBytes(8).toString('hex');
  const observerFn = !o.observer ? null : o.observerMethod === undefined || o.observerMethod === null ? observer : (e) => observer[o.observerMethod](e);
  const native = callNative(() =>
    binding.createRouter(
      {
        fleet: o.fleet,
        healthJson,
        capacity: o.capacity ?? undefined,
        callbackTimeoutMs: o.callbackTimeoutMs,
        operationTimeoutMs: o.operationTimeoutMs,
        capacityTimeoutMs: o.capacityTimeoutMs,
        intents: o.intents && !fastMappings,
        classifier: o.classifier,
        observe: observerFn !== null || telemetry !== null,
        ownerHost: os.hostname(),
        ownerPid: process.pid,
        session,
        budgetsJson,
        limits: o.limits,
        combined: o.capacity?.coordinated === true && coordinatorOf(store) === coordinatorOf(options.capacity.coordinator),
      },
      firstRegistry,
      fastMappings ? store[NATIVE_STORE]() : undefined,
      sqlite,
    ),
  );
  track(native);
  const healthOn = healthOption !== false;
  const ctx = {
    registry,
    native,
    /** the registry view the native router decides on (lib/registry.js viewOf) */
    view: firstRegistry,
    mappings: store,
    fastMappings,
    observer: observerFn,
    classifier: o.classifier ? options.classifyProviderFailure : null,
    resolver: o.resolver ? options.resolveRoutingSignals : null,
    provisioning: o.provisioning ? options.provisioning : null,
    callbackTimeoutMs: o.callbackTimeoutMs,
    operationTimeoutMs: o.operationTimeoutMs,
    capacity: o.capacity === null || o.capacity === undefined ? null : { ...o.capacity, coordinator: o.capacity.coordinated ? coordinatorOf(options.capacity.coordinator) : null },
    capacityTimeoutMs: o.capacityTimeoutMs,
    handles: new Map(),
    fleet: o.fleet,
    intents: o.intents && !fastMappings,
    session,
    health: healthOn ? { clock: o.healthClock ? clockOf(healthOption.clock, 'health.clock') : clock } : null,
    clock,
    warm: null,
    budgets: budgetsOf(binding.routerBudgetsShared(native)),
    telemetry,
    events: observerFn !== null || telemetry !== null,
  };
  if (telemetry !== null) telemetry.observeCircuits(ctx, healthNow);
  return ctx;
}

/** A router's budgets (null without): whether they live in the shared ledger. */
const budgetsOf = (shared) => (shared === null || shared === undefined ? null : { shared });

// The shape anchor: one idle router context, held for the life of the process, so V8's
// optimized provision path (which embeds the context's shape) survives every router being
// dropped and collected (measured: docs/performance.md). __test__/shape-anchor.test.mjs holds both ways.
const SHAPE_ANCHORS = { context: contextOf({ registry: { list: () => [] } }) };

module.exports = { contextOf, textOf, hasMethods, isFn, healthNow, routerNow, inFlight, othersInFlight, jobsInFlight, DEFAULT_FLEET, SHAPE_ANCHORS };
