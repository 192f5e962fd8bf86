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
const { serialize, NotJson } = require('./serialize.js');

const SYNC = Symbol('sandbox-router.mapping-sync');
const NATIVE_STORE = Symbol('sandbox-router.native-mapping-store');

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
    const labels = serialize(record.labels);
    if (labels === null) throw invalidInput('labels', 'could not be read (a cycle, a throwing getter or toJSON)');
    if (labels instanceof NotJson) throw invalidInput(labels.field('labels'), labels.expectation);
    callNative(() =>
      this.#native.put(record.id, record.providerId, record.providerSandboxId, labels, record.createdAt, record.detached === true),
    );
  }

  /**
   * @internal the native store, handed to the router's native state: a provision's success
   * call writes the record itself (labels from the validated request, the id and fleet
   * labels added, createdAt from the native clock) without a call of its own.
   */
  [NATIVE_STORE]() {
    return this.#native;
  }

  toJSON() {
    return { mappings: this.size };
  }
}

function invalidInput(field, what) {
  return new SandboxRequestValidationError(`invalid mapping record: ${field} ${what}`, 'INVALID_INPUT', { field });
}

/** A record read once into the batch's `put` op, validated as the native side will. */
function readPut(record) {
  checkRecord(record);
  const labels = {};
  const raw = record.labels ?? {};
  if (raw === null || typeof raw !== 'object') throw invalidInput('labels', 'must be an object of strings');
  for (const k of Object.keys(raw)) {
    if (typeof raw[k] !== 'string') throw invalidInput('labels', 'must be an object of strings');
    labels[k] = raw[k];
  }
  if (!binding.isSandboxId(record.id)) throw invalidInput('id', 'must be an sbx_ id');
  if (record.providerSandboxId === '') throw invalidInput('providerSandboxId', 'must not be empty');
  return {
    op: 'put',
    id: record.id,
    providerId: record.providerId,
    providerSandboxId: record.providerSandboxId,
    labels,
    createdAt: record.createdAt,
    detached: record.detached === true,
  };
}

/** An intent read once into the batch's `intent` op. */
function readIntent(i) {
  if (i === null || typeof i !== 'object') throw invalidInput('intent', 'must be an object');
  const op = {
    op: 'intent',
    id: i.id,
    providerId: i.providerId,
    state: i.state,
    startedAt: i.startedAt,
    expiresAt: i.expiresAt,
    ownerHost: i.ownerHost,
    ownerPid: i.ownerPid,
    ownerSession: i.ownerSession,
  };
  if (typeof op.id !== 'string' || !binding.isSandboxId(op.id)) throw invalidInput('id', 'must be an sbx_ id');
  if (typeof op.providerId !== 'string' || !binding.isProviderId(op.providerId)) throw invalidInput('providerId', 'must be a provider id');
  if (op.state !== 'launching' && op.state !== 'failed') throw invalidInput('state', 'must be launching or failed');
  for (const f of ['startedAt', 'expiresAt', 'ownerPid']) if (!Number.isFinite(op[f])) throw invalidInput(f, 'must be a finite number');
  for (const f of ['ownerHost', 'ownerSession']) if (typeof op[f] !== 'string') throw invalidInput(f, 'must be a string');
  return op;
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
  /** @type {{ op: object, resolve: (v: any) => void, reject: (e: unknown) => void }[]} */
  #queue = [];

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

  /**
   * Writes go through one queue, flushed once per turn of the event loop (a microtask) as
   * ONE transaction (group commit): concurrent provisions share a commit, a lone write
   * costs a microtask more. Each op is validated before it is queued, so one bad record
   * never fails its neighbours; a write resolves only once its transaction committed.
   */
  #enqueue(op) {
    return new Promise((resolve, reject) => {
      this.#queue.push({ op, resolve, reject });
      if (this.#queue.length === 1) queueMicrotask(() => this.#flush());
    });
  }

  #flush() {
    const batch = this.#queue;
    this.#queue = [];
    let results;
    try {
      const text = JSON.stringify(batch.map((b) => b.op));
      results = callNative(() => this.#n().apply(text));
    } catch (error) {
      for (const b of batch) b.reject(error);
      return;
    }
    batch.forEach((b, i) => b.resolve(results[i]));
  }

  /** @param {import('../index').SandboxMapping} record */
  async put(record) {
    const op = readPut(record);
    await this.#enqueue(op);
  }

  /** @param {string} id */
  async get(id) {
    return toRecord(callNative(() => this.#n().get(String(id))));
  }

  /** @param {string} id @returns {Promise<boolean>} */
  async delete(id) {
    return this.#enqueue({ op: 'delete', id: String(id) });
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
    await this.#enqueue(readIntent(intent));
  }

  /** Every intent record, ordered by id. */
  async intents() {
    return callNative(() => this.#n().intents());
  }

  /** Closes the file; the next operation opens it again. */
  close() {
    this.#native.close();
  }

  /**
   * @internal the native store, handed to a router's native state: budgets without a
   * coordinator keep their charges in this file (a restart does not reset spend).
   */
  [NATIVE_STORE]() {
    return this.#n();
  }

  toJSON() {
    return { type: 'SqliteMappingStore', path: this.#path };
  }
}

module.exports = { InMemoryMappingStore, SqliteMappingStore, SYNC, NATIVE_STORE, readPut, readIntent, toRecord };
