'use strict';
// provision(): the JS half of one acquisition, the loop. The native machine
// (src/core/acquisition.rs, through src/binding/acquisition.rs) decides every step: which
// pool is next, whether capacity admits it, whether a failure advances, ends or exhausts
// the provision, which capacity hold is kept or released, which events say so, and what
// error a failure is. This file performs what the machine asks (a launch, a classifier
// call) and reports each outcome with one native call. Around it:
//
//   extras.js    credential readiness and the signal resolver, before the machine starts
//   capacity.js  a capacity step (the reader, and the coordinator's admission)
//   intents.js   launch intents, the mapping write of a caller's store, clean-ups
//
// Why is this loop in JS at all? Every adapter call returns a JS promise. Awaiting it from
// Rust costs a ThreadsafeFunction round trip (~150 µs measured here) per hop; awaiting it
// here costs a microtask, and each report to the machine is a synchronous native call.
//
// The machine lives exactly as long as the provision: it is ended once, when the
// provision has settled (its record or intent written), so `reconcile` sees a provision in
// flight until then by asking the native index alone.

const { binding } = require('./binding.js');
const { fromNative, isRouterError } = require('./errors.js');
const { viewOf } = require('./registry.js');
const { compile, checkLabels } = require('./compile.js');
const { Deadlines } = require('./deadlines.js');
const { guarded, handleId } = require('./guard.js');
const { within } = require('./within.js');
const { decisionForEvents } = require('./explain.js');
const { emit, emitDecided, debug, DEBUG } = require('./events.js');
const { isPackageError, keepHandle } = require('./operations.js');
const { healthNow, routerNow } = require('./options.js');
const { needsExtras, extrasFor } = require('./extras.js');
const { admit, reserve, settleShared } = require('./capacity.js');
const { launchIntent, settleIntent, persist, lateSuccess } = require('./intents.js');
const { SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } = require('./finders.js');
const { claim } = require('./warm-claim.js');

const noop = () => {};
const DONE = binding.StepKind.Done;
const ADMIT = binding.StepKind.Admit;
/** Warm pools' steps (lib/warm-claim.js): Claim and Claimed are the two largest kinds. */
const CLAIM = binding.StepKind.Claim;
const RESERVE = binding.StepKind.Reserve;
const SETTLED = binding.Success.Settled;
const UNRECORDED = binding.Success.Unrecorded;
/** What `succeeded` answers for a malformed handle (not a Success). */
const MALFORMED = -1;
/** The buffer the machine writes each step into: [StepKind, pool, machine key]. */
const STEP = new Uint32Array(3);

// One timer for every launch deadline (see deadlines.js). An entry is the provision's
// InFlight, so no closure is made per launch.
const DEADLINES = new Deadlines((run) => expire(run));

/**
 * One provision in flight: the settle functions of the promise `provision()` returned, its
 * machine, and the deadline entry (see deadlines.js) of its current launch. A plain record.
 */
function inFlightRecord(ctx, detached) {
  return {
    /** @type {(value: object) => void} */
    resolve: noop,
    /** @type {(reason: unknown) => void} */
    reject: noop,
    // Deadline entry fields (deadlines.js).
    at: 0,
    settled: true,
    prev: null,
    next: null,
    ctx,
    /** the acquisition's key (src/binding/acquisition.rs), -1 once ended */
    machine: -1,
    /** the router's entries of the registry it routed on, by pool index */
    pools: null,
    sandboxId: '',
    timeoutMs: 0,
    /** our own package error (or failed intent write) the machine may end on */
    packageError: null,
    /** whether a launch was attempted (an intent may exist) */
    launched: false,
    detached,
    /** the launch options' parts (compile.js launchParts) and the stamped labels */
    parts: null,
    /** @type {Record<string, string> | null} */
    labels: null,
    /** the entry of the pool the current step concerns */
    def: null,
    /** the provider's sandbox id of the handle the last launch returned */
    providerSandboxId: '',
    /** its telemetry (lib/telemetry.js), or null: the router has none */
    tel: null,
  };
}

/** Acquires a sandbox. Returns the promise `provision()` hands out. */
function provision(ctx, request, detached) {
  const run = inFlightRecord(ctx, detached);
  const promise = new Promise((resolve, reject) => {
    run.resolve = resolve;
    run.reject = reject;
  });
  // With telemetry, the acquisition runs inside the provision span's context (the request
  // is bound here and never read by lib/telemetry.js).
  if (ctx.telemetry === null) acquire(run, request);
  else ctx.telemetry.begin(run, acquire.bind(null, run, request));
  return promise;
}

// The acquisition, start to end: the request read once (compile.js), the callbacks that
// precede the machine when the router has them (extras.js; without them nothing is awaited
// before the machine starts), the machine begun natively, then each step it asks for until
// it is done. Settles `run` with the result or the error; never rejects itself. The
// provision's promise is settled by whichever comes first: this loop (which awaits the
// adapter's own promise, with no wrapper in between) or the launch deadline (`expire`).
async function acquire(run, request) {
  const ctx = run.ctx;
  try {
    let call = compile(request);
    const view = viewOf(ctx);
    let extras = null;
    let id;
    if (needsExtras(ctx)) {
      // The callbacks name the provision: its id is made first, after the request's checks.
      id = binding.routerSandboxId(ctx.native);
      checkLabels(call);
      extras = await extrasFor(ctx, view, call.compiled, run.detached, request, id);
    }
    const now = healthNow(ctx.health);
    // The decision the events report, taken before the machine (which may take a half-open
    // circuit's trial token for this provision); events are best effort.
    let decision = null;
    if (ctx.observer !== null) {
      try {
        decision = decisionForEvents(view, call.compiled, run.detached, extras, ctx.native, now);
      } catch {
        decision = null;
      }
    }
    try {
      run.sandboxId = binding.beginAcquisition(ctx.native, call.compiled.native, run.detached, call.labelsJson, extras ?? undefined, id, STEP, now, clockNow(ctx));
    } catch (error) {
      throw refused(ctx, fromNative(error), run.detached);
    }
    // Our own copy, made when the request was read (the machine validated its text: an
    // object of strings without the stamp keys, so the copy holds every entry), stamped.
    const labels = call.labels ?? {};
    labels[SANDBOX_ID_LABEL] = run.sandboxId;
    labels[SANDBOX_FLEET_LABEL] = ctx.fleet;
    run.machine = STEP[2];
    run.pools = view.definitions;
    run.timeoutMs = call.compiled.timeoutMs;
    run.parts = call.compiled.launchParts;
    run.labels = labels;
    if (decision !== null || DEBUG) announce(run, decision);
    // What the loop no longer needs is let go: with 10,000 provisions in flight, every
    // object each one's awaiting frame still holds is copied by every young-generation GC.
    request = call = extras = decision = null;
    // Each step is read from STEP right after the native call that wrote it (begin wrote
    // the first), before any await.
    for (let kind = took(run); kind !== DONE; kind = next(run)) {
      if (kind === ADMIT) {
        await admit(run);
        continue;
      }
      if (kind === RESERVE) {
        await reserve(run);
        continue;
      }
      if (kind >= CLAIM) {
        if (await claim(run, kind)) return;
        continue;
      }
      if (ctx.intents && !(await launchIntent(run))) continue;
      run.launched = true;
      DEADLINES.add(run.timeoutMs, run);
      let handle;
      let threw = false;
      try {
        // The adapter's own promise, awaited directly (a synchronous throw lands here too).
        handle = await (run.tel === null ? launch(run) : ctx.telemetry.launch(run, launch));
      } catch (error) {
        threw = true;
        handle = error;
      }
      if (!DEADLINES.settle(run)) {
        // The deadline already ended this provision (expire); a late sandbox is destroyed.
        if (!threw) lateSuccess(ctx, run.def, handle, run.sandboxId);
        return;
      }
      if (threw) {
        await reportFailure(run, handle);
        continue;
      }
      const success = succeeded(run, handle);
      if (success === MALFORMED) continue;
      // With the default store and nothing more to read, the success call settled the
      // provision itself; otherwise its events, hold and record come first.
      if (success !== SETTLED) await recorded(run, handle, success);
      keepHandle(ctx.handles, run.sandboxId, handle);
      if (run.tel !== null) ctx.telemetry.succeeded(run);
      run.resolve({ id: run.sandboxId, providerId: run.def.id, labels: run.labels });
      return;
    }
    await exhausted(run);
  } catch (error) {
    failed(run, error);
  }
}

/** The decision's events (with an observer) and the debug line: the attempt order. */
function announce(run, decision) {
  const ctx = run.ctx;
  const id = run.sandboxId;
  const order = binding.acquisitionCandidates(run.ctx.native, run.machine);
  if (decision !== null) {
    emit(ctx.observer, 'provision.validated', { sandboxId: id, detached: run.detached });
    for (const r of decision.rejected) emit(ctx.observer, 'provider.rejected', { sandboxId: id, providerId: r.providerId, reasons: r.reasons });
    emit(ctx.observer, 'provision.ranked', { sandboxId: id, summary: decision.summary, providerIds: order });
  }
  debug(`${id}: attempt order ${order.join(', ')}`);
}

/**
 * The provision failed before or after its machine ran: settle it with `error` (one of
 * ours; anything else, a bug, becomes the typed internal error).
 */
function failed(run, error) {
  end(run);
  const e = isRouterError(error) ? error : fromNative(error);
  if (run.tel !== null) run.ctx.telemetry.failed(run, e);
  run.reject(e);
}

/** Ends the provision's machine, once. */
function end(run) {
  if (run.machine >= 0) {
    binding.acquisitionEnd(run.ctx.native, run.machine);
    run.machine = -1;
  }
}

/** The step `STEP` holds, for `run` (its pool's entry in `run.def`); events first. */
function took(run) {
  if (run.ctx.events) emitDecided(run);
  run.def = STEP[0] === DONE ? null : run.pools[STEP[1]];
  return STEP[0];
}

/** Asks the machine for its next step. */
function next(run) {
  binding.acquisitionStep(run.ctx.native, run.machine, STEP, clockNow(run.ctx));
  return took(run);
}

/** The router's clock for budgets and claims (undefined without either, or for the wall clock). */
function clockNow(ctx) {
  return ctx.budgets === null && ctx.warm === null ? undefined : routerNow(ctx);
}

/**
 * The launch on `run.def`, with launch options made fresh from our own parsed copy of the
 * request (the request is never handed on): a runtime that changes what it is given cannot
 * change the next pool's launch (nor drop its id label) or the result.
 */
function launch(run) {
  const parts = run.parts;
  const options = { labels: { ...run.labels } };
  if (run.tel !== null) run.ctx.telemetry.labels(run, options.labels);
  if (parts.name !== undefined) options.name = parts.name;
  if (parts.env !== undefined) options.env = { ...parts.env };
  if (parts.createTimeoutSeconds !== undefined) options.createTimeoutSeconds = parts.createTimeoutSeconds;
  return run.detached ? run.def.runtime.launchDetached(options) : run.def.runtime.launch(options);
}

/**
 * A launch resolved: a malformed handle is reported (MALFORMED: the machine goes on);
 * otherwise the success is reported, and the default store's record written by the same
 * call. Answers what is left (binding.Success).
 */
function succeeded(run, handle) {
  const providerSandboxId = handleId(handle);
  const now = healthNow(run.ctx.health);
  if (providerSandboxId === null) {
    binding.acquisitionMalformed(run.ctx.native, run.machine, now);
    settleShared(run);
    return MALFORMED;
  }
  run.providerSandboxId = providerSandboxId;
  const success = binding.acquisitionSucceeded(run.ctx.native, run.machine, providerSandboxId, now);
  if (success === SETTLED) run.machine = -1;
  return success;
}

/**
 * After a success the machine did not settle itself: its hold settlement and events are
 * read, the caller's store is written (UNRECORDED), then the machine is ended.
 */
async function recorded(run, handle, success) {
  const ctx = run.ctx;
  settleShared(run);
  if (ctx.events) emitDecided(run);
  try {
    if (success === UNRECORDED) await persist(run, handle, run.providerSandboxId);
    else if (ctx.observer !== null) emit(ctx.observer, 'mapping.persisted', { sandboxId: run.sandboxId, providerId: run.def.id });
  } finally {
    end(run);
  }
}

/** The machine ended without a handle: its typed error (the intent settled first). */
async function exhausted(run) {
  const failure = binding.acquisitionFailure(run.ctx.native, run.machine);
  const error = failure.package ? run.packageError : fromNative(failure.error);
  if (run.tel !== null) run.tel.outcome = failure.outcome;
  try {
    if (run.ctx.intents) await settleIntent(run, failure.mayExist);
  } finally {
    end(run);
  }
  throw error;
}

/** A launch failed before its deadline: report our package error, or the classification. */
async function reportFailure(run, failure) {
  // An injected clock is read here, before the classifier runs (with the default clock the
  // native side reads it at the report). Only successes give latency samples, so the
  // classifier's time never skews the latency statistics.
  const at = healthNow(run.ctx.health);
  if (isPackageError(failure)) {
    // Our own error object, rethrown as it is if the machine ends the provision on it.
    run.packageError = failure;
    binding.acquisitionPackageFailed(run.ctx.native, run.machine, failure.code, at);
  } else {
    const c = await classify(run.ctx, failure, run.def);
    binding.acquisitionFailed(run.ctx.native, run.machine, c.code, c.retryable, at);
  }
  settleShared(run);
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

// The deadline of the current launch passed first: the machine records the timeout (the
// capacity hold stays: the sandbox may exist) and the provision ends with its error; the
// intent is settled, then the machine ended. This runs in a timer callback; nothing here
// may throw (deadlines.js guards it anyway).
function expire(run) {
  const ctx = run.ctx;
  let error;
  try {
    binding.acquisitionTimedOut(run.ctx.native, run.machine, healthNow(ctx.health));
    settleShared(run);
    if (ctx.events) emitDecided(run);
    const failure = binding.acquisitionFailure(run.ctx.native, run.machine);
    error = fromNative(failure.error);
    if (run.tel !== null) run.tel.outcome = failure.outcome;
  } catch {
    failed(run, null);
    return;
  }
  if (run.tel !== null) ctx.telemetry.failed(run, error);
  run.reject(error);
  if (ctx.intents) settleIntent(run, true).finally(() => end(run));
  else end(run);
}

/** A refusal before any launch (labels or routing): its events, with the provision's id. */
function refused(ctx, err, detached) {
  if (err.code === 'NO_ELIGIBLE_PROVIDER') {
    const id = err.sandboxId;
    debug(`no eligible provider: ${err.summary}`);
    if (ctx.observer !== null) {
      emit(ctx.observer, 'provision.validated', { sandboxId: id, detached });
      for (const r of err.rejections) emit(ctx.observer, 'provider.rejected', { sandboxId: id, providerId: r.providerId, reasons: r.reasons });
      emit(ctx.observer, 'provision.exhausted', { sandboxId: id, code: err.code, summary: err.summary });
    }
  }
  return err;
}


// The loop's parts a warm pool's refill runs on (lib/warm.js: a refill is a launch through
// the same machine).
const loop = { inFlightRecord, took, next, launch, reportFailure, end, DEADLINES, STEP, DONE, ADMIT };

module.exports = { provision, loop, SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL };
