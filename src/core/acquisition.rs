//! One provision's acquisition, as a sans-IO state machine: the machine the router ships.
//!
//! Why a state machine and not a loop that awaits? Every step of an acquisition waits on
//! JavaScript: a capacity reader, an adapter's `launch`, a caller's classifier. Awaiting
//! those from Rust costs a ThreadsafeFunction round trip (~150 µs here) per hop; awaiting
//! them in JS costs a microtask. So the JS side performs each await and reports what
//! happened, and this machine decides everything else: which pool comes next, whether a
//! capacity measurement admits it, whether a failure advances, ends the provision or
//! exhausts it, which capacity hold is kept or released, and which events say so. The JS
//! loop holds no policy: no attempt counting, no code checks, no fallback decisions.
//!
//! The rules it enforces:
//! - a failure advances only when the caller's classifier proved it happened before
//!   allocation (`retryable: true` with a valid code), fallback is allowed, and the attempt
//!   bound and the candidates have room ([`crate::core::fallback::after_failure`]);
//! - capacity skips consume no attempt;
//! - a capacity hold is released only for a failure proven to have allocated nothing (a
//!   classified retryable failure, a missing package); success, an outcome-unknown failure,
//!   a malformed handle and a launch deadline keep it until a read reflects it or it
//!   expires (see [`crate::core::capacity::Ledger`]).
//! - with warm pools ([`Acquisition::offer_claims`]), a candidate that keeps one is first
//!   offered as a claim ([`Step::Claim`]): a claim is no launch (no attempt, no capacity
//!   read, no health outcome: the member was admitted, launched and counted when it was
//!   made); a miss goes on to the cold launch of the same candidate, as without warm pools,
//!   so the spillover list and every rule above stay as they are.
//! - with budgets ([`Acquisition::with_budget`]), each candidate's cost is reserved
//!   against every applying rule before its capacity read or launch; a candidate that does
//!   not fit is skipped (`BUDGET_EXCEEDED`, no attempt consumed), and the reservation is
//!   settled by the same rule as the capacity hold ([`crate::core::budget`]).

use crate::core::budget::{self, Refusal, Settle};
use crate::core::capabilities::Resources;
use crate::core::capacity::{
    request_need, skip_reason, Admission, Ledger, Measurement, SkipStatus, COORDINATOR_UNAVAILABLE, NO_CAPACITY_READER,
};
use crate::core::events::{Event, Kept, KeyFact, Nullable, PoolId, Time};
#[cfg(test)]
use crate::core::fallback::OUTCOME_UNKNOWN;
use crate::core::fallback::{after_failure, sanitize, Next, OUTCOME_UNKNOWN as UNKNOWN_CODE};
use crate::core::health::{Health, LaunchOutcome, Transition};
use crate::core::ids::SandboxKey;
use crate::core::pacing::{wake_at, Blocked, Pacing, RateLimit, COOLING_DOWN, RATE_LIMITED};
use crate::core::shared_ledger::Dim;
use crate::core::warm::MissReason;
use std::rc::Rc;

/// Code of a launch whose handle is not a handle (no string id): the sandbox may exist.
pub const MALFORMED_HANDLE: &str = "PROVIDER_MALFORMED_HANDLE";
/// Code of a launch that did not settle within its deadline: outcome unknown.
pub const ACQUISITION_TIMEOUT: &str = "ACQUISITION_TIMEOUT";
/// Code of an acquisition whose every allowed attempt failed retryably.
pub const ACQUISITION_EXHAUSTED: &str = "PROVIDER_ACQUISITION_EXHAUSTED";
/// Code of a capacity-routed acquisition in which no candidate had room.
pub const CAPACITY_EXHAUSTED: &str = "PROVIDER_CAPACITY_EXHAUSTED";
/// Code of an acquisition whose every candidate was refused by a budget.
pub const BUDGET_EXHAUSTED: &str = budget::BUDGET_EXHAUSTED;
/// Code of an acquisition refused because the shared budget ledger could not be asked.
pub const BUDGET_STORE_UNAVAILABLE: &str = budget::BUDGET_STORE_UNAVAILABLE;
/// Code of an acquisition whose every remaining candidate's circuit opened (or whose
/// half-open trial another provision took) after the route was decided; nothing launched.
pub const CIRCUIT_OPEN: &str = "CIRCUIT_OPEN";
/// Code of an acquisition whose every candidate was skipped for pacing (`core::pacing`).
pub const RATE_LIMITED_CODE: &str = "LAUNCH_RATE_LIMITED";

/// Slack on top of a launch's own deadline and the mapping write, covering clock steps
/// between processes.
pub const SETTLE_SLACK_MS: u64 = 60_000;

/// How long after a launch starts its provision has certainly ended, ms: the launch
/// deadline, then the mapping write (the router's `callbackTimeoutMs`), then
/// [`SETTLE_SLACK_MS`]. A launch intent expires after it (`reconcile` may then call a
/// stamped sandbox without a record an orphan even if its writer is alive), and so does a
/// shared capacity hold its writer never settled (its answer may have been lost after the
/// commit).
pub fn settle_window_ms(launch_timeout_ms: u64, callback_timeout_ms: u64) -> u64 {
    launch_timeout_ms.saturating_add(callback_timeout_ms).saturating_add(SETTLE_SLACK_MS)
}

/// What the caller must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Read `pool`'s capacity, then report it with [`Acquisition::admit`].
    Admit(usize),
    /// Reserve `pool`'s cost in the shared budget ledger, then report
    /// [`Acquisition::reserved_shared`].
    Reserve(usize),
    /// Launch on `pool`, then report [`Acquisition::succeeded`], [`Acquisition::failed`],
    /// [`Acquisition::malformed`], [`Acquisition::timed_out`] or [`Acquisition::package_failed`].
    Launch(usize),
    /// Claim an idle member of `pool`'s warm pool, then report [`Acquisition::claimed`] or
    /// [`Acquisition::claim_missed`] (a miss goes on to the cold launch of `pool`).
    Claim(usize),
    /// The acquisition is over: see [`Acquisition::outcome`].
    Done,
}

/// How an acquisition ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A handle from `pool`.
    Succeeded(usize),
    /// An idle member of `pool`'s warm pool.
    Claimed(usize),
    /// A terminal failure on `pool` with this code (a classifier's code,
    /// [`OUTCOME_UNKNOWN`], [`MALFORMED_HANDLE`]).
    Terminal { pool: usize, code: String },
    /// Every allowed attempt failed retryably ([`ACQUISITION_EXHAUSTED`]); `pool` failed last.
    Exhausted { pool: usize },
    /// Capacity routing skipped every candidate and launched nothing ([`CAPACITY_EXHAUSTED`]).
    NoCapacity,
    /// Some attempts failed retryably and the remaining candidates had no capacity.
    ExhaustedByCapacity,
    /// The launch on `pool` did not settle within its deadline ([`ACQUISITION_TIMEOUT`]).
    TimedOut { pool: usize },
    /// The runtime reported our own missing-package error on `pool` (`code`): nothing was
    /// called, so nothing was allocated.
    PackageFailed { pool: usize, code: String },
    /// Health excluded every candidate at launch time (their circuits opened, or another
    /// provision took the half-open trial, after the route was decided); nothing launched.
    /// `pool`: the last candidate excluded.
    CircuitOpen { pool: usize },
    /// Budgets refused every candidate that was not skipped otherwise; nothing launched
    /// ([`BUDGET_EXHAUSTED`]).
    BudgetExhausted,
    /// Every candidate was skipped for pacing (no launch token, or cooling down after a
    /// `Retry-After`); nothing launched ([`RATE_LIMITED_CODE`]). `until`: when the first of
    /// them may launch again (router clock, ms).
    RateLimited { until: i64 },
    /// The shared budget ledger could not be asked and rule `rule` refuses then
    /// ([`BUDGET_STORE_UNAVAILABLE`]); nothing launched.
    BudgetUnavailable { rule: usize },
    /// The provision's `AbortSignal` fired (or its router closed) before its next launch
    /// started ([`crate::core::queue::ABORTED`]); what it held was given back.
    Aborted,
}

impl Outcome {
    /// The pool a successful acquisition ended on (a launch or a claim).
    pub fn pool_of_success(&self) -> Option<usize> {
        match self {
            Outcome::Succeeded(pool) | Outcome::Claimed(pool) => Some(*pool),
            _ => None,
        }
    }

    /// The stable code of a failed outcome (None for a success).
    pub fn code(&self) -> Option<&str> {
        match self {
            Outcome::Succeeded(_) | Outcome::Claimed(_) => None,
            Outcome::Terminal { code, .. } | Outcome::PackageFailed { code, .. } => Some(code),
            Outcome::Exhausted { .. } | Outcome::ExhaustedByCapacity => Some(ACQUISITION_EXHAUSTED),
            Outcome::NoCapacity => Some(CAPACITY_EXHAUSTED),
            Outcome::TimedOut { .. } => Some(ACQUISITION_TIMEOUT),
            Outcome::CircuitOpen { .. } => Some(CIRCUIT_OPEN),
            Outcome::BudgetExhausted => Some(BUDGET_EXHAUSTED),
            Outcome::RateLimited { .. } => Some(RATE_LIMITED_CODE),
            Outcome::BudgetUnavailable { .. } => Some(BUDGET_STORE_UNAVAILABLE),
            Outcome::Aborted => Some(crate::core::queue::ABORTED),
        }
    }
}

/// Whether a skip's reason is pacing's (the wait queue's `QUEUED` too: a turn is a pace).
fn is_paced(reason: &str) -> bool {
    reason == RATE_LIMITED || reason == COOLING_DOWN || reason == crate::core::queue::QUEUED
}

/// A block of the last pass over the candidates that time may clear (`core::queue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Pool index.
    pub pool: usize,
    /// The skip's reason (`RATE_LIMITED`, `COOLING_DOWN`, `QUEUED`, the full dimension,
    /// `BUDGET_EXCEEDED`), or the failed launch's code on a pool now cooling down.
    pub reason: String,
    /// When to look again.
    pub wake: Wake,
}

/// When a waiting provision should look again at one of its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// At this instant (router clock, ms): the next token, the cooldown's end.
    At(i64),
    /// After [`crate::core::queue::RECHECK_MS`], unless a release wakes it first (capacity
    /// full, a budget's concurrent slot).
    Recheck,
    /// When a waiter ahead of it leaves.
    Woken,
}

/// One failed attempt, as reported in errors and events (sanitized code only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Pool index.
    pub pool: usize,
    /// Sanitized code.
    pub code: String,
    /// Whether the failure was classified retryable (and so may have advanced).
    pub retryable: bool,
}

/// A candidate that capacity routing skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// Pool index.
    pub pool: usize,
    /// Unknown or exhausted.
    pub status: SkipStatus,
    /// An unknown-measurement reason, `NO_CAPACITY_READER`, or the full dimension.
    pub reason: String,
}

/// Health tracking of one acquisition: each pool's health slot, the caller's clock as last
/// reported, and the launch in flight.
#[derive(Debug, Clone)]
struct Tracking {
    /// Health slot of each pool (by pool index), shared with the registry's cache.
    slots: Rc<[usize]>,
    /// The instant the caller last reported (ms).
    now: i64,
    /// When the launch in flight started (ms).
    started: i64,
    /// Whether the launch in flight (or the admission before it) holds the half-open trial.
    trial: bool,
    /// The outcome of the last launch, not yet recorded.
    pending: Option<(usize, Pending)>,
}

#[derive(Debug, Clone, Copy)]
enum Pending {
    Record(LaunchOutcome),
    /// Ended with no outcome health counts: free the trial token, if held.
    Release,
}

/// What a capacity-routed acquisition needs per launch.
#[derive(Debug, Clone)]
pub struct CapacityPlan {
    /// The request's resource needs.
    pub need: Resources,
    /// Pools (by index) that have a capacity reader; others are skipped as
    /// `UNKNOWN: NO_CAPACITY_READER` without a read.
    pub readers: Vec<bool>,
    /// The ledger's key of each pool (by index): a router's ledger outlives registry
    /// changes, so it numbers pools by id, not by registration index.
    pub ledger_pools: Vec<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// About to handle the candidate at `pos` (admit it or launch it).
    Next,
    /// Its budget reservation is being asked of the shared ledger.
    Reserving,
    /// A read of the candidate's capacity is in flight (sequence for the ledger).
    Admitting(u64),
    /// A launch on the candidate is in flight (its hold token, if admitted).
    Launching(Option<u64>),
    /// A claim of one of the candidate's warm members is in flight.
    Claiming,
    Done,
}

/// One acquisition over `candidates` (pool indices, best first).
#[derive(Debug, Clone)]
pub struct Acquisition {
    candidates: Vec<usize>,
    pos: usize,
    made: u32,
    max_attempts: usize,
    fallback_allowed: bool,
    capacity: Option<CapacityPlan>,
    phase: Phase,
    outcome: Option<Outcome>,
    attempts: Vec<Attempt>,
    skipped: Vec<Skip>,
    /// The pools' ids, when events are recorded (the router has an observer or telemetry):
    /// None, and the success path allocates no event.
    names: Option<Rc<[PoolId]>>,
    /// Its events, as kept (compact: see [`Kept`]).
    events: Vec<Kept>,
    /// The router's clock at the last report (ms): the capacity ledger's holds are timed by it.
    clock: i64,
    /// A hold of the shared ledger settled by the machine, for the caller to write
    /// ([`Acquisition::take_settlement`]): (token, allocated).
    settlement: Option<(u64, bool)>,
    tracking: Option<Tracking>,
    /// The last candidate health excluded at launch time.
    circuit_skipped: Option<usize>,
    /// Per pool index: whether it keeps a warm pool this acquisition may claim from.
    claims: Option<Rc<[bool]>>,
    /// Whether the current candidate was offered as a claim already.
    claim_tried: bool,
    /// Budgets, when the router has rules that apply to the request.
    /// Boxed: a machine without budgets stays as small as before (it is moved on every
    /// provision).
    budget: Option<Box<Budgeting>>,
    /// The provision's sandbox id, under which a kept capacity hold is recorded.
    owner: Option<SandboxKey>,
    /// Pacing, when a pool of the registry declares a rate limit or one is cooling down.
    paced: Option<Box<Paced>>,
}

/// An acquisition's pacing: each pool's limit and id, and the token it holds.
#[derive(Debug, Clone)]
struct Paced {
    /// By pool index.
    limits: Rc<[Option<RateLimit>]>,
    /// By pool index: the ids the router's pacing is keyed by.
    ids: Rc<[PoolId]>,
    /// The candidate position that took a token (its launch has not happened yet).
    held: Option<usize>,
    /// A token to give back (its pool's read skipped it), at the next step.
    refund: Option<usize>,
    /// The earliest time a paced-over candidate may launch again.
    until: Option<i64>,
    /// The pools waiters ahead of this provision wait for: skipped as `QUEUED`.
    queued: Vec<PoolId>,
    /// Pools (by index) whose turn the fleet gave another lane in this pass, and when to
    /// ask it again.
    turns: Vec<(usize, i64)>,
}

/// An acquisition's budget state.
#[derive(Debug, Clone)]
struct Budgeting {
    plan: budget::Plan,
    /// The candidate position whose cost is reserved now.
    held: Option<usize>,
    /// The in-process ledger's slot of the last reservation ([`budget::Ledger::settle_in`]).
    slot: u32,
    /// When it was reserved (the router's clock, ms).
    at: i64,
    /// A settlement the ledger has not been told yet (see [`Acquisition::take_budget_settle`]).
    pending: Option<Settle>,
    /// Every refusal, by candidate: (pool, the rules that refused).
    refusals: Vec<(usize, Vec<Refusal>)>,
    /// With a shared ledger that could not be asked, the rule that refused.
    unavailable: Option<usize>,
    /// The held candidate was admitted unreserved (the shared ledger could not be asked
    /// and every rule allows that): nothing to settle.
    unrecorded: bool,
    /// What budget events name, when events are recorded.
    names: Option<BudgetNames>,
}

/// What budget events name: the applying rules' ids (in rule order) and every rule's label.
#[derive(Debug, Clone)]
pub struct BudgetNames {
    /// Ids of the rules that apply to the request.
    pub applying: Vec<PoolId>,
    /// Every rule's label, by rule index.
    pub labels: Rc<[String]>,
}

/// The shared ledger's answer to one admission (`PostgresMappingStore` as a coordinator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SharedVerdict {
    /// Held under this token.
    Admitted(u64),
    /// This dimension has no room.
    Exhausted(String),
    /// The coordinator could not be asked (down, slow, failed mid-transaction): the pool is
    /// skipped as `UNKNOWN` with [`COORDINATOR_UNAVAILABLE`], like an unreadable pool.
    Unavailable,
    /// The fleet's pacing refused the pool: its bucket has no token ([`RATE_LIMITED`]) or it
    /// cools down after another process's `Retry-After` ([`COOLING_DOWN`]), for `in_ms` more
    /// (reckoned on the database's clock). Skipped like a pacing skip here, and kept in the
    /// router's pacing until then ([`Pacing::fleet_refused`]).
    Paced {
        /// [`RATE_LIMITED`] or [`COOLING_DOWN`].
        reason: &'static str,
        /// How long until the pool may launch, ms.
        in_ms: i64,
    },
}

impl Acquisition {
    /// Starts an acquisition. Under a capacity plan every candidate may be tried (skips
    /// cost no attempt); otherwise `candidates` is already cut to `max_attempts`.
    /// `names`: the pools' ids, to record events (None when nobody listens, so the success
    /// path allocates none).
    pub fn new(
        candidates: Vec<usize>,
        max_attempts: usize,
        fallback_allowed: bool,
        capacity: Option<CapacityPlan>,
        names: Option<Rc<[PoolId]>>,
    ) -> Self {
        let mut a = Acquisition {
            candidates,
            pos: 0,
            made: 0,
            max_attempts,
            fallback_allowed,
            capacity,
            phase: Phase::Next,
            outcome: None,
            attempts: Vec::new(),
            skipped: Vec::new(),
            names,
            events: Vec::new(),
            clock: 0,
            settlement: None,
            tracking: None,
            circuit_skipped: None,
            claims: None,
            claim_tried: false,
            budget: None,
            owner: None,
            paced: None,
        };
        if a.candidates.is_empty() {
            a.finish_without_room();
        }
        a
    }

    /// Paces this acquisition: before a candidate is read or launched it takes a token from
    /// the router's pacing (`limits` and `ids` by pool index); one without a token, or
    /// cooling down, is skipped without consuming an attempt. Call before the first step.
    pub fn pace(&mut self, limits: Rc<[Option<RateLimit>]>, ids: Rc<[PoolId]>) {
        self.paced = Some(Box::new(Paced {
            limits,
            ids,
            held: None,
            refund: None,
            until: None,
            queued: Vec::new(),
            turns: Vec::new(),
        }));
    }

    /// Offers each candidate that keeps a warm pool (`pools[index]`) as a claim before its
    /// cold launch. Call before the first step.
    pub fn offer_claims(&mut self, pools: Rc<[bool]>) {
        self.claims = Some(pools);
    }

    /// Lends the machine an empty list to write its events into (a decision record's, whose
    /// room is kept: no allocation). Call before the first step.
    pub fn lend_events(&mut self, events: Vec<Kept>) {
        if self.events.is_empty() {
            self.events = events;
        }
    }

    /// Whether this machine records events (the router has an observer).
    pub fn observing(&self) -> bool {
        self.names.is_some()
    }

    /// The router's clock (ms), given with each call: capacity holds are timed by it.
    pub fn set_clock(&mut self, ms: i64) {
        self.clock = ms;
    }

    /// Records `event` (the caller made it only when [`Acquisition::observing`]).
    #[inline]
    fn push(&mut self, event: Event) {
        self.events.push(Kept::of(event));
    }

    /// Records an event the router decided about this acquisition (its route, its record),
    /// in order with the machine's own, when events are recorded.
    pub fn announce(&mut self, event: Event) {
        if self.observing() {
            self.push(event);
        }
    }

    /// `mapping.persisted` of pool `pool` (its index), when events are recorded.
    pub fn persisted(&mut self, pool: usize) {
        if self.observing() {
            self.events.push(Kept::Persisted(pool as u32));
        }
    }

    /// Pool `pool`'s id as events name it (shared: no copy).
    pub fn id(&self, pool: usize) -> PoolId {
        self.names.as_ref().and_then(|n| n.get(pool).cloned()).unwrap_or_else(|| PoolId::from(""))
    }

    /// The event of a circuit `transition` of `pool`.
    fn circuit_event(&self, pool: usize, transition: Transition) -> Event {
        let pool = self.id(pool);
        match transition {
            Transition::Opened { retry_at, cooldown_ms, cause, failures } => Event::CircuitOpened {
                pool,
                reason: cause.code(),
                consecutive_failures: failures,
                cooldown_ms,
                retry_at: Time(retry_at),
            },
            Transition::HalfOpen => Event::CircuitHalfOpen { pool },
            Transition::Closed => Event::CircuitClosed { pool },
        }
    }

    /// Names the provision's sandbox id: a capacity hold its launch keeps is recorded under
    /// it, so that destroying the sandbox releases the hold
    /// ([`crate::core::capacity::Ledger::release_sandbox`]).
    pub fn own(&mut self, sandbox: SandboxKey) {
        self.owner = Some(sandbox);
    }

    /// Reserves budgets for every launch (call before the first step): `plan.costs[pool]`
    /// against `plan.applying`. Budget skips consume no attempt, so `candidates` must not have
    /// been cut to the attempt bound.
    pub fn with_budget(&mut self, plan: budget::Plan, names: Option<BudgetNames>) {
        self.budget = Some(Box::new(Budgeting {
            plan,
            held: None,
            slot: u32::MAX,
            at: 0,
            pending: None,
            refusals: Vec::new(),
            unavailable: None,
            unrecorded: false,
            names,
        }));
    }

    /// Tracks this acquisition's launches in a router's health: `slots` maps pool indices
    /// to health slots; `now` is the caller's clock (ms). Call before the first step.
    pub fn track(&mut self, slots: impl Into<Rc<[usize]>>, now: i64) {
        self.tracking = Some(Tracking { slots: slots.into(), now, started: now, trial: false, pending: None });
    }

    /// The caller's clock (ms), reported with each outcome (and admission): launch
    /// latencies are measured between these instants.
    pub fn set_now(&mut self, now: i64) {
        if let Some(t) = &mut self.tracking {
            t.now = now;
        }
    }

    /// What to do now. With a capacity plan, a read starts here: `ledger.begin_read()`.
    pub fn next(&mut self, ledger: Option<&mut Ledger>) -> Step {
        self.next_with(ledger, None)
    }

    /// [`Acquisition::next`] with the router's health (when tracked): a candidate whose
    /// circuit excludes it now is passed over (no attempt consumed; `health.skipped`), and a
    /// half-open one takes the single trial token before it is read or launched.
    pub fn next_with(&mut self, ledger: Option<&mut Ledger>, health: Option<&mut Health>) -> Step {
        self.next_budgeted(ledger, health, None)
    }

    /// [`Acquisition::next_with`] with the router's in-process budget ledger and clock
    /// (`now`, ms): each candidate's cost is reserved before it is read or launched; one
    /// that does not fit is skipped. Under a shared budget ledger (or none given) a
    /// candidate to reserve is a [`Step::Reserve`].
    pub fn next_budgeted(
        &mut self,
        ledger: Option<&mut Ledger>,
        health: Option<&mut Health>,
        budgets: Option<(&mut budget::Ledger, i64)>,
    ) -> Step {
        self.next_paced(ledger, health, budgets, None)
    }

    /// [`Acquisition::next_budgeted`] with the router's pacing (when [`Acquisition::pace`]d):
    /// a candidate takes a launch token before it is read or launched, or is skipped
    /// (`RATE_LIMITED`, `COOLING_DOWN`) without consuming an attempt.
    pub fn next_paced(
        &mut self,
        mut ledger: Option<&mut Ledger>,
        mut health: Option<&mut Health>,
        mut budgets: Option<(&mut budget::Ledger, i64)>,
        mut pacing: Option<&mut Pacing>,
    ) -> Step {
        loop {
            if let Some((l, _)) = budgets.as_mut() {
                self.settle_budget_in(l);
            }
            if let (Some(p), Some(pacing)) = (self.paced.as_deref_mut(), pacing.as_deref_mut()) {
                if let Some((pool, id)) = p.refund.take().and_then(|pool| Some((pool, p.ids.get(pool)?))) {
                    pacing.refund(id, p.limits.get(pool).copied().flatten(), self.clock);
                }
            }
            match self.phase {
                Phase::Done => return Step::Done,
                Phase::Admitting(_) | Phase::Launching(_) | Phase::Claiming | Phase::Reserving => {
                    return self.current_step()
                }
                Phase::Next => {}
            }
            let pool = self.candidates[self.pos];
            // Budgets first: a warm claim is charged like a cold launch.
            if let Some(b) = &self.budget {
                if b.held != Some(self.pos) {
                    match budgets.as_mut() {
                        Some((l, now)) if matches!(b.plan.applying, budget::Applying::Local(_)) => {
                            if let Err(refusals) = self.reserve_in(l, pool, *now) {
                                self.refuse_budget(pool, refusals);
                                continue;
                            }
                        }
                        _ => {
                            self.phase = Phase::Reserving;
                            return Step::Reserve(pool);
                        }
                    }
                }
            }
            if !self.claim_tried && self.claims.as_ref().is_some_and(|c| c.get(pool).copied().unwrap_or(false)) {
                self.claim_tried = true;
                self.phase = Phase::Claiming;
                return Step::Claim(pool);
            }
            if let (Some(t), Some(h)) = (&mut self.tracking, health.as_deref_mut()) {
                let slot = t.slots[pool];
                match h.try_launch(slot, t.now) {
                    Ok(trial) => {
                        t.trial = trial;
                        if trial && self.observing() {
                            let e = self.circuit_event(pool, Transition::HalfOpen);
                            self.push(e);
                        }
                    }
                    Err(_) => {
                        self.pass_over(pool);
                        continue;
                    }
                }
            }
            if let (Some(p), Some(pacing)) = (self.paced.as_deref_mut(), pacing.as_deref_mut()) {
                // (A pool index past the plan's ids cannot come from the route; it is not paced.)
                if let (true, Some(id)) = (p.held != Some(self.pos), p.ids.get(pool)) {
                    if p.queued.contains(id) {
                        // Waiters ahead wait for it: their turn first.
                        self.release_trial(health.as_deref_mut());
                        self.skip(pool, SkipStatus::Exhausted, crate::core::queue::QUEUED.to_string());
                        continue;
                    }
                    let limit = p.limits.get(pool).copied().flatten();
                    match pacing.take(id, limit, self.clock) {
                        Ok(()) => p.held = limit.map(|_| self.pos),
                        Err(blocked) => {
                            p.until = Some(p.until.map_or(blocked.until, |u| u.min(blocked.until)));
                            if blocked.reason == RATE_LIMITED && self.observing() {
                                let e = Event::PoolRateLimited { pool: self.id(pool), retry_at: Time(blocked.until) };
                                self.push(e);
                            }
                            self.release_trial(health.as_deref_mut());
                            self.skip(pool, SkipStatus::Exhausted, blocked.reason.to_string());
                            continue;
                        }
                    }
                }
            }
            let Some(plan) = &self.capacity else {
                self.start_launch(None);
                return Step::Launch(pool);
            };
            if !plan.readers.get(pool).copied().unwrap_or(false) {
                self.release_trial(health.as_deref_mut());
                self.skip(pool, SkipStatus::Unknown, NO_CAPACITY_READER.to_string());
                continue;
            }
            let seq = ledger.as_deref_mut().map_or(0, Ledger::begin_read);
            self.phase = Phase::Admitting(seq);
            return Step::Admit(pool);
        }
    }

    /// Skips `pools` as [`crate::core::queue::QUEUED`] (waiters ahead wait for them) until
    /// the next [`Acquisition::rewind`]. Paced machines only.
    pub fn queue_behind(&mut self, pools: Vec<PoolId>) {
        if let Some(p) = self.paced.as_deref_mut() {
            p.queued = pools;
        }
    }

    /// The blocks of a pass that ran out of candidates, those time may clear, with when to
    /// look again (`pacing`: when a token comes or a cooldown ends). Empty when the ending
    /// is not one a wait can change: a success, a terminal failure, a launch in doubt, no
    /// attempt left, or only blocks time does not clear (an unreadable capacity, a circuit,
    /// a cost or launch budget spent for its window).
    pub fn waitable(&self, pacing: &Pacing) -> Vec<Block> {
        let exhausted_on = match &self.outcome {
            Some(
                Outcome::RateLimited { .. }
                | Outcome::NoCapacity
                | Outcome::BudgetExhausted
                | Outcome::ExhaustedByCapacity,
            ) => None,
            Some(Outcome::Exhausted { pool }) => Some(*pool),
            _ => return Vec::new(),
        };
        if self.made as usize >= self.max_attempts {
            return Vec::new();
        }
        // When to look again: a little past the time the pool frees (`pacing::wake_at`).
        let blocked_until = |pool: usize| {
            let p = self.paced.as_deref()?;
            let limit = p.limits.get(pool).copied().flatten();
            pacing.peek(p.ids.get(pool)?, limit, self.clock).err().map(|b| wake_at(b.until, limit))
        };
        let mut out = Vec::new();
        for s in &self.skipped {
            let turn = |pool: usize| {
                let p = self.paced.as_deref()?;
                let limit = p.limits.get(pool).copied().flatten();
                p.turns.iter().find(|(at, _)| *at == pool).map(|(_, until)| wake_at(*until, limit))
            };
            let wake = match s.reason.as_str() {
                // The fleet's turn of another lane: ask again when it named; this process's
                // waiters ahead: when one leaves.
                crate::core::queue::QUEUED => turn(s.pool).map_or(Wake::Woken, Wake::At),
                r if is_paced(r) => blocked_until(s.pool).map_or(Wake::Recheck, Wake::At),
                budget::BUDGET_EXCEEDED => {
                    let refusals = self.budget.as_ref().map(|b| b.refusals.as_slice()).unwrap_or_default();
                    let waits = refusals.iter().filter(|(p, _)| *p == s.pool).flat_map(|(_, rs)| rs.iter());
                    let mut waits = waits.clone().peekable();
                    if waits.peek().is_none()
                        || !waits.all(|r| r.retryable || r.dimension == budget::Dimension::Concurrent)
                    {
                        continue;
                    }
                    Wake::Recheck
                }
                _ if s.status == SkipStatus::Exhausted => Wake::Recheck,
                _ => continue,
            };
            out.push(Block { pool: s.pool, reason: s.reason.clone(), wake });
        }
        // A launch that failed before allocating, on a pool now cooling down (its
        // `Retry-After`): the cooldown's end is the retry's turn.
        if let (Some(pool), Some(last)) = (exhausted_on, self.attempts.last()) {
            if let Some(until) = blocked_until(pool) {
                out.push(Block { pool, reason: last.code.clone(), wake: Wake::At(until) });
            }
        }
        out
    }

    /// Starts a new pass over the candidates after a pass that ran out of them (the
    /// provision waited): the attempts made so far still count, its events say nothing of
    /// the ending that did not happen.
    pub fn rewind(&mut self) {
        if self.phase != Phase::Done {
            return;
        }
        if let Some(i) = self.events.iter().rposition(|e| matches!(e.other(), Some(Event::ProvisionExhausted { .. }))) {
            self.events.remove(i);
        }
        self.pos = 0;
        self.phase = Phase::Next;
        self.outcome = None;
        self.skipped.clear();
        self.circuit_skipped = None;
        self.claim_tried = false;
        if let Some(b) = self.budget.as_deref_mut() {
            b.refusals.clear();
            b.unavailable = None;
        }
        if let Some(p) = self.paced.as_deref_mut() {
            p.until = None;
            p.queued.clear();
            p.turns.clear();
        }
    }

    /// Ends the acquisition before the launch it is about to start ([`Outcome::Aborted`]):
    /// the launch's capacity hold, budget reservation and launch token are given back (no
    /// launch happened, so nothing was allocated). Any other phase holds nothing to give back
    /// but the candidate's reservations, which ending gives back.
    pub fn abort(&mut self, ledger: Option<&mut Ledger>) {
        if self.phase == Phase::Done {
            return;
        }
        if let Phase::Launching(_) = self.phase {
            if let Some(pool) = self.settle(ledger, false) {
                self.made = self.made.saturating_sub(1);
                self.note(pool, |_| Pending::Release);
                if let Some(p) = self.paced.as_deref_mut() {
                    if p.limits.get(pool).copied().flatten().is_some() {
                        p.refund = Some(pool);
                    }
                }
            }
        } else {
            let pool = self.candidates.get(self.pos).copied();
            if let Some(pool) = pool {
                self.give_back_budget(pool);
            }
        }
        self.finish(Outcome::Aborted);
    }

    /// The ending's `provision.exhausted` event names `code` instead (the wait queue ended
    /// the provision: `QUEUE_TIMEOUT`, `QUEUE_FULL`, `ABORTED`, `ROUTER_CLOSED`).
    pub fn restate(&mut self, code: &str) {
        let ending = self.events.iter_mut().rev().find_map(|e| match e {
            Kept::Other(e) if matches!(**e, Event::ProvisionExhausted { .. }) => Some(&mut **e),
            _ => None,
        });
        if let Some(Event::ProvisionExhausted { code: c, .. }) = ending {
            *c = code.to_string();
        } else if self.observing() && self.phase == Phase::Done {
            self.push(Event::ProvisionExhausted { code: code.to_string(), summary: None, decision_id: None });
        }
    }

    /// Whether a launch is about to start (the step the caller performs next is it).
    pub fn launching(&self) -> bool {
        matches!(self.phase, Phase::Launching(_))
    }

    /// A candidate health excluded at launch time: no attempt consumed.
    fn pass_over(&mut self, pool: usize) {
        if self.observing() {
            self.push(Event::HealthSkipped { pool: self.id(pool), reason: crate::core::acquisition::CIRCUIT_OPEN });
        }
        self.circuit_skipped = Some(pool);
        self.give_back_budget(pool);
        self.advance();
        if self.pos >= self.candidates.len() {
            self.finish_without_room();
        }
    }

    /// Frees a trial token taken for a candidate that is then not launched.
    fn release_trial(&mut self, health: Option<&mut Health>) {
        if let (Some(t), Some(h)) = (&mut self.tracking, health) {
            if t.trial {
                h.release(t.slots[self.candidates[self.pos]]);
                t.trial = false;
            }
        }
    }

    fn current_step(&self) -> Step {
        let pool = self.candidates[self.pos];
        match self.phase {
            Phase::Reserving => Step::Reserve(pool),
            Phase::Admitting(_) => Step::Admit(pool),
            Phase::Launching(_) => Step::Launch(pool),
            Phase::Claiming => Step::Claim(pool),
            Phase::Next | Phase::Done => Step::Done,
        }
    }

    /// Reports the capacity read of the current candidate (validated measurement).
    /// Admitted: the next step launches it (its hold is kept by the ledger). Otherwise it
    /// is skipped and the machine moves on.
    pub fn admit(&mut self, ledger: &mut Ledger, measurement: &Measurement) {
        self.admit_with(ledger, measurement, None);
    }

    /// [`Acquisition::admit`] with the router's health (when tracked): a skipped candidate
    /// frees the trial token it took.
    pub fn admit_with(&mut self, ledger: &mut Ledger, measurement: &Measurement, health: Option<&mut Health>) {
        let Phase::Admitting(seq) = self.phase else { return };
        let pool = self.candidates[self.pos];
        let Some(plan) = &self.capacity else { return };
        let key = plan.ledger_pools.get(pool).copied().unwrap_or(pool);
        match ledger.admit(key, seq, measurement, &plan.need, self.clock) {
            Admission::Admitted(token) => {
                if self.observing() {
                    self.push(Event::CapacityAdmitted { pool: self.id(pool) });
                }
                self.start_launch(Some(token));
            }
            Admission::Exhausted { resource, .. } => {
                self.release_trial(health);
                self.skip(pool, SkipStatus::Exhausted, resource);
            }
            Admission::Unknown(reason) => {
                self.release_trial(health);
                self.skip(pool, SkipStatus::Unknown, reason.code().to_string());
            }
        }
    }

    /// Under a shared ledger, step one of an admission: the current candidate's validated
    /// measurement, turned into the dimensions the coordinator decides on (each with this
    /// request's need). An unknown measurement is skipped here (None), as [`Acquisition::admit`]
    /// would skip it; so is a call outside an admission.
    pub fn shared_demand(&mut self, measurement: &Measurement, health: Option<&mut Health>) -> Option<Vec<Dim>> {
        let Phase::Admitting(_) = self.phase else { return None };
        let pool = self.candidates[self.pos];
        let plan = self.capacity.as_ref()?;
        match measurement {
            Measurement::Unknown(reason) => {
                let reason = reason.code().to_string();
                self.release_trial(health);
                self.skip(pool, SkipStatus::Unknown, reason);
                None
            }
            Measurement::Known(m) => Some(
                m.iter()
                    .map(|r| Dim {
                        resource: r.resource.clone(),
                        used: r.used,
                        limit: r.limit,
                        need: r.required.max(request_need(&r.resource, &plan.need)),
                    })
                    .collect(),
            ),
        }
    }

    /// Under a shared ledger, step two: the coordinator's verdict on the current candidate.
    /// Admitted: the next step launches it; otherwise it is skipped.
    /// `pacing`: the router's, which keeps a refusal of the fleet's pacing.
    pub fn admit_shared(&mut self, verdict: SharedVerdict, health: Option<&mut Health>, pacing: Option<&mut Pacing>) {
        let Phase::Admitting(_) = self.phase else { return };
        let pool = self.candidates[self.pos];
        match verdict {
            SharedVerdict::Paced { reason, in_ms } => {
                let blocked = Blocked { reason, until: self.clock.saturating_add(in_ms.max(0)) };
                let mut until = blocked.until;
                let mut started = None;
                if let (Some(p), Some(pacing)) = (self.paced.as_deref_mut(), pacing) {
                    if reason == crate::core::queue::QUEUED {
                        // Another lane's turn: only this provision waits (another lane of
                        // this process may be the one whose turn it is).
                        until = until.max(self.clock.saturating_add(crate::core::pacing::FLEET_RECHECK_MS));
                        p.turns.push((pool, until));
                    } else if let Some(id) = p.ids.get(pool) {
                        let limit = p.limits.get(pool).copied().flatten();
                        started = pacing.fleet_refused(id, limit, blocked, self.clock);
                        until = pacing.peek(id, limit, self.clock).err().map_or(until, |b| b.until);
                    }
                    p.until = Some(p.until.map_or(until, |u| u.min(until)));
                }
                if let Some(cooling_until) = started.filter(|_| self.observing()) {
                    // Another process's `Retry-After`: the pool cools down here from now on.
                    let e = Event::PoolCooldownStarted {
                        pool: self.id(pool),
                        retry_after_ms: cooling_until.saturating_sub(self.clock).max(0) as u64,
                        until: Time(cooling_until),
                    };
                    self.push(e);
                }
                if reason == RATE_LIMITED && self.observing() {
                    let e = Event::PoolRateLimited { pool: self.id(pool), retry_at: Time(until) };
                    self.push(e);
                }
                self.release_trial(health);
                self.skip(pool, SkipStatus::Exhausted, reason.to_string());
            }
            SharedVerdict::Admitted(token) => {
                if self.observing() {
                    self.push(Event::CapacityAdmitted { pool: self.id(pool) });
                }
                self.start_launch(Some(token));
            }
            SharedVerdict::Exhausted(resource) => {
                self.release_trial(health);
                self.skip(pool, SkipStatus::Exhausted, resource);
            }
            SharedVerdict::Unavailable => {
                self.release_trial(health);
                self.skip(pool, SkipStatus::Unknown, COORDINATOR_UNAVAILABLE.to_string());
            }
        }
    }

    /// The shared hold the machine settled since the last call: (token, allocated). The
    /// caller writes it to the coordinator; the rule that decided it is the in-process
    /// ledger's (`allocated` keeps it as an assumption, otherwise it is released).
    pub fn take_settlement(&mut self) -> Option<(u64, bool)> {
        self.settlement.take()
    }

    fn start_launch(&mut self, token: Option<u64>) {
        if let Some(t) = &mut self.tracking {
            t.started = t.now;
        }
        self.made += 1;
        self.phase = Phase::Launching(token);
        if let Some(p) = self.paced.as_deref_mut() {
            // The launch spends the token it took.
            p.held = None;
        }
        if self.observing() {
            self.events.push(Kept::Started(self.candidates[self.pos] as u32, self.made));
        }
    }

    /// The token the current candidate holds (its launch has not started) is given back to
    /// the router's pacing at the next step.
    fn give_back_token(&mut self) {
        if let Some(p) = self.paced.as_deref_mut() {
            if let Some(pos) = p.held.take() {
                p.refund = self.candidates.get(pos).copied();
            }
        }
    }

    fn skip(&mut self, pool: usize, status: SkipStatus, reason: String) {
        if self.observing() {
            let skip_reason = skip_reason(status, &reason);
            self.push(Event::CapacitySkipped {
                pool: self.id(pool),
                status: status.name(),
                paced: status == SkipStatus::Exhausted && is_paced(&reason),
                reason: reason.clone(),
                skip_reason,
            });
        }
        self.give_back_budget(pool);
        // A token taken for this candidate was not used: no launch follows the skip.
        self.give_back_token();
        self.skipped.push(Skip { pool, status, reason });
        self.advance();
        if self.pos >= self.candidates.len() {
            self.finish_without_room();
        }
    }

    /// Every candidate was used: the capacity outcome (or, with no candidate at all, a
    /// capacity outcome too: only capacity routing can run out of candidates unlaunched).
    fn finish_without_room(&mut self) {
        let refused = self.budget.as_ref().is_some_and(|b| !b.refusals.is_empty());
        let paced_only = !self.skipped.is_empty() && self.skipped.iter().all(|s| is_paced(&s.reason));
        let until = self.paced.as_ref().and_then(|p| p.until);
        let outcome = match (self.made, self.circuit_skipped, &self.capacity, self.attempts.last()) {
            // A budget refused a candidate and nothing was launched: the budget is the
            // limit the caller can act on (a capacity skip may also have happened).
            (0, _, _, _) if refused => Outcome::BudgetExhausted,
            // Pacing skipped every candidate nothing else did: retry when a token comes.
            (0, _, _, _) if paced_only => Outcome::RateLimited { until: until.unwrap_or(self.clock) },
            // Without capacity routing, the candidates after the last failed launch were
            // all paced or passed over by health.
            (_, _, None, Some(last)) => Outcome::Exhausted { pool: last.pool },
            // Health passed over every candidate it did not launch, and capacity none.
            (0, Some(pool), _, _) if self.skipped.is_empty() => Outcome::CircuitOpen { pool },
            (0, _, _, _) => Outcome::NoCapacity,
            _ => Outcome::ExhaustedByCapacity,
        };
        self.finish(outcome);
    }

    fn finish(&mut self, outcome: Outcome) {
        // Ending before the held candidate's launch started: its token is given back.
        self.give_back_token();
        if self.observing() {
            if let Some(code) = outcome.code() {
                self.push(Event::ProvisionExhausted { code: code.to_string(), summary: None, decision_id: None });
            }
        }
        self.outcome = Some(outcome);
        self.phase = Phase::Done;
    }

    /// The hold of the launch in flight, settled: `allocated` keeps it as an assumption
    /// until a read reflects it (or it expires); otherwise it is released.
    fn settle(&mut self, ledger: Option<&mut Ledger>, allocated: bool) -> Option<usize> {
        let Phase::Launching(token) = self.phase else { return None };
        if let Some(b) = &mut self.budget {
            if b.held.take().is_some() && !std::mem::take(&mut b.unrecorded) {
                // A success is told apart by `succeeded`; here, kept means "may exist".
                b.pending = Some(if allocated {
                    Settle::Unknown { until: b.at.saturating_add(b.plan.hold_ms) }
                } else {
                    if let Some(n) = &b.names {
                        let pool = self.candidates[self.pos];
                        let cost = b.plan.costs.get(pool).copied().unwrap_or(0.0);
                        let rules = Some(n.applying.clone());
                        let pool = self
                            .names
                            .as_ref()
                            .and_then(|ids| ids.get(pool).cloned())
                            .unwrap_or_else(|| PoolId::from(""));
                        self.events.push(Kept::of(Event::BudgetReleased {
                            pool,
                            reason: "PRE_ALLOCATION_FAILURE",
                            cost: Some(cost),
                            rules,
                        }));
                    }
                    Settle::Nothing
                });
            }
        }
        match (token, ledger) {
            (Some(t), Some(l)) => l.settle_owned(t, allocated, self.owner, self.clock),
            // A shared ledger's hold: the caller writes it (take_settlement).
            (Some(t), None) => self.settlement = Some((t, allocated)),
            (None, _) => {}
        }
        Some(self.candidates[self.pos])
    }

    /// Notes the health outcome of the launch just settled on `pool` (recorded by
    /// [`Acquisition::report_health`]).
    fn note(&mut self, pool: usize, what: impl FnOnce(i64) -> Pending) {
        if let Some(t) = &mut self.tracking {
            t.pending = Some((pool, what(t.now.saturating_sub(t.started))));
        }
    }

    /// Records the last settled launch's outcome in the router's health (call after each
    /// outcome report when tracked): statistics, the circuit's transition and its event.
    pub fn report_health(&mut self, health: &mut Health) {
        let Some(t) = &mut self.tracking else { return };
        let Some((pool, pending)) = t.pending.take() else { return };
        let slot = t.slots[pool];
        let trial = std::mem::take(&mut t.trial);
        match pending {
            Pending::Release => {
                if trial {
                    health.release(slot);
                }
            }
            Pending::Record(outcome) => {
                if let Some(transition) = health.record(slot, outcome, t.now, trial) {
                    if self.observing() {
                        let e = self.circuit_event(pool, transition);
                        self.push(e);
                    }
                }
            }
        }
    }

    /// The acquisition is being forgotten: a trial token still held (a launch or read whose
    /// outcome was never reported) is freed.
    pub fn abandon(&mut self, health: &mut Health) {
        if let Some(t) = &mut self.tracking {
            if t.trial && matches!(self.phase, Phase::Admitting(_) | Phase::Launching(_)) {
                health.release(t.slots[self.candidates[self.pos]]);
                t.trial = false;
            }
        }
    }

    /// Moves to the next candidate (which has not been offered as a claim yet).
    fn advance(&mut self) {
        self.pos += 1;
        self.phase = Phase::Next;
        self.claim_tried = false;
    }

    /// The claim offered ([`Step::Claim`]) took a member: the acquisition is over.
    pub fn claimed(&mut self) {
        let Phase::Claiming = self.phase else { return };
        if let Some(b) = &mut self.budget {
            // The claimed member is the provision's sandbox: its charge is kept, as a success's.
            if b.held.take().is_some() && !std::mem::take(&mut b.unrecorded) {
                b.pending = Some(Settle::Allocated);
            }
        }
        self.outcome = Some(Outcome::Claimed(self.candidates[self.pos]));
        self.phase = Phase::Done;
    }

    /// The claim offered found no member for `reason` (or the member was gone): the same
    /// candidate is launched cold next, as without a warm pool.
    pub fn claim_missed(&mut self, reason: MissReason) {
        let Phase::Claiming = self.phase else { return };
        if self.observing() {
            self.push(Event::WarmMiss { pool: self.id(self.candidates[self.pos]), reason: reason.code() });
        }
        self.phase = Phase::Next;
    }

    /// The launch returned a handle with a provider id.
    pub fn succeeded(&mut self, ledger: Option<&mut Ledger>) {
        let Some(pool) = self.settle(ledger, true) else { return };
        if let Some(b) = &mut self.budget {
            if b.pending.is_some() {
                b.pending = Some(Settle::Allocated);
            }
        }
        self.note(pool, |ms| Pending::Record(LaunchOutcome::Succeeded { latency_ms: ms as f64 }));
        if self.observing() {
            self.events.push(Kept::Succeeded(pool as u32, self.made));
        }
        self.outcome = Some(Outcome::Succeeded(pool));
        self.phase = Phase::Done;
    }

    /// The launch failed; `code` and `retryable` are what the caller's classifier answered
    /// (None: no classifier, or it threw, timed out or answered something else). Decides:
    /// advance to the next candidate, terminal, or exhausted.
    pub fn failed(&mut self, ledger: Option<&mut Ledger>, code: Option<&str>, retryable: Option<bool>) {
        let c = sanitize(code, retryable);
        // Only a classified pre-allocation failure proves that nothing was allocated.
        let allocated_nothing = c.retryable;
        let Some(pool) = self.settle(ledger, !allocated_nothing) else { return };
        let classified = c.code != UNKNOWN_CODE;
        let outcome = LaunchOutcome::of_failure(&c.code, classified, c.retryable);
        self.note(pool, |_| Pending::Record(outcome));
        let remaining = self.candidates.len() - self.pos - 1;
        let next = after_failure(
            &c,
            self.fallback_allowed,
            self.made as usize,
            self.max_attempts,
            self.made as usize + remaining,
        );
        let retryable = next != Next::Terminal;
        self.record_failure(pool, &c.code, retryable);
        match next {
            Next::Advance(_) => {
                self.advance();
                if self.observing() {
                    let to = self.id(self.next_launch_candidate());
                    self.push(Event::FallbackAdvanced { from: self.id(pool), to, attempt: self.made + 1 });
                }
            }
            Next::Terminal => self.finish(Outcome::Terminal { pool, code: c.code }),
            Next::Exhausted => self.finish(Outcome::Exhausted { pool }),
        }
    }

    /// The candidate a fallback moves to (the next in order; under capacity routing it may
    /// still be skipped for capacity, as events will then say).
    fn next_launch_candidate(&self) -> usize {
        self.candidates[self.pos]
    }

    fn record_failure(&mut self, pool: usize, code: &str, retryable: bool) {
        if self.observing() {
            self.push(Event::AttemptFailed {
                pool: self.id(pool),
                attempt: self.made,
                code: code.to_string(),
                retryable,
            });
        }
        self.attempts.push(Attempt { pool, code: code.to_string(), retryable });
    }

    /// The launch resolved to something that is not a handle: the sandbox may exist.
    pub fn malformed(&mut self, ledger: Option<&mut Ledger>) {
        let Some(pool) = self.settle(ledger, true) else { return };
        self.note(pool, |_| Pending::Record(LaunchOutcome::Malformed));
        self.record_failure(pool, MALFORMED_HANDLE, false);
        self.finish(Outcome::Terminal { pool, code: MALFORMED_HANDLE.to_string() });
    }

    /// The launch did not settle within its deadline: outcome unknown, no fallback.
    pub fn timed_out(&mut self, ledger: Option<&mut Ledger>) {
        let Some(pool) = self.settle(ledger, true) else { return };
        self.note(pool, |_| Pending::Record(LaunchOutcome::TimedOut));
        self.record_failure(pool, ACQUISITION_TIMEOUT, false);
        self.finish(Outcome::TimedOut { pool });
    }

    /// The runtime threw the router's own missing-package error (`code`): nothing was
    /// called, so nothing was allocated; the provision ends with that error.
    pub fn package_failed(&mut self, ledger: Option<&mut Ledger>, code: &str) {
        let Some(pool) = self.settle(ledger, false) else { return };
        self.note(pool, |_| Pending::Release);
        self.record_failure(pool, code, false);
        self.finish(Outcome::PackageFailed { pool, code: code.to_string() });
    }

    /// Reserves `pool`'s cost in the in-process budget ledger for the candidate at `pos`;
    /// false when it does not fit (the candidate is then skipped).
    fn reserve_in(&mut self, ledger: &mut budget::Ledger, pool: usize, now: i64) -> Result<(), Vec<Refusal>> {
        let Some(b) = &mut self.budget else { return Ok(()) };
        let cost = b.plan.costs.get(pool).copied().unwrap_or(0.0);
        let budget::Applying::Local(buckets) = &b.plan.applying else { return Ok(()) };
        b.slot = ledger.reserve_in(b.plan.sandbox, buckets, cost, now)?;
        b.held = Some(self.pos);
        b.at = now;
        if let Some(n) = &b.names {
            let rules = n.applying.clone();
            let pool = self.names.as_ref().and_then(|ids| ids.get(pool).cloned()).unwrap_or_else(|| PoolId::from(""));
            self.push(Event::BudgetReserved { pool, cost, rules });
        }
        Ok(())
    }

    fn refuse_budget(&mut self, pool: usize, refusals: Vec<Refusal>) {
        let Some(b) = &mut self.budget else { return };
        if let (Some(n), Some(r)) = (&b.names, refusals.first()) {
            let id = self.names.as_ref().and_then(|ids| ids.get(pool).cloned()).unwrap_or_else(|| PoolId::from(""));
            let event = Event::BudgetRefused {
                pool: id,
                reason: budget::BUDGET_EXCEEDED,
                rule: b.plan.rule_ids.get(r.rule).cloned().unwrap_or_default(),
                key: KeyFact { label: n.labels.get(r.rule).cloned().unwrap_or_default(), value: r.value.clone() },
                dimension: r.dimension.name(),
                limit: r.limit,
                used: r.used,
                reserved: r.reserved,
                resets_at: Nullable(r.resets_at.map(Time)),
                retryable: r.retryable,
            };
            self.events.push(Kept::of(event));
        }
        b.refusals.push((pool, refusals));
        // Recorded as a skip (rejections list it), without a capacity.skipped event.
        self.skipped.push(Skip { pool, status: SkipStatus::Exhausted, reason: budget::BUDGET_EXCEEDED.to_string() });
        self.pos += 1;
        self.phase = Phase::Next;
        if self.pos >= self.candidates.len() {
            self.finish_without_room();
        }
    }

    /// The reservation of the candidate at `pos`, if held, is to be given back: it will
    /// not be launched.
    fn give_back_budget(&mut self, pool: usize) {
        let Some(b) = &mut self.budget else { return };
        if b.held == Some(self.pos) {
            b.held = None;
            if std::mem::take(&mut b.unrecorded) {
                return;
            }
            b.pending = Some(Settle::Nothing);
            if let Some(n) = &b.names {
                let cost = b.plan.costs.get(pool).copied().unwrap_or(0.0);
                let rules = Some(n.applying.clone());
                let pool =
                    self.names.as_ref().and_then(|ids| ids.get(pool).cloned()).unwrap_or_else(|| PoolId::from(""));
                self.push(Event::BudgetReleased { pool, reason: "NOT_LAUNCHED", cost: Some(cost), rules });
            }
        }
    }

    /// The budget settlement the machine decided since the last call, for the caller to
    /// apply: to the router's in-process ledger (the glue does after each report), or to
    /// the shared one (written by JavaScript).
    pub fn take_budget_settle(&mut self) -> Option<Settle> {
        self.budget.as_mut().and_then(|b| b.pending.take())
    }

    /// Applies the budget settlement the machine decided since the last call to the
    /// router's in-process `ledger`; true when there was one.
    pub fn settle_budget_in(&mut self, ledger: &mut budget::Ledger) -> bool {
        let Some(b) = &mut self.budget else { return false };
        let Some(how) = b.pending.take() else { return false };
        ledger.settle_in(b.slot, b.plan.sandbox, how);
        true
    }

    /// Under a shared budget ledger, its answer for the current candidate
    /// ([`Step::Reserve`]): reserved (the next step reads or launches it), refused (it is
    /// skipped), or unavailable (the acquisition ends, unless every rule admits then).
    pub fn reserved_shared(&mut self, verdict: budget::SharedVerdict, now: i64, health: Option<&mut Health>) {
        if self.phase != Phase::Reserving {
            return;
        }
        let pool = self.candidates[self.pos];
        self.phase = Phase::Next;
        let Some(b) = &mut self.budget else { return };
        match verdict {
            budget::SharedVerdict::Reserved => {
                b.held = Some(self.pos);
                b.at = now;
                if let Some(n) = &b.names {
                    let cost = b.plan.costs.get(pool).copied().unwrap_or(0.0);
                    let rules = n.applying.clone();
                    let pool =
                        self.names.as_ref().and_then(|ids| ids.get(pool).cloned()).unwrap_or_else(|| PoolId::from(""));
                    self.push(Event::BudgetReserved { pool, cost, rules });
                }
            }
            // Admitted unreserved: nothing to settle later.
            budget::SharedVerdict::Unavailable(Ok(())) => {
                b.held = Some(self.pos);
                b.unrecorded = true;
            }
            budget::SharedVerdict::Unavailable(Err(rule)) => {
                b.unavailable = Some(rule);
                self.release_trial(health);
                self.finish(Outcome::BudgetUnavailable { rule });
            }
            budget::SharedVerdict::Refused(refusals) => {
                self.release_trial(health);
                self.refuse_budget(pool, refusals);
            }
        }
    }

    /// Every budget refusal, by candidate: (pool, the rules that refused it).
    pub fn budget_refusals(&self) -> &[(usize, Vec<Refusal>)] {
        self.budget.as_ref().map_or(&[], |b| b.refusals.as_slice())
    }

    /// The budget plan (None without budgets).
    pub fn budget_plan(&self) -> Option<&budget::Plan> {
        self.budget.as_ref().map(|b| &b.plan)
    }

    /// How the acquisition ended (None while it runs).
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// Failed attempts so far, in order.
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// Candidates skipped for capacity, in order.
    pub fn skipped(&self) -> &[Skip] {
        &self.skipped
    }

    /// The candidates, best first (pool indices).
    pub fn candidates(&self) -> &[usize] {
        &self.candidates
    }

    /// Launches made so far.
    pub fn launches(&self) -> u32 {
        self.made
    }

    /// Events decided since the last call, in order.
    pub fn take_events(&mut self) -> Vec<Event> {
        let kept = std::mem::take(&mut self.events);
        let ids = self.names.as_deref().unwrap_or_default();
        kept.into_iter().map(|k| k.into_event(ids)).collect()
    }

    /// The events decided since the last call, as kept, taken (the list and its room).
    pub fn take_kept(&mut self) -> Vec<Kept> {
        std::mem::take(&mut self.events)
    }

    /// The candidates, taken (an ended acquisition's, for its record).
    pub fn take_candidates(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.candidates)
    }

    /// The events decided since the last [`Acquisition::take_events`], as kept.
    pub fn kept(&self) -> &[Kept] {
        &self.events
    }

    /// The request's resource needs, under capacity routing (else none).
    pub fn need(&self) -> Resources {
        self.capacity.as_ref().map(|c| c.need).unwrap_or_default()
    }

    /// Whether it holds writes for a shared ledger: a hold settlement, or a budget
    /// settlement the router has not applied to its own ledger.
    pub fn has_writes(&self) -> bool {
        self.settlement.is_some() || self.budget.as_ref().is_some_and(|b| b.pending.is_some())
    }

    /// Whether events were decided since the last [`Acquisition::take_events`].
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::capacity::{ResourceMeasurement, UnknownReason};

    fn names(n: usize) -> Option<Rc<[PoolId]>> {
        Some((0..n).map(|i| PoolId::from(format!("p{i}").as_str())).collect())
    }

    fn slots(used: f64, limit: f64) -> Measurement {
        Measurement::Known(vec![ResourceMeasurement::new("sandboxes", used, limit, "sandboxes", 1.0)])
    }

    fn capacity(readers: usize) -> Option<CapacityPlan> {
        Some(CapacityPlan {
            need: Resources::default(),
            readers: vec![true; readers],
            ledger_pools: (0..readers).collect(),
        })
    }

    #[test]
    fn success_on_the_first_candidate_records_no_failure() {
        let mut a = Acquisition::new(vec![2, 0], 3, true, None, None);
        assert_eq!(a.next(None), Step::Launch(2));
        a.succeeded(None);
        assert_eq!(a.next(None), Step::Done);
        assert_eq!(a.outcome(), Some(&Outcome::Succeeded(2)));
        assert!(a.attempts().is_empty() && !a.has_events());
    }

    #[test]
    fn must_fire_a_retryable_classified_failure_advances() {
        let mut a = Acquisition::new(vec![0, 1], 3, true, None, names(4));
        a.next(None);
        a.failed(None, Some("PRE_ALLOC"), Some(true));
        assert_eq!(a.next(None), Step::Launch(1));
        let events = a.take_events();
        assert!(
            events.contains(&Event::FallbackAdvanced { from: "p0".into(), to: "p1".into(), attempt: 2 }),
            "{events:?}"
        );
    }

    #[test]
    fn kept_steps_must_fire_naming_each_pool_by_its_index_when_events_are_recorded() {
        // Candidates in rank order 2, 0: the steps name the pool launched, not the position.
        let mut a = Acquisition::new(vec![2, 0], 3, true, None, names(4));
        assert_eq!(a.next(None), Step::Launch(2));
        a.succeeded(None);
        a.persisted(2);
        assert_eq!(a.kept(), &[Kept::Started(2, 1), Kept::Succeeded(2, 1), Kept::Persisted(2)]);
        assert_eq!(
            a.take_events(),
            [
                Event::AttemptStarted { pool: "p2".into(), attempt: 1 },
                Event::AttemptSucceeded { pool: "p2".into(), attempt: 1 },
                Event::MappingPersisted { pool: "p2".into() },
            ]
        );
    }

    #[test]
    fn kept_steps_must_not_fire_when_nobody_records_events() {
        let mut a = Acquisition::new(vec![2, 0], 3, true, None, None);
        assert_eq!(a.next(None), Step::Launch(2));
        a.succeeded(None);
        a.persisted(2);
        assert!(!a.has_events() && a.take_events().is_empty());
    }

    #[test]
    fn must_not_fire_an_unclassified_failure_is_terminal_and_outcome_unknown() {
        let mut a = Acquisition::new(vec![0, 1], 3, true, None, names(4));
        a.next(None);
        a.failed(None, None, None);
        assert_eq!(a.next(None), Step::Done);
        assert_eq!(a.outcome(), Some(&Outcome::Terminal { pool: 0, code: OUTCOME_UNKNOWN.into() }));
        assert_eq!(a.attempts(), &[Attempt { pool: 0, code: OUTCOME_UNKNOWN.into(), retryable: false }]);
    }

    #[test]
    fn retryable_failures_exhaust_at_the_attempt_bound() {
        let mut a = Acquisition::new(vec![0, 1, 2], 2, true, None, None);
        a.next(None);
        a.failed(None, Some("X"), Some(true));
        a.next(None);
        a.failed(None, Some("X"), Some(true));
        assert_eq!(a.outcome(), Some(&Outcome::Exhausted { pool: 1 }));
        assert_eq!(a.outcome().unwrap().code(), Some(ACQUISITION_EXHAUSTED));
    }

    #[test]
    fn must_fire_capacity_skips_consume_no_attempt_and_end_in_no_capacity() {
        let mut ledger = Ledger::new(60_000);
        let mut a = Acquisition::new(vec![0, 1], 1, true, capacity(2), names(4));
        assert_eq!(a.next(Some(&mut ledger)), Step::Admit(0));
        a.admit(&mut ledger, &slots(5.0, 5.0));
        assert_eq!(a.next(Some(&mut ledger)), Step::Admit(1));
        a.admit(&mut ledger, &Measurement::Unknown(UnknownReason::Timeout));
        assert_eq!(a.next(Some(&mut ledger)), Step::Done);
        assert_eq!(a.outcome(), Some(&Outcome::NoCapacity));
        assert_eq!(a.launches(), 0);
        assert_eq!(a.skipped().len(), 2);
    }

    fn paced(a: &mut Acquisition, limits: &[Option<RateLimit>]) {
        let ids: Rc<[PoolId]> = (0..limits.len()).map(|i| PoolId::from(format!("p{i}").as_str())).collect();
        a.pace(limits.iter().copied().collect(), ids);
    }

    const ONE: Option<RateLimit> = Some(RateLimit { launches_per_second: 1.0, burst: 1 });

    /// A machine over pools p0 and p1 (both limited to `ONE`), at clock 1,000.
    fn two_paced(attempts: usize) -> Acquisition {
        let mut a = Acquisition::new(vec![0, 1], attempts, true, None, names(2));
        paced(&mut a, &[ONE, ONE]);
        a.set_clock(1_000);
        a
    }

    #[test]
    fn must_fire_a_pool_without_a_token_is_skipped_without_an_attempt_must_not_one_with_a_token() {
        let mut pacing = Pacing::default();
        pacing.take("p0", ONE, 1_000).unwrap();
        // p0 has no token until 2,000; p1 has one: one attempt allowed, and p1 gets it.
        let mut a = two_paced(1);
        assert_eq!(a.next_paced(None, None, None, Some(&mut pacing)), Step::Launch(1));
        assert_eq!(a.skipped(), &[Skip { pool: 0, status: SkipStatus::Exhausted, reason: RATE_LIMITED.into() }]);
        let events = a.take_events();
        assert!(events.contains(&Event::PoolRateLimited { pool: "p0".into(), retry_at: Time(2_000) }), "{events:?}");
        a.succeeded(None);
        assert_eq!(a.outcome(), Some(&Outcome::Succeeded(1)));
        // p1's token was spent by its launch.
        assert!(pacing.peek("p1", ONE, 1_000).is_err());
    }

    #[test]
    fn must_fire_every_pool_paced_ends_rate_limited_with_the_first_token_time_must_not_a_failed_launch() {
        let mut pacing = Pacing::default();
        pacing.take("p0", ONE, 1_000).unwrap();
        pacing.cool("p1", ONE, 300, 1_000);
        let mut a = two_paced(3);
        assert_eq!(a.next_paced(None, None, None, Some(&mut pacing)), Step::Done);
        assert_eq!(a.outcome(), Some(&Outcome::RateLimited { until: 1_300 }));
        assert_eq!(a.outcome().unwrap().code(), Some(RATE_LIMITED_CODE));
        assert_eq!(a.skipped()[1].reason, COOLING_DOWN);
        // A launch that failed retryably, then only paced pools: attempts ran out, not pacing.
        let mut pacing = Pacing::default();
        pacing.take("p1", ONE, 1_000).unwrap();
        let mut a = two_paced(3);
        assert_eq!(a.next_paced(None, None, None, Some(&mut pacing)), Step::Launch(0));
        a.failed(None, Some("PRE"), Some(true));
        assert_eq!(a.next_paced(None, None, None, Some(&mut pacing)), Step::Done);
        assert_eq!(a.outcome(), Some(&Outcome::Exhausted { pool: 0 }));
    }

    #[test]
    fn must_fire_a_token_taken_for_a_capacity_skip_is_given_back_must_not_for_a_launch() {
        let mut ledger = Ledger::new(60_000);
        let mut pacing = Pacing::default();
        let mut a = Acquisition::new(vec![0, 1], 1, true, capacity(2), names(2));
        paced(&mut a, &[ONE, ONE]);
        a.set_clock(0);
        assert_eq!(a.next_paced(Some(&mut ledger), None, None, Some(&mut pacing)), Step::Admit(0));
        a.admit(&mut ledger, &slots(5.0, 5.0));
        assert_eq!(a.next_paced(Some(&mut ledger), None, None, Some(&mut pacing)), Step::Admit(1));
        assert!(pacing.peek("p0", ONE, 0).is_ok(), "p0 was full: its token is back");
        a.admit(&mut ledger, &slots(0.0, 5.0));
        assert_eq!(a.next_paced(Some(&mut ledger), None, None, Some(&mut pacing)), Step::Launch(1));
        a.succeeded(Some(&mut ledger));
        assert_eq!(a.next_paced(Some(&mut ledger), None, None, Some(&mut pacing)), Step::Done);
        assert!(pacing.peek("p1", ONE, 0).is_err(), "p1 launched: its token is spent");
    }

    #[test]
    fn must_not_fire_an_unpaced_acquisition_leaves_pacing_alone() {
        let mut pacing = Pacing::default();
        pacing.take("p0", ONE, 0).unwrap();
        // Not paced (no pool declares a limit, nothing cools): the pacing state is not read.
        let mut a = Acquisition::new(vec![0], 1, true, None, names(1));
        assert_eq!(a.next_paced(None, None, None, Some(&mut pacing)), Step::Launch(0));
        // Paced, without a limit on p0: it launches and takes nothing.
        let mut b = Acquisition::new(vec![0], 1, true, None, names(1));
        paced(&mut b, &[None]);
        let mut fresh = Pacing::default();
        assert_eq!(b.next_paced(None, None, None, Some(&mut fresh)), Step::Launch(0));
        assert!(fresh.is_empty());
    }

    #[test]
    fn must_not_fire_a_pool_with_room_is_admitted_and_its_hold_kept_on_success() {
        let mut ledger = Ledger::new(60_000);
        let mut a = Acquisition::new(vec![0], 1, true, capacity(1), None);
        a.next(Some(&mut ledger));
        a.admit(&mut ledger, &slots(0.0, 1.0));
        assert_eq!(a.next(Some(&mut ledger)), Step::Launch(0));
        a.succeeded(Some(&mut ledger));
        assert_eq!(ledger.held_for(0, "sandboxes"), 1.0, "a success is assumed until a read reflects it");
    }

    #[test]
    fn holds_are_released_only_for_proven_pre_allocation_failures() {
        for (code, retryable, held) in
            [(Some("PRE"), Some(true), 0.0), (None, None, 1.0), (Some("Q"), Some(false), 1.0)]
        {
            let mut ledger = Ledger::new(60_000);
            let mut a = Acquisition::new(vec![0, 1], 3, true, capacity(2), None);
            a.next(Some(&mut ledger));
            a.admit(&mut ledger, &slots(0.0, 1.0));
            a.next(Some(&mut ledger));
            a.failed(Some(&mut ledger), code, retryable);
            assert_eq!(ledger.held_for(0, "sandboxes"), held, "{code:?} {retryable:?}");
        }
    }

    #[test]
    fn a_pool_without_a_reader_is_skipped_without_a_read() {
        let plan = CapacityPlan { need: Resources::default(), readers: vec![false, true], ledger_pools: vec![0, 1] };
        let mut a = Acquisition::new(vec![0, 1], 1, true, Some(plan), None);
        let mut ledger = Ledger::new(60_000);
        assert_eq!(a.next(Some(&mut ledger)), Step::Admit(1));
        assert_eq!(a.skipped()[0].reason, "NO_CAPACITY_READER");
    }

    #[test]
    fn shared_admission_launches_and_its_success_is_settled_as_allocated_must_fire() {
        let mut a = Acquisition::new(vec![0], 1, true, capacity(1), None);
        assert_eq!(a.next(None), Step::Admit(0));
        let dims = a.shared_demand(&slots(3.0, 10.0), None).expect("known measurement");
        assert_eq!(dims, vec![Dim { resource: "sandboxes".into(), used: 3.0, limit: 10.0, need: 1.0 }]);
        a.admit_shared(SharedVerdict::Admitted(42), None, None);
        assert_eq!(a.next(None), Step::Launch(0));
        assert_eq!(a.take_settlement(), None);
        a.succeeded(None);
        assert_eq!(a.take_settlement(), Some((42, true)));
        assert_eq!(a.take_settlement(), None);
    }

    #[test]
    fn shared_hold_of_a_proven_pre_allocation_failure_is_released_must_not_keep() {
        let mut a = Acquisition::new(vec![0, 1], 2, true, capacity(2), None);
        a.next(None);
        a.shared_demand(&slots(0.0, 1.0), None);
        a.admit_shared(SharedVerdict::Admitted(7), None, None);
        a.next(None);
        a.failed(None, Some("QUOTA"), Some(true));
        assert_eq!(a.take_settlement(), Some((7, false)));
    }

    #[test]
    fn shared_unavailable_coordinator_is_an_unknown_skip_and_an_unknown_measurement_skips_without_asking() {
        let mut a = Acquisition::new(vec![0, 1], 2, true, capacity(2), None);
        a.next(None);
        a.shared_demand(&slots(0.0, 1.0), None);
        a.admit_shared(SharedVerdict::Unavailable, None, None);
        assert_eq!(a.next(None), Step::Admit(1));
        assert_eq!(a.shared_demand(&Measurement::Unknown(UnknownReason::Timeout), None), None);
        assert_eq!(a.next(None), Step::Done);
        assert_eq!(a.outcome(), Some(&Outcome::NoCapacity));
        let reasons: Vec<&str> = a.skipped().iter().map(|s| s.reason.as_str()).collect();
        assert_eq!(reasons, vec![COORDINATOR_UNAVAILABLE, "TIMEOUT"]);
        assert_eq!(a.take_settlement(), None);
    }

    #[test]
    fn must_fire_a_warm_candidate_is_offered_as_a_claim_before_its_launch() {
        let mut a = Acquisition::new(vec![1, 0], 3, true, None, names(4));
        a.offer_claims(Rc::from(vec![false, true]));
        assert_eq!(a.next(None), Step::Claim(1));
        assert_eq!(a.next(None), Step::Claim(1), "the claim is in flight until reported");
        a.claimed();
        assert_eq!(a.next(None), Step::Done);
        assert_eq!(a.outcome(), Some(&Outcome::Claimed(1)));
        assert_eq!(a.outcome().and_then(Outcome::code), None);
        assert_eq!(a.launches(), 0, "a claim is no launch");
        assert!(a.take_events().is_empty());
    }

    #[test]
    fn must_not_fire_a_candidate_without_a_warm_pool_is_launched_cold() {
        let mut a = Acquisition::new(vec![0, 1], 3, true, None, None);
        a.offer_claims(Rc::from(vec![false, true]));
        assert_eq!(a.next(None), Step::Launch(0));
        let mut b = Acquisition::new(vec![1], 3, true, None, None);
        assert_eq!(b.next(None), Step::Launch(1), "no claims offered: as before warm pools");
    }

    #[test]
    fn a_claim_miss_launches_the_same_candidate_cold_and_a_fallback_offers_the_next_claim() {
        let mut a = Acquisition::new(vec![0, 1], 3, true, None, names(4));
        a.offer_claims(Rc::from(vec![true, true]));
        assert_eq!(a.next(None), Step::Claim(0));
        a.claim_missed(MissReason::Empty);
        assert_eq!(a.next(None), Step::Launch(0));
        a.failed(None, Some("PRE"), Some(true));
        assert_eq!(a.next(None), Step::Claim(1), "the next candidate of the spillover list");
        a.claim_missed(MissReason::LaunchEnv);
        assert_eq!(a.next(None), Step::Launch(1));
        a.succeeded(None);
        assert_eq!(a.outcome(), Some(&Outcome::Succeeded(1)));
        let misses: Vec<Event> = a.take_events().into_iter().filter(|e| matches!(e, Event::WarmMiss { .. })).collect();
        assert_eq!(
            misses,
            vec![
                Event::WarmMiss { pool: "p0".into(), reason: "EMPTY" },
                Event::WarmMiss { pool: "p1".into(), reason: MissReason::LaunchEnv.code() }
            ]
        );
    }

    #[test]
    fn under_capacity_routing_a_claim_needs_no_admission() {
        let mut ledger = Ledger::new(60_000);
        let mut a = Acquisition::new(vec![0], 1, true, capacity(1), None);
        a.offer_claims(Rc::from(vec![true]));
        assert_eq!(a.next(Some(&mut ledger)), Step::Claim(0));
        a.claim_missed(MissReason::Empty);
        assert_eq!(a.next(Some(&mut ledger)), Step::Admit(0), "the cold launch is admitted as before");
    }

    #[test]
    fn shared_exhausted_verdict_skips_the_pool() {
        let mut a = Acquisition::new(vec![0], 1, true, capacity(1), None);
        a.next(None);
        a.shared_demand(&slots(0.0, 1.0), None);
        a.admit_shared(SharedVerdict::Exhausted("sandboxes".into()), None, None);
        assert_eq!(a.next(None), Step::Done);
        assert_eq!(a.skipped()[0].status, SkipStatus::Exhausted);
    }
}
