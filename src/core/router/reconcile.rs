//! Reconcile runs: `router.reconcile(options)` as a job of the router.
//!
//! A run compares what each pool holds under this router's stamp with the mapping store
//! and, with `reclaim: true`, cleans up the difference. What each item *is* (orphan, stale
//! mapping, mapped, pending, stale intent) is the classifier's (`core::reconcile`); this
//! file is the run around it: its options (each default and range, here once), its
//! deadline (a timer on the clock readings every report carries: each step's bound is
//! computed from them), the order of its I/O, how many reclaim actions run at once, every
//! outcome code, the report and the events. JavaScript (`lib/reconcile.js`) performs each
//! step and reports what happened as facts; it decides nothing.
//!
//! # Lanes
//!
//! A run's I/O is concurrent twice: every pool is listed at once, and up to `concurrency`
//! reclaim actions run at once. The driver performs one step at a time per job, so a run is
//! driven by *lanes*, each a job of the driver with its own key that asks the run what to
//! do next. A step with the [`flags::FORK`] flag asks the caller to start more lanes
//! ([`Router::reconcile_forks`] says how many, [`Router::reconcile_lane`] starts one, in
//! order; the lane that asks is over, so the units of work begin in their order); a lane
//! with nothing to do now is over (`StepKind::Done`; the caller ends it with
//! [`Router::reconcile_end`]); the lane that finishes the run is answered
//! `StepKind::Succeeded` and takes the report ([`Router::reconcile_report`]).
//!
//! # The steps of one run
//!
//! 1. `ReconcileList`, one per pool, all at once, each within what is left of the deadline
//!    (a pool the deadline reached first is `TIMEOUT` without being asked).
//! 2. `ReconcileRead` of the store's mappings, then (flag `INTENTS`, when the store keeps
//!    intents) its intents: after the listings, so a mapping written meanwhile is seen. A
//!    store that cannot be read ends the run with `MAPPING_READ_FAILED`.
//! 3. `ReconcileSignal`: the intent writers on this host, by pid. The caller reports what
//!    `process.kill(pid, 0)` did (a process is gone when that threw `ESRCH`) and the ids the
//!    other routers of this process are making; the run is classified in that report.
//! 4. With `reclaim: true`, each action, at most `concurrency` at once, each re-checked
//!    first (`ReconcileRecheck`: in flight in this process now?). An action the deadline
//!    reached before it started is `DEADLINE`.
//!    - An orphan: an idle warm member is taken out of the fleet's inventory first
//!      (`ReconcileWarmTake`); one a mapping written since the store was read saves is kept
//!      (`ReconcileRecord`); it is re-resolved as owned (`ReconcileLookup`) and destroyed
//!      (`ReconcileDestroy`), then its record (a warm member's) and intent are removed
//!      (`ReconcileDelete`, best effort).
//!    - A stale mapping is removed (`ReconcileDelete`) only once the runtime's owned lookup
//!      also finds nothing (on the listing alone when the runtime has no `getById`).
//!    - A stale intent is re-checked against the store (`ReconcileRecord`), then removed.
//!
//!    What a reclaimed sandbox held is given back ([`Router::released`]; in a shared ledger,
//!    `ReconcileRelease`), with `budget.released` `RECLAIMED` when a budget slot was.
//! 5. The report and `reconcile.completed`.

use super::operation::{is_not_found, Thrown};
use super::slab::Slab;
use super::step::{flags, Next, StepKind};
use super::Router;
use crate::core::capacity::UnknownReason;
use crate::core::error::{ErrorClass, Failure, Fault};
use crate::core::events::{Event, PoolId};
use crate::core::ids::SandboxKey;
use crate::core::json::shown;
use crate::core::reconcile::{
    self as rules, Facts, IntentFact, Listed, Listing, MappingFact, PoolClasses, Work, WorkKind, NOT_LISTED,
};
use rustc_hash::FxHashSet;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// Default `graceMs`: the age (ms) before a stamped sandbox without mapping or intent is an
/// orphan, 15 minutes: three times the default launch deadline, with room for clock skew
/// between the provider and this host.
pub const DEFAULT_GRACE_MS: u64 = 15 * 60_000;
/// Largest `graceMs`: 30 days.
pub const MAX_GRACE_MS: u64 = 30 * 86_400_000;
/// Default `concurrency`: reclaim actions in flight at once.
pub const DEFAULT_CONCURRENCY: u32 = 8;
/// Largest `concurrency`.
pub const MAX_CONCURRENCY: u32 = 256;
/// Default `timeoutMs`: the deadline of a whole run.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Largest `timeoutMs`: one day.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;
/// Code of a run whose store could not be listed.
pub const MAPPING_READ_FAILED: &str = "MAPPING_READ_FAILED";
/// The errno that says a signalled process does not exist.
const ESRCH: &str = "ESRCH";

/// `router.reconcile(options)`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The pool ids to reconcile (None: every pool), as given.
    pub providers: Option<Vec<String>>,
    /// `false`: a dry run.
    pub reclaim: bool,
    /// See [`DEFAULT_GRACE_MS`].
    pub grace_ms: u64,
    /// See [`DEFAULT_CONCURRENCY`].
    pub concurrency: u32,
    /// See [`DEFAULT_TIMEOUT_MS`].
    pub timeout_ms: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            providers: None,
            reclaim: false,
            grace_ms: DEFAULT_GRACE_MS,
            concurrency: DEFAULT_CONCURRENCY,
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }
    }
}

/// `INVALID_REQUEST` naming the option `field`.
fn invalid(field: &str, what: &str) -> Failure {
    Fault::invalid(
        ErrorClass::RequestValidation,
        "INVALID_REQUEST",
        format!("invalid reconcile options: {field} {what}"),
        field,
    )
}

/// The top level of the options' JSON text, its keys in the caller's order (so the first
/// unknown one is the one reported).
enum Top {
    Object(Vec<(String, Value)>),
    Other,
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Top, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Top;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    out.push(entry);
                }
                Ok(Top::Object(out))
            }
            // An array is an object whose keys are its indices (as JavaScript reads its keys).
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<Value>()? {
                    out.push((out.len().to_string(), v));
                }
                Ok(Top::Object(out))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Top, E> {
                Ok(Top::Other)
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Top, E> {
                Ok(Top::Other)
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Top, E> {
                Ok(Top::Other)
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Top, E> {
                Ok(Top::Other)
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Top, E> {
                Ok(Top::Other)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Top, E> {
                Ok(Top::Other)
            }
        }
        d.deserialize_any(V)
    }
}

impl Options {
    /// The options from their JSON text, read once by the caller (leniently: a value JSON
    /// cannot carry is `null`; absent options are `{}`); None: they could not be read (a
    /// property access threw). Every omitted option takes its default; a bad one is the
    /// typed `INVALID_REQUEST` naming it.
    pub fn parse(text: Option<&str>) -> Result<Options, Failure> {
        let unreadable = || invalid("options", "could not be read (a property access threw)");
        let top: Top = serde_json::from_str(text.ok_or_else(unreadable)?).map_err(|_| unreadable())?;
        let Top::Object(entries) = top else { return Err(invalid("options", "must be an object")) };
        const KEYS: [&str; 5] = ["providers", "reclaim", "graceMs", "concurrency", "timeoutMs"];
        if let Some((k, _)) = entries.iter().find(|(k, _)| !KEYS.contains(&k.as_str())) {
            return Err(invalid(&shown(k), "is not a known option"));
        }
        let get = |name: &str| entries.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v);
        let mut o = Options::default();
        if let Some(v) = get("reclaim") {
            o.reclaim = v.as_bool().ok_or_else(|| invalid("reclaim", "must be a boolean"))?;
        }
        let int = |name: &str, min: u64, max: u64| -> Result<Option<u64>, Failure> {
            let Some(v) = get(name) else { return Ok(None) };
            match v.as_f64() {
                Some(n) if n.fract() == 0.0 && n >= min as f64 && n <= max as f64 => Ok(Some(n as u64)),
                _ => Err(invalid(name, &format!("must be an integer from {min} to {max}"))),
            }
        };
        if let Some(n) = int("graceMs", 0, MAX_GRACE_MS)? {
            o.grace_ms = n;
        }
        if let Some(n) = int("concurrency", 1, u64::from(MAX_CONCURRENCY))? {
            o.concurrency = n as u32;
        }
        if let Some(n) = int("timeoutMs", 1, MAX_TIMEOUT_MS)? {
            o.timeout_ms = n;
        }
        if let Some(v) = get("providers") {
            let Value::Array(items) = v else { return Err(invalid("providers", "must be an array of provider ids")) };
            let ids = items
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    p.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| invalid(&format!("providers[{i}]"), "must be a provider id"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            o.providers = Some(ids);
        }
        Ok(o)
    }
}

/// What the caller knows when a run begins (facts about its objects, read once).
#[derive(Debug, Clone, Default)]
pub struct Begin {
    /// The mapping store has `list()`.
    pub has_list: bool,
    /// The fleet's warm inventory is the mapping store (a `PostgresMappingStore` that is also
    /// `capacity.coordinator`): an idle member is taken out of it before it is destroyed.
    pub fleet_inventory: bool,
    /// Per registry pool (by index): it lists through a native finder (else its runtime's
    /// label search).
    pub native_finders: Vec<bool>,
}

/// How the awaited call of a step settled, as the caller saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// It resolved to a value (not null or undefined).
    Value,
    /// It resolved to null or undefined.
    Nothing,
    /// It threw or rejected.
    Threw,
    /// It did not settle within the step's bound.
    TimedOut,
    /// The object has no such method.
    NoMethod,
}

/// What a pool's listing step found.
#[derive(Debug, Clone, PartialEq)]
pub enum ListFact {
    /// The finder listed it completely.
    Listed(Vec<Listed>),
    /// The finder answered why it could not (the reason a native finder or the stamp rule
    /// gave, or [`crate::core::capacity::ListFailure::reason`]).
    Unlisted(UnknownReason),
    /// The finder itself threw.
    Threw,
}

/// What `process.kill(pid, 0)` did for one pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// It threw.
    pub threw: bool,
    /// The thrown error's `code`, when a string.
    pub code: Option<String>,
}

impl Signal {
    /// Whether the process is gone: the signal threw `ESRCH` (one that exists but cannot be
    /// signalled, `EPERM`, is alive).
    pub fn gone(&self) -> bool {
        self.threw && self.code.as_deref() == Some(ESRCH)
    }
}

/// The typed outcome of one reclaim action (`report.outcomes[].outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The orphan was destroyed.
    Destroyed,
    /// The orphan was gone already.
    AlreadyGone,
    /// A call did not settle within its bound.
    TimedOut,
    /// The destroy (or the lookup before it) failed.
    DestroyFailed,
    /// A record of its id was written meanwhile (or a warm member was claimed): kept.
    NowMapped,
    /// A provision of this process is making it now: kept.
    InFlight,
    /// The run's deadline came before the action started.
    Deadline,
    /// The stale mapping's sandbox still exists: kept.
    StillExists,
    /// The stale mapping's lookup failed: kept.
    LookupFailed,
    /// The stale mapping was removed.
    Unmapped,
    /// The store's delete failed.
    UnmapFailed,
    /// The stale intent was removed.
    IntentRemoved,
}

impl Outcome {
    /// The documented code.
    pub fn code(self) -> &'static str {
        match self {
            Outcome::Destroyed => "DESTROYED",
            Outcome::AlreadyGone => "ALREADY_GONE",
            Outcome::TimedOut => "TIMED_OUT",
            Outcome::DestroyFailed => "DESTROY_FAILED",
            Outcome::NowMapped => "NOW_MAPPED",
            Outcome::InFlight => "IN_FLIGHT",
            Outcome::Deadline => "DEADLINE",
            Outcome::StillExists => "STILL_EXISTS",
            Outcome::LookupFailed => "LOOKUP_FAILED",
            Outcome::Unmapped => "UNMAPPED",
            Outcome::UnmapFailed => "UNMAP_FAILED",
            Outcome::IntentRemoved => "INTENT_REMOVED",
        }
    }

    /// Whether what the sandbox held is given back (it is gone, or was never made).
    fn releases(self) -> bool {
        matches!(self, Outcome::Destroyed | Outcome::Unmapped | Outcome::IntentRemoved)
    }
}

/// The class of an action (`report.outcomes[].class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `orphan`.
    Orphan,
    /// `stale-mapping`.
    StaleMapping,
    /// `stale-intent`.
    StaleIntent,
}

impl Class {
    /// The documented name.
    pub fn name(self) -> &'static str {
        match self {
            Class::Orphan => "orphan",
            Class::StaleMapping => "stale-mapping",
            Class::StaleIntent => "stale-intent",
        }
    }

    fn of(kind: WorkKind) -> Class {
        match kind {
            WorkKind::Orphan | WorkKind::WarmMember => Class::Orphan,
            WorkKind::StaleMapping => Class::StaleMapping,
            WorkKind::StaleIntent => Class::StaleIntent,
        }
    }
}

/// Where a reclaim action is: the step it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Recheck,
    WarmTake,
    Record,
    Lookup,
    Destroy,
    /// An idle warm member's record, after its destroy (best effort).
    ForgetRecord,
    /// An orphan's intent, after its destroy (best effort).
    ForgetIntent,
    Unmap,
    DropIntent,
    Release,
}

impl Stage {
    fn kind(self) -> StepKind {
        match self {
            Stage::Recheck => StepKind::ReconcileRecheck,
            Stage::WarmTake => StepKind::ReconcileWarmTake,
            Stage::Record => StepKind::ReconcileRecord,
            Stage::Lookup => StepKind::ReconcileLookup,
            Stage::Destroy => StepKind::ReconcileDestroy,
            Stage::ForgetRecord | Stage::ForgetIntent | Stage::Unmap | Stage::DropIntent => StepKind::ReconcileDelete,
            Stage::Release => StepKind::ReconcileRelease,
        }
    }
}

/// What an action does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Ask for this step, within this bound (0: none).
    Ask(Stage, u64),
    /// It is over with this outcome.
    Done(Outcome),
}

/// What an action's rules read besides its own facts.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// What is left of the run's deadline, ms.
    left: u64,
    /// `callbackTimeoutMs`.
    callback: u64,
    /// `operationTimeoutMs`.
    operation: u64,
    /// The store keeps intents.
    intents: bool,
    /// The fleet's warm inventory is the store.
    fleet_inventory: bool,
}

impl Limits {
    /// A store or runtime call's bound: `limit`, within what is left, and at least 1 ms (a
    /// call made after the deadline still gets its turn to answer).
    fn within(&self, limit: u64) -> u64 {
        limit.min(self.left).max(1)
    }
}

/// What a report tells an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fact {
    /// The re-check: whether a provision of this process is making it now.
    InFlight(bool),
    /// The step's call settled so (`gone`: a rejection that says the sandbox is gone).
    Settled(Settled, bool),
}

/// One reclaim action.
#[derive(Debug, Clone)]
struct Action {
    work: Work,
    /// The run pool it is about (index into the run's pools).
    pool: usize,
    sandbox_id: String,
    provider_sandbox_id: Option<String>,
    stage: Stage,
    /// Decided, while what it held is given back (`Release`).
    outcome: Option<Outcome>,
    /// The in-process ledger gave a budget slot of it back (`Release` may say so too).
    budget: bool,
}

impl Action {
    /// The first step: the in-flight re-check, unless the deadline came first.
    fn start(&self, l: &Limits) -> Then {
        if l.left == 0 {
            Then::Done(Outcome::Deadline)
        } else {
            Then::Ask(Stage::Recheck, 0)
        }
    }

    /// The owned lookup before a destroy or an unmap, within the operation bound; none is
    /// left: `DEADLINE`.
    fn lookup(l: &Limits) -> Then {
        match l.operation.min(l.left) {
            0 => Then::Done(Outcome::Deadline),
            ms => Then::Ask(Stage::Lookup, ms),
        }
    }

    /// After an orphan's destroy: its record (an idle warm member's), then its intent.
    fn forget(&self, from: Stage, l: &Limits) -> Then {
        if from == Stage::Destroy && self.work.kind == WorkKind::WarmMember {
            return Then::Ask(Stage::ForgetRecord, l.within(l.callback));
        }
        if from != Stage::ForgetIntent && l.intents && self.work.removes_intent {
            return Then::Ask(Stage::ForgetIntent, l.within(l.callback));
        }
        Then::Done(Outcome::Destroyed)
    }

    /// What follows `fact`, reported for the current stage (the rules: the module docs);
    /// None: a fact the stage did not ask for.
    fn after(&self, fact: Fact, l: &Limits) -> Option<Then> {
        use Settled as S;
        let kind = self.work.kind;
        let orphan = matches!(kind, WorkKind::Orphan | WorkKind::WarmMember);
        // Whether a record written since the store was read saves it, asked of the store.
        let saved =
            |next: Then| if self.work.saved_by_mapping { Then::Ask(Stage::Record, l.within(l.callback)) } else { next };
        Some(match (self.stage, fact) {
            (Stage::Recheck, Fact::InFlight(true)) => Then::Done(Outcome::InFlight),
            (Stage::Recheck, Fact::InFlight(false)) => match kind {
                WorkKind::WarmMember if l.fleet_inventory => Then::Ask(Stage::WarmTake, 0),
                WorkKind::Orphan | WorkKind::WarmMember => saved(Action::lookup(l)),
                WorkKind::StaleMapping => Action::lookup(l),
                WorkKind::StaleIntent => saved(Then::Ask(Stage::DropIntent, l.within(l.callback))),
            },
            (Stage::WarmTake, Fact::Settled(s, _)) => match s {
                // Claimed meanwhile (or the fleet could not say): a provision's now.
                S::Value => saved(Action::lookup(l)),
                _ => Then::Done(Outcome::NowMapped),
            },
            // A store that threw or timed out may hold the record: kept.
            (Stage::Record, Fact::Settled(s, _)) => match (s, orphan) {
                (S::Nothing, true) => Action::lookup(l),
                (S::Nothing, false) => Then::Ask(Stage::DropIntent, l.within(l.callback)),
                _ => Then::Done(Outcome::NowMapped),
            },
            (Stage::Lookup, Fact::Settled(s, gone)) if orphan => match s {
                S::Value | S::NoMethod => Then::Ask(Stage::Destroy, l.within(l.operation)),
                S::Nothing => Then::Done(Outcome::AlreadyGone),
                S::TimedOut => Then::Done(Outcome::TimedOut),
                S::Threw if gone => Then::Done(Outcome::AlreadyGone),
                S::Threw => Then::Done(Outcome::DestroyFailed),
            },
            (Stage::Lookup, Fact::Settled(s, gone)) => match s {
                S::Value => Then::Done(Outcome::StillExists),
                S::Nothing | S::NoMethod => Then::Ask(Stage::Unmap, l.within(l.callback)),
                S::TimedOut => Then::Done(Outcome::TimedOut),
                S::Threw if gone => Then::Ask(Stage::Unmap, l.within(l.callback)),
                S::Threw => Then::Done(Outcome::LookupFailed),
            },
            (Stage::Destroy, Fact::Settled(s, _)) => match s {
                S::Value | S::Nothing => self.forget(Stage::Destroy, l),
                S::TimedOut => Then::Done(Outcome::TimedOut),
                S::Threw | S::NoMethod => Then::Done(Outcome::DestroyFailed),
            },
            // Best effort: the orphan is destroyed whatever these answer.
            (stage @ (Stage::ForgetRecord | Stage::ForgetIntent), Fact::Settled(..)) => self.forget(stage, l),
            (Stage::Unmap, Fact::Settled(s, _)) => match s {
                S::Value | S::Nothing => Then::Done(Outcome::Unmapped),
                S::TimedOut => Then::Done(Outcome::TimedOut),
                S::Threw | S::NoMethod => Then::Done(Outcome::UnmapFailed),
            },
            (Stage::DropIntent, Fact::Settled(s, _)) => match s {
                S::Value | S::Nothing => Then::Done(Outcome::IntentRemoved),
                S::TimedOut => Then::Done(Outcome::TimedOut),
                S::Threw | S::NoMethod => Then::Done(Outcome::UnmapFailed),
            },
            (Stage::Recheck, Fact::Settled(..)) | (_, Fact::InFlight(_)) | (Stage::Release, _) => return None,
        })
    }
}

/// What a lane is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// Nothing now: it is over (its caller ends it).
    Idle,
    /// Listing this run pool.
    List(usize),
    /// Reading the store's mappings.
    Mappings,
    /// Reading the store's intents.
    Intents,
    /// Signalling the intent writers' pids.
    Signal,
    /// Performing this action.
    Act(usize),
    /// It carries the run's failure.
    Failed,
    /// It finished the run: the report is its.
    Finished,
}

#[derive(Debug)]
struct Lane {
    run: u32,
    task: Task,
}

/// What a run remembers of one pool.
#[derive(Debug)]
struct RunPool {
    /// Its registry index (the pool of the steps about it).
    index: usize,
    native: bool,
    /// Listed, or why not.
    listing: Option<Result<Vec<Listed>, UnknownReason>>,
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its pools are being listed.
    Listing,
    /// Its store is being read, then its intent writers signalled (one lane).
    Store,
    /// Classified: its actions run (none in a dry run).
    Reclaim,
    /// Its report is made (a lane started after that has nothing to do).
    Over,
}

/// One run.
struct Run {
    options: Options,
    phase: Phase,
    /// When it started and when its deadline is (wall clock, ms).
    started: i64,
    deadline: i64,
    intents: bool,
    fleet_inventory: bool,
    pools: Vec<RunPool>,
    ids: Vec<String>,
    /// The pools that keep a warm pool here.
    warm_pools: Vec<String>,
    /// Pools not yet handed to a lane / not yet reported.
    to_list: usize,
    listing: usize,
    mappings: Vec<MappingFact>,
    intent_facts: Vec<IntentFact>,
    pids: Vec<u64>,
    classes: Vec<PoolClasses>,
    stale_intents: Vec<usize>,
    actions: Vec<Action>,
    next_action: usize,
    acting: usize,
    forks: u32,
    /// Lanes handed out by [`Router::reconcile_forks`] and not started yet: the run is not
    /// over before they are (the caller starts each one on the run's lane, which must still
    /// exist then).
    starting: u32,
    outcomes: Vec<OutcomeRow>,
    timed_out: bool,
    failure: Option<Failure>,
    report: Option<Report>,
}

impl Run {
    fn left(&self, wall: i64) -> u64 {
        self.deadline.saturating_sub(wall).max(0) as u64
    }
}

/// Items of one class in a pool, one column per field (row `i` is one item).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    /// The `sbx_…` ids (None: a handle without a verified stamp).
    pub sandbox_ids: Vec<Option<String>>,
    /// The provider's sandbox ids.
    pub provider_sandbox_ids: Vec<String>,
    /// Each one's reason code.
    pub reasons: Vec<&'static str>,
}

impl Rows {
    fn push(&mut self, sandbox_id: Option<String>, provider_sandbox_id: String, reason: &'static str) {
        self.sandbox_ids.push(sandbox_id);
        self.provider_sandbox_ids.push(provider_sandbox_id);
        self.reasons.push(reason);
    }

    fn len(&self) -> u32 {
        self.reasons.len() as u32
    }
}

/// One pool of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolReport {
    /// Its id.
    pub provider_id: String,
    /// Whether a native finder listed it (else its runtime's label search).
    pub native: bool,
    /// Why it could not be listed (None: listed).
    pub reason: Option<UnknownReason>,
    /// Orphans.
    pub orphan: Rows,
    /// Stale mappings.
    pub stale_mapping: Rows,
    /// Mapped ids.
    pub mapped: Vec<String>,
    /// Pending items.
    pub pending: Rows,
}

/// Totals over the pools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
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

/// One action's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeRow {
    /// Its pool.
    pub provider_id: String,
    /// What it acted on.
    pub sandbox_id: String,
    /// The provider's sandbox id (None: an intent).
    pub provider_sandbox_id: Option<String>,
    /// Its class.
    pub class: Class,
    /// Its outcome.
    pub outcome: Outcome,
}

/// A run's report (the documented `ReconcileReport`, typed).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// `reclaim`.
    pub reclaim: bool,
    /// The router's fleet.
    pub fleet: String,
    /// `graceMs`.
    pub grace_ms: u64,
    /// When it started (wall clock, ms).
    pub started_at: i64,
    /// How long it took, ms.
    pub duration_ms: u64,
    /// The deadline came before everything was done.
    pub timed_out: bool,
    /// Per pool, in run order.
    pub pools: Vec<PoolReport>,
    /// Intents whose launch is over and left nothing listed.
    pub stale_intents: Vec<String>,
    /// Each action's outcome, in the order they ended.
    pub outcomes: Vec<OutcomeRow>,
    /// Totals over the pools.
    pub totals: Totals,
}

/// The reconcile runs in flight and their lanes.
#[derive(Default)]
pub(crate) struct Runs {
    runs: Slab<Run>,
    lanes: Slab<Lane>,
}

impl Runs {
    /// Runs in flight (the leak tests count them with the jobs).
    pub(crate) fn len(&self) -> usize {
        self.runs.len()
    }
}

fn unknown_lane() -> Failure {
    Fault::internal("(an unknown reconcile lane)")
}

/// The lanes to start for `n` units of work at once: none for one (the lane that asks does
/// it); otherwise one each, and the lane that starts them leaves the work to them, so the
/// first unit's I/O begins first.
fn lanes_for(n: usize) -> u32 {
    if n > 1 {
        n as u32
    } else {
        0
    }
}

/// A step about pool `pool` (registry index).
fn at(kind: StepKind, pool: usize, bound_ms: u64) -> Next {
    Next { kind, pool, bound_ms, flags: 0 }
}

impl Router {
    /// Begins a run of `router.reconcile(options)` (`options`: their JSON text, see
    /// [`Options::parse`]) at `wall` (the wall clock, ms): its first lane's key and step.
    /// Throws `INVALID_REQUEST` for bad options or a pool that is not registered, and
    /// `MAPPING_READ_FAILED` for a store without `list()`.
    pub fn reconcile_begin(&mut self, options: Option<&str>, facts: Begin, wall: i64) -> Result<(u32, Next), Failure> {
        let o = Options::parse(options)?;
        let registry = self.registry().clone();
        let registry = registry.borrow();
        let all = registry.registry.pools();
        let mut wanted: Vec<usize> = Vec::new();
        match &o.providers {
            None => wanted.extend(0..all.len()),
            Some(ids) => {
                for (i, id) in ids.iter().enumerate() {
                    let Some(p) = all.iter().position(|p| &p.id == id) else {
                        return Err(invalid(&format!("providers[{i}]"), "is not a registered provider id"));
                    };
                    if !wanted.contains(&p) {
                        wanted.push(p);
                    }
                }
            }
        }
        if !facts.has_list {
            return Err(Fault::new(
                ErrorClass::MappingPersistence,
                MAPPING_READ_FAILED,
                "the mapping store has no list(): reconcile cannot compare",
            ));
        }
        let pools: Vec<RunPool> = wanted
            .iter()
            .map(|&index| RunPool {
                index,
                native: facts.native_finders.get(index).copied().unwrap_or(false),
                listing: None,
            })
            .collect();
        let run = Run {
            started: wall,
            deadline: wall.saturating_add(o.timeout_ms as i64),
            intents: self.intents,
            fleet_inventory: facts.fleet_inventory,
            ids: wanted.iter().map(|&p| all[p].id.clone()).collect(),
            warm_pools: all.iter().filter(|p| p.warm.is_some()).map(|p| p.id.clone()).collect(),
            phase: Phase::Listing,
            to_list: pools.len(),
            listing: pools.len(),
            pools,
            options: o,
            mappings: Vec::new(),
            intent_facts: Vec::new(),
            pids: Vec::new(),
            classes: Vec::new(),
            stale_intents: Vec::new(),
            actions: Vec::new(),
            next_action: 0,
            acting: 0,
            forks: 0,
            starting: 0,
            outcomes: Vec::new(),
            timed_out: false,
            failure: None,
            report: None,
        };
        drop(registry);
        let pools = run.pools.len();
        let key = self.reconciles.runs.insert(run);
        let lane = self.reconciles.lanes.insert(Lane { run: key, task: Task::Idle });
        // Every pool is listed at once: one lane each.
        if let Some(r) = self.reconciles.runs.get_mut(key) {
            r.forks = lanes_for(pools);
        }
        let next = self.reconcile_next(lane, wall)?;
        Ok((lane, next))
    }

    /// How many lanes to start beside `lane` now (its step had [`flags::FORK`]).
    pub fn reconcile_forks(&mut self, lane: u32) -> Result<u32, Failure> {
        let run = self.reconciles.lanes.get(lane).ok_or_else(unknown_lane)?.run;
        let r = self.reconciles.runs.get_mut(run).ok_or_else(unknown_lane)?;
        let n = std::mem::take(&mut r.forks);
        r.starting += n;
        Ok(n)
    }

    /// Starts a lane of `lane`'s run at `wall`: its key and first step.
    pub fn reconcile_lane(&mut self, lane: u32, wall: i64) -> Result<(u32, Next), Failure> {
        let run = self.reconciles.lanes.get(lane).ok_or_else(unknown_lane)?.run;
        let r = self.reconciles.runs.get_mut(run).ok_or_else(unknown_lane)?;
        r.starting = r.starting.saturating_sub(1);
        let key = self.reconciles.lanes.insert(Lane { run, task: Task::Idle });
        Ok((key, self.reconcile_next(key, wall)?))
    }

    fn lane_run(&mut self, lane: u32) -> Result<(Task, &mut Run), Failure> {
        let l = self.reconciles.lanes.get(lane).ok_or_else(unknown_lane)?;
        let task = l.task;
        let run = self.reconciles.runs.get_mut(l.run).ok_or_else(unknown_lane)?;
        Ok((task, run))
    }

    fn set_task(&mut self, lane: u32, task: Task) {
        if let Some(l) = self.reconciles.lanes.get_mut(lane) {
            l.task = task;
        }
    }

    /// The pool `lane` lists reported what it found.
    pub fn reconcile_listed(&mut self, lane: u32, fact: ListFact, wall: i64) -> Result<Next, Failure> {
        let (task, run) = self.lane_run(lane)?;
        let Task::List(p) = task else { return Err(Fault::internal("(a listing out of turn)")) };
        run.pools[p].listing = Some(match fact {
            ListFact::Listed(items) => Ok(items),
            ListFact::Unlisted(reason) => Err(reason),
            ListFact::Threw => Err(UnknownReason::ReadFailed),
        });
        run.listing -= 1;
        self.set_task(lane, Task::Idle);
        self.reconcile_next(lane, wall)
    }

    /// The store's mappings as `lane` read them (None: it threw, timed out, or answered
    /// something that is not a list). Rows without the three ids are not mappings.
    pub fn reconcile_mappings(
        &mut self,
        lane: u32,
        rows: Option<Vec<Option<MappingFact>>>,
        wall: i64,
    ) -> Result<Next, Failure> {
        let (task, run) = self.lane_run(lane)?;
        if task != Task::Mappings {
            return Err(Fault::internal("(a store read out of turn)"));
        }
        match rows {
            None => self.read_failed(lane),
            Some(rows) => {
                run.mappings = rows.into_iter().flatten().collect();
                let next = if run.intents { Task::Intents } else { Task::Signal };
                self.set_task(lane, next);
                self.reconcile_next(lane, wall)
            }
        }
    }

    /// The store's intents as `lane` read them (None: it failed as a mappings read can).
    /// Rows without an id are not intents.
    pub fn reconcile_intents(
        &mut self,
        lane: u32,
        rows: Option<Vec<Option<IntentFact>>>,
        wall: i64,
    ) -> Result<Next, Failure> {
        let host = self.owner.host.clone();
        let (task, run) = self.lane_run(lane)?;
        if task != Task::Intents {
            return Err(Fault::internal("(a store read out of turn)"));
        }
        let Some(rows) = rows else { return self.read_failed(lane) };
        run.intent_facts = rows.into_iter().flatten().collect();
        // The writers on this host, each once, in the order they appear.
        let mut seen = FxHashSet::default();
        run.pids = run
            .intent_facts
            .iter()
            .filter(|i| i.owner_host.as_deref() == Some(host.as_str()))
            .filter_map(|i| i.owner_pid)
            .filter(|p| seen.insert(*p))
            .collect();
        self.set_task(lane, Task::Signal);
        self.reconcile_next(lane, wall)
    }

    /// The run of `lane` fails: its store could not be read.
    fn read_failed(&mut self, lane: u32) -> Result<Next, Failure> {
        let (_, run) = self.lane_run(lane)?;
        run.failure = Some(Fault::new(
            ErrorClass::MappingPersistence,
            MAPPING_READ_FAILED,
            "the mapping store could not be listed: nothing was reconciled",
        ));
        self.set_task(lane, Task::Failed);
        Ok(at(StepKind::Done, 0, 0))
    }

    /// The pids `lane`'s `ReconcileSignal` step signals.
    pub fn reconcile_pids(&mut self, lane: u32) -> Result<Vec<u64>, Failure> {
        let (_, run) = self.lane_run(lane)?;
        Ok(run.pids.clone())
    }

    /// What signalling each pid did (in [`Router::reconcile_pids`] order), and the sandbox
    /// ids the other routers of this process are making: the run is classified now.
    pub fn reconcile_signalled(
        &mut self,
        lane: u32,
        signals: &[Signal],
        others: &[String],
        wall: i64,
    ) -> Result<Next, Failure> {
        let fleet = self.fleet.clone();
        let (session, host) = (self.owner.session.clone(), self.owner.host.clone());
        let Router { reconciles, jobs, .. } = self;
        let l = reconciles.lanes.get(lane).ok_or_else(unknown_lane)?;
        if l.task != Task::Signal {
            return Err(Fault::internal("(a signal report out of turn)"));
        }
        let run = reconciles.runs.get_mut(l.run).ok_or_else(unknown_lane)?;
        let gone: Vec<u64> = run.pids.iter().zip(signals).filter(|(_, s)| s.gone()).map(|(p, _)| *p).collect();
        let pools: Vec<rules::Pool> = run
            .pools
            .iter()
            .zip(&run.ids)
            .map(|(p, id)| rules::Pool {
                provider_id: id.clone(),
                listing: match &p.listing {
                    Some(Ok(items)) => Listing::Listed(items.clone()),
                    _ => Listing::Unknown,
                },
            })
            .collect();
        let others: FxHashSet<&str> = others.iter().map(String::as_str).collect();
        let in_flight = |id: &str| others.contains(id) || SandboxKey::parse(id).is_some_and(|k| jobs.has(k));
        let c = rules::classify(
            &rules::Run {
                facts: Facts {
                    fleet: &fleet,
                    session: &session,
                    host: &host,
                    now_ms: wall as f64,
                    grace_ms: run.options.grace_ms as f64,
                },
                pools: &pools,
                mappings: &run.mappings,
                intents: &run.intent_facts,
                gone_pids: &gone,
                warm_pools: &run.warm_pools,
            },
            &in_flight,
        );
        if run.options.reclaim {
            let actions = c.work.iter().map(|w| action(run, &pools, *w)).collect();
            run.actions = actions;
        }
        run.classes = c.pools;
        run.stale_intents = c.stale_intents;
        run.phase = Phase::Reclaim;
        run.forks = lanes_for(run.actions.len().min(run.options.concurrency as usize));
        let listed: Vec<Event> =
            run.pools.iter().zip(&run.classes).zip(&run.ids).map(|((p, c), id)| listed_event(id, p, c)).collect();
        for e in listed {
            self.emit(wall, None, e);
        }
        self.set_task(lane, Task::Idle);
        self.reconcile_next(lane, wall)
    }

    /// The ids `lane`'s action is about: its `sbx_…` id and the provider's sandbox id (None:
    /// an intent).
    pub fn reconcile_target(&mut self, lane: u32) -> Result<(String, Option<String>), Failure> {
        let (task, run) = self.lane_run(lane)?;
        let Task::Act(a) = task else { return Err(Fault::internal("(no reconcile action)")) };
        let a = &run.actions[a];
        Ok((a.sandbox_id.clone(), a.provider_sandbox_id.clone()))
    }

    /// `lane`'s re-check: whether a provision of this process is making its id now.
    pub fn reconcile_rechecked(&mut self, lane: u32, in_flight: bool, wall: i64) -> Result<Next, Failure> {
        self.acted(lane, Fact::InFlight(in_flight), wall)
    }

    /// How the call of `lane`'s step settled (a warm take, a store read or delete, a lookup,
    /// a destroy); `thrown`: what a rejection carried.
    pub fn reconcile_settled(
        &mut self,
        lane: u32,
        settled: Settled,
        thrown: Option<&Thrown>,
        wall: i64,
    ) -> Result<Next, Failure> {
        self.acted(lane, Fact::Settled(settled, thrown.is_some_and(is_not_found)), wall)
    }

    /// The shared ledger's answer to `lane`'s `ReconcileRelease`: whether a budget slot was
    /// given back.
    pub fn reconcile_released(&mut self, lane: u32, released: bool, wall: i64) -> Result<Next, Failure> {
        let (task, run) = self.lane_run(lane)?;
        let Task::Act(a) = task else { return Err(Fault::internal("(a release out of turn)")) };
        let action = &mut run.actions[a];
        if action.stage != Stage::Release {
            return Err(Fault::internal("(a release out of turn)"));
        }
        let outcome = action.outcome.ok_or_else(|| Fault::internal("(a release without its outcome)"))?;
        action.budget |= released;
        self.action_over(lane, a, outcome, wall);
        self.reconcile_next(lane, wall)
    }

    /// `fact` for `lane`'s action: its next step, or its outcome (then the lane goes on).
    fn acted(&mut self, lane: u32, fact: Fact, wall: i64) -> Result<Next, Failure> {
        let (callback, operation) = (self.callback_timeout_ms, self.operation_timeout_ms);
        let (task, run) = self.lane_run(lane)?;
        let Task::Act(a) = task else { return Err(Fault::internal("(a reclaim report out of turn)")) };
        let limits = Limits {
            left: run.left(wall),
            callback,
            operation,
            intents: run.intents,
            fleet_inventory: run.fleet_inventory,
        };
        let then =
            run.actions[a].after(fact, &limits).ok_or_else(|| Fault::internal("(a reclaim report out of turn)"))?;
        self.then(lane, a, then, wall)
    }

    /// Performs `then` for action `a` of `lane`'s run.
    fn then(&mut self, lane: u32, a: usize, then: Then, wall: i64) -> Result<Next, Failure> {
        let coordinated = self.capacity.as_ref().is_some_and(|c| c.coordinated);
        let callback = self.callback_timeout_ms;
        let (_, run) = self.lane_run(lane)?;
        let outcome = match then {
            Then::Ask(stage, bound) => {
                run.actions[a].stage = stage;
                let pool = run.pools[run.actions[a].pool].index;
                return Ok(self.flagged(lane, at(stage.kind(), pool, bound)));
            }
            Then::Done(outcome) => outcome,
        };
        if outcome.releases() {
            // What it held is given back: here, then in the shared ledger when there is one.
            let sandbox = SandboxKey::parse(&run.actions[a].sandbox_id);
            let budget = sandbox.is_some_and(|k| self.released(k).1);
            let (_, run) = self.lane_run(lane)?;
            let action = &mut run.actions[a];
            action.budget = budget;
            if coordinated {
                action.stage = Stage::Release;
                action.outcome = Some(outcome);
                let pool = run.pools[action.pool].index;
                // A store call like the record's: `callbackTimeoutMs` within what is left.
                let bound = callback.min(run.left(wall)).max(1);
                return Ok(self.flagged(lane, at(StepKind::ReconcileRelease, pool, bound)));
            }
        }
        self.action_over(lane, a, outcome, wall);
        self.reconcile_next(lane, wall)
    }

    /// Action `a` of `lane`'s run is over with `outcome`: recorded and said; the lane is free.
    fn action_over(&mut self, lane: u32, a: usize, outcome: Outcome, wall: i64) {
        let budgets = self.budgets.is_some();
        let Ok((_, run)) = self.lane_run(lane) else { return };
        let action = &run.actions[a];
        // A budget slot given back is said first (`budget.released` `RECLAIMED`, when the
        // router has budgets), then the action.
        let budget = action.budget && budgets;
        let row = OutcomeRow {
            provider_id: run.ids[action.pool].clone(),
            sandbox_id: action.sandbox_id.clone(),
            provider_sandbox_id: action.provider_sandbox_id.clone(),
            class: Class::of(action.work.kind),
            outcome,
        };
        run.timed_out |= outcome == Outcome::Deadline;
        run.acting -= 1;
        let pool = PoolId::from(row.provider_id.as_str());
        let event = Event::ReconcileReclaimed { pool: pool.clone(), class: row.class.name(), outcome: outcome.code() };
        let sandbox = SandboxKey::parse(&row.sandbox_id);
        run.outcomes.push(row);
        self.set_task(lane, Task::Idle);
        if budget {
            self.emit(wall, sandbox, Event::BudgetReleased { pool, reason: "RECLAIMED", cost: None, rules: None });
        }
        self.emit(wall, sandbox, event);
    }

    /// What `lane` does next (it is idle, or has just been given a task to ask for).
    fn reconcile_next(&mut self, lane: u32, wall: i64) -> Result<Next, Failure> {
        let next = self.pick(lane, wall)?;
        Ok(self.flagged(lane, next))
    }

    /// `next` with the flags the caller reads first: lanes to start, events to hand on.
    fn flagged(&mut self, lane: u32, next: Next) -> Next {
        let mut flags = next.flags;
        if let Ok((_, run)) = self.lane_run(lane) {
            if run.forks > 0 {
                flags |= flags::FORK;
            }
        }
        if self.has_events() {
            flags |= flags::ROUTER_EVENTS;
        }
        Next { flags, ..next }
    }

    fn pick(&mut self, lane: u32, wall: i64) -> Result<Next, Failure> {
        let (callback, operation) = (self.callback_timeout_ms, self.operation_timeout_ms);
        loop {
            let (task, run) = self.lane_run(lane)?;
            let limits = Limits {
                left: run.left(wall),
                callback,
                operation,
                intents: run.intents,
                fleet_inventory: run.fleet_inventory,
            };
            let read = limits.within(callback);
            match task {
                Task::Mappings => return Ok(at(StepKind::ReconcileRead, 0, read)),
                Task::Intents => return Ok(Next { flags: flags::INTENTS, ..at(StepKind::ReconcileRead, 0, read) }),
                Task::Signal => return Ok(at(StepKind::ReconcileSignal, 0, 0)),
                Task::Failed => return Ok(at(StepKind::Done, 0, 0)),
                Task::Finished => return Ok(at(StepKind::Succeeded, 0, 0)),
                Task::List(_) | Task::Act(_) => return Err(Fault::internal("(a reconcile step asked twice)")),
                Task::Idle => {}
            }
            // A lane that starts others leaves the work to them (they take it in order).
            if run.forks > 0 {
                return Ok(self.idle(lane));
            }
            match run.phase {
                // The next pool, within what is left (none left: TIMEOUT, unasked).
                Phase::Listing if run.to_list > 0 => {
                    let p = run.pools.len() - run.to_list;
                    run.to_list -= 1;
                    if limits.left == 0 {
                        run.pools[p].listing = Some(Err(UnknownReason::Timeout));
                        run.listing -= 1;
                        continue;
                    }
                    let pool = run.pools[p].index;
                    self.set_task(lane, Task::List(p));
                    return Ok(at(StepKind::ReconcileList, pool, limits.left));
                }
                Phase::Listing if run.listing > 0 => return Ok(self.idle(lane)),
                // Every pool is in: the store next, read by this lane.
                Phase::Listing => {
                    run.phase = Phase::Store;
                    self.set_task(lane, Task::Mappings);
                }
                // Another lane is reading the store or signalling.
                Phase::Store => return Ok(self.idle(lane)),
                // The next action (at most `concurrency` at once), unless the deadline came first.
                Phase::Reclaim
                    if run.next_action < run.actions.len() && run.acting < run.options.concurrency as usize =>
                {
                    let a = run.next_action;
                    run.next_action += 1;
                    run.acting += 1;
                    let then = run.actions[a].start(&limits);
                    self.set_task(lane, Task::Act(a));
                    match then {
                        Then::Ask(stage, bound) => return self.then(lane, a, Then::Ask(stage, bound), wall),
                        Then::Done(outcome) => self.action_over(lane, a, outcome, wall),
                    }
                }
                // Every action is over; the last lane to start ends the run (one the deadline let
                // take every action at once must not end it while its fellows are to start).
                Phase::Reclaim if run.acting > 0 || run.starting > 0 => return Ok(self.idle(lane)),
                Phase::Reclaim => self.finish(lane, wall)?,
                Phase::Over => return Ok(self.idle(lane)),
            }
        }
    }

    /// `lane` has nothing to do now: it is over (the run goes on in the others).
    fn idle(&mut self, lane: u32) -> Next {
        self.set_task(lane, Task::Idle);
        at(StepKind::Done, 0, 0)
    }

    /// Every action is over: the report is made and `reconcile.completed` said; `lane`
    /// takes it.
    fn finish(&mut self, lane: u32, wall: i64) -> Result<(), Failure> {
        let fleet = self.fleet.to_string();
        let (_, run) = self.lane_run(lane)?;
        let report = report_of(run, fleet, wall);
        run.report = Some(report.clone());
        run.phase = Phase::Over;
        let t = report.totals;
        let event = Event::ReconcileCompleted {
            reclaim: report.reclaim,
            timed_out: report.timed_out,
            duration_ms: report.duration_ms,
            orphan: t.orphan,
            stale_mapping: t.stale_mapping,
            mapped: t.mapped,
            pending: t.pending,
            unknown_pools: t.unknown_pools,
        };
        self.set_task(lane, Task::Finished);
        self.emit(wall, None, event);
        Ok(())
    }

    /// The report of the run `lane` finished (`StepKind::Succeeded`); the run and the lane
    /// are forgotten.
    pub fn reconcile_report(&mut self, lane: u32) -> Result<Report, Failure> {
        let l = self.reconciles.lanes.remove(lane).ok_or_else(unknown_lane)?;
        if l.task != Task::Finished {
            return Err(Fault::internal("(a reconcile report out of turn)"));
        }
        let run = self.reconciles.runs.remove(l.run).ok_or_else(unknown_lane)?;
        run.report.ok_or_else(|| Fault::internal("(a reconcile run without its report)"))
    }

    /// Ends `lane` (`StepKind::Done`): the run's failure when this lane carries it (the run
    /// is forgotten then); None when it was only idle. Ending an unknown lane does nothing.
    pub fn reconcile_end(&mut self, lane: u32) -> Option<Failure> {
        let l = self.reconciles.lanes.remove(lane)?;
        if l.task != Task::Failed {
            return None;
        }
        self.reconciles.runs.remove(l.run).and_then(|r| r.failure)
    }

    /// Abandons `lane`'s run (a bug of the caller's while driving it): the run and its
    /// lanes are forgotten.
    pub fn reconcile_abort(&mut self, lane: u32) {
        let Some(run) = self.reconciles.lanes.get(lane).map(|l| l.run) else { return };
        self.reconciles.runs.remove(run);
        let lanes: Vec<u32> = self.reconciles.lanes.iter().filter(|(_, l)| l.run == run).map(|(k, _)| k).collect();
        for k in lanes {
            self.reconciles.lanes.remove(k);
        }
    }
}

/// The action of work item `w`, with the ids it acts on.
fn action(run: &Run, pools: &[rules::Pool], w: Work) -> Action {
    let (sandbox_id, provider_sandbox_id) = match w.kind {
        WorkKind::Orphan | WorkKind::WarmMember => match &pools[w.pool].listing {
            Listing::Listed(items) => {
                let f = &items[w.index];
                (f.sandbox_id.clone().unwrap_or_default(), Some(f.provider_sandbox_id.clone()))
            }
            Listing::Unknown => (String::new(), None),
        },
        WorkKind::StaleMapping => {
            let m = &run.mappings[w.index];
            (m.id.clone(), Some(m.provider_sandbox_id.clone()))
        }
        WorkKind::StaleIntent => (run.intent_facts[w.index].id.clone(), None),
    };
    Action {
        work: w,
        pool: w.pool,
        sandbox_id,
        provider_sandbox_id,
        stage: Stage::Recheck,
        outcome: None,
        budget: false,
    }
}

/// `reconcile.listed` of one pool: its counts, or why it could not be listed.
fn listed_event(id: &str, pool: &RunPool, c: &PoolClasses) -> Event {
    let count = |n: usize| Some(n as u32);
    match &pool.listing {
        Some(Ok(_)) => Event::ReconcileListed {
            pool: PoolId::from(id),
            status: "known",
            reason: None,
            orphan: count(c.orphan.len()),
            stale_mapping: count(c.stale_mapping.len()),
            mapped: count(c.mapped.len()),
            pending: count(c.pending.len()),
        },
        Some(Err(reason)) => Event::ReconcileListed {
            pool: PoolId::from(id),
            status: "unknown",
            reason: Some(reason.code()),
            orphan: None,
            stale_mapping: None,
            mapped: None,
            pending: None,
        },
        None => Event::ReconcileListed {
            pool: PoolId::from(id),
            status: "unknown",
            reason: Some(UnknownReason::Timeout.code()),
            orphan: None,
            stale_mapping: None,
            mapped: None,
            pending: None,
        },
    }
}

/// The report of `run`, over at `wall`.
fn report_of(run: &mut Run, fleet: String, wall: i64) -> Report {
    let mut totals = Totals::default();
    let mut pools = Vec::with_capacity(run.pools.len());
    for (p, (pool, id)) in run.pools.iter().zip(&run.ids).enumerate() {
        let classes = run.classes.get(p).cloned().unwrap_or_default();
        let (items, reason): (&[Listed], Option<UnknownReason>) = match &pool.listing {
            Some(Ok(items)) => (items, None),
            Some(Err(r)) => (&[], Some(*r)),
            None => (&[], Some(UnknownReason::Timeout)),
        };
        let mut orphan = Rows::default();
        for (i, why) in &classes.orphan {
            let f = &items[*i];
            orphan.push(f.sandbox_id.clone(), f.provider_sandbox_id.clone(), why.code());
        }
        let mut stale_mapping = Rows::default();
        for &j in &classes.stale_mapping {
            let m = &run.mappings[j];
            stale_mapping.push(Some(m.id.clone()), m.provider_sandbox_id.clone(), NOT_LISTED);
        }
        let mut pending = Rows::default();
        for x in classes.pending {
            pending.push(x.sandbox_id, x.provider_sandbox_id, x.reason.code());
        }
        let mapped: Vec<String> = classes.mapped.iter().map(|&j| run.mappings[j].id.clone()).collect();
        totals.orphan += orphan.len();
        totals.stale_mapping += stale_mapping.len();
        totals.mapped += mapped.len() as u32;
        totals.pending += pending.len();
        totals.unknown_pools += u32::from(reason.is_some());
        pools.push(PoolReport {
            provider_id: id.clone(),
            native: pool.native,
            reason,
            orphan,
            stale_mapping,
            mapped,
            pending,
        });
    }
    Report {
        reclaim: run.options.reclaim,
        fleet,
        grace_ms: run.options.grace_ms,
        started_at: run.started,
        duration_ms: wall.saturating_sub(run.started).max(0) as u64,
        timed_out: run.timed_out || wall > run.deadline,
        pools,
        stale_intents: run.stale_intents.iter().map(|&k| run.intent_facts[k].id.clone()).collect(),
        outcomes: std::mem::take(&mut run.outcomes),
        totals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::router::pools::Pools;
    use crate::core::router::{CapacitySettings, Owner, Settings};
    use serde_json::json;
    use std::cell::RefCell;
    use std::rc::Rc;

    const HOST: &str = "here";
    const SESSION: &str = "mine";
    const T0: i64 = 1_800_000_000_000;
    const CB: u64 = 10_000;
    const OP: u64 = 600_000;

    fn sbx(n: u32) -> String {
        format!("sbx_{n:032x}")
    }

    struct Setup {
        pools: Vec<&'static str>,
        intents: bool,
        coordinated: bool,
        budgets: bool,
    }

    fn setup(pools: &[&'static str]) -> Setup {
        Setup { pools: pools.to_vec(), intents: false, coordinated: false, budgets: false }
    }

    impl Setup {
        fn router(&self) -> Router {
            let mut p = Pools::default();
            for id in &self.pools {
                p.add(&json!({ "id": id, "capabilities": {}, "signals": {} }), false, false).expect("a pool");
            }
            let budgets = if self.budgets {
                crate::core::budget::rules_of_option(
                    &json!([{ "id": "n", "key": { "label": "team" }, "limit": { "concurrent": 5 } }]),
                )
                .expect("rules")
            } else {
                Vec::new()
            };
            let settings = Settings {
                fleet: "default".into(),
                health: None,
                capacity: self.coordinated.then(|| CapacitySettings {
                    provider_order: self.pools.iter().map(|p| p.to_string()).collect(),
                    reservation_ttl_ms: 60_000,
                    coordinated: true,
                }),
                callback_timeout_ms: CB,
                operation_timeout_ms: OP,
                capacity_timeout_ms: 5_000,
                intents: self.intents,
                classifier: false,
                observe: true,
                owner: Owner { host: HOST.into(), pid: 1.0, session: SESSION.into() },
                budgets,
                limits: Default::default(),
                combined: false,
                queue: None,
                decisions: None,
                decision_key: [0; 32],
            };
            Router::new(settings, Rc::new(RefCell::new(p)), None, None, T0).expect("a router")
        }
    }

    fn begin_facts() -> Begin {
        Begin { has_list: true, fleet_inventory: false, native_finders: Vec::new() }
    }

    fn stamped(n: u32, created: f64) -> Listed {
        Listed {
            provider_sandbox_id: format!("p-{n}"),
            sandbox_id: Some(sbx(n)),
            verified: true,
            created_at_ms: Some(created),
        }
    }

    fn mapping(n: u32, pool: &str, psid: &str, created: f64) -> Option<MappingFact> {
        Some(MappingFact {
            id: sbx(n),
            provider_id: pool.into(),
            provider_sandbox_id: psid.into(),
            fleet: Some("default".into()),
            created_at_ms: Some(created),
            warm: None,
        })
    }

    fn types(r: &mut Router) -> Vec<&'static str> {
        r.take_events().iter().map(|e| e.event.type_name()).collect()
    }

    fn err(r: Result<(u32, Next), Failure>) -> (String, Option<String>, String) {
        let e = r.expect_err("a failure");
        (e.code.clone(), e.field.clone(), e.message.clone())
    }

    fn field_of(text: &str) -> Option<String> {
        Options::parse(Some(text)).err().and_then(|e| e.field.clone())
    }

    /// Lists one-pool run `lane` with `items` at `wall`, reads `mappings` (and, with
    /// intents, `intents`), signals, and answers the first step after the classification.
    fn classify_one(
        r: &mut Router,
        lane: u32,
        items: Vec<Listed>,
        mappings: Vec<Option<MappingFact>>,
        wall: i64,
    ) -> Next {
        let n = r.reconcile_listed(lane, ListFact::Listed(items), wall).unwrap();
        assert_eq!(n.kind, StepKind::ReconcileRead);
        let n = r.reconcile_mappings(lane, Some(mappings), wall).unwrap();
        assert_eq!(n.kind, StepKind::ReconcileSignal);
        r.reconcile_signalled(lane, &[], &[], wall).unwrap()
    }

    // --- options: defaults and ranges ------------------------------------------------------

    #[test]
    fn defaults_must_fire_for_absent_options() {
        for text in ["{}", "[]"] {
            assert_eq!(Options::parse(Some(text)).unwrap(), Options::default());
        }
        let d = Options::default();
        assert_eq!(
            (d.reclaim, d.grace_ms, d.concurrency, d.timeout_ms, d.providers),
            (false, 900_000, 8, 120_000, None)
        );
    }

    #[test]
    fn defaults_must_not_fire_for_given_options() {
        let o =
            Options::parse(Some(r#"{"reclaim":true,"graceMs":0,"concurrency":3,"timeoutMs":5,"providers":["b","a"]}"#))
                .unwrap();
        assert_eq!(
            o,
            Options {
                providers: Some(vec!["b".into(), "a".into()]),
                reclaim: true,
                grace_ms: 0,
                concurrency: 3,
                timeout_ms: 5
            }
        );
    }

    #[test]
    fn ranges_must_fire_outside_them_naming_the_field() {
        let cases = [
            (r#"{"graceMs":-1}"#, "graceMs"),
            (r#"{"graceMs":2592000001}"#, "graceMs"),
            (r#"{"graceMs":1.5}"#, "graceMs"),
            (r#"{"graceMs":null}"#, "graceMs"),
            (r#"{"concurrency":0}"#, "concurrency"),
            (r#"{"concurrency":257}"#, "concurrency"),
            (r#"{"timeoutMs":0}"#, "timeoutMs"),
            (r#"{"timeoutMs":86400001}"#, "timeoutMs"),
            (r#"{"timeoutMs":"5"}"#, "timeoutMs"),
            (r#"{"reclaim":"yes"}"#, "reclaim"),
            (r#"{"reclaim":null}"#, "reclaim"),
            (r#"{"providers":"a"}"#, "providers"),
            (r#"{"providers":["a",1]}"#, "providers[1]"),
        ];
        for (text, field) in cases {
            assert_eq!(field_of(text).as_deref(), Some(field), "{text}");
        }
        let e = Options::parse(Some(r#"{"concurrency":0}"#)).unwrap_err();
        assert_eq!((e.code.as_str(), e.class), ("INVALID_REQUEST", ErrorClass::RequestValidation));
        assert_eq!(e.message, "invalid reconcile options: concurrency must be an integer from 1 to 256");
    }

    #[test]
    fn ranges_must_not_fire_at_their_ends() {
        for text in [
            r#"{"graceMs":0}"#,
            r#"{"graceMs":2592000000}"#,
            r#"{"concurrency":1}"#,
            r#"{"concurrency":256}"#,
            r#"{"timeoutMs":1}"#,
            r#"{"timeoutMs":86400000}"#,
            r#"{"graceMs":1e3}"#,
            r#"{"providers":[]}"#,
        ] {
            assert!(Options::parse(Some(text)).is_ok(), "{text}");
        }
    }

    #[test]
    fn unknown_option_must_fire_naming_the_first_in_the_callers_order() {
        assert_eq!(field_of(r#"{"reclaim":true,"zeta":1,"alpha":2}"#).as_deref(), Some("zeta"));
        let long = "k".repeat(70);
        assert_eq!(field_of(&format!(r#"{{"{long}":1}}"#)), Some(format!("{}…[+6 bytes]", "k".repeat(64))));
        assert_eq!(field_of("[1]").as_deref(), Some("0"));
    }

    #[test]
    fn options_must_be_an_object_and_readable() {
        for text in ["5", "\"x\"", "null", "true"] {
            let e = Options::parse(Some(text)).unwrap_err();
            assert_eq!(
                (e.field.as_deref(), e.message.as_str()),
                (Some("options"), "invalid reconcile options: options must be an object")
            );
        }
        let e = Options::parse(None).unwrap_err();
        assert_eq!(e.message, "invalid reconcile options: options could not be read (a property access threw)");
    }

    #[test]
    fn providers_must_fire_for_an_unregistered_pool_and_a_store_without_list() {
        let mut r = setup(&["a", "b"]).router();
        let (code, field, _) = err(r.reconcile_begin(Some(r#"{"providers":["a","nope"]}"#), begin_facts(), T0));
        assert_eq!((code.as_str(), field.as_deref()), ("INVALID_REQUEST", Some("providers[1]")));
        let no_list = Begin { has_list: false, ..begin_facts() };
        let (code, field, message) = err(r.reconcile_begin(Some("{}"), no_list, T0));
        assert_eq!((code.as_str(), field), (MAPPING_READ_FAILED, None));
        assert_eq!(message, "the mapping store has no list(): reconcile cannot compare");
        assert_eq!(r.reconciles.len(), 0, "nothing begun");
    }

    #[test]
    fn providers_must_not_fire_for_registered_pools_each_listed_once_in_their_order() {
        let mut r = setup(&["a", "b"]).router();
        let (lane, next) = r.reconcile_begin(Some(r#"{"providers":["b","b"]}"#), begin_facts(), T0).unwrap();
        assert_eq!((next.kind, next.pool, next.flags & flags::FORK), (StepKind::ReconcileList, 1, 0));
        let n = r.reconcile_listed(lane, ListFact::Listed(vec![]), T0).unwrap();
        assert_eq!(n.kind, StepKind::ReconcileRead, "one pool: the store next");
    }

    // --- listing: lanes, deadline -------------------------------------------------------

    #[test]
    fn fork_must_fire_to_list_every_pool_at_once_in_order() {
        let mut r = setup(&["a", "b", "c"]).router();
        let (l0, n0) = r.reconcile_begin(Some("{}"), begin_facts(), T0).unwrap();
        assert_eq!(
            (n0.kind, n0.flags & flags::FORK),
            (StepKind::Done, flags::FORK),
            "the forking lane leaves the work"
        );
        assert_eq!(r.reconcile_forks(l0).unwrap(), 3);
        assert_eq!(r.reconcile_forks(l0).unwrap(), 0, "taken once");
        // The lanes start before the forking lane ends (lib/reconcile.js `next`), in order.
        let (l1, n1) = r.reconcile_lane(l0, T0 + 5).unwrap();
        let (l2, n2) = r.reconcile_lane(l0, T0 + 5).unwrap();
        let (l3, n3) = r.reconcile_lane(l0, T0 + 5).unwrap();
        assert!(r.reconcile_end(l0).is_none(), "an idle lane carries nothing");
        assert_eq!([n1.kind, n2.kind, n3.kind], [StepKind::ReconcileList; 3]);
        assert_eq!((n1.pool, n2.pool, n3.pool), (0, 1, 2));
        assert_eq!(n1.bound_ms, DEFAULT_TIMEOUT_MS - 5, "what is left of the deadline");
        assert_eq!(n1.flags & flags::FORK, 0);
        // The first two reports leave their lanes idle; the last one reads the store.
        assert_eq!(r.reconcile_listed(l2, ListFact::Listed(vec![]), T0 + 6).unwrap().kind, StepKind::Done);
        assert_eq!(r.reconcile_listed(l1, ListFact::Threw, T0 + 7).unwrap().kind, StepKind::Done);
        let n = r.reconcile_listed(l3, ListFact::Unlisted(UnknownReason::Unauthorized), T0 + 8).unwrap();
        assert_eq!(n.kind, StepKind::ReconcileRead);
    }

    #[test]
    fn fork_must_not_fire_for_one_pool() {
        let mut r = setup(&["a"]).router();
        let (l, n) = r.reconcile_begin(Some("{}"), begin_facts(), T0).unwrap();
        assert_eq!((n.kind, n.flags & flags::FORK), (StepKind::ReconcileList, 0));
        assert_eq!(r.reconcile_forks(l).unwrap(), 0);
    }

    /// Begins a run of `options` over two pools and starts its two listing lanes at `wall`.
    fn two_lanes(r: &mut Router, options: &str, wall: i64) -> (u32, Next, u32, Next) {
        let (l0, _) = r.reconcile_begin(Some(options), begin_facts(), T0).unwrap();
        r.reconcile_forks(l0).unwrap();
        let (la, na) = r.reconcile_lane(l0, T0).unwrap();
        let (lb, nb) = r.reconcile_lane(l0, wall).unwrap();
        r.reconcile_end(l0);
        (la, na, lb, nb)
    }

    #[test]
    fn list_deadline_must_fire_for_a_pool_reached_after_it_unasked() {
        let mut r = setup(&["a", "b"]).router();
        let (la, _, _, nb) = two_lanes(&mut r, r#"{"timeoutMs":10}"#, T0 + 10);
        assert_eq!(nb.kind, StepKind::Done, "pool b is TIMEOUT without a step");
        let n = r.reconcile_listed(la, ListFact::Listed(vec![]), T0 + 11).unwrap();
        assert_eq!(n.kind, StepKind::ReconcileRead);
        assert_eq!(n.bound_ms, 1, "a store read after the deadline still gets 1 ms");
        r.reconcile_mappings(la, Some(vec![]), T0 + 11).unwrap();
        let n = r.reconcile_signalled(la, &[], &[], T0 + 11).unwrap();
        assert_eq!(n.kind, StepKind::Succeeded);
        let report = r.reconcile_report(la).unwrap();
        assert_eq!(report.pools[1].reason, Some(UnknownReason::Timeout));
        assert_eq!(report.totals.unknown_pools, 1);
        assert!(report.timed_out, "over after the deadline");
        assert_eq!(report.duration_ms, 11);
    }

    #[test]
    fn list_deadline_must_not_fire_while_time_is_left() {
        let mut r = setup(&["a", "b"]).router();
        let (_, _, _, nb) = two_lanes(&mut r, r#"{"timeoutMs":10}"#, T0 + 9);
        assert_eq!((nb.kind, nb.pool, nb.bound_ms), (StepKind::ReconcileList, 1, 1));
    }

    #[test]
    fn read_bound_must_be_the_callback_bound_within_what_is_left() {
        let mut r = setup(&["a"]).router();
        let (l, _) = r.reconcile_begin(Some(r#"{"timeoutMs":50000}"#), begin_facts(), T0).unwrap();
        assert_eq!(r.reconcile_listed(l, ListFact::Listed(vec![]), T0).unwrap().bound_ms, CB);
        let mut r = setup(&["a"]).router();
        let (l, _) = r.reconcile_begin(Some(r#"{"timeoutMs":50000}"#), begin_facts(), T0).unwrap();
        assert_eq!(r.reconcile_listed(l, ListFact::Listed(vec![]), T0 + 45_000).unwrap().bound_ms, 5_000);
    }

    // --- the store ------------------------------------------------------------------------

    #[test]
    fn mapping_read_failed_must_fire_when_the_store_cannot_be_read() {
        for intents_fail in [false, true] {
            let mut s = setup(&["a"]);
            s.intents = true;
            let mut r = s.router();
            let (l, _) = r.reconcile_begin(Some("{}"), begin_facts(), T0).unwrap();
            r.reconcile_listed(l, ListFact::Listed(vec![]), T0).unwrap();
            let n = if intents_fail {
                let n = r.reconcile_mappings(l, Some(vec![]), T0).unwrap();
                assert_eq!((n.kind, n.flags & flags::INTENTS), (StepKind::ReconcileRead, flags::INTENTS));
                r.reconcile_intents(l, None, T0).unwrap()
            } else {
                r.reconcile_mappings(l, None, T0).unwrap()
            };
            assert_eq!(n.kind, StepKind::Done);
            let e = r.reconcile_end(l).expect("the run's failure");
            assert_eq!((e.code.as_str(), e.class), (MAPPING_READ_FAILED, ErrorClass::MappingPersistence));
            assert_eq!(e.message, "the mapping store could not be listed: nothing was reconciled");
            assert_eq!(r.reconciles.len(), 0, "the run is forgotten");
        }
    }

    #[test]
    fn mapping_read_failed_must_not_fire_for_an_empty_store_and_rows_that_are_not_records_are_left_out() {
        let mut r = setup(&["a"]).router();
        let (l, _) = r.reconcile_begin(Some("{}"), begin_facts(), T0).unwrap();
        let n = classify_one(&mut r, l, vec![], vec![None, mapping(1, "a", "p-1", 0.0)], T0);
        assert_eq!(n.kind, StepKind::Succeeded);
        let report = r.reconcile_report(l).unwrap();
        assert_eq!(report.pools[0].stale_mapping.sandbox_ids, [Some(sbx(1))]);
    }

    // --- signals: ESRCH -------------------------------------------------------------------

    #[test]
    fn esrch_must_fire_gone_only_for_a_signal_that_threw_it() {
        assert!(Signal { threw: true, code: Some("ESRCH".into()) }.gone());
        assert!(!Signal { threw: true, code: Some("EPERM".into()) }.gone(), "exists, not ours to signal: alive");
        assert!(!Signal { threw: false, code: None }.gone());
        assert!(!Signal { threw: true, code: None }.gone());
    }

    fn intent_of(n: u32, host: &str, pid: u64) -> Option<IntentFact> {
        Some(IntentFact {
            id: sbx(n),
            provider_id: Some("a".into()),
            state: Some("launching".into()),
            expires_at_ms: Some((T0 + 600_000) as f64),
            owner_host: Some(host.into()),
            owner_pid: Some(pid),
            owner_session: Some("other".into()),
        })
    }

    /// One pool listing sbx(1) (young) with a live-looking intent of pid 7 on this host.
    fn writer_case(signal: Signal) -> Report {
        let mut s = setup(&["a"]);
        s.intents = true;
        let mut r = s.router();
        let (l, _) = r.reconcile_begin(Some("{}"), begin_facts(), T0).unwrap();
        r.reconcile_listed(l, ListFact::Listed(vec![stamped(1, T0 as f64)]), T0).unwrap();
        r.reconcile_mappings(l, Some(vec![]), T0).unwrap();
        let n = r
            .reconcile_intents(
                l,
                Some(vec![intent_of(1, HOST, 7), intent_of(2, "elsewhere", 8), intent_of(3, HOST, 7), None]),
                T0,
            )
            .unwrap();
        assert_eq!(n.kind, StepKind::ReconcileSignal);
        assert_eq!(r.reconcile_pids(l).unwrap(), [7], "this host's writers, each once");
        assert_eq!(r.reconcile_signalled(l, &[signal], &[], T0).unwrap().kind, StepKind::Succeeded);
        r.reconcile_report(l).unwrap()
    }

    #[test]
    fn writer_gone_must_fire_when_its_signal_threw_esrch() {
        let report = writer_case(Signal { threw: true, code: Some("ESRCH".into()) });
        assert_eq!(report.pools[0].orphan.reasons, ["WRITER_GONE"]);
    }

    #[test]
    fn writer_gone_must_not_fire_when_its_signal_threw_eperm() {
        let report = writer_case(Signal { threw: true, code: Some("EPERM".into()) });
        assert_eq!(report.pools[0].pending.reasons, ["IN_FLIGHT_ELSEWHERE"]);
    }

    #[test]
    fn in_flight_elsewhere_in_this_process_must_fire_for_another_routers_id() {
        let mut r = setup(&["a"]).router();
        let (l, _) = r.reconcile_begin(Some(r#"{"graceMs":0}"#), begin_facts(), T0).unwrap();
        r.reconcile_listed(l, ListFact::Listed(vec![stamped(1, 0.0), stamped(2, 0.0)]), T0).unwrap();
        r.reconcile_mappings(l, Some(vec![]), T0).unwrap();
        r.reconcile_signalled(l, &[], &[sbx(1)], T0).unwrap();
        let report = r.reconcile_report(l).unwrap();
        assert_eq!(report.pools[0].pending.reasons, ["IN_FLIGHT"], "must-fire: another router is making sbx 1");
        assert_eq!(report.pools[0].orphan.sandbox_ids, [Some(sbx(2))], "must-not-fire: sbx 2 is nobody's");
    }

    // --- grace, through the run's clock reading ---------------------------------------------

    #[test]
    fn grace_must_fire_at_grace_ms_of_age_and_not_before() {
        for (age, orphan) in [(900_000, true), (899_999, false)] {
            let mut r = setup(&["a"]).router();
            let (l, _) = r.reconcile_begin(Some("{}"), begin_facts(), T0).unwrap();
            classify_one(&mut r, l, vec![stamped(1, (T0 - age) as f64)], vec![], T0);
            let report = r.reconcile_report(l).unwrap();
            let reasons = if orphan { &report.pools[0].orphan.reasons } else { &report.pools[0].pending.reasons };
            assert_eq!(reasons, &[if orphan { "GRACE_ELAPSED" } else { "WITHIN_GRACE" }], "age {age}");
        }
    }

    // --- reclaim: concurrency, deadline ------------------------------------------------------

    fn reclaim_run(r: &mut Router, options: &str, orphans: u32) -> (u32, Next) {
        let (l, _) = r.reconcile_begin(Some(options), begin_facts(), T0).unwrap();
        let items = (1..=orphans).map(|n| stamped(n, 0.0)).collect();
        let n = classify_one(r, l, items, vec![], T0);
        (l, n)
    }

    #[test]
    fn concurrency_must_fire_at_most_concurrency_actions_at_once() {
        let mut r = setup(&["a"]).router();
        let (l0, n) = reclaim_run(&mut r, r#"{"reclaim":true,"concurrency":2}"#, 5);
        assert_eq!((n.kind, n.flags & flags::FORK), (StepKind::Done, flags::FORK));
        assert_eq!(r.reconcile_forks(l0).unwrap(), 2);
        let (l1, n1) = r.reconcile_lane(l0, T0).unwrap();
        let (l2, n2) = r.reconcile_lane(l0, T0).unwrap();
        assert_eq!([n1.kind, n2.kind], [StepKind::ReconcileRecheck; 2]);
        assert_eq!(r.reconcile_target(l1).unwrap().0, sbx(1));
        assert_eq!(r.reconcile_target(l2).unwrap().0, sbx(2));
        // A third lane finds nothing it may start: two actions run, the rest wait.
        let (l3, n3) = r.reconcile_lane(l0, T0).unwrap();
        assert_eq!(n3.kind, StepKind::Done);
        assert!(r.reconcile_end(l3).is_none());
        // Action 1 ends (in flight: kept); its lane takes action 3.
        assert_eq!(r.reconcile_rechecked(l1, true, T0).unwrap().kind, StepKind::ReconcileRecheck);
        assert_eq!(r.reconcile_target(l1).unwrap().0, sbx(3));
    }

    #[test]
    fn concurrency_must_not_fire_more_lanes_than_actions() {
        let mut r = setup(&["a"]).router();
        let (l0, _) = reclaim_run(&mut r, r#"{"reclaim":true}"#, 3);
        assert_eq!(r.reconcile_forks(l0).unwrap(), 3, "3 actions, concurrency 8: 3 lanes");
        let mut r = setup(&["a"]).router();
        let (_, n) = reclaim_run(&mut r, r#"{"reclaim":true}"#, 1);
        assert_eq!((n.kind, n.flags & flags::FORK), (StepKind::ReconcileRecheck, 0), "one action: its own lane");
        let mut r = setup(&["a"]).router();
        let (l0, n) = reclaim_run(&mut r, "{}", 3);
        assert_eq!(n.kind, StepKind::Succeeded, "a dry run acts on nothing");
        assert_eq!(r.reconcile_report(l0).unwrap().outcomes, []);
    }

    #[test]
    fn action_deadline_must_fire_for_every_action_not_started_by_then() {
        let mut r = setup(&["a"]).router();
        let (l0, _) = reclaim_run(&mut r, r#"{"reclaim":true,"concurrency":1,"timeoutMs":100}"#, 3);
        // Action 1 is in its re-check when the deadline passes: the store's record of it is
        // still asked (1 ms, as every store call after the deadline), then it meets its
        // lookup bound.
        let n = r.reconcile_rechecked(l0, false, T0 + 100).unwrap();
        assert_eq!((n.kind, n.bound_ms), (StepKind::ReconcileRecord, 1));
        let n = r.reconcile_settled(l0, Settled::Nothing, None, T0 + 100).unwrap();
        assert_eq!(n.kind, StepKind::Succeeded, "the lookup has no time left, nor do actions 2 and 3");
        let report = r.reconcile_report(l0).unwrap();
        assert_eq!(report.outcomes.iter().map(|o| o.outcome).collect::<Vec<_>>(), [Outcome::Deadline; 3]);
        assert!(report.timed_out);
    }

    #[test]
    fn run_end_must_not_fire_before_every_forked_lane_has_started() {
        // The deadline is over when the actions' lanes start: the first lane takes every
        // action (DEADLINE) at once; the run must still be there for the other two.
        let mut r = setup(&["a"]).router();
        let (l0, n) = reclaim_run(&mut r, r#"{"reclaim":true,"concurrency":3,"timeoutMs":100}"#, 3);
        assert_eq!((n.kind, n.flags & flags::FORK), (StepKind::Done, flags::FORK));
        assert_eq!(r.reconcile_forks(l0).unwrap(), 3);
        r.take_events();
        let (l1, n1) = r.reconcile_lane(l0, T0 + 100).unwrap();
        assert_eq!(n1.kind, StepKind::Done, "two lanes are still to start");
        assert!(r.reconcile_end(l1).is_none());
        let (l2, n2) = r.reconcile_lane(l0, T0 + 100).unwrap();
        assert_eq!(n2.kind, StepKind::Done);
        assert!(r.reconcile_end(l2).is_none());
        assert_eq!(types(&mut r), ["reconcile.reclaimed"; 3], "not completed yet");
        // The last lane to start ends the run, once.
        let (l3, n3) = r.reconcile_lane(l0, T0 + 100).unwrap();
        assert_eq!(n3.kind, StepKind::Succeeded);
        assert_eq!(types(&mut r), ["reconcile.completed"]);
        assert!(r.reconcile_end(l0).is_none());
        let report = r.reconcile_report(l3).unwrap();
        assert_eq!(report.outcomes.iter().map(|o| o.outcome).collect::<Vec<_>>(), [Outcome::Deadline; 3]);
        assert_eq!(r.reconciles.len(), 0);
    }

    #[test]
    fn run_end_must_fire_in_the_lane_of_the_last_action_once_every_lane_has_started() {
        let mut r = setup(&["a"]).router();
        let (l0, _) = reclaim_run(&mut r, r#"{"reclaim":true,"concurrency":2}"#, 2);
        assert_eq!(r.reconcile_forks(l0).unwrap(), 2);
        let (l1, n1) = r.reconcile_lane(l0, T0).unwrap();
        let (l2, n2) = r.reconcile_lane(l0, T0).unwrap();
        assert!(r.reconcile_end(l0).is_none());
        assert_eq!([n1.kind, n2.kind], [StepKind::ReconcileRecheck; 2]);
        assert_eq!(r.reconcile_rechecked(l1, true, T0).unwrap().kind, StepKind::Done, "action 2 is still running");
        assert!(r.reconcile_end(l1).is_none());
        assert_eq!(r.reconcile_rechecked(l2, true, T0).unwrap().kind, StepKind::Succeeded);
        let report = r.reconcile_report(l2).unwrap();
        assert_eq!(report.outcomes.iter().map(|o| o.outcome).collect::<Vec<_>>(), [Outcome::InFlight; 2]);
        // A lane of a run that is over cannot be started (its run is gone, nothing is left behind).
        assert!(r.reconcile_lane(l2, T0).is_err());
        assert_eq!(r.reconciles.lanes.len(), 0);
    }

    #[test]
    fn action_deadline_must_not_fire_while_time_is_left() {
        let mut r = setup(&["a"]).router();
        let (l0, _) = reclaim_run(&mut r, r#"{"reclaim":true,"concurrency":1,"timeoutMs":100}"#, 1);
        let n = r.reconcile_rechecked(l0, false, T0 + 99).unwrap();
        assert_eq!((n.kind, n.bound_ms), (StepKind::ReconcileRecord, 1), "the callback bound within what is left");
        let n = r.reconcile_settled(l0, Settled::Nothing, None, T0 + 99).unwrap();
        assert_eq!((n.kind, n.bound_ms), (StepKind::ReconcileLookup, 1), "the operation bound within what is left");
        let n = r.reconcile_settled(l0, Settled::Value, None, T0 + 99).unwrap();
        assert_eq!((n.kind, n.bound_ms), (StepKind::ReconcileDestroy, 1));
        let n = r.reconcile_settled(l0, Settled::Nothing, None, T0 + 99).unwrap();
        assert_eq!(n.kind, StepKind::Succeeded);
        let report = r.reconcile_report(l0).unwrap();
        assert_eq!(report.outcomes[0].outcome, Outcome::Destroyed);
        assert!(!report.timed_out, "over at the deadline, not after it");
    }

    // --- each action's rules --------------------------------------------------------------

    fn limits() -> Limits {
        Limits { left: 50_000, callback: CB, operation: OP, intents: true, fleet_inventory: true }
    }

    fn act(kind: WorkKind, saved_by_mapping: bool, removes_intent: bool) -> Action {
        let work = Work { kind, pool: 0, index: 0, saved_by_mapping, removes_intent };
        Action {
            work,
            pool: 0,
            sandbox_id: sbx(1),
            provider_sandbox_id: None,
            stage: Stage::Recheck,
            outcome: None,
            budget: false,
        }
    }

    /// Feeds `facts` to a fresh action of `kind` from its re-check; the stages it asked for and
    /// how it ended.
    fn drive(mut a: Action, l: &Limits, facts: &[Fact]) -> (Vec<Stage>, Option<Outcome>) {
        let mut stages = vec![a.stage];
        for &f in facts {
            match a.after(f, l).expect("a fact in turn") {
                Then::Ask(stage, _) => {
                    a.stage = stage;
                    stages.push(stage);
                }
                Then::Done(o) => return (stages, Some(o)),
            }
        }
        (stages, None)
    }

    const NO: Fact = Fact::InFlight(false);
    const YES: Fact = Fact::InFlight(true);
    const fn s(how: Settled) -> Fact {
        Fact::Settled(how, false)
    }
    const GONE: Fact = Fact::Settled(Settled::Threw, true);

    #[test]
    fn in_flight_must_fire_on_the_recheck_and_must_not_once_settled() {
        for kind in [WorkKind::Orphan, WorkKind::StaleMapping, WorkKind::StaleIntent, WorkKind::WarmMember] {
            assert_eq!(drive(act(kind, true, true), &limits(), &[YES]).1, Some(Outcome::InFlight));
            assert_eq!(drive(act(kind, true, true), &limits(), &[NO]).1, None);
        }
    }

    #[test]
    fn orphan_must_fire_destroyed_through_record_lookup_destroy_and_its_intent() {
        let (stages, o) = drive(
            act(WorkKind::Orphan, true, true),
            &limits(),
            &[NO, s(Settled::Nothing), s(Settled::Value), s(Settled::Nothing), s(Settled::Threw)],
        );
        assert_eq!(stages, [Stage::Recheck, Stage::Record, Stage::Lookup, Stage::Destroy, Stage::ForgetIntent]);
        assert_eq!(o, Some(Outcome::Destroyed), "its intent's removal is best effort");
        let no_intents = Limits { intents: false, ..limits() };
        let (stages, o) = drive(
            act(WorkKind::Orphan, true, true),
            &no_intents,
            &[NO, s(Settled::Nothing), s(Settled::NoMethod), s(Settled::Value)],
        );
        assert_eq!(stages.last(), Some(&Stage::Destroy));
        assert_eq!(o, Some(Outcome::Destroyed), "a runtime without getById: destroyed by its provider id");
    }

    #[test]
    fn now_mapped_must_fire_for_a_record_found_or_unknown_and_must_not_for_none() {
        for how in [Settled::Value, Settled::Threw, Settled::TimedOut] {
            assert_eq!(
                drive(act(WorkKind::Orphan, true, true), &limits(), &[NO, s(how)]).1,
                Some(Outcome::NowMapped),
                "{how:?}"
            );
            assert_eq!(
                drive(act(WorkKind::StaleIntent, true, false), &limits(), &[NO, s(how)]).1,
                Some(Outcome::NowMapped)
            );
        }
        let (stages, _) = drive(act(WorkKind::Orphan, true, true), &limits(), &[NO, s(Settled::Nothing)]);
        assert_eq!(stages.last(), Some(&Stage::Lookup));
        // DUPLICATE_OF_MAPPED: its id's mapping names another sandbox, so no record check.
        let (stages, _) = drive(act(WorkKind::Orphan, false, false), &limits(), &[NO]);
        assert_eq!(stages, [Stage::Recheck, Stage::Lookup]);
    }

    #[test]
    fn lookup_must_fire_already_gone_for_none_or_a_not_found_rejection_and_destroy_failed_otherwise() {
        let orphan = || act(WorkKind::Orphan, false, false);
        assert_eq!(drive(orphan(), &limits(), &[NO, s(Settled::Nothing)]).1, Some(Outcome::AlreadyGone));
        assert_eq!(drive(orphan(), &limits(), &[NO, GONE]).1, Some(Outcome::AlreadyGone));
        assert_eq!(drive(orphan(), &limits(), &[NO, s(Settled::Threw)]).1, Some(Outcome::DestroyFailed));
        assert_eq!(drive(orphan(), &limits(), &[NO, s(Settled::TimedOut)]).1, Some(Outcome::TimedOut));
        assert_eq!(
            drive(orphan(), &limits(), &[NO, s(Settled::Value), s(Settled::Threw)]).1,
            Some(Outcome::DestroyFailed)
        );
        assert_eq!(
            drive(orphan(), &limits(), &[NO, s(Settled::Value), s(Settled::TimedOut)]).1,
            Some(Outcome::TimedOut)
        );
        let none_left = Limits { left: 0, ..limits() };
        assert_eq!(orphan().start(&none_left), Then::Done(Outcome::Deadline));
        assert_eq!(orphan().start(&limits()), Then::Ask(Stage::Recheck, 0));
    }

    #[test]
    fn warm_member_must_fire_a_fleet_take_first_and_its_record_after() {
        let member = || act(WorkKind::WarmMember, false, false);
        assert_eq!(
            drive(member(), &limits(), &[NO, s(Settled::Nothing)]).1,
            Some(Outcome::NowMapped),
            "claimed meanwhile"
        );
        assert_eq!(drive(member(), &limits(), &[NO, s(Settled::Threw)]).1, Some(Outcome::NowMapped));
        let (stages, o) = drive(
            member(),
            &limits(),
            &[NO, s(Settled::Value), s(Settled::Value), s(Settled::Value), s(Settled::Threw)],
        );
        assert_eq!(stages, [Stage::Recheck, Stage::WarmTake, Stage::Lookup, Stage::Destroy, Stage::ForgetRecord]);
        assert_eq!(o, Some(Outcome::Destroyed));
    }

    #[test]
    fn warm_member_must_not_fire_a_fleet_take_without_a_fleet_inventory() {
        let l = Limits { fleet_inventory: false, ..limits() };
        let (stages, _) = drive(act(WorkKind::WarmMember, false, false), &l, &[NO]);
        assert_eq!(stages, [Stage::Recheck, Stage::Lookup]);
    }

    #[test]
    fn stale_mapping_must_fire_unmapped_only_once_the_lookup_finds_nothing() {
        let stale = || act(WorkKind::StaleMapping, false, false);
        for gone in [s(Settled::Nothing), s(Settled::NoMethod), GONE] {
            let (stages, o) = drive(stale(), &limits(), &[NO, gone, s(Settled::Value)]);
            assert_eq!((stages.last(), o), (Some(&Stage::Unmap), Some(Outcome::Unmapped)), "{gone:?}");
        }
        assert_eq!(
            drive(stale(), &limits(), &[NO, s(Settled::Nothing), s(Settled::Threw)]).1,
            Some(Outcome::UnmapFailed)
        );
        assert_eq!(
            drive(stale(), &limits(), &[NO, s(Settled::Nothing), s(Settled::TimedOut)]).1,
            Some(Outcome::TimedOut)
        );
    }

    #[test]
    fn stale_mapping_must_not_fire_while_the_sandbox_exists_or_the_lookup_fails() {
        let stale = || act(WorkKind::StaleMapping, false, false);
        assert_eq!(drive(stale(), &limits(), &[NO, s(Settled::Value)]).1, Some(Outcome::StillExists));
        assert_eq!(drive(stale(), &limits(), &[NO, s(Settled::Threw)]).1, Some(Outcome::LookupFailed));
        assert_eq!(drive(stale(), &limits(), &[NO, s(Settled::TimedOut)]).1, Some(Outcome::TimedOut));
        assert_eq!(drive(stale(), &Limits { left: 0, ..limits() }, &[NO]).1, Some(Outcome::Deadline));
    }

    #[test]
    fn stale_intent_must_fire_intent_removed_and_must_not_when_the_delete_fails() {
        let intent = || act(WorkKind::StaleIntent, true, false);
        let (stages, o) = drive(intent(), &limits(), &[NO, s(Settled::Nothing), s(Settled::Value)]);
        assert_eq!((stages, o), (vec![Stage::Recheck, Stage::Record, Stage::DropIntent], Some(Outcome::IntentRemoved)));
        assert_eq!(
            drive(intent(), &limits(), &[NO, s(Settled::Nothing), s(Settled::Threw)]).1,
            Some(Outcome::UnmapFailed)
        );
        assert_eq!(
            drive(intent(), &limits(), &[NO, s(Settled::Nothing), s(Settled::TimedOut)]).1,
            Some(Outcome::TimedOut)
        );
    }

    #[test]
    fn a_fact_out_of_turn_must_not_be_taken() {
        assert!(act(WorkKind::Orphan, true, true).after(s(Settled::Value), &limits()).is_none());
        let mut a = act(WorkKind::Orphan, true, true);
        a.stage = Stage::Lookup;
        assert!(a.after(NO, &limits()).is_none());
    }

    #[test]
    fn bounds_must_be_each_calls_limit_within_what_is_left() {
        let l = Limits { left: 3_000, ..limits() };
        assert_eq!(l.within(CB), 3_000);
        assert_eq!(Limits { left: 0, ..l }.within(CB), 1);
        assert_eq!(Limits { left: 60_000, ..l }.within(CB), CB);
        assert_eq!(act(WorkKind::Orphan, false, false).after(NO, &l), Some(Then::Ask(Stage::Lookup, 3_000)));
        let l = Limits { left: 10_000_000, ..limits() };
        assert_eq!(act(WorkKind::Orphan, false, false).after(NO, &l), Some(Then::Ask(Stage::Lookup, OP)));
    }

    // --- release, events and the report --------------------------------------------------

    /// One orphan destroyed: the steps after its destroy, and the events.
    fn destroyed(s: &Setup, shared_answer: Option<bool>) -> (Vec<StepKind>, Vec<&'static str>) {
        let mut r = s.router();
        let (l, _) = reclaim_run(&mut r, r#"{"reclaim":true}"#, 1);
        r.take_events();
        r.reconcile_rechecked(l, false, T0).unwrap();
        r.reconcile_settled(l, Settled::Nothing, None, T0).unwrap(); // the record: none
        r.reconcile_settled(l, Settled::Value, None, T0).unwrap(); // the lookup
        let mut kinds = vec![];
        let mut n = r.reconcile_settled(l, Settled::Value, None, T0).unwrap(); // the destroy
        kinds.push(n.kind);
        if n.kind == StepKind::ReconcileRelease {
            assert!(n.bound_ms > 0 && n.bound_ms <= CB, "the release is bounded like a store call: {}", n.bound_ms);
            n = r.reconcile_released(l, shared_answer.unwrap_or(false), T0).unwrap();
            kinds.push(n.kind);
        }
        assert_ne!(n.flags & flags::ROUTER_EVENTS, 0, "the events are handed on with the step");
        (kinds, types(&mut r))
    }

    #[test]
    fn release_must_fire_in_the_shared_ledger_and_say_a_budget_slot_it_gave_back() {
        let mut s = setup(&["a"]);
        s.coordinated = true;
        s.budgets = true;
        let (kinds, events) = destroyed(&s, Some(true));
        assert_eq!(kinds, [StepKind::ReconcileRelease, StepKind::Succeeded]);
        assert_eq!(events, ["budget.released", "reconcile.reclaimed", "reconcile.completed"]);
    }

    #[test]
    fn release_must_not_fire_without_a_shared_ledger_nor_say_a_slot_nobody_held() {
        let mut s = setup(&["a"]);
        s.budgets = true;
        let (kinds, events) = destroyed(&s, None);
        assert_eq!(kinds, [StepKind::Succeeded]);
        assert_eq!(events, ["reconcile.reclaimed", "reconcile.completed"], "no charge was held");
        let mut s = setup(&["a"]);
        s.coordinated = true;
        let (_, events) = destroyed(&s, Some(true));
        assert_eq!(events, ["reconcile.reclaimed", "reconcile.completed"], "no budgets: no budget event");
        let mut s = setup(&["a"]);
        s.coordinated = true;
        s.budgets = true;
        let (_, events) = destroyed(&s, Some(false));
        assert_eq!(events, ["reconcile.reclaimed", "reconcile.completed"]);
    }

    #[test]
    fn events_must_say_each_pool_each_action_and_the_end() {
        let mut r = setup(&["a", "b"]).router();
        let (la, _, lb, _) = two_lanes(&mut r, r#"{"reclaim":true,"graceMs":0}"#, T0);
        r.reconcile_listed(la, ListFact::Listed(vec![stamped(1, 0.0)]), T0).unwrap();
        r.reconcile_end(la);
        r.reconcile_listed(lb, ListFact::Unlisted(UnknownReason::RateLimited), T0).unwrap();
        r.reconcile_mappings(lb, Some(vec![mapping(2, "a", "gone", 0.0)]), T0).unwrap();
        let n = r.reconcile_signalled(lb, &[], &[], T0).unwrap();
        assert_ne!(n.flags & flags::ROUTER_EVENTS, 0);
        let listed: Vec<Event> = r.take_events().into_iter().map(|e| e.event).collect();
        assert_eq!(
            listed,
            [
                Event::ReconcileListed {
                    pool: "a".into(),
                    status: "known",
                    reason: None,
                    orphan: Some(1),
                    stale_mapping: Some(1),
                    mapped: Some(0),
                    pending: Some(0)
                },
                Event::ReconcileListed {
                    pool: "b".into(),
                    status: "unknown",
                    reason: Some("RATE_LIMITED"),
                    orphan: None,
                    stale_mapping: None,
                    mapped: None,
                    pending: None
                },
            ]
        );
        // Two actions (the orphan, then the stale mapping), a lane each: both end IN_FLIGHT.
        assert_eq!(r.reconcile_forks(lb).unwrap(), 2);
        let (l1, _) = r.reconcile_lane(lb, T0).unwrap();
        let (l2, _) = r.reconcile_lane(lb, T0).unwrap();
        assert!(r.reconcile_end(lb).is_none());
        assert_eq!(r.reconcile_target(l1).unwrap().0, sbx(1));
        assert_eq!(r.reconcile_rechecked(l2, true, T0).unwrap().kind, StepKind::Done);
        assert!(r.reconcile_end(l2).is_none());
        assert_eq!(r.reconcile_rechecked(l1, true, T0).unwrap().kind, StepKind::Succeeded);
        let emitted = r.take_events();
        let types: Vec<&str> = emitted.iter().map(|e| e.event.type_name()).collect();
        assert_eq!(types, ["reconcile.reclaimed", "reconcile.reclaimed", "reconcile.completed"]);
        assert_eq!(emitted[0].sandbox.map(|k| k.to_string()), Some(sbx(2)), "the stale mapping's action ended first");
        let report = r.reconcile_report(l1).unwrap();
        assert_eq!(
            report.outcomes.iter().map(|o| (o.class.name(), o.outcome.code())).collect::<Vec<_>>(),
            [("stale-mapping", "IN_FLIGHT"), ("orphan", "IN_FLIGHT")]
        );
        assert_eq!(report.totals, Totals { orphan: 1, stale_mapping: 1, mapped: 0, pending: 0, unknown_pools: 1 });
        assert_eq!((report.started_at, report.grace_ms, report.fleet.as_str()), (T0, 0, "default"));
        assert_eq!(r.reconciles.len(), 0);
        assert_eq!(r.reconciles.lanes.len(), 0, "every lane ended");
    }

    #[test]
    fn a_run_must_count_as_a_job_in_flight_until_its_report_is_taken() {
        let mut r = setup(&["a"]).router();
        let (l, _) = r.reconcile_begin(Some("{}"), begin_facts(), T0).unwrap();
        assert_eq!(r.jobs_in_flight(), 1);
        classify_one(&mut r, l, vec![], vec![], T0);
        assert_eq!(r.jobs_in_flight(), 1);
        r.reconcile_report(l).unwrap();
        assert_eq!(r.jobs_in_flight(), 0);
    }

    #[test]
    fn abort_must_forget_the_run_and_every_lane() {
        let mut r = setup(&["a", "b"]).router();
        let (l0, _) = r.reconcile_begin(Some("{}"), begin_facts(), T0).unwrap();
        r.reconcile_forks(l0).unwrap();
        let (l1, _) = r.reconcile_lane(l0, T0).unwrap();
        r.reconcile_abort(l1);
        assert_eq!((r.reconciles.len(), r.reconciles.lanes.len()), (0, 0));
        assert!(r.reconcile_listed(l0, ListFact::Threw, T0).is_err(), "a report for a forgotten lane is a bug");
    }

    #[test]
    fn native_finders_must_be_named_in_the_report() {
        let mut r = setup(&["a", "b"]).router();
        let facts = Begin { native_finders: vec![false, true], ..begin_facts() };
        let (l0, _) = r.reconcile_begin(Some(r#"{"providers":["b"]}"#), facts, T0).unwrap();
        classify_one(&mut r, l0, vec![], vec![], T0);
        let report = r.reconcile_report(l0).unwrap();
        assert!(report.pools[0].native);
    }
}
