'use strict';
// Serialization for the seam: a caller's value becomes the JSON text the native core
// validates, read once, by JSON.stringify itself.
//
// Why not JSON.stringify alone? It drops functions and symbols, writes NaN and ±Infinity
// as null and throws on a BigInt: a dropped requirement would widen eligibility, and a NaN
// lifetime written as null would read as "unbounded". So a value JSON cannot carry is never
// written as something else, and nothing of ours (no tag, no marker) is ever written in
// its place: the core knows nothing about this module. Two modes:
// - strict (`serialize`, `serializeRequest`, a definition's `id` and `capabilities`): for
//   caller data with a field-level rule. Such a value is refused: the answer is a `NotJson`
//   naming its field as the native readers name fields (`resources.gpu`,
//   `launch.labels.team`, `capabilities.supported[2]`) and saying what it is; each entry
//   point turns it into its own typed error.
// - lenient (`serializeLenient`, a definition's `signals`): for answers the core judges
//   instead of refusing (signals: INVALID_SIGNALS for that pool; a capacity measurement or
//   a finder's list: MALFORMED). Such a value is written as `null`, which those readers
//   refuse wherever it stands.
//
// How is the field known without walking the value twice? JSON.stringify calls the
// replacer depth first, with the holder as `this`. The replacer keeps the chain of holders
// from the root to the last object it handed back, with the key of each: a call's holder is
// always on that chain (its top, or an ancestor after a subtree ends), so finding it drops
// at most a few entries and allocates nothing. The path is built only when a value is
// refused.
//
// Reentrancy: a getter or toJSON of the value may serialize something else while its
// holder is walked (and `launch.labels` are serialized that way, from the request's
// replacer). Each serialization in progress has a frame of its own, one per nesting
// level, kept and reused; the replacers work on the current one, and a nested call
// switches to the next and back.

/** A value JSON cannot carry, found by strict serialization: where it is and what it is. */
class NotJson {
  /**
   * @param {Array<string | number>} segments its path from the serialized root: keys, and
   *   the indices of array elements
   * @param {string} what `a function`, `a symbol`, `a BigInt`, `NaN`, `Infinity`, `-Infinity`
   */
  constructor(segments, what) {
    this.segments = segments;
    this.what = what;
  }
  // Its field and what the field must be are the core's to say (`notJsonError` and the
  // other refusals of src/core/router/options.rs take `segments` and `what`).

  /** The same refusal with `segments` in front (a part serialized on its own). */
  under(segments) {
    return new NotJson([...segments, ...this.segments], this.what);
  }
}

/** Thrown (internally) from a replacer to end the walk; the frame says why. */
class Refused extends Error {}
const REFUSED = new Refused('refused');

class Frame {
  constructor() {
    /** @type {object[]} holders[i]: the object walked at depth i (0: JSON.stringify's wrapper of the root) */
    this.holders = [];
    /** @type {string[]} keys[i]: the key holders[i] was read under */
    this.keys = [];
    this.depth = 0;
    /** @type {string | null} the top-level key under which a value JSON cannot carry is written as null */
    this.lenientKey = null;
    /** @type {NotJson | null} why the walk ended (null: it could not be read) */
    this.refusal = null;
    /** @type {string | undefined} serializeRequest: the labels' own text */
    this.labels = undefined;
    /** @type {Record<string, string> | null} serializeRequest: our copy of the labels' string entries */
    this.copy = null;
  }
}

/** @type {Frame[]} one frame per nesting level */
const frames = [];
let level = -1;
/** @type {Frame} the frame of the serialization the replacers are working for */
let frame = new Frame();

function enter(lenientKey) {
  const next = level + 1;
  let f = frames[next];
  if (f === undefined) {
    f = new Frame();
    frames.push(f);
  }
  f.depth = 0;
  f.lenientKey = lenientKey;
  level = next;
  frame = f;
  return f;
}

/** Back to the frame of the level below `f`'s; drops every reference `f` held. */
function leave(f, below) {
  const { holders, keys } = f;
  for (let i = 0; holders[i] !== undefined; i++) {
    holders[i] = undefined;
    keys[i] = undefined;
  }
  f.refusal = null;
  f.labels = undefined;
  f.copy = null;
  level = below;
  if (below >= 0) frame = frames[below];
}

/** The depth of `holder` on `f`'s chain (entries above it are dropped); the first call's holder starts the chain. */
function depthOf(f, holder) {
  const holders = f.holders;
  let d = f.depth;
  while (d > 0 && holders[d] !== holder) d--;
  if (holders[d] !== holder) holders[0] = holder;
  return d;
}

/** The step every strict replacer takes: track the chain, refuse a value JSON cannot carry. */
function step(f, holder, key, value) {
  let d = f.depth;
  if (f.holders[d] !== holder) d = depthOf(f, holder);
  switch (typeof value) {
    case 'object':
      if (value !== null) {
        d++;
        f.holders[d] = value;
        f.keys[d] = key;
      }
      break;
    case 'number':
      if (!Number.isFinite(value)) return refuse(f, d, holder, key, value);
      break;
    case 'function':
    case 'symbol':
    case 'bigint':
      return refuse(f, d, holder, key, value);
    default:
      break;
  }
  f.depth = d;
  return value;
}

function what(value) {
  switch (typeof value) {
    case 'function':
      return 'a function';
    case 'symbol':
      return 'a symbol';
    case 'bigint':
      return 'a BigInt';
    default:
      return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
  }
}

/** An array element is named by its index; a revoked Proxy (Array.isArray throws) as an object. */
function segment(holder, key) {
  let array = false;
  try {
    array = Array.isArray(holder);
  } catch {
    array = false;
  }
  return array ? Number(key) : key;
}

/** `value` (at `key` of `holder`, depth `d`) JSON cannot carry: null under the lenient key, else the walk ends. */
function refuse(f, d, holder, key, value) {
  f.depth = d;
  const segments = [];
  for (let i = 2; i <= d; i++) segments.push(segment(f.holders[i - 1], f.keys[i]));
  if (d > 0) segments.push(segment(holder, key));
  if (f.lenientKey !== null && segments[0] === f.lenientKey) return null;
  f.refusal = new NotJson(segments, what(value));
  throw REFUSED;
}

function strictReplacer(key, value) {
  return step(frame, this, key, value);
}

function lenientReplacer(_key, value) {
  switch (typeof value) {
    case 'number':
      return Number.isFinite(value) ? value : null;
    case 'function':
    case 'symbol':
    case 'bigint':
      return null;
    default:
      return value;
  }
}

/** JSON.stringify(value) with `replacer` in a frame of its own: the text, a NotJson, or null (unreadable). */
function run(value, replacer, lenientKey) {
  const below = level;
  const f = enter(lenientKey);
  let out = null;
  try {
    const text = JSON.stringify(value, replacer);
    if (typeof text === 'string') out = text;
  } catch {
    out = f.refusal;
  } finally {
    leave(f, below);
  }
  return out;
}

/**
 * Strict: `value` as JSON text for the native core. `undefined`/`null` are `{}` ("nothing
 * given"). A value JSON cannot carry is refused: the answer is a `NotJson` naming its field.
 * @returns {string | NotJson | null} null when it cannot be read (a cycle, a throwing
 *   getter or toJSON, a Proxy trap, a boxed BigInt)
 */
function serialize(value) {
  if (value === undefined || value === null) return '{}';
  return run(value, strictReplacer, null);
}

/**
 * Lenient: like `serialize`, but a value JSON cannot carry is written as `null` (for answers
 * the core judges: signals, a measurement, a list).
 * @returns {string | null} null when it cannot be read
 */
function serializeLenient(value) {
  if (value === undefined || value === null) return '{}';
  try {
    const text = JSON.stringify(value, lenientReplacer);
    return typeof text === 'string' ? text : null;
  } catch {
    return null;
  }
}

/**
 * A provider definition as the core reads it, `{ id, capabilities, signals, warm? }`: `id`,
 * `capabilities` and `warm` strict, `signals` lenient (an unreadable signal makes only that pool
 * ineligible, INVALID_SIGNALS).
 * @returns {string | NotJson | null}
 */
function serializeDefinition(id, capabilities, signals, warm) {
  // A warm pool's option (docs/warm-pools.md), when given, is read strictly.
  return run(warm === undefined ? { id, capabilities, signals } : { id, capabilities, signals, warm }, strictReplacer, 'signals');
}

// --- Requests: their labels apart -------------------------------------------------------

function requestReplacer(key, value) {
  const f = frame;
  if (key === 'labels' && typeof value !== 'string' && typeof value !== 'boolean') {
    let d = f.depth;
    if (f.holders[d] !== this) d = depthOf(f, this);
    f.depth = d;
    // `launch.labels`: the key under the object read under `launch` of the root.
    if (d === 2 && f.keys[2] === 'launch') return value === undefined ? undefined : takeLabels(f, value);
  }
  return step(f, this, key, value);
}

function labelsReplacer(key, value) {
  const f = frame;
  if (typeof value === 'string') {
    let d = f.depth;
    if (f.holders[d] !== this) d = depthOf(f, this);
    f.depth = d;
    if (d === 1) addEntry(/** @type {Record<string, string>} */ (f.copy), key, value);
    return value;
  }
  return step(f, this, key, value);
}

function addEntry(copy, key, value) {
  if (key === '__proto__') Object.defineProperty(copy, key, { value, writable: true, enumerable: true, configurable: true });
  else copy[key] = value;
}

/**
 * `launch.labels` (the value the request's walk handed over; the request is not read
 * again): their own text and our copy of their string entries, kept in the request's frame;
 * absent from the request's text. Their refusal is the request's, at `launch.labels…`.
 */
function takeLabels(f, value) {
  const below = level;
  const g = enter(null);
  g.copy = {};
  let text;
  let failed = false;
  let refusal = null;
  try {
    text = JSON.stringify(value, labelsReplacer);
  } catch {
    failed = true;
    refusal = g.refusal;
  }
  const copy = g.copy;
  leave(g, below);
  if (failed) {
    f.refusal = refusal === null ? null : refusal.under(['launch', 'labels']);
    throw REFUSED;
  }
  f.labels = text ?? 'null';
  f.copy = copy;
  return undefined;
}

/**
 * Serializes a request (strict) with its `launch.labels` apart: `{ json, labels, copy }`,
 * where `json` is the request without them, `labels` their own JSON text (undefined when
 * absent) and `copy` our own copy of their string entries (null when absent).
 *
 * The request is read once, by JSON.stringify itself; `launch` and `labels` are recognized
 * by their place on the chain of holders, so a key named `labels` elsewhere stays in the
 * text. Why apart? Labels are per call (a request id, a user) and matter only to the launch
 * and the mapping record, never to the routing decision. Kept out of the text, requests
 * that differ only in labels share one compiled form instead of one native parse each.
 * @returns {{ json: string, labels: string | undefined, copy: Record<string, string> | null } | NotJson | null}
 *   a NotJson for a value JSON cannot carry (labels included); null when the request
 *   cannot be read (a cycle, a throwing getter or toJSON, a Proxy trap)
 */
function serializeRequest(request) {
  if (request === undefined || request === null) return { json: '{}', labels: undefined, copy: null };
  const below = level;
  const f = enter(null);
  let out = null;
  try {
    const json = JSON.stringify(request, requestReplacer);
    if (typeof json === 'string') out = { json, labels: f.labels, copy: f.copy };
  } catch {
    out = f.refusal;
  } finally {
    leave(f, below);
  }
  return out;
}

module.exports = { serialize, serializeLenient, serializeDefinition, serializeRequest, NotJson };
