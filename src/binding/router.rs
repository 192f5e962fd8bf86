//! napi glue for one router's native state: its fleet, live health, capacity ledger, the
//! default mapping store and the owner of its intents, made once from the router's options
//! ([`NativeRouter`]), and the decisions that read them (`route`'s order, the pools a
//! resolver is asked about, `router.health()`).
//!
//! Why one object? Every provision needs the same per-router facts; passed as one class
//! reference, they cross the seam once per call instead of as a handful of arguments, and
//! the options they come from are validated in one place (the health ranges and defaults
//! are `core::health`'s, the only copy).

use crate::binding::budget::{BudgetCore, BudgetStatusRecord};
use crate::binding::clock::now_millis;
use crate::binding::error::{guard, Failure, NativeError};
use crate::binding::handles::Handles;
use crate::binding::mapping::NativeMappingStore;
use crate::binding::registry::{registry_of, HealthView, Question, RegistryInner};
use crate::binding::request::request_of;
use crate::binding::sqlite::NativeSqliteStore;
use crate::core::capacity::Ledger;
use crate::core::clock::iso8601_millis;
use crate::core::error::ErrorClass;
use crate::core::health::{config_of_option, CircuitState, Health};
use crate::core::ids::SandboxKey;
use crate::core::mapping::MappingStore;
use crate::core::request::validate_fleet;
use crate::core::telemetry::circuit_gauge;
use crate::core::warm::Warm;
use napi::bindgen_prelude::Uint32ArraySlice;
use napi::Env;
use napi_derive::napi;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// A router's options, as `lib/options.js` read them once.
#[napi(object)]
pub struct RouterSettings {
    /// The fleet name stamped into every launch (validated here).
    pub fleet: String,
    /// The `health` option as JSON text, its `clock` taken out: `true` (also when absent),
    /// `false`, or the object (validated here: `core::health::config_of_option`).
    pub health_json: String,
    /// Capacity routing, when the router has a capacity policy.
    pub capacity: Option<CapacitySettings>,
    /// `callbackTimeoutMs`: bounds the mapping write after a launch.
    pub callback_timeout_ms: f64,
    /// Whether the router has an observer or telemetry (its machines then record events).
    pub observe: bool,
    /// This process's host name (intent records name their writer).
    pub owner_host: String,
    /// This process's pid.
    pub owner_pid: f64,
    /// This router's random session id.
    pub session: String,
    /// The `budgets` option as JSON text (validated here: `core::budget::rules_of_option`);
    /// absent: no budgets.
    pub budgets_json: Option<String>,
}

/// A router's capacity policy.
#[napi(object)]
pub struct CapacitySettings {
    /// The explicit provider order that replaces strategy ranking.
    pub provider_order: Vec<String>,
    /// Life of a post-launch assumption no read has reflected yet, ms.
    pub reservation_ttl_ms: f64,
    /// Whether the holds live in a shared coordinator (`PostgresMappingStore`).
    pub coordinated: bool,
}

/// One router's native state (see the module docs).
#[napi]
pub struct NativeRouter {
    pub(crate) core: Rc<RouterCore>,
    handle: u32,
}

thread_local! {
    static ROUTERS: RefCell<Handles<Rc<RouterCore>>> = const { RefCell::new(Handles::new()) };
}

/// The router behind `handle`.
pub(crate) fn router_of(handle: u32) -> Result<Rc<RouterCore>, Failure> {
    ROUTERS.with(|r| r.borrow().get(handle, "router"))
}

impl Drop for NativeRouter {
    fn drop(&mut self) {
        let _ = ROUTERS.try_with(|r| r.borrow_mut().remove(self.handle));
    }
}

/// What a router's machines and decisions share.
pub(crate) struct RouterCore {
    pub(crate) fleet: Arc<str>,
    pub(crate) health: Option<RefCell<Health>>,
    /// Process-unique: registries cache their pool → health slot maps by it.
    health_id: u64,
    pub(crate) capacity: Option<CapacityCore>,
    /// The default store, written by the success call itself.
    pub(crate) store: Option<Rc<RefCell<MappingStore>>>,
    pub(crate) callback_timeout_ms: u64,
    pub(crate) observe: bool,
    pub(crate) owner: Owner,
    /// Warm pools, once `warmUp()` started them (`binding::warm`).
    pub(crate) warm: RefCell<Option<Warm>>,
    /// Budgets (option `budgets`), when the router has rules.
    pub(crate) budgets: Option<crate::binding::budget::BudgetCore>,
}

/// The writer intent records name.
pub(crate) struct Owner {
    pub(crate) host: String,
    pub(crate) pid: f64,
    pub(crate) session: String,
}

/// A router's capacity policy and its in-process ledger.
pub(crate) struct CapacityCore {
    pub(crate) provider_order: Vec<String>,
    pub(crate) ledger: RefCell<Ledger>,
    /// The ledger numbers pools by id: a router's ledger outlives registry changes and
    /// serves caller registries that are re-read on every call.
    ledger_pools: RefCell<HashMap<String, usize>>,
    /// The holds live in a shared ledger: the machine admits on the coordinator's
    /// verdicts and hands its settlements out.
    pub(crate) coordinated: bool,
}

impl CapacityCore {
    /// The ledger's key for pool `id`.
    pub(crate) fn ledger_key(&self, id: &str) -> usize {
        let mut pools = self.ledger_pools.borrow_mut();
        let next = pools.len();
        *pools.entry(id.to_string()).or_insert(next)
    }
}

thread_local! {
    static NEXT_HEALTH_ID: Cell<u64> = const { Cell::new(1) };
}

fn config_error(field: &str, expectation: &str) -> Failure {
    NativeError::invalid(
        ErrorClass::Configuration,
        "INVALID_CONFIGURATION",
        format!("invalid router options: {field} {expectation}"),
        field,
    )
}

/// The instant health works with: the router's injected clock's reading, or (none given:
/// the default clock) the wall clock, read here so that JavaScript passes no argument for
/// it. The core never reads a clock.
pub(crate) fn instant(now: Option<f64>) -> i64 {
    now.map_or_else(now_millis, |n| n as i64)
}

impl RouterCore {
    fn new(
        settings: RouterSettings,
        store: Option<&NativeMappingStore>,
        sqlite: Option<&NativeSqliteStore>,
    ) -> Result<Self, Failure> {
        if !validate_fleet(&settings.fleet) {
            return Err(config_error("fleet", "must be 1-63 characters of [a-z0-9][a-z0-9._-]* (a label-safe name)"));
        }
        let health_option = serde_json::from_str(&settings.health_json)
            .map_err(|_| config_error("health", "must be false, true or an object"))?;
        let health = config_of_option(&health_option)?.map(|c| RefCell::new(Health::new(c)));
        let health_id = NEXT_HEALTH_ID.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        });
        let coordinated = settings.capacity.as_ref().is_some_and(|c| c.coordinated);
        let capacity = settings.capacity.map(|c| CapacityCore {
            provider_order: c.provider_order,
            ledger: RefCell::new(Ledger::new(std::time::Duration::from_millis(c.reservation_ttl_ms.max(0.0) as u64))),
            ledger_pools: RefCell::new(HashMap::new()),
            coordinated: c.coordinated,
        });
        Ok(RouterCore {
            fleet: Arc::from(settings.fleet.as_str()),
            health,
            health_id,
            capacity,
            store: store.map(|s| s.store.clone()),
            callback_timeout_ms: settings.callback_timeout_ms.max(0.0) as u64,
            observe: settings.observe,
            owner: Owner { host: settings.owner_host, pid: settings.owner_pid, session: settings.session },
            warm: RefCell::new(None),
            budgets: match BudgetCore::of_option(settings.budgets_json.as_deref(), coordinated)? {
                Some(b) if !b.shared => Some(match sqlite {
                    Some(file) => b.persisted(file.charge_sink(), now_millis()),
                    None => b,
                }),
                other => other,
            },
        })
    }

    /// Runs `f` with the registry and this router's health view at `now` (None when the
    /// router tracks no health).
    pub(crate) fn view<T>(
        &self,
        registry: &mut RegistryInner,
        now: Option<f64>,
        f: impl FnOnce(&mut RegistryInner, Option<&HealthView<'_>>) -> T,
    ) -> T {
        match &self.health {
            None => f(registry, None),
            Some(h) => {
                let mut h = h.borrow_mut();
                let slots = registry.health_slots(&mut h, self.health_id);
                let view = HealthView { health: &h, slots, now: instant(now) };
                f(registry, Some(&view))
            }
        }
    }

    /// Which pools of `registry` a provision may claim from (by index): none unless the
    /// registry keeps a warm pool and this router's warm pools are started and not closed.
    pub(crate) fn claims(&self, registry: &RegistryInner) -> Option<Rc<[bool]>> {
        let pools = registry.warm.as_ref()?;
        match &*self.warm.borrow() {
            Some(w) if !w.closed => Some(pools.clone()),
            _ => None,
        }
    }

    /// Its health's process-unique id (registries cache their slot maps by it).
    pub(crate) fn health_id(&self) -> u64 {
        self.health_id
    }

    /// The capacity provider order, under capacity routing.
    pub(crate) fn provider_order(&self) -> Option<&[String]> {
        self.capacity.as_ref().map(|c| c.provider_order.as_slice())
    }
}

/// What `released` gave back.
#[napi(object)]
pub struct Released {
    /// A capacity hold (in-process ledger).
    pub capacity: bool,
    /// A budget's concurrent slot (in-process ledger).
    pub budget: bool,
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
#[napi(object)]
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

#[napi]
impl NativeRouter {
    /// A router's native state from its options (`store`: the default in-memory store, which
    /// the success call then writes itself; `sqlite`: the router's `SqliteMappingStore`,
    /// where budgets without a coordinator keep their charges). Throws the typed
    /// `INVALID_CONFIGURATION` error naming the option.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        settings: RouterSettings,
        store: Option<&NativeMappingStore>,
        sqlite: Option<&NativeSqliteStore>,
    ) -> napi::Result<Self> {
        guard(&env, || {
            let core = Rc::new(RouterCore::new(settings, store, sqlite)?);
            let handle = ROUTERS.with(|r| r.borrow_mut().insert(core.clone()));
            Ok(NativeRouter { core, handle })
        })
    }

    /// Its handle for the provision path (`beginAcquisition`, `order`).
    #[napi(getter)]
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Whether the router's budgets live in the shared ledger (`capacity.coordinator`); null
    /// without budgets.
    #[napi(getter)]
    pub fn budgets_shared(&self) -> Option<bool> {
        self.core.budgets.as_ref().map(|b| b.shared)
    }

    /// The rules at `now` (the router's clock, ms), for the shared ledger's status.
    #[napi]
    pub fn budget_rules(&self, now: Option<f64>) -> Vec<crate::binding::budget::BudgetRuleRecord> {
        self.core.budgets.as_ref().map(|b| b.rule_records(instant(now))).unwrap_or_default()
    }

    /// `router.budgetStatus()` of the in-process ledger at `now` (the router's clock, ms;
    /// omitted: the wall clock): every rule's keys, in rule order.
    #[napi]
    pub fn budget_status(&self, env: Env, now: Option<f64>) -> napi::Result<Vec<BudgetStatusRecord>> {
        guard(&env, || Ok(self.core.budgets.as_ref().map(|b| b.status(instant(now))).unwrap_or_default()))
    }

    /// `router.settleCost(id, actualCost)` in the in-process ledger: replaces the charge's
    /// estimate. False when the ledger does not know the charge (or has forgotten it: every
    /// window it counted in is over). Throws `INVALID_SANDBOX_ID` / `INVALID_INPUT`.
    #[napi]
    pub fn settle_cost(&self, env: Env, id: String, actual_cost: f64) -> napi::Result<bool> {
        guard(&env, || {
            let key = SandboxKey::parse_checked(&id)?;
            if !actual_cost.is_finite() || actual_cost < 0.0 {
                return Err(NativeError::invalid(
                    ErrorClass::RequestValidation,
                    "INVALID_INPUT",
                    "invalid settleCost: actualCost must be a finite number >= 0",
                    "actualCost",
                ));
            }
            Ok(self.core.budgets.as_ref().is_some_and(|b| {
                let known = b.ledger.borrow_mut().settle_cost(key, actual_cost);
                b.flush();
                known
            }))
        })
    }

    /// Sandbox `id` is gone (destroyed, or reclaimed by `reconcile`): its in-process
    /// capacity hold and its budgets' concurrent slot are given back. What was released.
    #[napi]
    pub fn released(&self, env: Env, id: String) -> napi::Result<Released> {
        guard(&env, || {
            let Some(key) = SandboxKey::parse(&id) else { return Ok(Released { capacity: false, budget: false }) };
            let capacity = self
                .core
                .capacity
                .as_ref()
                .filter(|c| !c.coordinated)
                .is_some_and(|c| c.ledger.borrow_mut().release_sandbox(key));
            let budget = self.core.budgets.as_ref().filter(|b| !b.shared).is_some_and(|b| {
                let released = b.ledger.borrow_mut().release(key);
                b.flush();
                released
            });
            Ok(Released { capacity, budget })
        })
    }

    /// Every pool of `provider_ids`, in that order, at `now` (ms; omitted: the wall clock);
    /// empty when the router tracks no health.
    #[napi]
    pub fn health(&self, env: Env, provider_ids: Vec<String>, now: Option<f64>) -> napi::Result<Vec<PoolHealthRecord>> {
        guard(&env, || {
            let Some(health) = &self.core.health else { return Ok(Vec::new()) };
            let h = health.borrow();
            let now = instant(now);
            Ok(provider_ids
                .into_iter()
                .map(|id| {
                    let s = h.snapshot(h.find(&id), now);
                    let (state, cause, retry_at, trial) = match s.state {
                        CircuitState::Closed => (CircuitStateName::Closed, None, None, false),
                        CircuitState::Open { retry_at, cause } => {
                            (CircuitStateName::Open, Some(cause), Some(iso8601_millis(retry_at)), false)
                        }
                        CircuitState::HalfOpen { trial_in_flight, cause } => {
                            (CircuitStateName::HalfOpen, Some(cause), None, trial_in_flight)
                        }
                    };
                    PoolHealthRecord {
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
                    }
                })
                .collect())
        })
    }

    /// The `sandbox_router_circuit_state` gauge of every pool of `provider_ids`, in that
    /// order, at `now` (ms; omitted: the wall clock): 0 closed, 1 half-open, 2 open
    /// (`core::telemetry::circuit_gauge`), from the snapshot `health` reads; empty when the
    /// router tracks no health.
    #[napi]
    pub fn circuit_states(&self, env: Env, provider_ids: Vec<String>, now: Option<f64>) -> napi::Result<Vec<u32>> {
        guard(&env, || {
            let Some(health) = &self.core.health else { return Ok(Vec::new()) };
            let h = health.borrow();
            let now = instant(now);
            Ok(provider_ids.iter().map(|id| circuit_gauge(&h.snapshot(h.find(id), now).state)).collect())
        })
    }
}

/// The attempt order `router.route()` reports for router `router`, registry `registry` and
/// compiled request `request` (handles): pool indices, best first, at most
/// `maxAcquisitionAttempts`, written into `out`; returns how many. Throws the typed
/// `NO_ELIGIBLE_PROVIDER` error. `now`: the router's injected clock (ms); omitted, the wall
/// clock.
#[napi]
pub fn route_order(
    env: Env,
    router: u32,
    registry: u32,
    request: u32,
    detached: bool,
    mut out: Uint32ArraySlice<'_>,
    now: Option<f64>,
) -> napi::Result<u32> {
    guard(&env, || {
        let (core, registry, req) = (router_of(router)?, registry_of(registry)?, request_of(request)?);
        let mut inner = registry.borrow_mut();
        let order = core.view(&mut inner, now, |inner, health| {
            let q = Question {
                req: &req,
                detached,
                extras: None,
                provider_order: core.provider_order(),
                health,
                over_budget: &[],
            };
            inner.candidates(&q, Some(req.max_attempts as usize))
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
