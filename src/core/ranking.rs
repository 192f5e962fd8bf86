//! Deterministic ranking of eligible pools.
//!
//! Why min-max normalization over the *current eligible set*? Cost, latency and
//! reliability have unrelated units; normalizing over the pools that can actually serve
//! this request makes each dimension span [0, 1] and keeps the 35/25/40 weights
//! meaningful. A dimension with no spread gives every pool the same value, so it favours
//! no one. Registration order never matters: ties fall to the provider id in byte order.
//!
//! Region preference (without `required`) is a tier, applied before the strategy: pools
//! declaring the first preferred region rank ahead of pools declaring only the second,
//! and so on; pools in no preferred region come last. A preference is the caller's
//! explicit statement of where the workload should run, so it outranks a cheaper pool
//! elsewhere; it never excludes a pool (that is what `required` does).

use crate::core::request::{Objective, Request, Strategy};
use crate::core::signals::Signals;
use std::cmp::Ordering;

/// Balanced-strategy weight of cost.
pub const COST_WEIGHT: f64 = 0.35;
/// Balanced-strategy weight of the latency objective.
pub const LATENCY_WEIGHT: f64 = 0.25;
/// Balanced-strategy weight of completion-within-budget reliability.
pub const RELIABILITY_WEIGHT: f64 = 0.40;

/// One ranking dimension of one pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dimension {
    /// The signal value.
    pub raw: f64,
    /// Min-max normalized over the eligible set, 1 = best.
    pub normalized: f64,
}

/// An eligible pool with its score breakdown (its id is looked up by `index`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranked {
    /// The candidate's `index` (the caller's index for the pool).
    pub index: usize,
    /// Region-preference tier (0 best); `usize::MAX` when capacity order applies.
    pub tier: usize,
    /// Position in `providerOrder` when capacity routing applies.
    pub order_position: Option<usize>,
    /// Score in [0, 1] under the strategy (balanced: weighted sum; others: that dimension).
    pub score: f64,
    /// Cost dimension (lower raw is better).
    pub cost: Dimension,
    /// Latency dimension under the objective (lower raw is better).
    pub latency: Dimension,
    /// Reliability dimension (higher raw is better).
    pub reliability: Dimension,
    /// True when the id decided this pool's place against an equal neighbour.
    pub tie_break: bool,
    /// Declared and observed values side by side, when observed signals are blended in.
    pub observed: Option<SideBySide>,
}

/// Declared and observed signals of a pool whose ranking blended them (router option
/// `health.observedSignals`): what explanations show beside the blended `raw`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SideBySide {
    /// The declared latency under the request's objective, ms.
    pub declared_latency: f64,
    /// The observed launch-to-handle latency (None: objective `cold`, or not enough samples
    /// or no success yet).
    pub observed_latency: Option<f64>,
    /// The declared completion-within-budget rate.
    pub declared_reliability: f64,
    /// The observed success rate (None: not enough samples).
    pub observed_reliability: Option<f64>,
}

impl SideBySide {
    /// A pool without observed signals yet (fewer samples than the minimum): declared only.
    pub fn declared(s: &Signals, objective: Objective) -> Self {
        SideBySide {
            declared_latency: latency_of(s, objective),
            observed_latency: None,
            declared_reliability: s.completion_within_budget_rate,
            observed_reliability: None,
        }
    }
}

/// A pool that passed every filter, with the inputs ranking needs (its id and regions are
/// looked up by `index`).
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    /// Caller's index for the pool.
    pub index: usize,
    /// Its (validated) signals: blended with observed ones when `observed` is set.
    pub signals: Signals,
    /// Declared and observed values, when observed signals are blended in.
    pub observed: Option<SideBySide>,
}

fn spread(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)))
}

fn lower_is_better(x: f64, (lo, hi): (f64, f64)) -> f64 {
    if hi > lo {
        ((hi - x) / (hi - lo)).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

fn higher_is_better(x: f64, (lo, hi): (f64, f64)) -> f64 {
    if hi > lo {
        ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

/// The latency signal a request's objective selects.
pub fn latency_of(s: &Signals, objective: Objective) -> f64 {
    match objective {
        Objective::Cold => s.cold_start_latency_ms,
        Objective::Ready => s.ready_latency_ms,
    }
}

fn region_tier(regions: &[String], preferred: &[String]) -> usize {
    if preferred.is_empty() {
        return 0;
    }
    preferred.iter().position(|p| regions.contains(p)).unwrap_or(preferred.len())
}

/// Primary ordering of two ranked pools (before the id tie-break).
fn primary(a: &Ranked, b: &Ranked, strategy: Strategy) -> Ordering {
    if let (Some(x), Some(y)) = (a.order_position, b.order_position) {
        return x.cmp(&y);
    }
    a.tier.cmp(&b.tier).then_with(|| match strategy {
        Strategy::Cost => a.cost.raw.total_cmp(&b.cost.raw),
        Strategy::Latency => a.latency.raw.total_cmp(&b.latency.raw),
        Strategy::Reliability => b.reliability.raw.total_cmp(&a.reliability.raw),
        Strategy::Balanced => b.score.total_cmp(&a.score),
    })
}

/// The order [`primary`] defines, as a pair of integers (compared lexicographically), with
/// `index` carried along:
/// the provider-order position when capacity routing set one, else the region tier and the
/// strategy's value (lower first; a value where higher is better is inverted). Floats map
/// to integers in `f64::total_cmp` order.
fn sort_key(r: &Ranked, strategy: Strategy, index: u32) -> (u64, u64, u32) {
    if let Some(p) = r.order_position {
        // Under capacity routing every candidate has a position (unlisted pools were removed),
        // and `primary` compares positions alone.
        return (0, p as u64, index);
    }
    let ordered = |x: f64| {
        let b = x.to_bits();
        if b >> 63 == 1 {
            !b
        } else {
            b | (1 << 63)
        }
    };
    let value = match strategy {
        Strategy::Cost => ordered(r.cost.raw),
        Strategy::Latency => ordered(r.latency.raw),
        Strategy::Reliability => !ordered(r.reliability.raw),
        Strategy::Balanced => !ordered(r.score),
    };
    ((r.tier as u64).saturating_add(1), value, index)
}

/// The buffers [`rank_into`] sorts in, for a caller that keeps them from call to call.
#[derive(Debug, Default)]
pub struct RankScratch {
    scored: Vec<Ranked>,
    keys: Vec<(u64, u64, u32)>,
}

/// Scores and orders candidates into `out` (cleared first), sorting in `scratch` (with both
/// kept, a caller allocates nothing once they have grown to its largest registry). `id`
/// gives a candidate's provider id (the tie-break, and its place in `provider_order`) and
/// `tier` its region tier, by its `index`. With `provider_order`, candidates are ordered by
/// their position in it (callers must already have removed unlisted pools). `limit` keeps
/// only the best `limit` pools (the provision path needs at most the attempt bound) at O(n).
#[allow(clippy::too_many_arguments, reason = "rank's inputs, then the buffers it reuses")]
pub fn rank_into<'a>(
    candidates: &[Candidate],
    id: impl Fn(usize) -> &'a str,
    tier: impl Fn(usize) -> usize,
    req: &Request,
    provider_order: Option<&[String]>,
    limit: Option<usize>,
    scratch: &mut RankScratch,
    out: &mut Vec<Ranked>,
) {
    let objective = req.latency_objective;
    let costs = spread(candidates.iter().map(|c| c.signals.estimated_cost));
    let lats = spread(candidates.iter().map(|c| latency_of(&c.signals, objective)));
    let rels = spread(candidates.iter().map(|c| c.signals.completion_within_budget_rate));
    let RankScratch { scored, keys } = scratch;
    scored.clear();
    scored.extend(candidates.iter().map(|c| {
        let s = &c.signals;
        let cost = Dimension { raw: s.estimated_cost, normalized: lower_is_better(s.estimated_cost, costs) };
        let lat_raw = latency_of(s, objective);
        let latency = Dimension { raw: lat_raw, normalized: lower_is_better(lat_raw, lats) };
        let rel_raw = s.completion_within_budget_rate;
        let reliability = Dimension { raw: rel_raw, normalized: higher_is_better(rel_raw, rels) };
        let score = match req.strategy {
            Strategy::Cost => cost.normalized,
            Strategy::Latency => latency.normalized,
            Strategy::Reliability => reliability.normalized,
            Strategy::Balanced => balanced(cost.normalized, latency.normalized, reliability.normalized),
        };
        Ranked {
            index: c.index,
            tier: if provider_order.is_some() { usize::MAX } else { tier(c.index) },
            order_position: provider_order.and_then(|o| {
                let id = id(c.index);
                o.iter().position(|p| p == id)
            }),
            score,
            cost,
            latency,
            reliability,
            tie_break: false,
            observed: c.observed,
        }
    }));
    let strategy = req.strategy;
    // Sorted as small (key, index) entries, then copied once into place: the key is the
    // order `primary` defines, as integers, and the id breaks ties. At 10,000 pools the
    // comparisons (`primary` re-reads fields of two ~140-byte values) and the moves of the
    // values themselves were most of the sort's cost (callgrind).
    keys.clear();
    keys.extend(scored.iter().enumerate().map(|(i, r)| sort_key(r, strategy, i as u32)));
    let scored: &[Ranked] = scored;
    let cmp = |a: &(u64, u64, u32), b: &(u64, u64, u32)| {
        (a.0, a.1)
            .cmp(&(b.0, b.1))
            .then_with(|| id(scored[a.2 as usize].index).as_bytes().cmp(id(scored[b.2 as usize].index).as_bytes()))
    };
    if let Some(k) = limit {
        if k == 0 {
            keys.clear();
        } else if k < keys.len() {
            keys.select_nth_unstable_by(k - 1, cmp);
            keys.truncate(k);
        }
    }
    keys.sort_unstable_by(cmp);
    out.clear();
    out.extend(keys.iter().map(|k| scored[k.2 as usize]));
    for i in 0..out.len() {
        let tied_prev = i > 0 && primary(&out[i - 1], &out[i], strategy) == Ordering::Equal;
        let tied_next = i + 1 < out.len() && primary(&out[i], &out[i + 1], strategy) == Ordering::Equal;
        out[i].tie_break = tied_prev || tied_next;
    }
}

/// The balanced score from normalized dimensions.
fn balanced(cost: f64, latency: f64, reliability: f64) -> f64 {
    (COST_WEIGHT * cost + LATENCY_WEIGHT * latency + RELIABILITY_WEIGHT * reliability).clamp(0.0, 1.0)
}

/// A compact eligible pool for the hot path: 32 bytes, no borrowed strings, so a
/// decision over 10,000 pools fills one reused buffer instead of allocating per pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slim {
    /// Pool index.
    pub index: u32,
    /// Region tier, or position in `providerOrder` under capacity routing.
    pub tier: u32,
    /// `estimatedCost`.
    pub cost: f64,
    /// Latency under the objective.
    pub latency: f64,
    /// `completionWithinBudgetRate`.
    pub reliability: f64,
}

/// Region tier of a pool for a request (0 best; `preferred.len()` when in none).
pub fn tier_of(regions: &[String], preferred: &[String]) -> u32 {
    region_tier(regions, preferred) as u32
}

/// The best `k` pool indices in the same order [`rank_into`] produces, without building the
/// breakdowns: one pass for the spreads, one pass keeping a small sorted buffer. Writes
/// into `out` (cleared first) so a caller can reuse it.
pub fn top_k<'a>(slims: &[Slim], id: impl Fn(u32) -> &'a str, strategy: Strategy, k: usize, out: &mut Vec<usize>) {
    out.clear();
    if k == 0 || slims.is_empty() {
        return;
    }
    // The three spreads in one pass (the same min and max as three `spread` folds).
    let balanced_spreads = (strategy == Strategy::Balanced).then(|| {
        let mut s = [(f64::INFINITY, f64::NEG_INFINITY); 3];
        for c in slims {
            for (d, x) in [c.cost, c.latency, c.reliability].into_iter().enumerate() {
                s[d] = (s[d].0.min(x), s[d].1.max(x));
            }
        }
        (s[0], s[1], s[2])
    });
    // Lower primary is better.
    let primary = |c: &Slim| -> f64 {
        match (strategy, balanced_spreads) {
            (Strategy::Cost, _) => c.cost,
            (Strategy::Latency, _) => c.latency,
            (Strategy::Reliability, _) => -c.reliability,
            (Strategy::Balanced, Some((costs, lats, rels))) => -balanced(
                lower_is_better(c.cost, costs),
                lower_is_better(c.latency, lats),
                higher_is_better(c.reliability, rels),
            ),
            (Strategy::Balanced, None) => 0.0,
        }
    };
    let better = |a: &(u32, f64, u32), b: &(u32, f64, u32)| -> bool {
        match a.0.cmp(&b.0).then_with(|| a.1.total_cmp(&b.1)) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => id(a.2).as_bytes() < id(b.2).as_bytes(),
        }
    };
    // k is at most the attempt bound (10) on the provision path, or every candidate (capacity
    // and budget skips consume no attempt) of a registry that is usually small: up to CAP
    // a fixed buffer on the stack, insertion-sorted; more sorts.
    const CAP: usize = 16;
    let k = k.min(slims.len());
    if k > CAP {
        let mut all: Vec<(u32, f64, u32)> = slims.iter().map(|c| (c.tier, primary(c), c.index)).collect();
        all.sort_unstable_by(|a, b| match (better(a, b), better(b, a)) {
            (true, _) => Ordering::Less,
            (_, true) => Ordering::Greater,
            _ => Ordering::Equal,
        });
        out.extend(all.into_iter().take(k).map(|(_, _, i)| i as usize));
        return;
    }
    let mut best = [(0u32, 0f64, 0u32); CAP];
    let mut len = 0usize;
    for c in slims {
        let key = (c.tier, primary(c), c.index);
        if len == k && !better(&key, &best[k - 1]) {
            continue;
        }
        let mut at = len.min(k - 1);
        if len < k {
            len += 1;
        }
        while at > 0 && better(&key, &best[at - 1]) {
            best[at] = best[at - 1];
            at -= 1;
        }
        best[at] = key;
    }
    out.extend(best[..len].iter().map(|(_, _, i)| *i as usize));
}

#[cfg(test)]
mod tests {
    use super::{primary, sort_key, Dimension, Ranked, Strategy as Routing};
    use proptest::prelude::*;

    fn ranked(tier: usize, position: Option<usize>, cost: f64, latency: f64, reliability: f64, score: f64) -> Ranked {
        let d = |raw| Dimension { raw, normalized: 0.0 };
        Ranked {
            index: 0,
            tier,
            order_position: position,
            score,
            cost: d(cost),
            latency: d(latency),
            reliability: d(reliability),
            tie_break: false,
            observed: None,
        }
    }

    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            prop::sample::select(vec![0.0, -0.0, 1.0, 0.5, 1e-300, 1e300, -1.0, f64::INFINITY, f64::NEG_INFINITY]),
            -1e6f64..1e6,
        ]
    }

    proptest! {
        /// The integer sort key orders every pair as `primary` does (ties included).
        #[test]
        fn sort_key_orders_as_primary(
            a in (0usize..4, value(), value(), value(), value()),
            b in (0usize..4, value(), value(), value(), value()),
            positions in prop::option::of((0usize..5, 0usize..5)),
            strategy in prop::sample::select(vec![Routing::Cost, Routing::Latency, Routing::Reliability, Routing::Balanced]),
        ) {
            let (pa, pb) = positions.map_or((None, None), |(x, y)| (Some(x), Some(y)));
            let ra = ranked(a.0, pa, a.1, a.2, a.3, a.4);
            let rb = ranked(b.0, pb, b.1, b.2, b.3, b.4);
            let (ka, kb) = (sort_key(&ra, strategy, 0), sort_key(&rb, strategy, 1));
            prop_assert_eq!((ka.0, ka.1).cmp(&(kb.0, kb.1)), primary(&ra, &rb, strategy));
        }
    }
}
