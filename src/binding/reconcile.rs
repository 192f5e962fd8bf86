//! napi glue for reconcile runs (`core::router::reconcile`): each step's report converted
//! into the core's facts, the next step written into the lent step buffer (`[kind, pool,
//! lane, bound ms, flags]`: the lane is the run's job key), the report converted out.
//! Nothing is decided here.
//!
//! Why columns in? A listing or a store of 10,000 items crosses as a few arrays of strings
//! and typed arrays several times faster than as one object per item. The report's rows go
//! out as columns for the same reason (`lib/reconcile.js` zips them into the documented
//! objects).

use crate::binding::acquisition::write_step;
use crate::binding::clock::now_millis;
use crate::binding::error::{error_object, guard, internal, Failure};
use crate::binding::operation::thrown_of;
use crate::binding::router::RouterState;
use crate::core::capacity::UnknownReason;
use crate::core::reconcile::{IntentFact, Listed, MappingFact};
use crate::core::router::reconcile::{Begin, Class, ListFact, PoolReport, Report, Rows, Settled, Signal};
use crate::core::router::step::Next;
use crate::core::router::Router;
use napi::bindgen_prelude::{External, Float64Array, Object, Uint32ArraySlice, Uint8Array, Unknown};
use napi::Env;
use napi_derive::napi;

/// What JavaScript knows when a run begins.
#[napi(object)]
pub struct ReconcileBegin {
    /// The mapping store has `list()`.
    pub has_list: bool,
    /// The fleet's warm inventory is the mapping store (`capacity.coordinator` is it).
    pub fleet_inventory: bool,
    /// Per registry pool: 1 when it lists through a native finder.
    pub native_finders: Uint8Array,
}

/// What a pool's finder listed, one column per field and one row per item.
#[napi(object)]
pub struct ReconcileListing {
    /// The provider's own sandbox ids.
    pub provider_sandbox_ids: Vec<String>,
    /// The stamps' `sbx_…` ids; null for an item that carried no labels.
    pub sandbox_ids: Vec<Option<String>>,
    /// Whether the whole stamp (this fleet and a well-formed id) was seen on the item: 1,
    /// else 0.
    pub verified: Uint8Array,
    /// Provider-reported creation times, epoch ms; NaN when unknown.
    pub created_at_ms: Float64Array,
}

/// The store's mapping records, read once, one column per field (null: not a string).
#[napi(object)]
pub struct ReconcileMappings {
    /// The `sbx_…` ids.
    pub ids: Vec<Option<String>>,
    /// Their pools.
    pub provider_ids: Vec<Option<String>>,
    /// The provider's sandbox ids.
    pub provider_sandbox_ids: Vec<Option<String>>,
    /// Their fleet labels.
    pub fleets: Vec<Option<String>>,
    /// Their `createdAt`, epoch ms; NaN when unreadable.
    pub created_at_ms: Float64Array,
    /// Their warm labels (an idle warm member's record).
    pub warm: Vec<Option<String>>,
}

/// An intent record as the store returned it, read once: each field absent when it is
/// missing or not of its type.
#[napi(object)]
pub struct ReconcileIntent {
    /// The `sbx_…` id.
    pub id: Option<String>,
    /// The pool of its current attempt.
    pub provider_id: Option<String>,
    /// `launching` | `failed`.
    pub state: Option<String>,
    /// Epoch ms after which the writer's provision has certainly ended.
    pub expires_at: Option<f64>,
    /// The writer's host.
    pub owner_host: Option<String>,
    /// The writer's process id.
    pub owner_pid: Option<f64>,
    /// The writing router's session.
    pub owner_session: Option<String>,
}

/// How an awaited call settled: a reconcile step's, or a re-resolution as owned (reconcile's
/// lookup, a warm claim or task: lib/within.js `lookupOwned`).
#[napi]
pub enum ReconcileSettled {
    /// It resolved to a value (not null or undefined).
    Value = 0,
    /// It resolved to null or undefined.
    Nothing = 1,
    /// It threw or rejected.
    Threw = 2,
    /// It did not settle within the step's bound.
    TimedOut = 3,
    /// The object has no such method.
    NoMethod = 4,
}

/// The ids a reconcile action is about.
#[napi(object, use_nullable = true)]
pub struct ReconcileTarget {
    /// The `sbx_…` id.
    pub sandbox_id: String,
    /// The provider's sandbox id (null: an intent).
    pub provider_sandbox_id: Option<String>,
}

/// Items of one class in a pool, one column per field.
#[napi(object)]
pub struct ReconcileRows {
    /// The `sbx_…` ids; null for a handle without a verified stamp.
    pub sandbox_ids: Vec<Option<String>>,
    /// The provider's sandbox ids.
    pub provider_sandbox_ids: Vec<String>,
    /// Each one's reason code.
    pub reasons: Vec<String>,
}

/// A pool's counts per class.
#[napi(object)]
pub struct ReconcileCounts {
    /// Orphans.
    pub orphan: u32,
    /// Stale mappings.
    pub stale_mapping: u32,
    /// Mapped ids.
    pub mapped: u32,
    /// Pending items.
    pub pending: u32,
}

/// Which finder listed a pool.
#[napi(string_enum = "lowercase")]
pub enum ReconcileFinder {
    /// The provider's list API, natively.
    Native,
    /// The runtime's `findAllByLabels`.
    Runtime,
}

/// Whether a pool was listed.
#[napi(string_enum = "lowercase")]
pub enum ReconcilePoolStatus {
    /// Listed completely.
    Listed,
    /// Could not be listed (`reason` says why).
    Unknown,
}

/// One pool of the report.
#[napi(object)]
pub struct ReconcilePoolRecord {
    /// The pool's id.
    pub provider_id: String,
    /// Listed or not.
    pub status: ReconcilePoolStatus,
    /// Which finder listed it.
    pub finder: ReconcileFinder,
    /// Why it could not be listed (absent when listed).
    pub reason: Option<String>,
    /// Counts per class.
    pub counts: ReconcileCounts,
    /// Orphans.
    pub orphan: ReconcileRows,
    /// Stale mappings.
    pub stale_mapping: ReconcileRows,
    /// Mapped ids.
    pub mapped: Vec<String>,
    /// Pending items.
    pub pending: ReconcileRows,
}

/// The class of one reclaim action.
#[napi(string_enum)]
pub enum ReconcileWorkClass {
    /// An orphan.
    #[napi(value = "orphan")]
    Orphan,
    /// A stale mapping.
    #[napi(value = "stale-mapping")]
    StaleMapping,
    /// A stale intent.
    #[napi(value = "stale-intent")]
    StaleIntent,
}

/// One action's outcome.
#[napi(object, use_nullable = true)]
pub struct ReconcileOutcomeRecord {
    /// Its pool.
    pub provider_id: String,
    /// What it acted on.
    pub sandbox_id: String,
    /// The provider's sandbox id (null: an intent).
    pub provider_sandbox_id: Option<String>,
    /// Its class.
    pub class: ReconcileWorkClass,
    /// Its outcome code.
    pub outcome: String,
}

/// Totals over the pools.
#[napi(object)]
pub struct ReconcileTotals {
    /// Orphans.
    pub orphan: u32,
    /// Stale mappings.
    pub stale_mapping: u32,
    /// Mapped ids.
    pub mapped: u32,
    /// Pending items.
    pub pending: u32,
    /// Pools that could not be listed.
    pub unknown_pools: u32,
}

/// A run's report, typed (the documented `ReconcileReport` but for `pools`, a list here).
#[napi(object)]
pub struct ReconcileReportRecord {
    /// `reclaim`.
    pub reclaim: bool,
    /// The router's fleet.
    pub fleet: String,
    /// `graceMs`.
    pub grace_ms: f64,
    /// ISO 8601.
    pub started_at: String,
    /// ms.
    pub duration_ms: f64,
    /// The deadline came before everything was done.
    pub timed_out: bool,
    /// Per pool, in run order.
    pub pools: Vec<ReconcilePoolRecord>,
    /// Intents whose launch is over and left nothing listed.
    pub stale_intents: Vec<String>,
    /// Each action's outcome.
    pub outcomes: Vec<ReconcileOutcomeRecord>,
    /// Totals over the pools.
    pub totals: ReconcileTotals,
}

fn rows(r: Rows) -> ReconcileRows {
    ReconcileRows {
        sandbox_ids: r.sandbox_ids,
        provider_sandbox_ids: r.provider_sandbox_ids,
        reasons: r.reasons.into_iter().map(str::to_string).collect(),
    }
}

fn pool_record(p: PoolReport) -> ReconcilePoolRecord {
    let len = |r: &Rows| r.reasons.len() as u32;
    ReconcilePoolRecord {
        counts: ReconcileCounts {
            orphan: len(&p.orphan),
            stale_mapping: len(&p.stale_mapping),
            mapped: p.mapped.len() as u32,
            pending: len(&p.pending),
        },
        provider_id: p.provider_id,
        status: if p.reason.is_some() { ReconcilePoolStatus::Unknown } else { ReconcilePoolStatus::Listed },
        finder: if p.native { ReconcileFinder::Native } else { ReconcileFinder::Runtime },
        reason: p.reason.map(|r| r.code().to_string()),
        orphan: rows(p.orphan),
        stale_mapping: rows(p.stale_mapping),
        mapped: p.mapped,
        pending: rows(p.pending),
    }
}

fn report_record(r: Report) -> ReconcileReportRecord {
    ReconcileReportRecord {
        reclaim: r.reclaim,
        fleet: r.fleet,
        grace_ms: r.grace_ms as f64,
        started_at: crate::core::clock::iso8601_millis(r.started_at),
        duration_ms: r.duration_ms as f64,
        timed_out: r.timed_out,
        pools: r.pools.into_iter().map(pool_record).collect(),
        stale_intents: r.stale_intents,
        outcomes: r
            .outcomes
            .into_iter()
            .map(|o| ReconcileOutcomeRecord {
                provider_id: o.provider_id,
                sandbox_id: o.sandbox_id,
                provider_sandbox_id: o.provider_sandbox_id,
                class: match o.class {
                    Class::Orphan => ReconcileWorkClass::Orphan,
                    Class::StaleMapping => ReconcileWorkClass::StaleMapping,
                    Class::StaleIntent => ReconcileWorkClass::StaleIntent,
                },
                outcome: o.outcome.code().to_string(),
            })
            .collect(),
        totals: ReconcileTotals {
            orphan: r.totals.orphan,
            stale_mapping: r.totals.stale_mapping,
            mapped: r.totals.mapped,
            pending: r.totals.pending,
            unknown_pools: r.totals.unknown_pools,
        },
    }
}

fn finite(n: f64) -> Option<f64> {
    n.is_finite().then_some(n)
}

/// A JS number as a process id: a positive integer, else none.
fn pid(n: f64) -> Option<u64> {
    (n.fract() == 0.0 && (1.0..=9_007_199_254_740_991.0).contains(&n)).then_some(n as u64)
}

/// Rows from a listing's columns (columns of unequal length are an internal bug).
fn listing(l: ReconcileListing) -> Result<Vec<Listed>, Failure> {
    let n = l.provider_sandbox_ids.len();
    if l.sandbox_ids.len() != n || l.verified.len() != n || l.created_at_ms.len() != n {
        return Err(internal("(reconcile listing columns of unequal length)"));
    }
    Ok(l.provider_sandbox_ids
        .into_iter()
        .zip(l.sandbox_ids)
        .zip(l.verified.iter())
        .zip(l.created_at_ms.iter())
        .map(|(((provider_sandbox_id, sandbox_id), &verified), &created)| Listed {
            provider_sandbox_id,
            sandbox_id,
            verified: verified == 1,
            created_at_ms: finite(created),
        })
        .collect())
}

/// Mapping facts from the columns: None for a row without its three ids.
fn mappings(m: ReconcileMappings) -> Result<Vec<Option<MappingFact>>, Failure> {
    let n = m.ids.len();
    if m.provider_ids.len() != n
        || m.provider_sandbox_ids.len() != n
        || m.fleets.len() != n
        || m.created_at_ms.len() != n
        || m.warm.len() != n
    {
        return Err(internal("(reconcile mapping columns of unequal length)"));
    }
    Ok(m.ids
        .into_iter()
        .zip(m.provider_ids)
        .zip(m.provider_sandbox_ids)
        .zip(m.fleets)
        .zip(m.created_at_ms.iter().copied())
        .zip(m.warm)
        .map(|(((((id, provider_id), provider_sandbox_id), fleet), created), warm)| {
            Some(MappingFact {
                id: id?,
                provider_id: provider_id?,
                provider_sandbox_id: provider_sandbox_id?,
                fleet,
                created_at_ms: finite(created),
                warm,
            })
        })
        .collect())
}

/// An intent fact: None without an id.
fn intent(i: ReconcileIntent) -> Option<IntentFact> {
    Some(IntentFact {
        id: i.id?,
        provider_id: i.provider_id,
        state: i.state,
        // NaN compares false with now, as a missing expiry does.
        expires_at_ms: i.expires_at.filter(|e| !e.is_nan()),
        owner_host: i.owner_host,
        owner_pid: i.owner_pid.and_then(pid),
        owner_session: i.owner_session,
    })
}

fn settled(s: ReconcileSettled) -> Settled {
    match s {
        ReconcileSettled::Value => Settled::Value,
        ReconcileSettled::Nothing => Settled::Nothing,
        ReconcileSettled::Threw => Settled::Threw,
        ReconcileSettled::TimedOut => Settled::TimedOut,
        ReconcileSettled::NoMethod => Settled::NoMethod,
    }
}

/// Runs `f` on the router at the wall clock and writes the step it answers for `lane`.
fn stepping(
    env: &Env,
    router: &External<RouterState>,
    lane: u32,
    step: Uint32ArraySlice<'_>,
    f: impl FnOnce(&mut Router, i64) -> Result<Next, Failure>,
) -> napi::Result<()> {
    guard(env, || {
        let next = f(&mut router.router.borrow_mut(), now_millis())?;
        write_step(step, lane, next)
    })
}

/// Begins `router.reconcile(options)` (`optionsJson`: the options read once, leniently;
/// absent: they could not be read): writes its first lane's step (the lane's key is
/// `step[2]`). Throws `INVALID_REQUEST` or `MAPPING_READ_FAILED`.
#[napi]
pub fn reconcile_begin(
    env: Env,
    router: &External<RouterState>,
    options_json: Option<String>,
    facts: ReconcileBegin,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    guard(&env, || {
        let begin = Begin {
            has_list: facts.has_list,
            fleet_inventory: facts.fleet_inventory,
            native_finders: facts.native_finders.iter().map(|&b| b == 1).collect(),
        };
        let (lane, next) = router.router.borrow_mut().reconcile_begin(options_json.as_deref(), begin, now_millis())?;
        write_step(step, lane, next)
    })
}

/// How many lanes to start beside `lane` now (its step had the `fork` flag).
#[napi]
pub fn reconcile_forks(env: Env, router: &External<RouterState>, lane: u32) -> napi::Result<u32> {
    guard(&env, || router.router.borrow_mut().reconcile_forks(lane))
}

/// Starts a lane of `lane`'s run: writes its first step (its key is `step[2]`).
#[napi]
pub fn reconcile_lane(
    env: Env,
    router: &External<RouterState>,
    lane: u32,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    guard(&env, || {
        let (key, next) = router.router.borrow_mut().reconcile_lane(lane, now_millis())?;
        write_step(step, key, next)
    })
}

/// `ReconcileList`: what the finder answered (`listing` with `reason` null: listed; `reason`:
/// the finder's code for why it could not list), or that it threw (`threw`).
#[napi]
pub fn reconcile_listed(
    env: Env,
    router: &External<RouterState>,
    lane: u32,
    threw: bool,
    listed: Option<ReconcileListing>,
    reason: Option<String>,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    stepping(&env, router, lane, step, |r, wall| {
        let fact = match (threw, reason, listed) {
            (true, _, _) => ListFact::Threw,
            (false, Some(code), _) => ListFact::Unlisted(
                UnknownReason::from_code(&code).ok_or_else(|| internal("(an unknown finder reason)"))?,
            ),
            (false, None, Some(l)) => ListFact::Listed(listing(l)?),
            (false, None, None) => return Err(internal("(a finder answer without a listing)")),
        };
        r.reconcile_listed(lane, fact, wall)
    })
}

/// `ReconcileRead` of the mappings: the records as columns (absent: the read failed).
#[napi]
pub fn reconcile_mappings(
    env: Env,
    router: &External<RouterState>,
    lane: u32,
    records: Option<ReconcileMappings>,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    stepping(&env, router, lane, step, |r, wall| {
        let rows = records.map(mappings).transpose()?;
        r.reconcile_mappings(lane, rows, wall)
    })
}

/// `ReconcileRead` of the intents (absent: the read failed).
#[napi]
pub fn reconcile_intents(
    env: Env,
    router: &External<RouterState>,
    lane: u32,
    records: Option<Vec<ReconcileIntent>>,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    stepping(&env, router, lane, step, |r, wall| {
        r.reconcile_intents(lane, records.map(|v| v.into_iter().map(intent).collect()), wall)
    })
}

/// The pids `lane`'s `ReconcileSignal` step signals.
#[napi]
pub fn reconcile_pids(env: Env, router: &External<RouterState>, lane: u32) -> napi::Result<Vec<f64>> {
    guard(&env, || Ok(router.router.borrow_mut().reconcile_pids(lane)?.into_iter().map(|p| p as f64).collect()))
}

/// `ReconcileSignal`: per pid (in `reconcilePids` order), whether `process.kill(pid, 0)`
/// threw (1) and the thrown code; and the ids the other routers of this process are making.
#[napi]
pub fn reconcile_signalled(
    env: Env,
    router: &External<RouterState>,
    lane: u32,
    threw: Uint8Array,
    codes: Vec<Option<String>>,
    others: Vec<String>,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    stepping(&env, router, lane, step, |r, wall| {
        if codes.len() != threw.len() {
            return Err(internal("(reconcile signal columns of unequal length)"));
        }
        let signals: Vec<Signal> = threw.iter().zip(codes).map(|(&t, code)| Signal { threw: t == 1, code }).collect();
        r.reconcile_signalled(lane, &signals, &others, wall)
    })
}

/// The ids `lane`'s action is about.
#[napi]
pub fn reconcile_target(env: Env, router: &External<RouterState>, lane: u32) -> napi::Result<ReconcileTarget> {
    guard(&env, || {
        let (sandbox_id, provider_sandbox_id) = router.router.borrow_mut().reconcile_target(lane)?;
        Ok(ReconcileTarget { sandbox_id, provider_sandbox_id })
    })
}

/// `ReconcileRecheck`: whether a provision of this process is making the action's id now.
#[napi]
pub fn reconcile_rechecked(
    env: Env,
    router: &External<RouterState>,
    lane: u32,
    in_flight: bool,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    stepping(&env, router, lane, step, |r, wall| r.reconcile_rechecked(lane, in_flight, wall))
}

/// How the call of `lane`'s step settled; with `Threw`, the rejection's facts as
/// [`crate::binding::operation::operation_threw`] takes them (one rule says "gone":
/// `core::router::operation::is_not_found`).
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments")]
pub fn reconcile_settled(
    env: Env,
    router: &External<RouterState>,
    lane: u32,
    how: ReconcileSettled,
    facts: Option<Vec<Unknown<'_>>>,
    unreadable: u32,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    let how = settled(how);
    let thrown = if how == Settled::Threw { Some(thrown_of(false, facts, unreadable)?) } else { None };
    stepping(&env, router, lane, step, |r, wall| r.reconcile_settled(lane, how, thrown.as_ref(), wall))
}

/// `ReconcileRelease`: whether the shared ledger gave a budget slot back.
#[napi]
pub fn reconcile_released(
    env: Env,
    router: &External<RouterState>,
    lane: u32,
    released: bool,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    stepping(&env, router, lane, step, |r, wall| r.reconcile_released(lane, released, wall))
}

/// The report of the run `lane` finished (`Succeeded`); the run is forgotten.
#[napi]
pub fn reconcile_report(env: Env, router: &External<RouterState>, lane: u32) -> napi::Result<ReconcileReportRecord> {
    guard(&env, || Ok(report_record(router.router.borrow_mut().reconcile_report(lane)?)))
}

/// Ends `lane` (`Done`): the run's typed error when it failed in this lane, else null.
#[napi(ts_return_type = "Error | null")]
pub fn reconcile_end<'env>(
    env: &'env Env,
    router: &External<RouterState>,
    lane: u32,
) -> napi::Result<Option<Object<'env>>> {
    match guard(env, || Ok(router.router.borrow_mut().reconcile_end(lane)))? {
        Some(e) => error_object(env, &e).map(Some),
        None => Ok(None),
    }
}

/// Abandons `lane`'s run (a bug while driving it).
#[napi]
pub fn reconcile_abort(router: &External<RouterState>, lane: u32) {
    crate::binding::error::contained((), || router.router.borrow_mut().reconcile_abort(lane));
}
