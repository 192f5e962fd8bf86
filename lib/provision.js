'use strict';
// provision(): the JS half of one acquisition. The native machine (core/acquisition.rs,
// through binding_acquisition.rs) decides every step: which pool is next, whether capacity
// admits it, whether a failure advances, ends or exhausts the provision, which capacity
// hold is kept or released, which events say so. This file performs what the machine asks
// (a capacity read, a launch, a classifier call) and reports each outcome with one native
// call; then it writes the mapping and hands back the result, or builds the typed error the
// machine's failure describes. It counts no attempt and checks no code.
//
// Why is this loop in JS at all? Every adapter call returns a JS promise. Awaiting it from
// Rust costs a ThreadsafeFunction round trip (~150 µs measured here) per hop; awaiting it
// here costs a microtask, and each report to the machine is a synchronous native call.

const { binding } = require('./binding.js');
const {
  ProvisioningAvailabilityError,
  NoEligibleProviderError,
  ProviderProvisioningError,
  ProviderCapacityExhaustedError,
  AcquisitionTimeoutError,
  MappingPersistenceError,
  fromNative,
  callNative,
  isRouterError,
} = require('./errors.js');
const { nativeView } = require('./registry.js');
const { STORE_KEY } = require('./mappings.js');
const { serialize } = require('./serialize.js');
const { compile, checkLabels } = require('./compile.js');
const { Deadlines } = require('./deadlines.js');
const { nextSandboxId } = require('./ids.js');
const { guarded } = require('./guard.js');
const { within, TIMED_OUT } = require('./within.js');
const { measureJson } = require('./capacity.js');
const { decisionForEvents } = require('./explain.js');
const { emit, emitDecided, debug, DEBUG } = require('./events.js');
const { isPackageError, keepHandle } = require('./operations.js');
const { healthNow } = require('./options.js');

const { SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } = require('./finders.js');
const os = require('node:os');

/** This process, as intent records name their writer (host name and pid). */
const OWNER_HOST = os.hostname();
const OWNER_PID = process.pid;
/**
 * How long after a launch's own deadline an intent stays "in flight": the mapping write
 * (callbackTimeoutMs) comes on top, and this covers clock steps between processes.
 */
const INTENT_SLACK_MS = 60_000;

const noop = () => {};

/**
 * The injected health clock's reading (ms), or undefined: health off (nothing is
 * recorded), or the default wall clock (the native side reads it itself).
 * @param {import('./options.js').RouterContext} ctx
 */
function tick(ctx) {
  return healthNow(ctx.health);
}
const DONE = binding.StepKind.Done;
const ADMIT = binding.StepKind.Admit;
/** The buffer the machine writes each step into: [StepKind, pool]; begin adds its key. */
const STEP = new Uint32Array(3);
const UNRESOLVED_TIMEOUT = JSON.stringify({ $unresolved: 'resolver timed out' });
const UNRESOLVED_THREW = JSON.stringify({ $unresolved: 'resolver threw' });
const UNRESOLVED_UNREADABLE = JSON.stringify({ $unresolved: 'resolver answered an unreadable value' });

// One timer for every launch deadline (see deadlines.js). An entry is the provision's
// InFlight, so no closure is made per launch.
const DEADLINES = new Deadlines((run) => expire(run));

/**
 * One provision in flight: the settle functions of the promise `provision()` returned, its
 * machine, and the deadline entry (see deadlines.js) of its current launch.
 */
class InFlight {
  constructor(ctx, detached) {
    /** @type {(value: object) => void} */
    this.resolve = noop;
    /** @type {(reason: unknown) => void} */
    this.reject = noop;
    // Deadline entry fields (deadlines.js).
    this.at = 0;
    this.settled = true;
    this.prev = null;
    this.next = null;
    this.ctx = ctx;
    /** the acquisition's key (binding_acquisition.rs), -1 when there is none */
    this.machine = -1;
    this.pools = null;
    this.sandboxId = '';
    this.timeoutMs = 0;
    this.packageError = null;
    /** whether a launch was attempted (an intent may exist) */
    this.launched = false;
    this.detached = detached;
    /** the launch options' parts (compile.js launchParts) and the stamped labels */
    this.parts = null;
    /** @type {Record<string, string> | null} */
    this.labels = null;
    /** the definition of the pool the current step concerns */
    this.def = null;
  }
}

/**
 * The launch options for one launch, made fresh from our own parsed copy of the request
 * (the request is never handed on): a runtime that changes what it is given cannot change
 * the next pool's launch (nor drop its id label) or the result.
 */
function launchOptions(parts, labels) {
  const out = { labels: { ...labels } };
  if (parts.name !== undefined) out.name = parts.name;
  if (parts.env !== undefined) out.env = { ...parts.env };
  if (parts.createTimeoutSeconds !== undefined) out.createTimeoutSeconds = parts.createTimeoutSeconds;
  return out;
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

/** Acquires a sandbox. Returns the promise `provision()` hands out. */
function provision(ctx, request, detached) {
  const run = new InFlight(ctx, detached);
  SETTLING = run;
  const promise = new Promise(takeSettlers);
  SETTLING = null;
  if (needsExtras(ctx)) begunWithExtras(run, request);
  else {
    try {
      // No callback runs before the machine starts: validate, route and begin now.
      const call = compile(request);
      const view = nativeView(ctx.registry);
      // Health: the router's clock, read once for the route (circuits) and the first launch.
      const now = healthNow(ctx.health);
      // The decision the events report, taken before begin (which may take a half-open
      // circuit's trial token for this provision).
      const decision = ctx.observer !== null ? decisionOf(view, call.compiled, detached, null, ctx.health, now) : null;
      // begin validates the labels (the native rule) before it routes, and makes the
      // sandbox id (returned; the machine's key is in STEP[2]).
      const id = binding.beginAcquisition(
        view.key,
        call.compiled.key,
        detached,
        ctx.observer !== null,
        call.labelsJson,
        STEP,
        ctx.health === null ? undefined : ctx.health.key,
        now,
      );
      if (typeof id !== 'string') throw noEligible(ctx, id, nextSandboxId(), detached);
      started(run, STEP[2], view, call, decision, id);
    } catch (error) {
      failed(run, error);
      return promise;
    }
    acquire(run);
  }
  return promise;
}

/** The promise executor of `provision`, without a closure per call (SETTLING is the run). */
let SETTLING = null;
function takeSettlers(resolve, reject) {
  SETTLING.resolve = resolve;
  SETTLING.reject = reject;
}

/**
 * With credential readiness, a signal resolver or capacity routing, callbacks run before
 * the machine starts (the request's own checks first).
 */
async function begunWithExtras(run, request) {
  const ctx = run.ctx;
  try {
    const call = compile(request);
    const compiled = call.compiled;
    const view = nativeView(ctx.registry);
    const id = nextSandboxId();
    checkLabels(call);
    const extras = await extrasFor(ctx, view, compiled, run.detached, request, id);
    const health = ctx.health;
    const now = healthNow(health);
    const decision = ctx.observer !== null ? decisionOf(view, compiled, run.detached, extras, health, now) : null;
    const begun = callNative(() =>
      view.native.begin(
        compiled.native,
        run.detached,
        extras,
        ctx.capacity?.ledger ?? null,
        ctx.observer !== null,
        call.labelsJson,
        STEP,
        id,
        health === null ? undefined : health.key,
        now,
      ),
    );
    if (typeof begun !== 'number') throw noEligible(ctx, begun, id, run.detached);
    started(run, begun, view, call, decision, id);
  } catch (error) {
    failed(run, error);
    return;
  }
  acquire(run);
}

/**
 * The machine began (`begun` is its key, `id` its sandbox id): fills `run` with what the
 * launches need. Everything taken from the request comes from the text compile()
 * validated: the request is read once.
 */
function started(run, begun, view, call, decision, id) {
  const ctx = run.ctx;
  const compiled = call.compiled;
  // Our own copy, made when the request was read (begin validated its text: an object of
  // strings without the stamp keys, so the copy holds every entry), stamped.
  const labels = call.labels ?? {};
  labels[SANDBOX_ID_LABEL] = id;
  labels[SANDBOX_FLEET_LABEL] = ctx.fleet;
  run.machine = begun;
  run.pools = view.definitions;
  run.sandboxId = id;
  run.timeoutMs = compiled.timeoutMs;
  run.parts = compiled.launchParts;
  run.labels = labels;
  if (ctx.observer !== null) emitDecision(ctx, view, decision, run.detached, id, binding.acquisitionCandidates(begun));
  if (DEBUG) debug(`${id}: attempt order ${Array.from(binding.acquisitionCandidates(begun), (i) => run.pools[i].id).join(', ')}`);
}

/** The provision failed before or after its machine ran: settle it with `error`. */
function failed(run, error) {
  end(run);
  run.reject(error);
}

// The acquisition loop: performs each step the machine asks for, until it is done. Settles
// `run` with the result or the error; never rejects itself. The provision's promise is
// settled by whichever comes first: this loop (which awaits the adapter's own promise, with
// no wrapper in between) or the launch deadline (`expire`). Its state lives in `run`, so
// the frame kept across each await stays small.
async function acquire(run) {
  try {
    // Each step is read from STEP right after the native call that wrote it (begin wrote
    // the first), before any await.
    for (let kind = took(run); kind !== DONE; kind = next(run)) {
      if (kind === ADMIT) {
        if (run.ctx.capacity.coordinator !== null) {
          await admitShared(run, run.def);
        } else {
          const measured = await measureJson(run.ctx, run.def);
          binding.acquisitionAdmit(run.machine, measured, tick(run.ctx));
        }
        continue;
      }
      if (run.ctx.intents && !(await launchIntent(run, run.def))) continue;
      run.launched = true;
      DEADLINES.add(run.timeoutMs, run);
      let handle;
      let threw = false;
      try {
        // The adapter's own promise, awaited directly (a synchronous throw lands here too).
        handle = await launch(run);
      } catch (error) {
        threw = true;
        handle = error;
      }
      if (!DEADLINES.settle(run)) {
        // The deadline already ended this provision and its machine (expire); a late
        // sandbox is destroyed.
        if (!threw) lateSuccess(run.ctx, run.def, handle, run.sandboxId);
        return;
      }
      if (threw) await reportFailure(run, run.def, handle);
      else if (await delivered(run, handle)) return;
    }
    await exhausted(run);
  } catch (error) {
    failed(run, error);
  }
}

/** The step `STEP` holds, for `run` (its pool's definition in `run.def`); events first. */
function took(run) {
  if (run.ctx.observer !== null) emitDecided(run.ctx.observer, run.machine, run.pools, run.sandboxId);
  run.def = STEP[0] === DONE ? null : run.pools[STEP[1]];
  return STEP[0];
}

/** Asks the machine for its next step. */
function next(run) {
  binding.acquisitionStep(run.machine, STEP);
  return took(run);
}

/** The launch on `run.def`, with fresh options. */
function launch(run) {
  const options = launchOptions(run.parts, run.labels);
  return run.detached ? run.def.runtime.launchDetached(options) : run.def.runtime.launch(options);
}

/** The machine ended without a handle: the typed error it describes (intents settled). */
async function exhausted(run) {
  const failure = binding.acquisitionFailure(run.machine);
  end(run);
  const error = failureError(failure, run.pools, run.sandboxId, run);
  if (run.ctx.intents) {
    // Until its intent says how the launches ended, the provision is still in flight.
    run.ctx.inflight.add(run.sandboxId);
    try {
      await settleIntent(run, failure.pool === null || failure.pool === undefined ? null : run.pools[failure.pool], mayExist(failure));
    } finally {
      run.ctx.inflight.delete(run.sandboxId);
    }
  }
  throw error;
}

/** The intent write before a launch; false (and the machine told) when it failed. */
async function launchIntent(run, def) {
  if (await writeIntent(run, def, 'launching')) return true;
  // No intent, no launch: nothing is allocated, so nothing can be lost.
  run.packageError = new MappingPersistenceError(
    `the launch intent for ${run.sandboxId} could not be stored; nothing was launched`,
    'MAPPING_INTENT_FAILED',
    { providerId: def.id, sandboxId: run.sandboxId, cleanup: 'none' },
  );
  binding.acquisitionPackageFailed(run.machine, 'MAPPING_INTENT_FAILED', tick(run.ctx));
  settleShared(run);
  return false;
}

/**
 * A launch resolved: a malformed handle is reported (false: the machine goes on);
 * otherwise the success is reported, the mapping stored and the provision resolved (true).
 */
async function delivered(run, handle) {
  const providerSandboxId = handleId(handle);
  if (providerSandboxId === null) {
    binding.acquisitionMalformed(run.machine, tick(run.ctx));
    settleShared(run);
    return false;
  }
  const ctx = run.ctx;
  const def = run.def;
  const id = run.sandboxId;
  // With the default store, the record is written by this same call (recorded: true).
  const recorded = succeeded(run, providerSandboxId);
  settleShared(run);
  if (ctx.observer !== null) emitDecided(ctx.observer, run.machine, run.pools, id);
  end(run);
  if (recorded) {
    if (ctx.observer !== null) emit(ctx.observer, 'mapping.persisted', { sandboxId: id, providerId: def.id });
  } else {
    // The machine has ended and no record names the sandbox yet (the caller's store is
    // writing, or the failure path cleans up): reconcile must still see it in flight.
    ctx.inflight.add(id);
    try {
      await persist(ctx, def, handle, id, providerSandboxId, run.labels, run.detached, run);
    } finally {
      ctx.inflight.delete(id);
    }
  }
  keepHandle(ctx.handles, id, handle);
  run.resolve({ id, providerId: def.id, labels: run.labels });
  return true;
}

/**
 * Writes the intent record of the current launch (`launching`) or of one that ended with
 * its outcome unknown (`failed`), bounded by callbackTimeoutMs. True when it was stored.
 * `expiresAt`: after it, the writer's provision has certainly ended (launch deadline +
 * mapping write + slack), so reconcile may call the sandbox an orphan even if the writer
 * is alive.
 */
async function writeIntent(run, def, state) {
  const ctx = run.ctx;
  const now = Date.now();
  const intent = {
    id: run.sandboxId,
    providerId: def.id,
    state,
    startedAt: now,
    expiresAt: now + run.timeoutMs + ctx.callbackTimeoutMs + INTENT_SLACK_MS,
    ownerHost: OWNER_HOST,
    ownerPid: OWNER_PID,
    ownerSession: ctx.session,
  };
  try {
    return (await within(ctx.mappings.intent(intent), ctx.callbackTimeoutMs)) !== TIMED_OUT;
  } catch {
    return false;
  }
}

/**
 * Whether a failed acquisition may have left a sandbox behind: a terminal failure (outcome
 * unknown, malformed handle) or a launch deadline. Retryable failures were proven
 * pre-allocation by the classifier, and package failures (including a failed intent write)
 * called no launch.
 */
function mayExist(f) {
  return f.kind === 'terminal' || f.kind === 'timed-out';
}

/**
 * After a failed provision: the intent becomes `failed` when a sandbox may exist (reconcile
 * then calls it an orphan without waiting for a grace period), or is removed when nothing
 * was allocated. Best effort: a store that fails here leaves a `launching` intent, which
 * reconcile treats as in flight until it expires.
 */
async function settleIntent(run, def, mayHaveAllocated) {
  const ctx = run.ctx;
  if (!run.launched) return;
  try {
    if (mayHaveAllocated && def !== null) await writeIntent(run, def, 'failed');
    else await within(ctx.mappings.delete(run.sandboxId), ctx.callbackTimeoutMs);
  } catch {
    // Best effort (see above).
  }
}

/** Ends the provision's machine, once (see binding_acquisition.rs: machines are keys). */
function end(run) {
  if (run.machine >= 0) {
    binding.acquisitionEnd(run.machine);
    run.machine = -1;
  }
}

/** A launch failed before its deadline: report our package error, or the classification. */
async function reportFailure(run, def, failure) {
  // An injected clock is read here, before the classifier runs (with the default clock the
  // native side reads it at the report). Only successes give latency samples, so the
  // classifier's time never skews the latency statistics.
  const at = tick(run.ctx);
  if (isPackageError(failure)) {
    // Our own error object, rethrown as it is if the machine ends the provision on it.
    run.packageError = failure;
    binding.acquisitionPackageFailed(run.machine, failure.code, at);
    settleShared(run);
    return;
  }
  const c = await classify(run.ctx, failure, def);
  binding.acquisitionFailed(run.machine, c.code, c.retryable, at);
  settleShared(run);
}

/** A failed coordinator call: the pool is skipped as UNKNOWN: COORDINATOR_UNAVAILABLE. */
const UNAVAILABLE = null;

/**
 * One admission against the shared ledger (`capacity.coordinator`): a read sequence from
 * the database first (so a hold settled before the read started is known to be), then the
 * pool's reader, then the admission transaction. The machine decides on each answer; a
 * coordinator that fails or times out (every call is bounded natively) skips the pool as
 * `UNKNOWN: COORDINATOR_UNAVAILABLE`, so the request spills to the next pool or fails as
 * "retry later" (PROVIDER_CAPACITY_EXHAUSTED).
 */
async function admitShared(run, def) {
  const ctx = run.ctx;
  const coordinator = ctx.capacity.coordinator;
  let seq;
  try {
    seq = await coordinator.beginRead();
  } catch {
    binding.acquisitionAdmitDecided(run.machine, UNAVAILABLE, UNAVAILABLE, tick(ctx));
    return;
  }
  const demand = binding.acquisitionDemand(run.machine, await measureJson(ctx, def), tick(ctx));
  // null: the measurement was unknown or malformed; the machine skipped the pool.
  if (demand === null) return;
  let verdict;
  try {
    // An unsettled hold expires after the launch's own deadline, the mapping write and slack,
    // even if this process lives on (its answer may be lost after the commit).
    verdict = await coordinator.admit(def.id, seq, demand, run.timeoutMs + ctx.callbackTimeoutMs + INTENT_SLACK_MS);
  } catch {
    binding.acquisitionAdmitDecided(run.machine, UNAVAILABLE, UNAVAILABLE, tick(ctx));
    return;
  }
  binding.acquisitionAdmitDecided(run.machine, verdict.token ?? UNAVAILABLE, verdict.resource ?? UNAVAILABLE, tick(ctx));
}

/**
 * Writes the shared hold the machine just settled (if any) to the coordinator, without
 * waiting: the native side retries a settlement it could not write with its lease renewal.
 */
function settleShared(run) {
  const capacity = run.ctx.capacity;
  if (capacity === null || capacity.coordinator === null || run.machine < 0) return;
  const s = binding.acquisitionSettlement(run.machine);
  if (s !== null && s !== undefined) capacity.coordinator.settle(s.token, s.allocated, capacity.reservationTtlMs).catch(noop);
}

// The deadline of the current launch passed first: the machine records the timeout (the
// capacity hold stays: the sandbox may exist) and the provision ends with its error. This
// runs in a timer callback; nothing here may throw (deadlines.js guards it anyway).
function expire(run) {
  const { ctx, machine, pools, sandboxId } = run;
  try {
    binding.acquisitionTimedOut(machine, tick(ctx));
    settleShared(run);
    if (ctx.observer !== null) emitDecided(ctx.observer, machine, pools, sandboxId);
    const failure = binding.acquisitionFailure(machine);
    end(run);
    if (ctx.intents) settleIntent(run, failure.pool === null || failure.pool === undefined ? null : pools[failure.pool], true);
    run.reject(failureError(failure, pools, sandboxId, run));
  } catch {
    end(run);
    run.reject(new AcquisitionTimeoutError(`launch did not settle within ${run.timeoutMs} ms; outcome unknown`, 'ACQUISITION_TIMEOUT', { sandboxId, timeoutMs: run.timeoutMs }));
  }
}

/** The typed error for a machine's failure (the machine decided which). */
function failureError(f, pools, id, run) {
  const attempts = f.attempts.map((a) => ({ providerId: pools[a.pool].id, code: a.code, retryable: a.retryable }));
  const skipped = f.skipped.map((s) => ({ providerId: pools[s.pool].id, status: s.status, reason: s.reason }));
  const capacityRejections = run.ctx.capacity !== null ? skipped : undefined;
  const providerId = f.pool === null || f.pool === undefined ? undefined : pools[f.pool].id;
  switch (f.kind) {
    case 'package':
      return run.packageError;
    case 'timed-out': {
      return new AcquisitionTimeoutError(
        `launch on ${providerId} did not settle within ${run.timeoutMs} ms; outcome unknown (label ${SANDBOX_ID_LABEL}=${id})`,
        'ACQUISITION_TIMEOUT',
        { providerId, sandboxId: id, timeoutMs: run.timeoutMs, attempts },
      );
    }
    case 'circuit-open': {
      // Every remaining candidate's circuit excluded it at launch time (it opened, or a
      // half-open trial started, after the route was decided). Nothing was launched.
      const reasons = [{ code: 'CIRCUIT_OPEN', detail: 'circuit excluded it at launch time' }];
      return new NoEligibleProviderError(`0 providers eligible at launch: ${providerId} circuit open`, 'NO_ELIGIBLE_PROVIDER', {
        sandboxId: id,
        summary: `0 providers eligible at launch: circuit open`,
        rejections: [{ providerId, reasons }],
        attempts,
      });
    }
    case 'no-capacity':
      return new ProviderCapacityExhaustedError(
        `no provider has capacity: ${skipped.map((r) => `${r.providerId} ${r.status} ${r.reason}`).join(', ')}`,
        'PROVIDER_CAPACITY_EXHAUSTED',
        { sandboxId: id, rejections: skipped },
      );
    case 'exhausted-by-capacity':
      return new ProviderProvisioningError(
        `acquisition exhausted after ${f.launches} attempt(s); the remaining providers had no capacity`,
        f.code,
        { sandboxId: id, attempts, capacityRejections: skipped },
      );
    case 'exhausted':
      return new ProviderProvisioningError(
        `acquisition exhausted after ${f.launches} attempt(s): ${attempts.map((x) => `${x.providerId} ${x.code}`).join(', ')}`,
        f.code,
        { providerId, sandboxId: id, attempts, capacityRejections },
      );
    default:
      if (f.code === 'PROVIDER_MALFORMED_HANDLE') {
        return new ProviderProvisioningError(
          `provider ${providerId} returned a malformed handle; the sandbox may exist (label ${SANDBOX_ID_LABEL}=${id})`,
          f.code,
          { providerId, sandboxId: id, attempts },
        );
      }
      return new ProviderProvisioningError(`acquisition failed on ${providerId}: ${f.code}`, f.code, {
        providerId,
        sandboxId: id,
        attempts,
        capacityRejections,
      });
  }
}

/** NO_ELIGIBLE_PROVIDER (a typed native error value), with its events. */
function noEligible(ctx, value, id, detached) {
  const err = fromNative(value);
  err.sandboxId = id;
  if (err.code === 'NO_ELIGIBLE_PROVIDER') {
    debug(`no eligible provider: ${err.summary}`);
    if (ctx.observer !== null) {
      emit(ctx.observer, 'provision.validated', { sandboxId: id, detached });
      for (const r of err.rejections) emit(ctx.observer, 'provider.rejected', { sandboxId: id, providerId: r.providerId, reasons: r.reasons });
      emit(ctx.observer, 'provision.exhausted', { sandboxId: id, code: err.code, summary: err.summary });
    }
  }
  return err;
}

/** The decision the events report (null when it cannot be made: events are best effort). */
function decisionOf(view, compiled, detached, extras, health, now) {
  try {
    return decisionForEvents(view, compiled, detached, extras, health, now);
  } catch {
    return null;
  }
}

function emitDecision(ctx, view, decision, detached, id, candidates) {
  if (decision === null) return;
  emit(ctx.observer, 'provision.validated', { sandboxId: id, detached });
  for (const r of decision.rejected) emit(ctx.observer, 'provider.rejected', { sandboxId: id, providerId: r.providerId, reasons: r.reasons });
  emit(ctx.observer, 'provision.ranked', {
    sandboxId: id,
    summary: decision.summary,
    providerIds: Array.from(candidates, (i) => view.definitions[i].id),
  });
}

// A launch that succeeds after its deadline already failed the provision: nobody holds
// its id, so it is destroyed rather than left running unrecorded.
async function lateSuccess(ctx, def, handle, id) {
  let succeeded = false;
  if (handleId(handle) !== null) {
    try {
      succeeded = (await within(def.runtime.destroy(handle), ctx.operationTimeoutMs)) !== TIMED_OUT;
    } catch {
      succeeded = false;
    }
  }
  emit(ctx.observer, 'cleanup.completed', { sandboxId: id, providerId: def.id, reason: 'late-launch', succeeded });
}

/**
 * The caller's classifier on a launch failure: its answer read once, `{ code, retryable }`
 * when both have the right types, else nulls (outcome unknown). The classifier gets the
 * value the runtime threw, as it was (on the credential-first surface that value is already
 * the factory's sanitized error), and the caller's own definition. Nothing keeps it.
 */
async function classify(ctx, error, def) {
  if (ctx.classifier === null) return { code: null, retryable: null };
  try {
    const r = await within(ctx.classifier(error, def.definition), ctx.callbackTimeoutMs);
    const answer = r !== null && typeof r === 'object' ? guarded(() => ({ code: r.code, retryable: r.retryable })) : null;
    if (answer !== null && typeof answer.code === 'string' && typeof answer.retryable === 'boolean') return answer;
  } catch {
    // A throwing classifier proves nothing: outcome unknown.
  }
  return { code: null, retryable: null };
}

/**
 * Reports the success to the machine; with the exact default store, the same native call
 * writes the record. True when the record is stored; false when the caller's store must be
 * used, or the native write failed (then `persist` runs the failure path: it retries
 * nothing, it cleans up). A machine without an observer ends in that call (see
 * binding_acquisition.rs), whatever happens to the write.
 */
function succeeded(run, providerSandboxId) {
  const ctx = run.ctx;
  const now = tick(ctx);
  // The machine says whether it ended (an observed or coordinated one is kept: its events
  // or its hold's settlement are read next). If the record write threw, `end(run)` ends it
  // (a no-op for a machine already gone: no other machine began in between).
  if (!ctx.fastMappings) {
    if (binding.acquisitionSucceeded(run.machine, null, providerSandboxId, run.detached, ctx.fleetKey, now)) run.machine = -1;
    return false;
  }
  try {
    if (binding.acquisitionSucceeded(run.machine, ctx.mappings[STORE_KEY](), providerSandboxId, run.detached, ctx.fleetKey, now)) run.machine = -1;
    return true;
  } catch {
    return false;
  }
}

async function persist(ctx, def, handle, id, providerSandboxId, labels, detached, run) {
  const providerId = def.id;
  try {
    if (ctx.fastMappings) {
      // The native write already failed for this record.
      throw new Error('mapping write failed');
    }
    const record = { id, providerId, providerSandboxId, labels: { ...labels }, createdAt: new Date().toISOString(), detached };
    const pending = ctx.mappings.put(record);
    const r = await within(pending, ctx.callbackTimeoutMs);
    if (r === TIMED_OUT) {
      // The write may still land after the sandbox is destroyed below: remove it then.
      Promise.resolve(pending)
        .then(() => within(ctx.mappings.delete(id), ctx.callbackTimeoutMs), noop)
        .catch(noop);
      throw new Error('mapping store timed out');
    }
  } catch {
    emit(ctx.observer, 'mapping.failed', { sandboxId: id, providerId });
    let succeeded = false;
    try {
      succeeded = (await within(def.runtime.destroy(handle), ctx.operationTimeoutMs)) !== TIMED_OUT;
    } catch {
      succeeded = false;
    }
    emit(ctx.observer, 'cleanup.completed', { sandboxId: id, providerId, reason: 'mapping-failed', succeeded });
    // A sandbox that could not be destroyed is an orphan now: its intent says so.
    if (ctx.intents) await settleIntent(run, def, !succeeded);
    throw new MappingPersistenceError(
      succeeded
        ? `sandbox acquired on ${providerId} but its mapping could not be stored; the sandbox was destroyed`
        : `sandbox acquired on ${providerId} but its mapping could not be stored, and cleanup failed: find it by label ${SANDBOX_ID_LABEL}=${id}`,
      'MAPPING_PERSISTENCE_FAILED',
      { providerId, sandboxId: id, cleanup: succeeded ? 'destroyed' : 'failed' },
    );
  }
  if (ctx.observer !== null) emit(ctx.observer, 'mapping.persisted', { sandboxId: id, providerId });
}

// --- per-request extras: credential readiness, the signal resolver, the capacity order --

function needsExtras(ctx) {
  return ctx.provisioning !== null || ctx.resolver !== null || ctx.capacity !== null;
}

/** extras() for a provision: a readiness failure is reported as the provision's end. */
async function extrasFor(ctx, view, compiled, detached, request, id) {
  try {
    return await extras(ctx, view, compiled, detached, request);
  } catch (error) {
    if (isRouterError(error) && error instanceof ProvisioningAvailabilityError) {
      Object.assign(error, { sandboxId: id });
      emit(ctx.observer, 'provision.exhausted', { sandboxId: id, code: error.code });
    }
    throw error;
  }
}

/** The per-request routing inputs (null when the router has none of the three). */
async function extras(ctx, view, compiled, detached, request) {
  if (!needsExtras(ctx)) return null;
  const out = {};
  if (ctx.capacity !== null) out.providerOrder = ctx.capacity.providerOrder;
  if (ctx.provisioning !== null) out.credentialsUnavailable = await readiness(ctx, view);
  if (ctx.resolver !== null) out.signalsJson = await resolveSignals(ctx, view, compiled, detached, out, request);
  return out;
}

async function readiness(ctx, view) {
  const port = ctx.provisioning;
  const answers = await Promise.all(
    view.definitions.map(async (def, i) => {
      let answer;
      try {
        answer = await within(port.hasAvailableCredentials(def.id), ctx.callbackTimeoutMs);
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

async function resolveSignals(ctx, view, compiled, detached, extrasSoFar, request) {
  const survivors = callNative(() => view.native.survivors(compiled.native, detached, extrasSoFar));
  // Each answer is serialized on its own, inside a guard: an unreadable answer (a cycle,
  // a throwing getter or toJSON) excludes only its pool.
  const parts = await Promise.all(
    survivors.map(async (i) => {
      const def = view.definitions[i];
      let text;
      try {
        const s = await within(ctx.resolver(def.definition, request), ctx.callbackTimeoutMs);
        text = s === TIMED_OUT ? UNRESOLVED_TIMEOUT : s === undefined || s === null ? 'null' : serialize(s) ?? UNRESOLVED_UNREADABLE;
      } catch {
        text = UNRESOLVED_THREW;
      }
      return `"${i}":${text}`;
    }),
  );
  return `{${parts.join(',')}}`;
}

// Shape anchors. V8 keeps optimized code only while the object shapes it was specialized
// for exist. When no provision is in flight and a full GC runs, the shapes of the
// per-provision objects die with their last instance, and the next burst starts over in
// the interpreter (seen with --trace-deopt as "weak objects" deoptimizations of every
// function on the provision path, and under callgrind as ~13k instructions of TurboFan
// work per provision in a 10,000-provision burst). One idle instance of each keeps them.
//
// They are exported, and so held by this module's exports for the life of the process. A
// module-level `const` that no function reads is not enough: V8 keeps it in the module
// function's frame, which is gone once the module has loaded (0.7's anchors were dropped
// that way, and never anchored anything). __test__/shape-anchors.test.mjs checks both.
const SHAPE_ANCHORS = (() => {
  const { contextOf } = require('./options.js');
  const run = new InFlight(contextOf({ registry: { list: () => [] } }), false);
  SETTLING = run;
  void new Promise(takeSettlers);
  SETTLING = null;
  DEADLINES.settle(DEADLINES.add(1, run));
  return { run, call: compile({ launch: { labels: { anchor: 'shape' } } }) };
})();

/**
 * Whether sandbox `id` is being made by a provision in flight: its machine is running (any
 * router of this process: ids are 128 random bits), or its record is being written.
 * @param {import('./options.js').RouterContext} ctx
 * @param {string} id
 */
function inFlight(ctx, id) {
  return binding.acquisitionInFlight(id) || ctx.inflight.has(id);
}

module.exports = { provision, inFlight, extras, needsExtras, SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL, SHAPE_ANCHORS };
