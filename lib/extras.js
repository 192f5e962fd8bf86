'use strict';
// Per-request routing inputs from the caller's callbacks, asked before a provision's job
// begins (and by `explain`): credential readiness (`provisioning.hasAvailableCredentials`)
// and the signal resolver (`resolveRoutingSignals`). This file performs the calls, each
// bounded by callbackTimeoutMs and read once, and reports what each answered; the core
// decides what it means (a failed readiness is PROVISIONING_AVAILABILITY_FAILED, an
// unavailable pool is rejected, an unresolved one is rejected with SIGNALS_UNRESOLVED, a
// resolved one ranks by the answer).

const { binding } = require('./binding.js');
const { callNative, fromNative } = require('./errors.js');
const { serializeLenient } = require('./serialize.js');
const { within, TIMED_OUT } = require('./within.js');
const { emitRouter } = require('./events.js');

const READINESS = binding.Readiness;
const FAILED = binding.ResolverFailure;

/** Whether the router asks any callback before a provision starts. */
function needsExtras(ctx) {
  return ctx.provisioning !== null || ctx.resolver !== null;
}

/**
 * The per-request routing inputs (`RouteExtras` of src/binding/registry.rs), or null when
 * the router has no callback to ask. `id`: a provision's sandbox id (a readiness failure is
 * its end, named by it).
 */
async function extras(ctx, view, compiled, detached, request, id) {
  if (!needsExtras(ctx)) return null;
  const out = {};
  if (ctx.provisioning !== null) out.credentialsUnavailable = await readiness(ctx, view, id);
  if (ctx.resolver !== null) out.signals = await resolveSignals(ctx, view, compiled, detached, out.credentialsUnavailable, request);
  return out;
}

/** Every pool's readiness, asked concurrently; the core names the unavailable pools. */
async function readiness(ctx, view, id) {
  const port = ctx.provisioning;
  const answers = await Promise.all(
    view.definitions.map(async (def) => {
      let answer;
      try {
        answer = await within(port.hasAvailableCredentials(def.id), ctx.callbackTimeoutMs);
      } catch {
        answer = TIMED_OUT;
      }
      if (answer === TIMED_OUT) return READINESS.Failed;
      if (typeof answer !== 'boolean') return READINESS.NotBoolean;
      return answer ? READINESS.Available : READINESS.Unavailable;
    }),
  );
  try {
    return binding.readinessOf(ctx.native, answers, id, ctx.clock === null ? undefined : ctx.clock());
  } catch (error) {
    emitRouter(ctx);
    throw fromNative(error);
  }
}

/**
 * The resolver's answer for each pool that survives the hard requirements and readiness
 * (`PoolSignals`): serialized on its own, inside a guard, so an unreadable answer excludes
 * only its pool; leniently, so a value JSON cannot carry is null, which the signals rule
 * refuses (INVALID_SIGNALS for that pool).
 */
async function resolveSignals(ctx, view, compiled, detached, credentialsUnavailable, request) {
  const survivors = callNative(() => binding.registrySurvivors(view.native, compiled.native, detached, credentialsUnavailable));
  return Promise.all(
    survivors.map(async (pool) => {
      const def = view.definitions[pool];
      try {
        // The resolver is handed the caller's own request and definition, as they were.
        const s = await within(ctx.resolver(def.definition, request), ctx.callbackTimeoutMs);
        if (s === TIMED_OUT) return { pool, failed: FAILED.TimedOut };
        if (s === undefined || s === null) return { pool };
        const text = serializeLenient(s);
        return text === null ? { pool, failed: FAILED.Unreadable } : { pool, signalsJson: text };
      } catch {
        return { pool, failed: FAILED.Threw };
      }
    }),
  );
}

module.exports = { needsExtras, extras };
