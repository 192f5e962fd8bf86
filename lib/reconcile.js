'use strict';
// reconcile(): compares what the providers hold under this router's stamp with what the
// mapping store says, per pool, and (with `reclaim: true`) cleans up the difference.
//
// Why is this exact and safe by default?
// - Only what carries the WHOLE stamp is considered: the fleet label equal to this router's
//   fleet and a well-formed `sbx_` id label, checked item by item (finders.js). Nothing else
//   is ever destroyed, whatever a provider's filter did.
// - A stamped sandbox without a mapping is an orphan only when its provision is provably
//   over: its intent record says the launch failed, or its writer's process is gone, or its
//   intent expired, or a mapping of the same id points at another sandbox (a launch that
//   allocated and was then retried elsewhere). Without an intent, only its age proves it:
//   older than `graceMs` (default 15 minutes: three times the default launch deadline).
//   Everything else is `pending`, never touched.
// - Right before a destroy or an unmap, the store and the in-flight set are read again, so
//   a provision that completed during the run is never undone.
// - A stale mapping is removed only after the runtime's `getById(id, { owned: true })` also
//   says the sandbox is gone (when the runtime has getById), and only for mappings older than
//   the grace period whose labels carry this fleet's stamp (lists are eventually consistent).
// - Dry run by default: the report is computed, nothing is changed.
//
// The report and the events carry ids, counts and reason codes, never provider text.

const os = require('node:os');
const { SandboxRequestValidationError, MappingPersistenceError } = require('./errors.js');
const { nativeView } = require('./registry.js');
const { guarded } = require('./guard.js');
const { within, TIMED_OUT } = require('./within.js');
const { hasMethods } = require('./options.js');
const { emit } = require('./events.js');
const { finderFor, SANDBOX_FLEET_LABEL } = require('./finders.js');
const { isNotFound } = require('./operations.js');
const { inFlight } = require('./provision.js');

/** Default age (ms) after which a stamped sandbox without mapping or intent is an orphan. */
const DEFAULT_GRACE_MS = 15 * 60_000;
/** Default deadline of a whole reconcile run. */
const DEFAULT_RECONCILE_TIMEOUT_MS = 120_000;
/** Default number of destroys/unmaps in flight at once. */
const DEFAULT_CONCURRENCY = 8;
const HOST = os.hostname();
const OPTION_KEYS = ['providers', 'reclaim', 'graceMs', 'concurrency', 'timeoutMs'];

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
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return e.code === 'ESRCH';
  }
}

/** A plain, typed copy of one intent record (read once, inside the caller's guard). */
function readIntent(i) {
  if (i === null || typeof i !== 'object') return null;
  const out = {
    id: i.id,
    providerId: i.providerId,
    state: i.state,
    expiresAt: i.expiresAt,
    ownerHost: i.ownerHost,
    ownerPid: i.ownerPid,
    ownerSession: i.ownerSession,
  };
  return typeof out.id === 'string' ? out : null;
}

/** A plain, typed copy of one mapping record, or null when it is not one. */
function readMapping(r) {
  if (r === null || typeof r !== 'object') return null;
  const labels = r.labels;
  const out = {
    id: r.id,
    providerId: r.providerId,
    providerSandboxId: r.providerSandboxId,
    fleet: labels !== null && typeof labels === 'object' ? labels[SANDBOX_FLEET_LABEL] : undefined,
    createdAtMs: typeof r.createdAt === 'string' ? Date.parse(r.createdAt) : NaN,
  };
  return typeof out.id === 'string' && typeof out.providerId === 'string' && typeof out.providerSandboxId === 'string' ? out : null;
}

/**
 * Why a stamped sandbox without a (matching) mapping is, or is not yet, an orphan.
 * Returns `[class, reason]`.
 */
function judge(ctx, found, mapping, intent, graceMs, now) {
  const id = found.sandboxId;
  if (inFlight(id)) return ['pending', 'IN_FLIGHT'];
  // A mapping of this id that names another sandbox: the provision completed elsewhere, so
  // this one (an earlier attempt that allocated after all) is held by no one.
  if (mapping !== undefined) return ['orphan', 'DUPLICATE_OF_MAPPED'];
  if (intent !== undefined) {
    if (intent.state === 'failed') return ['orphan', 'LAUNCH_FAILED'];
    if (intent.ownerSession === ctx.session) return ['orphan', 'INTENT_ABANDONED'];
    if (intent.ownerHost === HOST && processGone(intent.ownerPid)) return ['orphan', 'WRITER_GONE'];
    if (typeof intent.expiresAt === 'number' && intent.expiresAt < now) return ['orphan', 'INTENT_EXPIRED'];
    return ['pending', 'IN_FLIGHT_ELSEWHERE'];
  }
  if (found.createdAtMs === null) return ['pending', 'AGE_UNKNOWN'];
  if (now - found.createdAtMs >= graceMs) return ['orphan', 'GRACE_ELAPSED'];
  return ['pending', 'WITHIN_GRACE'];
}

function emptyPool(providerId, finder) {
  return {
    providerId,
    status: 'listed',
    finder,
    counts: { orphan: 0, staleMapping: 0, mapped: 0, pending: 0 },
    orphan: [],
    staleMapping: [],
    mapped: [],
    pending: [],
  };
}

/** Items classified between two yields to the event loop (a 10,000-sandbox pool is one admin call, not one stall). */
const CHUNK = 1000;
const yieldNow = () => new Promise((r) => setImmediate(r));

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

  const view = nativeView(ctx.registry);
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
        r = ms === 0 ? { reason: 'TIMEOUT', items: [] } : await finder.find(ctx.fleet, ms);
      } catch {
        r = { reason: 'READ_FAILED', items: [] };
      }
      return { def, finder: finder.kind, reason: r.reason, items: r.items };
    }),
  );

  // 2. Then read the store (after the listing: a mapping written meanwhile is seen).
  let mappings;
  let intents = [];
  try {
    const raw = await within(store.list(), Math.max(1, Math.min(ctx.callbackTimeoutMs, left() || 1)));
    if (raw === TIMED_OUT) throw new Error('timed out');
    mappings = guarded(() => (Array.isArray(raw) ? Array.from(raw, readMapping) : null));
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
  await yieldNow();
  const mapById = new Map();
  for (const m of mappings) if (m !== null) mapById.set(m.id, m);
  const intentById = new Map();
  for (const i of intents) if (i !== null) intentById.set(i.id, i);

  // 3. Classify.
  const now = Date.now();
  const report = { reclaim, fleet: ctx.fleet, graceMs, startedAt: new Date(started).toISOString(), durationMs: 0, timedOut: false, pools: {}, staleIntents: [], outcomes: [] };
  const work = [];
  for (const { def, finder, reason, items } of listed) {
    const pool = emptyPool(def.id, finder);
    report.pools[def.id] = pool;
    if (reason !== null) {
      pool.status = 'unknown';
      pool.reason = reason;
      emit(ctx.observer, 'reconcile.listed', { providerId: def.id, status: 'unknown', reason });
      continue;
    }
    const listedIds = new Set();
    const seenIds = new Set();
    let n = 0;
    for (const f of items) {
      if (++n % CHUNK === 0) await yieldNow();
      listedIds.add(f.providerSandboxId);
      if (f.sandboxId !== null) seenIds.add(f.sandboxId);
      const byProvider = f.sandboxId === null ? undefined : mapById.get(f.sandboxId);
      if (byProvider !== undefined && byProvider.providerId === def.id && byProvider.providerSandboxId === f.providerSandboxId) {
        pool.mapped.push(f.sandboxId);
        continue;
      }
      if (f.sandboxId === null || !f.verified) {
        // A handle without labels: matched to a mapping by its provider id, or unverifiable.
        const m = mappings.find((x) => x !== null && x.providerId === def.id && x.providerSandboxId === f.providerSandboxId);
        if (m) pool.mapped.push(m.id);
        else pool.pending.push({ sandboxId: null, providerSandboxId: f.providerSandboxId, reason: 'STAMP_UNVERIFIED' });
        continue;
      }
      const [cls, why] = judge(ctx, f, byProvider, intentById.get(f.sandboxId), graceMs, now);
      const item = { sandboxId: f.sandboxId, providerSandboxId: f.providerSandboxId, reason: why };
      pool[cls].push(item);
      if (cls === 'orphan') work.push({ kind: 'orphan', def, item });
    }
    // Mappings of this pool and fleet that the listing does not show.
    n = 0;
    for (const m of mappings) {
      if (++n % CHUNK === 0) await yieldNow();
      if (m === null || m.providerId !== def.id || m.fleet !== ctx.fleet || listedIds.has(m.providerSandboxId)) continue;
      if (inFlight(m.id)) continue;
      if (!(now - m.createdAtMs >= graceMs)) {
        pool.pending.push({ sandboxId: m.id, providerSandboxId: m.providerSandboxId, reason: 'NOT_LISTED_YET' });
        continue;
      }
      const item = { sandboxId: m.id, providerSandboxId: m.providerSandboxId, reason: 'NOT_LISTED' };
      pool.staleMapping.push(item);
      work.push({ kind: 'stale-mapping', def, item });
    }
    // Intents of this pool whose launch is provably over and left nothing listed: garbage.
    for (const i of intentById.values()) {
      if (i.providerId !== def.id || seenIds.has(i.id) || mapById.has(i.id)) continue;
      const over = i.state === 'failed' || (i.ownerSession !== ctx.session && i.ownerHost === HOST && processGone(i.ownerPid)) || (typeof i.expiresAt === 'number' && i.expiresAt < now);
      if (!over || inFlight(i.id)) continue;
      report.staleIntents.push(i.id);
      if (reclaim) work.push({ kind: 'stale-intent', def, item: { sandboxId: i.id, providerSandboxId: null, reason: 'NOTHING_LISTED' } });
    }
    for (const k of ['orphan', 'staleMapping', 'mapped', 'pending']) pool.counts[k] = pool[k].length;
    emit(ctx.observer, 'reconcile.listed', { providerId: def.id, status: 'known', ...pool.counts });
  }

  // 4. Reclaim, bounded, each action re-checked first.
  if (reclaim) {
    const tasks = work.map((w) => async () => {
      const outcome =
        left() === 0
          ? 'DEADLINE'
          : w.kind === 'orphan'
            ? await destroyOrphan(ctx, w.def, w.item, left)
            : w.kind === 'stale-mapping'
              ? await unmapStale(ctx, w.def, w.item, left)
              : await dropIntent(ctx, w.item, left);
      if (outcome === 'DEADLINE') report.timedOut = true;
      const entry = { providerId: w.def.id, sandboxId: w.item.sandboxId, providerSandboxId: w.item.providerSandboxId, class: w.kind, outcome };
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

/** Destroys one orphan as an owned sandbox; returns the typed outcome. */
async function destroyOrphan(ctx, def, item, left) {
  if (inFlight(item.sandboxId)) return 'IN_FLIGHT';
  // A provision of this id that completed during the run (same sandbox) is not undone. A
  // mapping naming ANOTHER sandbox (DUPLICATE_OF_MAPPED) does not protect this one.
  if (item.reason !== 'DUPLICATE_OF_MAPPED' && (await mappedNow(ctx, item.sandboxId, left()))) return 'NOW_MAPPED';
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
  // Its intent is settled now. (A DUPLICATE_OF_MAPPED id has a live mapping: left alone.)
  if (ctx.intents && item.reason !== 'DUPLICATE_OF_MAPPED') await dropIntent(ctx, item, left);
  return 'DESTROYED';
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
