'use strict';
// The SandboxRouter: one class that hands each call to the file doing that job (the requires
// below), plus the two read-only decisions (`route`, `explain`). Each method's public contract
// is in index.d.ts; docs/architecture.md draws the flow.

const { binding } = require('./binding.js');
const { callNative } = require('./errors.js');
const { viewOf } = require('./registry.js');
const { compileShared, checkLabels } = require('./compile.js');
const { readOr } = require('./guard.js');
const { contextOf, healthNow, routerNow } = require('./options.js');
const { provision, SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } = require('./provision.js');
const { extras } = require('./extras.js');
const { explainView } = require('./explain.js');
const operations = require('./operations.js');
const { reconcile } = require('./reconcile.js');
const warm = require('./warm.js');
const budgets = require('./budgets.js');
const { wakeUp, getCapacity } = require('./driver.js');
const { decisions, replay } = require('./decisions.js');

/** The buffer route() lends the native side for an order (at most 10 attempts; read at once). */
const ORDER = new Uint32Array(16);

/** `options.detached === true`, read once inside a guard (null and undefined mean false). */
function detachedOf(options) {
  if (options === undefined || options === null) return false;
  return readOr(() => options.detached === true, null) ?? callNative(() => binding.routerOptionsRefused('call'));
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
  provision(request, options) {
    return provision(this.#ctx, request, false, options);
  }

  /** Like `provision`, through the runtime's `launchDetached` (pools without it are ineligible). */
  provisionDetached(request, options) {
    return provision(this.#ctx, request, true, options);
  }

  /** The attempt order `provision` would use with registered signals, synchronously (no readiness or resolver). */
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

  /** Explains the decision for `request` without launching (runs readiness and the resolver, as `provision` does). */
  async explain(request, options) {
    const detached = detachedOf(options);
    const call = compileShared(request);
    const ctx = this.#ctx;
    checkLabels(call, ctx.native);
    const view = viewOf(ctx);
    const ext = await extras(ctx, view, call.compiled, detached, request);
    const labels = ctx.budgets !== null ? call.labelsJson : undefined;
    return warm.explainWarm(ctx, view, call.compiled, explainView(view, call.compiled, detached, ext, ctx.native, healthNow(ctx.health), labels, routerNow(ctx)));
  }

  /** Fills every warm pool to its size and keeps refilling; nothing is launched before the first call. */
  warmUp() {
    return warm.warmUp(this.#ctx);
  }

  /** The kept decision records (option `decisions`), newest first: `{ sandboxId?, since?, limit? }`. */
  decisions(query) {
    return decisions(this.#ctx, query);
  }

  /** A recorded decision decided again by this router's registry and options, on the record's inputs. */
  replay(record) {
    return replay(this.#ctx, record);
  }

  /** The wait queue (depth, oldest wait, per `fairBy` value) and each pool's launch tokens and cooldown. */
  queueStatus() {
    return binding.routerQueueStatus(this.#ctx.native, routerNow(this.#ctx));
  }

  /** Every warm pool's counters: target, idle, launching, claims, misses, failures. */
  warmStatus() {
    return warm.warmStatus(this.#ctx);
  }

  /** Stops refilling and destroys idle warm members (`keepWarm: true` leaves them recorded); rejects, never throws. */
  close(options) {
    try {
      binding.routerCloseQueue(this.#ctx.native);
      wakeUp(this.#ctx);
      return warm.close(this.#ctx, options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Live health of every registered pool, in registration order (empty with `health: false`; per process). */
  health() {
    const ctx = this.#ctx;
    if (ctx.health === null) return [];
    viewOf(ctx);
    return callNative(() => binding.routerHealth(ctx.native, healthNow(ctx.health)));
  }

  /** Reads every pool's capacity reader concurrently, each bounded by the capacity deadline; never creates. */
  getCapacity() {
    return getCapacity(this.#ctx);
  }

  /**
   * Compares each pool's stamped sandboxes with the mapping store (`orphan`, `stale-mapping`,
   * `mapped`, `pending`, `unknown` pools); a dry run unless `reclaim: true`. See lib/reconcile.js.
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

  /** Destroys the sandbox and unmaps it; any failure but an already-deleted sandbox keeps the mapping. */
  destroy(id) {
    return operations.destroy(this.#ctx, id);
  }

  /** Replaces sandbox `id`'s budget charge with its actual cost; resolves to whether a charge was found. */
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
