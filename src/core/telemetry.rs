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

/// Bucket boundaries, in seconds, of the queue wait histogram: from a token's turn (tens of
/// milliseconds) to `queue.maxWaitMs`'s longest (an hour).
pub const QUEUE_WAIT_BUCKETS_SECONDS: [f64; 14] =
    [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0];

/// One instrument the router records (`lib/otel.js` makes each on the caller's meter;
/// docs/telemetry.md's table is checked against this list).
#[derive(Debug, Clone, Copy)]
pub struct Instrument {
    /// What the code records into (`ctx.telemetry.add(key, …)`).
    pub key: &'static str,
    /// The Prometheus form without `_total`; a duration ends in `_seconds`.
    pub name: &'static str,
    /// `counter`, `upDownCounter`, `histogram` or `gauge` (an observable one).
    pub kind: &'static str,
    /// `s`, or a `{curly}` annotation for counts.
    pub unit: &'static str,
    /// A histogram's bucket boundaries, seconds.
    pub buckets: Option<&'static [f64]>,
    /// Every attribute key it records (each a bounded set).
    pub attributes: &'static [&'static str],
    /// What it measures.
    pub description: &'static str,
}

/// Every instrument the router records, the one list.
pub const INSTRUMENTS: &[Instrument] = &[
    Instrument {
        key: "provisionDuration",
        name: "sandbox_router_provision_duration_seconds",
        kind: "histogram",
        unit: "s",
        buckets: Some(&DURATION_BUCKETS_SECONDS),
        attributes: &["pool", "outcome", "launch_type"],
        description: "Time from provision() to its sandbox or its error, by outcome",
    },
    Instrument {
        key: "attempts",
        name: "sandbox_router_attempts",
        kind: "counter",
        unit: "{attempt}",
        buckets: None,
        attributes: &["pool", "result"],
        description: "Launch attempts, by pool and result (success, retryable, terminal)",
    },
    Instrument {
        key: "fallbacks",
        name: "sandbox_router_fallbacks",
        kind: "counter",
        unit: "{fallback}",
        buckets: None,
        attributes: &["pool"],
        description: "Fallbacks to the next pool after a classified pre-allocation failure on this pool",
    },
    Instrument {
        key: "capacitySkips",
        name: "sandbox_router_capacity_skips",
        kind: "counter",
        unit: "{skip}",
        buckets: None,
        attributes: &["pool", "reason"],
        description: "Pools passed over by capacity admission, by bounded reason",
    },
    Instrument {
        key: "budgetRefusals",
        name: "sandbox_router_budget_refusals",
        kind: "counter",
        unit: "{refusal}",
        buckets: None,
        attributes: &["pool", "rule", "dimension"],
        description: "Candidates a budget rule refused (skipped without an attempt), by rule and limit",
    },
    Instrument {
        key: "capacityReadDuration",
        name: "sandbox_router_capacity_read_duration_seconds",
        kind: "histogram",
        unit: "s",
        buckets: Some(&READ_BUCKETS_SECONDS),
        attributes: &["pool"],
        description: "A provision's capacity read: the pool's reader, bounded by capacity.timeoutMs",
    },
    Instrument {
        key: "circuitState",
        name: "sandbox_router_circuit_state",
        kind: "gauge",
        unit: "{state}",
        buckets: None,
        attributes: &["pool"],
        description: "Each pool's circuit: 0 closed, 1 half-open, 2 open",
    },
    Instrument {
        key: "warmClaims",
        name: "sandbox_router_warm_claims",
        kind: "counter",
        unit: "{claim}",
        buckets: None,
        attributes: &["pool", "result", "reason"],
        description: "A provision's claim step on a warm pool: hit, or miss with its reason",
    },
    Instrument {
        key: "warmIdle",
        name: "sandbox_router_warm_idle_members",
        kind: "gauge",
        unit: "{sandbox}",
        buckets: None,
        attributes: &["pool"],
        description: "Each warm pool's idle members in this process's inventory",
    },
    Instrument {
        key: "operations",
        name: "sandbox_router_operations",
        kind: "counter",
        unit: "{operation}",
        buckets: None,
        attributes: &["operation", "outcome"],
        description: "Operations by id, by outcome (success or the error code)",
    },
    Instrument {
        key: "operationDuration",
        name: "sandbox_router_operations_duration_seconds",
        kind: "histogram",
        unit: "s",
        buckets: Some(&DURATION_BUCKETS_SECONDS),
        attributes: &["operation", "outcome"],
        description: "Time of an operation by id, by outcome",
    },
    Instrument {
        key: "reconcileFound",
        name: "sandbox_router_reconcile_found",
        kind: "counter",
        unit: "{sandbox}",
        buckets: None,
        attributes: &["class"],
        description: "What reconcile runs found: orphans, stale mappings, stale intents",
    },
    Instrument {
        key: "queueDepth",
        name: "sandbox_router_queue_depth",
        kind: "gauge",
        unit: "{provision}",
        buckets: None,
        attributes: &[],
        description: "Provisions waiting in the router's queue (option queue)",
    },
    Instrument {
        key: "queueWait",
        name: "sandbox_router_queue_wait_seconds",
        kind: "histogram",
        unit: "s",
        buckets: Some(&QUEUE_WAIT_BUCKETS_SECONDS),
        attributes: &["result"],
        description: "How long a provision waited in the queue, by result (admitted, timeout)",
    },
    Instrument {
        key: "rateLimited",
        name: "sandbox_router_rate_limited",
        kind: "counter",
        unit: "{skip}",
        attributes: &["pool", "reason"],
        buckets: None,
        description: "Pools a provision passed over for pacing, by reason (RATE_LIMITED, COOLING_DOWN, QUEUED)",
    },
];

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
