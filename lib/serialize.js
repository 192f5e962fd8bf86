'use strict';
// Serialization for the seam. JSON.stringify silently drops functions and symbols and
// turns NaN/Infinity into null; a dropped requirement would widen eligibility. The
// replacer turns every such value into a marker object that the native validator refuses
// with the field's path, so nothing is lost silently.

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
 * @returns {string | { error: string }}
 */
function serialize(value) {
  if (value === undefined || value === null) return '{}';
  try {
    return JSON.stringify(value, replacer);
  } catch {
    return null;
  }
}

module.exports = { serialize, replacer };
