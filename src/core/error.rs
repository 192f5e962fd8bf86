//! One error type for the whole core, each variant with a stable code and class.
//!
//! Codes are SCREAMING_SNAKE strings that never change meaning. Which JS error class a code
//! is raised as is decided here too ([`ErrorClass`]): the glue sets both on the error
//! value it hands to JavaScript, and `lib/errors.js` only builds the instance. Messages
//! name fields and expectations, never caller-supplied values (a value may be a secret,
//! e.g. an env entry).

use crate::core::events::{FieldSink, KeyFact, ReasonFact};
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
    /// `ProvisioningAvailabilityError`: the credential-readiness port threw, timed out or
    /// answered a non-boolean.
    ProvisioningAvailability,
    /// `ProviderRuntimeError`: a runtime call of an operation by id failed
    /// (`PROVIDER_RUNTIME_ERROR`) or did not settle in time (`OPERATION_TIMEOUT`).
    ProviderRuntime,
    /// `SandboxNotFoundError`: no mapping for this id, or its sandbox is gone.
    SandboxNotFound,
    /// `QueueTimeoutError`: a provision waited the queue's `maxWaitMs` and no pool freed
    /// (retryable; the error says how long it waited and what blocked it).
    QueueTimeout,
    /// `ProvisionAbortedError`: the provision's `AbortSignal` fired before its launch
    /// (`ABORTED`), or its router closed while it waited (`ROUTER_CLOSED`); nothing launched.
    Aborted,
}

impl ErrorClass {
    /// Every class, in declaration order: `lib/errors.js`'s table of classes by name is
    /// checked against this list (`errorClassNames`, `__test__/errors.test.cjs`).
    pub const ALL: [ErrorClass; 18] = [
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
        ErrorClass::ProvisioningAvailability,
        ErrorClass::ProviderRuntime,
        ErrorClass::SandboxNotFound,
        ErrorClass::QueueTimeout,
        ErrorClass::Aborted,
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
            ErrorClass::ProviderRuntime => "ProviderRuntimeError",
            ErrorClass::SandboxNotFound => "SandboxNotFoundError",
            ErrorClass::Internal => "SandboxRouterInternalError",
            ErrorClass::PackageMissing => "ProviderPackageMissingError",
            ErrorClass::OperationUnsupported => "ProviderOperationUnsupportedError",
            ErrorClass::ProvisioningAvailability => "ProvisioningAvailabilityError",
            ErrorClass::QueueTimeout => "QueueTimeoutError",
            ErrorClass::Aborted => "ProvisionAbortedError",
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

/// A failure on its way to the caller: every field of the typed error it becomes, decided
/// here (the class, the code, the message, and the facts its class documents). The glue
/// writes it onto a JavaScript `Error` (or hands it out as a value) through a
/// [`FieldSink`]; `lib/errors.js` only picks the class by its name. Optional fields are left
/// out when they do not apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// The class it is raised as.
    pub class: ErrorClass,
    /// Stable code (the README's error table).
    pub code: String,
    /// Ids, codes, numbers and field paths, never a caller's value.
    pub message: String,
    /// Validation errors: the offending field's path.
    pub field: Option<String>,
    /// The pool it is about.
    pub provider_id: Option<String>,
    /// The sandbox it is about.
    pub sandbox_id: Option<String>,
    /// A deadline that passed, ms.
    pub timeout_ms: Option<f64>,
    /// `NO_ELIGIBLE_PROVIDER`: the one-line summary.
    pub summary: Option<String>,
    /// Every rejected pool and why, or every pool capacity skipped.
    pub rejections: Option<Rejected>,
    /// Failed attempts, in order.
    pub attempts: Option<Vec<AttemptFact>>,
    /// Candidates skipped for capacity (capacity routing).
    pub capacity_rejections: Option<Vec<SkipFact>>,
    /// A store call that did not finish within its deadline.
    pub timed_out: Option<bool>,
    /// A store connection whose TLS failed.
    pub tls: Option<bool>,
    /// Budgets: the rule that refused (or whose label is missing).
    pub rule: Option<String>,
    /// Budgets: the rule's label and the request's value of it.
    pub key: Option<KeyFact>,
    /// Budgets: the limit that did not fit.
    pub dimension: Option<String>,
    /// Budgets: that limit's value.
    pub limit: Option<f64>,
    /// Budgets: used in the window.
    pub used: Option<f64>,
    /// Budgets: reserved by launches in flight.
    pub reserved: Option<f64>,
    /// Budgets: when the window frees what is used (ISO 8601); `Some(None)`: null.
    pub resets_at: Option<Option<String>>,
    /// Whether retrying later may succeed (budgets; queue).
    pub retryable: Option<bool>,
    /// `MAPPING_PERSISTENCE_FAILED` / `MAPPING_INTENT_FAILED`: what happened to the sandbox
    /// (`none`, `destroyed`, `failed`).
    pub cleanup: Option<&'static str>,
    /// Operations by id: the runtime method that failed.
    pub operation: Option<String>,
    /// Facts of another kind, written after the others (rare errors).
    pub extra: Vec<(&'static str, Extra)>,
}

/// A fact of a rare error (see [`Fault::extra`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Extra {
    /// A string.
    Str(String),
    /// A number.
    Num(f64),
    /// A boolean.
    Bool(bool),
    /// A list of strings.
    Strs(Vec<crate::core::events::PoolId>),
}

/// A rejected pool and why (`NO_ELIGIBLE_PROVIDER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolRejection {
    /// The pool.
    pub provider_id: String,
    /// Why.
    pub reasons: Vec<ReasonFact>,
}

/// A failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptFact {
    /// The pool.
    pub provider_id: String,
    /// Its sanitized code.
    pub code: String,
    /// Whether it was classified retryable.
    pub retryable: bool,
}

/// A candidate skipped for capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipFact {
    /// The pool.
    pub provider_id: String,
    /// `UNKNOWN` or `EXHAUSTED`.
    pub status: &'static str,
    /// The unknown reason, `NO_CAPACITY_READER`, or the full dimension.
    pub reason: String,
}

/// What `rejections` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// Pools and their reasons.
    Pools(Vec<PoolRejection>),
    /// Capacity skips.
    Skips(Vec<SkipFact>),
}

/// Where a [`Fault`] is written: the event sink, and the shapes only errors carry.
pub trait FaultSink: FieldSink {
    /// `[{ providerId, reasons: [{ code, detail }] }]`.
    fn pool_rejections(&mut self, name: &'static str, values: &[PoolRejection]);
    /// `[{ providerId, code, retryable }]`.
    fn attempts(&mut self, name: &'static str, values: &[AttemptFact]);
    /// `[{ providerId, status, reason }]`.
    fn skips(&mut self, name: &'static str, values: &[SkipFact]);
}

/// A failure, boxed: errors are the cold path and the value is large.
pub type Failure = Box<Fault>;

impl Fault {
    /// A failure of `class` with `code` and `message`, and no other field.
    pub fn new(class: ErrorClass, code: &str, message: impl Into<String>) -> Failure {
        Box::new(Fault {
            class,
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
            cleanup: None,
            operation: None,
            extra: Vec::new(),
        })
    }

    /// A validation failure of `class` naming `field`.
    pub fn invalid(class: ErrorClass, code: &str, message: impl Into<String>, field: impl Into<String>) -> Failure {
        let mut e = Fault::new(class, code, message);
        e.field = Some(field.into());
        e
    }

    /// `INVALID_CONFIGURATION` of `scope`'s options (`router`, `close`, …): `field` and what
    /// it must be.
    pub fn config(scope: &str, field: impl Into<String>, expectation: &str) -> Failure {
        let field = field.into();
        Fault::invalid(
            ErrorClass::Configuration,
            "INVALID_CONFIGURATION",
            format!("invalid {scope} options: {field} {expectation}"),
            field,
        )
    }

    /// An internal error: a bug in the router (`what` says where; never a payload).
    pub fn internal(what: &str) -> Failure {
        Fault::new(ErrorClass::Internal, "INTERNAL_ERROR", format!("internal error {what} (a bug: please report it)"))
    }

    /// Writes every field but `message` (the glue makes the `Error` with it): `errorClass`,
    /// `code`, then the facts that apply, in a fixed order.
    pub fn write(&self, out: &mut dyn FaultSink) {
        out.str("errorClass", self.class.name());
        out.str("code", &self.code);
        let mut s = |name: &'static str, v: &Option<String>| {
            if let Some(v) = v {
                out.str(name, v);
            }
        };
        s("field", &self.field);
        s("providerId", &self.provider_id);
        s("sandboxId", &self.sandbox_id);
        if let Some(t) = self.timeout_ms {
            out.num("timeoutMs", t);
        }
        if let Some(v) = &self.summary {
            out.str("summary", v);
        }
        match &self.rejections {
            Some(Rejected::Pools(p)) => out.pool_rejections("rejections", p),
            Some(Rejected::Skips(s)) => out.skips("rejections", s),
            None => {}
        }
        if let Some(a) = &self.attempts {
            out.attempts("attempts", a);
        }
        if let Some(s) = &self.capacity_rejections {
            out.skips("capacityRejections", s);
        }
        if let Some(v) = self.timed_out {
            out.bool("timedOut", v);
        }
        if let Some(v) = self.tls {
            out.bool("tls", v);
        }
        if let Some(v) = &self.rule {
            out.str("rule", v);
        }
        if let Some(k) = &self.key {
            out.key("key", &k.label, &k.value);
        }
        if let Some(v) = &self.dimension {
            out.str("dimension", v);
        }
        for (name, v) in [("limit", self.limit), ("used", self.used), ("reserved", self.reserved)] {
            if let Some(v) = v {
                out.num(name, v);
            }
        }
        match &self.resets_at {
            Some(Some(at)) => out.str("resetsAt", at),
            Some(None) => out.null("resetsAt"),
            None => {}
        }
        if let Some(v) = self.retryable {
            out.bool("retryable", v);
        }
        if let Some(v) = self.cleanup {
            out.str("cleanup", v);
        }
        if let Some(v) = &self.operation {
            out.str("operation", v);
        }
        for (name, v) in &self.extra {
            match v {
                Extra::Str(s) => out.str(name, s),
                Extra::Num(n) => out.num(name, *n),
                Extra::Bool(b) => out.bool(name, *b),
                Extra::Strs(s) => out.strs(name, s),
            }
        }
    }
}

impl From<CoreError> for Failure {
    fn from(e: CoreError) -> Self {
        let mut out = Fault::new(e.class(), e.code(), e.to_string());
        out.field = e.field().map(str::to_string);
        if let CoreError::DuplicateProvider(id) = e {
            out.provider_id = Some(id);
        }
        out
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
