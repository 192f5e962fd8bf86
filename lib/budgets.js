'use strict';
// Budgets' I/O outside a provision: `router.budgetStatus()` and `router.settleCost()`. Every
// rule (the arguments' checks, which ledger answers) is the router's (src/core/router/); a
// provision's budget step is the driver's, a destroy's `Release` is lib/operations.js's.

const { binding } = require('./binding.js');
const { callNative, fromNative } = require('./errors.js');
const { routerNow } = require('./options.js');
const { argText } = require('./serialize.js');

/**
 * `router.budgetStatus(options)` (`paged`) or `router.budgetCount(options)`: one page of the
 * rules' keys that hold something, with what is used and reserved; or how many there are.
 */
async function budgetStatus(ctx, options, paged) {
  // The query as the caller gave it, as JSON text for the core (which reads and checks it).
  const q = argText(options, 'input');
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

module.exports = { budgetStatus, settleCost };
