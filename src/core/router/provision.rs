//! The router's jobs: provisions and warm refills in flight, each an acquisition machine
//! (`core::acquisition`) with what the router keeps beside it, and the steps the router
//! answers for them.
//!
//! A job lives exactly as long as its provision: it is begun by [`Router::begin`] (or a
//! refill's begin), stepped by the reports of what JavaScript performed, and ended once,
//! when the provision has settled ([`Router::end`]); while it lives, `reconcile` sees its
//! sandbox id as in flight.

use super::budgets::refusal_fields;
use super::pools::{Extras, Pools, Question};
use super::{Now, Router};
use crate::core::acquisition::{
    settle_window_ms, Acquisition, BudgetNames, CapacityPlan, Outcome, SharedVerdict, Step,
};
use crate::core::budget::{self, Refusal, Settle, SharedKey};
use crate::core::capacity::Measurement;
use crate::core::error::{AttemptFact, ErrorClass, Failure, Fault, PoolRejection, Rejected, SkipFact};
use crate::core::events::{Emitted, ReasonFact};
use crate::core::failure::{failure_of, Rejections};
use crate::core::ids::SandboxKey;
use crate::core::mapping::{CreatedAt, Mapping};
use crate::core::request::Request;
use crate::core::shared_ledger::Dim;
use crate::core::telemetry::ProvisionOutcome;
use crate::core::warm::{Member, MissReason};
use rustc_hash::FxHashSet;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// What the caller must do next for a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// Launch on the pool, then report the outcome.
    Launch = 0,
    /// Read that pool's capacity, then report it.
    Admit = 1,
    /// Over: [`Router::failure`] says how, unless it succeeded.
    Done = 2,
    /// Reserve that pool's cost in the shared budget ledger, then report it.
    Reserve = 3,
    /// Ask the fleet's inventory (PostgreSQL) for a member of the pool, then report it.
    Claim = 4,
    /// A member of the pool was taken from this process's inventory; confirm it or report it lost.
    Claimed = 5,
}

/// What a job carries for warm pools, beside its machine.
pub(crate) enum WarmRole {
    /// A provision that may claim: its request (the claim's rule reads it), and the member
    /// it took or the floor it asks the fleet's inventory with.
    Claimer { request: Rc<Request>, member: Option<Member>, floor: Option<i64> },
    /// A refill of the pool at this registry index.
    Refill { pool: usize },
}

/// One job in flight.
pub(crate) struct Job {
    /// The provision's sandbox id, stamped on its launches and named by its record.
    pub(crate) id: SandboxKey,
    pub(crate) machine: Acquisition,
    /// The registry it routed on.
    pub(crate) pools: Rc<RefCell<Pools>>,
    /// The request's caller labels (validated), for the mapping record.
    pub(crate) labels: Arc<Vec<(String, String)>>,
    /// The pool of the last launch, admission or claim step.
    pub(crate) pool: usize,
    pub(crate) timeout_ms: u64,
    pub(crate) detached: bool,
    /// Warm pools: none unless they are started and the registry keeps one.
    pub(crate) warm: Option<Box<WarmRole>>,
}

impl Job {
    pub(crate) fn pool_id(&self, pool: usize) -> String {
        self.pools.borrow().pool_id(pool).to_string()
    }
}

/// Jobs in flight, by key; `ids` indexes their sandbox ids (`reconcile` asks whether a
/// stamped sandbox without a record is still being made).
#[derive(Default)]
pub(crate) struct Jobs {
    items: Vec<Option<Job>>,
    free: Vec<u32>,
    ids: FxHashSet<SandboxKey>,
}

impl Jobs {
    pub(crate) fn insert(&mut self, job: Job) -> u32 {
        self.ids.insert(job.id);
        match self.free.pop() {
            Some(k) => {
                self.items[k as usize] = Some(job);
                k
            }
            None => {
                self.items.push(Some(job));
                (self.items.len() - 1) as u32
            }
        }
    }

    pub(crate) fn get_mut(&mut self, key: u32) -> Result<&mut Job, Failure> {
        self.items
            .get_mut(key as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| Fault::internal("(an unknown job key)"))
    }

    fn remove(&mut self, key: u32) -> Option<Job> {
        let job = self.items.get_mut(key as usize).and_then(Option::take)?;
        self.ids.remove(&job.id);
        self.free.push(key);
        Some(job)
    }

    pub(crate) fn ids(&self) -> Vec<SandboxKey> {
        self.ids.iter().copied().collect()
    }

    pub(crate) fn has(&self, id: SandboxKey) -> bool {
        self.ids.contains(&id)
    }

    pub(crate) fn len(&self) -> usize {
        self.items.iter().filter(|j| j.is_some()).count()
    }
}

/// What to ask a shared coordinator for one admission.
#[derive(Debug, Clone)]
pub struct Demand {
    /// The pool's id.
    pub provider_id: String,
    /// The dimensions to decide on.
    pub dims: Vec<Dim>,
    /// How long the hold may stay unsettled, ms (the launch's settle window).
    pub hold_ms: u64,
    /// The provision's sandbox id.
    pub sandbox: SandboxKey,
}

/// What to ask a shared budget ledger for one reservation.
#[derive(Debug, Clone)]
pub struct BudgetAsk {
    /// The provision's sandbox id (its charges are kept under it).
    pub sandbox: SandboxKey,
    /// The pool's cost.
    pub cost: f64,
    /// How long the reservation may stay unsettled, ms.
    pub hold_ms: u64,
    /// The router's clock at the reservation (ms).
    pub at: i64,
    /// Every applying rule.
    pub keys: Vec<SharedKey>,
}

/// What is left after a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Success {
    /// The record is written and the job ended: the provision has settled.
    Settled = 0,
    /// The record is written; the job's events or hold settlement are still to be read.
    Recorded = 1,
    /// The caller's store must be written.
    Unrecorded = 2,
}

/// How a job failed: the error to raise and what the caller does about it.
#[derive(Debug, Clone)]
pub struct Ending {
    /// The typed error.
    pub error: Failure,
    /// Whether a sandbox may exist now (the launch intent then becomes `failed`).
    pub may_exist: bool,
    /// The runtime threw the router's own package error: rethrow that error as it is.
    pub package: bool,
    /// How the provision ended, as telemetry names it.
    pub outcome: ProvisionOutcome,
}

/// A launch intent record.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentFact {
    /// `sbx_…`.
    pub id: String,
    /// The pool of the current attempt.
    pub provider_id: String,
    /// `launching` or `failed`.
    pub state: &'static str,
    /// Epoch ms (wall clock).
    pub started_at: i64,
    /// Epoch ms after which the provision has certainly ended.
    pub expires_at: i64,
    /// The writer's host.
    pub owner_host: String,
    /// The writer's pid.
    pub owner_pid: f64,
    /// The writer's session.
    pub owner_session: String,
}

/// Writes a mapping of the default store.
pub(crate) fn write_record(
    store: &RefCell<crate::core::mapping::MappingStore>,
    id: SandboxKey,
    provider_id: &str,
    provider_sandbox_id: &str,
    labels: Arc<Vec<(String, String)>>,
    fleet: Arc<str>,
    detached: bool,
    wall: i64,
) {
    let mut store = store.borrow_mut();
    let provider_id = store.intern(provider_id);
    store.put(Mapping {
        id,
        provider_id,
        provider_sandbox_id: provider_sandbox_id.into(),
        labels,
        stamped: true,
        fleet: Some(fleet),
        created_at: CreatedAt::Millis(wall),
        detached,
    });
}

impl Router {
    /// Starts a provision's job for `req` (labels validated by the caller), routed on the
    /// router's registry: with `extras` (credential readiness and resolver answers); under
    /// the capacity policy, every candidate in its order. Returns the job's key and its
    /// first step. A typed `NO_ELIGIBLE_PROVIDER` (or budget key) failure names `id`.
    pub fn begin(
        &mut self,
        req: &Rc<Request>,
        detached: bool,
        labels: Vec<(String, String)>,
        extras: Option<&Extras>,
        id: SandboxKey,
        now: Now,
    ) -> Result<(u32, StepKind, usize), Failure> {
        let registry = self.registry.clone();
        let mut begun = self.begin_on(&registry, req, detached, labels, extras, id, now.health);
        if let Err(e) = &mut begun {
            e.sandbox_id = Some(id.to_string());
        }
        let key = begun?;
        let (kind, pool) = self.step(key, now)?;
        Ok((key, kind, pool))
    }

    #[allow(clippy::too_many_arguments, reason = "the parts of begin")]
    fn begin_on(
        &mut self,
        registry: &Rc<RefCell<Pools>>,
        req: &Rc<Request>,
        detached: bool,
        labels: Vec<(String, String)>,
        extras: Option<&Extras>,
        id: SandboxKey,
        now: i64,
    ) -> Result<u32, Failure> {
        let mut inner = registry.borrow_mut();
        let hold_ms = settle_window_ms(req.acquisition_timeout_ms, self.callback_timeout_ms);
        let budget = match &mut self.budgets {
            Some(b) => b.plan(&labels, id, || inner.costs(extras), hold_ms)?,
            None => None,
        };
        // Capacity and budget skips consume no attempt, so they need every candidate.
        let limit = if self.capacity.is_some() || budget.is_some() { None } else { Some(req.max_attempts as usize) };
        let order_health = {
            let provider_order = self.capacity.as_ref().map(|c| c.provider_order.clone());
            self.view(&mut inner, now, |inner, health| {
                let q = Question {
                    req: req.as_ref(),
                    detached,
                    extras,
                    provider_order: provider_order.as_deref(),
                    health,
                    over_budget: &[],
                };
                inner.candidates(&q, limit).map(|order| (order, health.map(|h| (h.slots.clone(), h.now))))
            })
        };
        let (order, tracking) = order_health?;
        let plan = match self.capacity.as_mut() {
            Some(c) => Some(CapacityPlan {
                need: req.resources,
                readers: inner.readers.clone(),
                ledger_pools: inner.registry.pools().iter().map(|p| c.ledger_key(&p.id)).collect(),
            }),
            None => None,
        };
        let claims = self.claims(&inner);
        let names = self.observe.then(|| inner.ids());
        drop(inner);
        let mut machine = Acquisition::new(order, req.max_attempts as usize, req.fallback_allowed, plan, names);
        if let Some((slots, at)) = tracking {
            machine.track(slots, at);
        }
        if self.capacity.is_some() {
            // A capacity hold of a successful launch is kept under its sandbox id, so that
            // destroying the sandbox gives it back.
            machine.own(id);
        }
        if let Some(plan) = budget {
            let names = match (&self.budgets, self.observe) {
                (Some(b), true) => Some(BudgetNames {
                    applying: b.applying_names(&plan),
                    labels: b.rules().iter().map(|r| r.label.clone()).collect(),
                }),
                _ => None,
            };
            machine.with_budget(plan, names);
        }
        // A claim is charged like a launch: the charge follows the member's id.
        let warm = claims.map(|c| {
            machine.offer_claims(c);
            Box::new(WarmRole::Claimer { request: Rc::clone(req), member: None, floor: None })
        });
        Ok(self.jobs.insert(Job {
            id,
            machine,
            pools: registry.clone(),
            labels: Arc::new(labels),
            pool: 0,
            timeout_ms: req.acquisition_timeout_ms,
            detached,
            warm,
        }))
    }

    /// Which pools of `pools` a provision may claim from (by index): none unless the
    /// registry keeps a warm pool and this router's warm pools are started and not closed.
    fn claims(&self, pools: &Pools) -> Option<Rc<[bool]>> {
        let warm = pools.warm.as_ref()?;
        match &self.warm {
            Some(w) if !w.closed => Some(warm.clone()),
            _ => None,
        }
    }

    /// Job `key`'s next step: (kind, pool). A claim from this process's inventory is made
    /// here: a hit is the `Claimed` step, a miss goes on to the next step within this call.
    pub fn step(&mut self, key: u32, now: Now) -> Result<(StepKind, usize), Failure> {
        loop {
            let Router { jobs, capacity, health, budgets, .. } = self;
            let job = jobs.get_mut(key)?;
            job.machine.set_clock(now.router);
            let ledger = capacity.as_mut().map(|c| &mut c.ledger);
            let next = match budgets.as_mut().filter(|b| !b.shared) {
                Some(b) => {
                    let next = job.machine.next_budgeted(ledger, health.as_mut(), Some((&mut b.ledger, now.router)));
                    b.flush();
                    next
                }
                None => job.machine.next_with(ledger, health.as_mut()),
            };
            let (kind, pool) = match next {
                Step::Admit(pool) => (StepKind::Admit, pool),
                Step::Launch(pool) => (StepKind::Launch, pool),
                Step::Reserve(pool) => (StepKind::Reserve, pool),
                Step::Claim(pool) => {
                    job.pool = pool;
                    match self.claim_step(key, pool, now.router) {
                        Ok(kind) => return Ok((kind, pool)),
                        Err(reason) => {
                            self.jobs.get_mut(key)?.machine.claim_missed(reason);
                            continue;
                        }
                    }
                }
                Step::Done => return Ok((StepKind::Done, 0)),
            };
            job.pool = pool;
            return Ok((kind, pool));
        }
    }

    /// The claim step on `pool`: from this process's inventory, the member is taken now
    /// (`Claimed`); with the fleet's, the floor is noted for the caller to ask with (`Claim`).
    /// Or the miss (counted in the pool's status).
    fn claim_step(&mut self, key: u32, pool: usize, now: i64) -> Result<StepKind, MissReason> {
        let Router { jobs, warm, .. } = self;
        let Ok(job) = jobs.get_mut(key) else { return Err(MissReason::Empty) };
        let registry = job.pools.clone();
        let registry = registry.borrow();
        let p = &registry.registry.pools()[pool];
        let (Some(w), Some(config), Some(WarmRole::Claimer { request, member, floor })) =
            (warm.as_mut(), p.warm, job.warm.as_deref_mut())
        else {
            return Err(MissReason::Empty);
        };
        let shared = w.shared;
        let wp = w.pool(&p.id, config, p.capabilities.max_lifetime);
        if shared {
            match wp.floor(now, request) {
                Ok(f) => {
                    *floor = Some(f);
                    Ok(StepKind::Claim)
                }
                Err(r) => {
                    wp.missed(r);
                    Err(r)
                }
            }
        } else {
            wp.claim(now, request).map(|m| {
                *member = Some(m);
                StepKind::Claimed
            })
        }
    }

    /// Reports an outcome of job `key` at `now`: runs `f` with the machine and the
    /// in-process capacity ledger (None without one, or under a coordinator), then records
    /// the launch's outcome in live health and applies the budget settlement.
    pub(crate) fn report<T>(
        &mut self,
        key: u32,
        now: Now,
        f: impl FnOnce(&mut Acquisition, Option<&mut crate::core::capacity::Ledger>) -> T,
    ) -> Result<T, Failure> {
        let Router { jobs, capacity, health, budgets, .. } = self;
        let job = jobs.get_mut(key)?;
        if health.is_some() {
            job.machine.set_now(now.health);
        }
        job.machine.set_clock(now.router);
        let out = f(&mut job.machine, capacity.as_mut().filter(|c| !c.coordinated).map(|c| &mut c.ledger));
        if let Some(h) = health {
            job.machine.report_health(h);
        }
        if let Some(b) = budgets {
            b.apply(&mut job.machine);
        }
        Ok(out)
    }

    /// The current candidate's capacity measurement (validated).
    pub fn admit(&mut self, key: u32, m: &Measurement, now: Now) -> Result<(), Failure> {
        let Router { jobs, capacity, health, budgets, .. } = self;
        let job = jobs.get_mut(key)?;
        job.machine.set_clock(now.router);
        if let Some(c) = capacity {
            if health.is_some() {
                job.machine.set_now(now.health);
            }
            job.machine.admit_with(&mut c.ledger, m, health.as_mut());
        }
        if let Some(b) = budgets {
            b.apply(&mut job.machine);
        }
        Ok(())
    }

    /// Under a shared coordinator, step one of an admission: what to ask it, or None when
    /// the machine skipped the pool already (an unknown measurement).
    pub fn demand(&mut self, key: u32, m: &Measurement, now: Now) -> Result<Option<Demand>, Failure> {
        let callback_timeout_ms = self.callback_timeout_ms;
        let Router { jobs, health, .. } = self;
        let job = jobs.get_mut(key)?;
        let hold_ms = settle_window_ms(job.timeout_ms, callback_timeout_ms);
        let provider_id = job.pool_id(job.pool);
        if health.is_some() {
            job.machine.set_now(now.health);
        }
        Ok(job.machine.shared_demand(m, health.as_mut()).map(|dims| Demand { provider_id, dims, hold_ms, sandbox: job.id }))
    }

    /// Under a shared coordinator, step two: its verdict.
    pub fn admit_decided(&mut self, key: u32, verdict: SharedVerdict, now: Now) -> Result<(), Failure> {
        let Router { jobs, health, budgets, .. } = self;
        let job = jobs.get_mut(key)?;
        if health.is_some() {
            job.machine.set_now(now.health);
        }
        job.machine.admit_shared(verdict, health.as_mut());
        if let Some(b) = budgets {
            b.apply(&mut job.machine);
        }
        Ok(())
    }

    /// Under a shared budget ledger, what to ask it for the current candidate at `now`.
    pub fn budget_demand(&mut self, key: u32, now: Now) -> Result<Option<BudgetAsk>, Failure> {
        let callback_timeout_ms = self.callback_timeout_ms;
        let Router { jobs, budgets, .. } = self;
        let job = jobs.get_mut(key)?;
        let (Some(b), Some(plan)) = (budgets.as_ref(), job.machine.budget_plan()) else { return Ok(None) };
        let hold_ms = settle_window_ms(job.timeout_ms, callback_timeout_ms);
        Ok(Some(BudgetAsk {
            sandbox: plan.sandbox,
            cost: plan.costs.get(job.pool).copied().unwrap_or(0.0),
            hold_ms,
            at: now.router,
            keys: b.demand_keys(plan, now.router),
        }))
    }

    /// Under a shared budget ledger, its answer for the current candidate: reserved, the
    /// refusals, or None (it could not be asked: the rules' `onStoreDown` decide).
    pub fn budget_decided(&mut self, key: u32, verdict: Option<Result<(), Vec<Refusal>>>, now: Now) -> Result<(), Failure> {
        let Router { jobs, budgets, health, .. } = self;
        let job = jobs.get_mut(key)?;
        let Some(b) = budgets.as_ref() else { return Ok(()) };
        let Some(keys) = job.machine.budget_plan().map(|p| p.shared_keys().to_vec()) else { return Ok(()) };
        let verdict = match verdict {
            Some(Ok(())) => budget::SharedVerdict::Reserved,
            Some(Err(refusals)) if !refusals.is_empty() => budget::SharedVerdict::Refused(refusals),
            _ => budget::SharedVerdict::Unavailable(b.on_store_down(&keys)),
        };
        job.machine.reserved_shared(verdict, now.router, health.as_mut());
        Ok(())
    }

    /// Under a shared budget ledger, the settlement the machine decided since the last
    /// call, for the caller to write.
    pub fn budget_settlement(&mut self, key: u32) -> Result<Option<(SandboxKey, Settle)>, Failure> {
        let job = self.jobs.get_mut(key)?;
        let Some(sandbox) = job.machine.budget_plan().map(|p| p.sandbox) else { return Ok(None) };
        Ok(job.machine.take_budget_settle().map(|how| (sandbox, how)))
    }

    /// The shared hold settled by the last report, if any: (token, allocated).
    pub fn settlement(&mut self, key: u32) -> Result<Option<(u64, bool)>, Failure> {
        Ok(self.jobs.get_mut(key)?.machine.take_settlement())
    }

    /// The launch returned a handle with the provider's sandbox id. With the default store
    /// the record is written here too. What is left to do (see [`Success`]); `Settled`
    /// ended the job.
    pub fn succeeded(&mut self, key: u32, provider_sandbox_id: &str, now: Now, wall: i64) -> Result<Success, Failure> {
        self.report(key, now, |m, l| m.succeeded(l))?;
        let Router { jobs, warm, store, fleet, capacity, .. } = self;
        let job = jobs.get_mut(key)?;
        if let Some(w) = warm.as_mut() {
            w.launch_succeeded(job.pools.borrow().pool_id(job.pool));
        }
        let Some(store) = store else { return Ok(Success::Unrecorded) };
        let provider_id = job.pool_id(job.pool);
        write_record(store, job.id, &provider_id, provider_sandbox_id, job.labels.clone(), fleet.clone(), job.detached, wall);
        let coordinated = capacity.as_ref().is_some_and(|c| c.coordinated);
        if job.machine.observing() || coordinated {
            Ok(Success::Recorded)
        } else {
            self.end(key);
            Ok(Success::Settled)
        }
    }

    /// The launch failed; `code` / `retryable`: the classifier's answer, if it gave one of
    /// the right types (the machine sanitizes and decides).
    pub fn failed(&mut self, key: u32, code: Option<&str>, retryable: Option<bool>, now: Now) -> Result<(), Failure> {
        self.report(key, now, |m, l| m.failed(l, code, retryable))
    }

    /// The launch resolved to something that is not a handle.
    pub fn malformed(&mut self, key: u32, now: Now) -> Result<(), Failure> {
        self.report(key, now, |m, l| m.malformed(l))
    }

    /// The launch did not settle within its deadline.
    pub fn timed_out(&mut self, key: u32, now: Now) -> Result<(), Failure> {
        self.report(key, now, |m, l| m.timed_out(l))
    }

    /// The runtime threw the router's own package error with this code (or the launch
    /// intent could not be written): nothing was launched.
    pub fn package_failed(&mut self, key: u32, code: &str, now: Now) -> Result<(), Failure> {
        self.report(key, now, |m, l| m.package_failed(l, code))
    }

    /// The candidates, best first: the order `provision.ranked` reports.
    pub fn candidates(&mut self, key: u32) -> Result<Vec<String>, Failure> {
        let job = self.jobs.get_mut(key)?;
        let pools = job.pools.borrow();
        Ok(job.machine.candidates().iter().map(|&i| pools.pool_id(i).to_string()).collect())
    }

    /// The events job `key` decided since the last call, stamped at `now`.
    pub fn job_events(&mut self, key: u32, now: Now) -> Result<Vec<Emitted>, Failure> {
        let job = self.jobs.get_mut(key)?;
        let sandbox = Some(job.id);
        Ok(job.machine.take_events().into_iter().map(|event| Emitted { at: now.router, sandbox, event }).collect())
    }

    /// How job `key` failed, once over (None while it runs or after a success).
    pub fn failure(&mut self, key: u32) -> Result<Option<Ending>, Failure> {
        let capacity = self.capacity.is_some();
        let Router { jobs, budgets, .. } = self;
        let job = jobs.get_mut(key)?;
        let pools = job.pools.borrow();
        let id = |pool: usize| pools.pool_id(pool);
        let sandbox_id = job.id.to_string();
        let Some(f) = failure_of(&job.machine, id, &sandbox_id, job.timeout_ms, capacity) else { return Ok(None) };
        let skips = || -> Vec<SkipFact> {
            job.machine
                .skipped()
                .iter()
                .map(|s| SkipFact { provider_id: id(s.pool).to_string(), status: s.status.name(), reason: s.reason.clone() })
                .collect()
        };
        let mut error = Fault::new(f.class, &f.code, f.message);
        error.provider_id = f.pool.map(|p| id(p).to_string());
        error.sandbox_id = Some(sandbox_id);
        error.timeout_ms = f.timeout_ms.map(|t| t as f64);
        error.summary = f.summary;
        error.rejections = f.rejections.map(|r| match r {
            Rejections::Circuit(pool) => Rejected::Pools(vec![PoolRejection {
                provider_id: id(pool).to_string(),
                reasons: vec![ReasonFact {
                    code: crate::core::acquisition::CIRCUIT_OPEN,
                    detail: "circuit excluded it at launch time".to_string(),
                }],
            }]),
            Rejections::Capacity => Rejected::Skips(skips()),
        });
        error.attempts = f.attempts.then(|| {
            job.machine
                .attempts()
                .iter()
                .map(|a| AttemptFact { provider_id: id(a.pool).to_string(), code: a.code.clone(), retryable: a.retryable })
                .collect()
        });
        error.capacity_rejections = f.capacity_rejections.then(skips);
        if let Some(b) = budgets {
            budget_fields(&mut error, b, &job.machine);
        }
        let outcome = job.machine.outcome().map_or(ProvisionOutcome::Terminal, ProvisionOutcome::of_machine);
        Ok(Some(Ending { error, may_exist: f.may_exist, package: f.package, outcome }))
    }

    /// The intent record of job `key`'s current launch in `state` (`launching` before it,
    /// `failed` when it ended with its outcome unknown) at `wall` (the wall clock).
    pub fn intent(&mut self, key: u32, state: &'static str, wall: i64) -> Result<IntentFact, Failure> {
        let callback_timeout_ms = self.callback_timeout_ms;
        let owner = self.owner.clone();
        let job = self.jobs.get_mut(key)?;
        Ok(IntentFact {
            id: job.id.to_string(),
            provider_id: job.pool_id(job.pool),
            state,
            started_at: wall,
            expires_at: wall.saturating_add(settle_window_ms(job.timeout_ms, callback_timeout_ms) as i64),
            owner_host: owner.host,
            owner_pid: owner.pid,
            owner_session: owner.session,
        })
    }

    /// Forgets job `key` (its key may be reused): the provision has settled. A half-open
    /// trial token it still holds is freed. Ending an unknown key does nothing.
    pub fn end(&mut self, key: u32) {
        if let Some(mut job) = self.jobs.remove(key) {
            if let Some(h) = &mut self.health {
                job.machine.abandon(h);
            }
        }
    }
}

/// The budget fields of a budget refusal's error: the reported refusal's (the first
/// retryable one, else the first), or the rule that refuses without its shared ledger.
fn budget_fields(error: &mut Fault, b: &super::budgets::Budgets, machine: &Acquisition) {
    match machine.outcome() {
        Some(Outcome::BudgetExhausted) => {
            let all: Vec<Refusal> = machine.budget_refusals().iter().flat_map(|(_, rs)| rs.iter().cloned()).collect();
            if let Some(r) = budget::reported(&all) {
                if let Some(rule) = b.rules().get(r.rule) {
                    refusal_fields(error, rule, r);
                }
            }
        }
        Some(Outcome::BudgetUnavailable { rule }) => {
            let value = machine
                .budget_plan()
                .and_then(|p| p.shared_keys().iter().find(|k| k.rule == *rule))
                .map(|k| k.value.clone());
            if let Some(r) = b.rules().get(*rule) {
                error.rule = Some(r.id.clone());
                error.key = value.map(|value| crate::core::events::KeyFact { label: r.label.clone(), value: value.to_string() });
                error.retryable = Some(true);
            }
        }
        _ => {}
    }
}

/// A fault for an unknown pool index (the caller named a pool the registry lacks).
pub(crate) fn unknown_pool() -> Failure {
    Fault::new(ErrorClass::Internal, "INTERNAL_ERROR", "internal error (an unknown pool index) (a bug: please report it)")
}
