'use strict';
// Serialization for the seam: a caller's value becomes the JSON text the native core validates,
// read once. One walk does what JSON.stringify does, in its order, read for read (Object.keys,
// each property once, toJSON with its key, boxed primitives unwrapped, a cycle or a throwing
// getter unreadable), and writes the same text; why not JSON.stringify itself with a replacer:
// docs/performance.md. A value JSON cannot carry is never written as something else: strict
// (`serialize`, `serializeRequest`, a definition but its `signals`) refuses it as a `NotJson`
// naming its field as the native readers do (`capabilities.supported[2]`); lenient
// (`serializeLenient`, `signals`) writes `null`, which the core refuses. Each walk keeps its
// own state: a getter or toJSON may serialize something else meanwhile.
// __test__/serialize.test.mjs holds every answer to JSON.stringify's.

const { isBoxedPrimitive, isNumberObject, isStringObject, isBooleanObject, isBigIntObject } = require('node:util').types;
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

const STRICT = 0;
const LENIENT = 1;
/** Thrown (internally) to end a walk; the walk's `refusal` says why (null: unreadable). */
const ENDED = new Error('ended');

/**
 * One walk's state: its mode, its path (keys, array indices), the objects on the way down; for a
 * request, its labels apart. A literal, not a class instance: docs/performance.md.
 */
const walkOf = (mode, lenientKey, request) => ({ mode, lenientKey, request, path: [], seen: [], labelsAt: -1, labels: undefined, copy: null, refusal: null });

const WHAT = { function: 'a function', symbol: 'a symbol', bigint: 'a BigInt' };

function what(value) {
  return WHAT[typeof value] ?? (Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity');
}

/**
 * Whether JSON.stringify escapes a character of `s`: `"`, `\\`, a control character, a
 * surrogate. A loop: on the short keys and values of a request it costs less than a RegExp
 * test (docs/performance.md).
 */
function escapes(s) {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return true;
  }
  return false;
}

/** A string as JSON text: JSON.stringify's, without its call where nothing needs escaping. */
const quoted = (s) => (escapes(s) ? JSON.stringify(s) : '"' + s + '"');

function addEntry(copy, key, value) {
  if (key === '__proto__') Object.defineProperty(copy, key, { value, writable: true, enumerable: true, configurable: true });
  else copy[key] = value;
}

/** `value` (read at `w.path` under `key`) as JSON text; undefined: JSON writes nothing for it. Throws ENDED. */
function textOf(w, key, value) {
  // Primitives first (what `valueText` would do with them), but where a request's labels may be.
  if (key !== 'labels' || !w.request) {
    switch (typeof value) {
      case 'string':
        if (w.labelsAt >= 0 && w.path.length === w.labelsAt + 1) addEntry(w.copy, key, value);
        return quoted(value);
      case 'boolean':
        return value ? 'true' : 'false';
      case 'undefined':
        return undefined;
      case 'number':
        if (Number.isFinite(value)) return String(value);
    }
  }
  return valueText(w, key, value);
}

/** `textOf` for any value: JSON.stringify's steps, in its order. */
function valueText(w, key, value) {
  let type = typeof value;
  if ((type === 'object' && value !== null) || type === 'function' || type === 'bigint') {
    const toJSON = value.toJSON;
    if (typeof toJSON === 'function') {
      value = Reflect.apply(toJSON, value, [key]);
      type = typeof value;
    }
  }
  const depth = w.path.length;
  if (w.request && depth === 2 && key === 'labels' && w.path[0] === 'launch' && w.labelsAt < 0 && type !== 'string' && type !== 'boolean') {
    if (value !== undefined) labels(w, value);
    return undefined;
  }
  if (type === 'function' || type === 'symbol' || type === 'bigint' || (type === 'number' && !Number.isFinite(value))) {
    if (w.mode === LENIENT || (depth > 0 && w.path[0] === w.lenientKey)) return 'null';
    w.refusal = new NotJson([...w.path], what(value));
    throw ENDED;
  }
  if (w.labelsAt >= 0 && depth === w.labelsAt + 1 && type === 'string') addEntry(w.copy, key, value);
  if (type === 'object' && value !== null) {
    // Boxed primitives are unwrapped (a boxed Symbol is an object like any other).
    if (!isBoxedPrimitive(value)) return Array.isArray(value) ? arrayText(w, value) : objectText(w, value);
    if (isNumberObject(value)) value = Number(value);
    else if (isStringObject(value)) value = String(value);
    else if (isBooleanObject(value)) value = Boolean.prototype.valueOf.call(value);
    else if (isBigIntObject(value)) throw ENDED;
    else return objectText(w, value);
    type = typeof value;
  }
  if (type === 'string') return quoted(value);
  if (type === 'number') return Number.isFinite(value) ? String(value) : 'null';
  if (type === 'boolean') return value ? 'true' : 'false';
  return value === null ? 'null' : undefined;
}

/** Marks `value` as being walked; a value already on the way down is a cycle: unreadable, as JSON.stringify finds it. */
function entered(w, value) {
  if (w.seen.includes(value)) throw ENDED;
  w.seen.push(value);
}

function objectText(w, value) {
  entered(w, value);
  const path = w.path;
  // Its string entries are the labels' when the labels are this object.
  const entries = w.labelsAt === path.length;
  let text = '';
  for (const key of Object.keys(value)) {
    const v = value[key];
    let t;
    if (typeof v === 'string' && (key !== 'labels' || !w.request)) {
      if (entries) addEntry(w.copy, key, v);
      if (!escapes(key) && !escapes(v)) {
        // Neither needs escaping: written between quotes of the member's own text.
        text += (text === '' ? '{"' : ',"') + key + '":"' + v + '"';
        continue;
      }
      t = quoted(v);
    } else {
      path.push(key);
      t = textOf(w, key, v);
      path.pop();
    }
    if (t !== undefined) text += escapes(key) ? (text === '' ? '{' : ',') + JSON.stringify(key) + ':' + t : (text === '' ? '{"' : ',"') + key + '":' + t;
  }
  w.seen.pop();
  return text === '' ? '{}' : text + '}';
}

function arrayText(w, value) {
  entered(w, value);
  const n = value.length;
  let text = '[';
  for (let i = 0; i < n; i++) {
    w.path.push(i);
    text += (i === 0 ? '' : ',') + (textOf(w, String(i), value[i]) ?? 'null');
    w.path.pop();
  }
  w.seen.pop();
  return text + ']';
}

/**
 * `launch.labels` (after their toJSON), apart from the request's text: their own text (strict;
 * as JSON.stringify would write them on their own, a toJSON of theirs called again with '') and
 * our copy of their string entries, which the router stamps and launches with.
 */
function labels(w, value) {
  w.labelsAt = w.path.length;
  w.copy = {};
  w.labels = textOf(w, '', value) ?? 'null';
  w.labelsAt = -1;
}

/** `value` walked by `w`: its text (undefined: none), a NotJson (strict), or null (unreadable). */
function walk(w, value) {
  try {
    return textOf(w, '', value);
  } catch {
    return w.refusal;
  }
}

/**
 * Strict: `value` as JSON text (`undefined`/`null`: `{}`), a `NotJson` naming the field JSON cannot
 * carry, or null when it cannot be read (a cycle, a throwing getter or toJSON, a Proxy trap, a boxed BigInt).
 */
function serialize(value) {
  if (value === undefined || value === null) return '{}';
  return walk(walkOf(STRICT, null, false), value) ?? null;
}

/** Lenient: like `serialize`, but a value JSON cannot carry is written as `null` (null: unreadable). */
function serializeLenient(value) {
  if (value === undefined || value === null) return '{}';
  return walk(walkOf(LENIENT, null, false), value) ?? null;
}

/**
 * A provider definition as the core reads it, `{ id, capabilities, signals, warm?, rateLimit? }`: strict but
 * for `signals` (an unreadable signal makes only that pool ineligible, INVALID_SIGNALS).
 */
function serializeDefinition(id, capabilities, signals, warm, rateLimit) {
  return walk(walkOf(STRICT, 'signals', false), { id, capabilities, signals, warm, rateLimit });
}

/**
 * A request (strict) with `launch.labels` apart: labels are per call and never matter to
 * routing, so requests differing only in labels share one compiled form.
 * @returns {{ json: string, labels: string | undefined, copy: Record<string, string> | null } | NotJson | null}
 *   the text without labels, theirs, our copy of their string entries; null: unreadable
 */
function serializeRequest(request) {
  if (request === undefined || request === null) return { json: '{}', labels: undefined, copy: null };
  const w = walkOf(STRICT, null, true);
  const json = walk(w, request);
  return typeof json === 'string' ? { json, labels: w.labels, copy: w.copy } : (json ?? null);
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
