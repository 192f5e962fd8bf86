//! Builtin, read-only capacity readers: list a provider account's sandboxes over HTTP and
//! turn the inventory into a [`Measurement`] of account-wide usage against a *configured*
//! limit.
//!
//! Why do readers need a configured limit at all? No provider here exposes a quota that an
//! ordinary API key can read (Daytona's usage endpoint is undocumented for API keys; E2B,
//! Microsandbox and Agent37 have none), and published tiers change with billing. So an
//! inventory only ever yields `used`; the `limit` comes from the caller's verified
//! configuration. A missing limit is `unknown: LIMIT_NOT_CONFIGURED`, decided before any
//! HTTP: never zero, never a guessed tier.
//!
//! Why Rust and tokio rather than JS `fetch`? A Daytona organization can hold ten thousand
//! sandboxes across fifty pages; parsing those bodies with serde into structs that keep only
//! the few needed fields runs on tokio's workers, so the Node event loop never stalls on a
//! read. The caller bounds each read with a deadline by dropping this future, which drops
//! the in-flight request and closes its connection (see `binding_capacity.rs`).
//!
//! Error policy: a reader never fails and never panics on provider input. Every problem is a
//! measurement: `unknown` with a reason ([`UnknownReason`]). Invalid configuration (negative,
//! non-finite or mistyped numbers, unknown keys, a dimension the provider cannot measure) is
//! `MALFORMED`, because a silently dropped limit would widen admission. Nothing produced here
//! contains the API key: it only ever becomes a sensitive header value.
//!
//! Layout: `http` (shared client, status mapping, the [`http::Fetch`] seam that unit tests
//! replace with in-memory pages), one module per provider, and `daytona_summary` (the
//! display helpers, which are not used for admission).

pub mod agent37;
pub mod daytona;
pub mod daytona_summary;
pub mod e2b;
pub mod find;
pub mod http;
pub mod microsandbox;

use crate::core::capacity::{Measurement, UnknownReason};
use crate::core::json::{object, FieldError, Obj};
use serde_json::Value;

/// Default bound on the number of pages one read may fetch.
pub const DEFAULT_MAX_PAGES: u32 = 1000;
/// Largest accepted `maxPages`.
pub const MAX_MAX_PAGES: u32 = 100_000;

/// The provider kinds a builtin reader exists for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Daytona: organization inventory summed over cpu/memory/disk.
    Daytona,
    /// E2B: running sandboxes counted against a concurrency limit.
    E2b,
    /// Microsandbox (hosted): all sandboxes counted against slots.
    Microsandbox,
    /// Agent37: all instances counted against slots.
    Agent37,
    /// Vercel Sandbox: no account-wide list, always `NOT_SUPPORTED`.
    Vercel,
    /// Freestyle: no trustworthy account-wide count, always `NOT_SUPPORTED`.
    Freestyle,
}

impl Kind {
    /// Parses a kind name (`daytona`, `e2b`, `microsandbox`, `agent37`, `vercel`, `freestyle`).
    pub fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "daytona" => Kind::Daytona,
            "e2b" => Kind::E2b,
            "microsandbox" => Kind::Microsandbox,
            "agent37" => Kind::Agent37,
            "vercel" => Kind::Vercel,
            "freestyle" => Kind::Freestyle,
            _ => return None,
        })
    }
}

/// Per-dimension amounts as configured (memory/disk in **GiB**, cpu in vCPU, sandboxes in slots).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Dims {
    /// vCPU.
    pub cpu: Option<f64>,
    /// GiB.
    pub memory: Option<f64>,
    /// GiB.
    pub disk: Option<f64>,
    /// Sandbox slots.
    pub sandboxes: Option<f64>,
}

impl Dims {
    fn parse(o: Option<Obj<'_>>) -> Result<Dims, FieldError> {
        let Some(o) = o else { return Ok(Dims::default()) };
        Ok(Dims {
            cpu: o.non_negative("cpu")?,
            memory: o.non_negative("memory")?,
            disk: o.non_negative("disk")?,
            sandboxes: o.non_negative("sandboxes")?,
        })
    }

    fn any_compute(&self) -> bool {
        self.cpu.is_some() || self.memory.is_some() || self.disk.is_some()
    }
}

/// A parsed reader configuration (what the JS side passes as `configJson`).
///
/// ```json
/// { "baseUrl": "https://…", "organizationId": "…", "limits": {"cpu": 10, "memory": 10},
///   "demand": {"cpu": 1, "memory": 2}, "maxPages": 1000, "pageSize": 200 }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderConfig {
    /// Overrides the provider's default base URL (no trailing slash).
    pub base_url: Option<String>,
    /// Daytona only: sent as `X-Daytona-Organization-ID`.
    pub organization_id: Option<String>,
    /// Verified account limits.
    pub limits: Dims,
    /// The pool's allocation per launch.
    pub demand: Dims,
    /// Bound on pages fetched in one read (default [`DEFAULT_MAX_PAGES`]).
    pub max_pages: u32,
    /// Page size for paginated list calls (provider default when absent).
    pub page_size: Option<u32>,
}

const CONFIG_KEYS: &[&str] = &["baseUrl", "organizationId", "limits", "demand", "maxPages", "pageSize"];
const DIM_KEYS: &[&str] = &["cpu", "memory", "disk", "sandboxes"];

/// Parses and validates a reader configuration. `null` means "all defaults". Unknown keys,
/// negative or non-finite numbers, mistyped values and non-HTTP(S) base URLs are refused
/// with the offending field (never its value).
pub fn parse_config(value: &Value) -> Result<ReaderConfig, FieldError> {
    if value.is_null() {
        return parse_config(&Value::Object(Default::default()));
    }
    let o = object(value, "config", CONFIG_KEYS)?;
    let base_url = match o.string("baseUrl")? {
        None => None,
        Some(s) => Some(validate_base_url(s).ok_or_else(|| {
            FieldError::new(o.field("baseUrl"), "must be an http(s) URL without credentials, query or fragment")
        })?),
    };
    let organization_id = match o.string("organizationId")? {
        Some(s) if s.chars().any(char::is_control) => {
            return Err(FieldError::new(o.field("organizationId"), "must not contain control characters"))
        }
        other => other.map(str::to_string),
    };
    let limits = Dims::parse(o.object("limits", DIM_KEYS)?)?;
    let demand = Dims::parse(o.object("demand", DIM_KEYS)?)?;
    let max_pages = o.integer_in("maxPages", 1, i64::from(MAX_MAX_PAGES))?.map_or(DEFAULT_MAX_PAGES, |n| n as u32);
    let page_size = o.integer_in("pageSize", 1, 1000)?.map(|n| n as u32);
    Ok(ReaderConfig { base_url, organization_id, limits, demand, max_pages, page_size })
}

fn validate_base_url(s: &str) -> Option<String> {
    let trimmed = s.trim_end_matches('/');
    let url = reqwest::Url::parse(trimmed).ok()?;
    let ok = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some()
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none();
    ok.then(|| trimmed.to_string())
}

/// The page size to request: the configured one, refused (`MALFORMED`) above the
/// provider's documented maximum rather than silently clamped.
pub(crate) fn page_size(cfg: &ReaderConfig, default: u32, max: u32) -> Result<u32, UnknownReason> {
    match cfg.page_size {
        None => Ok(default),
        Some(n) if n <= max => Ok(n),
        Some(_) => Err(UnknownReason::Malformed),
    }
}

/// Builds `{base}{path}` as a URL.
pub(crate) fn endpoint(cfg: &ReaderConfig, default_base: &str, path: &str) -> Result<reqwest::Url, UnknownReason> {
    let base = cfg.base_url.as_deref().unwrap_or(default_base);
    reqwest::Url::parse(&format!("{base}{path}")).map_err(|_| UnknownReason::Malformed)
}

/// The configured slot limit and per-launch demand for the instance-counting readers
/// (E2B, Microsandbox, Agent37). Compute dimensions are refused: these providers' lists
/// carry no trustworthy per-account compute usage, and ignoring a configured limit would
/// silently widen admission.
pub(crate) fn slot_plan(cfg: &ReaderConfig) -> Result<(f64, f64), UnknownReason> {
    if cfg.limits.any_compute() || cfg.demand.any_compute() || cfg.organization_id.is_some() {
        return Err(UnknownReason::Malformed);
    }
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

/// Reads one provider account's capacity. `config` is the JSON described on
/// [`ReaderConfig`]; `api_key` is only ever sent as the provider's auth header.
///
/// Never fails: unknown kinds and Vercel/Freestyle are `NOT_SUPPORTED`, invalid
/// configuration is `MALFORMED`, missing limits/demand are decided before any request.
/// This future has no deadline of its own: the caller drops it to cancel the read.
pub async fn read(kind: &str, config: &Value, api_key: &str) -> Measurement {
    let kind = match Kind::parse(kind) {
        None | Some(Kind::Vercel | Kind::Freestyle) => return Measurement::Unknown(UnknownReason::NotSupported),
        Some(k) => k,
    };
    let cfg = match parse_config(config) {
        Ok(cfg) => cfg,
        Err(_) => return Measurement::Unknown(UnknownReason::Malformed),
    };
    match kind {
        Kind::Daytona => daytona::read(&cfg, api_key).await,
        Kind::E2b => e2b::read(&cfg, api_key).await,
        Kind::Microsandbox => microsandbox::read(&cfg, api_key).await,
        Kind::Agent37 => agent37::read(&cfg, api_key).await,
        Kind::Vercel | Kind::Freestyle => Measurement::Unknown(UnknownReason::NotSupported),
    }
}

/// Tracks pages fetched and cursors seen so that no paginator can run forever: more than
/// `max_pages` pages, or a cursor the server already handed out, is `PAGE_LIMIT_EXCEEDED`.
pub(crate) struct PageGuard {
    max_pages: u32,
    fetched: u32,
    seen: std::collections::HashSet<String>,
}

impl PageGuard {
    pub(crate) fn new(max_pages: u32) -> Self {
        PageGuard { max_pages, fetched: 0, seen: Default::default() }
    }

    /// Call before each request.
    pub(crate) fn before_fetch(&mut self) -> Result<(), UnknownReason> {
        if self.fetched >= self.max_pages {
            return Err(UnknownReason::PageLimitExceeded);
        }
        self.fetched += 1;
        Ok(())
    }

    /// Call with each continuation token; a repeat means the server is looping.
    pub(crate) fn cursor(&mut self, cursor: &str) -> Result<(), UnknownReason> {
        if self.seen.insert(cursor.to_string()) {
            Ok(())
        } else {
            Err(UnknownReason::PageLimitExceeded)
        }
    }
}

/// A page body parsed with serde into a typed struct; any syntax or type error is `MALFORMED`.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, UnknownReason> {
    serde_json::from_slice(body).map_err(|_| UnknownReason::Malformed)
}

/// Sandbox-count measurement for the slot-counting readers.
/// A slot count, or why there is none, as a measurement against `limit`.
pub(crate) fn slots_or_unknown(counted: Result<usize, UnknownReason>, limit: f64, required: f64) -> Measurement {
    match counted {
        Ok(n) => slots(n, limit, required),
        Err(r) => Measurement::Unknown(r),
    }
}

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
pub(crate) mod test_support {
    //! An in-memory [`Fetch`](super::http::Fetch): pages keyed by the full URL, with a log of
    //! the URLs requested.
    use super::http::{Fetch, Fetched};
    use crate::core::capacity::UnknownReason;
    use reqwest::header::HeaderMap;
    use std::collections::HashMap;
    use std::future::Future;

    /// Computes an answer for a URL.
    pub type Responder = Box<dyn Fn(&str) -> Result<Fetched, UnknownReason> + Send>;

    #[derive(Default)]
    pub struct MemoryFetch {
        pub pages: HashMap<String, Result<Fetched, UnknownReason>>,
        pub log: Vec<String>,
        /// Answer for URLs not in `pages` (a server that always answers the same page).
        pub fallback: Option<Responder>,
    }

    impl MemoryFetch {
        pub fn page(mut self, url: &str, body: &str) -> Self {
            self.pages.insert(url.into(), Ok(Fetched { body: body.as_bytes().to_vec(), headers: HeaderMap::new() }));
            self
        }

        pub fn page_with_header(mut self, url: &str, body: &str, name: &'static str, value: &str) -> Self {
            let mut headers = HeaderMap::new();
            headers.insert(name, value.parse().unwrap());
            self.pages.insert(url.into(), Ok(Fetched { body: body.as_bytes().to_vec(), headers }));
            self
        }
    }

    impl Fetch for MemoryFetch {
        fn get(&mut self, url: reqwest::Url) -> impl Future<Output = Result<Fetched, UnknownReason>> + Send {
            let key = url.to_string();
            self.log.push(key.clone());
            let out = match self.pages.get(&key) {
                Some(r) => r.clone(),
                None => match &self.fallback {
                    Some(f) => f(&key),
                    None => Err(UnknownReason::ReadFailed),
                },
            };
            std::future::ready(out)
        }
    }

    /// Runs a future to completion on a fresh current-thread runtime.
    pub fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_config_means_defaults() {
        let cfg = parse_config(&Value::Null).unwrap();
        assert_eq!(cfg.max_pages, DEFAULT_MAX_PAGES);
        assert_eq!(cfg.limits, Dims::default());
        assert_eq!(cfg.base_url, None);
    }

    #[test]
    fn full_config_parses_and_trims_the_base_url() {
        let cfg = parse_config(&json!({
            "baseUrl": "http://127.0.0.1:8080/api/", "organizationId": "org-1",
            "limits": {"cpu": 10, "memory": 20.5}, "demand": {"cpu": 1},
            "maxPages": 7, "pageSize": 50
        }))
        .unwrap();
        assert_eq!(cfg.base_url.as_deref(), Some("http://127.0.0.1:8080/api"));
        assert_eq!(cfg.organization_id.as_deref(), Some("org-1"));
        assert_eq!(cfg.limits.cpu, Some(10.0));
        assert_eq!(cfg.limits.memory, Some(20.5));
        assert_eq!(cfg.demand.cpu, Some(1.0));
        assert_eq!((cfg.max_pages, cfg.page_size), (7, Some(50)));
    }

    #[test]
    fn invalid_config_values_are_refused_with_their_field() {
        for (bad, field) in [
            (json!({"limits": {"cpu": -1}}), "config.limits.cpu"),
            (json!({"limits": {"cpu": "10"}}), "config.limits.cpu"),
            (json!({"limits": {"cpu": null}}), "config.limits.cpu"),
            (json!({"limits": {"gpu": 1}}), "config.limits.gpu"),
            (json!({"limits": []}), "config.limits"),
            (json!({"demand": {"memory": true}}), "config.demand.memory"),
            (json!({"maxPages": 0}), "config.maxPages"),
            (json!({"maxPages": 1.5}), "config.maxPages"),
            (json!({"pageSize": "200"}), "config.pageSize"),
            (json!({"baseUrl": "ftp://x"}), "config.baseUrl"),
            (json!({"baseUrl": "https://user:pw@x.example"}), "config.baseUrl"),
            (json!({"baseUrl": "https://x.example/?a=1"}), "config.baseUrl"),
            (json!({"baseUrl": ""}), "config.baseUrl"),
            (json!({"organizationId": "a\r\nb"}), "config.organizationId"),
            (json!({"apiKey": "x"}), "config.apiKey"),
            (json!([]), "config"),
        ] {
            assert_eq!(parse_config(&bad).unwrap_err().field, field, "{bad}");
        }
    }

    #[test]
    fn unknown_and_unsupported_kinds_are_not_supported_without_config_checks() {
        for kind in ["vercel", "freestyle", "modal", ""] {
            let m = test_support::block_on(read(kind, &json!({"limits": {"cpu": -1}}), "k"));
            assert_eq!(m, Measurement::Unknown(UnknownReason::NotSupported), "{kind}");
        }
    }

    #[test]
    fn malformed_config_is_a_measurement_not_a_panic() {
        for kind in ["daytona", "e2b", "microsandbox", "agent37"] {
            let m = test_support::block_on(read(kind, &json!({"limits": {"cpu": f64::NAN}}), "k"));
            // serde_json turns NaN into null, which is refused.
            assert_eq!(m, Measurement::Unknown(UnknownReason::Malformed), "{kind}");
        }
    }

    #[test]
    fn slot_plan_refuses_compute_dimensions_and_defaults_demand_to_one() {
        let cfg = |v: Value| parse_config(&v).unwrap();
        assert_eq!(slot_plan(&cfg(json!({}))), Err(UnknownReason::LimitNotConfigured));
        assert_eq!(slot_plan(&cfg(json!({"limits": {"sandboxes": 5}}))), Ok((5.0, 1.0)));
        assert_eq!(slot_plan(&cfg(json!({"limits": {"sandboxes": 5}, "demand": {"sandboxes": 2}}))), Ok((5.0, 2.0)));
        assert_eq!(slot_plan(&cfg(json!({"limits": {"sandboxes": 5, "cpu": 1}}))), Err(UnknownReason::Malformed));
        assert_eq!(
            slot_plan(&cfg(json!({"limits": {"sandboxes": 5}, "demand": {"memory": 1}}))),
            Err(UnknownReason::Malformed)
        );
    }

    #[test]
    fn page_guard_bounds_pages_and_detects_repeated_cursors() {
        let mut g = PageGuard::new(2);
        assert!(g.before_fetch().is_ok());
        assert!(g.before_fetch().is_ok());
        assert_eq!(g.before_fetch(), Err(UnknownReason::PageLimitExceeded));
        let mut g = PageGuard::new(10);
        assert!(g.cursor("a").is_ok());
        assert!(g.cursor("b").is_ok());
        assert_eq!(g.cursor("a"), Err(UnknownReason::PageLimitExceeded));
    }

    #[test]
    fn page_size_above_the_provider_maximum_is_refused_not_clamped() {
        let cfg = parse_config(&json!({"pageSize": 150})).unwrap();
        assert_eq!(page_size(&cfg, 200, 200), Ok(150));
        assert_eq!(page_size(&cfg, 100, 100), Err(UnknownReason::Malformed));
        assert_eq!(page_size(&parse_config(&json!({})).unwrap(), 100, 100), Ok(100));
    }

    #[test]
    fn kind_names_parse_and_unknown_names_do_not() {
        for (name, kind) in [
            ("daytona", Kind::Daytona),
            ("e2b", Kind::E2b),
            ("microsandbox", Kind::Microsandbox),
            ("agent37", Kind::Agent37),
            ("vercel", Kind::Vercel),
            ("freestyle", Kind::Freestyle),
        ] {
            assert_eq!(Kind::parse(name), Some(kind), "{name}");
        }
        for name in ["", "Daytona", "modal", "e2b "] {
            assert_eq!(Kind::parse(name), None, "{name}");
        }
    }
}
