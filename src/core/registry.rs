//! Registered pools and the routing decision over them.
//!
//! Why parse declarations once, at registration? A provision asks "who may serve this?"
//! on every call; re-reading every pool's declaration per request would cost more than
//! the decision itself. Pools are stored validated, so a decision is a scan over plain
//! structs, and the order of filters is the spec's: exact provider and requirements,
//! then (request-scoped) signals, then availability and the latency budget, then rank.

use crate::core::health::{Block, Observed};
use crate::core::pool::Pool;
use crate::core::profile::{admits, admits_simple, tier, Profile, RegionTable, RequestProfile};
use crate::core::ranking::{latency_of, rank_into, tier_of, top_k, Candidate, RankScratch, Ranked, SideBySide, Slim};
use crate::core::reasons::{Reason, Rejection};
use crate::core::request::{Objective, Request};
use crate::core::requirements::{check, CheckContext, Interner, Sink, TextKey};
use crate::core::signals::{SignalState, Signals};
use crate::core::CoreError;
use std::collections::HashMap;
use std::fmt::{self, Write};

/// Pools by registration, with an id index and the hot path's compact profiles.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pools: Vec<Pool>,
    index: HashMap<String, usize>,
    profiles: Vec<Profile>,
    regions: RegionTable,
}

impl Registry {
    /// Adds a pool; a duplicate id is an error and leaves the registry unchanged.
    pub fn add(&mut self, pool: Pool) -> Result<usize, CoreError> {
        if self.index.contains_key(&pool.id) {
            return Err(CoreError::DuplicateProvider(pool.id));
        }
        let i = self.pools.len();
        self.index.insert(pool.id.clone(), i);
        let regions = self.regions.intern(&pool.capabilities.regions);
        self.profiles.push(Profile::of(&pool, regions));
        self.pools.push(pool);
        Ok(i)
    }

    /// All pools, in registration order.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// Index of a pool by id.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }
}

/// Per-request inputs beyond the request itself.
#[derive(Debug, Default, Clone)]
pub struct RouteOptions<'a> {
    /// The request is `provisionDetached`.
    pub detached: bool,
    /// Pools whose credential-readiness answered `false`.
    pub credentials_unavailable: &'a [usize],
    /// Request-scoped signals from a resolver, by pool index; these replace registered
    /// signals. A pool absent from the map keeps its registered signals.
    pub signals: Option<&'a HashMap<usize, SignalState>>,
    /// Capacity routing: explicit order replacing strategy ranking.
    pub provider_order: Option<&'a [String]>,
    /// Keep only the best `limit` eligible pools.
    pub limit: Option<usize>,
    /// Collect every rejection reason (explain, events, errors) instead of a verdict.
    pub detail: bool,
    /// Pools whose circuit excludes them now (health), by pool index, with why.
    pub circuit: &'a [(usize, Block)],
    /// Explanations only: pools whose estimated cost a budget rule has no room for now, by
    /// pool index (a provision decides this per candidate, at launch time).
    pub over_budget: &'a [usize],
    /// Explanations only: pools that cannot launch now for pacing (no launch token, or
    /// cooling down), by pool index, with until when (a provision skips them at launch time).
    pub paced: &'a [(usize, crate::core::pacing::Blocked)],
    /// Observed signals by pool index, blended into ranking (health, opted in).
    pub observed: Option<&'a [Option<Observed>]>,
}

/// Blends a pool's observed signals into its declared ones (ready latency and completion
/// rate; the latency budget filter keeps the declared value): the signals ranking uses,
/// and both sides for explanations. Without observed signals, the declared ones as they are.
pub fn blended(declared: Signals, observed: Option<Observed>, objective: Objective) -> (Signals, Option<SideBySide>) {
    let Some(o) = observed else { return (declared, None) };
    let mut s = declared;
    if let Some(l) = o.ready_latency_ms {
        s.ready_latency_ms = o.blend(declared.ready_latency_ms, l);
    }
    s.completion_within_budget_rate =
        o.blend(declared.completion_within_budget_rate, o.completion_rate).clamp(0.0, 1.0);
    let side = SideBySide {
        declared_latency: latency_of(&declared, objective),
        observed_latency: if objective == Objective::Ready { o.ready_latency_ms } else { None },
        declared_reliability: declared.completion_within_budget_rate,
        observed_reliability: Some(o.completion_rate),
    };
    (s, Some(side))
}

/// What a pool's observed signals are under `opts` (None when not blended in).
fn observed_of(opts: &RouteOptions<'_>, i: usize) -> Option<Observed> {
    opts.observed.and_then(|o| o.get(i).copied().flatten())
}

/// A rejected pool and why.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolRejection {
    /// Index in the pool list.
    pub index: usize,
    /// Why (empty in verdict mode).
    pub reasons: Vec<Rejection>,
}

/// The outcome of routing one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Eligible pools, best first.
    pub eligible: Vec<Ranked>,
    /// Rejected pools (only filled when `detail` is set).
    pub rejected: Vec<PoolRejection>,
    /// How many pools were rejected.
    pub rejected_count: usize,
    /// How many pools were considered.
    pub total: usize,
}

/// Pools that pass the hard requirements (and credentials); the set a signal resolver runs for.
pub fn requirement_survivors(pools: &[Pool], req: &Request, opts: &RouteOptions<'_>) -> Vec<usize> {
    (0..pools.len())
        .filter(|&i| {
            let p = &pools[i];
            if opts.credentials_unavailable.contains(&i) {
                return false;
            }
            let mut sink = Sink::verdict();
            check(&p.id, &p.capabilities, req, ctx(p, opts), &mut sink);
            !sink.failed()
        })
        .collect()
}

fn ctx(p: &Pool, opts: &RouteOptions<'_>) -> CheckContext {
    CheckContext { detached: opts.detached, has_launch_detached: p.has_launch_detached }
}

/// Milliseconds as the latency-budget texts print them: integers without a fraction.
struct Ms(f64);

impl fmt::Display for Ms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.fract() == 0.0 {
            write!(f, "{}", self.0 as i64)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// Routes `req` over `pools` in the spec's order of filters.
pub fn route(pools: &[Pool], req: &Request, opts: &RouteOptions<'_>) -> Decision {
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut rejected = Vec::new();
    let mut rejected_count = 0;
    for (i, p) in pools.iter().enumerate() {
        let mut reasons = Vec::new();
        let failed = {
            let mut sink = if opts.detail { Sink::collect(&mut reasons) } else { Sink::verdict() };
            judge(p, i, req, opts, false, &mut sink, &mut candidates)
        };
        if failed {
            rejected_count += 1;
            if opts.detail {
                rejected.push(PoolRejection { index: i, reasons });
            }
        }
    }
    let mut eligible = Vec::new();
    rank_into(
        &candidates,
        |i| pools[i].id.as_str(),
        |i| tier_of(&pools[i].capabilities.regions, &req.region_preferred) as usize,
        req,
        opts.provider_order,
        opts.limit,
        &mut RankScratch::default(),
        &mut eligible,
    );
    Decision { eligible, rejected, rejected_count, total: pools.len() }
}

/// One pool through the filters, in the spec's order, into `sink`; pushes it to
/// `candidates` when it passes. Returns whether it was rejected. The one judgement both
/// [`route`] and [`route_interned`] make (and that `route_order_into` makes over profiles,
/// which the property tests hold equal). `met`: the pool's compact profile already showed
/// every requirement met, so the requirement checks would report nothing and are skipped.
fn judge(
    p: &Pool,
    i: usize,
    req: &Request,
    opts: &RouteOptions<'_>,
    met: bool,
    sink: &mut Sink<'_>,
    candidates: &mut Vec<Candidate>,
) -> bool {
    if opts.credentials_unavailable.contains(&i) {
        sink.reject(
            Reason::CredentialsUnavailable,
            TextKey { phrase: 0, detail: Some(0) },
            |d| d.push_str("readiness port answered false"),
            |p| p.push_str("credentials unavailable"),
        );
    }
    if !met && (!sink.failed() || opts.detail) {
        check(&p.id, &p.capabilities, req, ctx(p, opts), sink);
    }
    if !sink.failed() {
        operational(p, i, req, opts, sink, candidates);
    }
    sink.failed()
}

/// A rejected pool of an [`InternedDecision`]: its reasons are
/// `interner.reasons[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InternedPoolRejection {
    /// Index in the pool list.
    pub index: usize,
    /// First reason.
    pub start: usize,
    /// One past the last reason.
    pub end: usize,
}

/// A decision with every rejection reason, texts interned into an [`Interner`] (which
/// holds the reasons the rejections refer to), lent from a [`Workspace`]: what an
/// explanation is built from.
#[derive(Debug)]
pub struct InternedDecision<'w> {
    /// Eligible pools, best first.
    pub eligible: &'w [Ranked],
    /// Rejected pools, in pool order.
    pub rejected: &'w [InternedPoolRejection],
    /// How many pools were considered.
    pub total: usize,
}

/// The buffers [`route_interned`] fills, kept by the caller from one explanation to the
/// next (they grow to the largest registry explained). Allocated afresh, at 10,000 pools,
/// they are about a megabyte a call that the allocator hands back to the system and faults
/// in again each time: the explain floor at 10,000 pools (docs/performance.md).
#[derive(Debug, Default)]
pub struct Workspace {
    candidates: Vec<Candidate>,
    ranking: RankScratch,
    eligible: Vec<Ranked>,
    rejected: Vec<InternedPoolRejection>,
}

/// [`route`] in detail mode with the texts interned into `interner`: the same filters and
/// ranking, without two string allocations per rejection reason, into `work`. The compact
/// profiles (as `route_order_into` reads them) decide which pools meet every requirement
/// and the region tiers; only the pools they turn away are checked against their full
/// declarations, for the reasons. The interner's reasons and phrases are the last
/// request's only; its details table is kept (see [`Interner::clear_request`]).
pub fn route_interned<'w>(
    registry: &Registry,
    req: &Request,
    opts: &RouteOptions<'_>,
    interner: &mut Interner,
    work: &'w mut Workspace,
) -> InternedDecision<'w> {
    let opts = RouteOptions { detail: true, ..opts.clone() };
    let pools = &registry.pools;
    let q = RequestProfile::new(req, &registry.regions, |id| registry.position(id), opts.detached);
    let Workspace { candidates, ranking, eligible, rejected } = work;
    candidates.clear();
    rejected.clear();
    interner.clear_request();
    for (i, (p, profile)) in pools.iter().zip(&registry.profiles).enumerate() {
        let regions = &p.capabilities.regions;
        let met = !q.needs_full_check
            && if q.simple { admits_simple(profile, &q) } else { admits(i, profile, &q, req, regions) };
        let start = interner.reasons.len();
        let failed = judge(p, i, req, &opts, met, &mut Sink::interned(interner), candidates);
        if failed {
            rejected.push(InternedPoolRejection { index: i, start, end: interner.reasons.len() });
        }
    }
    rank_into(
        candidates,
        |i| pools[i].id.as_str(),
        |i| tier(&registry.profiles[i], &q, req, &pools[i].capabilities.regions) as usize,
        req,
        opts.provider_order,
        opts.limit,
        ranking,
        eligible,
    );
    InternedDecision { eligible, rejected, total: pools.len() }
}

/// Signals, availability, latency budget and capacity order, for a pool that met every
/// requirement. Pushes it to `candidates` when it passes.
fn operational(
    p: &Pool,
    i: usize,
    req: &Request,
    opts: &RouteOptions<'_>,
    sink: &mut Sink<'_>,
    candidates: &mut Vec<Candidate>,
) {
    if let Some(declared) = operational_signals(p, i, req, opts, sink) {
        let (signals, observed) = match opts.observed {
            Some(_) => {
                let (s, side) = blended(declared, observed_of(opts, i), req.latency_objective);
                (s, side.or(Some(SideBySide::declared(&declared, req.latency_objective))))
            }
            None => (declared, None),
        };
        candidates.push(Candidate { index: i, signals, observed });
    }
}

/// The order [`route`] would give, best first and at most `limit` long, as pool indices,
/// computed over the compact profiles into reused buffers (the provision hot path).
pub fn route_order(registry: &Registry, req: &Request, opts: &RouteOptions<'_>, scratch: &mut Vec<Slim>) -> Vec<usize> {
    let mut out = Vec::new();
    route_order_into(registry, req, opts, scratch, &mut out);
    out
}

/// [`route_order`] writing into `out` (cleared first).
pub fn route_order_into(
    registry: &Registry,
    req: &Request,
    opts: &RouteOptions<'_>,
    scratch: &mut Vec<Slim>,
    out: &mut Vec<usize>,
) {
    scratch.clear();
    let pools = &registry.pools;
    let q = RequestProfile::new(req, &registry.regions, |id| registry.position(id), opts.detached);
    let plain = opts.signals.is_none()
        && opts.credentials_unavailable.is_empty()
        && opts.provider_order.is_none()
        && opts.circuit.is_empty()
        && opts.over_budget.is_empty()
        && opts.paced.is_empty();
    for (i, p) in registry.profiles.iter().enumerate() {
        let regions = &pools[i].capabilities.regions;
        let admitted = if q.simple { admits_simple(p, &q) } else { admits(i, p, &q, req, regions) };
        if !admitted {
            continue;
        }
        let s = if plain && !q.needs_full_check {
            // Every requirement was decided above; only the operational filters remain.
            let Some(s) = p.signals else { continue };
            if !s.available {
                continue;
            }
            if let Some(budget) = req.max_ready_latency_ms {
                if latency_of(&s, req.latency_objective) > budget {
                    continue;
                }
            }
            s
        } else {
            if opts.credentials_unavailable.contains(&i) {
                continue;
            }
            let pool = &pools[i];
            let mut sink = Sink::verdict();
            if q.needs_full_check {
                check(&pool.id, &pool.capabilities, req, ctx(pool, opts), &mut sink);
                if sink.failed() {
                    continue;
                }
            }
            let Some(s) = operational_signals(pool, i, req, opts, &mut sink) else { continue };
            s
        };
        let s = if opts.observed.is_some() { blended(s, observed_of(opts, i), req.latency_objective).0 } else { s };
        let tier = match opts.provider_order {
            Some(order) => order.iter().position(|o| *o == pools[i].id).unwrap_or(usize::MAX) as u32,
            None => tier(p, &q, req, regions),
        };
        scratch.push(Slim {
            index: i as u32,
            tier,
            cost: s.estimated_cost,
            latency: latency_of(&s, req.latency_objective),
            reliability: s.completion_within_budget_rate,
        });
    }
    let k = opts.limit.unwrap_or(scratch.len());
    top_k(scratch, |i| pools[i as usize].id.as_str(), req.strategy, k, out);
}

/// Signals of a pool that met every requirement, if they are valid, it is available, it
/// meets the latency budget and (under capacity routing) it is listed.
fn operational_signals(
    p: &Pool,
    i: usize,
    req: &Request,
    opts: &RouteOptions<'_>,
    sink: &mut Sink<'_>,
) -> Option<Signals> {
    let state = opts.signals.and_then(|m| m.get(&i)).unwrap_or(&p.signals);
    let signals = match state {
        Ok(s) => *s,
        Err(e) => {
            let phrase = if e.reason == Reason::InvalidSignals { "invalid signals" } else { "signal resolver failed" };
            sink.reject(
                e.reason,
                TextKey { phrase: 0, detail: None },
                |d| d.push_str(&e.detail),
                |p| p.push_str(phrase),
            );
            return None;
        }
    };
    if !signals.available {
        sink.reject(
            Reason::Unavailable,
            TextKey { phrase: 0, detail: Some(0) },
            |d| d.push_str("signals.available is false"),
            |p| p.push_str("unavailable"),
        );
        return None;
    }
    if let Some(budget) = req.max_ready_latency_ms {
        let latency = latency_of(&signals, req.latency_objective);
        if latency > budget {
            let objective = req.latency_objective.name();
            sink.reject(
                Reason::LatencyBudget,
                TextKey { phrase: 0, detail: Some(latency.to_bits()) },
                |d| {
                    let _ = write!(d, "{objective} latency {} ms > {} ms", Ms(latency), Ms(budget));
                },
                |p| {
                    let _ = write!(p, "{objective} latency over {} ms", Ms(budget));
                },
            );
            return None;
        }
    }
    if let Some((_, block)) = opts.circuit.iter().find(|(x, _)| *x == i) {
        let block = *block;
        sink.reject(
            Reason::CircuitOpen,
            TextKey { phrase: 0, detail: None },
            |d| match block {
                Block::Open { retry_at, cause } => {
                    let _ = write!(
                        d,
                        "circuit open ({}); retry at {}",
                        cause.code(),
                        crate::core::clock::iso8601_millis(retry_at)
                    );
                }
                Block::TrialInFlight => d.push_str("circuit half-open: a trial provision is in flight"),
            },
            |p| p.push_str("circuit open"),
        );
        return None;
    }
    if let Some(order) = opts.provider_order {
        if !order.contains(&p.id) {
            sink.reject(
                Reason::NotInProviderOrder,
                TextKey { phrase: 0, detail: Some(0) },
                |d| d.push_str("capacity routing lists only providerOrder"),
                |p| p.push_str("not in providerOrder"),
            );
            return None;
        }
    }
    if opts.over_budget.contains(&i) {
        sink.reject(
            Reason::BudgetExceeded,
            TextKey { phrase: 0, detail: Some(0) },
            |d| d.push_str("a budget rule has no room for its estimated cost now"),
            |p| p.push_str("over budget"),
        );
        return None;
    }
    if let Some((_, blocked)) = opts.paced.iter().find(|(x, _)| *x == i) {
        let (reason, until) = (blocked.reason, crate::core::clock::iso8601_millis(blocked.until));
        let cooling = reason == crate::core::pacing::COOLING_DOWN;
        sink.reject(
            if cooling { Reason::CoolingDown } else { Reason::RateLimited },
            TextKey { phrase: 0, detail: None },
            |d| {
                let _ = if cooling {
                    write!(d, "cooling down after Retry-After until {until}")
                } else {
                    write!(d, "no launch token until {until}")
                };
            },
            |p| p.push_str(if cooling { "cooling down" } else { "rate limited" }),
        );
        return None;
    }
    Some(signals)
}
