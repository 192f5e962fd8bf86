//! napi glue for explanations: the decision in typed arrays, the objects built in JS.
//!
//! Why not JSON (as before) or one napi object per pool? At 1,000 pools the JSON round
//! trip (serde `Value`, `to_string`, `JSON.parse`, then a copy without the internal index)
//! took 10-15 ms, and at 10,000 pools it left ~80 MiB of RSS behind. Here the caller lends
//! two reusable typed arrays; the core writes the ranks, scores, breakdowns and reason codes
//! into them (`core::explain::write_compact`), and only the summary, the request's
//! routing fields and the distinct rejection details cross as strings. `lib/explain.js`
//! builds the documented objects from them, naming pools by the ids JS already holds.

use crate::binding::{guard, registry_by_key, request_by_key, RouteExtras};
use crate::core::explain::{summary, weights, write_compact};
use crate::core::reasons::Reason;
use crate::core::request::{Objective, Strategy};
use napi::bindgen_prelude::{Float64ArraySlice, Uint32ArraySlice};
use napi::Result;
use napi_derive::napi;

/// Ranking strategy, by its wire name.
#[napi(string_enum)]
pub enum ExplainStrategy {
    /// Lowest `estimatedCost`.
    #[napi(value = "cost")]
    Cost,
    /// Lowest latency under the objective.
    #[napi(value = "latency")]
    Latency,
    /// Highest `completionWithinBudgetRate`.
    #[napi(value = "reliability")]
    Reliability,
    /// Weighted min-max normalized dimensions.
    #[napi(value = "balanced")]
    Balanced,
}

/// Latency objective, by its wire name.
#[napi(string_enum)]
pub enum ExplainObjective {
    /// `coldStartLatencyMs`.
    #[napi(value = "cold")]
    Cold,
    /// `readyLatencyMs`.
    #[napi(value = "ready")]
    Ready,
}

/// Whether a failed launch may fall back to the next pool.
#[napi(string_enum)]
pub enum ExplainFallback {
    /// Fallback is allowed (the default).
    #[napi(value = "allowed")]
    Allowed,
    /// Exactly one launch.
    #[napi(value = "forbidden")]
    Forbidden,
}

/// The non-numeric part of an explanation; the numbers are in the caller's buffers
/// (layout: `core::explain::layout`).
#[napi(object)]
pub struct ExplainHeader {
    /// False when a buffer was too small: nothing was written; grow the buffers to
    /// `intsNeeded` / `floatsNeeded` and call again.
    pub fits: bool,
    /// `ints` the decision needs.
    pub ints_needed: u32,
    /// `floats` the decision needs.
    pub floats_needed: u32,
    /// Eligible pools written.
    pub eligible: u32,
    /// Rejected pools written.
    pub rejected: u32,
    /// The one-line summary.
    pub summary: String,
    /// Distinct rejection details; a reason's detail is an index into this list.
    pub details: Vec<String>,
    /// The request's strategy.
    pub strategy: ExplainStrategy,
    /// The request's latency objective.
    pub latency_objective: ExplainObjective,
    /// The request's attempt bound.
    pub max_acquisition_attempts: u32,
    /// The request's fallback policy.
    pub acquisition_fallback: ExplainFallback,
    /// Weights of cost, latency and reliability under `balanced`; null otherwise.
    pub weights: Option<Vec<f64>>,
}

/// Every rejection code, in the order the `ints` buffer refers to them.
#[napi]
pub fn reason_codes() -> Vec<&'static str> {
    Reason::ALL.iter().map(|r| r.code()).collect()
}

/// Explains the decision for compiled request `request_key` over registry `registry_key`
/// (every pool: rank, score and breakdown, or every rejection reason), writing the
/// numbers into `ints` and `floats` (see [`ExplainHeader`]).
#[napi]
pub fn explain_decision(
    registry_key: u32,
    request_key: u32,
    detached: bool,
    extras: Option<RouteExtras>,
    mut ints: Uint32ArraySlice<'_>,
    mut floats: Float64ArraySlice<'_>,
) -> Result<ExplainHeader> {
    guard(|| {
        // SAFETY: JavaScript cannot run during this synchronous call, so nothing else
        // touches the buffers while we write; `lib/explain.js` lends two distinct
        // ArrayBuffers (a Uint32Array and a Float64Array of its own), so the two slices
        // never alias. Nothing keeps the slices beyond this call.
        let (ints, floats) = unsafe { (ints.as_mut(), floats.as_mut()) };
        let inner = registry_by_key(registry_key)?;
        let req = request_by_key(request_key)?;
        let inner = inner.borrow();
        let d = inner.decide(&req, detached, extras.as_ref(), None, true)?;
        let w = write_compact(&d, ints, floats);
        Ok(ExplainHeader {
            fits: w.fits,
            ints_needed: w.ints as u32,
            floats_needed: w.floats as u32,
            eligible: if w.fits { d.eligible.len() as u32 } else { 0 },
            rejected: if w.fits { d.rejected.len() as u32 } else { 0 },
            summary: if w.fits { summary(d.eligible.len(), d.total, &d.rejected) } else { String::new() },
            details: w.details,
            strategy: match req.strategy {
                Strategy::Cost => ExplainStrategy::Cost,
                Strategy::Latency => ExplainStrategy::Latency,
                Strategy::Reliability => ExplainStrategy::Reliability,
                Strategy::Balanced => ExplainStrategy::Balanced,
            },
            latency_objective: match req.latency_objective {
                Objective::Cold => ExplainObjective::Cold,
                Objective::Ready => ExplainObjective::Ready,
            },
            max_acquisition_attempts: req.max_attempts,
            acquisition_fallback: if req.fallback_allowed {
                ExplainFallback::Allowed
            } else {
                ExplainFallback::Forbidden
            },
            weights: weights(req.strategy).map(|w| w.to_vec()),
        })
    })
}
