'use strict';
// Finders: how reconcile lists the sandboxes of one pool that carry the router's stamp
// (docs/orphans-and-restarts.md). A factory-built Daytona, E2B, Microsandbox or Agent37 pool gets a
// native finder (src/readers/; the stamp rule, stamp.rs) with the factory's credentials, kept in this
// closure only; any other pool uses its runtime's `findAllByLabels`. Answers cross as columns.

const { binding } = require('./binding.js');
const { readOr, methodOf, copyOptions } = require('./guard.js');
const { serializeLenient } = require('./serialize.js');
const { within, TIMED_OUT } = require('./within.js');

/** Label keys of the router's stamp (src/core/request.rs: the one copy). */
const { SANDBOX_FLEET_LABEL, SANDBOX_ID_LABEL } = binding;

/** runtime object → its native finder (made by the factory; holds the credentials). */
const FINDERS = new WeakMap();

/** Registers a factory runtime's native finder (bad options: every list MALFORMED); the key stays in its closure. */
function attachFinder(runtime, kind, options) {
  const copy = readOr(() => copyOptions(options, 1), null);
  // Leniently: an option JSON cannot carry reads as null, which the native check refuses
  // (every list MALFORMED) or, for the key, takes as none (no native finder).
  const spec = copy === null ? null : serializeLenient({ provider: kind, options: copy });
  if (spec === null) return;
  const native = binding.nativeFinder(spec);
  if (native === null) return;
  const apiKey = copy.apiKey;
  const find = async (fleet, timeoutMs) => answered(await native.find(apiKey, fleet, timeoutMs), () => true);
  FINDERS.set(runtime, { find });
}

/**
 * A finder's answer: the core's reason the pool was not listed (null: listed) and its items as columns:
 * `sandboxIds` null without labels, `verified` 1 with the whole stamp, `createdAtMs` NaN when unknown.
 * @returns {{ reason: string | null, listing: { providerSandboxIds: string[], sandboxIds: Array<string | null>, verified: Uint8Array, createdAtMs: Float64Array } }}
 */
function answered(r, verified) {
  const n = r.items.length;
  const l = { providerSandboxIds: new Array(n), sandboxIds: new Array(n), verified: new Uint8Array(n), createdAtMs: new Float64Array(n) };
  r.items.forEach((f, i) => {
    l.providerSandboxIds[i] = f.providerSandboxId;
    l.sandboxIds[i] = f.sandboxId ?? null;
    l.verified[i] = verified(f) ? 1 : 0;
    l.createdAtMs[i] = f.createdAtMs ?? NaN;
  });
  return { reason: r.reason ?? null, listing: l };
}

/** The pool entry's native finder (the factory registered one), or null. */
const nativeFinderOf = (entry) => FINDERS.get(entry.runtime) ?? null;

/** What a finder answers when `failure` (`binding.ListFailureName`) happened: the core names the reason. */
const unlisted = (failure) => answered({ items: [], reason: binding.unlistedReason(failure) });
const { ListFailureName } = binding;

/** The finder for a pool entry: native when the factory registered one, else the runtime's label search. */
function finderFor(entry) {
  return FINDERS.get(entry.runtime) ?? runtimeFinder(entry.runtime);
}

function runtimeFinder(runtime) {
  return {
    async find(fleet, timeoutMs) {
      // The method is read once, in a guard (a getter that throws: no label search), and called as read.
      const findAll = methodOf(runtime, 'findAllByLabels');
      if (findAll === undefined) return unlisted(ListFailureName.NoLabelSearch);
      let answer;
      try {
        answer = await within(findAll.call(runtime, { [SANDBOX_FLEET_LABEL]: fleet }, { timeoutMs }), timeoutMs);
      } catch {
        // The adapter's error text is the provider's: only the fact is kept.
        return unlisted(ListFailureName.Threw);
      }
      if (answer === TIMED_OUT) return unlisted(ListFailureName.TimedOut);
      // Read once, inside a guard, leniently (a value JSON cannot carry is null: not an id,
      // not a label, an unknown time); the stamp rule is native (src/readers/stamp.rs).
      const text = readOr(() => serializeLenient(Array.isArray(answer) ? Array.from(answer, readHandle) : null), null);
      return answered(binding.judgeHandles(text, fleet), (h) => h.verified);
    },
  };
}

/** What the stamp rule needs of one handle (read in the caller's guard): id, stamp labels, creation time. */
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

module.exports = { attachFinder, finderFor, nativeFinderOf, SANDBOX_FLEET_LABEL, SANDBOX_ID_LABEL };
