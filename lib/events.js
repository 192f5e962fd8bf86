'use strict';
// Events: the router's structured observability. The core decides which events a provision
// emits, with every field (src/core/acquisition.rs, events.rs); this file hands each one to
// telemetry and the observer. An observer never affects routing: its throw or rejection is dropped.

const { binding } = require('./binding.js');

const noop = () => {};

// Debug switch, read once: SANDBOX_ROUTER_DEBUG=1 (or DEBUG containing sandbox-router)
// logs each routing decision (ids and codes only) to stderr.
const DEBUG = process.env.SANDBOX_ROUTER_DEBUG === '1' || /(^|,)\s*sandbox-router\s*(,|$)/.test(process.env.DEBUG || '');
function debug(line) {
  if (DEBUG) process.stderr.write(`[sandbox-router] ${line}\n`);
}

/**
 * Reads the events the job of provision `run` decided since the last call, once, and hands
 * them to the router's telemetry and its observer as the core wrote them.
 * @param {{ ctx: { native: object, clock: (() => number) | null, observer: ((e: object) => unknown) | null, telemetry: object | null }, machine: number, tel?: object | null }} run
 */
function emitDecided(run) {
  const ctx = run.ctx;
  const events = binding.acquisitionEvents(ctx.native, run.machine, ctx.clock === null ? undefined : ctx.clock());
  // A warm pool's refill (lib/warm.js) runs on the same loop without a provision's telemetry.
  if (ctx.telemetry !== null && run.tel != null) ctx.telemetry.decided(run, events);
  if (ctx.observer !== null) for (const e of events) send(ctx.observer, e);
}

/** Hands `event` to `sink` (an observer, a decision sink). Never throws; a rejection is dropped. */
function send(sink, event) {
  try {
    const r = sink(event);
    if (r !== null && typeof r === 'object' && typeof r.then === 'function') r.then(undefined, noop);
  } catch {
    // An observer (or a sink) never affects routing.
  }
}

/** Hands on the events the router decided outside a job (a late clean-up, a refill's pause). */
function emitRouter(ctx) {
  if (ctx.observer === null) return;
  for (const e of binding.routerEvents(ctx.native)) send(ctx.observer, e);
}

module.exports = { emitDecided, emitRouter, send, debug, DEBUG };
