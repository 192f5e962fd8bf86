'use strict';
// Finders: how reconcile lists the sandboxes of one pool that carry the router's stamp.
//
// A pool built by createSandboxRouter / createProviderRuntime for Daytona, E2B, Microsandbox
// or Agent37 gets a NATIVE finder: the provider's own list API over the capacity readers'
// HTTP (src/readers/: one file per provider, the stamp rule in stamp.rs), with the same
// credentials the factory already holds, kept in this closure and nowhere else. Why not
// the adapter's findAllByLabels? On E2B the
// published adapter's label search finds nothing against the real SDK (see
// ../shared/reference/sandbox-runtime-port.md, point 5); the list APIs return each
// sandbox's labels, so the stamp is checked item by item.
//
// Every other pool falls back to its runtime's `findAllByLabels({ agent-relay-sbx-fleet })`.
// The port's handles carry no labels, so a handle is trusted as stamped only when it
// carries `labels` itself (the local runtime's do) with the whole stamp; a handle without
// labels can be matched to a mapping by its provider id, but never reclaimed.

const { binding } = require('./binding.js');
const { guarded, copyOptions } = require('./guard.js');
const { serialize } = require('./serialize.js');
const { within, TIMED_OUT } = require('./within.js');

/** Label key of the router's fleet stamp. */
const SANDBOX_FLEET_LABEL = 'agent-relay-sbx-fleet';
/** Label key of the router's id stamp (also exported by provision.js). */
const SANDBOX_ID_LABEL = 'agent-relay-sbx-id';

/** runtime object → its native finder (made by the factory; holds the credentials). */
const FINDERS = new WeakMap();

/**
 * Registers a native finder for a runtime the factory made, when its provider has one.
 * `options`: `{ apiKey, baseUrl?, organizationId?, maxPages?, pageSize? }`, validated once
 * natively (src/readers/config.rs: options a reader would refuse make every list
 * MALFORMED). The key stays in the returned closure.
 */
function attachFinder(runtime, kind, options) {
  let spec;
  let copy;
  try {
    copy = copyOptions(options, 1);
    spec = serialize({ provider: kind, options: copy });
  } catch {
    return;
  }
  if (spec === null) return;
  const native = binding.nativeFinder(spec);
  if (native !== null) FINDERS.set(runtime, nativeFinder(native, copy.apiKey));
}

function nativeFinder(native, apiKey) {
  return {
    kind: 'native',
    /** @returns {Promise<{ reason: string | null, items: Found[] }>} */
    async find(fleet, timeoutMs) {
      const r = await native.find(apiKey, fleet, timeoutMs);
      return {
        reason: r.reason ?? null,
        items: r.items.map((f) => ({ providerSandboxId: f.providerSandboxId, sandboxId: f.sandboxId, createdAtMs: f.createdAtMs ?? null, verified: true })),
      };
    },
  };
}

/**
 * @typedef {object} Found
 * @property {string} providerSandboxId
 * @property {string | null} sandboxId the stamp's sbx id (null: the handle carried no labels)
 * @property {number | null} createdAtMs
 * @property {boolean} verified whether the whole stamp was seen on the item
 */

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
      if (!has) return { reason: 'NOT_SUPPORTED', items: [] };
      let answer;
      try {
        answer = await within(runtime.findAllByLabels({ [SANDBOX_FLEET_LABEL]: fleet }, { timeoutMs }), timeoutMs);
      } catch {
        // The adapter's error text is the provider's: only the fact is kept.
        return { reason: 'READ_FAILED', items: [] };
      }
      if (answer === TIMED_OUT) return { reason: 'TIMEOUT', items: [] };
      // Read once, inside a guard; the stamp rule is native (src/readers/stamp.rs).
      let text;
      try {
        text = guarded(() => serialize(Array.isArray(answer) ? Array.from(answer, readHandle) : null));
      } catch {
        text = null;
      }
      const r = binding.judgeHandles(text, fleet);
      return {
        reason: r.reason ?? null,
        items: r.items.map((h) => ({ providerSandboxId: h.providerSandboxId, sandboxId: h.sandboxId ?? null, createdAtMs: h.createdAtMs ?? null, verified: h.verified })),
      };
    },
  };
}

/**
 * What the stamp rule needs of one handle from findAllByLabels, read inside the caller's
 * guard: its id, the two stamp labels when it carries labels (null when it carries none),
 * and its creation time as JavaScript reads a date (null when it is not an object).
 */
function readHandle(h) {
  if (h === null || typeof h !== 'object') return null;
  const labels = h.labels;
  const created = h.createdAt;
  return {
    id: h.id,
    labels: labels !== null && typeof labels === 'object' ? { [SANDBOX_FLEET_LABEL]: labels[SANDBOX_FLEET_LABEL], [SANDBOX_ID_LABEL]: labels[SANDBOX_ID_LABEL] } : null,
    createdAtMs: typeof created === 'string' ? Date.parse(created) : null,
  };
}

module.exports = { attachFinder, finderFor, SANDBOX_FLEET_LABEL, SANDBOX_ID_LABEL };
