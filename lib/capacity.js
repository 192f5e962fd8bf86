'use strict';
// Capacity reads: each pool's reader, bounded by the capacity deadline. A read is an
// observation, never an exception: a reader that throws, times out or answers something
// malformed is an `unknown` measurement with a reason, and the native core validates every
// answer strictly (core/capacity.rs) before anything is admitted on it.

const { binding } = require('./binding.js');
const { nativeView } = require('./registry.js');
const { serialize } = require('./serialize.js');
const { within, TIMED_OUT } = require('./within.js');

const READ_FAILED = JSON.stringify({ status: 'unknown', reason: 'READ_FAILED' });
const TIMEOUT = JSON.stringify({ status: 'unknown', reason: 'TIMEOUT' });

/**
 * One pool's measurement as JSON text (serialized once, inside a guard): what the reader
 * answered, or an unknown measurement. Never throws. The native side validates it.
 */
async function measureJson(ctx, def) {
  const timeoutMs = ctx.capacityTimeoutMs;
  let raw;
  try {
    raw = await within(def.capacity.getCapacity({ timeoutMs }), timeoutMs);
  } catch {
    return READ_FAILED;
  }
  if (raw === TIMED_OUT) return TIMEOUT;
  return serialize(raw) ?? 'null';
}

/**
 * Reads every pool that has a capacity reader, concurrently, each bounded by the capacity
 * deadline. Only reads: nothing is launched, started or created. Keys in id order.
 */
async function getCapacity(ctx) {
  const view = nativeView(ctx.registry);
  const withReader = view.definitions.filter((d) => d.capacity);
  const texts = await Promise.all(withReader.map((d) => measureJson(ctx, d)));
  const out = {};
  withReader
    .map((d, i) => [d.id, texts[i]])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .forEach(([id, text]) => {
      out[id] = JSON.parse(binding.validateMeasurement(text));
    });
  return out;
}

module.exports = { measureJson, getCapacity };
