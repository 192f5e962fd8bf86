//! One error type for the whole core, each variant with a stable code.
//!
//! Codes are SCREAMING_SNAKE strings that never change meaning; the JS layer turns each
//! code into an instance of a named error class. Messages name fields and expectations,
//! never caller-supplied values (a value may be a secret, e.g. an env entry).

use thiserror::Error;

/// Errors the core reports. `code()` is the stable, documented identifier.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CoreError {
    /// A request field is missing, of the wrong type, out of range, or unknown.
    #[error("invalid request: {field} {expectation}")]
    InvalidRequest {
        /// Dotted path of the offending field, e.g. `routing.maxAcquisitionAttempts`.
        field: String,
        /// What the field must be.
        expectation: String,
    },
    /// A provider id does not match `[a-z0-9][a-z0-9._-]*`, at most 64 bytes.
    #[error("invalid provider id: {reason}")]
    InvalidProviderId {
        /// Why the id was refused.
        reason: &'static str,
    },
    /// Two registrations share one provider id.
    #[error("duplicate provider id: {0}")]
    DuplicateProvider(String),
    /// A provider definition is malformed.
    #[error("invalid provider definition {provider}: {field} {expectation}")]
    InvalidProviderDefinition {
        /// The provider id, when it could be read.
        provider: String,
        /// Dotted path of the offending field.
        field: String,
        /// What the field must be.
        expectation: String,
    },
    /// The request asks for fleet placement or a node affinity: not this router's job.
    #[error("routing not applicable: {0}")]
    RoutingNotApplicable(&'static str),
    /// A sandbox id is not of the form `sbx_` + 32 lowercase hex digits.
    #[error("invalid sandbox id: expected sbx_ followed by 32 lowercase hex digits")]
    InvalidSandboxId,
    /// A caller label uses the key the router reserves for its own sandbox id.
    #[error("launch.labels uses the reserved key {0}")]
    ReservedLabel(&'static str),
    /// A process manifest or other structured input failed validation.
    #[error("invalid input: {field} {expectation}")]
    InvalidInput {
        /// Dotted path of the offending field.
        field: String,
        /// What the field must be.
        expectation: String,
    },
    /// The operating system's random source failed.
    #[error("random source unavailable")]
    RandomUnavailable,
}

impl CoreError {
    /// The stable code for this error.
    pub fn code(&self) -> &'static str {
        match self {
            CoreError::InvalidRequest { .. } => "INVALID_REQUEST",
            CoreError::InvalidProviderId { .. } => "INVALID_PROVIDER_ID",
            CoreError::DuplicateProvider(_) => "DUPLICATE_PROVIDER",
            CoreError::InvalidProviderDefinition { .. } => "INVALID_PROVIDER_DEFINITION",
            CoreError::RoutingNotApplicable(_) => "ROUTING_NOT_APPLICABLE",
            CoreError::InvalidSandboxId => "INVALID_SANDBOX_ID",
            CoreError::ReservedLabel(_) => "RESERVED_LABEL",
            CoreError::InvalidInput { .. } => "INVALID_INPUT",
            CoreError::RandomUnavailable => "INTERNAL_ERROR",
        }
    }

    /// The field a validation error is about, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            CoreError::InvalidRequest { field, .. }
            | CoreError::InvalidProviderDefinition { field, .. }
            | CoreError::InvalidInput { field, .. } => Some(field),
            CoreError::ReservedLabel(_) => Some("launch.labels"),
            _ => None,
        }
    }
}
