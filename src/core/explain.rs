//! Explanations of routing decisions, for people and for code.
//!
//! Why a Kubernetes-style one-liner? "0/5 providers eligible: 3 missing capability pty,
//! 2 region not in [eu-west]" answers "why did nothing match?" at a glance, in a log line
//! or an error message; the structured part answers it for code. Both are built from the
//! same rejection constants, so they cannot disagree.

use crate::core::ranking::{COST_WEIGHT, LATENCY_WEIGHT, RELIABILITY_WEIGHT};
use crate::core::registry::{InternedDecision, PoolRejection};
use crate::core::request::Strategy;
use crate::core::requirements::Interner;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The one-line summary: eligible/total, then reason phrases counted per pool, most
/// frequent first (ties by phrase). A pool with two reasons counts once for each.
pub fn summary(eligible: usize, total: usize, rejected: &[PoolRejection]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rejected {
        let mut seen: Vec<&str> = Vec::new();
        for reason in &r.reasons {
            if !seen.contains(&reason.phrase.as_str()) {
                seen.push(&reason.phrase);
                *counts.entry(&reason.phrase).or_default() += 1;
            }
        }
    }
    let mut parts: Vec<(&str, usize)> = counts.into_iter().collect();
    parts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let head = format!("{eligible}/{total} providers eligible");
    if parts.is_empty() {
        return head;
    }
    let tail: Vec<String> = parts.iter().map(|(p, n)| format!("{n} {p}")).collect();
    format!("{head}: {}", tail.join(", "))
}

/// Where an explanation's numbers go when it crosses to JavaScript: two flat buffers
/// the caller owns and reuses, instead of one object (or one JSON text) per pool.
///
/// Why flat buffers? Building a JS object per pool through napi costs a call per
/// property, and building a JSON text costs a serialization here and a parse there; at
/// 10,000 pools either is milliseconds and tens of MiB of short-lived garbage. Numbers in
/// a typed array cost nothing to hand over, and JavaScript builds its objects from them at
/// its own speed (`lib/explain.js`).
///
/// Layout (every count is in [`Written`]):
/// - `ints`, for each eligible pool, best first: pool index, region tier ([`NONE`] when
///   capacity order applies), position in `providerOrder` ([`NONE`] when not), tie-break
///   (0 or 1); then, for each rejected pool in registration order: pool index, number of
///   reasons, and per reason its [`Reason`] index (`Reason::ALL` order) and the index of
///   its detail in [`Written::details`].
/// - `floats`, for each eligible pool, best first: score, cost raw, cost normalized,
///   latency raw, latency normalized, reliability raw, reliability normalized, then the
///   declared and observed latency and the declared and observed reliability (NaN when
///   observed signals are not blended in; an observed value is NaN until the pool has
///   enough samples).
pub mod layout {
    /// `ints` per eligible pool.
    pub const ELIGIBLE_INTS: usize = 4;
    /// `floats` per eligible pool.
    pub const ELIGIBLE_FLOATS: usize = 11;
    /// An absent value (`null` in the explanation).
    pub const NONE: u32 = u32::MAX;
}

pub use layout::NONE;

/// What [`write_compact`] wrote, or (when a buffer was too small) what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// `ints` the decision needs (written when the buffer holds them).
    pub ints: usize,
    /// `floats` the decision needs (written when the buffer holds them).
    pub floats: usize,
    /// Whether the buffers were large enough (nothing is written otherwise).
    pub fits: bool,
}

/// How many `ints` and `floats` a decision needs in the compact layout.
pub fn compact_size(d: &InternedDecision) -> (usize, usize) {
    let rejected: usize = d.rejected.iter().map(|r| 2 + 2 * (r.end - r.start)).sum();
    (d.eligible.len() * layout::ELIGIBLE_INTS + rejected, d.eligible.len() * layout::ELIGIBLE_FLOATS)
}

/// Writes `d` into `ints` and `floats` in the compact layout (see [`layout`]); writes
/// nothing and reports the sizes it needs when either buffer is too small. Details are
/// indices into `texts.details`.
pub fn write_compact(d: &InternedDecision, texts: &Interner, ints: &mut [u32], floats: &mut [f64]) -> Written {
    let (ni, nf) = compact_size(d);
    if ints.len() < ni || floats.len() < nf {
        return Written { ints: ni, floats: nf, fits: false };
    }
    let mut i = 0;
    for (k, r) in d.eligible.iter().enumerate() {
        ints[i] = r.index as u32;
        ints[i + 1] = if r.tier == usize::MAX { NONE } else { r.tier as u32 };
        ints[i + 2] = r.order_position.map_or(NONE, |p| p as u32);
        ints[i + 3] = u32::from(r.tie_break);
        i += layout::ELIGIBLE_INTS;
        let f = &mut floats[k * layout::ELIGIBLE_FLOATS..(k + 1) * layout::ELIGIBLE_FLOATS];
        f.copy_from_slice(&[
            r.score,
            r.cost.raw,
            r.cost.normalized,
            r.latency.raw,
            r.latency.normalized,
            r.reliability.raw,
            r.reliability.normalized,
            r.observed.map_or(f64::NAN, |o| o.declared_latency),
            r.observed.and_then(|o| o.observed_latency).unwrap_or(f64::NAN),
            r.observed.map_or(f64::NAN, |o| o.declared_reliability),
            r.observed.and_then(|o| o.observed_reliability).unwrap_or(f64::NAN),
        ]);
    }
    for r in d.rejected {
        ints[i] = r.index as u32;
        ints[i + 1] = (r.end - r.start) as u32;
        i += 2;
        for x in &texts.reasons[r.start..r.end] {
            ints[i] = x.reason.index();
            ints[i + 1] = x.detail;
            i += 2;
        }
    }
    Written { ints: ni, floats: nf, fits: true }
}

/// [`summary`] of an interned decision (phrases counted by index, once per pool).
pub fn interned_summary(d: &InternedDecision, texts: &Interner) -> String {
    let phrases = texts.phrases.as_slice();
    let mut counts = vec![0usize; phrases.len()];
    for r in d.rejected {
        let reasons = &texts.reasons[r.start..r.end];
        for (k, x) in reasons.iter().enumerate() {
            if !reasons[..k].iter().any(|y| y.phrase == x.phrase) {
                counts[x.phrase as usize] += 1;
            }
        }
    }
    let mut parts: Vec<(&str, usize)> =
        counts.iter().enumerate().filter(|(_, n)| **n > 0).map(|(p, n)| (phrases[p].as_str(), *n)).collect();
    parts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut out = format!("{}/{} providers eligible", d.eligible.len(), d.total);
    for (k, (p, n)) in parts.iter().enumerate() {
        out.push_str(if k == 0 { ": " } else { ", " });
        let _ = write!(out, "{n} {p}");
    }
    out
}

/// The weight a strategy gives a dimension in an explanation (`None` = `null`: only
/// `balanced` weighs dimensions).
pub fn weights(strategy: Strategy) -> Option<[f64; 3]> {
    (strategy == Strategy::Balanced).then_some([COST_WEIGHT, LATENCY_WEIGHT, RELIABILITY_WEIGHT])
}
