//! napi glue for ids: the sandbox and provider id rules live in `core::ids`; this file
//! hands them to JavaScript, which never re-checks an id itself, and draws fresh ids from
//! the operating system's CSPRNG (I/O, so not the core's).

use crate::binding::error::guard;
use crate::binding::router::RouterState;
use crate::core::ids::{validate_provider_id, validate_sandbox_id, SandboxKey, ID_BYTES};
use crate::core::CoreError;
use napi::bindgen_prelude::External;
use napi::Env;
use napi_derive::napi;

/// A source of sandbox ids that draws from the OS CSPRNG in batches.
///
/// Drawing 16 bytes per id from the kernel costs a syscall each; a 4 KiB buffer amortizes
/// it to one syscall per 256 ids without weakening the ids (each byte is still used once).
#[derive(Debug)]
pub struct SandboxIdSource {
    buf: Vec<u8>,
    pos: usize,
}

const BATCH: usize = 4096;

impl Default for SandboxIdSource {
    fn default() -> Self {
        SandboxIdSource { buf: vec![0; BATCH], pos: BATCH }
    }
}

impl SandboxIdSource {
    /// Returns the key of a fresh `sbx_` id (128 random bits).
    pub fn next_key(&mut self) -> Result<SandboxKey, CoreError> {
        if self.pos + ID_BYTES > self.buf.len() {
            getrandom::fill(&mut self.buf).map_err(|_| CoreError::RandomUnavailable)?;
            self.pos = 0;
        }
        let mut bytes = [0u8; ID_BYTES];
        bytes.copy_from_slice(&self.buf[self.pos..self.pos + ID_BYTES]);
        // Overwrite the used bytes so they cannot be read back from the buffer.
        self.buf[self.pos..self.pos + ID_BYTES].fill(0);
        self.pos += ID_BYTES;
        Ok(SandboxKey::from_bytes(bytes))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::is_sandbox_id;
    use std::collections::HashSet;

    #[test]
    fn sandbox_ids_are_well_formed_unique_and_round_trip() {
        let mut src = SandboxIdSource::default();
        let mut seen = HashSet::new();
        for _ in 0..2000 {
            let id = src.next_key().unwrap().to_string();
            assert!(is_sandbox_id(&id), "{id}");
            assert_eq!(SandboxKey::parse(&id).unwrap().to_string(), id);
            assert!(seen.insert(id));
        }
    }
}
