//! The instance-counting readers' shared plan (E2B, Microsandbox, Agent37): a slot limit,
//! a per-launch demand, and the measurement of a count against them.

use super::config::ReaderConfig;
use super::http;
use crate::core::capacity::{Measurement, UnknownReason};

/// The configured slot limit and per-launch demand (1 when not configured) for the
/// instance-counting readers (E2B, Microsandbox, Agent37); no limit is
/// `LIMIT_NOT_CONFIGURED`, decided before any request. (Compute dimensions never get here:
/// these providers' lists carry no trustworthy per-account compute usage, so the options
/// rule refuses them, `config::Kind::dimensions`.)
pub(crate) fn slot_plan(cfg: &ReaderConfig) -> Result<(f64, f64), UnknownReason> {
    let limit = cfg.limits.sandboxes.ok_or(UnknownReason::LimitNotConfigured)?;
    Ok((limit, cfg.demand.sandboxes.unwrap_or(1.0)))
}

/// What an instance-counting reader needs before its first request: the slot plan
/// ([`slot_plan`]) and an authenticated client. `Err` is the measurement that ends the read.
pub(crate) fn slot_reader(
    cfg: &ReaderConfig,
    auth: http::Auth<'_>,
) -> Result<(f64, f64, http::HttpFetch), Measurement> {
    let (limit, required) = slot_plan(cfg).map_err(Measurement::Unknown)?;
    let fetch = http::HttpFetch::new(auth, &[]).map_err(Measurement::Unknown)?;
    Ok((limit, required, fetch))
}

/// A slot count, or why there is none, as a measurement against `limit`.
pub(crate) fn slots_or_unknown(counted: Result<usize, UnknownReason>, limit: f64, required: f64) -> Measurement {
    match counted {
        Ok(n) => slots(n, limit, required),
        Err(r) => Measurement::Unknown(r),
    }
}

/// `used` sandboxes against a slot limit, as a measurement.
pub(crate) fn slots(used: usize, limit: f64, required: f64) -> Measurement {
    Measurement::Known(vec![crate::core::capacity::ResourceMeasurement::new(
        "sandboxes",
        used as f64,
        limit,
        "sandboxes",
        required,
    )])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readers::test_support::config;
    use serde_json::json;

    #[test]
    fn slot_plan_needs_a_limit_and_defaults_demand_to_one() {
        let cfg = |v| config("e2b", v);
        assert_eq!(slot_plan(&cfg(json!({}))), Err(UnknownReason::LimitNotConfigured));
        assert_eq!(slot_plan(&cfg(json!({"limits": {"sandboxes": 5}}))), Ok((5.0, 1.0)));
        assert_eq!(slot_plan(&cfg(json!({"limits": {"sandboxes": 5}, "demand": {"sandboxes": 2}}))), Ok((5.0, 2.0)));
    }
}
