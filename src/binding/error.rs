//! Errors crossing the seam, as typed values.
//!
//! One protocol: a native error is a [`NativeError`] value: its `errorClass` (the JS class
//! to raise, decided by the core), `code`, `message` and the fields the class documents
//! (`field`, `providerId`, `rejections`, …). It reaches JavaScript either as the *value*
//! of a call that answers "how did it fail" (`acquisitionFailure`), or *thrown*: an `Error`
//! whose own properties are those same fields, set here ([`NativeError::thrown`]).
//! `lib/errors.js` `fromNative` reads either the same way and builds the instance. Nothing
//! is encoded into a message, and nothing is parsed back.
//!
//! Every entry point runs inside [`guard`] (or [`typed_future`] for async work), so a Rust
//! panic becomes a typed `INTERNAL_ERROR` (its payload dropped), never a crash or a text.

use crate::core::error::ErrorClass;
use crate::core::CoreError;
use napi::bindgen_prelude::{Either, JsObjectValue, Object, PromiseRaw, ToNapiValue};
use napi::{Env, JsValue};
use napi_derive::napi;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A native error on its way to JavaScript: boxed, since errors are the cold path and the
/// value is large.
pub type Failure = Box<NativeError>;

/// A native error, as JavaScript receives it (see the module docs). Optional fields are
/// absent, not `undefined`, when they do not apply.
#[napi(object)]
#[derive(Debug)]
pub struct NativeError {
    /// The JS class to raise (`SandboxRequestValidationError`, …; `lib/errors.js` names).
    pub error_class: String,
    /// Stable code (the README's error table; docs/ guides say when each is thrown).
    pub code: String,
    /// Human message: ids, codes, numbers and field paths, never a caller's value.
    pub message: String,
    /// Validation errors: the offending field's path.
    pub field: Option<String>,
    /// The pool the error is about.
    pub provider_id: Option<String>,
    /// The provision's `sbx_` id.
    pub sandbox_id: Option<String>,
    /// `ACQUISITION_TIMEOUT`: the launch deadline, ms.
    pub timeout_ms: Option<f64>,
    /// `NO_ELIGIBLE_PROVIDER`: the one-line summary.
    pub summary: Option<String>,
    /// `NO_ELIGIBLE_PROVIDER`: every rejected pool and why; `PROVIDER_CAPACITY_EXHAUSTED`:
    /// every pool capacity skipped.
    pub rejections: Option<Either<Vec<RejectionRecord>, Vec<SkipRecord>>>,
    /// Failed attempts, in order.
    pub attempts: Option<Vec<AttemptRecord>>,
    /// Candidates skipped for capacity (capacity routing).
    pub capacity_rejections: Option<Vec<SkipRecord>>,
    /// A store call that did not finish within its deadline.
    pub timed_out: Option<bool>,
    /// A store connection whose TLS failed.
    pub tls: Option<bool>,
    /// Budgets: the rule that refused (or whose label is missing).
    pub rule: Option<String>,
    /// Budgets: the rule's label and the request's value of it.
    pub key: Option<crate::binding::budget::BudgetKeyRecord>,
    /// Budgets: the limit that did not fit (`cost`, `launches`, `concurrent`).
    pub dimension: Option<String>,
    /// Budgets: that limit's value.
    pub limit: Option<f64>,
    /// Budgets: what is used in the window (live sandboxes, for `concurrent`).
    pub used: Option<f64>,
    /// Budgets: what launches in flight have reserved.
    pub reserved: Option<f64>,
    /// Budgets: when the window frees what is used (ISO 8601), or null.
    pub resets_at: Option<Option<String>>,
    /// Budgets: whether giving back the reservations in flight could make room.
    pub retryable: Option<bool>,
}

/// A rejected pool: its id and why.
#[napi(object)]
#[derive(Debug)]
pub struct RejectionRecord {
    /// The pool's id.
    pub provider_id: String,
    /// Why it was rejected.
    pub reasons: Vec<ReasonRecord>,
}

/// One rejection reason: a stable code and a detail.
#[napi(object)]
#[derive(Debug)]
pub struct ReasonRecord {
    /// Stable reason code (e.g. `MISSING_CAPABILITY`).
    pub code: String,
    /// What exactly (names and numbers, never a caller's value).
    pub detail: String,
}

/// A failed attempt.
#[napi(object)]
#[derive(Debug)]
pub struct AttemptRecord {
    /// The pool's id.
    pub provider_id: String,
    /// Sanitized code.
    pub code: String,
    /// Whether the failure was retryable.
    pub retryable: bool,
}

/// A candidate skipped for capacity.
#[napi(object)]
#[derive(Debug)]
pub struct SkipRecord {
    /// The pool's id.
    pub provider_id: String,
    /// `UNKNOWN` or `EXHAUSTED`.
    pub status: String,
    /// The unknown reason, `NO_CAPACITY_READER`, or the full dimension.
    pub reason: String,
}

impl NativeError {
    /// An error of `class` with `code` and `message`, and no other field.
    pub fn new(class: ErrorClass, code: &str, message: impl Into<String>) -> Failure {
        Box::new(NativeError {
            error_class: class.name().to_string(),
            code: code.to_string(),
            message: message.into(),
            field: None,
            provider_id: None,
            sandbox_id: None,
            timeout_ms: None,
            summary: None,
            rejections: None,
            attempts: None,
            capacity_rejections: None,
            timed_out: None,
            tls: None,
            rule: None,
            key: None,
            dimension: None,
            limit: None,
            used: None,
            reserved: None,
            resets_at: None,
            retryable: None,
        })
    }

    /// A validation error of `class`: `INVALID_INPUT`-style, naming `field`.
    pub fn invalid(class: ErrorClass, code: &str, message: impl Into<String>, field: impl Into<String>) -> Failure {
        let mut e = NativeError::new(class, code, message);
        e.field = Some(field.into());
        e
    }

    /// The thrown form: an `Error` with this message whose own properties are this value's
    /// fields (see the module docs).
    pub fn thrown(self: Box<Self>, env: &Env) -> napi::Error {
        match self.error_object(env) {
            Ok(e) => e,
            // The env could not build an object (it is tearing down): nothing would
            // receive the error anyway; keep the code.
            Err(e) => e,
        }
    }

    fn error_object(self: Box<Self>, env: &Env) -> napi::Result<napi::Error> {
        let this = *self;
        this.into_error_object(env)
    }

    fn into_error_object(self, env: &Env) -> napi::Result<napi::Error> {
        let mut error = env.create_error(napi::Error::from_reason(self.message.as_str()))?;
        error.set_named_property("errorClass", self.error_class)?;
        error.set_named_property("code", self.code)?;
        set_some(&mut error, "field", self.field)?;
        set_some(&mut error, "providerId", self.provider_id)?;
        set_some(&mut error, "sandboxId", self.sandbox_id)?;
        set_some(&mut error, "timeoutMs", self.timeout_ms)?;
        set_some(&mut error, "summary", self.summary)?;
        set_some(&mut error, "rejections", self.rejections)?;
        set_some(&mut error, "attempts", self.attempts)?;
        set_some(&mut error, "capacityRejections", self.capacity_rejections)?;
        set_some(&mut error, "timedOut", self.timed_out)?;
        set_some(&mut error, "tls", self.tls)?;
        set_some(&mut error, "rule", self.rule)?;
        set_some(&mut error, "key", self.key)?;
        set_some(&mut error, "dimension", self.dimension)?;
        set_some(&mut error, "limit", self.limit)?;
        set_some(&mut error, "used", self.used)?;
        set_some(&mut error, "reserved", self.reserved)?;
        match self.resets_at {
            Some(Some(at)) => error.set_named_property("resetsAt", at)?,
            Some(None) => error.set_named_property("resetsAt", napi::bindgen_prelude::Null)?,
            None => {}
        }
        set_some(&mut error, "retryable", self.retryable)?;
        Ok(napi::Error::from(error.to_unknown()))
    }
}

/// Sets `key` on `object` when `value` is present.
fn set_some<V: ToNapiValue>(object: &mut Object<'_>, key: &str, value: Option<V>) -> napi::Result<()> {
    match value {
        Some(v) => object.set_named_property(key, v),
        None => Ok(()),
    }
}

impl From<CoreError> for Failure {
    fn from(e: CoreError) -> Self {
        let mut out = NativeError::new(e.class(), e.code(), e.to_string());
        out.field = e.field().map(str::to_string);
        out
    }
}

/// An internal error: a bug in the router (`what` says where; never a payload).
pub fn internal(what: &str) -> Failure {
    NativeError::new(ErrorClass::Internal, "INTERNAL_ERROR", format!("internal error {what} (a bug: please report it)"))
}

/// The error a caught panic becomes.
pub fn panicked() -> Failure {
    internal("in the native routing core")
}

/// Runs `f` for a synchronous entry point: its value, or its error thrown as a typed JS
/// error; a panic becomes `INTERNAL_ERROR`.
pub fn guard<T>(env: &Env, f: impl FnOnce() -> Result<T, Failure>) -> napi::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.thrown(env)),
        Err(_) => Err(panicked().thrown(env)),
    }
}

/// Runs `f` for an entry point that cannot fail but by a bug (no env to throw with): a
/// panic is contained, and answered with `fallback`.
pub fn contained<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Runs `fut` on tokio for an async entry point: the promise resolves to its value or
/// rejects with its typed error (built on the JS thread, when the promise settles). The
/// future runs as a task of its own, so that a panic inside it becomes `INTERNAL_ERROR`
/// instead of a rejection carrying the panic's text.
pub fn typed_future<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = Result<T, Failure>> + Send + 'static,
{
    let task = async move { Ok(own_task(fut).await) };
    env.spawn_future_with_callback(task, |env, r: Result<T, Failure>| r.map_err(|e| e.thrown(env)))
}

/// Runs `fut` as a tokio task of its own: a panic inside it becomes `INTERNAL_ERROR`.
pub async fn own_task<T, F>(fut: F) -> Result<T, Failure>
where
    T: Send + 'static,
    F: Future<Output = Result<T, Failure>> + Send + 'static,
{
    tokio::spawn(fut).await.unwrap_or_else(|_| Err(panicked()))
}

/// Deliberately panics inside [`guard`]; the tests prove a panic becomes a typed error.
#[napi]
pub fn debug_panic(env: Env) -> napi::Result<()> {
    guard(&env, || panic!("deliberate panic for the FFI-boundary test"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_async_work_must_become_a_typed_internal_error_without_its_text() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        let e = rt.block_on(own_task(async { panic!("deliberate panic with sk_canary") as Result<(), Failure> }));
        let e = e.unwrap_err();
        assert_eq!((e.code.as_str(), e.error_class.as_str()), ("INTERNAL_ERROR", "SandboxRouterInternalError"));
        assert!(!e.message.contains("sk_canary"), "{}", e.message);
    }

    #[test]
    fn async_work_that_does_not_panic_must_keep_its_answer() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        assert_eq!(rt.block_on(own_task(async { Ok::<_, Failure>(7) })).ok(), Some(7));
    }

    #[test]
    fn core_errors_keep_their_code_class_and_field() {
        let e: Failure =
            CoreError::InvalidRequest { field: "routing.strategy".into(), expectation: "must be x".into() }.into();
        assert_eq!(
            (e.code.as_str(), e.error_class.as_str(), e.field.as_deref()),
            ("INVALID_REQUEST", "SandboxRequestValidationError", Some("routing.strategy"))
        );
        assert_eq!(e.message, "invalid request: routing.strategy must be x");
    }
}
