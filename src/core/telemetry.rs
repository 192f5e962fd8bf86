//! What the router's OpenTelemetry instruments say, decided once: the outcome of a
//! provision, the bounded reason of a capacity skip, the circuit-state gauge's value, the
//! histograms' bucket boundaries, and the label key of a propagated trace context.
//!
//! Why in the core? An outcome name is a classification of the machine's [`Outcome`], and
//! a skip reason (`capacity::skip_reason`) a classification of its `SkipStatus` and reason: if JavaScript derived
//! them it would keep a second copy of the rules the machine already applies (which code
//! means a deadline, which refusal means "nothing will change"), and the two would drift.
//! Here they sit next to those rules, each with its unit test; `lib/telemetry.js` only
//! hands the names to the OpenTelemetry API.
//!
//! Why bounded sets? Every name here becomes a metric attribute, and each distinct value
//! is a time series an operator's Prometheus keeps. Pool ids and codes are bounded by the
//! router's own configuration; a sandbox id, a label value, a reader's dimension name or a
//! provider's text is not (and may be a secret), so none of them is ever a value here.

use crate::core::acquisition::Outcome;
use crate::core::health::CircuitState;

/// How a provision ended, as `sandbox_router_provision_duration_seconds` names it
/// (attribute `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProvisionOutcome {
    /// A sandbox was handed back.
    Success,
    /// Retry later: every allowed attempt failed retryably, or capacity admitted no pool.
    Exhausted,
    /// A failure that ends the provision: a terminal or outcome-unknown launch failure, a
    /// malformed handle, a missing package, a failed intent or mapping write.
    Terminal,
    /// A launch did not settle within its deadline (outcome unknown).
    TimedOut,
    /// Nothing will change: no pool is eligible (at route time, or every circuit at
    /// launch time).
    NotEligible,
    /// Refused before routing: an invalid request or labels, credential readiness or the
    /// signal resolver failing.
    Refused,
}

impl ProvisionOutcome {
    /// Every outcome, in documentation order.
    pub const ALL: [ProvisionOutcome; 6] = [
        ProvisionOutcome::Success,
        ProvisionOutcome::Exhausted,
        ProvisionOutcome::Terminal,
        ProvisionOutcome::TimedOut,
        ProvisionOutcome::NotEligible,
        ProvisionOutcome::Refused,
    ];

    /// The attribute value.
    pub fn name(self) -> &'static str {
        match self {
            ProvisionOutcome::Success => "success",
            ProvisionOutcome::Exhausted => "exhausted",
            ProvisionOutcome::Terminal => "terminal",
            ProvisionOutcome::TimedOut => "timed_out",
            ProvisionOutcome::NotEligible => "not_eligible",
            ProvisionOutcome::Refused => "refused",
        }
    }

    /// The outcome of a provision whose machine ended with `outcome`.
    pub fn of_machine(outcome: &Outcome) -> ProvisionOutcome {
        match outcome {
            Outcome::Succeeded(_) | Outcome::Claimed(_) => ProvisionOutcome::Success,
            // A budget with no room (or a shared ledger that could not be asked) is "retry
            // later" too: `retryable` and `resetsAt` on the error say when.
            Outcome::Exhausted { .. }
            | Outcome::NoCapacity
            | Outcome::ExhaustedByCapacity
            | Outcome::BudgetExhausted
            | Outcome::RateLimited { .. }
            | Outcome::BudgetUnavailable { .. } => ProvisionOutcome::Exhausted,
            Outcome::TimedOut { .. } => ProvisionOutcome::TimedOut,
            Outcome::CircuitOpen { .. } => ProvisionOutcome::NotEligible,
            Outcome::Terminal { .. } | Outcome::PackageFailed { .. } | Outcome::Aborted => ProvisionOutcome::Terminal,
        }
    }

    /// The outcome of a provision that failed with the router's error `code` outside its
    /// machine's own ending: before the machine began (`began` false: a refusal, or no
    /// eligible pool), or after it succeeded (a mapping write failed: terminal).
    pub fn outside_machine(code: &str, began: bool) -> ProvisionOutcome {
        match code {
            NO_ELIGIBLE_PROVIDER => ProvisionOutcome::NotEligible,
            _ if began => ProvisionOutcome::Terminal,
            _ => ProvisionOutcome::Refused,
        }
    }
}

/// The code of a route that left no eligible pool.
pub const NO_ELIGIBLE_PROVIDER: &str = "NO_ELIGIBLE_PROVIDER";

/// `sandbox_router_circuit_state`'s value: 0 closed, 1 half-open, 2 open (so "> 0" is "not
/// routing as usual", and a max over pools shows the worst).
pub fn circuit_gauge(state: &CircuitState) -> u32 {
    match state {
        CircuitState::Closed => 0,
        CircuitState::HalfOpen { .. } => 1,
        CircuitState::Open { .. } => 2,
    }
}

/// Bucket boundaries, in seconds, of the provision and operation duration histograms. A
/// sandbox launch takes 0.2-2 s (a warm one far less), an operation by id from
/// milliseconds (a stop) to minutes (a long script): finer where launches fall, then up to
/// ten minutes. (The SDK's default boundaries, 0 to 10,000, are shaped for milliseconds:
/// every launch would fall in its first two buckets.)
pub const DURATION_BUCKETS_SECONDS: [f64; 17] =
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 120.0, 600.0];

/// Bucket boundaries, in seconds, of the capacity read histogram: a provider's inventory
/// call answers in milliseconds to seconds, bounded by `capacity.timeoutMs` (5 s by
/// default, at most 600 s).
pub const READ_BUCKETS_SECONDS: [f64; 14] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0];

/// The launch label that carries the provision span's W3C trace context, when
/// `telemetry.propagateToLabels` is set: its `traceparent` header value (55 characters of
/// `[0-9a-f-]`, which every provider's label rules accept).
pub const TRACEPARENT_LABEL: &str = "traceparent";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::acquisition::{ACQUISITION_EXHAUSTED, ACQUISITION_TIMEOUT, CAPACITY_EXHAUSTED, MALFORMED_HANDLE};
    use crate::core::health::Cause;

    #[test]
    fn every_machine_outcome_has_its_provision_outcome() {
        let cases = [
            (Outcome::Succeeded(0), ProvisionOutcome::Success),
            (Outcome::Exhausted { pool: 1 }, ProvisionOutcome::Exhausted),
            (Outcome::NoCapacity, ProvisionOutcome::Exhausted),
            (Outcome::ExhaustedByCapacity, ProvisionOutcome::Exhausted),
            (Outcome::BudgetExhausted, ProvisionOutcome::Exhausted),
            (Outcome::RateLimited { until: 0 }, ProvisionOutcome::Exhausted),
            (Outcome::BudgetUnavailable { rule: 0 }, ProvisionOutcome::Exhausted),
            (Outcome::TimedOut { pool: 0 }, ProvisionOutcome::TimedOut),
            (Outcome::CircuitOpen { pool: 0 }, ProvisionOutcome::NotEligible),
            (Outcome::Terminal { pool: 0, code: "PROVIDER_QUOTA".into() }, ProvisionOutcome::Terminal),
            (Outcome::Terminal { pool: 0, code: MALFORMED_HANDLE.into() }, ProvisionOutcome::Terminal),
            (Outcome::PackageFailed { pool: 0, code: "PROVIDER_PACKAGE_MISSING".into() }, ProvisionOutcome::Terminal),
        ];
        for (outcome, expected) in cases {
            assert_eq!(ProvisionOutcome::of_machine(&outcome), expected, "{outcome:?}");
        }
    }

    #[test]
    fn a_classifier_code_that_spells_a_router_code_is_still_terminal_inside_the_machine() {
        // The machine's own ending decides, never the code's spelling.
        for code in [ACQUISITION_TIMEOUT, ACQUISITION_EXHAUSTED, CAPACITY_EXHAUSTED, NO_ELIGIBLE_PROVIDER] {
            let o = Outcome::Terminal { pool: 0, code: code.into() };
            assert_eq!(ProvisionOutcome::of_machine(&o), ProvisionOutcome::Terminal);
        }
    }

    #[test]
    fn refused_must_fire_before_the_machine_and_must_not_fire_after_it() {
        assert_eq!(ProvisionOutcome::outside_machine("INVALID_REQUEST", false), ProvisionOutcome::Refused);
        assert_eq!(
            ProvisionOutcome::outside_machine("PROVISIONING_AVAILABILITY_FAILED", false),
            ProvisionOutcome::Refused
        );
        assert_eq!(ProvisionOutcome::outside_machine("MAPPING_PERSISTENCE_FAILED", true), ProvisionOutcome::Terminal);
        assert_eq!(ProvisionOutcome::outside_machine("INTERNAL_ERROR", true), ProvisionOutcome::Terminal);
    }

    #[test]
    fn no_eligible_provider_is_not_eligible_before_or_after_the_machine_began() {
        for began in [false, true] {
            assert_eq!(ProvisionOutcome::outside_machine(NO_ELIGIBLE_PROVIDER, began), ProvisionOutcome::NotEligible);
        }
    }

    #[test]
    fn outcome_names_are_distinct_snake_case() {
        let names: Vec<_> = ProvisionOutcome::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(names, ["success", "exhausted", "terminal", "timed_out", "not_eligible", "refused"]);
    }

    #[test]
    fn circuit_gauge_orders_closed_half_open_open() {
        let cause = Cause::Failures;
        assert_eq!(circuit_gauge(&CircuitState::Closed), 0);
        assert_eq!(circuit_gauge(&CircuitState::HalfOpen { trial_in_flight: true, cause }), 1);
        assert_eq!(circuit_gauge(&CircuitState::Open { retry_at: 0, cause }), 2);
    }

    #[test]
    fn bucket_boundaries_are_ascending_seconds() {
        for buckets in [&DURATION_BUCKETS_SECONDS[..], &READ_BUCKETS_SECONDS[..]] {
            assert!(buckets.windows(2).all(|w| w[0] < w[1]));
            assert!(buckets[0] > 0.0 && buckets[buckets.len() - 1] <= 600.0);
        }
        // a launch's typical range (0.2-2 s) spans several buckets, not one
        assert!(DURATION_BUCKETS_SECONDS.iter().filter(|&&b| (0.2..=2.0).contains(&b)).count() >= 5);
        // the default capacity deadline (5 s) is a boundary: a timed-out read is told apart
        assert!(READ_BUCKETS_SECONDS.contains(&5.0));
    }
}
