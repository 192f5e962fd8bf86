'use strict';
// PostgresMappingStore: the mapping seam (put/get/delete/list, intents) in PostgreSQL, and
// the shared capacity ledger that lets many router processes admit against one truth
// (`capacity: { coordinator: store }`). The native half (src/binding/pg.rs → src/stores/pg.rs)
// owns the connection pool, the schema and every SQL statement; this class validates, reads
// each caller value once, and gives failures their classes.
//
// TLS (`connection.ssl`, or the URL's `sslmode`): rustls in the native half; see docs/fleets.md
// ("TLS") for what each mode verifies.
//
// The connection options (password and CA text included) are handed to the native constructor and not
// kept here: no field of this object holds them, so JSON.stringify and util.inspect cannot
// show them, and no error carries them (the native side drops the database's own texts).

const util = require('node:util');
const { binding } = require('./binding.js');
const { fromNative, SandboxRouterConfigurationError } = require('./errors.js');
const { copyOptions } = require('./guard.js');
const { readPut, readIntent, toRecord } = require('./mappings.js');

/** Marks the stores the router may use as a capacity coordinator. */
const COORDINATOR = Symbol('sandbox-router.coordinator');

/** Default bound of one database call. */
const DEFAULT_TIMEOUT_MS = 5_000;
/** Default size of the connection pool. */
const DEFAULT_POOL_SIZE = 10;
/** Default lease of a process's in-flight holds. */
const DEFAULT_LEASE_MS = 30_000;

function configError(field, what) {
  return new SandboxRouterConfigurationError(`invalid PostgresMappingStore options: ${field} ${what}`, 'INVALID_CONFIGURATION', { field });
}

function intOption(v, def, field, max) {
  if (v === undefined) return def;
  if (!Number.isInteger(v) || v < 1 || v > max) throw configError(field, `must be an integer from 1 to ${max}`);
  return v;
}

const CONNECTION_KEYS = ['url', 'host', 'port', 'user', 'password', 'database', 'ssl'];
const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full'];

/**
 * `ssl` as the native side takes it: `true` → `{}` (the URL's sslmode, else verify-full),
 * `false` → `{ mode: 'disable' }`, an object → a fresh `{ mode?, ca? }`. The CA text is
 * handed to native and not kept here.
 */
function sslOf(v) {
  if (v === true) return {};
  if (v === false) return { mode: 'disable' };
  if (v === null || typeof v !== 'object') throw configError('connection.ssl', 'must be a boolean or { mode?, ca? }');
  let o;
  try {
    o = copyOptions(v, 1);
  } catch {
    throw configError('connection.ssl', 'could not be read');
  }
  const out = {};
  for (const key of Object.keys(o)) {
    const x = o[key];
    if (x === undefined) continue;
    if (key === 'mode') {
      if (!SSL_MODES.includes(x)) throw configError('connection.ssl.mode', `must be one of ${SSL_MODES.join(', ')}`);
      out.mode = x;
    } else if (key === 'ca') {
      if (typeof x !== 'string' || x.length === 0) throw configError('connection.ssl.ca', 'must be PEM text (a non-empty string)');
      out.ca = x;
    } else {
      throw configError(`connection.ssl.${key}`, 'is not a known option');
    }
  }
  return out;
}

/** The connection options, read once into a fresh object (handed to native, then dropped). */
function connectionOf(c) {
  if (typeof c === 'string') return { url: c };
  if (c === null || typeof c !== 'object') throw configError('connection', 'must be a URL or an object');
  let o;
  try {
    o = copyOptions(c, 1);
  } catch {
    throw configError('connection', 'could not be read');
  }
  const out = {};
  for (const key of Object.keys(o)) {
    if (!CONNECTION_KEYS.includes(key)) throw configError(`connection.${key}`, 'is not a known option');
    const v = o[key];
    if (v === undefined) continue;
    if (key === 'port') {
      if (!Number.isInteger(v) || v < 1 || v > 65535) throw configError('connection.port', 'must be a port number');
    } else if (key === 'ssl') {
      out.ssl = sslOf(v);
      continue;
    } else if (typeof v !== 'string') {
      throw configError(`connection.${key}`, 'must be a string');
    }
    out[key] = v;
  }
  return out;
}

/**
 * Mappings, intents and (optionally) the shared capacity ledger in PostgreSQL. The schema is
 * created and migrated on first use (versioned; concurrent first uses migrate one at a
 * time). Every call is bounded by `timeoutMs`.
 */
class PostgresMappingStore {
  #native;
  #timeoutMs;
  #leaseMs;

  /**
   * @param {string | { connection: string | object, timeoutMs?: number, poolSize?: number, leaseMs?: number }} options
   *   a connection URL, or options.
   */
  constructor(options) {
    let o;
    if (typeof options === 'string') {
      o = { connection: options };
    } else {
      if (options === null || typeof options !== 'object') throw configError('options', 'must be a URL or { connection, ... }');
      try {
        o = copyOptions(options, 1);
      } catch {
        throw configError('options', 'could not be read');
      }
      for (const key of Object.keys(o)) {
        if (!['connection', 'timeoutMs', 'poolSize', 'leaseMs'].includes(key)) throw configError(key, 'is not a known option');
      }
    }
    const connection = connectionOf(o.connection);
    this.#timeoutMs = intOption(o.timeoutMs, DEFAULT_TIMEOUT_MS, 'timeoutMs', 600_000);
    const poolSize = intOption(o.poolSize, DEFAULT_POOL_SIZE, 'poolSize', 1_000);
    this.#leaseMs = intOption(o.leaseMs, DEFAULT_LEASE_MS, 'leaseMs', 3_600_000);
    try {
      this.#native = new binding.NativePgStore(connection, this.#timeoutMs, poolSize, this.#leaseMs);
    } catch (error) {
      throw fromNative(error);
    }
  }

  /** Bound of one database call, in ms. */
  get timeoutMs() {
    return this.#timeoutMs;
  }

  /** Lease of this process's in-flight holds, in ms. */
  get leaseMs() {
    return this.#leaseMs;
  }

  /** Connects and creates or migrates the schema now; resolves to its version. */
  async open() {
    return call(() => this.#native.open());
  }

  /** @param {import('../index').SandboxMapping} record */
  async put(record) {
    const op = readPut(record);
    await call(() => this.#native.apply(JSON.stringify(op)));
  }

  /** @param {string} id */
  async get(id) {
    return toRecord(await call(() => this.#native.get(String(id))));
  }

  /** @param {string} id @returns {Promise<boolean>} */
  async delete(id) {
    return call(() => this.#native.apply(JSON.stringify({ op: 'delete', id: String(id) })));
  }

  /** Every record, ordered by id. */
  async list() {
    return (await call(() => this.#native.list())).map(toRecord);
  }

  /** Number of records. */
  async count() {
    return call(() => this.#native.count());
  }

  /** @param {import('../index').MappingIntent} intent */
  async intent(intent) {
    const op = readIntent(intent);
    await call(() => this.#native.apply(JSON.stringify(op)));
  }

  /** Every intent record, ordered by id. */
  async intents() {
    return call(() => this.#native.intents());
  }

  /**
   * Unexpired capacity holds on pool `providerId` in the shared ledger, every process's
   * (in flight, or kept as assumptions).
   * @param {string} providerId
   */
  async held(providerId) {
    return call(() => this.#native.held(String(providerId)));
  }

  /** Ends this process's ledger session (its in-flight holds are released) and closes idle connections. */
  async close() {
    await call(() => this.#native.close());
  }

  /** @internal the router's side of the shared ledger */
  get [COORDINATOR]() {
    return this.#native;
  }

  toJSON() {
    return { type: 'PostgresMappingStore', timeoutMs: this.#timeoutMs, leaseMs: this.#leaseMs };
  }

  [util.inspect.custom]() {
    return `PostgresMappingStore { timeoutMs: ${this.#timeoutMs}, leaseMs: ${this.#leaseMs} }`;
  }
}

/** Awaits a native promise; a rejection becomes its typed error (a synchronous throw too). */
async function call(fn) {
  try {
    return await fn();
  } catch (error) {
    throw fromNative(error);
  }
}

/** The native coordinator of a store given as `capacity.coordinator`, or null when it is not one. */
function coordinatorOf(value) {
  if (!(value instanceof PostgresMappingStore)) return null;
  return value[COORDINATOR];
}

module.exports = { PostgresMappingStore, coordinatorOf };
