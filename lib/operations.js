'use strict';
// Operations by id (runScript, uploadBundle, stop, start, getSandbox, destroy): jobs of the
// router (src/core/router/operation.rs), driven by the one loop (driver.js), which decides
// every step, bound, error and event. This file reads the caller's arguments once, inside a
// guard, into copies of our own, performs what each step asks and reports how it settled.

const { binding } = require('./binding.js');
const { fromNative, isRouterError, ProviderPackageMissingError } = require('./errors.js');
const { entryOf } = require('./registry.js');
const { readOr, methodOf, thrownFacts } = require('./guard.js');
const { within, awaitOr, TIMED_OUT } = require('./within.js');
const { serializeLenient } = require('./serialize.js');
const { emitRouter } = require('./events.js');
const { drive, perform, reportAt, K, jobRecord, promised, took, clockNow, STEP } = require('./driver.js');

const F = binding.operationFlags();
const SF = binding.stepFlags();
/** The router's bound on the handles kept from launch (src/core/router/operation.rs). */
const { HANDLE_LIMIT } = binding;
/** An operation's pools before its record named one. */
const NO_POOL = [null];
/** What a read that threw answers (`begin`'s arguments, `ReadRecord`'s record). */
const FAILED = Symbol('failed');

/** Keeps `handle` for sandbox `id`; past HANDLE_LIMIT the oldest is dropped. */
function keepHandle(handles, id, handle) {
  handles.set(id, handle);
  if (handles.size > HANDLE_LIMIT) handles.delete(handles.keys().next().value);
}

// A caller's arguments, read once (inside `begin`'s guard: a throw is unreadable) into
// `{ port, entries? }`: `port`, our copy, is what the runtime is given once the router found it
// valid; `entries`, runScript's `env` pairs for the router to check. Undefined: not an object.

/** runScript's options: the fields given (`env`, when an object, copied). */
function scriptOf(options) {
  if (options === null || typeof options !== 'object') return undefined;
  const port = { command: options.command };
  const { sessionId, timeoutMs, env } = options;
  if (sessionId !== undefined) port.sessionId = sessionId;
  if (timeoutMs !== undefined) port.timeoutMs = timeoutMs;
  if (env === null || typeof env !== 'object') {
    if (env !== undefined) port.env = env;
    return { port };
  }
  const entries = Object.entries(env);
  port.env = Object.fromEntries(entries);
  return { port, entries };
}

/** A bundle: its files copied when they are an array (each object entry as `{ source, destination }`). */
function bundleOf(bundle) {
  if (bundle === null || typeof bundle !== 'object') return undefined;
  const list = bundle.files;
  const copy = (f) => (f !== null && typeof f === 'object' ? { source: f.source, destination: f.destination } : f);
  return { port: { files: Array.isArray(list) ? Array.from(list, copy) : undefined } };
}

const none = () => undefined;

/** The job's end (the router ends it natively): the caller's promise settled. */
function settled(run) {
  const ctx = run.ctx;
  if ((run.flags & F.forget) !== 0) ctx.handles.delete(run.sandboxId);
  const ending = binding.operationEnd(ctx.native, run.machine);
  run.machine = -1;
  if (ending.error !== undefined) return run.reject(ending.package ? run.packageError : fromNative(ending.error));
  emitRouter(ctx);
  return run.resolve(ending.answer === binding.OperationAnswer.Runtime ? run.op.value : ending.record);
}

/** Begins operation `kind` on `id` with the arguments `read` reads, and drives it; its promise. */
function begin(ctx, kind, id, read) {
  const run = jobRecord(ctx, false, settled);
  const promise = promised(run);
  const got = readOr(read, FAILED);
  const args = got === FAILED ? undefined : got;
  run.sandboxId = binding.beginOperation(ctx.native, kind, id, args, got !== FAILED, STEP, clockNow(ctx));
  run.machine = STEP[2];
  run.pools = NO_POOL;
  run.op = { method: undefined, getById: undefined, args: args === undefined ? [] : [args.port], value: undefined };
  drive(run, took(run));
  return promise;
}

/** Operation `kind`: its promise, never a synchronous throw; with telemetry, inside its span. */
function operation(ctx, name, kind, id, read) {
  const f = () => {
    try {
      return begin(ctx, kind, id, read);
    } catch (error) {
      return Promise.reject(isRouterError(error) ? error : fromNative(error));
    }
  };
  return ctx.telemetry === null ? f() : ctx.telemetry.operation(name, f);
}

// --- the steps ------------------------------------------------------------------------------

/** `ReadRecord`: the sandbox's record from the caller's store, as JSON text (`null`: none). */
perform(K.ReadRecord, async function readRecord(run) {
  const raw = await awaitOr(() => within(run.ctx.mappings.get(run.sandboxId), run.bound), FAILED);
  let json;
  let read = binding.ReadOutcome.Answered;
  if (raw === FAILED) read = binding.ReadOutcome.Threw;
  else if (raw === TIMED_OUT) read = binding.ReadOutcome.TimedOut;
  // Read once, by the serialization (a value it cannot carry is null; one it cannot write, absent).
  else json = raw === null || raw === undefined ? 'null' : (serializeLenient(raw) ?? undefined);
  return reportAt(run, binding.operationRead, json, read);
});

/** `FindPool`: the record's pool in the caller's registry (I/O: a caller's `get` may run). */
perform(K.FindPool, function findPool(run) {
  const ctx = run.ctx;
  const target = binding.operationTarget(ctx.native, run.machine);
  const def = entryOf(ctx.registry, target.providerId) ?? null;
  const rt = def === null ? null : def.runtime;
  if (def !== null) run.pools = [def];
  run.providerSandboxId = target.providerSandboxId;
  // The methods a `Call` and a `Resolve` would call, read once here: what is reported is what is called.
  run.op.method = target.method === undefined ? undefined : methodOf(rt, target.method);
  run.op.getById = methodOf(rt, 'getById');
  // The handle from launch, if this process keeps it: what a `Call` uses unless re-resolved.
  run.op.value = ctx.handles.get(run.sandboxId);
  return reportAt(run, binding.operationFound, def !== null, run.op.method !== undefined, run.op.getById !== undefined, run.op.value !== undefined);
});

/** A runtime call within the step's bound: its value kept in `run.op.value`, how it settled reported. */
async function awaited(run, call) {
  let value;
  try {
    value = await within(call(run), run.bound);
  } catch (error) {
    // Our own package error is kept (rethrown as it is if the job ends on it).
    const ours = isRouterError(error) && error instanceof ProviderPackageMissingError;
    if (ours) run.packageError = error;
    const f = thrownFacts(ours ? undefined : error);
    return reportAt(run, binding.operationThrew, ours, f.values, f.unreadable);
  }
  if (value === TIMED_OUT) return reportAt(run, binding.operationTimedOut);
  run.op.value = value;
  return reportAt(run, binding.operationAnswered, value);
}

/** `Resolve`: the sandbox re-resolved as owned. */
perform(K.Resolve, (run) => awaited(run, (r) => r.op.getById.call(r.def.runtime, r.providerSandboxId, { owned: true })));
/** `Call`: the runtime's method on the handle (`ID_HANDLE`: the provider id is the handle). */
perform(K.Call, (run) => awaited(run, (r) => r.op.method.call(r.def.runtime, (r.flags & F.idHandle) !== 0 ? { id: r.providerSandboxId } : r.op.value, ...r.op.args)));

/** `Unmap`: the record removed from the store; with `combined`, with its holds and budget slot (`forget`). */
perform(K.Unmap, async function unmap(run) {
  const ctx = run.ctx;
  const combined = (run.flags & SF.combined) !== 0;
  const unmapped = () => (combined ? ctx.capacity.coordinator.forget(run.sandboxId) : ctx.mappings.delete(run.sandboxId));
  const f = await awaitOr(() => within(unmapped(), run.bound), TIMED_OUT);
  const ok = f !== TIMED_OUT;
  if (combined) return reportAt(run, binding.operationForgotten, ok, ok && f.mapped === true, ok && f.budget === true);
  return reportAt(run, binding.operationUnmapped, ok);
});

/** `Release`: the slot given back in the shared ledger (self-bounded); one not written now waits out its charges. */
perform(K.Release, async function release(run) {
  const givenBack = (await awaitOr(() => run.ctx.capacity.coordinator.releaseSandbox(run.sandboxId), false)) === true;
  return reportAt(run, binding.operationReleased, givenBack);
});

module.exports = {
  runScript: (ctx, id, options) => operation(ctx, 'runScript', binding.OperationKind.RunScript, id, () => scriptOf(options)),
  uploadBundle: (ctx, id, bundle) => operation(ctx, 'uploadBundle', binding.OperationKind.UploadBundle, id, () => bundleOf(bundle)),
  stop: (ctx, id) => operation(ctx, 'stop', binding.OperationKind.Stop, id, none),
  start: (ctx, id) => operation(ctx, 'start', binding.OperationKind.Start, id, none),
  getSandbox: (ctx, id) => operation(ctx, 'getSandbox', binding.OperationKind.GetSandbox, id, none),
  destroy: (ctx, id) => operation(ctx, 'destroy', binding.OperationKind.Destroy, id, none),
  keepHandle,
  HANDLE_LIMIT,
};
