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

/** A deep copy of plain data, or null when anything in it is not plain data. */
function snapshot(v) {
  if (v === null || typeof v !== 'object') return typeof v === 'function' || typeof v === 'symbol' ? null : { v };
  if (!isPlain(v)) return null;
  if (Array.isArray(v)) {
    const out = new Array(v.length);
    for (let i = 0; i < v.length; i++) {
      const s = snapshot(v[i]);
      if (s === null) return null;
      out[i] = s.v;
    }
    return { v: out };
  }
  const out = {};
  for (const k of Object.keys(v)) {
    const s = snapshot(v[k]);
    if (s === null) return null;
    out[k] = s.v;
  }
  return { v: out };
}

/** Structural equality of `a` (live) against a snapshot `b`, key order included. */
function same(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return false;
  if (Array.isArray(b)) {
    if (!Array.isArray(a) || a.length !== b.length) return false;
    for (let i = 0; i < b.length; i++) if (!same(a[i], b[i])) return false;
    return true;
  }
  if (!isPlain(a) || Array.isArray(a)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < kb.length; i++) {
    const k = kb[i];
    if (ka[i] !== k || !same(a[k], b[k])) return false;
  }
  return true;
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
    if (snap !== null) byIdentity.set(request, { snapshot: snap.v, compiled });
  }
  return compiled;
}

module.exports = { compile };
