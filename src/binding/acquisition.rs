//! napi glue for a router's provision jobs (`core::router::provision`): typed steps,
//! outcomes, events, intents and failures; nothing is decided here.
//!
//! The JS provision loop (`lib/provision.js`) begins a job ([`begin_acquisition`]),
//! performs each step it is told (a capacity read, a launch), reports each outcome with one
//! synchronous call, and ends the job exactly once, when the provision has settled
//! ([`acquisition_end`]): while it lives, `reconcile` sees its sandbox id as in flight.

use crate::binding::clock::now_millis;
use crate::binding::clock::{now_and_wall, now_of};
use crate::binding::error::{error_object, guard, internal, Failure};
use crate::binding::records::{
    AdmitVerdict, BudgetDemand, BudgetSettlement, BudgetVerdict, DemandRecord, HoldSettlement, IntentRecord,
    MappingRecord,
};
use crate::binding::registry::RouteExtras;
use crate::binding::request::{labels_from, CompiledRequest};
use crate::binding::router::RouterState;
use crate::binding::telemetry::ProvisionOutcome;
use crate::binding::values::events_array;
use crate::core::acquisition::SharedVerdict;
use crate::core::capacity::{validate, Measurement, UnknownReason};
use crate::core::ids::SandboxKey;
use crate::core::router::pools::Extras;
use crate::core::router::step::{flags, Next};
use crate::core::router::Router;
use napi::bindgen_prelude::{Array, External, Object, Uint32ArraySlice};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;

/// Every step kind by name (`step[0]` holds the number; `core::router::step::StepKind`
/// says what each asks of JavaScript).
#[napi]
pub fn step_kinds() -> std::collections::HashMap<String, u32> {
    crate::core::router::step::StepKind::ALL.iter().map(|(kind, name)| (name.to_string(), *kind as u32)).collect()
}

/// The step flags (`step[4]`), as `core::router::step::flags` defines them.
#[napi(object)]
pub struct StepFlags {
    /// Events to read (`acquisitionEvents`).
    pub events: u32,
    /// Writes for the shared ledger to perform (`acquisitionWrites`).
    pub writes: u32,
    /// The job is ended already.
    pub ended: u32,
    /// `Unintent`: write the intent as failed.
    pub failed_intent: u32,
    /// Router events to hand on (`routerEvents`).
    pub router_events: u32,
    /// Warm work may be due (`warmPoll`).
    pub warm: u32,
    /// Start more lanes of a reconcile run (`reconcileForks`).
    pub fork: u32,
    /// `ReconcileRead`: read the store's intents.
    pub intents: u32,
    /// `Persist` / `Unmap`: the step's writes in one transaction with the shared ledger's.
    pub combined: u32,
    /// `Reserve`: take the read sequence in the reservation's transaction.
    pub sequence: u32,
    /// `Reserve`: write the launch intent in the reservation's transaction too.
    pub intent: u32,
    /// Waiting provisions to wake (`routerWakes`).
    pub wake: u32,
}

/// The step flags' values.
#[napi]
pub fn step_flags() -> StepFlags {
    StepFlags {
        events: flags::EVENTS,
        writes: flags::WRITES,
        ended: flags::ENDED,
        failed_intent: flags::FAILED_INTENT,
        router_events: flags::ROUTER_EVENTS,
        warm: flags::WARM,
        fork: flags::FORK,
        intents: flags::INTENTS,
        combined: flags::COMBINED,
        sequence: flags::SEQUENCE,
        intent: flags::INTENT,
        wake: flags::WAKE,
    }
}

/// Writes a step into the buffer JavaScript lent: `[kind, pool, job key, bound ms, flags]`.
// The step crosses in a lent Uint32Array: the 10,000-in-flight provision floor (≥ 0.6x) needs it.
pub(crate) fn write_step(mut step: Uint32ArraySlice<'_>, key: u32, next: Next) -> Result<(), Failure> {
    // SAFETY: no JavaScript runs during this synchronous call and nothing keeps the slice beyond it.
    let out = unsafe { step.as_mut() };
    if out.len() < 5 {
        return Err(internal("(the step buffer is too small)"));
    }
    out[0] = next.kind as u32;
    out[1] = next.pool as u32;
    out[2] = key;
    out[3] = next.bound_ms.min(u64::from(u32::MAX)) as u32;
    out[4] = next.flags;
    Ok(())
}

/// Runs `f` on the router and writes the step it answers for job `key`.
fn stepping(
    env: &Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    f: impl FnOnce(&mut Router) -> Result<Next, Failure>,
) -> napi::Result<()> {
    guard(env, || {
        let next = f(&mut router.router.borrow_mut())?;
        write_step(step, key, next)
    })
}

/// Starts a provision's job on `router` for compiled `request`: validates the labels, routes
/// (with `extras`: credential readiness and the resolver's answers), creates the job and
/// writes its first step into `step`. Returns the sandbox id: `id` when given (made earlier,
/// because callbacks before this call name it), else a fresh one. Throws the typed
/// `INVALID_REQUEST` / `NO_ELIGIBLE_PROVIDER` error, which names that id. `now`: the health
/// clock; `clockNow`: the router's (each omitted: the wall clock).
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point on the provision path: flat typed arguments")]
pub fn begin_acquisition(
    env: Env,
    router: &External<RouterState>,
    request: &External<CompiledRequest>,
    detached: bool,
    labels_json: Option<String>,
    extras: Option<RouteExtras>,
    id: Option<String>,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<String> {
    guard(&env, || {
        let key = match id {
            Some(id) => SandboxKey::parse_checked(&id)?,
            None => router.next_id()?,
        };
        let limits = router.router.borrow().label_limits;
        let labels = match labels_json.as_deref().map(|text| labels_from(text, &limits)).transpose() {
            Ok(l) => l.unwrap_or_default(),
            Err(mut e) => {
                e.sandbox_id = Some(key.to_string());
                return Err(e);
            }
        };
        let extras = extras.as_ref().map(Extras::from);
        let (job, next) = router.router.borrow_mut().begin(
            &request.req,
            detached,
            labels,
            extras.as_ref(),
            key,
            now_of(now, clock_now),
        )?;
        write_step(step, job, next)?;
        Ok(key.to_string())
    })
}

/// Job `key`'s current step, written into `step`. `clockNow`: the router's clock (ms).
#[napi]
pub fn acquisition_step(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.step(key, now_of(None, clock_now)))
}

/// How a capacity read ended.
#[napi]
pub enum ReadOutcome {
    /// The reader answered (its answer's JSON text is given).
    Answered = 0,
    /// The reader threw or rejected.
    Threw = 1,
    /// The reader did not answer within the step's bound.
    TimedOut = 2,
}

pub(crate) fn measurement_of(json: Option<&str>, read: ReadOutcome) -> Measurement {
    match read {
        ReadOutcome::Answered => {
            validate(&json.and_then(|t| serde_json::from_str::<Value>(t).ok()).unwrap_or(Value::Null))
        }
        ReadOutcome::Threw => Measurement::Unknown(UnknownReason::ReadFailed),
        ReadOutcome::TimedOut => Measurement::Unknown(UnknownReason::Timeout),
    }
}

/// Reports the current candidate's capacity read (`read`; the answer's JSON text when it
/// answered, validated strictly here: anything malformed is `unknown: MALFORMED`), and
/// writes the next step.
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments")]
pub fn acquisition_admit(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    measurement_json: Option<String>,
    read: ReadOutcome,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    let m = measurement_of(measurement_json.as_deref(), read);
    stepping(&env, router, key, step, |r| r.admit(key, &m, now_of(now, clock_now)))
}

/// Under a shared coordinator, the read of a `Coordinate` step: what to ask the coordinator,
/// or null when the pool is skipped already (an unknown or malformed measurement; the next
/// step is written then).
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments")]
pub fn acquisition_demand(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    measurement_json: Option<String>,
    read: ReadOutcome,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<Option<DemandRecord>> {
    guard(&env, || {
        let m = measurement_of(measurement_json.as_deref(), read);
        let answer = router.router.borrow_mut().demand(key, &m, now_of(now, clock_now))?;
        match answer {
            Ok(d) => Ok(Some(DemandRecord::from(d))),
            Err(next) => {
                write_step(step, key, next)?;
                Ok(None)
            }
        }
    })
}

/// Under a shared coordinator, its verdict (null: it could not be asked), and the next step.
#[napi]
pub fn acquisition_admit_decided(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    verdict: Option<AdmitVerdict>,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    let verdict = match verdict {
        Some(AdmitVerdict { token: Some(t), .. }) if t.is_finite() && t >= 1.0 => SharedVerdict::Admitted(t as u64),
        Some(AdmitVerdict { paced: Some(p), retry_in_ms: Some(ms), .. }) if ms.is_finite() => {
            match crate::core::pacing::reason_of(&p) {
                Some(reason) => SharedVerdict::Paced { reason, in_ms: ms.ceil() as i64 },
                None => SharedVerdict::Unavailable,
            }
        }
        Some(AdmitVerdict { resource: Some(r), .. }) => SharedVerdict::Exhausted(r),
        _ => SharedVerdict::Unavailable,
    };
    stepping(&env, router, key, step, |r| r.admit_decided(key, verdict, now_of(now, clock_now)))
}

/// Under a shared budget ledger, what to ask it for the current candidate.
#[napi]
pub fn acquisition_budget_demand(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    clock_now: Option<f64>,
) -> napi::Result<Option<BudgetDemand>> {
    guard(&env, || Ok(router.router.borrow_mut().budget_demand(key, now_of(None, clock_now))?.map(BudgetDemand::from)))
}

/// Under a shared budget ledger, its answer for the current candidate (null: it could not
/// be asked) and whether its transaction wrote the launch intent (step flag `intent`), and
/// the next step.
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point on the provision path: flat typed arguments")]
pub fn acquisition_budget_decided(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    verdict: Option<BudgetVerdict>,
    intent_written: bool,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    let verdict = verdict.as_ref().map(BudgetVerdict::to_core);
    stepping(&env, router, key, step, |r| r.budget_decided(key, verdict, intent_written, now_of(now, clock_now)))
}

/// What a job decided to write to the shared ledger (flag `writes`): each absent when none.
#[napi(object)]
pub struct WritesRecord {
    /// A capacity hold settled.
    pub hold: Option<HoldSettlement>,
    /// How long an allocation is assumed (the coordinator keeps it that long), ms.
    pub hold_ttl_ms: f64,
    /// A budget reservation settled.
    pub budget: Option<BudgetSettlement>,
    /// The pool it was made on (`routerBudgetSettled` names it).
    pub budget_pool: Option<String>,
    /// A pool to cool down for the whole fleet (`cool`): a classifier's `retryAfterMs`.
    pub cooldown: Option<CooldownWrite>,
}

/// A fleet-wide `Retry-After` cooldown to write (`PostgresMappingStore` as coordinator).
#[napi(object)]
pub struct CooldownWrite {
    /// The pool's id.
    pub provider_id: String,
    /// How long it cools down, ms.
    pub ms: f64,
}

/// The writes job `key` decided since the last call.
#[napi]
pub fn acquisition_writes(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<WritesRecord> {
    guard(&env, || {
        let w = router.router.borrow_mut().writes(key)?;
        Ok(WritesRecord {
            hold_ttl_ms: w.hold.map_or(0.0, |(_, _, ttl)| ttl as f64),
            hold: w.hold.map(|(token, allocated, _)| HoldSettlement { token: token as f64, allocated }),
            budget_pool: w.budget.as_ref().map(|(_, _, pool)| pool.clone()),
            budget: w.budget.map(|(s, how, _)| BudgetSettlement::of(s, how)),
            cooldown: w.cooldown.map(|(provider_id, ms)| CooldownWrite { provider_id, ms: ms as f64 }),
        })
    })
}

/// The shared ledger settled sandbox `sandboxId`'s reservation on pool `providerId` with
/// `outcome` (`written`, `late`, `kept`) at `clock` (the router's clock): a late one becomes
/// the router event `budget.charged.late` (read with `routerEvents`).
#[napi]
pub fn router_budget_settled(
    env: Env,
    router: &External<RouterState>,
    sandbox_id: String,
    provider_id: String,
    outcome: String,
    clock: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        let sandbox = SandboxKey::parse_checked(&sandbox_id)?;
        let now = now_of(None, clock).router;
        router.router.borrow_mut().budget_settled(sandbox, &provider_id, outcome == "late", now);
        Ok(())
    })
}

/// The launch intent was written (`ok`) or not; the next step.
#[napi]
pub fn acquisition_intent_written(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    ok: bool,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.intent_written(key, ok, now_of(now, clock_now)))
}

/// The launch returned a handle with the provider's sandbox id; the next step (with the
/// default store the record is written here, and the step may say the job is ended).
#[napi]
pub fn acquisition_succeeded(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    provider_sandbox_id: String,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    let (at, wall) = now_and_wall(now, clock_now);
    stepping(&env, router, key, step, |r| r.succeeded(key, &provider_sandbox_id, at, wall))
}

/// The launch threw: `packageCode`, the code of the router's own package error it threw
/// (else null); the next step.
#[napi]
pub fn acquisition_threw(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    package_code: Option<String>,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.threw(key, package_code.as_deref(), now_of(now, clock_now)))
}

/// The classifier's answer: `code` when it answered a string, `retryable` when a boolean,
/// `retryAfterMs` when a number (each null otherwise: it threw, timed out or answered
/// something else); the next step.
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments")]
pub fn acquisition_classified(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    code: Option<String>,
    retryable: Option<bool>,
    retry_after_ms: Option<f64>,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    let now = now_of(now, clock_now);
    stepping(&env, router, key, step, |r| r.classified(key, code.as_deref(), retryable, retry_after_ms, now))
}

/// The launch resolved to something that is not a handle; the next step.
#[napi]
pub fn acquisition_malformed(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.malformed(key, now_of(now, clock_now)))
}

/// The launch did not settle within its deadline; the next step.
#[napi]
pub fn acquisition_timed_out(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.timed_out(key, now_of(now, clock_now)))
}

/// The caller's store stored the record (`ok`) or not (failed or timed out); the next step.
#[napi]
pub fn acquisition_persisted(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    ok: bool,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.persisted(key, ok, now_of(now, clock_now)))
}

/// The clean-up destroy settled (`succeeded`: the sandbox is gone); the next step.
#[napi]
pub fn acquisition_cleaned_up(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    succeeded: bool,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.cleaned_up(key, succeeded, now_of(now, clock_now)))
}

/// The intent was settled after a failure (or that failed: best effort); the next step.
#[napi]
pub fn acquisition_intent_settled(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.intent_settled(key, now_of(now, clock_now)))
}

/// The record of job `key`'s sandbox, for the caller's store (`Persist`).
#[napi]
pub fn acquisition_record(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<MappingRecord> {
    guard(&env, || {
        let m = router.router.borrow_mut().record(key, now_millis())?;
        Ok(MappingRecord {
            id: m.id.to_string(),
            provider_id: m.provider_id.to_string(),
            provider_sandbox_id: m.provider_sandbox_id.to_string(),
            labels: m.all_labels().into_iter().collect(),
            created_at: m.created_at_text(),
            detached: m.detached,
        })
    })
}

/// A launch settled after its provision's deadline had ended it: the bound (ms) of the
/// destroy of what it returned (`hasHandle`: a handle with an id); 0: nothing to destroy.
#[napi]
pub fn acquisition_late(router: &External<RouterState>, has_handle: bool) -> u32 {
    u32::try_from(router.router.borrow().late_launch(has_handle)).unwrap_or(u32::MAX)
}

/// The destroy of a late launch's sandbox `id` on pool `providerId` settled.
#[napi]
pub fn acquisition_late_cleaned_up(
    router: &External<RouterState>,
    id: String,
    provider_id: String,
    succeeded: bool,
    clock_now: Option<f64>,
) {
    if let Some(key) = SandboxKey::parse(&id) {
        router.router.borrow_mut().late_cleaned_up(key, &provider_id, succeeded, now_of(None, clock_now).router);
    }
}

/// A record write that timed out finished after all: whether to remove it.
#[napi]
pub fn acquisition_late_write(router: &External<RouterState>) -> bool {
    router.router.borrow_mut().late_write()
}

/// The candidates, best first (pool ids): the order `provision.ranked` reports.
#[napi]
pub fn acquisition_candidates(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<Vec<String>> {
    guard(&env, || router.router.borrow_mut().candidates(key))
}

/// Events job `key` decided since the last call, in their documented shapes (empty unless
/// the router has an observer or telemetry). `clockNow`: the router's clock (their `at`).
#[napi]
pub fn acquisition_events<'env>(
    env: &'env Env,
    router: &External<RouterState>,
    key: u32,
    clock_now: Option<f64>,
) -> napi::Result<Array<'env>> {
    let events = guard(env, || router.router.borrow_mut().job_events(key, now_of(None, clock_now)))?;
    events_array(env, &events)
}

/// How a job failed: the error to raise and what the JS side does about it.
#[napi(object, object_from_js = false)]
pub struct AcquisitionFailure<'env> {
    /// The typed error (an `Error` whose own properties are its fields; `lib/errors.js`
    /// `fromNative` builds its instance).
    #[napi(ts_type = "Error")]
    pub error: Object<'env>,
    /// Whether a sandbox may exist now (the launch intent then becomes `failed`).
    pub may_exist: bool,
    /// The runtime threw the router's own package error: rethrow that error as it is.
    pub package: bool,
    /// How the provision ended, as telemetry names it (`core::telemetry`).
    pub outcome: ProvisionOutcome,
}

/// How the job failed, once over (null while it runs or after a success).
#[napi]
pub fn acquisition_failure<'env>(
    env: &'env Env,
    router: &External<RouterState>,
    key: u32,
) -> napi::Result<Option<AcquisitionFailure<'env>>> {
    let Some(e) = guard(env, || router.router.borrow_mut().failure(key))? else { return Ok(None) };
    Ok(Some(AcquisitionFailure {
        error: error_object(env, &e.error)?,
        may_exist: e.may_exist,
        package: e.package,
        outcome: e.outcome.into(),
    }))
}

/// The intent record the current step writes (`Intent`: `launching`; `Unintent` with the
/// failed flag: `failed`).
#[napi]
pub fn acquisition_intent(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<IntentRecord> {
    guard(&env, || Ok(router.router.borrow_mut().intent(key, now_millis())?.into()))
}

/// Forgets the job (its key may be reused): the provision has settled. Ending an unknown
/// key does nothing.
#[napi]
pub fn acquisition_end(router: &External<RouterState>, key: u32) {
    crate::binding::error::contained((), || router.router.borrow_mut().end(key));
}

/// The `Wait` step is over (its bound passed, or the router named the job among those to
/// wake); the next step.
#[napi]
pub fn acquisition_waited(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.waited(key, now_of(now, clock_now)))
}

/// The provision's `AbortSignal` fired while its job is in flight (the router decides what
/// that ends: `core::router::queue`).
#[napi]
pub fn acquisition_abort(router: &External<RouterState>, key: u32) {
    crate::binding::error::contained((), || router.router.borrow_mut().abort(key));
}

/// The provision's signal had fired before its job began: it ends `ABORTED` before its first
/// step is performed; the next step (`Done`).
#[napi]
pub fn acquisition_abort_begun(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.abort_begun(key, now_of(now, clock_now)))
}
