'use strict';
// The default mapping store. The records live in the native core; this class gives them
// the async contract every store has (`put`/`get`/`delete`/`list`), so a database-backed
// store can replace it without the router noticing. The router recognises this class and
// writes to it synchronously on the provision path (one native call, no extra promise).

const fs = require('node:fs');
const path = require('node:path');
const { binding } = require('./binding.js');
const { callNative, SandboxRequestValidationError, SandboxRouterConfigurationError } = require('./errors.js');
const { copyOptions } = require('./guard.js');

const SYNC = Symbol('sandbox-router.mapping-sync');
const STORE_KEY = Symbol('sandbox-router.mapping-store-key');

function toRecord(r) {
  return r
    ? {
        id: r.id,
        providerId: r.providerId,
        providerSandboxId: r.providerSandboxId,
        labels: { ...r.labels },
        createdAt: r.createdAt,
        detached: r.detached,
      }
    : null;
}

function checkRecord(record) {
  const bad = (field) => {
    throw new SandboxRequestValidationError(`invalid mapping record: ${field} must be a string`, 'INVALID_INPUT', { field });
  };
  if (record === null || typeof record !== 'object') bad('record');
  for (const f of ['id', 'providerId', 'providerSandboxId', 'createdAt']) if (typeof record[f] !== 'string') bad(f);
}

/** In-memory `sbx_…` ↔ provider mapping. A test/local reference, not durable storage. */
class InMemoryMappingStore {
  #native = new binding.NativeMappingStore();
  #key = this.#native.key;

  /** @param {import('../index').SandboxMapping} record */
  async put(record) {
    this[SYNC](record);
  }

  /** @param {string} id */
  async get(id) {
    return toRecord(this.#native.get(String(id)));
  }

  /** @param {string} id @returns {Promise<boolean>} */
  async delete(id) {
    return this.#native.delete(String(id));
  }

  async list() {
    return this.#native.list().map(toRecord);
  }

  /** Number of records. */
  get size() {
    return this.#native.size;
  }

  /** @internal synchronous put used by the router. */
  [SYNC](record) {
    checkRecord(record);
    const labels = JSON.stringify(record.labels ?? {});
    callNative(() =>
      this.#native.put(record.id, record.providerId, record.providerSandboxId, labels, record.createdAt, record.detached === true),
    );
  }

  /**
   * @internal the provision hot path: the native store's key, so that the acquisition's
   * success call writes the record natively (labels from the validated request, the id
   * label added, createdAt from the native clock) without a call of its own.
   */
  [STORE_KEY]() {
    return this.#key;
  }

  toJSON() {
    return { mappings: this.size };
  }
}

function storeConfigError(field, what) {
  return new SandboxRouterConfigurationError(`invalid SqliteMappingStore options: ${field} ${what}`, 'INVALID_CONFIGURATION', { field });
}

/**
 * A durable mapping store: one SQLite file (SQLite is compiled into the native addon),
 * created on first use, in WAL mode, its schema versioned and migrated on open.
 *
 * Identity survives a restart of the process: a record whose `put` resolved is in the file
 * even if the process is killed the next instant (SIGKILL included). With the default
 * `durability: 'normal'` a power loss or OS crash may roll back the last writes (the file
 * stays consistent); `'full'` fsyncs every write. It is one machine's file: processes on
 * one host may share it (SQLite locks it), hosts may not (not over NFS).
 *
 * Beyond the mapping seam (`put`, `get`, `delete`, `list`) it keeps intent records
 * (`intent`, `intents`): the router writes a `launching` intent before each launch, so that
 * `reconcile` tells a launch that was in flight when its process died from a sandbox that
 * someone else made with the router's labels.
 */
class SqliteMappingStore {
  #native;
  #path;
  #dirReady = false;

  /**
   * @param {string | { path: string, durability?: 'normal' | 'full' }} options the file's
   *   path (relative paths resolve against the working directory now), or options.
   */
  constructor(options) {
    let o;
    try {
      o = copyOptions(typeof options === 'string' ? { path: options } : options, 1);
    } catch {
      throw storeConfigError('options', 'could not be read');
    }
    if (o === null || typeof o !== 'object') throw storeConfigError('options', 'must be a path or { path, durability? }');
    for (const key of Object.keys(o)) if (key !== 'path' && key !== 'durability') throw storeConfigError(key, 'is not a known option');
    if (typeof o.path !== 'string' || o.path === '' || o.path.includes('\0')) throw storeConfigError('path', 'must be a non-empty path');
    if (o.durability !== undefined && o.durability !== 'normal' && o.durability !== 'full') {
      throw storeConfigError('durability', "must be 'normal' or 'full'");
    }
    this.#path = path.resolve(o.path);
    this.#native = new binding.NativeSqliteStore(this.#path, o.durability === 'full');
  }

  /** The file's absolute path. */
  get path() {
    return this.#path;
  }

  /** @returns the native store, its directory created on first use */
  #n() {
    if (!this.#dirReady) {
      try {
        fs.mkdirSync(path.dirname(this.#path), { recursive: true, mode: 0o700 });
      } catch {
        // The open that follows reports MAPPING_STORE_OPEN_FAILED.
      }
      this.#dirReady = true;
    }
    return this.#native;
  }

  /** Opens (creates, migrates) the file now; resolves to its schema version. */
  async open() {
    return callNative(() => this.#n().open());
  }

  /** @param {import('../index').SandboxMapping} record */
  async put(record) {
    checkRecord(record);
    const labels = JSON.stringify(record.labels ?? {});
    callNative(() =>
      this.#n().put(record.id, record.providerId, record.providerSandboxId, labels, record.createdAt, record.detached === true),
    );
  }

  /** @param {string} id */
  async get(id) {
    return toRecord(callNative(() => this.#n().get(String(id))));
  }

  /** @param {string} id @returns {Promise<boolean>} */
  async delete(id) {
    return callNative(() => this.#n().delete(String(id)));
  }

  /** Every record, ordered by id (read off the JS thread). */
  async list() {
    callNative(() => this.#n().open());
    let rows;
    try {
      rows = await binding.sqliteList(this.#path);
    } catch (error) {
      throw require('./errors.js').fromNative(error);
    }
    return rows.map(toRecord);
  }

  /** Number of records. */
  async count() {
    return callNative(() => this.#n().count());
  }

  /**
   * Writes an intent record (the router calls it before each launch, and again with
   * `state: 'failed'` when a launch ended with its outcome unknown).
   * @param {import('../index').MappingIntent} intent
   */
  async intent(intent) {
    callNative(() => this.#n().putIntent(intent));
  }

  /** Every intent record, ordered by id. */
  async intents() {
    return callNative(() => this.#n().intents());
  }

  /** Closes the file; the next operation opens it again. */
  close() {
    this.#native.close();
  }

  toJSON() {
    return { type: 'SqliteMappingStore', path: this.#path };
  }
}

module.exports = { InMemoryMappingStore, SqliteMappingStore, SYNC, STORE_KEY };
