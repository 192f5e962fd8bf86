'use strict';
// The driver: the one loop that performs every job's steps (a provision, a warm refill or
// task, an operation, a reconcile lane). The router (src/core/router/) decides every step,
// bound, event and error; this file performs each, reports the outcome with one synchronous
// native call and reads the next step from the buffer it wrote (why in JS: docs/architecture.md).
//
// The buffer is read right after the call that wrote it, before any await (every
// performer returns `took(run)`), because another job's report may write it next.

const { binding } = require('./binding.js');
const { fromNative, isRouterError, ProviderPackageMissingError } = require('./errors.js');
const { Deadlines } = require('./deadlines.js');
const { readOr, handleId } = require('./guard.js');
const { within, okWithin, TIMED_OUT } = require('./within.js');
const { serializeLenient } = require('./serialize.js');
const { emitDecided, emitRouter } = require('./events.js');
/** `clockNow(ctx)`: the router's clock for a report (undefined: the wall clock, read natively). */
const { healthNow, routerNow: clockNow } = require('./options.js');
const { readPut, readIntent } = require('./mappings.js');
const { viewOf } = require('./registry.js');

const K = binding.stepKinds();
const F = binding.stepFlags();
// The step crosses in a lent Uint32Array (kind, pool, job key, bound ms, flags; docs/performance.md).
const STEP = new Uint32Array(5);
/** What a performer answers when the job's promise was settled elsewhere (its deadline). */
const STOP = -1;
const noop = () => {};
/** A classifier's answer that says nothing (none, or unreadable). */
const NO_ANSWER = {};
/** `v` when it is of `type`, else undefined (the core reads only what is). */
const typed = (v, type) => (typeof v === type ? v : undefined);

// One timer for every launch deadline (deadlines.js); an entry is the job's record.
const DEADLINES = new Deadlines((run) => expire(run));

/** `run`'s promise, settled by its `resolve` and `reject` (a provision's, an operation's). */
function promised(run) {
  return new Promise((resolve, reject) => {
    run.resolve = resolve;
    run.reject = reject;
  });
}

/** One job in flight, a record of one shape: what JS holds for it and its launch's deadline entry. */
function jobRecord(ctx, detached, done) {
  return {
    ctx,
    done,
    /** @type {(value: object) => void} */
    resolve: noop,
    /** @type {(reason: unknown) => void} */
    reject: noop,
    // Deadline entry fields (deadlines.js).
    at: 0,
    settled: true,
    prev: null,
    next: null,
    /** the job's key in the router, -1 once ended */
    machine: -1,
    /** the router's entries of the registry it routed on, by pool index */
    pools: null,
    sandboxId: '',
    detached,
    /** the launch options' parts (compile.js launchParts) and the stamped labels */
    parts: null,
    /** @type {Record<string, string> | null} */
    labels: null,
    /** the current step: its kind, the entry of the pool it concerns, its bound and flags */
    kind: 0,
    def: null,
    bound: 0,
    flags: 0,
    /** a read sequence the reservation's transaction took (`Reserve` with `sequence`) */
    seq: undefined,
    /** the reservation's transaction wrote the launch intent (`Reserve` with `intent`) */
    intent: false,
    /** what the last launch returned, or threw */
    handle: null,
    error: null,
    /** our own package error, rethrown as it is when the job ends on it */
    packageError: null,
    providerSandboxId: '',
    /** the fleet's grant of a refill, and a claimed member */
    token: null,
    member: null,
    /** a warm task's key (lib/warm.js; its `machine` stays -1) */
    task: -1,
    /** its telemetry (lib/telemetry.js), or null */
    tel: null,
    /** an operation by id: its runtime method, arguments, answer (lib/operations.js) */
    op: null,
    /** `provision(request, { signal })`'s signal, and its listener */
    signal: null,
    onAbort: noop,
  };
}

/**
 * The step the last native call wrote, for `run` (call it right after that call): its writes
 * performed, its events (the router's, then the job's) handed on, warm work it made due polled.
 */
function took(run) {
  const flags = STEP[4];
  const kind = STEP[0];
  run.kind = kind;
  run.def = run.pools[STEP[1]];
  run.bound = STEP[3];
  run.flags = flags;
  if ((flags & F.routerEvents) !== 0) emitRouter(run.ctx);
  // `combined`: the step itself writes them, in its transaction (`persist`).
  if ((flags & F.writes) !== 0 && (flags & F.combined) === 0) writes(run);
  if ((flags & F.events) !== 0) emitDecided(run);
  if ((flags & F.warm) !== 0) run.ctx.warm?.kick();
  if ((flags & F.wake) !== 0) wakeUp(run.ctx);
  return kind;
}

/** Wakes the waiting provisions the router names (`WAKE`): their `Wait` steps end now. */
function wakeUp(ctx) {
  for (const key of binding.routerWakes(ctx.native)) ctx.waiting.get(key)?.();
}

/** Reports the outcome of `run`'s step, `fn(native, job, ...args, STEP, health now, clock now)`, and answers its next step. */
function report(run, fn, ...args) {
  const ctx = run.ctx;
  fn(ctx.native, run.machine, ...args, STEP, healthNow(ctx.health), clockNow(ctx));
  return took(run);
}

/** `report` for the steps the router reads no health on: `fn(native, job, ...args, STEP, clock now)`. */
function reportAt(run, fn, ...args) {
  fn(run.ctx.native, run.machine, ...args, STEP, clockNow(run.ctx));
  return took(run);
}

/** @type {Array<(run: object) => Promise<number>>} the performer of each step kind (`perform`) */
const PERFORMERS = [];

/** Registers `fn` as the performer of step `kind`: it does the I/O, reports, and answers `took(run)`. */
function perform(kind, fn) {
  PERFORMERS[kind] = fn;
}

/**
 * Runs job `run` from step `kind` (the one its begin or last report wrote) to its end.
 * Never rejects: a failure of our own (a bug) ends the job with the typed internal error.
 */
async function drive(run, kind) {
  try {
    for (;;) {
      if (kind === K.Succeeded) return run.done(run, true);
      if (kind === K.Done) return run.done(run, false);
      if (kind === STOP) return undefined;
      if (kind === K.Launch) {
        // Awaited in the driver's own frame, not one per job (docs/architecture.md: GC cost).
        DEADLINES.add(run.bound, run);
        let handle;
        let threw = false;
        try {
          // A synchronous throw lands here too.
          handle = await (run.tel === null ? launchOn(run) : run.ctx.telemetry.launch(run, launchOn));
        } catch (error) {
          threw = true;
          handle = error;
        }
        kind = launched(run, handle, threw);
      } else kind = await PERFORMERS[kind](run);
    }
  } catch (error) {
    crashed(run, error);
  }
  return undefined;
}

/** Ends the job's native half, once. */
function end(run) {
  if (run.machine >= 0) {
    binding.acquisitionEnd(run.ctx.native, run.machine);
    run.machine = -1;
  }
}

/** A bug of ours while driving: the job ends with the typed internal error. */
function crashed(run, error) {
  end(run);
  run.reject(isRouterError(error) ? error : fromNative(error));
}

/** How the job failed (`Done`): its typed error, its telemetry outcome; the job is ended. */
function failure(run) {
  const f = binding.acquisitionFailure(run.ctx.native, run.machine);
  const error = f.package ? run.packageError : fromNative(f.error);
  if (run.tel !== null) run.tel.outcome = f.outcome;
  end(run);
  return error;
}

/** The shared ledger's writes the job decided, performed without waiting. */
function writes(run) {
  const c = run.ctx.capacity?.coordinator ?? null;
  if (c === null) return;
  const w = binding.acquisitionWrites(run.ctx.native, run.machine);
  if (w.hold) c.settle(w.hold.token, w.hold.allocated, w.holdTtlMs).catch(noop);
  if (w.budget) c.settleBudget(w.budget.sandboxId, w.budget.how, w.budget.untilMs ?? 0).then((o) => settled(run.ctx, w, o)).catch(noop);
  if (w.cooldown) c.cool(w.cooldown.providerId, w.cooldown.ms).catch(noop);
}

/** The shared ledger's answer to a settlement (`late`: reported by the router as its event). */
function settled(ctx, w, outcome) {
  binding.routerBudgetSettled(ctx.native, w.budget.sandboxId, w.budgetPool, outcome, clockNow(ctx));
  emitRouter(ctx);
}

/** The launch on `run.def`, options fresh from our copy: a runtime changing them cannot change the next launch's. */
function launchOn(run) {
  const parts = run.parts;
  const options = { labels: { ...run.labels } };
  if (run.tel !== null) run.ctx.telemetry.labels(run, options.labels);
  if (parts.name !== undefined) options.name = parts.name;
  if (parts.env !== undefined) options.env = { ...parts.env };
  if (parts.createTimeoutSeconds !== undefined) options.createTimeoutSeconds = parts.createTimeoutSeconds;
  return run.detached ? run.def.runtime.launchDetached(options) : run.def.runtime.launch(options);
}

/** `Launch`, once the adapter's promise settled (`threw`: it rejected, or the call threw): reported. */
function launched(run, handle, threw) {
  const ctx = run.ctx;
  if (!DEADLINES.settle(run)) {
    // The deadline already ended this job (expire); what the launch made is the router's.
    if (!threw) late(ctx, run.def, handle, run.sandboxId);
    return STOP;
  }
  const now = healthNow(ctx.health);
  if (threw) {
    // Our own error object is rethrown as it is if the job ends on it.
    const ours = isRouterError(handle) && handle instanceof ProviderPackageMissingError;
    if (ours) run.packageError = handle;
    else run.error = handle;
    binding.acquisitionThrew(ctx.native, run.machine, ours ? handle.code : undefined, STEP, now, clockNow(ctx));
    return took(run);
  }
  const providerSandboxId = handleId(handle);
  if (providerSandboxId === null) {
    binding.acquisitionMalformed(ctx.native, run.machine, STEP, now, clockNow(ctx));
    return took(run);
  }
  run.handle = handle;
  run.providerSandboxId = providerSandboxId;
  binding.acquisitionSucceeded(ctx.native, run.machine, providerSandboxId, STEP, now, clockNow(ctx));
  return took(run);
}

// The current launch's deadline passed first: the router records the timeout and the job goes
// on from there. This runs in a timer callback; nothing here may throw (deadlines.js guards it).
function expire(run) {
  const ctx = run.ctx;
  try {
    binding.acquisitionTimedOut(ctx.native, run.machine, STEP, healthNow(ctx.health), clockNow(ctx));
  } catch (error) {
    crashed(run, error);
    return;
  }
  drive(run, took(run));
}

/** A launch that settled after its job was over: what the router says to do with it. */
async function late(ctx, def, handle, id) {
  const bound = binding.acquisitionLate(ctx.native, handleId(handle) !== null);
  if (bound === 0) return;
  const ok = await destroyedWithin(def, handle, bound);
  binding.acquisitionLateCleanedUp(ctx.native, id, def.id, ok, clockNow(ctx));
  emitRouter(ctx);
}

/** Destroys `handle` on `def` within `ms`; whether that succeeded. */
const destroyedWithin = (def, handle, ms) => okWithin(() => def.runtime.destroy(handle), ms);

/**
 * The pool's capacity reader within `ms`: its answer's JSON text (serialized once, leniently: a
 * value JSON cannot carry is null, which the core finds MALFORMED) and how it ended. Never throws.
 */
async function measure(def, ms) {
  let raw;
  try {
    raw = await within(def.capacity.getCapacity({ timeoutMs: ms }), ms);
  } catch {
    return { json: undefined, read: binding.ReadOutcome.Threw };
  }
  if (raw === TIMED_OUT) return { json: undefined, read: binding.ReadOutcome.TimedOut };
  return { json: serializeLenient(raw) ?? 'null', read: binding.ReadOutcome.Answered };
}

/** `router.getCapacity()`: every pool with a reader read at once, within the capacity deadline: by id, in id order, its validated measurement. */
async function getCapacity(ctx) {
  const pools = viewOf(ctx).definitions.filter((d) => d.capacity).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const reads = await Promise.all(pools.map((d) => measure(d, ctx.capacityTimeoutMs)));
  return Object.fromEntries(pools.map((d, i) => [d.id, binding.validateMeasurement(reads[i].json, reads[i].read)]));
}

function read(run) {
  return run.tel === null ? measure(run.def, run.bound) : run.ctx.telemetry.read(run, (r) => measure(r.def, r.bound));
}

/** `Admit`: the reader's answer goes to the router, which admits or skips the pool. */
perform(K.Admit, async function admit(run) {
  const m = await read(run);
  return report(run, binding.acquisitionAdmit, m.json, m.read);
});

/**
 * `Coordinate`: a read sequence (so a hold settled before the read is known to be), the reader, the admission
 * transaction. A coordinator that fails or times out (bounded natively) is a null verdict: the pool is skipped.
 */
perform(K.Coordinate, async function coordinate(run) {
  const ctx = run.ctx;
  const coordinator = ctx.capacity.coordinator;
  // The sequence the reservation's transaction took (`sequence`), else one of its own.
  let seq = run.seq;
  run.seq = undefined;
  try {
    if (seq === undefined) seq = await coordinator.beginRead();
  } catch {
    return report(run, binding.acquisitionAdmitDecided, null);
  }
  const m = await read(run);
  const demand = binding.acquisitionDemand(ctx.native, run.machine, m.json, m.read, STEP, healthNow(ctx.health), clockNow(ctx));
  // null: the measurement was unknown or malformed; the router skipped the pool.
  if (demand === null) return took(run);
  let verdict;
  try {
    verdict = await coordinator.admit(seq, demand);
  } catch {
    verdict = null;
  }
  return report(run, binding.acquisitionAdmitDecided, verdict);
});

/** `Reserve`: under a shared budget ledger, the router's demand to its transaction. */
perform(K.Reserve, async function reserve(run) {
  const ctx = run.ctx;
  const demand = binding.acquisitionBudgetDemand(ctx.native, run.machine, clockNow(ctx));
  let verdict = null;
  run.intent = false;
  if (demand !== null && demand !== undefined) {
    try {
      verdict = (run.flags & (F.sequence | F.intent)) === 0 ? await ctx.capacity.coordinator.reserveBudget(demand) : await prepared(run, demand);
    } catch {
      verdict = null;
    }
  }
  return report(run, binding.acquisitionBudgetDecided, verdict, run.intent);
});

/** The reservation with the read sequence (`sequence`) and the intent (`intent`) in one transaction. */
async function prepared(run, demand) {
  const intent = (run.flags & F.intent) === 0 ? undefined : JSON.stringify(readIntent(binding.acquisitionIntent(run.ctx.native, run.machine)));
  const p = await run.ctx.capacity.coordinator.prepareLaunch(demand, intent, (run.flags & F.sequence) !== 0);
  run.seq = p.seq ?? undefined;
  run.intent = p.intent;
  return p.verdict ?? null;
}

/** Writes the intent record the router made (`intent(record)`); whether it was stored. */
function stored(run) {
  return okWithin(() => run.ctx.mappings.intent(binding.acquisitionIntent(run.ctx.native, run.machine)), run.bound);
}

/** `Intent`: the launch intent, before the launch (no intent, no launch). */
perform(K.Intent, async (run) => report(run, binding.acquisitionIntentWritten, await stored(run)));

/** `Classify`: the caller's classifier on the thrown value and its definition; read once, not kept. */
perform(K.Classify, async function classify(run) {
  const error = run.error;
  run.error = null;
  let a = NO_ANSWER;
  try {
    const r = await within(run.ctx.classifier(error, run.def.definition), run.bound);
    if (r !== null && typeof r === 'object') a = readOr(() => ({ code: r.code, retryable: r.retryable, after: r.retryAfterMs }), NO_ANSWER);
  } catch {
    // A throwing classifier proves nothing: outcome unknown.
  }
  return report(run, binding.acquisitionClassified, typed(a.code, 'string'), typed(a.retryable, 'boolean'), typed(a.after, 'number'));
});

/** `Persist`: the record the router made, written to the caller's store. */
perform(K.Persist, async function persist(run) {
  const ctx = run.ctx;
  let ok = false;
  try {
    const record = binding.acquisitionRecord(ctx.native, run.machine);
    const pending = (run.flags & F.combined) === 0 ? ctx.mappings.put(record) : settleLaunch(run, record);
    ok = (await within(pending, run.bound)) !== TIMED_OUT;
    // A write that lands after it timed out: the router says whether to remove it.
    if (!ok && binding.acquisitionLateWrite(ctx.native)) lateWrite(ctx, pending, run.sandboxId, run.bound);
  } catch {
    ok = false;
  }
  return report(run, binding.acquisitionPersisted, ok);
});

/** `Persist` with `combined`: the record and the job's shared-ledger writes in one transaction. */
async function settleLaunch(run, record) {
  const w = binding.acquisitionWrites(run.ctx.native, run.machine);
  const hold = w.hold ? { token: w.hold.token, allocated: w.hold.allocated, ttlMs: w.holdTtlMs } : undefined;
  const c = run.ctx.capacity.coordinator;
  if (w.cooldown) c.cool(w.cooldown.providerId, w.cooldown.ms).catch(noop);
  const r = await c.settleLaunch(JSON.stringify(readPut(record)), hold, w.budget ?? undefined);
  if (r.late) settled(run.ctx, w, 'late');
}

function lateWrite(ctx, pending, id, ms) {
  Promise.resolve(pending).then(() => okWithin(() => ctx.mappings.delete(id), ms), noop);
}

/** `WarmSettle`: a refill's member written to the fleet's inventory, in one transaction. */
perform(K.WarmSettle, async function warmSettle(run) {
  const ctx = run.ctx;
  const ok = await okWithin(() => {
    const member = binding.acquisitionRefillMember(ctx.native, run.machine, clockNow(ctx));
    return ctx.warm.coordinator.warmSettle(run.token, ctx.fleet, member);
  }, run.bound);
  return report(run, binding.acquisitionPersisted, ok);
});

/** `Wait`: the provision sleeps in the router's queue for its bound, or until the router wakes it (`wakeUp`). */
perform(K.Wait, async function wait(run) {
  const ctx = run.ctx;
  await new Promise((resolve) => {
    const timer = setTimeout(woken, run.bound);
    function woken() {
      clearTimeout(timer);
      ctx.waiting.delete(run.machine);
      resolve();
    }
    ctx.waiting.set(run.machine, woken);
  });
  return report(run, binding.acquisitionWaited);
});

/** `Cleanup`: the sandbox whose record could not be written, destroyed. */
perform(K.Cleanup, async (run) => report(run, binding.acquisitionCleanedUp, await destroyedWithin(run.def, run.handle, run.bound)));

/** `Unintent`: after a failure, the intent written as failed, or removed. Best effort. */
perform(K.Unintent, async function unintent(run) {
  // Best effort: a `launching` intent left behind is in flight to reconcile until it expires.
  if ((run.flags & F.failedIntent) !== 0) await stored(run);
  else await okWithin(() => run.ctx.mappings.delete(run.sandboxId), run.bound);
  return report(run, binding.acquisitionIntentSettled);
});

module.exports = { drive, perform, report, reportAt, K, jobRecord, promised, took, end, failure, clockNow, destroyedWithin, getCapacity, wakeUp, STEP };
