'use strict';
// The SandboxRouter: JS drives the I/O, the native core decides.
//
// Why is the provision loop in JS? Every adapter call returns a JS promise. Awaiting it
// from Rust costs a ThreadsafeFunction round trip (~150 µs measured here) per hop; awaiting
// it here costs a microtask. So the core is a synchronous state machine: one native call
// validates, routes and allocates the `sbx_…` id; JS launches; a failure goes back to the
// core, which sanitizes the classification and says advance, stop or give up. On the
// success path a provision makes two native calls (plan, mapping write).

const { binding } = require('./binding.js');
const {
  SandboxRequestValidationError,
  SandboxRouterConfigurationError,
  ProviderRuntimeError,
  ProviderProvisioningError,
  ProvisioningAvailabilityError,
  MappingPersistenceError,
  SandboxNotFoundError,
  AcquisitionTimeoutError,
  ProviderRegistryError,
  ProviderCapacityExhaustedError,
  ProviderPackageMissingError,
  fromNative,
  callNative,
  isRouterError,
} = require('./errors.js');
const { nativeView, entryOf } = require('./registry.js');
const { guarded, copyOptions, thenable, shown } = require('./guard.js');
const { InMemoryMappingStore, SYNC, RECORD } = require('./mappings.js');
const { serialize } = require('./serialize.js');
const { compile } = require('./compile.js');
const { Deadlines } = require('./deadlines.js');
const { explainView, decisionForEvents } = require('./explain.js');
const { nextSandboxId } = require('./ids.js');

/** Label key under which the router stamps its `sbx_…` id into every launch. */
const SANDBOX_ID_LABEL = 'agent-relay-sbx-id';
/** Default bound on caller callbacks (readiness, resolver, classifier, mapping store). */
const DEFAULT_CALLBACK_TIMEOUT_MS = 10_000;
/** Default deadline of one capacity read. */
const DEFAULT_CAPACITY_TIMEOUT_MS = 5_000;
/** Default life of a post-launch capacity assumption that no read has reflected yet. */
const DEFAULT_RESERVATION_TTL_MS = 60_000;

// Debug switch, read once: SANDBOX_ROUTER_DEBUG=1 (or DEBUG containing sandbox-router)
// logs each routing decision (ids and codes only) to stderr.
const DEBUG =
  process.env.SANDBOX_ROUTER_DEBUG === '1' || /(^|,)\s*sandbox-router\s*(,|$)/.test(process.env.DEBUG || '');
function debug(line) {
  if (DEBUG) process.stderr.write(`[sandbox-router] ${line}\n`);
}

const noop = () => {};
// One timer for every launch deadline (see deadlines.js); the router installs its expiry
// handler in a static block (it needs the router's private methods). An entry carries
// what the timeout needs, so no closure is made per launch.
let expireLaunch = null;
const DEADLINES = new Deadlines((entry) => expireLaunch(entry));

/**
 * One provision in flight: the settle functions of the promise `provision()` returned, and
 * the deadline entry (see deadlines.js) of its current launch, with what #expire reports.
 * One object per provision, reused by each of its launches.
 */
class InFlight {
  constructor(router) {
    this.resolve = noop;
    this.reject = noop;
    // Deadline entry fields (deadlines.js).
    this.at = 0;
    this.settled = true;
    this.prev = null;
    this.next = null;
    // The current launch.
    this.router = router;
    this.sandboxId = '';
    this.providerId = '';
    this.timeoutMs = 0;
    this.token = null;
    /** failures so far (null: none) */
    this.attempts = null;
    this.attempt = 0;
  }
}

const TIMED_OUT = Symbol('timed-out');
const UNRESOLVED_TIMEOUT = JSON.stringify({ $unresolved: 'resolver timed out' });
const UNRESOLVED_THREW = JSON.stringify({ $unresolved: 'resolver threw' });
const UNRESOLVED_UNREADABLE = JSON.stringify({ $unresolved: 'resolver answered an unreadable value' });
/** setTimeout's longest delay; a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Default bound on one runtime call made for an operation by id (or a cleanup). */
const DEFAULT_OPERATION_TIMEOUT_MS = 600_000;
/** Extra time a runScript gets over its own `timeoutMs` before the router gives up on it. */
const RUN_SCRIPT_GRACE_MS = 60_000;

/** Awaits `value` for at most `ms`; resolves to TIMED_OUT after that. Never rejects on timeout. */
function within(value, ms) {
  let isThenable;
  try {
    isThenable = thenable(value);
  } catch {
    return Promise.reject(new Error('unreadable answer'));
  }
  if (!isThenable) return Promise.resolve(value);
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(resolve, Math.min(ms, MAX_TIMER_MS), TIMED_OUT);
  });
  return Promise.race([value, timeout]).finally(() => clearTimeout(timer));
}

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
];

function configError(field, expectation) {
  return new SandboxRouterConfigurationError(`invalid router options: ${field} ${expectation}`, 'INVALID_CONFIGURATION', { field });
}

function isFn(x) {
  return typeof x === 'function';
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

/** Whether `value` has every method in `names` (guarded: a throwing getter means no). */
function hasMethods(value, names) {
  if (value === null || typeof value !== 'object') return false;
  try {
    return guarded(() => names.every((n) => isFn(value[n])));
  } catch {
    return false;
  }
}

/** `options.detached === true`, read once inside a guard (null and undefined mean false). */
function detachedOf(options) {
  if (options === undefined || options === null) return false;
  try {
    return guarded(() => options.detached === true);
  } catch {
    throw new SandboxRequestValidationError('invalid options: could not be read', 'INVALID_REQUEST', { field: 'options' });
  }
}

function capacityPolicyOf(policy) {
  if (policy === undefined) return null;
  if (policy === null || typeof policy !== 'object') throw configError('capacity', 'must be an object');
  const { providerOrder, timeoutMs = DEFAULT_CAPACITY_TIMEOUT_MS, reservationTtlMs = DEFAULT_RESERVATION_TTL_MS } = policy;
  if (!Array.isArray(providerOrder) || providerOrder.length === 0) {
    throw configError('capacity.providerOrder', 'must be a non-empty array of provider ids');
  }
  const seen = new Set();
  providerOrder.forEach((id, i) => {
    if (typeof id !== 'string' || id.length > 64) throw configError(`capacity.providerOrder[${i}]`, 'must be a valid provider id');
    try {
      callNative(() => binding.checkProviderId(id));
    } catch {
      throw configError(`capacity.providerOrder[${i}]`, 'must be a valid provider id');
    }
    if (seen.has(id)) throw configError(`capacity.providerOrder[${i}]`, 'must be a distinct provider id');
    seen.add(id);
  });
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 600_000) {
    throw configError('capacity.timeoutMs', 'must be an integer from 1 to 600000');
  }
  if (!Number.isInteger(reservationTtlMs) || reservationTtlMs < 1 || reservationTtlMs > 86_400_000) {
    throw configError('capacity.reservationTtlMs', 'must be an integer from 1 to 86400000');
  }
  return { providerOrder: [...providerOrder], timeoutMs, ledger: new binding.NativeLedger(reservationTtlMs) };
}

/** The launch options of a compiled request (our own parsed copy; the request is never handed on). */
function launchOptionsOf(parts, labels) {
  const out = { labels };
  if (parts.name !== undefined) out.name = parts.name;
  if (parts.env !== undefined) out.env = { ...parts.env };
  if (parts.createTimeoutSeconds !== undefined) out.createTimeoutSeconds = parts.createTimeoutSeconds;
  return out;
}

/**
 * A fresh copy of launch options for one launch: a runtime that changes what it is given
 * cannot change the next pool's launch (nor drop its id label) or the result.
 */
function launchCopy(options) {
  const out = { ...options, labels: { ...options.labels } };
  if (options.env !== undefined) out.env = { ...options.env };
  return out;
}

/** `sbx_id|i,j,k` → { id, order } (a hand-rolled parse: this runs once per provision). */
function parsePlan(text) {
  const bar = text.indexOf('|');
  const order = [];
  let n = -1;
  for (let i = bar + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 44) {
      order.push(n);
      n = -1;
    } else {
      n = n < 0 ? c - 48 : n * 10 + (c - 48);
    }
  }
  if (n >= 0) order.push(n);
  return { id: text.slice(0, bar), order };
}

/** Our own package error (missing or failing optional package): safe to surface as is. */
function isPackageError(error) {
  return isRouterError(error) && error instanceof ProviderPackageMissingError;
}

/**
 * A mapping store's answer, read once inside a guard into a record of our own; null when
 * the store has no record. Throws (UNREADABLE, or a plain Error) when the answer cannot be
 * read or is not a mapping: the caller reports MAPPING_READ_FAILED.
 */
function readRecord(raw) {
  if (raw === null || raw === undefined) return null;
  if (raw === TIMED_OUT || typeof raw !== 'object') throw new Error('not a mapping');
  const record = guarded(() => {
    const labels = raw.labels;
    const copy = {};
    if (labels !== undefined && labels !== null) {
      if (typeof labels !== 'object') throw new Error('labels');
      for (const key of Object.keys(labels)) {
        const v = labels[key];
        if (typeof v !== 'string') throw new Error('label');
        copy[key] = v;
      }
    }
    return {
      id: raw.id,
      providerId: raw.providerId,
      providerSandboxId: raw.providerSandboxId,
      labels: copy,
      createdAt: raw.createdAt,
      detached: raw.detached,
    };
  });
  if (typeof record.providerId !== 'string' || typeof record.providerSandboxId !== 'string' || record.providerSandboxId === '') {
    throw new Error('not a mapping');
  }
  if (typeof record.id !== 'string') delete record.id;
  if (typeof record.createdAt !== 'string') delete record.createdAt;
  record.detached = record.detached === true;
  return record;
}

/** runScript options, read once inside a guard into the port's fields. Throws a typed error. */
function readScriptOptions(options) {
  const invalid = (field, what) => new SandboxRequestValidationError(`invalid runScript options: ${field} ${what}`, 'INVALID_REQUEST', { field });
  if (options === null || typeof options !== 'object') throw invalid('command', 'must be a string');
  let o;
  try {
    o = guarded(() => ({ command: options.command, sessionId: options.sessionId, timeoutMs: options.timeoutMs, env: copyOptions(options.env, 1) }));
  } catch {
    throw invalid('options', 'could not be read (a property access threw)');
  }
  if (typeof o.command !== 'string') throw invalid('command', 'must be a string');
  if (o.sessionId !== undefined && typeof o.sessionId !== 'string') throw invalid('sessionId', 'must be a string');
  if (o.timeoutMs !== undefined && (typeof o.timeoutMs !== 'number' || !(o.timeoutMs > 0))) throw invalid('timeoutMs', 'must be a number > 0');
  if (o.env !== undefined) {
    if (o.env === null || typeof o.env !== 'object') throw invalid('env', 'must be an object of strings');
    for (const k of Object.keys(o.env)) if (typeof o.env[k] !== 'string') throw invalid(`env.${shown(k)}`, 'must be a string');
  }
  const out = { command: o.command };
  if (o.sessionId !== undefined) out.sessionId = o.sessionId;
  if (o.timeoutMs !== undefined) out.timeoutMs = o.timeoutMs;
  if (o.env !== undefined) out.env = o.env;
  return out;
}

/** A bundle's files, read once inside a guard: `[{ source, destination }]`. Throws a typed error. */
function readBundle(bundle) {
  const invalid = (field, what) => new SandboxRequestValidationError(`invalid bundle: ${field} ${what}`, 'INVALID_REQUEST', { field });
  if (bundle === null || typeof bundle !== 'object') throw invalid('files', 'must be an array');
  let files;
  try {
    files = guarded(() => {
      const list = bundle.files;
      if (!Array.isArray(list)) return null;
      return Array.from(list, (f) => (f !== null && typeof f === 'object' ? { source: f.source, destination: f.destination } : null));
    });
  } catch {
    throw invalid('files', 'could not be read (a property access threw)');
  }
  if (files === null) throw invalid('files', 'must be an array');
  files.forEach((f, i) => {
    if (f === null) throw invalid(`files[${i}]`, 'must be an object');
    if (typeof f.destination !== 'string') throw invalid(`files[${i}].destination`, 'must be a string');
    if (typeof f.source !== 'string' && !ArrayBuffer.isView(f.source)) throw invalid(`files[${i}].source`, 'must be a string or a Buffer');
  });
  return files;
}

function isNotFound(error) {
  if (!error || typeof error !== 'object') return false;
  try {
    const status = error.status ?? error.statusCode ?? error.response?.status;
    return status === 404 || error.code === 'NOT_FOUND' || error.code === 'ENOENT';
  } catch {
    // A provider error whose getters throw proves nothing.
    return false;
  }
}

/** The provider sandbox id of a launch's handle, or null when the handle is malformed. */
function handleId(handle) {
  if (handle === null || typeof handle !== 'object') return null;
  let id;
  try {
    id = handle.id;
  } catch {
    // A throwing getter is a malformed handle; its error text is the provider's.
    return null;
  }
  return typeof id === 'string' && id !== '' ? id : null;
}

class SandboxRouter {
  #registry;
  #mappings;
  #fastMappings;
  #observer;
  #classifier;
  #resolver;
  #provisioning;
  #callbackTimeoutMs;
  #operationTimeoutMs;
  #capacity;
  #capacityTimeoutMs;
  /** @type {Map<number, object>} memoized attempt orders (see #cachedOrder) */
  #orders = new Map();
  /** @type {Map<string, object>} handles from launch, by sbx id (process-local cache) */
  #handles = new Map();

  /**
   * @param {import('../index').SandboxRouterOptions} options
   */
  constructor(input) {
    if (input === null || typeof input !== 'object') throw configError('options', 'must be an object');
    // Read once, inside a guard (guard.js): from here on only the copy is consulted.
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
    if (!hasMethods(registry, ['list'])) {
      throw configError('registry', 'must be a ProviderRegistry (an object with list())');
    }
    if (mappings !== undefined && !hasMethods(mappings, ['put', 'get', 'delete'])) {
      throw configError('mappings', 'must be a mapping store (put, get and delete methods)');
    }
    if (classifyProviderFailure !== undefined && !isFn(classifyProviderFailure)) {
      throw configError('classifyProviderFailure', 'must be a function');
    }
    if (resolveRoutingSignals !== undefined && !isFn(resolveRoutingSignals)) {
      throw configError('resolveRoutingSignals', 'must be a function');
    }
    if (provisioning !== undefined && !hasMethods(provisioning, ['hasAvailableCredentials'])) {
      throw configError('provisioning', 'must have hasAvailableCredentials(providerId)');
    }
    const cb = options.callbackTimeoutMs === undefined ? DEFAULT_CALLBACK_TIMEOUT_MS : options.callbackTimeoutMs;
    if (!Number.isInteger(cb) || cb < 1 || cb > 3_600_000) {
      throw configError('callbackTimeoutMs', 'must be an integer from 1 to 3600000');
    }
    this.#registry = registry;
    this.#mappings = mappings ?? new InMemoryMappingStore();
    // Only the exact default class takes the synchronous path: a subclass may override put.
    try {
      this.#fastMappings = guarded(() => Object.getPrototypeOf(this.#mappings) === InMemoryMappingStore.prototype);
    } catch {
      throw configError('mappings', 'could not be read');
    }
    this.#observer = observerOf(observer);
    this.#classifier = classifyProviderFailure ?? null;
    this.#resolver = resolveRoutingSignals ?? null;
    this.#provisioning = provisioning ?? null;
    this.#callbackTimeoutMs = cb;
    const op = options.operationTimeoutMs === undefined ? DEFAULT_OPERATION_TIMEOUT_MS : options.operationTimeoutMs;
    if (!Number.isInteger(op) || op < 1 || op > 86_400_000) {
      throw configError('operationTimeoutMs', 'must be an integer from 1 to 86400000');
    }
    this.#operationTimeoutMs = op;
    this.#capacity = capacityPolicyOf(options.capacity);
    this.#capacityTimeoutMs = this.#capacity?.timeoutMs ?? DEFAULT_CAPACITY_TIMEOUT_MS;
  }

  /** Acquires a sandbox on the best eligible pool. */
  provision(request) {
    return this.#start(request, false);
  }

  /** Like `provision`, through the runtime's `launchDetached` (pools without it are ineligible). */
  provisionDetached(request) {
    return this.#start(request, true);
  }

  // A provision's promise is settled by whichever comes first: the body (which awaits the
  // adapter's own promise, with no wrapper in between) or the launch deadline. That keeps
  // the no-hang guarantee at the cost of one promise per provision, not one per launch.
  #start(request, detached) {
    const run = new InFlight(this);
    const promise = new Promise((resolve, reject) => {
      run.resolve = resolve;
      run.reject = reject;
    });
    this.#provision(request, detached, run);
    return promise;
  }

  static {
    expireLaunch = (entry) => entry.router.#expire(entry);
  }

  // The deadline of the launch `entry` passed first: the provision ends with an
  // outcome-unknown error and no fallback. The capacity hold stays (the sandbox may exist);
  // the body, when the launch finally settles, destroys a late success (#lateSuccess).
  #expire(entry) {
    const { providerId, sandboxId, timeoutMs } = entry;
    const attempts = entry.attempts ?? [];
    try {
      if (entry.token !== null) this.#capacity.ledger.settle(entry.token, true);
    } catch {
      // The hold cannot be updated; the reservation's TTL still ends it. The provision
      // must end regardless (this runs in a timer callback: a throw would be uncaught).
    }
    attempts.push({ providerId, code: 'ACQUISITION_TIMEOUT', retryable: false });
    this.#emit('attempt.failed', { sandboxId, providerId, attempt: entry.attempt, code: 'ACQUISITION_TIMEOUT', retryable: false });
    this.#emit('provision.exhausted', { sandboxId, code: 'ACQUISITION_TIMEOUT' });
    const error = new AcquisitionTimeoutError(
      `launch on ${providerId} did not settle within ${timeoutMs} ms; outcome unknown (label ${SANDBOX_ID_LABEL}=${sandboxId})`,
      'ACQUISITION_TIMEOUT',
      { providerId, sandboxId, timeoutMs },
    );
    error.attempts = attempts;
    entry.reject(error);
  }

  /**
   * The attempt order `provision` would use with the registered signals, synchronously:
   * at most `maxAcquisitionAttempts` provider ids, best first. Credential readiness and a
   * signal resolver are async and are not consulted; `explain` consults them.
   */
  route(request, options) {
    const detached = detachedOf(options);
    const compiled = compile(request);
    const view = nativeView(this.#registry);
    let text;
    try {
      text =
        this.#capacity === null
          ? binding.registryPlan(view.key, compiled.key, detached, false)
          : view.native.plan(compiled.native, detached, { providerOrder: this.#capacity.providerOrder }, false);
    } catch (error) {
      throw fromNative(error);
    }
    // `|i,j,k` (no id was allocated): map indices straight to ids.
    const defs = view.definitions;
    const ids = [];
    let n = -1;
    for (let i = 1; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 44) {
        ids.push(defs[n].id);
        n = -1;
      } else {
        n = n < 0 ? c - 48 : n * 10 + (c - 48);
      }
    }
    if (n >= 0) ids.push(defs[n].id);
    return ids;
  }

  /**
   * Explains the decision for `request` without launching anything: every pool's rank and
   * score breakdown, or its rejection reasons, and a one-line summary. Runs credential
   * readiness and the signal resolver as `provision` would.
   */
  async explain(request, options) {
    const detached = detachedOf(options);
    const compiled = compile(request);
    const view = nativeView(this.#registry);
    const extras = this.#needsExtras ? await this.#extras(view, compiled, detached, request) : null;
    return explainView(view, compiled, detached, extras);
  }

  #emit(type, fields) {
    const sink = this.#observer;
    if (sink === null) return;
    const event = { type, at: new Date().toISOString(), ...fields };
    try {
      const r = sink(event);
      if (r && isFn(r.then)) r.then(undefined, noop);
    } catch {
      // An observer never affects routing.
    }
  }

  get #needsExtras() {
    return this.#provisioning !== null || this.#resolver !== null || this.#capacity !== null;
  }

  /** #extras for a provision: a readiness failure is reported as the provision's end. */
  async #extrasFor(view, compiled, detached, request, id) {
    try {
      return await this.#extras(view, compiled, detached, request);
    } catch (error) {
      if (isRouterError(error) && error instanceof ProvisioningAvailabilityError) {
        error.sandboxId = id;
        this.#emit('provision.exhausted', { sandboxId: id, code: error.code });
      }
      throw error;
    }
  }

  async #extras(view, compiled, detached, request) {
    if (!this.#needsExtras) return null;
    const extras = {};
    if (this.#capacity !== null) extras.providerOrder = this.#capacity.providerOrder;
    if (this.#provisioning !== null) extras.credentialsUnavailable = await this.#readiness(view);
    if (this.#resolver !== null) extras.signalsJson = await this.#resolveSignals(view, compiled, detached, extras, request);
    return extras;
  }

  async #readiness(view) {
    const port = this.#provisioning;
    const answers = await Promise.all(
      view.definitions.map(async (def, i) => {
        let answer;
        try {
          answer = await within(port.hasAvailableCredentials(def.id), this.#callbackTimeoutMs);
        } catch {
          answer = TIMED_OUT;
        }
        if (typeof answer !== 'boolean') {
          const what = answer === TIMED_OUT ? 'failed or timed out' : 'answered a non-boolean';
          throw new ProvisioningAvailabilityError(`credential readiness for ${def.id} ${what}`, 'PROVISIONING_AVAILABILITY_FAILED', {
            providerId: def.id,
          });
        }
        return answer ? -1 : i;
      }),
    );
    return answers.filter((i) => i >= 0);
  }

  async #resolveSignals(view, compiled, detached, extras, request) {
    const survivors = callNative(() => view.native.survivors(compiled.native, detached, extras));
    // Each answer is serialized on its own, inside a guard: an unreadable answer (a cycle,
    // a throwing getter or toJSON) excludes only its pool.
    const parts = await Promise.all(
      survivors.map(async (i) => {
        const def = view.definitions[i];
        let text;
        try {
          const s = await within(this.#resolver(def.definition, request), this.#callbackTimeoutMs);
          text = s === TIMED_OUT ? UNRESOLVED_TIMEOUT : s === undefined || s === null ? 'null' : serialize(s) ?? UNRESOLVED_UNREADABLE;
        } catch {
          text = UNRESOLVED_THREW;
        }
        return `"${i}":${text}`;
      }),
    );
    return `{${parts.join(',')}}`;
  }

  // Settles `run` with the result or the error; never rejects itself (see #start).
  // Only the success path lives here, so V8 optimizes a short function; every failure
  // and every optional feature (observer, capacity, extras) goes through a helper.
  async #provision(request, detached, run) {
    try {
      const compiled = compile(request);
      const view = nativeView(this.#registry);
      const id = nextSandboxId();
      // Everything taken from the request comes from the text compile() validated (the
      // request is read once): a request changed later (by a resolver, or by a caller
      // reusing it) changes nothing. Each launch gets its own copy of the options
      // (launchCopy); ours stay as validated.
      const parts = compiled.launchParts;
      const labels = { ...parts.labels, [SANDBOX_ID_LABEL]: id };
      const launchOptions = launchOptionsOf(parts, labels);
      const capacity = this.#capacity;
      const resourcesJson = capacity === null ? null : parts.resourcesJson;
      const extras = this.#needsExtras ? await this.#extrasFor(view, compiled, detached, request, id) : null;
      const order = this.#orderFor(view, compiled, detached, extras, id);
      const timeoutMs = compiled.timeoutMs;
      // Failure bookkeeping, made on first use: the success path allocates none of it.
      let attempts = null;
      let skipped = null;
      let made = 0;
      run.sandboxId = id;
      for (let pos = 0; pos < order.length; pos++) {
        const def = view.definitions[order[pos]];
        let token = null;
        if (capacity !== null) {
          skipped ??= [];
          token = await this.#admitFor(def, id, resourcesJson, skipped);
          if (token === null) continue;
        }
        made++;
        if (this.#observer !== null) this.#emit('attempt.started', { sandboxId: id, providerId: def.id, attempt: made });
        run.providerId = def.id;
        run.timeoutMs = timeoutMs;
        run.token = token;
        run.attempts = attempts;
        run.attempt = made;
        DEADLINES.add(timeoutMs, run);
        let handle;
        let failure;
        let failed = false;
        try {
          // The adapter's own promise, awaited directly (a synchronous throw lands here too).
          handle = await (detached ? def.runtime.launchDetached(launchCopy(launchOptions)) : def.runtime.launch(launchCopy(launchOptions)));
        } catch (error) {
          failed = true;
          failure = error;
        }
        if (!DEADLINES.settle(run)) {
          // The deadline already ended this provision (#expire); a late sandbox is destroyed.
          if (!failed) this.#lateSuccess(def, handle, id);
          return;
        }
        if (failed) {
          attempts ??= [];
          // Returns when the failure allows the next pool; throws the terminal error.
          await this.#launchFailed(failure, def, token, { id, detached, compiled, view, order, pos, made, attempts, skipped });
          continue;
        }
        if (token !== null) capacity.ledger.settle(token, true);
        const providerSandboxId = handleId(handle);
        if (providerSandboxId === null) this.#malformedHandle(def.id, id, made, attempts ?? []);
        if (this.#observer !== null) this.#emit('attempt.succeeded', { sandboxId: id, providerId: def.id, attempt: made });
        if (!this.#recordFast(compiled, id, def.id, providerSandboxId, detached)) {
          await this.#persist(def, handle, id, def.id, providerSandboxId, labels, detached);
        }
        this.#handles.set(id, handle);
        run.resolve({ id, providerId: def.id, labels });
        return;
      }
      this.#outOfCapacity(id, made, attempts, skipped);
    } catch (error) {
      run.reject(error);
    }
  }

  /** The attempt order (typed NO_ELIGIBLE_PROVIDER error, with its events, when empty). */
  #orderFor(view, compiled, detached, extras, id) {
    let order;
    try {
      order = extras === null ? this.#cachedOrder(view, compiled, detached) : parsePlan(view.native.plan(compiled.native, detached, extras, false)).order;
    } catch (e) {
      const err = fromNative(e);
      if (err.code === 'NO_ELIGIBLE_PROVIDER') {
        err.sandboxId = id;
        debug(`no eligible provider: ${err.summary}`);
        if (this.#observer !== null) {
          this.#emit('provision.validated', { sandboxId: err.sandboxId, detached });
          for (const r of err.rejections) this.#emit('provider.rejected', { sandboxId: err.sandboxId, providerId: r.providerId, reasons: r.reasons });
          this.#emit('provision.exhausted', { sandboxId: err.sandboxId, code: err.code, summary: err.summary });
        }
      }
      throw err;
    }
    if (this.#observer !== null) this.#emitDecision(view, compiled, detached, extras, id, order);
    if (DEBUG) debug(`${id}: attempt order ${order.map((i) => view.definitions[i].id).join(', ')}`);
    return order;
  }

  /** Capacity admission for one candidate: its token, or null when it is skipped (recorded in `skipped`). */
  async #admitFor(def, id, resourcesJson, skipped) {
    const verdict = await this.#admit(def, resourcesJson);
    if (verdict.token === null) {
      skipped.push({ providerId: def.id, status: verdict.status, reason: verdict.reason });
      this.#emit('capacity.skipped', { sandboxId: id, providerId: def.id, status: verdict.status, reason: verdict.reason });
      return null;
    }
    this.#emit('capacity.admitted', { sandboxId: id, providerId: def.id });
    return verdict.token;
  }

  /**
   * A launch failed (before its deadline). Returns when the classified failure lets the
   * provision try the next pool; otherwise throws the terminal, sanitized error.
   */
  async #launchFailed(failure, def, token, run) {
    const { id, detached, compiled, view, order, pos, made, attempts, skipped } = run;
    const providerId = def.id;
    // Capacity holds: released only when the failure is proven to have allocated nothing
    // (a missing package, or a classifier's retryable answer); an outcome-unknown
    // failure keeps its hold, like a success, until a read reflects it or it expires.
    const settle = (allocatedNothing) => {
      if (token !== null) this.#capacity.ledger.settle(token, !allocatedNothing);
    };
    // Our own typed error is safe to surface: a missing optional package (nothing was
    // called, so nothing was allocated). isRouterError reads nothing of a foreign value.
    if (isPackageError(failure)) {
      settle(true);
      attempts.push({ providerId, code: failure.code, retryable: false });
      this.#emit('attempt.failed', { sandboxId: id, providerId, attempt: made, code: failure.code, retryable: false });
      this.#emit('provision.exhausted', { sandboxId: id, code: failure.code });
      throw failure;
    }
    // The classifier is the caller's own code judging the caller's own adapter: it gets the
    // value the runtime threw, as it was (on the credential-first surface that value is
    // already the factory's sanitized error). Nothing below keeps or copies it.
    const c = await this.#classify(failure, def);
    const remaining = order.length - pos - 1;
    const decision = binding.decideAfterFailure(c.code, c.retryable, compiled.fallbackAllowed, made, compiled.maxAttempts, made + remaining);
    const [verdict, a, b] = decision.split(':');
    const code = verdict === 'ADVANCE' ? b : a;
    const retryable = verdict !== 'TERMINAL';
    settle(c.retryable === true && typeof c.code === 'string' && /^[A-Z][A-Z0-9_]{0,63}$/.test(c.code));
    attempts.push({ providerId, code, retryable });
    this.#emit('attempt.failed', { sandboxId: id, providerId, attempt: made, code, retryable });
    if (verdict === 'ADVANCE') {
      this.#emit('fallback.advanced', { sandboxId: id, fromProviderId: providerId, toProviderId: view.definitions[order[pos + 1]].id, attempt: made + 1 });
      return;
    }
    const exhausted = verdict === 'EXHAUSTED';
    const errCode = exhausted ? 'PROVIDER_ACQUISITION_EXHAUSTED' : code;
    this.#emit('provision.exhausted', { sandboxId: id, code: errCode });
    throw new ProviderProvisioningError(
      exhausted
        ? `acquisition exhausted after ${made} attempt(s): ${attempts.map((x) => `${x.providerId} ${x.code}`).join(', ')}`
        : `acquisition failed on ${providerId}: ${code}`,
      errCode,
      { providerId, sandboxId: id, attempts, capacityRejections: skipped ?? undefined },
    );
  }

  /** A launch resolved to something that is not a handle: the sandbox may exist. Throws. */
  #malformedHandle(providerId, id, made, attempts) {
    const code = 'PROVIDER_MALFORMED_HANDLE';
    attempts.push({ providerId, code, retryable: false });
    this.#emit('attempt.failed', { sandboxId: id, providerId, attempt: made, code, retryable: false });
    this.#emit('provision.exhausted', { sandboxId: id, code });
    throw new ProviderProvisioningError(
      `provider ${providerId} returned a malformed handle; the sandbox may exist (label ${SANDBOX_ID_LABEL}=${id})`,
      code,
      { providerId, sandboxId: id, attempts },
    );
  }

  /** Every remaining candidate was skipped for capacity (only capacity routing ends here). Throws. */
  #outOfCapacity(id, made, attempts, skipped) {
    if (made === 0) {
      const line = skipped.map((r) => `${r.providerId} ${r.status} ${r.reason}`).join(', ');
      this.#emit('provision.exhausted', { sandboxId: id, code: 'PROVIDER_CAPACITY_EXHAUSTED' });
      throw new ProviderCapacityExhaustedError(`no provider has capacity: ${line}`, 'PROVIDER_CAPACITY_EXHAUSTED', {
        sandboxId: id,
        rejections: skipped,
      });
    }
    this.#emit('provision.exhausted', { sandboxId: id, code: 'PROVIDER_ACQUISITION_EXHAUSTED' });
    throw new ProviderProvisioningError(
      `acquisition exhausted after ${made} attempt(s); the remaining providers had no capacity`,
      'PROVIDER_ACQUISITION_EXHAUSTED',
      { sandboxId: id, attempts, capacityRejections: skipped },
    );
  }

  // --- capacity ---------------------------------------------------------------------

  /** Reads one pool's capacity, bounded and strictly validated. Never throws. */
  async #measure(def) {
    const timeoutMs = this.#capacityTimeoutMs;
    let raw;
    try {
      raw = await within(def.capacity.getCapacity({ timeoutMs }), timeoutMs);
    } catch {
      return { status: 'unknown', reason: 'READ_FAILED' };
    }
    if (raw === TIMED_OUT) return { status: 'unknown', reason: 'TIMEOUT' };
    const json = serialize(raw) ?? 'null';
    return JSON.parse(binding.validateMeasurement(json));
  }

  async #admit(def, resourcesJson) {
    if (!def.capacity) return { token: null, status: 'UNKNOWN', reason: 'NO_CAPACITY_READER' };
    const ledger = this.#capacity.ledger;
    const seq = ledger.beginRead();
    const m = await this.#measure(def);
    const answer = callNative(() => ledger.admit(def.id, seq, JSON.stringify(m), resourcesJson));
    const [kind, rest] = [answer.slice(0, answer.indexOf(':')), answer.slice(answer.indexOf(':') + 1)];
    if (kind === 'ADMITTED') return { token: Number(rest) };
    if (kind === 'EXHAUSTED') return { token: null, status: 'EXHAUSTED', reason: rest.slice(0, rest.indexOf(':')), detail: rest.slice(rest.indexOf(':') + 1) };
    return { token: null, status: 'UNKNOWN', reason: rest };
  }

  /**
   * Reads every pool that has a capacity reader, concurrently, each bounded by the
   * capacity deadline. Only reads: nothing is launched, started or created.
   */
  async getCapacity() {
    const view = nativeView(this.#registry);
    const withReader = view.definitions.filter((d) => d.capacity);
    const results = await Promise.all(withReader.map((d) => this.#measure(d)));
    const out = {};
    withReader
      .map((d, i) => [d.id, results[i]])
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .forEach(([id, m]) => {
        out[id] = m;
      });
    return out;
  }

  /**
   * The attempt order for a request without per-call extras. It is a pure function of the
   * compiled request, the registry's contents and `detached`, so it is memoized per router
   * (keyed by the compiled request, checked against the registry's version).
   */
  #cachedOrder(view, compiled, detached) {
    const cacheKey = detached ? -1 - compiled.key : compiled.key;
    const hit = this.#orders.get(cacheKey);
    // A memo entry is a [view, version, compiled, order] tuple: an array's shape never dies
    // with the router (see the shape anchor at the end of this file).
    if (hit !== undefined && hit[0] === view && hit[1] === view.version && hit[2] === compiled) return hit[3];
    const order = parsePlan(binding.registryPlan(view.key, compiled.key, detached, false)).order;
    if (this.#orders.size >= 256) this.#orders.delete(this.#orders.keys().next().value);
    this.#orders.set(cacheKey, [view, view.version, compiled, order]);
    return order;
  }

  #emitDecision(view, compiled, detached, extras, id, order) {
    let decision;
    try {
      decision = decisionForEvents(view, compiled, detached, extras);
    } catch {
      return;
    }
    this.#emit('provision.validated', { sandboxId: id, detached });
    for (const r of decision.rejected) this.#emit('provider.rejected', { sandboxId: id, providerId: r.providerId, reasons: r.reasons });
    this.#emit('provision.ranked', {
      sandboxId: id,
      summary: decision.summary,
      providerIds: order.map((i) => view.definitions[i].id),
    });
  }

  // A launch that succeeds after its deadline already failed the provision: nobody holds
  // its id, so it is destroyed rather than left running unrecorded.
  async #lateSuccess(def, handle, id) {
    let succeeded = false;
    if (handleId(handle) !== null) {
      try {
        succeeded = (await within(def.runtime.destroy(handle), this.#operationTimeoutMs)) !== TIMED_OUT;
      } catch {
        succeeded = false;
      }
    }
    this.#emit('cleanup.completed', { sandboxId: id, providerId: def.id, reason: 'late-launch', succeeded });
  }

  async #classify(error, def) {
    if (this.#classifier === null) return { code: null, retryable: null };
    try {
      const r = await within(this.#classifier(error, def.definition), this.#callbackTimeoutMs);
      // The answer is read once: a getter that changes its mind changes nothing.
      const answer = r !== null && typeof r === 'object' ? guarded(() => ({ code: r.code, retryable: r.retryable })) : null;
      if (answer !== null && typeof answer.code === 'string' && typeof answer.retryable === 'boolean') return answer;
    } catch {
      // A throwing classifier proves nothing: outcome unknown.
    }
    return { code: null, retryable: null };
  }

  /**
   * The default store's synchronous write. True when the record is stored; false when
   * the caller's store must be used, or the write failed (then `#persist` runs the failure
   * path: it retries nothing, it cleans up).
   */
  #recordFast(compiled, id, providerId, providerSandboxId, detached) {
    if (!this.#fastMappings) return false;
    try {
      this.#mappings[RECORD](compiled.key, id, providerId, providerSandboxId, detached);
    } catch {
      return false;
    }
    if (this.#observer !== null) this.#emit('mapping.persisted', { sandboxId: id, providerId });
    return true;
  }

  async #persist(def, handle, id, providerId, providerSandboxId, labels, detached) {
    try {
      if (this.#fastMappings) {
        // #recordFast already failed for this record.
        throw new Error('mapping write failed');
      }
      const record = { id, providerId, providerSandboxId, labels: { ...labels }, createdAt: new Date().toISOString(), detached };
      const pending = this.#mappings.put(record);
      const r = await within(pending, this.#callbackTimeoutMs);
      if (r === TIMED_OUT) {
        // The write may still land after the sandbox is destroyed below: remove it then.
        Promise.resolve(pending).then(
          () => within(this.#mappings.delete(id), this.#callbackTimeoutMs),
          noop,
        ).catch(noop);
        throw new Error('mapping store timed out');
      }
    } catch {
      this.#emit('mapping.failed', { sandboxId: id, providerId });
      let succeeded = false;
      try {
        const r = await within(def.runtime.destroy(handle), this.#operationTimeoutMs);
        succeeded = r !== TIMED_OUT;
      } catch {
        succeeded = false;
      }
      this.#emit('cleanup.completed', { sandboxId: id, providerId, reason: 'mapping-failed', succeeded });
      throw new MappingPersistenceError(
        succeeded
          ? `sandbox acquired on ${providerId} but its mapping could not be stored; the sandbox was destroyed`
          : `sandbox acquired on ${providerId} but its mapping could not be stored, and cleanup failed: find it by label ${SANDBOX_ID_LABEL}=${id}`,
        'MAPPING_PERSISTENCE_FAILED',
        { providerId, sandboxId: id, cleanup: succeeded ? 'destroyed' : 'failed' },
      );
    }
    if (this.#observer !== null) this.#emit('mapping.persisted', { sandboxId: id, providerId });
  }

  // --- operations by id: resolve the original provider through the mapping, never reroute.

  async #lookup(id) {
    if (typeof id !== 'string') {
      throw new SandboxRequestValidationError('invalid sandbox id: must be a string', 'INVALID_SANDBOX_ID', { field: 'id' });
    }
    callNative(() => binding.checkSandboxId(id));
    let record;
    try {
      record = readRecord(await within(this.#mappings.get(id), this.#callbackTimeoutMs));
    } catch {
      // The store threw, rejected, timed out, or answered a record that could not be read
      // or is not a mapping (readRecord).
      throw new MappingPersistenceError(`mapping store failed to read ${id}`, 'MAPPING_READ_FAILED', { sandboxId: id });
    }
    if (record === null) {
      this.#handles.delete(id);
      throw new SandboxNotFoundError(`no sandbox ${id}`, 'SANDBOX_NOT_FOUND', { sandboxId: id });
    }
    const def = entryOf(this.#registry, record.providerId);
    if (!def) {
      throw new ProviderRegistryError(`sandbox ${id} belongs to provider ${record.providerId}, which is not registered`, 'PROVIDER_NOT_REGISTERED', {
        sandboxId: id,
        providerId: record.providerId,
      });
    }
    return { record, def };
  }

  /**
   * The handle for an operation by id: this router's own from launch, or re-resolved with
   * `getById(providerSandboxId, { owned: true })`. Owned, because the mapping proves this
   * router made the sandbox: an adapter's attached handle (no `owned`) would make `destroy`
   * forget the sandbox instead of deleting it, and would downgrade the adapter's record for
   * every other caller of the same adapter instance.
   */
  async #handle(id, record, def, operation) {
    const cached = this.#handles.get(id);
    if (cached) return cached;
    const rt = def.runtime;
    if (!hasMethods(rt, ['getById'])) return { id: record.providerSandboxId };
    // An adapter may report "not found" by rejecting: the sandbox is gone (null) either way.
    const handle = await this.#bounded(() => rt.getById(record.providerSandboxId, { owned: true }), def, `${operation}: getById`, this.#operationTimeoutMs, true);
    return handle ?? null;
  }

  async #call(id, operation, args, timeoutMs) {
    const { record, def } = await this.#lookup(id);
    const rt = def.runtime;
    if (!hasMethods(rt, [operation])) {
      throw new ProviderRuntimeError(def.id, operation);
    }
    const handle = await this.#handle(id, record, def, operation);
    if (handle === null) throw new SandboxNotFoundError(`sandbox ${id} no longer exists at ${def.id}`, 'SANDBOX_NOT_FOUND', { sandboxId: id, providerId: def.id });
    return this.#bounded(() => rt[operation](handle, ...args), def, operation, timeoutMs ?? this.#operationTimeoutMs);
  }

  /**
   * One runtime call for an operation by id: its result, or a sanitized ProviderRuntimeError
   * (a failure, or OPERATION_TIMEOUT when it has not settled within `ms`: outcome unknown).
   * With `notFoundIsNull`, a "not found" rejection resolves to null instead.
   */
  async #bounded(call, def, operation, ms, notFoundIsNull = false) {
    let r;
    try {
      r = await within(call(), ms);
    } catch (error) {
      if (isPackageError(error)) throw error;
      if (notFoundIsNull && isNotFound(error)) return null;
      throw new ProviderRuntimeError(def.id, operation);
    }
    if (r === TIMED_OUT) throw new ProviderRuntimeError(def.id, operation, ms);
    return r;
  }

  /** Runs a command in the sandbox, on the provider that launched it. */
  runScript(id, options) {
    let script;
    try {
      script = readScriptOptions(options);
    } catch (error) {
      return Promise.reject(error);
    }
    // The operation deadline bounds the call; a command whose own timeoutMs is longer than
    // that deadline gets its timeoutMs plus RUN_SCRIPT_GRACE_MS instead.
    const own = script.timeoutMs;
    const bound = Number.isFinite(own) && own > this.#operationTimeoutMs ? Math.ceil(own) + RUN_SCRIPT_GRACE_MS : undefined;
    return this.#call(id, 'runScript', [script], bound);
  }

  /** Uploads files into the sandbox. */
  uploadBundle(id, bundle) {
    let files;
    try {
      files = readBundle(bundle);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#call(id, 'uploadBundle', [{ files }]);
  }

  /** Stops the sandbox (where the runtime supports it). */
  stop(id) {
    return this.#call(id, 'stop', []);
  }

  /** Starts a stopped sandbox (where the runtime supports it). */
  start(id) {
    return this.#call(id, 'start', []);
  }

  /** The mapping record of a sandbox (a copy), or a `SandboxNotFoundError`. */
  async getSandbox(id) {
    const { record } = await this.#lookup(id);
    return { ...record, labels: { ...record.labels } };
  }

  /**
   * Destroys the sandbox and removes its mapping. An already-deleted provider sandbox is
   * not an error; any other failure keeps the mapping so the call can be retried.
   */
  async destroy(id) {
    const { record, def } = await this.#lookup(id);
    const rt = def.runtime;
    const handle = await this.#handle(id, record, def, 'destroy');
    if (handle !== null) {
      let r;
      try {
        r = await within(rt.destroy(handle), this.#operationTimeoutMs);
      } catch (error) {
        if (isPackageError(error)) throw error;
        if (!(await this.#gone(rt, record, error))) throw new ProviderRuntimeError(def.id, 'destroy');
      }
      // Outcome unknown: the mapping stays, so the call can be retried.
      if (r === TIMED_OUT) throw new ProviderRuntimeError(def.id, 'destroy', this.#operationTimeoutMs);
    }
    try {
      if ((await within(this.#mappings.delete(id), this.#callbackTimeoutMs)) === TIMED_OUT) throw new Error('timed out');
    } catch {
      throw new MappingPersistenceError(`sandbox ${id} was destroyed but its mapping could not be removed`, 'MAPPING_PERSISTENCE_FAILED', {
        sandboxId: id,
        providerId: def.id,
        cleanup: 'destroyed',
      });
    }
    this.#handles.delete(id);
    this.#emit('sandbox.destroyed', { sandboxId: id, providerId: def.id });
  }

  async #gone(rt, record, error) {
    if (isNotFound(error)) return true;
    if (!hasMethods(rt, ['getById'])) return false;
    try {
      return (await within(rt.getById(record.providerSandboxId, { owned: true }), this.#operationTimeoutMs)) === null;
    } catch {
      return false;
    }
  }

  toJSON() {
    return { type: 'SandboxRouter' };
  }
}

// Shape anchor. V8 keeps optimized code only while the object shapes it was specialized
// for exist; when no provision is in flight and a full GC runs, the InFlight shape would
// die with its last instance and the next burst would start over in the interpreter
// (measured with --trace-deopt: "weak objects" deoptimizations of every function on the
// provision path after each burst). One idle instance, taken once through the deadline
// queue like a real one, keeps the shape alive.
// The same holds for the router's own shape (and its default store's) in an application
// that makes a router per batch of work and drops it: an idle router is kept for that.
const ANCHOR = new InFlight(new SandboxRouter({ registry: { list: () => [] } }));
new Promise((resolve, reject) => {
  ANCHOR.resolve = resolve;
  ANCHOR.reject = reject;
});
DEADLINES.settle(DEADLINES.add(1, ANCHOR));

module.exports = { SandboxRouter, SANDBOX_ID_LABEL };
