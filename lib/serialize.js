'use strict';
// Serialization for the seam: a caller's value becomes the JSON text the native core validates,
// read once, by JSON.stringify itself (ordinary labels by their keys; docs/architecture.md). A value JSON cannot
// carry is never written as something else: strict (`serialize`, `serializeRequest`, a definition
// but its `signals`) refuses it as a `NotJson` naming its field as the native readers do
// (`capabilities.supported[2]`); lenient (`serializeLenient`, `signals`) writes `null`, which the core refuses.
//
// The field: the replacer (called depth first, the holder as `this`) keeps the chain of holders
// from the root; the path is built only on a refusal.
//
// Reentrancy: a getter or toJSON may serialize something else while its holder is walked (as
// `launch.labels` are, from the request's replacer). Each serialization in progress has a frame
// of its own, one per nesting level, kept and reused; a nested call switches to the next and back.

const { isProxy } = require('node:util').types;
const { readOr } = require('./guard.js');
const { binding } = require('./binding.js');
const errors = require('./errors.js');

/**
 * A value JSON cannot carry, found by strict serialization: `segments`, its path (keys, array
 * indices), and `what` it is; its field's name and rule are the core's (src/core/router/options.rs).
 */
class NotJson {
  /** @param {Array<string | number>} segments @param {string} what */
  constructor(segments, what) {
    this.segments = segments;
    this.what = what;
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
  level++;
  frame = frames[level] ?? (frames[level] = new Frame());
  frame.depth = 0;
  frame.lenientKey = lenientKey;
  return frame;
}

/** Back to the frame of the level below `f`'s; drops every reference `f` held. */
function leave(f) {
  const { holders, keys } = f;
  for (let i = 0; holders[i] !== undefined; i++) {
    holders[i] = undefined;
    keys[i] = undefined;
  }
  f.refusal = null;
  f.labels = undefined;
  f.copy = null;
  level--;
  if (level >= 0) frame = frames[level];
}

/** `holder`'s depth on `f`'s chain, made current (entries above it dropped; the first holder starts the chain). */
function depthOf(f, holder) {
  const holders = f.holders;
  let d = f.depth;
  while (d > 0 && holders[d] !== holder) d--;
  if (holders[d] !== holder) holders[0] = holder;
  f.depth = d;
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
  }
  f.depth = d;
  return value;
}

const WHAT = { function: 'a function', symbol: 'a symbol', bigint: 'a BigInt' };

function what(value) {
  return WHAT[typeof value] ?? (Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity');
}

/** An array element is named by its index; a revoked Proxy (Array.isArray throws) as an object. */
function segment(holder, key) {
  return readOr(() => (Array.isArray(holder) ? Number(key) : key), key);
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
  const type = typeof value;
  if (type === 'number') return Number.isFinite(value) ? value : null;
  return type === 'function' || type === 'symbol' || type === 'bigint' ? null : value;
}

/** JSON.stringify(value, replacer) in a frame of its own: the text (or `result(text, frame)`), a NotJson, or null. */
function run(value, replacer, lenientKey, result) {
  const f = enter(lenientKey);
  let out = null;
  try {
    const text = JSON.stringify(value, replacer);
    if (typeof text === 'string') out = result === undefined ? text : result(text, f);
  } catch {
    out = f.refusal;
  } finally {
    leave(f);
  }
  return out;
}

/**
 * Strict: `value` as JSON text (`undefined`/`null`: `{}`), a `NotJson` naming the field JSON cannot
 * carry, or null when it cannot be read (a cycle, a throwing getter or toJSON, a Proxy trap, a boxed BigInt).
 */
function serialize(value) {
  if (value === undefined || value === null) return '{}';
  return run(value, strictReplacer, null);
}

/** Lenient: like `serialize`, but a value JSON cannot carry is written as `null` (null: unreadable). */
function serializeLenient(value) {
  if (value === undefined || value === null) return '{}';
  const text = readOr(() => JSON.stringify(value, lenientReplacer), null);
  return typeof text === 'string' ? text : null;
}

/**
 * A provider definition as the core reads it, `{ id, capabilities, signals, warm?, rateLimit? }`: strict but
 * for `signals` (an unreadable signal makes only that pool ineligible, INVALID_SIGNALS).
 */
function serializeDefinition(id, capabilities, signals, warm, rateLimit) {
  return run({ id, capabilities, signals, warm, rateLimit }, strictReplacer, 'signals');
}

// --- Requests: their labels apart -------------------------------------------------------

function requestReplacer(key, value) {
  const f = frame;
  // `launch.labels`: the key under the object read under `launch` of the root.
  if (key === 'labels' && typeof value !== 'string' && typeof value !== 'boolean') {
    if (depthOf(f, this) === 2 && f.keys[2] === 'launch') return value === undefined ? undefined : takeLabels(f, value);
  }
  return step(f, this, key, value);
}

function labelsReplacer(key, value) {
  const f = frame;
  if (typeof value === 'string') {
    if (depthOf(f, this) === 1) addEntry(/** @type {Record<string, string>} */ (f.copy), key, value);
    return value;
  }
  return step(f, this, key, value);
}

function addEntry(copy, key, value) {
  if (key === '__proto__') Object.defineProperty(copy, key, { value, writable: true, enumerable: true, configurable: true });
  else copy[key] = value;
}

/**
 * Whether `value` is an ordinary object JSON.stringify would walk by its own keys alone: no Proxy, no
 * toJSON, a plain prototype. Runs no caller code (no trap, no getter).
 */
function ordinary(value) {
  if (typeof value !== 'object' || value === null || isProxy(value) || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return (proto === Object.prototype || proto === null) && !Object.hasOwn(value, 'toJSON') && !Object.hasOwn(Object.prototype, 'toJSON');
}

/**
 * `launch.labels` as the request's walk handed them over (not read again): text and copy kept in its
 * frame. An ordinary object of strings is read by its own keys, each value once, and its text is our
 * copy's (the same text, without a replacer call per entry: the 10,000-in-flight floor,
 * docs/performance.md); anything else is walked strictly, our shallow copy of what was read included.
 */
function takeLabels(f, value) {
  if (ordinary(value)) {
    const copy = {};
    let shallow = null;
    for (const key of Object.keys(value)) {
      const v = value[key];
      if (shallow === null && typeof v !== 'string') shallow = { ...copy };
      addEntry(shallow ?? copy, key, v);
    }
    if (shallow === null) {
      f.labels = JSON.stringify(copy);
      f.copy = copy;
      return undefined;
    }
    value = shallow;
  }
  const g = enter(null);
  g.copy = {};
  const copy = g.copy;
  try {
    f.labels = JSON.stringify(value, labelsReplacer) ?? 'null';
  } catch {
    f.refusal = g.refusal === null ? null : new NotJson(['launch', 'labels', ...g.refusal.segments], g.refusal.what);
    throw REFUSED;
  } finally {
    leave(g);
  }
  f.copy = copy;
  return undefined;
}

const requestParts = (json, f) => ({ json, labels: f.labels, copy: f.copy });

/**
 * A request (strict) with `launch.labels` (known by their place on the chain) apart: labels are per
 * call and never matter to routing, so requests differing only in labels share one compiled form.
 * @returns {{ json: string, labels: string | undefined, copy: Record<string, string> | null } | NotJson | null}
 *   the text without labels, theirs, our copy of their string entries; null: unreadable
 */
function serializeRequest(request) {
  if (request === undefined || request === null) return { json: '{}', labels: undefined, copy: null };
  return run(request, requestReplacer, null, requestParts);
}

/**
 * A call's options or query (`undefined`: none) as text for the core: a value JSON cannot carry
 * is `scope`'s typed error at its field (`input`: INVALID_INPUT); an unreadable one, text it refuses.
 */
function argText(value, scope) {
  if (value === undefined) return 'null';
  const json = serialize(value);
  if (json instanceof NotJson) errors.refuse(() => binding.notJsonError(scope, json.segments, json.what, ''));
  return json ?? '0';
}

module.exports = { serialize, serializeLenient, serializeDefinition, serializeRequest, argText, NotJson };
