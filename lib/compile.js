'use strict';
// Compiled requests: a request is read exactly once (serialize.js), and everything the router
// later needs from it (launch options, resources) comes from that text, never from a second
// read of the caller's object. Texts repeat (requests from one template), so a bounded map
// keyed by the text skips the native parse; a text over MAX_CACHED_CHARS is not kept.

const { binding } = require('./binding.js');
const { callNative, refuse } = require('./errors.js');
const { serializeRequest, NotJson } = require('./serialize.js');
const { readOr } = require('./guard.js');

const MAX_BY_CONTENT = 512;
/** Longest request text (UTF-16 units) the content cache keeps. */
const MAX_CACHED_CHARS = 4096;
const byContent = new Map();

class Compiled {
  constructor(json) {
    /** the native compiled request (an ExternalObject) */
    this.native = callNative(() => binding.compileRequest(json));
    this.timeoutMs = binding.requestTimeoutMs(this.native);
    this.json = json;
    this.parts = null;
  }

  /** `{ name, env, createTimeoutSeconds, resourcesJson }` of the validated text (parsed once, frozen: shared). */
  get launchParts() {
    if (this.parts === null) {
      const parsed = JSON.parse(this.json);
      const launch = parsed !== null && typeof parsed === 'object' && parsed.launch ? parsed.launch : null;
      this.parts = Object.freeze({
        name: launch?.name,
        env: launch?.env,
        createTimeoutSeconds: launch?.createTimeoutSeconds,
        resourcesJson: JSON.stringify(parsed?.resources ?? {}),
      });
    }
    return this.parts;
  }
}

/** Validates a call's labels by the native rule (within router `native`'s limits); throws the typed INVALID_REQUEST. */
function checkLabels(call, native) {
  if (call.labelsJson !== null) callNative(() => binding.checkLabels(call.labelsJson, native));
}

/**
 * One call's compiled request: `compiled` (shared: all but the labels), `labelsJson` (their text, null:
 * none; not yet validated: `provision`'s native begin or `checkLabels` does), `labels` (our copy).
 * Throws INVALID_REQUEST at the field JSON cannot carry, or at `(root)` when unreadable.
 */
function compile(request) {
  const text = serializeRequest(request);
  if (text === null) refuse(() => binding.unreadableError('request', '(root)'));
  if (text instanceof NotJson) refuse(() => binding.notJsonError('request', text.segments, text.what, ''));
  const { json, labels, copy } = text;
  let compiled = byContent.get(json);
  if (compiled === undefined) {
    compiled = new Compiled(json);
    if (json.length <= MAX_CACHED_CHARS) {
      if (byContent.size >= MAX_BY_CONTENT) byContent.delete(byContent.keys().next().value);
      byContent.set(json, compiled);
    }
  }
  return labels === undefined ? { compiled, labelsJson: null, labels: null } : { compiled, labelsJson: labels, labels: copy };
}

// --- requests reused by identity (route and explain) -------------------------------------
//
// An object seen before is compared, in one read inside a guard, with a snapshot of our own
// parse of its validated text: unchanged, its call is reused (serializing costs `route` more
// than deciding). The snapshot is made the second time an object comes, not the first: a
// caller making a fresh request per call never pays for one. Not for requests with labels
// (their text is split), nor `provision`.

const byIdentity = new WeakMap();
/** `byIdentity`'s mark of an object seen once. */
const ONCE = Symbol('seen once');

/** A snapshot of our own parsed data: a scalar as is, an array of snapshots, an object as `{ keys, values }`. */
function snapshot(v) {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(snapshot);
  const keys = Object.keys(v);
  return { keys, values: keys.map((k) => snapshot(v[k])) };
}

/** Whether live value `a` still reads as snapshot `s` (key order included). Allocates nothing. */
function same(a, s) {
  if (s === null || typeof s !== 'object') return a === s;
  if (Array.isArray(s)) {
    if (!Array.isArray(a) || a.length !== s.length) return false;
    for (let i = 0; i < s.length; i++) if (!same(a[i], s[i])) return false;
    return true;
  }
  if (typeof a !== 'object' || a === null || Array.isArray(a)) return false;
  const proto = Object.getPrototypeOf(a);
  if (proto !== Object.prototype && proto !== null) return false;
  const keys = s.keys;
  let n = 0;
  for (const k in a) {
    if (n >= keys.length || k !== keys[n] || !Object.hasOwn(a, k) || !same(a[k], s.values[n])) return false;
    n++;
  }
  return n === keys.length;
}

/** `compile`, reusing the call of a request object seen before and unchanged (see above). */
function compileShared(request) {
  const object = request !== null && typeof request === 'object';
  const seen = object ? byIdentity.get(request) : undefined;
  // A read that throws: compiled (and refused) below, as a request seen for the first time.
  if (seen !== undefined && seen !== ONCE && readOr(() => same(request, seen.snapshot), false)) return seen.call;
  const call = compile(request);
  if (object && call.labelsJson === null && call.compiled.json.length <= MAX_CACHED_CHARS) {
    byIdentity.set(request, seen === undefined ? ONCE : { call, snapshot: snapshot(JSON.parse(call.compiled.json)) });
  }
  return call;
}

module.exports = { compile, compileShared, checkLabels };
