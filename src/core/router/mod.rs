//! The router: one value that owns everything a `SandboxRouter` remembers (its pools, fleet,
//! live health, capacity ledger, budget ledger, warm inventory and the jobs in flight) and
//! decides every step of every job. Plain Rust, no napi, no I/O.
//!
//! Why one value? Each rule used to be reachable only through the glue that coordinated
//! health, the capacity ledger and budgets around the acquisition machine, so no single
//! place saw every decision, and a new rule landed wherever its data happened to be. Here
//! the glue converts a JavaScript call into a method call and back; JavaScript performs
//! what a job's step asks (a launch, a read, a store write) and reports its outcome, and
//! the router answers with the next step (`docs/architecture.md` traces one provision).
//!
//! Time is given, never read: every method that needs it takes the reading ([`Now`]): the
//! health clock (the `health.clock` option, else the router's) and the router's clock
//! (option `clock`), both epoch milliseconds.

pub mod budgets;
mod decisions;
pub mod job;
pub mod operation;
pub mod options;
pub mod pools;
pub mod provision;
pub mod queue;
pub mod reconcile;
pub mod replay;
mod slab;
pub mod step;
#[cfg(test)]
mod tests;
pub mod warm;

use crate::core::capacity::Ledger;
use crate::core::error::{ErrorClass, Failure, Fault};
use crate::core::events::Emitted;
use crate::core::health::{CircuitState, Health, HealthConfig, Snapshot};
use crate::core::ids::SandboxKey;
use crate::core::mapping::MappingStore;
use crate::core::warm::Warm;
use budgets::Budgets;
use job::Jobs;
use pools::{HealthView, Pools};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The clock readings a call is made at: the health clock and the router's clock (epoch ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// What live health reads (`health.clock`, else the router's clock).
    pub health: i64,
    /// The router's clock (`clock`): budgets, warm members' ages, the capacity ledger, events.
    pub router: i64,
}

impl Now {
    /// Both clocks at `ms`.
    pub fn at(ms: i64) -> Now {
        Now { health: ms, router: ms }
    }
}

/// A router's validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The fleet stamped into every launch.
    pub fleet: String,
    /// Live health, unless `health: false`.
    pub health: Option<HealthConfig>,
    /// Capacity routing.
    pub capacity: Option<CapacitySettings>,
    /// `callbackTimeoutMs`: bounds every caller callback and store call.
    pub callback_timeout_ms: u64,
    /// `operationTimeoutMs`: bounds one runtime call made for an operation or a clean-up.
    pub operation_timeout_ms: u64,
    /// `capacity.timeoutMs`: bounds one capacity read.
    pub capacity_timeout_ms: u64,
    /// The store takes launch intents (`intent` and `intents`).
    pub intents: bool,
    /// The router has a failure classifier.
    pub classifier: bool,
    /// Whether the router has an observer or telemetry (its jobs then record events).
    pub observe: bool,
    /// Who writes this router's intent records.
    pub owner: Owner,
    /// The budget rules.
    pub budgets: Vec<crate::core::budget::Rule>,
    /// `limits`: label limits and the budgets' settle horizon.
    pub limits: options::Limits,
    /// The mapping store is the capacity coordinator (one `PostgresMappingStore`): a
    /// provision's record and its settlements, and a destroy's writes, can each be one
    /// transaction (flag `COMBINED`).
    pub combined: bool,
    /// The wait queue (`queue`), when on.
    pub queue: Option<crate::core::queue::QueueConfig>,
    /// Decision records (`decisions`), when on.
    pub decisions: Option<crate::core::decision::DecisionConfig>,
    /// The key of the records' label hashes (random per router; the glue draws it).
    pub decision_key: [u8; 32],
}

/// A router's capacity policy.
#[derive(Debug, Clone)]
pub struct CapacitySettings {
    /// The explicit provider order that replaces strategy ranking.
    pub provider_order: Vec<String>,
    /// Life of a post-launch assumption no read has reflected yet, ms.
    pub reservation_ttl_ms: u64,
    /// Whether the holds live in a shared coordinator (`PostgresMappingStore`).
    pub coordinated: bool,
}

/// The writer intent records name.
#[derive(Debug, Clone)]
pub struct Owner {
    /// This process's host name.
    pub host: String,
    /// This process's pid.
    pub pid: f64,
    /// This router's random session id.
    pub session: String,
}

/// A router's capacity policy and its in-process ledger.
pub struct Capacity {
    /// The explicit provider order.
    pub provider_order: Vec<String>,
    /// Holds of launches in flight and assumptions.
    pub ledger: Ledger,
    /// The ledger numbers pools by id: it outlives registry changes and serves caller
    /// registries that are re-read on every call.
    ledger_pools: HashMap<String, usize>,
    /// The holds live in a shared ledger.
    pub coordinated: bool,
    /// How long an allocation is assumed before a read reflects it, ms.
    pub reservation_ttl_ms: u64,
}

impl Capacity {
    /// The ledger's key for pool `id`.
    pub fn ledger_key(&mut self, id: &str) -> usize {
        let next = self.ledger_pools.len();
        *self.ledger_pools.entry(id.to_string()).or_insert(next)
    }
}

/// `INVALID_INPUT` of `settleCost`'s `actualCost`.
fn invalid_cost() -> Failure {
    Fault::invalid(
        ErrorClass::RequestValidation,
        "INVALID_INPUT",
        "invalid settleCost: actualCost must be a finite number from 0 to 1000000000",
        "actualCost",
    )
}

/// Process-unique ids of routers' health: registries cache their pool → slot maps by it.
static NEXT_HEALTH_ID: AtomicU64 = AtomicU64::new(1);

/// One router's state and rules (see the module docs).
pub struct Router {
    /// The fleet stamped into every launch.
    pub fleet: Arc<str>,
    /// Live health (None: `health: false`).
    pub health: Option<Health>,
    health_id: u64,
    /// Capacity routing.
    pub capacity: Option<Capacity>,
    /// The default mapping store, written by the success call itself.
    pub store: Option<Rc<RefCell<MappingStore>>>,
    /// `callbackTimeoutMs`.
    pub callback_timeout_ms: u64,
    /// `operationTimeoutMs`.
    pub operation_timeout_ms: u64,
    /// `capacity.timeoutMs`.
    pub capacity_timeout_ms: u64,
    /// The store takes launch intents.
    pub intents: bool,
    /// The router has a failure classifier.
    pub classifier: bool,
    /// Whether jobs record events.
    pub observe: bool,
    /// Who writes this router's intents.
    pub owner: Owner,
    /// Warm pools, once `warmUp()` started them.
    pub warm: Option<Warm>,
    /// The warm pools' work: queued, in flight, and who waits for it.
    pub(crate) warm_work: warm::WarmWork,
    /// Budgets, when the router has rules.
    pub budgets: Option<Budgets>,
    /// Each pool's launch tokens and `Retry-After` cooldown (`core::pacing`).
    pub(crate) pacing: crate::core::pacing::Pacing,
    /// The wait queue (`queue`), when on (`queue.rs`).
    pub(crate) queue: Option<crate::core::queue::Queue>,
    /// Decision records (`decisions`), when on (`core::decision`; `decisions.rs`).
    pub(crate) decisions: Option<crate::core::decision::Decisions>,
    /// The settings it was made with (a replay makes a router of them: `replay.rs`).
    pub(crate) settings: Settings,
    /// Waiting jobs to wake now (flag `WAKE`): a pool may have freed for them.
    pub(crate) wakes: Vec<u32>,
    /// Bounds on a request's launch labels (`limits`).
    pub label_limits: crate::core::request::LabelLimits,
    /// The mapping store is the coordinator and the holds live there: steps whose writes
    /// can share one transaction say so (`flags::COMBINED`, `flags::SEQUENCE`).
    pub(crate) combined: bool,
    /// The registry the next decision uses.
    registry: Rc<RefCell<Pools>>,
    /// The jobs in flight.
    pub(crate) jobs: Jobs,
    /// The operations by id in flight (`operation.rs`).
    pub(crate) operations: operation::Operations,
    /// The reconcile runs in flight (`reconcile.rs`).
    pub(crate) reconciles: reconcile::Runs,
    /// Events decided outside a job (a destroy, a reconcile run, a refill pause), in order.
    events: Vec<Emitted>,
    /// The router's clock at the last call that read it (events decided without one).
    pub(crate) clock: i64,
}

impl Router {
    /// A router over `registry` from its settings (validated: `options::read`); `store`: the
    /// default in-memory store (the success call writes it); `sink`: where in-process budget
    /// charges are kept.
    pub fn new(
        settings: Settings,
        registry: Rc<RefCell<Pools>>,
        store: Option<Rc<RefCell<MappingStore>>>,
        sink: Option<Box<dyn budgets::ChargeSink>>,
        now: i64,
    ) -> Result<Router, Failure> {
        let coordinated = settings.capacity.as_ref().is_some_and(|c| c.coordinated);
        let kept = settings.clone();
        Ok(Router {
            settings: kept,
            fleet: Arc::from(settings.fleet.as_str()),
            health: settings.health.map(Health::new),
            health_id: NEXT_HEALTH_ID.fetch_add(1, Ordering::Relaxed),
            capacity: settings.capacity.map(|c| Capacity {
                provider_order: c.provider_order,
                ledger: Ledger::new(c.reservation_ttl_ms),
                ledger_pools: HashMap::new(),
                coordinated: c.coordinated,
                reservation_ttl_ms: c.reservation_ttl_ms,
            }),
            store,
            callback_timeout_ms: settings.callback_timeout_ms,
            operation_timeout_ms: settings.operation_timeout_ms,
            capacity_timeout_ms: settings.capacity_timeout_ms,
            intents: settings.intents,
            classifier: settings.classifier,
            observe: settings.observe,
            owner: settings.owner,
            warm: None,
            warm_work: warm::WarmWork::default(),
            budgets: Budgets::new(settings.budgets, coordinated, sink, now, settings.limits.settle_horizon_ms),
            pacing: crate::core::pacing::Pacing::default(),
            decisions: settings.decisions.map(|d| crate::core::decision::Decisions::new(d, settings.decision_key)),
            queue: settings.queue.map(|q| {
                let mut q = crate::core::queue::Queue::new(q);
                q.per_lane = coordinated;
                q
            }),
            wakes: Vec::new(),
            label_limits: settings.limits.labels,
            combined: settings.combined && coordinated,
            registry,
            jobs: Jobs::default(),
            operations: operation::Operations::default(),
            reconciles: reconcile::Runs::default(),
            events: Vec::new(),
            clock: now,
        })
    }

    /// The registry the next decision uses.
    pub fn registry(&self) -> &Rc<RefCell<Pools>> {
        &self.registry
    }

    /// Decides on `registry` from now on (a caller's registry is read again on every call;
    /// provisions in flight keep the one they routed on).
    pub fn use_registry(&mut self, registry: Rc<RefCell<Pools>>) {
        self.registry = registry;
    }

    /// Runs `f` with the registry and this router's health view at `now` (None when the
    /// router tracks no health).
    pub fn view<T>(
        &mut self,
        pools: &mut Pools,
        now: i64,
        f: impl FnOnce(&mut Pools, Option<&HealthView<'_>>) -> T,
    ) -> T {
        match &mut self.health {
            None => f(pools, None),
            Some(h) => {
                let slots = pools.health_slots(h, self.health_id);
                let view = HealthView { health: h, slots, now };
                f(pools, Some(&view))
            }
        }
    }

    /// The capacity provider order, under capacity routing.
    pub fn provider_order(&self) -> Option<&[String]> {
        self.capacity.as_ref().map(|c| c.provider_order.as_slice())
    }

    /// Whether capacity is admitted by a shared coordinator (`capacity.coordinator`): its
    /// ledger, and pacing, are the fleet's.
    pub fn coordinated(&self) -> bool {
        self.capacity.as_ref().is_some_and(|c| c.coordinated)
    }

    /// Whether the budgets live in the shared ledger; None without budgets.
    pub fn budgets_shared(&self) -> Option<bool> {
        self.budgets.as_ref().map(|b| b.shared)
    }

    /// Sandbox `id` is gone (destroyed, or reclaimed by `reconcile`): its in-process
    /// capacity hold and its budgets' concurrent slot are given back. (capacity, budget):
    /// what was released.
    pub fn released(&mut self, id: SandboxKey) -> (bool, bool) {
        let capacity = self.capacity.as_mut().filter(|c| !c.coordinated).is_some_and(|c| c.ledger.release_sandbox(id));
        let budget = self.budgets.as_mut().filter(|b| !b.shared).is_some_and(|b| {
            let released = b.ledger.release(id);
            b.flush();
            released
        });
        // Room may have freed for a waiting provision.
        self.wake_firsts();
        (capacity, budget)
    }

    /// `router.settleCost(id, actualCost)` in the in-process ledger. False when the ledger
    /// does not know the charge. `INVALID_INPUT` for a cost that is not finite and ≥ 0.
    pub fn settle_cost(&mut self, id: SandboxKey, actual_cost: f64) -> Result<bool, Failure> {
        if crate::core::budget::Micros::of(actual_cost).is_none() {
            return Err(invalid_cost());
        }
        Ok(self.budgets.as_mut().is_some_and(|b| {
            let known = b.ledger.settle_cost(id, actual_cost);
            b.flush();
            known
        }))
    }

    /// `router.settleCost(id, actualCost)` as the caller called it (`id`: None when not a
    /// string; `actual_cost`: None when not a number): `INVALID_SANDBOX_ID` /
    /// `INVALID_INPUT` in that order, then [`Router::settle_cost`]. (known, shared): whether
    /// this process's ledger knew the charge, and whether the shared ledger's answer is the
    /// one to give (budgets in a coordinator).
    pub fn settle_cost_of(&mut self, id: Option<&str>, actual_cost: Option<f64>) -> Result<(bool, bool), Failure> {
        let id = id.ok_or_else(operation::id_not_a_string)?;
        let cost = actual_cost.ok_or_else(invalid_cost)?;
        let known = self.settle_cost(SandboxKey::parse_checked(id)?, cost)?;
        Ok((known, self.budgets.as_ref().is_some_and(|b| b.shared)))
    }

    /// The shared ledger answered the settlement of sandbox `sandbox`'s reservation on pool
    /// `pool` (`late`: its reservation had been freed, because this process's lease lapsed,
    /// and the charge was written again, over the limits if need be): a late one is reported
    /// as `budget.charged.late`, never dropped silently.
    pub fn budget_settled(&mut self, sandbox: SandboxKey, pool: &str, late: bool, now: i64) {
        if late {
            self.emit(now, Some(sandbox), crate::core::events::Event::BudgetChargedLate { pool: pool.into() });
        }
    }

    /// The health of pool `id` at `now` (a fresh pool's when it has no outcome yet); None
    /// when the router tracks no health.
    pub fn pool_health(&self, id: &str, now: i64) -> Option<Snapshot> {
        self.health.as_ref().map(|h| h.snapshot(h.find(id), now))
    }

    /// Whether pool `id`'s circuit is closed at `now` (always, without health tracking).
    pub fn circuit_closed(&self, id: &str, now: i64) -> bool {
        self.health
            .as_ref()
            .is_none_or(|h| h.find(id).is_none_or(|slot| matches!(h.state(slot, now), CircuitState::Closed)))
    }

    /// Emits `event` about `sandbox` (or the router) at `now`, when anyone listens.
    pub fn emit(&mut self, now: i64, sandbox: Option<SandboxKey>, mut event: crate::core::events::Event) {
        if self.observe {
            if let (Some(id), true) = (sandbox, self.decisions.is_some()) {
                crate::core::decision::name_record(&mut event, id);
            }
            self.events.push(Emitted { at: now, sandbox, event });
        }
    }

    /// Whether events decided outside a job wait to be taken.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The events decided outside a job since the last call.
    pub fn take_events(&mut self) -> Vec<Emitted> {
        std::mem::take(&mut self.events)
    }

    /// Whether a provision or refill of this router is making sandbox `id` now.
    pub fn in_flight(&self, id: SandboxKey) -> bool {
        self.jobs.has(id)
    }

    /// The sandbox ids this router's jobs are making now.
    pub fn in_flight_ids(&self) -> Vec<SandboxKey> {
        self.jobs.ids()
    }

    /// Jobs in flight, operations by id and reconcile runs included (the leak tests count them).
    pub fn jobs_in_flight(&self) -> usize {
        self.jobs.len() + self.operations.len() + self.reconciles.len()
    }
}
