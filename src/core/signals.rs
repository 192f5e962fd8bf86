//! Operational signals: comparable selection inputs, not charges or usage records.
//!
//! Why validate here and not at registration? Signals may be request-scoped (a caller's
//! resolver computes them per request), so a bad value must make *that pool* ineligible
//! for *that request* with `INVALID_SIGNALS`, never abort routing and never put a NaN
//! into a score.

use crate::core::json::{object, FieldError};
use crate::core::reasons::Reason;
use serde_json::Value;

/// Validated signals of one pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signals {
    /// Expected cost of the relevant acquisition (any consistent unit), >= 0.
    pub estimated_cost: f64,
    /// Time until the provider's create call returns, ms, >= 0.
    pub cold_start_latency_ms: f64,
    /// Time until the workload is actually ready, ms, >= 0.
    pub ready_latency_ms: f64,
    /// Share of runs completing within budget (hangs count as failures), 0..=1.
    pub completion_within_budget_rate: f64,
    /// Whether the pool currently accepts acquisitions.
    pub available: bool,
}

/// Keys of a signals object.
pub const SIGNAL_KEYS: &[&str] =
    &["estimatedCost", "coldStartLatencyMs", "readyLatencyMs", "completionWithinBudgetRate", "available"];

impl Signals {
    /// Reads and validates signals. Every field is required: a missing measurement is not
    /// a zero. The error names the first offending field (never its value).
    pub fn read(value: &Value) -> Result<Signals, FieldError> {
        let o = object(value, "signals", SIGNAL_KEYS)?;
        let need = |key: &str| -> Result<f64, FieldError> {
            o.non_negative(key)?.ok_or_else(|| FieldError::new(o.field(key), "is required"))
        };
        let rate = need("completionWithinBudgetRate")?;
        if rate > 1.0 {
            return Err(FieldError::new("signals.completionWithinBudgetRate", "must be between 0 and 1"));
        }
        Ok(Signals {
            estimated_cost: need("estimatedCost")?,
            cold_start_latency_ms: need("coldStartLatencyMs")?,
            ready_latency_ms: need("readyLatencyMs")?,
            completion_within_budget_rate: rate,
            available: o.boolean("available")?.ok_or_else(|| FieldError::new("signals.available", "is required"))?,
        })
    }
}

/// Why a pool has no usable signals for a request.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalError {
    /// `INVALID_SIGNALS` or `SIGNALS_UNRESOLVED`.
    pub reason: Reason,
    /// Which field, or what the resolver did (never its error text).
    pub detail: String,
}

/// Signals of a pool for a request: valid, or why not.
pub type SignalState = Result<Signals, SignalError>;

/// Reads signals into a [`SignalState`].
pub fn signal_state(value: &Value) -> SignalState {
    Signals::read(value)
        .map_err(|e| SignalError { reason: Reason::InvalidSignals, detail: format!("{} {}", e.field, e.expectation) })
}

/// A resolver failure (threw, rejected, timed out): the pool is excluded for this request.
pub fn unresolved(what: &str) -> SignalState {
    Err(SignalError { reason: Reason::SignalsUnresolved, detail: what.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok() -> Value {
        json!({"estimatedCost": 0.1, "coldStartLatencyMs": 100, "readyLatencyMs": 900,
               "completionWithinBudgetRate": 0.99, "available": true})
    }

    #[test]
    fn valid_signals_pass() {
        assert!(Signals::read(&ok()).is_ok());
    }

    #[test]
    fn out_of_range_rate_fails() {
        let mut v = ok();
        v["completionWithinBudgetRate"] = json!(1.5);
        assert!(signal_state(&v).unwrap_err().detail.contains("completionWithinBudgetRate"));
    }

    #[test]
    fn negative_or_null_or_missing_fails() {
        for (k, bad) in [("estimatedCost", json!(-1)), ("readyLatencyMs", Value::Null), ("available", json!("yes"))] {
            let mut v = ok();
            v[k] = bad;
            assert!(signal_state(&v).unwrap_err().detail.contains(k), "{k}");
        }
        let mut v = ok();
        v.as_object_mut().unwrap().remove("coldStartLatencyMs");
        assert!(signal_state(&v).is_err());
    }
}
