'use strict';
// What a provision writes besides its result, and what it cleans up: the launch intent
// before each launch (with an intent-capable store), the intent's end after a failure, the
// mapping record through a caller's store, and the destroy of a sandbox nobody will hold.
// Nothing is lost: every sandbox that may exist is either recorded, named by a `failed`
// intent, or destroyed (and the caller told which).
//
// The records themselves are made natively: the machine knows the provision's id, pool,
// deadline and owner, and the window after which its launch has certainly settled
// (src/core/acquisition.rs `settle_window_ms`). This file performs the writes, each bounded
// by callbackTimeoutMs.

const { binding } = require('./binding.js');
const { MappingPersistenceError } = require('./errors.js');
const { within, TIMED_OUT } = require('./within.js');
const { handleId } = require('./guard.js');
const { emit } = require('./events.js');
const { healthNow } = require('./options.js');
const { settleShared } = require('./capacity.js');
const { SANDBOX_ID_LABEL } = require('./finders.js');

const noop = () => {};

/** Writes the current launch's intent record in `state`; true when it was stored. */
async function writeIntent(run, state) {
  const ctx = run.ctx;
  try {
    return (await within(ctx.mappings.intent(binding.acquisitionIntent(run.ctx.native, run.machine, state)), ctx.callbackTimeoutMs)) !== TIMED_OUT;
  } catch {
    return false;
  }
}

/**
 * The intent write before a launch; false (and the machine told) when it failed: no
 * intent, no launch, so nothing is allocated and nothing can be lost.
 */
async function launchIntent(run) {
  if (await writeIntent(run, 'launching')) return true;
  run.packageError = new MappingPersistenceError(
    `the launch intent for ${run.sandboxId} could not be stored; nothing was launched`,
    'MAPPING_INTENT_FAILED',
    { providerId: run.def.id, sandboxId: run.sandboxId, cleanup: 'none' },
  );
  binding.acquisitionPackageFailed(run.ctx.native, run.machine, 'MAPPING_INTENT_FAILED', healthNow(run.ctx.health));
  settleShared(run);
  return false;
}

/**
 * After a failed provision: the intent becomes `failed` when a sandbox may exist (reconcile
 * then calls it an orphan without waiting for a grace period), or is removed when nothing
 * was allocated. Best effort: a store that fails here leaves a `launching` intent, which
 * reconcile treats as in flight until it expires.
 */
async function settleIntent(run, mayExist) {
  if (!run.launched) return;
  try {
    if (mayExist) await writeIntent(run, 'failed');
    else await within(run.ctx.mappings.delete(run.sandboxId), run.ctx.callbackTimeoutMs);
  } catch {
    // Best effort (see above).
  }
}

/** Destroys `handle` on `def` within the operation deadline; true when that succeeded. */
async function destroyed(ctx, def, handle) {
  try {
    return (await within(def.runtime.destroy(handle), ctx.operationTimeoutMs)) !== TIMED_OUT;
  } catch {
    return false;
  }
}

/**
 * Writes the record of a provision that succeeded through the caller's store. A failure
 * (or a timeout) destroys the sandbox, settles its intent, and throws the typed
 * MAPPING_PERSISTENCE_FAILED error saying whether the clean-up succeeded.
 */
async function persist(run, handle, providerSandboxId) {
  const ctx = run.ctx;
  const def = run.def;
  const id = run.sandboxId;
  const providerId = def.id;
  try {
    const record = { id, providerId, providerSandboxId, labels: { ...run.labels }, createdAt: new Date().toISOString(), detached: run.detached };
    const pending = ctx.mappings.put(record);
    const r = await within(pending, ctx.callbackTimeoutMs);
    if (r === TIMED_OUT) {
      // The write may still land after the sandbox is destroyed below: remove it then.
      Promise.resolve(pending)
        .then(() => within(ctx.mappings.delete(id), ctx.callbackTimeoutMs), noop)
        .catch(noop);
      throw new Error('mapping store timed out');
    }
  } catch {
    emit(ctx.observer, 'mapping.failed', { sandboxId: id, providerId });
    const succeeded = await destroyed(ctx, def, handle);
    emit(ctx.observer, 'cleanup.completed', { sandboxId: id, providerId, reason: 'mapping-failed', succeeded });
    // A sandbox that could not be destroyed is an orphan now: its intent says so.
    if (ctx.intents) await settleIntent(run, !succeeded);
    throw new MappingPersistenceError(
      succeeded
        ? `sandbox acquired on ${providerId} but its mapping could not be stored; the sandbox was destroyed`
        : `sandbox acquired on ${providerId} but its mapping could not be stored, and cleanup failed: find it by label ${SANDBOX_ID_LABEL}=${id}`,
      'MAPPING_PERSISTENCE_FAILED',
      { providerId, sandboxId: id, cleanup: succeeded ? 'destroyed' : 'failed' },
    );
  }
  if (ctx.observer !== null) emit(ctx.observer, 'mapping.persisted', { sandboxId: id, providerId });
}

/**
 * A launch that succeeded after its deadline already failed the provision: nobody holds
 * its id, so it is destroyed rather than left running unrecorded.
 */
async function lateSuccess(ctx, def, handle, id) {
  const succeeded = handleId(handle) !== null && (await destroyed(ctx, def, handle));
  emit(ctx.observer, 'cleanup.completed', { sandboxId: id, providerId: def.id, reason: 'late-launch', succeeded });
}

module.exports = { launchIntent, settleIntent, persist, lateSuccess };
