'use strict';
// Router options: read once (guard.js), validated, turned into the context every part of
// the router works from (`RouterContext`). Nothing here is decided per request.

const os = require('node:os');
const { binding } = require('./binding.js');
const { callNative, refuse } = require('./errors.js');
const { InMemoryMappingStore, SqliteMappingStore, NATIVE_STORE } = require('./mappings.js');
const { guarded, readOr, copyOptions } = require('./guard.js');
const { serialize, NotJson } = require('./serialize.js');
const { telemetryOf } = require('./telemetry.js');
const { firstNative } = require('./registry.js');
const { coordinatorOf } = require('./postgres.js');

/** The methods whose presence the core decides options by (src/core/router/options.rs). */
const METHODS = binding.routerOptionMethods();

/** Whether `value` has every method in `names` (guarded: a throwing getter means no). */
function hasMethods(value, names) {
  if (value === null || typeof value !== 'object') return false;
  return readOr(() => names.every((n) => typeof value[n] === 'function'), false);
}

/** What kind `v` is, as the core reads options: `typeof`, `null`, `array` or `unreadable` (a revoked Proxy). */
function kindOf(v) {
  return v === null ? 'null' : readOr(() => (Array.isArray(v) ? 'array' : typeof v), 'unreadable');
}

/** Which of the methods that matter `v` has (a getter that throws counts as none). */
function methodsOf(v) {
  if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return [];
  return METHODS.filter((m) => readOr(() => typeof v[m] === 'function', false));
}

/** The facts of every option given: its kind and methods (and the coordinator's class). */
function givenOf(options) {
  /** @type {{ key: string, kind: string, methods: string[], postgres?: boolean, sink?: string }[]} */
  const out = Object.keys(options).map((key) => ({ key, kind: kindOf(options[key]), methods: methodsOf(options[key]) }));
  const capacity = options.capacity;
  if (capacity !== null && typeof capacity === 'object' && capacity.coordinator !== undefined) {
    out.find((g) => g.key === 'capacity').postgres = coordinatorOf(capacity.coordinator) !== null;
  }
  const decisions = options.decisions;
  if (decisions !== null && typeof decisions === 'object' && !Array.isArray(decisions)) {
    out.find((g) => g.key === 'decisions').sink = kindOf(decisions.sink);
  }
  return out;
}

/** Options as text for the core (which validates them); a value JSON cannot carry is refused at `field…`. */
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

/** The data options: `capacity` without its coordinator, `decisions` without its sink, the timeouts, `fleet`. */
function dataOf(options) {
  const { capacity, callbackTimeoutMs, operationTimeoutMs, fleet, limits, queue, decisions } = options;
  let c = capacity;
  if (capacity !== null && typeof capacity === 'object' && !Array.isArray(capacity)) ({ coordinator: c, ...c } = capacity);
  let d = decisions;
  if (decisions !== null && typeof decisions === 'object' && !Array.isArray(decisions)) ({ sink: d, ...d } = decisions);
  return textOf({ capacity: c, callbackTimeoutMs, operationTimeoutMs, fleet, limits, queue, decisions: d }, '') ?? 'null';
}

/** A caller's clock (option `field`): a throw or a non-finite reading is the core's typed error. */
function clockOf(clock, field) {
  return () => {
    const t = readOr(clock, NaN);
    return typeof t === 'number' && Number.isFinite(t) ? t : callNative(() => binding.clockReading(NaN, field));
  };
}

/** What native calls get as `now`: the router's clock reading, or undefined (the wall clock, read natively). */
function routerNow(ctx) {
  return ctx.clock === null ? undefined : ctx.clock();
}

/** What native calls get as `now` for health: its clock's reading, or undefined (health off, or the wall clock). */
function healthNow(health) {
  return health === null || health.clock === null ? undefined : health.clock();
}

/** @typedef {ReturnType<typeof contextOf>} RouterContext What every part of a router works from. */

/** This process's routers, held weakly: reconcile asks each whether an id is being made (so it is no orphan). */
const ROUTERS = new Set();
const FORGET = new FinalizationRegistry((ref) => ROUTERS.delete(ref));

/** The native states of this process's routers still alive. */
function* live() {
  for (const ref of ROUTERS) {
    const native = ref.deref();
    if (native !== undefined) yield native;
  }
}

/** Whether a router of this process is making sandbox `id` now. */
function inFlight(id) {
  for (const native of live()) if (binding.routerInFlight(native, id)) return true;
  return false;
}

/** Jobs in flight over every router of this process (the leak tests count them). */
function jobsInFlight() {
  let n = 0;
  for (const native of live()) n += binding.routerJobsInFlight(native);
  return n;
}

/** The sandbox ids the routers of this process other than `self` are making now. */
function othersInFlight(self) {
  const out = [];
  for (const native of live()) if (native !== self) out.push(...binding.routerInFlightIds(native));
  return out;
}

/** Reads router options into a context; the core validates every one (INVALID_CONFIGURATION names the field). */
function contextOf(input) {
  const root = kindOf(input);
  const options = root === 'object' ? readOr(() => copyOptions(input, 3), null) : null;
  if (options === null) callNative(() => binding.routerOptionsRefused(root === 'object' ? 'unreadable' : root));
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
  const coordinator = o.capacity?.coordinated === true ? coordinatorOf(options.capacity.coordinator) : null;
  // Whether the store is the capacity coordinator too: one database keeps both (`combined`).
  const combined = coordinator !== null && coordinatorOf(store) === coordinator;
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
        queue: o.queue ?? undefined,
        decisions: o.decisions ?? undefined,
        combined,
      },
      firstRegistry,
      fastMappings ? store[NATIVE_STORE]() : undefined,
      sqlite,
    ),
  );
  const ref = new WeakRef(native);
  ROUTERS.add(ref);
  FORGET.register(native, ref);
  const healthOn = healthOption !== false;
  const shared = binding.routerBudgetsShared(native);
  const ctx = {
    registry,
    /** the router's native state (src/binding/router.rs RouterState: the core's Router) */
    native,
    /** the registry view the native router decides on (lib/registry.js viewOf) */
    view: firstRegistry,
    mappings: store,
    combined,
    fastMappings,
    observer: observerFn,
    classifier: o.classifier ? options.classifyProviderFailure : null,
    resolver: o.resolver ? options.resolveRoutingSignals : null,
    provisioning: o.provisioning ? options.provisioning : null,
    callbackTimeoutMs: o.callbackTimeoutMs,
    capacity: o.capacity === null || o.capacity === undefined ? null : { ...o.capacity, coordinator },
    capacityTimeoutMs: o.capacityTimeoutMs,
    /** @type {Map<string, object>} handles from launch, by sbx id (process-local; at most HANDLE_LIMIT) */
    handles: new Map(),
    fleet: o.fleet,
    /** health's clock (null: health off; `clock` null: the wall clock) */
    health: healthOn ? { clock: o.healthClock ? clockOf(healthOption.clock, 'health.clock') : clock } : null,
    /** option `clock`, read by budgets, warm pools and health (null: the wall clock, read natively) */
    clock,
    /** the warm pools once `warmUp()` started them (lib/warm.js) */
    warm: null,
    /** @type {Map<number, () => void>} provisions waiting in the queue: their wake, by job key (driver.js `Wait`) */
    waiting: new Map(),
    /** option `budgets` (null without); `shared`: they live in the coordinator's database */
    budgets: shared === null || shared === undefined ? null : { shared },
    telemetry,
    /** option `decisions.sink`: handed each record as its provision ends (lib/decisions.js), or null */
    decisionSink: o.decisions?.sink ? options.decisions.sink : null,
  };
  if (telemetry !== null) telemetry.observeCircuits(ctx, healthNow);
  return ctx;
}

// The shape anchor (docs/performance.md; __test__/shape-anchor.test.mjs): one idle context held
// for the process's life, so V8's optimized provision path survives every router being collected.
const SHAPE_ANCHORS = { context: contextOf({ registry: { list: () => [] } }) };

module.exports = { contextOf, hasMethods, healthNow, routerNow, inFlight, othersInFlight, jobsInFlight, SHAPE_ANCHORS };
