//! Decision records (router option `decisions`; `core::decision`): the kept records, and
//! those the sink has not been handed yet. A record is the one value that crosses as a plain
//! JSON object (napi-rs writes the core's `serde_json::Value`): it is documented as JSON, and
//! its consumers (a file, a table, `replay`) keep it as such.

use crate::binding::error::guard;
use crate::binding::router::RouterState;
use napi::bindgen_prelude::External;
use napi::Env;
use napi_derive::napi;
use serde_json::Value;

/// `router.decisions(query)`: the kept records, newest first (`queryJson`: the caller's
/// query as JSON text; the core reads it strictly).
#[napi(ts_return_type = "Array<Record<string, unknown>>")]
pub fn router_decisions(env: Env, router: &External<RouterState>, query_json: String) -> napi::Result<Vec<Value>> {
    guard(&env, || {
        let query = serde_json::from_str(&query_json).unwrap_or(Value::Bool(false));
        router.router.borrow().decisions_list(&query)
    })
}

/// The records the sink has not been handed yet, oldest first (once).
#[napi(ts_return_type = "Array<Record<string, unknown>>")]
pub fn router_take_decisions(env: Env, router: &External<RouterState>) -> napi::Result<Vec<Value>> {
    guard(&env, || Ok(router.router.borrow_mut().take_unsunk_decisions()))
}

/// One side of a replay (`router.replay`): the attempt order, and where it went or its code.
#[napi(object)]
pub struct ReplaySide {
    /// The attempt order, best first.
    pub order: Vec<String>,
    /// The pool it went to.
    pub provider_id: Option<String>,
    /// The code of the error it failed with.
    pub code: Option<String>,
}

/// One pool whose part in the decision changed.
#[napi(object)]
pub struct ReplayChange {
    /// The pool's id.
    pub pool: String,
    /// Its part in the recorded decision.
    pub was: String,
    /// Its part in the replay.
    pub now: String,
    /// Why, as far as the replay can tell.
    pub why: String,
}

/// What `router.replay(record)` answers.
#[napi(object)]
pub struct ReplayResult {
    /// Whether the replay decided as recorded.
    pub same: bool,
    /// The record's decision.
    pub recorded: ReplaySide,
    /// The replay's.
    pub replayed: ReplaySide,
    /// Each pool whose part changed.
    pub changes: Vec<ReplayChange>,
    /// What the replay assumed where the record had no answer.
    pub assumed: Vec<String>,
    /// One line.
    pub summary: String,
}

fn side(s: crate::core::router::replay::Side) -> ReplaySide {
    ReplaySide { order: s.order, provider_id: s.provider_id, code: s.code }
}

/// `router.replay(record)`: the record's decision decided again by this router's registry and
/// options on the record's inputs (`recordJson`: the record as JSON text); throws the typed
/// `INVALID_DECISION_RECORD` naming the field.
#[napi]
pub fn router_replay(env: Env, router: &External<RouterState>, record_json: String) -> napi::Result<ReplayResult> {
    guard(&env, || {
        let r = router.router.borrow().replay_text(&record_json)?;
        Ok(ReplayResult {
            same: r.same,
            recorded: side(r.recorded),
            replayed: side(r.replayed),
            changes: r
                .changes
                .into_iter()
                .map(|c| ReplayChange { pool: c.pool, was: c.was, now: c.now, why: c.why })
                .collect(),
            assumed: r.assumed,
            summary: r.summary,
        })
    })
}
