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
 * Serializes a request with its `launch.labels` apart: `{ json, labels, copy }`, where `json`
 * is the request without them, `labels` their own JSON text (undefined when absent) and
 * `copy` our own copy of their string entries (null when absent); null when the request
 * cannot be serialized (a cycle, a BigInt, a throwing getter or toJSON, a Proxy trap).
 *
 * The request is read once, by JSON.stringify itself: its replacer applies `replacer`'s
 * rules and takes the labels out, and the labels' text is a second JSON.stringify of the
 * value the first handed over (the request is not read again). The root is the replacer's
 * first call; `launch` and `labels` are recognized by their holders, so a key named
 * `labels` elsewhere stays in the text.
 *
 * Why apart? Labels are per call (a request id, a user) and matter only to the launch and
 * the mapping record, never to the routing decision. Kept out of the text, requests that
 * differ only in labels share one compiled form instead of one native parse each.
 */
function serializeRequest(request) {
  if (request === undefined || request === null) return { json: '{}', labels: undefined, copy: null };
  const out = { json: '', labels: undefined, copy: null };
  let root;
  let launch;
  let first = true;
  function capture(key, value) {
    const isRoot = first;
    first = false;
    const type = typeof value;
    if (type === 'string' || type === 'boolean') return value;
    const isLabels = key === 'labels' && launch !== undefined && this === launch;
    if (type === 'object') {
      if (isRoot) root = value;
      else if (key === 'launch' && this === root) launch = value;
      else if (isLabels) return takeLabels(out, value);
      return value;
    }
    // A labels value that is not an object (a number, a function, …) is still the labels'.
    if (isLabels) return value === undefined ? undefined : takeLabels(out, value);
    return replacer(key, value);
  }
  try {
    const json = JSON.stringify(request, capture);
    if (typeof json !== 'string') return null;
    out.json = json;
    return out;
  } catch {
    return null;
  }
}

/** `launch.labels`: their own text and our copy of their string entries; absent from the request's text. */
function takeLabels(out, value) {
  let top;
  let first = true;
  const copy = {};
  out.labels =
    JSON.stringify(value, function (key, v) {
      const isRoot = first;
      first = false;
      if (isRoot) top = v;
      else if (this === top && typeof v === 'string') {
        if (key === '__proto__') Object.defineProperty(copy, key, { value: v, writable: true, enumerable: true, configurable: true });
        else copy[key] = v;
      }
      return replacer(key, v);
    }) ?? 'null';
  out.copy = copy;
  return undefined;
}

module.exports = { serialize, serializeRequest, replacer };
