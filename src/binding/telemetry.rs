//! napi glue for what the telemetry instruments say (`core::telemetry`): the provision
//! outcome as a string enum, the outcome of a failure outside the machine's own ending, and
//! the schema `lib/telemetry.js` reads once at load (bucket boundaries, the bounded skip
//! reasons). Nothing is decided here.
//!
//! The machine's own ending crosses with its failure (`AcquisitionFailure.outcome`) and a
//! capacity skip's bounded reason with its event (`EventRecord.skipReason`), so a provision
//! with telemetry on makes no extra native call for them.

use crate::core::telemetry as core;
use napi_derive::napi;

/// How a provision ended (attribute `outcome` of `sandbox_router_provision_duration_seconds`).
#[napi(string_enum)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ProvisionOutcome {
    /// A sandbox was handed back.
    #[napi(value = "success")]
    Success,
    /// Retry later: every allowed attempt failed retryably, or capacity admitted no pool.
    #[napi(value = "exhausted")]
    Exhausted,
    /// A failure that ends the provision (terminal or outcome-unknown launch failure,
    /// malformed handle, missing package, failed intent or mapping write).
    #[napi(value = "terminal")]
    Terminal,
    /// A launch did not settle within its deadline.
    #[napi(value = "timed_out")]
    TimedOut,
    /// No pool is eligible (at route time, or every circuit at launch time).
    #[napi(value = "not_eligible")]
    NotEligible,
    /// Refused before routing (request, labels, readiness, resolver).
    #[napi(value = "refused")]
    Refused,
}

impl From<core::ProvisionOutcome> for ProvisionOutcome {
    fn from(o: core::ProvisionOutcome) -> Self {
        match o {
            core::ProvisionOutcome::Success => ProvisionOutcome::Success,
            core::ProvisionOutcome::Exhausted => ProvisionOutcome::Exhausted,
            core::ProvisionOutcome::Terminal => ProvisionOutcome::Terminal,
            core::ProvisionOutcome::TimedOut => ProvisionOutcome::TimedOut,
            core::ProvisionOutcome::NotEligible => ProvisionOutcome::NotEligible,
            core::ProvisionOutcome::Refused => ProvisionOutcome::Refused,
        }
    }
}

/// The outcome of a provision that failed with the router's error `code` outside its
/// machine's own ending: before the machine began (`began` false) or after it succeeded
/// (a mapping write). See `core::telemetry::ProvisionOutcome::outside_machine`.
#[napi]
pub fn provision_outcome(code: String, began: bool) -> ProvisionOutcome {
    core::ProvisionOutcome::outside_machine(&code, began).into()
}

/// The values the telemetry instruments are built with, read once.
#[napi(object)]
pub struct TelemetrySchema {
    /// Bucket boundaries (seconds) of the provision and operation duration histograms.
    pub duration_buckets: Vec<f64>,
    /// Bucket boundaries (seconds) of the capacity read histogram.
    pub read_buckets: Vec<f64>,
    /// Every value of `sandbox_router_capacity_skips_total`'s attribute `reason`.
    pub skip_reasons: Vec<String>,
    /// Every value of the provision outcome, in documentation order.
    pub outcomes: Vec<ProvisionOutcome>,
    /// Every instrument the router records (`core::telemetry::INSTRUMENTS`).
    pub instruments: Vec<InstrumentRecord>,
}

/// One instrument (`core::telemetry::Instrument`).
#[napi(object)]
pub struct InstrumentRecord {
    /// What the code records into.
    pub key: String,
    /// The Prometheus form without `_total`.
    pub name: String,
    /// `counter`, `upDownCounter`, `histogram` or `gauge`.
    pub kind: String,
    /// `s`, or a `{curly}` annotation.
    pub unit: String,
    /// A histogram's bucket boundaries, seconds.
    pub buckets: Option<Vec<f64>>,
    /// Every attribute key it records.
    pub attributes: Vec<String>,
    /// What it measures.
    pub description: String,
}

/// The telemetry schema (see [`TelemetrySchema`]).
#[napi]
pub fn telemetry_schema() -> TelemetrySchema {
    TelemetrySchema {
        duration_buckets: core::DURATION_BUCKETS_SECONDS.to_vec(),
        read_buckets: core::READ_BUCKETS_SECONDS.to_vec(),
        skip_reasons: crate::core::capacity::skip_reasons().into_iter().map(str::to_string).collect(),
        outcomes: core::ProvisionOutcome::ALL.into_iter().map(ProvisionOutcome::from).collect(),
        instruments: core::INSTRUMENTS
            .iter()
            .map(|i| InstrumentRecord {
                key: i.key.into(),
                name: i.name.into(),
                kind: i.kind.into(),
                unit: i.unit.into(),
                buckets: i.buckets.map(<[f64]>::to_vec),
                attributes: i.attributes.iter().map(|a| a.to_string()).collect(),
                description: i.description.into(),
            })
            .collect(),
    }
}

/// The launch label that carries the provision span's W3C `traceparent` when
/// `telemetry.propagateToLabels` is set (`core::telemetry::TRACEPARENT_LABEL`).
#[napi]
pub const TRACEPARENT_LABEL: &str = core::TRACEPARENT_LABEL;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_lists_every_outcome_once_in_order() {
        let s = telemetry_schema();
        assert_eq!(s.outcomes.len(), core::ProvisionOutcome::ALL.len());
        assert_eq!(s.outcomes[0], ProvisionOutcome::Success);
        assert_eq!(s.outcomes[5], ProvisionOutcome::Refused);
        assert_eq!(provision_outcome("NO_ELIGIBLE_PROVIDER".into(), false), ProvisionOutcome::NotEligible);
        assert_eq!(provision_outcome("INVALID_REQUEST".into(), false), ProvisionOutcome::Refused);
    }
}
