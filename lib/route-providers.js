'use strict';
// routeProviders(request, providers): the pure, synchronous decision over a list of definitions
// (upstream's signature; the core's order and reasons); nothing is launched, no callback runs.
// Each definition is read once, in a guard, into a plain copy (its snapshot), parsed once and
// remembered by object (docs/performance.md); the same object next time is reused only with exactly
// the snapshot's keys and `===` values (each property read once). Anything but plain JSON data with
// known keys is read and parsed again on every call.

const { binding } = require('./binding.js');
const { callNative, refuse } = require('./errors.js');
const { serialize, serializeDefinition } = require('./serialize.js');
const { readOr } = require('./guard.js');
const { definitionText, REFUSAL } = require('./registry.js');
const { compile, checkLabels } = require('./compile.js');
const { explainView } = require('./explain.js');

/** definition object → its entry `{ id, json, snap }` (only definitions that parsed). */
const entries = new WeakMap();
/** Recent native registries: `{ entries, view }`, most recent first. */
const registries = [];
const MAX_REGISTRIES = 4;
/** Deepest nesting a snapshot copies (the schema is 4 deep: definition → capabilities → timeout → semantics). */
const MAX_DEPTH = 6;

const CAPABILITY_KEYS = ['supported', 'image', 'egress', 'timeout', 'stateDurability', 'restrictions', 'regions', 'resources', 'isolation'];
const KNOWN = {
  capabilities: new Set(CAPABILITY_KEYS),
  image: new Set(['identity', 'binaries']),
  timeout: new Set(['semantics', 'granularityMs', 'maxSandboxLifetimeMs']),
  resources: new Set(['cpu', 'memoryMb', 'diskMb', 'gpu']),
  signals: new Set(['estimatedCost', 'coldStartLatencyMs', 'readyLatencyMs', 'completionWithinBudgetRate', 'available']),
};

function isPlainObject(v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function isPlainArray(v) {
  return Array.isArray(v) && Object.getPrototypeOf(v) === Array.prototype;
}

/** A plain copy of `v` (own keys of plain objects, elements of plain arrays; anything else as is), read once. */
function copy(v, depth) {
  if (v === null || typeof v !== 'object' || depth >= MAX_DEPTH) return v;
  if (isPlainArray(v)) {
    const n = v.length;
    const out = new Array(n);
    for (let i = 0; i < n; i++) out[i] = copy(v[i], depth + 1);
    return out;
  }
  if (!isPlainObject(v)) return v;
  const out = {};
  for (const key of Object.keys(v)) out[key] = copy(v[key], depth + 1);
  return out;
}

// --- Snapshots: which copies may be cached, and the check that a definition still matches one.

/** A JSON scalar that round-trips exactly: string, finite number, boolean, null. */
function isScalar(v) {
  return v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
}

/** Whether copy `o` is a plain object with only `known` keys, each holding clean data. */
function cleanObject(o, known) {
  if (!isPlainObject(o)) return false;
  for (const key of Object.keys(o)) {
    if (!known.has(key)) return false;
    const v = o[key];
    if (KNOWN[key] !== undefined && known !== KNOWN.signals) {
      if (!cleanObject(v, KNOWN[key])) return false;
    } else if (isPlainArray(v)) {
      for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return false;
    } else if (!isScalar(v)) {
      return false;
    }
  }
  return true;
}

/** `def`'s copy, if it may be cached: a string id, plain known-key capabilities, signals absent or plain. */
function cacheable(snap) {
  return (
    typeof snap.id === 'string' &&
    cleanObject(snap.capabilities, KNOWN.capabilities) &&
    (snap.signals === undefined || cleanObject(snap.signals, KNOWN.signals))
  );
}

// The check needs "serializes as the snapshot did", not "has the same prototype": a
// prototype matters to JSON only through `toJSON`, an inline-cached load (the prototype
// would be a runtime call per object). Snapshots are only of plain data (`cacheable`).
function sameStrings(a, s) {
  if (!Array.isArray(a) || typeof /** @type {any} */ (a).toJSON === 'function' || a.length !== s.length) return false;
  for (let i = 0; i < s.length; i++) if (a[i] !== s[i]) return false;
  return true;
}

/** `o` is a plain object with exactly `n` keys (a snapshot object's count; its values are all defined). */
function sameShape(o, n) {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return false;
  return typeof o.toJSON !== 'function' && Object.keys(o).length === n;
}

/** Key counts of a cacheable snapshot's objects (counted once, when it is made). */
function countsOf(snap) {
  const c = snap.capabilities;
  const n = (o) => (o === undefined ? -1 : Object.keys(o).length);
  return { capabilities: n(c), image: n(c.image), timeout: n(c.timeout), resources: n(c.resources), signals: n(snap.signals) };
}

// Each property of the caller's objects is read at most once. With `sameShape` (exactly
// the snapshot's number of keys) it suffices to compare the snapshot's own keys: a key
// the snapshot lacks cannot be present unless one of the snapshot's is missing, and a
// missing key reads `undefined`, which no clean snapshot value equals.
function sameCapabilities(c, s, k) {
  if (!sameShape(c, k.capabilities)) return false;
  if (s.supported !== undefined && !sameStrings(c.supported, s.supported)) return false;
  if (s.image !== undefined) {
    const o = c.image;
    const t = s.image;
    if (!sameShape(o, k.image)) return false;
    if (t.identity !== undefined && o.identity !== t.identity) return false;
    if (t.binaries !== undefined && !sameStrings(o.binaries, t.binaries)) return false;
  }
  if (s.egress !== undefined && c.egress !== s.egress) return false;
  if (s.timeout !== undefined) {
    const o = c.timeout;
    const t = s.timeout;
    if (!sameShape(o, k.timeout)) return false;
    if (t.semantics !== undefined && !sameStrings(o.semantics, t.semantics)) return false;
    if (t.granularityMs !== undefined && o.granularityMs !== t.granularityMs) return false;
    if (t.maxSandboxLifetimeMs !== undefined && o.maxSandboxLifetimeMs !== t.maxSandboxLifetimeMs) return false;
  }
  if (s.stateDurability !== undefined && c.stateDurability !== s.stateDurability) return false;
  if (s.restrictions !== undefined && !sameStrings(c.restrictions, s.restrictions)) return false;
  if (s.regions !== undefined && !sameStrings(c.regions, s.regions)) return false;
  if (s.resources !== undefined) {
    const o = c.resources;
    const t = s.resources;
    if (!sameShape(o, k.resources)) return false;
    if (t.cpu !== undefined && o.cpu !== t.cpu) return false;
    if (t.memoryMb !== undefined && o.memoryMb !== t.memoryMb) return false;
    if (t.diskMb !== undefined && o.diskMb !== t.diskMb) return false;
    if (t.gpu !== undefined && o.gpu !== t.gpu) return false;
  }
  return s.isolation === undefined || c.isolation === s.isolation;
}

function sameSignals(o, s, k) {
  if (s === undefined) return o === undefined;
  return (
    sameShape(o, k.signals) &&
    (s.estimatedCost === undefined || o.estimatedCost === s.estimatedCost) &&
    (s.coldStartLatencyMs === undefined || o.coldStartLatencyMs === s.coldStartLatencyMs) &&
    (s.readyLatencyMs === undefined || o.readyLatencyMs === s.readyLatencyMs) &&
    (s.completionWithinBudgetRate === undefined || o.completionWithinBudgetRate === s.completionWithinBudgetRate) &&
    (s.available === undefined || o.available === s.available)
  );
}

/** Each definition's entry: the cached one when unchanged, else a fresh read (inside the caller's guard). */
function readEntries(providers) {
  const n = providers.length;
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    const p = providers[i];
    if (p === null || typeof p !== 'object') {
      out[i] = { id: null, json: serialize({ id: null }), snap: null, counts: null, cache: null };
      continue;
    }
    // The three fields are read once here; the check and the copy both start from them.
    const { id, capabilities, signals } = p;
    const hit = entries.get(p);
    if (hit !== undefined && id === hit.snap.id && sameCapabilities(capabilities, hit.snap.capabilities, hit.counts) && sameSignals(signals, hit.snap.signals, hit.counts)) {
      out[i] = hit;
      continue;
    }
    // New or changed: the router's own copy, from which it is serialized and parsed. (For a
    // changed definition the check may already have read some nested properties; the
    // decision uses only this copy, so a getter answering differently cannot split it.)
    const snap = { id: copy(id, 1), capabilities: copy(capabilities, 1), signals: copy(signals, 1) };
    const cache = cacheable(snap) ? p : null;
    out[i] = { id: snap.id, json: serializeDefinition(snap.id, snap.capabilities, snap.signals), snap, counts: cache === null ? null : countsOf(snap), cache };
  }
  return out;
}

/** The native registry of these entries: a recent one with the very same entries, or a new one. */
function viewOf(list) {
  for (let i = 0; i < registries.length; i++) {
    const r = registries[i];
    if (r.entries.length === list.length && r.entries.every((e, j) => e === list[j])) {
      if (i > 0) {
        registries.splice(i, 1);
        registries.unshift(r);
      }
      return r.view;
    }
  }
  const native = binding.createRegistry();
  for (const e of list) {
    // A remembered entry dropped its text once parsed: made again from our copy, a string.
    let json = e.json ?? serializeDefinition(e.snap.id, e.snap.capabilities, e.snap.signals);
    // A value JSON cannot carry: refused where the native parse would refuse it, after the
    // id (checked by the same rule: a non-string id reads as none).
    if (typeof json !== 'string') {
      const id = typeof e.id === 'string' ? e.id : '';
      callNative(() => binding.checkProviderId(id));
      json = definitionText(id, json);
    }
    // No runtime here: not detachable, no capacity reader.
    callNative(() => binding.registryAddPool(native, json, false, false));
  }
  // Parsed: the definitions that may be cached are remembered from now on.
  for (const e of list) {
    if (e.cache !== null) {
      entries.set(e.cache, e);
      e.cache = null;
    }
    if (e.counts !== null) e.json = undefined;
  }
  const view = { native, definitions: list };
  registries.unshift({ entries: list, view });
  if (registries.length > MAX_REGISTRIES) registries.pop();
  return view;
}

/** The explanation of `request` over the definitions `providers` (index.d.ts documents it). */
function routeProviders(request, providers) {
  // The definitions, each read once inside a guard (guard.js), then the request, then the
  // native parse of the definitions: the order (and so the error) of 0.7.
  const list = readOr(() => (Array.isArray(providers) ? readEntries(providers) : undefined), null);
  if (list === undefined) refuse(() => binding.registryRefused(REFUSAL.NotAProviderList));
  if (list === null || list.some((e) => e.json === null)) refuse(() => binding.registryRefused(REFUSAL.ProvidersUnreadable));
  const call = compile(request);
  checkLabels(call);
  return explainView(viewOf(list), call.compiled, false, null);
}

module.exports = { routeProviders };
