'use strict';
// The warm steps (docs/warm-pools.md): what the router asks for its warm pools' members and
// for claims, each performed within the step's bound and reported with one synchronous call
// (lib/driver.js). Nothing here decides: every rule is the router's (src/core/router/warm.rs).

const { binding } = require('./binding.js');
const { within, awaitOr, okWithin, answerWithin, lookupOwned, TIMED_OUT } = require('./within.js');
const { readOr } = require('./guard.js');
const { healthNow } = require('./options.js');
const { perform, reportAt, K, took, clockNow, destroyedWithin, STEP } = require('./driver.js');
const { nativeFinderOf, SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } = require('./finders.js');

const OP = binding.warmFleetOps();

/** The provision's result is the member `m` with `handle`: its id, the caller's labels stamped with it. */
function take(run, m, handle) {
  run.sandboxId = m.sandboxId;
  run.labels[SANDBOX_ID_LABEL] = m.sandboxId;
  run.providerSandboxId = m.providerSandboxId;
  run.handle = handle;
  run.member = m;
}

const now = (run) => healthNow(run.ctx.health);

// --- claims (steps of a provision) --------------------------------------------------------

/** `Claim`: the fleet's inventory asked for a member (one transaction); a failure is a miss. */
perform(K.Claim, async (run) => {
  const ctx = run.ctx;
  const ask = binding.acquisitionClaimAsk(ctx.native, run.machine);
  const member = await answerWithin(() => ctx.warm.coordinator.warmClaim(ctx.fleet, ask.providerId, ask.floor, run.labels, ask.detached, ask.charge ?? undefined), run.bound);
  return reportAt(run, binding.acquisitionClaimAnswer, member);
});

/** `Claimed`: the member taken, with the live handle this process holds. */
perform(K.Claimed, async (run) => {
  const ctx = run.ctx;
  const m = binding.acquisitionMember(ctx.native, run.machine, clockNow(ctx));
  const handle = ctx.warm.handles.get(m.sandboxId);
  ctx.warm.handles.delete(m.sandboxId);
  take(run, m, handle);
  return reportAt(run, binding.acquisitionClaimed);
});

/** `ClaimResolve`: the member taken, re-resolved as owned (no live handle here). */
perform(K.ClaimResolve, async (run) => {
  const ctx = run.ctx;
  const m = binding.acquisitionMember(ctx.native, run.machine, clockNow(ctx));
  const [how, handle] = await lookupOwned(run.def.runtime, m.providerSandboxId, run.bound);
  if (handle !== undefined && handle !== null) take(run, m, handle);
  const forget = binding.acquisitionClaimResolved(ctx.native, run.machine, how, STEP, clockNow(ctx));
  // Removed, bounded, without waiting (best effort: reconcile removes a stale record).
  if (forget !== null) okWithin(() => ctx.mappings.delete(forget), ctx.callbackTimeoutMs);
  return took(run);
});

/** `ClaimUncharge`: a gone member's shared budget charge given back to the provision. */
perform(K.ClaimUncharge, async (run) => {
  const ctx = run.ctx;
  const m = binding.acquisitionMember(ctx.native, run.machine, clockNow(ctx));
  // Best effort: the settlement of the cold launch that follows is the provision's.
  await okWithin(() => ctx.warm.coordinator.warmUncharge(m.sandboxId, run.sandboxId), run.bound);
  return reportAt(run, binding.acquisitionClaimUncharged);
});

// --- warm tasks ----------------------------------------------------------------------------

/** `WarmResolve`: the task's member re-resolved as owned (its handle kept when found). */
perform(K.WarmResolve, async (run) => {
  const ctx = run.ctx;
  const [how, handle] = await lookupOwned(run.def.runtime, run.providerSandboxId, run.bound);
  if (handle !== undefined && handle !== null) ctx.warm.handles.set(run.sandboxId, handle);
  binding.warmResolved(ctx.native, run.task, how, STEP, now(run), clockNow(ctx));
  return took(run);
});

/** `WarmDestroy`: the task's member destroyed with the live handle held. */
perform(K.WarmDestroy, async (run) => {
  const ctx = run.ctx;
  const handle = ctx.warm.handles.get(run.sandboxId);
  ctx.warm.handles.delete(run.sandboxId);
  const ok = await destroyedWithin(run.def, handle, run.bound);
  binding.warmDestroyed(ctx.native, run.task, ok, STEP, now(run), clockNow(ctx));
  return took(run);
});

/** `WarmUnmap`: the task's member's record removed (best effort); its handle let go. */
perform(K.WarmUnmap, async (run) => {
  const ctx = run.ctx;
  ctx.warm.handles.delete(run.sandboxId);
  // Best effort: reconcile removes a stale mapping later.
  await okWithin(() => ctx.mappings.delete(run.sandboxId), run.bound);
  binding.warmUnmapped(ctx.native, run.task, STEP);
  return took(run);
});

/** `WarmList`: the pool's stamped sandboxes, by its native finder (one list call). */
perform(K.WarmList, async (run) => {
  const ctx = run.ctx;
  const finder = nativeFinderOf(run.def);
  const r = finder === null ? null : await awaitOr(() => finder.find(ctx.fleet, run.bound), null);
  const ids = r?.reason === null ? r.listing.providerSandboxIds : null;
  binding.warmListed(ctx.native, run.task, finder !== null, ids, STEP, now(run), clockNow(ctx));
  return took(run);
});

/** The fleet inventory's calls, by op (`warmFleetOps()`): each answers the reply's field. */
const FLEET = [];
FLEET[OP.Counts] = (c, fleet) => c.warmCounts(fleet).then((counts) => ({ counts }));
FLEET[OP.Reserve] = (c, fleet, a) => c.warmReserve(fleet, a.providerId, a.target, a.want, a.holdMs).then((tokens) => ({ tokens }));
FLEET[OP.Expire] = (c, fleet, a) => c.warmExpire(fleet, a.providerId, a.floor).then((members) => ({ members }));
FLEET[OP.Take] = (c, fleet, a) => c.warmTake(a.sandboxId).then((m) => ({ members: m === null ? [] : [m] }));
FLEET[OP.Mine] = (c, fleet, a) => c.warmMine(fleet, a.providerId).then((members) => ({ members }));
FLEET[OP.TakeMine] = (c, fleet) => c.warmTakeMine(fleet).then((members) => ({ members }));
FLEET[OP.Release] = (c, fleet, a) => c.warmRelease(a.token).then(() => ({}));

/** `WarmFleet`: one call to the fleet's inventory (the op the router asks). */
perform(K.WarmFleet, async (run) => {
  const ctx = run.ctx;
  const w = ctx.warm;
  const ask = binding.warmFleetAsk(ctx.native, run.task);
  const reply = await answerWithin(() => FLEET[ask.op](w.coordinator, ctx.fleet, ask), run.bound);
  const dropped = binding.warmFleetAnswered(ctx.native, run.task, reply, STEP, now(run), clockNow(ctx));
  for (const id of dropped) w.handles.delete(id);
  return took(run);
});

const str = (v) => (typeof v === 'string' ? v : null);

/** One store record as adoption reads it (inside the caller's guard): plain typed fields. */
function readRecord(r) {
  if (r === null || typeof r !== 'object') return null;
  // Each field is read once: a getter answers once, whatever it would answer next.
  const { id, labels: l, createdAt, providerId, providerSandboxId } = r;
  if (typeof id !== 'string') return null;
  const labels = l !== null && typeof l === 'object' ? l : {};
  const created = typeof createdAt === 'string' ? Date.parse(createdAt) : NaN;
  return {
    id,
    providerId: str(providerId),
    providerSandboxId: str(providerSandboxId),
    warm: str(labels[binding.SANDBOX_WARM_LABEL_KEY]),
    fleet: str(labels[SANDBOX_FLEET_LABEL]),
    createdAtMs: Number.isFinite(created) ? created : null,
  };
}

/** `WarmRecords`: the caller's store's records (`list()`), read once. */
perform(K.WarmRecords, async (run) => {
  const ctx = run.ctx;
  const list = await awaitOr(() => within(ctx.mappings.list(), run.bound), TIMED_OUT);
  const read = () => (Array.isArray(list) ? Array.from(list, readRecord).filter((r) => r !== null) : null);
  const records = list === TIMED_OUT ? null : readOr(read, null);
  binding.warmRecords(ctx.native, run.task, records, STEP);
  return took(run);
});
