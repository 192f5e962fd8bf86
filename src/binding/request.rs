//! napi glue for requests: a request crosses once, as the JSON text of the caller's value
//! (read once by `lib/serialize.js`, labels apart), and is validated and parsed here into a
//! [`CompiledRequest`] that later calls borrow.
//!
//! Why text and not the object? A request is the caller's value: `lib/serialize.js` reads it
//! exactly once inside a guard, and V8's serializer plus serde are faster than walking a JS
//! object property by property through napi. Labels travel apart (they are per call and
//! never change a routing decision), so requests built from one template share one
//! compiled form.

use crate::binding::error::{guard, Failure};
use crate::core::json::FieldError;
use crate::core::request::{parse_labels, parse_labels_text, parse_request, LabelLimits, Request};
use crate::core::CoreError;
use napi::bindgen_prelude::External;
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use std::rc::Rc;

/// `text` parsed as JSON, or `INVALID_REQUEST` naming `what`.
pub(crate) fn parse_json(text: &str, what: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|_| {
        CoreError::InvalidRequest { field: what.to_string(), expectation: "is not serializable JSON".to_string() }
            .into()
    })
}

/// A validated, parsed request, reusable across calls (`ExternalObject<CompiledRequest>`;
/// `lib/compile.js` keeps them by content).
pub struct CompiledRequest {
    pub(crate) req: Rc<Request>,
}

/// Parses and validates a request's JSON text (its labels apart); throws the typed
/// `INVALID_REQUEST` / `ROUTING_NOT_APPLICABLE` error naming the field.
#[napi]
pub fn compile_request(env: Env, request_json: String) -> napi::Result<External<CompiledRequest>> {
    guard(&env, || {
        let value = parse_json(&request_json, "request")?;
        let mut req = parse_request(&value)?;
        // Kept for decision records (a router with `decisions` writes the request it decided).
        req.source = Some(Rc::from(request_json));
        Ok(External::new(CompiledRequest { req: Rc::new(req) }))
    })
}

/// A compiled request's launch deadline, ms (JavaScript runs the timer; the router decides
/// the rest).
#[napi]
pub fn request_timeout_ms(request: &External<CompiledRequest>) -> f64 {
    request.req.acquisition_timeout_ms as f64
}

/// A request's `launch.labels`, sent apart from it as JSON text, validated by the one rule
/// (`request::parse_labels`) and within `limits` (the router's, `limits` option): the
/// labels, or the typed `INVALID_REQUEST` error naming the label.
pub(crate) fn labels_from(text: &str, limits: &LabelLimits) -> Result<crate::core::labels::Labels, Failure> {
    let invalid =
        |e: FieldError| -> Failure { CoreError::InvalidRequest { field: e.field, expectation: e.expectation }.into() };
    let labels = match parse_labels_text(text) {
        Some(labels) => labels,
        None => parse_labels(&parse_json(text, "launch.labels")?).map_err(invalid)?,
    };
    limits.check(&labels).map_err(invalid)?;
    Ok(labels)
}
