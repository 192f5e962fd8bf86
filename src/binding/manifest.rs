//! napi glue for process manifests: JSON text in, JSON text out, errors encoded.
//!
//! Same contract as `binding.rs`: a manifest crosses as one JSON string, an answer comes
//! back as one JSON string, and an error crosses as a JSON-encoded `{code, message, field}`
//! that `lib/errors.js` turns into a typed error. Every entry point runs inside `guard`, so
//! a panic becomes a typed `INTERNAL_ERROR`. The encoder and the guard are `binding.rs`'s.

use crate::binding::error::guard;
use crate::core::manifest::{
    parse_manifest_str, plan_startup as core_plan_startup, plan_teardown as core_plan_teardown,
};
use napi::{Env, Result};
use napi_derive::napi;

/// Validates a process manifest (JSON text) and returns it normalized (JSON text):
/// defaults filled in (`dependsOn: []`, `restart: "never"`, `maxRestarts: 3` with
/// `on-failure`, `teardown: { signal: "SIGTERM", graceMs: 10000 }`), processes in input
/// order. Throws the typed `INVALID_INPUT` error whose `field` names the offending path.
#[napi]
pub fn validate_manifest(env: Env, manifest_json: String) -> Result<String> {
    guard(&env, || Ok(parse_manifest_str(&manifest_json)?.to_json().to_string()))
}

/// The startup plan of a manifest (JSON text): `{ waves: [{ wave, processes }], order }`,
/// topological levels, ordered by name within a wave. Throws like `validateManifest`.
#[napi]
pub fn plan_startup(env: Env, manifest_json: String) -> Result<String> {
    guard(&env, || Ok(core_plan_startup(&parse_manifest_str(&manifest_json)?).to_json().to_string()))
}

/// The teardown plan of a manifest (JSON text): `{ waves: [{ wave, steps: [{ name,
/// phases }] }], order }`, the startup waves reversed; each step's phases are flush (if
/// declared), signal, wait `graceMs`, kill. Throws like `validateManifest`.
#[napi]
pub fn plan_teardown(env: Env, manifest_json: String) -> Result<String> {
    guard(&env, || Ok(core_plan_teardown(&parse_manifest_str(&manifest_json)?).to_json().to_string()))
}
