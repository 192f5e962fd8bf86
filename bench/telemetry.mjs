// Telemetry (`npm run bench`, section g; alone: `npm run bench -- --only=telemetry`).
//
// Provision with telemetry on, through the real OpenTelemetry SDKs (2.x) with in-memory
// exporters, vs off: the same provisions (6 pools, instant runtime, fresh request per call)
// through four routers, interleaved one provision at a time (rotating which goes first),
// each timed alone; the median per router. A second telemetry-off router is the control:
// its difference from the first is the noise floor (as in section e). The context manager
// is the AsyncLocalStorage one that the Node SDK registers, so `context.with` costs what it
// costs in a real deployment; spans go through a BatchSpanProcessor, as in production.
//
// What "off costs nothing" means is measured apart, load-independently: `npm run
// bench:instructions` on this tree and on the tree before telemetry (docs/performance.md).
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, InMemoryMetricExporter, PeriodicExportingMetricReader, AggregationTemporality } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

const median = (xs) => Float64Array.from(xs).sort()[Math.floor(xs.length / 2)];
const fmt = (ms) => (ms < 1 ? `${(ms * 1000).toFixed(2)} µs` : `${ms.toFixed(2)} ms`);

/**
 * @param {any} native the package
 * @param {{ definitions: any[], request: () => object, table: (h: string[], rows: string[][], align: string[]) => void }} bench
 */
export async function runTelemetryBench(native, { definitions, request, table }) {
  const { SandboxRouter, InMemoryProviderRegistry } = native;
  const manager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(manager);
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 1_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(spanExporter, { maxQueueSize: 65_536, scheduledDelayMillis: 200 })] });
  try {
    const registry = new InMemoryProviderRegistry(definitions);
    const KINDS = ['off', 'control', 'metrics', 'full'];
    const OPTIONS = {
      off: {},
      control: {},
      metrics: { telemetry: { meterProvider } },
      full: { telemetry: { meterProvider, tracerProvider } },
    };
    const make = (kind) => new SandboxRouter({ registry, ...OPTIONS[kind] });
    const routers = Object.fromEntries(KINDS.map((k) => [k, make(k)]));
    const N = 30_000;
    const times = Object.fromEntries(KINDS.map((k) => [k, new Float64Array(N)]));
    for (let i = 0; i < 2_000; i++) await routers[KINDS[i % KINDS.length]].provision(request());
    for (let i = 0; i < N; i++) {
      if (i % 10_000 === 0) {
        // Fresh routers now and then keep the default stores' memory bounded; the exported
        // spans and metrics are dropped too (the exporter's memory is not the router's).
        for (const kind of KINDS) routers[kind] = make(kind);
        spanExporter.reset();
        metricExporter.reset();
      }
      for (let j = 0; j < KINDS.length; j++) {
        const kind = KINDS[(i + j) % KINDS.length];
        const t0 = process.hrtime.bigint();
        await routers[kind].provision(request());
        times[kind][i] = Number(process.hrtime.bigint() - t0) / 1e6;
      }
    }
    const m = Object.fromEntries(KINDS.map((k) => [k, median(times[k])]));
    const added = (k) => `${fmt(m[k] - m.off)} (${((m[k] / m.off - 1) * 100).toFixed(0)} %)`;
    table(
      ['provision, 6 pools, fresh request per call', 'per provision (median)', 'provisions/s', 'added vs off'],
      [
        ['telemetry off (default)', fmt(m.off), Math.round(1000 / m.off).toLocaleString('en-US'), ''],
        ['control: a second telemetry-off router', fmt(m.control), Math.round(1000 / m.control).toLocaleString('en-US'), added('control')],
        ['metrics (MeterProvider, in-memory exporter)', fmt(m.metrics), Math.round(1000 / m.metrics).toLocaleString('en-US'), added('metrics')],
        ['metrics and traces (+ tracer, batched in-memory spans)', fmt(m.full), Math.round(1000 / m.full).toLocaleString('en-US'), added('full')],
      ],
      ['l'],
    );
    console.log(`\n(a sandbox launch takes 0.2-2 s: the added ${fmt(m.full - m.off)} is ${(((m.full - m.off) / 491) * 100).toFixed(4)} % of E2B's 491 ms median)`);
    return { off: m.off, control: m.control, metrics: m.metrics, full: m.full };
  } finally {
    await tracerProvider.shutdown();
    await meterProvider.shutdown();
    context.disable();
  }
}
