//! How a failed acquisition is reported: the error a caller catches, decided once, here.
//!
//! Why in the core? The class of the error, its code, its message and the fields it
//! carries are as much the router's policy as the fallback rule that produced them, and so
//! is the question the JS layer must answer after a failure: *may a sandbox exist now?*
//! (it decides whether a launch intent becomes `failed`, so that `reconcile` finds the
//! sandbox at once, or is removed). Kept here, with one unit test per outcome, the JS side
//! builds the instance and asks nothing.
//!
//! Messages name pools, codes and numbers, never a provider's text.

use crate::core::acquisition::{Acquisition, Outcome, MALFORMED_HANDLE};
use crate::core::error::ErrorClass;
use crate::core::request::SANDBOX_ID_LABEL;

/// The rejection list a failure carries (the error's `rejections` field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejections {
    /// `NO_ELIGIBLE_PROVIDER` at launch time: this pool's circuit excluded it.
    Circuit(usize),
    /// `PROVIDER_CAPACITY_EXHAUSTED`: the machine's capacity skips.
    Capacity,
}

/// What a failed acquisition is reported as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The error class.
    pub class: ErrorClass,
    /// The error's code.
    pub code: String,
    /// The error's message.
    pub message: String,
    /// The pool the error names (`providerId`), if any.
    pub pool: Option<usize>,
    /// `timeoutMs` (a launch deadline).
    pub timeout_ms: Option<u64>,
    /// `summary` (no pool eligible at launch time).
    pub summary: Option<String>,
    /// `rejections`.
    pub rejections: Option<Rejections>,
    /// Whether the error lists the failed `attempts`.
    pub attempts: bool,
    /// Whether the error lists the capacity skips as `capacityRejections`.
    pub capacity_rejections: bool,
    /// Whether a sandbox may exist after this failure: an outcome-unknown or terminal
    /// failure, a malformed handle, or a launch deadline. Retryable failures were proven
    /// pre-allocation by the classifier; a package failure (or a failed intent write)
    /// called no launch; capacity and circuit refusals launched nothing.
    pub may_exist: bool,
    /// The runtime threw the router's own package error: the JS layer rethrows that error
    /// object as it is.
    pub package: bool,
}

/// The report of `machine`'s failure (None while it runs or after a success).
///
/// `id(pool)` names a pool, `sandbox_id` is the provision's id, `timeout_ms` its launch
/// deadline, and `capacity_routing` whether the router routes by capacity (then even a
/// terminal failure lists the capacity skips).
pub fn failure_of<'a>(
    machine: &Acquisition,
    id: impl Fn(usize) -> &'a str,
    sandbox_id: &str,
    timeout_ms: u64,
    capacity_routing: bool,
) -> Option<Report> {
    let outcome = machine.outcome()?;
    let code = outcome.code()?.to_string();
    let base = Report {
        class: ErrorClass::ProviderProvisioning,
        code: code.clone(),
        message: String::new(),
        pool: None,
        timeout_ms: None,
        summary: None,
        rejections: None,
        attempts: true,
        capacity_rejections: false,
        may_exist: false,
        package: false,
    };
    Some(match *outcome {
        Outcome::Succeeded(_) | Outcome::Claimed(_) => return None,
        Outcome::PackageFailed { pool, .. } => Report {
            message: format!("the runtime of {} could not be loaded", id(pool)),
            pool: Some(pool),
            package: true,
            ..base
        },
        Outcome::TimedOut { pool } => Report {
            class: ErrorClass::AcquisitionTimeout,
            message: format!(
                "launch on {} did not settle within {timeout_ms} ms; outcome unknown (label {SANDBOX_ID_LABEL}={sandbox_id})",
                id(pool)
            ),
            pool: Some(pool),
            timeout_ms: Some(timeout_ms),
            may_exist: true,
            ..base
        },
        Outcome::CircuitOpen { pool } => Report {
            class: ErrorClass::NoEligibleProvider,
            message: format!("0 providers eligible at launch: {} circuit open", id(pool)),
            summary: Some("0 providers eligible at launch: circuit open".to_string()),
            rejections: Some(Rejections::Circuit(pool)),
            ..base
        },
        Outcome::NoCapacity => Report {
            class: ErrorClass::CapacityExhausted,
            message: format!(
                "no provider has capacity: {}",
                machine
                    .skipped()
                    .iter()
                    .map(|s| format!("{} {} {}", id(s.pool), s.status.name(), s.reason))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            rejections: Some(Rejections::Capacity),
            attempts: false,
            ..base
        },
        Outcome::RateLimited { .. } => Report {
            class: ErrorClass::CapacityExhausted,
            message: format!(
                "every provider is paced now: {}",
                machine
                    .skipped()
                    .iter()
                    .map(|s| format!("{} {}", id(s.pool), s.reason))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            rejections: Some(Rejections::Capacity),
            attempts: false,
            ..base
        },
        Outcome::BudgetExhausted => {
            let rule = |i: usize| machine.budget_plan().and_then(|p| p.rule_ids.get(i).cloned()).unwrap_or_default();
            Report {
                class: ErrorClass::BudgetExhausted,
                message: format!(
                    "no provider fits the budget: {}",
                    machine
                        .budget_refusals()
                        .iter()
                        .filter_map(|(pool, rs)| rs.first().map(|r| format!("{} over {}", id(*pool), r.text(&rule(r.rule)))))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                rejections: Some(Rejections::Capacity),
                attempts: false,
                ..base
            }
        }
        Outcome::BudgetUnavailable { rule } => Report {
            class: ErrorClass::BudgetExhausted,
            message: format!(
                "the shared budget ledger could not be asked, and rule {} refuses then (onStoreDown: 'refuse'); nothing was launched",
                machine.budget_plan().and_then(|p| p.rule_ids.get(rule).cloned()).unwrap_or_default()
            ),
            attempts: false,
            ..base
        },
        Outcome::Aborted => Report {
            class: ErrorClass::Aborted,
            message: "the provision was aborted before its launch: nothing was launched and nothing is held".to_string(),
            attempts: false,
            ..base
        },
        Outcome::ExhaustedByCapacity => Report {
            message: format!(
                "acquisition exhausted after {} attempt(s); the remaining providers had no capacity",
                machine.launches()
            ),
            capacity_rejections: true,
            ..base
        },
        Outcome::Exhausted { pool } => Report {
            message: format!(
                "acquisition exhausted after {} attempt(s): {}",
                machine.launches(),
                machine.attempts().iter().map(|a| format!("{} {}", id(a.pool), a.code)).collect::<Vec<_>>().join(", ")
            ),
            pool: Some(pool),
            capacity_rejections: capacity_routing,
            ..base
        },
        Outcome::Terminal { pool, .. } if code == MALFORMED_HANDLE => Report {
            message: format!(
                "provider {} returned a malformed handle; the sandbox may exist (label {SANDBOX_ID_LABEL}={sandbox_id})",
                id(pool)
            ),
            pool: Some(pool),
            may_exist: true,
            ..base
        },
        Outcome::Terminal { pool, .. } => Report {
            message: format!("acquisition failed on {}: {code}", id(pool)),
            pool: Some(pool),
            capacity_rejections: capacity_routing,
            may_exist: true,
            ..base
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::acquisition::{CapacityPlan, ACQUISITION_EXHAUSTED, ACQUISITION_TIMEOUT};
    use crate::core::capabilities::Resources;
    use crate::core::capacity::{Ledger, Measurement, UnknownReason};

    const IDS: [&str; 3] = ["a", "b", "c"];
    const SBX: &str = "sbx_00000000000000000000000000000001";

    fn report(m: &Acquisition, capacity: bool) -> Report {
        failure_of(m, |i| IDS[i], SBX, 1_000, capacity).expect("a failure")
    }

    fn machine(candidates: Vec<usize>) -> Acquisition {
        Acquisition::new(candidates, 3, true, None, None)
    }

    #[test]
    fn may_exist_must_fire_for_a_deadline_a_malformed_handle_and_an_unclassified_failure() {
        let mut m = machine(vec![0]);
        m.next(None);
        m.timed_out(None);
        let f = report(&m, false);
        assert_eq!(
            (f.class, f.code.as_str(), f.may_exist, f.pool),
            (ErrorClass::AcquisitionTimeout, ACQUISITION_TIMEOUT, true, Some(0))
        );
        assert_eq!(f.timeout_ms, Some(1_000));
        assert_eq!(
            f.message,
            format!("launch on a did not settle within 1000 ms; outcome unknown (label agent-relay-sbx-id={SBX})")
        );

        let mut m = machine(vec![1]);
        m.next(None);
        m.malformed(None);
        let f = report(&m, false);
        assert!(f.may_exist);
        assert_eq!(f.code, MALFORMED_HANDLE);
        assert!(f.message.starts_with("provider b returned a malformed handle"), "{}", f.message);

        let mut m = machine(vec![2]);
        m.next(None);
        m.failed(None, None, None);
        let f = report(&m, false);
        assert!(f.may_exist);
        assert_eq!(f.message, "acquisition failed on c: PROVIDER_LAUNCH_OUTCOME_UNKNOWN");
        assert_eq!((f.pool, f.capacity_rejections), (Some(2), false));
    }

    #[test]
    fn may_exist_must_not_fire_for_proven_pre_allocation_failures_packages_and_refusals() {
        let mut m = machine(vec![0, 1]);
        for _ in 0..2 {
            m.next(None);
            m.failed(None, Some("PROVIDER_RATE_LIMITED"), Some(true));
        }
        let f = report(&m, false);
        assert_eq!((f.code.as_str(), f.may_exist, f.pool), (ACQUISITION_EXHAUSTED, false, Some(1)));
        assert_eq!(
            f.message,
            "acquisition exhausted after 2 attempt(s): a PROVIDER_RATE_LIMITED, b PROVIDER_RATE_LIMITED"
        );

        let mut m = machine(vec![0]);
        m.next(None);
        m.package_failed(None, "PROVIDER_PACKAGE_MISSING");
        let f = report(&m, false);
        assert!(f.package && !f.may_exist);

        let mut ledger = Ledger::new(60_000);
        let plan = CapacityPlan { need: Resources::default(), readers: vec![true, true], ledger_pools: vec![0, 1] };
        let mut m = Acquisition::new(vec![0, 1], 3, true, Some(plan), None);
        for _ in 0..2 {
            m.next(Some(&mut ledger));
            m.admit(&mut ledger, &Measurement::Unknown(UnknownReason::Timeout));
        }
        m.next(Some(&mut ledger));
        let f = report(&m, true);
        assert_eq!((f.class, f.may_exist, f.attempts), (ErrorClass::CapacityExhausted, false, false));
        assert_eq!(f.rejections, Some(Rejections::Capacity));
        assert_eq!(f.message, "no provider has capacity: a UNKNOWN TIMEOUT, b UNKNOWN TIMEOUT");
    }

    #[test]
    fn a_running_or_successful_machine_reports_no_failure() {
        let mut m = machine(vec![0]);
        assert!(failure_of(&m, |i| IDS[i], SBX, 1, false).is_none());
        m.next(None);
        m.succeeded(None);
        assert!(failure_of(&m, |i| IDS[i], SBX, 1, false).is_none());
    }

    #[test]
    fn a_terminal_failure_lists_capacity_skips_only_under_capacity_routing() {
        let mut m = machine(vec![0]);
        m.next(None);
        m.failed(None, Some("PROVIDER_QUOTA"), Some(false));
        assert!(report(&m, true).capacity_rejections);
        assert!(!report(&m, false).capacity_rejections);
    }
}
