'use strict';
// The OpenTelemetry side of telemetry (lib/telemetry.js): `@opentelemetry/api` loaded once,
// the first time a router asks for telemetry; the meter and tracer taken from the caller's
// providers; and INSTRUMENTS, the one list of every instrument the router records (a feature
// adds its entries here). Nothing here runs per provision.

const { binding } = require('./binding.js');
const { readOr } = require('./guard.js');
const { fromNative } = require('./errors.js');
const { packageError } = require('./provider-adapters.js');

/** The optional peer dependency telemetry needs (its versions: src/core/packages.rs). */
const API_PACKAGE = binding.TELEMETRY_PACKAGE;
/** The instrumentation scope: the meter's and tracer's name and version. */
const SCOPE = '@agent-relay/sandbox-router';
const VERSION = JSON.parse(require('node:fs').readFileSync(require('node:path').join(__dirname, '..', 'package.json'), 'utf8')).version;
/** The core's names and boundaries (src/core/telemetry.rs), read once at load. */
const SCHEMA = binding.telemetrySchema();

/**
 * Every instrument the router records, by `key`: the core's one list (src/core/telemetry.rs
 * `INSTRUMENTS`; docs/telemetry.md's table and the tests are checked against it).
 */
const INSTRUMENTS = Object.freeze(SCHEMA.instruments.map((i) => Object.freeze({ ...i, attributes: Object.freeze(i.attributes) })));

/** `@opentelemetry/api`, required once, the first time a router asks for telemetry. */
let API = null;
function api() {
  if (API !== null) return API;
  let mod;
  try {
    mod = require(API_PACKAGE);
  } catch (error) {
    throw packageError(error, API_PACKAGE);
  }
  const has = (k) => mod[k] !== null && typeof mod[k] === 'object';
  if (!readOr(() => ['context', 'trace', 'metrics'].every(has) && typeof mod.isSpanContextValid === 'function', false)) {
    throw fromNative(binding.packageExportMissing(API_PACKAGE));
  }
  API = mod;
  return API;
}

/** `provider[method](SCOPE, VERSION)` (getMeter, getTracer); a missing method, a throw or no object is typed. */
function fromProvider(provider, method) {
  const fn = readOr(() => provider[method], undefined);
  if (typeof fn !== 'function') throw fromNative(binding.telemetryProviderRefused(method, false));
  const got = readOr(() => fn.call(provider, SCOPE, VERSION), undefined);
  if (got === null || typeof got !== 'object') throw fromNative(binding.telemetryProviderRefused(method, true));
  return got;
}

/** How each `kind` of INSTRUMENTS is made on a meter (a gauge is observable: `Telemetry.observe`). */
const CREATE = Object.freeze({
  histogram: (meter, i, options) => meter.createHistogram(i.name, { ...options, advice: { explicitBucketBoundaries: i.buckets } }),
  counter: (meter, i, options) => meter.createCounter(i.name, options),
  upDownCounter: (meter, i, options) => meter.createUpDownCounter(i.name, options),
  gauge: (meter, i, options) => meter.createObservableGauge(i.name, options),
});

/** The instruments of INSTRUMENTS on `meter`, by key. */
function instrumentsOn(meter) {
  const out = {};
  for (const i of INSTRUMENTS) {
    try {
      out[i.key] = CREATE[i.kind](meter, i, { description: i.description, unit: i.unit });
    } catch {
      throw fromNative(binding.telemetryInstrumentRefused(i.name));
    }
  }
  return out;
}

/** Drops whatever `f` throws: telemetry never changes an outcome. */
function quietly(f) {
  try {
    f();
  } catch {
    // A throwing meter, span or exporter is the caller's; the router goes on.
  }
}

/** The W3C `traceparent` of `span` (null for an invalid context: a no-op tracer's). */
function traceparentOf(otel, span) {
  const c = span.spanContext();
  if (!otel.isSpanContextValid(c)) return null;
  return `00-${c.traceId}-${c.spanId}-${(c.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

module.exports = { INSTRUMENTS, SCHEMA, api, fromProvider, instrumentsOn, quietly, traceparentOf };
