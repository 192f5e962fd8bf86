'use strict';
// provision(): one acquisition, from the caller's request to its result. The request is
// read once (compile.js), the callbacks that precede routing are asked when the router has
// them (extras.js), the router begins the job and decides every step from there
// (src/core/router/provision.rs), and the driver (driver.js) performs each. This file only
// settles the caller's promise with what the job ended with.

const { binding } = require('./binding.js');
const { fromNative, isRouterError, callNative } = require('./errors.js');
const { viewOf } = require('./registry.js');
const { compile, checkLabels } = require('./compile.js');
const { emitRouter, debug, DEBUG } = require('./events.js');
const { keepHandle } = require('./operations.js');
const { healthNow } = require('./options.js');
const { needsExtras, extras: extrasOf } = require('./extras.js');
const { SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } = require('./finders.js');
const { drive, jobRecord, promised, took, end, failure, clockNow, wakeUp, STEP } = require('./driver.js');
const { readOr } = require('./guard.js');
const { sink } = require('./decisions.js');

const ENDED = binding.stepFlags().ended;

/** Acquires a sandbox. Returns the promise `provision()` hands out. */
function provision(ctx, request, detached, options) {
  const run = jobRecord(ctx, detached, settled);
  const promise = promised(run);
  // With telemetry, the acquisition runs inside the provision span's context (the request
  // is bound here and never read by lib/telemetry.js).
  if (ctx.telemetry === null) begin(run, request, options);
  else ctx.telemetry.begin(run, begin.bind(null, run, request, options));
  return promise;
}

/** `options.signal`: an AbortSignal, or nothing; anything else is the core's typed error. */
function signalOf(options) {
  const signal = options === undefined || options === null ? undefined : readOr(() => options.signal, null);
  return signal === undefined || signal instanceof AbortSignal ? (signal ?? null) : callNative(() => binding.routerOptionsRefused('signal'));
}

// The job, as above: begun at once without callbacks (nothing awaited, no frame of its own),
// after them when the router has some. Never throws.
function begin(run, request, options) {
  const ctx = run.ctx;
  try {
    run.signal = signalOf(options);
    const call = compile(request);
    const view = viewOf(ctx);
    if (!needsExtras(ctx)) return started(run, call, view, null, undefined);
    // The callbacks name the provision: its id is made first, after the request's checks.
    const id = binding.routerSandboxId(ctx.native);
    checkLabels(call, ctx.native);
    extrasOf(ctx, view, call.compiled, run.detached, request, id).then((extras) => started(run, call, view, extras, id), (error) => refused(run, error));
  } catch (error) {
    refused(run, error);
  }
  return undefined;
}

/** The router begins the job on the compiled request `call` (and the callbacks' answers), and the driver runs it. */
function started(run, call, view, extras, id) {
  const ctx = run.ctx;
  try {
    try {
      run.sandboxId = binding.beginAcquisition(ctx.native, call.compiled.native, run.detached, call.labelsJson, extras ?? undefined, id, STEP, healthNow(ctx.health), clockNow(ctx));
    } catch (error) {
      emitRouter(ctx);
      throw error;
    }
    // Our own copy, made when the request was read (the router validated its text: an
    // object of strings without the stamp keys, so the copy holds every entry), stamped.
    const labels = call.labels ?? {};
    labels[SANDBOX_ID_LABEL] = run.sandboxId;
    labels[SANDBOX_FLEET_LABEL] = ctx.fleet;
    run.machine = STEP[2];
    run.pools = view.definitions;
    run.parts = call.compiled.launchParts;
    run.labels = labels;
    if (run.signal?.aborted) binding.acquisitionAbortBegun(ctx.native, run.machine, STEP, healthNow(ctx.health), clockNow(ctx));
    else run.signal?.addEventListener('abort', (run.onAbort = () => aborted(run)), { once: true });
    const kind = took(run);
    if (DEBUG) debug(`${run.sandboxId}: attempt order ${binding.acquisitionCandidates(ctx.native, run.machine).join(', ')}`);
    // Not awaited: the driver never rejects; what the job no longer needs (the request, its
    // compiled call, the answers) is not held by any frame while it is in flight.
    drive(run, kind);
  } catch (error) {
    refused(run, error);
  }
}

/** The signal fired while the job is in flight: the router decides what that ends (a waiting one wakes to end). */
function aborted(run) {
  if (run.machine < 0) return;
  binding.acquisitionAbort(run.ctx.native, run.machine);
  wakeUp(run.ctx);
}

/** The job could not begin: the caller's promise rejected with the typed error. */
function refused(run, error) {
  run.machine = -1;
  sink(run.ctx);
  const e = isRouterError(error) ? error : fromNative(error);
  if (run.tel !== null) run.ctx.telemetry.failed(run, e);
  run.reject(e);
}

/** The job's end: the caller's promise settled with the sandbox, or with the typed error. */
function settled(run, ok) {
  const ctx = run.ctx;
  run.signal?.removeEventListener('abort', run.onAbort);
  if (!ok) {
    const error = failure(run);
    sink(ctx);
    if (run.tel !== null) ctx.telemetry.failed(run, error);
    return run.reject(error);
  }
  if ((run.flags & ENDED) === 0) end(run);
  sink(ctx);
  keepHandle(ctx.handles, run.sandboxId, run.handle);
  if (run.tel !== null) ctx.telemetry.succeeded(run);
  run.resolve({ id: run.sandboxId, providerId: run.def.id, labels: run.labels });
}

module.exports = { provision, SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL };
