//! Rejection reasons: constants with one meaning each.
//!
//! Why constants and not free text? (Kubernetes' `ErrReason…` pattern.) An explanation
//! can then count them across pools ("3 missing capability pty"), tests can assert them,
//! and callers can branch on them without parsing prose.

/// Why a pool cannot serve a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Reason {
    /// The request names another provider id.
    ProviderIdMismatch,
    /// Detached launch requested, the runtime has no `launchDetached`.
    DetachedUnsupported,
    /// The credential-readiness port answered `false`.
    CredentialsUnavailable,
    /// A required named capability is not declared.
    RequiredCapabilityMissing,
    /// A forbidden named capability is declared.
    ForbiddenCapabilityPresent,
    /// Image identity differs or is undeclared.
    ImageMismatch,
    /// A required binary is not declared in the image.
    RequiredBinaryMissing,
    /// Egress class not acceptable or undeclared.
    EgressMismatch,
    /// A required timeout semantics is not declared.
    TimeoutSemanticsMissing,
    /// Timeout granularity is coarser than allowed, or undeclared.
    TimeoutGranularity,
    /// Sandbox lifetime unknown or shorter than required.
    SandboxLifetime,
    /// State durability below the requirement, or undeclared.
    StateDurability,
    /// A required restriction is not enforced.
    RestrictionMissing,
    /// The pool's regions are outside a required region set.
    RegionMismatch,
    /// A resource need exceeds the pool's declared limit.
    ResourcesInsufficient,
    /// Isolation below the requirement, or undeclared.
    IsolationInsufficient,
    /// The signal resolver threw or did not answer.
    SignalsUnresolved,
    /// Signals are missing, non-finite, negative or out of range.
    InvalidSignals,
    /// The pool reports `available: false`.
    Unavailable,
    /// The latency objective's signal exceeds `maxReadyLatencyMs`.
    LatencyBudget,
    /// Capacity routing is on and the pool is not in `providerOrder`.
    NotInProviderOrder,
    /// The pool's circuit is open (live health), or half-open with its one trial running.
    CircuitOpen,
    /// Explanations only: a budget rule of the router has no room for the pool's
    /// estimated cost (a provision skips it at launch time, `BUDGET_EXCEEDED`).
    BudgetExceeded,
    /// Explanations only: the pool has no launch token now (its `rateLimit`; a provision
    /// skips it at launch time, `RATE_LIMITED`).
    RateLimited,
    /// Explanations only: the pool cools down after a `Retry-After` (a provision skips it
    /// at launch time, `COOLING_DOWN`).
    CoolingDown,
}

impl Reason {
    /// The stable code.
    pub fn code(self) -> &'static str {
        match self {
            Reason::ProviderIdMismatch => "PROVIDER_ID_MISMATCH",
            Reason::DetachedUnsupported => "DETACHED_UNSUPPORTED",
            Reason::CredentialsUnavailable => "CREDENTIALS_UNAVAILABLE",
            Reason::RequiredCapabilityMissing => "REQUIRED_CAPABILITY_MISSING",
            Reason::ForbiddenCapabilityPresent => "FORBIDDEN_CAPABILITY_PRESENT",
            Reason::ImageMismatch => "IMAGE_MISMATCH",
            Reason::RequiredBinaryMissing => "REQUIRED_BINARY_MISSING",
            Reason::EgressMismatch => "EGRESS_MISMATCH",
            Reason::TimeoutSemanticsMissing => "TIMEOUT_SEMANTICS_MISSING",
            Reason::TimeoutGranularity => "TIMEOUT_GRANULARITY",
            Reason::SandboxLifetime => "SANDBOX_LIFETIME",
            Reason::StateDurability => "STATE_DURABILITY",
            Reason::RestrictionMissing => "RESTRICTION_MISSING",
            Reason::RegionMismatch => "REGION_MISMATCH",
            Reason::ResourcesInsufficient => "RESOURCES_INSUFFICIENT",
            Reason::IsolationInsufficient => "ISOLATION_INSUFFICIENT",
            Reason::SignalsUnresolved => "SIGNALS_UNRESOLVED",
            Reason::InvalidSignals => "INVALID_SIGNALS",
            Reason::Unavailable => "UNAVAILABLE",
            Reason::LatencyBudget => "LATENCY_BUDGET",
            Reason::NotInProviderOrder => "NOT_IN_PROVIDER_ORDER",
            Reason::CircuitOpen => "CIRCUIT_OPEN",
            Reason::BudgetExceeded => crate::core::budget::BUDGET_EXCEEDED,
            Reason::RateLimited => crate::core::pacing::RATE_LIMITED,
            Reason::CoolingDown => crate::core::pacing::COOLING_DOWN,
        }
    }

    /// Position in [`Reason::ALL`]: how a reason crosses to JavaScript (which reads the
    /// codes once, in that order).
    pub fn index(self) -> u32 {
        self as u32
    }

    /// Every reason, for documentation and tests.
    pub const ALL: [Reason; 25] = [
        Reason::ProviderIdMismatch,
        Reason::DetachedUnsupported,
        Reason::CredentialsUnavailable,
        Reason::RequiredCapabilityMissing,
        Reason::ForbiddenCapabilityPresent,
        Reason::ImageMismatch,
        Reason::RequiredBinaryMissing,
        Reason::EgressMismatch,
        Reason::TimeoutSemanticsMissing,
        Reason::TimeoutGranularity,
        Reason::SandboxLifetime,
        Reason::StateDurability,
        Reason::RestrictionMissing,
        Reason::RegionMismatch,
        Reason::ResourcesInsufficient,
        Reason::IsolationInsufficient,
        Reason::SignalsUnresolved,
        Reason::InvalidSignals,
        Reason::Unavailable,
        Reason::LatencyBudget,
        Reason::NotInProviderOrder,
        Reason::CircuitOpen,
        Reason::BudgetExceeded,
        Reason::RateLimited,
        Reason::CoolingDown,
    ];
}

/// One reason a pool was rejected, with a detail and the phrase used in summaries.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// The reason constant.
    pub reason: Reason,
    /// Detail for this pool, e.g. `cpu 4 > 2` (never a secret: only declarations and
    /// request requirements).
    pub detail: String,
    /// Pool-independent phrase that summaries count, e.g. `missing capability pty`.
    pub phrase: String,
}

impl Rejection {
    /// Builds a rejection.
    pub fn new(reason: Reason, detail: impl Into<String>, phrase: impl Into<String>) -> Self {
        Rejection { reason, detail: detail.into(), phrase: phrase.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn index_is_the_position_in_all() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(r.index() as usize, i, "{}", r.code());
        }
    }
}
