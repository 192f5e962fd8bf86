//! napi glue for ids: the sandbox and provider id rules live in `core::ids`; this file
//! hands them to JavaScript, which never re-checks an id itself, and a router's fresh ids
//! (drawn by `binding::id_source`).

use crate::binding::error::guard;
use crate::binding::router::RouterState;
use crate::core::ids::{validate_provider_id, validate_sandbox_id};
use napi::bindgen_prelude::External;
use napi::Env;
use napi_derive::napi;

/// A fresh sandbox id (`sbx_` + 32 lowercase hex digits, 128 random bits), from the
/// router's id source.
#[napi]
pub fn router_sandbox_id(env: Env, router: &External<RouterState>) -> napi::Result<String> {
    guard(&env, || Ok(router.next_id()?.to_string()))
}

/// Validates a provider id (`[a-z0-9][a-z0-9._-]*`, at most 64 characters); throws the
/// typed `INVALID_PROVIDER_ID` error.
#[napi]
pub fn check_provider_id(env: Env, id: String) -> napi::Result<()> {
    guard(&env, || Ok(validate_provider_id(&id)?))
}

/// Validates a sandbox id (`sbx_` + 32 lowercase hex digits); throws the typed
/// `INVALID_SANDBOX_ID` error.
#[napi]
pub fn check_sandbox_id(env: Env, id: String) -> napi::Result<()> {
    guard(&env, || Ok(validate_sandbox_id(&id)?))
}

/// Whether `id` is a sandbox id (the rule of [`check_sandbox_id`], as a yes or no).
#[napi]
pub fn is_sandbox_id(id: String) -> bool {
    validate_sandbox_id(&id).is_ok()
}

/// Whether `id` is a provider id (the rule of [`check_provider_id`], as a yes or no).
#[napi]
pub fn is_provider_id(id: String) -> bool {
    validate_provider_id(&id).is_ok()
}

/// The launch label that carries the router's sandbox id (`core::request::SANDBOX_ID_LABEL`).
#[napi]
pub const SANDBOX_ID_LABEL: &str = crate::core::request::SANDBOX_ID_LABEL;

/// The launch label that carries the router's fleet (`core::request::SANDBOX_FLEET_LABEL`).
#[napi]
pub const SANDBOX_FLEET_LABEL: &str = crate::core::request::SANDBOX_FLEET_LABEL;

/// The fleet of a router without the `fleet` option (`core::request::DEFAULT_FLEET`).
#[napi]
pub const DEFAULT_FLEET: &str = crate::core::request::DEFAULT_FLEET;
