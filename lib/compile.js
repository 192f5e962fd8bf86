'use strict';
// Compiled requests: validate a request once per distinct content.
//
// The request is the caller's value, so it is read exactly once (guard.js): serialized
// with JSON.stringify inside a guard. Everything the router later needs from it (the
// launch options, the resources for capacity admission) comes from that text, never from
// a second read of the caller's object: a getter that answers differently the next time,
// or a Proxy that starts throwing, changes nothing after validation.
//
// Why a cache by content? Serializing is cheap next to the native parse; requests built
// from one template repeat their text, so a bounded map keyed by the text skips the parse.
// Only short texts are kept (MAX_CACHED_CHARS): a huge request is validated and dropped.

const { binding } = require('./binding.js');
const { callNative, refuse } = require('./errors.js');
const { serializeRequest, NotJson } = require('./serialize.js');
const { guarded } = require('./guard.js');

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

  /**
   * `{ launch, resourcesJson }` of the validated text (parsed on first use; plain data of
   * our own, frozen, so a cached entry is safe to share).
   */
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

/**
 * @typedef {object} CallRequest One call's compiled request.
 * @property {Compiled} compiled the shared compiled form of everything but the labels
 * @property {string | null} labelsJson this call's labels as JSON text (null when it has
 *   none), not yet validated: `provision` has them checked by the native begin, `route` and
 *   `explain` by `checkLabels`
 * @property {Record<string, string> | null} labels our own copy of the labels' string
 *   entries, made in the same read (use once validated)
 */

/** Validates a call's labels by the native rule (within router `native`'s limits); throws the typed INVALID_REQUEST. */
function checkLabels(call, native) {
  if (call.labelsJson !== null) callNative(() => binding.checkLabels(call.labelsJson, native));
}

/**
 * The compiled form of `request` (validated). Throws the same typed validation errors as
 * the native parser; a value JSON cannot carry (a function, a symbol, a BigInt, NaN,
 * ±Infinity) is INVALID_REQUEST at its field; a request that cannot be read (a throwing
 * getter or Proxy trap, a cycle, a throwing toJSON) is INVALID_REQUEST at `(root)`.
 * @returns {CallRequest}
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
// Why? `route` and `explain` are often asked about one request object again and again (a
// template). For them the serialization above costs more than the decision itself. So an
// object seen before is compared with a snapshot of what was validated, in one read inside
// a guard; if it is unchanged, the call it compiled to is reused. The snapshot is made from
// our own parse of the validated text, never from a second read of the caller's object, so
// a hit means "the object now reads exactly as the text we validated". Requests with
// labels are not remembered (their text is split). `provision` does not use this: callers
// make a fresh request per provision, for which a WeakMap entry would be pure cost.

const byIdentity = new WeakMap();

/** A snapshot of our own parsed data: keys in order and the snapshots of their values. */
class ObjectSnapshot {
  constructor(keys, values) {
    this.keys = keys;
    this.values = values;
  }
}

function snapshot(v) {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(snapshot);
  const keys = Object.keys(v);
  return new ObjectSnapshot(
    keys,
    keys.map((k) => snapshot(v[k])),
  );
}

function isPlain(v) {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Whether live value `a` still reads as snapshot `s` (key order included). Allocates nothing. */
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

/** `compile`, reusing the call of a request object seen before and unchanged (see above). */
function compileShared(request) {
  const object = request !== null && typeof request === 'object';
  if (object) {
    const seen = byIdentity.get(request);
    if (seen !== undefined) {
      let unchanged;
      try {
        unchanged = guarded(() => same(request, seen.snapshot));
      } catch {
        unchanged = false;
      }
      if (unchanged) return seen.call;
    }
  }
  const call = compile(request);
  if (object && call.labelsJson === null && call.compiled.json.length <= MAX_CACHED_CHARS) {
    byIdentity.set(request, { call, snapshot: snapshot(JSON.parse(call.compiled.json)) });
  }
  return call;
}

module.exports = { compile, compileShared, checkLabels };
