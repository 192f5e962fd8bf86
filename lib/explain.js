'use strict';
// Explanations: the native core decides and writes the numbers into two typed arrays
// this module lends it; the documented objects are built here.
//
// Why build the objects in JS? The core's answer is mostly numbers (ranks, scores,
// breakdowns, reason codes). Handing them over in a Uint32Array and a Float64Array costs
// nothing; creating the same objects through napi costs a native call per property, and
// both explain floors fail that way (docs/performance.md). Pools are named by the ids JS already holds (`view.definitions`),
// so no id crosses the seam, and nothing but ids, codes and details reaches an explanation:
// never a runtime or a credential.
//
// Buffer layout: src/core/explain.rs (`layout`). The objects are plain data with the
// documented fields, in the order the 0.7 explanations had (JSON.stringify gives the same
// text), built eagerly: JSON.stringify, util.inspect and assert.deepStrictEqual all see
// ordinary objects.

const { binding } = require('./binding.js');
const { fromNative } = require('./errors.js');

// Names behind the indices the core writes (codes, strategies, objectives), read once.
const VOCABULARY = binding.explainVocabulary();
/** The interner every explanation of this process reuses (src/binding/explain.rs). */
const EXPLAINER = binding.createExplainer();
const CODES = VOCABULARY.codes;
const STRATEGIES = /** @type {import('../index').RoutingStrategy[]} */ (VOCABULARY.strategies);
const OBJECTIVES = /** @type {import('../index').LatencyObjective[]} */ (VOCABULARY.objectives);
// The header at the start of the buffers (src/binding/explain.rs `header`), then the decision.
const HI = VOCABULARY.headerInts;
const HF = VOCABULARY.headerFloats;
// Where the header's fields are (src/binding/explain.rs `header`, the one copy).
const {
  fits: FITS,
  intsNeeded: INTS_NEEDED,
  floatsNeeded: FLOATS_NEEDED,
  eligible: ELIGIBLE,
  rejected: REJECTED,
  strategy: STRATEGY,
  objective: OBJECTIVE,
  maxAttempts: MAX_ATTEMPTS,
  fallbackAllowed: FALLBACK_ALLOWED,
  generation: GENERATION,
  texts: TEXTS,
  summary: SUMMARY,
} = VOCABULARY.header;
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

/**
 * The native decision, in the buffers, with `texts` up to date (retries once with larger
 * buffers). `router`: the handle of the router's native state (health, capacity order), or
 * null.
 */
function decide(view, compiled, detached, extras, router, now, labelsJson, budgetNow) {
  const ex = extras ?? undefined;
  const r = router ?? undefined;
  call(view, compiled, detached, ex, r, now, labelsJson, budgetNow);
  if (ints[FITS] !== 1) {
    const intsNeeded = ints[INTS_NEEDED];
    const floatsNeeded = ints[FLOATS_NEEDED];
    ints = new Uint32Array(Math.max(intsNeeded, ints.length * 2));
    floats = new Float64Array(Math.max(floatsNeeded, floats.length * 2));
    call(view, compiled, detached, ex, r, now, labelsJson, budgetNow);
  }
}

function call(view, compiled, detached, extras, router, now, labelsJson, budgetNow) {
  ints[GENERATION] = generation;
  ints[TEXTS] = texts.length;
  let fresh;
  try {
    fresh = binding.explainDecision(EXPLAINER, view.native, compiled.native, detached, extras, ints, floats, router, now, labelsJson, budgetNow);
  } catch (error) {
    throw fromNative(error);
  }
  if (ints[GENERATION] !== generation) {
    generation = ints[GENERATION];
    texts = [];
  }
  // The core sent the texts from index ints[TEXTS] on (0 after a new generation).
  if (texts.length !== ints[TEXTS]) texts.length = ints[TEXTS];
  if (fresh !== undefined && fresh !== null) for (let i = 0; i < fresh.length; i++) texts.push(fresh[i]);
}

/** The rejected pools, from the buffers: `[{ providerId, reasons: [{ code, detail }] }]`. */
function rejectedOf(defs) {
  const n = ints[REJECTED];
  const out = new Array(n);
  let i = HI + ints[ELIGIBLE] * ELIGIBLE_INTS;
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

/**
 * Adds `declared` and `observed` beside a dimension's blended `raw`, when the router
 * blends observed signals in (`health.observedSignals`): `declared` NaN means it does not.
 */
function sideBySide(dimension, declared, observed) {
  if (Number.isNaN(declared)) return dimension;
  dimension.declared = declared;
  dimension.observed = Number.isNaN(observed) ? null : observed;
  return dimension;
}

/**
 * The public explanation (what `router.explain` and `routeProviders` return) of the
 * decision for `compiled` over `view` (a registry view: `{ key, definitions }`, where
 * `definitions[i].id` names native pool `i`), with the per-request `extras`
 * (credentials, resolved signals) or null, and the handle of the router's native state
 * (its health and capacity order) or null. With `labelsJson` (the request's labels) and
 * `budgetNow` (the router's clock), a router's budgets reject the pools a rule has no room
 * for now (`BUDGET_EXCEEDED`, decided natively).
 * @returns {import('../index').RoutingExplanation}
 */
function explainView(view, compiled, detached, extras, router = null, now = undefined, labelsJson = undefined, budgetNow = undefined) {
  decide(view, compiled, detached, extras, router, now, labelsJson, budgetNow);
  const defs = view.definitions;
  const objective = OBJECTIVES[ints[OBJECTIVE]];
  const wc = weightOf(floats[0]);
  const wl = weightOf(floats[1]);
  const wr = weightOf(floats[2]);
  const ne = ints[ELIGIBLE];
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
    summary: texts[ints[SUMMARY]],
    strategy: STRATEGIES[ints[STRATEGY]],
    latencyObjective: objective,
    maxAcquisitionAttempts: ints[MAX_ATTEMPTS],
    acquisitionFallback: ints[FALLBACK_ALLOWED] === 1 ? 'allowed' : 'forbidden',
    eligible,
    rejected: rejectedOf(defs),
  };
}

module.exports = { explainView };
