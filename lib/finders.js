'use strict';
// Finders: how reconcile lists the sandboxes of one pool that carry the router's stamp.
//
// A pool built by createSandboxRouter / createProviderRuntime for Daytona, E2B, Microsandbox
// or Agent37 gets a NATIVE finder: the provider's own list API over the capacity readers'
// HTTP (src/readers/find.rs), with the same credentials the factory already holds, kept in
// this closure and nowhere else. Why not the adapter's findAllByLabels? On E2B the
// published adapter's label search finds nothing against the real SDK (see
// ../shared/reference/sandbox-runtime-port.md, point 5); the list APIs return each
// sandbox's labels, so the stamp is checked item by item.
//
// Every other pool falls back to its runtime's `findAllByLabels({ agent-relay-sbx-fleet })`.
// The port's handles carry no labels, so a handle is trusted as stamped only when it
// carries `labels` itself (the local runtime's do) with the whole stamp; a handle without
// labels can be matched to a mapping by its provider id, but never reclaimed.
//
// A finder answers a Listing: one column per field, the form reconcile's native call
// takes (src/binding/reconcile.rs), so 10,000 items cross the seam as a few arrays.

const { binding } = require('./binding.js');
const { guarded } = require('./guard.js');
const { within, TIMED_OUT } = require('./within.js');

/** Label key of the router's fleet stamp. */
const SANDBOX_FLEET_LABEL = 'agent-relay-sbx-fleet';
/** Label key of the router's id stamp (also exported by provision.js). */
const SANDBOX_ID_LABEL = 'agent-relay-sbx-id';
const SBX_ID = /^sbx_[0-9a-f]{32}$/;
const NATIVE_KINDS = new Set(['daytona', 'e2b', 'microsandbox', 'agent37']);

/** runtime object → its native finder (made by the factory; holds the credentials). */
const FINDERS = new WeakMap();

/**
 * Registers a native finder for a runtime the factory made. `options`: `{ apiKey, baseUrl?,
 * organizationId?, maxPages?, pageSize? }` (already validated by the factory). The key stays
 * in the returned closure.
 */
function attachFinder(runtime, kind, options) {
  if (!NATIVE_KINDS.has(kind) || typeof options.apiKey !== 'string') return;
  const config = {};
  if (options.baseUrl !== undefined) config.baseUrl = options.baseUrl;
  if (kind === 'daytona' && options.organizationId !== undefined) config.organizationId = options.organizationId;
  if (options.maxPages !== undefined) config.maxPages = options.maxPages;
  if (options.pageSize !== undefined) config.pageSize = options.pageSize;
  FINDERS.set(runtime, nativeFinder(kind, JSON.stringify(config), options.apiKey));
}

function nativeFinder(kind, configJson, apiKey) {
  return {
    kind: 'native',
    /** @returns {Promise<{ reason: string | null, listing: Listing }>} */
    async find(fleet, timeoutMs) {
      const r = await binding.findStamped(kind, configJson, apiKey, fleet, Math.max(1, Math.min(timeoutMs, 2 ** 31 - 1)));
      const l = listing(r.items.length);
      r.items.forEach((f, i) => add(l, i, f.providerSandboxId, f.sandboxId, true, f.createdAtMs));
      return { reason: r.reason ?? null, listing: l };
    },
  };
}

/**
 * @typedef {object} Listing one pool's stamped items, one column per field (row i: item i)
 * @property {string[]} providerSandboxIds
 * @property {Array<string | null>} sandboxIds the stamps' sbx ids (null: the handle carried no labels)
 * @property {Uint8Array} verified 1 when the whole stamp was seen on the item
 * @property {Float64Array} createdAtMs NaN when unknown
 */

/** An empty listing of `n` rows (filled by `add`). */
function listing(n) {
  return { providerSandboxIds: new Array(n), sandboxIds: new Array(n), verified: new Uint8Array(n), createdAtMs: new Float64Array(n) };
}

function add(l, i, providerSandboxId, sandboxId, verified, createdAtMs) {
  l.providerSandboxIds[i] = providerSandboxId;
  l.sandboxIds[i] = sandboxId;
  l.verified[i] = verified ? 1 : 0;
  l.createdAtMs[i] = createdAtMs ?? NaN;
}

/** What a finder answers when the pool could not be listed. */
const UNLISTED = (reason) => ({ reason, listing: listing(0) });

/** The finder for a pool entry: native when the factory registered one, else the runtime's label search. */
function finderFor(entry) {
  return FINDERS.get(entry.runtime) ?? runtimeFinder(entry.runtime);
}

function runtimeFinder(runtime) {
  return {
    kind: 'runtime',
    async find(fleet, timeoutMs) {
      let has;
      try {
        has = guarded(() => typeof runtime.findAllByLabels === 'function');
      } catch {
        has = false;
      }
      if (!has) return UNLISTED('NOT_SUPPORTED');
      let answer;
      try {
        answer = await within(runtime.findAllByLabels({ [SANDBOX_FLEET_LABEL]: fleet }, { timeoutMs }), timeoutMs);
      } catch {
        // The adapter's error text is the provider's: only the fact is kept.
        return UNLISTED('READ_FAILED');
      }
      if (answer === TIMED_OUT) return UNLISTED('TIMEOUT');
      let items;
      try {
        items = guarded(() => {
          if (!Array.isArray(answer)) return null;
          return Array.from(answer, (h) => readHandle(h, fleet));
        });
      } catch {
        items = null;
      }
      if (items === null || items.some((x) => x === null)) return UNLISTED('MALFORMED');
      const found = items.filter((x) => x !== false);
      const l = listing(found.length);
      found.forEach((f, i) => add(l, i, f.providerSandboxId, f.sandboxId, f.verified, f.createdAtMs));
      return { reason: null, listing: l };
    },
  };
}

/**
 * One handle from findAllByLabels (read inside the caller's guard): a listing row, false
 * when its own labels show it is not stamped by this fleet (a search that ignored the
 * filter), or null when it is not a handle.
 */
function readHandle(h, fleet) {
  if (h === null || typeof h !== 'object' || typeof h.id !== 'string' || h.id === '') return null;
  const created = typeof h.createdAt === 'string' ? Date.parse(h.createdAt) : NaN;
  const labels = h.labels;
  let sandboxId = null;
  let verified = false;
  if (labels !== null && typeof labels === 'object') {
    if (labels[SANDBOX_FLEET_LABEL] !== fleet) return false;
    const id = labels[SANDBOX_ID_LABEL];
    if (typeof id !== 'string' || !SBX_ID.test(id)) return false;
    sandboxId = id;
    verified = true;
  }
  return { providerSandboxId: h.id, sandboxId, createdAtMs: Number.isFinite(created) ? created : null, verified };
}

module.exports = { attachFinder, finderFor, UNLISTED, SANDBOX_FLEET_LABEL, SANDBOX_ID_LABEL };
