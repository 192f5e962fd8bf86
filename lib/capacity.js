'use strict';
// Capacity: each pool's reader, bounded by the capacity deadline, and a provision's
// capacity step; with a coordinator, also the budget step it keeps in the same database
// (the reservation, and the settlements the machine decides). A read is an observation, never an exception: a reader that throws, times
// out or answers something malformed is an `unknown` measurement with a reason, and the
// native core validates every answer strictly (src/core/capacity.rs) before anything is
// admitted on it.

const { binding } = require('./binding.js');
const { viewOf } = require('./registry.js');
const { serializeLenient } = require('./serialize.js');
const { within, TIMED_OUT } = require('./within.js');
const { healthNow, routerNow } = require('./options.js');

const READ_FAILED = JSON.stringify({ status: 'unknown', reason: 'READ_FAILED' });
const TIMEOUT = JSON.stringify({ status: 'unknown', reason: 'TIMEOUT' });
const noop = () => {};

/**
 * One pool's measurement as JSON text (serialized once, inside a guard, leniently: a value
 * JSON cannot carry is written as null, which the native check finds MALFORMED): what the
 * reader answered, or an unknown measurement. Never throws. The native side validates it.
 */
async function measureJson(ctx, def) {
  const timeoutMs = ctx.capacityTimeoutMs;
  let raw;
  try {
    raw = await within(def.capacity.getCapacity({ timeoutMs }), timeoutMs);
  } catch {
    return READ_FAILED;
  }
  if (raw === TIMED_OUT) return TIMEOUT;
  return serializeLenient(raw) ?? 'null';
}

/**
 * A provision's capacity step on `run.def`: the reader's answer goes to the machine, which
 * admits or skips the pool against the router's ledger. With a coordinator
 * (`capacity.coordinator`), against the shared ledger: a read sequence from the database
 * first (so a hold settled before the read started is known to be), then the reader, then
 * the coordinator's admission transaction; a coordinator that fails or times out (every
 * call is bounded natively) skips the pool as `UNKNOWN: COORDINATOR_UNAVAILABLE`, so the
 * request spills to the next pool or fails as "retry later".
 */
async function admit(run) {
  const ctx = run.ctx;
  const coordinator = ctx.capacity.coordinator;
  if (coordinator === null) {
    const measured = await (run.tel === null ? measureJson(ctx, run.def) : ctx.telemetry.read(run, measureJson));
    binding.acquisitionAdmit(run.ctx.native, run.machine, measured, healthNow(ctx.health));
    return;
  }
  let seq;
  try {
    seq = await coordinator.beginRead();
  } catch {
    binding.acquisitionAdmitDecided(run.ctx.native, run.machine, null, healthNow(ctx.health));
    settleBudget(run);
    return;
  }
  const measured = await (run.tel === null ? measureJson(ctx, run.def) : ctx.telemetry.read(run, measureJson));
  const demand = binding.acquisitionDemand(run.ctx.native, run.machine, measured, healthNow(ctx.health));
  // null: the measurement was unknown or malformed; the machine skipped the pool.
  if (demand === null) {
    settleBudget(run);
    return;
  }
  let verdict;
  try {
    verdict = await coordinator.admit(demand.providerId, seq, demand.dims, demand.holdMs, demand.sandboxId);
  } catch {
    verdict = null;
  }
  binding.acquisitionAdmitDecided(run.ctx.native, run.machine, verdict, healthNow(ctx.health));
  // A pool skipped here gives back the budget reserved for it.
  settleBudget(run);
}

/**
 * Writes the shared hold the machine just settled (if any) to the coordinator, without
 * waiting: the native side retries a settlement it could not write with its lease renewal.
 */
function settleShared(run) {
  const capacity = run.ctx.capacity;
  if (capacity === null || capacity.coordinator === null) return;
  const s = binding.acquisitionSettlement(run.ctx.native, run.machine);
  if (s !== null && s !== undefined) capacity.coordinator.settle(s.token, s.allocated, capacity.reservationTtlMs).catch(noop);
  settleBudget(run);
}

/**
 * A provision's budget step under a shared ledger (StepKind.Reserve): the machine's demand
 * goes to the coordinator's transaction; its answer (or null: the database could not be
 * asked, and the rules' `onStoreDown` decide) back to the machine.
 */
async function reserve(run) {
  const ctx = run.ctx;
  const demand = binding.acquisitionBudgetDemand(run.ctx.native, run.machine, routerNow(ctx));
  let verdict = null;
  if (demand !== null && demand !== undefined) {
    try {
      verdict = await ctx.capacity.coordinator.reserveBudget(demand);
    } catch {
      verdict = null;
    }
  }
  binding.acquisitionBudgetDecided(run.ctx.native, run.machine, verdict, routerNow(ctx));
}

/**
 * Writes the budget settlement the machine just decided (if any) to the shared ledger,
 * without waiting (a reservation not settled in time is freed by its expiry). Budgets are
 * shared exactly when the router has a coordinator.
 */
function settleBudget(run) {
  const ctx = run.ctx;
  if (ctx.budgets === null || !ctx.budgets.shared) return;
  const s = binding.acquisitionBudgetSettlement(run.ctx.native, run.machine);
  if (s !== null && s !== undefined) ctx.capacity.coordinator.settleBudget(s.sandboxId, s.how, s.untilMs ?? 0).catch(noop);
}

/**
 * Reads every pool that has a capacity reader, concurrently, each bounded by the capacity
 * deadline. Only reads: nothing is launched, started or created. Keys in id order.
 */
async function getCapacity(ctx) {
  const view = viewOf(ctx);
  const withReader = view.definitions.filter((d) => d.capacity);
  const texts = await Promise.all(withReader.map((d) => measureJson(ctx, d)));
  const out = {};
  withReader
    .map((d, i) => [d.id, texts[i]])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .forEach(([id, text]) => {
      out[id] = binding.validateMeasurement(text);
    });
  return out;
}

module.exports = { measureJson, admit, reserve, settleShared, getCapacity };
