'use strict';
// Builtin, read-only capacity readers. The HTTP, pagination and JSON parsing run in Rust
// on tokio (`src/readers/`), off the JS thread; this module validates options, keeps the
// API key in a closure, and turns results into plain objects.
//
// Why a closure? A reader object is handed to the router, logged, inspected and
// serialized. The key must not be reachable from it: not as a property (enumerable or
// not), not through `toJSON`, not through `util.inspect(reader, { showHidden: true })`.
// Only `getCapacity` can use it, and only as an argument to the native read.

const { binding } = require('./binding.js');
const { SandboxRouterConfigurationError, SandboxRequestValidationError, callNative, fromNative } = require('./errors.js');
const { copyOptions, shown } = require('./guard.js');

/** Provider kinds with a builtin reader. */
const CAPACITY_READER_KINDS = Object.freeze(['daytona', 'e2b', 'microsandbox', 'agent37', 'vercel', 'freestyle']);

const DEFAULT_TIMEOUT_MS = 5000;
const MAX_TIMEOUT_MS = 2 ** 31 - 1;
const MAX_MAX_PAGES = 100000;
const OPTION_KEYS = ['apiKey', 'baseUrl', 'organizationId', 'limits', 'demand', 'maxPages', 'pageSize', 'timeoutMs'];
/** Dimensions each provider can measure (others are refused, never silently ignored). */
const DIMENSIONS = {
  daytona: ['cpu', 'memory', 'disk'],
  e2b: ['sandboxes'],
  microsandbox: ['sandboxes'],
  agent37: ['sandboxes'],
  vercel: ['sandboxes'],
  freestyle: ['sandboxes'],
};
/** Documented page-size maxima; absent = the provider's list is not paginated. */
const PAGE_SIZE_MAX = { daytona: 200, e2b: 100, microsandbox: 100 };
/** Kinds that answer NOT_SUPPORTED without any request (no key needed). */
const NOT_SUPPORTED = new Set(['vercel', 'freestyle']);

function configError(field, expectation) {
  // The message names the field and what it must be; never the value (it may be a secret).
  return new SandboxRouterConfigurationError(`invalid capacity reader option ${shown(field)}: ${expectation}`, 'INVALID_CONFIGURATION', {
    field: shown(field),
  });
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function checkInteger(value, field, min, max) {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw configError(field, `must be an integer from ${min} to ${max}`);
  }
}

function checkDims(value, field, allowed) {
  if (value === undefined) return undefined;
  if (!isPlainObject(value)) throw configError(field, 'must be an object');
  const out = {};
  for (const [key, amount] of Object.entries(value)) {
    if (!allowed.includes(key)) throw configError(`${field}.${key}`, `is not measurable here (allowed: ${allowed.join(', ')})`);
    if (amount === undefined) continue;
    if (typeof amount !== 'number' || !Number.isFinite(amount) || amount < 0) {
      throw configError(`${field}.${key}`, 'must be a finite number >= 0');
    }
    out[key] = amount;
  }
  return out;
}

function checkBaseUrl(value) {
  if (typeof value !== 'string' || value.length === 0) throw configError('baseUrl', 'must be a non-empty string');
  let url;
  try {
    url = new URL(value);
  } catch {
    throw configError('baseUrl', 'must be an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw configError('baseUrl', 'must use http or https');
  if (url.username || url.password) throw configError('baseUrl', 'must not carry credentials');
  if (url.search || url.hash) throw configError('baseUrl', 'must not carry a query or fragment');
  return value;
}

function checkTimeout(value, field) {
  checkInteger(value, field, 1, MAX_TIMEOUT_MS);
  return value;
}

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
  if (typeof provider !== 'string' || !CAPACITY_READER_KINDS.includes(provider)) {
    throw configError('provider', `must be one of ${CAPACITY_READER_KINDS.join(', ')}`);
  }
  // Read once, inside a guard (guard.js).
  let opts;
  try {
    opts = copyOptions(options === undefined ? {} : options, 4);
  } catch {
    throw configError('options', 'could not be read (a property access threw)');
  }
  if (!isPlainObject(opts)) throw configError('options', 'must be an object');
  for (const key of Object.keys(opts)) {
    if (!OPTION_KEYS.includes(key)) throw configError(key, 'is not a known option');
  }
  const apiKey = opts.apiKey;
  if (NOT_SUPPORTED.has(provider)) {
    if (apiKey !== undefined && typeof apiKey !== 'string') throw configError('apiKey', 'must be a string');
  } else if (typeof apiKey !== 'string' || apiKey.length === 0) {
    throw configError('apiKey', 'must be a non-empty string');
  } else if (/[\u0000-\u001f\u007f]/.test(apiKey)) {
    throw configError('apiKey', 'must not contain control characters');
  }

  const config = {};
  if (opts.baseUrl !== undefined) config.baseUrl = checkBaseUrl(opts.baseUrl);
  if (opts.organizationId !== undefined) {
    if (provider !== 'daytona') throw configError('organizationId', 'applies to daytona only');
    if (typeof opts.organizationId !== 'string' || opts.organizationId.length === 0 || /[\u0000-\u001f\u007f]/.test(opts.organizationId)) {
      throw configError('organizationId', 'must be a non-empty string without control characters');
    }
    config.organizationId = opts.organizationId;
  }
  const limits = checkDims(opts.limits, 'limits', DIMENSIONS[provider]);
  if (limits) config.limits = limits;
  const demand = checkDims(opts.demand, 'demand', DIMENSIONS[provider]);
  if (demand) config.demand = demand;
  if (opts.maxPages !== undefined) {
    checkInteger(opts.maxPages, 'maxPages', 1, MAX_MAX_PAGES);
    config.maxPages = opts.maxPages;
  }
  if (opts.pageSize !== undefined) {
    const max = PAGE_SIZE_MAX[provider];
    if (max === undefined) throw configError('pageSize', `does not apply: the ${provider} list is not paginated`);
    checkInteger(opts.pageSize, 'pageSize', 1, max);
    config.pageSize = opts.pageSize;
  }
  const defaultTimeoutMs = opts.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : checkTimeout(opts.timeoutMs, 'timeoutMs');

  return makeReader(provider, JSON.stringify(config), apiKey === undefined ? '' : apiKey, defaultTimeoutMs);
}

// Kept apart from the validation above so the closure captures only what it needs.
function makeReader(provider, configJson, apiKey, defaultTimeoutMs) {
  const reader = {
    /**
     * Reads the account's capacity. Resolves to `{ status: 'known', resources }` or
     * `{ status: 'unknown', reason }`; provider failures are measurements, never rejections.
     * `opts.timeoutMs` (e.g. from the router) overrides the reader's default deadline.
     */
    getCapacity(opts) {
      let timeoutMs = defaultTimeoutMs;
      if (opts !== undefined && opts !== null) {
        if (typeof opts !== 'object') return Promise.reject(configError('getCapacity', 'options must be an object'));
        if (opts.timeoutMs !== undefined) {
          try {
            timeoutMs = checkTimeout(opts.timeoutMs, 'getCapacity.timeoutMs');
          } catch (error) {
            return Promise.reject(error);
          }
        }
      }
      let pending;
      try {
        pending = binding.readCapacity(provider, configJson, apiKey, timeoutMs);
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

function toJson(value, field) {
  try {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError('not serializable');
    return text;
  } catch {
    throw new SandboxRequestValidationError(`invalid input: ${field} is not JSON-serializable`, 'INVALID_INPUT', { field });
  }
}

/**
 * Strictly parses Daytona limits `{ cpu?, memory?, disk? }` (vCPU; memory/disk in GiB): finite
 * numbers > 0, unknown keys refused, at least one present. Returns
 * `{ cpu, memoryMiB, diskMiB, provided }` (absent limits are null). Throws
 * `SandboxRequestValidationError` (`INVALID_INPUT`) naming the field.
 */
function parseDaytonaCapacityLimits(limits) {
  const text = toJson(limits, 'limits');
  return JSON.parse(callNative(() => binding.parseDaytonaCapacityLimits(text)));
}

/**
 * Display summary of a Daytona inventory (an array of sandboxes, or a list page with `items`)
 * against optional limits (the `parseDaytonaCapacityLimits` input form). Options:
 * `{ warningRatio = 0.8, criticalRatio = 0.95, now = Date.now(), idleAfterMs = 1800000,
 * idleListLimit = 100 }` (`now`: a Date, an RFC 3339 string or epoch ms). Numeric fields of the
 * inventory are coerced leniently (counted in `dataQuality`); admission never uses this.
 */
function summarizeDaytonaCapacity(items, limits, options) {
  const itemsText = toJson(items, 'items');
  const limitsText = limits === undefined || limits === null ? 'null' : toJson(limits, 'limits');
  let optionsText;
  if (options !== undefined && options !== null) {
    const o = isPlainObject(options) && options.now instanceof Date ? { ...options, now: options.now.getTime() } : options;
    optionsText = toJson(o, 'options');
  }
  return JSON.parse(callNative(() => binding.summarizeDaytonaCapacity(itemsText, limitsText, optionsText)));
}

module.exports = {
  CAPACITY_READER_KINDS,
  createCapacityReader,
  parseDaytonaCapacityLimits,
  summarizeDaytonaCapacity,
};
