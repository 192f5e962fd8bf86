'use strict';
// Per-request routing inputs from the caller's callbacks, asked before a provision's job
// begins (and by `explain`): credential readiness and the signal resolver. This file makes
// the calls, each bounded by callbackTimeoutMs and read once, and reports what each answered;
// the core decides what it means.

const { binding } = require('./binding.js');
const { callNative, fromNative } = require('./errors.js');
const { serializeLenient } = require('./serialize.js');
const { within, awaitOr, TIMED_OUT } = require('./within.js');
const { emitRouter } = require('./events.js');

/** Whether the router asks any callback before a provision starts. */
function needsExtras(ctx) {
  return ctx.provisioning !== null || ctx.resolver !== null;
}

/** The per-request inputs (`RouteExtras`), or null without a callback; `id`: a provision's sandbox id. */
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
  const ask = (def) => awaitOr(() => within(port.hasAvailableCredentials(def.id), ctx.callbackTimeoutMs), TIMED_OUT);
  const answers = await Promise.all(view.definitions.map((def) => ask(def).then(readinessOf)));
  try {
    return binding.readinessOf(ctx.native, answers, id, ctx.clock === null ? undefined : ctx.clock());
  } catch (error) {
    emitRouter(ctx);
    throw fromNative(error);
  }
}

/** A pool's readiness answer (TIMED_OUT: it failed or timed out) as the core reads it. */
function readinessOf(answer) {
  if (answer === TIMED_OUT) return binding.Readiness.Failed;
  if (typeof answer !== 'boolean') return binding.Readiness.NotBoolean;
  return answer ? binding.Readiness.Available : binding.Readiness.Unavailable;
}

/**
 * The resolver's answer for each pool that survives the hard requirements and readiness, serialized on its own (an
 * unreadable answer excludes only its pool) and leniently (a value JSON cannot carry is null: INVALID_SIGNALS).
 */
async function resolveSignals(ctx, view, compiled, detached, credentialsUnavailable, request) {
  const survivors = callNative(() => binding.registrySurvivors(view.native, compiled.native, detached, credentialsUnavailable));
  return Promise.all(
    survivors.map(async (pool) => {
      const def = view.definitions[pool];
      try {
        // The resolver is handed the caller's own request and definition, as they were.
        const s = await within(ctx.resolver(def.definition, request), ctx.callbackTimeoutMs);
        if (s === TIMED_OUT) return { pool, failed: binding.ResolverFailure.TimedOut };
        if (s === undefined || s === null) return { pool };
        const text = serializeLenient(s);
        return text === null ? { pool, failed: binding.ResolverFailure.Unreadable } : { pool, signalsJson: text };
      } catch {
        return { pool, failed: binding.ResolverFailure.Threw };
      }
    }),
  );
}

module.exports = { needsExtras, extras };
