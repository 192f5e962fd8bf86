//! napi glue for the acquisition machine (`core::acquisition`): typed steps, outcomes,
//! events, intents and failures; nothing is decided here.
//!
//! The JS provision loop (`lib/provision.js`) begins a machine ([`begin_acquisition`]),
//! performs each step it is told (a capacity read, a launch), reports each outcome with one
//! synchronous call, and ends the machine exactly once, when the provision has settled
//! ([`acquisition_end`]): while it lives, `reconcile` sees its sandbox id as in flight.
//!
//! With warm pools started (`binding::warm`), a candidate that keeps one is first a claim
//! step: from this process's inventory the step itself takes the member (`Claimed`), or
//! misses and goes on to the cold launch within the same call, so a miss costs no call of
//! its own; with the fleet's inventory the JS side asks PostgreSQL (`Claim`).
//!
//! Why integer keys and not a napi object per provision? A provision makes a handful of
//! calls to its machine; a free function taking an integer costs a fraction of a method
//! call on a wrapped object, and no JS object is made per provision.

use crate::binding::budget::BudgetCore;
use crate::binding::budget::{
    demand_of, refusal_fields, settlement_of, verdict_of, BudgetDemand, BudgetKeyRecord, BudgetSettlement,
    BudgetVerdict,
};
use crate::binding::clock::now_millis;
use crate::binding::error::{contained, guard, internal, AttemptRecord, Failure, NativeError, SkipRecord};
use crate::binding::ids::next_sandbox_id;
use crate::binding::mapping::{write_record, IntentRecord};
use crate::binding::registry::{registry_of, Question, RegistryInner, RouteExtras};
use crate::binding::request::{labels_from, request_of};
use crate::binding::router::{instant, router_of, RouterCore};
use crate::binding::telemetry::ProvisionOutcome;
use crate::core::acquisition::{settle_window_ms, Acquisition, CapacityPlan, Event, Outcome, SharedVerdict, Step};
use crate::core::budget::Applying;
use crate::core::capacity::{validate, Ledger};
use crate::core::clock::iso8601_millis;
use crate::core::failure::{failure_of, Rejections};
use crate::core::health::{Health, Transition};
use crate::core::ids::SandboxKey;
use crate::core::request::Request;
use crate::core::telemetry::{skip_reason, ProvisionOutcome as Ending};
use crate::core::warm::{Member, MissReason};
use napi::bindgen_prelude::{Either, Uint32ArraySlice};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// What the JS side must do next: `step[0]` (a numeric enum: it crosses once per step, in
/// the buffer the JS side lends).
#[napi]
#[derive(Clone, Copy)]
pub enum StepKind {
    /// Launch on the pool in `step[1]`, then report the outcome.
    Launch = 0,
    /// Read that pool's capacity, then report it (`acquisitionAdmit`).
    Admit = 1,
    /// Over: `acquisitionFailure` says how, unless it succeeded.
    Done = 2,
    /// Ask the fleet's inventory (PostgreSQL) for a member of the pool in `step[1]`
    /// (`acquisitionClaimAsk`), then report it (`acquisitionClaimAnswer`).
    Claim = 4,
    /// A member of the pool in `step[1]` was taken from this process's inventory
    /// (`acquisitionMember`); confirm it (`acquisitionClaimed`) or report it lost.
    Claimed = 5,
    /// Reserve that pool's cost in the shared budget ledger, then report it
    /// (`acquisitionBudgetDemand`, the coordinator's answer, `acquisitionBudgetDecided`).
    Reserve = 3,
}

/// What an acquisition carries for warm pools, beside its machine.
pub(crate) enum WarmRole {
    /// A provision that may claim: its request (the claim's rule reads it), and the member
    /// it took or the floor it asks the fleet's inventory with.
    Claimer { request: Rc<Request>, member: Option<Member>, floor: Option<i64> },
    /// A refill of the pool at this registry index.
    Refill { pool: usize },
}

/// One provision's acquisition in flight.
pub(crate) struct Entry {
    /// The provision's sandbox id, stamped on its launches and named by its record.
    pub(crate) id: SandboxKey,
    pub(crate) machine: Acquisition,
    pub(crate) router: Rc<RouterCore>,
    /// The registry it routed on (pool ids).
    pub(crate) registry: Rc<RefCell<RegistryInner>>,
    /// The request's caller labels (validated), for the mapping record.
    pub(crate) labels: Arc<Vec<(String, String)>>,
    /// The pool of the last launch, admission or claim step.
    pub(crate) pool: usize,
    pub(crate) timeout_ms: u64,
    pub(crate) detached: bool,
    /// Warm pools: none unless they are started and the registry keeps one.
    pub(crate) warm: Option<Box<WarmRole>>,
}

impl Entry {
    /// Reports an outcome: sets the clock (`now`, ms), runs `f` with the in-process ledger
    /// (None without one, or when a coordinator keeps the holds), then records the launch's
    /// outcome in the router's health.
    pub(crate) fn report<T>(
        &mut self,
        now: Option<f64>,
        f: impl FnOnce(&mut Acquisition, Option<&mut Ledger>) -> T,
    ) -> T {
        let router = self.router.clone();
        if router.health.is_some() {
            self.machine.set_now(instant(now));
        }
        let out = match router.capacity.as_ref().filter(|c| !c.coordinated) {
            Some(c) => f(&mut self.machine, Some(&mut c.ledger.borrow_mut())),
            None => f(&mut self.machine, None),
        };
        if let Some(h) = &router.health {
            self.machine.report_health(&mut h.borrow_mut());
        }
        if let Some(b) = &router.budgets {
            b.apply(&mut self.machine);
        }
        out
    }

    /// Runs `f` with the router's health, its clock set to `now`.
    fn with_health<T>(&mut self, now: Option<f64>, f: impl FnOnce(&mut Acquisition, Option<&mut Health>) -> T) -> T {
        let router = self.router.clone();
        match &router.health {
            Some(h) => {
                self.machine.set_now(instant(now));
                f(&mut self.machine, Some(&mut h.borrow_mut()))
            }
            None => f(&mut self.machine, None),
        }
    }

    pub(crate) fn pool_id(&self, pool: usize) -> String {
        self.registry.borrow().pool_id(pool).to_string()
    }
}

/// Acquisitions in flight, by key; `ids` indexes their sandbox ids (`reconcile` asks
/// whether a stamped sandbox without a record is still being made).
#[derive(Default)]
struct Machines {
    items: Vec<Option<Entry>>,
    free: Vec<u32>,
    ids: rustc_hash::FxHashSet<SandboxKey>,
}

thread_local! {
    static MACHINES: RefCell<Machines> = RefCell::new(Machines::default());
}

pub(crate) fn insert(entry: Entry) -> u32 {
    MACHINES.with(|m| {
        let mut m = m.borrow_mut();
        m.ids.insert(entry.id);
        match m.free.pop() {
            Some(k) => {
                m.items[k as usize] = Some(entry);
                k
            }
            None => {
                m.items.push(Some(entry));
                (m.items.len() - 1) as u32
            }
        }
    })
}

pub(crate) fn with<T>(key: u32, f: impl FnOnce(&mut Entry) -> T) -> Result<T, Failure> {
    MACHINES.with(|m| match m.borrow_mut().items.get_mut(key as usize).and_then(Option::as_mut) {
        Some(e) => Ok(f(e)),
        None => Err(internal("(an unknown acquisition key)")),
    })
}

/// Starts a provision's acquisition for router `router`, registry `registry` and compiled
/// request `request` (their handles): validates the labels (the request's own check comes
/// first), routes (with `extras`: credential readiness and the resolver's answers; under
/// the router's capacity policy, every candidate in its order), creates the machine and
/// writes its first step into `step` (`[StepKind, pool, machine key]`). Returns the
/// sandbox id: `id` when given (made earlier, because callbacks before this call name it),
/// else a fresh one. Throws the typed `INVALID_REQUEST` / `NO_ELIGIBLE_PROVIDER` error,
/// which names that id. The machine is ended by `acquisitionEnd`, or by the success call
/// when that settles the provision itself. `clockNow`: the router's clock (ms), given only
/// when warm pools are started and the router has a `clock` option (members' ages).
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point on the provision path: flat typed arguments")]
pub fn begin_acquisition(
    env: Env,
    router: u32,
    registry: u32,
    request: u32,
    detached: bool,
    labels_json: Option<String>,
    extras: Option<RouteExtras>,
    id: Option<String>,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<String> {
    guard(&env, || {
        let id = match id {
            Some(id) => id,
            None => next_sandbox_id()?,
        };
        let key = SandboxKey::parse_checked(&id)?;
        let (router, registry, request) = (router_of(router)?, registry_of(registry)?, request_of(request)?);
        let mut begun = begin(&router, &registry, &request, detached, labels_json, extras.as_ref(), key, now);
        if let Err(e) = &mut begun {
            e.sandbox_id = Some(id.clone());
        }
        let machine = begun?;
        step_into(machine, step, clock_now)?;
        Ok(id)
    })
}

#[allow(clippy::too_many_arguments, reason = "the arguments of begin_acquisition")]
fn begin(
    router: &Rc<RouterCore>,
    registry: &Rc<RefCell<RegistryInner>>,
    req: &Rc<Request>,
    detached: bool,
    labels_json: Option<String>,
    extras: Option<&RouteExtras>,
    id: SandboxKey,
    now: Option<f64>,
) -> Result<u32, Failure> {
    let labels = labels_json.as_deref().map(labels_from).transpose()?.unwrap_or_default();
    let mut inner = registry.borrow_mut();
    let hold_ms = settle_window_ms(req.acquisition_timeout_ms, router.callback_timeout_ms);
    let budget = match &router.budgets {
        Some(b) => b.plan(&labels, id, || inner.costs(extras), hold_ms)?,
        None => None,
    };
    // Capacity and budget skips consume no attempt, so they need every candidate.
    let limit = if router.capacity.is_some() || budget.is_some() { None } else { Some(req.max_attempts as usize) };
    let (order, tracking) = router.view(&mut inner, now, |inner, health| {
        let q = Question {
            req: req.as_ref(),
            detached,
            extras,
            provider_order: router.provider_order(),
            health,
            over_budget: &[],
        };
        inner.candidates(&q, limit).map(|order| (order, health.map(|h| (h.slots.clone(), h.now))))
    })?;
    let plan = router.capacity.as_ref().map(|c| CapacityPlan {
        need: req.resources,
        readers: inner.readers.clone(),
        ledger_pools: inner.registry.pools().iter().map(|p| c.ledger_key(&p.id)).collect(),
    });
    // A claim is charged like a launch: the charge follows the member's id, in the
    // in-process ledger (`acquisition_claimed`) or in the claim's transaction (shared).
    let claims = router.claims(&inner);
    drop(inner);
    let mut machine = Acquisition::new(order, req.max_attempts as usize, req.fallback_allowed, plan, router.observe);
    if let Some((slots, now)) = tracking {
        machine.track(slots, now);
    }
    if router.capacity.is_some() {
        // A capacity hold of a successful launch is kept under its sandbox id, so that
        // destroying the sandbox gives it back.
        machine.own(id);
    }
    if let Some(plan) = budget {
        machine.with_budget(plan);
    }
    let warm = claims.map(|c| {
        machine.offer_claims(c);
        Box::new(WarmRole::Claimer { request: Rc::clone(req), member: None, floor: None })
    });
    Ok(insert(Entry {
        id,
        machine,
        router: router.clone(),
        registry: registry.clone(),
        labels: Arc::new(labels),
        pool: 0,
        timeout_ms: req.acquisition_timeout_ms,
        detached,
        warm,
    }))
}

/// What to do now, written into `step`: `step[0]` the [`StepKind`], `step[1]` the pool
/// (registration index) it concerns. `clockNow`: the router's clock (ms) when it has
/// budgets or warm pools; omitted, the wall clock.
#[napi]
pub fn acquisition_step(env: Env, key: u32, step: Uint32ArraySlice<'_>, clock_now: Option<f64>) -> napi::Result<()> {
    guard(&env, || step_into(key, step, clock_now))
}

/// Takes the machine's next step and writes it into `step` (and the key into `step[2]`).
/// A claim from this process's inventory is made here: a hit is the `Claimed` step, a
/// miss goes on to the next step within this call.
pub(crate) fn step_into(key: u32, mut step: Uint32ArraySlice<'_>, clock_now: Option<f64>) -> Result<(), Failure> {
    let (kind, pool) = with(key, |e| loop {
        let router = e.router.clone();
        let next = {
            let mut ledger = router.capacity.as_ref().map(|c| c.ledger.borrow_mut());
            let mut health = router.health.as_ref().map(|h| h.borrow_mut());
            match router.budgets.as_ref().filter(|b| !b.shared) {
                Some(b) => {
                    let mut budgets = b.ledger.borrow_mut();
                    let next = e.machine.next_budgeted(
                        ledger.as_deref_mut(),
                        health.as_deref_mut(),
                        Some((&mut budgets, instant(clock_now))),
                    );
                    drop(budgets);
                    b.flush();
                    next
                }
                None => e.machine.next_with(ledger.as_deref_mut(), health.as_deref_mut()),
            }
        };
        match next {
            Step::Admit(pool) => {
                e.pool = pool;
                break (StepKind::Admit, pool as u32);
            }
            Step::Launch(pool) => {
                e.pool = pool;
                break (StepKind::Launch, pool as u32);
            }
            Step::Claim(pool) => {
                e.pool = pool;
                match claim_step(e, pool, clock_now) {
                    Ok(kind) => break (kind, pool as u32),
                    Err(reason) => e.machine.claim_missed(reason),
                }
            }
            Step::Reserve(pool) => {
                e.pool = pool;
                break (StepKind::Reserve, pool as u32);
            }
            Step::Done => break (StepKind::Done, 0),
        }
    })?;
    // SAFETY: no JavaScript runs during this synchronous call and nothing keeps the slice beyond it.
    let out = unsafe { step.as_mut() };
    if out.len() < 3 {
        return Err(internal("(the step buffer is too small)"));
    }
    out[0] = kind as u32;
    out[1] = pool;
    out[2] = key;
    Ok(())
}

/// The claim step on `pool`: from this process's inventory, the member is taken now
/// (`Claimed`); with the fleet's, the floor is noted for the JS side to ask with (`Claim`).
/// Or the miss (counted in the pool's status).
fn claim_step(e: &mut Entry, pool: usize, clock_now: Option<f64>) -> Result<StepKind, MissReason> {
    let router = e.router.clone();
    let mut warm = router.warm.borrow_mut();
    let registry = e.registry.clone();
    let registry = registry.borrow();
    let p = &registry.registry.pools()[pool];
    let (Some(w), Some(config), Some(WarmRole::Claimer { request, member, floor })) =
        (warm.as_mut(), p.warm, e.warm.as_deref_mut())
    else {
        return Err(MissReason::Empty);
    };
    let shared = w.shared;
    let wp = w.pool(&p.id, config, p.capabilities.max_lifetime);
    let now = instant(clock_now);
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

/// Reports the current candidate's capacity read: the reader's answer as JSON text
/// (serialized once), validated strictly here; anything malformed is `unknown: MALFORMED`.
/// `now`: the router's injected clock (ms); omitted, the wall clock.
#[napi]
pub fn acquisition_admit(env: Env, key: u32, measurement_json: String, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || {
        let m = validate(&serde_json::from_str::<Value>(&measurement_json).unwrap_or(Value::Null));
        with(key, |e| {
            let router = e.router.clone();
            if let Some(c) = &router.capacity {
                e.with_health(now, |machine, health| machine.admit_with(&mut c.ledger.borrow_mut(), &m, health));
            }
            if let Some(b) = &router.budgets {
                b.apply(&mut e.machine);
            }
        })
    })
}

/// One dimension of a measurement with this request's need: what a shared coordinator
/// decides on.
#[napi(object)]
pub struct DemandDim {
    /// `cpu`, `memory`, `disk`, `sandboxes`, …
    pub resource: String,
    /// Reported usage.
    pub used: f64,
    /// Account limit.
    pub limit: f64,
    /// `max(configured demand, request need)`.
    pub need: f64,
}

/// What to ask a shared coordinator for one admission.
#[napi(object)]
pub struct Demand {
    /// The pool's id.
    pub provider_id: String,
    /// The dimensions to decide on.
    pub dims: Vec<DemandDim>,
    /// How long the hold may stay unsettled, ms (the launch's settle window: its deadline,
    /// the mapping write and slack; see `core::acquisition::settle_window_ms`).
    pub hold_ms: f64,
    /// The provision's sandbox id: a successful launch's hold is kept under it, so that
    /// destroying the sandbox gives the hold back.
    pub sandbox_id: String,
}

/// Under a shared coordinator, step one of an admission: the measurement (JSON text,
/// validated here) as what to ask the coordinator, or null when the machine skipped the
/// pool already (an unknown or malformed measurement).
#[napi]
pub fn acquisition_demand(
    env: Env,
    key: u32,
    measurement_json: String,
    now: Option<f64>,
) -> napi::Result<Option<Demand>> {
    guard(&env, || {
        let m = validate(&serde_json::from_str::<Value>(&measurement_json).unwrap_or(Value::Null));
        with(key, |e| {
            let hold_ms = settle_window_ms(e.timeout_ms, e.router.callback_timeout_ms) as f64;
            let provider_id = e.pool_id(e.pool);
            let sandbox_id = e.id.to_string();
            e.with_health(now, |machine, health| machine.shared_demand(&m, health)).map(|dims| Demand {
                sandbox_id,
                provider_id,
                dims: dims
                    .into_iter()
                    .map(|d| DemandDim { resource: d.resource, used: d.used, limit: d.limit, need: d.need })
                    .collect(),
                hold_ms,
            })
        })
    })
}

/// The coordinator's verdict on one admission.
#[napi(object)]
pub struct AdmitVerdict {
    /// The hold's token when admitted.
    pub token: Option<f64>,
    /// The first dimension without room when not.
    pub resource: Option<String>,
}

/// Under a shared coordinator, step two: its verdict (null: the coordinator could not be
/// asked; the pool is skipped as `UNKNOWN: COORDINATOR_UNAVAILABLE`).
#[napi]
pub fn acquisition_admit_decided(
    env: Env,
    key: u32,
    verdict: Option<AdmitVerdict>,
    now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        let verdict = match verdict {
            Some(AdmitVerdict { token: Some(t), .. }) if t.is_finite() && t >= 1.0 => SharedVerdict::Admitted(t as u64),
            Some(AdmitVerdict { resource: Some(r), .. }) => SharedVerdict::Exhausted(r),
            _ => SharedVerdict::Unavailable,
        };
        with(key, |e| {
            e.with_health(now, |machine, health| machine.admit_shared(verdict, health));
            if let Some(b) = &e.router.budgets {
                b.apply(&mut e.machine);
            }
        })
    })
}

/// Under a shared budget ledger, what to ask it for the current candidate
/// ([`StepKind::Reserve`]) at `now` (the router's clock, ms; omitted: the wall clock).
#[napi]
pub fn acquisition_budget_demand(env: Env, key: u32, now: Option<f64>) -> napi::Result<Option<BudgetDemand>> {
    guard(&env, || {
        with(key, |e| {
            let router = e.router.clone();
            let (Some(b), Some(plan)) = (&router.budgets, e.machine.budget_plan()) else { return None };
            let hold_ms = settle_window_ms(e.timeout_ms, router.callback_timeout_ms);
            Some(demand_of(b, plan, e.pool, instant(now), hold_ms))
        })
    })
}

/// Under a shared budget ledger, its answer for the current candidate (null: it could not
/// be asked). `now`: the router's clock (ms).
#[napi]
pub fn acquisition_budget_decided(
    env: Env,
    key: u32,
    verdict: Option<BudgetVerdict>,
    now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        with(key, |e| {
            let router = e.router.clone();
            let Some(b) = &router.budgets else { return };
            let Some(keys) = e.machine.budget_plan().map(|p| p.shared_keys().to_vec()) else { return };
            let verdict = verdict_of(b, &keys, verdict);
            let at = instant(now);
            let mut health = router.health.as_ref().map(|h| h.borrow_mut());
            e.machine.reserved_shared(verdict, at, health.as_deref_mut());
        })
    })
}

/// Under a shared budget ledger, the settlement the machine decided since the last call,
/// for the JS side to write (null: none).
#[napi]
pub fn acquisition_budget_settlement(env: Env, key: u32) -> napi::Result<Option<BudgetSettlement>> {
    guard(&env, || {
        with(key, |e| {
            let sandbox = e.machine.budget_plan().map(|p| p.sandbox)?;
            e.machine.take_budget_settle().map(|how| settlement_of(sandbox, how))
        })
    })
}

/// A shared hold the machine settled, for the JS side to write to the coordinator.
#[napi(object)]
pub struct HoldSettlement {
    /// The hold's token.
    pub token: f64,
    /// Kept as an assumption (true) or released (false).
    pub allocated: bool,
}

/// The shared hold settled by the last report, if any (taken: a second call returns null).
#[napi]
pub fn acquisition_settlement(env: Env, key: u32) -> napi::Result<Option<HoldSettlement>> {
    guard(&env, || {
        with(key, |e| e.machine.take_settlement().map(|(t, allocated)| HoldSettlement { token: t as f64, allocated }))
    })
}

/// The launch returned a handle with the provider's sandbox id. When the router writes the
/// default store itself, the record is written here too (`{ id, pool id,
/// providerSandboxId, labels + the id and fleet labels, createdAt, detached }`).
/// `now`: the router's injected clock (ms); omitted, the wall clock.
///
/// Returns what is left to do: `Settled` when this call wrote the record and nothing more
/// is asked of the machine (no observer reads its events, no coordinator its hold's
/// settlement), so it ended the machine too; `Recorded` when it wrote the record and the
/// machine lives on for those reads; `Unrecorded` when the caller's store must be written.
#[napi]
pub fn acquisition_succeeded(
    env: Env,
    key: u32,
    provider_sandbox_id: String,
    now: Option<f64>,
) -> napi::Result<Success> {
    guard(&env, || {
        let success = with(key, |e| {
            e.report(now, |m, l| m.succeeded(l));
            if let Some(w) = e.router.warm.borrow_mut().as_mut() {
                w.launch_succeeded(e.registry.borrow().pool_id(e.pool));
            }
            let Some(store) = &e.router.store else { return Success::Unrecorded };
            let registry = e.registry.borrow();
            write_record(
                store,
                e.id,
                registry.pool_id(e.pool),
                &provider_sandbox_id,
                e.labels.clone(),
                e.router.fleet.clone(),
                e.detached,
            );
            let coordinated = e.router.capacity.as_ref().is_some_and(|c| c.coordinated);
            if e.machine.observing() || coordinated {
                Success::Recorded
            } else {
                Success::Settled
            }
        })?;
        if let Success::Settled = success {
            acquisition_end(key);
        }
        Ok(success)
    })
}

/// What is left after a success (see [`acquisition_succeeded`]).
#[napi]
#[derive(Clone, Copy)]
pub enum Success {
    /// The record is written and the machine ended: the provision has settled.
    Settled = 0,
    /// The record is written; the machine's events or hold settlement are still to be read.
    Recorded = 1,
    /// The caller's store must be written.
    Unrecorded = 2,
}

/// The launch failed; `code` / `retryable`: the classifier's answer, if it gave one of the
/// right types (the machine sanitizes and decides).
#[napi]
pub fn acquisition_failed(
    env: Env,
    key: u32,
    code: Option<String>,
    retryable: Option<bool>,
    now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || with(key, |e| e.report(now, |m, l| m.failed(l, code.as_deref(), retryable))))
}

/// The launch resolved to something that is not a handle.
#[napi]
pub fn acquisition_malformed(env: Env, key: u32, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || with(key, |e| e.report(now, |m, l| m.malformed(l))))
}

/// The launch did not settle within its deadline.
#[napi]
pub fn acquisition_timed_out(env: Env, key: u32, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || with(key, |e| e.report(now, |m, l| m.timed_out(l))))
}

/// The runtime threw the router's own package error with this code (or the launch intent
/// could not be written: `MAPPING_INTENT_FAILED`): nothing was launched.
#[napi]
pub fn acquisition_package_failed(env: Env, key: u32, code: String, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || with(key, |e| e.report(now, |m, l| m.package_failed(l, &code))))
}

/// The candidates, best first (pool ids): the order `provision.ranked` reports.
#[napi]
pub fn acquisition_candidates(env: Env, key: u32) -> napi::Result<Vec<String>> {
    guard(&env, || {
        with(key, |e| {
            let registry = e.registry.borrow();
            e.machine.candidates().iter().map(|&i| registry.pool_id(i).to_string()).collect()
        })
    })
}

/// Event types the machine decides (`lib/events.js` adds the others).
#[napi(string_enum)]
pub enum EventType {
    /// `capacity.admitted`
    #[napi(value = "capacity.admitted")]
    CapacityAdmitted,
    /// `capacity.skipped`
    #[napi(value = "capacity.skipped")]
    CapacitySkipped,
    /// `attempt.started`
    #[napi(value = "attempt.started")]
    AttemptStarted,
    /// `attempt.succeeded`
    #[napi(value = "attempt.succeeded")]
    AttemptSucceeded,
    /// `attempt.failed`
    #[napi(value = "attempt.failed")]
    AttemptFailed,
    /// `fallback.advanced`
    #[napi(value = "fallback.advanced")]
    FallbackAdvanced,
    /// `provision.exhausted`
    #[napi(value = "provision.exhausted")]
    ProvisionExhausted,
    /// `health.circuit.opened`
    #[napi(value = "health.circuit.opened")]
    CircuitOpened,
    /// `health.circuit.half-open`
    #[napi(value = "health.circuit.half-open")]
    CircuitHalfOpen,
    /// `health.circuit.closed`
    #[napi(value = "health.circuit.closed")]
    CircuitClosed,
    /// `health.skipped`
    #[napi(value = "health.skipped")]
    HealthSkipped,
    /// `warm.miss`
    #[napi(value = "warm.miss")]
    WarmMiss,
    /// `budget.reserved`
    #[napi(value = "budget.reserved")]
    BudgetReserved,
    /// `budget.released`
    #[napi(value = "budget.released")]
    BudgetReleased,
    /// `budget.refused`
    #[napi(value = "budget.refused")]
    BudgetRefused,
}

/// One decided event, with the fields its type documents (the JS side adds `at` and the
/// sandbox id).
#[napi(object)]
pub struct EventRecord {
    /// The event type.
    #[napi(js_name = "type")]
    pub kind: EventType,
    /// The pool (every type but `fallback.advanced` and `provision.exhausted`).
    pub provider_id: Option<String>,
    /// Attempt number (`attempt.*`, `fallback.advanced`).
    pub attempt: Option<u32>,
    /// Sanitized code (`attempt.failed`, `provision.exhausted`).
    pub code: Option<String>,
    /// `attempt.failed`.
    pub retryable: Option<bool>,
    /// `capacity.skipped`: `UNKNOWN` or `EXHAUSTED`.
    pub status: Option<String>,
    /// `capacity.skipped`: the unknown reason or the full dimension; `health.*`: why.
    pub reason: Option<String>,
    /// `capacity.skipped`: the reason as a bounded code (`core::telemetry::skip_reason`:
    /// the unknown reason, or `EXHAUSTED_<DIMENSION>`), what telemetry counts.
    pub skip_reason: Option<String>,
    /// `fallback.advanced`: from this pool…
    pub from_provider_id: Option<String>,
    /// …to this one.
    pub to_provider_id: Option<String>,
    /// `health.circuit.opened`: the consecutive failures that opened it.
    pub consecutive_failures: Option<u32>,
    /// `health.circuit.opened`: this cooldown, ms.
    pub cooldown_ms: Option<f64>,
    /// `health.circuit.opened`: when the pool may be probed (ISO 8601).
    pub retry_at: Option<String>,
    /// `budget.reserved` / `budget.released`: the pool's cost.
    pub cost: Option<f64>,
    /// `budget.reserved` / `budget.released`: the ids of the rules it was reserved against.
    pub rules: Option<Vec<String>>,
    /// `budget.refused`: the rule that refused.
    pub rule: Option<String>,
    /// `budget.refused`: the rule's label and the request's value of it.
    pub key: Option<BudgetKeyRecord>,
    /// `budget.refused`: `cost`, `launches` or `concurrent`.
    pub dimension: Option<String>,
    /// `budget.refused`: that limit's value.
    pub limit: Option<f64>,
    /// `budget.refused`: used in the window.
    pub used: Option<f64>,
    /// `budget.refused`: reserved by launches in flight.
    pub reserved: Option<f64>,
    /// `budget.refused`: when the window frees what is used (ISO 8601).
    pub resets_at: Option<String>,
}

fn event_record(e: Event, id: &dyn Fn(usize) -> String, budgets: Option<(&BudgetCore, &[String])>) -> EventRecord {
    let mut r = EventRecord {
        kind: EventType::AttemptStarted,
        provider_id: None,
        attempt: None,
        code: None,
        retryable: None,
        status: None,
        reason: None,
        skip_reason: None,
        from_provider_id: None,
        to_provider_id: None,
        consecutive_failures: None,
        cooldown_ms: None,
        retry_at: None,
        cost: None,
        rules: None,
        rule: None,
        key: None,
        dimension: None,
        limit: None,
        used: None,
        reserved: None,
        resets_at: None,
    };
    match e {
        Event::CapacityAdmitted { pool } => {
            r.kind = EventType::CapacityAdmitted;
            r.provider_id = Some(id(pool));
        }
        Event::CapacitySkipped { pool, status, reason } => {
            r.kind = EventType::CapacitySkipped;
            r.provider_id = Some(id(pool));
            r.status = Some(status.name().to_string());
            r.skip_reason = Some(skip_reason(status, &reason).to_string());
            r.reason = Some(reason);
        }
        Event::AttemptStarted { pool, attempt } => {
            r.provider_id = Some(id(pool));
            r.attempt = Some(attempt);
        }
        Event::AttemptSucceeded { pool, attempt } => {
            r.kind = EventType::AttemptSucceeded;
            r.provider_id = Some(id(pool));
            r.attempt = Some(attempt);
        }
        Event::AttemptFailed { pool, attempt, code, retryable } => {
            r.kind = EventType::AttemptFailed;
            r.provider_id = Some(id(pool));
            r.attempt = Some(attempt);
            r.code = Some(code);
            r.retryable = Some(retryable);
        }
        Event::FallbackAdvanced { from, to, attempt } => {
            r.kind = EventType::FallbackAdvanced;
            r.from_provider_id = Some(id(from));
            r.to_provider_id = Some(id(to));
            r.attempt = Some(attempt);
        }
        Event::ProvisionExhausted { code } => {
            r.kind = EventType::ProvisionExhausted;
            r.code = Some(code);
        }
        Event::Circuit { pool, transition } => {
            r.provider_id = Some(id(pool));
            match transition {
                Transition::Opened { retry_at, cooldown_ms, cause, failures } => {
                    r.kind = EventType::CircuitOpened;
                    r.reason = Some(cause.code().to_string());
                    r.consecutive_failures = Some(failures);
                    r.cooldown_ms = Some(cooldown_ms as f64);
                    r.retry_at = Some(iso8601_millis(retry_at));
                }
                Transition::HalfOpen => r.kind = EventType::CircuitHalfOpen,
                Transition::Closed => r.kind = EventType::CircuitClosed,
            }
        }
        Event::HealthSkipped { pool } => {
            r.kind = EventType::HealthSkipped;
            r.provider_id = Some(id(pool));
            r.reason = Some("CIRCUIT_OPEN".to_string());
        }
        Event::WarmMiss { pool, reason } => {
            r.kind = EventType::WarmMiss;
            r.provider_id = Some(id(pool));
            r.reason = Some(reason.code().to_string());
        }
        Event::BudgetReserved { pool, cost } | Event::BudgetReleased { pool, cost, .. } => {
            r.kind = match e {
                Event::BudgetReleased { reason, .. } => {
                    r.reason = Some(reason.to_string());
                    EventType::BudgetReleased
                }
                _ => EventType::BudgetReserved,
            };
            r.provider_id = Some(id(pool));
            r.cost = Some(cost);
            r.rules = budgets.map(|(_, rules)| rules.to_vec());
        }
        Event::BudgetRefused { pool, refusal } => {
            r.kind = EventType::BudgetRefused;
            r.provider_id = Some(id(pool));
            r.reason = Some(crate::core::budget::BUDGET_EXCEEDED.to_string());
            r.retryable = Some(refusal.retryable);
            if let Some((b, _)) = budgets {
                let mut fields = *NativeError::new(crate::core::error::ErrorClass::BudgetExhausted, "", "");
                if b.with_rule(refusal.rule, |rule| refusal_fields(&mut fields, rule, &refusal)).is_some() {
                    r.rule = fields.rule;
                    r.key = fields.key;
                    r.dimension = fields.dimension;
                    r.limit = fields.limit;
                    r.used = fields.used;
                    r.reserved = fields.reserved;
                    r.resets_at = fields.resets_at.flatten();
                }
            }
        }
    }
    r
}

/// Events decided since the last call (empty unless the router has an observer or telemetry).
#[napi]
pub fn acquisition_events(env: Env, key: u32) -> napi::Result<Vec<EventRecord>> {
    guard(&env, || {
        with(key, |e| {
            let registry = e.registry.clone();
            let registry = registry.borrow();
            let id = |pool: usize| registry.pool_id(pool).to_string();
            let router = e.router.clone();
            let rules: Vec<String> = match (&router.budgets, e.machine.budget_plan()) {
                (Some(b), Some(p)) => match &p.applying {
                    Applying::Shared(keys) => keys.iter().map(|k| b.rule_ids[k.rule].clone()).collect(),
                    Applying::Local(buckets) => {
                        let ledger = b.ledger.borrow();
                        buckets.iter().map(|&bk| b.rule_ids[ledger.rule_of(bk)].clone()).collect()
                    }
                },
                _ => Vec::new(),
            };
            let budgets = router.budgets.as_ref().map(|b| (b, rules.as_slice()));
            e.machine.take_events().into_iter().map(|ev| event_record(ev, &id, budgets)).collect()
        })
    })
}

/// How an acquisition failed: the error to raise and what the JS side does about it.
#[napi(object)]
pub struct AcquisitionFailure {
    /// The typed error (`lib/errors.js` `fromNative` builds its instance).
    pub error: NativeError,
    /// Whether a sandbox may exist now (the launch intent then becomes `failed`).
    pub may_exist: bool,
    /// The runtime threw the router's own package error: rethrow that error as it is.
    pub package: bool,
    /// How the provision ended, as telemetry names it (`core::telemetry`).
    pub outcome: ProvisionOutcome,
}

/// How the machine failed, once over (null while it runs or after a success).
#[napi]
pub fn acquisition_failure(env: Env, key: u32) -> napi::Result<Option<AcquisitionFailure>> {
    guard(&env, || {
        with(key, |e| {
            let registry = e.registry.borrow();
            let id = |pool: usize| registry.pool_id(pool);
            let sandbox_id = e.id.to_string();
            let capacity = e.router.capacity.is_some();
            let f = failure_of(&e.machine, id, &sandbox_id, e.timeout_ms, capacity)?;
            let skips = || -> Vec<SkipRecord> {
                e.machine
                    .skipped()
                    .iter()
                    .map(|s| SkipRecord {
                        provider_id: id(s.pool).to_string(),
                        status: s.status.name().to_string(),
                        reason: s.reason.clone(),
                    })
                    .collect()
            };
            let mut error = *NativeError::new(f.class, &f.code, f.message);
            error.provider_id = f.pool.map(|p| id(p).to_string());
            error.sandbox_id = Some(sandbox_id);
            error.timeout_ms = f.timeout_ms.map(|t| t as f64);
            error.summary = f.summary;
            error.rejections = f.rejections.map(|r| match r {
                Rejections::Circuit(pool) => Either::A(vec![crate::binding::error::RejectionRecord {
                    provider_id: id(pool).to_string(),
                    reasons: vec![crate::binding::error::ReasonRecord {
                        code: "CIRCUIT_OPEN".to_string(),
                        detail: "circuit excluded it at launch time".to_string(),
                    }],
                }]),
                Rejections::Capacity => Either::B(skips()),
            });
            error.attempts = f.attempts.then(|| {
                e.machine
                    .attempts()
                    .iter()
                    .map(|a| AttemptRecord {
                        provider_id: id(a.pool).to_string(),
                        code: a.code.clone(),
                        retryable: a.retryable,
                    })
                    .collect()
            });
            error.capacity_rejections = f.capacity_rejections.then(skips);
            if let Some(b) = &e.router.budgets {
                budget_fields(&mut error, b, &e.machine);
            }
            let outcome = e.machine.outcome().map_or(Ending::Terminal, Ending::of_machine).into();
            Some(AcquisitionFailure { error, may_exist: f.may_exist, package: f.package, outcome })
        })
    })
}

/// The budget fields of a budget refusal's error: the reported refusal's (the first
/// retryable one, else the first), or the rule that refuses without its shared ledger.
fn budget_fields(error: &mut NativeError, b: &BudgetCore, machine: &Acquisition) {
    match machine.outcome() {
        Some(Outcome::BudgetExhausted) => {
            let all: Vec<crate::core::budget::Refusal> =
                machine.budget_refusals().iter().flat_map(|(_, rs)| rs.iter().cloned()).collect();
            if let Some(r) = crate::core::budget::reported(&all) {
                b.with_rule(r.rule, |rule| refusal_fields(error, rule, r));
            }
        }
        Some(Outcome::BudgetUnavailable { rule }) => {
            let value = machine
                .budget_plan()
                .and_then(|p| p.shared_keys().iter().find(|k| k.rule == *rule))
                .map(|k| k.value.clone());
            b.with_rule(*rule, |r| {
                error.rule = Some(r.id.clone());
                error.key = value.map(|value| BudgetKeyRecord { label: r.label.clone(), value: value.to_string() });
                error.retryable = Some(true);
            });
        }
        _ => {}
    }
}

/// The intent record of the current launch (`state`: `launching` before it, `failed` when
/// it ended with its outcome unknown), as the store writes it: the pool of the last
/// launch, times from the wall clock, `expiresAt` after the launch's settle window, and
/// this router as its owner.
#[napi]
pub fn acquisition_intent(env: Env, key: u32, state: String) -> napi::Result<IntentRecord> {
    guard(&env, || {
        if state != "launching" && state != "failed" {
            return Err(internal("(an unknown intent state)"));
        }
        with(key, |e| {
            let now = now_millis() as f64;
            let owner = &e.router.owner;
            IntentRecord {
                id: e.id.to_string(),
                provider_id: e.pool_id(e.pool),
                state,
                started_at: now,
                expires_at: now + settle_window_ms(e.timeout_ms, e.router.callback_timeout_ms) as f64,
                owner_host: owner.host.clone(),
                owner_pid: owner.pid,
                owner_session: owner.session.clone(),
            }
        })
    })
}

/// Forgets the machine (its key may be reused): the provision has settled. A half-open
/// trial token it still holds is freed. Ending an unknown key does nothing.
#[napi]
pub fn acquisition_end(key: u32) {
    contained((), || {
        let ended = MACHINES.with(|m| {
            let mut m = m.borrow_mut();
            let entry = m.items.get_mut(key as usize).and_then(Option::take);
            if let Some(e) = &entry {
                let id = e.id;
                m.ids.remove(&id);
                m.free.push(key);
            }
            entry
        });
        if let Some(mut e) = ended {
            if let Some(h) = &e.router.health {
                e.machine.abandon(&mut h.borrow_mut());
            }
        }
    })
}

/// Whether a machine in flight (of any router in this process) made sandbox id `id`. Ids
/// are 128 random bits, so another router's provision never answers for this one's.
#[napi]
pub fn acquisition_in_flight(id: String) -> bool {
    contained(false, || with_in_flight(|in_flight| in_flight(&id)))
}

/// Runs `f` with that same question (`acquisitionInFlight`) over the machines' index,
/// borrowed once: `reconcile` asks it of every id of a run in one native call.
pub(crate) fn with_in_flight<T>(f: impl FnOnce(&dyn Fn(&str) -> bool) -> T) -> T {
    MACHINES.with(|m| {
        let m = m.borrow();
        f(&|id| SandboxKey::parse(id).is_some_and(|k| m.ids.contains(&k)))
    })
}

/// Machines in flight (for the leak tests).
#[napi]
pub fn acquisitions_in_flight() -> u32 {
    MACHINES.with(|m| m.borrow().items.iter().filter(|e| e.is_some()).count() as u32)
}
