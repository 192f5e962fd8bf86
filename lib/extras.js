'use strict';
// Per-request routing inputs that come from the caller's callbacks, asked before a
// provision's machine starts (and by `explain`): credential readiness
// (`provisioning.hasAvailableCredentials`) and the signal resolver
// (`resolveRoutingSignals`). Each answer is bounded (callbackTimeoutMs) and read once; the
// native core decides what it means (an unavailable pool is rejected, an unresolved one
// is rejected with SIGNALS_UNRESOLVED, a resolved one ranks by the answer).

const { binding } = require('./binding.js');
const { ProvisioningAvailabilityError, isRouterError, callNative } = require('./errors.js');
const { serializeLenient } = require('./serialize.js');
const { within, TIMED_OUT } = require('./within.js');
const { emit } = require('./events.js');

/** Whether the router asks any callback before a provision starts. */
function needsExtras(ctx) {
  return ctx.provisioning !== null || ctx.resolver !== null;
}

/**
 * The extras of a provision (sandbox `id`): a readiness failure is reported as the
 * provision's end, named by its id.
 */
async function extrasFor(ctx, view, compiled, detached, request, id) {
  try {
    return await extras(ctx, view, compiled, detached, request);
  } catch (error) {
    if (isRouterError(error) && error instanceof ProvisioningAvailabilityError) {
      Object.assign(error, { sandboxId: id });
      emit(ctx.observer, 'provision.exhausted', { sandboxId: id, code: error.code });
    }
    throw error;
  }
}

/**
 * The per-request routing inputs (`RouteExtras` of src/binding/registry.rs), or null when
 * the router has no callback to ask.
 */
async function extras(ctx, view, compiled, detached, request) {
  if (!needsExtras(ctx)) return null;
  const out = {};
  if (ctx.provisioning !== null) out.credentialsUnavailable = await readiness(ctx, view);
  if (ctx.resolver !== null) out.signals = await resolveSignals(ctx, view, compiled, detached, out.credentialsUnavailable, request);
  return out;
}

/** Indices of the pools whose credential readiness answered false. */
async function readiness(ctx, view) {
  const port = ctx.provisioning;
  const answers = await Promise.all(
    view.definitions.map(async (def, i) => {
      let answer;
      try {
        answer = await within(port.hasAvailableCredentials(def.id), ctx.callbackTimeoutMs);
      } catch {
        answer = TIMED_OUT;
      }
      if (typeof answer !== 'boolean') {
        const what = answer === TIMED_OUT ? 'failed or timed out' : 'answered a non-boolean';
        throw new ProvisioningAvailabilityError(`credential readiness for ${def.id} ${what}`, 'PROVISIONING_AVAILABILITY_FAILED', {
          providerId: def.id,
        });
      }
      return answer ? -1 : i;
    }),
  );
  return answers.filter((i) => i >= 0);
}

/**
 * The resolver's answer for each pool that survives the hard requirements and readiness
 * (`PoolSignals`): serialized on its own, inside a guard, so an unreadable answer (a cycle,
 * a throwing getter or toJSON) excludes only its pool; leniently, so a value JSON cannot
 * carry is null, which the signals rule refuses (INVALID_SIGNALS for that pool).
 */
async function resolveSignals(ctx, view, compiled, detached, credentialsUnavailable, request) {
  const survivors = callNative(() => binding.registrySurvivors(view.native, compiled.native, detached, credentialsUnavailable));
  return Promise.all(
    survivors.map(async (pool) => {
      const def = view.definitions[pool];
      try {
        // The resolver is handed the caller's own request and definition, as they were.
        const answer = ctx.resolver(def.definition, request);
        const s = await within(answer, ctx.callbackTimeoutMs);
        if (s === TIMED_OUT) return { pool, unresolved: 'resolver timed out' };
        if (s === undefined || s === null) return { pool };
        const text = serializeLenient(s);
        return text === null ? { pool, unresolved: 'resolver answered an unreadable value' } : { pool, signalsJson: text };
      } catch {
        return { pool, unresolved: 'resolver threw' };
      }
    }),
  );
}

module.exports = { needsExtras, extras, extrasFor };
