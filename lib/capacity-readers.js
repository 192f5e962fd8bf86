'use strict';
// Builtin, read-only capacity readers. The options rule, the HTTP, pagination and JSON
// parsing are Rust's (`src/readers/`: the options are validated once, when the reader is
// made, by `readers/config.rs`; reads run on tokio, off the JS thread). This module reads
// the caller's options once, keeps the API key in a closure, and awaits the reads.
//
// Why a closure? A reader object is handed to the router, logged, inspected and
// serialized. The key must not be reachable from it: not as a property (enumerable or
// not), not through `toJSON`, not through `util.inspect(reader, { showHidden: true })`.
// Only `getCapacity` can use it, and only as an argument to the native read. (The native
// half checks the key when the reader is made and does not keep it.)

const { binding } = require('./binding.js');
const { callNative, fromNative } = require('./errors.js');
const { copyOptions } = require('./guard.js');
const { serialize, NotJson } = require('./serialize.js');

/** Provider kinds with a builtin reader. */
const CAPACITY_READER_KINDS = Object.freeze(binding.capacityReaderKinds());

/**
 * Creates a builtin capacity reader for one provider account.
 *
 * @param {'daytona'|'e2b'|'microsandbox'|'agent37'|'vercel'|'freestyle'} provider
 * @param {{ apiKey?: string, baseUrl?: string, organizationId?: string,
 *   limits?: { cpu?: number, memory?: number, disk?: number, sandboxes?: number },
 *   demand?: { cpu?: number, memory?: number, disk?: number, sandboxes?: number },
 *   maxPages?: number, pageSize?: number, timeoutMs?: number }} options
 *   memory/disk in GiB; `timeoutMs` defaults to 5000; `maxPages` to 1000.
 * @returns {{ readonly provider: string, getCapacity(opts?: { timeoutMs?: number }): Promise<object>, toJSON(): { provider: string } }}
 */
function createCapacityReader(provider, options) {
  // Read once, inside a guard (guard.js): `spec` is the text the native half validates,
  // and the key this reader sends is taken from that same text. null: a property access threw.
  let spec = null;
  try {
    spec = serialize({ provider, options: copyOptions(options, 4) });
  } catch {
    spec = null;
  }
  if (spec instanceof NotJson) throw optionError('', spec);
  const native = callNative(() => new binding.NativeCapacityReader(spec));
  const key = JSON.parse(/** @type {string} */ (spec)).options?.apiKey;
  return makeReader(native, typeof key === 'string' ? key : '');
}

// Kept apart from the reading above so the closure captures only what it needs.
function makeReader(native, apiKey) {
  const provider = native.provider;
  const reader = {
    /**
     * Reads the account's capacity. Resolves to `{ status: 'known', resources }` or
     * `{ status: 'unknown', reason }`; provider failures are measurements, never rejections.
     * `opts.timeoutMs` (e.g. from the router) overrides the reader's default deadline.
     */
    getCapacity(opts) {
      let pending;
      try {
        const text = serialize(opts);
        if (text instanceof NotJson) return Promise.reject(optionError('getCapacity', text));
        pending = native.read(apiKey, text);
      } catch (error) {
        return Promise.reject(fromNative(error));
      }
      return pending.then(undefined, (error) => {
        throw fromNative(error);
      });
    },
    /** Only the provider name: the reader has nothing else worth serializing. */
    toJSON() {
      return { provider };
    },
  };
  Object.defineProperty(reader, 'provider', { value: provider, enumerable: true });
  return /** @type {any} */ (Object.freeze(reader));
}

/** A reader option JSON cannot carry (under `prefix`), refused as the native half refuses an option. */
function optionError(prefix, refusal) {
  return fromNative(binding.readerOptionRefused(prefix, refusal.segments, refusal.what));
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** `value` as JSON text, or null when it has none (the native half refuses that by name). */
function jsonOf(value) {
  try {
    return JSON.stringify(value) ?? null;
  } catch {
    return null;
  }
}

/**
 * Strictly parses Daytona limits `{ cpu?, memory?, disk? }` (vCPU; memory/disk in GiB): finite
 * numbers > 0, unknown keys refused, at least one present. Returns
 * `{ cpu, memoryMiB, diskMiB, provided }` (absent limits are null). Throws
 * `SandboxRequestValidationError` (`INVALID_INPUT`) naming the field.
 */
function parseDaytonaCapacityLimits(limits) {
  const text = jsonOf(limits);
  return callNative(() => binding.parseDaytonaCapacityLimits(text));
}

/**
 * Display summary of a Daytona inventory (an array of sandboxes, or a list page with `items`)
 * against optional limits (the `parseDaytonaCapacityLimits` input form). Options:
 * `{ warningRatio = 0.8, criticalRatio = 0.95, now = Date.now(), idleAfterMs = 1800000,
 * idleListLimit = 100 }` (`now`: a Date, an RFC 3339 string or epoch ms). Numeric fields of the
 * inventory are coerced leniently (counted in `dataQuality`); admission never uses this.
 */
function summarizeDaytonaCapacity(items, limits, options) {
  const o = isPlainObject(options) && options.now instanceof Date ? { ...options, now: options.now.getTime() } : options;
  return callNative(() => binding.summarizeDaytonaCapacity(jsonOf(items), jsonOf(limits ?? null), jsonOf(o ?? null)));
}

module.exports = {
  CAPACITY_READER_KINDS,
  createCapacityReader,
  parseDaytonaCapacityLimits,
  summarizeDaytonaCapacity,
};
