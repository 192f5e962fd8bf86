'use strict';
// Telemetry: the router's OpenTelemetry metrics and traces (option `telemetry`; docs/telemetry.md
// lists every instrument and span, docs/architecture.md "Telemetry"). Off by default and free when
// off: `ctx.telemetry` is null and `@opentelemetry/api` is never required. Names, skip reasons,
// gauge values and buckets come from src/core/telemetry.rs. Metric attributes are bounded sets
// (pool ids, codes, fixed names): never a sandbox id, a label's value or a provider's text (each
// value is a series, and text may be a secret). One span attribute is not bounded: with option
// `decisions`, the provision span's `decision_id`, so that a trace leads to its record. Every call into the caller's meter, tracer, spans and
// instruments is made inside a try, its throw dropped: telemetry never changes an outcome.

const { binding } = require('./binding.js');
const { readOr } = require('./guard.js');
const { callNative, codeOf } = require('./errors.js');
const { readFacts } = require('./facts.js');
const { viewOf } = require('./registry.js');
const { INSTRUMENTS, SCHEMA, api, fromProvider, instrumentsOn, quietly, traceparentOf } = require('./otel.js');

const SUCCESS = binding.ProvisionOutcome.Success;
const TERMINAL = binding.ProvisionOutcome.Terminal;
const { TRACEPARENT_LABEL } = binding;

/**
 * The `telemetry` option, read once: null (off), or the router's Telemetry on the caller's
 * `meterProvider` and `tracerProvider` (each omitted: the global one). `clock`: the router's
 * clock (null: a monotonic clock measures durations).
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

/** One provision's telemetry: a plain record (one shape), made only when telemetry is on. */
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
   * Observes the gauge `key` for the router `ctx` at each collection: `read(ctx)` answers
   * `[value, attributes]` pairs (or null). The meter holds the router only weakly (a dropped
   * router's callback removes itself); a throw drops that collection's values, nothing else.
   */
  observe(key, ctx, read) {
    const gauge = this.#i[key];
    const router = new WeakRef(ctx);
    const callback = (result) => {
      const c = router.deref();
      if (c === undefined) return quietly(() => gauge.removeCallback(callback));
      quietly(() => {
        for (const [value, attributes] of read(c) ?? []) quietly(() => result.observe(value, attributes));
      });
    };
    quietly(() => gauge.addCallback(callback));
  }

  /** The circuit-state gauge of the router `ctx` (`routerCircuitStates`); none with `health: false`. */
  observeCircuits(ctx, now) {
    this.observe('queueDepth', ctx, (c) => {
      const s = binding.routerQueueStatus(c.native);
      return s.enabled ? [[s.depth, {}]] : null;
    });
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
    return this.#clock === null ? performance.now() : readOr(() => this.#clock(), NaN);
  }

  /** Records `value` (seconds) into the histogram `key`; a non-finite or negative one is dropped. */
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

  /** Runs `f` once, with `context` active if the context manager lets it; `f`'s own throw is its caller's. */
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

  /** Starts provision `run` (its span, a child of the caller's active context) and runs `start()` inside it. */
  begin(run, start) {
    const t = provisionRecord(this.now());
    run.tel = t;
    const parent = readOr(() => this.#api.context.active(), null);
    if (parent !== null) [t.span, t.context] = this.#child('sandbox_router.provision', parent, { detached: run.detached });
    if (this.#propagate && t.span !== null) t.traceparent = readOr(() => traceparentOf(this.#api, t.span), null);
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

  /** `measure(run)` inside a capacity-read span (ended by the machine's verdict, `decided`), timed. */
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
        case 'provision.validated':
          if (e.decisionId !== undefined && t.span !== null) quietly(() => t.span.setAttribute('decision_id', e.decisionId));
          break;
        case 'attempt.started':
          t.pool = e.providerId;
          if (t.context !== null) [t.attempt, t.attemptContext] = this.#child('sandbox_router.attempt', t.context, { pool: e.providerId, attempt: e.attempt });
          break;
        case 'attempt.succeeded':
          this.add('attempts', 1, { pool: e.providerId, result: 'success' });
          this.#end(t, 'attempt', { result: 'success' }, null);
          break;
        case 'attempt.failed': {
          const result = e.retryable ? 'retryable' : 'terminal';
          this.add('attempts', 1, { pool: e.providerId, result });
          this.#end(t, 'attempt', { result }, e.code);
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
          this.#end(t, 'read', { result: 'admitted' }, null);
          break;
        case 'capacity.skipped':
          this.add('capacitySkips', 1, { pool: e.providerId, reason: e.skipReason });
          if (e.paced) this.add('rateLimited', 1, { pool: e.providerId, reason: e.skipReason });
          this.#end(t, 'read', { result: 'skipped', reason: e.skipReason }, null);
          break;
        case 'queue.admitted':
        case 'queue.timeout':
          this.record('queueWait', e.waitedMs / 1000, { result: e.type === 'queue.admitted' ? 'admitted' : 'timeout' });
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
      }
    }
  }

  #event(t, name, attributes) {
    if (t.span !== null) quietly(() => t.span.addEvent(name, attributes));
  }

  /** Ends `t`'s `attempt` or `read` span (see #close) and drops its context. */
  #end(t, which, attributes, code) {
    const span = t[which];
    t[which] = t[`${which}Context`] = null;
    this.#close(span, attributes, code);
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
    // `launch_type` (docs/telemetry.md): `warm` when a warm member served it, a claim hit (its event is the router's, `warm.claimed`).
    const warm = run.member !== null;
    if (warm) this.add('warmClaims', 1, { pool: run.def.id, result: 'hit' });
    const attributes = { pool: run.def.id, outcome: SUCCESS, launch_type: warm ? 'warm' : 'cold' };
    this.record('provisionDuration', this.since(t.start), attributes);
    this.#close(t.span, attributes, null);
  }

  /** Provision `run` failed: its outcome is the machine's own ending, else the core's rule for the code. */
  failed(run, error) {
    const t = run.tel;
    if (t.ended) return;
    t.ended = true;
    const code = codeOf(error);
    const outcome = t.outcome ?? readOr(() => binding.provisionOutcome(code, run.pools !== null), TERMINAL);
    const attributes = { outcome, launch_type: 'cold' };
    if (t.pool !== null) attributes.pool = t.pool;
    this.record('provisionDuration', this.since(t.start), attributes);
    this.#end(t, 'attempt', { result: 'terminal' }, code);
    this.#end(t, 'read', { result: 'abandoned' }, null);
    this.#close(t.span, attributes, code);
  }

  /** Operation `name` by id: `f()` (a promise) in its span, counted and timed by outcome (`success` or the code). */
  operation(name, f) {
    const start = this.now();
    const child = () => this.#child(`sandbox_router.${name}`, this.#api.context.active(), { operation: name });
    const [span, context] = readOr(child, [null, null]);
    const done = (error) => this.#operated(name, span, start, error);
    const failed = (error) => {
      done(error);
      throw error;
    };
    let p;
    try {
      p = this.#within(context, f);
    } catch (error) {
      failed(error);
    }
    return p.then((value) => (done(null), value), failed);
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

module.exports = { telemetryOf, Telemetry, INSTRUMENTS, SCHEMA };
