// Type tests, compiled by `npm run typecheck` and never run: the runtime port, the routing
// events and the error codes as a TypeScript user meets them under `--strict`.
// Every `@ts-expect-error` is a must-fire check: tsc fails if the line under it compiles,
// so these tests fail when a public type becomes too loose, not only when it is too tight.
import {
  InMemoryProviderRegistry,
  SandboxRouter,
  asProviderId,
  createSandboxRouter,
  SandboxRouterError,
  SandboxRequestValidationError,
  RoutingNotApplicableError,
  NoEligibleProviderError,
  ProviderRegistryError,
  SandboxRouterConfigurationError,
  ProviderRuntimeError,
  ProviderProvisioningError,
  ProvisioningAvailabilityError,
  ProviderCapacityExhaustedError,
  MappingPersistenceError,
  SandboxNotFoundError,
  AcquisitionTimeoutError,
  ProviderPackageMissingError,
  SandboxRouterInternalError,
  ManifestStartError,
  type AttemptRecord,
  type ProviderDefinition,
  type ProviderRoutingSignals,
  type RoutingEvent,
  type RoutingEventType,
  type RoutingObserver,
  type SandboxRuntime,
  BudgetExhaustedError,
} from '../index.js';
import { createLocalRuntime } from '../local/index.js';

const signals: ProviderRoutingSignals = {
  estimatedCost: 1,
  coldStartLatencyMs: 100,
  readyLatencyMs: 200,
  completionWithinBudgetRate: 0.99,
  available: true,
};

// ---------------------------------------------------------------------------------------
// 1. The SandboxRuntime port (issue 11, item 3)
// ---------------------------------------------------------------------------------------

// The port as its reference table declares it (shared/reference/sandbox-runtime-port.md),
// spelled with its own names: nothing below is imported from index.d.ts, so this is the
// shape an adapter package declares, not a copy of ours.
interface PortHandle {
  id: string;
  state?: string;
  createdAt?: string;
  updatedAt?: string;
  lastActivityAt?: string;
  homeDir?: string;
  workdir?: string;
}
interface PortLaunchOptions {
  name?: string;
  env?: Record<string, string>;
  labels?: Record<string, string>;
  createTimeoutSeconds?: number;
}
interface PortRunScriptOptions {
  command: string;
  sessionId?: string;
  timeoutMs?: number;
  env?: Record<string, string>;
}
interface PortRunScriptResult {
  output: string;
  stdout?: string;
  stderr?: string;
  exitCode: number | null;
  cmdId?: string;
}
type PortStates = readonly string[] | null;

// (a) A class written to the port's declared signatures, with every optional member.
class PortShapedRuntime {
  readonly id: string = 'port-shaped';
  readonly declaredCapabilities: { warmLease?: boolean; lifecycle?: boolean } = { warmLease: false, lifecycle: true };

  async launch(options?: PortLaunchOptions): Promise<PortHandle> {
    return { id: options?.name ?? 'sb-1', state: 'started' };
  }
  async launchDetached(options?: PortLaunchOptions): Promise<PortHandle> {
    return { id: options?.name ?? 'sb-2', state: 'starting' };
  }
  async getById(id: string, options?: { states?: PortStates; owned?: boolean }): Promise<PortHandle | null> {
    return options?.owned === true ? { id } : null;
  }
  async findByLabels(
    labels: Record<string, string>,
    options?: { states?: PortStates; limit?: number; pageSize?: number; owned?: boolean; excludeIds?: readonly string[]; timeoutMs?: number },
  ): Promise<PortHandle | null> {
    return options?.excludeIds?.includes('sb-1') ? null : { id: Object.keys(labels)[0] ?? 'sb-1' };
  }
  async findAllByLabels(
    labels: Record<string, string>,
    options?: { states?: PortStates; limit?: number; pageSize?: number; owned?: boolean; excludeIds?: readonly string[]; timeoutMs?: number },
  ): Promise<PortHandle[]> {
    return Object.keys(labels).slice(0, options?.limit ?? 10).map((id) => ({ id }));
  }
  async countByLabels(
    labels: Record<string, string>,
    options?: { states?: PortStates; limit?: number; pageSize?: number; maxCount?: number; timeoutMs?: number },
  ): Promise<number> {
    return Math.min(Object.keys(labels).length, options?.maxCount ?? Infinity);
  }
  async uploadBundle(handle: PortHandle, bundle: { files: Array<{ source: string | Buffer; destination: string }> }): Promise<void> {
    void handle;
    void bundle.files.map((f) => f.destination);
  }
  async runScript(handle: PortHandle, options: PortRunScriptOptions): Promise<PortRunScriptResult> {
    return { output: `${handle.id}: ${options.command}`, exitCode: 0, cmdId: 'c-1' };
  }
  async startScript(
    handle: PortHandle,
    options: { command: string; sessionId?: string; timeoutMs?: number; env?: Record<string, string>; suppressInputEcho?: boolean },
  ): Promise<{ sessionId: string; commandId: string }> {
    return { sessionId: options.sessionId ?? handle.id, commandId: 'c-2' };
  }
  async getScriptStatus(handle: PortHandle, sessionId: string, commandId: string): Promise<{ exitCode: number | null }> {
    return { exitCode: handle.id === sessionId && commandId !== '' ? 0 : null };
  }
  async getScriptLogs(handle: PortHandle, sessionId: string, commandId: string): Promise<PortRunScriptResult> {
    return { output: `${handle.id}/${sessionId}/${commandId}`, exitCode: null };
  }
  async start(handle: PortHandle): Promise<PortHandle> {
    return { ...handle, state: 'started' };
  }
  async stop(handle: PortHandle): Promise<void> {
    void handle;
  }
  async destroy(handle: PortHandle): Promise<void> {
    void handle;
  }
}

const portRuntime = new PortShapedRuntime();
const asPort: SandboxRuntime = portRuntime;
const classDefinition: ProviderDefinition = {
  id: asProviderId('port-class'),
  runtime: portRuntime,
  capabilities: { supported: ['syncExec', 'asyncExec', 'fileTransfer'] },
  signals,
};

// (b) An object literal with only the port's required members, typed as the port declares them.
const registry = new InMemoryProviderRegistry([classDefinition]).register({
  id: asProviderId('port-literal'),
  runtime: {
    id: 'literal',
    async launch(options?: PortLaunchOptions): Promise<PortHandle> {
      return { id: options?.labels?.['agent-relay-sbx-id'] ?? 'sb-3' };
    },
    async findByLabels(labels: Record<string, string>, options?: { owned?: boolean; excludeIds?: readonly string[] }): Promise<PortHandle | null> {
      return options?.owned ? { id: JSON.stringify(labels) } : null;
    },
    async findAllByLabels(labels: Record<string, string>): Promise<PortHandle[]> {
      return [{ id: JSON.stringify(labels) }];
    },
    async countByLabels(labels: Record<string, string>, options?: { maxCount?: number; timeoutMs?: number }): Promise<number> {
      return Math.min(Object.keys(labels).length, options?.maxCount ?? 1);
    },
    async uploadBundle(handle: PortHandle, bundle: { files: Array<{ source: string | Buffer; destination: string }> }): Promise<void> {
      void handle;
      void bundle;
    },
    async runScript(handle: PortHandle, options: PortRunScriptOptions): Promise<PortRunScriptResult> {
      return { output: options.command, stdout: handle.id, exitCode: 0 };
    },
    async destroy(handle: PortHandle): Promise<void> {
      void handle;
    },
  },
  capabilities: { supported: ['syncExec'] },
  signals,
});

// The router's own minimum (the registry checks only launch and destroy).
registry.register({
  id: asProviderId('minimal'),
  runtime: { id: 'minimal', launch: async () => ({ id: 'sb-4' }), destroy: async () => undefined },
  capabilities: {},
  signals,
});

// The embedded local runtime fits the port unchanged.
const localPort: SandboxRuntime = createLocalRuntime();

// Must-fire: runtimes that break the port are rejected.
const launchResolvesANumber = { id: 'bad', launch: async () => 42, destroy: async () => undefined };
// @ts-expect-error launch must resolve with a RuntimeHandle
const badLaunch: SandboxRuntime = launchResolvesANumber;

const noDestroy = { id: 'bad', launch: async () => ({ id: 'sb' }) };
// @ts-expect-error destroy is required
const badNoDestroy: SandboxRuntime = noDestroy;

const base = { id: 'bad', launch: async () => ({ id: 'sb' }), destroy: async () => undefined };
const statusSessionIsNumber = {
  ...base,
  async getScriptStatus(handle: PortHandle, sessionId: number, commandId: string) {
    return { exitCode: handle.id.length + sessionId + commandId.length };
  },
};
// @ts-expect-error getScriptStatus takes (handle, sessionId: string, commandId: string)
const badStatusArgs: SandboxRuntime = statusSessionIsNumber;

const statusExitCodeIsText = { ...base, getScriptStatus: async (h: PortHandle, s: string, c: string) => ({ exitCode: `${h.id}${s}${c}` }) };
// @ts-expect-error getScriptStatus resolves with { exitCode: number | null }
const badStatusResult: SandboxRuntime = statusExitCodeIsText;

const logsWithoutOutput = { ...base, getScriptLogs: async (h: PortHandle, s: string, c: string) => ({ exitCode: h.id === s + c ? 0 : 1 }) };
// @ts-expect-error getScriptLogs resolves with the runScript result (output is required)
const badLogs: SandboxRuntime = logsWithoutOutput;

const startScriptResolvesText = { ...base, startScript: async (h: PortHandle, o: PortRunScriptOptions) => `${h.id} ${o.command}` };
// @ts-expect-error startScript resolves with { sessionId, commandId }
const badStartScript: SandboxRuntime = startScriptResolvesText;

const getByIdOwnedIsText = { ...base, getById: async (id: string, o?: { owned?: string }) => (o?.owned ? { id } : null) };
// @ts-expect-error getById's `owned` is a boolean
const badOwned: SandboxRuntime = getByIdOwnedIsText;

const excludeIdsAreNumbers = { ...base, findByLabels: async (l: Record<string, string>, o?: { excludeIds?: number[] }) => (o && l ? null : null) };
// @ts-expect-error findByLabels' `excludeIds` are strings
const badExclude: SandboxRuntime = excludeIdsAreNumbers;

const maxCountIsText = { ...base, countByLabels: async (l: Record<string, string>, o?: { maxCount?: string }) => Object.keys(l).length + (o ? 1 : 0) };
// @ts-expect-error countByLabels' `maxCount` is a number
const badMaxCount: SandboxRuntime = maxCountIsText;

const startResolvesNothing = { ...base, start: async (h: PortHandle) => void h };
// @ts-expect-error start resolves with a RuntimeHandle
const badStart: SandboxRuntime = startResolvesNothing;

const uploadSourceIsNumber = { ...base, uploadBundle: async (h: PortHandle, b: { files: Array<{ source: number; destination: string }> }) => void [h, b] };
// @ts-expect-error a bundle file's source is a string or bytes
const badUpload: SandboxRuntime = uploadSourceIsNumber;

const capabilitiesAreText = { ...base, declaredCapabilities: { warmLease: 'yes' } };
// @ts-expect-error declaredCapabilities fields are booleans
const badCapabilities: SandboxRuntime = capabilitiesAreText;

void [asPort, localPort, badLaunch, badNoDestroy, badStatusArgs, badStatusResult, badLogs, badStartScript];
void [badOwned, badExclude, badMaxCount, badStart, badUpload, badCapabilities];

// ---------------------------------------------------------------------------------------
// 2. Events: a discriminated union on `type` (issue 11, item 5)
// ---------------------------------------------------------------------------------------

// Exactly these types (a missing key or an extra key fails).
const everyType: Record<RoutingEventType, true> = {
  'provision.validated': true,
  'provider.rejected': true,
  'provision.ranked': true,
  'capacity.skipped': true,
  'pool.rate.limited': true,
  'pool.cooldown.started': true,
  'pool.cooldown.ended': true,
  'queue.entered': true,
  'queue.admitted': true,
  'queue.timeout': true,
  'capacity.admitted': true,
  'attempt.started': true,
  'attempt.failed': true,
  'attempt.succeeded': true,
  'fallback.advanced': true,
  'mapping.persisted': true,
  'mapping.failed': true,
  'cleanup.completed': true,
  'provision.exhausted': true,
  'sandbox.destroyed': true,
  'reconcile.listed': true,
  'reconcile.reclaimed': true,
  'reconcile.completed': true,
  'health.circuit.opened': true,
  'health.circuit.half-open': true,
  'health.circuit.closed': true,
  'health.skipped': true,
  'warm.member.launched': true,
  'warm.claimed': true,
  'warm.miss': true,
  'warm.member.expired': true,
  'warm.member.lost': true,
  'warm.refill.paused': true,
  'warm.refill.resumed': true,
  'warm.target.changed': true,
  'budget.reserved': true,
  'budget.released': true,
  'budget.charged.late': true,
  'budget.refused': true,
};
// @ts-expect-error not an event type
const notAType: RoutingEventType = 'provision.started';

export function describeEvent(event: RoutingEvent): string {
  const at: string = event.at;
  // @ts-expect-error no index signature: a misspelt field does not compile
  void event.provderId;
  // Router-level events (reconcile's, warm refills' pause and resume) carry no sandboxId;
  // every other event does.
  if (event.type === 'reconcile.listed' || event.type === 'reconcile.completed') {
    // @ts-expect-error pool-level: no sandboxId
    void event.sandboxId;
    return event.type === 'reconcile.listed' ? `${event.providerId} ${event.status} ${event.reason ?? ''}` : `${event.orphan} orphans`;
  }
  if (event.type === 'warm.refill.paused' || event.type === 'warm.refill.resumed') {
    // @ts-expect-error pool-level: no sandboxId
    void event.sandboxId;
    return `${event.providerId} refills ${event.type === 'warm.refill.paused' ? `paused ${event.code}` : 'resumed'}`;
  }
  if (event.type === 'pool.cooldown.ended') {
    // @ts-expect-error pool-level: no sandboxId
    void event.sandboxId;
    return `${event.providerId} may launch again`;
  }
  if (event.type === 'warm.target.changed') {
    // @ts-expect-error pool-level: no sandboxId
    void event.sandboxId;
    const reason: 'MIN' | 'DEMAND' | 'MAX' = event.reason;
    return `${event.providerId} target ${event.previous} -> ${event.target} (${reason})`;
  }
  const sandboxId: string = event.sandboxId;
  switch (event.type) {
    case 'provision.validated':
      return `${at} ${sandboxId} validated detached=${event.detached satisfies boolean}`;
    case 'provider.rejected':
      return `${event.providerId}: ${event.reasons.map((r) => `${r.code} ${r.detail}`).join(', ')}`;
    case 'provision.ranked':
      return `${event.summary}: ${event.providerIds.join(' > ')}`;
    case 'capacity.skipped': {
      const status: 'UNKNOWN' | 'EXHAUSTED' = event.status;
      return `${event.providerId} ${status} ${event.reason}`;
    }
    case 'capacity.admitted':
      return event.providerId;
    case 'attempt.started':
      // @ts-expect-error fromProviderId exists only on fallback.advanced
      void event.fromProviderId;
      return `${event.providerId} #${event.attempt}`;
    case 'attempt.failed':
      return `${event.providerId} #${event.attempt} ${event.code} retryable=${event.retryable satisfies boolean}`;
    case 'attempt.succeeded':
      return `${event.providerId} #${event.attempt}`;
    case 'fallback.advanced':
      return `${event.fromProviderId} -> ${event.toProviderId} #${event.attempt}`;
    case 'mapping.persisted':
    case 'mapping.failed':
    case 'sandbox.destroyed':
      return `${event.type} ${event.providerId}`;
    case 'cleanup.completed': {
      const reason: 'mapping-failed' | 'late-launch' = event.reason;
      return `${event.providerId} ${reason} succeeded=${event.succeeded satisfies boolean}`;
    }
    case 'provision.exhausted':
      // @ts-expect-error provision.exhausted carries no providerId
      void event.providerId;
      return event.summary === undefined ? event.code : `${event.code}: ${event.summary}`;
    case 'reconcile.reclaimed':
      return `${event.providerId} ${event.class} ${event.outcome}`;
    case 'health.circuit.opened': {
      const reason: 'CONSECUTIVE_FAILURES' | 'CONSECUTIVE_RETRYABLE_FAILURES' | 'TRIAL_FAILED' = event.reason;
      return `${event.providerId} open (${reason}, ${event.consecutiveFailures}) until ${event.retryAt} (${event.cooldownMs} ms)`;
    }
    case 'health.circuit.half-open':
    case 'health.circuit.closed':
      // @ts-expect-error only health.circuit.opened carries retryAt
      void event.retryAt;
      return `${event.type} ${event.providerId}`;
    case 'health.skipped': {
      const reason: 'CIRCUIT_OPEN' = event.reason;
      return `${event.providerId} ${reason}`;
    }
    case 'warm.claimed':
      return `${event.providerId} claimed after ${event.ageMs} ms`;
    case 'warm.miss': {
      const reason: 'EMPTY' | 'PAUSED' | 'LAUNCH_ENV' | 'LAUNCH_NAME' | 'LIFETIME' = event.reason;
      return `${event.providerId} ${reason}`;
    }
    case 'warm.member.expired':
      return `${event.providerId} expired at ${event.ageMs} ms destroyed=${event.destroyed satisfies boolean}`;
    case 'warm.member.launched':
    case 'warm.member.lost':
      // @ts-expect-error only warm.claimed and warm.member.expired carry ageMs
      void event.ageMs;
      return `${event.type} ${event.providerId}`;
    case 'budget.reserved':
      return `${event.providerId} ${event.cost} ${event.rules.join(',')}`;
    case 'budget.released': {
      const reason: 'PRE_ALLOCATION_FAILURE' | 'NOT_LAUNCHED' | 'DESTROYED' | 'RECLAIMED' = event.reason;
      return `${event.providerId} ${reason}`;
    }
    case 'budget.charged.late':
      return `${event.providerId} late`;
    case 'budget.refused': {
      const dimension: 'cost' | 'launches' | 'concurrent' = event.dimension;
      return `${event.rule} ${event.key.label}=${event.key.value} ${dimension} ${event.used}+${event.reserved}/${event.limit} retryable=${event.retryable satisfies boolean} ${event.resetsAt ?? ''}`;
    }
    case 'pool.rate.limited':
      return `${event.providerId} next token at ${event.retryAt satisfies string}`;
    case 'pool.cooldown.started':
      return `${event.providerId} cools ${event.retryAfterMs satisfies number} ms until ${event.until satisfies string}`;
    case 'queue.entered':
      return `${sandboxId} waits (depth ${event.depth satisfies number}) for ${event.providerIds.join(', ')}`;
    case 'queue.admitted':
      return `${sandboxId} admitted after ${event.waitedMs satisfies number} ms`;
    case 'queue.timeout':
      return `${sandboxId} gave up after ${event.waitedMs satisfies number} ms on ${event.providerIds.join(', ')}`;
    default: {
      const unreachable: never = event;
      return unreachable;
    }
  }
}

// The observer's return value is ignored, so any function of an event fits, with `e`
// contextually typed (strict's noImplicitAny would reject an untyped `e` otherwise).
const events: RoutingEvent[] = [];
new SandboxRouter({ registry, observer: (e) => events.push(e) });
new SandboxRouter({ registry, observer: { emit: (e) => events.push(e) } });
new SandboxRouter({ registry, observer: { emit: (e) => void events.push(e) } });
new SandboxRouter({ registry, observer: async (e) => void events.push(e) });
new SandboxRouter({
  registry,
  observer: (e) => {
    // @ts-expect-error `e` is a RoutingEvent, not any
    return e.provderId;
  },
});
createSandboxRouter({ providers: { local: {} }, observer: (e) => (e.type === 'fallback.advanced' ? e.toProviderId : null) });
// @ts-expect-error an observer takes a RoutingEvent
const wrongObserver: RoutingObserver = (e: string) => e.length;
void [everyType, notAType, wrongObserver];

// ---------------------------------------------------------------------------------------
// 3. Error codes: each class narrows `code` to its documented codes (issue 11, item 5)
// ---------------------------------------------------------------------------------------

// Exactly these codes per class (a missing key or an extra key fails).
const requestCodes: Record<SandboxRequestValidationError['code'], true> = {
  INVALID_REQUEST: true,
  RESERVED_LABEL: true,
  INVALID_SANDBOX_ID: true,
  INVALID_INPUT: true,
  INVALID_DECISION_RECORD: true,
  BUDGET_KEY_MISSING: true,
};
const budgetCodes: Record<BudgetExhaustedError['code'], true> = { BUDGET_EXHAUSTED: true, BUDGET_STORE_UNAVAILABLE: true };
const routingCodes: Record<RoutingNotApplicableError['code'], true> = { ROUTING_NOT_APPLICABLE: true };
const eligibleCodes: Record<NoEligibleProviderError['code'], true> = { NO_ELIGIBLE_PROVIDER: true };
const registryCodes: Record<ProviderRegistryError['code'], true> = {
  INVALID_PROVIDER_ID: true,
  DUPLICATE_PROVIDER: true,
  INVALID_PROVIDER_DEFINITION: true,
  PROVIDER_NOT_REGISTERED: true,
  REGISTRY_READ_FAILED: true,
};
const configCodes: Record<SandboxRouterConfigurationError['code'], true> = { INVALID_CONFIGURATION: true };
const runtimeCodes: Record<ProviderRuntimeError['code'], true> = { PROVIDER_RUNTIME_ERROR: true, OPERATION_TIMEOUT: true };
const availabilityCodes: Record<ProvisioningAvailabilityError['code'], true> = { PROVISIONING_AVAILABILITY_FAILED: true };
const capacityCodes: Record<ProviderCapacityExhaustedError['code'], true> = { PROVIDER_CAPACITY_EXHAUSTED: true, LAUNCH_RATE_LIMITED: true, QUEUE_FULL: true };
const mappingCodes: Record<MappingPersistenceError['code'], true> = {
  MAPPING_PERSISTENCE_FAILED: true,
  MAPPING_READ_FAILED: true,
  MAPPING_INTENT_FAILED: true,
  MAPPING_STORE_OPEN_FAILED: true,
  MAPPING_STORE_SCHEMA_TOO_NEW: true,
  COORDINATOR_UNAVAILABLE: true,
};
const notFoundCodes: Record<SandboxNotFoundError['code'], true> = { SANDBOX_NOT_FOUND: true };
const timeoutCodes: Record<AcquisitionTimeoutError['code'], true> = { ACQUISITION_TIMEOUT: true };
const packageCodes: Record<ProviderPackageMissingError['code'], true> = {
  PROVIDER_PACKAGE_MISSING: true,
  PROVIDER_PACKAGE_LOAD_FAILED: true,
  PROVIDER_OPERATION_UNSUPPORTED: true,
};
const internalCodes: Record<SandboxRouterInternalError['code'], true> = { INTERNAL_ERROR: true };
const manifestCodes: Record<ManifestStartError['code'], true> = { MANIFEST_START_FAILED: true };
void [requestCodes, routingCodes, eligibleCodes, registryCodes, configCodes, runtimeCodes, availabilityCodes];
void [budgetCodes, capacityCodes, mappingCodes, notFoundCodes, timeoutCodes, packageCodes, internalCodes, manifestCodes];

// A classifier's codes stay open strings: the base class, provisioning errors and attempts.
const anyBaseCode: SandboxRouterError['code'] = 'MY_CLASSIFIER_CODE';
const anyProvisioningCode: ProviderProvisioningError['code'] = 'PROVIDER_CAPACITY_PRE_ALLOCATION';
const anyAttemptCode: AttemptRecord['code'] = 'PROVIDER_QUOTA_EXCEEDED';
void [anyBaseCode, anyProvisioningCode, anyAttemptCode];

export function handle(error: unknown): string {
  if (error instanceof NoEligibleProviderError) {
    // @ts-expect-error TS2367: 'NO_ELIGIBLE_PROVIDER' and 'NOT_A_CODE' have no overlap
    if (error.code === 'NOT_A_CODE') return 'unreachable';
    return `${error.code}: ${error.summary}`;
  }
  if (error instanceof ProviderPackageMissingError) {
    switch (error.code) {
      case 'PROVIDER_PACKAGE_MISSING':
        return `install ${error.packageName}`;
      case 'PROVIDER_PACKAGE_LOAD_FAILED':
        return `reinstall ${error.packageName}`;
      case 'PROVIDER_OPERATION_UNSUPPORTED':
        return `upgrade ${error.packageName}`;
      default: {
        const unreachable: never = error.code;
        return unreachable;
      }
    }
  }
  if (error instanceof ProviderRuntimeError) {
    // @ts-expect-error TS2367: a runtime error is never PROVIDER_PACKAGE_MISSING
    if (error.code === 'PROVIDER_PACKAGE_MISSING') return 'unreachable';
    return error.code === 'OPERATION_TIMEOUT' ? 'outcome unknown' : error.operation;
  }
  if (error instanceof ProviderProvisioningError) return error.attempts.map((a) => a.code).join(', ');
  if (error instanceof SandboxRouterError) return error.code;
  return 'unknown';
}
