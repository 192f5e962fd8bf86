'use strict';
// The SandboxRouter: one class over five jobs, each in its own file.
//
//   options.js     router options → the context every part works from (and the router's
//                  native state)
//   provision.js   the JS half of an acquisition (the native machine decides every step)
//   capacity.js    capacity reads
//   operations.js  operations by id (runScript, uploadBundle, start, stop, getSandbox, destroy),
//                  jobs of the router like provisions
//   reconcile.js   stamped sandboxes vs the mapping store
//
// This file only routes calls to them, plus the two read-only decisions (`route`,
// `explain`). docs/architecture.md draws the flow across the native seam.

const { binding } = require('./binding.js');
const { callNative } = require('./errors.js');
const { viewOf } = require('./registry.js');
const { compileShared, checkLabels } = require('./compile.js');
const { guarded } = require('./guard.js');
const { contextOf, healthNow, routerNow } = require('./options.js');
const { provision, SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } = require('./provision.js');
const { extras } = require('./extras.js');
const { getCapacity } = require('./capacity.js');
const { explainView } = require('./explain.js');
const operations = require('./operations.js');
const { reconcile } = require('./reconcile.js');
const warm = require('./warm.js');
const budgets = require('./budgets.js');

/** The buffer route() lends the native side for an order (at most 10 attempts; read at once). */
const ORDER = new Uint32Array(16);

/** `options.detached === true`, read once inside a guard (null and undefined mean false). */
function detachedOf(options) {
  if (options === undefined || options === null) return false;
  try {
    return guarded(() => options.detached === true);
  } catch {
    return callNative(() => binding.routerOptionsRefused('call'));
  }
}

class SandboxRouter {
  /** @type {import('./options.js').RouterContext} */
  #ctx;

  /**
   * @param {import('../index').SandboxRouterOptions} options
   */
  constructor(options) {
    this.#ctx = contextOf(options);
  }

  /** Acquires a sandbox on the best eligible pool. */
  provision(request) {
    return provision(this.#ctx, request, false);
  }

  /** Like `provision`, through the runtime's `launchDetached` (pools without it are ineligible). */
  provisionDetached(request) {
    return provision(this.#ctx, request, true);
  }

  /**
   * The attempt order `provision` would use with the registered signals, synchronously:
   * at most `maxAcquisitionAttempts` provider ids, best first. Credential readiness and a
   * signal resolver are async and are not consulted; `explain` consults them.
   */
  route(request, options) {
    const detached = detachedOf(options);
    const call = compileShared(request);
    const ctx = this.#ctx;
    checkLabels(call, ctx.native);
    const view = viewOf(ctx);
    const n = callNative(() => binding.routeOrder(ctx.native, call.compiled.native, detached, ORDER, healthNow(ctx.health)));
    const ids = new Array(n);
    for (let i = 0; i < n; i++) ids[i] = view.definitions[ORDER[i]].id;
    return ids;
  }

  /**
   * Explains the decision for `request` without launching anything: every pool's rank and
   * score breakdown, or its rejection reasons, and a one-line summary. Runs credential
   * readiness and the signal resolver as `provision` would.
   */
  async explain(request, options) {
    const detached = detachedOf(options);
    const call = compileShared(request);
    const ctx = this.#ctx;
    checkLabels(call, ctx.native);
    const view = viewOf(ctx);
    const ext = await extras(ctx, view, call.compiled, detached, request);
    const budgeted = ctx.budgets !== null;
    return warm.explainWarm(ctx, view, call.compiled, explainView(view, call.compiled, detached, ext, ctx.native, healthNow(ctx.health), budgeted ? call.labelsJson : undefined, budgeted ? routerNow(ctx) : undefined));
  }

  /**
   * Fills every warm pool (`warm` option) to its size and keeps refilling in the
   * background; resolves when each reached its size, or with why not, per pool.
   * Nothing is launched before the first call. See docs/warm-pools.md.
   */
  warmUp() {
    return warm.warmUp(this.#ctx);
  }

  /** Every warm pool's counters: target, idle, launching, claims, misses, failures. */
  warmStatus() {
    return warm.warmStatus(this.#ctx);
  }

  /**
   * Stops refilling and destroys idle warm members; `{ keepWarm: true }` (with a durable
   * store) leaves them recorded for the next process to adopt.
   */
  close(options) {
    try {
      return warm.close(this.#ctx, options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Live health of every registered pool, in registration order: the circuit's state
   * (`closed`, `open` with `retryAt`, `half-open`), and statistics from real launch
   * outcomes. Plain data (ids, numbers, codes); empty when tracking is off (`health: false`).
   * Health is per process: see docs/health.md ("Scope").
   */
  health() {
    const ctx = this.#ctx;
    if (ctx.health === null) return [];
    viewOf(ctx);
    return callNative(() => binding.routerHealth(ctx.native, healthNow(ctx.health)));
  }

  /**
   * Reads every pool that has a capacity reader, concurrently, each bounded by the
   * capacity deadline. Only reads: nothing is launched, started or created.
   */
  getCapacity() {
    return getCapacity(this.#ctx);
  }

  /**
   * Compares each pool's sandboxes that carry this router's stamp with the mapping store:
   * `orphan` (stamped, no mapping, provably not in flight), `stale-mapping` (mapped, gone at
   * the provider), `mapped`, `pending` (too young, or in flight), per pool, with `unknown`
   * pools (could not be listed, with a reason). A dry run unless `reclaim: true`, which
   * destroys orphans (as owned sandboxes) and removes stale mappings. See lib/reconcile.js.
   */
  reconcile(options) {
    return reconcile(this.#ctx, options);
  }

  /** Runs a command in the sandbox, on the provider that launched it. */
  runScript(id, options) {
    return operations.runScript(this.#ctx, id, options);
  }

  /** Uploads files into the sandbox. */
  uploadBundle(id, bundle) {
    return operations.uploadBundle(this.#ctx, id, bundle);
  }

  /** Stops the sandbox (where the runtime supports it). */
  stop(id) {
    return operations.stop(this.#ctx, id);
  }

  /** Starts a stopped sandbox (where the runtime supports it). */
  start(id) {
    return operations.start(this.#ctx, id);
  }

  /** The mapping record of a sandbox (a copy), or a `SandboxNotFoundError`. */
  getSandbox(id) {
    return operations.getSandbox(this.#ctx, id);
  }

  /**
   * Destroys the sandbox and removes its mapping. An already-deleted provider sandbox is
   * not an error; any other failure keeps the mapping so the call can be retried.
   */
  destroy(id) {
    return operations.destroy(this.#ctx, id);
  }

  /**
   * Replaces the budget charge of sandbox `id` (its pool's `estimatedCost`) with what it
   * actually cost, in the windows it was charged in. Resolves to whether a charge was found.
   */
  settleCost(id, actualCost) {
    return budgets.settleCost(this.#ctx, id, actualCost);
  }

  /** One page of the budget keys that hold something (`{ rule?, key?, limit?, cursor? }`). */
  budgetStatus(options) {
    return budgets.budgetStatus(this.#ctx, options, true);
  }

  /** How many rows `budgetStatus` would list for `{ rule?, key? }`. */
  budgetCount(options) {
    return budgets.budgetStatus(this.#ctx, options, false);
  }

  toJSON() {
    return { type: 'SandboxRouter' };
  }
}

module.exports = { SandboxRouter, SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL };
