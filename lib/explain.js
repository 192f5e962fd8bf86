'use strict';
// Explanations: the native core decides and writes the numbers into two typed arrays this module
// lends it (layout: src/core/explain.rs); the documented objects are built here, eagerly, in the 0.7
// field order (why in JS: docs/performance.md). Pools are named by the ids JS holds: nothing but ids,
// codes and details reaches an explanation, never a runtime or a credential.

const { binding } = require('./binding.js');
const { callNative } = require('./errors.js');

// Names behind the indices the core writes (codes, strategies, objectives), read once.
const VOCABULARY = binding.explainVocabulary();
/** The interner every explanation of this process reuses (src/binding/explain.rs). */
const EXPLAINER = binding.createExplainer();
const CODES = VOCABULARY.codes;
const STRATEGIES = /** @type {import('../index').RoutingStrategy[]} */ (VOCABULARY.strategies);
const OBJECTIVES = /** @type {import('../index').LatencyObjective[]} */ (VOCABULARY.objectives);
// The header at the start of the buffers, then the decision; where the header's fields are
// (src/binding/explain.rs `header`, the one copy).
const { headerInts: HI, headerFloats: HF, header: H } = VOCABULARY;
const ELIGIBLE_INTS = 4;
const ELIGIBLE_FLOATS = 11;
const NONE = 0xffffffff;

// Lent to the core on every call and grown on demand: one pair per process (explanations
// are synchronous, so calls never overlap).
let ints = new Uint32Array(1024);
let floats = new Float64Array(1024);

// Our mirror of the core's table of texts (details and summaries): the core sends only
// the texts we lack, and a new generation when it started its table over (it bounds it).
let texts = [];
let generation = 0xffffffff;

/** The native decision in the buffers, `texts` up to date (retried once with larger buffers); `router` may be null. */
function decide(view, compiled, detached, extras, router, now, labelsJson, budgetNow) {
  const ex = extras ?? undefined;
  const r = router ?? undefined;
  call(view, compiled, detached, ex, r, now, labelsJson, budgetNow);
  if (ints[H.fits] !== 1) {
    const floatsNeeded = ints[H.floatsNeeded];
    ints = new Uint32Array(Math.max(ints[H.intsNeeded], ints.length * 2));
    floats = new Float64Array(Math.max(floatsNeeded, floats.length * 2));
    call(view, compiled, detached, ex, r, now, labelsJson, budgetNow);
  }
}

function call(view, compiled, detached, extras, router, now, labelsJson, budgetNow) {
  ints[H.generation] = generation;
  ints[H.texts] = texts.length;
  const fresh = callNative(() =>
    binding.explainDecision(EXPLAINER, view.native, compiled.native, detached, extras, ints, floats, router, now, labelsJson, budgetNow),
  );
  if (ints[H.generation] !== generation) {
    generation = ints[H.generation];
    texts = [];
  }
  // The core sent the texts from index ints[H.texts] on (0 after a new generation).
  if (texts.length !== ints[H.texts]) texts.length = ints[H.texts];
  if (fresh !== undefined && fresh !== null) for (let i = 0; i < fresh.length; i++) texts.push(fresh[i]);
}

/** The rejected pools, from the buffers: `[{ providerId, reasons: [{ code, detail }] }]`. */
function rejectedOf(defs) {
  const n = ints[H.rejected];
  const out = new Array(n);
  let i = HI + ints[H.eligible] * ELIGIBLE_INTS;
  for (let k = 0; k < n; k++) {
    const providerId = defs[ints[i]].id;
    const count = ints[i + 1];
    i += 2;
    const reasons = new Array(count);
    for (let j = 0; j < count; j++) {
      reasons[j] = { code: CODES[ints[i]], detail: texts[ints[i + 1]] };
      i += 2;
    }
    out[k] = { providerId, reasons };
  }
  return out;
}

const weightOf = (x) => (Number.isNaN(x) ? null : x);

/** Adds `declared` and `observed` beside a dimension's blended `raw` (`health.observedSignals`; NaN: not blended). */
function sideBySide(dimension, declared, observed) {
  if (Number.isNaN(declared)) return dimension;
  dimension.declared = declared;
  dimension.observed = Number.isNaN(observed) ? null : observed;
  return dimension;
}

/**
 * The public explanation (`router.explain`, `routeProviders`) for `compiled` over `view`; `extras` and
 * `router` may be null; with `labelsJson`, budgets reject pools without room now; `budgetNow`: the router's clock (budgets, pacing).
 * @returns {import('../index').RoutingExplanation}
 */
function explainView(view, compiled, detached, extras, router = null, now = undefined, labelsJson = undefined, budgetNow = undefined) {
  decide(view, compiled, detached, extras, router, now, labelsJson, budgetNow);
  const defs = view.definitions;
  const objective = OBJECTIVES[ints[H.objective]];
  const wc = weightOf(floats[0]);
  const wl = weightOf(floats[1]);
  const wr = weightOf(floats[2]);
  const ne = ints[H.eligible];
  const eligible = new Array(ne);
  for (let k = 0; k < ne; k++) {
    const i = HI + k * ELIGIBLE_INTS;
    const f = HF + k * ELIGIBLE_FLOATS;
    const tier = ints[i + 1];
    const position = ints[i + 2];
    eligible[k] = {
      breakdown: {
        cost: { normalized: floats[f + 2], raw: floats[f + 1], weight: wc },
        latency: sideBySide({ normalized: floats[f + 4], objective, raw: floats[f + 3], weight: wl }, floats[f + 7], floats[f + 8]),
        reliability: sideBySide({ normalized: floats[f + 6], raw: floats[f + 5], weight: wr }, floats[f + 9], floats[f + 10]),
      },
      providerId: defs[ints[i]].id,
      providerOrderPosition: position === NONE ? null : position,
      rank: k + 1,
      regionTier: tier === NONE ? null : tier,
      score: floats[f],
      tieBreak: ints[i + 3] === 1 ? 'providerId' : null,
    };
  }
  return {
    summary: texts[ints[H.summary]],
    strategy: STRATEGIES[ints[H.strategy]],
    latencyObjective: objective,
    maxAcquisitionAttempts: ints[H.maxAttempts],
    acquisitionFallback: ints[H.fallbackAllowed] === 1 ? 'allowed' : 'forbidden',
    eligible,
    rejected: rejectedOf(defs),
  };
}

module.exports = { explainView };
