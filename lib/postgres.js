'use strict';
// PostgresMappingStore: mappings, intents and the shared capacity ledger many router processes
// admit against (`capacity: { coordinator: store }`) in PostgreSQL. The native half (src/stores/pg.rs)
// owns the pool, the schema, every SQL statement and TLS (docs/fleets.md); this class reads each
// caller value once and gives failures their classes. The connection options (password, CA text)
// go to the native constructor, not kept here: neither JSON.stringify, util.inspect nor errors show them.

const util = require('node:util');
const { binding } = require('./binding.js');
const { callNative } = require('./errors.js');
const { readFacts } = require('./facts.js');
const { readPut, readIntent, toRecord, call } = require('./mappings.js');
const { argText } = require('./serialize.js');

/** Marks the stores the router may use as a capacity coordinator. */
const COORDINATOR = Symbol('sandbox-router.coordinator');

/**
 * Mappings, intents and (optionally) the shared capacity ledger in PostgreSQL; the schema is
 * migrated on first use (concurrent first uses one at a time); every call bounded by `timeoutMs`.
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
    const o = callNative(() => binding.postgresOptions(readFacts(options, 3).facts));
    this.#timeoutMs = o.timeoutMs;
    this.#leaseMs = o.leaseMs;
    this.#native = callNative(() => new binding.NativePgStore(o.connection, o.timeoutMs, o.poolSize, o.leaseMs));
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

  /** Unexpired capacity holds on pool `providerId` in the shared ledger, every process's (in flight or assumed). */
  async held(providerId) {
    return call(() => this.#native.held(String(providerId)));
  }

  /** A `decisions.sink` keeping each record in the fleet's table within `{ keep, maxAgeMs }` (a failed write drops it). */
  decisionSink(options) {
    const r = callNative(() => binding.decisionRetention(argText(options, 'decisionSink')));
    const native = this.#native;
    return (record) => native.keepDecision(JSON.stringify(record), r.keep, r.maxAgeMs).catch(() => {});
  }

  /** The fleet's kept decision records, newest first: `{ sandboxId?, since?, limit? }` (default 1,000). */
  async decisions(query) {
    return call(() => this.#native.decisions(argText(query, 'input')));
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

/** The native coordinator of a store given as `capacity.coordinator`, or null when it is not one. */
function coordinatorOf(value) {
  return value instanceof PostgresMappingStore ? value[COORDINATOR] : null;
}

module.exports = { PostgresMappingStore, coordinatorOf };
