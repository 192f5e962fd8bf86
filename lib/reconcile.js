'use strict';
// reconcile(): compares what the providers hold under this router's stamp with what the
// mapping store says, per pool, and (with `reclaim: true`) cleans up the difference.
//
// This file does the I/O and the guards: it reads the options, lists the pools (finders.js),
// reads the store, signals the intent writers' pids on this host, makes ONE native call
// that classifies the whole run (src/core/reconcile.rs: every rule, and the one predicate
// "this launch is over"), then performs the reclaim work it answered and builds the report.
// The listing and the store's records cross as columns and the answer names items by
// index, so a 10,000-sandbox run is one short native call (src/binding/reconcile.rs says
// what it costs), after a turn of the event loop that follows the store's answer.
//
// Why is this exact and safe by default?
// - Only what carries the WHOLE stamp is considered: the fleet label equal to this router's
//   fleet and a well-formed `sbx_` id label, checked item by item (finders.js). Nothing else
//   is ever destroyed, whatever a provider's filter did.
// - A stamped sandbox without a mapping is an orphan only when its provision is provably
//   over (its intent record says so, or a mapping of the same id points at another
//   sandbox) or, without an intent, when it is older than `graceMs` (default 15 minutes:
//   three times the default launch deadline). Everything else is `pending`, never touched.
// - Right before each destroy, unmap or intent removal, the in-flight set (and, where a
//   record written meanwhile would save the item, the store) is read again, so a
//   provision that completed during the run is never undone.
// - A stale mapping is removed only after the runtime's `getById(id, { owned: true })` also
//   says the sandbox is gone (when the runtime has getById).
// - Dry run by default: the report is computed, nothing is changed.
//
// The report and the events carry ids, counts and reason codes, never provider text.

const os = require('node:os');
const { binding } = require('./binding.js');
const { SandboxRequestValidationError, MappingPersistenceError, callNative } = require('./errors.js');
const { viewOf } = require('./registry.js');
const { guarded } = require('./guard.js');
const { within, TIMED_OUT } = require('./within.js');
const { hasMethods } = require('./options.js');
const { emit } = require('./events.js');
const { finderFor, UNLISTED, SANDBOX_FLEET_LABEL } = require('./finders.js');
const { isNotFound } = require('./operations.js');
const { coordinatorOf } = require('./postgres.js');

/** The label of an idle warm member's record (src/core/request.rs SANDBOX_WARM_LABEL). */
const WARM_LABEL = binding.SANDBOX_WARM_LABEL_KEY;
const { released } = require('./budgets.js');

/** Default age (ms) after which a stamped sandbox without mapping or intent is an orphan. */
const DEFAULT_GRACE_MS = 15 * 60_000;
/** Default deadline of a whole reconcile run. */
const DEFAULT_RECONCILE_TIMEOUT_MS = 120_000;
/** Default number of destroys/unmaps in flight at once. */
const DEFAULT_CONCURRENCY = 8;
const HOST = os.hostname();
const OPTION_KEYS = ['providers', 'reclaim', 'graceMs', 'concurrency', 'timeoutMs'];

/**
 * Whether a provision of this process is still making sandbox `id` (its machine lives until
 * the provision has settled: src/binding/acquisition.rs). Re-read right before each action.
 */
const { inFlight, othersInFlight } = require('./options.js');

function invalid(field, what) {
  return new SandboxRequestValidationError(`invalid reconcile options: ${field} ${what}`, 'INVALID_REQUEST', { field });
}

function readOptions(options) {
  if (options === undefined || options === null) return {};
  let o;
  try {
    o = guarded(() => {
      if (typeof options !== 'object') return null;
      const out = {};
      for (const k of Object.keys(options)) out[k] = options[k];
      if (Array.isArray(out.providers)) out.providers = Array.from(out.providers);
      return out;
    });
  } catch {
    throw invalid('options', 'could not be read (a property access threw)');
  }
  if (o === null) throw invalid('options', 'must be an object');
  for (const k of Object.keys(o)) if (!OPTION_KEYS.includes(k)) throw invalid(k.slice(0, 64), 'is not a known option');
  if (o.reclaim !== undefined && typeof o.reclaim !== 'boolean') throw invalid('reclaim', 'must be a boolean');
  const int = (name, min, max) => {
    const v = o[name];
    if (v !== undefined && (!Number.isInteger(v) || v < min || v > max)) throw invalid(name, `must be an integer from ${min} to ${max}`);
  };
  int('graceMs', 0, 30 * 86_400_000);
  int('concurrency', 1, 256);
  int('timeoutMs', 1, 86_400_000);
  if (o.providers !== undefined) {
    if (!Array.isArray(o.providers)) throw invalid('providers', 'must be an array of provider ids');
    o.providers.forEach((p, i) => {
      if (typeof p !== 'string') throw invalid(`providers[${i}]`, 'must be a provider id');
    });
  }
  return o;
}

/** Whether process `pid` on this host is gone (a pid we cannot signal but exists counts as alive). */
function processGone(pid) {
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return e.code === 'ESRCH';
  }
}

/** The writers on this host, among `intents`, whose process is gone (I/O: one signal 0 per pid). */
function gonePids(intents) {
  const pids = new Set();
  for (const i of intents) if (i.ownerHost === HOST && Number.isInteger(i.ownerPid) && i.ownerPid > 0) pids.add(i.ownerPid);
  return [...pids].filter(processGone);
}

const str = (v) => (typeof v === 'string' ? v : undefined);
const num = (v) => (typeof v === 'number' ? v : undefined);

/** A plain, typed copy of one intent record (read once, inside the caller's guard), or null. */
function readIntent(i) {
  if (i === null || typeof i !== 'object') return null;
  const id = i.id;
  if (typeof id !== 'string') return null;
  return {
    id,
    providerId: str(i.providerId),
    state: str(i.state),
    expiresAt: num(i.expiresAt),
    ownerHost: str(i.ownerHost),
    ownerPid: num(i.ownerPid),
    ownerSession: str(i.ownerSession),
  };
}

/**
 * The store's mapping records, read once (inside the caller's guard), as the columns the
 * native call takes; a record that is not a mapping is left out.
 */
function readMappings(records) {
  const m = { ids: [], providerIds: [], providerSandboxIds: [], fleets: [], createdAtMs: null, warm: [] };
  const created = [];
  for (const r of records) {
    if (r === null || typeof r !== 'object') continue;
    const labels = r.labels;
    const id = r.id;
    const providerId = r.providerId;
    const providerSandboxId = r.providerSandboxId;
    const fleet = labels !== null && typeof labels === 'object' ? labels[SANDBOX_FLEET_LABEL] : undefined;
    const createdAt = r.createdAt;
    if (typeof id !== 'string' || typeof providerId !== 'string' || typeof providerSandboxId !== 'string') continue;
    m.ids.push(id);
    m.providerIds.push(providerId);
    m.providerSandboxIds.push(providerSandboxId);
    m.fleets.push(typeof fleet === 'string' ? fleet : null);
    const warm = labels !== null && typeof labels === 'object' ? labels[WARM_LABEL] : undefined;
    m.warm.push(typeof warm === 'string' ? warm : null);
    created.push(typeof createdAt === 'string' ? Date.parse(createdAt) : NaN);
  }
  m.createdAtMs = Float64Array.from(created);
  return m;
}

/** Documented items `{ sandboxId, providerSandboxId, reason }`: row `k` names index `at[k]` of `ids`. */
const rows = (at, ids, providerSandboxIds, reasons) => Array.from(at, (i, k) => ({ sandboxId: ids[i], providerSandboxId: providerSandboxIds[i], reason: reasons[k] }));

/**
 * The documented pool object. The native answer names items by index into what this run
 * read (the listing's and the mappings' columns); pending items carry their ids.
 */
function poolReport(providerId, finder, reason, classes, listing, mappings) {
  const { orphan: o, staleMapping: s, pending: p } = classes;
  const orphan = rows(o.items, listing.sandboxIds, listing.providerSandboxIds, o.reasons);
  const staleMapping = rows(s.mappings, mappings.ids, mappings.providerSandboxIds, s.reasons);
  const mapped = Array.from(classes.mapped, (j) => mappings.ids[j]);
  const pending = rows(p.reasons.keys(), p.sandboxIds, p.providerSandboxIds, p.reasons);
  const counts = { orphan: orphan.length, staleMapping: staleMapping.length, mapped: mapped.length, pending: pending.length };
  const pool = { providerId, status: reason === null ? 'listed' : 'unknown', finder, counts, orphan, staleMapping, mapped, pending };
  if (reason !== null) pool.reason = reason;
  return pool;
}

/** The reclaim work list: one action per row of the answer's columns, with the ids it acts on. */
function workOf(w, listings, mappings, intents) {
  return Array.from(w.classes, (cls, r) => {
    const [pool, i] = [w.pools[r], w.indices[r]];
    const [ids, providerSandboxIds] = cls === 'orphan' ? [listings[pool].sandboxIds, listings[pool].providerSandboxIds] : cls === 'stale-mapping' ? [mappings.ids, mappings.providerSandboxIds] : [null, null];
    const sandboxId = ids === null ? intents[i].id : ids[i];
    return { class: cls, pool, sandboxId, providerSandboxId: ids === null ? null : providerSandboxIds[i], savedByMapping: w.savedByMapping[r], removesIntent: w.removesIntent[r], warmMember: w.warmMember[r] };
  });
}

/** A turn of the event loop, timers included (a setImmediate from the poll phase would skip them). */
const yieldNow = () => new Promise((r) => setTimeout(r, 0));

/** Runs `tasks` (functions returning promises) with at most `n` in flight. */
async function bounded(tasks, n) {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      await tasks[i]();
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, tasks.length) }, worker));
}

/**
 * Reconciles the pools' stamped sandboxes with the mapping store.
 * @param {import('./options.js').RouterContext} ctx
 */
async function reconcile(ctx, options) {
  const o = readOptions(options);
  const reclaim = o.reclaim === true;
  const graceMs = o.graceMs ?? DEFAULT_GRACE_MS;
  const concurrency = o.concurrency ?? DEFAULT_CONCURRENCY;
  const timeoutMs = o.timeoutMs ?? DEFAULT_RECONCILE_TIMEOUT_MS;
  const started = Date.now();
  const deadline = started + timeoutMs;
  const left = () => Math.max(0, deadline - Date.now());

  const view = viewOf(ctx);
  const byId = new Map(view.definitions.map((d) => [d.id, d]));
  const wanted = o.providers ?? view.definitions.map((d) => d.id);
  wanted.forEach((p, i) => {
    if (!byId.has(p)) throw invalid(`providers[${i}]`, 'is not a registered provider id');
  });
  const pools = [...new Set(wanted)].map((p) => byId.get(p));

  const store = ctx.mappings;
  if (!hasMethods(store, ['list'])) {
    throw new MappingPersistenceError('the mapping store has no list(): reconcile cannot compare', 'MAPPING_READ_FAILED');
  }

  // 1. List every pool (concurrently, each within what is left of the deadline).
  const listed = await Promise.all(
    pools.map(async (def) => {
      const finder = finderFor(def);
      let r;
      try {
        const ms = left();
        r = ms === 0 ? UNLISTED('TIMEOUT') : await finder.find(ctx.fleet, ms);
      } catch {
        r = UNLISTED('READ_FAILED');
      }
      return { def, finder: finder.kind, reason: r.reason, listing: r.listing };
    }),
  );

  // 2. Then read the store (after the listing: a mapping written meanwhile is seen).
  let mappings;
  let intents = [];
  try {
    const raw = await within(store.list(), Math.max(1, Math.min(ctx.callbackTimeoutMs, left() || 1)));
    if (raw === TIMED_OUT) throw new Error('timed out');
    mappings = guarded(() => (Array.isArray(raw) ? readMappings(Array.from(raw)) : null));
    if (mappings === null) throw new Error('not a list');
    if (ctx.intents) {
      const rawIntents = await within(store.intents(), Math.max(1, Math.min(ctx.callbackTimeoutMs, left() || 1)));
      if (rawIntents === TIMED_OUT) throw new Error('timed out');
      intents = guarded(() => (Array.isArray(rawIntents) ? Array.from(rawIntents, readIntent) : null));
      if (intents === null) throw new Error('not a list');
    }
  } catch {
    throw new MappingPersistenceError('the mapping store could not be listed: nothing was reconciled', 'MAPPING_READ_FAILED');
  }
  intents = intents.filter((i) => i !== null);
  // A turn of the event loop between the store's answer and the classification: a large
  // inventory is two shorter stalls, not one.
  await yieldNow();

  // 3. Classify: one native call (src/core/reconcile.rs decides; in flight is read there).
  const listings = listed.map((l) => l.listing);
  const c = callNative(() =>
    binding.reconcileClassify(ctx.native, othersInFlight(ctx.native), {
      fleet: ctx.fleet,
      session: ctx.session,
      host: HOST,
      now: Date.now(),
      graceMs,
      reclaim,
      pools: listed.map((l) => ({ providerId: l.def.id, listed: l.reason === null ? l.listing : undefined })),
      mappings,
      intents,
      gonePids: gonePids(intents),
      warmPools: view.definitions.filter((d) => d.warm).map((d) => d.id),
    }),
  );
  const staleIntents = Array.from(c.staleIntents, (k) => intents[k].id);
  const report = { reclaim, fleet: ctx.fleet, graceMs, startedAt: new Date(started).toISOString(), durationMs: 0, timedOut: false, pools: {}, staleIntents, outcomes: [] };
  listed.forEach(({ def, finder, reason }, i) => {
    const pool = poolReport(def.id, finder, reason, c.pools[i], listings[i], mappings);
    report.pools[def.id] = pool;
    if (reason !== null) emit(ctx.observer, 'reconcile.listed', { providerId: def.id, status: 'unknown', reason });
    else emit(ctx.observer, 'reconcile.listed', { providerId: def.id, status: 'known', ...pool.counts });
  });

  // 4. Reclaim, bounded, each action re-checked first.
  if (reclaim) {
    const tasks = workOf(c.work, listings, mappings, intents).map((w) => async () => {
      const def = listed[w.pool].def;
      const outcome =
        left() === 0
          ? 'DEADLINE'
          : w.class === 'orphan'
            ? await destroyOrphan(ctx, def, w, left)
            : w.class === 'stale-mapping'
              ? await unmapStale(ctx, def, w, left)
              : await dropStaleIntent(ctx, w, left);
      if (outcome === 'DEADLINE') report.timedOut = true;
      // What the reclaimed sandbox held (a capacity hold, a budget's concurrent slot) is
      // given back; a stale intent's launch held a slot as outcome unknown.
      if (outcome === 'DESTROYED' || outcome === 'UNMAPPED' || outcome === 'INTENT_REMOVED') await released(ctx, w.sandboxId, def.id);
      const entry = { providerId: def.id, sandboxId: w.sandboxId, providerSandboxId: w.providerSandboxId, class: w.class, outcome };
      report.outcomes.push(entry);
      emit(ctx.observer, 'reconcile.reclaimed', { sandboxId: entry.sandboxId, providerId: entry.providerId, class: entry.class, outcome });
    });
    await bounded(tasks, concurrency);
  }
  report.durationMs = Date.now() - started;
  if (Date.now() > deadline) report.timedOut = true;
  const totals = { orphan: 0, staleMapping: 0, mapped: 0, pending: 0, unknownPools: 0 };
  for (const p of Object.values(report.pools)) {
    if (p.status === 'unknown') totals.unknownPools++;
    for (const k of ['orphan', 'staleMapping', 'mapped', 'pending']) totals[k] += p.counts[k];
  }
  report.totals = totals;
  if (ctx.telemetry !== null) ctx.telemetry.reconciled(totals.orphan, totals.staleMapping, staleIntents.length);
  emit(ctx.observer, 'reconcile.completed', { reclaim, timedOut: report.timedOut, durationMs: report.durationMs, ...totals });
  return report;
}

/** Whether the store has a record for `id` now (a throw or timeout counts as "maybe": yes). */
async function mappedNow(ctx, id, ms) {
  try {
    const r = await within(ctx.mappings.get(id), Math.max(1, Math.min(ctx.callbackTimeoutMs, ms)));
    return r !== null && r !== undefined;
  } catch {
    return true;
  }
}

/** Destroys one orphan (a work item) as an owned sandbox; returns the typed outcome. */
async function destroyOrphan(ctx, def, item, left) {
  if (inFlight(item.sandboxId)) return 'IN_FLIGHT';
  // An idle warm member of a pool without warm pools (WARM_POOL_GONE): out of the fleet's
  // inventory first (claimed meanwhile: it is a provision's now), its record after.
  const c = ctx.capacity?.coordinator ?? null;
  const fleet = item.warmMember && c !== null && coordinatorOf(ctx.mappings) === c ? c : null;
  if (fleet !== null && (await fleet.warmTake(item.sandboxId).catch(() => null)) === null) return 'NOW_MAPPED';
  // A provision of this id that completed during the run (same sandbox) is not undone. A
  // mapping naming ANOTHER sandbox (DUPLICATE_OF_MAPPED) does not protect this one.
  if (item.savedByMapping && (await mappedNow(ctx, item.sandboxId, left()))) return 'NOW_MAPPED';
  const rt = def.runtime;
  const ms = Math.min(ctx.operationTimeoutMs, left());
  if (ms === 0) return 'DEADLINE';
  try {
    let handle = { id: item.providerSandboxId };
    if (hasMethods(rt, ['getById'])) {
      // Owned: an attached handle's destroy only forgets the sandbox on some adapters.
      let h;
      try {
        h = await within(rt.getById(item.providerSandboxId, { owned: true }), ms);
      } catch (error) {
        // An adapter may say "not found" by rejecting (a 404): gone already.
        if (isNotFound(error)) return 'ALREADY_GONE';
        throw error;
      }
      if (h === TIMED_OUT) return 'TIMED_OUT';
      if (h === null || h === undefined) return 'ALREADY_GONE';
      handle = h;
    }
    const r = await within(rt.destroy(handle), Math.max(1, Math.min(ctx.operationTimeoutMs, left())));
    if (r === TIMED_OUT) return 'TIMED_OUT';
  } catch {
    return 'DESTROY_FAILED';
  }
  ctx.handles.delete(item.sandboxId);
  if (item.warmMember) await within(ctx.mappings.delete(item.sandboxId), Math.max(1, Math.min(ctx.callbackTimeoutMs, left() || 1))).catch(() => null);
  // Its intent is settled now. (A DUPLICATE_OF_MAPPED id has a live mapping: left alone.)
  if (ctx.intents && item.removesIntent) await dropIntent(ctx, item, left);
  return 'DESTROYED';
}

/**
 * Removes one stale intent, unless its provision is in flight again or a record of its id
 * was written since the store was read (the store's delete would remove that record too).
 */
async function dropStaleIntent(ctx, item, left) {
  if (inFlight(item.sandboxId)) return 'IN_FLIGHT';
  if (item.savedByMapping && (await mappedNow(ctx, item.sandboxId, left()))) return 'NOW_MAPPED';
  return dropIntent(ctx, item, left);
}

/** Removes the intent record of `item.sandboxId` (the store's delete removes intents too). */
async function dropIntent(ctx, item, left) {
  try {
    const r = await within(ctx.mappings.delete(item.sandboxId), Math.max(1, Math.min(ctx.callbackTimeoutMs, left() || 1)));
    return r === TIMED_OUT ? 'TIMED_OUT' : 'INTENT_REMOVED';
  } catch {
    return 'UNMAP_FAILED';
  }
}

/** Removes one stale mapping once the runtime confirms the sandbox is gone. */
async function unmapStale(ctx, def, item, left) {
  if (inFlight(item.sandboxId)) return 'IN_FLIGHT';
  const rt = def.runtime;
  const ms = Math.min(ctx.operationTimeoutMs, left());
  if (ms === 0) return 'DEADLINE';
  if (hasMethods(rt, ['getById'])) {
    try {
      const h = await within(rt.getById(item.providerSandboxId, { owned: true }), ms);
      if (h === TIMED_OUT) return 'TIMED_OUT';
      if (h !== null && h !== undefined) return 'STILL_EXISTS';
    } catch (error) {
      // An adapter may say "not found" by rejecting (a 404); anything else leaves the mapping.
      if (!isNotFound(error)) return 'LOOKUP_FAILED';
    }
  }
  try {
    const r = await within(ctx.mappings.delete(item.sandboxId), Math.max(1, Math.min(ctx.callbackTimeoutMs, left())));
    if (r === TIMED_OUT) return 'TIMED_OUT';
  } catch {
    return 'UNMAP_FAILED';
  }
  ctx.handles.delete(item.sandboxId);
  return 'UNMAPPED';
}

module.exports = { reconcile, DEFAULT_GRACE_MS, DEFAULT_RECONCILE_TIMEOUT_MS, DEFAULT_CONCURRENCY };
