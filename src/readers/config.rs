//! A builtin reader's configuration: the provider kinds, the configured amounts, and the
//! options read once into a [`ReaderConfig`].
//!
//! Why refuse rather than ignore? A limit that is silently dropped widens admission, so
//! every key is known, every number finite and non-negative, and a base URL carries no
//! credentials, query or fragment. Errors name the field, never its value.

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

    pub(crate) fn any_compute(&self) -> bool {
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
