'use strict';
// Builtin, read-only capacity readers: the options rule, HTTP, pagination and parsing are
// Rust's (src/readers/; options checked once by readers/config.rs; reads run on tokio). A
// reader is logged, inspected and serialized, so its API key lives only in a closure: no
// property (hidden or not), no `toJSON`, no `util.inspect(…, { showHidden: true })` reaches
// it; only `getCapacity` passes it to the native read, which checks it and does not keep it.

const { binding } = require('./binding.js');
const { callNative, fromNative } = require('./errors.js');
const { copyOptions, readOr } = require('./guard.js');
const { serialize, NotJson } = require('./serialize.js');

/** Provider kinds with a builtin reader. */
const CAPACITY_READER_KINDS = Object.freeze(binding.capacityReaderKinds());

/**
 * Creates a builtin capacity reader for one provider account.
 * @param {'daytona'|'e2b'|'microsandbox'|'agent37'|'vercel'|'freestyle'} provider
 * @param {object} [options] index.d.ts `CapacityReaderOptions` (memory/disk in GiB; `timeoutMs`
 *   defaults to 5000, `maxPages` to 1000)
 * @returns {{ readonly provider: string, getCapacity(opts?: { timeoutMs?: number }): Promise<object>, toJSON(): { provider: string } }}
 */
function createCapacityReader(provider, options) {
  // Read once, inside a guard: the key this reader sends is taken from the text the native
  // half validates (null: a property access threw).
  const spec = readOr(() => serialize({ provider, options: copyOptions(options, 4) }), null);
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
     * Reads the account's capacity: `{ status: 'known', resources }` or `{ status: 'unknown',
     * reason }` (never a rejection); `opts.timeoutMs` overrides the reader's deadline.
     */
    async getCapacity(opts) {
      const text = serialize(opts);
      if (text instanceof NotJson) throw optionError('getCapacity', text);
      try {
        return await native.read(apiKey, text);
      } catch (error) {
        throw fromNative(error);
      }
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

/** `value` as JSON text, or null when it has none (the native half refuses that by name). */
const jsonOf = (value) => readOr(() => JSON.stringify(value) ?? null, null);

/**
 * Strictly parses Daytona limits `{ cpu?, memory?, disk? }` (vCPU; GiB) into `{ cpu, memoryMiB,
 * diskMiB, provided }` (absent: null); a bad one is `INVALID_INPUT` naming the field.
 */
function parseDaytonaCapacityLimits(limits) {
  return callNative(() => binding.parseDaytonaCapacityLimits(jsonOf(limits)));
}

/**
 * Display summary of a Daytona inventory (sandboxes, or a page with `items`) against optional
 * limits. Options `{ warningRatio = 0.8, criticalRatio = 0.95, now = Date.now(), idleAfterMs =
 * 1800000, idleListLimit = 100 }` (`now`: a Date, RFC 3339 or epoch ms). Admission never uses it.
 */
function summarizeDaytonaCapacity(items, limits, options) {
  return callNative(() => binding.summarizeDaytonaCapacity(jsonOf(items), jsonOf(limits ?? null), optionsText(options)));
}

/** The summary's options as text, read once in a guard into our copy (a Date `now` as epoch ms); null: unreadable. */
function optionsText(options) {
  return readOr(() => {
    if (options === null || typeof options !== 'object' || Array.isArray(options)) return jsonOf(options ?? null);
    const o = { ...options };
    if (o.now instanceof Date) o.now = o.now.getTime();
    return jsonOf(o);
  }, null);
}

module.exports = { CAPACITY_READER_KINDS, createCapacityReader, parseDaytonaCapacityLimits, summarizeDaytonaCapacity };
