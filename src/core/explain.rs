//! Explanations of routing decisions, for people and for code.
//!
//! Why a Kubernetes-style one-liner? "0/5 providers eligible: 3 missing capability pty,
//! 2 region not in [eu-west]" answers "why did nothing match?" at a glance, in a log line
//! or an error message; the structured part answers it for code. Both are built from the
//! same rejection constants, so they cannot disagree.

use crate::core::ranking::{Ranked, COST_WEIGHT, LATENCY_WEIGHT, RELIABILITY_WEIGHT};
use crate::core::registry::{Decision, Pool, PoolRejection};
use crate::core::request::{Request, Strategy};
use serde_json::{json, Value};
use std::collections::BTreeMap;

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

fn ranked_json(r: &Ranked, rank: usize, strategy: Strategy, objective: &str) -> Value {
    let weight = |w: f64| if strategy == Strategy::Balanced { json!(w) } else { Value::Null };
    json!({
        "rank": rank,
        "score": r.score,
        "regionTier": if r.tier == usize::MAX { Value::Null } else { json!(r.tier) },
        "providerOrderPosition": r.order_position,
        "breakdown": {
            "cost": {"raw": r.cost.raw, "normalized": r.cost.normalized, "weight": weight(COST_WEIGHT)},
            "latency": {"objective": objective, "raw": r.latency.raw, "normalized": r.latency.normalized, "weight": weight(LATENCY_WEIGHT)},
            "reliability": {"raw": r.reliability.raw, "normalized": r.reliability.normalized, "weight": weight(RELIABILITY_WEIGHT)},
        },
        "tieBreak": if r.tie_break { json!("providerId") } else { Value::Null },
    })
}

/// Structured explanation: summary, the strategy used, every eligible pool with its rank
/// and breakdown, every rejected pool with its reason codes and details. Pools are named
/// by id; `index` is their registration index (callers map it back to definitions).
pub fn explain(pools: &[Pool], req: &Request, d: &Decision) -> Value {
    let objective = req.latency_objective.name();
    let eligible: Vec<Value> = d
        .eligible
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut v = ranked_json(r, i + 1, req.strategy, objective);
            v["providerId"] = json!(pools[r.index].id);
            v["index"] = json!(r.index);
            v
        })
        .collect();
    let rejected: Vec<Value> = d
        .rejected
        .iter()
        .map(|r| {
            json!({
                "providerId": pools[r.index].id,
                "index": r.index,
                "reasons": r.reasons.iter().map(|x| json!({"code": x.reason.code(), "detail": x.detail})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "summary": summary(d.eligible.len(), d.total, &d.rejected),
        "strategy": req.strategy.name(),
        "latencyObjective": objective,
        "maxAcquisitionAttempts": req.max_attempts,
        "acquisitionFallback": if req.fallback_allowed { "allowed" } else { "forbidden" },
        "eligible": eligible,
        "rejected": rejected,
    })
}
