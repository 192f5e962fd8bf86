'use strict';
// The default mapping store. The records live in the native core; this class gives them
// the async contract every store has (`put`/`get`/`delete`/`list`), so a database-backed
// store can replace it without the router noticing. The router recognises this class and
// writes to it synchronously on the provision path (one native call, no extra promise).

const { binding } = require('./binding.js');
const { callNative, SandboxRequestValidationError } = require('./errors.js');

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

module.exports = { InMemoryMappingStore, SYNC, STORE_KEY };
