'use strict';
// Budgets' I/O outside a provision: `router.budgetStatus()`, `router.settleCost()`, and the
// slot a destroyed or reclaimed sandbox gives back in the shared ledger (the `Release` step).
// Every rule (the arguments' checks, which ledger answers, what a release emits) is the
// router's (src/core/router/); a provision's budget step is the driver's.

const { binding } = require('./binding.js');
const { callNative, fromNative } = require('./errors.js');
const { routerNow, textOf } = require('./options.js');
const { emitRouter } = require('./events.js');
const { drive, perform, K, jobRecord, took, end, clockNow, STEP } = require('./driver.js');

/** A query as the caller gave it, as JSON text for the core (which reads and checks it). */
const queryText = (options) => (options === undefined ? 'null' : (textOf(options, 'options') ?? '0'));

/**
 * `router.budgetStatus(options)` (`paged`) or `router.budgetCount(options)`: one page of the
 * rules' keys that hold something, with what is used and reserved; or how many there are.
 */
async function budgetStatus(ctx, options, paged) {
  const q = queryText(options);
  const local = paged ? binding.routerBudgetStatus : binding.routerBudgetCount;
  if (ctx.budgets === null || !ctx.budgets.shared) return callNative(() => local(ctx.native, routerNow(ctx), q));
  const query = callNative(() => binding.routerBudgetQuery(q, paged));
  const c = ctx.capacity.coordinator;
  try {
    const rules = binding.routerBudgetRules(ctx.native, routerNow(ctx));
    return await (paged ? c.budgetStatus(rules, query) : c.budgetCount(rules, query));
  } catch (error) {
    throw fromNative(error);
  }
}

/**
 * `router.settleCost(id, actualCost)`: the charge of sandbox `id` takes its actual cost.
 * Resolves to whether a charge was found (by the shared ledger, when the budgets live there).
 */
async function settleCost(ctx, id, actualCost) {
  const answer = callNative(() => binding.routerSettleCost(ctx.native, id, actualCost));
  if (!answer.shared) return answer.known;
  try {
    return await ctx.capacity.coordinator.settleBudgetCost(id, actualCost);
  } catch (error) {
    throw fromNative(error);
  }
}

/**
 * `Release`: the sandbox's slot given back in the shared ledger (the coordinator bounds its
 * own calls). One that cannot be written now keeps the slot until its charges expire.
 */
async function release(run) {
  let givenBack = false;
  try {
    givenBack = (await run.ctx.capacity.coordinator.releaseSandbox(run.sandboxId)) === true;
  } catch {
    givenBack = false;
  }
  binding.operationReleased(run.ctx.native, run.machine, givenBack, STEP, clockNow(run.ctx));
  return took(run);
}

perform(K.Release, release);

function reclaimEnded(run) {
  end(run);
  emitRouter(run.ctx);
  run.resolve();
}

/**
 * Sandbox `id` of pool `providerId`, reclaimed by `reconcile`, is gone: its capacity hold and
 * budget slot are given back (in this process, then in the shared ledger), with
 * `budget.released` (`RECLAIMED`) when a slot came back. Resolves when done; never rejects.
 */
function released(ctx, id, providerId) {
  const run = jobRecord(ctx, false, reclaimEnded);
  const promise = new Promise((resolve) => {
    run.resolve = resolve;
    run.reject = () => resolve();
  });
  try {
    if (!binding.beginReclaim(ctx.native, id, providerId, STEP, clockNow(ctx))) return Promise.resolve();
  } catch {
    return Promise.resolve();
  }
  run.machine = STEP[2];
  run.sandboxId = id;
  run.pools = [null];
  drive(run, took(run));
  return promise;
}

module.exports = { budgetStatus, settleCost, released };
