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
 * Reads the events the job of provision `run` decided since the last call, once, and hands
 * them to the router's telemetry (which counts them, lib/telemetry.js) and to its observer,
 * as the core wrote them (their documented shapes: src/core/events.rs).
 * @param {{ ctx: { native: object, clock: (() => number) | null, observer: ((e: object) => unknown) | null, telemetry: object | null }, machine: number, tel?: object | null }} run
 */
function emitDecided(run) {
  const ctx = run.ctx;
  const events = binding.acquisitionEvents(ctx.native, run.machine, ctx.clock === null ? undefined : ctx.clock());
  // A warm pool's refill (lib/warm.js) runs on the same loop without a provision's telemetry.
  if (ctx.telemetry !== null && run.tel != null) ctx.telemetry.decided(run, events);
  if (ctx.observer !== null) for (const e of events) send(ctx.observer, e);
}

/** Hands `event` to `sink`. Never throws; a rejection is dropped. */
function send(sink, event) {
  try {
    const r = sink(event);
    if (r !== null && typeof r === 'object' && typeof r.then === 'function') r.then(undefined, noop);
  } catch {
    // An observer never affects routing.
  }
}

/** Hands on the events the router decided outside a job (a late clean-up, a refill's pause). */
function emitRouter(ctx) {
  if (ctx.observer === null) return;
  for (const e of binding.routerEvents(ctx.native)) send(ctx.observer, e);
}

module.exports = { emit, emitDecided, emitRouter, debug, DEBUG };
