//! One registered provider pool: its id, declared envelope and signals, read once.
//!
//! Why a file of its own? A pool is what both the registry (the decision over pools) and
//! the compact profiles (the hot path's view of one pool) are built from; neither owns it,
//! so both depend on this file and not on each other.

use crate::core::capabilities::Capabilities;
use crate::core::ids::validate_provider_id;
use crate::core::json::FieldError;
use crate::core::pacing::RateLimit;
use crate::core::reasons::Reason;
use crate::core::signals::{signal_state, SignalError, SignalState};
use crate::core::warm::WarmConfig;
use crate::core::CoreError;
use serde_json::Value;

/// A registered provider pool.
#[derive(Debug, Clone)]
pub struct Pool {
    /// Provider id.
    pub id: String,
    /// Declared envelope.
    pub capabilities: Capabilities,
    /// Registered signals (a resolver may override them per request).
    pub signals: SignalState,
    /// Whether its runtime has `launchDetached`.
    pub has_launch_detached: bool,
    /// Its warm pool (`warm` option), if it keeps one (`core::warm`).
    pub warm: Option<WarmConfig>,
    /// Its declared create-rate limit (`rateLimit` option; `core::pacing`).
    pub rate_limit: Option<RateLimit>,
}

impl Pool {
    /// Builds a pool from `{ id, capabilities, signals, warm?, rateLimit? }` JSON (the runtime stays in
    /// JS). A `warm` option is read strictly and checked against the declared lifetime.
    pub fn from_json(value: &Value, has_launch_detached: bool) -> Result<Pool, CoreError> {
        let id = value.get("id").and_then(Value::as_str).unwrap_or("");
        validate_provider_id(id)?;
        let bad = |e: FieldError| CoreError::InvalidProviderDefinition {
            provider: id.to_string(),
            field: e.field,
            expectation: e.expectation,
        };
        let capabilities = match value.get("capabilities") {
            None => {
                return Err(bad(FieldError::new(
                    "capabilities",
                    "is required (declare the pool's envelope; an empty object declares nothing)",
                )))
            }
            Some(v) => Capabilities::read(v, "capabilities").map_err(bad)?,
        };
        let signals = match value.get("signals") {
            None => Err(SignalError { reason: Reason::InvalidSignals, detail: "signals is required".into() }),
            Some(v) => signal_state(v),
        };
        let warm = match value.get("warm") {
            None => None,
            Some(v) => {
                let c = WarmConfig::read(v, "warm").map_err(bad)?;
                c.check_lifetime(capabilities.max_lifetime, "warm").map_err(bad)?;
                Some(c)
            }
        };
        let rate_limit = match value.get("rateLimit") {
            None => None,
            Some(v) => Some(RateLimit::read(v, "rateLimit").map_err(bad)?),
        };
        Ok(Pool { id: id.to_string(), capabilities, signals, has_launch_detached, warm, rate_limit })
    }
}
