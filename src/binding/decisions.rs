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
