'use strict';
// The default mapping store. The records live in the native core; this class gives them
// the async contract every store has (`put`/`get`/`delete`/`list`), so a database-backed
// store can replace it without the router noticing. The router recognises this class and
// writes to it synchronously on the provision path (one native call, no extra promise).

const fs = require('node:fs');
const path = require('node:path');
const { binding } = require('./binding.js');
const { callNative, fromNative } = require('./errors.js');
const { readFacts } = require('./facts.js');

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

/**
 * A caller's record (or intent) read once, inside a guard, and checked by the core's rule
 * (`check`: src/core/records.rs, through the binding): our copy, or the typed INVALID_INPUT
 * error naming the field.
 */
function readChecked(value, check) {
  const { copy, facts } = readFacts(value, 2);
  callNative(() => check(facts));
  return copy;
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
    const r = readChecked(record, binding.checkMappingRecord);
    const labels = JSON.stringify(r.labels ?? {});
    callNative(() => this.#native.put(r.id, r.providerId, r.providerSandboxId, labels, r.createdAt, r.detached === true));
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

/** A record read once into the batch's `put` op, checked by the core's rule. */
function readPut(record) {
  const r = toRecord(readChecked(record, binding.checkMappingPut));
  return { op: 'put', ...r, detached: r.detached === true };
}

/** An intent read once into the batch's `intent` op, checked by the core's rule. */
function readIntent(intent) {
  const i = readChecked(intent, binding.checkMappingIntent);
  return {
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
    const o = callNative(() => binding.sqliteOptions(readFacts(options, 1).facts));
    this.#path = path.resolve(o.path);
    this.#native = new binding.NativeSqliteStore(this.#path, o.full);
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
      throw fromNative(error);
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
