//! napi glue for a router's provision jobs (`core::router::provision`): typed steps,
//! outcomes, events, intents and failures; nothing is decided here.
//!
//! The JS provision loop (`lib/provision.js`) begins a job ([`begin_acquisition`]),
//! performs each step it is told (a capacity read, a launch), reports each outcome with one
//! synchronous call, and ends the job exactly once, when the provision has settled
//! ([`acquisition_end`]): while it lives, `reconcile` sees its sandbox id as in flight.

use crate::binding::clock::now_millis;
use crate::binding::error::{guard, internal, ErrorValue};
use crate::binding::records::{AdmitVerdict, BudgetDemand, BudgetSettlement, BudgetVerdict, DemandRecord, HoldSettlement, IntentRecord};
use crate::binding::registry::RouteExtras;
use crate::binding::request::{labels_from, CompiledRequest};
use crate::binding::router::{now_of, RouterState};
use crate::binding::telemetry::ProvisionOutcome;
use crate::binding::values::events_array;
use crate::core::acquisition::SharedVerdict;
use crate::core::capacity::validate;
use crate::core::ids::SandboxKey;
use crate::core::router::pools::Extras;
use crate::core::router::provision::StepKind as Kind;
use napi::bindgen_prelude::{Array, External, Uint32ArraySlice};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;

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
    /// Reserve that pool's cost in the shared budget ledger, then report it.
    Reserve = 3,
    /// Ask the fleet's inventory (PostgreSQL) for a member of the pool in `step[1]`.
    Claim = 4,
    /// A member of the pool in `step[1]` was taken from this process's inventory.
    Claimed = 5,
}

/// Writes a step into the buffer JavaScript lent: `[kind, pool, job key]`.
// The step crosses in a lent Uint32Array: the 10,000-in-flight provision floor (≥ 0.6x) needs it.
pub(crate) fn write_step(mut step: Uint32ArraySlice<'_>, kind: Kind, pool: usize, key: u32) -> Result<(), crate::binding::error::Failure> {
    // SAFETY: no JavaScript runs during this synchronous call and nothing keeps the slice beyond it.
    let out = unsafe { step.as_mut() };
    if out.len() < 3 {
        return Err(internal("(the step buffer is too small)"));
    }
    out[0] = kind as u32;
    out[1] = pool as u32;
    out[2] = key;
    Ok(())
}

/// Starts a provision's job on `router` for compiled `request`: validates the labels, routes
/// (with `extras`: credential readiness and the resolver's answers), creates the job and
/// writes its first step into `step` (`[StepKind, pool, job key]`). Returns the sandbox id:
/// `id` when given (made earlier, because callbacks before this call name it), else a fresh
/// one. Throws the typed `INVALID_REQUEST` / `NO_ELIGIBLE_PROVIDER` error, which names that
/// id. `now`: the health clock; `clockNow`: the router's (each omitted: the wall clock).
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
        let labels = match labels_json.as_deref().map(labels_from).transpose() {
            Ok(l) => l.unwrap_or_default(),
            Err(mut e) => {
                e.sandbox_id = Some(key.to_string());
                return Err(e);
            }
        };
        let extras = extras.as_ref().map(Extras::from);
        let (job, kind, pool) =
            router.router.borrow_mut().begin(&request.req, detached, labels, extras.as_ref(), key, now_of(now, clock_now))?;
        write_step(step, kind, pool, job)?;
        Ok(key.to_string())
    })
}

/// Job `key`'s next step, written into `step`. `clockNow`: the router's clock (ms).
#[napi]
pub fn acquisition_step(env: Env, router: &External<RouterState>, key: u32, step: Uint32ArraySlice<'_>, clock_now: Option<f64>) -> napi::Result<()> {
    guard(&env, || {
        let (kind, pool) = router.router.borrow_mut().step(key, now_of(None, clock_now))?;
        write_step(step, kind, pool, key)
    })
}

/// Reports the current candidate's capacity read: the reader's answer as JSON text,
/// validated strictly here; anything malformed is `unknown: MALFORMED`.
#[napi]
pub fn acquisition_admit(env: Env, router: &External<RouterState>, key: u32, measurement_json: String, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || {
        let m = validate(&serde_json::from_str::<Value>(&measurement_json).unwrap_or(Value::Null));
        router.router.borrow_mut().admit(key, &m, now_of(now, None))
    })
}

/// Under a shared coordinator, step one of an admission: what to ask it, or null when the
/// machine skipped the pool already (an unknown or malformed measurement).
#[napi]
pub fn acquisition_demand(env: Env, router: &External<RouterState>, key: u32, measurement_json: String, now: Option<f64>) -> napi::Result<Option<DemandRecord>> {
    guard(&env, || {
        let m = validate(&serde_json::from_str::<Value>(&measurement_json).unwrap_or(Value::Null));
        Ok(router.router.borrow_mut().demand(key, &m, now_of(now, None))?.map(DemandRecord::from))
    })
}

/// Under a shared coordinator, step two: its verdict (null: it could not be asked).
#[napi]
pub fn acquisition_admit_decided(env: Env, router: &External<RouterState>, key: u32, verdict: Option<AdmitVerdict>, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || {
        let verdict = match verdict {
            Some(AdmitVerdict { token: Some(t), .. }) if t.is_finite() && t >= 1.0 => SharedVerdict::Admitted(t as u64),
            Some(AdmitVerdict { resource: Some(r), .. }) => SharedVerdict::Exhausted(r),
            _ => SharedVerdict::Unavailable,
        };
        router.router.borrow_mut().admit_decided(key, verdict, now_of(now, None))
    })
}

/// Under a shared budget ledger, what to ask it for the current candidate.
#[napi]
pub fn acquisition_budget_demand(env: Env, router: &External<RouterState>, key: u32, now: Option<f64>) -> napi::Result<Option<BudgetDemand>> {
    guard(&env, || Ok(router.router.borrow_mut().budget_demand(key, now_of(None, now))?.map(BudgetDemand::from)))
}

/// Under a shared budget ledger, its answer for the current candidate (null: it could not
/// be asked).
#[napi]
pub fn acquisition_budget_decided(env: Env, router: &External<RouterState>, key: u32, verdict: Option<BudgetVerdict>, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || router.router.borrow_mut().budget_decided(key, verdict.as_ref().map(BudgetVerdict::to_core), now_of(None, now)))
}

/// Under a shared budget ledger, the settlement decided since the last call (null: none).
#[napi]
pub fn acquisition_budget_settlement(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<Option<BudgetSettlement>> {
    guard(&env, || Ok(router.router.borrow_mut().budget_settlement(key)?.map(|(s, how)| BudgetSettlement::of(s, how))))
}

/// The shared hold settled by the last report, if any.
#[napi]
pub fn acquisition_settlement(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<Option<HoldSettlement>> {
    guard(&env, || {
        Ok(router.router.borrow_mut().settlement(key)?.map(|(t, allocated)| HoldSettlement { token: t as f64, allocated }))
    })
}

/// What is left after a success (see [`acquisition_succeeded`]).
#[napi]
#[derive(Clone, Copy)]
pub enum Success {
    /// The record is written and the job ended: the provision has settled.
    Settled = 0,
    /// The record is written; the job's events or hold settlement are still to be read.
    Recorded = 1,
    /// The caller's store must be written.
    Unrecorded = 2,
}

/// The launch returned a handle with the provider's sandbox id. With the default store the
/// record is written here too. Returns what is left to do.
#[napi]
pub fn acquisition_succeeded(env: Env, router: &External<RouterState>, key: u32, provider_sandbox_id: String, now: Option<f64>) -> napi::Result<Success> {
    guard(&env, || {
        use crate::core::router::provision::Success as S;
        Ok(match router.router.borrow_mut().succeeded(key, &provider_sandbox_id, now_of(now, None), now_millis())? {
            S::Settled => Success::Settled,
            S::Recorded => Success::Recorded,
            S::Unrecorded => Success::Unrecorded,
        })
    })
}

/// The launch failed; `code` / `retryable`: the classifier's answer, if it gave one of the
/// right types (the router sanitizes and decides).
#[napi]
pub fn acquisition_failed(env: Env, router: &External<RouterState>, key: u32, code: Option<String>, retryable: Option<bool>, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || router.router.borrow_mut().failed(key, code.as_deref(), retryable, now_of(now, None)))
}

/// The launch resolved to something that is not a handle.
#[napi]
pub fn acquisition_malformed(env: Env, router: &External<RouterState>, key: u32, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || router.router.borrow_mut().malformed(key, now_of(now, None)))
}

/// The launch did not settle within its deadline.
#[napi]
pub fn acquisition_timed_out(env: Env, router: &External<RouterState>, key: u32, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || router.router.borrow_mut().timed_out(key, now_of(now, None)))
}

/// The runtime threw the router's own package error with this code (or the launch intent
/// could not be written: `MAPPING_INTENT_FAILED`): nothing was launched.
#[napi]
pub fn acquisition_package_failed(env: Env, router: &External<RouterState>, key: u32, code: String, now: Option<f64>) -> napi::Result<()> {
    guard(&env, || router.router.borrow_mut().package_failed(key, &code, now_of(now, None)))
}

/// The candidates, best first (pool ids): the order `provision.ranked` reports.
#[napi]
pub fn acquisition_candidates(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<Vec<String>> {
    guard(&env, || router.router.borrow_mut().candidates(key))
}

/// Events job `key` decided since the last call, in their documented shapes (empty unless
/// the router has an observer or telemetry). `clockNow`: the router's clock (their `at`).
#[napi]
pub fn acquisition_events<'env>(env: &'env Env, router: &External<RouterState>, key: u32, clock_now: Option<f64>) -> napi::Result<Array<'env>> {
    let events = guard(env, || router.router.borrow_mut().job_events(key, now_of(None, clock_now)))?;
    events_array(env, &events)
}

/// How a job failed: the error to raise and what the JS side does about it.
#[napi(object, object_from_js = false)]
pub struct AcquisitionFailure {
    /// The typed error (an `Error` whose own properties are its fields; `lib/errors.js`
    /// `fromNative` builds its instance).
    #[napi(ts_type = "Error")]
    pub error: ErrorValue,
    /// Whether a sandbox may exist now (the launch intent then becomes `failed`).
    pub may_exist: bool,
    /// The runtime threw the router's own package error: rethrow that error as it is.
    pub package: bool,
    /// How the provision ended, as telemetry names it (`core::telemetry`).
    pub outcome: ProvisionOutcome,
}

/// How the job failed, once over (null while it runs or after a success).
#[napi]
pub fn acquisition_failure(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<Option<AcquisitionFailure>> {
    guard(&env, || {
        Ok(router.router.borrow_mut().failure(key)?.map(|e| AcquisitionFailure {
            error: ErrorValue(e.error),
            may_exist: e.may_exist,
            package: e.package,
            outcome: e.outcome.into(),
        }))
    })
}

/// The intent record of the current launch (`state`: `launching` before it, `failed` when
/// it ended with its outcome unknown).
#[napi]
pub fn acquisition_intent(env: Env, router: &External<RouterState>, key: u32, state: String) -> napi::Result<IntentRecord> {
    guard(&env, || {
        let state = match state.as_str() {
            "launching" => "launching",
            "failed" => "failed",
            _ => return Err(internal("(an unknown intent state)")),
        };
        Ok(router.router.borrow_mut().intent(key, state, now_millis())?.into())
    })
}

/// Forgets the job (its key may be reused): the provision has settled. Ending an unknown
/// key does nothing.
#[napi]
pub fn acquisition_end(router: &External<RouterState>, key: u32) {
    crate::binding::error::contained((), || router.router.borrow_mut().end(key));
}
