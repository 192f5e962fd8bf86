'use strict';
// Warm pools (docs/warm-pools.md): idle sandboxes kept ready per pool, so a provision can be
// handed one in milliseconds instead of waiting for the provider's cold start.
//
// Every rule is the core's (src/core/warm.rs): the options and their defaults, which
// request may take a member and which member, when a member expires, how many refills to
// start, when refills pause and resume. The glue (src/binding/warm.rs) keeps the router's
// inventory and counters. This file performs what those decide: refills, re-resolutions,
// destroys, the fleet's inventory in PostgreSQL, and the documented objects.
//
// Why does a refill run on provision.js's loop? A member is the router's own sandbox: its
// launch is admitted and held under the capacity policy, counted in live health, bounded by
// a deadline, stamped (plus the warm label) and recorded by a launch intent exactly as a
// provision's, so `reconcile` sees members as ours and never as orphans.
//
// Nothing happens before `warmUp()`: a router that never calls it keeps `ctx.warm` null,
// and the provision path pays one property read.

const { binding } = require('./binding.js');
const { fromNative, callNative, SandboxRouterConfigurationError } = require('./errors.js');
const { viewOf } = require('./registry.js');
const { guarded } = require('./guard.js');
const { healthNow, routerNow } = require('./options.js');
const { emit, emitRouter } = require('./events.js');
const { drive, jobRecord, took, end, failure, crashed, STEP } = require('./driver.js');
const { retire, expireShared, check, durable, adopt } = require('./warm-members.js');
const { coordinatorOf } = require('./postgres.js');
const { SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } = require('./finders.js');

const WARM_LABEL = binding.SANDBOX_WARM_LABEL_KEY;
const noop = () => {};
/** warmUp() gives up waiting for other processes' refills after this many idle rounds. */
const FLEET_ROUNDS = 200;
const FLEET_ROUND_MS = 50;

/** The router's warm state, made by the first `warmUp()`. */
function started(ctx) {
  if (ctx.warm !== null) return ctx.warm;
  const coordinator = ctx.capacity?.coordinator ?? null;
  // The inventory is the fleet's when the coordinator is also the mapping store.
  const shared = coordinator !== null && coordinatorOf(ctx.mappings) === coordinator;
  callNative(() => binding.warmStart(ctx.native, shared));
  const w = {
    shared,
    coordinator: shared ? coordinator : null,
    closed: false,
    keepWarm: false,
    adopted: false,
    /** live handles of idle members, by sbx id */
    handles: new Map(),
    /** refills in flight (their settle promises) */
    inflight: new Set(),
    running: null,
    again: false,
    kicked: false,
    plans: [],
    timer: null,
    kick: noop,
  };
  w.kick = () => {
    if (w.kicked || w.closed) return;
    w.kicked = true;
    setImmediate(() => {
      w.kicked = false;
      pass(ctx, w).catch(noop);
    });
  };
  ctx.warm = w;
  // The idle-members gauge (docs/telemetry.md), read at collection time.
  if (ctx.telemetry !== null) {
    ctx.telemetry.observe('warmIdle', ctx, (c) => {
      if (c.warm === null || c.warm.shared) return null;
      return binding.warmStatus(c.native).map((s) => [s.idle, { pool: s.providerId }]);
    });
  }
  return w;
}

/** Runs planning passes until none is asked for again; one at a time. */
function pass(ctx, w) {
  if (w.running !== null) {
    w.again = true;
    return w.running;
  }
  w.running = (async () => {
    try {
      do {
        w.again = false;
        await passOnce(ctx, w);
      } while (w.again && !w.closed);
    } finally {
      w.running = null;
    }
  })();
  return w.running;
}

/** One pass: the core's plan per warm pool, then its expiries, checks and refills. */
async function passOnce(ctx, w) {
  if (w.closed) return;
  const view = viewOf(ctx);
  let counts;
  if (w.shared) {
    try {
      counts = await w.coordinator.warmCounts(ctx.fleet);
    } catch {
      return; // the coordinator is unavailable: nothing to plan with; the next pass retries
    }
  }
  const plans = callNative(() => binding.warmPlan(ctx.native, routerNow(ctx), healthNow(ctx.health), counts));
  const work = [];
  for (const p of plans) {
    const def = view.definitions[p.pool];
    if (p.resumed) emit(ctx.observer, 'warm.refill.resumed', { providerId: p.providerId });
    for (const m of p.expired) work.push(retire(ctx, w, def, m, true));
    if (w.shared) work.push(expireShared(ctx, w, def, p.expiryFloor));
    if (p.check) work.push(check(ctx, w, def));
    if (p.launches > 0) {
      if (w.shared) work.push(reserve(ctx, w, view, p));
      else for (let i = 0; i < p.launches; i++) startRefill(ctx, w, view, p.pool, null);
    }
  }
  await Promise.all(work);
  w.plans = plans;
  schedule(ctx, w, plans);
}

/** The background pass: every pool's shortest check interval (the core's option). */
function schedule(ctx, w, plans) {
  if (w.timer !== null || w.closed || plans.length === 0) return;
  const ms = Math.min(...plans.map((p) => p.checkIntervalMs));
  w.timer = setInterval(() => w.kick(), Math.max(10, ms));
  w.timer.unref();
}

/** Asks the fleet's database for refill launches of pool `p`, then starts those granted. */
async function reserve(ctx, w, view, p) {
  let tokens;
  try {
    tokens = await w.coordinator.warmReserve(ctx.fleet, p.providerId, p.target, p.launches, binding.REFILL_TIMEOUT_MS);
  } catch {
    return;
  }
  binding.warmStarted(ctx.native, p.providerId, tokens.length);
  for (const token of tokens) startRefill(ctx, w, view, p.pool, token);
}

/** Starts one refill of pool index `pool` (`token`: the fleet's grant, or null). */
function startRefill(ctx, w, view, pool, token) {
  const def = view.definitions[pool];
  const run = jobRecord(ctx, false, refillEnded);
  run.token = token;
  const outcome = new Promise((resolve) => {
    run.resolve = (member) => resolve(member);
    run.reject = () => resolve(null);
  });
  refill(run, view, pool);
  const tracked = outcome.then((member) => refilled(ctx, w, def, member, token));
  w.inflight.add(tracked);
  tracked.finally(() => {
    w.inflight.delete(tracked);
    w.kick();
  });
}

/**
 * A refill: a job of one candidate (the pool), one attempt, no fallback, driven exactly as
 * a provision's; the router counts its member, or its failure (which may pause the pool).
 */
function refill(run, view, pool) {
  const ctx = run.ctx;
  try {
    run.sandboxId = binding.beginRefill(ctx.native, pool, STEP, healthNow(ctx.health));
  } catch (error) {
    run.reject(fromNative(error));
    return;
  }
  run.machine = STEP[2];
  run.pools = view.definitions;
  run.parts = {};
  run.labels = { [SANDBOX_ID_LABEL]: run.sandboxId, [SANDBOX_FLEET_LABEL]: ctx.fleet, [WARM_LABEL]: view.definitions[pool].id };
  drive(run, took(run));
}

/** A refill's job ended: its member (idle now), or nothing (the router counted the failure). */
function refillEnded(run, ok) {
  const ctx = run.ctx;
  if (!ok) {
    failure(run);
    emitRouter(ctx);
    run.reject(null);
    return;
  }
  try {
    const member = binding.acquisitionRefillMember(ctx.native, run.machine, routerNow(ctx));
    end(run);
    ctx.warm.handles.set(member.sandboxId, run.handle);
    run.resolve(member);
  } catch (error) {
    crashed(run, error);
  }
}

/** A refill settled: closed meanwhile, nobody will claim its member; a failed one's grant is released. */
async function refilled(ctx, w, def, member, token) {
  if (member !== null) {
    if (w.closed && !w.keepWarm) {
      if (w.shared) await w.coordinator.warmTake(member.sandboxId).catch(noop);
      else binding.warmForget(ctx.native, member.sandboxId, false);
      await retire(ctx, w, def, member, false);
    }
    return;
  }
  if (w.shared && token !== null) w.coordinator.warmRelease(token).catch(noop);
}

/** `router.warmUp()`: fills every warm pool; resolves with each pool's standing. */
async function warmUp(ctx) {
  const w = started(ctx);
  const view = viewOf(ctx);
  if (w.closed) return report(ctx, w, view, 'CLOSED');
  if (!w.adopted) {
    w.adopted = true;
    await adopt(ctx, w, view);
  }
  let rounds = 0;
  for (;;) {
    await pass(ctx, w);
    if (w.closed) break;
    if (w.inflight.size > 0) {
      await Promise.all([...w.inflight]);
      continue;
    }
    // With the fleet's inventory, other processes' refills may be what a pool waits for.
    const waiting = w.shared && w.plans.some((p) => !p.ready && p.reason === null);
    if (!waiting || ++rounds > FLEET_ROUNDS) break;
    await new Promise((resolve) => setTimeout(resolve, FLEET_ROUND_MS));
  }
  return report(ctx, w, view, w.closed ? 'CLOSED' : null);
}

async function report(ctx, w, view, closed) {
  const status = await warmStatus(ctx);
  const plans = new Map(w.plans.map((p) => [p.providerId, p]));
  const pools = status.map((s) => {
    const ready = closed === null && s.idle >= s.target;
    const reason = ready ? null : (closed ?? plans.get(s.providerId)?.reason ?? (s.lastFailureCode === null ? 'FILLING' : 'REFILL_FAILED'));
    return { providerId: s.providerId, target: s.target, idle: s.idle, ready, reason, lastFailureCode: s.lastFailureCode };
  });
  return { ready: pools.every((p) => p.ready), pools };
}

/** `router.warmStatus()`: every warm pool's counters (the fleet's counts with PostgreSQL). */
async function warmStatus(ctx) {
  const view = viewOf(ctx);
  const list = callNative(() => binding.warmStatus(ctx.native));
  const w = ctx.warm;
  let counts = null;
  if (w !== null && w.shared) {
    try {
      counts = new Map((await w.coordinator.warmCounts(ctx.fleet)).map((c) => [c.providerId, c]));
    } catch (error) {
      throw fromNative(error);
    }
  }
  return list.map((s) => {
    const c = counts?.get(s.providerId);
    return {
      providerId: s.providerId,
      target: s.target,
      idle: c ? c.idle : s.idle,
      launching: c ? c.launching : s.launching,
      scope: w !== null && w.shared ? 'fleet' : 'process',
      claims: s.claims,
      misses: { empty: s.missesEmpty, incompatible: s.missesIncompatible, paused: s.missesPaused },
      launched: s.launched,
      refillFailures: s.refillFailures,
      lastFailureCode: s.lastFailureCode ?? null,
      expired: s.expired,
      lost: s.lost,
      paused: s.paused,
    };
  });
}

/** `close(options)`'s one option, read strictly. */
function keepWarmOf(ctx, options) {
  if (options === undefined || options === null) return false;
  let keepWarm;
  try {
    keepWarm = guarded(() => {
      if (typeof options !== 'object') return null;
      for (const k of Object.keys(options)) if (k !== 'keepWarm') return null;
      return options.keepWarm ?? false;
    });
  } catch {
    keepWarm = null;
  }
  if (typeof keepWarm !== 'boolean') {
    throw new SandboxRouterConfigurationError('invalid close options: keepWarm must be a boolean (the only option)', 'INVALID_CONFIGURATION', { field: 'keepWarm' });
  }
  if (keepWarm && !durable(ctx)) {
    throw new SandboxRouterConfigurationError('invalid close options: keepWarm needs a durable mapping store (SQLite or PostgreSQL), where the next process finds the members', 'INVALID_CONFIGURATION', {
      field: 'keepWarm',
    });
  }
  return keepWarm;
}

/**
 * `router.close(options)`: no claim and no refill from now on; refills in flight settle;
 * idle members are destroyed, or with `keepWarm` left (recorded) for the next process.
 */
async function close(ctx, options) {
  const keepWarm = keepWarmOf(ctx, options);
  const w = ctx.warm;
  if (w === null || w.closed) return { destroyed: 0, kept: 0 };
  w.closed = true;
  w.keepWarm = keepWarm;
  if (w.timer !== null) clearInterval(w.timer);
  callNative(() => binding.warmClose(ctx.native));
  if (w.running !== null) await w.running.catch(noop);
  await Promise.all([...w.inflight]);
  let members;
  if (w.shared) members = keepWarm ? [] : await w.coordinator.warmTakeMine(ctx.fleet).catch(() => []);
  else members = binding.warmDrain(ctx.native);
  if (keepWarm) return { destroyed: 0, kept: members.length };
  const view = viewOf(ctx);
  const byId = new Map(view.definitions.map((d) => [d.id, d]));
  await Promise.all(members.map((m) => (byId.has(m.providerId) ? retire(ctx, w, byId.get(m.providerId), m, false) : null)));
  return { destroyed: members.length, kept: 0 };
}

/**
 * `explain`'s per-pool answer: each eligible pool's `warm` says whether a claim would be
 * warm now and why not (only for a registry that keeps a warm pool).
 */
async function explainWarm(ctx, view, compiled, explanation) {
  if (!view.definitions.some((d) => d.warm)) return explanation;
  const index = new Map(view.definitions.map((d, i) => [d.id, i]));
  const pools = explanation.eligible.map((e) => index.get(e.providerId));
  const answers = callNative(() => binding.warmExplain(ctx.native, compiled.native, pools, routerNow(ctx)));
  const w = ctx.warm;
  for (let k = 0; k < answers.length; k++) {
    const a = answers[k];
    let claim = a.claim;
    let reason = a.reason ?? null;
    if (a.floor !== null && a.floor !== undefined && w !== null && w.shared) {
      const n = await w.coordinator.warmClaimable(ctx.fleet, a.providerId, a.floor).catch(() => 0);
      claim = n > 0;
      reason = claim ? null : 'EMPTY';
    }
    explanation.eligible[k].warm = { claim, reason };
  }
  return explanation;
}

module.exports = { warmUp, warmStatus, close, explainWarm };
