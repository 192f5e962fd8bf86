'use strict';
// Telemetry: the router's OpenTelemetry metrics and traces (option `telemetry`;
// docs/telemetry.md lists every instrument and span).
//
// Why like this?
// - Off by default, and free when off. A router without `telemetry` has `ctx.telemetry`
//   null: nothing here runs on its path, `@opentelemetry/api` is never required, its
//   machines record no events, and each hook on the provision path is one null check
//   (`npm run bench:instructions` counts the same provision before and after).
// - The numbers are the machine's. With telemetry on, the router's machines record their
//   typed events, as for an observer (src/core/acquisition.rs), and this file counts those
//   (attempts, fallbacks, capacity skips) and the machine's own ending
//   (`AcquisitionFailure.outcome`). No rule is derived again here: the outcome names, the
//   bounded skip reasons, the circuit gauge's values and the bucket boundaries come from
//   src/core/telemetry.rs; this file hands them to the OpenTelemetry API.
// - Attributes are bounded sets: pool ids, the router's codes and the names above. Never a
//   sandbox id, a label's value or a provider's text (each distinct value is a series an
//   operator's Prometheus keeps, and text may be a secret). Spans keep to the same sets.
// - Telemetry never changes an outcome. Every call into the caller's meter, tracer, spans
//   and instruments is made inside a try and its throw dropped, as an observer's is; an
//   exporter runs on the SDK's own schedule and never on the provision path.
// - One registry of instruments (INSTRUMENTS, lib/otel.js): a new metric is one entry there
//   and one call here where its number is known (warm pools' and budgets' metrics join
//   that way; docs/telemetry.md "Adding a metric").

const { binding } = require('./binding.js');
const { callNative, codeOf } = require('./errors.js');
const { readFacts } = require('./facts.js');
const { viewOf } = require('./registry.js');
const { INSTRUMENTS, SCHEMA, API_PACKAGE, api, fromProvider, instrumentsOn, quietly, traceparentOf } = require('./otel.js');

const SUCCESS = binding.ProvisionOutcome.Success;
const TERMINAL = binding.ProvisionOutcome.Terminal;
const { TRACEPARENT_LABEL } = binding;
/** `launch_type` of a provision served by a fresh launch (warm pools add `warm`). */
const COLD = 'cold';

/**
 * The `telemetry` option, read once: null (off: undefined or false), or the router's
 * Telemetry. `true` uses the global providers of `@opentelemetry/api`; an object names a
 * `meterProvider` and a `tracerProvider` (either omitted: the global one, as OpenTelemetry
 * instrumentations do) and `propagateToLabels`. `clock`: the router's clock (null: a
 * monotonic clock measures durations).
 */
function telemetryOf(option, clock) {
  const { copy, facts } = readFacts(option, 1);
  const o = callNative(() => binding.telemetryOption(facts));
  if (o === null) return null;
  const otel = api();
  const meterProvider = o.meterProvider ? copy.meterProvider : otel.metrics.getMeterProvider();
  const tracerProvider = o.tracerProvider ? copy.tracerProvider : otel.trace.getTracerProvider();
  const meter = fromProvider(meterProvider, 'getMeter');
  const tracer = fromProvider(tracerProvider, 'getTracer');
  return new Telemetry(otel, meter, tracer, o.propagateToLabels, clock);
}


/**
 * One provision's telemetry: its span and the context its work runs in, its start, the
 * pool of its last attempt, the attempt and capacity-read spans open now, and how it ended.
 * A plain record (one shape), made only when telemetry is on.
 */
function provisionRecord(start) {
  return {
    start,
    span: null,
    context: null,
    /** the pool of the last attempt (a provision's `pool` when it fails) */
    pool: null,
    attempt: null,
    attemptContext: null,
    read: null,
    readContext: null,
    /** the machine's own ending (AcquisitionFailure.outcome), when it failed inside it */
    outcome: null,
    /** `cold`, or `warm` for a warm member (issue 24) */
    launchType: COLD,
    /** the provision span's traceparent, with `propagateToLabels` */
    traceparent: null,
    ended: false,
  };
}

class Telemetry {
  #api;
  #tracer;
  #clock;
  #propagate;
  #i;
  #kind;
  #error;

  constructor(otel, meter, tracer, propagate, clock) {
    this.#api = otel;
    this.#tracer = tracer;
    this.#propagate = propagate;
    this.#clock = clock;
    this.#i = instrumentsOn(meter);
    this.#kind = otel.SpanKind?.INTERNAL ?? 0;
    this.#error = otel.SpanStatusCode?.ERROR ?? 2;
  }

  /**
   * Observes the gauge `key` of INSTRUMENTS for the router `ctx` at each collection:
   * `read(ctx)` answers `[value, attributes]` pairs (or nothing). The meter holds the router
   * only weakly: a router dropped by its owner is collected, and its callback removes
   * itself. A throw from `read` or the SDK drops that collection's values, nothing else.
   * (The circuit gauge is one; a warm pool's size would be another.)
   * @param {string} key the instrument's key
   * @param {object} ctx the router's context
   * @param {(ctx: object) => Iterable<[number, Record<string, string>]> | null} read
   */
  observe(key, ctx, read) {
    const gauge = this.#i[key];
    const router = new WeakRef(ctx);
    const callback = (result) => {
      const c = router.deref();
      if (c === undefined) {
        quietly(() => gauge.removeCallback(callback));
        return;
      }
      let values;
      try {
        values = read(c);
        if (values === null || values === undefined) return;
        for (const [value, attributes] of values) quietly(() => result.observe(value, attributes));
      } catch {
        // this collection has no value from this router
      }
    };
    quietly(() => gauge.addCallback(callback));
  }

  /**
   * The circuit-state gauge of the router `ctx`, from the native health snapshot
   * (`routerCircuitStates`); no value with `health: false`.
   * @param {object} ctx the router's context
   * @param {(health: object) => number | undefined} now what native calls get as `now`
   */
  observeCircuits(ctx, now) {
    this.observe('circuitState', ctx, (c) => {
      if (c.health === null) return null;
      const ids = viewOf(c).definitions.map((d) => d.id);
      const states = binding.routerCircuitStates(c.native, now(c.health));
      return ids.map((pool, k) => [states[k], { pool }]);
    });
  }

  /** Seconds since `start` (a reading of `now()`; NaN when the clock cannot be read). */
  since(start) {
    return (this.now() - start) / 1000;
  }

  /** The clock durations are measured on (ms): the router's `clock` if injected, else monotonic. */
  now() {
    if (this.#clock === null) return performance.now();
    try {
      return this.#clock();
    } catch {
      return NaN;
    }
  }

  /**
   * Records `value` (seconds, for a duration) into the histogram `key` of INSTRUMENTS; a
   * value that is not a finite non-negative number (an unreadable clock) is dropped.
   * `attributes`: bounded values only (pool ids, codes, fixed names).
   */
  record(key, value, attributes) {
    if (Number.isFinite(value) && value >= 0) quietly(() => this.#i[key].record(value, attributes));
  }

  /** Adds `n` to the counter (or up-down counter) `key` of INSTRUMENTS; bounded attributes only. */
  add(key, n, attributes) {
    quietly(() => this.#i[key].add(n, attributes));
  }

  /** A span that is a child of `parent` (a context), and the context it makes; nulls when tracing fails. */
  #child(name, parent, attributes) {
    try {
      const span = this.#tracer.startSpan(name, { kind: this.#kind, attributes }, parent);
      return [span, this.#api.trace.setSpan(parent, span)];
    } catch {
      return [null, null];
    }
  }

  /**
   * Runs `f` with `context` as the active one (so a caller's instrumented calls nest under
   * the router's span); without one, or if the context manager throws, runs it plainly.
   * `f` runs exactly once either way, and its own throw is its caller's.
   */
  #within(context, f) {
    if (context === null) return f();
    let called = false;
    let out;
    try {
      out = this.#api.context.with(context, () => {
        called = true;
        return f();
      });
    } catch (error) {
      if (called) throw error;
      return f();
    }
    return called ? out : f();
  }

  /**
   * Starts provision `run` (its span, a child of the caller's active context) and runs
   * `start()` (the acquisition) inside the span's context.
   */
  begin(run, start) {
    const t = provisionRecord(this.now());
    run.tel = t;
    let parent = null;
    try {
      parent = this.#api.context.active();
    } catch {
      parent = null;
    }
    if (parent !== null) [t.span, t.context] = this.#child('sandbox_router.provision', parent, { detached: run.detached });
    if (this.#propagate && t.span !== null) {
      try {
        t.traceparent = traceparentOf(this.#api, t.span);
      } catch {
        t.traceparent = null;
      }
    }
    this.#within(t.context, start);
  }

  /** The labels of a launch of `run`: the provision span's traceparent added, with `propagateToLabels`. */
  labels(run, labels) {
    if (run.tel.traceparent !== null) labels[TRACEPARENT_LABEL] = run.tel.traceparent;
  }

  /** Runs the launch `launch(run)` inside the current attempt's span. */
  launch(run, launch) {
    return this.#within(run.tel.attemptContext, () => launch(run));
  }

  /**
   * A provision's capacity read: `measure(run)` inside a `sandbox_router.capacity_read`
   * span (ended by the machine's verdict on it, see `decided`), its duration recorded.
   */
  read(run, measure) {
    const t = run.tel;
    const pool = run.def.id;
    if (t.context !== null) [t.read, t.readContext] = this.#child('sandbox_router.capacity_read', t.context, { pool });
    const start = this.now();
    return this.#within(t.readContext, () => measure(run)).then((text) => {
      this.record('capacityReadDuration', this.since(start), { pool });
      return text;
    });
  }

  /** The events the machine decided for `run` (binding.acquisitionEvents), counted. */
  decided(run, events) {
    const t = run.tel;
    for (const e of events) {
      switch (e.type) {
        case 'attempt.started':
          t.pool = e.providerId;
          if (t.context !== null) [t.attempt, t.attemptContext] = this.#child('sandbox_router.attempt', t.context, { pool: e.providerId, attempt: e.attempt });
          break;
        case 'attempt.succeeded':
          this.add('attempts', 1, { pool: e.providerId, result: 'success' });
          this.#endAttempt(t, 'success', null);
          break;
        case 'attempt.failed': {
          const result = e.retryable ? 'retryable' : 'terminal';
          this.add('attempts', 1, { pool: e.providerId, result });
          this.#endAttempt(t, result, e.code);
          break;
        }
        case 'warm.miss':
          this.add('warmClaims', 1, { pool: e.providerId, result: 'miss', reason: e.reason });
          break;
        case 'fallback.advanced':
          this.add('fallbacks', 1, { pool: e.fromProviderId });
          this.#event(t, e.type, { pool: e.fromProviderId, to_pool: e.toProviderId });
          break;
        case 'capacity.admitted':
          this.#endRead(t, 'admitted', null);
          break;
        case 'capacity.skipped':
          this.add('capacitySkips', 1, { pool: e.providerId, reason: e.skipReason });
          this.#endRead(t, 'skipped', e.skipReason);
          break;
        case 'budget.refused':
          this.add('budgetRefusals', 1, { pool: e.providerId, rule: e.rule, dimension: e.dimension ?? 'none' });
          break;
        case 'health.circuit.opened':
          this.#event(t, e.type, { pool: e.providerId, reason: e.reason });
          break;
        case 'health.circuit.half-open':
        case 'health.circuit.closed':
        case 'health.skipped':
          this.#event(t, e.type, { pool: e.providerId });
          break;
        default:
          break;
      }
    }
  }

  #event(t, name, attributes) {
    if (t.span !== null) quietly(() => t.span.addEvent(name, attributes));
  }

  #endAttempt(t, result, code) {
    const span = t.attempt;
    t.attempt = t.attemptContext = null;
    this.#close(span, { result }, code);
  }

  #endRead(t, result, reason) {
    const span = t.read;
    t.read = t.readContext = null;
    this.#close(span, reason === null ? { result } : { result, reason }, null);
  }

  /** Ends `span` (if any) with `attributes` and, for a failure, its `code` as its error status. */
  #close(span, attributes, code) {
    if (span === null) return;
    quietly(() => {
      span.setAttributes(attributes);
      if (code !== null) {
        span.setAttributes({ code, 'error.type': code });
        span.setStatus({ code: this.#error, message: code });
      }
    });
    quietly(() => span.end());
  }

  /** Provision `run` handed back its sandbox. */
  succeeded(run) {
    const t = run.tel;
    if (t.ended) return;
    t.ended = true;
    const attributes = { pool: run.def.id, outcome: SUCCESS, launch_type: t.launchType };
    this.record('provisionDuration', this.since(t.start), attributes);
    this.#close(t.span, attributes, null);
  }

  /**
   * Provision `run` failed with `error` (one of ours): its outcome is the machine's own
   * ending when it ended inside the machine, else the core's rule for the code.
   */
  failed(run, error) {
    const t = run.tel;
    if (t.ended) return;
    t.ended = true;
    const code = codeOf(error);
    let outcome = t.outcome;
    if (outcome === null) {
      try {
        outcome = binding.provisionOutcome(code, run.pools !== null);
      } catch {
        outcome = TERMINAL;
      }
    }
    const attributes = { outcome, launch_type: t.launchType };
    if (t.pool !== null) attributes.pool = t.pool;
    this.record('provisionDuration', this.since(t.start), attributes);
    this.#endAttempt(t, 'terminal', code);
    this.#endRead(t, 'abandoned', null);
    this.#close(t.span, attributes, code);
  }

  /**
   * An operation by id (`name`: runScript, uploadBundle, start, stop, getSandbox, destroy):
   * `f()` inside its span, counted and timed by outcome (`success` or the error's code).
   * Returns what `f` returns (a promise), and throws what it throws.
   */
  operation(name, f) {
    const start = this.now();
    let span = null;
    let context = null;
    try {
      [span, context] = this.#child(`sandbox_router.${name}`, this.#api.context.active(), { operation: name });
    } catch {
      span = context = null;
    }
    let p;
    try {
      p = this.#within(context, f);
    } catch (error) {
      this.#operated(name, span, start, error);
      throw error;
    }
    return p.then(
      (value) => {
        this.#operated(name, span, start, null);
        return value;
      },
      (error) => {
        this.#operated(name, span, start, error);
        throw error;
      },
    );
  }

  #operated(name, span, start, error) {
    const code = error === null ? null : codeOf(error);
    const attributes = { operation: name, outcome: code ?? 'success' };
    this.add('operations', 1, attributes);
    this.record('operationDuration', this.since(start), attributes);
    this.#close(span, { outcome: attributes.outcome }, code);
  }

  /** What one reconcile run found: orphans, stale mappings, stale intents (zeros too). */
  reconciled(orphan, staleMapping, staleIntent) {
    this.add('reconcileFound', orphan, { class: 'orphan' });
    this.add('reconcileFound', staleMapping, { class: 'stale-mapping' });
    this.add('reconcileFound', staleIntent, { class: 'stale-intent' });
  }
}

module.exports = { telemetryOf, Telemetry, INSTRUMENTS, SCHEMA, TRACEPARENT_LABEL, API_PACKAGE };
