'use strict';
// Budgets' I/O outside a provision: `router.budgetStatus()`, `router.settleCost()`, and the
// slot a destroyed or reclaimed sandbox gives back (with the capacity hold it kept), in
// this process and in the shared ledger. A provision's budget step is capacity.js's (the
// shared ledger's transaction) or native (the in-process ledger). Every rule (which rules
// apply, what fits, what a refusal says, how a reservation settles) is
// src/core/budget.rs's; the in-process ledger is settled natively, in the same call that
// decided it.

const { binding } = require('./binding.js');
const { SandboxRequestValidationError, callNative, fromNative } = require('./errors.js');
const { routerNow } = require('./options.js');
const { emit } = require('./events.js');

/** `router.budgetStatus()`: every rule's keys, with what is used and reserved. */
async function budgetStatus(ctx) {
  if (ctx.budgets === null) return [];
  const rows = ctx.budgets.shared
    ? await sharedStatus(ctx)
    : callNative(() => binding.routerBudgetStatus(ctx.native, routerNow(ctx)));
  return rows.map((r) => ({
    rule: r.rule,
    key: { label: r.key.label, value: r.key.value },
    limit: { cost: r.limit.cost ?? null, launches: r.limit.launches ?? null, concurrent: r.limit.concurrent ?? null },
    used: { cost: r.used.cost, launches: r.used.launches, concurrent: r.used.concurrent },
    reserved: { cost: r.reserved.cost, launches: r.reserved.launches, concurrent: r.reserved.concurrent },
    resetsAt: r.resetsAt ?? null,
  }));
}

async function sharedStatus(ctx) {
  try {
    return await ctx.capacity.coordinator.budgetStatus(binding.routerBudgetRules(ctx.native, routerNow(ctx)));
  } catch (error) {
    throw fromNative(error);
  }
}

/**
 * `router.settleCost(id, actualCost)`: the charge of sandbox `id` takes its actual cost.
 * Resolves to whether a charge was found.
 */
async function settleCost(ctx, id, actualCost) {
  if (typeof id !== 'string') throw new SandboxRequestValidationError('invalid sandbox id: must be a string', 'INVALID_SANDBOX_ID', { field: 'id' });
  if (typeof actualCost !== 'number') {
    throw new SandboxRequestValidationError('invalid settleCost: actualCost must be a finite number >= 0', 'INVALID_INPUT', { field: 'actualCost' });
  }
  const known = callNative(() => binding.routerSettleCost(ctx.native, id, actualCost));
  if (ctx.budgets === null || !ctx.budgets.shared) return known;
  try {
    return await ctx.capacity.coordinator.settleBudgetCost(id, actualCost);
  } catch (error) {
    throw fromNative(error);
  }
}

/**
 * Sandbox `id` (of pool `providerId`) is gone: its capacity hold and its budgets'
 * concurrent slot are given back, in this process and in the shared ledger. `reason`:
 * `DESTROYED` (router.destroy) or `RECLAIMED` (reconcile). Never throws: a shared ledger
 * that cannot be written now keeps the slot until its sandbox's charges expire.
 */
async function released(ctx, id, providerId, reason) {
  let budget = false;
  try {
    budget = binding.routerReleased(ctx.native, id).budget;
  } catch {
    budget = false;
  }
  const coordinator = ctx.capacity === null ? null : ctx.capacity.coordinator;
  if (coordinator !== null) {
    try {
      budget = (await coordinator.releaseSandbox(id)) || budget;
    } catch {
      // Best effort (see above).
    }
  }
  if (budget && ctx.budgets !== null) emit(ctx.observer, 'budget.released', { sandboxId: id, providerId, reason });
}

module.exports = { budgetStatus, settleCost, released };
