'use strict';
// reconcile(): compares what the providers hold under this router's stamp with the mapping
// store, per pool, and (with `reclaim: true`) cleans up the difference. The router
// (src/core/router/reconcile.rs) decides its options, deadline, bounds, concurrency,
// outcomes, report and events; the performers below do its I/O and report each as a fact.
// The I/O is concurrent: a run is driven by lanes, each a job of the driver (a step flagged
// `fork` starts the lanes the router asks for).
//
// The report and the events carry ids, counts and reason codes, never provider text.

const { binding } = require('./binding.js');
const { fromNative, callNative } = require('./errors.js');
const { viewOf } = require('./registry.js');
const { readOr, thrownFacts, NO_FACTS } = require('./guard.js');
const { within, awaitOr, answerWithin, settledWithin, lookupOwned, TIMED_OUT } = require('./within.js');
const { serializeLenient } = require('./serialize.js');
const { hasMethods, inFlight, othersInFlight } = require('./options.js');
const { finderFor, nativeFinderOf, SANDBOX_FLEET_LABEL } = require('./finders.js');
const { drive, perform, jobRecord, took, K, STEP } = require('./driver.js');

const F = binding.stepFlags();

/** Reconciles the pools' stamped sandboxes with the mapping store. @param {import('./options.js').RouterContext} ctx */
async function reconcile(ctx, options) {
  const view = viewOf(ctx);
  const facts = {
    hasList: hasMethods(ctx.mappings, ['list']),
    fleetInventory: ctx.combined,
    nativeFinders: Uint8Array.from(view.definitions, (d) => (nativeFinderOf(d) !== null ? 1 : 0)),
  };
  return new Promise((resolve, reject) => {
    // The run's promise: the first lane to settle it wins (a promise settles once).
    const job = { resolve, reject };
    callNative(() => binding.reconcileBegin(ctx.native, serializeLenient(options) ?? undefined, facts, STEP));
    start(ctx, view.definitions, job);
  });
}

/** Starts a lane of the run from the step just written (its key is `STEP[2]`). */
function start(ctx, pools, job) {
  const run = jobRecord(ctx, false, ended);
  run.pools = pools;
  // A bug of ours while driving a lane: the run is abandoned with the typed error.
  run.reject = (error) => {
    binding.reconcileAbort(ctx.native, run.lane);
    job.reject(error);
  };
  run.lane = STEP[2];
  run.job = job;
  drive(run, next(run));
}

/** The step the last report wrote, for lane `run`; with `fork`, the lanes it asks for first. */
function next(run) {
  const kind = took(run);
  if ((run.flags & F.fork) !== 0) {
    for (let n = binding.reconcileForks(run.ctx.native, run.lane); n > 0; n--) {
      binding.reconcileLane(run.ctx.native, run.lane, STEP);
      start(run.ctx, run.pools, run.job);
    }
  }
  return kind;
}

/** A lane is over: with the run's report (`Succeeded`), its failure, or nothing (idle). */
function ended(run, ok) {
  const ctx = run.ctx;
  if (!ok) {
    const error = binding.reconcileEnd(ctx.native, run.lane);
    if (error !== null && error !== undefined) run.job.reject(fromNative(error));
    return;
  }
  const r = binding.reconcileReport(ctx.native, run.lane);
  const pools = {};
  for (const p of r.pools) {
    const pool = { providerId: p.providerId, status: p.status, finder: p.finder, counts: p.counts, orphan: rows(p.orphan), staleMapping: rows(p.staleMapping), mapped: p.mapped, pending: rows(p.pending) };
    if (p.reason !== undefined) pool.reason = p.reason;
    pools[p.providerId] = pool;
  }
  const { reclaim, fleet, graceMs, startedAt, durationMs, timedOut, staleIntents, outcomes, totals } = r;
  if (ctx.telemetry !== null) ctx.telemetry.reconciled(totals.orphan, totals.staleMapping, staleIntents.length);
  run.job.resolve({ reclaim, fleet, graceMs, startedAt, durationMs, timedOut, pools, staleIntents, outcomes, totals });
}

/** Documented items `{ sandboxId, providerSandboxId, reason }` from the report's columns. */
const rows = (c) => Array.from(c.reasons, (reason, i) => ({ sandboxId: c.sandboxIds[i], providerSandboxId: c.providerSandboxIds[i], reason }));

/** `[how, value, error]` (within.js) kept on `run`: a value (a lookup's provider id too) as its handle, a rejection as its error. */
function kept(run, [how, value, error]) {
  if (how === binding.ReconcileSettled.Threw) run.error = error;
  else if (how !== binding.ReconcileSettled.TimedOut) run.handle = value;
  return how;
}

/** Reports how the lane's call settled; a rejection's facts read once, each on its own (the core judges them). */
function report(run, how) {
  const f = how === binding.ReconcileSettled.Threw ? thrownFacts(run.error) : NO_FACTS;
  run.error = null;
  binding.reconcileSettled(run.ctx.native, run.lane, how, f.values, f.unreadable, STEP);
  return next(run);
}

/** `ReconcileList`: the pool's finder, within the bound. */
perform(K.ReconcileList, async function list(run) {
  const r = await awaitOr(() => finderFor(run.def).find(run.ctx.fleet, run.bound), null);
  binding.reconcileListed(run.ctx.native, run.lane, r === null, r?.listing, r?.reason ?? undefined, STEP);
  return next(run);
});

/** `ReconcileRead`: the store's mappings (or, flagged, intents), read once, as columns. */
perform(K.ReconcileRead, async function read(run) {
  const ctx = run.ctx;
  const intents = (run.flags & F.intents) !== 0;
  const raw = await awaitOr(() => within(intents ? ctx.mappings.intents() : ctx.mappings.list(), run.bound), TIMED_OUT);
  const columns = () => (Array.isArray(raw) ? (intents ? Array.from(raw, readIntent) : readMappings(Array.from(raw))) : undefined);
  const records = raw === TIMED_OUT ? undefined : readOr(columns, undefined);
  if (intents) binding.reconcileIntents(ctx.native, run.lane, records, STEP);
  else binding.reconcileMappings(ctx.native, run.lane, records, STEP);
  return next(run);
});

const str = (v) => (typeof v === 'string' ? v : undefined);
const num = (v) => (typeof v === 'number' ? v : undefined);
const labelOf = (labels, key) => (labels !== null && typeof labels === 'object' ? str(labels[key]) ?? null : null);

/** One intent record's fields that have their types (read inside the caller's guard). */
function readIntent(i) {
  if (i === null || typeof i !== 'object') return {};
  const { id, providerId, state, expiresAt, ownerHost, ownerPid, ownerSession } = i;
  return { id: str(id), providerId: str(providerId), state: str(state), expiresAt: num(expiresAt), ownerHost: str(ownerHost), ownerPid: num(ownerPid), ownerSession: str(ownerSession) };
}

/** The mapping records as columns (read inside the caller's guard; null: not a string). */
function readMappings(records) {
  const m = { ids: [], providerIds: [], providerSandboxIds: [], fleets: [], createdAtMs: null, warm: [] };
  const created = [];
  for (const r of records) {
    // Each field read once, in this order.
    const { labels, createdAt, id, providerId, providerSandboxId } = r !== null && typeof r === 'object' ? r : {};
    m.ids.push(str(id) ?? null);
    m.providerIds.push(str(providerId) ?? null);
    m.providerSandboxIds.push(str(providerSandboxId) ?? null);
    m.fleets.push(labelOf(labels, SANDBOX_FLEET_LABEL));
    m.warm.push(labelOf(labels, binding.SANDBOX_WARM_LABEL_KEY));
    created.push(typeof createdAt === 'string' ? Date.parse(createdAt) : NaN);
  }
  m.createdAtMs = Float64Array.from(created);
  return m;
}

/** `ReconcileSignal`: signal 0 to each pid the router names; whether it threw, and its code. */
perform(K.ReconcileSignal, async function signal(run) {
  const ctx = run.ctx;
  const pids = binding.reconcilePids(ctx.native, run.lane);
  const threw = new Uint8Array(pids.length);
  const codes = pids.map((pid, i) => {
    try {
      process.kill(pid, 0);
      return null;
    } catch (e) {
      threw[i] = 1;
      return typeof e?.code === 'string' ? e.code : null;
    }
  });
  binding.reconcileSignalled(ctx.native, run.lane, threw, codes, othersInFlight(ctx.native), STEP);
  return next(run);
});

/** `ReconcileRecheck`: an action begins; whether a provision of this process is making its id. */
perform(K.ReconcileRecheck, async function recheck(run) {
  const t = binding.reconcileTarget(run.ctx.native, run.lane);
  run.sandboxId = t.sandboxId;
  run.providerSandboxId = t.providerSandboxId ?? '';
  binding.reconcileRechecked(run.ctx.native, run.lane, inFlight(t.sandboxId), STEP);
  return next(run);
});

/** `ReconcileWarmTake`: the idle member out of the fleet's inventory. */
perform(K.ReconcileWarmTake, async function warmTake(run) {
  const take = () => run.ctx.capacity.coordinator.warmTake(run.sandboxId);
  return report(run, kept(run, await settledWithin(take, run.bound)));
});

/** `ReconcileRecord`: the store's record of the id now. */
perform(K.ReconcileRecord, async function record(run) {
  return report(run, kept(run, await settledWithin(() => run.ctx.mappings.get(run.sandboxId), run.bound)));
});

/** `ReconcileLookup`: the sandbox re-resolved as owned (a runtime without getById: its provider id). */
perform(K.ReconcileLookup, async function lookup(run) {
  return report(run, kept(run, await lookupOwned(run.def.runtime, run.providerSandboxId, run.bound)));
});

/** A destroy or a delete of the id, reported; once it resolved, the handle kept for the id is let go. */
async function removed(run, call) {
  const how = kept(run, await settledWithin(call, run.bound));
  if (how === binding.ReconcileSettled.Value || how === binding.ReconcileSettled.Nothing) run.ctx.handles.delete(run.sandboxId);
  return report(run, how);
}

/** `ReconcileDestroy`: the handle the lookup answered, destroyed. */
perform(K.ReconcileDestroy, (run) => removed(run, () => run.def.runtime.destroy(run.handle)));
/** `ReconcileDelete`: the store's record (or intent) of the id, deleted. */
perform(K.ReconcileDelete, (run) => removed(run, () => run.ctx.mappings.delete(run.sandboxId)));

/** `ReconcileRelease`: the sandbox's slot given back in the shared ledger (a timeout: not released). */
perform(K.ReconcileRelease, async function release(run) {
  const released = (await answerWithin(() => run.ctx.capacity.coordinator.releaseSandbox(run.sandboxId), run.bound)) === true;
  binding.reconcileReleased(run.ctx.native, run.lane, released, STEP);
  return next(run);
});

module.exports = { reconcile };
