// Public types of @agent-relay/sandbox-router (native edition).
// Names follow the 0.6 TypeScript package; see docs/migrating.md for differences.

// ---------------------------------------------------------------------------------------
// The runtime port (structural: any @agent-relay/sandbox adapter fits unchanged)
// ---------------------------------------------------------------------------------------

/** A provider sandbox as an adapter reports it. */
export interface RuntimeHandle {
  id: string;
  state?: string;
  createdAt?: string;
  updatedAt?: string;
  lastActivityAt?: string;
  homeDir?: string;
  workdir?: string;
}

/** Options of `SandboxRuntime.launch` and `launchDetached`. */
export interface RuntimeLaunchOptions {
  name?: string;
  env?: Record<string, string>;
  labels?: Record<string, string>;
  createTimeoutSeconds?: number;
}

/** Options of `SandboxRuntime.getById`. */
export interface RuntimeGetByIdOptions {
  /** Only a sandbox in one of these states; `null` or absent: any state. */
  states?: readonly string[] | null;
  /**
   * Claim the sandbox as owned by this process. Without it the published adapters return an
   * *attached* handle, whose `destroy`/`stop`/`start` leave the remote sandbox alone.
   */
  owned?: boolean;
}

/** Options of `findByLabels` and `findAllByLabels`. */
export interface RuntimeLabelQueryOptions {
  states?: readonly string[] | null;
  limit?: number;
  pageSize?: number;
  /** As in `getById`: return owned handles instead of attached ones. */
  owned?: boolean;
  /** Skip sandboxes with these provider ids. */
  excludeIds?: readonly string[];
  timeoutMs?: number;
}

/** Options of `countByLabels`. */
export interface RuntimeCountByLabelsOptions {
  states?: readonly string[] | null;
  limit?: number;
  pageSize?: number;
  /** Stop counting at this value. */
  maxCount?: number;
  timeoutMs?: number;
}

/** Options of `runScript`. */
export interface RunScriptOptions {
  command: string;
  sessionId?: string;
  timeoutMs?: number;
  env?: Record<string, string>;
}

/** Result of `runScript` (and of `getScriptLogs`). */
export interface RunScriptResult {
  output: string;
  stdout?: string;
  stderr?: string;
  exitCode: number | null;
  cmdId?: string;
}

/** Options of `startScript`: those of `runScript`, plus `suppressInputEcho`. */
export interface StartScriptOptions extends RunScriptOptions {
  suppressInputEcho?: boolean;
}

/** What `startScript` resolves with: the ids that `getScriptStatus`/`getScriptLogs` take. */
export interface StartedScript {
  sessionId: string;
  commandId: string;
}

/** What `getScriptStatus` resolves with: `exitCode` is `null` while the command runs. */
export interface ScriptStatus {
  exitCode: number | null;
}

/** Files for `uploadBundle`. A `source` string is the adapter's to interpret; a `Buffer` is a `Uint8Array`. */
export interface UploadBundle {
  files: Array<{ source: string | Uint8Array; destination: string }>;
}

/**
 * The `SandboxRuntime` port of `@agent-relay/sandbox`. The router accepts any object of
 * this shape unchanged; it never infers capabilities from which methods exist.
 *
 * Every signature is the port's own, so an adapter declared to the port type-checks here
 * under `--strict`. The router itself needs only `id`, `launch` and `destroy`; the port's
 * other required members (`findByLabels`, `findAllByLabels`, `countByLabels`,
 * `uploadBundle`, `runScript`) are optional here, so a minimal runtime fits as well.
 * `startScript`, `getScriptStatus` and `getScriptLogs` are one capability: all or none.
 */
export interface SandboxRuntime {
  /** The adapter kind (`daytona`, `e2b`, `local`, …), not the router's provider id. */
  readonly id: string;
  /** The only acquisition call; resolves with a handle only on success. */
  launch(options?: RuntimeLaunchOptions): Promise<RuntimeHandle>;
  /** Like `launch`; the sandbox may still be booting. */
  launchDetached?(options?: RuntimeLaunchOptions): Promise<RuntimeHandle>;
  /** Re-resolves a sandbox by provider id; `null` when it does not exist. */
  getById?(id: string, options?: RuntimeGetByIdOptions): Promise<RuntimeHandle | null>;
  findByLabels?(labels: Record<string, string>, options?: RuntimeLabelQueryOptions): Promise<RuntimeHandle | null>;
  /** Some adapters answer `[]` both for "no match" and "no server-side label search". */
  findAllByLabels?(labels: Record<string, string>, options?: RuntimeLabelQueryOptions): Promise<RuntimeHandle[]>;
  countByLabels?(labels: Record<string, string>, options?: RuntimeCountByLabelsOptions): Promise<number>;
  uploadBundle?(handle: RuntimeHandle, bundle: UploadBundle): Promise<void>;
  runScript?(handle: RuntimeHandle, options: RunScriptOptions): Promise<RunScriptResult>;
  /** Submits a command without waiting for it. */
  startScript?(handle: RuntimeHandle, options: StartScriptOptions): Promise<StartedScript>;
  /** Three arguments: the ids `startScript` returned. */
  getScriptStatus?(handle: RuntimeHandle, sessionId: string, commandId: string): Promise<ScriptStatus>;
  /** Three arguments: the ids `startScript` returned. */
  getScriptLogs?(handle: RuntimeHandle, sessionId: string, commandId: string): Promise<RunScriptResult>;
  /** May be a no-op on some providers. */
  start?(handle: RuntimeHandle): Promise<RuntimeHandle>;
  /** May be a no-op on some providers. */
  stop?(handle: RuntimeHandle): Promise<void>;
  /** Adapters generally tolerate an already-deleted sandbox. */
  destroy(handle: RuntimeHandle): Promise<void>;
  /** Provider-declared; an omitted field defaults to `true`. */
  declaredCapabilities?: { warmLease?: boolean; lifecycle?: boolean };
}

// ---------------------------------------------------------------------------------------
// Vocabulary
// ---------------------------------------------------------------------------------------

/** A validated provider id (lowercase `[a-z0-9][a-z0-9._-]*`, at most 64 characters). */
export type ProviderId = string & { readonly __brand?: 'ProviderId' };

/**
 * Named capabilities. Custom ones must start with `x-` (e.g. `x-fpga`), so a misspelled
 * known name is an error instead of a requirement that silently matches nothing.
 */
export type NamedCapability =
  | 'syncExec'
  | 'asyncExec'
  | 'fileTransfer'
  | 'pty'
  | 'publicPorts'
  | 'tailnet'
  | 'longRunningProcesses'
  | 'stablePid'
  | 'processRestart'
  | 'unattendedEnrollment'
  | 'nestedUserNamespaces'
  | 'privileged'
  | 'docker'
  | 'gpu'
  | 'snapshots'
  | 'warmLease'
  | 'lifecycle'
  | 'persistentVolumes'
  | 'ssh'
  | `x-${string}`;

/** Egress classes, from closed to open. */
export type EgressClass = 'none' | 'allowlist' | 'open';
/** Timeout semantics a pool honours. */
export type TimeoutSemantics = 'command-lifetime' | 'sandbox-lifetime' | 'idle';
/** State durability, weakest first. A requirement is a minimum. */
export type StateDurability = 'ephemeral' | 'session' | 'persistent';
/** Isolation levels, weakest first. A requirement is a minimum. `none` = host process. */
export type IsolationLevel = 'none' | 'process' | 'container' | 'gvisor' | 'microvm' | 'vm';
/** Ranking strategy. Default `balanced`. */
export type RoutingStrategy = 'cost' | 'latency' | 'reliability' | 'balanced';
/** Which latency signal ranks and budgets: `cold` (create returns) or `ready` (default). */
export type LatencyObjective = 'cold' | 'ready';

/** Per-sandbox resources: a pool's maxima, or a request's needs. Undeclared = 0. */
export interface SandboxResources {
  /** vCPUs. */
  cpu?: number;
  /** Memory, MiB. */
  memoryMb?: number;
  /** Disk, MiB. */
  diskMb?: number;
  /** GPUs. */
  gpu?: number;
}

/**
 * What a pool declares it can do. Anything undeclared is treated as "no": an undeclared
 * region, image, isolation or durability never satisfies a requirement.
 */
export interface SandboxCapabilities {
  /** Named capabilities the pool provides. */
  supported?: readonly NamedCapability[];
  /** The image the pool launches and the binaries in it. */
  image?: { identity?: string; binaries?: readonly string[] };
  /** The pool's egress class. */
  egress?: EgressClass;
  /**
   * Timeout behaviour. `maxSandboxLifetimeMs`: a number is an inclusive cap, `null` means
   * unbounded, omitted means unknown (never satisfies a lifetime requirement).
   */
  timeout?: { semantics?: readonly TimeoutSemantics[]; granularityMs?: number; maxSandboxLifetimeMs?: number | null };
  /** How long sandbox state survives. */
  stateDurability?: StateDurability;
  /** Restrictions the pool enforces (free-form names, matched exactly). */
  restrictions?: readonly string[];
  /** Regions the pool launches in. */
  regions?: readonly string[];
  /** Per-sandbox maxima. */
  resources?: SandboxResources;
  /** Isolation level. */
  isolation?: IsolationLevel;
}

/**
 * Comparable selection inputs, not charges. All fields are required; a missing,
 * negative or non-finite value, or a rate outside [0, 1], makes the pool ineligible with
 * `INVALID_SIGNALS` (never a NaN score).
 */
export interface ProviderRoutingSignals {
  /** Expected cost of the relevant acquisition (any unit, consistent across pools). */
  estimatedCost: number;
  /** Time until the create call returns, ms. */
  coldStartLatencyMs: number;
  /** Time until the workload is actually ready, ms. */
  readyLatencyMs: number;
  /** Share of runs completing within budget, 0..1 (hangs count as failures). */
  completionWithinBudgetRate: number;
  /** Whether the pool accepts acquisitions now. */
  available: boolean;
}

/** A registered provider pool. */
export interface ProviderDefinition {
  id: ProviderId;
  /** Any object of the `SandboxRuntime` port, called as-is. */
  runtime: SandboxRuntime;
  capabilities: SandboxCapabilities;
  signals: ProviderRoutingSignals;
  /** Optional read-only capacity reader (see capacity routing). */
  capacity?: CapacityReader;
  /** Keep idle members of this pool ready for provisions (docs/warm-pools.md). */
  warm?: WarmOptions;
  /** The provider's create-rate limit for this account: a token bucket (docs/rate-limits.md). */
  rateLimit?: RateLimitOptions;
}

/** A pool's create-rate limit: `launchesPerSecond` tokens a second, at most `burst` kept. */
export interface RateLimitOptions {
  /** Launches the provider allows per second, from 1/86400 (one a day) to 1,000,000. */
  launchesPerSecond: number;
  /** Launches that may start at once after a quiet spell: an integer from 1 (default) to 1,000,000. */
  burst?: number;
}

/**
 * A pool's warm pool (docs/warm-pools.md): idle sandboxes launched ahead of demand, claimed
 * by compatible provisions. Filling starts with `router.warmUp()`; nothing at construction.
 */
export type WarmOptions = (
  | {
      /** Idle members to keep (0..1000); with a PostgreSQL coordinator, the fleet's target. */
      size: number;
      min?: never;
      max?: never;
    }
  | {
      size?: never;
      /** Demand-following: the fewest idle members to keep (0..max). */
      min: number;
      /** Demand-following: the most members, idle and launching (min..1000). */
      max: number;
    }
) & WarmTuning;

/** The rest of a `warm` option (docs/warm-pools.md, "The option"). */
export interface WarmTuning {
  /** A member idle longer is destroyed and replaced, ms. Default 600,000. */
  maxIdleMs?: number;
  /**
   * Idle members are checked at the provider this often, ms: through the pool's native
   * finder (one list call) where it has one, else `getById(id, { owned: true })`. Default 30,000.
   */
  checkIntervalMs?: number;
  refill?: {
    /**
     * The most refill launches in flight at once, per process (1..1000). Default: `size`
     * (or `max`). Below it the pace follows demand (claims per second × create latency).
     */
    concurrency?: number;
    /** Consecutive refill failures that pause refills until a launch on the pool succeeds. Default 3. */
    pauseAfterFailures?: number;
  };
}

/** Why a provision did not claim a member (`warm.miss`, `explain`). */
export type WarmMissReason = 'EMPTY' | 'PAUSED' | 'LAUNCH_ENV' | 'LAUNCH_NAME' | 'LIFETIME';

/** One warm pool's standing in `router.warmUp()`'s report. */
export interface WarmPoolReport {
  providerId: ProviderId;
  target: number;
  idle: number;
  ready: boolean;
  /**
   * Why not ready: `PAUSED`, `CIRCUIT_OPEN`, `NOT_IN_PROVIDER_ORDER`, `AT_CAPACITY`,
   * `EXPIRING` (members expire before the pool fills), `REFILL_FAILED`, `FILLING` (still
   * filling when the wait's bound passed, or nothing in flight), `CLOSED`; null when ready.
   */
  reason: string | null;
  lastFailureCode: string | null;
}

/** `router.warmUp()`: every warm pool's standing. */
export interface WarmUpReport {
  /** Every warm pool holds its size. */
  ready: boolean;
  pools: WarmPoolReport[];
}

/** Why a warm pool's target is what it is. */
export type WarmTargetReason = 'SIZE' | 'MIN' | 'DEMAND' | 'MAX';

/** One warm pool's counters (`router.warmStatus()`); counters are this process's. */
export interface WarmPoolStatus {
  providerId: ProviderId;
  /** Idle members to keep now: `size`, or between `min` and `max` following demand. */
  target: number;
  /** Why the target is what it is. */
  targetReason: WarmTargetReason;
  /** A demand-following pool's `min` and `max`; null for `size`. */
  min: number | null;
  max: number | null;
  /** Idle members: this process's, or the fleet's with `scope: 'fleet'`. */
  idle: number;
  /** Refill launches in flight (same scope). */
  launching: number;
  scope: 'process' | 'fleet';
  claims: number;
  misses: { empty: number; incompatible: number; paused: number };
  launched: number;
  refillFailures: number;
  lastFailureCode: string | null;
  expired: number;
  lost: number;
  paused: boolean;
  /** Claims per second (and misses for want of a member): the demand estimate. */
  demandPerSecond: number;
  /** The create latency the pace and target use, ms (refills' p90, else `coldStartLatencyMs`); null when unknown. */
  createLatencyMs: number | null;
  /** Refill launches allowed in flight now. */
  pace: number;
}

/** `router.close()`'s answer. */
export interface WarmCloseResult {
  /** Idle members destroyed (or found gone already). */
  destroyed: number;
  /** Idle members whose destroy failed: their records stay, for `reconcile`. */
  failed: number;
  /** Idle members left recorded for the next process (`keepWarm`). */
  kept: number;
}

/** Where definitions come from. `InMemoryProviderRegistry` is the reference. */
export interface ProviderRegistry {
  list(): readonly ProviderDefinition[];
  get?(id: ProviderId): ProviderDefinition | undefined;
}

// ---------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------

/** Hard requirements. Unknown keys are a `SandboxRequestValidationError` (never ignored). */
export interface SandboxRequirements {
  requiredCapabilities?: readonly NamedCapability[];
  forbiddenCapabilities?: readonly NamedCapability[];
  image?: { identity?: string; requiredBinaries?: readonly string[] };
  /** Acceptable egress classes (one or several). */
  egress?: EgressClass | readonly EgressClass[];
  timeout?: {
    semantics?: readonly TimeoutSemantics[];
    /** Coarsest acceptable timeout granularity, ms. */
    granularityMs?: number;
    /** Budget for the latency objective's signal, ms. */
    maxReadyLatencyMs?: number;
    /** Expected completion budget, ms (informational; available to signal resolvers). */
    completionBudgetMs?: number;
    /** The sandbox must be allowed to live at least this long, ms. */
    requiredSandboxLifetimeMs?: number;
  };
  /** Minimum durability. */
  stateDurability?: StateDurability;
  /** Restrictions the pool must enforce. */
  restrictions?: readonly string[];
  /** Minimum isolation. */
  isolation?: IsolationLevel;
}

/** Routing options. */
export interface SandboxRoutingOptions {
  /** Default `balanced`. */
  strategy?: RoutingStrategy;
  /** Default `ready`. */
  latencyObjective?: LatencyObjective;
  /** Default `allowed`. `forbidden` means exactly one launch. */
  acquisitionFallback?: 'allowed' | 'forbidden';
  /** Integer 1..10, default 3. */
  maxAcquisitionAttempts?: number;
  /**
   * Deadline for one launch, ms (integer 1..3,600,000; default 300,000). A launch that
   * has not settled in time ends the provision with `AcquisitionTimeoutError` (outcome
   * unknown, no fallback); if it succeeds later, that sandbox is destroyed.
   */
  acquisitionTimeoutMs?: number;
}

/** A request for one sandbox. Every field is optional. */
export interface SandboxRequest {
  /** Exact pool: only this provider id may serve the request. */
  providerId?: ProviderId;
  requires?: SandboxRequirements;
  resources?: SandboxResources;
  /** Preferred regions, best first. With `required`, other regions are rejected. */
  region?: { preferred?: readonly string[]; required?: boolean };
  routing?: SandboxRoutingOptions;
  /** `fleet` or `none` refuse with `RoutingNotApplicableError`. */
  placement?: { authority?: 'router' | 'fleet' | 'none'; nodeAffinity?: unknown };
  /** Any value refuses with `RoutingNotApplicableError`. */
  nodeAffinity?: unknown;
  /** Passed to the runtime's launch. Labels gain the router's id label. */
  launch?: RuntimeLaunchOptions;
}

/** What `provision` returns: the router's id, never the provider's. */
export interface ProvisionedSandbox {
  /** `sbx_` + 32 lowercase hex. */
  id: string;
  providerId: ProviderId;
  /** Launch labels: the caller's plus `SANDBOX_ID_LABEL`. */
  labels: Record<string, string>;
}

// ---------------------------------------------------------------------------------------
// Explanations
// ---------------------------------------------------------------------------------------

/** Stable rejection codes. */
export type RejectionCode =
  | 'PROVIDER_ID_MISMATCH'
  | 'DETACHED_UNSUPPORTED'
  | 'CREDENTIALS_UNAVAILABLE'
  | 'REQUIRED_CAPABILITY_MISSING'
  | 'FORBIDDEN_CAPABILITY_PRESENT'
  | 'IMAGE_MISMATCH'
  | 'REQUIRED_BINARY_MISSING'
  | 'EGRESS_MISMATCH'
  | 'TIMEOUT_SEMANTICS_MISSING'
  | 'TIMEOUT_GRANULARITY'
  | 'SANDBOX_LIFETIME'
  | 'STATE_DURABILITY'
  | 'RESTRICTION_MISSING'
  | 'REGION_MISMATCH'
  | 'RESOURCES_INSUFFICIENT'
  | 'ISOLATION_INSUFFICIENT'
  | 'SIGNALS_UNRESOLVED'
  | 'INVALID_SIGNALS'
  | 'UNAVAILABLE'
  | 'LATENCY_BUDGET'
  | 'NOT_IN_PROVIDER_ORDER'
  /** Live health: the pool's circuit is open (detail: why, and when it is retried), or half-open with its one trial running. */
  | 'CIRCUIT_OPEN'
  /** `router.explain` with budgets: a rule has no room for the pool's estimated cost now (a provision skips it at launch time). */
  | 'BUDGET_EXCEEDED'
  /** `router.explain`: the pool has no launch token now (its `rateLimit`; detail: until when; a provision skips it at launch time). */
  | 'RATE_LIMITED'
  /** `router.explain`: the pool cools down after a classifier's `retryAfterMs` (detail: until when). */
  | 'COOLING_DOWN';

/** One reason a pool was rejected. */
export interface RejectionReason {
  code: RejectionCode;
  /** e.g. `pty`, `cpu 4 > 2`, `unknown`. */
  detail: string;
}

/** One scoring dimension. */
export interface ScoreDimension {
  raw: number;
  /** Min-max normalized over the eligible set; 1 is best. */
  normalized: number;
  /** Weight under `balanced`, else null. */
  weight: number | null;
  /**
   * Only with `health.observedSignals` (latency: objective `ready`; reliability): the declared
   * value, beside `raw` (the blend the ranking used).
   */
  declared?: number;
  /**
   * Only with `health.observedSignals`: the observed value (weighted launch-to-handle latency,
   * or success rate), or null until the pool has `health.minSamples` samples.
   */
  observed?: number | null;
}

/** An eligible pool in an explanation. */
export interface RankedProvider {
  providerId: ProviderId;
  /** 1 = first choice. */
  rank: number;
  /** In [0, 1]. */
  score: number;
  /** Region-preference tier (0 best), or null under capacity order. */
  regionTier: number | null;
  /** Position in `capacity.providerOrder` when capacity routing applies. */
  providerOrderPosition: number | null;
  breakdown: {
    cost: ScoreDimension;
    latency: ScoreDimension & { objective: LatencyObjective };
    reliability: ScoreDimension;
  };
  /** `providerId` when an equal score was decided by the id's byte order. */
  tieBreak: 'providerId' | null;
  /**
   * Only when the registry keeps a warm pool: whether a provision would claim one of this
   * pool's idle members now, and why not (`NOT_WARM`, `NOT_STARTED`, `CLOSED`, a miss reason).
   */
  warm?: { claim: boolean; reason: WarmMissReason | 'NOT_WARM' | 'NOT_STARTED' | 'CLOSED' | null };
}

/** A rejected pool in an explanation. */
export interface RejectedProvider {
  providerId: ProviderId;
  reasons: RejectionReason[];
}

/** A routing decision, explained. */
export interface RoutingExplanation {
  /** e.g. `0/5 providers eligible: 3 missing capability pty, 2 region not in [eu-west]`. */
  summary: string;
  strategy: RoutingStrategy;
  latencyObjective: LatencyObjective;
  maxAcquisitionAttempts: number;
  acquisitionFallback: 'allowed' | 'forbidden';
  eligible: RankedProvider[];
  rejected: RejectedProvider[];
}

// ---------------------------------------------------------------------------------------
// Router
// ---------------------------------------------------------------------------------------

/** A mapping record: `sbx_…` id ↔ provider ↔ provider sandbox id ↔ labels. */
export interface SandboxMapping {
  id: string;
  providerId: ProviderId;
  providerSandboxId: string;
  labels: Record<string, string>;
  /** ISO-8601. */
  createdAt: string;
  detached: boolean;
}

/**
 * Where mappings live. Supply a durable one (`SqliteMappingStore`) for identity across
 * restarts. `list` is what `reconcile` compares with; `intent`/`intents` (both or neither)
 * let the router record each launch before it happens (see `MappingIntent`). `delete` removes
 * the id's intent as well as its record.
 */
export interface SandboxMappingStore {
  put(record: SandboxMapping): Promise<void>;
  get(id: string): Promise<SandboxMapping | null | undefined>;
  delete(id: string): Promise<boolean | void>;
  list?(): Promise<SandboxMapping[]>;
  /** Inserts or replaces the intent of `intent.id` (never beside an existing record). */
  intent?(intent: MappingIntent): Promise<void>;
  /** Every intent. */
  intents?(): Promise<MappingIntent[]>;
}

/**
 * An intent record: written (`launching`) before each launch, bounded by
 * `callbackTimeoutMs`; replaced by the mapping when the provision succeeds; turned `failed`
 * when the launch ended with its outcome unknown; removed when nothing was allocated. With
 * it, `reconcile` tells a launch that was in flight when its process died (`WRITER_GONE`) or
 * that failed (`LAUNCH_FAILED`) from a sandbox someone else made with the router's labels,
 * without waiting for the grace period. If it cannot be written, nothing is launched
 * (`MappingPersistenceError` `MAPPING_INTENT_FAILED`).
 */
export interface MappingIntent {
  /** The `sbx_…` id stamped into the launch. */
  id: string;
  /** The pool of the current attempt. */
  providerId: ProviderId;
  state: 'launching' | 'failed';
  /** Epoch ms. */
  startedAt: number;
  /** Epoch ms after which the writer's provision has certainly ended (launch deadline + callbackTimeoutMs + 60 s). */
  expiresAt: number;
  /** Host name and process id of the writer (a dead pid on this host = the launch died with it). */
  ownerHost: string;
  ownerPid: number;
  /** The writing router's random session id. */
  ownerSession: string;
}

/** What a failure classifier answers. Only `retryable: true` may advance to another pool. */
export interface ProviderFailureClassification {
  /** SCREAMING_SNAKE code, 1-64 chars; anything else becomes PROVIDER_LAUNCH_OUTCOME_UNKNOWN. */
  code: string;
  retryable: boolean;
  /**
   * The provider said when to retry (e.g. a 429's `Retry-After`, in ms): the pool is skipped
   * with reason `COOLING_DOWN` for that long. Not a positive finite number: no cooldown.
   */
  retryAfterMs?: number;
}

/**
 * Judges one launch failure. `error` is what the runtime threw:
 * - with `new SandboxRouter({ registry })` (your own adapters): the original thrown value,
 *   unchanged, whatever it is (an SDK error with its status and text, a string, …). It is
 *   yours to read; the router never emits, throws, stores or prints it.
 * - with `createSandboxRouter` (the router wraps the SDKs): a `ProviderRuntimeError` with
 *   `status` (the SDK error's numeric HTTP status, when it has one) and `errorClass` (its
 *   class name), and no provider text.
 * Declared bivariantly, so a classifier typed `(error: ProviderRuntimeError, …)` (0.7) or
 * `(error: unknown, …)` both fit.
 */
export type ProviderFailureClassifier = {
  bivarianceHack(error: unknown, provider: ProviderDefinition): ProviderFailureClassification | Promise<ProviderFailureClassification>;
}['bivarianceHack'];

/** Request-scoped signals (live health, workload knowledge). Throwing excludes the pool. */
export type RoutingSignalResolver = (
  provider: ProviderDefinition,
  request: SandboxRequest,
) => ProviderRoutingSignals | Promise<ProviderRoutingSignals>;

/** Credential-readiness port: a boolean per provider, never credentials. */
export interface ProvisioningAvailability {
  hasAvailableCredentials(providerId: ProviderId): boolean | Promise<boolean>;
}

/**
 * Fields every event carries. Events carry ids and codes only, never credentials or
 * provider text.
 */
export interface RoutingEventBase {
  /** ISO-8601 time of emission. */
  at: string;
  /** The router's `sbx_…` id: of the provision (allocated before the launch), or of the destroyed sandbox. */
  sandboxId: string;
}

/** A budget rule's label and the request's value of it. */
export interface BudgetKey {
  label: string;
  value: string;
}

/** Which limit of a budget rule refused. */
export type BudgetDimension = 'cost' | 'launches' | 'concurrent';

/**
 * Router option `budgets`: one rule (docs/budgets.md). Every rule whose label the request
 * carries applies, and all must admit.
 */
export interface BudgetRule {
  /** 1-63 characters of `[a-z0-9][a-z0-9._-]*`, distinct. */
  id: string;
  /** The launch label the rule is keyed by (one budget per value of it). */
  key: { label: string };
  /** At least one: `cost` (sum of `estimatedCost` per window), `launches` (per window), `concurrent` (live now). */
  limit: { cost?: number; launches?: number; concurrent?: number };
  /**
   * Required with `cost` or `launches`: calendar-aligned in an IANA zone (`{ every: 'day',
   * timeZone: 'Europe/Berlin' }`, weeks start on Monday) or sliding (`{ slidingMs }`).
   */
  window?: { every: 'minute' | 'hour' | 'day' | 'week' | 'month'; timeZone: string } | { slidingMs: number };
  /** `'allow'`: a request without the label passes this rule. Default: refused (`BUDGET_KEY_MISSING`). */
  missing?: 'refuse' | 'allow';
  /** `'allow'`: with a shared ledger that cannot be asked, admit unreserved. Default: refuse (`BUDGET_STORE_UNAVAILABLE`). */
  onStoreDown?: 'refuse' | 'allow';
}

/** Cost, launches and concurrent slots of one budget key. */
export interface BudgetAmounts {
  cost: number;
  launches: number;
  concurrent: number;
}

/** What `router.budgetStatus()` lists (docs/budgets.md#reading-it). */
export interface BudgetStatusQuery {
  /** Only this rule's keys (its id). */
  rule?: string;
  /** Only this label value. */
  key?: string;
  /** At most this many rows, 1 to 10,000. Default 1,000. */
  limit?: number;
  /** The rows after this one: the last row of the page before, `{ rule: row.rule, key: row.key.value }`. */
  cursor?: { rule: string; key: string };
}

/** The router option `limits`: bounds on what a request carries, and how long a charge stays adjustable. */
export interface RouterLimits {
  /** Most launch labels a request may carry. Default 64 (at most 1,024). */
  labels?: number;
  /** Longest label key, UTF-8 bytes. Default 256 (at most 4,096). */
  labelKeyBytes?: number;
  /** Longest label value, UTF-8 bytes. Default 1,024 (at most 65,536). */
  labelValueBytes?: number;
  /**
   * How long a budget charge stays adjustable by `settleCost` after its sandbox is gone,
   * ms (in process; the shared ledger keeps charges for their windows). Default 300,000
   * (at most a day).
   */
  settleHorizonMs?: number;
}

/** One rule and key of `router.budgetStatus()`. */
export interface BudgetStatus {
  rule: string;
  key: BudgetKey;
  limit: { cost: number | null; launches: number | null; concurrent: number | null };
  /** Charged in the window (cost, launches) and live now (concurrent). */
  used: BudgetAmounts;
  /** Held by launches in flight. */
  reserved: BudgetAmounts;
  /** When the window frees what is used (ISO 8601); null without a window or charges. */
  resetsAt: string | null;
}

/** Why a circuit opened. */
export type HealthCause = 'CONSECUTIVE_FAILURES' | 'CONSECUTIVE_RETRYABLE_FAILURES' | 'TRIAL_FAILED';

/** One pool's live health (`router.health()`): ids, numbers and codes only. */
export interface PoolHealth {
  providerId: ProviderId;
  state: 'closed' | 'open' | 'half-open';
  /** Why it opened; null when closed. */
  cause: HealthCause | null;
  /** Open: ISO-8601 time from which one trial provision may use it; else null. */
  retryAt: string | null;
  /** Half-open: whether the single trial provision is running. */
  trialInFlight: boolean;
  /** Launch outcomes recorded. */
  samples: number;
  /** Exponentially weighted success rate (0..1); null before the first outcome. */
  successRate: number | null;
  /** Exponentially weighted launch-to-handle latency of successes, ms; null before the first success. */
  latencyMs: number | null;
  /** p95 of launch-to-handle latency from a streaming sketch (within 19 %), ms. */
  p95LatencyMs: number | null;
  /** Consecutive outcome-unknown failures, timeouts and malformed handles. */
  consecutiveFailures: number;
  /** Consecutive classified pre-allocation (retryable) failures. */
  consecutiveRetryableFailures: number;
  /** The current cooldown (open, half-open), or the first one (closed), ms. */
  cooldownMs: number;
}

/** Router option `health` (every field optional; defaults in docs/health.md). */
export interface HealthOptions {
  /**
   * The clock health reads, ms since the epoch. Default: the router's `clock`, else the wall
   * clock (read natively, no call into JavaScript). Inject one for deterministic tests.
   */
  clock?: () => number;
  /** Consecutive outcome-unknown failures, timeouts or malformed handles that open a circuit. Default 5. */
  failureThreshold?: number;
  /** Consecutive classified pre-allocation (retryable) failures that open a circuit. Default 10. */
  retryableFailureThreshold?: number;
  /** First cooldown, ms. Default 30,000. */
  cooldownMs?: number;
  /** Bound on the cooldown, which doubles per failed trial, ms. Default 600,000. */
  maxCooldownMs?: number;
  /** Half-life of the weighted statistics, in launches. Default 20. */
  halfLife?: number;
  /** Samples before observed signals join the ranking. Default 20. */
  minSamples?: number;
  /** Blend observed ready latency and success rate into ranking. Default false: declared signals only. */
  observedSignals?: boolean;
}


// <events: generated by scripts/event-types.mjs from src/core/events.rs; do not edit>

/** The request passed validation; a provision (or `provisionDetached`) starts. */
export interface ProvisionValidatedEvent extends RoutingEventBase {
  type: 'provision.validated';
  /** True for `provisionDetached`. */
  detached: boolean;
  /** With `decisions`: the id of the provision's decision record (`router.decisions()`). */
  decisionId?: string;
}

/** One per pool the filters rejected. */
export interface ProviderRejectedEvent extends RoutingEventBase {
  type: 'provider.rejected';
  providerId: ProviderId;
  reasons: RejectionReason[];
}

/** The attempt order is known. */
export interface ProvisionRankedEvent extends RoutingEventBase {
  type: 'provision.ranked';
  /** One line, as in `RoutingExplanation.summary`. */
  summary: string;
  /** The attempt order, best first. */
  providerIds: ProviderId[];
  /** With `decisions`: the id of the provision's decision record. */
  decisionId?: string;
}

/** Capacity routing or pacing skipped a pool without consuming an attempt. */
export interface CapacitySkippedEvent extends RoutingEventBase {
  type: 'capacity.skipped';
  providerId: ProviderId;
  status: 'UNKNOWN' | 'EXHAUSTED';
  /** `UNKNOWN`: a `CapacityUnknownReason`, `NO_CAPACITY_READER`, or `COORDINATOR_UNAVAILABLE` (a `capacity.coordinator` that could not be asked); `EXHAUSTED`: the full dimension (`cpu`, `sandboxes`, …), or pacing's `RATE_LIMITED` (no launch token) / `COOLING_DOWN`, or the wait queue's `QUEUED` (waiters ahead wait for it) (docs/rate-limits.md). */
  reason: string;
  /** `reason` as a bounded code (`EXHAUSTED_<DIMENSION>` for a full dimension): what telemetry counts. */
  skipReason: string;
  /** Pacing or the wait queue skipped it (`RATE_LIMITED`, `COOLING_DOWN`, `QUEUED`): what `sandbox_router_rate_limited_total` counts. */
  paced: boolean;
}

/** Pacing: the pool had no launch token (its `rateLimit`), so the provision skipped it (`capacity.skipped` says so too). */
export interface PoolRateLimitedEvent extends RoutingEventBase {
  type: 'pool.rate.limited';
  providerId: ProviderId;
  /** ISO-8601: when the pool's next launch token comes. */
  retryAt: string;
}

/** Pacing: a classifier answered `retryAfterMs` for this provision's failure on the pool, which is skipped (`COOLING_DOWN`) until `until`. */
export interface PoolCooldownStartedEvent extends RoutingEventBase {
  type: 'pool.cooldown.started';
  providerId: ProviderId;
  /** What the classifier answered (cut to a day). */
  retryAfterMs: number;
  /** ISO-8601: when the cooldown ends (a longer earlier one is kept). */
  until: string;
}

/** Pacing: a pool's `Retry-After` cooldown passed; it may launch again (reported at the first decision after its end). */
export interface PoolCooldownEndedEvent {
  type: 'pool.cooldown.ended';
  /** ISO-8601 time of emission. */
  at: string;
  providerId: ProviderId;
}

/** The wait queue (`queue`): every pool of the provision was blocked by something time clears, so it waits its turn. */
export interface QueueEnteredEvent extends RoutingEventBase {
  type: 'queue.entered';
  /** Provisions waiting, this one included. */
  depth: number;
  /** The pools it waits for. */
  providerIds: ProviderId[];
}

/** The wait queue: a pool freed and the waiting provision goes on to its launch (or claim). */
export interface QueueAdmittedEvent extends RoutingEventBase {
  type: 'queue.admitted';
  /** How long it waited, ms. */
  waitedMs: number;
}

/** The wait queue: the provision waited `maxWaitMs` and no pool freed (`QUEUE_TIMEOUT`). */
export interface QueueTimeoutEvent extends RoutingEventBase {
  type: 'queue.timeout';
  /** How long it waited, ms. */
  waitedMs: number;
  /** The pools that still blocked it. */
  providerIds: ProviderId[];
}

/** Capacity routing admitted a pool for the next launch. */
export interface CapacityAdmittedEvent extends RoutingEventBase {
  type: 'capacity.admitted';
  providerId: ProviderId;
}

/** A launch begins. */
export interface AttemptStartedEvent extends RoutingEventBase {
  type: 'attempt.started';
  providerId: ProviderId;
  /** 1-based. */
  attempt: number;
}

/** A launch failed. */
export interface AttemptFailedEvent extends RoutingEventBase {
  type: 'attempt.failed';
  providerId: ProviderId;
  /** 1-based. */
  attempt: number;
  /** Your classifier's code, or one of the router's (`PROVIDER_LAUNCH_OUTCOME_UNKNOWN`, `ACQUISITION_TIMEOUT`, …). */
  code: string;
  retryable: boolean;
}

/** A launch succeeded. */
export interface AttemptSucceededEvent extends RoutingEventBase {
  type: 'attempt.succeeded';
  providerId: ProviderId;
  /** 1-based. */
  attempt: number;
}

/** A proven pre-allocation failure moves on to the next pool. */
export interface FallbackAdvancedEvent extends RoutingEventBase {
  type: 'fallback.advanced';
  fromProviderId: ProviderId;
  toProviderId: ProviderId;
  /** The number of the attempt about to start. */
  attempt: number;
}

/** The mapping record was stored. */
export interface MappingPersistedEvent extends RoutingEventBase {
  type: 'mapping.persisted';
  providerId: ProviderId;
}

/** The mapping record could not be stored; a cleanup destroy follows (`cleanup.completed`). */
export interface MappingFailedEvent extends RoutingEventBase {
  type: 'mapping.failed';
  providerId: ProviderId;
}

/** The router destroyed a sandbox nobody holds: after a mapping failure, or a launch that succeeded after its deadline. */
export interface CleanupCompletedEvent extends RoutingEventBase {
  type: 'cleanup.completed';
  providerId: ProviderId;
  reason: 'mapping-failed' | 'late-launch';
  /** False: the sandbox may still exist; find it by `SANDBOX_ID_LABEL`. */
  succeeded: boolean;
}

/** The provision failed; `code` is the code of the error it rejects with. */
export interface ProvisionExhaustedEvent extends RoutingEventBase {
  type: 'provision.exhausted';
  code: string;
  /** With `NO_ELIGIBLE_PROVIDER` only: the explanation's summary. */
  summary?: string;
  /** With `decisions`: the id of the provision's decision record. */
  decisionId?: string;
}

/** `destroy(id)` completed and the mapping is gone. */
export interface SandboxDestroyedEvent extends RoutingEventBase {
  type: 'sandbox.destroyed';
  providerId: ProviderId;
}

/** `reconcile()`: one pool was listed (counts per class) or could not be (`reason`). Pool-level: no `sandboxId`. */
export interface ReconcileListedEvent {
  type: 'reconcile.listed';
  /** ISO-8601 time of emission. */
  at: string;
  providerId: ProviderId;
  status: 'known' | 'unknown';
  reason?: ReconcileUnknownReason;
  orphan?: number;
  staleMapping?: number;
  mapped?: number;
  pending?: number;
}

/** `reconcile({ reclaim: true })` acted on one sandbox, mapping or intent. */
export interface ReconcileReclaimedEvent extends RoutingEventBase {
  type: 'reconcile.reclaimed';
  providerId: ProviderId;
  class: ReconcileOutcome['class'];
  outcome: ReconcileOutcomeCode;
}

/** `reconcile()` finished. Totals over the pools; no `sandboxId`. */
export interface ReconcileCompletedEvent {
  type: 'reconcile.completed';
  /** ISO-8601 time of emission. */
  at: string;
  reclaim: boolean;
  timedOut: boolean;
  durationMs: number;
  orphan: number;
  staleMapping: number;
  mapped: number;
  pending: number;
  unknownPools: number;
}

/** Live health: a pool's circuit opened; it is excluded (`CIRCUIT_OPEN`) until `retryAt`. */
export interface HealthCircuitOpenedEvent extends RoutingEventBase {
  type: 'health.circuit.opened';
  providerId: ProviderId;
  reason: HealthCause;
  /** The consecutive failures that opened it (1 for a failed trial). */
  consecutiveFailures: number;
  cooldownMs: number;
  /** ISO-8601: from then, one trial provision may use it. */
  retryAt: string;
}

/** Live health: the cooldown is over and this provision is the single trial on the pool. */
export interface HealthCircuitHalfOpenEvent extends RoutingEventBase {
  type: 'health.circuit.half-open';
  providerId: ProviderId;
}

/** Live health: a success closed the pool's circuit. */
export interface HealthCircuitClosedEvent extends RoutingEventBase {
  type: 'health.circuit.closed';
  providerId: ProviderId;
}

/** Live health: a candidate of this provision was passed over at launch time (its circuit opened, or another provision took its half-open trial, after the route was decided). */
export interface HealthSkippedEvent extends RoutingEventBase {
  type: 'health.skipped';
  providerId: ProviderId;
  reason: 'CIRCUIT_OPEN';
}

/** Warm pools: a refill made an idle member. */
export interface WarmMemberLaunchedEvent extends RoutingEventBase {
  type: 'warm.member.launched';
  providerId: ProviderId;
}

/** Warm pools: a provision took an idle member (`sandboxId`: the member, now the result). */
export interface WarmClaimedEvent extends RoutingEventBase {
  type: 'warm.claimed';
  providerId: ProviderId;
  /** How long it was idle, ms (router clock). */
  ageMs: number;
}

/** Warm pools: a provision could not claim a member of this pool and launches cold. */
export interface WarmMissEvent extends RoutingEventBase {
  type: 'warm.miss';
  providerId: ProviderId;
  reason: WarmMissReason;
}

/** Warm pools: an idle member was retired and destroyed: it aged out (`AGE`: maxIdleMs, or close to the pool's lifetime), or the pool's target fell below its idle members (`SURPLUS`). */
export interface WarmMemberExpiredEvent extends RoutingEventBase {
  type: 'warm.member.expired';
  providerId: ProviderId;
  ageMs: number;
  /** False: the destroy failed (or the provider could not be asked); its record stays for `reconcile`. */
  destroyed: boolean;
  reason: 'AGE' | 'SURPLUS';
}

/** Warm pools: an idle member was found gone at the provider and dropped. */
export interface WarmMemberLostEvent extends RoutingEventBase {
  type: 'warm.member.lost';
  providerId: ProviderId;
}

/** Warm pools: refills paused after `pauseAfterFailures` failures in a row. */
export interface WarmRefillPausedEvent {
  type: 'warm.refill.paused';
  /** ISO-8601 time of emission. */
  at: string;
  providerId: ProviderId;
  code: string;
}

/** Warm pools: a launch on a paused pool succeeded (its circuit closed); refills resume at once. */
export interface WarmRefillResumedEvent {
  type: 'warm.refill.resumed';
  /** ISO-8601 time of emission. */
  at: string;
  providerId: ProviderId;
}

/** Warm pools: a demand-following pool's target (`warm: { min, max }`) moved. */
export interface WarmTargetChangedEvent {
  type: 'warm.target.changed';
  /** ISO-8601 time of emission. */
  at: string;
  providerId: ProviderId;
  /** Idle members to keep from now on. */
  target: number;
  previous: number;
  /** `DEMAND`: claims per second × create latency; `MIN` / `MAX`: held at a bound. */
  reason: 'MIN' | 'DEMAND' | 'MAX';
}

/** Budgets: a provision reserved its candidate pool's cost, a launch and a concurrent slot against every applying rule. */
export interface BudgetReservedEvent extends RoutingEventBase {
  type: 'budget.reserved';
  providerId: ProviderId;
  /** The pool's `estimatedCost`, reserved. */
  cost: number;
  /** Ids of the rules it was reserved against. */
  rules: string[];
}

/** Budgets: a reservation or a concurrent slot was given back: a failure proven pre-allocation (`PRE_ALLOCATION_FAILURE`), a pool skipped after its reservation (`NOT_LAUNCHED`: capacity, health), `router.destroy` (`DESTROYED`), or `reconcile`'s reclaim (`RECLAIMED`). `cost` and `rules` are set for a reservation. */
export interface BudgetReleasedEvent extends RoutingEventBase {
  type: 'budget.released';
  providerId: ProviderId;
  reason: 'PRE_ALLOCATION_FAILURE' | 'NOT_LAUNCHED' | 'DESTROYED' | 'RECLAIMED';
  cost?: number;
  rules?: string[];
}

/** Budgets (shared ledger): a launch settled after its reservation had been freed, because this process's lease lapsed (the database unreachable, or the process suspended, for longer than `leaseMs`): its charge was written again, over its rules' limits if need be, never dropped. */
export interface BudgetChargedLateEvent extends RoutingEventBase {
  type: 'budget.charged.late';
  providerId: ProviderId;
}

/** Budgets: a rule refused a candidate pool (the pool is skipped without consuming an attempt). */
export interface BudgetRefusedEvent extends RoutingEventBase {
  type: 'budget.refused';
  providerId: ProviderId;
  /** `BUDGET_EXCEEDED`, or `BUDGET_STORE_UNAVAILABLE` (the shared ledger could not be asked). */
  reason: string;
  rule: string;
  key: BudgetKey;
  dimension: BudgetDimension;
  limit: number;
  used: number;
  reserved: number;
  /** When the window frees what is used (ISO 8601); null for `concurrent`. */
  resetsAt: string | null;
  /** True only when releasing the in-flight reservations could make room. */
  retryable: boolean;
}

/** A structured event, discriminated on `type`: `switch (event.type)` narrows it. */
export type RoutingEvent =
  | ProvisionValidatedEvent
  | ProviderRejectedEvent
  | ProvisionRankedEvent
  | CapacitySkippedEvent
  | PoolRateLimitedEvent
  | PoolCooldownStartedEvent
  | PoolCooldownEndedEvent
  | QueueEnteredEvent
  | QueueAdmittedEvent
  | QueueTimeoutEvent
  | CapacityAdmittedEvent
  | AttemptStartedEvent
  | AttemptFailedEvent
  | AttemptSucceededEvent
  | FallbackAdvancedEvent
  | MappingPersistedEvent
  | MappingFailedEvent
  | CleanupCompletedEvent
  | ProvisionExhaustedEvent
  | SandboxDestroyedEvent
  | ReconcileListedEvent
  | ReconcileReclaimedEvent
  | ReconcileCompletedEvent
  | HealthCircuitOpenedEvent
  | HealthCircuitHalfOpenEvent
  | HealthCircuitClosedEvent
  | HealthSkippedEvent
  | WarmMemberLaunchedEvent
  | WarmClaimedEvent
  | WarmMissEvent
  | WarmMemberExpiredEvent
  | WarmMemberLostEvent
  | WarmRefillPausedEvent
  | WarmRefillResumedEvent
  | WarmTargetChangedEvent
  | BudgetReservedEvent
  | BudgetReleasedEvent
  | BudgetChargedLateEvent
  | BudgetRefusedEvent;
// </events>

/** Event types the router emits. */
export type RoutingEventType = RoutingEvent['type'];

/**
 * An event sink: a function, or an object with `emit`. Called synchronously, never awaited;
 * its return value is ignored, and a throw or a rejection changes nothing.
 */
export type RoutingObserver = ((event: RoutingEvent) => unknown) | { emit(event: RoutingEvent): unknown };

/** Options of `new SandboxRouter`. */
export interface SandboxRouterOptions {
  registry: ProviderRegistry;
  /** Default: a new `InMemoryMappingStore`. */
  mappings?: SandboxMappingStore;
  observer?: RoutingObserver;
  /** Omit for the safe default: every launch failure is terminal. */
  classifyProviderFailure?: ProviderFailureClassifier;
  resolveRoutingSignals?: RoutingSignalResolver;
  provisioning?: ProvisioningAvailability;
  /** Capacity routing (see docs/capacity.md). Omit to keep strategy ranking. */
  capacity?: CapacityPolicy;
  /** Bound on each caller callback (readiness, resolver, classifier, mapping store), ms. Default 10,000. */
  callbackTimeoutMs?: number;
  /**
   * Bound on each runtime call made for an operation by id (runScript, uploadBundle, start,
   * stop, destroy, getById) and for cleanups, ms. Default 600,000. A runScript whose own
   * `timeoutMs` is longer gets that plus 60 s. Past it: `ProviderRuntimeError` with code
   * `OPERATION_TIMEOUT` (outcome unknown; a destroy keeps the mapping).
   */
  operationTimeoutMs?: number;
  /**
   * The fleet name stamped into every launch under `SANDBOX_FLEET_LABEL` (beside the id), and
   * the one `reconcile` looks for. 1-63 characters of `[a-z0-9][a-z0-9._-]*`. Default
   * `'default'`. Routers that share a provider account but not a mapping store must use
   * different fleets: each one's reconcile treats the other's sandboxes as unmapped.
   */
  fleet?: string;
  /**
   * Live health from real launch outcomes (circuit breaker, statistics, optional observed
   * signals). On by default; `false` turns tracking off. Per process (docs/health.md).
   */
  health?: boolean | HealthOptions;
  /**
   * The router's clock, ms since the epoch, read by everything that measures time against
   * the router's own rules (live health, unless `health.clock` is given). Default: the wall
   * clock (read natively, no call into JavaScript). Inject one for deterministic tests: a
   * throw or a non-finite answer is a typed `INVALID_CONFIGURATION` error (field `clock`).
   * Budgets' windows read it too.
   */
  clock?: () => number;
  /**
   * Budgets and quotas per tenant (docs/budgets.md): reserved before each launch, settled
   * by its outcome. Per process (and in a `SqliteMappingStore` when that is the store);
   * shared by every process with a `PostgresMappingStore` as `capacity.coordinator`.
   */
  budgets?: readonly BudgetRule[];
  /**
   * Bounds on what a request carries (launch labels: count, key and value length; a label
   * over them is `INVALID_REQUEST` naming it) and the budgets' settle horizon
   * (docs/budgets.md#what-is-kept). Defaults: 64 labels, keys of 256 bytes, values of 1,024.
   */
  limits?: RouterLimits;
  /**
   * The wait queue (docs/rate-limits.md#the-wait-queue). Off by default: a provision whose
   * pools are all blocked fails at once. On, one blocked only by what time clears (no launch
   * token, a cooldown, capacity full, a budget's concurrent slot) waits its turn, up to
   * `maxWaitMs` (`QueueTimeoutError`); past `maxDepth` waiting, `QUEUE_FULL` at once.
   */
  queue?: boolean | QueueOptions;
  /**
   * Decision records (docs/decisions.md). Off by default: nothing is recorded. On, each
   * provision (and `provisionDetached`, and a warm claim) leaves one record when it settles:
   * the request, the registry's facts, every input the decision read, each step and the
   * outcome; read them with `router.decisions()`, or hand each to `sink`.
   */
  decisions?: boolean | DecisionOptions;
  /**
   * OpenTelemetry metrics and traces (docs/telemetry.md). Off by default, and free when
   * off. `true` uses the global providers of `@opentelemetry/api` (an optional peer
   * dependency, required only then: missing, it is a `ProviderPackageMissingError` naming
   * it); an object names the providers (either omitted: the global one). A failing meter,
   * tracer or exporter never changes an outcome.
   */
  telemetry?: boolean | TelemetryOptions;
}

/** What `getMeter` needs of a meter provider: an SDK `MeterProvider`, or `metrics.getMeterProvider()`. */
export interface TelemetryMeterProvider {
  getMeter(name: string, version?: string, options?: { schemaUrl?: string }): object;
}

/** What `getTracer` needs of a tracer provider: an SDK `TracerProvider`, or `trace.getTracerProvider()`. */
export interface TelemetryTracerProvider {
  getTracer(name: string, version?: string, options?: { schemaUrl?: string }): object;
}

/** Router option `telemetry` as an object (docs/telemetry.md). */
export interface TelemetryOptions {
  /** Where the router's instruments are made. Default: the global meter provider, as registered when the router is made. */
  meterProvider?: TelemetryMeterProvider;
  /** Where its spans are made. Default: the global tracer provider. */
  tracerProvider?: TelemetryTracerProvider;
  /**
   * Adds the provision span's W3C `traceparent` to each launch's labels (key
   * `traceparent`), so a provider's side can join the trace. Not written into the mapping
   * record or the returned labels. Default `false`.
   */
  propagateToLabels?: boolean;
}

/** Why a pool could not be listed by `reconcile`. */
export type ReconcileUnknownReason =
  | 'TIMEOUT'
  | 'READ_FAILED'
  | 'MALFORMED'
  | 'RATE_LIMITED'
  | 'UNAUTHORIZED'
  | 'PAGE_LIMIT_EXCEEDED'
  | 'NOT_SUPPORTED';

/** Why a stamped sandbox without a mapping is an orphan. */
export type OrphanReason =
  /** No intent record, and its provider-reported age is at least `graceMs`. */
  | 'GRACE_ELAPSED'
  /** Its intent says the launch failed with its outcome unknown. */
  | 'LAUNCH_FAILED'
  /** Its `launching` intent names a process on this host that no longer exists. */
  | 'WRITER_GONE'
  /** Its `launching` intent outlived the launch deadline. */
  | 'INTENT_EXPIRED'
  /** Its intent was written by this router, whose provision of it is over. */
  | 'INTENT_ABANDONED'
  /** Its id is mapped, to another sandbox: an earlier attempt that allocated after all. */
  | 'DUPLICATE_OF_MAPPED'
  /** An idle warm member of a pool that keeps no warm pool any more (docs/warm-pools.md). */
  | 'WARM_POOL_GONE';

/** Why an item is pending (never touched). */
export type PendingReason =
  | 'IN_FLIGHT'
  | 'IN_FLIGHT_ELSEWHERE'
  | 'WITHIN_GRACE'
  | 'AGE_UNKNOWN'
  | 'NOT_LISTED_YET'
  /** A runtime label search returned a handle without labels: matched to nothing, never reclaimed. */
  | 'STAMP_UNVERIFIED';

/** What `reconcile({ reclaim: true })` did with one item. */
export type ReconcileOutcomeCode =
  | 'DESTROYED'
  | 'ALREADY_GONE'
  | 'DESTROY_FAILED'
  | 'NOW_MAPPED'
  | 'IN_FLIGHT'
  | 'UNMAPPED'
  | 'STILL_EXISTS'
  | 'LOOKUP_FAILED'
  | 'UNMAP_FAILED'
  | 'INTENT_REMOVED'
  | 'TIMED_OUT'
  | 'DEADLINE';

export interface ReconcileOutcome {
  providerId: ProviderId;
  sandboxId: string;
  providerSandboxId: string | null;
  class: 'orphan' | 'stale-mapping' | 'stale-intent';
  outcome: ReconcileOutcomeCode;
}

/** One pool's part of a reconcile report. */
export interface ReconcilePool {
  providerId: ProviderId;
  /** `unknown`: the pool could not be listed (`reason`); nothing of it was classified. */
  status: 'listed' | 'unknown';
  reason?: ReconcileUnknownReason;
  /** `native`: the provider's list API through the router's HTTP; `runtime`: the runtime's `findAllByLabels`. */
  finder: 'native' | 'runtime';
  counts: { orphan: number; staleMapping: number; mapped: number; pending: number };
  orphan: Array<{ sandboxId: string; providerSandboxId: string; reason: OrphanReason }>;
  staleMapping: Array<{ sandboxId: string; providerSandboxId: string; reason: 'NOT_LISTED' }>;
  /** The `sbx_…` ids both sides agree on. */
  mapped: string[];
  pending: Array<{ sandboxId: string | null; providerSandboxId: string; reason: PendingReason }>;
}

/** What `reconcile` found and did. Ids, counts and codes only: never provider text. */
export interface ReconcileReport {
  reclaim: boolean;
  fleet: string;
  graceMs: number;
  /** ISO-8601. */
  startedAt: string;
  durationMs: number;
  /** The deadline passed: some pools or items were not done (`TIMEOUT` / `DEADLINE`). */
  timedOut: boolean;
  pools: Record<string, ReconcilePool>;
  /** Intents whose launch is over and left nothing listed (removed with `reclaim`). */
  staleIntents: string[];
  outcomes: ReconcileOutcome[];
  totals: { orphan: number; staleMapping: number; mapped: number; pending: number; unknownPools: number };
}

/** Options of `reconcile`. */
export interface ReconcileOptions {
  /** Pool ids to reconcile. Default: every registered pool. */
  providers?: readonly string[];
  /** Destroy orphans (as owned sandboxes) and remove stale mappings. Default false: a dry run. */
  reclaim?: boolean;
  /** Age before a stamped sandbox without mapping or intent is an orphan. Default 900,000 (15 min). */
  graceMs?: number;
  /** Destroys / unmaps in flight at once. Default 8. */
  concurrency?: number;
  /** Deadline of the whole run, ms. Default 120,000. */
  timeoutMs?: number;
}

/** The router option `queue`. */
export interface QueueOptions {
  /** Longest wait, ms (1 to 3,600,000). Default 30,000. */
  maxWaitMs?: number;
  /** Most provisions waiting at once (1 to 100,000); one more is `QUEUE_FULL`. Default 1,000. */
  maxDepth?: number;
  /** The launch label whose values take turns (e.g. `{ label: 'tenant' }`); omitted: first come, first served. */
  fairBy?: { label: string };
}

/** The router option `decisions`. */
export interface DecisionOptions {
  /** Records kept in the router's ring, oldest dropped first (1 to 100,000). Default 1,000. */
  keep?: number;
  /**
   * How a record writes launch label values (and budget keys): `'hash'` (default) a keyed
   * HMAC-SHA-256 (`h:…`: equal values stay equal within this router), `'keep'` the values,
   * `'drop'` the keys only (values `null`).
   */
  labels?: 'hash' | 'keep' | 'drop';
  /** Called with each record as its provision settles; a throw or rejection changes nothing. */
  sink?: (record: DecisionRecord) => unknown;
}

/** `router.decisions(query)`. */
/** `PostgresMappingStore.decisionSink(options)`: the fleet table's retention. */
export interface DecisionTableOptions {
  /** At most this many records, the newest (1 to 100,000,000; default 100,000). */
  keep?: number;
  /** None written longer ago than this, in ms (1,000 to 400 days; default 7 days). */
  maxAgeMs?: number;
}

export interface DecisionQuery {
  /** Only the record of this provision (`sbx_…`). */
  sandboxId?: string;
  /** Only records decided at or after this instant: epoch ms (the router's `clock`) or ISO 8601. */
  since?: number | string;
  /** At most this many (1 to 100,000). Default: every kept record. */
  limit?: number;
}

/**
 * One provision's decision record (schema `sandbox-router.decision/1`), plain JSON. It holds
 * no credential, no provider error text (codes only), no launch `env` or `name`, and no label
 * value unless `labels: 'keep'`.
 */
export interface DecisionRecord {
  schema: 'sandbox-router.decision/1';
  /** `dec_` and the provision's sandbox id's hex. */
  id: string;
  /** The router's clock when it decided, epoch ms. */
  at: number;
  /** The sandbox it made, when it made one. */
  sandboxId?: string;
  detached: boolean;
  /** How label values are written (`DecisionOptions.labels`). */
  labels: 'hash' | 'keep' | 'drop';
  /** The request as validated, with `launch` reduced to its labels. */
  request: Record<string, unknown>;
  /** The registry's digest (of every pool's facts), every pool's id, and the facts (id, capabilities, signals, rateLimit) of each pool the decision ranked. */
  registry: { digest: string; ids: ProviderId[]; pools: Array<Record<string, unknown>> };
  /** What the decision read: the clock, each pool's health and pacing, the callbacks' answers, budgets' usage, capacity readings. */
  inputs: Record<string, unknown>;
  /** The attempt order, best first (empty when no pool was eligible). */
  order: ProviderId[];
  /** Each step, in order: the decision's events (`type` and their fields, no `at` or `sandboxId`). */
  steps: Array<{ type: string } & Record<string, unknown>>;
  /** The pool it went to, or the code of the error it failed with. */
  outcome: { providerId: ProviderId } | { code: string };
}

/** `router.replay(record)`. */
export interface ReplayResult {
  /** Whether the replay decided as recorded: the same order, and the same pool (or code). */
  same: boolean;
  recorded: ReplaySide;
  replayed: ReplaySide;
  /** Each pool whose part changed: what it was, what it is now, and why as far as the replay can tell. */
  changes: Array<{ pool: ProviderId; was: string; now: string; why: string }>;
  /** What the replay assumed where the record had no answer (a pool it never read or launched on). */
  assumed: string[];
  /** One line, e.g. `daytona → e2b: daytona now rejected: MISSING_CAPABILITY gpu`. */
  summary: string;
}

/** One side of a replay. */
export interface ReplaySide {
  order: ProviderId[];
  providerId?: ProviderId;
  code?: string;
}

/** `provision(request, options)`. */
export interface ProvisionOptions {
  /** Aborts the provision before its launch (`ProvisionAbortedError` `ABORTED`); a launch under way is not stopped. */
  signal?: AbortSignal;
}

/** `router.queueStatus()`: the wait queue and each pool's pacing, now. */
export interface QueueStatus {
  /** Whether the router has a queue (option `queue`). */
  enabled: boolean;
  depth: number;
  /** How long the oldest waiter has waited, ms (0 when none waits). */
  oldestWaitMs: number;
  /** Per value of the `fairBy` label with a waiter, by value (`''`: requests without the label). */
  byKey: Array<{ value: string; depth: number; oldestWaitMs: number }>;
  /** Every registered pool: its whole launch tokens (absent without `rateLimit`) and cooldown end (ISO 8601, absent when none). */
  pools: Array<{ providerId: ProviderId; tokens?: number; coolingUntil?: string }>;
}

/** The router: filters, ranks, acquires with bounded fallback, and maps ids. */
export declare class SandboxRouter {
  constructor(options: SandboxRouterOptions);
  /** Acquires a sandbox on the best eligible pool. */
  provision(request?: SandboxRequest, options?: ProvisionOptions): Promise<ProvisionedSandbox>;
  /** Acquires through `launchDetached`; pools without it are ineligible (`DETACHED_UNSUPPORTED`). */
  provisionDetached(request?: SandboxRequest, options?: ProvisionOptions): Promise<ProvisionedSandbox>;
  /** The wait queue's depth and oldest wait (overall and per `fairBy` value), and each pool's tokens and cooldown. */
  queueStatus(): QueueStatus;
  /** The kept decision records (option `decisions`; none without it), newest first. */
  decisions(query?: DecisionQuery): DecisionRecord[];
  /**
   * Decides a recorded decision again by this router's registry and options, on the record's
   * inputs (docs/decisions.md#replay). `record`: the record, or its JSON text (a line of a
   * `jsonLinesSink` file). A malformed record is `INVALID_DECISION_RECORD`.
   */
  replay(record: DecisionRecord | string): ReplayResult;
  /**
   * The attempt order `provision` would use with registered signals (synchronous; no
   * readiness, resolver or capacity). At most `maxAcquisitionAttempts` ids.
   */
  route(request?: SandboxRequest, options?: { detached?: boolean }): ProviderId[];
  /** Explains the decision without launching (runs readiness and the resolver). */
  explain(request?: SandboxRequest, options?: { detached?: boolean }): Promise<RoutingExplanation>;
  /** Reads every pool's capacity reader concurrently; never creates anything. */
  getCapacity(): Promise<Record<string, CapacityMeasurement>>;
  /** Live health of every registered pool, in registration order (empty with `health: false`). */
  health(): PoolHealth[];
  runScript(id: string, options: RunScriptOptions): Promise<RunScriptResult>;
  uploadBundle(id: string, bundle: UploadBundle): Promise<void>;
  start(id: string): Promise<RuntimeHandle>;
  stop(id: string): Promise<void>;
  /** The mapping record (a copy). */
  getSandbox(id: string): Promise<SandboxMapping>;
  /** Destroys and unmaps. An already-deleted provider sandbox is not an error. */
  destroy(id: string): Promise<void>;
  /**
   * Compares each pool's sandboxes carrying this router's stamp with the mapping store.
   * A dry run unless `reclaim: true`. Throws only for invalid options
   * (`SandboxRequestValidationError`) or a store that cannot be listed
   * (`MappingPersistenceError` `MAPPING_READ_FAILED`); pool failures are `unknown` pools.
   */
  reconcile(options?: ReconcileOptions): Promise<ReconcileReport>;
  /**
   * Fills every warm pool to its size, then keeps refilling in the background; resolves
   * when each reached its size, or with why not, per pool (docs/warm-pools.md).
   */
  warmUp(): Promise<WarmUpReport>;
  /** Every warm pool's counters, in registration order. */
  warmStatus(): Promise<WarmPoolStatus[]>;
  /**
   * Stops refilling and destroys idle warm members; `keepWarm: true` (a durable store
   * only, else `INVALID_CONFIGURATION`) leaves them recorded for the next process.
   */
  close(options?: { keepWarm?: boolean }): Promise<WarmCloseResult>;
  /**
   * Replaces the budget charge of sandbox `id` (its pool's `estimatedCost`) with what it
   * actually cost, in the windows it was charged in. Resolves to whether a charge was found.
   */
  settleCost(id: string, actualCost: number): Promise<boolean>;
  /**
   * One page of every budget rule's keys that hold something (in rule order, then key
   * order): used, reserved, limit, and when the window resets. At most `limit` rows
   * (default 1,000); the next page is `{ cursor: { rule: last.rule, key: last.key.value } }`.
   */
  budgetStatus(options?: BudgetStatusQuery): Promise<BudgetStatus[]>;
  /** How many rows `budgetStatus` would list for `{ rule?, key? }` (every page), without building them. */
  budgetCount(options?: { rule?: string; key?: string }): Promise<number>;
}

/** Reference registry held in memory. */
export declare class InMemoryProviderRegistry implements ProviderRegistry {
  constructor(definitions?: readonly ProviderDefinition[]);
  register(definition: ProviderDefinition): this;
  list(): ProviderDefinition[];
  get(id: ProviderId): ProviderDefinition | undefined;
  readonly size: number;
}

/** Reference mapping store held in memory (native). Not durable. */
export declare class InMemoryMappingStore implements SandboxMappingStore {
  constructor();
  put(record: SandboxMapping): Promise<void>;
  get(id: string): Promise<SandboxMapping | null>;
  delete(id: string): Promise<boolean>;
  list(): Promise<SandboxMapping[]>;
  readonly size: number;
}

/** Validates a provider id; throws `ProviderRegistryError` (`INVALID_PROVIDER_ID`). */
export declare function asProviderId(id: string): ProviderId;

/**
 * A `decisions.sink` that appends each record to `path` as one line of JSON, synchronously,
 * before the provision's promise settles. After `close()` it writes nothing more.
 */
export declare function jsonLinesSink(path: string): ((record: DecisionRecord) => void) & { close(): Promise<void> };

/** Pure, synchronous decision over a list of definitions (upstream signature). */
export declare function routeProviders(request: SandboxRequest | undefined, providers: readonly ProviderDefinition[]): RoutingExplanation;

/** The label key under which the router stamps its `sbx_…` id before every launch. */
export declare const SANDBOX_ID_LABEL: 'agent-relay-sbx-id';

/** The label key under which the router stamps its fleet name (router option `fleet`) before every launch. */
export declare const SANDBOX_FLEET_LABEL: 'agent-relay-sbx-fleet';

/** Options of `SqliteMappingStore`. */
export interface SqliteMappingStoreOptions {
  /** The database file (created, with its directory, on first use). */
  path: string;
  /** `normal` (default): a write survives the process, not necessarily a power loss. `full`: fsync per write. */
  durability?: 'normal' | 'full';
}

/**
 * A durable mapping store in one SQLite file (SQLite compiled into the addon), in WAL mode,
 * its schema versioned and migrated on open; keeps intent records too. One machine's file:
 * processes on one host may share it, hosts may not.
 */
export declare class SqliteMappingStore implements SandboxMappingStore {
  constructor(options: string | SqliteMappingStoreOptions);
  /** The file's absolute path. */
  readonly path: string;
  /** Opens (creates, migrates) the file now; resolves to its schema version. */
  open(): Promise<number>;
  put(record: SandboxMapping): Promise<void>;
  get(id: string): Promise<SandboxMapping | null>;
  delete(id: string): Promise<boolean>;
  list(): Promise<SandboxMapping[]>;
  count(): Promise<number>;
  intent(intent: MappingIntent): Promise<void>;
  intents(): Promise<MappingIntent[]>;
  /** Closes the file; the next operation opens it again. */
  close(): void;
  toJSON(): { type: 'SqliteMappingStore'; path: string };
}

/** Connection options of `PostgresMappingStore` as an object (or give a URL string). */
export interface PostgresConnectionOptions {
  /** Host name, IP address, or a unix socket directory (starts with `/`). */
  host: string;
  /** Default 5432. */
  port?: number;
  user: string;
  /** Kept in native memory only: never in an error, event, `util.inspect` or `JSON.stringify`. */
  password?: string;
  /** Default: the user's name. */
  database?: string;
  /** TLS (default: none). See {@link PostgresSslOptions}. */
  ssl?: boolean | PostgresSslOptions;
}

/** A connection URL as an object, so that TLS options can go with it. */
export interface PostgresUrlConnectionOptions {
  /** `postgres://user:password@host:port/database?sslmode=...` (or libpq's `key=value` form). */
  url: string;
  /** TLS: `true` / `{ ca }` (the mode is then the URL's `sslmode`, else `verify-full`), `false` (= `disable`). */
  ssl?: boolean | PostgresSslOptions;
}

/**
 * What a connection does about TLS (rustls; trust roots: Mozilla's, plus `ca`). Every mode
 * that uses TLS verifies the server's certificate chain; there is no unverified TLS.
 * - `disable`: plain text.
 * - `prefer`: TLS (chain and host name verified) if the server offers it, plain text if it
 *   does not (a certificate that fails verification fails the connection).
 * - `require`: TLS, chain and host name verified (node-postgres's meaning; libpq's `require`
 *   does not verify).
 * - `verify-ca`: TLS, chain verified, host name not checked.
 * - `verify-full`: TLS, chain and host name verified.
 */
export type PostgresSslMode = 'disable' | 'prefer' | 'require' | 'verify-ca' | 'verify-full';

/** `ssl: true` is `{}`; `ssl: false` is `{ mode: 'disable' }`. */
export interface PostgresSslOptions {
  /** Default: the URL's `sslmode`, else `'verify-full'`. */
  mode?: PostgresSslMode;
  /**
   * Extra trusted CA certificates (PEM text, one or more; for a private CA or a self-signed
   * server). Never read from a file by the store; never shown in an error, `util.inspect` or
   * `JSON.stringify`.
   */
  ca?: string;
}

/** Options of `PostgresMappingStore`. */
export interface PostgresMappingStoreOptions {
  /**
   * `postgres://user:password@host:port/database?sslmode=verify-full`, or an object. Without
   * `sslmode` / `ssl`, the connection is plain text. A TLS failure (untrusted certificate,
   * wrong host name, TLS required but not offered) fails the call with its usual code
   * (`MAPPING_STORE_OPEN_FAILED`, `MAPPING_READ_FAILED`, ...) and `tls: true`.
   */
  connection: string | PostgresConnectionOptions | PostgresUrlConnectionOptions;
  /** Bound of every database call (client and server side), ms. Default 5,000. */
  timeoutMs?: number;
  /** Most connections open at once. Default 10. */
  poolSize?: number;
  /** Lease of this process's in-flight capacity holds, renewed every third of it, ms. Default 30,000. */
  leaseMs?: number;
}

/**
 * Mappings and intents in PostgreSQL, shared by every router process pointed at the same
 * database; also a shared capacity ledger (`capacity: { coordinator: store }`). The schema is
 * created and migrated on first use (versioned, concurrent first uses serialized). Writes fail
 * as `MAPPING_PERSISTENCE_FAILED`, reads as `MAPPING_READ_FAILED`, `open` as
 * `MAPPING_STORE_OPEN_FAILED` / `MAPPING_STORE_SCHEMA_TOO_NEW`.
 */
export declare class PostgresMappingStore implements SandboxMappingStore {
  constructor(options: string | PostgresMappingStoreOptions);
  /** Bound of one database call, ms. */
  readonly timeoutMs: number;
  /** Lease of this process's in-flight holds, ms. */
  readonly leaseMs: number;
  /** Connects and creates or migrates the schema now; resolves to its version. */
  open(): Promise<number>;
  put(record: SandboxMapping): Promise<void>;
  get(id: string): Promise<SandboxMapping | null>;
  delete(id: string): Promise<boolean>;
  list(): Promise<SandboxMapping[]>;
  count(): Promise<number>;
  intent(intent: MappingIntent): Promise<void>;
  intents(): Promise<MappingIntent[]>;
  /** Unexpired capacity holds on a pool in the shared ledger, every process's. */
  held(providerId: string): Promise<number>;
  /**
   * A `decisions.sink` that keeps each record in the fleet's table `sandbox_router_decisions`,
   * at most `keep` (default 100,000) records, none older than `maxAgeMs` (default 7 days); a
   * write that fails drops its record. Throws `INVALID_CONFIGURATION` naming the field.
   */
  decisionSink(options?: DecisionTableOptions): (record: DecisionRecord) => Promise<void>;
  /** The fleet's kept decision records, newest first (`limit` default 1,000). Rejects with `INVALID_INPUT` naming a bad field. */
  decisions(query?: DecisionQuery): Promise<DecisionRecord[]>;
  /** Ends this process's ledger session (its in-flight holds are released); closes idle connections. */
  close(): Promise<void>;
  toJSON(): { type: 'PostgresMappingStore'; timeoutMs: number; leaseMs: number };
}

// ---------------------------------------------------------------------------------------
// Capacity
// ---------------------------------------------------------------------------------------

/** Why a measurement is unknown. */
export type CapacityUnknownReason =
  | 'LIMIT_NOT_CONFIGURED'
  | 'NOT_SUPPORTED'
  | 'DEMAND_NOT_CONFIGURED'
  | 'TIMEOUT'
  | 'READ_FAILED'
  | 'MALFORMED'
  | 'RATE_LIMITED'
  | 'UNAUTHORIZED'
  | 'PAGE_LIMIT_EXCEEDED';

/** One measured quota dimension. */
export interface CapacityResource {
  resource: 'cpu' | 'memory' | 'disk' | 'sandboxes' | (string & {});
  used: number;
  limit: number;
  unit: 'vCPU' | 'MiB' | 'sandboxes' | (string & {});
  headroom: number;
  /** The configured pool's allocation per launch. */
  required: number;
}

/** A point-in-time capacity observation (not a reservation). */
export type CapacityMeasurement =
  | { status: 'known'; resources: CapacityResource[] }
  | { status: 'unknown'; reason: CapacityUnknownReason };

/** Anything that can measure a pool's account capacity. */
export interface CapacityReader {
  getCapacity(): Promise<CapacityMeasurement>;
}

/** Router-level capacity routing policy. */
export interface CapacityPolicy {
  /** Explicit spillover order; replaces strategy ranking; unlisted pools are never selected. */
  providerOrder: readonly ProviderId[];
  /** Deadline for each read, ms. Default 5,000. */
  timeoutMs?: number;
  /**
   * How long a successful launch stays held against a pool's capacity when no later read
   * reflects it yet, ms. Default 60,000.
   */
  reservationTtlMs?: number;
  /**
   * A shared capacity ledger: every router process given the same database admits against
   * one set of holds (see docs/fleets.md). Without it, holds are in-process.
   * A coordinator that fails or times out skips the pool as `UNKNOWN: COORDINATOR_UNAVAILABLE`.
   */
  coordinator?: PostgresMappingStore;
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/**
 * Base class of every error the router throws. `code` is a `string` here; each subclass
 * narrows it to the union of its documented codes, so `instanceof` then `switch (err.code)`
 * is checked by the compiler.
 */
export declare class SandboxRouterError extends Error {
  readonly code: string;
  /** Field path, for validation errors. */
  readonly field?: string;
  readonly providerId?: ProviderId;
  readonly sandboxId?: string;
}
/** `INVALID_REQUEST`, `RESERVED_LABEL`, `INVALID_SANDBOX_ID`, `INVALID_INPUT`. */
export declare class SandboxRequestValidationError extends SandboxRouterError {
  readonly code: 'INVALID_REQUEST' | 'RESERVED_LABEL' | 'INVALID_SANDBOX_ID' | 'INVALID_INPUT' | 'INVALID_DECISION_RECORD' | 'BUDGET_KEY_MISSING';
}
/** `ROUTING_NOT_APPLICABLE`: fleet placement, node affinity, or no sandbox. */
export declare class RoutingNotApplicableError extends SandboxRouterError {
  readonly code: 'ROUTING_NOT_APPLICABLE';
}
/** `NO_ELIGIBLE_PROVIDER`: nothing will change by retrying the same request. */
export declare class NoEligibleProviderError extends SandboxRouterError {
  readonly code: 'NO_ELIGIBLE_PROVIDER';
  readonly summary: string;
  readonly rejections: RejectedProvider[];
}
/** `INVALID_PROVIDER_ID`, `DUPLICATE_PROVIDER`, `INVALID_PROVIDER_DEFINITION`, `PROVIDER_NOT_REGISTERED`. */
export declare class ProviderRegistryError extends SandboxRouterError {
  /** `REGISTRY_READ_FAILED`: a caller's registry threw from `list()` or `get()`, or could not be read. */
  readonly code: 'INVALID_PROVIDER_ID' | 'DUPLICATE_PROVIDER' | 'INVALID_PROVIDER_DEFINITION' | 'PROVIDER_NOT_REGISTERED' | 'REGISTRY_READ_FAILED';
}
/** `INVALID_CONFIGURATION`. */
export declare class SandboxRouterConfigurationError extends SandboxRouterError {
  readonly code: 'INVALID_CONFIGURATION';
}
/** `PROVIDER_RUNTIME_ERROR`: only the provider id and the operation survive. */
export declare class ProviderRuntimeError extends SandboxRouterError {
  constructor(providerId: string, operation: string, timeoutMs?: number, facts?: { status?: number; errorClass?: string });
  /** `OPERATION_TIMEOUT`: the call did not settle within `operationTimeoutMs` (outcome unknown). */
  readonly code: 'PROVIDER_RUNTIME_ERROR' | 'OPERATION_TIMEOUT';
  readonly providerId: ProviderId;
  readonly operation: string;
  /** With `OPERATION_TIMEOUT`: the bound that passed, ms. */
  readonly timeoutMs?: number;
  /** Credential-first surface only: the SDK error's numeric HTTP status (100–599), when it exposed one. */
  readonly status?: number;
  /** Credential-first surface only: the SDK error's class name (an identifier), e.g. `RateLimitError`. */
  readonly errorClass?: string;
}
/** Attempt record inside `ProviderProvisioningError`. */
export interface AttemptRecord {
  providerId: ProviderId;
  code: string;
  retryable: boolean;
}
/** The classification code, `PROVIDER_LAUNCH_OUTCOME_UNKNOWN`, `PROVIDER_MALFORMED_HANDLE` or `PROVIDER_ACQUISITION_EXHAUSTED`. */
export declare class ProviderProvisioningError extends SandboxRouterError {
  readonly attempts: AttemptRecord[];
}
/** `PROVISIONING_AVAILABILITY_FAILED`. */
export declare class ProvisioningAvailabilityError extends SandboxRouterError {
  readonly code: 'PROVISIONING_AVAILABILITY_FAILED';
}
/**
 * Retry later. `PROVIDER_CAPACITY_EXHAUSTED`: no pool had room (capacity changes);
 * `LAUNCH_RATE_LIMITED`: every pool was paced (no launch token, or cooling down):
 * `retryAfterMs` says when the first may launch again (docs/rate-limits.md).
 */
export declare class ProviderCapacityExhaustedError extends SandboxRouterError {
  /** `QUEUE_FULL`: `queue.maxDepth` provisions wait already; nothing was launched. */
  readonly code: 'PROVIDER_CAPACITY_EXHAUSTED' | 'LAUNCH_RATE_LIMITED' | 'QUEUE_FULL';
  /** `LAUNCH_RATE_LIMITED`: ms until the first paced pool may launch again. */
  readonly retryAfterMs?: number;
  /** `reason`: an unknown-measurement reason, `NO_CAPACITY_READER`, `COORDINATOR_UNAVAILABLE`, the full dimension (`cpu`, `sandboxes`, …), or pacing's `RATE_LIMITED` / `COOLING_DOWN` (status `EXHAUSTED`). */
  readonly rejections: Array<{ providerId: ProviderId; status: 'UNKNOWN' | 'EXHAUSTED'; reason: string }>;
}
/** A provision waited `queue.maxWaitMs` and no pool freed; nothing was launched. Retry later. */
export declare class QueueTimeoutError extends SandboxRouterError {
  readonly code: 'QUEUE_TIMEOUT';
  readonly retryable: true;
  /** How long it waited, ms. */
  readonly waitedMs: number;
  /** What still blocked each pool it waited for (`RATE_LIMITED`, `COOLING_DOWN`, `QUEUED`, a full dimension, `BUDGET_EXCEEDED`, or a failed launch's code on a cooling pool). */
  readonly capacityRejections: Array<{ providerId: ProviderId; status: 'EXHAUSTED'; reason: string }>;
}
/** `ABORTED`: the provision's signal fired before its launch; `ROUTER_CLOSED`: `close()` while it waited. Nothing was launched or is held. */
export declare class ProvisionAbortedError extends SandboxRouterError {
  readonly code: 'ABORTED' | 'ROUTER_CLOSED';
}
/**
 * A budget refused the provision. `BUDGET_EXHAUSTED`: no candidate's cost fitted every
 * applying rule (each was skipped with `BUDGET_EXCEEDED` in `rejections`);
 * `BUDGET_STORE_UNAVAILABLE`: the shared ledger could not be asked and the rule does not say
 * `onStoreDown: 'allow'`. The reported refusal is the first retryable one, else the first.
 */
export declare class BudgetExhaustedError extends SandboxRouterError {
  readonly code: 'BUDGET_EXHAUSTED' | 'BUDGET_STORE_UNAVAILABLE';
  readonly rule: string;
  readonly key?: BudgetKey;
  readonly dimension?: BudgetDimension;
  readonly limit?: number;
  readonly used?: number;
  readonly reserved?: number;
  /** When the window frees what is used (ISO 8601); null for `concurrent`. */
  readonly resetsAt?: string | null;
  /** True only when releasing in-flight reservations could make room: retry after they settle. */
  readonly retryable: boolean;
  readonly rejections: Array<{ providerId: ProviderId; status: 'UNKNOWN' | 'EXHAUSTED'; reason: string }>;
}
/**
 * `MAPPING_PERSISTENCE_FAILED` (with `cleanup`: `destroyed` | `failed`), `MAPPING_READ_FAILED`,
 * `MAPPING_INTENT_FAILED` (the launch intent could not be stored: nothing was launched,
 * `cleanup: 'none'`), `COORDINATOR_UNAVAILABLE` (`PostgresMappingStore.held`), or, from `SqliteMappingStore` / `PostgresMappingStore`, `MAPPING_STORE_OPEN_FAILED` /
 * `MAPPING_STORE_SCHEMA_TOO_NEW` (the file was written by a newer version).
 */
export declare class MappingPersistenceError extends SandboxRouterError {
  readonly code:
    | 'MAPPING_PERSISTENCE_FAILED'
    | 'MAPPING_READ_FAILED'
    | 'MAPPING_INTENT_FAILED'
    | 'MAPPING_STORE_OPEN_FAILED'
    | 'MAPPING_STORE_SCHEMA_TOO_NEW'
    | 'COORDINATOR_UNAVAILABLE';
  readonly cleanup?: 'destroyed' | 'failed' | 'none';
  /** Set when a `PostgresMappingStore` call did not finish within its `timeoutMs`. */
  readonly timedOut?: boolean;
  /** Set when a `PostgresMappingStore` call failed because its TLS connection failed. */
  readonly tls?: boolean;
}
/** `SANDBOX_NOT_FOUND`. */
export declare class SandboxNotFoundError extends SandboxRouterError {
  readonly code: 'SANDBOX_NOT_FOUND';
}
/** `ACQUISITION_TIMEOUT`: outcome unknown; the sandbox may exist. */
export declare class AcquisitionTimeoutError extends SandboxRouterError {
  readonly code: 'ACQUISITION_TIMEOUT';
  readonly timeoutMs: number;
}
/**
 * An optional provider package could not be used: `PROVIDER_PACKAGE_MISSING` (not
 * installed), `PROVIDER_PACKAGE_LOAD_FAILED` (installed, but failed to load) or
 * `PROVIDER_OPERATION_UNSUPPORTED` (the installed adapter lacks the method called).
 */
export declare class ProviderPackageMissingError extends SandboxRouterError {
  readonly code: 'PROVIDER_PACKAGE_MISSING' | 'PROVIDER_PACKAGE_LOAD_FAILED' | 'PROVIDER_OPERATION_UNSUPPORTED';
  readonly packageName: string;
  /** `PROVIDER_PACKAGE_LOAD_FAILED` only: the module that could not be found (a module name, never a message). */
  readonly missingModule?: string;
}
/** `INTERNAL_ERROR`: a bug in the router (e.g. a caught native panic). */
export declare class SandboxRouterInternalError extends SandboxRouterError {
  readonly code: 'INTERNAL_ERROR';
}
/**
 * `NATIVE_BINARY_NOT_FOUND`: no native binary fits this platform. Thrown while the package
 * is first loaded, so check `code` on what `require`/`import` throws.
 */
export declare class NativeBinaryNotFoundError extends SandboxRouterError {
  readonly code: 'NATIVE_BINARY_NOT_FOUND';
  /** The napi-rs platform triple looked for, e.g. `linux-arm64-musl`. */
  readonly platform: string;
  /** Where the loader looked, in order. */
  readonly searched: string[];
}

// ---------------------------------------------------------------------------------------
// Credential-first construction
// ---------------------------------------------------------------------------------------

/** Providers `createSandboxRouter` can configure. */
export type SupportedProvider = 'daytona' | 'e2b' | 'vercel' | 'freestyle' | 'agent37' | 'microsandbox' | 'local';

/** Dimensions of a builtin reader's verified limits and per-launch demand. Memory and disk are GiB. */
export interface CapacityDimensions {
  /** vCPU (Daytona). */
  cpu?: number;
  /** GiB (Daytona). */
  memory?: number;
  /** GiB (Daytona). */
  disk?: number;
  /** Sandbox / instance slots (E2B, Microsandbox, Agent37, local). */
  sandboxes?: number;
}

/** A provider entry's `capacity`: the builtin reader's settings, or your own reader. */
export type ProviderCapacityConfig =
  | { limits?: CapacityDimensions; demand?: CapacityDimensions; baseUrl?: string; maxPages?: number; pageSize?: number }
  | CapacityReader;

/** What every provider entry accepts besides its credentials. */
export interface ProviderEntryCommon {
  /** Pool id. Default: the provider name. */
  id?: string;
  /** The configured pool's envelope. Default: only `syncExec` and `fileTransfer`. */
  capabilities?: SandboxCapabilities;
  /** Measured signals. Default: equal placeholders (latencies 60 s). */
  signals?: ProviderRoutingSignals;
  capacity?: ProviderCapacityConfig;
  /** Passed to the adapter's constructor verbatim. */
  adapterOptions?: Record<string, unknown>;
  /** A warm pool for this provider (docs/warm-pools.md). */
  warm?: WarmOptions;
  /** The provider's create-rate limit for this account (docs/rate-limits.md). */
  rateLimit?: RateLimitOptions;
}

export interface DaytonaProviderConfig extends ProviderEntryCommon {
  apiKey: string;
  /** Default `https://app.daytona.io/api`. */
  apiUrl?: string;
  /** Default `us`. */
  target?: string;
  snapshot?: string;
  /** Default `/home/daytona`; override it for custom snapshots. */
  defaultHomeDir?: string;
  organizationId?: string;
  createParams?: Record<string, unknown>;
}
export interface E2BProviderConfig extends ProviderEntryCommon {
  apiKey: string;
  /** Default `base` (basic workloads only). */
  template?: string;
  runBudgetMs?: number;
  createTimeoutMs?: number;
}
export interface VercelProviderConfig extends ProviderEntryCommon {
  token: string;
  teamId: string;
  projectId: string;
  defaultHomeDir: string;
  namePrefix: string;
  source?: Record<string, unknown>;
  vcpus?: number;
  sandboxTimeoutMs?: number;
  persistent?: boolean;
  ports?: readonly number[];
  env?: Record<string, string>;
}
export interface FreestyleProviderConfig extends ProviderEntryCommon {
  apiKey: string;
  defaultHomeDir: string;
  namePrefix: string;
  persistence: { type: 'persistent' } | { type: 'sticky'; priority: number } | { type: 'ephemeral' };
  baseUrl?: string;
  snapshotId?: string;
  idleTimeoutSeconds?: number | null;
}
export interface Agent37ProviderConfig extends ProviderEntryCommon {
  apiKey: string;
  baseUrl: string;
  defaultHomeDir: string;
}
export interface MicrosandboxProviderConfig extends ProviderEntryCommon {
  apiKey: string;
  homeDir: string;
  image: string;
  /** Hosted backend by default. */
  url?: string;
}
export interface LocalProviderConfig extends ProviderEntryCommon {
  /** Parent of the sandbox directories. Default: a fresh temporary directory. */
  rootDir?: string;
}

/** The `providers` map of `createSandboxRouter`. */
export interface ProvidersConfig {
  daytona?: DaytonaProviderConfig;
  e2b?: E2BProviderConfig;
  vercel?: VercelProviderConfig;
  freestyle?: FreestyleProviderConfig;
  agent37?: Agent37ProviderConfig;
  microsandbox?: MicrosandboxProviderConfig;
  local?: LocalProviderConfig;
}

/** Test seam: how adapters and SDKs are loaded. Default: a dynamic `import()`. */
export type ModuleLoader = (specifier: string) => Promise<Record<string, unknown>>;

/** Options of `createSandboxRouter`. */
export interface CreateSandboxRouterOptions {
  providers: ProvidersConfig;
  capacity?: CapacityPolicy;
  mappings?: SandboxMappingStore;
  observer?: RoutingObserver;
  provisioning?: ProvisioningAvailability;
  resolveRoutingSignals?: RoutingSignalResolver;
  classifyProviderFailure?: ProviderFailureClassifier;
  callbackTimeoutMs?: number;
  operationTimeoutMs?: number;
  /** See `SandboxRouterOptions.fleet`. Default `'default'`. */
  fleet?: string;
  /** See `SandboxRouterOptions.health`. Default on. */
  health?: boolean | HealthOptions;
  /** See `SandboxRouterOptions.telemetry`. Default off. */
  telemetry?: boolean | TelemetryOptions;
  /** See `SandboxRouterOptions.clock`. Default: the wall clock. */
  clock?: () => number;
  /** See `SandboxRouterOptions.budgets` (docs/budgets.md). Default: none. */
  budgets?: readonly BudgetRule[];
  /** See `SandboxRouterOptions.limits`. */
  limits?: RouterLimits;
  /** See `SandboxRouterOptions.queue` (docs/rate-limits.md#the-wait-queue). Default off. */
  queue?: boolean | QueueOptions;
  /** See `SandboxRouterOptions.decisions` (docs/decisions.md). Default off. */
  decisions?: boolean | DecisionOptions;
  moduleLoader?: ModuleLoader;
}

/** The router `createSandboxRouter` returns. */
export declare class ConfiguredSandboxRouter extends SandboxRouter {
  /** Ids of the configured pools. */
  readonly providerIds: readonly ProviderId[];
}

/** Builds a router from provider credentials, synchronously; adapters load on first use. */
export declare function createSandboxRouter(options: CreateSandboxRouterOptions): ConfiguredSandboxRouter;

/** The same lazy, credential-safe runtime the factory builds, for your own registry. */
export declare function createProviderRuntime<P extends SupportedProvider>(
  provider: P,
  options: NonNullable<ProvidersConfig[P]>,
  internals?: { moduleLoader?: ModuleLoader },
): SandboxRuntime;

/** The providers `createSandboxRouter` supports. */
export declare const SUPPORTED_PROVIDERS: readonly SupportedProvider[];
/** Capabilities a factory pool declares by default. */
export declare const DEFAULT_CAPABILITIES: Readonly<SandboxCapabilities>;
/** Placeholder signals of a factory pool without measured ones. */
export declare const DEFAULT_SIGNALS: Readonly<ProviderRoutingSignals>;

/** Providers with a builtin capacity reader. */
export type CapacityReaderKind = 'daytona' | 'e2b' | 'microsandbox' | 'agent37' | 'vercel' | 'freestyle';
export declare const CAPACITY_READER_KINDS: readonly CapacityReaderKind[];

/** Options of a builtin capacity reader. The key stays in the reader's closure. */
export interface CapacityReaderOptions {
  apiKey?: string;
  baseUrl?: string;
  /** Daytona: sent as `X-Daytona-Organization-ID`. */
  organizationId?: string;
  limits?: CapacityDimensions;
  demand?: CapacityDimensions;
  /** Pagination bound. Default 1,000. */
  maxPages?: number;
  pageSize?: number;
  /** Default 5,000 ms; a router's capacity deadline overrides it. */
  timeoutMs?: number;
}

/** A builtin reader: HTTP in Rust, off the JS thread. */
export interface BuiltinCapacityReader extends CapacityReader {
  readonly provider: CapacityReaderKind;
  getCapacity(options?: { timeoutMs?: number }): Promise<CapacityMeasurement>;
}

export declare function createCapacityReader(provider: CapacityReaderKind, options?: CapacityReaderOptions): BuiltinCapacityReader;

/** Strictly parsed Daytona limits (input GiB, output MiB). */
export interface DaytonaCapacityLimits {
  cpu: number | null;
  memoryMiB: number | null;
  diskMiB: number | null;
  provided: Array<'cpu' | 'memory' | 'disk'>;
}
export declare function parseDaytonaCapacityLimits(limits: { cpu?: number; memory?: number; disk?: number }): DaytonaCapacityLimits;

/** Per-dimension utilization in a Daytona summary. */
export interface DaytonaUtilization {
  used: number;
  limit: number | null;
  unit: string;
  headroom: number | null;
  ratio: number | null;
  percent: number | null;
  level: 'ok' | 'warning' | 'critical' | null;
  limitSource: 'configured' | 'not_configured';
}

/** The display summary of a Daytona organization inventory. */
export interface DaytonaCapacitySummary {
  provider: 'daytona';
  generatedAt: string;
  organization: { sandboxes: number; cpu: number; memoryMiB: number; diskMiB: number; accounted: { cpu: number; memoryMiB: number; diskMiB: number } };
  byState: Record<string, { sandboxes: number; cpu: number; memoryMiB: number; diskMiB: number }>;
  utilization: { cpu: DaytonaUtilization; memory: DaytonaUtilization; disk: DaytonaUtilization };
  level: 'ok' | 'warning' | 'critical' | null;
  thresholds: { warningRatio: number; criticalRatio: number };
  idle: {
    idleAfterMs: number;
    sandboxes: number;
    cpu: number;
    memoryMiB: number;
    diskMiB: number;
    unknownActivity: number;
    truncated: boolean;
    items: Array<{ id: string; name: string | null; state: string; lastActivityAt: string | null; idleMs: number; cpu: number; memoryMiB: number; diskMiB: number }>;
  };
  dataQuality: { coercedValues: number; skippedItems: number };
  provisioningCheck: 'not_covered';
}

export declare function summarizeDaytonaCapacity(
  items: unknown,
  limits: { cpu?: number; memory?: number; disk?: number } | null,
  options?: { warningRatio?: number; criticalRatio?: number; now?: Date | string | number; idleAfterMs?: number; idleListLimit?: number },
): DaytonaCapacitySummary;

// ---------------------------------------------------------------------------------------
// Process manifests
// ---------------------------------------------------------------------------------------

/** The part of a router that process manifests use: the runtime port only. */
export interface ManifestRouter {
  runScript(id: string, options: RunScriptOptions): Promise<RunScriptResult>;
  /** When present, used once by `startManifest` so an unknown id rejects before anything runs. */
  getSandbox?(id: string): Promise<SandboxMapping>;
}
/** A signal a teardown may send before `SIGKILL`. */
export type ManifestSignal = 'SIGTERM' | 'SIGINT' | 'SIGHUP' | 'SIGQUIT';
/** Exactly one of `command`, `port`, `logLine`. */
export type ReadinessProbe = {
  /** Give up this many ms after the process first started. 10..=600000. */
  timeoutMs: number;
  /** Poll every this many ms. 10..=timeoutMs. */
  intervalMs: number;
} & (
  | { /** Exits 0 once ready (`sh -c`, output discarded). */ command: string; port?: never; logLine?: never }
  | { /** Accepts TCP connections on 127.0.0.1 or ::1. 1..=65535, one process per port. */ port: number; command?: never; logLine?: never }
  | { /** A fixed string (not a regex) in the process's output; one line. */ logLine: string; command?: never; port?: never }
);
export interface ProcessTeardown {
  /** Runs to completion (bounded by `flushTimeoutMs`) before the signal, while the process still runs. */
  flushCommand?: string;
  /** Default `'SIGTERM'`. Sent to the process's whole process group. */
  signal?: ManifestSignal;
  /** How long the group may take to exit after the signal before `SIGKILL`. 0..=300000. */
  graceMs: number;
}
export interface ManifestProcess {
  /** `[a-z0-9][a-z0-9_-]*`, at most 64 bytes, unique in the manifest. */
  name: string;
  /** Run as `sh -c command` in the sandbox's working directory; output to `.relay/<name>.log`. */
  command: string;
  /** Processes that must be ready before this one starts. No self, no unknown name, no cycle. */
  dependsOn?: string[];
  /** Absent: ready once started and still running. */
  readiness?: ReadinessProbe;
  /** Default `'never'`. `'on-failure'` restarts a non-zero exit during startup. */
  restart?: 'never' | 'on-failure';
  /** 0..=10, only with `restart: 'on-failure'`; default 3 there. */
  maxRestarts?: number;
  /** Default `{ signal: 'SIGTERM', graceMs: 10000 }`. */
  teardown?: ProcessTeardown;
}
/** A source of idle evidence, each read through `runScript`. */
export type IdleEvidenceSource = 'no-running-command' | 'no-open-session' | 'no-file-change' | 'no-process-output';
export interface IdlePolicy {
  /** Every source must agree without interruption for this long. 1000..=86400000. */
  quietMs: number;
  /** At least one, no repeats. */
  evidence: IdleEvidenceSource[];
}
/** A process manifest. Unknown keys are refused at every level (`INVALID_INPUT`, `field` = path). */
export interface ProcessManifest {
  /** 1..=256 processes. */
  processes: ManifestProcess[];
  idle?: IdlePolicy;
}
/** A process with every default filled in. */
export interface NormalizedManifestProcess {
  name: string;
  command: string;
  dependsOn: string[];
  readiness?: ReadinessProbe;
  restart: 'never' | 'on-failure';
  /** Present only with `restart: 'on-failure'`. */
  maxRestarts?: number;
  teardown: { flushCommand?: string; signal: ManifestSignal; graceMs: number };
}
/** What `validateManifest` returns: processes in input order, defaults filled in. */
export interface NormalizedProcessManifest {
  processes: NormalizedManifestProcess[];
  idle?: IdlePolicy;
}
/** Topological levels; a wave starts once every probe of the previous wave passed. */
export interface StartupPlan {
  /** Ordered by name within a wave. */
  waves: { wave: number; processes: NormalizedManifestProcess[] }[];
  /** Every name, wave by wave. */
  order: string[];
}
/** One phase of a history-safe teardown step, performed in this order. */
export type TeardownPhase =
  | { action: 'flush'; command: string }
  | { action: 'signal'; signal: ManifestSignal }
  | { action: 'wait'; ms: number }
  | { action: 'kill'; signal: 'SIGKILL' };
/** The startup waves reversed: dependents stop before what they depend on. */
export interface TeardownPlan {
  waves: { wave: number; steps: { name: string; phases: TeardownPhase[] }[] }[];
  order: string[];
}
export interface StartedProcess {
  name: string;
  /** The supervising shell of the process (inside the sandbox). */
  pid: number;
  /** The process group that teardown signals. */
  pgid: number;
  /** From the first start to the passing probe. */
  readyAfterMs: number;
  /** Restarts used during startup. */
  restarts: number;
}
/** What `startManifest` resolves with: the sandbox is useful. JSON-serializable; keep it for teardown. */
export interface StartedManifest {
  useful: true;
  sandboxId: string;
  manifest: NormalizedProcessManifest;
  /** In startup order. */
  processes: StartedProcess[];
}
export interface TeardownStepReport {
  name: string;
  /** `'skipped'`: the process had already exited. */
  flush: 'none' | 'ok' | 'failed' | 'timed-out' | 'skipped';
  /** `'exited'` within graceMs, `'killed'` after it; `'survived'`/`'error'` make the report incomplete. */
  outcome: 'exited' | 'killed' | 'already-exited' | 'survived' | 'error';
}
export interface TeardownReport {
  /** False when some step could not be performed or a group survived SIGKILL. */
  complete: boolean;
  /** In teardown order. */
  steps: TeardownStepReport[];
}
/** Why `startManifest` failed; each reason has one meaning. */
export type ManifestStartReason = 'READINESS_TIMEOUT' | 'PROCESS_EXITED' | 'PROBE_UNAVAILABLE' | 'START_FAILED' | 'RUNTIME_ERROR';
export declare const MANIFEST_START_REASONS: { readonly [K in ManifestStartReason]: K };
/**
 * `MANIFEST_START_FAILED`: a manifest could not be made useful. What was started has been
 * torn down (history-safe) before the rejection. Never carries command output.
 */
export declare class ManifestStartError extends SandboxRouterError {
  readonly code: 'MANIFEST_START_FAILED';
  /** The failing process. */
  readonly process: string;
  readonly reason: ManifestStartReason;
  readonly sandboxId: string;
  /** With `PROCESS_EXITED`: the exit status, or null when unknown (killed, vanished). */
  readonly exitCode?: number | null;
  /** With `READINESS_TIMEOUT`: the probe's timeoutMs. */
  readonly timeoutMs?: number;
  readonly teardown: TeardownReport;
}
export interface IdleEvidence {
  source: IdleEvidenceSource;
  /** `'unknown'` (unreadable, missing, or no baseline yet) is never quiet. */
  status: 'quiet' | 'active' | 'unknown';
  /** How long this source has agreed without interruption (0 unless quiet). */
  quietForMs: number;
  reason?: 'UNREADABLE' | 'NO_BASELINE' | 'MISSING' | 'PROBE_FAILED';
}
/** Opaque, JSON-serializable observer state: pass the previous result's `state` back. */
export interface IdleState {
  readonly v: 1;
}
export interface IdleCheck {
  /** True only when every source is quiet and has been for at least `quietMs`. */
  idle: boolean;
  quietMs: number;
  /** The smallest `quietForMs` over the sources. */
  quietForMs: number;
  evidence: IdleEvidence[];
  state: IdleState;
}
/** Validates a manifest; returns it normalized. Throws `SandboxRequestValidationError` (`INVALID_INPUT`, `field`). */
export declare function validateManifest(manifest: ProcessManifest): NormalizedProcessManifest;
/** The startup plan. Throws like `validateManifest`. */
export declare function planStartup(manifest: ProcessManifest): StartupPlan;
/** The teardown plan. Throws like `validateManifest`. */
export declare function planTeardown(manifest: ProcessManifest): TeardownPlan;
/**
 * Starts `manifest` in sandbox `sandboxId` wave by wave through `router.runScript` and
 * resolves once every readiness probe passed. Rejects with `ManifestStartError` (after a
 * history-safe teardown of what was started) or `SandboxRequestValidationError`.
 * `flushTimeoutMs` (default 30000) bounds each flush of that teardown.
 */
export declare function startManifest(
  router: ManifestRouter,
  sandboxId: string,
  manifest: ProcessManifest,
  options?: { flushTimeoutMs?: number },
): Promise<StartedManifest>;
/** Tears a started manifest down: teardown order, flush → signal → graceMs → SIGKILL per process. */
export declare function teardownManifest(
  router: ManifestRouter,
  sandboxId: string,
  started: Pick<StartedManifest, 'manifest' | 'processes'>,
  options?: { flushTimeoutMs?: number },
): Promise<TeardownReport>;
/**
 * Evidence-gated idle (needs `manifest.idle`): one probe through `runScript`; idle only when
 * every declared source agreed, at every observation and with no gap longer than `quietMs`,
 * for at least `quietMs`. `timeoutMs` (default 30000) bounds the probe.
 */
export declare function checkIdle(
  router: ManifestRouter,
  sandboxId: string,
  manifest: ProcessManifest,
  state?: IdleState | null,
  options?: { timeoutMs?: number },
): Promise<IdleCheck>;
