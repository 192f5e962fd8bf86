//! Reconcile's classification: which stamped sandbox without a mapping is an orphan, which
//! mapping is stale, which listed item is mapped or pending, which intent record is
//! garbage, and what `reclaim: true` acts on.
//!
//! Why here and not in the JS that lists the pools? Reconcile is the one place where the
//! router destroys sandboxes it did not just launch, so its rules must be exact, stated
//! once and tested without Node. Everything it decides is a pure function of one run's
//! facts: what each pool listed (or why it could not be listed), the store's records as
//! they were read, which ids are in flight in this process, and which intent writers on
//! this host are known to be gone. The caller performs the I/O (listings, store reads,
//! `process.kill(pid, 0)`, destroys) and feeds the facts in; [`classify`] answers in one
//! pass, with indexes instead of one linear search per listed item.
//!
//! # When is a launch over?
//!
//! One predicate, [`launch_over`], for a stamped sandbox without a mapping (is it an
//! orphan?) and for an intent that left nothing listed (is it garbage?) alike. The launch
//! an intent record names is **over** when it is **not in flight in this process** and:
//!
//! 1. its intent is `failed`: the launch ended with its outcome unknown (`LAUNCH_FAILED`); or
//! 2. it was written by this router (its session), whose provision of it is over, since it
//!    is not in flight (`INTENT_ABANDONED`); or
//! 3. its writer is on this host and that process is gone (`WRITER_GONE`); or
//! 4. its expiry has passed (`INTENT_EXPIRED`): the writer's launch deadline, mapping
//!    write and slack are all behind it.
//!
//! Otherwise it is in flight: here (`IN_FLIGHT`) or elsewhere (`IN_FLIGHT_ELSEWHERE`: a
//! live writer's intent). The rules are tried in that order, so the reason is the first
//! that holds. (The JS this replaces had two tests: the stale-intent one left out rule 2,
//! so an own-session intent whose provision had ended stayed until it expired.)
//!
//! # The classes
//!
//! For one listed pool, each listed item is exactly one of:
//! - `mapped`: its stamp's id is mapped to this pool and this provider sandbox id; or, for
//!   an item without a verified stamp, some mapping of this pool names its provider id;
//! - `pending` `STAMP_UNVERIFIED`: no verified stamp and no such mapping (never touched);
//! - `pending` `IN_FLIGHT`: a provision in this process is still making it;
//! - `orphan` `DUPLICATE_OF_MAPPED`: its id is mapped to *another* sandbox (an earlier
//!   attempt that allocated after all);
//! - with an intent: `orphan` for the reason the launch is over, else `pending`
//!   `IN_FLIGHT_ELSEWHERE`;
//! - without one: `pending` `AGE_UNKNOWN` (no creation time), `orphan` `GRACE_ELAPSED`
//!   (`now - createdAt >= graceMs`), else `pending` `WITHIN_GRACE`.
//!
//! A listed item whose mapping is an idle warm member (its record carries the warm label,
//! `core::warm`) is `mapped` while its pool keeps a warm pool in this router; a member of a
//! pool that keeps none any more (the `warm` option was removed) is `orphan`
//! `WARM_POOL_GONE` once its record is older than `graceMs` (so a rolling deploy that adds
//! a warm pool is not undone by the processes that do not have it yet), and its reclaim
//! takes it out of the inventory before it destroys it (`WorkKind::WarmMember`).
//!
//! A mapping of this pool and this fleet whose provider sandbox id the listing does not
//! show is, unless its id is in flight (then it is not reported), `stale-mapping`
//! `NOT_LISTED` once older than `graceMs`, else `pending` `NOT_LISTED_YET` (lists are
//! eventually consistent; a mapping without a readable creation time counts as young).
//!
//! An intent of this pool whose id was not listed and is not mapped, and whose launch is
//! over, is a stale intent (`NOTHING_LISTED`).

use rustc_hash::{FxHashMap, FxHashSet};

/// The facts of one reconcile run.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The router's fleet (its stamp).
    pub fleet: &'a str,
    /// This router's session id (in the intents it writes).
    pub session: &'a str,
    /// This host's name (in the intents written here).
    pub host: &'a str,
    /// Now, epoch ms.
    pub now_ms: f64,
    /// Age (ms) before a stamped sandbox without mapping or intent is an orphan, and before
    /// an unlisted mapping is stale.
    pub grace_ms: f64,
}

/// One item a pool's finder listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The provider's own sandbox id.
    pub provider_sandbox_id: String,
    /// The stamp's `sbx_…` id; `None` when the item carried no labels.
    pub sandbox_id: Option<String>,
    /// Whether the whole stamp (this fleet and a well-formed id) was seen on the item.
    pub verified: bool,
    /// Provider-reported creation time, epoch ms, when known.
    pub created_at_ms: Option<f64>,
}

/// What a pool's finder answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Listing {
    /// Listed completely.
    Listed(Vec<Listed>),
    /// Could not be listed (`TIMEOUT`, `READ_FAILED`, …): nothing of the pool is classified.
    Unknown,
}

/// One pool of the run, in the order of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// The pool's id.
    pub provider_id: String,
    /// Its listing.
    pub listing: Listing,
}

/// A mapping record as the store returned it (read once by the caller).
#[derive(Debug, Clone, PartialEq)]
pub struct MappingFact {
    /// The `sbx_…` id.
    pub id: String,
    /// Its pool.
    pub provider_id: String,
    /// The provider's sandbox id.
    pub provider_sandbox_id: String,
    /// The fleet label of its labels, when it is a string.
    pub fleet: Option<String>,
    /// Its `createdAt`, epoch ms, when readable.
    pub created_at_ms: Option<f64>,
    /// The warm label of its labels (an idle warm member's record), when it is a string.
    pub warm: Option<String>,
}

/// An intent record as the store returned it; every field but `id` may be missing or of
/// the wrong type in a caller's store, and is then `None`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IntentFact {
    /// The `sbx_…` id of the launch.
    pub id: String,
    /// The pool of its current attempt.
    pub provider_id: Option<String>,
    /// `launching` or `failed`.
    pub state: Option<String>,
    /// Epoch ms after which the writer's provision has certainly ended.
    pub expires_at_ms: Option<f64>,
    /// The writer's host.
    pub owner_host: Option<String>,
    /// The writer's process id.
    pub owner_pid: Option<u64>,
    /// The writing router's session.
    pub owner_session: Option<String>,
}

/// Everything [`classify`] reads besides the in-flight question.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The run's facts.
    pub facts: Facts<'a>,
    /// The pools, in report order (each once).
    pub pools: &'a [Pool],
    /// The store's mapping records, in the order it listed them.
    pub mappings: &'a [MappingFact],
    /// The store's intent records, in the order it listed them.
    pub intents: &'a [IntentFact],
    /// Process ids on this host that are known gone (the writers of intents here).
    pub gone_pids: &'a [u64],
    /// The pools that keep a warm pool in this router (their idle members are mapped).
    pub warm_pools: &'a [String],
}

/// Why a stamped sandbox without a (matching) mapping is an orphan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrphanReason {
    /// Its intent says the launch failed with its outcome unknown.
    LaunchFailed,
    /// Its `launching` intent names a process on this host that is gone.
    WriterGone,
    /// Its `launching` intent outlived the launch's settle window.
    IntentExpired,
    /// Its intent was written by this router, whose provision of it is over.
    IntentAbandoned,
    /// Its id is mapped to another sandbox.
    DuplicateOfMapped,
    /// No intent, and its provider-reported age is at least `graceMs`.
    GraceElapsed,
    /// An idle warm member of a pool that keeps no warm pool here any more, its record
    /// older than `graceMs`.
    WarmPoolGone,
}

impl OrphanReason {
    /// The documented code.
    pub fn code(self) -> &'static str {
        match self {
            OrphanReason::LaunchFailed => "LAUNCH_FAILED",
            OrphanReason::WriterGone => "WRITER_GONE",
            OrphanReason::IntentExpired => "INTENT_EXPIRED",
            OrphanReason::IntentAbandoned => "INTENT_ABANDONED",
            OrphanReason::DuplicateOfMapped => "DUPLICATE_OF_MAPPED",
            OrphanReason::GraceElapsed => "GRACE_ELAPSED",
            OrphanReason::WarmPoolGone => "WARM_POOL_GONE",
        }
    }
}

/// Why an item is pending (never touched).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PendingReason {
    /// A provision in this process is still making it.
    InFlight,
    /// A live writer's intent names it.
    InFlightElsewhere,
    /// No intent, and younger than `graceMs`.
    WithinGrace,
    /// No intent, and the provider reported no creation time.
    AgeUnknown,
    /// A mapping the listing does not show, younger than `graceMs`.
    NotListedYet,
    /// A listed handle without the whole stamp, matched to no mapping.
    StampUnverified,
}

impl PendingReason {
    /// The documented code.
    pub fn code(self) -> &'static str {
        match self {
            PendingReason::InFlight => "IN_FLIGHT",
            PendingReason::InFlightElsewhere => "IN_FLIGHT_ELSEWHERE",
            PendingReason::WithinGrace => "WITHIN_GRACE",
            PendingReason::AgeUnknown => "AGE_UNKNOWN",
            PendingReason::NotListedYet => "NOT_LISTED_YET",
            PendingReason::StampUnverified => "STAMP_UNVERIFIED",
        }
    }
}

/// Reason code of every stale mapping.
pub const NOT_LISTED: &str = "NOT_LISTED";
/// Reason code of every stale intent.
pub const NOTHING_LISTED: &str = "NOTHING_LISTED";

/// One pending item (a rare class: it carries its ids).
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The `sbx_…` id (`None`: a handle without a verified stamp).
    pub sandbox_id: Option<String>,
    /// The provider's sandbox id.
    pub provider_sandbox_id: String,
    /// Why it is pending.
    pub reason: PendingReason,
}

/// One pool's classification (empty for a pool that could not be listed). Items refer to
/// the input by index: the caller holds every id already, so nothing is copied back.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolClasses {
    /// Ids both sides agree on, in listing order: the index in [`Run::mappings`] of the
    /// mapping each listed item matched (its id is the mapped id).
    pub mapped: Vec<usize>,
    /// Orphans, in listing order: the index of the item in the pool's listing, and why.
    pub orphan: Vec<(usize, OrphanReason)>,
    /// Pending items: listed ones in listing order, then young unlisted mappings.
    pub pending: Vec<Pending>,
    /// Stale mappings (`NOT_LISTED`), in store order: indexes in [`Run::mappings`].
    pub stale_mapping: Vec<usize>,
}

/// What one reclaim action is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkKind {
    /// Destroy an orphan (re-resolved owned first).
    Orphan,
    /// Remove a stale mapping (once the runtime confirms the sandbox is gone).
    StaleMapping,
    /// Remove a stale intent.
    StaleIntent,
    /// Take an idle member of a pool that keeps no warm pool out of the inventory (if it is
    /// still idle), then destroy it (re-resolved owned) and remove its record.
    WarmMember,
}

/// One reclaim action, with the re-checks it needs right before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    /// What to do.
    pub kind: WorkKind,
    /// The pool (index into [`Run::pools`]).
    pub pool: usize,
    /// What it acts on: the index of the item in the pool's listing (an orphan), in
    /// [`Run::mappings`] (a stale mapping) or in [`Run::intents`] (a stale intent: its
    /// first record of that id).
    pub index: usize,
    /// Whether a mapping of this id written since the store was read saves it
    /// (`NOW_MAPPED`). False for a stale mapping (it is one) and for a
    /// `DUPLICATE_OF_MAPPED` orphan (its id's mapping names another sandbox).
    pub saved_by_mapping: bool,
    /// Whether its intent record is removed once it is destroyed (an orphan's); never for a
    /// `DUPLICATE_OF_MAPPED` orphan, whose id's record is a live mapping.
    pub removes_intent: bool,
}

/// A whole run's classification.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Classification {
    /// Per pool, in [`Run::pools`] order.
    pub pools: Vec<PoolClasses>,
    /// Intents whose launch is over and left nothing listed: the index in [`Run::intents`]
    /// of the first record of each id.
    pub stale_intents: Vec<usize>,
    /// What `reclaim: true` acts on, in this order: per pool, its orphans, its stale
    /// mappings, its stale intents.
    pub work: Vec<Work>,
}

/// How a launch named by an intent stands (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// A provision in this process is still making it.
    InFlightHere,
    /// Over, for this reason (an orphan's reason; a stale intent's cause).
    Over(OrphanReason),
    /// A live writer's launch, elsewhere.
    InFlightElsewhere,
}

/// The one predicate "this launch is over" (its rule: the module docs).
pub fn launch_over(
    intent: &IntentFact,
    facts: &Facts<'_>,
    in_flight: &dyn Fn(&str) -> bool,
    gone: &dyn Fn(u64) -> bool,
) -> Launch {
    if in_flight(&intent.id) {
        return Launch::InFlightHere;
    }
    if intent.state.as_deref() == Some("failed") {
        return Launch::Over(OrphanReason::LaunchFailed);
    }
    if intent.owner_session.as_deref() == Some(facts.session) {
        return Launch::Over(OrphanReason::IntentAbandoned);
    }
    if intent.owner_host.as_deref() == Some(facts.host) && intent.owner_pid.is_some_and(gone) {
        return Launch::Over(OrphanReason::WriterGone);
    }
    if intent.expires_at_ms.is_some_and(|e| e < facts.now_ms) {
        return Launch::Over(OrphanReason::IntentExpired);
    }
    Launch::InFlightElsewhere
}

/// Whether something created at `created_ms` is at least `graceMs` old (unknown: no).
fn grace_elapsed(facts: &Facts<'_>, created_ms: Option<f64>) -> bool {
    created_ms.is_some_and(|c| facts.now_ms - c >= facts.grace_ms)
}

/// The store's records, indexed once for the run.
struct Index<'a> {
    /// Mapping index by id (a later record of an id replaces an earlier one).
    by_id: FxHashMap<&'a str, usize>,
    /// First mapping index by (pool, provider sandbox id): what an unverified handle matches.
    by_provider: FxHashMap<(&'a str, &'a str), usize>,
    /// Intent by id (a later record replaces an earlier one)…
    intent_by_id: FxHashMap<&'a str, &'a IntentFact>,
    /// …and the ids with the index of their first record, in the order each first appeared.
    intent_order: Vec<(&'a str, usize)>,
    gone: FxHashSet<u64>,
}

impl<'a> Index<'a> {
    fn new(run: &Run<'a>) -> Self {
        let n = run.mappings.len();
        let mut by_id = FxHashMap::with_capacity_and_hasher(n, Default::default());
        let mut by_provider = FxHashMap::with_capacity_and_hasher(n, Default::default());
        for (j, m) in run.mappings.iter().enumerate() {
            by_id.insert(m.id.as_str(), j);
            by_provider.entry((m.provider_id.as_str(), m.provider_sandbox_id.as_str())).or_insert(j);
        }
        let mut intent_by_id = FxHashMap::default();
        let mut intent_order = Vec::new();
        for (k, i) in run.intents.iter().enumerate() {
            if intent_by_id.insert(i.id.as_str(), i).is_none() {
                intent_order.push((i.id.as_str(), k));
            }
        }
        Index { by_id, by_provider, intent_by_id, intent_order, gone: run.gone_pids.iter().copied().collect() }
    }
}

/// What one listed item with a verified stamp and no matching mapping is.
enum Verdict {
    Orphan(OrphanReason),
    Pending(PendingReason),
}

/// Classifies one run. `in_flight(id)`: whether a provision in this process is making `id`.
pub fn classify(run: &Run<'_>, in_flight: &dyn Fn(&str) -> bool) -> Classification {
    let ix = Index::new(run);
    let facts = &run.facts;
    let gone = |pid: u64| ix.gone.contains(&pid);
    let mut out = Classification { pools: Vec::with_capacity(run.pools.len()), ..Classification::default() };
    for (p, pool) in run.pools.iter().enumerate() {
        let mut c = PoolClasses::default();
        let items = match &pool.listing {
            Listing::Listed(items) => items,
            Listing::Unknown => {
                out.pools.push(c);
                continue;
            }
        };
        let pool_id = pool.provider_id.as_str();
        let mut listed: FxHashSet<&str> = FxHashSet::with_capacity_and_hasher(items.len(), Default::default());
        let mut seen: FxHashSet<&str> = FxHashSet::with_capacity_and_hasher(items.len(), Default::default());
        for (i, f) in items.iter().enumerate() {
            listed.insert(f.provider_sandbox_id.as_str());
            let Some(id) = f.sandbox_id.as_deref() else {
                unverified(&mut c, &ix, pool_id, f);
                continue;
            };
            seen.insert(id);
            let mapping = ix.by_id.get(id).copied();
            if let Some(j) = mapping {
                let m = &run.mappings[j];
                if m.provider_id == pool_id && m.provider_sandbox_id == f.provider_sandbox_id {
                    let gone = m.warm.is_some() && !run.warm_pools.iter().any(|w| w == pool_id);
                    if gone && f.verified && !in_flight(id) && grace_elapsed(facts, m.created_at_ms) {
                        out.work.push(Work {
                            kind: WorkKind::WarmMember,
                            pool: p,
                            index: i,
                            saved_by_mapping: false,
                            removes_intent: false,
                        });
                        c.orphan.push((i, OrphanReason::WarmPoolGone));
                    } else {
                        c.mapped.push(j);
                    }
                    continue;
                }
            }
            if !f.verified {
                unverified(&mut c, &ix, pool_id, f);
                continue;
            }
            let verdict = if in_flight(id) {
                Verdict::Pending(PendingReason::InFlight)
            } else if mapping.is_some() {
                Verdict::Orphan(OrphanReason::DuplicateOfMapped)
            } else if let Some(intent) = ix.intent_by_id.get(id) {
                match launch_over(intent, facts, in_flight, &gone) {
                    Launch::Over(why) => Verdict::Orphan(why),
                    Launch::InFlightHere => Verdict::Pending(PendingReason::InFlight),
                    Launch::InFlightElsewhere => Verdict::Pending(PendingReason::InFlightElsewhere),
                }
            } else if f.created_at_ms.is_none() {
                Verdict::Pending(PendingReason::AgeUnknown)
            } else if grace_elapsed(facts, f.created_at_ms) {
                Verdict::Orphan(OrphanReason::GraceElapsed)
            } else {
                Verdict::Pending(PendingReason::WithinGrace)
            };
            match verdict {
                Verdict::Orphan(why) => {
                    let duplicate = why == OrphanReason::DuplicateOfMapped;
                    out.work.push(Work {
                        kind: WorkKind::Orphan,
                        pool: p,
                        index: i,
                        saved_by_mapping: !duplicate,
                        removes_intent: !duplicate,
                    });
                    c.orphan.push((i, why));
                }
                Verdict::Pending(why) => c.pending.push(Pending {
                    sandbox_id: Some(id.to_string()),
                    provider_sandbox_id: f.provider_sandbox_id.clone(),
                    reason: why,
                }),
            }
        }
        // Mappings of this pool and fleet that the listing does not show.
        for (j, m) in run.mappings.iter().enumerate() {
            if m.provider_id != pool_id
                || m.fleet.as_deref() != Some(facts.fleet)
                || listed.contains(m.provider_sandbox_id.as_str())
                || in_flight(&m.id)
            {
                continue;
            }
            if !grace_elapsed(facts, m.created_at_ms) {
                c.pending.push(Pending {
                    sandbox_id: Some(m.id.clone()),
                    provider_sandbox_id: m.provider_sandbox_id.clone(),
                    reason: PendingReason::NotListedYet,
                });
                continue;
            }
            out.work.push(Work {
                kind: WorkKind::StaleMapping,
                pool: p,
                index: j,
                saved_by_mapping: false,
                removes_intent: false,
            });
            c.stale_mapping.push(j);
        }
        // Intents of this pool whose launch is over and left nothing listed: garbage.
        for &(id, k) in &ix.intent_order {
            let intent = ix.intent_by_id[id];
            if intent.provider_id.as_deref() != Some(pool_id) || seen.contains(id) || ix.by_id.contains_key(id) {
                continue;
            }
            if !matches!(launch_over(intent, facts, in_flight, &gone), Launch::Over(_)) {
                continue;
            }
            out.stale_intents.push(k);
            out.work.push(Work {
                kind: WorkKind::StaleIntent,
                pool: p,
                index: k,
                saved_by_mapping: true,
                removes_intent: false,
            });
        }
        out.pools.push(c);
    }
    out
}

/// A listed item without a verified stamp: matched to a mapping of this pool by its
/// provider id, or pending `STAMP_UNVERIFIED`. Never reclaimed.
fn unverified(c: &mut PoolClasses, ix: &Index<'_>, pool_id: &str, f: &Listed) {
    match ix.by_provider.get(&(pool_id, f.provider_sandbox_id.as_str())) {
        Some(&j) => c.mapped.push(j),
        None => c.pending.push(Pending {
            sandbox_id: None,
            provider_sandbox_id: f.provider_sandbox_id.clone(),
            reason: PendingReason::StampUnverified,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_800_000_000_000.0;
    const GRACE: f64 = 900_000.0;
    const FLEET: &str = "default";
    const SESSION: &str = "mine";
    const HOST: &str = "here";
    const DEAD_PID: u64 = 4242;

    fn sbx(n: u32) -> String {
        format!("sbx_{n:032x}")
    }

    fn facts() -> Facts<'static> {
        Facts { fleet: FLEET, session: SESSION, host: HOST, now_ms: NOW, grace_ms: GRACE }
    }

    fn item(n: u32, created: Option<f64>) -> Listed {
        Listed {
            provider_sandbox_id: format!("p-{n}"),
            sandbox_id: Some(sbx(n)),
            verified: true,
            created_at_ms: created,
        }
    }

    fn old(n: u32) -> Listed {
        item(n, Some(NOW - 3_600_000.0))
    }

    fn young(n: u32) -> Listed {
        item(n, Some(NOW - 1_000.0))
    }

    fn mapping(n: u32, psid: &str, created: Option<f64>) -> MappingFact {
        MappingFact {
            id: sbx(n),
            provider_id: "a".into(),
            provider_sandbox_id: psid.into(),
            fleet: Some(FLEET.into()),
            created_at_ms: created,
            warm: None,
        }
    }

    /// A live writer's `launching` intent elsewhere (another host, not expired).
    fn intent(n: u32) -> IntentFact {
        IntentFact {
            id: sbx(n),
            provider_id: Some("a".into()),
            state: Some("launching".into()),
            expires_at_ms: Some(NOW + 600_000.0),
            owner_host: Some("elsewhere".into()),
            owner_pid: Some(DEAD_PID),
            owner_session: Some("theirs".into()),
        }
    }

    struct Case {
        items: Vec<Listed>,
        mappings: Vec<MappingFact>,
        intents: Vec<IntentFact>,
        in_flight: Vec<String>,
        warm_pools: Vec<String>,
    }

    impl Case {
        fn new(items: Vec<Listed>) -> Self {
            Case { items, mappings: vec![], intents: vec![], in_flight: vec![], warm_pools: vec![] }
        }
        fn mappings(mut self, m: Vec<MappingFact>) -> Self {
            self.mappings = m;
            self
        }
        fn intents(mut self, i: Vec<IntentFact>) -> Self {
            self.intents = i;
            self
        }
        fn in_flight(mut self, ids: &[u32]) -> Self {
            self.in_flight = ids.iter().map(|n| sbx(*n)).collect();
            self
        }
        fn run(&self) -> Seen {
            let pools = [Pool { provider_id: "a".into(), listing: Listing::Listed(self.items.clone()) }];
            let run = Run {
                facts: facts(),
                pools: &pools,
                mappings: &self.mappings,
                intents: &self.intents,
                gone_pids: &[DEAD_PID],
                warm_pools: &self.warm_pools,
            };
            let c = classify(&run, &|id| self.in_flight.iter().any(|x| x == id));
            Seen::of(self, &c)
        }
    }

    /// One pool's classification with its indexes resolved to ids, as the report shows it.
    struct Seen {
        mapped: Vec<String>,
        orphans: Vec<(String, &'static str)>,
        pending: Vec<(Option<String>, &'static str)>,
        stale_mapping: Vec<(String, String)>,
        stale_intents: Vec<String>,
        work: Vec<Work>,
        /// Each action's kind, id and provider sandbox id.
        acts_on: Vec<(WorkKind, String, Option<String>)>,
    }

    impl Seen {
        fn of(case: &Case, c: &Classification) -> Self {
            let p = &c.pools[0];
            let item = |i: usize| &case.items[i];
            let mapping = |j: usize| &case.mappings[j];
            Seen {
                mapped: p.mapped.iter().map(|&j| mapping(j).id.clone()).collect(),
                orphans: p.orphan.iter().map(|&(i, r)| (item(i).sandbox_id.clone().unwrap(), r.code())).collect(),
                pending: p.pending.iter().map(|x| (x.sandbox_id.clone(), x.reason.code())).collect(),
                stale_mapping: p
                    .stale_mapping
                    .iter()
                    .map(|&j| (mapping(j).id.clone(), mapping(j).provider_sandbox_id.clone()))
                    .collect(),
                stale_intents: c.stale_intents.iter().map(|&k| case.intents[k].id.clone()).collect(),
                work: c.work.clone(),
                acts_on: c
                    .work
                    .iter()
                    .map(|w| match w.kind {
                        WorkKind::Orphan | WorkKind::WarmMember => (
                            w.kind,
                            item(w.index).sandbox_id.clone().unwrap(),
                            Some(item(w.index).provider_sandbox_id.clone()),
                        ),
                        WorkKind::StaleMapping => {
                            (w.kind, mapping(w.index).id.clone(), Some(mapping(w.index).provider_sandbox_id.clone()))
                        }
                        WorkKind::StaleIntent => (w.kind, case.intents[w.index].id.clone(), None),
                    })
                    .collect(),
            }
        }
    }

    // --- GRACE_ELAPSED / WITHIN_GRACE / AGE_UNKNOWN ------------------------------------

    #[test]
    fn grace_elapsed_must_fire_old_stamped_without_mapping_or_intent() {
        let c = Case::new(vec![old(1)]).run();
        assert_eq!(c.orphans, [(sbx(1), "GRACE_ELAPSED")]);
        assert_eq!(c.work.len(), 1);
        assert_eq!(c.work[0].kind, WorkKind::Orphan);
        assert!(c.work[0].saved_by_mapping && c.work[0].removes_intent);
    }

    #[test]
    fn grace_elapsed_must_fire_at_exactly_grace_ms() {
        let c = Case::new(vec![item(1, Some(NOW - GRACE))]).run();
        assert_eq!(c.orphans, [(sbx(1), "GRACE_ELAPSED")]);
    }

    #[test]
    fn grace_elapsed_must_not_fire_within_grace() {
        let c = Case::new(vec![item(1, Some(NOW - GRACE + 1.0))]).run();
        assert_eq!(c.pending, [(Some(sbx(1)), "WITHIN_GRACE")]);
        assert!(c.work.is_empty());
    }

    #[test]
    fn age_unknown_must_fire_without_created_at() {
        let c = Case::new(vec![item(1, None)]).run();
        assert_eq!(c.pending, [(Some(sbx(1)), "AGE_UNKNOWN")]);
        assert!(c.work.is_empty());
    }

    #[test]
    fn age_unknown_must_not_fire_with_created_at() {
        let c = Case::new(vec![old(1)]).run();
        assert!(c.pending.is_empty());
    }

    // --- warm members ----------------------------------------------------------------------

    fn member(n: u32, created: f64) -> MappingFact {
        MappingFact { warm: Some("a".into()), ..mapping(n, &format!("p-{n}"), Some(created)) }
    }

    #[test]
    fn warm_pool_gone_must_fire_for_an_old_idle_member_of_a_pool_without_a_warm_pool() {
        let c = Case::new(vec![old(1)]).mappings(vec![member(1, NOW - GRACE)]).run();
        assert_eq!(c.orphans, [(sbx(1), "WARM_POOL_GONE")]);
        assert!(c.mapped.is_empty());
        assert_eq!(c.work.len(), 1);
        assert_eq!(c.work[0].kind, WorkKind::WarmMember);
        assert!(!c.work[0].saved_by_mapping && !c.work[0].removes_intent);
    }

    #[test]
    fn warm_pool_gone_must_not_fire_while_the_pool_keeps_a_warm_pool_or_within_grace_or_once_claimed() {
        let mut case = Case::new(vec![old(1)]).mappings(vec![member(1, NOW - GRACE)]);
        case.warm_pools = vec!["a".into()];
        let c = case.run();
        assert_eq!(c.mapped, [sbx(1)], "an idle member of a warm pool is ours, mapped");
        assert!(c.work.is_empty());
        let c = Case::new(vec![old(1)]).mappings(vec![member(1, NOW - GRACE + 1.0)]).run();
        assert_eq!(c.mapped, [sbx(1)], "a young member is left alone (a rolling deploy)");
        let c = Case::new(vec![old(1)]).mappings(vec![mapping(1, "p-1", Some(NOW - GRACE))]).run();
        assert_eq!(c.mapped, [sbx(1)], "a claimed member's record has no warm label: the caller's sandbox");
        let c = Case::new(vec![old(1)]).mappings(vec![member(1, NOW - GRACE)]).in_flight(&[1]).run();
        assert_eq!(c.mapped, [sbx(1)]);
    }

    // --- mapped --------------------------------------------------------------------------

    #[test]
    fn mapped_must_fire_when_id_pool_and_provider_id_agree_even_with_grace_zero() {
        let mut case = Case::new(vec![old(1)]).mappings(vec![mapping(1, "p-1", Some(0.0))]);
        case.items[0].created_at_ms = Some(0.0);
        let c = case.run();
        assert_eq!(c.mapped, [sbx(1)]);
        assert!(c.work.is_empty());
    }

    #[test]
    fn mapped_must_not_fire_for_another_pools_mapping() {
        let mut m = mapping(1, "p-1", Some(0.0));
        m.provider_id = "b".into();
        let c = Case::new(vec![old(1)]).mappings(vec![m]).run();
        assert!(c.mapped.is_empty());
        assert_eq!(c.orphans, [(sbx(1), "DUPLICATE_OF_MAPPED")]);
    }

    // --- DUPLICATE_OF_MAPPED -----------------------------------------------------------

    #[test]
    fn duplicate_of_mapped_must_fire_for_a_second_sandbox_of_a_mapped_id() {
        let mut leftover = young(8);
        leftover.provider_sandbox_id = "leftover".into();
        let mut kept = young(8);
        kept.provider_sandbox_id = "kept".into();
        let c = Case::new(vec![leftover, kept]).mappings(vec![mapping(8, "kept", Some(NOW))]).run();
        assert_eq!(c.mapped, [sbx(8)]);
        assert_eq!(c.orphans, [(sbx(8), "DUPLICATE_OF_MAPPED")]);
        let w = &c.work[0];
        assert_eq!(c.acts_on[0].2.as_deref(), Some("leftover"));
        assert!(!w.saved_by_mapping, "its id's mapping names another sandbox");
        assert!(!w.removes_intent, "its id's record is a live mapping");
    }

    #[test]
    fn duplicate_of_mapped_must_not_fire_while_in_flight() {
        let mut leftover = young(8);
        leftover.provider_sandbox_id = "leftover".into();
        let c = Case::new(vec![leftover]).mappings(vec![mapping(8, "kept", Some(NOW))]).in_flight(&[8]).run();
        assert_eq!(c.pending, [(Some(sbx(8)), "IN_FLIGHT")]);
        assert!(c.work.is_empty());
    }

    // --- IN_FLIGHT ---------------------------------------------------------------------

    #[test]
    fn in_flight_must_fire_for_an_id_this_process_is_making() {
        let c = Case::new(vec![old(1)]).in_flight(&[1]).run();
        assert_eq!(c.pending, [(Some(sbx(1)), "IN_FLIGHT")]);
        assert!(c.work.is_empty());
    }

    #[test]
    fn in_flight_must_not_fire_once_settled() {
        let c = Case::new(vec![old(1)]).in_flight(&[2]).run();
        assert_eq!(c.orphans, [(sbx(1), "GRACE_ELAPSED")]);
    }

    // --- intents: LAUNCH_FAILED, INTENT_ABANDONED, WRITER_GONE, INTENT_EXPIRED,
    //     IN_FLIGHT_ELSEWHERE ---------------------------------------------------------------

    #[test]
    fn launch_failed_must_fire_at_once_for_a_failed_intent() {
        let mut i = intent(1);
        i.state = Some("failed".into());
        let c = Case::new(vec![young(1)]).intents(vec![i]).run();
        assert_eq!(c.orphans, [(sbx(1), "LAUNCH_FAILED")]);
    }

    #[test]
    fn launch_failed_must_not_fire_for_a_live_launching_intent() {
        let c = Case::new(vec![young(1)]).intents(vec![intent(1)]).run();
        assert_eq!(c.pending, [(Some(sbx(1)), "IN_FLIGHT_ELSEWHERE")]);
        assert!(c.work.is_empty());
    }

    #[test]
    fn intent_abandoned_must_fire_for_this_sessions_intent_not_in_flight() {
        let mut i = intent(1);
        i.owner_session = Some(SESSION.into());
        let c = Case::new(vec![young(1)]).intents(vec![i]).run();
        assert_eq!(c.orphans, [(sbx(1), "INTENT_ABANDONED")]);
    }

    #[test]
    fn intent_abandoned_must_not_fire_while_this_sessions_provision_is_in_flight() {
        let mut i = intent(1);
        i.owner_session = Some(SESSION.into());
        let c = Case::new(vec![young(1)]).intents(vec![i]).in_flight(&[1]).run();
        assert_eq!(c.pending, [(Some(sbx(1)), "IN_FLIGHT")]);
    }

    #[test]
    fn writer_gone_must_fire_for_a_gone_process_on_this_host() {
        let mut i = intent(1);
        i.owner_host = Some(HOST.into());
        let c = Case::new(vec![young(1)]).intents(vec![i]).run();
        assert_eq!(c.orphans, [(sbx(1), "WRITER_GONE")]);
    }

    #[test]
    fn writer_gone_must_not_fire_for_a_live_process_or_another_host() {
        let mut live = intent(1);
        live.owner_host = Some(HOST.into());
        live.owner_pid = Some(1);
        let elsewhere = intent(2); // DEAD_PID, but on another host: that number says nothing here
        let c = Case::new(vec![young(1), young(2)]).intents(vec![live, elsewhere]).run();
        assert_eq!(c.pending, [(Some(sbx(1)), "IN_FLIGHT_ELSEWHERE"), (Some(sbx(2)), "IN_FLIGHT_ELSEWHERE")]);
    }

    #[test]
    fn intent_expired_must_fire_after_expiry() {
        let mut i = intent(1);
        i.expires_at_ms = Some(NOW - 1.0);
        let c = Case::new(vec![young(1)]).intents(vec![i]).run();
        assert_eq!(c.orphans, [(sbx(1), "INTENT_EXPIRED")]);
    }

    #[test]
    fn intent_expired_must_not_fire_at_expiry_or_without_one() {
        let mut at = intent(1);
        at.expires_at_ms = Some(NOW);
        let mut none = intent(2);
        none.expires_at_ms = None;
        let c = Case::new(vec![young(1), young(2)]).intents(vec![at, none]).run();
        assert_eq!(c.pending, [(Some(sbx(1)), "IN_FLIGHT_ELSEWHERE"), (Some(sbx(2)), "IN_FLIGHT_ELSEWHERE")]);
    }

    #[test]
    fn an_intent_beats_the_grace_period_both_ways() {
        // An old sandbox with a live writer's intent is pending; a young one with a failed
        // intent is an orphan: the intent is exact, the grace period a guess.
        let mut failed = intent(2);
        failed.state = Some("failed".into());
        let c = Case::new(vec![old(1), young(2)]).intents(vec![intent(1), failed]).run();
        assert_eq!(c.pending, [(Some(sbx(1)), "IN_FLIGHT_ELSEWHERE")]);
        assert_eq!(c.orphans, [(sbx(2), "LAUNCH_FAILED")]);
    }

    #[test]
    fn the_first_rule_that_holds_names_the_reason() {
        let all = IntentFact {
            id: sbx(1),
            provider_id: Some("a".into()),
            state: Some("failed".into()),
            expires_at_ms: Some(0.0),
            owner_host: Some(HOST.into()),
            owner_pid: Some(DEAD_PID),
            owner_session: Some(SESSION.into()),
        };
        let gone = |p: u64| p == DEAD_PID;
        let no = |_: &str| false;
        let f = facts();
        assert_eq!(launch_over(&all, &f, &no, &gone), Launch::Over(OrphanReason::LaunchFailed));
        let i = IntentFact { state: Some("launching".into()), ..all.clone() };
        assert_eq!(launch_over(&i, &f, &no, &gone), Launch::Over(OrphanReason::IntentAbandoned));
        let i = IntentFact { owner_session: None, ..i };
        assert_eq!(launch_over(&i, &f, &no, &gone), Launch::Over(OrphanReason::WriterGone));
        let i = IntentFact { owner_pid: None, ..i };
        assert_eq!(launch_over(&i, &f, &no, &gone), Launch::Over(OrphanReason::IntentExpired));
        let i = IntentFact { expires_at_ms: None, ..i };
        assert_eq!(launch_over(&i, &f, &no, &gone), Launch::InFlightElsewhere);
        assert_eq!(launch_over(&all, &f, &|_| true, &gone), Launch::InFlightHere);
    }

    // --- STAMP_UNVERIFIED ----------------------------------------------------------------

    #[test]
    fn stamp_unverified_must_fire_for_a_handle_without_labels_and_no_mapping() {
        let h = Listed { provider_sandbox_id: "h".into(), sandbox_id: None, verified: false, created_at_ms: Some(0.0) };
        let c = Case::new(vec![h]).run();
        assert_eq!(c.pending, [(None, "STAMP_UNVERIFIED")]);
        assert!(c.work.is_empty(), "never reclaimed");
    }

    #[test]
    fn stamp_unverified_must_not_fire_when_a_mapping_names_its_provider_id() {
        let h = Listed { provider_sandbox_id: "p-1".into(), sandbox_id: None, verified: false, created_at_ms: None };
        let c = Case::new(vec![h]).mappings(vec![mapping(1, "p-1", Some(0.0))]).run();
        assert_eq!(c.mapped, [sbx(1)]);
        assert!(c.pending.is_empty());
    }

    #[test]
    fn stamp_unverified_with_an_id_is_never_an_orphan() {
        let mut h = old(1);
        h.verified = false;
        let c = Case::new(vec![h]).run();
        assert_eq!(c.pending, [(None, "STAMP_UNVERIFIED")]);
        assert!(c.work.is_empty());
    }

    // --- NOT_LISTED / NOT_LISTED_YET ---------------------------------------------------

    #[test]
    fn not_listed_must_fire_for_an_old_mapping_the_listing_does_not_show() {
        let c = Case::new(vec![]).mappings(vec![mapping(1, "gone", Some(NOW - GRACE))]).run();
        assert_eq!(c.stale_mapping, [(sbx(1), "gone".to_string())]);
        assert_eq!(c.work[0].kind, WorkKind::StaleMapping);
        assert!(!c.work[0].saved_by_mapping);
    }

    #[test]
    fn not_listed_must_not_fire_when_listed_or_another_fleet_or_pool_or_in_flight() {
        let mut other_fleet = mapping(2, "y", Some(0.0));
        other_fleet.fleet = Some("other".into());
        let mut no_fleet = mapping(3, "z", Some(0.0));
        no_fleet.fleet = None;
        let mut other_pool = mapping(4, "w", Some(0.0));
        other_pool.provider_id = "b".into();
        let flying = mapping(5, "v", Some(0.0));
        let c = Case::new(vec![old(1)])
            .mappings(vec![mapping(1, "p-1", Some(0.0)), other_fleet, no_fleet, other_pool, flying])
            .in_flight(&[5])
            .run();
        assert!(c.stale_mapping.is_empty());
        assert!(c.pending.is_empty(), "an in-flight mapping is not reported at all");
        assert!(c.work.is_empty());
    }

    #[test]
    fn not_listed_yet_must_fire_for_a_young_or_undated_mapping() {
        let c = Case::new(vec![]).mappings(vec![mapping(1, "x", Some(NOW - 1.0)), mapping(2, "y", None)]).run();
        assert_eq!(c.pending, [(Some(sbx(1)), "NOT_LISTED_YET"), (Some(sbx(2)), "NOT_LISTED_YET")]);
        assert!(c.stale_mapping.is_empty());
    }

    #[test]
    fn not_listed_yet_must_not_fire_for_an_old_mapping() {
        let c = Case::new(vec![]).mappings(vec![mapping(1, "x", Some(0.0))]).run();
        assert!(c.pending.is_empty());
    }

    // --- stale intents (NOTHING_LISTED) --------------------------------------------------

    #[test]
    fn stale_intent_must_fire_for_an_over_launch_that_left_nothing_listed() {
        let mut failed = intent(1);
        failed.state = Some("failed".into());
        let mut expired = intent(2);
        expired.expires_at_ms = Some(NOW - 1.0);
        let mut gone = intent(3);
        gone.owner_host = Some(HOST.into());
        let c = Case::new(vec![]).intents(vec![failed, expired, gone]).run();
        assert_eq!(c.stale_intents, [sbx(1), sbx(2), sbx(3)]);
        assert!(c.work.iter().all(|w| w.kind == WorkKind::StaleIntent && w.saved_by_mapping));
    }

    #[test]
    fn stale_intent_must_not_fire_when_listed_mapped_live_in_flight_or_another_pool() {
        let mut listed = intent(1);
        listed.state = Some("failed".into());
        let mut mapped = intent(2);
        mapped.state = Some("failed".into());
        let live = intent(3);
        let mut flying = intent(4);
        flying.state = Some("failed".into());
        let mut other_pool = intent(5);
        other_pool.state = Some("failed".into());
        other_pool.provider_id = Some("b".into());
        let c = Case::new(vec![young(1)])
            .mappings(vec![mapping(2, "p-2", Some(NOW))])
            .intents(vec![listed, mapped, live, flying, other_pool])
            .in_flight(&[4])
            .run();
        assert!(c.stale_intents.is_empty());
        assert!(c.work.iter().all(|w| w.kind != WorkKind::StaleIntent));
    }

    // The outcome the one predicate changes (intended): an own-session intent whose
    // provision is no longer in flight is stale, as its sandbox would be INTENT_ABANDONED.

    #[test]
    fn stale_intent_must_fire_for_this_sessions_intent_once_its_provision_is_over() {
        let mut mine = intent(1);
        mine.owner_session = Some(SESSION.into());
        let c = Case::new(vec![]).intents(vec![mine]).run();
        assert_eq!(c.stale_intents, [sbx(1)]);
    }

    #[test]
    fn stale_intent_must_not_fire_for_this_sessions_intent_while_in_flight() {
        let mut mine = intent(1);
        mine.owner_session = Some(SESSION.into());
        let c = Case::new(vec![]).intents(vec![mine]).in_flight(&[1]).run();
        assert!(c.stale_intents.is_empty());
    }

    // --- the store as a caller's store may return it -------------------------------------

    #[test]
    fn a_later_record_of_an_id_replaces_an_earlier_one_in_first_seen_order() {
        let mut failed_one = intent(1);
        failed_one.state = Some("failed".into());
        let mut failed_two = intent(2);
        failed_two.state = Some("failed".into());
        // 1's later record is live again: not stale.
        let c = Case::new(vec![]).intents(vec![failed_one.clone(), failed_two.clone(), intent(1)]).run();
        assert_eq!(c.stale_intents, [sbx(2)]);
        // 1's later record failed: stale, in the place 1 first appeared.
        let c = Case::new(vec![]).intents(vec![intent(1), failed_two, failed_one]).run();
        assert_eq!(c.stale_intents, [sbx(1), sbx(2)]);
    }

    #[test]
    fn an_unknown_pool_is_not_classified() {
        let pools = [
            Pool { provider_id: "a".into(), listing: Listing::Unknown },
            Pool { provider_id: "b".into(), listing: Listing::Listed(vec![old(1)]) },
        ];
        let mappings = [mapping(9, "gone", Some(0.0))];
        let mut failed = intent(7);
        failed.state = Some("failed".into());
        let intents = [failed];
        let run = Run {
            facts: facts(),
            pools: &pools,
            mappings: &mappings,
            intents: &intents,
            gone_pids: &[],
            warm_pools: &[],
        };
        let c = classify(&run, &|_| false);
        assert_eq!(c.pools[0], PoolClasses::default());
        assert_eq!(c.pools[1].orphan.len(), 1);
        assert!(c.stale_intents.is_empty(), "the intent's pool was not listed");
        assert_eq!(c.work.iter().map(|w| w.pool).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn work_is_per_pool_orphans_then_stale_mappings_then_stale_intents() {
        let mut failed = intent(5);
        failed.state = Some("failed".into());
        let c =
            Case::new(vec![old(1), old(2)]).mappings(vec![mapping(3, "gone", Some(0.0))]).intents(vec![failed]).run();
        assert_eq!(
            c.acts_on,
            [
                (WorkKind::Orphan, sbx(1), Some("p-1".to_string())),
                (WorkKind::Orphan, sbx(2), Some("p-2".to_string())),
                (WorkKind::StaleMapping, sbx(3), Some("gone".to_string())),
                (WorkKind::StaleIntent, sbx(5), None)
            ]
        );
    }
}
