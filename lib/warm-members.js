'use strict';
// Warm members' hygiene (docs/warm-pools.md#hygiene): destroying a member taken out of the
// inventory (expired, or at close), the fleet's expiries, the re-resolution of idle members
// every `checkIntervalMs` (a member that is gone is dropped, never handed out), and the
// adoption of members a previous process left in a durable store (`close({ keepWarm })`).
// The core decided which members (src/core/warm.rs); this file performs the calls.

const { binding } = require('./binding.js');
const { within, TIMED_OUT } = require('./within.js');
const { guarded } = require('./guard.js');
const { routerNow } = require('./options.js');
const { emit } = require('./events.js');
const { ownedHandle, forgetRecord, destroyedWithin } = require('./driver.js');
const { InMemoryMappingStore } = require('./mappings.js');
const { SANDBOX_FLEET_LABEL } = require('./finders.js');

const WARM_LABEL = binding.SANDBOX_WARM_LABEL_KEY;

/** Destroys `handle` on `def` within the operation deadline; true when that succeeded. */
const destroyed = (ctx, def, handle) => destroyedWithin(def, handle, ctx.operationTimeoutMs);

/**
 * Destroys a member taken out of the inventory (expired, or at close) and removes its
 * record once the destroy succeeded. `expired`: say so (`warm.member.expired`).
 */
async function retire(ctx, w, def, m, expired) {
  let handle = w.handles.get(m.sandboxId) ?? null;
  w.handles.delete(m.sandboxId);
  if (handle === null) handle = await ownedHandle(ctx, def, m.providerSandboxId);
  const gone = handle === null || (await destroyed(ctx, def, handle));
  if (gone) forgetRecord(ctx, m.sandboxId);
  if (expired) {
    const ageMs = Math.max(0, (routerNow(ctx) ?? Date.now()) - m.launchedAt);
    emit(ctx.observer, 'warm.member.expired', { sandboxId: m.sandboxId, providerId: def.id, ageMs, destroyed: gone });
  }
}

/** The fleet's expired members of `def`'s pool, taken out of the database and destroyed. */
async function expireShared(ctx, w, def, floor) {
  let expired;
  try {
    expired = await w.coordinator.warmExpire(ctx.fleet, def.id, floor);
  } catch {
    return;
  }
  if (expired.length === 0) return;
  binding.warmCount(ctx.native, def.id, 0, expired.length);
  w.again = true;
  await Promise.all(expired.map((m) => retire(ctx, w, def, m, true)));
}

/** Re-resolves the idle members of `def`'s pool this process launched; drops the gone. */
async function check(ctx, w, def) {
  let members;
  try {
    members = w.shared ? await w.coordinator.warmMine(ctx.fleet, def.id) : binding.warmIdle(ctx.native, def.id);
  } catch {
    return;
  }
  await Promise.all(
    members.map(async (m) => {
      const h = await ownedHandle(ctx, def, m.providerSandboxId);
      if (h !== null) return;
      let taken;
      if (w.shared) {
        taken = await w.coordinator.warmTake(m.sandboxId).catch(() => null);
        if (taken !== null) binding.warmCount(ctx.native, def.id, 1, 0);
      } else {
        taken = binding.warmForget(ctx.native, m.sandboxId, true);
      }
      if (taken === null) return; // claimed meanwhile
      w.again = true; // its replacement
      w.handles.delete(m.sandboxId);
      forgetRecord(ctx, m.sandboxId);
      emit(ctx.observer, 'warm.member.lost', { sandboxId: m.sandboxId, providerId: def.id });
    }),
  );
}

/** Whether the router's store outlives the process (a caller's, not the in-memory one). */
function durable(ctx) {
  try {
    return !ctx.fastMappings && !guarded(() => ctx.mappings instanceof InMemoryMappingStore);
  } catch {
    return false;
  }
}

/**
 * Members a previous process left idle in a durable store (`close({ keepWarm: true })`):
 * records with the warm label of a pool that keeps a warm pool here, re-resolved as owned.
 */
async function adopt(ctx, w, view) {
  if (w.shared || !durable(ctx) || typeof ctx.mappings.list !== 'function') return;
  let records;
  try {
    records = await within(ctx.mappings.list(), ctx.callbackTimeoutMs);
  } catch {
    return;
  }
  if (!Array.isArray(records)) return;
  const warmIds = new Set(binding.warmStatus(ctx.native).map((s) => s.providerId));
  await Promise.all(
    records.map(async (r) => {
      const pool = r?.labels?.[WARM_LABEL];
      if (pool !== r?.providerId || !warmIds.has(pool) || r.labels[SANDBOX_FLEET_LABEL] !== ctx.fleet) return;
      const def = view.definitions.find((d) => d.id === pool);
      const h = await ownedHandle(ctx, def, r.providerSandboxId);
      if (h === null) {
        forgetRecord(ctx, r.id);
        return;
      }
      const launchedAt = Date.parse(r.createdAt);
      binding.warmMemberAdd(ctx.native, { providerId: pool, sandboxId: r.id, providerSandboxId: r.providerSandboxId, launchedAt: Number.isFinite(launchedAt) ? launchedAt : 0 });
      w.handles.set(r.id, h);
    }),
  );
}

module.exports = { retire, expireShared, check, durable, adopt };
