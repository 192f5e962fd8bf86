//! The router's warm pools (`core::warm` holds their rules): the inventory and counters of
//! this process, and every piece of work that keeps them, decided here and performed by the
//! caller on the one driver loop (`lib/driver.js`).
//!
//! Why is warm work polled? The caller used to run a "pass" of its own: it picked the
//! timer, decided which member to re-resolve, which to destroy, whether a pool was ready,
//! what `close()` counted. Here the router owns all of it, in quinn-proto's shape: the
//! caller asks [`Router::warm_poll`] for the next piece of work until there is none, asks
//! [`Router::warm_timeout`] when to wake (one timer), and reports each step's outcome; the
//! router answers the next step. A piece of work is a refill (a provision job of one
//! candidate: `provision.rs`) or a *task* of one or two steps:
//!
//! | task | steps (StepKind) | what follows |
//! | --- | --- | --- |
//! | retire a member (expired, beyond the target, at close) | [`WarmResolve`] without a live handle, [`WarmDestroy`] | its record removed once it is gone; `warm.member.expired`; close's counts |
//! | check a pool | [`WarmFleet`] (the fleet's members), [`WarmList`] (the pool's native finder) | members the listing lacks are lost; without a finder, one check per member |
//! | check a member / adopt a record | [`WarmResolve`] | gone: lost (its record removed); adopted: idle |
//! | forget a record | [`WarmUnmap`] | |
//! | the fleet's pass, reservation, expiry, take, release | [`WarmFleet`] (an op of [`FleetOp`]) | refills, expiries, checks |
//! | adopt a previous process's members | [`WarmRecords`] | a check per record |
//!
//! A claim of a member this process holds no live handle of (a fleet claim, usually) is
//! re-resolved first ([`ClaimResolve`]); one found gone is dropped, gives a shared budget's
//! charge back ([`ClaimUncharge`]) and the provision launches cold.
//!
//! Why do refills run as provision jobs? A member is the router's own sandbox: a refill is
//! an acquisition of one candidate (its pool), one attempt, no fallback, stepped with the
//! very calls a provision uses, so it is admitted and held under the capacity policy,
//! counted in live health, bounded by a deadline, recorded by a launch intent, and seen in
//! flight by `reconcile`, exactly as a provision's launch.
//!
//! [`WarmResolve`]: StepKind::WarmResolve
//! [`WarmDestroy`]: StepKind::WarmDestroy
//! [`WarmUnmap`]: StepKind::WarmUnmap
//! [`WarmList`]: StepKind::WarmList
//! [`WarmFleet`]: StepKind::WarmFleet
//! [`WarmRecords`]: StepKind::WarmRecords
//! [`ClaimResolve`]: StepKind::ClaimResolve
//! [`ClaimUncharge`]: StepKind::ClaimUncharge

use super::job::{unknown_pool, write_record, Claimer, Job, NewRecord, Stage, WarmRole};
use super::pools::Pools;
use super::slab::Slab;
use super::step::{flags, Next, StepKind};
use super::{Now, Router};
use crate::core::acquisition::{settle_window_ms, Acquisition, CapacityPlan};
use crate::core::capabilities::Lifetime;
use crate::core::capacity::Measurement;
use crate::core::error::{Failure, Fault};
use crate::core::events::{Event, PoolId};
use crate::core::ids::SandboxKey;
use crate::core::request::{Request, DEFAULT_ACQUISITION_TIMEOUT_MS, SANDBOX_WARM_LABEL};
use crate::core::warm::{reserve_count, room_of, routable, Member, MissReason, Sizing, Warm, WarmConfig, WarmPool};
use rustc_hash::FxHashSet;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;

/// While a `warmUp()` waits on a fleet's inventory, its counts are read this often, ms.
pub const FLEET_POLL_MS: i64 = 50;
/// How long a `warmUp()` waits for other processes' refills of a fleet's pool, ms.
pub const FLEET_WAIT_MS: i64 = 10_000;
/// The shortest wait the router asks for, ms.
pub const MIN_WAKE_MS: i64 = 10;
/// The longest wait the router asks for (a JavaScript timer's longest), ms.
pub const MAX_WAKE_MS: i64 = (1 << 31) - 1;

/// One warm pool's declaration in a registry.
#[derive(Debug, Clone)]
pub struct WarmDecl {
    /// The pool's index in the registry.
    pub index: usize,
    /// Its id.
    pub id: String,
    /// Its `warm` option.
    pub config: WarmConfig,
    /// Its declared sandbox lifetime.
    pub lifetime: Lifetime,
    /// Its declared `coldStartLatencyMs` (the create latency before one is measured).
    pub prior_ms: Option<f64>,
    /// Its declared rate limit (refills take launch tokens too).
    pub rate_limit: Option<crate::core::pacing::RateLimit>,
}

/// Every warm pool's declaration in a registry, in registration order.
pub fn warm_pools(pools: &Pools) -> Vec<WarmDecl> {
    pools
        .registry
        .pools()
        .iter()
        .enumerate()
        .filter_map(|(index, p)| {
            p.warm.map(|config| WarmDecl {
                index,
                id: p.id.clone(),
                config,
                lifetime: p.capabilities.max_lifetime,
                prior_ms: p.signals.as_ref().ok().map(|s| s.cold_start_latency_ms),
                rate_limit: p.rate_limit,
            })
        })
        .collect()
}

/// What JavaScript knows about a router's stores when its warm pools start.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartFacts {
    /// The mapping store is the capacity coordinator itself (`PostgresMappingStore`).
    pub store_is_coordinator: bool,
    /// The mapping store is an `InMemoryMappingStore` (or a subclass of it).
    pub store_in_memory: bool,
    /// The mapping store has `list()`.
    pub store_lists: bool,
}

/// How a re-resolution (`getById(id, { owned: true })`) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// It answered a handle: the member exists.
    Found,
    /// It answered null (or nothing): the member is gone.
    Gone,
    /// It threw or timed out: nothing is known.
    Failed,
    /// The runtime has no `getById`: its handle is the provider id, trusted.
    Unsupported,
}

impl Resolution {
    fn alive(self) -> bool {
        matches!(self, Resolution::Found | Resolution::Unsupported)
    }
}

/// A call to the fleet's inventory (`PostgresMappingStore`), the `WarmFleet` step's op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetOp {
    /// Every pool's idle and launching counts (`warmCounts`).
    Counts = 0,
    /// Refill launches for a pool, granted up to its target (`warmReserve`).
    Reserve = 1,
    /// A pool's expired members, taken out (`warmExpire`).
    Expire = 2,
    /// One member, taken out (`warmTake`): it was found gone.
    Take = 3,
    /// This process's idle members of a pool (`warmMine`).
    Mine = 4,
    /// This process's idle members, taken out (`warmTakeMine`): `close()`.
    TakeMine = 5,
    /// A failed refill's grant, given back (`warmRelease`).
    Release = 6,
}

impl FleetOp {
    /// Every op with the name JavaScript knows it by (`binding.warmFleetOps()`).
    pub const ALL: &'static [(FleetOp, &'static str)] = &[
        (FleetOp::Counts, "Counts"),
        (FleetOp::Reserve, "Reserve"),
        (FleetOp::Expire, "Expire"),
        (FleetOp::Take, "Take"),
        (FleetOp::Mine, "Mine"),
        (FleetOp::TakeMine, "TakeMine"),
        (FleetOp::Release, "Release"),
    ];
}

/// What a `WarmFleet` step asks of the fleet's inventory.
#[derive(Debug, Clone)]
pub struct FleetAsk {
    /// The call.
    pub op: FleetOp,
    /// Its pool (Reserve, Expire, Mine).
    pub provider_id: String,
    /// Reserve: the pool's target.
    pub target: u32,
    /// Reserve: the launches wanted.
    pub want: u32,
    /// Reserve: how long a grant may stay unsettled, ms.
    pub hold_ms: u64,
    /// Expire: members launched before this instant have expired (router-clock ms).
    pub floor: i64,
    /// Take: the member.
    pub sandbox: Option<SandboxKey>,
    /// Release: the grant.
    pub token: Option<i64>,
}

/// The fleet's counts of one pool, as the database answered them.
#[derive(Debug, Clone)]
pub struct FleetCounts {
    /// The pool.
    pub provider_id: String,
    /// Idle members, every process's.
    pub idle: u64,
    /// Refill launches granted and in flight, every process's.
    pub launching: u64,
}

/// What the fleet's inventory answered a `WarmFleet` step (the field of its op).
#[derive(Debug, Clone, Default)]
pub struct FleetReply {
    /// Counts.
    pub counts: Vec<FleetCounts>,
    /// Reserve: the grants.
    pub tokens: Vec<i64>,
    /// Expire, Take, Mine, TakeMine: the members, with their pools.
    pub members: Vec<(String, Member)>,
}

/// One mapping record, as adoption reads it from the caller's store.
#[derive(Debug, Clone, Default)]
pub struct StoreRecord {
    /// Its id.
    pub id: String,
    /// Its pool.
    pub provider_id: Option<String>,
    /// The provider's id of its sandbox.
    pub provider_sandbox_id: Option<String>,
    /// Its warm label's value.
    pub warm: Option<String>,
    /// Its fleet label's value.
    pub fleet: Option<String>,
    /// `createdAt`, epoch ms.
    pub created_at_ms: Option<f64>,
}

/// A piece of warm work begun by [`Router::warm_poll`].
#[derive(Debug, Clone)]
pub struct Polled {
    /// The job's key (a refill) or the task's key.
    pub key: u32,
    /// Its first step.
    pub next: Next,
    /// A refill job (its record needs the stamp and the launch's parts).
    pub refill: bool,
    /// The sandbox it is about: the refill's member to be, or the task's member.
    pub sandbox: Option<SandboxKey>,
    /// The provider's id of the task's member.
    pub provider_sandbox_id: Option<String>,
    /// A fleet refill's grant.
    pub token: Option<i64>,
}

/// One warm pool's line of `warmUp()`'s report.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolReport {
    /// The pool.
    pub provider_id: String,
    /// Its target.
    pub target: u32,
    /// Its idle members (this process's, or the fleet's).
    pub idle: u64,
    /// Whether it holds its target.
    pub ready: bool,
    /// Why not.
    pub reason: Option<&'static str>,
    /// The code of its last refill failure.
    pub last_failure_code: Option<String>,
}

/// `warmUp()`'s report.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmUpReport {
    /// Every warm pool holds its target.
    pub ready: bool,
    /// Per pool, in registration order.
    pub pools: Vec<PoolReport>,
}

/// `close()`'s report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CloseReport {
    /// Idle members destroyed (or found gone already).
    pub destroyed: u32,
    /// Idle members whose destroy failed: they stay recorded, for `reconcile`.
    pub failed: u32,
    /// Idle members left recorded for the next process (`keepWarm`).
    pub kept: u32,
}

/// One pool's `warmStatus()` line.
#[derive(Debug, Clone)]
pub struct PoolStatus {
    /// The pool.
    pub provider_id: String,
    /// Its current target.
    pub target: u32,
    /// Why (`SIZE`, `MIN`, `DEMAND`, `MAX`).
    pub target_reason: &'static str,
    /// `min`, for a demand-following pool.
    pub min: Option<u32>,
    /// `max`, for a demand-following pool.
    pub max: Option<u32>,
    /// Idle members (the fleet's with a shared inventory).
    pub idle: u64,
    /// Refill launches in flight (the fleet's with a shared inventory).
    pub launching: u64,
    /// `process` or `fleet`.
    pub scope: &'static str,
    /// The counters.
    pub stats: crate::core::warm::WarmStats,
    /// Refills are paused.
    pub paused: bool,
    /// Claims per second (demand estimate).
    pub demand_per_second: f64,
    /// The create latency the pace uses, ms.
    pub create_latency_ms: Option<f64>,
    /// Refill launches allowed in flight now.
    pub pace: u32,
}

/// Whether a claim on one pool would be warm, for `explain`.
#[derive(Debug, Clone)]
pub struct ClaimExplanation {
    /// The pool.
    pub provider_id: String,
    /// Whether the request would take a member of it now.
    pub claim: bool,
    /// Why not.
    pub reason: Option<&'static str>,
    /// With the fleet's inventory and a compatible request: the floor to count members with.
    pub floor: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RetireWhy {
    /// `maxIdleMs`, or too close to the pool's lifetime.
    Age,
    /// Beyond the pool's target.
    Surplus,
    /// `close()`.
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VerifyWhy {
    /// The pool's check, without a native finder.
    Check,
    /// A previous process's record.
    Adopt,
}

#[derive(Debug, Clone)]
enum Kind {
    Retire {
        member: Member,
        why: RetireWhy,
    },
    Verify {
        member: Member,
        why: VerifyWhy,
    },
    /// A fleet member found gone, to take out of the database.
    Lost {
        member: Member,
    },
    Forget {
        id: SandboxKey,
    },
    Check {
        mine: Option<Vec<Member>>,
    },
    FleetPass,
    FleetReserve {
        want: u32,
    },
    FleetExpire {
        floor: i64,
    },
    FleetRelease {
        token: i64,
    },
    FleetTakeMine,
    Adopt,
}

impl Kind {
    fn member(&self) -> Option<&Member> {
        match self {
            Kind::Retire { member, .. } | Kind::Verify { member, .. } | Kind::Lost { member } => Some(member),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
enum Pending {
    Task { pool: String, kind: Kind },
    Refill { pool: String, token: Option<i64> },
}

impl Pending {
    fn pool(&self) -> &str {
        match self {
            Pending::Task { pool, .. } | Pending::Refill { pool, .. } => pool,
        }
    }
}

#[derive(Debug, Clone)]
struct Task {
    pool: String,
    index: usize,
    started: i64,
    kind: Kind,
    step: StepKind,
}

#[derive(Debug, Clone)]
struct UpWait {
    id: u32,
    since: i64,
    deadline: i64,
    /// Pools a member of which, launched during this wait, expired before the pool filled.
    expiring: FxHashSet<String>,
}

#[derive(Debug, Clone, Default)]
struct FleetPass {
    running: bool,
    again: bool,
    due: bool,
    last: Option<i64>,
}

/// The router's warm work: what is queued, the tasks in flight, the waiters.
#[derive(Debug, Default)]
pub struct WarmWork {
    queue: VecDeque<Pending>,
    /// Tasks in flight; a task's slot is empty while its report is being handled.
    tasks: Slab<Option<Task>>,
    ups: Vec<UpWait>,
    next_up: u32,
    closing: Option<(CloseReport, bool)>,
    fleet: FleetPass,
    adopting: u32,
}

impl WarmWork {
    fn push(&mut self, pool: &str, kind: Kind) {
        self.queue.push_back(Pending::Task { pool: pool.to_string(), kind });
    }

    fn running(&self) -> usize {
        self.tasks.len()
    }

    fn busy(&self, pool: &str) -> bool {
        self.queue.iter().any(|p| p.pool() == pool)
            || self.tasks.iter().any(|(_, t)| t.as_ref().is_some_and(|t| t.pool == pool))
    }

    fn task(&mut self, key: u32, step: StepKind) -> Result<Task, Failure> {
        let slot = self.tasks.get_mut(key).ok_or_else(|| Fault::internal("(an unknown warm task)"))?;
        match slot.take() {
            Some(t) if t.step == step => Ok(t),
            Some(t) => {
                *slot = Some(t);
                Err(Fault::internal("(a warm report out of turn)"))
            }
            None => Err(Fault::internal("(an unknown warm task)")),
        }
    }

    fn insert(&mut self, task: Task) -> u32 {
        self.tasks.insert(Some(task))
    }

    /// Puts task `key` back in its slot (its report handled).
    fn restore(&mut self, key: u32, task: Task) {
        if let Some(slot) = self.tasks.get_mut(key) {
            *slot = Some(task);
        }
    }
}

/// A fault for a warm call made before `warmUp()`.
fn not_started() -> Failure {
    Fault::internal("(warm pools are not started)")
}

impl Router {
    fn warm_mut(&mut self) -> Result<&mut Warm, Failure> {
        self.warm.as_mut().ok_or_else(not_started)
    }

    /// The flags every step carries for the router itself: router events to hand on, warm
    /// work that may be due.
    pub(crate) fn pending_flags(&self) -> u32 {
        let mut f = 0;
        if !self.events.is_empty() {
            f |= flags::ROUTER_EVENTS;
        }
        if self.warm.as_ref().is_some_and(|w| w.kick) {
            f |= flags::WARM;
        }
        if !self.wakes.is_empty() {
            f |= flags::WAKE;
        }
        f
    }

    /// Starts the warm pools (`warmUp()`, once). The inventory is the fleet's when the
    /// capacity coordinator is the mapping store itself; with a store that outlives the
    /// process and lists its records, members a previous process left (`close({ keepWarm:
    /// true })`) are adopted first.
    pub fn warm_start(&mut self, facts: StartFacts) {
        if self.warm.is_some() {
            return;
        }
        let coordinated = self.capacity.as_ref().is_some_and(|c| c.coordinated);
        let shared = coordinated && facts.store_is_coordinator;
        let decls = warm_pools(&self.registry.borrow());
        let mut w = Warm::new(shared);
        for d in &decls {
            w.pool(&d.id, d.config, d.lifetime).set_prior(d.prior_ms);
        }
        self.warm = Some(w);
        let durable = self.store.is_none() && !facts.store_in_memory;
        if !shared && durable && facts.store_lists {
            self.warm_work.adopting += 1;
            self.warm_work.push("", Kind::Adopt);
        }
    }

    /// The next piece of warm work at `now`, begun (its first step), or None when nothing
    /// is due. `ids` makes a refill's member id. Call until None, then ask
    /// [`Router::warm_timeout`] when to call again.
    pub fn warm_poll(
        &mut self,
        now: Now,
        ids: &mut dyn FnMut() -> Result<SandboxKey, Failure>,
    ) -> Result<Option<Polled>, Failure> {
        let Some(w) = self.warm.as_mut() else { return Ok(None) };
        w.kick = false;
        self.clock = now.router;
        self.warm_pass(now);
        while let Some(p) = self.warm_work.queue.pop_front() {
            if let Some(polled) = self.start_pending(p, now, ids)? {
                return Ok(Some(polled));
            }
        }
        Ok(None)
    }

    /// Decides what is due at `now`: per pool (this process's inventory) its target,
    /// expiries, surplus, check and refills; with the fleet's inventory, a pass that reads
    /// the fleet's counts first. Once closed: the close's drain when nothing is in flight.
    fn warm_pass(&mut self, now: Now) {
        let decls = warm_pools(&self.registry.borrow());
        let order = self.provider_order().map(<[String]>::to_vec);
        let circuits: Vec<bool> = decls.iter().map(|d| self.circuit_closed(&d.id, now.health)).collect();
        // A pass plans no more refills than the pool has launch tokens now (none while it
        // cools down): the next wakes when a token comes (`warm_timeout`), so a refill never
        // spins on a skip.
        // Waiting provisions come first: a pool they wait for plans no refill.
        let waited = self.queue.as_ref().map(|q| q.waited_pools()).unwrap_or_default();
        let tokens: Vec<u32> = decls
            .iter()
            .map(|d| {
                let queued = waited.iter().any(|p| **p == *d.id);
                if queued {
                    0
                } else {
                    self.pacing.available(&d.id, d.rate_limit, now.router)
                }
            })
            .collect();
        let mut events = Vec::new();
        let Router { warm, warm_work: work, .. } = self;
        let Some(w) = warm.as_mut() else { return };
        w.passed_at = Some(now.router);
        if w.closed {
            close_progress(w, work);
            return;
        }
        let shared = w.shared;
        for ((d, &circuit), &tokens) in decls.iter().zip(&circuits).zip(&tokens) {
            let p = w.pool(&d.id, d.config, d.lifetime);
            p.set_prior(d.prior_ms);
            if let Some((previous, target)) = p.retarget(now.router) {
                events.push(target_changed(&d.id, previous, target, p));
            }
            if shared {
                continue;
            }
            for m in p.take_expired(now.router) {
                expiring(work, &d.id, &m);
                work.push(&d.id, Kind::Retire { member: m, why: RetireWhy::Age });
            }
            for m in p.take_surplus(now.router) {
                work.push(&d.id, Kind::Retire { member: m, why: RetireWhy::Surplus });
            }
            if p.check_due(now.router) && !p.idle().is_empty() {
                work.push(&d.id, Kind::Check { mine: None });
            }
            if work.adopting == 0 && routable(order.as_deref(), &d.id) {
                for _ in 0..p.plan_within(circuit, Some(now.router), tokens) {
                    work.queue.push_back(Pending::Refill { pool: d.id.clone(), token: None });
                }
            }
        }
        if shared {
            let interval = decls.iter().map(|d| d.config.check_interval_ms as i64).min().unwrap_or(i64::MAX);
            let f = &mut work.fleet;
            let since = |ms: i64| f.last.is_none_or(|t| now.router.saturating_sub(t) >= ms);
            let due = f.due || since(interval) || (!work.ups.is_empty() && since(FLEET_POLL_MS));
            if due && f.running {
                f.again = true;
            } else if due {
                f.running = true;
                f.again = false;
                f.due = false;
                f.last = Some(now.router);
                work.push("", Kind::FleetPass);
            }
        }
        for e in events {
            self.emit(now.router, None, e);
        }
    }

    fn start_pending(
        &mut self,
        p: Pending,
        now: Now,
        ids: &mut dyn FnMut() -> Result<SandboxKey, Failure>,
    ) -> Result<Option<Polled>, Failure> {
        match p {
            Pending::Refill { pool, token } => {
                let Some(i) = self.warm_index(&pool) else {
                    // The pool left the registry meanwhile: the launch is not made.
                    self.refill_dropped(&pool, token);
                    return Ok(None);
                };
                let id = ids()?;
                let (key, next) = self.begin_refill(i, id, token, now)?;
                Ok(Some(Polled { key, next, refill: true, sandbox: Some(id), provider_sandbox_id: None, token }))
            }
            Pending::Task { pool, kind } => {
                let i = if pool.is_empty() { Some(0) } else { self.warm_index(&pool) };
                let Some(index) = i else {
                    if let Kind::Verify { why: VerifyWhy::Adopt, .. } = kind {
                        self.warm_work.adopting -= 1;
                    }
                    return Ok(None);
                };
                let w = self.warm.as_ref().ok_or_else(not_started)?;
                let step = match &kind {
                    Kind::Retire { member, .. } if w.holds(member.id) => StepKind::WarmDestroy,
                    Kind::Retire { .. } | Kind::Verify { .. } => StepKind::WarmResolve,
                    Kind::Forget { .. } => StepKind::WarmUnmap,
                    Kind::Check { .. } if !w.shared => StepKind::WarmList,
                    Kind::Adopt => StepKind::WarmRecords,
                    _ => StepKind::WarmFleet,
                };
                let sandbox = match &kind {
                    Kind::Forget { id } => Some(*id),
                    k => k.member().map(|m| m.id),
                };
                let provider_sandbox_id = kind.member().map(|m| m.provider_sandbox_id.clone());
                let key = self.warm_work.insert(Task { pool, index, started: now.router, kind, step });
                let next = self.task_next(step, index);
                Ok(Some(Polled { key, next, refill: false, sandbox, provider_sandbox_id, token: None }))
            }
        }
    }

    /// The registry index of warm pool `pool` now.
    fn warm_index(&self, pool: &str) -> Option<usize> {
        self.registry.borrow().registry.pools().iter().position(|x| x.id == pool && x.warm.is_some())
    }

    fn task_next(&self, step: StepKind, index: usize) -> Next {
        let bound_ms = match step {
            StepKind::WarmResolve | StepKind::WarmDestroy | StepKind::WarmList => self.operation_timeout_ms,
            _ => self.callback_timeout_ms,
        };
        Next { kind: step, pool: index, bound_ms, flags: self.pending_flags() }
    }

    /// Task `key` goes on with `step`.
    fn task_goes_on(&mut self, key: u32, mut task: Task, step: StepKind) -> Next {
        task.step = step;
        let index = task.index;
        self.warm_work.restore(key, task);
        self.task_next(step, index)
    }

    /// Task `key` is over: the caller's `Done`.
    fn task_done(&mut self, key: u32, index: usize) -> Next {
        self.warm_work.tasks.remove(key);
        if let Some(w) = self.warm.as_mut() {
            // What it decided (and the waiters) are looked at by the next poll.
            w.kick = true;
        }
        Next { kind: StepKind::Done, pool: index, bound_ms: 0, flags: self.pending_flags() }
    }

    /// A warm task the caller could not drive (a bug on its side): forgotten, so that
    /// `warmUp()` and `close()` still settle.
    pub fn warm_abandon(&mut self, key: u32) {
        if let Some(t) = self.warm_work.tasks.get_mut(key).and_then(Option::take) {
            if let Kind::Verify { why: VerifyWhy::Adopt, .. } | Kind::Adopt = t.kind {
                self.warm_work.adopting = self.warm_work.adopting.saturating_sub(1);
            }
            if let Kind::FleetPass = t.kind {
                self.warm_work.fleet.running = false;
            }
            self.warm_work.tasks.remove(key);
        }
    }

    /// The `WarmResolve` step of task `key`: how the member's re-resolution ended.
    pub fn warm_resolved(&mut self, key: u32, r: Resolution, now: Now) -> Result<Next, Failure> {
        let task = self.warm_work.task(key, StepKind::WarmResolve)?;
        let (index, pool) = (task.index, task.pool.clone());
        match task.kind.clone() {
            Kind::Retire { member, .. } if r.alive() => {
                self.warm_mut()?.hold(member.id, &pool);
                return Ok(self.task_goes_on(key, task, StepKind::WarmDestroy));
            }
            Kind::Retire { member, why } => {
                // Gone already: destroyed, as far as anyone can tell. Unknown: not destroyed,
                // and its record stays for `reconcile`.
                self.retired(&pool, &member, why, r == Resolution::Gone, now);
            }
            Kind::Verify { member, why: VerifyWhy::Check } => {
                if r.alive() {
                    self.warm_mut()?.hold(member.id, &pool);
                } else {
                    // Gone, or the provider could not say: never handed out unverified.
                    self.member_lost(&pool, member, now);
                }
            }
            Kind::Verify { member, why: VerifyWhy::Adopt } => {
                self.warm_work.adopting = self.warm_work.adopting.saturating_sub(1);
                let w = self.warm_mut()?;
                if r.alive() && !w.closed {
                    w.hold(member.id, &pool);
                    if let Some(p) = w.get_mut(&pool) {
                        p.insert(member);
                    }
                } else if r == Resolution::Gone {
                    self.warm_work.push(&pool, Kind::Forget { id: member.id });
                }
            }
            _ => return Err(Fault::internal("(a warm report out of turn)")),
        }
        Ok(self.task_done(key, index))
    }

    /// The `WarmDestroy` step of task `key`: whether the member's destroy succeeded.
    pub fn warm_destroyed(&mut self, key: u32, ok: bool, now: Now) -> Result<Next, Failure> {
        let task = self.warm_work.task(key, StepKind::WarmDestroy)?;
        let Kind::Retire { member, why } = &task.kind else {
            return Err(Fault::internal("(a warm report out of turn)"));
        };
        self.warm_mut()?.let_go(member.id);
        self.retired(&task.pool, member, *why, ok, now);
        Ok(self.task_done(key, task.index))
    }

    /// A retired member's end: its record removed once it is gone (a failed destroy keeps
    /// it, for `reconcile`), the event of an expiry, the close's counts.
    fn retired(&mut self, pool: &str, member: &Member, why: RetireWhy, gone: bool, now: Now) {
        if gone {
            self.warm_work.push(pool, Kind::Forget { id: member.id });
        }
        match why {
            RetireWhy::Close => {
                if let Some((report, _)) = self.warm_work.closing.as_mut() {
                    if gone {
                        report.destroyed += 1;
                    } else {
                        report.failed += 1;
                    }
                }
            }
            RetireWhy::Age | RetireWhy::Surplus => {
                let age_ms = now.router.saturating_sub(member.launched_at).max(0) as u64;
                let reason = if why == RetireWhy::Age { "AGE" } else { "SURPLUS" };
                self.emit(
                    now.router,
                    Some(member.id),
                    Event::WarmMemberExpired { pool: PoolId::from(pool), age_ms, destroyed: gone, reason },
                );
            }
        }
    }

    /// A member found gone at the provider (or that could not be verified): out of this
    /// process's inventory now (counted, said, its record removed), or taken out of the
    /// fleet's first.
    fn member_lost(&mut self, pool: &str, member: Member, now: Now) {
        let Some(w) = self.warm.as_mut() else { return };
        if w.shared {
            self.warm_work.push(pool, Kind::Lost { member });
            return;
        }
        w.let_go(member.id);
        let Some(m) = w.get_mut(pool).and_then(|p| p.lost(member.id)) else { return };
        self.warm_work.push(pool, Kind::Forget { id: m.id });
        self.emit(now.router, Some(m.id), Event::WarmMemberLost { pool: PoolId::from(pool) });
    }

    /// The `WarmUnmap` step of task `key`: the record's removal was attempted (best effort).
    pub fn warm_unmapped(&mut self, key: u32) -> Result<Next, Failure> {
        let task = self.warm_work.task(key, StepKind::WarmUnmap)?;
        Ok(self.task_done(key, task.index))
    }

    /// The `WarmList` step of task `key`: the pool's native finder listed these provider
    /// ids (`ids`); `finder` false: the pool has none; `ids` None: it could not list (no
    /// conclusion). Members the listing lacks are lost; without a finder each member is
    /// re-resolved. Only members launched before the listing began are judged.
    pub fn warm_listed(&mut self, key: u32, finder: bool, ids: Option<Vec<String>>, now: Now) -> Result<Next, Failure> {
        let task = self.warm_work.task(key, StepKind::WarmList)?;
        let Kind::Check { mine } = &task.kind else { return Err(Fault::internal("(a warm report out of turn)")) };
        let members: Vec<Member> = match mine {
            Some(m) => m.clone(),
            None => self.warm.as_ref().and_then(|w| w.get(&task.pool)).map(|p| p.idle().to_vec()).unwrap_or_default(),
        };
        let judged = members.into_iter().filter(|m| m.launched_at < task.started);
        match (finder, ids) {
            (false, _) => {
                for m in judged {
                    self.warm_work.push(&task.pool, Kind::Verify { member: m, why: VerifyWhy::Check });
                }
            }
            (true, Some(ids)) => {
                let listed: FxHashSet<&str> = ids.iter().map(String::as_str).collect();
                let lost: Vec<Member> = judged.filter(|m| !listed.contains(m.provider_sandbox_id.as_str())).collect();
                for m in lost {
                    self.member_lost(&task.pool, m, now);
                }
            }
            (true, None) => {}
        }
        Ok(self.task_done(key, task.index))
    }

    /// The `WarmFleet` step's question for task `key`.
    pub fn warm_fleet_ask(&mut self, key: u32) -> Result<FleetAsk, Failure> {
        let task = self.warm_work.task(key, StepKind::WarmFleet)?;
        let mut ask = FleetAsk {
            op: FleetOp::Counts,
            provider_id: task.pool.clone(),
            target: 0,
            want: 0,
            hold_ms: DEFAULT_ACQUISITION_TIMEOUT_MS,
            floor: 0,
            sandbox: None,
            token: None,
        };
        match &task.kind {
            Kind::FleetPass => {}
            Kind::FleetReserve { want } => {
                ask.op = FleetOp::Reserve;
                ask.want = *want;
                ask.target = self.warm.as_ref().and_then(|w| w.get(&task.pool)).map_or(0, WarmPool::target);
            }
            Kind::FleetExpire { floor } => {
                ask.op = FleetOp::Expire;
                ask.floor = *floor;
            }
            Kind::Lost { member } => {
                ask.op = FleetOp::Take;
                ask.sandbox = Some(member.id);
            }
            Kind::Check { .. } => ask.op = FleetOp::Mine,
            Kind::FleetTakeMine => ask.op = FleetOp::TakeMine,
            Kind::FleetRelease { token } => {
                ask.op = FleetOp::Release;
                ask.token = Some(*token);
            }
            _ => {}
        }
        self.warm_work.restore(key, task);
        Ok(ask)
    }

    /// The `WarmFleet` step of task `key` answered (`reply`), or failed or timed out (None:
    /// nothing is concluded; the next pass asks again). Also the live handles to let go of:
    /// members of this process the fleet no longer holds idle (claimed by another process).
    pub fn warm_fleet_answered(
        &mut self,
        key: u32,
        reply: Option<FleetReply>,
        now: Now,
    ) -> Result<(Next, Vec<SandboxKey>), Failure> {
        let task = self.warm_work.task(key, StepKind::WarmFleet)?;
        let index = task.index;
        let mut dropped = Vec::new();
        if let Kind::FleetPass = task.kind {
            let f = &mut self.warm_work.fleet;
            f.running = false;
            if std::mem::take(&mut f.again) {
                f.due = true;
            }
        }
        let Some(reply) = reply else { return Ok((self.task_done(key, index), dropped)) };
        match task.kind.clone() {
            Kind::FleetPass => self.fleet_planned(&reply.counts, now),
            Kind::FleetReserve { .. } => {
                let n = reply.tokens.len() as u32;
                if let Some(p) = self.warm_mut()?.get_mut(&task.pool) {
                    p.started(n);
                }
                for token in reply.tokens {
                    self.warm_work.queue.push_back(Pending::Refill { pool: task.pool.clone(), token: Some(token) });
                }
            }
            Kind::FleetExpire { .. } => {
                if let Some(p) = self.warm_mut()?.get_mut(&task.pool) {
                    p.expired_elsewhere(reply.members.len() as u64);
                }
                for (_, m) in reply.members {
                    expiring(&mut self.warm_work, &task.pool, &m);
                    self.warm_work.push(&task.pool, Kind::Retire { member: m, why: RetireWhy::Age });
                }
            }
            // The member was still idle in the fleet's inventory (now taken out): lost.
            Kind::Lost { member } if !reply.members.is_empty() => {
                let w = self.warm_mut()?;
                w.let_go(member.id);
                if let Some(p) = w.get_mut(&task.pool) {
                    p.lost_elsewhere();
                }
                self.warm_work.push(&task.pool, Kind::Forget { id: member.id });
                self.emit(
                    now.router,
                    Some(member.id),
                    Event::WarmMemberLost { pool: PoolId::from(task.pool.as_str()) },
                );
            }
            Kind::Check { .. } => {
                let mine: Vec<Member> = reply.members.into_iter().map(|(_, m)| m).collect();
                let idle: FxHashSet<SandboxKey> = mine.iter().map(|m| m.id).collect();
                // Handles of this pool's members that are no longer idle in the fleet's
                // inventory were claimed by another process: let go of them.
                let w = self.warm_mut()?;
                for id in w.held_in(&task.pool) {
                    if !idle.contains(&id) {
                        w.let_go(id);
                        dropped.push(id);
                    }
                }
                let mut task = task;
                task.kind = Kind::Check { mine: Some(mine) };
                return Ok((self.task_goes_on(key, task, StepKind::WarmList), dropped));
            }
            Kind::FleetTakeMine => {
                for (pool, m) in reply.members {
                    self.warm_work.push(&pool, Kind::Retire { member: m, why: RetireWhy::Close });
                }
            }
            _ => {}
        }
        Ok((self.task_done(key, index), dropped))
    }

    /// The fleet's pass, with the fleet's counts: per pool, its expired members taken out,
    /// its check when due, and the refills to ask for.
    fn fleet_planned(&mut self, counts: &[FleetCounts], now: Now) {
        let decls = warm_pools(&self.registry.borrow());
        let order = self.provider_order().map(<[String]>::to_vec);
        let circuits: Vec<bool> = decls.iter().map(|d| self.circuit_closed(&d.id, now.health)).collect();
        let Router { warm, warm_work: work, .. } = self;
        let Some(w) = warm.as_mut() else { return };
        if w.closed {
            return;
        }
        for (d, &circuit) in decls.iter().zip(&circuits) {
            let p = w.pool(&d.id, d.config, d.lifetime);
            let (idle, launching) =
                counts.iter().find(|c| c.provider_id == d.id).map_or((0, 0), |c| (c.idle, c.launching));
            p.fleet_counted(idle, launching, now.router);
            work.push(&d.id, Kind::FleetExpire { floor: p.expiry_floor(now.router) });
            if p.check_due(now.router) {
                work.push(&d.id, Kind::Check { mine: None });
            }
            if routable(order.as_deref(), &d.id) {
                let want = reserve_count(p.target(), idle, launching, p.wanted_at(circuit, Some(now.router)));
                if want > 0 {
                    work.push(&d.id, Kind::FleetReserve { want });
                }
            }
        }
    }

    /// The `WarmRecords` step of task `key`: the caller's store's records (None: it failed
    /// or timed out). A record is adopted when its warm label names its own pool, that pool
    /// keeps a warm pool here, and its fleet is this router's: each is re-resolved first.
    pub fn warm_records(&mut self, key: u32, records: Option<Vec<StoreRecord>>) -> Result<Next, Failure> {
        let task = self.warm_work.task(key, StepKind::WarmRecords)?;
        let pools: FxHashSet<String> = warm_pools(&self.registry.borrow()).into_iter().map(|d| d.id).collect();
        for r in records.unwrap_or_default() {
            let (Some(pool), Some(warm), Some(fleet), Some(psid)) =
                (&r.provider_id, &r.warm, &r.fleet, &r.provider_sandbox_id)
            else {
                continue;
            };
            let Some(id) = SandboxKey::parse(&r.id) else { continue };
            if pool != warm || !pools.contains(pool) || fleet.as_str() != &*self.fleet {
                continue;
            }
            let launched_at = r.created_at_ms.filter(|t| t.is_finite()).map_or(0, |t| t as i64);
            self.warm_work.adopting += 1;
            self.warm_work.push(
                pool,
                Kind::Verify {
                    member: Member { id, provider_sandbox_id: psid.clone(), launched_at },
                    why: VerifyWhy::Adopt,
                },
            );
        }
        self.warm_work.adopting = self.warm_work.adopting.saturating_sub(1);
        Ok(self.task_done(key, task.index))
    }

    /// Begins a refill of pool `pool` (registry index) as member `id` (`token`: the fleet's
    /// grant): a job of that one candidate, one attempt, no fallback, with the default
    /// launch deadline. Its key and first step.
    fn begin_refill(
        &mut self,
        pool: usize,
        id: SandboxKey,
        token: Option<i64>,
        now: Now,
    ) -> Result<(u32, Next), Failure> {
        let registry = self.registry.clone();
        let mut inner = registry.borrow_mut();
        let Some(p) = inner.registry.pools().get(pool) else { return Err(Fault::internal("(an unknown warm pool)")) };
        let pool_id = p.id.clone();
        let plan = match self.capacity.as_mut() {
            Some(c) => Some(CapacityPlan {
                need: Default::default(),
                readers: inner.readers.clone(),
                ledger_pools: inner.registry.pools().iter().map(|p| c.ledger_key(&p.id)).collect(),
            }),
            None => None,
        };
        let health_id = self.health_id;
        let tracking = self.health.as_mut().map(|h| (inner.health_slots(h, health_id), now.health));
        let names = self.observe.then(|| inner.ids());
        let paced = self.paced(&mut inner);
        drop(inner);
        let mut machine = Acquisition::new(vec![pool], 1, false, plan, names);
        if let Some((limits, ids)) = paced {
            machine.pace(limits, ids);
        }
        if let Some((slots, at)) = tracking {
            machine.track(slots, at);
        }
        if let Some(p) = self.warm_mut()?.get_mut(&pool_id) {
            p.job_began();
        }
        let key = self.jobs.insert(Job {
            id,
            machine,
            pools: registry,
            labels: Arc::new(vec![(SANDBOX_WARM_LABEL.to_string(), pool_id)].into()),
            pool,
            timeout_ms: DEFAULT_ACQUISITION_TIMEOUT_MS,
            detached: false,
            warm: Some(Box::new(WarmRole::Refill { token, begun_at: now.router })),
            stage: Stage::Machine,
            launched: false,
            folding_intent: false,
            intent_ready: None,
            intent_stored: false,
            provider_sandbox_id: None,
            fault: None,
            cooldown: None,
            log: None,
            wait: None,
        });
        // Provisions waiting for the pool go first.
        self.queue_behind(key);
        let next = self.step(key, now)?;
        Ok((key, next))
    }

    /// A queued refill that will not be made: its count in flight is given back (a fleet
    /// grant, to the database).
    fn refill_dropped(&mut self, pool: &str, token: Option<i64>) {
        if let Some(p) = self.warm.as_mut().and_then(|w| w.get_mut(pool)) {
            p.refill_cancelled();
        }
        if let Some(token) = token {
            self.warm_work.push("", Kind::FleetRelease { token });
        }
    }

    /// A refill's launch returned a handle: the success is recorded (capacity hold, health,
    /// its create latency), and with the default store (and this process's inventory) the
    /// member's record is written and the member is idle; otherwise its record is written
    /// next (the caller's store, or the fleet's inventory).
    pub(crate) fn refill_succeeded(
        &mut self,
        key: u32,
        provider_sandbox_id: &str,
        now: Now,
        wall: i64,
    ) -> Result<(), Failure> {
        self.launch_reported(key)?.provider_sandbox_id = Some(provider_sandbox_id.to_string());
        self.report(key, now, |m, l| m.succeeded(l))?;
        let Router { jobs, warm, store, fleet, .. } = self;
        let job = jobs.get_mut(key)?;
        let provider_id = job.pool_id(job.pool);
        let begun_at = match job.warm.as_deref() {
            Some(WarmRole::Refill { begun_at, .. }) => *begun_at,
            _ => now.router,
        };
        let w = warm.as_mut().ok_or_else(not_started)?;
        let recorded = !w.shared && store.is_some();
        if let Some(store) = store.as_ref().filter(|_| recorded) {
            write_record(
                store,
                NewRecord {
                    id: job.id,
                    provider_id: &provider_id,
                    provider_sandbox_id,
                    labels: job.labels.clone(),
                    detached: false,
                },
                fleet.clone(),
                wall,
            );
        }
        if let Some(p) = w.get_mut(&provider_id) {
            p.refill_succeeded(None);
            p.create_observed(now.router.saturating_sub(begun_at).max(0) as f64);
        }
        let (id, psid) = (job.id, provider_sandbox_id.to_string());
        job.stage = if recorded {
            job.machine.announce(Event::WarmMemberLaunched { pool: PoolId::from(provider_id.as_str()) });
            Stage::Succeeded
        } else if w.shared {
            Stage::WarmSettle
        } else {
            Stage::Persist
        };
        if recorded {
            self.member_ready(&provider_id, Member { id, provider_sandbox_id: psid, launched_at: now.router });
        }
        Ok(())
    }

    /// A refill's member is recorded: idle in this process's inventory (or the fleet's,
    /// whose transaction put it there), its live handle held here.
    pub(crate) fn member_ready(&mut self, pool: &str, member: Member) {
        let Some(w) = self.warm.as_mut() else { return };
        w.hold(member.id, pool);
        if !w.shared {
            if let Some(p) = w.get_mut(pool) {
                p.insert(member);
            }
        }
    }

    /// Refill job `key`'s member: (its id, its pool, the provider's id, when it became idle
    /// on the router's clock).
    pub fn refill_member(&mut self, key: u32, now: Now) -> Result<(SandboxKey, String, String, i64), Failure> {
        let job = self.jobs.get_mut(key)?;
        let psid = job.provider_sandbox_id.clone().ok_or_else(|| Fault::internal("(no member launched)"))?;
        Ok((job.id, job.pool_id(job.pool), psid, now.router))
    }

    /// A refill job ended (`failed`: with its code, and whether its launch's success was
    /// counted already): its pool's count of jobs in flight, its failure (which may pause
    /// the pool, said), a fleet grant it leaves unused given back.
    pub(crate) fn refill_ended(&mut self, pool: &str, failed: Option<(String, bool)>, token: Option<i64>) {
        let Some(w) = self.warm.as_mut() else { return };
        w.kick = true;
        let mut paused = None;
        if let Some(p) = w.get_mut(pool) {
            p.job_ended();
            if let Some((code, counted)) = &failed {
                if *counted {
                    p.started(1);
                }
                if code == crate::core::acquisition::RATE_LIMITED_CODE {
                    // No launch token: not a failure (it neither counts toward a pause nor is shown).
                    p.refill_cancelled();
                } else if p.refill_failed(code) {
                    paused = Some(code.clone());
                }
            }
        }
        let paced = failed.as_ref().is_some_and(|(code, _)| code == crate::core::acquisition::RATE_LIMITED_CODE);
        if w.shared {
            // A paced refill waits for the fleet's next pass: asking again at once would
            // only be granted into the same empty bucket.
            self.warm_work.fleet.due |= !paced;
            if let (Some(token), Some(_)) = (token, &failed) {
                self.warm_work.push("", Kind::FleetRelease { token });
            }
        }
        if let Some(code) = paused {
            let now = self.clock;
            self.emit(now, None, Event::WarmRefillPaused { pool: PoolId::from(pool), code });
        }
    }

    /// A provision's launch on pool `pool` succeeded at `now`: a paused pool resumes at
    /// once (said), and refills may be due.
    pub(crate) fn warm_launch_succeeded(&mut self, pool: &str, now: i64) {
        let Some(w) = self.warm.as_mut() else { return };
        if w.launch_succeeded(pool) {
            self.emit(now, None, Event::WarmRefillResumed { pool: PoolId::from(pool) });
        }
    }

    /// An in-process capacity read of pool `pool` at `now`: the room it shows caps the pace.
    pub(crate) fn warm_capacity_read(&mut self, pool: &str, m: &Measurement, now: i64) {
        let Some(p) = self.warm.as_mut().and_then(|w| w.get_mut(pool)) else { return };
        if let Measurement::Known(rs) = m {
            if let Some(room) = room_of(rs) {
                p.capacity_read(room, now);
            }
        }
    }

    /// When to poll again, ms from `now` (None: nothing is scheduled; a claim, a launch
    /// success or a report says when work falls due).
    pub fn warm_timeout(&self, now: Now) -> Option<i64> {
        let w = self.warm.as_ref()?;
        if w.closed {
            return None;
        }
        // Due after the last pass (the time the pass read, not `now`: a time that fell due
        // between that pass and this call is a wake at once, never a timer dropped).
        let since = w.passed_at.map_or(now.router, |p| p.min(now.router));
        let mut at: Option<i64> = None;
        let mut wake = |t: Option<i64>| {
            if let Some(t) = t.filter(|t| *t > since) {
                at = Some(at.map_or(t, |a| a.min(t)));
            }
        };
        let decls = warm_pools(&self.registry.borrow());
        for d in &decls {
            let Some(p) = w.get(&d.id) else { continue };
            if !w.shared {
                wake(p.next_due());
            }
            wake(p.next_retarget(now.router));
            if let (Err(blocked), true) = (self.pacing.peek(&d.id, d.rate_limit, now.router), p.wants_more()) {
                wake(Some(blocked.until));
            }
        }
        let work = &self.warm_work;
        if w.shared {
            let interval = decls.iter().map(|d| d.config.check_interval_ms as i64).min();
            let last = work.fleet.last.unwrap_or(now.router);
            wake(interval.map(|i| last.saturating_add(i)));
            if !work.ups.is_empty() {
                wake(Some(last.saturating_add(FLEET_POLL_MS)));
            }
        }
        for up in &work.ups {
            wake(Some(up.deadline));
            if w.shared {
                wake(Some(up.since.saturating_add(FLEET_WAIT_MS)));
            }
        }
        at.map(|t| t.saturating_sub(now.router).clamp(MIN_WAKE_MS, MAX_WAKE_MS))
    }

    /// A `warmUp()` begins waiting at `now`: its id for [`Router::warm_up_answer`]. It
    /// settles at the latest after the time one refill may take (its launch deadline and
    /// its store calls).
    pub fn warm_up_begin(&mut self, now: Now) -> u32 {
        let w = &mut self.warm_work;
        let id = w.next_up;
        w.next_up = w.next_up.wrapping_add(1);
        let bound = settle_window_ms(DEFAULT_ACQUISITION_TIMEOUT_MS, self.callback_timeout_ms) as i64;
        w.ups.push(UpWait {
            id,
            since: now.router,
            deadline: now.router.saturating_add(bound),
            expiring: FxHashSet::default(),
        });
        w.fleet.due = true;
        id
    }

    /// `warmUp()` `id`'s report at `now`, once it is settled (None: not yet). A pool is
    /// settled when it holds its target and nothing of it is in flight, or when it cannot
    /// fill for a reason waiting will not change (paused, circuit open, not in the provider
    /// order, no capacity room, members expiring before it fills, closed), or when nothing
    /// of it is in flight any more (`FILLING`, or `REFILL_FAILED` after a failure), or at
    /// the wait's bound. With the fleet's inventory its counts must be read since the wait
    /// began, and other processes' refills are waited for up to [`FLEET_WAIT_MS`].
    pub fn warm_up_answer(&mut self, id: u32, now: Now) -> Option<WarmUpReport> {
        let at = self.warm_work.ups.iter().position(|u| u.id == id)?;
        let decls = warm_pools(&self.registry.borrow());
        let order = self.provider_order().map(<[String]>::to_vec);
        let w = self.warm.as_ref()?;
        let work = &self.warm_work;
        let up = &work.ups[at];
        let mut pools = Vec::with_capacity(decls.len());
        for d in &decls {
            let fresh;
            let p = match w.get(&d.id) {
                Some(p) => p,
                None => {
                    fresh = WarmPool::new(d.config, d.lifetime);
                    &fresh
                }
            };
            let target = p.target();
            let idle = if w.shared { p.fleet_idle_since(up.since) } else { Some(p.idle().len() as u64) };
            let failure = p.stats().last_failure.clone();
            let filling = if failure.is_some() { "REFILL_FAILED" } else { "FILLING" };
            let line = |ready: bool, reason: Option<&'static str>| PoolReport {
                provider_id: d.id.clone(),
                target,
                idle: idle.unwrap_or(0),
                ready,
                reason,
                last_failure_code: failure.clone(),
            };
            if w.closed {
                pools.push(line(false, Some("CLOSED")));
                continue;
            }
            let ready = idle.is_some_and(|i| i >= u64::from(target));
            let circuit = self.circuit_closed(&d.id, now.health);
            let blocking = if ready {
                None
            } else if up.expiring.contains(&d.id) {
                Some("EXPIRING")
            } else {
                p.standing_at(idle.unwrap_or(0), circuit, routable(order.as_deref(), &d.id), now.router).reason()
            };
            let busy = p.jobs() > 0 || work.busy(&d.id) || work.adopting > 0 || (w.shared && work.fleet.running);
            if let Some(reason) = blocking.filter(|_| idle.is_some()) {
                pools.push(line(false, Some(reason)));
            } else if now.router >= up.deadline {
                pools.push(line(ready, (!ready).then_some(filling)));
            } else if busy || idle.is_none() {
                return None;
            } else if ready {
                pools.push(line(true, None));
            } else if w.shared && now.router < up.since.saturating_add(FLEET_WAIT_MS) {
                return None;
            } else {
                pools.push(line(false, Some(filling)));
            }
        }
        self.warm_work.ups.remove(at);
        Some(WarmUpReport { ready: pools.iter().all(|p| p.ready), pools })
    }

    /// `close(options)`: the options (their JSON text; None: none) read strictly, and a
    /// `keepWarm` only with a store that outlives the process (not the default store, not
    /// an `InMemoryMappingStore`: `store_in_memory`). Then no claim and no refill any more;
    /// refills in flight settle, and the idle members are destroyed (or, with `keepWarm`,
    /// left recorded). True when there is something to wait for ([`Router::warm_close_answer`]).
    pub fn warm_close(&mut self, options: Option<&str>, store_in_memory: bool) -> Result<bool, Failure> {
        let bad = || Fault::config("close", "keepWarm", "must be a boolean (the only option)");
        let keep = match options {
            None => false,
            Some(text) => {
                let Ok(Value::Object(o)) = serde_json::from_str::<Value>(text) else { return Err(bad()) };
                if o.keys().any(|k| k != "keepWarm") {
                    return Err(bad());
                }
                match o.get("keepWarm") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(bad()),
                }
            }
        };
        if keep && (self.store.is_some() || store_in_memory) {
            return Err(Fault::config(
                "close",
                "keepWarm",
                "needs a durable mapping store (SQLite or PostgreSQL), where the next process finds the members",
            ));
        }
        let Some(w) = self.warm.as_mut() else { return Ok(false) };
        if w.closed {
            return Ok(false);
        }
        w.closed = true;
        w.keep_warm = keep;
        w.kick = true;
        self.warm_work.closing = Some((CloseReport::default(), false));
        // Refills not begun yet are not made.
        let queued: Vec<Pending> = self.warm_work.queue.drain(..).collect();
        for p in queued {
            match p {
                Pending::Refill { pool, token } => self.refill_dropped(&pool, token),
                task => self.warm_work.queue.push_back(task),
            }
        }
        Ok(true)
    }

    /// `close()`'s report, once every refill and task has settled (None: not yet).
    pub fn warm_close_answer(&mut self) -> Option<CloseReport> {
        let jobs: u32 = match self.warm.as_ref() {
            None => return Some(CloseReport::default()),
            Some(w) => {
                warm_pools(&self.registry.borrow()).iter().filter_map(|d| w.get(&d.id)).map(WarmPool::jobs).sum()
            }
        };
        let work = &self.warm_work;
        match work.closing {
            None => Some(CloseReport::default()),
            Some((report, true)) if jobs == 0 && work.running() == 0 && work.queue.is_empty() => Some(report),
            _ => None,
        }
    }

    /// The member the `Claimed` (or `ClaimResolve`) step took: (its id, the provider's id
    /// of it, its age at `now`).
    pub fn claimed_member(&mut self, key: u32, now: Now) -> Result<(SandboxKey, String, i64), Failure> {
        let m = self.claimer(key)?.member.as_ref().ok_or_else(|| Fault::internal("(no member was taken)"))?;
        Ok((m.id, m.provider_sandbox_id.clone(), now.router.saturating_sub(m.launched_at).max(0)))
    }

    fn claimer(&mut self, key: u32) -> Result<&mut Claimer, Failure> {
        match self.jobs.get_mut(key)?.warm.as_deref_mut() {
            Some(WarmRole::Claimer(c)) => Ok(c),
            _ => Err(Fault::internal("(not a claiming provision)")),
        }
    }

    /// The `Claim` step's question for the fleet's inventory: (pool id, floor, detached, the
    /// provision whose shared budget reservation the claim turns into the member's charge).
    pub fn claim_ask(&mut self, key: u32) -> Result<(String, i64, bool, Option<SandboxKey>), Failure> {
        let shared_budgets = self.budgets_shared() == Some(true);
        let job = self.jobs.get_mut(key)?;
        let (provider_id, detached, id) = (job.pool_id(job.pool), job.detached, job.id);
        let floor = self.claimer(key)?.floor.ok_or_else(|| Fault::internal("(no claim was asked)"))?;
        Ok((provider_id, floor, detached, shared_budgets.then_some(id)))
    }

    /// The fleet's inventory answered the `Claim` step: the member now mapped to this
    /// provision, or none (the cold launch of the same pool follows; the miss is counted).
    pub fn claim_answer(&mut self, key: u32, member: Option<Member>, now: Now) -> Result<Next, Failure> {
        let Router { jobs, warm, warm_work, .. } = self;
        let job = jobs.get_mut(key)?;
        let provider_id = job.pool_id(job.pool);
        let w = warm.as_mut().ok_or_else(not_started)?;
        w.kick = true;
        warm_work.fleet.due = true;
        let p = w.get_mut(&provider_id);
        let Some(m) = member else {
            let r = p.map_or(MissReason::Empty, |p| {
                let r = p.empty();
                p.missed(r);
                p.demand_seen(now.router);
                r
            });
            job.machine.claim_missed(r);
            return self.step(key, now);
        };
        if let Some(p) = p {
            p.claimed();
            p.demand_seen(now.router);
        }
        let held = w.let_go(m.id);
        if let Some(WarmRole::Claimer(c)) = job.warm.as_deref_mut() {
            c.member = Some(m);
            c.fleet = true;
        }
        let pool = job.pool;
        if held {
            return Ok(Next { kind: StepKind::Claimed, pool, bound_ms: 0, flags: self.pending_flags() });
        }
        job.stage = Stage::ClaimResolve;
        self.step(key, now)
    }

    /// The `ClaimResolve` step: how the re-resolution of the member taken ended. Alive: the
    /// claim is confirmed ([`Router::claimed`]). Otherwise the member is lost (counted,
    /// said, its record to remove, returned), a shared budget's charge goes back to the
    /// provision when a fleet claim made it the member's ([`StepKind::ClaimUncharge`]), and
    /// the same pool is launched cold.
    pub fn claim_resolved(
        &mut self,
        key: u32,
        r: Resolution,
        now: Now,
        wall: i64,
    ) -> Result<(Next, Option<SandboxKey>), Failure> {
        let job = self.jobs.get_mut(key)?;
        if job.stage != Stage::ClaimResolve {
            return Err(Fault::internal("(a claim report out of turn)"));
        }
        job.stage = Stage::Machine;
        if r.alive() {
            return Ok((self.claimed(key, now, wall)?, None));
        }
        let provider_id = job.pool_id(job.pool);
        let shared_budgets = self.budgets_shared() == Some(true);
        let c = self.claimer(key)?;
        let Some(m) = c.member.clone() else { return Err(Fault::internal("(no member was taken)")) };
        let uncharge = c.fleet && shared_budgets;
        if let Some(p) = self.warm.as_mut().and_then(|w| w.get_mut(&provider_id)) {
            p.lost_elsewhere();
        }
        self.emit(now.router, Some(m.id), Event::WarmMemberLost { pool: PoolId::from(provider_id.as_str()) });
        if uncharge {
            self.jobs.get_mut(key)?.stage = Stage::ClaimUncharge;
            return Ok((self.step(key, now)?, Some(m.id)));
        }
        Ok((self.claim_lost(key, now)?, Some(m.id)))
    }

    /// The `ClaimUncharge` step was performed (best effort): the cold launch follows.
    pub fn claim_uncharged(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        let job = self.jobs.get_mut(key)?;
        if job.stage != Stage::ClaimUncharge {
            return Err(Fault::internal("(a claim report out of turn)"));
        }
        job.stage = Stage::Machine;
        self.claim_lost(key, now)
    }

    fn claim_lost(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        if let Ok(c) = self.claimer(key) {
            c.member = None;
        }
        self.jobs.get_mut(key)?.machine.claim_missed(MissReason::Empty);
        self.step(key, now)
    }

    /// A claim is confirmed: the job is over (claimed, `warm.claimed`), and with the
    /// default store (and this process's inventory) the member's record is rewritten with
    /// this provision's labels.
    pub fn claimed(&mut self, key: u32, now: Now, wall: i64) -> Result<Next, Failure> {
        let member = self.claimer(key)?.member.clone();
        let Router { jobs, budgets, warm, store, fleet, .. } = self;
        let job = jobs.get_mut(key)?;
        let provider_id = job.pool_id(job.pool);
        job.machine.claimed();
        job.stage = Stage::Succeeded;
        if let (Some(b), Some(m)) = (budgets.as_mut().filter(|b| !b.shared), member.as_ref()) {
            // The charge (kept: a claim is charged like a launch) follows the member's id.
            b.apply(&mut job.machine);
            b.ledger.rekey(job.id, m.id);
            b.flush();
        }
        let shared = warm.as_ref().is_some_and(|w| w.shared);
        if let Some(m) = &member {
            // The job is about the member from now on: its record, its events.
            job.provider_sandbox_id = Some(m.provider_sandbox_id.clone());
            let age_ms = now.router.saturating_sub(m.launched_at).max(0) as u64;
            job.machine.announce(Event::WarmClaimed { pool: PoolId::from(provider_id.as_str()), age_ms });
            match store.as_ref() {
                Some(store) if !shared => {
                    write_record(
                        store,
                        NewRecord {
                            id: m.id,
                            provider_id: &provider_id,
                            provider_sandbox_id: &m.provider_sandbox_id,
                            labels: job.labels.clone(),
                            detached: job.detached,
                        },
                        fleet.clone(),
                        wall,
                    );
                }
                // A caller's store gets the record with the caller's labels next.
                None if !shared => job.stage = Stage::Persist,
                _ => {}
            }
            self.jobs.rekey(key, m.id);
        }
        self.step(key, now)
    }

    /// Whether `warmStatus()` needs the fleet's counts (the inventory is the fleet's).
    pub fn warm_status_fleet(&self) -> bool {
        self.warm.as_ref().is_some_and(|w| w.shared)
    }

    /// Every warm pool of the registry, in registration order, at `now` (before `warmUp()`:
    /// their targets, nothing else); `counts`: the fleet's, with its inventory.
    pub fn warm_status(&self, counts: Option<&[FleetCounts]>, now: Now) -> Vec<PoolStatus> {
        let shared = self.warm_status_fleet();
        warm_pools(&self.registry.borrow())
            .into_iter()
            .map(|d| {
                let p = self.warm.as_ref().and_then(|w| w.get(&d.id)).cloned().unwrap_or_else(|| {
                    let mut p = WarmPool::new(d.config, d.lifetime);
                    p.set_prior(d.prior_ms);
                    p
                });
                let c = counts.and_then(|c| c.iter().find(|c| c.provider_id == d.id));
                let (min, max) = match d.config.sizing {
                    Sizing::Demand { min, max } => (Some(min), Some(max)),
                    Sizing::Fixed(_) => (None, None),
                };
                PoolStatus {
                    target: p.target(),
                    target_reason: p.target_reason().code(),
                    min,
                    max,
                    idle: c.map_or(p.idle().len() as u64, |c| c.idle),
                    launching: c.map_or(u64::from(p.launching()), |c| c.launching),
                    scope: if shared { "fleet" } else { "process" },
                    stats: p.stats().clone(),
                    paused: p.is_paused(),
                    demand_per_second: p.demand_per_second(now.router),
                    create_latency_ms: p.create_latency_ms(),
                    pace: p.pace(Some(now.router)),
                    provider_id: d.id,
                }
            })
            .collect()
    }

    /// The idle-members gauge: (pool, idle) of this process's inventory (none with the
    /// fleet's, whose count is the database's).
    pub fn warm_idle_gauge(&self) -> Vec<(String, u32)> {
        let Some(w) = self.warm.as_ref().filter(|w| !w.shared) else { return Vec::new() };
        warm_pools(&self.registry.borrow())
            .into_iter()
            .filter_map(|d| w.get(&d.id).map(|p| (d.id, p.idle().len() as u32)))
            .collect()
    }

    /// Per pool of `pools` (registry indices): whether `req` would claim a member now; None
    /// when the registry keeps no warm pool. With the fleet's inventory a compatible
    /// request's answer needs the database's count of members above the floor: `counts`,
    /// per pool (None: not asked, or the database could not answer: no claim).
    pub fn warm_explain(
        &self,
        req: &Request,
        pools: &[usize],
        counts: Option<&[Option<f64>]>,
        now: Now,
    ) -> Result<Option<Vec<ClaimExplanation>>, Failure> {
        let inner = self.registry.borrow();
        if inner.warm().is_none() {
            return Ok(None);
        }
        pools
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let p = inner.registry.pools().get(i).ok_or_else(unknown_pool)?;
                let out = |claim: bool, reason: Option<&'static str>, floor: Option<i64>| ClaimExplanation {
                    provider_id: p.id.clone(),
                    claim,
                    reason,
                    floor,
                };
                let Some(config) = p.warm else { return Ok(out(false, Some("NOT_WARM"), None)) };
                let Some(w) = self.warm.as_ref() else { return Ok(out(false, Some("NOT_STARTED"), None)) };
                if w.closed {
                    return Ok(out(false, Some("CLOSED"), None));
                }
                let fresh = WarmPool::new(config, p.capabilities.max_lifetime);
                let wp = w.get(&p.id).unwrap_or(&fresh);
                if w.shared {
                    return Ok(match (wp.floor(now.router, req), counts) {
                        (Ok(f), None) => out(false, None, Some(f)),
                        (Ok(_), Some(c)) => match c.get(k).copied().flatten() {
                            Some(n) if n > 0.0 => out(true, None, None),
                            _ => out(false, Some(MissReason::Empty.code()), None),
                        },
                        (Err(r), _) => out(false, Some(r.code()), None),
                    });
                }
                Ok(match wp.would_claim(now.router, req) {
                    Ok(()) => out(true, None, None),
                    Err(r) => out(false, Some(r.code()), None),
                })
            })
            .collect::<Result<Vec<_>, Failure>>()
            .map(Some)
    }
}

/// The `warm.target.changed` event of pool `id` (`p` holds the new target and its reason).
fn target_changed(id: &str, previous: u32, target: u32, p: &WarmPool) -> Event {
    Event::WarmTargetChanged { pool: PoolId::from(id), target, previous, reason: p.target_reason().code() }
}

/// A member of `pool` expired: a `warmUp()` that began before it was launched learns that
/// the pool cannot hold its target (its members expire before it fills).
fn expiring(work: &mut WarmWork, pool: &str, m: &Member) {
    for up in &mut work.ups {
        if m.launched_at >= up.since {
            up.expiring.insert(pool.to_string());
        }
    }
}

/// A closing router's drain, once no refill and no task is in flight: this process's idle
/// members destroyed (or, with `keepWarm`, left recorded and counted kept); with the
/// fleet's inventory, the members this process launched taken out of it first.
fn close_progress(w: &mut Warm, work: &mut WarmWork) {
    let jobs: u32 = w.pool_ids().iter().filter_map(|id| w.get(id)).map(WarmPool::jobs).sum();
    let busy = jobs > 0 || work.running() > 0 || !work.queue.is_empty();
    let Some((report, drained)) = work.closing.as_mut() else { return };
    if *drained || busy {
        return;
    }
    *drained = true;
    if w.shared {
        if !w.keep_warm {
            work.push("", Kind::FleetTakeMine);
        }
        return;
    }
    let members = w.drain();
    if w.keep_warm {
        report.kept = members.len() as u32;
        return;
    }
    for (pool, m) in members {
        work.push(&pool, Kind::Retire { member: m, why: RetireWhy::Close });
    }
}

#[cfg(test)]
mod tests {
    //! The warm work, driven by clock readings: each step kind and each timer, must-fire /
    //! must-not-fire.
    use super::*;
    use crate::core::health::config_of_option;
    use crate::core::mapping::MappingStore;
    use crate::core::router::{CapacitySettings, Owner, Settings};
    use serde_json::json;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn pool(id: &str, warm: Value) -> Value {
        let signals = json!({"estimatedCost": 1, "coldStartLatencyMs": 500, "readyLatencyMs": 500, "completionWithinBudgetRate": 0.99, "available": true});
        json!({"id": id, "capabilities": {}, "signals": signals, "warm": warm})
    }

    #[derive(Default)]
    struct Opts {
        health: Option<Value>,
        caller_store: bool,
        coordinated: bool,
        budgets: Option<Value>,
    }

    struct T {
        r: Router,
        n: u32,
        at: i64,
    }

    fn key(n: u32) -> SandboxKey {
        SandboxKey::parse(&format!("sbx_{n:032x}")).unwrap()
    }

    impl T {
        fn new(defs: &[Value], o: Opts) -> T {
            let mut pools = Pools::default();
            for d in defs {
                pools.add(d, false, o.coordinated).unwrap();
            }
            let ids: Vec<String> = defs.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect();
            let settings = Settings {
                fleet: "f".into(),
                health: o.health.as_ref().and_then(|h| config_of_option(h).unwrap()),
                capacity: o.coordinated.then_some(CapacitySettings {
                    provider_order: ids,
                    reservation_ttl_ms: 1_000,
                    coordinated: true,
                }),
                callback_timeout_ms: 5_000,
                operation_timeout_ms: 7_000,
                capacity_timeout_ms: 3_000,
                intents: false,
                classifier: false,
                observe: true,
                owner: Owner { host: "h".into(), pid: 1.0, session: "s".into() },
                budgets: o.budgets.map(|b| crate::core::budget::rules_of_option(&b).unwrap()).unwrap_or_default(),
                limits: Default::default(),
                combined: false,
                queue: None,
                decisions: None,
                decision_key: [0; 32],
            };
            let store = (!o.caller_store && !o.coordinated).then(|| Rc::new(RefCell::new(MappingStore::default())));
            let r = Router::new(settings, Rc::new(RefCell::new(pools)), store, None, 0).unwrap();
            T { r, n: 0, at: 0 }
        }

        fn start(mut self, facts: StartFacts) -> T {
            self.r.warm_start(facts);
            self
        }

        fn now(&self) -> Now {
            Now::at(self.at)
        }

        fn poll(&mut self) -> Option<Polled> {
            let now = self.now();
            let mut n = self.n;
            let p = self
                .r
                .warm_poll(now, &mut || {
                    n += 1;
                    Ok(key(1_000 + n))
                })
                .unwrap();
            self.n = n;
            p
        }

        /// Polls until nothing is due: every refill succeeds at once (its member `p-<n>`),
        /// every task is returned to the test.
        fn settle(&mut self) -> Vec<Polled> {
            let mut tasks = Vec::new();
            while let Some(p) = self.poll() {
                if p.refill {
                    self.refill_ok(&p);
                } else {
                    tasks.push(p);
                }
            }
            tasks
        }

        fn refill_ok(&mut self, p: &Polled) {
            assert_eq!(p.next.kind, StepKind::Launch);
            let psid = format!("p-{}", p.sandbox.unwrap());
            let next = self.r.succeeded(p.key, &psid, self.now(), 0).unwrap();
            assert_eq!(next.kind, StepKind::Succeeded);
            self.r.end(p.key);
        }

        fn idle(&self, pool: &str) -> usize {
            self.r.warm.as_ref().unwrap().get(pool).unwrap().idle().len()
        }

        fn events(&mut self) -> Vec<Event> {
            self.r.take_events().into_iter().map(|e| e.event).collect()
        }

        fn provision(&mut self) -> (u32, Next) {
            self.n += 1;
            let id = key(self.n);
            self.r.begin(&Rc::new(Request::default()), false, Default::default(), None, id, self.now()).unwrap()
        }
    }

    fn local() -> StartFacts {
        StartFacts { store_is_coordinator: false, store_in_memory: true, store_lists: true }
    }

    #[test]
    fn the_warm_step_kinds_are_numbered_40_to_47_once() {
        let warm: Vec<u32> = StepKind::ALL.iter().map(|(k, _)| *k as u32).filter(|k| *k >= 40).collect();
        assert_eq!(warm, (40..=47).collect::<Vec<_>>());
        let mut all: Vec<u32> = StepKind::ALL.iter().map(|(k, _)| *k as u32).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), StepKind::ALL.len());
        assert_eq!(FleetOp::ALL.len(), 7);
    }

    #[test]
    fn must_fire_warm_up_fills_the_pool_must_not_launch_before_it() {
        let mut t = T::new(&[pool("hot", json!({"size": 2}))], Opts::default());
        assert!(t.poll().is_none(), "must-not-fire: nothing before warmUp()");
        assert_eq!(t.r.warm_timeout(t.now()), None);
        let mut t = t.start(local());
        let up = t.r.warm_up_begin(t.now());
        let first = t.poll().unwrap();
        assert!(first.refill);
        assert_eq!(t.r.warm_up_answer(up, t.now()), None, "a refill is in flight");
        t.refill_ok(&first);
        assert!(t.settle().is_empty());
        let report = t.r.warm_up_answer(up, t.now()).unwrap();
        assert!(report.ready);
        assert_eq!(report.pools[0].idle, 2);
        assert!(t.r.warm_up_answer(up, t.now()).is_none(), "answered once");
    }

    #[test]
    fn must_fire_the_timer_wakes_at_the_first_expiry_and_check_must_not_before() {
        let mut t = T::new(
            &[pool("hot", json!({"size": 1, "maxIdleMs": 60_000, "checkIntervalMs": 100_000}))],
            Opts::default(),
        )
        .start(local());
        assert!(t.settle().is_empty());
        assert_eq!(t.idle("hot"), 1);
        assert_eq!(t.r.warm_timeout(t.now()), Some(60_000), "the expiry comes before the check");
        t.at = 59_999;
        assert!(t.poll().is_none(), "must-not-fire: not expired yet");
        assert_eq!(t.r.warm_timeout(t.now()), Some(MIN_WAKE_MS), "due in 1 ms: the shortest wait");
        t.at = 60_000;
        let retire = t.poll().unwrap();
        assert_eq!(retire.next.kind, StepKind::WarmDestroy, "must-fire: expired, and its handle is held");
        assert_eq!(retire.next.bound_ms, 7_000, "operationTimeoutMs");
        let refill = t.poll().unwrap();
        assert!(refill.refill, "and replaced");
        t.refill_ok(&refill);
        assert_eq!(t.r.warm_timeout(t.now()), Some(40_000), "the check at 100 s is next");
    }

    #[test]
    fn must_fire_a_check_due_since_the_last_pass_wakes_at_once_must_not_one_the_pass_started() {
        let mut t = T::new(&[pool("hot", json!({"size": 1, "checkIntervalMs": 200}))], Opts::default()).start(local());
        assert!(t.settle().is_empty());
        assert_eq!(t.idle("hot"), 1);
        assert_eq!(t.r.warm_timeout(t.now()), Some(200), "must-not-fire: the next check, from the pass");
        // The check falls due between the last pass and the timer's arming (a slow pump, a GC pause).
        t.at = 250;
        assert_eq!(t.r.warm_timeout(t.now()), Some(MIN_WAKE_MS), "must-fire: overdue since the pass, so at once");
        let check = t.poll().unwrap();
        assert_eq!(check.next.kind, StepKind::WarmList, "the check runs");
        assert_eq!(
            t.r.warm_timeout(t.now()),
            Some(200),
            "must-not-fire: the check this pass started does not wake at once"
        );
    }

    #[test]
    fn must_fire_a_member_without_a_live_handle_is_resolved_before_its_destroy_must_not_a_held_one() {
        let mut t = T::new(&[pool("hot", json!({"size": 0, "maxIdleMs": 1_000}))], Opts::default()).start(local());
        let m = Member { id: key(7), provider_sandbox_id: "p-7".into(), launched_at: 0 };
        t.r.warm.as_mut().unwrap().get_mut("hot").unwrap().insert(m.clone());
        t.at = 1_000;
        let p = t.poll().unwrap();
        assert_eq!(p.next.kind, StepKind::WarmResolve, "must-fire: no live handle here");
        assert_eq!((p.sandbox, p.provider_sandbox_id.as_deref()), (Some(m.id), Some("p-7")));
        let next = t.r.warm_resolved(p.key, Resolution::Found, t.now()).unwrap();
        assert_eq!(next.kind, StepKind::WarmDestroy, "must-not-fire: resolved, then destroyed");
        let done = t.r.warm_destroyed(p.key, true, t.now()).unwrap();
        assert_eq!(done.kind, StepKind::Done);
        assert_ne!(done.flags & flags::ROUTER_EVENTS, 0, "the expiry's event is waiting");
        assert!(matches!(
            &t.events()[..],
            [Event::WarmMemberExpired { destroyed: true, reason: "AGE", age_ms: 1_000, .. }]
        ));
        let forget = t.poll().unwrap();
        assert_eq!((forget.next.kind, forget.sandbox), (StepKind::WarmUnmap, Some(m.id)), "its record goes");
        assert_eq!(t.r.warm_unmapped(forget.key).unwrap().kind, StepKind::Done);
        assert_eq!(t.r.warm_unmapped(forget.key).unwrap_err().code, "INTERNAL_ERROR", "a report out of turn");
    }

    #[test]
    fn must_fire_a_failed_destroy_keeps_the_record_must_not_remove_it() {
        let mut t = T::new(&[pool("hot", json!({"size": 1, "maxIdleMs": 1_000}))], Opts::default()).start(local());
        t.settle();
        t.at = 1_000;
        let p = t.poll().unwrap();
        t.r.warm_destroyed(p.key, false, t.now()).unwrap();
        assert!(matches!(&t.events()[..], [Event::WarmMemberExpired { destroyed: false, .. }]));
        let next = t.poll().unwrap();
        assert!(next.refill, "must-not-fire: no WarmUnmap for a sandbox that may live (reconcile's)");
    }

    #[test]
    fn must_fire_a_member_the_listing_lacks_is_lost_must_not_a_listed_or_younger_one() {
        let mut t =
            T::new(&[pool("hot", json!({"size": 2, "checkIntervalMs": 1_000}))], Opts::default()).start(local());
        t.settle();
        let ids: Vec<(SandboxKey, String)> =
            t.r.warm
                .as_ref()
                .unwrap()
                .get("hot")
                .unwrap()
                .idle()
                .iter()
                .map(|m| (m.id, m.provider_sandbox_id.clone()))
                .collect();
        t.at = 999;
        assert!(t.poll().is_none(), "must-not-fire: the check is not due");
        t.at = 1_000;
        let check = t.poll().unwrap();
        assert_eq!(check.next.kind, StepKind::WarmList, "one list call for the pool");
        // A member that becomes idle after the listing began is not judged by it.
        let young = Member { id: key(9), provider_sandbox_id: "p-young".into(), launched_at: 1_000 };
        t.r.member_ready("hot", young);
        t.at = 1_100;
        let done = t.r.warm_listed(check.key, true, Some(vec![ids[1].1.clone()]), t.now()).unwrap();
        assert_eq!(done.kind, StepKind::Done);
        assert!(matches!(&t.events()[..], [Event::WarmMemberLost { .. }]), "must-fire");
        let p = t.r.warm.as_ref().unwrap().get("hot").unwrap();
        assert_eq!(p.stats().lost, 1);
        let left: Vec<SandboxKey> = p.idle().iter().map(|m| m.id).collect();
        assert_eq!(left, vec![ids[1].0, key(9)], "must-not-fire: the listed one and the younger one stay");
        let forget = t.poll().unwrap();
        assert_eq!((forget.next.kind, forget.sandbox), (StepKind::WarmUnmap, Some(ids[0].0)));
        // A listing that failed concludes nothing.
        t.at = 2_100;
        let check = t.poll().unwrap();
        let check = if check.next.kind == StepKind::WarmList { check } else { t.poll().unwrap() };
        t.r.warm_listed(check.key, true, None, t.now()).unwrap();
        assert!(t.events().is_empty());
    }

    #[test]
    fn must_fire_without_a_native_finder_each_member_is_resolved() {
        let mut t =
            T::new(&[pool("hot", json!({"size": 2, "checkIntervalMs": 1_000}))], Opts::default()).start(local());
        t.settle();
        t.at = 1_000;
        let check = t.poll().unwrap();
        t.r.warm_listed(check.key, false, None, t.now()).unwrap();
        let a = t.poll().unwrap();
        let b = t.poll().unwrap();
        assert_eq!((a.next.kind, b.next.kind), (StepKind::WarmResolve, StepKind::WarmResolve));
        t.r.warm_resolved(a.key, Resolution::Found, t.now()).unwrap();
        t.r.warm_resolved(b.key, Resolution::Gone, t.now()).unwrap();
        assert!(matches!(&t.events()[..], [Event::WarmMemberLost { .. }]));
        assert_eq!(t.idle("hot"), 1);
    }

    #[test]
    fn must_fire_a_held_member_is_claimed_directly_must_not_be_re_resolved() {
        let mut t = T::new(&[pool("hot", json!({"size": 1}))], Opts::default()).start(local());
        t.settle();
        let (_, next) = t.provision();
        assert_eq!(next.kind, StepKind::Claimed, "must-not-fire: a live handle is held");
        assert_ne!(next.flags & flags::WARM, 0, "its refill is due: the caller polls");
    }

    #[test]
    fn must_not_fire_a_miss_at_a_pool_that_cannot_grow_asks_no_poll() {
        let mut t = T::new(&[pool("none", json!({"size": 0}))], Opts::default()).start(local());
        t.settle();
        let (_, next) = t.provision();
        assert_eq!(next.kind, StepKind::Launch, "a miss: the cold launch");
        assert_eq!(next.flags & flags::WARM, 0, "size 0: nothing can become due, no poll");
        assert_eq!(t.r.warm.as_ref().unwrap().get("none").unwrap().stats().empty, 1, "the miss is counted");
    }

    #[test]
    fn must_fire_a_miss_at_an_empty_pool_that_can_grow_asks_a_poll() {
        let mut t = T::new(&[pool("hot", json!({"size": 1}))], Opts::default()).start(local());
        let (_, next) = t.provision();
        assert_eq!(next.kind, StepKind::Launch, "a miss: the cold launch");
        assert_ne!(next.flags & flags::WARM, 0, "its refill may be due: the caller polls");
    }

    #[test]
    fn must_fire_a_member_without_a_handle_is_re_resolved_and_dropped_when_gone() {
        let mut t = T::new(&[pool("hot", json!({"size": 1}))], Opts::default()).start(local());
        t.at = 10;
        t.r.warm.as_mut().unwrap().get_mut("hot").unwrap().insert(Member {
            id: key(5),
            provider_sandbox_id: "p-5".into(),
            launched_at: 0,
        });
        let (k, next) = t.provision();
        assert_eq!((next.kind, next.bound_ms), (StepKind::ClaimResolve, 7_000), "must-fire");
        let (next, forget) = t.r.claim_resolved(k, Resolution::Gone, t.now(), 0).unwrap();
        assert_eq!(forget, Some(key(5)), "its record to remove");
        assert_eq!(next.kind, StepKind::Launch, "the same pool, cold");
        assert!(matches!(&t.events()[..], [Event::WarmMemberLost { .. }]));
        let job: Vec<Event> = t.r.job_events(k, t.now()).unwrap().into_iter().map(|e| e.event).collect();
        assert!(job.iter().any(|e| matches!(e, Event::WarmMiss { reason: "EMPTY", .. })));
        // A member found alive is claimed.
        t.r.warm.as_mut().unwrap().get_mut("hot").unwrap().insert(Member {
            id: key(6),
            provider_sandbox_id: "p-6".into(),
            launched_at: 0,
        });
        let (k, _) = t.provision();
        let (next, forget) = t.r.claim_resolved(k, Resolution::Found, t.now(), 0).unwrap();
        assert_eq!((next.kind, forget), (StepKind::Succeeded, None));
        let job: Vec<Event> = t.r.job_events(k, t.now()).unwrap().into_iter().map(|e| e.event).collect();
        assert!(job.iter().any(|e| matches!(e, Event::WarmClaimed { age_ms: 10, .. })), "warm.claimed, from the core");
    }

    /// Drives a provision's steps of a coordinated router up to its claim.
    fn to_claim(t: &mut T, k: u32, mut next: Next) -> (u32, Next) {
        for _ in 0..4 {
            match next.kind {
                StepKind::Reserve => next = t.r.budget_decided(k, Some(Ok(())), false, t.now()).unwrap(),
                StepKind::Claim => return (k, next),
                other => panic!("{other:?}"),
            }
        }
        (k, next)
    }

    #[test]
    fn must_fire_a_fleet_claim_gone_under_shared_budgets_gives_the_charge_back_must_not_without_them() {
        let budgets = json!([{"id": "t", "key": {"label": "tenant"}, "limit": {"concurrent": 5}}]);
        for shared_budgets in [true, false] {
            let o = Opts { coordinated: true, budgets: shared_budgets.then(|| budgets.clone()), ..Opts::default() };
            let mut t = T::new(&[pool("hot", json!({"size": 1}))], o).start(StartFacts {
                store_is_coordinator: true,
                store_in_memory: false,
                store_lists: true,
            });
            let (k, next) = if shared_budgets {
                t.n += 1;
                let id = key(t.n);
                t.r.begin(
                    &Rc::new(Request::default()),
                    false,
                    vec![("tenant".into(), "a".into())].into(),
                    None,
                    id,
                    t.now(),
                )
                .unwrap()
            } else {
                t.provision()
            };
            let (k, next) = to_claim(&mut t, k, next);
            assert_eq!(next.kind, StepKind::Claim);
            let (_, _, _, charge) = t.r.claim_ask(k).unwrap();
            assert_eq!(charge.is_some(), shared_budgets, "the claim charges the provision's reservation");
            let member = Member { id: key(77), provider_sandbox_id: "p-77".into(), launched_at: 0 };
            let next = t.r.claim_answer(k, Some(member), t.now()).unwrap();
            assert_eq!(next.kind, StepKind::ClaimResolve, "another process's member: re-resolved");
            let (next, forget) = t.r.claim_resolved(k, Resolution::Failed, t.now(), 0).unwrap();
            assert_eq!(forget, Some(key(77)), "unverifiable: never handed out");
            if shared_budgets {
                assert_eq!(next.kind, StepKind::ClaimUncharge, "must-fire");
                let next = t.r.claim_uncharged(k, t.now()).unwrap();
                assert_eq!(next.kind, StepKind::Coordinate, "then the cold launch");
            } else {
                assert_eq!(next.kind, StepKind::Coordinate, "must-not-fire: nothing to give back");
            }
        }
    }

    #[test]
    fn must_fire_a_fleet_pass_reads_the_counts_then_reserves_must_not_beyond_the_target() {
        let o = Opts { coordinated: true, ..Opts::default() };
        let mut t = T::new(&[pool("hot", json!({"size": 2}))], o).start(StartFacts {
            store_is_coordinator: true,
            store_in_memory: false,
            store_lists: true,
        });
        let pass = t.poll().unwrap();
        assert_eq!(pass.next.kind, StepKind::WarmFleet);
        assert_eq!(t.r.warm_fleet_ask(pass.key).unwrap().op, FleetOp::Counts);
        assert!(t.poll().is_none(), "one pass at a time");
        let counts = vec![FleetCounts { provider_id: "hot".into(), idle: 1, launching: 0 }];
        let (done, _) =
            t.r.warm_fleet_answered(pass.key, Some(FleetReply { counts, ..Default::default() }), t.now()).unwrap();
        assert_eq!(done.kind, StepKind::Done);
        let expire = t.poll().unwrap();
        assert_eq!(t.r.warm_fleet_ask(expire.key).unwrap().op, FleetOp::Expire);
        let reserve = t.poll().unwrap();
        let ask = t.r.warm_fleet_ask(reserve.key).unwrap();
        assert_eq!((ask.op, ask.want, ask.target), (FleetOp::Reserve, 1, 2), "one missing");
        t.r.warm_fleet_answered(reserve.key, Some(FleetReply { tokens: vec![41], ..Default::default() }), t.now())
            .unwrap();
        let refill = t.poll().unwrap();
        assert!(refill.refill);
        assert_eq!((refill.token, refill.next.kind), (Some(41), StepKind::Coordinate));
        // A full fleet: no reservation.
        t.at = 31_000;
        t.r.warm_fleet_answered(expire.key, None, t.now()).unwrap();
        let pass = t.poll().unwrap();
        let counts = vec![FleetCounts { provider_id: "hot".into(), idle: 2, launching: 0 }];
        t.r.warm_fleet_answered(pass.key, Some(FleetReply { counts, ..Default::default() }), t.now()).unwrap();
        let mut ops = Vec::new();
        while let Some(p) = t.poll() {
            ops.push(t.r.warm_fleet_ask(p.key).unwrap().op);
            t.r.warm_fleet_answered(p.key, None, t.now()).unwrap();
        }
        assert!(!ops.contains(&FleetOp::Reserve), "must-not-fire: {ops:?}");
    }

    #[test]
    fn must_fire_warm_up_reports_expiring_members_must_not_for_members_older_than_the_wait() {
        let warm = json!({"size": 3, "maxIdleMs": 1_000, "refill": {"concurrency": 1}});
        let mut t = T::new(&[pool("hot", warm)], Opts::default()).start(local());
        let up = t.r.warm_up_begin(t.now());
        t.at = 10;
        let r1 = t.poll().unwrap();
        t.refill_ok(&r1);
        t.at = 1_020;
        // The first member expires; the second refill starts.
        let polled = [t.poll().unwrap(), t.poll().unwrap()];
        assert!(polled.iter().any(|p| p.refill) && polled.iter().any(|p| p.next.kind == StepKind::WarmDestroy));
        let report = t.r.warm_up_answer(up, t.now()).unwrap();
        assert_eq!(report.pools[0].reason, Some("EXPIRING"), "must-fire: it cannot hold its target");
        // A wait that began after the members were launched does not blame their expiry.
        let mut t = T::new(&[pool("hot", json!({"size": 1, "maxIdleMs": 1_000}))], Opts::default()).start(local());
        t.settle();
        t.at = 1_000;
        let up = t.r.warm_up_begin(t.now());
        let tasks = t.settle();
        assert_eq!(t.r.warm_up_answer(up, t.now()), None, "the retire task is in flight");
        t.r.warm_destroyed(tasks[0].key, true, t.now()).unwrap();
        let forget = t.poll().unwrap();
        t.r.warm_unmapped(forget.key).unwrap();
        let report = t.r.warm_up_answer(up, t.now()).unwrap();
        assert!(report.ready, "must-not-fire: {report:?}");
    }

    #[test]
    fn must_fire_warm_up_settles_at_its_bound_must_not_before_it() {
        let mut t =
            T::new(&[pool("hot", json!({"size": 1, "checkIntervalMs": 3_600_000}))], Opts::default()).start(local());
        let up = t.r.warm_up_begin(t.now());
        let _stuck = t.poll().unwrap();
        let bound = settle_window_ms(DEFAULT_ACQUISITION_TIMEOUT_MS, 5_000) as i64;
        assert_eq!(t.r.warm_timeout(t.now()), Some(bound), "the one timer is the bound");
        t.at = bound - 1;
        assert_eq!(t.r.warm_up_answer(up, t.now()), None, "must-not-fire");
        t.at = bound;
        let report = t.r.warm_up_answer(up, t.now()).unwrap();
        assert_eq!((report.ready, report.pools[0].reason), (false, Some("FILLING")), "must-fire");
    }

    #[test]
    fn must_fire_warm_up_reports_paused_after_failures_must_not_while_below_the_count() {
        let mut t = T::new(&[pool("hot", json!({"size": 1, "refill": {"pauseAfterFailures": 2}}))], Opts::default())
            .start(local());
        let up = t.r.warm_up_begin(t.now());
        for round in 0..2 {
            let p = t.poll().unwrap();
            assert!(p.refill, "round {round}");
            assert_eq!(t.r.threw(p.key, None, t.now()).unwrap().kind, StepKind::Done);
            t.r.end(p.key);
            if round == 0 {
                assert!(t.events().is_empty(), "must-not-fire: one failure");
            }
        }
        assert!(matches!(&t.events()[..], [Event::WarmRefillPaused { .. }]));
        let report = t.r.warm_up_answer(up, t.now()).unwrap();
        assert_eq!(report.pools[0].reason, Some("PAUSED"));
        assert_eq!(report.pools[0].last_failure_code.as_deref(), Some("PROVIDER_LAUNCH_OUTCOME_UNKNOWN"));
        assert!(t.poll().is_none(), "paused: no refill");
        assert_eq!(t.r.warm_timeout(t.now()), None, "and nothing scheduled: refills never probe");
    }

    #[test]
    fn must_fire_refills_wait_for_launch_tokens_must_not_without_a_rate_limit() {
        let mut paced = pool("hot", json!({"size": 3}));
        paced["rateLimit"] = json!({"launchesPerSecond": 2});
        let mut t = T::new(&[paced], Opts::default()).start(local());
        // One token: one refill now, then none until the next token (500 ms later).
        let first = t.poll().unwrap();
        assert!(first.refill);
        t.refill_ok(&first);
        assert!(t.poll().is_none(), "must-fire: no token, no refill");
        assert_eq!(t.idle("hot"), 1);
        // The warm timer wakes when the token comes, not at the check interval.
        assert_eq!(t.r.warm_timeout(t.now()), Some(500));
        t.at = 500;
        let second = t.poll().unwrap();
        assert!(second.refill);
        t.refill_ok(&second);
        assert!(t.poll().is_none());
        // A claim takes no token: a provision claims a member at once.
        let (_, next) = t.provision();
        assert_eq!(next.kind, StepKind::Claimed);
        // must-not-fire: without a rate limit every refill starts at once.
        let mut t = T::new(&[pool("hot", json!({"size": 3}))], Opts::default()).start(local());
        assert_eq!(t.settle().len(), 0);
        assert_eq!(t.idle("hot"), 3);
    }

    #[test]
    fn must_fire_refills_resume_the_moment_the_circuit_closes_must_not_while_it_stays_open() {
        let o = Opts { health: Some(json!({"failureThreshold": 1, "cooldownMs": 1_000})), ..Opts::default() };
        let mut t = T::new(&[pool("hot", json!({"size": 1, "refill": {"pauseAfterFailures": 1}}))], o).start(local());
        let p = t.poll().unwrap();
        t.r.threw(p.key, None, t.now()).unwrap();
        t.r.end(p.key);
        t.events();
        assert!(t.r.warm.as_ref().unwrap().get("hot").unwrap().is_paused());
        // After the cooldown one trial may run; it fails: still open, still paused.
        t.at = 1_500;
        let (k, next) = t.provision();
        assert_eq!(next.kind, StepKind::Launch);
        t.r.threw(k, None, t.now()).unwrap();
        t.r.end(k);
        assert!(!t.events().iter().any(|e| matches!(e, Event::WarmRefillResumed { .. })), "must-not-fire");
        assert!(t.r.warm.as_ref().unwrap().get("hot").unwrap().is_paused());
        // The next trial succeeds: the circuit closes and refills resume in that very call.
        t.at = 10_000;
        let (k, next) = t.provision();
        assert_eq!(next.kind, StepKind::Launch);
        let next = t.r.succeeded(k, "p-trial", t.now(), 0).unwrap();
        assert_ne!(next.flags & flags::WARM, 0, "warm work is due now");
        assert_ne!(next.flags & flags::ROUTER_EVENTS, 0);
        assert!(t.events().iter().any(|e| matches!(e, Event::WarmRefillResumed { .. })), "must-fire");
        t.r.end(k);
        assert!(t.poll().unwrap().refill, "the refill starts at the next poll, not the next pass");
    }

    #[test]
    fn must_fire_the_target_changed_event_when_demand_moves_it_must_not_while_steady() {
        let mut t = T::new(&[pool("hot", json!({"min": 1, "max": 20}))], Opts::default()).start(local());
        let first = t.poll().unwrap();
        t.at = 500; // a create of 500 ms
        t.refill_ok(&first);
        assert!(t.settle().is_empty());
        assert!(t.events().is_empty(), "must-not-fire: no demand");
        // 10 provisions a second for 5 s: the pool is empty after the first, each miss is demand.
        for i in 0..50 {
            t.at = 500 + i * 100;
            let (k, _) = t.provision();
            t.r.end(k);
        }
        t.poll();
        let moved: Vec<(u32, u32)> = t
            .events()
            .into_iter()
            .filter_map(|e| match e {
                Event::WarmTargetChanged { previous, target, reason: "DEMAND", .. } => Some((previous, target)),
                _ => None,
            })
            .collect();
        assert!(matches!(&moved[..], [(1, t)] if *t >= 5), "must-fire: {moved:?}");
        while t.poll().is_some() {}
        t.events();
        t.poll();
        assert!(t.events().is_empty(), "must-not-fire: same demand, same target");
        let status = t.r.warm_status(None, t.now());
        assert_eq!((status[0].target_reason, status[0].min, status[0].max), ("DEMAND", Some(1), Some(20)));
        assert!(status[0].demand_per_second > 5.0);
    }

    #[test]
    fn must_fire_close_counts_a_failed_destroy_must_not_count_it_destroyed() {
        let mut t = T::new(&[pool("hot", json!({"size": 2}))], Opts::default()).start(local());
        t.settle();
        assert!(t.r.warm_close(None, true).unwrap());
        assert_eq!(t.r.warm_close_answer(), None);
        let a = t.poll().unwrap();
        let b = t.poll().unwrap();
        assert_eq!((a.next.kind, b.next.kind), (StepKind::WarmDestroy, StepKind::WarmDestroy));
        t.r.warm_destroyed(a.key, true, t.now()).unwrap();
        t.r.warm_destroyed(b.key, false, t.now()).unwrap();
        assert!(t.events().is_empty(), "a close is no expiry");
        let forget = t.poll().unwrap();
        assert_eq!(forget.sandbox, a.sandbox, "only the destroyed one's record goes");
        assert_eq!(t.r.warm_close_answer(), None);
        t.r.warm_unmapped(forget.key).unwrap();
        assert!(t.poll().is_none());
        assert_eq!(t.r.warm_close_answer(), Some(CloseReport { destroyed: 1, failed: 1, kept: 0 }));
        assert!(!t.r.warm_close(None, true).unwrap(), "a second close has nothing to wait for");
    }

    #[test]
    fn must_fire_keep_warm_needs_a_durable_store_and_a_boolean_must_not_refuse_either() {
        let mut t = T::new(&[pool("hot", json!({"size": 1}))], Opts::default());
        for bad in ["{\"keepWarm\":1}", "{\"other\":true}", "5", "", "[]"] {
            assert_eq!(t.r.warm_close(Some(bad), false).unwrap_err().field.as_deref(), Some("keepWarm"), "{bad}");
        }
        let e = t.r.warm_close(Some("{\"keepWarm\":true}"), false).unwrap_err();
        assert!(e.message.contains("durable"), "the default store: {}", e.message);
        assert!(!t.r.warm_close(Some("{\"keepWarm\":false}"), false).unwrap(), "not started: nothing to wait for");
        assert_eq!(t.r.warm_close_answer(), Some(CloseReport::default()));
        let mut t = T::new(&[pool("hot", json!({"size": 2}))], Opts { caller_store: true, ..Opts::default() })
            .start(StartFacts { store_in_memory: true, ..local() });
        assert!(t.r.warm_close(Some("{\"keepWarm\":true}"), true).is_err(), "an InMemoryMappingStore");
        assert!(t.r.warm_close(Some("{\"keepWarm\":true}"), false).unwrap(), "must-not-fire: a durable store");
        assert!(t.poll().is_none());
        assert_eq!(t.r.warm_close_answer(), Some(CloseReport { destroyed: 0, failed: 0, kept: 0 }));
    }

    #[test]
    fn must_fire_records_a_previous_process_left_are_adopted_must_not_another_fleets() {
        let mut t = T::new(&[pool("hot", json!({"size": 2}))], Opts { caller_store: true, ..Opts::default() })
            .start(StartFacts { store_is_coordinator: false, store_in_memory: false, store_lists: true });
        let adopt = t.poll().unwrap();
        assert_eq!(adopt.next.kind, StepKind::WarmRecords, "adoption first");
        assert!(t.poll().is_none(), "no refill while adopting");
        let record = |n: u32, fleet: &str, warm: &str| StoreRecord {
            id: key(n).to_string(),
            provider_id: Some("hot".into()),
            provider_sandbox_id: Some(format!("p-{n}")),
            warm: Some(warm.into()),
            fleet: Some(fleet.into()),
            created_at_ms: Some(5.0),
        };
        let records = vec![record(1, "f", "hot"), record(2, "other", "hot"), record(3, "f", "cold")];
        t.r.warm_records(adopt.key, Some(records)).unwrap();
        let verify = t.poll().unwrap();
        assert_eq!(
            (verify.next.kind, verify.sandbox),
            (StepKind::WarmResolve, Some(key(1))),
            "must-not-fire: only this fleet's"
        );
        assert!(t.poll().is_none(), "still adopting");
        t.r.warm_resolved(verify.key, Resolution::Found, t.now()).unwrap();
        assert_eq!(t.idle("hot"), 1);
        let refill = t.poll().unwrap();
        assert!(refill.refill, "then the pool is filled");
        assert!(t.poll().is_none(), "one member missing, one refill");
        // With an in-memory store there is nothing to adopt.
        let mut t =
            T::new(&[pool("hot", json!({"size": 1}))], Opts { caller_store: true, ..Opts::default() }).start(local());
        assert!(t.poll().unwrap().refill, "must-not-fire");
    }

    #[test]
    fn must_fire_a_surplus_member_is_retired_beyond_the_target_must_not_at_it() {
        let mut t = T::new(&[pool("hot", json!({"min": 1, "max": 4, "checkIntervalMs": 1_000}))], Opts::default())
            .start(local());
        t.settle();
        for n in 0..3 {
            t.r.member_ready("hot", Member { id: key(20 + n), provider_sandbox_id: format!("s{n}"), launched_at: 0 });
        }
        assert_eq!(t.idle("hot"), 4);
        t.at = 500;
        assert!(t.settle().is_empty(), "must-not-fire: not idle a check interval yet");
        t.at = 1_000;
        let tasks = t.settle();
        let retires = tasks.iter().filter(|p| p.next.kind == StepKind::WarmDestroy).count();
        assert_eq!(retires, 3, "must-fire: back to the target");
        assert_eq!(t.idle("hot"), 1);
        for p in tasks.iter().filter(|p| p.next.kind == StepKind::WarmDestroy) {
            t.r.warm_destroyed(p.key, true, t.now()).unwrap();
        }
        assert!(t.events().iter().all(|e| matches!(e, Event::WarmMemberExpired { reason: "SURPLUS", .. })));
    }
}
