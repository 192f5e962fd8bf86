'use strict';
// The mapping stores. The default one's records live in the native core; its class gives them
// the async contract every store has (`put`/`get`/`delete`/`list`), and the router recognises
// it and hands its native store to the provision path (no extra call, no extra promise).

const fs = require('node:fs');
const path = require('node:path');
const { binding } = require('./binding.js');
const { callNative, fromNative } = require('./errors.js');
const { readFacts } = require('./facts.js');

const NATIVE_STORE = Symbol('sandbox-router.native-mapping-store');

function toRecord(r) {
  if (!r) return null;
  const { id, providerId, providerSandboxId, labels, createdAt, detached } = r;
  return { id, providerId, providerSandboxId, labels: { ...labels }, createdAt, detached };
}

/** Awaits a native promise; a rejection becomes its typed error (a synchronous throw too). */
async function call(fn) {
  try {
    return await fn();
  } catch (error) {
    throw fromNative(error);
  }
}

/** A caller's record (or intent) read once, in a guard: our copy, or the core's INVALID_INPUT naming the field. */
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
    const r = readChecked(record, binding.checkMappingRecord);
    const labels = JSON.stringify(r.labels ?? {});
    callNative(() => this.#native.put(r.id, r.providerId, r.providerSandboxId, labels, r.createdAt, r.detached === true));
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

  /** @internal the native store, to which a provision's success call writes the record itself. */
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
  const { id, providerId, state, startedAt, expiresAt, ownerHost, ownerPid, ownerSession } = i;
  return { op: 'intent', id, providerId, state, startedAt, expiresAt, ownerHost, ownerPid, ownerSession };
}

/**
 * A durable mapping store, with intent records for reconcile: one SQLite file, in WAL mode, its
 * schema migrated on open. What it guarantees: docs/orphans-and-restarts.md.
 */
class SqliteMappingStore {
  #native;
  #path;
  #dirReady = false;
  /** @type {{ op: object, resolve: (v: any) => void, reject: (e: unknown) => void }[]} */
  #queue = [];

  /** @param {string | { path: string, durability?: 'normal' | 'full' }} options the path (resolved now), or options */
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
   * Writes go through one queue, flushed once per microtask as ONE transaction (group commit).
   * Each op is validated before it is queued, so one bad record never fails its neighbours;
   * a write resolves only once its transaction committed.
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
    await this.#enqueue(readPut(record));
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
    return (await call(() => binding.sqliteList(this.#path))).map(toRecord);
  }

  /** Number of records. */
  async count() {
    return callNative(() => this.#n().count());
  }

  /**
   * Writes an intent record (before each launch; `failed` when its outcome is unknown).
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

  /** @internal the native store: budgets without a coordinator keep their charges in this file. */
  [NATIVE_STORE]() {
    return this.#n();
  }

  toJSON() {
    return { type: 'SqliteMappingStore', path: this.#path };
  }
}

module.exports = { InMemoryMappingStore, SqliteMappingStore, NATIVE_STORE, readPut, readIntent, toRecord, call };
