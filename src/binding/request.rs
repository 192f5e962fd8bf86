//! napi glue for requests: a request crosses once, as the JSON text of the caller's value
//! (read once by `lib/serialize.js`, labels apart), and is validated and parsed here into a
//! [`CompiledRequest`] that later calls borrow.
//!
//! Why text and not the object? A request is the caller's value: `lib/serialize.js` reads it
//! exactly once inside a guard, and V8's serializer plus serde are faster than walking a JS
//! object property by property through napi. Labels travel apart (they are per call and
//! never change a routing decision), so requests built from one template share one
//! compiled form.

use crate::binding::error::{guard, Failure, NativeError};
use crate::binding::handles::Handles;
use crate::core::error::ErrorClass;
use crate::core::request::{parse_labels, parse_labels_text, parse_request, Request};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;

thread_local! {
    static REQUESTS: RefCell<Handles<Rc<Request>>> = const { RefCell::new(Handles::new()) };
}

/// The compiled request behind `handle`.
pub(crate) fn request_of(handle: u32) -> Result<Rc<Request>, Failure> {
    REQUESTS.with(|r| r.borrow().get(handle, "request"))
}

/// `text` parsed as JSON, or `INVALID_REQUEST` naming `what`.
pub(crate) fn parse_json(text: &str, what: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|_| {
        NativeError::invalid(
            ErrorClass::RequestValidation,
            "INVALID_REQUEST",
            format!("invalid request: {what} is not serializable JSON"),
            what,
        )
    })
}

/// A validated, parsed request, reusable across calls (`lib/compile.js` keeps them by
/// content).
#[napi]
pub struct CompiledRequest {
    pub(crate) req: Rc<Request>,
    handle: u32,
}

impl Drop for CompiledRequest {
    fn drop(&mut self) {
        let _ = REQUESTS.try_with(|r| r.borrow_mut().remove(self.handle));
    }
}

#[napi]
impl CompiledRequest {
    /// Parses and validates the request's JSON text (its labels apart); throws the typed
    /// `INVALID_REQUEST` / `ROUTING_NOT_APPLICABLE` error naming the field.
    #[napi(constructor)]
    pub fn new(env: Env, request_json: String) -> napi::Result<Self> {
        guard(&env, || {
            let value = parse_json(&request_json, "request")?;
            let req = Rc::new(parse_request(&value)?);
            let handle = REQUESTS.with(|r| r.borrow_mut().insert(req.clone()));
            Ok(CompiledRequest { req, handle })
        })
    }

    /// Its handle for the provision path (`beginAcquisition`, `order`).
    #[napi(getter)]
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The launch deadline, ms (JavaScript runs the timer; the machine decides the rest).
    #[napi(getter)]
    pub fn acquisition_timeout_ms(&self) -> f64 {
        self.req.acquisition_timeout_ms as f64
    }
}

/// A request's `launch.labels`, sent apart from it as JSON text, validated by the one rule
/// (`request::parse_labels`): the labels, or the typed `INVALID_REQUEST` error.
pub(crate) fn labels_from(text: &str) -> Result<Vec<(String, String)>, Failure> {
    if let Some(labels) = parse_labels_text(text) {
        return Ok(labels);
    }
    parse_labels(&parse_json(text, "launch.labels")?).map_err(|e| {
        NativeError::invalid(
            ErrorClass::RequestValidation,
            "INVALID_REQUEST",
            format!("invalid request: {} {}", e.field, e.expectation),
            e.field,
        )
    })
}

/// Validates a request's labels sent apart (`route` and `explain`; a provision's begin
/// checks them itself); throws the typed `INVALID_REQUEST` error naming the field.
#[napi]
pub fn check_labels(env: Env, labels_json: String) -> napi::Result<()> {
    guard(&env, || labels_from(&labels_json).map(drop))
}
