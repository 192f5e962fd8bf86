'use strict';
// Compiled requests: parse and validate a request once, reuse it while it is unchanged.
//
// Why cache? On this seam, serializing a request (JSON.stringify) and parsing it natively
// cost several times more than routing six pools. Requests repeat: the same template
// object, or literals with the same content. Two caches cover both:
//   - by identity (WeakMap): a request object seen before is reused if a deep comparison
//     with a snapshot taken when it was compiled finds it unchanged (mutation-safe, and
//     several times cheaper than serializing it again);
//   - by content (bounded Map keyed by the JSON text): a fresh literal with the same
//     content skips the native parse.
// Objects that are not plain (class instances, Dates, Maps…) are never cached by identity:
// their serialized form may change without a visible property change.

const { binding } = require('./binding.js');
const { SandboxRequestValidationError, callNative } = require('./errors.js');
const { serialize } = require('./serialize.js');

const MAX_BY_CONTENT = 512;
const byContent = new Map();
const byIdentity = new WeakMap();
let empty = null;

function wrap(json) {
  const native = callNative(() => new binding.CompiledRequest(json));
  const [maxAttempts, fallback, timeoutMs, key] = native.info.split('|');
  return Object.freeze({
    native,
    key: Number(key),
    maxAttempts: Number(maxAttempts),
    fallbackAllowed: fallback === '1',
    timeoutMs: Number(timeoutMs),
  });
}

function isPlain(v) {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null || Array.isArray(v);
}

/** A snapshot of a plain object: its keys in order and the snapshots of their values. */
class ObjectSnapshot {
  constructor(keys, values) {
    this.keys = keys;
    this.values = values;
  }
}

const NOT_PLAIN = Symbol('not-plain');

/** A deep copy of plain data (arrays stay arrays, objects become ObjectSnapshots), or NOT_PLAIN. */
function snapshot(v) {
  if (v === null || typeof v !== 'object') return typeof v === 'function' || typeof v === 'symbol' ? NOT_PLAIN : v;
  if (!isPlain(v)) return NOT_PLAIN;
  if (Array.isArray(v)) {
    const out = new Array(v.length);
    for (let i = 0; i < v.length; i++) {
      const s = snapshot(v[i]);
      if (s === NOT_PLAIN) return NOT_PLAIN;
      out[i] = s;
    }
    return out;
  }
  const keys = Object.keys(v);
  const values = new Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const s = snapshot(v[keys[i]]);
    if (s === NOT_PLAIN) return NOT_PLAIN;
    values[i] = s;
  }
  return new ObjectSnapshot(keys, values);
}

/** Whether live value `a` still equals snapshot `s` (key order included). Allocates nothing. */
function same(a, s) {
  if (s instanceof ObjectSnapshot) {
    if (typeof a !== 'object' || a === null || Array.isArray(a) || !isPlain(a)) return false;
    const keys = s.keys;
    let n = 0;
    for (const k in a) {
      if (n >= keys.length || k !== keys[n] || !Object.hasOwn(a, k) || !same(a[k], s.values[n])) return false;
      n++;
    }
    return n === keys.length;
  }
  if (Array.isArray(s)) {
    if (!Array.isArray(a) || a.length !== s.length) return false;
    for (let i = 0; i < s.length; i++) if (!same(a[i], s[i])) return false;
    return true;
  }
  return a === s;
}

function isEmptyPlainObject(r) {
  if (Object.getPrototypeOf(r) !== Object.prototype) return false;
  for (const _ in r) return false;
  return true;
}

/**
 * The compiled form of `request` (validated). Throws the same typed validation errors as
 * the native parser.
 */
function compile(request) {
  if (request === undefined || request === null || (typeof request === 'object' && isEmptyPlainObject(request))) {
    if (empty === null) empty = wrap('{}');
    return empty;
  }
  const cached = typeof request === 'object' ? byIdentity.get(request) : undefined;
  if (cached !== undefined && same(request, cached.snapshot)) return cached.compiled;
  const json = serialize(request);
  if (json === null) {
    throw new SandboxRequestValidationError('invalid request: (root) must be serializable (no cycles, no throwing toJSON)', 'INVALID_REQUEST', {
      field: '(root)',
    });
  }
  let compiled = byContent.get(json);
  if (compiled === undefined) {
    compiled = wrap(json);
    if (byContent.size >= MAX_BY_CONTENT) byContent.delete(byContent.keys().next().value);
    byContent.set(json, compiled);
  }
  if (typeof request === 'object') {
    const snap = snapshot(request);
    if (snap !== NOT_PLAIN) byIdentity.set(request, { snapshot: snap, compiled });
  }
  return compiled;
}

module.exports = { compile };
