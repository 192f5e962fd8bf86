'use strict';
// The rule for values that cross in from a caller (docs/architecture.md, "Read once").
//
// Every value from outside the router (a request, options, a definition, a callback's answer,
// a thrown value, a store record, a measurement) is read ONCE, inside a guard, into plain data
// of our own; a throw while reading it becomes the entry point's typed error. So: no
// `instanceof`, property read, `String()` or template literal on such a value outside a guard
// (a throwing or revoked Proxy, a getter that answers differently the next time: all end
// typed, and nothing the router decides depends on a second read).

/** Thrown (internally) when a caller's value could not be read; entry points map it to their typed error. */
class Unreadable extends Error {}
const UNREADABLE = new Unreadable('unreadable');

/** Runs `read`; a throw of any kind becomes UNREADABLE (the thrown value itself is never touched). */
function guarded(read) {
  try {
    return read();
  } catch {
    throw UNREADABLE;
  }
}

/** `value[name]` read once when it is a function, else undefined (a throwing read: undefined); call it with `.call(value, …)`. */
function methodOf(value, name) {
  if (value === null || typeof value !== 'object') return undefined;
  const f = readOr(() => value[name], undefined);
  return typeof f === 'function' ? f : undefined;
}

/** What `read()` answers, or `fallback` when it throws (the thrown value is never touched). */
function readOr(read, fallback) {
  try {
    return read();
  } catch {
    return fallback;
  }
}

/**
 * A plain copy of an options object: own enumerable string keys, nested plain objects and
 * arrays copied to `depth`, anything else (functions, class instances, primitives) kept by
 * reference. Throws UNREADABLE when any read throws. Run it once, at the entry point.
 */
function copyOptions(value, depth = 3) {
  return guarded(() => copy(value, depth));
}

function copy(value, depth) {
  if (value === null || typeof value !== 'object' || depth <= 0) return value;
  if (Array.isArray(value)) {
    const out = [];
    const n = value.length;
    for (let i = 0; i < n; i++) out.push(copy(value[i], depth - 1));
    return out;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const out = {};
  for (const key of Object.keys(value)) out[key] = copy(value[key], depth - 1);
  return out;
}

/** Whether `value` is a thenable. A value whose `then` cannot be read is treated as a failure. */
function thenable(value) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  return typeof guarded(() => value.then) === 'function';
}

/**
 * The provider sandbox id of a launch's handle (its `id`, read once), or null when malformed:
 * not an object, no non-empty string id, or a getter that throws (its text is never touched).
 */
function handleId(handle) {
  if (handle === null || typeof handle !== 'object') return null;
  const id = readOr(() => handle.id, null);
  return typeof id === 'string' && id !== '' ? id : null;
}

/** The facts the router reads of a thrown value, each read on its own: never its text. */
const FACTS = [(e) => e.status, (e) => e.statusCode, (e) => e.response?.status, (e) => e.code];
const NO_FACTS = Object.freeze({ values: undefined, unreadable: 0 });

/** `error`'s facts (undefined when it is not an object) and which could not be read (bit i: fact i). */
function thrownFacts(error) {
  if (error === null || typeof error !== 'object') return NO_FACTS;
  let unreadable = 0;
  const values = FACTS.map((read, i) => {
    try {
      return read(error);
    } catch {
      unreadable |= 1 << i;
      return undefined;
    }
  });
  return { values, unreadable };
}

module.exports = { guarded, readOr, methodOf, copyOptions, thenable, handleId, thrownFacts, NO_FACTS };
