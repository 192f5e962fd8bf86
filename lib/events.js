'use strict';
// Events: the router's structured observability. The acquisition machine decides which
// events a provision emits and with which fields (core/acquisition.rs); this file names
// pools, stamps `type`, `at` and the sandbox id, and hands each event to the observer.
// An observer never affects routing: whatever it throws or rejects with is dropped.

const { binding } = require('./binding.js');

const noop = () => {};

// Debug switch, read once: SANDBOX_ROUTER_DEBUG=1 (or DEBUG containing sandbox-router)
// logs each routing decision (ids and codes only) to stderr.
const DEBUG = process.env.SANDBOX_ROUTER_DEBUG === '1' || /(^|,)\s*sandbox-router\s*(,|$)/.test(process.env.DEBUG || '');
function debug(line) {
  if (DEBUG) process.stderr.write(`[sandbox-router] ${line}\n`);
}

/** Sends one event to `sink` (a router's observer, or null). Never throws. */
function emit(sink, type, fields) {
  if (sink === null) return;
  const event = { type, at: new Date().toISOString(), ...fields };
  try {
    const r = sink(event);
    if (r !== null && typeof r === 'object' && typeof r.then === 'function') r.then(undefined, noop);
  } catch {
    // An observer never affects routing.
  }
}

/**
 * Reads the events the machine of provision `run` decided since the last call, once, and
 * hands them to the router's telemetry (which counts them, lib/telemetry.js) and to its
 * observer, in their documented shapes (the machine names the pools).
 * @param {{ ctx: { observer: ((e: object) => unknown) | null, telemetry: object | null }, machine: number, sandboxId: string, tel?: object | null }} run
 */
function emitDecided(run) {
  const events = binding.acquisitionEvents(run.machine);
  const { observer, telemetry } = run.ctx;
  // A warm pool's refill (lib/warm.js) runs on the same loop without a provision's telemetry.
  if (telemetry !== null && run.tel != null) telemetry.decided(run, events);
  if (observer !== null) for (const e of events) dispatch(observer, e, run.sandboxId);
}

/** One decided event to `sink`, in its documented shape. */
function dispatch(sink, e, sandboxId) {
  switch (e.type) {
    case 'capacity.admitted':
      emit(sink, e.type, { sandboxId, providerId: e.providerId });
      break;
    case 'capacity.skipped':
      emit(sink, e.type, { sandboxId, providerId: e.providerId, status: e.status, reason: e.reason });
      break;
    case 'attempt.started':
    case 'attempt.succeeded':
      emit(sink, e.type, { sandboxId, providerId: e.providerId, attempt: e.attempt });
      break;
    case 'attempt.failed':
      emit(sink, e.type, { sandboxId, providerId: e.providerId, attempt: e.attempt, code: e.code, retryable: e.retryable });
      break;
    case 'fallback.advanced':
      emit(sink, e.type, { sandboxId, fromProviderId: e.fromProviderId, toProviderId: e.toProviderId, attempt: e.attempt });
      break;
    case 'provision.exhausted':
      emit(sink, e.type, { sandboxId, code: e.code });
      break;
    case 'health.circuit.opened':
      emit(sink, e.type, {
        sandboxId,
        providerId: e.providerId,
        reason: e.reason,
        consecutiveFailures: e.consecutiveFailures,
        cooldownMs: e.cooldownMs,
        retryAt: e.retryAt,
      });
      break;
    case 'health.circuit.half-open':
    case 'health.circuit.closed':
      emit(sink, e.type, { sandboxId, providerId: e.providerId });
      break;
    case 'health.skipped':
    case 'warm.miss':
      emit(sink, e.type, { sandboxId, providerId: e.providerId, reason: e.reason });
      break;
    case 'budget.reserved':
      emit(sink, e.type, { sandboxId, providerId: e.providerId, cost: e.cost, rules: e.rules });
      break;
    case 'budget.released':
      emit(sink, e.type, { sandboxId, providerId: e.providerId, cost: e.cost, rules: e.rules, reason: e.reason });
      break;
    case 'budget.refused':
      emit(sink, e.type, {
        sandboxId,
        providerId: e.providerId,
        reason: e.reason,
        rule: e.rule,
        key: e.key,
        dimension: e.dimension,
        limit: e.limit,
        used: e.used,
        reserved: e.reserved,
        resetsAt: e.resetsAt ?? null,
        retryable: e.retryable,
      });
      break;
    default:
      break;
  }
}

module.exports = { emit, emitDecided, debug, DEBUG };
