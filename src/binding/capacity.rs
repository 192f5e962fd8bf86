//! napi glue for the builtin capacity readers and finders.
//!
//! A reader's (and a finder's) options cross once, when it is made, as JSON text; the one
//! options rule (`readers::config`) validates them and keeps what the reads need in the
//! native object. The API key stays in the JavaScript closure and crosses with each read.
//!
//! Why is a read an async napi method that never rejects for provider problems?
//! A capacity read is an observation: timeouts, 401s, 429s and malformed bodies are all
//! `{"status":"unknown","reason":…}` measurements the router can skip, not exceptions. The
//! read runs on napi's tokio runtime (HTTP and JSON parsing off the JS thread) inside a
//! spawned task under `tokio::time::timeout`; on expiry the read future is dropped, which
//! drops the in-flight request and closes its connection, so a slow provider is really
//! cancelled, not just ignored. The only rejection is a caught panic (a bug): a typed
//! `INTERNAL_ERROR`, without the panic's payload (`error::typed_future`).
//!
//! The API key crosses the seam as an argument and is only ever used as a header value; it
//! never appears in a result or an error (a refused key is named by its field only).

use crate::binding::error::{guard, typed_future, Failure, NativeError};
use crate::core::capacity::{Measurement, UnknownReason};
use crate::core::error::ErrorClass;
use crate::core::json::FieldError;
use crate::readers;
use crate::readers::config::{self, Kind, ReaderConfig, ReaderOptions};
use crate::readers::stamp::{self, Found};
use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

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

/// A capacity read as the core judges it (`read`: how it ended; the answer's JSON text when
/// it answered), validated strictly: anything malformed is `{ status: 'unknown', reason:
/// 'MALFORMED' }`, a reader that threw `READ_FAILED`, one that timed out `TIMEOUT`.
#[napi]
pub fn validate_measurement(
    measurement_json: Option<String>,
    read: crate::binding::acquisition::ReadOutcome,
) -> MeasurementRecord {
    crate::binding::acquisition::measurement_of(measurement_json.as_deref(), read).into()
}

fn option_error(e: FieldError) -> Failure {
    NativeError::invalid(ErrorClass::Configuration, "INVALID_CONFIGURATION", config::message(&e), e.field)
}

/// The provider kinds with a builtin reader, in their documented order
/// (`CAPACITY_READER_KINDS`).
#[napi]
pub fn capacity_reader_kinds() -> Vec<&'static str> {
    Kind::ALL.iter().map(|k| k.name()).collect()
}

/// A builtin capacity reader's native half: its options, validated once when the reader is
/// made, and its reads. The API key is not kept here: the reader's closure holds it and
/// hands it to each read.
#[napi]
pub struct NativeCapacityReader {
    config: Arc<ReaderConfig>,
    timeout_ms: u32,
}

#[napi]
impl NativeCapacityReader {
    /// Validates `createCapacityReader(provider, options)`, given as the JSON text of
    /// `{ provider, options }` (`null`: the options could not be read). Throws the typed
    /// `INVALID_CONFIGURATION` error naming the first refused field (never its value; the
    /// key is checked, then dropped).
    #[napi(constructor)]
    pub fn new(env: Env, spec_json: Option<String>) -> napi::Result<Self> {
        guard(&env, || {
            let spec = spec_json.map(|t| serde_json::from_str::<Value>(&t).unwrap_or(Value::Null));
            let r = ReaderOptions::read(spec.as_ref()).map_err(option_error)?;
            Ok(NativeCapacityReader { config: Arc::new(r.config), timeout_ms: r.timeout_ms })
        })
    }

    /// The provider kind.
    #[napi(getter)]
    pub fn provider(&self) -> &'static str {
        self.config.kind.name()
    }

    /// Reads the account's capacity, off the JavaScript thread. `options_json`: the read's
    /// options `{ timeoutMs? }` as JSON text (the reader's `timeoutMs`, default 5,000, when
    /// absent; `null`: they could not be read); an invalid one throws the typed `INVALID_CONFIGURATION` error and reads
    /// nothing. On expiry of the deadline the HTTP request is cancelled and the answer is
    /// `unknown: TIMEOUT`.
    ///
    /// Resolves to the measurement: `{ status: 'known', resources }` or `{ status: 'unknown',
    /// reason }`. Rejects only on an internal bug (`INTERNAL_ERROR`).
    #[napi(ts_return_type = "Promise<MeasurementRecord>")]
    pub fn read<'env>(
        &self,
        env: &'env Env,
        api_key: String,
        options_json: Option<String>,
    ) -> napi::Result<PromiseRaw<'env, MeasurementRecord>> {
        let timeout_ms = guard(env, || {
            let options = options_json.map(|t| serde_json::from_str::<Value>(&t).unwrap_or(Value::Bool(false)));
            config::read_timeout(options.as_ref(), self.timeout_ms).map_err(option_error)
        })?;
        let config = self.config.clone();
        let deadline = Duration::from_millis(u64::from(timeout_ms));
        typed_future(env, async move { Ok(read_with_deadline(&config, &api_key, deadline).await.into()) })
    }
}

/// One read under a deadline; on expiry the read future (and its HTTP request) is dropped.
async fn read_with_deadline(config: &ReaderConfig, api_key: &str, deadline: Duration) -> Measurement {
    tokio::time::timeout(deadline, readers::read(config, api_key))
        .await
        .unwrap_or(Measurement::Unknown(UnknownReason::Timeout))
}

/// One stamped sandbox a finder found.
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

/// A native finder: lists one account's sandboxes stamped with a fleet through the
/// provider's list API (`daytona`, `e2b`, `microsandbox`, `agent37`), with the options the
/// factory gave it, validated once. The API key is not kept here (the finder's closure
/// holds it).
#[napi]
pub struct NativeFinder {
    /// `None`: options a reader would refuse; every list is `MALFORMED`, without a request.
    config: Option<Arc<ReaderConfig>>,
}

/// The native finder for a factory pool, from the JSON text of `{ provider, options:
/// { apiKey, baseUrl?, organizationId?, maxPages?, pageSize? } }`; `null` when there is none
/// (no list API for the provider, or no key given as a string: the runtime's own label
/// search serves).
#[napi]
pub fn native_finder(spec_json: String) -> Option<NativeFinder> {
    let spec = serde_json::from_str::<Value>(&spec_json).ok()?;
    config::finder_config(&spec).map(|c| NativeFinder { config: c.ok().map(Arc::new) })
}

#[napi]
impl NativeFinder {
    /// Lists the sandboxes stamped with `fleet` (the fleet label and a well-formed id label).
    /// The deadline (`timeoutMs`) is clamped to 1 ms … 2^31 - 1 ms; on its expiry the HTTP is cancelled and
    /// the answer is `TIMEOUT`. Never rejects for provider problems; only a caught panic
    /// rejects (`INTERNAL_ERROR`).
    #[napi(ts_return_type = "Promise<FindResult>")]
    pub fn find<'env>(
        &self,
        env: &'env Env,
        api_key: String,
        fleet: String,
        timeout_ms: f64,
    ) -> napi::Result<PromiseRaw<'env, FindResult>> {
        let config = self.config.clone();
        let deadline = Duration::from_millis(clamped_ms(timeout_ms));
        typed_future(env, async move {
            Ok(match config {
                None => found(Err(UnknownReason::Malformed)),
                Some(c) => find_with_deadline(&c, &api_key, &fleet, deadline).await,
            })
        })
    }
}

/// One handle a runtime's own label search answered, as the fallback finder reports it.
#[napi(object)]
pub struct FoundHandle {
    /// The provider's own sandbox id.
    pub provider_sandbox_id: String,
    /// The stamp's `sbx_…` id; null when the handle carried no labels to check.
    pub sandbox_id: Option<String>,
    /// Creation time (epoch ms) when the handle reports one.
    pub created_at_ms: Option<f64>,
    /// Whether the whole stamp was seen on the handle.
    pub verified: bool,
}

/// What the fallback finder answers: the handles of the fleet, or why there are none.
#[napi(object)]
pub struct HandlesResult {
    /// Null when the answer was a list of handles; otherwise `MALFORMED`.
    pub reason: Option<String>,
    /// The stamped handles and those without labels (empty when `reason` is set).
    pub items: Vec<FoundHandle>,
}

/// Judges a runtime's `findAllByLabels` answer for `fleet` by the stamp rule
/// (`readers::stamp::judge_handles`): `handles_json` is the answer read into
/// `[{ id, labels, createdAtMs }, …]` as JSON text (`null`: it could not be read).
#[napi]
pub fn judge_handles(handles_json: Option<String>, fleet: String) -> HandlesResult {
    let answer = handles_json.and_then(|t| serde_json::from_str::<Value>(&t).ok()).unwrap_or(Value::Null);
    match stamp::judge_handles(&answer, &fleet) {
        Ok(items) => HandlesResult {
            reason: None,
            items: items
                .into_iter()
                .map(|h| FoundHandle {
                    provider_sandbox_id: h.provider_sandbox_id,
                    sandbox_id: h.sandbox_id,
                    created_at_ms: h.created_at_ms,
                    verified: h.verified,
                })
                .collect(),
        },
        Err(reason) => HandlesResult { reason: Some(reason.code().to_string()), items: Vec::new() },
    }
}

/// A deadline in whole ms within 1 … 2^31 - 1 (anything else, NaN included, is 1 ms).
fn clamped_ms(ms: f64) -> u64 {
    if ms >= 1.0 {
        ms.min(f64::from(config::MAX_TIMEOUT_MS)) as u64
    } else {
        1
    }
}

async fn find_with_deadline(config: &ReaderConfig, api_key: &str, fleet: &str, deadline: Duration) -> FindResult {
    found(
        tokio::time::timeout(deadline, readers::find(config, api_key, fleet))
            .await
            .unwrap_or(Err(UnknownReason::Timeout)),
    )
}

fn found(outcome: Result<Vec<Found>, UnknownReason>) -> FindResult {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readers::test_support::config;
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
            let config = config("e2b", json!({"baseUrl": base, "limits": {"sandboxes": 5}}));
            let started = std::time::Instant::now();
            let m = read_with_deadline(&config, "e2b_key", Duration::from_millis(150)).await;
            assert_eq!(m, Measurement::Unknown(UnknownReason::Timeout));
            let (request, closed_at) =
                tokio::time::timeout(Duration::from_secs(2), server).await.expect("connection not closed").unwrap();
            assert!(closed_at.duration_since(started) < Duration::from_secs(1));
            assert!(request.to_ascii_lowercase().contains("x-api-key: e2b_key"), "{request}");
            assert!(request.starts_with("GET /v2/sandboxes?state=running&limit=100 "), "{request}");
        });
    }

    #[test]
    fn must_fire_a_refused_option_is_a_typed_configuration_error_without_the_key() {
        let spec = json!({"provider": "e2b", "options": {"apiKey": "sk_canary\n"}});
        let e = option_error(ReaderOptions::read(Some(&spec)).unwrap_err());
        assert_eq!((e.code.as_str(), e.class.name()), ("INVALID_CONFIGURATION", "SandboxRouterConfigurationError"));
        assert_eq!(e.field.as_deref(), Some("apiKey"));
        assert_eq!(e.message, "invalid capacity reader option apiKey: must not contain control characters");
    }

    #[test]
    fn must_fire_a_finder_of_refused_options_lists_nothing_malformed_without_a_request() {
        let spec =
            json!({"provider": "e2b", "options": {"apiKey": "k", "baseUrl": "http://127.0.0.1:9", "pageSize": 101}});
        let finder = native_finder(spec.to_string()).expect("a native finder");
        assert!(finder.config.is_none());
        let r = found(Err(UnknownReason::Malformed));
        assert_eq!((r.reason.as_deref(), r.items.len()), (Some("MALFORMED"), 0));
    }

    #[test]
    fn must_not_fire_a_finder_without_a_list_api_or_a_key_is_none() {
        assert!(native_finder(json!({"provider": "vercel", "options": {"apiKey": "k"}}).to_string()).is_none());
        assert!(native_finder(json!({"provider": "e2b", "options": {}}).to_string()).is_none());
        assert!(native_finder("not json".to_string()).is_none());
    }

    #[test]
    fn a_finders_deadline_is_clamped_to_a_timer_range() {
        assert_eq!(
            [clamped_ms(f64::NAN), clamped_ms(-5.0), clamped_ms(0.5), clamped_ms(250.0), clamped_ms(1e12)],
            [1, 1, 1, 250, u64::from(config::MAX_TIMEOUT_MS)]
        );
    }
}
