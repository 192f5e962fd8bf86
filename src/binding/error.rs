//! Errors crossing the seam, as typed values.
//!
//! One protocol: a native error is the core's [`NativeError`] (`core::error::Fault`): its
//! `errorClass` (the JS class to raise, decided by the core), `code`, `message` and the
//! fields the class documents (`field`, `providerId`, `rejections`, …). It reaches
//! JavaScript as an `Error` whose own properties are those fields, written by the one
//! writer of core values (`binding::values`): thrown, rejected, or handed out as the value
//! of a call that answers "how did it fail" (`acquisitionFailure`).
//! `lib/errors.js` `fromNative` reads either the same way and builds the instance. Nothing
//! is encoded into a message, and nothing is parsed back.
//!
//! Every entry point runs inside [`guard`] (or [`typed_future`] for async work), so a Rust
//! panic becomes a typed `INTERNAL_ERROR` (its payload dropped), never a crash or a text.

use crate::binding::values::JsFields;
pub use crate::core::error::Failure;
/// The core's failure, under the name the glue files have always used for it.
pub use crate::core::error::Fault as NativeError;
use napi::bindgen_prelude::{Object, PromiseRaw, ToNapiValue};
use napi::{Env, JsValue};
use napi_derive::napi;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The JavaScript `Error` of `f`: its message, and its fields as own properties.
pub fn error_object<'env>(env: &'env Env, f: &NativeError) -> napi::Result<Object<'env>> {
    let error = env.create_error(napi::Error::from_reason(f.message.as_str()))?;
    let mut out = JsFields::into(env, error);
    f.write(&mut out);
    out.finish()
}

/// The thrown form of `f` (see the module docs).
pub fn thrown(f: Failure, env: &Env) -> napi::Error {
    match error_object(env, &f) {
        Ok(e) => napi::Error::from(e.to_unknown()),
        // The env could not build an object (it is tearing down): nothing would receive
        // the error anyway; keep the code.
        Err(e) => e,
    }
}

/// An internal error: a bug in the router (`what` says where; never a payload).
pub fn internal(what: &str) -> Failure {
    NativeError::internal(what)
}

/// The error a caught panic becomes.
pub fn panicked() -> Failure {
    internal("in the native routing core")
}

/// The JS `Error` of the failure `f` answers (a failure handed out as a value); `f`'s own
/// failure, or a panic, is thrown instead.
pub fn error_value<'env>(env: &'env Env, f: impl FnOnce() -> Result<Failure, Failure>) -> napi::Result<Object<'env>> {
    let failure = guard(env, f)?;
    error_object(env, &failure)
}

/// Runs `f` for a synchronous entry point: its value, or its error thrown as a typed JS
/// error; a panic becomes `INTERNAL_ERROR`.
pub fn guard<T>(env: &Env, f: impl FnOnce() -> Result<T, Failure>) -> napi::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(thrown(e, env)),
        Err(_) => Err(thrown(panicked(), env)),
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
    env.spawn_future_with_callback(task, |env, r: Result<T, Failure>| r.map_err(|e| thrown(e, env)))
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
        assert_eq!((e.code.as_str(), e.class.name()), ("INTERNAL_ERROR", "SandboxRouterInternalError"));
        assert!(!e.message.contains("sk_canary"), "{}", e.message);
    }

    #[test]
    fn async_work_that_does_not_panic_must_keep_its_answer() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        assert_eq!(rt.block_on(own_task(async { Ok::<_, Failure>(7) })).ok(), Some(7));
    }

    #[test]
    fn core_errors_keep_their_code_class_and_field() {
        let e: Failure = crate::core::CoreError::InvalidRequest {
            field: "routing.strategy".into(),
            expectation: "must be x".into(),
        }
        .into();
        assert_eq!(
            (e.code.as_str(), e.class.name(), e.field.as_deref()),
            ("INVALID_REQUEST", "SandboxRequestValidationError", Some("routing.strategy"))
        );
        assert_eq!(e.message, "invalid request: routing.strategy must be x");
    }
}
