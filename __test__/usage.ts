// Compiled by `tsc --noEmit` in `npm test`: the upstream README's registry example, written
// as a user would write it, checks the public types against real use.
import {
  InMemoryProviderRegistry,
  SandboxRouter,
  asProviderId,
  routeProviders,
  NoEligibleProviderError,
  ProviderProvisioningError,
  type ProviderDefinition,
  type SandboxCapabilities,
  type SandboxRuntime,
  type SandboxMappingStore,
  type SandboxMapping,
  type RoutingEvent,
  type ProviderRuntimeError,
  type RoutingExplanation,
} from '../index.js';

declare const externallyConstructedRuntime: SandboxRuntime;
const externallyDeclaredCapabilities: SandboxCapabilities = {
  supported: ['pty', 'publicPorts'],
  image: { identity: 'agent-v4', binaries: ['node'] },
  timeout: { semantics: ['command-lifetime'], maxSandboxLifetimeMs: null },
  regions: ['eu-west'],
  resources: { cpu: 8, memoryMb: 16384 },
  isolation: 'microvm',
};

const records = new Map<string, SandboxMapping>();
const durableMappingStore: SandboxMappingStore = {
  put: async (r) => void records.set(r.id, r),
  get: async (id) => records.get(id) ?? null,
  delete: async (id) => records.delete(id),
};
const structuredEventSink = (event: RoutingEvent): void => {
  if (event.type === 'attempt.failed') console.log(event.providerId, event.code, event.retryable);
};
// On the registry path the classifier sees what the adapter threw (`unknown`): narrow it.
const isProvenPreAllocationCapacityFailure = (error: unknown, provider: ProviderDefinition): boolean =>
  provider.id === 'primary-eu' && typeof error === 'object' && error !== null && 'status' in error && error.status === 429;
// A 0.7-style classifier typed on ProviderRuntimeError still fits (the parameter is bivariant).
const legacyClassifier = (error: ProviderRuntimeError): { code: string; retryable: boolean } => ({
  code: error.status === 429 ? 'RATE_LIMITED' : 'OTHER',
  retryable: false,
});

const registry = new InMemoryProviderRegistry([
  {
    id: asProviderId('primary-eu'),
    runtime: externallyConstructedRuntime,
    capabilities: externallyDeclaredCapabilities,
    signals: {
      estimatedCost: 0.12,
      coldStartLatencyMs: 850,
      readyLatencyMs: 12_000,
      completionWithinBudgetRate: 0.999,
      available: true,
    },
  },
]);

const router = new SandboxRouter({
  registry,
  mappings: durableMappingStore,
  observer: structuredEventSink,
  classifyProviderFailure: (error, provider) => {
    if (isProvenPreAllocationCapacityFailure(error, provider)) {
      return { code: 'PROVIDER_CAPACITY_PRE_ALLOCATION', retryable: true };
    }
    return { code: 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN', retryable: false };
  },
  callbackTimeoutMs: 5_000,
  operationTimeoutMs: 120_000,
});
new SandboxRouter({ registry, classifyProviderFailure: legacyClassifier });

export async function example(): Promise<string> {
  try {
    const sandbox = await router.provision({
      resources: { cpu: 4, memoryMb: 8192 },
      requires: {
        requiredCapabilities: ['pty', 'publicPorts'],
        forbiddenCapabilities: ['nestedUserNamespaces'],
        image: { identity: 'agent-v4', requiredBinaries: ['node'] },
        timeout: {
          semantics: ['command-lifetime'],
          maxReadyLatencyMs: 30_000,
          completionBudgetMs: 1_800_000,
        },
      },
      region: { preferred: ['eu-west'], required: true },
      routing: {
        strategy: 'balanced',
        latencyObjective: 'ready',
        acquisitionFallback: 'allowed',
        maxAcquisitionAttempts: 3,
      },
    });
    const result = await router.runScript(sandbox.id, { command: 'node --version' });
    await router.destroy(sandbox.id);
    return `${sandbox.providerId}: ${result.output} (${result.exitCode ?? 'killed'})`;
  } catch (error) {
    if (error instanceof NoEligibleProviderError) return error.summary;
    if (error instanceof ProviderProvisioningError) return error.attempts.map((a) => a.code).join(',');
    throw error;
  }
}

const explanation: Promise<RoutingExplanation> = router.explain({ routing: { strategy: 'cost' } });
const order: string[] = router.route();
const pure = routeProviders(undefined, registry.list());
void explanation;
void order;
void pure.eligible[0]?.breakdown.latency.objective;

// Orphans and restarts: the SQLite store, the fleet, reconcile's report and events.
import { createSandboxRouter, SqliteMappingStore, SANDBOX_FLEET_LABEL, type ReconcileReport, type MappingIntent } from '../index.js';

export async function keepIdentityAcrossRestarts(): Promise<number> {
  const mappings = new SqliteMappingStore({ path: './state/sandboxes.db', durability: 'normal' });
  const durable = createSandboxRouter({
    providers: { local: {} },
    mappings,
    fleet: 'prod-eu',
    observer: (e: RoutingEvent) => {
      if (e.type === 'reconcile.reclaimed') void [e.sandboxId, e.class, e.outcome];
      if (e.type === 'reconcile.completed') void e.orphan;
      if (e.type === 'reconcile.listed') void e.reason;
    },
  });
  const dry: ReconcileReport = await durable.reconcile();
  for (const pool of Object.values(dry.pools)) {
    if (pool.status === 'unknown') void pool.reason;
    for (const o of pool.orphan) void [o.sandboxId, o.reason];
  }
  const done = await durable.reconcile({ reclaim: true, providers: ['local'], graceMs: 600_000, concurrency: 4, timeoutMs: 60_000 });
  const intents: MappingIntent[] = await mappings.intents();
  const key: 'agent-relay-sbx-fleet' = SANDBOX_FLEET_LABEL;
  void key;
  return done.outcomes.filter((o) => o.outcome === 'DESTROYED').length + intents.length;
}

// Running many routers: one PostgreSQL database for mappings and capacity holds.
import { PostgresMappingStore, SandboxRouter as Router2, InMemoryProviderRegistry as Registry2, MappingPersistenceError as MappingPersistenceError2 } from '../index.js';
import type { PostgresSslMode, PostgresSslOptions } from '../index.js';

export async function manyRouters(url: string): Promise<number> {
  const shared = new PostgresMappingStore({ connection: url, timeoutMs: 2_000, poolSize: 4, leaseMs: 15_000 });
  const byObject = new PostgresMappingStore({ connection: { host: '/run/postgresql', port: 5432, user: 'router', password: 'pw', database: 'router' } });
  const ca = '-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n';
  const tls = new PostgresMappingStore({ connection: { host: 'db.internal', user: 'router', password: 'pw', ssl: { ca, mode: 'verify-full' } } });
  const tlsUrl = new PostgresMappingStore({ connection: { url: `${url}?sslmode=verify-ca`, ssl: { ca } } });
  const webRoots = new PostgresMappingStore({ connection: { host: 'db.example.com', user: 'router', ssl: true } });
  const mode: PostgresSslMode = 'prefer';
  const opts: PostgresSslOptions = { mode };
  void opts;
  try {
    await tls.open();
  } catch (e) {
    if (e instanceof MappingPersistenceError2 && e.tls === true) void e.code;
  }
  await Promise.all([tls.close(), tlsUrl.close(), webRoots.close()]);
  const version: number = await shared.open();
  const router = new Router2({
    registry: new Registry2([]),
    mappings: shared,
    capacity: { providerOrder: ['a'], reservationTtlMs: 30_000, coordinator: shared },
  });
  void router;
  const held: number = await shared.held('a');
  const info: { type: 'PostgresMappingStore'; timeoutMs: number; leaseMs: number } = shared.toJSON();
  void info;
  await byObject.close();
  await shared.close();
  return version + held + shared.leaseMs;
}

// Live health: the option, the snapshot and the circuit events, as a user would write them.
import { type PoolHealth, type HealthOptions } from '../index.js';

export function watchHealth(now: () => number): PoolHealth[] {
  const options: HealthOptions = { clock: now, failureThreshold: 3, cooldownMs: 10_000, observedSignals: true, minSamples: 10 };
  const watched = new SandboxRouter({
    registry,
    health: options,
    observer: (e: RoutingEvent) => {
      if (e.type === 'health.circuit.opened') void [e.providerId, e.reason, e.retryAt, e.cooldownMs, e.consecutiveFailures];
      if (e.type === 'health.circuit.half-open' || e.type === 'health.circuit.closed') void e.providerId;
      if (e.type === 'health.skipped') void e.reason;
    },
  });
  new SandboxRouter({ registry, health: false });
  const pools: PoolHealth[] = watched.health();
  for (const p of pools) {
    if (p.state === 'open') void [p.retryAt, p.cause, p.cooldownMs];
    void [p.samples, p.successRate, p.latencyMs, p.p95LatencyMs, p.consecutiveFailures, p.consecutiveRetryableFailures, p.trialInFlight];
  }
  void watched.explain().then((x) => x.eligible[0]?.breakdown.latency.observed);
  return pools;
}

// Budgets (issue 25): rules, status, settlement and the typed refusal.
import { type BudgetRule, type BudgetStatus, BudgetExhaustedError as BudgetError } from '../index.js';

export async function budgeted(now: () => number): Promise<BudgetStatus[]> {
  const rules: BudgetRule[] = [
    { id: 'daily', key: { label: 'tenant' }, limit: { cost: 10 }, window: { every: 'day', timeZone: 'Europe/Berlin' } },
    { id: 'burst', key: { label: 'tenant' }, limit: { launches: 20, concurrent: 5 }, window: { slidingMs: 60_000 }, missing: 'allow', onStoreDown: 'allow' },
  ];
  // @ts-expect-error a window is one of the two shapes
  const bad: BudgetRule = { id: 'x', key: { label: 't' }, limit: { cost: 1 }, window: { every: 'fortnight', timeZone: 'UTC' } };
  void bad;
  const router = new SandboxRouter({ registry, clock: now, budgets: rules });
  try {
    const s = await router.provision({ launch: { labels: { tenant: 'acme' } } });
    const found: boolean = await router.settleCost(s.id, 0.5);
    void found;
  } catch (error) {
    if (error instanceof BudgetError) {
      const retry: boolean = error.retryable;
      void [error.rule, error.key?.value, error.resetsAt, retry];
    }
  }
  return router.budgetStatus();
}

// Telemetry: the real SDKs' providers fit the option, as a user would pass them.
import { type TelemetryOptions } from '../index.js';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { metrics, trace } from '@opentelemetry/api';

export function instrumented(): SandboxRouter[] {
  const telemetry: TelemetryOptions = { meterProvider: new MeterProvider(), tracerProvider: new BasicTracerProvider(), propagateToLabels: true };
  return [
    new SandboxRouter({ registry, telemetry }),
    new SandboxRouter({ registry, telemetry: true }),
    new SandboxRouter({ registry, telemetry: { meterProvider: metrics.getMeterProvider(), tracerProvider: trace.getTracerProvider() } }),
    createSandboxRouter({ providers: { local: {} }, telemetry: { meterProvider: new MeterProvider() } }),
  ];
}
