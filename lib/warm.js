'use strict';
// Warm pools (docs/warm-pools.md), idle sandboxes kept ready per pool. The router decides all
// of it (src/core/router/warm.rs, rules in src/core/warm.rs); this file keeps the one timer it
// asks for, starts on the driver's loop what it polls (refill jobs and warm tasks, whose steps
// lib/warm-members.js performs), and answers the waiters.
//
// Nothing happens before `warmUp()`: a router that never calls it keeps `ctx.warm` null,
// and the provision path pays one property read.

const { binding } = require('./binding.js');
const { fromNative, callNative } = require('./errors.js');
const { viewOf } = require('./registry.js');
const { readOr } = require('./guard.js');
const { serializeLenient } = require('./serialize.js');
const { healthNow, hasMethods } = require('./options.js');
const { emitRouter } = require('./events.js');
const { drive, jobRecord, took, end, clockNow, STEP } = require('./driver.js');
const { InMemoryMappingStore } = require('./mappings.js');
const { SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } = require('./finders.js');
require('./warm-members.js'); // the warm steps' performers

/** Whether the store is an InMemoryMappingStore (a fact the router's keepWarm rule reads). */
function inMemory(ctx) {
  return ctx.fastMappings || readOr(() => ctx.mappings instanceof InMemoryMappingStore, true);
}

/** The router's warm state, made by the first `warmUp()`. */
function started(ctx) {
  if (ctx.warm !== null) return ctx.warm;
  const facts = {
    storeIsCoordinator: ctx.combined,
    storeInMemory: inMemory(ctx),
    storeLists: hasMethods(ctx.mappings, ['list']),
  };
  binding.warmStart(ctx.native, facts);
  const w = {
    coordinator: ctx.combined ? ctx.capacity.coordinator : null,
    /** live handles of members, by sbx id (the router knows which it holds) */
    handles: new Map(),
    /** `warmUp()` and `close()` callers: `{ ask, resolve, reject }` */
    waiters: new Set(),
    timer: null,
    kicked: false,
    kick: () => {
      if (w.kicked) return;
      w.kicked = true;
      setImmediate(() => {
        w.kicked = false;
        pump(ctx, w);
      });
    },
  };
  ctx.warm = w;
  // The idle-members gauge (docs/telemetry.md), read at collection time.
  if (ctx.telemetry !== null) ctx.telemetry.observe('warmIdle', ctx, (c) => binding.warmIdleGauge(c.native).map((p) => [p.idle, { pool: p.providerId }]));
  return w;
}

/** Starts the warm work the router has due (on the driver's loop), answers the waiters it settled, re-arms. */
function pump(ctx, w) {
  try {
    const pools = viewOf(ctx).definitions;
    for (;;) {
      const polled = callNative(() => binding.warmPoll(ctx.native, STEP, healthNow(ctx.health), clockNow(ctx)));
      if (polled === null) break;
      const run = polled.refill ? refillRecord(ctx, w, pools, polled) : taskRecord(ctx, w, pools, polled);
      drive(run, took(run));
    }
    emitRouter(ctx);
    for (const waiter of w.waiters) {
      const answer = waiter.ask();
      if (answer === null) continue;
      w.waiters.delete(waiter);
      waiter.resolve(answer);
    }
    arm(ctx, w);
  } catch (error) {
    // A bug of ours: whoever waits learns it, typed.
    for (const waiter of w.waiters) waiter.reject(fromNative(error));
    w.waiters.clear();
  }
}

/** The one timer: when the router asked to be polled again (kept alive while someone waits). */
function arm(ctx, w) {
  if (w.timer !== null) clearTimeout(w.timer);
  w.timer = null;
  const ms = binding.warmTimeout(ctx.native, healthNow(ctx.health), clockNow(ctx));
  if (ms === null) return;
  w.timer = setTimeout(() => pump(ctx, w), ms);
  if (w.waiters.size === 0) w.timer.unref();
}

/** A refill job's record: a provision's, with the stamp and the warm label. */
function refillRecord(ctx, w, pools, polled) {
  const run = jobRecord(ctx, false, (r, ok) => {
    end(r);
    if (ok) w.handles.set(r.sandboxId, r.handle);
    w.kick();
  });
  run.reject = () => w.kick(); // a bug of ours ended it (lib/driver.js crashed)
  run.machine = STEP[2];
  run.pools = pools;
  run.parts = {};
  run.sandboxId = polled.sandboxId;
  run.token = polled.token;
  run.labels = { [SANDBOX_ID_LABEL]: run.sandboxId, [SANDBOX_FLEET_LABEL]: ctx.fleet, [binding.SANDBOX_WARM_LABEL_KEY]: pools[STEP[1]].id };
  return run;
}

/** A warm task's record: its key in `task` (never a job's), its member's ids. */
function taskRecord(ctx, w, pools, polled) {
  const run = jobRecord(ctx, false, () => w.kick());
  run.task = STEP[2];
  run.reject = () => {
    binding.warmAbandon(ctx.native, run.task);
    w.kick();
  };
  run.pools = pools;
  run.sandboxId = polled.sandboxId ?? '';
  run.providerSandboxId = polled.providerSandboxId ?? '';
  return run;
}

/** Resolves with what `ask` answers once it answers (after the pumps that settle it). */
function wait(ctx, w, ask) {
  return new Promise((resolve, reject) => {
    w.waiters.add({ ask, resolve, reject });
    pump(ctx, w);
  });
}

/** `router.warmUp()`: fills every warm pool; resolves with each pool's standing. */
function warmUp(ctx) {
  const w = started(ctx);
  const id = binding.warmUpBegin(ctx.native, clockNow(ctx));
  return wait(ctx, w, () => binding.warmUpAnswer(ctx.native, id, healthNow(ctx.health), clockNow(ctx)));
}

/** `router.warmStatus()`: every warm pool's counters (the fleet's counts with PostgreSQL). */
async function warmStatus(ctx) {
  viewOf(ctx);
  let counts;
  if (binding.warmStatusFleet(ctx.native)) {
    try {
      counts = await ctx.warm.coordinator.warmCounts(ctx.fleet);
    } catch (error) {
      throw fromNative(error);
    }
  }
  return binding.warmStatus(ctx.native, counts, clockNow(ctx));
}

/**
 * `router.close(options)`: no claim and no refill from now on; refills in flight settle;
 * idle members are destroyed, or with `keepWarm` left (recorded) for the next process.
 */
function close(ctx, options) {
  // Unreadable: '', which the router refuses.
  const text = options === undefined || options === null ? undefined : readOr(() => serializeLenient(options) ?? '', '');
  const waits = callNative(() => binding.warmClose(ctx.native, text, inMemory(ctx)));
  if (!waits) return Promise.resolve(binding.warmCloseAnswer(ctx.native));
  return wait(ctx, ctx.warm, () => binding.warmCloseAnswer(ctx.native));
}

/** `explain`'s per-pool answer: each eligible pool's `warm` (whether a claim would be warm now, why not). */
async function explainWarm(ctx, view, compiled, explanation) {
  // The router answers null for a registry that keeps no warm pool: asked first with no
  // pool, so a registry of 10,000 pools without one pays no index of them.
  if (callNative(() => binding.warmExplain(ctx.native, compiled.native, [], clockNow(ctx))) === null) return explanation;
  const index = new Map(view.definitions.map((d, i) => [d.id, i]));
  const pools = explanation.eligible.map((e) => index.get(e.providerId));
  let answers = callNative(() => binding.warmExplain(ctx.native, compiled.native, pools, clockNow(ctx)));
  if (answers === null) return explanation;
  if (answers.some((a) => a.floor !== null)) {
    // With the fleet's inventory: the database counts the claimable members.
    const counts = await Promise.all(answers.map((a) => (a.floor === null ? null : ctx.warm.coordinator.warmClaimable(ctx.fleet, a.providerId, a.floor).catch(() => null))));
    answers = callNative(() => binding.warmExplain(ctx.native, compiled.native, pools, clockNow(ctx), counts));
  }
  for (const [k, a] of answers.entries()) explanation.eligible[k].warm = { claim: a.claim, reason: a.reason };
  return explanation;
}

module.exports = { warmUp, warmStatus, close, explainWarm };
