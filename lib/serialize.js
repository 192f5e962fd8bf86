'use strict';
// Serialization for the seam. JSON.stringify silently drops functions and symbols and
// turns NaN/Infinity into null; a dropped requirement would widen eligibility. The
// replacer turns every such value into a marker object that the native validator refuses
// with the field's path, so nothing is lost silently.

const { types } = require('node:util');

function replacer(_key, value) {
  switch (typeof value) {
    case 'number':
      return Number.isFinite(value) ? value : { $invalid: 'non-finite number' };
    case 'function':
    case 'symbol':
    case 'bigint':
      return { $invalid: typeof value };
    default:
      return value;
  }
}

/**
 * Serializes a request for the native core. `undefined`/`null` mean "no requirements".
 * @returns {string | null} null when it cannot be serialized (a cycle, a throwing toJSON or getter)
 */
function serialize(value) {
  if (value === undefined || value === null) return '{}';
  try {
    return JSON.stringify(value, replacer);
  } catch {
    return null;
  }
}

/**
 * Serializes a request with its `launch.labels` apart: `{ json, labels, copy }`, where `json`
 * is the request without them, `labels` their own JSON text (undefined when absent) and
 * `copy` our own copy of their string entries (null when absent); null when the request
 * cannot be serialized (a cycle, a BigInt, a throwing getter or toJSON, a Proxy trap). The
 * request is read once.
 *
 * Why apart? Labels are per call (a request id, a user) and matter only to the launch and
 * the mapping record, never to the routing decision. Kept out of the text, requests that
 * differ only in labels share one compiled form instead of one native parse each.
 *
 * Why not JSON.stringify with a replacer function? That is the definition this follows
 * (`serializeRequestReference` in __test__/serialize.test.mjs, held equal by a property
 * test): the replacer marks what JSON would drop silently (`replacer` above) and takes the
 * labels out. But V8 leaves its fast path as soon as a replacer is given and calls it from
 * C++ for every property, and the labels need a second stringify: together that was ~15k
 * of the ~80k instructions a provision cost with 10,000 in flight (callgrind). So the walk
 * is written out here, step by step as ECMA-262 writes SerializeJSONProperty: toJSON, then
 * the replacer's rules inline, then boxed primitives, cycles (TypeError), arrays (holes as
 * null) and objects (Object.keys order). Each property is read once, in JSON.stringify's
 * order, so getters and Proxy traps see what they would see there.
 */
function serializeRequest(request) {
  if (request === undefined || request === null) return { json: '{}', labels: undefined, copy: null };
  // A getter or toJSON of the request may serialize another request: keep ours aside.
  const root = ROOT;
  const launch = LAUNCH;
  const top = TOP;
  const labels = LABELS;
  const copy = COPY;
  const base = STACK.length;
  ROOT = LAUNCH = TOP = LABELS = undefined;
  COPY = null;
  try {
    const json = property(HOLDER, '', request, OUTER);
    return typeof json === 'string' ? { json, labels: LABELS, copy: COPY } : null;
  } catch {
    return null;
  } finally {
    STACK.length = base;
    ROOT = root;
    LAUNCH = launch;
    TOP = top;
    LABELS = labels;
    COPY = copy;
  }
}

const callFn = Function.prototype.call;

/** The walk's two sets of rules: the request (labels taken out) and the labels. */
const OUTER = 0;
const INNER = 1;
/** Stands for JSON.stringify's wrapper object `{ "": value }`: the holder of the root. */
const HOLDER = Object.freeze({});
/** Objects being serialized (cycle check), shared by nested calls from their `base`. */
const STACK = [];
/** The request after toJSON, its `launch`, the labels after toJSON, their text and copy. */
let ROOT;
let LAUNCH;
let TOP;
/** @type {string | undefined} */
let LABELS;
/** @type {Record<string, string> | null} */
let COPY = null;

/** SerializeJSONProperty for `holder[key]`, already read into `value`. */
function property(holder, key, value, rules) {
  if ((typeof value === 'object' && value !== null) || typeof value === 'function' || typeof value === 'bigint') {
    const toJSON = value.toJSON;
    // Called without reading `toJSON.call` (a Proxy of a function would see that read).
    if (typeof toJSON === 'function') value = callFn.call(toJSON, value, key);
  }
  // The replacer's rules (see the reference in the test).
  if (rules === OUTER) {
    const type = typeof value;
    if (type === 'object') {
      if (holder === HOLDER) ROOT = value;
      else if (key === 'launch' && holder === ROOT) LAUNCH = value;
      else if (key === 'labels' && LAUNCH !== undefined && holder === LAUNCH) return takeLabels(value);
    } else if (type !== 'string' && type !== 'boolean') {
      // A labels value that is not an object is still the labels' business.
      if (key === 'labels' && LAUNCH !== undefined && holder === LAUNCH) return value === undefined ? undefined : takeLabels(value);
      const marked = marker(value);
      if (marked !== undefined) return marked;
    }
  } else {
    if (holder === HOLDER) TOP = value;
    else if (holder === TOP && typeof value === 'string') {
      if (key === '__proto__') Object.defineProperty(COPY, key, { value, writable: true, enumerable: true, configurable: true });
      else COPY[key] = value;
    }
    const marked = marker(value);
    if (marked !== undefined) return marked;
  }
  switch (typeof value) {
    case 'string':
      return quote(value);
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      if (types.isBoxedPrimitive(value) && !types.isSymbolObject(value)) return boxed(value);
      return Array.isArray(value) ? array(value, rules) : object(value, rules);
    default:
      return undefined;
  }
}

/** The text `replacer` would make JSON write for `value` (a marker), or undefined. */
function marker(value) {
  switch (typeof value) {
    case 'number':
      return Number.isFinite(value) ? undefined : '{"$invalid":"non-finite number"}';
    case 'function':
      return '{"$invalid":"function"}';
    case 'symbol':
      return '{"$invalid":"symbol"}';
    case 'bigint':
      return '{"$invalid":"bigint"}';
    default:
      return undefined;
  }
}

/** `launch.labels`: serialized on their own (text and copy); absent from the request's text. */
function takeLabels(value) {
  COPY = {};
  LABELS = property(HOLDER, '', value, INNER) ?? 'null';
  return undefined;
}

/**
 * QuoteJSONString. A string with nothing to escape is quoted here; any other goes to
 * JSON.stringify (each call of which is a trip into C++ that costs more than this loop).
 */
function quote(s) {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s);
  }
  return '"' + s + '"';
}

/** Step 4 of SerializeJSONProperty: a Number, String, Boolean or BigInt object. */
function boxed(value) {
  if (types.isNumberObject(value)) {
    const n = +value;
    return Number.isFinite(n) ? String(n) : 'null';
  }
  if (types.isStringObject(value)) return JSON.stringify(String(value));
  if (types.isBooleanObject(value)) return Boolean.prototype.valueOf.call(value) ? 'true' : 'false';
  throw new TypeError('Do not know how to serialize a BigInt');
}

function enter(value) {
  if (STACK.includes(value)) throw new TypeError('Converting circular structure to JSON');
  STACK.push(value);
}

function object(value, rules) {
  enter(value);
  const keys = Object.keys(value);
  let out = '';
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    const s = property(value, k, value[k], rules);
    if (s !== undefined) out += (out === '' ? '' : ',') + quote(k) + ':' + s;
  }
  STACK.pop();
  return '{' + out + '}';
}

function array(value, rules) {
  enter(value);
  const n = lengthOf(value.length);
  let out = '';
  for (let i = 0; i < n; i++) {
    const s = property(value, String(i), value[i], rules);
    out += (i === 0 ? '' : ',') + (s === undefined ? 'null' : s);
  }
  STACK.pop();
  return '[' + out + ']';
}

/** ToLength of an array's `length` (only a Proxy's trap makes it other than an integer). */
function lengthOf(len) {
  const n = Math.trunc(+len);
  if (!(n > 0)) return 0;
  return Math.min(n, Number.MAX_SAFE_INTEGER);
}

module.exports = { serialize, serializeRequest, replacer };
