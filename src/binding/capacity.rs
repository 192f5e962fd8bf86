//! napi glue for the builtin capacity readers and the Daytona display helpers.
//!
//! Why is `read_capacity` an async napi function that never rejects for provider problems?
//! A capacity read is an observation: timeouts, 401s, 429s and malformed bodies are all
//! `{"status":"unknown","reason":…}` measurements the router can skip, not exceptions. The
//! read runs on napi's tokio runtime (HTTP and JSON parsing off the JS thread) inside a
//! spawned task under `tokio::time::timeout`; on expiry the read future is dropped, which
//! drops the in-flight request and closes its connection, so a slow provider is really
//! cancelled, not just ignored. The only rejection is a caught panic (a bug): a typed
//! `INTERNAL_ERROR`, without the panic's payload (`error::typed_future`).
//!
//! The API key crosses the seam as an argument and is only ever used as a header value; it
//! never appears in a result or an error.

use crate::binding::clock::now_millis;
use crate::binding::error::{guard, typed_future, Failure, NativeError};
use crate::core::capacity::{Measurement, UnknownReason};
use crate::core::error::ErrorClass;
use crate::core::json::FieldError;
use crate::readers;
use crate::readers::daytona_summary::{
    inventory_items, parse_daytona_capacity_limits as parse_limits, parse_summary_options,
    summarize_daytona_capacity as summarize,
};
use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use std::time::Duration;

fn invalid(e: FieldError) -> Failure {
    NativeError::invalid(
        ErrorClass::RequestValidation,
        "INVALID_INPUT",
        format!("invalid input: {} {}", e.field, e.expectation),
        e.field,
    )
}

fn parse_json(text: &str, field: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|_| {
        NativeError::invalid(
            ErrorClass::RequestValidation,
            "INVALID_INPUT",
            format!("invalid input: {field} is not JSON"),
            field,
        )
    })
}

/// One measured dimension, as readers report it.
#[napi(object)]
pub struct ResourceRecord {
    /// `cpu`, `memory`, `disk`, `sandboxes` (or a custom reader's name).
    pub resource: String,
    /// Account-wide usage.
    pub used: f64,
    /// The verified limit.
    pub limit: f64,
    /// `vCPU`, `MiB`, `sandboxes`.
    pub unit: String,
    /// `limit - used` (negative when over quota).
    pub headroom: f64,
    /// The pool's allocation per launch.
    pub required: f64,
}

/// A capacity measurement, as readers report it and `router.getCapacity()` returns it:
/// `{ status: 'known', resources }` or `{ status: 'unknown', reason }`.
#[napi(object)]
pub struct MeasurementRecord {
    /// `known` or `unknown`.
    pub status: String,
    /// Why nothing trustworthy could be said (`unknown` only).
    pub reason: Option<String>,
    /// Every configured dimension (`known` only).
    pub resources: Option<Vec<ResourceRecord>>,
}

impl From<Measurement> for MeasurementRecord {
    fn from(m: Measurement) -> Self {
        match m {
            Measurement::Known(rs) => MeasurementRecord {
                status: "known".to_string(),
                reason: None,
                resources: Some(
                    rs.into_iter()
                        .map(|r| ResourceRecord {
                            resource: r.resource,
                            used: r.used,
                            limit: r.limit,
                            unit: r.unit,
                            headroom: r.headroom,
                            required: r.required,
                        })
                        .collect(),
                ),
            },
            Measurement::Unknown(reason) => MeasurementRecord {
                status: "unknown".to_string(),
                reason: Some(reason.code().to_string()),
                resources: None,
            },
        }
    }
}

/// Validates a capacity measurement (any reader's answer, serialized once as JSON text)
/// strictly; anything malformed is `{ status: 'unknown', reason: 'MALFORMED' }`.
#[napi]
pub fn validate_measurement(measurement_json: String) -> MeasurementRecord {
    let v = serde_json::from_str::<Value>(&measurement_json).unwrap_or(Value::Null);
    crate::core::capacity::validate(&v).into()
}

/// Reads one provider account's capacity without creating anything.
///
/// `kind`: `daytona` | `e2b` | `microsandbox` | `agent37` | `vercel` | `freestyle`.
/// `config_json`: `{ baseUrl?, organizationId?, limits?, demand?, maxPages? (default 1000),
/// pageSize? }` (memory/disk in GiB). `timeout_ms`: the read's deadline; on expiry the HTTP
/// request is cancelled and the answer is `unknown: TIMEOUT`.
///
/// Resolves to the measurement: `{ status: 'known', resources }` or `{ status: 'unknown',
/// reason }`. Rejects only on an internal bug (`INTERNAL_ERROR`).
#[napi(ts_return_type = "Promise<MeasurementRecord>")]
pub fn read_capacity<'env>(
    env: &'env Env,
    kind: String,
    config_json: String,
    api_key: String,
    timeout_ms: u32,
) -> napi::Result<PromiseRaw<'env, MeasurementRecord>> {
    let deadline = Duration::from_millis(u64::from(timeout_ms));
    typed_future(env, async move { Ok(read_with_deadline(&kind, &config_json, &api_key, deadline).await.into()) })
}

/// One read under a deadline; on expiry the read future (and its HTTP request) is dropped.
async fn read_with_deadline(kind: &str, config_json: &str, api_key: &str, deadline: Duration) -> Measurement {
    let Ok(config) = serde_json::from_str::<Value>(config_json) else {
        return Measurement::Unknown(UnknownReason::Malformed);
    };
    tokio::time::timeout(deadline, readers::read(kind, &config, api_key))
        .await
        .unwrap_or(Measurement::Unknown(UnknownReason::Timeout))
}

/// One stamped sandbox found by [`find_stamped`].
#[napi(object)]
pub struct FoundSandbox {
    /// The provider's own sandbox id.
    pub provider_sandbox_id: String,
    /// The router's `sbx_…` id, from the id label.
    pub sandbox_id: String,
    /// Creation time (epoch ms) when the list reports one.
    pub created_at_ms: Option<f64>,
}

/// What a finder answers: the stamped sandboxes, or why the account could not be listed.
#[napi(object)]
pub struct FindResult {
    /// Null when listed completely; otherwise an unknown reason (`TIMEOUT`, `READ_FAILED`,
    /// `MALFORMED`, `RATE_LIMITED`, `UNAUTHORIZED`, `PAGE_LIMIT_EXCEEDED`, `NOT_SUPPORTED`).
    pub reason: Option<String>,
    /// Every sandbox carrying the whole stamp of the fleet (empty when `reason` is set).
    pub items: Vec<FoundSandbox>,
}

/// Lists one account's sandboxes stamped with `fleet` (the fleet label and a well-formed id
/// label), through the provider's list API (`daytona`, `e2b`, `microsandbox`, `agent37`;
/// other kinds answer `NOT_SUPPORTED`). `config_json` as for [`read_capacity`] (limits are
/// ignored). On expiry of `timeout_ms` the HTTP is cancelled and the answer is `TIMEOUT`.
/// Never rejects for provider problems; only a caught panic rejects (`INTERNAL_ERROR`).
#[napi(ts_return_type = "Promise<FindResult>")]
pub fn find_stamped<'env>(
    env: &'env Env,
    kind: String,
    config_json: String,
    api_key: String,
    fleet: String,
    timeout_ms: u32,
) -> napi::Result<PromiseRaw<'env, FindResult>> {
    let deadline = Duration::from_millis(u64::from(timeout_ms));
    typed_future(env, async move { Ok(find_with_deadline(&kind, &config_json, &api_key, &fleet, deadline).await) })
}

async fn find_with_deadline(
    kind: &str,
    config_json: &str,
    api_key: &str,
    fleet: &str,
    deadline: Duration,
) -> FindResult {
    let outcome = match serde_json::from_str::<Value>(config_json) {
        Err(_) => Err(UnknownReason::Malformed),
        Ok(config) => tokio::time::timeout(deadline, readers::find(kind, &config, api_key, fleet))
            .await
            .unwrap_or(Err(UnknownReason::Timeout)),
    };
    match outcome {
        Ok(items) => FindResult {
            reason: None,
            items: items
                .into_iter()
                .map(|f| FoundSandbox {
                    provider_sandbox_id: f.provider_sandbox_id,
                    sandbox_id: f.sandbox_id,
                    created_at_ms: f.created_at_ms,
                })
                .collect(),
        },
        Err(reason) => FindResult { reason: Some(reason.code().to_string()), items: Vec::new() },
    }
}

/// Strictly parses Daytona limits `{ cpu?, memory?, disk? }` (vCPU; GiB for memory/disk):
/// finite numbers > 0, no unknown keys, at least one. Returns
/// `{"cpu","memoryMiB","diskMiB","provided"}` as JSON; throws the typed `INVALID_INPUT`
/// error naming the field.
#[napi]
pub fn parse_daytona_capacity_limits(env: Env, limits_json: String) -> napi::Result<String> {
    guard(&env, || limits_of(&limits_json))
}

fn limits_of(limits_json: &str) -> Result<String, Failure> {
    let v = parse_json(limits_json, "limits")?;
    Ok(parse_limits(&v).map_err(invalid)?.to_json().to_string())
}

/// Display summary of a Daytona inventory (array of sandboxes or a list page with `items`),
/// against optional limits in the `parse_daytona_capacity_limits` input form (`null` for
/// none), with options `{ warningRatio? (0.8), criticalRatio? (0.95), now?, idleAfterMs?
/// (1800000), idleListLimit? (100) }`. Returns the summary JSON; throws the typed
/// `INVALID_INPUT` error for invalid limits/options. Not used for admission
/// (`provisioningCheck: "not_covered"`).
#[napi]
pub fn summarize_daytona_capacity(
    env: Env,
    items_json: String,
    limits_json: String,
    options_json: Option<String>,
) -> napi::Result<String> {
    guard(&env, || summary_of(&items_json, &limits_json, options_json.as_deref()))
}

fn summary_of(items_json: &str, limits_json: &str, options_json: Option<&str>) -> Result<String, Failure> {
    let items_value = parse_json(items_json, "items")?;
    let items = inventory_items(&items_value).map_err(invalid)?;
    let limits_value = parse_json(limits_json, "limits")?;
    let limits = match limits_value {
        Value::Null => None,
        ref v => Some(parse_limits(v).map_err(invalid)?),
    };
    let options_value = options_json.map(|t| parse_json(t, "options")).transpose()?;
    let options = parse_summary_options(options_value.as_ref(), now_millis() as f64).map_err(invalid)?;
    Ok(summarize(items, limits.as_ref(), &options).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
    }

    #[test]
    fn must_fire_a_silent_server_times_out_and_sees_its_connection_dropped() {
        runtime().block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let server = tokio::spawn(async move {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let mut request = Vec::new();
                // Read the request, never answer, and report when the client goes away.
                loop {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => {
                            return (String::from_utf8_lossy(&request).to_string(), std::time::Instant::now())
                        }
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
            });
            let config = json!({"baseUrl": base, "limits": {"sandboxes": 5}}).to_string();
            let started = std::time::Instant::now();
            let m = read_with_deadline("e2b", &config, "e2b_key", Duration::from_millis(150)).await;
            assert_eq!(m, Measurement::Unknown(UnknownReason::Timeout));
            let (request, closed_at) =
                tokio::time::timeout(Duration::from_secs(2), server).await.expect("connection not closed").unwrap();
            assert!(closed_at.duration_since(started) < Duration::from_secs(1));
            assert!(request.to_ascii_lowercase().contains("x-api-key: e2b_key"), "{request}");
            assert!(request.starts_with("GET /v2/sandboxes?state=running&limit=100 "), "{request}");
        });
    }

    #[test]
    fn must_not_fire_invalid_config_json_is_malformed_without_waiting() {
        let m = runtime().block_on(read_with_deadline("daytona", "{not json", "k", Duration::from_secs(5)));
        assert_eq!(m, Measurement::Unknown(UnknownReason::Malformed));
    }

    #[test]
    fn display_helpers_name_the_field_of_their_typed_errors() {
        let err = limits_of(r#"{"cpu": "10"}"#).err().unwrap();
        assert_eq!((err.code.as_str(), err.field.as_deref()), ("INVALID_INPUT", Some("limits.cpu")));
        let ok = summary_of("[]", "null", Some(r#"{"now": 0}"#)).unwrap();
        let v: Value = serde_json::from_str(&ok).unwrap();
        assert_eq!(v["generatedAt"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["provisioningCheck"], "not_covered");
    }
}
