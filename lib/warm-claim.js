'use strict';
// A provision's claim of a warm member (docs/warm-pools.md): the step the acquisition
// machine asks for when the current candidate keeps a warm pool. The machine decided
// whether the request may take a member and, from this process's inventory, took it
// already (`Claimed`); with the fleet's inventory (a PostgreSQL coordinator) this file asks
// the database (`Claim`: one transaction, FOR UPDATE SKIP LOCKED). Either way the member is
// re-resolved when this process holds no live handle of it (`getById(id, { owned: true })`):
// a member that is gone is dropped and counted lost, and the machine goes on to the cold
// launch of the same pool, as on any miss.
//
// Why a file of its own, beside lib/warm.js? provision.js calls it, and lib/warm.js (the
// refills) calls provision.js's loop: keeping the claim here keeps the requires acyclic.

const { binding } = require('./binding.js');
const { within, TIMED_OUT } = require('./within.js');
const { hasMethods, routerNow } = require('./options.js');
const { callNative } = require('./errors.js');
const { emit, emitDecided } = require('./events.js');
const { keepHandle } = require('./operations.js');
const { persist } = require('./intents.js');
const { SANDBOX_ID_LABEL } = require('./finders.js');

const CLAIMED = binding.StepKind.Claimed;
/** `launch_type` of a provision served by a warm member (docs/telemetry.md). */
const WARM = 'warm';
const noop = () => {};

/**
 * `handle`, or the member re-resolved as owned: null when it is gone (or cannot be read).
 * A runtime without `getById` cannot re-resolve: its handle is the provider id.
 */
async function ownedHandle(ctx, def, providerSandboxId) {
  const rt = def.runtime;
  if (!hasMethods(rt, ['getById'])) return { id: providerSandboxId };
  try {
    const h = await within(rt.getById(providerSandboxId, { owned: true }), ctx.operationTimeoutMs);
    return h === TIMED_OUT || h === undefined ? null : h;
  } catch {
    return null;
  }
}

/**
 * A fleet member claimed with this provision's charge is gone: the charge goes back to the
 * provision, whose cold launch settles it. Bounded, best effort: when the database cannot
 * be asked then either, the gone member keeps the charge (its slot stays held; noted in
 * docs/warm-pools.md).
 */
async function unchargeLost(ctx, memberId, provisionId) {
  try {
    await within(ctx.warm.coordinator.warmUncharge(memberId, provisionId), ctx.callbackTimeoutMs);
  } catch {
    // Best effort, as above.
  }
}

/** Removes a record, bounded, best effort. */
function forgetRecord(ctx, id) {
  try {
    Promise.resolve(within(ctx.mappings.delete(id), ctx.callbackTimeoutMs)).catch(noop);
  } catch {
    // Best effort: reconcile removes a stale mapping later.
  }
}

/** Under shared budgets, the provision whose reservation a fleet claim charges (else undefined). */
function chargeOf(run) {
  return run.ctx.budgets !== null && run.ctx.budgets.shared ? run.sandboxId : undefined;
}

/**
 * The fleet's answer to a `Claim` step: the member now mapped to this provision (under
 * shared budgets, its reservation now the member's charge, in the same transaction), or
 * null (none claimable, or the database failed: a miss, never an error).
 */
async function askFleet(run) {
  const ctx = run.ctx;
  const ask = binding.acquisitionClaimAsk(run.ctx.native, run.machine);
  let member = null;
  try {
    const claiming = ctx.warm.coordinator.warmClaim(ctx.fleet, ask.providerId, ask.floor, run.labels, ask.detached, chargeOf(run));
    const r = await within(claiming, ctx.callbackTimeoutMs);
    member = r === TIMED_OUT ? null : (r ?? null);
  } catch {
    member = null;
  }
  binding.acquisitionClaimAnswer(run.ctx.native, run.machine, member !== null);
  return member;
}

/**
 * Performs a claim step (`kind`: StepKind.Claim or Claimed) of provision `run`. True when
 * the provision is settled with the member; false when the machine goes on (a miss, or a
 * member found gone).
 */
async function claim(run, kind) {
  const ctx = run.ctx;
  const warm = ctx.warm;
  const def = run.def;
  const member = kind === CLAIMED ? binding.acquisitionMember(run.ctx.native, run.machine, routerNow(ctx)) : await askFleet(run);
  if (member === null) {
    if (ctx.events) emitDecided(run);
    warm.kick();
    return false;
  }
  const id = member.sandboxId;
  let handle = warm.handles.get(id) ?? null;
  warm.handles.delete(id);
  if (handle === null) handle = await ownedHandle(ctx, def, member.providerSandboxId);
  if (handle === null) {
    // The cold launch that follows holds the reservation the claim had made the member's.
    if (kind !== CLAIMED && chargeOf(run) !== undefined) await unchargeLost(ctx, id, run.sandboxId);
    binding.acquisitionClaimLost(run.ctx.native, run.machine);
    forgetRecord(ctx, id);
    emit(ctx.observer, 'warm.member.lost', { sandboxId: id, providerId: def.id });
    warm.kick();
    return false;
  }
  // The provision's result is the member: its id, the caller's labels stamped with it.
  const recorded = binding.acquisitionClaimed(run.ctx.native, run.machine);
  run.sandboxId = id;
  run.labels[SANDBOX_ID_LABEL] = id;
  run.providerSandboxId = member.providerSandboxId;
  try {
    if (ctx.events) emitDecided(run);
    // A caller's store (this process's inventory) gets the record with the caller's labels.
    if (!recorded && kind === CLAIMED) await persist(run, handle, member.providerSandboxId);
  } finally {
    binding.acquisitionEnd(run.ctx.native, run.machine);
    run.machine = -1;
    warm.kick();
  }
  keepHandle(ctx.handles, id, handle);
  if (ctx.telemetry !== null) {
    ctx.telemetry.add('warmClaims', 1, { pool: def.id, result: 'hit' });
    if (run.tel !== null) {
      run.tel.launchType = WARM;
      ctx.telemetry.succeeded(run);
    }
  }
  const ageMs = member.ageMs ?? Math.max(0, (routerNow(ctx) ?? Date.now()) - member.launchedAt);
  emit(ctx.observer, 'warm.claimed', { sandboxId: id, providerId: def.id, ageMs });
  run.resolve({ id, providerId: def.id, labels: run.labels });
  return true;
}

/**
 * `explain`'s per-pool answer: each eligible pool's `warm` says whether a claim would be
 * warm now and why not (only for a registry that keeps a warm pool).
 */
async function explainWarm(ctx, view, compiled, explanation) {
  if (!view.definitions.some((d) => d.warm)) return explanation;
  const index = new Map(view.definitions.map((d, i) => [d.id, i]));
  const pools = explanation.eligible.map((e) => index.get(e.providerId));
  const answers = callNative(() => binding.warmExplain(ctx.native, compiled.native, pools, routerNow(ctx)));
  const w = ctx.warm;
  for (let k = 0; k < answers.length; k++) {
    const a = answers[k];
    let claim = a.claim;
    let reason = a.reason ?? null;
    if (a.floor !== null && a.floor !== undefined && w !== null && w.shared) {
      const n = await w.coordinator.warmClaimable(ctx.fleet, a.providerId, a.floor).catch(() => 0);
      claim = n > 0;
      reason = claim ? null : 'EMPTY';
    }
    explanation.eligible[k].warm = { claim, reason };
  }
  return explanation;
}

module.exports = { claim, ownedHandle, forgetRecord, explainWarm };
