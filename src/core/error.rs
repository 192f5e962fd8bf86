//! One error type for the whole core, each variant with a stable code and class.
//!
//! Codes are SCREAMING_SNAKE strings that never change meaning. Which JS error class a code
//! is raised as is decided here too ([`ErrorClass`]): the glue sets both on the error
//! value it hands to JavaScript, and `lib/errors.js` only builds the instance. Messages
//! name fields and expectations, never caller-supplied values (a value may be a secret,
//! e.g. an env entry).

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
    /// A router or component option is invalid.
    #[error("invalid {scope} options: {field} {expectation}")]
    InvalidConfiguration {
        /// Whose options: `router`, `PostgresMappingStore`, …
        scope: &'static str,
        /// Dotted path of the offending option, e.g. `health.cooldownMs`.
        field: String,
        /// What it must be.
        expectation: String,
    },
    /// The operating system's random source failed.
    #[error("random source unavailable")]
    RandomUnavailable,
}

/// The error classes a caller can catch (`lib/errors.js` defines them; every one extends
/// `SandboxRouterError`). Kubernetes' distinction is kept visible: `NoEligibleProvider`
/// means nothing will change by retrying as-is, `CapacityExhausted` means retry later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// `SandboxRequestValidationError`: a request, id or input is malformed.
    RequestValidation,
    /// `RoutingNotApplicableError`: fleet placement or node affinity.
    RoutingNotApplicable,
    /// `NoEligibleProviderError`: no pool can serve the request as it is.
    NoEligibleProvider,
    /// `ProviderRegistryError`: a definition or provider id is invalid.
    ProviderRegistry,
    /// `SandboxRouterConfigurationError`: options are invalid.
    Configuration,
    /// `ProviderProvisioningError`: a launch failed terminally or attempts ran out.
    ProviderProvisioning,
    /// `ProviderCapacityExhaustedError`: no pool had room: retry later.
    CapacityExhausted,
    /// `AcquisitionTimeoutError`: a launch did not settle in time; the sandbox may exist.
    AcquisitionTimeout,
    /// `MappingPersistenceError`: a mapping store could not be opened, read or written.
    MappingPersistence,
    /// `BudgetExhaustedError`: a budget rule refused every candidate (or its shared ledger
    /// could not be asked); `retryable` says whether launches in flight could free room.
    BudgetExhausted,
    /// `SandboxRouterInternalError`: a bug in the router.
    Internal,
    /// `ProviderPackageMissingError`: a builtin provider's (or telemetry's) optional package
    /// is not installed, fails to load, or lacks the export the router needs.
    PackageMissing,
    /// `ProviderOperationUnsupportedError` (a `ProviderPackageMissingError`): the installed
    /// adapter does not implement a port method.
    OperationUnsupported,
}

impl ErrorClass {
    /// Every class, in declaration order: `lib/errors.js`'s table of classes by name is
    /// checked against this list (`errorClassNames`, `__test__/errors.test.cjs`).
    pub const ALL: [ErrorClass; 13] = [
        ErrorClass::RequestValidation,
        ErrorClass::RoutingNotApplicable,
        ErrorClass::NoEligibleProvider,
        ErrorClass::ProviderRegistry,
        ErrorClass::Configuration,
        ErrorClass::ProviderProvisioning,
        ErrorClass::CapacityExhausted,
        ErrorClass::AcquisitionTimeout,
        ErrorClass::MappingPersistence,
        ErrorClass::BudgetExhausted,
        ErrorClass::Internal,
        ErrorClass::PackageMissing,
        ErrorClass::OperationUnsupported,
    ];

    /// The JS class name (`lib/errors.js` exports each under this name).
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::RequestValidation => "SandboxRequestValidationError",
            ErrorClass::RoutingNotApplicable => "RoutingNotApplicableError",
            ErrorClass::NoEligibleProvider => "NoEligibleProviderError",
            ErrorClass::ProviderRegistry => "ProviderRegistryError",
            ErrorClass::Configuration => "SandboxRouterConfigurationError",
            ErrorClass::ProviderProvisioning => "ProviderProvisioningError",
            ErrorClass::CapacityExhausted => "ProviderCapacityExhaustedError",
            ErrorClass::AcquisitionTimeout => "AcquisitionTimeoutError",
            ErrorClass::MappingPersistence => "MappingPersistenceError",
            ErrorClass::BudgetExhausted => "BudgetExhaustedError",
            ErrorClass::Internal => "SandboxRouterInternalError",
            ErrorClass::PackageMissing => "ProviderPackageMissingError",
            ErrorClass::OperationUnsupported => "ProviderOperationUnsupportedError",
        }
    }
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
            CoreError::InvalidConfiguration { .. } => "INVALID_CONFIGURATION",
            CoreError::RandomUnavailable => "INTERNAL_ERROR",
        }
    }

    /// The class this error is raised as.
    pub fn class(&self) -> ErrorClass {
        match self {
            CoreError::InvalidRequest { .. }
            | CoreError::InvalidSandboxId
            | CoreError::ReservedLabel(_)
            | CoreError::InvalidInput { .. } => ErrorClass::RequestValidation,
            CoreError::InvalidProviderId { .. }
            | CoreError::DuplicateProvider(_)
            | CoreError::InvalidProviderDefinition { .. } => ErrorClass::ProviderRegistry,
            CoreError::RoutingNotApplicable(_) => ErrorClass::RoutingNotApplicable,
            CoreError::InvalidConfiguration { .. } => ErrorClass::Configuration,
            CoreError::RandomUnavailable => ErrorClass::Internal,
        }
    }

    /// The field a validation error is about, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            CoreError::InvalidRequest { field, .. }
            | CoreError::InvalidProviderDefinition { field, .. }
            | CoreError::InvalidInput { field, .. }
            | CoreError::InvalidConfiguration { field, .. } => Some(field),
            CoreError::ReservedLabel(_) => Some("launch.labels"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_must_be_listed_once_under_a_distinct_name() {
        let mut names: Vec<&str> = ErrorClass::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorClass::ALL.len());
        assert!(names.iter().all(|n| n.ends_with("Error")), "{names:?}");
    }
}
