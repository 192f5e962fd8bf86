'use strict';
// A caller's value read once, inside a guard, as facts for a rule of the core
// (src/core/facts.rs): JSON data as itself, and for anything JSON cannot carry, what it is.
// The rules (options, records) are the core's; JavaScript only says what it read.

const { copyOptions, guarded } = require('./guard.js');

/**
 * `value` as facts: JSON data as itself, a plain object as `{ o: [[key, fact], …] }`,
 * anything else (a class instance is not read) as `{ t: what it is }`. Run inside a guard.
 */
function factsOf(value, holders = []) {
  const type = typeof value;
  if (type === 'string' || type === 'boolean') return value;
  if (type === 'number') return Number.isFinite(value) ? value : { t: String(value) };
  if (type !== 'object') return { t: type };
  if (value === null) return null;
  if (holders.includes(value)) return { t: 'cycle' };
  const inner = [...holders, value];
  if (Array.isArray(value)) return Array.from(value, (v) => factsOf(v, inner));
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return { t: 'instance' };
  return { o: Object.keys(value).map((key) => [key, factsOf(value[key], inner)]) };
}

/** A caller's value read once: our copy (`copyOptions` to `depth`) and its facts' JSON (undefined / null on a throw). */
function readFacts(value, depth) {
  try {
    const copy = copyOptions(value, depth);
    return { copy, facts: JSON.stringify(guarded(() => factsOf(copy))) };
  } catch {
    return { copy: undefined, facts: null };
  }
}

module.exports = { readFacts };
