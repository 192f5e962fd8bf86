//! napi glue for explanations: the decision in typed arrays, the objects built in JS.
//!
//! Why not JSON (as before) or one napi object per pool? At 1,000 pools the JSON round
//! trip (serde `Value`, `to_string`, `JSON.parse`, then a copy without the internal index)
//! took 10-15 ms, and at 10,000 pools it left ~80 MiB of RSS behind. Here the caller lends
//! two reusable typed arrays; the core writes the request's routing fields (as indices into
//! names JS reads once, `explain_vocabulary`), the ranks, scores, breakdowns and reason
//! codes into them (`core::explain::write_compact`). Texts (details, summaries) are indices
//! into a bounded table that JS mirrors, so each distinct text crosses once. `lib/explain.js`
//! builds the documented objects from them, naming pools by the ids JS already holds.

use crate::binding::clock::now_of;
use crate::binding::error::{guard, internal};
use crate::binding::registry::{Registry, RouteExtras};
use crate::binding::request::CompiledRequest;
use crate::binding::router::RouterState;
use crate::core::explain::{interned_summary, weights, write_compact};
use crate::core::reasons::Reason;
use crate::core::registry::{InternedDecision, Workspace};
use crate::core::request::{Objective, Request, Strategy};
use crate::core::requirements::Interner;
use crate::core::router::pools::{Extras, HealthView, Pools, Question};
use napi::bindgen_prelude::{Array, External, Float64ArraySlice, Uint32ArraySlice};
use napi::Env;
use napi::Result;
use napi_derive::napi;
use std::cell::RefCell;

/// Positions of the header at the start of `ints` (the decision follows at
/// [`HEADER_INTS`]); the start of `floats` holds the three balanced weights (NaN when the
/// strategy weighs nothing), the decision follows at [`HEADER_FLOATS`].
///
/// Texts (details and the summary) are indices into a table the caller mirrors: JS writes
/// its table's generation and length into `GENERATION` and `TEXTS` before the call; the
/// call returns only the texts from `TEXTS` (as written back) on, and a new generation
/// (JS drops its table) when the table was reset. A repeated explanation moves no string.
mod header {
    pub const FITS: usize = 0;
    pub const INTS_NEEDED: usize = 1;
    pub const FLOATS_NEEDED: usize = 2;
    pub const ELIGIBLE: usize = 3;
    pub const REJECTED: usize = 4;
    pub const STRATEGY: usize = 5;
    pub const OBJECTIVE: usize = 6;
    pub const MAX_ATTEMPTS: usize = 7;
    pub const FALLBACK_ALLOWED: usize = 8;
    pub const GENERATION: usize = 9;
    pub const TEXTS: usize = 10;
    pub const SUMMARY: usize = 11;
}

/// `ints` taken by the header.
pub const HEADER_INTS: usize = 12;
/// `floats` taken by the header.
pub const HEADER_FLOATS: usize = 3;
/// The text table starts over past this many texts…
const MAX_TEXTS: usize = 4096;
/// …or this many bytes (it holds details and summaries, which callers' declarations shape).
const MAX_TEXT_BYTES: usize = 1 << 20;

/// Names the explanation buffers refer to by index, read once by `lib/explain.js`.
#[napi(object)]
pub struct ExplainVocabulary {
    /// Rejection codes, by `Reason` index.
    pub codes: Vec<String>,
    /// Strategy names, by the header's strategy index.
    pub strategies: Vec<String>,
    /// Latency objective names, by the header's objective index.
    pub objectives: Vec<String>,
    /// How many `ints` the header takes: fits, intsNeeded, floatsNeeded, eligible,
    /// rejected, strategy, objective, maxAcquisitionAttempts, fallbackAllowed, text-table
    /// generation, first new text, summary text.
    pub header_ints: u32,
    /// How many `floats` the header takes (the balanced weights).
    pub header_floats: u32,
    /// Where each header field is in `ints`.
    pub header: ExplainHeader,
}

/// The positions of the header's fields in `ints` (see `header`).
#[napi(object)]
pub struct ExplainHeader {
    /// 1 when the decision fitted the buffers.
    pub fits: u32,
    /// The `ints` the decision needs, header included.
    pub ints_needed: u32,
    /// The `floats` it needs, header included.
    pub floats_needed: u32,
    /// Eligible pools.
    pub eligible: u32,
    /// Rejected pools.
    pub rejected: u32,
    /// The request's strategy (an index into `strategies`).
    pub strategy: u32,
    /// Its latency objective (an index into `objectives`).
    pub objective: u32,
    /// `maxAcquisitionAttempts`.
    pub max_attempts: u32,
    /// `acquisitionFallback` allowed.
    pub fallback_allowed: u32,
    /// The text table's generation (JS writes its own; the call writes the current one).
    pub generation: u32,
    /// The first text JS lacks (JS writes its table's length; the call writes where it sent from).
    pub texts: u32,
    /// The summary's text index.
    pub summary: u32,
}

const STRATEGIES: [Strategy; 4] = [Strategy::Cost, Strategy::Latency, Strategy::Reliability, Strategy::Balanced];
const OBJECTIVES: [Objective; 2] = [Objective::Cold, Objective::Ready];

/// The names behind the indices in the explanation buffers.
#[napi]
pub fn explain_vocabulary() -> ExplainVocabulary {
    ExplainVocabulary {
        codes: Reason::ALL.iter().map(|r| r.code().to_string()).collect(),
        strategies: STRATEGIES.iter().map(|s| s.name().to_string()).collect(),
        objectives: OBJECTIVES.iter().map(|o| o.name().to_string()).collect(),
        header_ints: HEADER_INTS as u32,
        header_floats: HEADER_FLOATS as u32,
        header: ExplainHeader {
            fits: header::FITS as u32,
            ints_needed: header::INTS_NEEDED as u32,
            floats_needed: header::FLOATS_NEEDED as u32,
            eligible: header::ELIGIBLE as u32,
            rejected: header::REJECTED as u32,
            strategy: header::STRATEGY as u32,
            objective: header::OBJECTIVE as u32,
            max_attempts: header::MAX_ATTEMPTS as u32,
            fallback_allowed: header::FALLBACK_ALLOWED as u32,
            generation: header::GENERATION as u32,
            texts: header::TEXTS as u32,
            summary: header::SUMMARY as u32,
        },
    }
}

/// The interner explanations reuse, with the generation of its details table, and the
/// decision's buffers (`ExternalObject<Explainer>`; `lib/explain.js` holds one:
/// explanations run on the JS thread, one at a time).
pub struct Explainer {
    scratch: RefCell<(Interner, u32, Workspace)>,
}

/// A fresh explainer.
#[napi]
pub fn create_explainer() -> External<Explainer> {
    External::new(Explainer { scratch: RefCell::new((Interner::default(), 0, Workspace::default())) })
}

/// Explains the decision for compiled request `request` over registry `registry` (every pool: rank, score and breakdown, or every rejection reason), with router
/// `router`'s health and capacity order when given (`routeProviders` has no router). Writes the header and the numbers into `ints`
/// and `floats` (layout: `core::explain::layout`, after the header) and returns the texts
/// the caller's table lacks, if any (see `header`). When a buffer is too small, writes only
/// the header (`fits` 0 and the sizes needed, header included). `labelsJson` (the
/// request's labels) and `budgetNow` (the router's clock, ms; omitted: the wall clock): with
/// a router that has budgets, pools a rule has no room for are rejected `BUDGET_EXCEEDED`;
/// pools pacing holds back now, `RATE_LIMITED` or `COOLING_DOWN` (with until when).
// The numbers cross in lent typed arrays: the explain floor (≥ 3x plain JS at 1,000 and 10,000 pools) needs them.
#[napi(ts_return_type = "string[] | undefined")]
#[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments")]
pub fn explain_decision<'env>(
    env: &'env Env,
    explainer: &External<Explainer>,
    registry: &External<Registry>,
    request: &External<CompiledRequest>,
    detached: bool,
    extras: Option<RouteExtras>,
    mut ints: Uint32ArraySlice<'_>,
    mut floats: Float64ArraySlice<'_>,
    router: Option<&External<RouterState>>,
    now: Option<f64>,
    labels_json: Option<String>,
    budget_now: Option<f64>,
) -> Result<Option<Array<'env>>> {
    guard(env, || {
        // SAFETY: no JavaScript runs during this synchronous call, the two arrays have distinct buffers, nothing keeps the slices.
        let (ints, floats) = unsafe { (ints.as_mut(), floats.as_mut()) };
        if ints.len() < HEADER_INTS || floats.len() < HEADER_FLOATS {
            return Err(internal("(the explanation buffers are too small)"));
        }
        let (their_generation, their_texts) = (ints[header::GENERATION], ints[header::TEXTS] as usize);
        let extras = extras.as_ref().map(Extras::from);
        let req: &Request = &request.req;
        let mut router = router.map(|r| r.router.borrow_mut());
        let mut inner = registry.pools.borrow_mut();
        // `router.explain` with budgets: the pools a rule has no room for now
        // (`BUDGET_EXCEEDED`), at the router's clock (`labelsJson`: the request's labels).
        let over_budget = match (router.as_deref_mut(), labels_json.as_deref()) {
            (Some(r), Some(text)) => match &mut r.budgets {
                Some(b) => {
                    let labels = crate::binding::request::labels_from(text, &r.label_limits)?;
                    b.over_budget(&labels, &inner.costs(extras.as_ref()), now_of(None, budget_now).router)
                }
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        // Pools pacing holds back now (no launch token, or cooling down), at the router's clock.
        let paced = match router.as_deref() {
            Some(r) => r.paced_now(&inner, now_of(None, budget_now).router),
            None => Vec::new(),
        };
        {
            let scratch = &mut *explainer.scratch.borrow_mut();
            let (texts, generation, work) = (&mut scratch.0, &mut scratch.1, &mut scratch.2);
            if texts.details.len() > MAX_TEXTS || texts.details.bytes() > MAX_TEXT_BYTES {
                texts.clear();
                *generation = generation.wrapping_add(1);
            }
            let from =
                if their_generation == *generation && their_texts <= texts.details.len() { their_texts } else { 0 };
            // The decision borrows the registry's pools: it is written out before they are
            // released.
            let provider_order = router.as_deref().and_then(|r| r.provider_order()).map(<[String]>::to_vec);
            let mut decide = |inner: &mut Pools, health: Option<&HealthView<'_>>| {
                let provider_order = provider_order.as_deref();
                let q = Question {
                    req,
                    detached,
                    extras: extras.as_ref(),
                    provider_order,
                    health,
                    over_budget: &over_budget,
                    paced: &paced,
                };
                let d = inner.decide_interned(&q, texts, work);
                let fits = answer(&d, texts, req, ints, floats);
                fits.then(|| interned_summary(&d, texts))
            };
            let summary = match router.as_deref_mut() {
                Some(r) => r.view(&mut inner, now_of(now, None).health, decide),
                None => decide(&mut inner, None),
            };
            if let Some(summary) = summary {
                ints[header::SUMMARY] = texts.details.intern(&summary);
            }
            ints[header::GENERATION] = *generation;
            ints[header::TEXTS] = from as u32;
            // Straight from the table into JS strings: no Rust copy of any text; nothing at
            // all when JS has every text already.
            let fresh = &texts.details.as_slice()[from..];
            if fresh.is_empty() {
                return Ok(None);
            }
            let mut out = env.create_array(fresh.len() as u32).map_err(|_| internal("(an array could not be made)"))?;
            for (i, t) in fresh.iter().enumerate() {
                out.set(i as u32, t.as_str()).map_err(|_| internal("(an array could not be filled)"))?;
            }
            Ok(Some(out))
        }
    })
}

/// Writes the header and the decision into the buffers; false when they were too small
/// (only the header was written).
fn answer(d: &InternedDecision, texts: &Interner, req: &Request, ints: &mut [u32], floats: &mut [f64]) -> bool {
    let (head, body) = ints.split_at_mut(HEADER_INTS);
    let (w_head, w_body) = floats.split_at_mut(HEADER_FLOATS);
    let w = write_compact(d, texts, body, w_body);
    head[header::FITS] = u32::from(w.fits);
    head[header::INTS_NEEDED] = (HEADER_INTS + w.ints) as u32;
    head[header::FLOATS_NEEDED] = (HEADER_FLOATS + w.floats) as u32;
    head[header::ELIGIBLE] = d.eligible.len() as u32;
    head[header::REJECTED] = d.rejected.len() as u32;
    head[header::STRATEGY] = STRATEGIES.iter().position(|s| *s == req.strategy).unwrap_or(0) as u32;
    head[header::OBJECTIVE] = OBJECTIVES.iter().position(|o| *o == req.latency_objective).unwrap_or(0) as u32;
    head[header::MAX_ATTEMPTS] = req.max_attempts;
    head[header::FALLBACK_ALLOWED] = u32::from(req.fallback_allowed);
    w_head.copy_from_slice(&weights(req.strategy).unwrap_or([f64::NAN; 3]));
    w.fits
}
