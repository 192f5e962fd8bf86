// Telemetry (option `telemetry`, lib/telemetry.js and lib/otel.js): the real OpenTelemetry SDKs (2.x line,
// api 1.9) with in-memory exporters, and @opentelemetry/exporter-prometheus serving /metrics
// on 127.0.0.1, scraped over HTTP and parsed. Pairs are named must-fire / must-not-fire.
import test from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { context, trace, metrics } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, InMemoryMetricExporter, PeriodicExportingMetricReader, AggregationTemporality } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import {
  InMemoryProviderRegistry,
  SandboxRouter,
  SANDBOX_ID_LABEL,
  SANDBOX_FLEET_LABEL,
  createSandboxRouter,
  SandboxRouterConfigurationError,
  ProviderProvisioningError,
} from '../index.mjs';
import { CANARY, definition, fakeRuntime, recorder } from './fixtures.mjs';
import telemetryModule from '../lib/telemetry.js';
import bindingModule from '../lib/binding.js';
import optionsModule from '../lib/options.js';

const { INSTRUMENTS, SCHEMA } = telemetryModule;
const { binding } = bindingModule;
const { jobsInFlight } = optionsModule;
const ROOT = fileURLToPath(new URL('..', import.meta.url));

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

/** A label value that must never reach a metric or a span. */
const LABEL_CANARY = 'label-value-canary-91bd';
const slots = (used, limit) => ({ status: 'known', resources: [{ resource: 'sandboxes', used, limit, unit: 'sandboxes', headroom: limit - used, required: 1 }] });
const OLD = new Date(Date.now() - 3_600_000).toISOString();
const retryableFor = (ids) => (_error, def) => (ids.includes(def.id) ? { code: 'PROVIDER_RATE_LIMITED', retryable: true } : null);

/** The SDKs wired to in-memory exporters. `metrics()` collects: [{ name, attributes, value }]. */
function harness() {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
  return {
    meterProvider,
    tracerProvider,
    telemetry: { meterProvider, tracerProvider },
    async metrics() {
      await reader.forceFlush();
      const last = metricExporter.getMetrics().at(-1);
      const out = [];
      for (const scope of last?.scopeMetrics ?? []) {
        for (const m of scope.metrics) {
          for (const p of m.dataPoints) out.push({ name: m.descriptor.name, unit: m.descriptor.unit, attributes: p.attributes, value: p.value });
        }
      }
      return out;
    },
    spans: () => spanExporter.getFinishedSpans(),
    async close() {
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
    },
  };
}

/** A port-shaped runtime whose handles carry labels and createdAt; `fail` makes each launch throw provider text. */
function pool(behaviour = {}) {
  let n = 0;
  const live = new Map();
  const seen = [];
  const rt = {
    live,
    seen,
    seed(labels, createdAt = OLD) {
      const id = `remote-${behaviour.name ?? 'x'}-${++n}`;
      live.set(id, { id, labels: { ...labels }, createdAt });
      return id;
    },
    async launch(options) {
      let activeSpan = null;
      try {
        activeSpan = trace.getActiveSpan()?.spanContext().spanId ?? null;
      } catch {
        // a broken tracer's span (the throwing-telemetry test): not this fixture's business
      }
      seen.push({ labels: options.labels, activeSpan });
      if (behaviour.onLaunch) behaviour.onLaunch();
      if (behaviour.launch) return behaviour.launch(options);
      if (behaviour.fail) throw Object.assign(new Error(`upstream 503 ${CANARY}`), { status: 503, body: CANARY });
      return { id: rt.seed(options.labels, new Date().toISOString()) };
    },
    async runScript() {
      return { output: 'ok', exitCode: 0 };
    },
    async findAllByLabels(labels) {
      return [...live.values()].filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v)).map((s) => ({ ...s, labels: { ...s.labels } }));
    },
    async getById(id) {
      return live.has(id) ? { id } : null;
    },
    async destroy(handle) {
      live.delete(handle.id);
    },
  };
  return rt;
}

/**
 * The scripted run of the Prometheus test: capacity routing over `full` (never room), `flaky`
 * (room, but each launch fails, classified pre-allocation) and `good`. Each launch takes 300
 * ms on the injected clock. Two provisions fall back from flaky to good (whose circuit then
 * opens: 2 consecutive retryable failures), one goes to good directly, then good is full:
 * exhausted. Each sandbox runs a script and is destroyed; one unknown id is looked up; an
 * orphan is seeded and reconcile finds it.
 */
async function scriptedRun(telemetry) {
  let now = Date.parse('2026-01-01T12:00:00Z');
  let goodFull = false;
  const tick = () => (now += 300);
  const full = pool({ name: 'full' });
  const flaky = pool({ name: 'flaky', fail: true, onLaunch: tick });
  const good = pool({ name: 'good', onLaunch: tick });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([
      definition('full', { runtime: full, capacity: { getCapacity: async () => slots(5, 5) } }),
      definition('flaky', { runtime: flaky, capacity: { getCapacity: async () => slots(0, 5) } }),
      definition('good', { runtime: good, capacity: { getCapacity: async () => (goodFull ? slots(5, 5) : slots(0, 5)) } }),
    ]),
    capacity: { providerOrder: ['full', 'flaky', 'good'] },
    classifyProviderFailure: retryableFor(['flaky']),
    health: { retryableFailureThreshold: 2 },
    clock: () => now,
    telemetry,
  });
  const request = { launch: { labels: { team: LABEL_CANARY } } };
  const results = [];
  for (let i = 0; i < 3; i++) {
    const s = await router.provision(request);
    results.push(s.providerId);
    await router.runScript(s.id, { command: `echo ${CANARY}` });
    await router.destroy(s.id);
  }
  goodFull = true;
  const exhausted = await router.provision(request).catch((e) => e);
  results.push(exhausted.code);
  const missing = await router.getSandbox(`sbx_${'0'.repeat(31)}1`).catch((e) => e);
  results.push(missing.code);
  good.seed({ [SANDBOX_ID_LABEL]: `sbx_${'0'.repeat(31)}2`, [SANDBOX_FLEET_LABEL]: 'default' });
  const report = await router.reconcile();
  results.push(report.totals.orphan);
  // A budget rule with no room left: its candidate is refused (sandbox_router_budget_refusals).
  const budgeted = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('good', { runtime: good })]),
    budgets: [{ id: 'spend', key: { label: 'team' }, limit: { launches: 0 }, window: { slidingMs: 60_000 } }],
    clock: () => now,
    telemetry,
  });
  results.push((await budgeted.provision(request).catch((e) => e)).code);
  return { router, results };
}

/** A free port on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function get(url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'], body }));
      })
      .on('error', reject);
  });
}

/** Parses the Prometheus text exposition: { help, unit, type } by name, and every sample. */
function parseExposition(text) {
  const meta = new Map();
  const samples = [];
  const at = (name) => meta.get(name) ?? meta.set(name, {}).get(name);
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const m = /^# (HELP|UNIT|TYPE) (\S+) (.*)$/.exec(line);
    if (m) {
      at(m[2])[m[1].toLowerCase()] = m[3];
      continue;
    }
    assert.ok(!line.startsWith('#'), `an unknown comment line: ${line}`);
    const s = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(s, `a sample line: ${line}`);
    const labels = {};
    for (const l of (s[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    samples.push({ name: s[1], labels, value: s[3] === '+Inf' ? Infinity : Number(s[3]) });
  }
  return { meta, samples };
}

/** The samples named `name` whose own labels (the scope labels aside) are exactly `labels`. */
function value(samples, name, labels) {
  const own = (l) => Object.fromEntries(Object.entries(l).filter(([k]) => !k.startsWith('otel_scope_')));
  const found = samples.filter((s) => s.name === name && JSON.stringify(Object.entries(own(s.labels)).sort()) === JSON.stringify(Object.entries(labels).sort()));
  assert.equal(found.length, 1, `one sample ${name} ${JSON.stringify(labels)} (found ${found.length})`);
  return found[0].value;
}

const PROM_NAME = (i) => (i.kind === 'counter' ? `${i.name}_total` : i.name);
// how @opentelemetry/exporter-prometheus types each kind (an up-down counter is a non-monotonic sum: a gauge)
const PROM_TYPE = { counter: 'counter', histogram: 'histogram', gauge: 'gauge', upDownCounter: 'gauge' };

test('prometheus: a scripted run (successes, a classified fallback, exhaustion, a capacity skip, a circuit opening) scraped over HTTP: names, units, types, label sets, values', async () => {
  const port = await freePort();
  let started;
  const ready = new Promise((resolve) => (started = resolve));
  const exporter = new PrometheusExporter({ host: '127.0.0.1', port }, (error) => started(error));
  assert.equal(await ready, undefined, 'the exporter serves');
  const meterProvider = new MeterProvider({ readers: [exporter] });
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  try {
    const { results } = await scriptedRun({ meterProvider, tracerProvider });
    assert.deepEqual(results, ['good', 'good', 'good', 'PROVIDER_CAPACITY_EXHAUSTED', 'SANDBOX_NOT_FOUND', 1, 'BUDGET_EXHAUSTED']);

    const res = await get(`http://127.0.0.1:${port}/metrics`);
    assert.equal(res.status, 200);
    const { meta, samples } = parseExposition(res.body);

    // names, types, units and help of every instrument (warm pools' are recorded only by a
    // router with a started warm pool: __test__/warm.test.mjs reads them; the queue's and
    // pacing's only by a router with a queue: the test below)
    for (const i of INSTRUMENTS.filter((x) => !/^(warm|queue|rateLimited)/.test(x.key))) {
      const m = meta.get(PROM_NAME(i));
      assert.ok(m, `${PROM_NAME(i)} is exported`);
      assert.equal(m.type, PROM_TYPE[i.kind], `${PROM_NAME(i)} type`);
      assert.equal(m.unit, i.unit, `${PROM_NAME(i)} unit`);
      assert.equal(m.help, i.description);
      if (i.unit === 's') assert.match(PROM_NAME(i), /_seconds$/);
    }
    const ours = samples.filter((s) => s.name.startsWith('sandbox_router_'));
    for (const s of ours) {
      assert.equal(s.labels.otel_scope_name, '@agent-relay/sandbox-router');
      // every label is one the instrument declares (plus the scope's and a bucket's `le`)
      const base = INSTRUMENTS.find((i) => s.name === PROM_NAME(i) || s.name.replace(/_(bucket|sum|count)$/, '') === i.name);
      assert.ok(base, `${s.name} belongs to an instrument`);
      for (const k of Object.keys(s.labels)) assert.ok(base.attributes.includes(k) || k.startsWith('otel_scope_') || k === 'le', `${s.name}: label ${k}`);
    }

    // provisions: three successes on good (0.6 + 0.6 + 0.3 s on the injected clock)
    const success = { pool: 'good', outcome: 'success', launch_type: 'cold' };
    assert.equal(value(samples, 'sandbox_router_provision_duration_seconds_count', success), 3);
    assert.ok(Math.abs(value(samples, 'sandbox_router_provision_duration_seconds_sum', success) - 1.5) < 1e-9);
    // two exhausted: no capacity, and no budget
    assert.equal(value(samples, 'sandbox_router_provision_duration_seconds_count', { outcome: 'exhausted', launch_type: 'cold' }), 2);
    assert.equal(value(samples, 'sandbox_router_budget_refusals_total', { pool: 'good', rule: 'spend', dimension: 'launches' }), 1);
    // buckets in seconds, from the core's boundaries: 0.3 s falls in le=0.5, the two 0.6 s in le=0.75
    const les = samples.filter((s) => s.name === 'sandbox_router_provision_duration_seconds_bucket' && s.labels.outcome === 'success').map((s) => s.labels.le);
    assert.deepEqual(les, [...SCHEMA.durationBuckets.map(String), '+Inf']);
    assert.equal(value(samples, 'sandbox_router_provision_duration_seconds_bucket', { ...success, le: '0.25' }), 0);
    assert.equal(value(samples, 'sandbox_router_provision_duration_seconds_bucket', { ...success, le: '0.5' }), 1);
    assert.equal(value(samples, 'sandbox_router_provision_duration_seconds_bucket', { ...success, le: '0.75' }), 3);

    // attempts, the classified fallback, capacity skips and reads
    assert.equal(value(samples, 'sandbox_router_attempts_total', { pool: 'flaky', result: 'retryable' }), 2);
    assert.equal(value(samples, 'sandbox_router_attempts_total', { pool: 'good', result: 'success' }), 3);
    assert.equal(value(samples, 'sandbox_router_fallbacks_total', { pool: 'flaky' }), 2);
    assert.equal(value(samples, 'sandbox_router_capacity_skips_total', { pool: 'full', reason: 'EXHAUSTED_SANDBOXES' }), 4);
    assert.equal(value(samples, 'sandbox_router_capacity_skips_total', { pool: 'good', reason: 'EXHAUSTED_SANDBOXES' }), 1);
    assert.equal(value(samples, 'sandbox_router_capacity_read_duration_seconds_count', { pool: 'full' }), 4);
    assert.equal(value(samples, 'sandbox_router_capacity_read_duration_seconds_count', { pool: 'flaky' }), 2);
    assert.equal(value(samples, 'sandbox_router_capacity_read_duration_seconds_count', { pool: 'good' }), 4);
    const readLes = samples.filter((s) => s.name === 'sandbox_router_capacity_read_duration_seconds_bucket' && s.labels.pool === 'full').map((s) => s.labels.le);
    assert.deepEqual(readLes, [...SCHEMA.readBuckets.map(String), '+Inf']);

    // the circuit opening: flaky is open (2), the others closed (0)
    assert.equal(value(samples, 'sandbox_router_circuit_state', { pool: 'flaky' }), 2);
    assert.equal(value(samples, 'sandbox_router_circuit_state', { pool: 'full' }), 0);
    assert.equal(value(samples, 'sandbox_router_circuit_state', { pool: 'good' }), 0);

    // operations by id and reconcile
    assert.equal(value(samples, 'sandbox_router_operations_total', { operation: 'runScript', outcome: 'success' }), 3);
    assert.equal(value(samples, 'sandbox_router_operations_total', { operation: 'destroy', outcome: 'success' }), 3);
    assert.equal(value(samples, 'sandbox_router_operations_total', { operation: 'getSandbox', outcome: 'SANDBOX_NOT_FOUND' }), 1);
    assert.equal(value(samples, 'sandbox_router_operations_duration_seconds_count', { operation: 'runScript', outcome: 'success' }), 3);
    assert.equal(value(samples, 'sandbox_router_reconcile_found_total', { class: 'orphan' }), 1);
    assert.equal(value(samples, 'sandbox_router_reconcile_found_total', { class: 'stale-mapping' }), 0);
    assert.equal(value(samples, 'sandbox_router_reconcile_found_total', { class: 'stale-intent' }), 0);

    // canary must-not-fire: no provider text, label value or sandbox id in the scrape
    assert.ok(!res.body.includes(CANARY), 'no provider text or command in /metrics');
    assert.ok(!res.body.includes(LABEL_CANARY), 'no label value in /metrics');
    assert.ok(!/sbx_[0-9a-f]{32}/.test(res.body), 'no sandbox id in /metrics');
    assert.ok(!res.body.includes('remote-'), 'no provider sandbox id in /metrics');
  } finally {
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
  }
});

/** Everything a span carries, as text. */
function spanText(s) {
  return JSON.stringify({ name: s.name, attributes: s.attributes, events: s.events.map((e) => ({ name: e.name, attributes: e.attributes })), status: s.status, links: s.links });
}

test('traces: the provision span is a child of the caller\'s span, with attempt and capacity-read children; the adapter and the reader run inside them', async () => {
  const h = harness();
  const a = pool({ name: 'a', fail: true });
  const b = pool({ name: 'b' });
  const readerSpans = [];
  const reader = (m) => ({ getCapacity: async () => (readerSpans.push(trace.getActiveSpan()?.spanContext().spanId), m) });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: a, capacity: reader(slots(0, 5)) }), definition('b', { runtime: b, capacity: reader(slots(0, 5)) })]),
    capacity: { providerOrder: ['a', 'b'] },
    classifyProviderFailure: retryableFor(['a']),
    telemetry: h.telemetry,
  });
  const tracer = h.tracerProvider.getTracer('caller');
  const sandbox = await tracer.startActiveSpan('GET /sandbox', async (span) => {
    try {
      return await router.provision({});
    } finally {
      span.end();
    }
  });
  assert.equal(sandbox.providerId, 'b');
  const spans = h.spans();
  const byName = (n) => spans.filter((s) => s.name === n);
  const [caller] = byName('GET /sandbox');
  const [provision] = byName('sandbox_router.provision');
  const parentOf = (s) => s.parentSpanContext?.spanId;
  assert.equal(parentOf(provision), caller.spanContext().spanId, 'the current context is the parent');
  assert.equal(provision.spanContext().traceId, caller.spanContext().traceId);
  assert.deepEqual(provision.attributes, { detached: false, pool: 'b', outcome: 'success', launch_type: 'cold' });
  assert.equal(provision.status.code, 0);
  assert.deepEqual(
    provision.events.map((e) => [e.name, e.attributes]),
    [['fallback.advanced', { pool: 'a', to_pool: 'b' }]],
  );

  const attempts = byName('sandbox_router.attempt');
  assert.deepEqual(
    attempts.map((s) => [s.attributes.pool, s.attributes.attempt, s.attributes.result, s.attributes.code ?? null, s.status.code, s.status.message ?? null]),
    [
      ['a', 1, 'retryable', 'PROVIDER_RATE_LIMITED', 2, 'PROVIDER_RATE_LIMITED'],
      ['b', 2, 'success', null, 0, null],
    ],
  );
  const reads = byName('sandbox_router.capacity_read');
  assert.deepEqual(
    reads.map((s) => [s.attributes.pool, s.attributes.result]),
    [
      ['a', 'admitted'],
      ['b', 'admitted'],
    ],
  );
  for (const s of [...attempts, ...reads]) assert.equal(parentOf(s), provision.spanContext().spanId, `${s.name} is the provision's child`);
  // the adapter's launch runs inside its attempt span, the reader inside its read span
  assert.deepEqual([a.seen[0].activeSpan, b.seen[0].activeSpan], attempts.map((s) => s.spanContext().spanId));
  assert.deepEqual(readerSpans, reads.map((s) => s.spanContext().spanId));
  for (const s of spans) assert.equal(s.kind, 0, `${s.name}: an internal span`);
  await h.close();
});

test('traces: errors set the span status with the router\'s code (must-fire), never the provider\'s message (must-not-fire)', async () => {
  const h = harness();
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: pool({ name: 'a', fail: true }) })]),
    classifyProviderFailure: () => ({ code: 'PROVIDER_QUOTA', retryable: false }),
    telemetry: h.telemetry,
  });
  const error = await router.provision({ launch: { labels: { team: LABEL_CANARY } } }).catch((e) => e);
  assert.ok(error instanceof ProviderProvisioningError);
  const [provision] = h.spans().filter((s) => s.name === 'sandbox_router.provision');
  assert.deepEqual([provision.status.code, provision.status.message], [2, 'PROVIDER_QUOTA']);
  assert.equal(provision.attributes.code, 'PROVIDER_QUOTA');
  assert.equal(provision.attributes['error.type'], 'PROVIDER_QUOTA');
  assert.equal(provision.attributes.outcome, 'terminal');
  assert.equal(provision.attributes.pool, 'a');
  for (const s of h.spans()) {
    const text = spanText(s);
    assert.ok(!text.includes(CANARY) && !text.includes('upstream 503'), `${s.name}: no provider text`);
    assert.ok(!text.includes(LABEL_CANARY), `${s.name}: no label value`);
    assert.ok(!/sbx_[0-9a-f]{32}/.test(text), `${s.name}: no sandbox id`);
  }
  await h.close();
});

test('canary must-not-fire: after the scripted run no metric attribute, span, event or status carries provider text, a label value or a sandbox id', async () => {
  const h = harness();
  await scriptedRun(h.telemetry);
  const text = JSON.stringify(await h.metrics()) + h.spans().map(spanText).join('\n');
  assert.ok(h.spans().length > 10 && text.includes('sandbox_router_attempts'), 'the run was recorded');
  assert.ok(!text.includes(CANARY));
  assert.ok(!text.includes(LABEL_CANARY));
  assert.ok(!/sbx_[0-9a-f]{32}/.test(text));
  assert.ok(!text.includes('remote-'));
  await h.close();
});

test('outcomes must-fire: timed_out, terminal, not_eligible and refused are each recorded once, with the code on the span', async () => {
  const h = harness();
  const hang = pool({ name: 'hang', launch: () => new Promise(() => {}) });
  const bad = pool({ name: 'bad', fail: true });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('hang', { runtime: hang, capabilities: { supported: ['pty'] } }), definition('bad', { runtime: bad })]),
    telemetry: h.telemetry,
  });
  const codes = [];
  const run = async (request) => codes.push((await router.provision(request).catch((e) => e)).code);
  await run({ requires: { requiredCapabilities: ['pty'] }, routing: { acquisitionTimeoutMs: 20 } });
  await run({ providerId: 'bad' });
  await run({ requires: { requiredCapabilities: ['publicPorts'] } });
  await run({ routing: { strategy: 'nonsense' } });
  assert.deepEqual(codes.slice(1, 2), ['PROVIDER_LAUNCH_OUTCOME_UNKNOWN']);
  const points = (await h.metrics()).filter((p) => p.name === 'sandbox_router_provision_duration_seconds');
  const outcomes = points.map((p) => [p.attributes.outcome, p.attributes.pool ?? null, p.value.count]);
  const provisions = h.spans().filter((s) => s.name === 'sandbox_router.provision');
  assert.deepEqual(
    provisions.map((s) => [s.attributes.outcome, s.status.message]),
    codes.map((c, i) => [['timed_out', 'terminal', 'not_eligible', 'refused'][i], c]),
  );
  assert.deepEqual(outcomes, [
    ['timed_out', 'hang', 1],
    ['terminal', 'bad', 1],
    ['not_eligible', null, 1],
    ['refused', null, 1],
  ]);
  await h.close();
});

test('telemetry must-fire: on, a provision records metrics and spans, its machine records events, and no machine is left behind', async () => {
  const h = harness();
  const before = jobsInFlight();
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a')]), telemetry: h.telemetry });
  const s = await router.provision({});
  await router.destroy(s.id);
  assert.equal(jobsInFlight(), before);
  const names = new Set((await h.metrics()).map((p) => p.name));
  for (const n of ['sandbox_router_provision_duration_seconds', 'sandbox_router_attempts', 'sandbox_router_operations', 'sandbox_router_circuit_state']) assert.ok(names.has(n), n);
  assert.deepEqual(
    h.spans().map((x) => x.name),
    ['sandbox_router.attempt', 'sandbox_router.provision', 'sandbox_router.destroy'],
  );
  await h.close();
});

test('telemetry must-not-fire: off (the default, or false), the providers are never asked for a meter or tracer and nothing is recorded', async () => {
  const asked = [];
  const spy = (h) => ({
    meterProvider: { getMeter: (...a) => (asked.push('meter'), h.meterProvider.getMeter(...a)) },
    tracerProvider: { getTracer: (...a) => (asked.push('tracer'), h.tracerProvider.getTracer(...a)) },
  });
  const h = harness();
  void spy(h); // built, never passed: telemetry is off
  for (const telemetry of [undefined, false]) {
    const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a')]), ...(telemetry === undefined ? {} : { telemetry }) });
    const s = await router.provision({});
    await router.destroy(s.id);
  }
  assert.deepEqual(asked, []);
  assert.deepEqual(await h.metrics(), []);
  assert.deepEqual(h.spans(), []);
  // and the pair's other half: the same spy, passed, is asked once each
  new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a')]), telemetry: spy(h) });
  assert.deepEqual(asked, ['meter', 'tracer']);
  await h.close();
});

test('telemetry: true must-fire: uses the global meter and tracer providers of @opentelemetry/api (and createSandboxRouter takes the option)', async () => {
  const h = harness();
  assert.ok(metrics.setGlobalMeterProvider(h.meterProvider));
  assert.ok(trace.setGlobalTracerProvider(h.tracerProvider));
  try {
    const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a')]), telemetry: true });
    await router.provision({});
    const factory = createSandboxRouter({ providers: { local: {} }, telemetry: true });
    const s = await factory.provision({});
    await factory.destroy(s.id);
    const pools = (await h.metrics()).filter((p) => p.name === 'sandbox_router_attempts').map((p) => p.attributes.pool);
    assert.deepEqual(pools.sort(), ['a', 'local']);
    assert.equal(h.spans().filter((x) => x.name === 'sandbox_router.provision').length, 2);
  } finally {
    metrics.disable();
    trace.disable();
    await h.close();
  }
});

test('propagateToLabels must-fire: the launch gets the provision span\'s traceparent; must-not-fire: without it, none; never in the returned labels or the record', async () => {
  const h = harness();
  const a = pool({ name: 'a' });
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: a })]), telemetry: { ...h.telemetry, propagateToLabels: true } });
  const s = await router.provision({ launch: { labels: { team: 'x' } } });
  const [provision] = h.spans().filter((x) => x.name === 'sandbox_router.provision');
  const { traceId, spanId } = provision.spanContext();
  assert.equal(a.seen[0].labels.traceparent, `00-${traceId}-${spanId}-01`);
  assert.equal(s.labels.traceparent, undefined);
  assert.equal((await router.getSandbox(s.id)).labels.traceparent, undefined);

  const b = pool({ name: 'b' });
  const plain = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('b', { runtime: b })]), telemetry: h.telemetry });
  await plain.provision({});
  assert.equal(b.seen[0].labels.traceparent, undefined);
  // a no-op tracer (the global one, nothing registered) has no valid context: no label
  const c = pool({ name: 'c' });
  const noop = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('c', { runtime: c })]), telemetry: { meterProvider: h.meterProvider, propagateToLabels: true } });
  await noop.provision({});
  assert.equal(c.seen[0].labels.traceparent, undefined);
  await h.close();
});

/** A meter provider, tracer provider and exporters whose every method throws provider-like text. */
function throwingTelemetry() {
  const boom = () => {
    throw new Error(`meter down ${CANARY}`);
  };
  const instrument = { add: boom, record: boom, addCallback: boom, removeCallback: boom };
  const meter = { createHistogram: () => instrument, createCounter: () => instrument, createObservableGauge: () => instrument };
  const span = { spanContext: boom, setAttribute: boom, setAttributes: boom, setStatus: boom, addEvent: boom, end: boom, isRecording: boom };
  let n = 0;
  const tracer = { startSpan: () => (++n % 2 === 0 ? boom() : span) };
  return { meterProvider: { getMeter: () => meter }, tracerProvider: { getTracer: () => tracer }, propagateToLabels: true };
}

/** A run with a success, a fallback and a terminal failure: results, error codes and the observer's event types. */
async function outcomeRun(telemetry) {
  const rec = recorder();
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: pool({ name: 'a', fail: true }) }), definition('b', { runtime: pool({ name: 'b' }) })]),
    classifyProviderFailure: retryableFor(['a']),
    observer: rec.observer,
    ...(telemetry ? { telemetry } : {}),
  });
  const out = [];
  const s = await router.provision({ routing: { strategy: 'cost' } });
  out.push(s.providerId, (await router.runScript(s.id, { command: 'true' })).exitCode);
  await router.destroy(s.id);
  out.push((await router.provision({ providerId: 'a' }).catch((e) => e)).code);
  out.push((await router.runScript(s.id, { command: 'true' }).catch((e) => e)).code);
  return { out, events: rec.types(), detail: rec.events.map(({ at, sandboxId, ...rest }) => rest) };
}

test('a throwing meter, instrument, tracer, span or exporter must-not change an outcome: the same results, errors and observer events as without telemetry', async () => {
  const off = await outcomeRun(null);
  const broken = await outcomeRun(throwingTelemetry());
  assert.deepEqual(broken, off);
  // exporters that throw: the real SDKs, each exporter failing on every export
  const failing = { export: (_items, done) => done({ code: 1, error: new Error(CANARY) }), shutdown: async () => {}, forceFlush: async () => {} };
  const throwing = { export: () => { throw new Error(CANARY); }, shutdown: async () => {}, forceFlush: async () => {} };
  const reader = new PeriodicExportingMetricReader({ exporter: failing, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(throwing)] });
  const exported = await outcomeRun({ meterProvider, tracerProvider });
  assert.deepEqual(exported, off);
  await reader.forceFlush().catch(() => {});
  await meterProvider.shutdown().catch(() => {});
  await tracerProvider.shutdown().catch(() => {});
});

test('observer must-fire beside telemetry: both on, the observer sees exactly the events it sees alone', async () => {
  const h = harness();
  const alone = await outcomeRun(null);
  const both = await outcomeRun(h.telemetry);
  assert.deepEqual(both, alone);
  assert.ok((await h.metrics()).some((p) => p.name === 'sandbox_router_fallbacks'));
  await h.close();
});

test('operations by id: one span and one count per call, by outcome (success, or the router\'s code); the caller\'s active span is the parent (must-fire), none: a root (must-not-fire)', async () => {
  const h = harness();
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a', { runtime: fakeRuntime() })]), telemetry: h.telemetry });
  const s = await router.provision({});
  await router.runScript(s.id, { command: 'true' });
  await router.uploadBundle(s.id, { files: [{ source: 'x', destination: '/tmp/x' }] });
  await router.getSandbox(s.id);
  await router.stop(s.id).catch((e) => e); // the fake runtime has no stop: PROVIDER_RUNTIME_ERROR
  await router.runScript('not-an-id', { command: 'true' }).catch((e) => e);
  await router.runScript(s.id, {}).catch((e) => e); // invalid options: a synchronous throw, rejected
  await router.destroy(s.id);
  const ops = (await h.metrics()).filter((p) => p.name === 'sandbox_router_operations').map((p) => `${p.attributes.operation} ${p.attributes.outcome} ${p.value}`);
  assert.deepEqual(ops.sort(), ['destroy success 1', 'getSandbox success 1', 'runScript INVALID_REQUEST 1', 'runScript INVALID_SANDBOX_ID 1', 'runScript success 1', 'stop PROVIDER_RUNTIME_ERROR 1', 'uploadBundle success 1'].sort());
  const names = h.spans().map((x) => `${x.name} ${x.status.message ?? 'ok'}`).filter((n) => !n.startsWith('sandbox_router.provision') && !n.startsWith('sandbox_router.attempt'));
  assert.deepEqual(names.sort(), ['sandbox_router.destroy ok', 'sandbox_router.getSandbox ok', 'sandbox_router.runScript INVALID_REQUEST', 'sandbox_router.runScript INVALID_SANDBOX_ID', 'sandbox_router.runScript ok', 'sandbox_router.stop PROVIDER_RUNTIME_ERROR', 'sandbox_router.uploadBundle ok'].sort());
  // an operation's span is a child of the caller's active span (must-fire); without one, a root (must-not-fire)
  const roots = h.spans().filter((x) => x.name === 'sandbox_router.runScript');
  assert.ok(roots.every((x) => x.parentSpanContext === undefined), 'no caller span: a root span');
  const t = await router.provision({});
  await h.tracerProvider.getTracer('caller').startActiveSpan('POST /run', async (span) => {
    await router.runScript(t.id, { command: 'true' });
    span.end();
  });
  const caller = h.spans().find((x) => x.name === 'POST /run');
  const op = h.spans().filter((x) => x.name === 'sandbox_router.runScript').at(-1);
  assert.equal(op.parentSpanContext?.spanId, caller.spanContext().spanId);
  assert.equal(op.spanContext().traceId, caller.spanContext().traceId);
  await h.close();
});

test('circuit gauge must-not-fire: with health off there is no value; must-fire: with health on, one per pool', async () => {
  const h = harness();
  new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('off')]), health: false, telemetry: h.telemetry });
  new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('on1'), definition('on2')]), telemetry: h.telemetry });
  const gauge = (await h.metrics()).filter((p) => p.name === 'sandbox_router_circuit_state').map((p) => [p.attributes.pool, p.value]);
  assert.deepEqual(gauge, [
    ['on1', 0],
    ['on2', 0],
  ]);
  await h.close();
});

test('option must-fire: a bad telemetry value is INVALID_CONFIGURATION naming its field; must-not-fire: true, false and objects with either provider', () => {
  const registry = new InMemoryProviderRegistry([definition('a')]);
  const h = harness();
  const bad = [
    ['yes', 'telemetry'],
    [[], 'telemetry'],
    [{ meterProvider: {} }, 'telemetry.meterProvider'],
    [{ tracerProvider: { getTracer: () => null } }, 'telemetry.tracerProvider'],
    [{ meterProvider: { getMeter: () => { throw new Error(CANARY); } } }, 'telemetry.meterProvider'],
    [{ meterProvider: h.meterProvider, propagateToLabels: 'yes' }, 'telemetry.propagateToLabels'],
    [{ meterProvider: h.meterProvider, exporter: {} }, 'telemetry.exporter'],
  ];
  for (const [telemetry, field] of bad) {
    assert.throws(
      () => new SandboxRouter({ registry, telemetry }),
      (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field === field && !e.message.includes(CANARY),
      field,
    );
  }
  for (const telemetry of [true, false, { meterProvider: h.meterProvider }, { tracerProvider: h.tracerProvider }, h.telemetry, {}]) {
    assert.ok(new SandboxRouter({ registry, telemetry }));
  }
  assert.throws(() => createSandboxRouter({ providers: { local: {} }, telemetry: 1 }), (e) => e.field === 'telemetry');
});

/** Runs `code` (an ES module) in a child Node, with `preload` required first; its stdout. */
function child(code, preload) {
  const args = [...(preload ? ['--require', preload] : []), '--input-type=module', '-e', code];
  const r = spawnSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
}

test('@opentelemetry/api must-not-fire: a router without telemetry never loads it; must-fire: telemetry loads it', () => {
  const probe = (telemetry) =>
    child(`
      import { createRequire } from 'node:module';
      import { SandboxRouter, InMemoryProviderRegistry } from './index.mjs';
      const require = createRequire(import.meta.url);
      const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([]), ${telemetry} });
      await router.getCapacity();
      console.log(Object.keys(require.cache).some((k) => k.includes('@opentelemetry')));
    `);
  assert.equal(probe(''), 'false');
  assert.equal(probe('telemetry: false'), 'false');
  assert.equal(probe('telemetry: true'), 'true');
});

test('missing package must-fire: telemetry (true, or an object) without @opentelemetry/api is PROVIDER_PACKAGE_MISSING naming it; must-not-fire: without telemetry the same process makes its router', () => {
  const hook = fileURLToPath(new URL('./fixtures/no-otel-api.cjs', import.meta.url));
  const out = child(
    `
      import { SandboxRouter, InMemoryProviderRegistry, ProviderPackageMissingError } from './index.mjs';
      const registry = new InMemoryProviderRegistry([]);
      new SandboxRouter({ registry, telemetry: false });
      const out = [];
      for (const telemetry of [true, { meterProvider: { getMeter: () => ({}) } }]) {
        try {
          new SandboxRouter({ registry, telemetry });
          out.push('no error');
        } catch (e) {
          out.push([e instanceof ProviderPackageMissingError, e.code, e.packageName, e.message]);
        }
      }
      console.log(JSON.stringify(out));
    `,
    hook,
  );
  const errors = JSON.parse(out);
  assert.equal(errors.length, 2);
  for (const [isClass, code, name, message] of errors) {
    assert.deepEqual([isClass, code, name], [true, 'PROVIDER_PACKAGE_MISSING', '@opentelemetry/api']);
    assert.match(message, /^@opentelemetry\/api is not installed; install it to use telemetry: npm install @opentelemetry\/api@">=1\.9\.0 <2"$/);
  }
});

test('circuit gauge: a router dropped by its owner is collected, and its gauge callback goes with it (the meter holds it weakly)', () => {
  const out = spawnSync(
    process.execPath,
    [
      '--expose-gc',
      '--input-type=module',
      '-e',
      `
        import { MeterProvider, InMemoryMetricExporter, PeriodicExportingMetricReader, AggregationTemporality } from '@opentelemetry/sdk-metrics';
        import { SandboxRouter, InMemoryProviderRegistry } from './index.mjs';
        // delta: each collection reports what its callbacks observed (cumulative keeps a
        // series that is no longer observed at its last value)
        const exporter = new InMemoryMetricExporter(AggregationTemporality.DELTA);
        const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3600000 });
        const meterProvider = new MeterProvider({ readers: [reader] });
        const runtime = { launch: async () => ({ id: 'x' }), destroy: async () => {} };
        const signals = { estimatedCost: 1, coldStartLatencyMs: 1, readyLatencyMs: 1, completionWithinBudgetRate: 1, available: true };
        let kept = new SandboxRouter({ registry: new InMemoryProviderRegistry([{ id: 'kept', runtime, capabilities: {}, signals }]), telemetry: { meterProvider } });
        (() => new SandboxRouter({ registry: new InMemoryProviderRegistry([{ id: 'dropped', runtime, capabilities: {}, signals }]), telemetry: { meterProvider } }))();
        const pools = async () => {
          await reader.forceFlush();
          const m = exporter.getMetrics().at(-1).scopeMetrics[0].metrics.find((x) => x.descriptor.name === 'sandbox_router_circuit_state');
          return m.dataPoints.map((p) => p.attributes.pool).sort().join(',');
        };
        const first = await pools();
        for (let i = 0; i < 5; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 10)); }
        exporter.reset();
        console.log(first, await pools(), kept !== null);
        await meterProvider.shutdown();
      `,
    ],
    { cwd: ROOT, encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(out.status, 0, out.stderr);
  assert.equal(out.stdout.trim(), 'dropped,kept kept true');
});

test('docs/telemetry.md lists every instrument (Prometheus name, type, unit, attributes), every provision outcome and every skip reason', () => {
  const doc = readFileSync(new URL('../docs/telemetry.md', import.meta.url), 'utf8');
  const rows = doc.split('\n').filter((l) => l.startsWith('| `sandbox_router_'));
  for (const i of INSTRUMENTS) {
    const row = rows.find((r) => r.startsWith(`| \`${PROM_NAME(i)}\``));
    assert.ok(row, `a row for ${PROM_NAME(i)}`);
    const cells = row.split('|').map((c) => c.trim());
    assert.equal(cells[2], PROM_TYPE[i.kind], `${i.name} type`);
    assert.equal(cells[3], `\`${i.unit}\``, `${i.name} unit`);
    assert.deepEqual([...cells[4].matchAll(/`([a-z_]+)`/g)].map((m) => m[1]), i.attributes, `${i.name} attributes`);
  }
  assert.equal(rows.length, INSTRUMENTS.length, 'no row for an instrument that does not exist');
  for (const o of SCHEMA.outcomes) assert.ok(doc.includes(`\`${o}\``), `outcome ${o}`);
  for (const r of SCHEMA.skipReasons) assert.ok(doc.includes(`\`${r}\``), `skip reason ${r}`);
});

test('budget refusals must-fire: a candidate a budget rule refuses is counted (pool, rule, dimension) and the provision is exhausted; must-not-fire: an admitted one counts nothing', async () => {
  const h = harness();
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { signals: { estimatedCost: 1 } })]),
    telemetry: h.telemetry,
    budgets: [{ id: 'spend', key: { label: 'tenant' }, limit: { cost: 1 }, window: { slidingMs: 60_000 } }],
  });
  const req = { launch: { labels: { tenant: LABEL_CANARY } } };
  await router.provision(req);
  let points = await h.metrics();
  assert.equal(points.filter((p) => p.name === 'sandbox_router_budget_refusals').length, 0);
  await assert.rejects(router.provision(req), { code: 'BUDGET_EXHAUSTED' });
  points = await h.metrics();
  const refusals = points.filter((p) => p.name === 'sandbox_router_budget_refusals');
  assert.deepEqual(refusals.map((p) => [p.attributes, p.value]), [[{ pool: 'a', rule: 'spend', dimension: 'cost' }, 1]]);
  const exhausted = points.find((p) => p.name === 'sandbox_router_provision_duration_seconds' && p.attributes.outcome === 'exhausted');
  assert.equal(exhausted?.value.count, 1);
  assert.ok(!JSON.stringify(points).includes(LABEL_CANARY), 'a label value is never an attribute');
  await h.close();
});

test('queue and pacing metrics must-fire: queue depth, the wait histogram by result and rate-limited skips by reason; must-not-fire: no depth without a queue', async () => {
  const h = harness();
  const defs = [definition('a', { rateLimit: { launchesPerSecond: 20 } })];
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs), queue: { maxWaitMs: 1_000 }, telemetry: h.telemetry });
  await router.provision({});
  const waiting = router.provision({});
  await new Promise((r) => setImmediate(r));
  const during = await h.metrics();
  assert.equal(during.find((p) => p.name === 'sandbox_router_queue_depth').value, 1);
  await waiting;
  const after = await h.metrics();
  assert.equal(after.find((p) => p.name === 'sandbox_router_queue_depth').value, 0);
  const wait = after.find((p) => p.name === 'sandbox_router_queue_wait_seconds' && p.attributes.result === 'admitted');
  assert.equal(wait.value.count, 1);
  assert.ok(wait.value.sum > 0.01 && wait.value.sum < 1, `${wait.value.sum}`);
  const limited = after.filter((p) => p.name === 'sandbox_router_rate_limited').map((p) => `${p.attributes.pool}:${p.attributes.reason}:${p.value}`);
  assert.deepEqual(limited, ['a:RATE_LIMITED:1']);
  await h.close();
  const off = harness();
  const plain = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('a')]), telemetry: off.telemetry });
  await plain.provision({});
  assert.equal((await off.metrics()).some((p) => p.name === 'sandbox_router_queue_depth'), false);
  await off.close();
});
