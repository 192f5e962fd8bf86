//! napi glue for one router (`core::router::Router`): made once from the router's options,
//! then handed to every call as the `ExternalObject` JavaScript holds (napi-rs's own
//! wrapper of a Rust value: no handle table, and about 130 instructions a call to reach,
//! against ~2,800 for a class instance's `this`; the provision path makes two calls).
//!
//! Nothing is decided here: each function converts its arguments, calls the router, and
//! converts the answer.

use crate::binding::clock::{now_millis, now_of};
use crate::binding::error::{guard, Failure, NativeError};
use crate::binding::id_source::SandboxIdSource;
use crate::binding::mapping::NativeMappingStore;
use crate::binding::records::{BudgetRuleRecord, BudgetStatusQuery, BudgetStatusRecord};
use crate::binding::registry::Registry;
use crate::binding::request::{labels_from, CompiledRequest};
use crate::binding::sqlite::NativeSqliteStore;
use crate::binding::values::events_array;
use crate::core::clock::iso8601_millis;
use crate::core::health::{config_of_option, CircuitState};
use crate::core::ids::SandboxKey;
use crate::core::request::LabelLimits;
use crate::core::router::pools::Question;
use crate::core::router::{CapacitySettings, Owner, Router, Settings};
use crate::core::telemetry::circuit_gauge;
use napi::bindgen_prelude::{Array, External, FromNapiValue, Uint32ArraySlice, Unknown};
use napi::{Env, ValueType};
use napi_derive::napi;
use std::cell::RefCell;

/// A router's native state, as JavaScript holds it (`ExternalObject<RouterState>`).
pub struct RouterState {
    /// The router.
    pub(crate) router: RefCell<Router>,
    /// Where its sandbox ids come from (the OS CSPRNG, in batches).
    pub(crate) ids: RefCell<SandboxIdSource>,
}

impl RouterState {
    /// A fresh sandbox id.
    pub(crate) fn next_id(&self) -> Result<SandboxKey, Failure> {
        Ok(self.ids.borrow_mut().next_key()?)
    }
}

/// A router's options, as `lib/options.js` read them once.
#[napi(object)]
pub struct RouterSettings {
    /// The fleet name stamped into every launch (validated here).
    pub fleet: String,
    /// The `health` option as JSON text, its `clock` taken out: `true` (also when absent),
    /// `false`, or the object (validated here: `core::health::config_of_option`).
    pub health_json: String,
    /// Capacity routing, when the router has a capacity policy.
    pub capacity: Option<CapacityRecord>,
    /// `callbackTimeoutMs`: bounds every caller callback and store call.
    pub callback_timeout_ms: f64,
    /// `operationTimeoutMs`: bounds a runtime call for an operation or a clean-up.
    pub operation_timeout_ms: f64,
    /// `capacity.timeoutMs`: bounds a capacity read.
    pub capacity_timeout_ms: f64,
    /// Whether the store takes launch intents (`intent` and `intents`).
    pub intents: bool,
    /// Whether the router has a failure classifier.
    pub classifier: bool,
    /// Whether the router has an observer or telemetry (its jobs then record events).
    pub observe: bool,
    /// This process's host name (intent records name their writer).
    pub owner_host: String,
    /// This process's pid.
    pub owner_pid: f64,
    /// This router's random session id.
    pub session: String,
    /// The `budgets` option as JSON text (validated here); absent: no budgets.
    pub budgets_json: Option<String>,
    /// The `limits` option as `readRouterOptions` read it (absent: the defaults).
    pub limits: Option<LimitsRecord>,
    /// The mapping store is the capacity coordinator (the same `PostgresMappingStore`).
    pub combined: Option<bool>,
    /// The `queue` option as `readRouterOptions` read it (absent: no queue).
    pub queue: Option<QueueRecord>,
    /// The `decisions` option as `readRouterOptions` read it (absent: no records).
    pub decisions: Option<DecisionsRecord>,
}

/// The router option `queue`, validated (`core::queue::QueueConfig`).
#[napi(object)]
#[derive(Clone)]
pub struct QueueRecord {
    /// Longest wait, ms.
    pub max_wait_ms: f64,
    /// Most provisions waiting at once.
    pub max_depth: u32,
    /// The launch label whose values take turns (absent: first come, first served).
    pub fair_by: Option<String>,
}

impl From<crate::core::queue::QueueConfig> for QueueRecord {
    fn from(q: crate::core::queue::QueueConfig) -> Self {
        QueueRecord { max_wait_ms: q.max_wait_ms as f64, max_depth: q.max_depth, fair_by: q.fair_by }
    }
}

impl QueueRecord {
    /// The core's form, read again by the core's rule (a hand-made record cannot pass a
    /// value out of range).
    fn to_core(&self) -> Result<Option<crate::core::queue::QueueConfig>, Failure> {
        let mut v = serde_json::json!({ "maxWaitMs": self.max_wait_ms, "maxDepth": self.max_depth });
        if let Some(label) = &self.fair_by {
            v["fairBy"] = serde_json::json!({ "label": label });
        }
        crate::core::router::options::queue(&v)
    }
}

/// What kind of value one option is, and which of the methods that matter it has.
#[napi(object)]
pub struct OptionGiven {
    /// The option (as given).
    pub key: String,
    /// `typeof` it, or `null` / `array`.
    pub kind: String,
    /// Which of `routerOptionMethods()` it has.
    pub methods: Vec<String>,
    /// `capacity`: whether its coordinator is a `PostgresMappingStore` (absent: none given).
    pub postgres: Option<bool>,
    /// `decisions`: the kind of its `sink` (absent: `decisions` is not an object).
    pub sink: Option<String>,
}

/// The router's options, validated, every omitted field at its default
/// (`core::router::options::RouterOptions`).
#[napi(object)]
pub struct RouterOptionsRecord {
    /// The fleet stamped into every launch.
    pub fleet: String,
    /// `callbackTimeoutMs`.
    pub callback_timeout_ms: f64,
    /// `operationTimeoutMs`.
    pub operation_timeout_ms: f64,
    /// Capacity routing.
    pub capacity: Option<CapacityRecord>,
    /// One capacity read's deadline, ms.
    pub capacity_timeout_ms: f64,
    /// The observer's method to call; absent: the observer is a function.
    pub observer_method: Option<String>,
    /// Whether the router has an observer.
    pub observer: bool,
    /// Whether the caller's store takes launch intents.
    pub intents: bool,
    /// Whether the router has a failure classifier.
    pub classifier: bool,
    /// Whether the router has a signal resolver.
    pub resolver: bool,
    /// Whether the router asks credential readiness.
    pub provisioning: bool,
    /// Whether the router has its own clock.
    pub clock: bool,
    /// Whether `health` has its own clock.
    pub health_clock: bool,
    /// `limits`, every omitted field at its default.
    pub limits: LimitsRecord,
    /// `queue`, when on.
    pub queue: Option<QueueRecord>,
    /// `decisions`, when on.
    pub decisions: Option<DecisionsRecord>,
}

/// The router option `decisions`, validated (`core::decision::DecisionConfig`).
#[napi(object)]
#[derive(Clone)]
pub struct DecisionsRecord {
    /// Records kept in the ring.
    pub keep: u32,
    /// How label values are written: `hash`, `keep` or `drop`.
    pub labels: String,
    /// Whether a sink is given.
    pub sink: bool,
}

impl From<crate::core::decision::DecisionConfig> for DecisionsRecord {
    fn from(d: crate::core::decision::DecisionConfig) -> Self {
        DecisionsRecord { keep: d.keep as u32, labels: d.labels.name().to_string(), sink: d.sink }
    }
}

impl DecisionsRecord {
    /// The core's form, read again by the core's rule.
    fn to_core(&self) -> Result<Option<crate::core::decision::DecisionConfig>, Failure> {
        let v = serde_json::json!({ "keep": self.keep, "labels": self.labels });
        crate::core::router::options::decisions(&v, Some(if self.sink { "function" } else { "undefined" }))
    }
}

/// The router option `limits`, validated (`core::router::options::limits`).
#[napi(object)]
#[derive(Clone)]
pub struct LimitsRecord {
    /// Most launch labels a request may carry.
    pub labels: u32,
    /// Longest label key, UTF-8 bytes.
    pub label_key_bytes: u32,
    /// Longest label value, UTF-8 bytes.
    pub label_value_bytes: u32,
    /// How long a budget charge stays adjustable by `settleCost` after its sandbox is gone, ms.
    pub settle_horizon_ms: f64,
}

impl From<crate::core::router::options::Limits> for LimitsRecord {
    fn from(l: crate::core::router::options::Limits) -> Self {
        LimitsRecord {
            labels: l.labels.count as u32,
            label_key_bytes: l.labels.key_bytes as u32,
            label_value_bytes: l.labels.value_bytes as u32,
            settle_horizon_ms: l.settle_horizon_ms as f64,
        }
    }
}

impl LimitsRecord {
    /// The core's form (a record `readRouterOptions` made; anything else is read again by
    /// the core's rule, so a hand-made record cannot pass a limit out of range).
    fn to_core(&self) -> Result<crate::core::router::options::Limits, Failure> {
        crate::core::router::options::limits(&serde_json::json!({
            "labels": self.labels,
            "labelKeyBytes": self.label_key_bytes,
            "labelValueBytes": self.label_value_bytes,
            "settleHorizonMs": self.settle_horizon_ms,
        }))
    }
}

/// The methods whose presence the router's options are judged by.
#[napi]
pub fn router_option_methods() -> Vec<&'static str> {
    crate::core::router::options::METHODS.to_vec()
}

/// Reads the router's options (`given`: every option's kind and methods; `healthClock`: the
/// kind of `health.clock` when `health` is an object; `dataJson`: the data options); throws the typed `INVALID_CONFIGURATION` error naming the field.
#[napi]
pub fn read_router_options(
    env: Env,
    given: Vec<OptionGiven>,
    health_clock: Option<String>,
    data_json: String,
) -> napi::Result<RouterOptionsRecord> {
    use crate::core::router::options::{read, Given};
    guard(&env, || {
        let given: Vec<Given> = given
            .into_iter()
            .map(|g| Given { key: g.key, kind: g.kind, methods: g.methods, postgres: g.postgres, sink: g.sink })
            .collect();
        let data = serde_json::from_str(&data_json).unwrap_or(serde_json::Value::Null);
        let o = read(&given, health_clock.as_deref(), &data)?;
        Ok(RouterOptionsRecord {
            fleet: o.fleet,
            callback_timeout_ms: o.callback_timeout_ms as f64,
            operation_timeout_ms: o.operation_timeout_ms as f64,
            capacity: o.capacity.map(|c| CapacityRecord {
                provider_order: c.provider_order,
                timeout_ms: c.timeout_ms as f64,
                reservation_ttl_ms: c.reservation_ttl_ms as f64,
                coordinated: c.coordinated,
            }),
            capacity_timeout_ms: o.capacity_timeout_ms as f64,
            observer_method: o.observer_method.map(str::to_string),
            observer: o.observer,
            intents: o.intents,
            classifier: o.classifier,
            resolver: o.resolver,
            provisioning: o.provisioning,
            clock: o.clock,
            health_clock: o.health_clock,
            limits: o.limits.into(),
            queue: o.queue.map(QueueRecord::from),
            decisions: o.decisions.map(DecisionsRecord::from),
        })
    })
}

/// Throws the typed error of options that could not be read (`what`: their kind, or
/// `unreadable`, or the option that could not be read).
#[napi]
pub fn router_options_refused(env: Env, what: String) -> napi::Result<()> {
    guard(&env, || Err(crate::core::router::options::refused(&what)))
}

/// Throws the typed error of a value JSON cannot carry in `scope`'s options, at `segments`
/// (keys and indices) under `prefix`; `what` says what it is.
#[napi]
pub fn not_json_error(
    env: Env,
    scope: String,
    segments: Vec<napi::bindgen_prelude::Either<String, f64>>,
    what: String,
    prefix: String,
) -> napi::Result<()> {
    guard(&env, || {
        Err(crate::core::router::options::not_json(
            &scope,
            &prefix,
            &crate::binding::values::segments_of(segments),
            &what,
        ))
    })
}

/// Throws the typed error of a caller's value under `field` of `scope` that could not be
/// read at all (a cycle, a throwing getter or toJSON).
#[napi]
pub fn unreadable_error(env: Env, scope: String, field: String) -> napi::Result<()> {
    guard(&env, || Err(crate::core::router::options::unreadable(&scope, &field)))
}

/// A clock's reading: itself when finite; else throws the typed error naming `field`.
#[napi]
pub fn clock_reading(env: Env, reading: f64, field: String) -> napi::Result<f64> {
    guard(&env, || Ok(crate::core::router::options::clock_reading(reading, &field)? as f64))
}

/// A router's capacity policy.
#[napi(object)]
pub struct CapacityRecord {
    /// The explicit provider order that replaces strategy ranking.
    pub provider_order: Vec<String>,
    /// One read's deadline, ms.
    pub timeout_ms: f64,
    /// Life of a post-launch assumption no read has reflected yet, ms.
    pub reservation_ttl_ms: f64,
    /// Whether the holds live in a shared coordinator (`PostgresMappingStore`).
    pub coordinated: bool,
}

/// A router's key for its records' label hashes: fresh random bytes (the OS CSPRNG).
fn decision_key() -> Result<[u8; 32], Failure> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|_| crate::core::CoreError::RandomUnavailable)?;
    Ok(key)
}

fn settings_of(s: RouterSettings) -> Result<Settings, Failure> {
    let health_option = serde_json::from_str(&s.health_json)
        .map_err(|_| NativeError::config("router", "health", "must be false, true or an object"))?;
    let budgets = match s.budgets_json.as_deref() {
        None => Vec::new(),
        Some(text) => {
            let v = serde_json::from_str(text)
                .map_err(|_| NativeError::config("router", "budgets", "must be an array of rules"))?;
            crate::core::budget::rules_of_option(&v)?
        }
    };
    Ok(Settings {
        fleet: s.fleet,
        health: config_of_option(&health_option)?,
        capacity: s.capacity.map(|c| CapacitySettings {
            provider_order: c.provider_order,
            reservation_ttl_ms: c.reservation_ttl_ms.max(0.0) as u64,
            coordinated: c.coordinated,
        }),
        callback_timeout_ms: s.callback_timeout_ms.max(0.0) as u64,
        operation_timeout_ms: s.operation_timeout_ms.max(0.0) as u64,
        capacity_timeout_ms: s.capacity_timeout_ms.max(0.0) as u64,
        intents: s.intents,
        classifier: s.classifier,
        observe: s.observe,
        owner: Owner { host: s.owner_host, pid: s.owner_pid, session: s.session },
        budgets,
        limits: s.limits.as_ref().map(LimitsRecord::to_core).transpose()?.unwrap_or_default(),
        combined: s.combined.unwrap_or(false),
        queue: s.queue.as_ref().map(QueueRecord::to_core).transpose()?.flatten(),
        decisions: s.decisions.as_ref().map(DecisionsRecord::to_core).transpose()?.flatten(),
        decision_key: decision_key()?,
    })
}

/// Makes a router over `registry` from its settings (`store`: the default in-memory store,
/// which the success call then writes itself; `sqlite`: the router's `SqliteMappingStore`,
/// where budgets without a coordinator keep their charges). Throws the typed
/// `INVALID_CONFIGURATION` error naming the option.
#[napi]
pub fn create_router(
    env: Env,
    settings: RouterSettings,
    registry: &External<Registry>,
    store: Option<&NativeMappingStore>,
    sqlite: Option<&NativeSqliteStore>,
) -> napi::Result<External<RouterState>> {
    guard(&env, || {
        let settings = settings_of(settings)?;
        let sink = sqlite.map(|s| Box::new(s.charge_sink()) as Box<dyn crate::core::router::budgets::ChargeSink>);
        let router = Router::new(settings, registry.pools.clone(), store.map(|s| s.store.clone()), sink, now_millis())?;
        Ok(External::new(RouterState { router: RefCell::new(router), ids: RefCell::new(SandboxIdSource::default()) }))
    })
}

/// Decides on `registry` from now on (a caller's own registry is read again on every call).
#[napi]
pub fn router_use_registry(router: &External<RouterState>, registry: &External<Registry>) {
    router.router.borrow_mut().use_registry(registry.pools.clone());
}

/// Whether the router's budgets live in the shared ledger; null without budgets.
#[napi]
pub fn router_budgets_shared(router: &External<RouterState>) -> Option<bool> {
    router.router.borrow().budgets_shared()
}

/// The events decided outside a job since the last call (a destroy, a refill's pause, …).
#[napi]
pub fn router_events<'env>(env: &'env Env, router: &External<RouterState>) -> napi::Result<Array<'env>> {
    let events = router.router.borrow_mut().take_events();
    events_array(env, &events)
}

/// The rules at `now` (the router's clock, ms), for the shared ledger's status.
#[napi]
pub fn router_budget_rules(router: &External<RouterState>, clock: Option<f64>) -> Vec<BudgetRuleRecord> {
    let now = now_of(None, clock).router;
    let r = router.router.borrow();
    let Some(b) = r.budgets.as_ref() else { return Vec::new() };
    let rules = b.rules();
    b.rule_keys(now)
        .into_iter()
        .map(|k| BudgetRuleRecord {
            label: rules[k.rule].label.clone(),
            rule_id: k.rule_id,
            cost: k.limits.cost.map(crate::core::budget::Micros::units),
            launches: k.limits.launches.map(|n| n as f64),
            concurrent: k.limits.concurrent.map(|n| n as f64),
            since: k.since.map(|t| t as f64),
            window_end: k.window_end.map(|t| t as f64),
            sliding_ms: k.sliding_ms.map(|t| t as f64),
        })
        .collect()
}

/// `router.budgetStatus(query)` of the in-process ledger at `clock` (the router's clock,
/// ms): one page of the rules' keys that hold something, in rule order then key order
/// (`queryJson`: the caller's query as JSON, read by `core::router::budgets::query_of_value`).
/// Empty without budgets or when they live in the shared ledger (after the query's checks).
#[napi]
pub fn router_budget_status(
    env: Env,
    router: &External<RouterState>,
    clock: Option<f64>,
    query_json: String,
) -> napi::Result<Vec<BudgetStatusRecord>> {
    guard(&env, || {
        let q = budget_query(&query_json, true)?;
        let now = now_of(None, clock).router;
        let mut r = router.router.borrow_mut();
        let Some(b) = r.budgets.as_mut().filter(|b| !b.shared) else { return Ok(Vec::new()) };
        let rows = b.status(now, &q)?;
        let rules = b.rules();
        Ok(rows
            .into_iter()
            .map(|row| {
                let rule = &rules[row.rule];
                BudgetStatusRecord::of(&rule.id, &rule.label, &rule.limits, row.value, &row.usage, row.resets_at)
            })
            .collect())
    })
}

/// `router.budgetCount(query)` of the in-process ledger at `clock`: how many rows
/// `budgetStatus` would list (every page), counted without building them.
#[napi]
pub fn router_budget_count(
    env: Env,
    router: &External<RouterState>,
    clock: Option<f64>,
    query_json: String,
) -> napi::Result<u32> {
    guard(&env, || {
        let q = budget_query(&query_json, false)?;
        let now = now_of(None, clock).router;
        let mut r = router.router.borrow_mut();
        let Some(b) = r.budgets.as_mut().filter(|b| !b.shared) else { return Ok(0) };
        Ok(u32::try_from(b.count(now, &q)?).unwrap_or(u32::MAX))
    })
}

/// A `budgetStatus` (`paged`) / `budgetCount` query as the shared ledger takes it (the
/// caller's query as JSON); throws the typed `INVALID_INPUT` naming the field.
#[napi]
pub fn router_budget_query(env: Env, query_json: String, paged: bool) -> napi::Result<BudgetStatusQuery> {
    guard(&env, || {
        let q = budget_query(&query_json, paged)?;
        let (after_rule, after_key) = q.after.map_or((None, None), |(r, k)| (Some(r), Some(k)));
        Ok(BudgetStatusQuery { rule: q.rule, key: q.key, limit: q.limit, after_rule, after_key })
    })
}

fn budget_query(text: &str, paged: bool) -> Result<crate::core::router::budgets::Query, Failure> {
    let v = serde_json::from_str(text).unwrap_or(serde_json::Value::Bool(false));
    crate::core::router::budgets::query_of_value(&v, paged)
}

/// What `router.settleCost` found in this process's ledger.
#[napi(object)]
pub struct SettleCostAnswer {
    /// The in-process ledger knew the charge.
    pub known: bool,
    /// The budgets live in the shared ledger: its answer is the one to give.
    pub shared: bool,
}

/// `router.settleCost(id, actualCost)` in the in-process ledger (`id` and `actualCost` as
/// the caller gave them: any values, checked here). Throws `INVALID_SANDBOX_ID` /
/// `INVALID_INPUT`.
#[napi]
pub fn router_settle_cost(
    env: Env,
    router: &External<RouterState>,
    id: Unknown<'_>,
    actual_cost: Unknown<'_>,
) -> napi::Result<SettleCostAnswer> {
    let id: Option<String> = if id.get_type()? == ValueType::String { Some(String::from_unknown(id)?) } else { None };
    let cost: Option<f64> =
        if actual_cost.get_type()? == ValueType::Number { Some(f64::from_unknown(actual_cost)?) } else { None };
    guard(&env, || {
        let (known, shared) = router.router.borrow_mut().settle_cost_of(id.as_deref(), cost)?;
        Ok(SettleCostAnswer { known, shared })
    })
}

/// A circuit's state.
#[napi(string_enum = "kebab-case")]
pub enum CircuitStateName {
    /// Routing as usual.
    Closed,
    /// Excluded until `retryAt`.
    Open,
    /// The cooldown is over: the next provision may probe it (one at a time).
    HalfOpen,
}

/// One pool's health, as `router.health()` returns it: numbers and codes only.
#[napi(object, use_nullable = true)]
pub struct PoolHealthRecord {
    /// The pool's id.
    pub provider_id: String,
    /// The circuit's state now.
    pub state: CircuitStateName,
    /// Why it opened (`CONSECUTIVE_FAILURES`, `CONSECUTIVE_RETRYABLE_FAILURES`,
    /// `TRIAL_FAILED`); null when closed.
    pub cause: Option<String>,
    /// Open: when it may be probed (ISO 8601). Otherwise null.
    pub retry_at: Option<String>,
    /// Half-open: whether the single trial provision is running.
    pub trial_in_flight: bool,
    /// Launch outcomes recorded.
    pub samples: f64,
    /// Weighted success rate (0..1); null before the first outcome.
    pub success_rate: Option<f64>,
    /// Weighted launch-to-handle latency of successes, ms; null before the first success.
    pub latency_ms: Option<f64>,
    /// p95 of launch-to-handle latency (a sketch's bucket bound, within 19 %), ms.
    pub p95_latency_ms: Option<f64>,
    /// Consecutive outcome-unknown failures, timeouts and malformed handles.
    pub consecutive_failures: u32,
    /// Consecutive classified pre-allocation failures.
    pub consecutive_retryable_failures: u32,
    /// The current cooldown (open or half-open), or the first one (closed), ms.
    pub cooldown_ms: f64,
}

/// Every pool of the router's registry, in registration order, at `health` (the health
/// clock, ms; omitted: the wall clock); empty when the router tracks no health.
#[napi]
pub fn router_health(router: &External<RouterState>, health: Option<f64>) -> Vec<PoolHealthRecord> {
    let now = now_of(health, None).health;
    let r = router.router.borrow();
    let ids: Vec<String> = r.registry().borrow().registry.pools().iter().map(|p| p.id.clone()).collect();
    ids.into_iter()
        .filter_map(|id| {
            let s = r.pool_health(&id, now)?;
            let (state, cause, retry_at, trial) = match s.state {
                CircuitState::Closed => (CircuitStateName::Closed, None, None, false),
                CircuitState::Open { retry_at, cause } => {
                    (CircuitStateName::Open, Some(cause), Some(iso8601_millis(retry_at)), false)
                }
                CircuitState::HalfOpen { trial_in_flight, cause } => {
                    (CircuitStateName::HalfOpen, Some(cause), None, trial_in_flight)
                }
            };
            Some(PoolHealthRecord {
                provider_id: id,
                state,
                cause: cause.map(|c| c.code().to_string()),
                retry_at,
                trial_in_flight: trial,
                samples: s.samples as f64,
                success_rate: s.success_rate,
                latency_ms: s.latency_ms,
                p95_latency_ms: s.p95_latency_ms,
                consecutive_failures: s.consecutive_failures,
                consecutive_retryable_failures: s.consecutive_retryable_failures,
                cooldown_ms: s.cooldown_ms as f64,
            })
        })
        .collect()
}

/// The `sandbox_router_circuit_state` gauge of every pool of the registry, in order, at
/// `health` (ms): 0 closed, 1 half-open, 2 open; empty when the router tracks no health.
#[napi]
pub fn router_circuit_states(router: &External<RouterState>, health: Option<f64>) -> Vec<u32> {
    let now = now_of(health, None).health;
    let r = router.router.borrow();
    let ids: Vec<String> = r.registry().borrow().registry.pools().iter().map(|p| p.id.clone()).collect();
    ids.iter().filter_map(|id| r.pool_health(id, now).map(|s| circuit_gauge(&s.state))).collect()
}

/// The attempt order `router.route()` reports for compiled request `request`: pool
/// indices, best first, at most `maxAcquisitionAttempts`, written into `out`; returns how
/// many. Throws the typed `NO_ELIGIBLE_PROVIDER` error.
// The order crosses in a lent Uint32Array: the 6-pool route floor (≥ 0.7x) needs it.
#[napi]
pub fn route_order(
    env: Env,
    router: &External<RouterState>,
    request: &External<CompiledRequest>,
    detached: bool,
    mut out: Uint32ArraySlice<'_>,
    health: Option<f64>,
) -> napi::Result<u32> {
    guard(&env, || {
        let now = now_of(health, None).health;
        let mut r = router.router.borrow_mut();
        let registry = r.registry().clone();
        let mut pools = registry.borrow_mut();
        let provider_order = r.provider_order().map(<[String]>::to_vec);
        let req = &request.req;
        let order = r.view(&mut pools, now, |pools, health| {
            let q = Question {
                req,
                detached,
                extras: None,
                provider_order: provider_order.as_deref(),
                health,
                over_budget: &[],
                paced: &[],
            };
            pools.candidates(&q, Some(req.max_attempts as usize))
        })?;
        // SAFETY: JavaScript cannot run during this synchronous call, and nothing keeps the slice beyond it.
        let out = unsafe { out.as_mut() };
        if out.len() < order.len() {
            return Err(crate::binding::error::internal("(the order buffer is too small)"));
        }
        for (slot, &i) in out.iter_mut().zip(&order) {
            *slot = i as u32;
        }
        Ok(order.len() as u32)
    })
}

/// Whether a job of this router is making sandbox `id` now.
#[napi]
pub fn router_in_flight(router: &External<RouterState>, id: String) -> bool {
    SandboxKey::parse(&id).is_some_and(|k| router.router.borrow().in_flight(k))
}

/// The sandbox ids this router's jobs are making now (another router's reconcile asks).
#[napi]
pub fn router_in_flight_ids(router: &External<RouterState>) -> Vec<String> {
    router.router.borrow().in_flight_ids().into_iter().map(|k| k.to_string()).collect()
}

/// Jobs in flight (the leak tests count them).
#[napi]
pub fn router_jobs_in_flight(router: &External<RouterState>) -> u32 {
    router.router.borrow().jobs_in_flight() as u32
}

/// A pool's credential readiness answer.
#[napi]
pub enum Readiness {
    /// `false`.
    Unavailable,
    /// `true`.
    Available,
    /// It threw, rejected or timed out.
    Failed,
    /// It answered a non-boolean.
    NotBoolean,
}

/// The pools (by index) whose credential readiness answered false, from every pool's
/// answer (in registration order); throws the typed `PROVISIONING_AVAILABILITY_FAILED`
/// error of the first that failed. `sandboxId`: a provision's (the error names it, and its
/// `provision.exhausted` event is decided).
#[napi]
pub fn readiness_of(
    env: Env,
    router: &External<RouterState>,
    answers: Vec<Readiness>,
    sandbox_id: Option<String>,
    clock_now: Option<f64>,
) -> napi::Result<Vec<u32>> {
    use crate::core::router::pools::{readiness, Readiness as R};
    guard(&env, || {
        let answers: Vec<R> = answers
            .into_iter()
            .map(|a| match a {
                Readiness::Unavailable => R::Unavailable,
                Readiness::Available => R::Available,
                Readiness::Failed => R::Failed,
                Readiness::NotBoolean => R::NotBoolean,
            })
            .collect();
        let mut r = router.router.borrow_mut();
        let registry = r.registry().clone();
        let answer = readiness(&registry.borrow(), &answers);
        match answer {
            Ok(v) => Ok(v.into_iter().map(|i| i as u32).collect()),
            Err(mut e) => {
                if let Some(id) = sandbox_id.as_deref().and_then(crate::core::ids::SandboxKey::parse) {
                    e.sandbox_id = Some(id.to_string());
                    r.refused_early(id, &e, now_of(None, clock_now).router);
                }
                Err(e)
            }
        }
    })
}

/// Validates a request's labels sent apart (`route` and `explain`; a provision's begin
/// checks them itself) within `router`'s label limits (omitted: the defaults); throws the
/// typed `INVALID_REQUEST` error naming the field.
#[napi]
pub fn check_labels(env: Env, labels_json: String, router: Option<&External<RouterState>>) -> napi::Result<()> {
    guard(&env, || {
        let limits = router.map_or_else(LabelLimits::default, |r| r.router.borrow().label_limits);
        labels_from(&labels_json, &limits).map(drop)
    })
}

/// The waiting provisions to wake now (a step's `WAKE` flag said there are some), once.
#[napi]
pub fn router_wakes(router: &External<RouterState>) -> Vec<u32> {
    crate::binding::error::contained(Vec::new(), || router.router.borrow_mut().take_wakes())
}

/// `router.close()`: every waiting provision is to end `ROUTER_CLOSED` (they are among
/// `routerWakes` next), and none waits from now on.
#[napi]
pub fn router_close_queue(router: &External<RouterState>) {
    crate::binding::error::contained((), || router.router.borrow_mut().close_queue());
}

/// One fairness lane of the wait queue (`queueStatus().byKey`).
#[napi(object)]
pub struct QueueLaneStatus {
    /// The `fairBy` label's value (`""`: requests without the label).
    pub value: String,
    /// Provisions waiting in it.
    pub depth: u32,
    /// How long its oldest has waited, ms.
    pub oldest_wait_ms: f64,
}

/// One pool's pacing now (`queueStatus().pools`).
#[napi(object)]
pub struct PoolPaceStatus {
    /// The pool.
    pub provider_id: String,
    /// Whole launch tokens it holds now (absent: it declares no `rateLimit`).
    pub tokens: Option<u32>,
    /// ISO-8601: when its `Retry-After` cooldown ends (absent: none in force).
    pub cooling_until: Option<String>,
}

/// `router.queueStatus()`.
#[napi(object)]
pub struct QueueStatusRecord {
    /// Whether the router has a wait queue (option `queue`).
    pub enabled: bool,
    /// Provisions waiting.
    pub depth: u32,
    /// How long the oldest has waited, ms (0 when none waits).
    pub oldest_wait_ms: f64,
    /// Per value of the `fairBy` label that has a waiter, by value (empty without `fairBy`).
    pub by_key: Vec<QueueLaneStatus>,
    /// Every pool of the registry, in registration order: its tokens and cooldown.
    pub pools: Vec<PoolPaceStatus>,
}

/// `router.queueStatus()` at the router's clock (`clockNow`; omitted: the wall clock).
#[napi]
pub fn router_queue_status(router: &External<RouterState>, clock_now: Option<f64>) -> QueueStatusRecord {
    let now = crate::binding::clock::now_of(None, clock_now).router;
    let (queue, pools) = router.router.borrow().queue_status(now);
    let pools = pools
        .into_iter()
        .map(|p| PoolPaceStatus {
            provider_id: p.id,
            tokens: p.tokens,
            cooling_until: p.cooling_until.map(crate::core::clock::iso8601_millis),
        })
        .collect();
    match queue {
        None => QueueStatusRecord { enabled: false, depth: 0, oldest_wait_ms: 0.0, by_key: Vec::new(), pools },
        Some(q) => QueueStatusRecord {
            enabled: true,
            depth: q.depth as u32,
            oldest_wait_ms: q.oldest_wait_ms as f64,
            by_key: q
                .lanes
                .into_iter()
                .map(|(value, depth, oldest)| QueueLaneStatus {
                    value,
                    depth: depth as u32,
                    oldest_wait_ms: oldest as f64,
                })
                .collect(),
            pools,
        },
    }
}
