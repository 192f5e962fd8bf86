//! The router's jobs: provisions and warm refills in flight, each an acquisition machine
//! (`core::acquisition`) with what the router keeps beside it, and the steps the router
//! answers for them.
//!
//! A job lives exactly as long as its provision: it is begun by [`Router::begin`] (or a
//! refill's begin), stepped by the reports of what JavaScript performed, and ended once,
//! when the provision has settled ([`Router::end`]); while it lives, `reconcile` sees its
//! sandbox id as in flight.

use super::budgets::refusal_fields;
use super::job::{write_record, Claimer, Job, NewRecord, Stage, WarmRole};
use super::pools::{Extras, Pools, Question};
use super::step::{flags, Next, StepKind};
use super::{Now, Router};
use crate::core::acquisition::{
    settle_window_ms, Acquisition, BudgetNames, CapacityPlan, Outcome, SharedVerdict, Step,
};
use crate::core::budget::{self, Refusal, Settle, SharedKey};
use crate::core::capacity::Measurement;
use crate::core::error::{AttemptFact, ErrorClass, Extra, Failure, Fault, PoolRejection, Rejected, SkipFact};
use crate::core::events::{Emitted, Event, PoolId, ReasonFact, Time};
use crate::core::failure::{failure_of, Rejections};
use crate::core::ids::SandboxKey;
use crate::core::mapping::{CreatedAt, Mapping};
use crate::core::pacing::RateLimit;
use crate::core::request::Request;
use crate::core::request::SANDBOX_ID_LABEL;
use crate::core::shared_ledger::Dim;
use crate::core::telemetry::ProvisionOutcome;
use crate::core::warm::{Member, MissReason};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// Code of a provision whose launch intent could not be written: nothing was launched.
pub const MAPPING_INTENT_FAILED: &str = "MAPPING_INTENT_FAILED";
/// Code of a provision whose sandbox's record could not be written.
pub const MAPPING_PERSISTENCE_FAILED: &str = "MAPPING_PERSISTENCE_FAILED";

/// What a job is paced by: each pool's rate limit and the ids pacing keys them by (by index).
pub(crate) type PacePlan = (Rc<[Option<RateLimit>]>, Rc<[PoolId]>);

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
    /// The pool's declared rate limit: the admission takes a token of the fleet's bucket.
    pub rate_limit: Option<RateLimit>,
    /// With a rate limit: the provision's fairness lane (its `fairBy` label's value; `""`
    /// without one), whose turn the fleet keeps; None for a warm refill, which goes after
    /// every lane waiting.
    pub lane: Option<String>,
    /// Whether the provision waits when the fleet refuses it (the router has a queue): its
    /// lane then claims a turn.
    pub waits: bool,
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

/// What a job decided to write to the shared ledger (`capacity.coordinator`).
#[derive(Debug, Clone, PartialEq)]
pub struct Writes {
    /// A capacity hold settled: (token, allocated, how long an allocation is assumed, ms).
    pub hold: Option<(u64, bool, u64)>,
    /// A budget reservation settled: the sandbox, how, and the pool it was made on.
    pub budget: Option<(SandboxKey, Settle, String)>,
    /// A pool cools down for the fleet: its id and for how long, ms (a classifier's
    /// `retryAfterMs`).
    pub cooldown: Option<(String, u64)>,
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

impl Router {
    /// Starts a provision's job for `req` (labels validated by the caller), routed on the
    /// router's registry: with `extras` (credential readiness and resolver answers); under
    /// the capacity policy, every candidate in its order. Returns the job's key and its
    /// first step. A typed `NO_ELIGIBLE_PROVIDER` (or budget key) failure names `id`.
    pub fn begin(
        &mut self,
        req: &Rc<Request>,
        detached: bool,
        labels: crate::core::labels::Labels,
        extras: Option<&Extras>,
        id: SandboxKey,
        now: Now,
    ) -> Result<(u32, Next), Failure> {
        let registry = self.registry.clone();
        let mut begun = self.begin_on(&registry, req, detached, labels, extras, id, now);
        if let Err(e) = &mut begun {
            e.sandbox_id = Some(id.to_string());
            if self.observe {
                self.refused(id, e, detached, now.router);
            }
        }
        let key = begun?;
        let next = self.step(key, now)?;
        Ok((key, next))
    }

    /// Provision `id` failed before its job began, with `e` (credential readiness): the event
    /// that says so.
    pub fn refused_early(&mut self, id: SandboxKey, e: &Failure, now: i64) {
        self.emit(now, Some(id), Event::ProvisionExhausted { code: e.code.clone(), summary: None, decision_id: None });
    }

    /// The events of a provision refused before its job began: with `NO_ELIGIBLE_PROVIDER`,
    /// the validation, every rejection and the exhaustion (router events).
    fn refused(&mut self, id: SandboxKey, e: &Failure, detached: bool, now: i64) {
        if e.code != "NO_ELIGIBLE_PROVIDER" {
            return;
        }
        self.emit(now, Some(id), Event::ProvisionValidated { detached, decision_id: None });
        if let Some(Rejected::Pools(rejections)) = &e.rejections {
            for r in rejections.clone() {
                self.emit(
                    now,
                    Some(id),
                    Event::ProviderRejected { pool: PoolId::from(r.provider_id.as_str()), reasons: r.reasons },
                );
            }
        }
        self.emit(
            now,
            Some(id),
            Event::ProvisionExhausted { code: e.code.clone(), summary: e.summary.clone(), decision_id: None },
        );
    }

    #[allow(clippy::too_many_arguments, reason = "the parts of begin")]
    fn begin_on(
        &mut self,
        registry: &Rc<RefCell<Pools>>,
        req: &Rc<Request>,
        detached: bool,
        labels: crate::core::labels::Labels,
        extras: Option<&Extras>,
        id: SandboxKey,
        at: Now,
    ) -> Result<u32, Failure> {
        let now = at.health;
        let mut inner = registry.borrow_mut();
        let hold_ms = settle_window_ms(req.acquisition_timeout_ms, self.callback_timeout_ms);
        let budget = match &mut self.budgets {
            Some(b) => match b.plan(&labels, id, || inner.costs(extras), hold_ms) {
                Ok(plan) => plan,
                Err(e) => {
                    // A decision refused before its job began is recorded too.
                    self.keep_refused(registry, &inner, req, &labels, extras, detached, id, at, &e.code);
                    return Err(e);
                }
            },
            None => None,
        };
        let paced = self.paced(&mut inner);
        // Capacity, budget and pacing skips consume no attempt, so they need every candidate.
        let limit = if self.capacity.is_some() || budget.is_some() || paced.is_some() {
            None
        } else {
            Some(req.max_attempts as usize)
        };
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
                    paced: &[],
                };
                inner.candidates(&q, limit).map(|order| (order, health.map(|h| (h.slots.clone(), h.now))))
            })
        };
        let (order, tracking) = match order_health {
            Ok(routed) => routed,
            Err(e) => {
                // No machine will end this plan: its buckets are given back here.
                if let Some(b) = &mut self.budgets {
                    b.unplan(budget.as_ref());
                }
                self.keep_refused(registry, &inner, req, &labels, extras, detached, id, at, &e.code);
                return Err(e);
            }
        };
        let plan = match self.capacity.as_mut() {
            Some(c) => Some(CapacityPlan {
                need: req.resources,
                readers: inner.readers.clone(),
                ledger_pools: inner.registry.pools().iter().map(|p| c.ledger_key(&p.id)).collect(),
            }),
            None => None,
        };
        let claims = self.claims(&inner);
        let names = self.writes_events().then(|| inner.ids());
        let slots = tracking.as_ref().map(|(s, _)| s.clone());
        let mut log = self.decision_log(&inner, slots.as_deref(), req, &labels, extras, detached, at);
        // The decision the events report, taken before the machine (which may take a
        // half-open circuit's trial token for this provision).
        let announced = self.observe.then(|| {
            let provider_order = self.capacity.as_ref().map(|c| c.provider_order.clone());
            self.view(&mut inner, now, |inner, health| {
                let q = Question {
                    req: req.as_ref(),
                    detached,
                    extras,
                    provider_order: provider_order.as_deref(),
                    health,
                    over_budget: &[],
                    paced: &[],
                };
                let d = inner.decide(&q);
                (crate::core::explain::summary(d.eligible.len(), d.total, &d.rejected), inner.rejections(&d))
            })
        });
        drop(inner);
        let mut machine = Acquisition::new(order, req.max_attempts as usize, req.fallback_allowed, plan, names.clone());
        if let (Some(log), false) = (log.as_deref_mut(), self.observe) {
            // The record's own list (its room kept from the record it reuses): no allocation.
            machine.lend_events(std::mem::take(&mut log.events));
        }
        if let Some((slots, at)) = tracking {
            machine.track(slots, at);
        }
        if let Some((limits, ids)) = paced {
            machine.pace(limits, ids);
        }
        if self.capacity.is_some() {
            // A capacity hold of a successful launch is kept under its sandbox id, so that
            // destroying the sandbox gives it back.
            machine.own(id);
        }
        if let Some(plan) = budget {
            let names = match (&self.budgets, self.writes_events()) {
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
            Box::new(WarmRole::Claimer(Claimer { request: Rc::clone(req), member: None, floor: None, fleet: false }))
        });
        let wait = self
            .lane_of(&labels)
            .map(|lane| Box::new(super::job::WaitState { lane: Some(lane), ..Default::default() }));
        let key = self.jobs.insert(Job {
            id,
            machine,
            pools: registry.clone(),
            labels: Arc::new(labels),
            pool: 0,
            timeout_ms: req.acquisition_timeout_ms,
            detached,
            warm,
            stage: Stage::Machine,
            launched: false,
            folding_intent: false,
            intent_ready: None,
            intent_stored: false,
            provider_sandbox_id: None,
            fault: None,
            cooldown: None,
            log,
            wait,
        });
        // Waiters' pools are theirs first.
        self.queue_behind(key);
        if let (Some((summary, rejected)), Some(names)) = (announced, names) {
            let at = at.router;
            let job = self.jobs.get_mut(key)?;
            let order: Vec<PoolId> = job.machine.candidates().iter().map(|&i| names[i].clone()).collect();
            job.machine.announce(Event::ProvisionValidated { detached, decision_id: None });
            for r in rejected {
                job.machine.announce(Event::ProviderRejected {
                    pool: PoolId::from(r.provider_id.as_str()),
                    reasons: r.reasons,
                });
            }
            job.machine.announce(Event::ProvisionRanked { summary, order, decision_id: None });
            let _ = at;
        }
        Ok(key)
    }

    /// What a job on `pools` is paced by (each pool's limit, and the ids pacing is keyed
    /// by): None, and nothing is paced, unless a pool declares a rate limit or one of the
    /// router's pools is cooling down.
    pub(crate) fn paced(&self, pools: &mut Pools) -> Option<PacePlan> {
        let limits = match pools.rate_limits() {
            Some(l) => l.clone(),
            // The wait queue skips waiters' pools in the pacing step; a fleet's pacing may
            // refuse any pool (another process's `Retry-After`).
            None if self.pacing.is_empty() && self.queue.is_none() && !self.coordinated() => return None,
            None => pools.registry.pools().iter().map(|_| None).collect(),
        };
        Some((limits, pools.ids()))
    }

    /// The pools of `pools` pacing holds back at `now` (explanations: a provision skips them
    /// at launch time), with why and until when. Empty, without a scan, when nothing is paced.
    pub fn paced_now(&self, pools: &Pools, now: i64) -> Vec<(usize, crate::core::pacing::Blocked)> {
        if pools.rate_limits().is_none() && self.pacing.is_empty() {
            return Vec::new();
        }
        let limits = pools.rate_limits().map(|l| &**l);
        (0..pools.registry.pools().len())
            .filter_map(|i| {
                let limit = limits.and_then(|l| l.get(i).copied().flatten());
                self.pacing.peek(pools.pool_id(i), limit, now).err().map(|b| (i, b))
            })
            .collect()
    }

    /// Which pools of `pools` a provision may claim from (by index): none unless the
    /// registry keeps a warm pool and this router's warm pools are started and not closed.
    fn claims(&self, pools: &Pools) -> Option<Rc<[bool]>> {
        let warm = pools.warm()?;
        match &self.warm {
            Some(w) if !w.closed => Some(warm.clone()),
            _ => None,
        }
    }

    /// Job `key`'s next step. A claim from this process's inventory is made here: a hit is
    /// the `Claimed` step, a miss goes on to the next step within this call.
    pub fn step(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        self.clock = now.router;
        let next = self.next_of(key, now)?;
        for pool in self.pacing.take_ended() {
            self.emit(now.router, None, Event::PoolCooldownEnded { pool: PoolId::from(pool.as_str()) });
        }
        let mut flags = next.flags | self.pending_flags();
        // Without an observer only the record reads the events: it takes them at the end.
        let observe = self.observe;
        if observe {
            self.log_events(key);
        }
        let job = self.jobs.get_mut(key)?;
        if observe && job.machine.has_events() {
            flags |= flags::EVENTS;
        }
        if job.machine.has_writes() || job.cooldown.is_some() {
            flags |= flags::WRITES;
        }
        Ok(Next { flags, ..next })
    }

    fn next_of(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        let callback = self.callback_timeout_ms;
        let combined = if self.combined { flags::COMBINED } else { 0 };
        let sequence = if self.capacity.as_ref().is_some_and(|c| c.coordinated) { flags::SEQUENCE } else { 0 };
        loop {
            let intents = self.intents;
            let Router { jobs, capacity, health, budgets, pacing, .. } = self;
            let job = jobs.get_mut(key)?;
            let pool = job.pool;
            let at = |kind: StepKind, bound_ms: u64| Next { kind, pool, bound_ms, flags: 0 };
            let aborting = job.wait.as_ref().is_some_and(|w| w.abort.is_some());
            match job.stage {
                Stage::Machine => {}
                Stage::Intent | Stage::Launch if aborting => {
                    self.abort_before_launch(key, now)?;
                    continue;
                }
                Stage::Intent => return Ok(at(StepKind::Intent, callback)),
                Stage::Launch => return Ok(at(StepKind::Launch, job.timeout_ms)),
                Stage::Waiting => {
                    let until = job.wait.as_ref().map_or(now.router, |w| w.until);
                    return Ok(at(StepKind::Wait, until.saturating_sub(now.router).max(1) as u64));
                }
                Stage::Classify => return Ok(at(StepKind::Classify, callback)),
                Stage::Persist => return Ok(Next { flags: combined, ..at(StepKind::Persist, callback) }),
                Stage::WarmSettle => return Ok(at(StepKind::WarmSettle, callback)),
                Stage::ClaimResolve => return Ok(at(StepKind::ClaimResolve, self.operation_timeout_ms)),
                Stage::ClaimUncharge => return Ok(at(StepKind::ClaimUncharge, callback)),
                Stage::Cleanup => return Ok(at(StepKind::Cleanup, self.operation_timeout_ms)),
                Stage::Unintent { failed } => {
                    let flags = if failed { flags::FAILED_INTENT } else { 0 };
                    return Ok(Next { flags, ..at(StepKind::Unintent, callback) });
                }
                Stage::Succeeded => return Ok(at(StepKind::Succeeded, 0)),
                Stage::Failed => return Ok(at(StepKind::Done, 0)),
            }
            job.machine.set_clock(now.router);
            let ledger = capacity.as_mut().map(|c| &mut c.ledger);
            let next = match budgets.as_mut().filter(|b| !b.shared) {
                Some(b) => {
                    let local = Some((&mut b.ledger, now.router));
                    let next = job.machine.next_paced(ledger, health.as_mut(), local, Some(pacing));
                    b.flush();
                    next
                }
                None => job.machine.next_paced(ledger, health.as_mut(), None, Some(pacing)),
            };
            match next {
                Step::Admit(pool) => {
                    job.pool = pool;
                    let shared = self.capacity.as_ref().is_some_and(|c| c.coordinated);
                    let kind = if shared { StepKind::Coordinate } else { StepKind::Admit };
                    return Ok(Next { kind, pool, bound_ms: self.capacity_timeout_ms, flags: 0 });
                }
                Step::Launch(pool) => {
                    job.pool = pool;
                    // The reservation's transaction wrote this launch's intent: no step of its own.
                    let ready = job.intent_ready.take() == Some(pool);
                    job.stage = if intents && !ready { Stage::Intent } else { Stage::Launch };
                    self.admitted(key, now.router);
                }
                Step::Reserve(pool) => {
                    job.pool = pool;
                    job.intent_ready = None;
                    job.folding_intent = intents && combined != 0;
                    let fold = if job.folding_intent { flags::INTENT } else { 0 };
                    return Ok(Next { kind: StepKind::Reserve, pool, bound_ms: callback, flags: sequence | fold });
                }
                Step::Claim(pool) => {
                    job.pool = pool;
                    match self.claim_step(key, pool, now.router) {
                        Ok(StepKind::ClaimResolve) => return Ok(at(StepKind::ClaimResolve, self.operation_timeout_ms)),
                        Ok(kind) => return Ok(Next { kind, pool, bound_ms: callback, flags: 0 }),
                        Err(reason) => self.jobs.get_mut(key)?.machine.claim_missed(reason),
                    }
                }
                Step::Done => {
                    let succeeded = matches!(job.machine.outcome(), Some(Outcome::Succeeded(_) | Outcome::Claimed(_)));
                    if succeeded {
                        self.admitted(key, now.router);
                    } else if self.wait_or_fail(key, now.router)? {
                        continue;
                    }
                    let job = self.jobs.get_mut(key)?;
                    let settle_intent = !succeeded && intents && (job.launched || job.intent_stored);
                    let stage = if succeeded {
                        Stage::Succeeded
                    } else if settle_intent {
                        let capacity = self.capacity.is_some();
                        let failed = self.failure_of(key, capacity)?.is_some_and(|f| f.may_exist);
                        Stage::Unintent { failed }
                    } else {
                        Stage::Failed
                    };
                    self.jobs.get_mut(key)?.stage = stage;
                }
            }
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
        let (Some(w), Some(config), Some(WarmRole::Claimer(c))) = (warm.as_mut(), p.warm, job.warm.as_deref_mut())
        else {
            return Err(MissReason::Empty);
        };
        let shared = w.shared;
        let wp = w.pool(&p.id, config, p.capabilities.max_lifetime);
        if shared {
            return match wp.floor(now, &c.request) {
                Ok(f) => {
                    c.floor = Some(f);
                    Ok(StepKind::Claim)
                }
                Err(r) => {
                    wp.missed(r);
                    Err(r)
                }
            };
        }
        let claimed = wp.claim(now, &c.request);
        if !matches!(claimed, Err(r) if r.incompatible()) {
            // A claim, or a miss for want of a member: demand, and its refill may be due.
            wp.demand_seen(now);
            w.kick |= wp.may_grow();
        }
        let m = claimed?;
        let held = w.let_go(m.id);
        c.member = Some(m);
        if held {
            Ok(StepKind::Claimed)
        } else {
            job.stage = Stage::ClaimResolve;
            Ok(StepKind::ClaimResolve)
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
    pub fn admit(&mut self, key: u32, m: &Measurement, now: Now) -> Result<Next, Failure> {
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
        if self.decisions.is_some() {
            let job = self.jobs.get_mut(key)?;
            let id = job.pool_id(job.pool);
            if let Some(c) = self.capacity.as_mut() {
                let slot = c.ledger_key(&id);
                let ledger = &c.ledger;
                let held = |r: &str| ledger.held_for(slot, r);
                // (A closure over the ledger while the job is borrowed again below.)
                let held: Vec<(String, f64)> = match m {
                    Measurement::Known(dims) => dims.iter().map(|d| (d.resource.clone(), held(&d.resource))).collect(),
                    Measurement::Unknown(_) => Vec::new(),
                };
                self.log_capacity(key, m, |r| held.iter().find(|(x, _)| x == r).map_or(0.0, |(_, h)| *h));
            }
        }
        if self.warm.is_some() {
            // The room this read shows caps a warm pool's refill pace.
            let job = self.jobs.get_mut(key)?;
            let pool = job.pool_id(job.pool);
            self.warm_capacity_read(&pool, m, now.router);
        }
        self.step(key, now)
    }

    /// Under a shared coordinator, step one of an admission: what to ask it, or None when
    /// the machine skipped the pool already (an unknown measurement).
    ///
    /// `Err(next)`: the pool is skipped already (an unknown measurement), and this is the
    /// job's next step.
    pub fn demand(&mut self, key: u32, m: &Measurement, now: Now) -> Result<Result<Demand, Next>, Failure> {
        let callback_timeout_ms = self.callback_timeout_ms;
        let queued = self.queue.as_ref().is_some_and(|q| !q.closed);
        let Router { jobs, health, budgets, .. } = self;
        let job = jobs.get_mut(key)?;
        let hold_ms = settle_window_ms(job.timeout_ms, callback_timeout_ms);
        let provider_id = job.pool_id(job.pool);
        if health.is_some() {
            job.machine.set_now(now.health);
        }
        if job.log.is_some() {
            // The fleet holds what is held: its verdict is in the steps.
            let pool = job.pool;
            if let Some(log) = job.log.as_deref_mut() {
                log.capacity.push(crate::core::decision::CapacityRead {
                    pool,
                    measurement: m.clone(),
                    held: Vec::new(),
                });
            }
        }
        match job.machine.shared_demand(m, health.as_mut()) {
            Some(dims) => {
                let rate_limit = job.pools.borrow().registry.pools().get(job.pool).and_then(|p| p.rate_limit);
                let refill = matches!(job.warm.as_deref(), Some(WarmRole::Refill { .. }));
                let lane = match (rate_limit, refill) {
                    (Some(_), false) => Some(job.wait.as_ref().and_then(|w| w.lane.clone()).unwrap_or_default()),
                    _ => None,
                };
                let waits = lane.is_some() && queued;
                Ok(Ok(Demand { provider_id, dims, hold_ms, sandbox: job.id, rate_limit, lane, waits }))
            }
            None => {
                if let Some(b) = budgets {
                    b.apply(&mut job.machine);
                }
                Ok(Err(self.step(key, now)?))
            }
        }
    }

    /// Under a shared coordinator, step two: its verdict.
    pub fn admit_decided(&mut self, key: u32, verdict: SharedVerdict, now: Now) -> Result<Next, Failure> {
        let Router { jobs, health, budgets, pacing, .. } = self;
        let job = jobs.get_mut(key)?;
        if health.is_some() {
            job.machine.set_now(now.health);
        }
        job.machine.set_clock(now.router);
        job.machine.admit_shared(verdict, health.as_mut(), Some(pacing));
        if let Some(b) = budgets {
            b.apply(&mut job.machine);
        }
        self.step(key, now)
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
    /// `intent_written`: the transaction wrote the launch intent it carried ([`flags::INTENT`]).
    pub fn budget_decided(
        &mut self,
        key: u32,
        verdict: Option<Result<(), Vec<Refusal>>>,
        intent_written: bool,
        now: Now,
    ) -> Result<Next, Failure> {
        let Router { jobs, budgets, health, .. } = self;
        let job = jobs.get_mut(key)?;
        if std::mem::take(&mut job.folding_intent) && intent_written && matches!(verdict, Some(Ok(()))) {
            job.intent_ready = Some(job.pool);
            job.intent_stored = true;
        }
        let (Some(b), Some(keys)) = (budgets.as_ref(), job.machine.budget_plan().map(|p| p.shared_keys().to_vec()))
        else {
            return self.step(key, now);
        };
        let verdict = match verdict {
            Some(Ok(())) => budget::SharedVerdict::Reserved,
            Some(Err(refusals)) if !refusals.is_empty() => budget::SharedVerdict::Refused(refusals),
            _ => budget::SharedVerdict::Unavailable(b.on_store_down(&keys)),
        };
        job.machine.reserved_shared(verdict, now.router, health.as_mut());
        self.step(key, now)
    }

    /// What job `key` decided to write to the shared ledger since the last call (see
    /// [`flags::WRITES`]), for the caller to write without waiting.
    pub fn writes(&mut self, key: u32) -> Result<Writes, Failure> {
        let ttl_ms = self.capacity.as_ref().map_or(0, |c| c.reservation_ttl_ms);
        let job = self.jobs.get_mut(key)?;
        let hold = job.machine.take_settlement().map(|(token, allocated)| (token, allocated, ttl_ms));
        let sandbox = job.machine.budget_plan().map(|p| p.sandbox);
        let budget = match sandbox {
            Some(s) => job.machine.take_budget_settle().map(|how| (s, how, job.pool_id(job.pool))),
            None => None,
        };
        Ok(Writes { hold, budget, cooldown: job.cooldown.take() })
    }

    /// The launch intent was written (`ok`), or not: no intent, no launch, so nothing is
    /// allocated and nothing can be lost (the provision ends with `MAPPING_INTENT_FAILED`).
    pub fn intent_written(&mut self, key: u32, ok: bool, now: Now) -> Result<Next, Failure> {
        let job = self.jobs.get_mut(key)?;
        if job.stage != Stage::Intent {
            return Err(Fault::internal("(an intent report out of turn)"));
        }
        if ok {
            job.stage = Stage::Launch;
        } else {
            job.stage = Stage::Machine;
            let (id, pool) = (job.id, job.pool_id(job.pool));
            let mut e = Fault::new(
                ErrorClass::MappingPersistence,
                MAPPING_INTENT_FAILED,
                format!("the launch intent for {id} could not be stored; nothing was launched"),
            );
            e.provider_id = Some(pool);
            e.sandbox_id = Some(id.to_string());
            e.cleanup = Some("none");
            job.fault = Some((e, false));
            self.report(key, now, |m, l| m.package_failed(l, MAPPING_INTENT_FAILED))?;
        }
        self.step(key, now)
    }

    pub(crate) fn launch_reported(&mut self, key: u32) -> Result<&mut Job, Failure> {
        let job = self.jobs.get_mut(key)?;
        if job.stage != Stage::Launch {
            return Err(Fault::internal("(a launch report out of turn)"));
        }
        job.launched = true;
        job.stage = Stage::Machine;
        Ok(job)
    }

    /// The launch returned a handle with the provider's sandbox id. With the default store
    /// the record is written here too (and, with nothing more to read, the job is ended:
    /// [`flags::ENDED`]); with a caller's store, the next step writes it.
    pub fn succeeded(&mut self, key: u32, provider_sandbox_id: &str, now: Now, wall: i64) -> Result<Next, Failure> {
        if let Some(WarmRole::Refill { .. }) = self.jobs.get_mut(key)?.warm.as_deref() {
            self.refill_succeeded(key, provider_sandbox_id, now, wall)?;
            return self.step(key, now);
        }
        self.launch_reported(key)?;
        self.report(key, now, |m, l| m.succeeded(l))?;
        let coordinated = self.capacity.as_ref().is_some_and(|c| c.coordinated);
        if self.warm.is_some() {
            let job = self.jobs.get_mut(key)?;
            let provider_id = job.pool_id(job.pool);
            self.warm_launch_succeeded(&provider_id, now.router);
        }
        let observe = self.observe;
        let Router { jobs, store, fleet, .. } = self;
        let job = jobs.get_mut(key)?;
        // A job that goes on after this call keeps the provider's id for its steps (the
        // caller's store, the shared ledger's writes); one that ends here needs no copy.
        let Some(store) = store else {
            job.provider_sandbox_id = Some(provider_sandbox_id.to_string());
            job.stage = Stage::Persist;
            return self.step(key, now);
        };
        {
            // The pool's id borrowed, not copied: this runs once per provision.
            let pools = Rc::clone(&job.pools);
            let pools = pools.borrow();
            let provider_id = pools.pool_id(job.pool);
            write_record(
                store,
                NewRecord {
                    id: job.id,
                    provider_id,
                    provider_sandbox_id,
                    labels: job.labels.clone(),
                    detached: job.detached,
                },
                fleet.clone(),
                wall,
            );
            job.machine.persisted(job.pool);
        }
        job.stage = Stage::Succeeded;
        // Events for JavaScript to read (an observer, telemetry), or writes: a step of its own.
        // A decision record takes its events when the job ends, here.
        if observe || coordinated {
            job.provider_sandbox_id = Some(provider_sandbox_id.to_string());
            return self.step(key, now);
        }
        let pool = job.pool;
        self.end(key);
        Ok(Next { kind: StepKind::Succeeded, pool, bound_ms: 0, flags: flags::ENDED | self.pending_flags() })
    }

    /// The launch threw. `package`: the code of the router's own package error it threw
    /// (nothing was called, nothing allocated); otherwise the classifier is asked next (when
    /// the router has one), or the failure is outcome unknown.
    pub fn threw(&mut self, key: u32, package: Option<&str>, now: Now) -> Result<Next, Failure> {
        let classifier = self.classifier;
        let job = self.launch_reported(key)?;
        match package {
            Some(code) => self.report(key, now, |m, l| m.package_failed(l, code))?,
            None if classifier => job.stage = Stage::Classify,
            None => self.report(key, now, |m, l| m.failed(l, None, None))?,
        }
        self.step(key, now)
    }

    /// The classifier answered (`code` / `retryable` when they had the right types; None:
    /// it threw, timed out or answered something else). The machine sanitizes and decides.
    /// `retry_after_ms`: the answer's `retryAfterMs` (a number), which cools the pool down
    /// for that long (`COOLING_DOWN`; `core::pacing`; not finite or not above 0: none).
    pub fn classified(
        &mut self,
        key: u32,
        code: Option<&str>,
        retryable: Option<bool>,
        retry_after_ms: Option<f64>,
        now: Now,
    ) -> Result<Next, Failure> {
        let job = self.jobs.get_mut(key)?;
        if job.stage != Stage::Classify {
            return Err(Fault::internal("(a classification out of turn)"));
        }
        job.stage = Stage::Machine;
        let mut cooled = None;
        if let Some(ms) = retry_after_ms.filter(|ms| ms.is_finite() && *ms > 0.0) {
            let ms = (ms.ceil() as i64).min(crate::core::pacing::MAX_RETRY_AFTER_MS);
            let pools = job.pools.borrow();
            let limit = pools.registry.pools().get(job.pool).and_then(|p| p.rate_limit);
            let pool = pools.pool_id(job.pool);
            if self.capacity.as_ref().is_some_and(|c| c.coordinated) {
                // The fleet's pool cools down too: every process skips it until then.
                job.cooldown = Some((pool.to_string(), ms as u64));
            }
            cooled = self.pacing.cool(pool, limit, ms, now.router).map(|until| Event::PoolCooldownStarted {
                pool: PoolId::from(pool),
                retry_after_ms: ms as u64,
                until: Time(until),
            });
        }
        self.report(key, now, |m, l| m.failed(l, code, retryable))?;
        if let Some(e) = cooled {
            // After the attempt's own events: the failure, then what it started.
            self.jobs.get_mut(key)?.machine.announce(e);
        }
        self.step(key, now)
    }

    /// The launch resolved to something that is not a handle.
    pub fn malformed(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        self.launch_reported(key)?;
        self.report(key, now, |m, l| m.malformed(l))?;
        self.step(key, now)
    }

    /// The launch did not settle within its deadline: outcome unknown.
    pub fn timed_out(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        self.launch_reported(key)?;
        self.report(key, now, |m, l| m.timed_out(l))?;
        self.step(key, now)
    }

    /// The record of job `key`'s sandbox, for the caller's store: its caller labels and the
    /// stamp, created at `wall`.
    pub fn record(&mut self, key: u32, wall: i64) -> Result<Mapping, Failure> {
        let fleet = self.fleet.clone();
        let job = self.jobs.get_mut(key)?;
        let psid = job.provider_sandbox_id.clone().ok_or_else(|| Fault::internal("(no sandbox to record)"))?;
        let provider_id = PoolId::from(job.pool_id(job.pool).as_str());
        Ok(Mapping {
            id: job.id,
            provider_id,
            provider_sandbox_id: psid.into(),
            labels: job.labels.clone(),
            stamped: true,
            fleet: Some(fleet),
            created_at: CreatedAt::Millis(wall),
            detached: job.detached,
        })
    }

    /// The caller's store answered the record's write: stored (`ok`), or it failed or timed
    /// out (the sandbox is destroyed next: nobody would hold its id).
    pub fn persisted(&mut self, key: u32, ok: bool, now: Now) -> Result<Next, Failure> {
        let job = self.jobs.get_mut(key)?;
        if !matches!(job.stage, Stage::Persist | Stage::WarmSettle) {
            return Err(Fault::internal("(a record report out of turn)"));
        }
        let pool_id = job.pool_id(job.pool);
        let pool = PoolId::from(pool_id.as_str());
        let refill = matches!(job.warm.as_deref(), Some(WarmRole::Refill { .. }));
        if ok && refill {
            // The member is recorded: it is idle now (this process's inventory keeps it; the
            // fleet's transaction put it in the database).
            let member = Member {
                id: job.id,
                provider_sandbox_id: job.provider_sandbox_id.clone().unwrap_or_default(),
                launched_at: now.router,
            };
            job.machine.announce(Event::WarmMemberLaunched { pool });
            job.stage = Stage::Succeeded;
            self.member_ready(&pool_id, member);
        } else if ok {
            job.machine.persisted(job.pool);
            job.stage = Stage::Succeeded;
            if self.combined {
                let (id, provider_sandbox_id) = (job.id, job.provider_sandbox_id.clone().unwrap_or_default());
                self.operations.written.insert(id, pool_id, provider_sandbox_id);
            }
        } else {
            job.machine.announce(Event::MappingFailed { pool });
            job.stage = Stage::Cleanup;
        }
        self.step(key, now)
    }

    /// The destroy after a failed record write settled (`succeeded`: the sandbox is gone).
    /// The provision fails with `MAPPING_PERSISTENCE_FAILED`, saying whether the clean-up
    /// worked; a sandbox that survived it is named by a `failed` intent.
    pub fn cleaned_up(&mut self, key: u32, succeeded: bool, now: Now) -> Result<Next, Failure> {
        let intents = self.intents;
        let job = self.jobs.get_mut(key)?;
        if job.stage != Stage::Cleanup {
            return Err(Fault::internal("(a clean-up report out of turn)"));
        }
        let (id, provider_id) = (job.id, job.pool_id(job.pool));
        job.machine.announce(Event::CleanupCompleted {
            pool: PoolId::from(provider_id.as_str()),
            reason: "mapping-failed",
            succeeded,
        });
        let message = if succeeded {
            format!("sandbox acquired on {provider_id} but its mapping could not be stored; the sandbox was destroyed")
        } else {
            format!(
                "sandbox acquired on {provider_id} but its mapping could not be stored, and cleanup failed: find it by label {SANDBOX_ID_LABEL}={id}"
            )
        };
        let mut e = Fault::new(ErrorClass::MappingPersistence, MAPPING_PERSISTENCE_FAILED, message);
        e.provider_id = Some(provider_id);
        e.sandbox_id = Some(id.to_string());
        e.cleanup = Some(if succeeded { "destroyed" } else { "failed" });
        job.fault = Some((e, !succeeded));
        job.stage = if intents { Stage::Unintent { failed: !succeeded } } else { Stage::Failed };
        self.step(key, now)
    }

    /// The intent was settled after a failure (written `failed`, or removed), or that
    /// failed: best effort either way (a `launching` intent left behind is in flight to
    /// `reconcile` until it expires).
    pub fn intent_settled(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        let job = self.jobs.get_mut(key)?;
        if !matches!(job.stage, Stage::Unintent { .. }) {
            return Err(Fault::internal("(an intent settlement out of turn)"));
        }
        job.stage = Stage::Failed;
        self.step(key, now)
    }

    /// A launch that settled after its job was over (its deadline passed): nobody holds its
    /// id, so a sandbox it made (`has_handle`) is destroyed, within the bound answered (ms,
    /// `operationTimeoutMs`); 0: nothing to destroy.
    pub fn late_launch(&self, has_handle: bool) -> u64 {
        if has_handle {
            self.operation_timeout_ms
        } else {
            0
        }
    }

    /// The destroy of a late launch's sandbox settled: the event that says so.
    pub fn late_cleaned_up(&mut self, id: SandboxKey, provider_id: &str, succeeded: bool, now: i64) {
        self.emit(
            now,
            Some(id),
            Event::CleanupCompleted { pool: PoolId::from(provider_id), reason: "late-launch", succeeded },
        );
    }

    /// A record write the caller's store finished after it had timed out: it is removed (the
    /// provision failed, and its sandbox was destroyed).
    pub fn late_write(&mut self) -> bool {
        true
    }

    /// The candidates, best first: the order `provision.ranked` reports.
    pub fn candidates(&mut self, key: u32) -> Result<Vec<String>, Failure> {
        let job = self.jobs.get_mut(key)?;
        let pools = job.pools.borrow();
        Ok(job.machine.candidates().iter().map(|&i| pools.pool_id(i).to_string()).collect())
    }

    /// The events job `key` decided since the last call, stamped at `now`.
    pub fn job_events(&mut self, key: u32, now: Now) -> Result<Vec<Emitted>, Failure> {
        self.log_events(key);
        let records = self.decisions.is_some();
        let job = self.jobs.get_mut(key)?;
        Router::events_taken(job);
        let id = job.id;
        let sandbox = Some(id);
        Ok(job
            .machine
            .take_events()
            .into_iter()
            .map(|mut event| {
                if records {
                    crate::core::decision::name_record(&mut event, id);
                }
                Emitted { at: now.router, sandbox, event }
            })
            .collect())
    }

    /// How job `key` failed, once over (None while it runs or after a success).
    pub fn failure(&mut self, key: u32) -> Result<Option<Ending>, Failure> {
        let capacity = self.capacity.is_some();
        self.failure_of(key, capacity)
    }

    pub(crate) fn failure_of(&mut self, key: u32, capacity: bool) -> Result<Option<Ending>, Failure> {
        let Router { jobs, budgets, clock, .. } = self;
        let job = jobs.get_mut(key)?;
        if let Some((e, may_exist)) = &job.fault {
            // A wait that ran out, or a queue with no room: retry later, as for capacity.
            let later = e.code == crate::core::queue::QUEUE_TIMEOUT || e.code == crate::core::queue::QUEUE_FULL;
            let outcome = if later { ProvisionOutcome::Exhausted } else { ProvisionOutcome::Terminal };
            return Ok(Some(Ending { error: e.clone(), may_exist: *may_exist, package: false, outcome }));
        }
        let pools = job.pools.borrow();
        let id = |pool: usize| pools.pool_id(pool);
        let sandbox_id = job.id.to_string();
        let Some(f) = failure_of(&job.machine, id, &sandbox_id, job.timeout_ms, capacity) else { return Ok(None) };
        let skips = || -> Vec<SkipFact> {
            job.machine
                .skipped()
                .iter()
                .map(|s| SkipFact {
                    provider_id: id(s.pool).to_string(),
                    status: s.status.name(),
                    reason: s.reason.clone(),
                })
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
                .map(|a| AttemptFact {
                    provider_id: id(a.pool).to_string(),
                    code: a.code.clone(),
                    retryable: a.retryable,
                })
                .collect()
        });
        error.capacity_rejections = f.capacity_rejections.then(skips);
        if let Some(Outcome::RateLimited { until }) = job.machine.outcome() {
            // When the first paced-over pool may launch again: retry then.
            error.retryable = Some(true);
            error.extra.push(("retryAfterMs", Extra::Num(until.saturating_sub(*clock).max(0) as f64)));
        }
        if let Some(b) = budgets {
            budget_fields(&mut error, b, &job.machine);
        }
        let outcome = job.machine.outcome().map_or(ProvisionOutcome::Terminal, ProvisionOutcome::of_machine);
        Ok(Some(Ending { error, may_exist: f.may_exist, package: f.package, outcome }))
    }

    /// The intent record of job `key`'s current launch at `wall` (the wall clock): `launching`
    /// before it, `failed` when the provision ended with a sandbox that may exist.
    pub fn intent(&mut self, key: u32, wall: i64) -> Result<IntentFact, Failure> {
        let (callback_timeout_ms, capacity_timeout_ms) = (self.callback_timeout_ms, self.capacity_timeout_ms);
        let owner = self.owner.clone();
        let job = self.jobs.get_mut(key)?;
        let mut window = settle_window_ms(job.timeout_ms, callback_timeout_ms);
        let state = match job.stage {
            Stage::Intent => "launching",
            Stage::Unintent { failed: true } => "failed",
            // Written before the capacity read and admission: it outlives their bound too.
            Stage::Machine if job.folding_intent => {
                window = window.saturating_add(capacity_timeout_ms);
                "launching"
            }
            _ => return Err(Fault::internal("(an intent out of turn)")),
        };
        Ok(IntentFact {
            id: job.id.to_string(),
            provider_id: job.pool_id(job.pool),
            state,
            started_at: wall,
            expires_at: wall.saturating_add(window as i64),
            owner_host: owner.host,
            owner_pid: owner.pid,
            owner_session: owner.session,
        })
    }

    /// Forgets job `key` (its key may be reused): the provision (or operation) has settled. A half-open
    /// trial token it still holds is freed. Ending an unknown key does nothing.
    pub fn end(&mut self, key: u32) {
        if key & super::operation::OPERATION_KEY != 0 {
            self.operations.remove(key);
            return;
        }
        let refill = self.refill_outcome(key);
        self.keep_decision(key);
        self.unqueue(key);
        // What the job held is given back where it lies, then it is dropped there (a job is
        // large: moving it out to drop it was a copy a provision paid for nothing).
        let Router { jobs, health, budgets, .. } = self;
        let Ok(job) = jobs.get_mut(key) else { return };
        if let Some(h) = health {
            job.machine.abandon(h);
        }
        if let Some(b) = budgets {
            b.unplan(job.machine.budget_plan());
        }
        jobs.discard(key);
        // What it held (a capacity hold, a budget slot) may have been given back.
        if self.capacity.is_some() || self.budgets.is_some() {
            self.wake_firsts();
        }
        if let Some((pool, failed, token)) = refill {
            self.refill_ended(&pool, failed, token);
        }
    }

    /// A refill job about to end: its pool, its failure unless it succeeded (its code, and
    /// whether its launch's success was counted already: its record could not be written),
    /// and its fleet grant.
    #[allow(clippy::type_complexity, reason = "a private triple read once by end()")]
    fn refill_outcome(&mut self, key: u32) -> Option<(String, Option<(String, bool)>, Option<i64>)> {
        let capacity = self.capacity.is_some();
        let job = self.jobs.get_mut(key).ok()?;
        let Some(WarmRole::Refill { token, .. }) = job.warm.as_deref() else { return None };
        let (token, pool, stage, counted) =
            (*token, job.pool_id(job.pool), job.stage, job.provider_sandbox_id.is_some());
        let failed = match stage {
            Stage::Succeeded => None,
            Stage::Failed => {
                let code = self.failure_of(key, capacity).ok().flatten().map(|f| f.error.code);
                Some((code.unwrap_or_else(|| "INTERNAL_ERROR".to_string()), counted))
            }
            // Ended before it settled (the caller's bug): a failure, so its count is right.
            _ => Some(("INTERNAL_ERROR".to_string(), counted)),
        };
        Some((pool, failed, token))
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
                error.key = value
                    .map(|value| crate::core::events::KeyFact { label: r.label.clone(), value: value.to_string() });
                error.retryable = Some(true);
            }
        }
        _ => {}
    }
}
