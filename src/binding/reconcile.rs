//! napi glue for reconcile's classification (`core::reconcile`): one batched call that
//! takes a run's facts as typed values and answers the report's classes and the reclaim
//! work list, typed. Nothing is decided here.
//!
//! Why one call for the whole run? The JS side (`lib/reconcile.js`) lists the pools and
//! reads the store (I/O, awaited there); the classification is then a pure function of
//! what it read, and the in-flight question is answered here, over the machines' index
//! borrowed once, instead of one native call per id.
//!
//! Why columns in and indexes out? Crossing costs more than deciding: most of the call is
//! reading the ids' strings (the classification itself is a few percent of it). One object
//! per item cost several times more to cross than a few arrays of strings and typed
//! arrays, and answering ids JavaScript already holds would cross them all a second time,
//! so the answer names items by their index in the input. Measured with 10,000 listed items and
//! 5,000 mappings on the 2-core development machine (shared, loaded): ~9 ms of CPU per call,
//! against ~4 ms for the JS it replaced, which was cut into 1,000-item chunks; the call
//! stays shorter than the stalls the listing's and the store's own answers already make.

use crate::binding::error::{guard, internal, Failure};
use crate::binding::router::RouterState;
use crate::core::ids::SandboxKey;
use crate::core::reconcile::{
    classify, Classification, Facts, IntentFact, Listed, Listing, MappingFact, OrphanReason, PendingReason, Pool,
    PoolClasses, Run, Work, WorkKind,
};
use napi::bindgen_prelude::{External, Float64Array, Uint32Array, Uint8Array};
use napi::Env;
use napi_derive::napi;

/// What a pool's finder listed, one column per field and one row per item (columns cross
/// the seam several times faster than one object per item).
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

/// One pool of the run, in report order.
#[napi(object)]
pub struct ReconcilePoolInput {
    /// The pool's id.
    pub provider_id: String,
    /// What its finder listed; absent when the pool could not be listed (nothing of it is
    /// classified).
    pub listed: Option<ReconcileListing>,
}

/// The store's mapping records, read once, one column per field.
#[napi(object)]
pub struct ReconcileMappings {
    /// The `sbx_…` ids.
    pub ids: Vec<String>,
    /// Their pools.
    pub provider_ids: Vec<String>,
    /// The provider's sandbox ids.
    pub provider_sandbox_ids: Vec<String>,
    /// Their fleet labels; null when that is not a string.
    pub fleets: Vec<Option<String>>,
    /// Their `createdAt`, epoch ms; NaN when unreadable (counted as young).
    pub created_at_ms: Float64Array,
    /// Their warm labels (an idle warm member's record); null when that is not a string.
    pub warm: Option<Vec<Option<String>>>,
}

/// An intent record as the store returned it, read once: each field absent when it is
/// missing or not of its type.
#[napi(object)]
pub struct ReconcileIntent {
    /// The `sbx_…` id.
    pub id: String,
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

/// One reconcile run, as `lib/reconcile.js` read it.
#[napi(object)]
pub struct ReconcileInput {
    /// The router's fleet.
    pub fleet: String,
    /// This router's session id.
    pub session: String,
    /// This host's name.
    pub host: String,
    /// Now, epoch ms.
    pub now: f64,
    /// The run's `graceMs`.
    pub grace_ms: f64,
    /// Whether the run reclaims (the work list is answered only then).
    pub reclaim: bool,
    /// The pools, each once, in report order.
    pub pools: Vec<ReconcilePoolInput>,
    /// The store's mapping records.
    pub mappings: ReconcileMappings,
    /// The store's intent records (empty without intent support).
    pub intents: Vec<ReconcileIntent>,
    /// Process ids on this host, among the intents' writers, that are gone.
    pub gone_pids: Vec<f64>,
    /// The pools that keep a warm pool in this router (their idle members are mapped).
    pub warm_pools: Option<Vec<String>>,
}

/// Why a stamped sandbox without a (matching) mapping is an orphan.
#[napi(string_enum)]
pub enum ReconcileOrphanReason {
    /// Its intent says the launch failed with its outcome unknown.
    #[napi(value = "LAUNCH_FAILED")]
    LaunchFailed,
    /// Its `launching` intent names a process on this host that is gone.
    #[napi(value = "WRITER_GONE")]
    WriterGone,
    /// Its `launching` intent outlived the launch's settle window.
    #[napi(value = "INTENT_EXPIRED")]
    IntentExpired,
    /// Its intent was written by this router, whose provision of it is over.
    #[napi(value = "INTENT_ABANDONED")]
    IntentAbandoned,
    /// Its id is mapped to another sandbox.
    #[napi(value = "DUPLICATE_OF_MAPPED")]
    DuplicateOfMapped,
    /// No intent, and its provider-reported age is at least `graceMs`.
    #[napi(value = "GRACE_ELAPSED")]
    GraceElapsed,
    /// An idle warm member of a pool that keeps no warm pool here any more.
    #[napi(value = "WARM_POOL_GONE")]
    WarmPoolGone,
}

/// Why an item is pending (never touched).
#[napi(string_enum)]
pub enum ReconcilePendingReason {
    /// A provision in this process is still making it.
    #[napi(value = "IN_FLIGHT")]
    InFlight,
    /// A live writer's intent names it.
    #[napi(value = "IN_FLIGHT_ELSEWHERE")]
    InFlightElsewhere,
    /// No intent, and younger than `graceMs`.
    #[napi(value = "WITHIN_GRACE")]
    WithinGrace,
    /// No intent, and the provider reported no creation time.
    #[napi(value = "AGE_UNKNOWN")]
    AgeUnknown,
    /// A mapping the listing does not show, younger than `graceMs`.
    #[napi(value = "NOT_LISTED_YET")]
    NotListedYet,
    /// A listed handle without the whole stamp, matched to no mapping.
    #[napi(value = "STAMP_UNVERIFIED")]
    StampUnverified,
}

/// Why a mapping is stale: the listing does not show it.
#[napi(string_enum)]
pub enum ReconcileStaleReason {
    /// Older than `graceMs` and not listed.
    #[napi(value = "NOT_LISTED")]
    NotListed,
}

/// The class of one reclaim action (`report.outcomes[].class`).
#[napi(string_enum)]
pub enum ReconcileWorkClass {
    /// Destroy an orphan.
    #[napi(value = "orphan")]
    Orphan,
    /// Remove a stale mapping.
    #[napi(value = "stale-mapping")]
    StaleMapping,
    /// Remove a stale intent.
    #[napi(value = "stale-intent")]
    StaleIntent,
}

/// Orphans, in listing order: each row an item of the pool's listing.
#[napi(object)]
pub struct ReconcileOrphans {
    /// The item's index in the pool's listing (the input's columns).
    pub items: Uint32Array,
    /// Why each is an orphan.
    pub reasons: Vec<ReconcileOrphanReason>,
}

/// Stale mappings, in store order: each row a mapping of the input.
#[napi(object)]
pub struct ReconcileStaleMappings {
    /// The mapping's index in the input's `mappings` columns.
    pub mappings: Uint32Array,
    /// Why each is stale (`NOT_LISTED`).
    pub reasons: Vec<ReconcileStaleReason>,
}

/// Pending items, one column per field (row `i` is one item; a rare class, so it carries
/// its ids).
#[napi(object)]
pub struct ReconcilePendingItems {
    /// The `sbx_…` ids; null for a handle without a verified stamp.
    pub sandbox_ids: Vec<Option<String>>,
    /// The provider's sandbox ids.
    pub provider_sandbox_ids: Vec<String>,
    /// Why each is pending.
    pub reasons: Vec<ReconcilePendingReason>,
}

/// One pool's classes (all empty for a pool that could not be listed). Rows refer to the
/// input by index: the caller holds every id already.
#[napi(object)]
pub struct ReconcilePoolClasses {
    /// Orphans.
    pub orphan: ReconcileOrphans,
    /// Stale mappings.
    pub stale_mapping: ReconcileStaleMappings,
    /// The ids both sides agree on, in listing order: the index, in the input's `mappings`,
    /// of the mapping each listed item matched (its id is the mapped id).
    pub mapped: Uint32Array,
    /// Pending items: listed ones in listing order, then young unlisted mappings.
    pub pending: ReconcilePendingItems,
}

/// The reclaim work list, one column per field (row `i` is one action), in order: per
/// pool, its orphans, its stale mappings, its stale intents. Besides the in-flight re-read
/// every action makes, each row says which re-check it needs.
#[napi(object)]
pub struct ReconcileWork {
    /// What to do.
    pub classes: Vec<ReconcileWorkClass>,
    /// The pool: its index in the input's `pools`.
    pub pools: Uint32Array,
    /// What it acts on: an orphan's index in its pool's listing, a stale mapping's in
    /// `mappings`, a stale intent's in `intents`.
    pub indices: Uint32Array,
    /// Whether a mapping of the id written since the store was read saves it
    /// (`NOW_MAPPED`): false for a stale mapping and a `DUPLICATE_OF_MAPPED` orphan.
    pub saved_by_mapping: Vec<bool>,
    /// Whether an orphan's intent record is removed once it is destroyed (never for a
    /// `DUPLICATE_OF_MAPPED` orphan, whose id's record is a live mapping).
    pub removes_intent: Vec<bool>,
    /// Whether an orphan is an idle warm member (`WARM_POOL_GONE`): taken out of the
    /// inventory, if still idle, before it is destroyed and its record removed.
    pub warm_member: Vec<bool>,
}

/// A run's classification.
#[napi(object)]
pub struct ReconcileClassification {
    /// Per pool, in the input's order.
    pub pools: Vec<ReconcilePoolClasses>,
    /// Intents whose launch is over and left nothing listed: the index, in the input's
    /// `intents`, of the first record of each id.
    pub stale_intents: Uint32Array,
    /// What `reclaim: true` acts on (empty unless the input's `reclaim`).
    pub work: ReconcileWork,
}

/// A JS number as a process id: a positive integer, else none.
fn pid(n: f64) -> Option<u64> {
    (n.fract() == 0.0 && (1.0..=9_007_199_254_740_991.0).contains(&n)).then_some(n as u64)
}

fn finite(n: f64) -> Option<f64> {
    n.is_finite().then_some(n)
}

fn intent(i: ReconcileIntent) -> IntentFact {
    IntentFact {
        id: i.id,
        provider_id: i.provider_id,
        state: i.state,
        // NaN compares false with now, as a missing expiry does.
        expires_at_ms: i.expires_at.filter(|e| !e.is_nan()),
        owner_host: i.owner_host,
        owner_pid: i.owner_pid.and_then(pid),
        owner_session: i.owner_session,
    }
}

fn orphan_reason(r: OrphanReason) -> ReconcileOrphanReason {
    match r {
        OrphanReason::LaunchFailed => ReconcileOrphanReason::LaunchFailed,
        OrphanReason::WriterGone => ReconcileOrphanReason::WriterGone,
        OrphanReason::IntentExpired => ReconcileOrphanReason::IntentExpired,
        OrphanReason::IntentAbandoned => ReconcileOrphanReason::IntentAbandoned,
        OrphanReason::DuplicateOfMapped => ReconcileOrphanReason::DuplicateOfMapped,
        OrphanReason::GraceElapsed => ReconcileOrphanReason::GraceElapsed,
        OrphanReason::WarmPoolGone => ReconcileOrphanReason::WarmPoolGone,
    }
}

fn pending_reason(r: PendingReason) -> ReconcilePendingReason {
    match r {
        PendingReason::InFlight => ReconcilePendingReason::InFlight,
        PendingReason::InFlightElsewhere => ReconcilePendingReason::InFlightElsewhere,
        PendingReason::WithinGrace => ReconcilePendingReason::WithinGrace,
        PendingReason::AgeUnknown => ReconcilePendingReason::AgeUnknown,
        PendingReason::NotListedYet => ReconcilePendingReason::NotListedYet,
        PendingReason::StampUnverified => ReconcilePendingReason::StampUnverified,
    }
}

fn indices(xs: impl Iterator<Item = usize>) -> Uint32Array {
    Uint32Array::new(xs.map(|x| x as u32).collect())
}

fn pool_classes(p: PoolClasses) -> ReconcilePoolClasses {
    let orphan = ReconcileOrphans {
        items: indices(p.orphan.iter().map(|o| o.0)),
        reasons: p.orphan.iter().map(|o| orphan_reason(o.1)).collect(),
    };
    let stale_mapping = ReconcileStaleMappings {
        mappings: indices(p.stale_mapping.iter().copied()),
        reasons: p.stale_mapping.iter().map(|_| ReconcileStaleReason::NotListed).collect(),
    };
    let mut pending = ReconcilePendingItems {
        sandbox_ids: Vec::with_capacity(p.pending.len()),
        provider_sandbox_ids: Vec::with_capacity(p.pending.len()),
        reasons: Vec::with_capacity(p.pending.len()),
    };
    for x in p.pending {
        pending.sandbox_ids.push(x.sandbox_id);
        pending.provider_sandbox_ids.push(x.provider_sandbox_id);
        pending.reasons.push(pending_reason(x.reason));
    }
    ReconcilePoolClasses { orphan, stale_mapping, mapped: indices(p.mapped.into_iter()), pending }
}

fn work(items: &[Work]) -> ReconcileWork {
    ReconcileWork {
        classes: items
            .iter()
            .map(|w| match w.kind {
                WorkKind::Orphan | WorkKind::WarmMember => ReconcileWorkClass::Orphan,
                WorkKind::StaleMapping => ReconcileWorkClass::StaleMapping,
                WorkKind::StaleIntent => ReconcileWorkClass::StaleIntent,
            })
            .collect(),
        pools: indices(items.iter().map(|w| w.pool)),
        indices: indices(items.iter().map(|w| w.index)),
        saved_by_mapping: items.iter().map(|w| w.saved_by_mapping).collect(),
        removes_intent: items.iter().map(|w| w.removes_intent).collect(),
        warm_member: items.iter().map(|w| w.kind == WorkKind::WarmMember).collect(),
    }
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

/// Rows from the mapping columns.
fn mappings(m: ReconcileMappings) -> Result<Vec<MappingFact>, Failure> {
    let n = m.ids.len();
    if m.provider_ids.len() != n
        || m.provider_sandbox_ids.len() != n
        || m.fleets.len() != n
        || m.created_at_ms.len() != n
        || m.warm.as_ref().is_some_and(|w| w.len() != n)
    {
        return Err(internal("(reconcile mapping columns of unequal length)"));
    }
    let mut warm = m.warm.map(Vec::into_iter);
    Ok(m.ids
        .into_iter()
        .zip(m.provider_ids)
        .zip(m.provider_sandbox_ids)
        .zip(m.fleets)
        .zip(m.created_at_ms.iter().copied())
        .map(|((((id, provider_id), provider_sandbox_id), fleet), created)| MappingFact {
            id,
            provider_id,
            provider_sandbox_id,
            fleet,
            created_at_ms: finite(created),
            warm: warm.as_mut().and_then(Iterator::next).flatten(),
        })
        .collect())
}

/// Classifies one reconcile run (the rules: `src/core/reconcile.rs`): per pool its
/// orphans, stale mappings, mapped ids and pending items with their reason codes, the
/// stale intents, and the reclaim work list. Whether an id is in flight is answered here,
/// from the router's jobs and `others` (the sandbox ids other routers of this process are
/// making). Throws only on an internal bug.
#[napi]
pub fn reconcile_classify(
    env: Env,
    router: &External<RouterState>,
    others: Vec<String>,
    input: ReconcileInput,
) -> napi::Result<ReconcileClassification> {
    guard(&env, || -> Result<ReconcileClassification, Failure> {
        let ReconcileInput {
            fleet,
            session,
            host,
            now,
            grace_ms,
            reclaim,
            pools,
            mappings: m,
            intents,
            gone_pids,
            warm_pools,
        } = input;
        let warm_pools = warm_pools.unwrap_or_default();
        let pools = pools
            .into_iter()
            .map(|p| {
                let listing = match p.listed {
                    Some(l) => Listing::Listed(listing(l)?),
                    None => Listing::Unknown,
                };
                Ok(Pool { provider_id: p.provider_id, listing })
            })
            .collect::<Result<Vec<Pool>, Failure>>()?;
        let mappings = mappings(m)?;
        let intents: Vec<IntentFact> = intents.into_iter().map(intent).collect();
        let gone_pids: Vec<u64> = gone_pids.into_iter().filter_map(pid).collect();
        let run = Run {
            facts: Facts { fleet: &fleet, session: &session, host: &host, now_ms: now, grace_ms },
            pools: &pools,
            mappings: &mappings,
            intents: &intents,
            gone_pids: &gone_pids,
            warm_pools: &warm_pools,
        };
        let r = router.router.borrow();
        let others: std::collections::HashSet<&str> = others.iter().map(String::as_str).collect();
        let in_flight = |id: &str| others.contains(id) || SandboxKey::parse(id).is_some_and(|k| r.in_flight(k));
        let c: Classification = classify(&run, &in_flight);
        Ok(ReconcileClassification {
            pools: c.pools.into_iter().map(pool_classes).collect(),
            stale_intents: indices(c.stale_intents.into_iter()),
            work: work(if reclaim { &c.work } else { &[] }),
        })
    })
}
