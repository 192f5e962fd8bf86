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
 * Serializes a request with its `launch.labels` apart: `{ json, labels }`, where `json` is
 * the request without them and `labels` their own JSON text (undefined when absent); null
 * when the request cannot be serialized (a cycle, a throwing getter or toJSON, a Proxy
 * trap). The request is read once, by this one JSON.stringify.
 *
 * Why apart? Labels are per call (a request id, a user) and matter only to the launch and
 * the mapping record, never to the routing decision. Kept out of the text, requests that
 * differ only in labels share one compiled form instead of one native parse each.
 */
function serializeRequest(request) {
  if (request === undefined || request === null) return { json: '{}', labels: undefined, copy: null };
  let root;
  let launch;
  let labels;
  let copy = null;
  // The labels' text, and (in the same read) our own copy of their string entries: the
  // copy is what the launch gets once the text has been validated.
  function captureLabels(value) {
    let top;
    const out = {};
    labels =
      JSON.stringify(value, function (k, v) {
        if (k === '' && this[''] === value) top = v;
        else if (this === top && typeof v === 'string') {
          if (k === '__proto__') Object.defineProperty(out, k, { value: v, writable: true, enumerable: true, configurable: true });
          else out[k] = v;
        }
        return replacer(k, v);
      }) ?? 'null';
    copy = out;
  }
  function capture(key, value) {
    switch (typeof value) {
      case 'object':
        if (key === '' && this[''] === request) {
          root = value;
        } else if (key === 'launch' && this === root) {
          launch = value;
        } else if (key === 'labels' && launch !== undefined && this === launch) {
          captureLabels(value);
          return undefined;
        }
        return value;
      case 'string':
      case 'boolean':
        return value;
      default:
        // A label that is not an object (or undefined) is still the labels' business.
        if (key === 'labels' && launch !== undefined && this === launch) {
          if (value !== undefined) captureLabels(value);
          return undefined;
        }
        return replacer(key, value);
    }
  }
  try {
    const json = JSON.stringify(request, capture);
    return typeof json === 'string' ? { json, labels, copy } : null;
  } catch {
    return null;
  }
}

module.exports = { serialize, serializeRequest, replacer };
