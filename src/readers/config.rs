//! A builtin reader's options, read once when the reader is made: the provider kinds and
//! what each can measure, the configured amounts, and the rule that refuses the rest.
//!
//! Why here, and only here? `createCapacityReader` and the factory's finders hand their
//! options over once, as JSON text (`lib/capacity-readers.js`, `lib/finders.js`); this
//! file decides whether they are valid and what the reader needs, so no read ever meets an
//! invalid configuration and no JavaScript copy of the rule can drift from this one.
//!
//! Why refuse rather than ignore? A limit that is silently dropped widens admission, so
//! every key is known, every number finite and non-negative, a dimension the provider
//! cannot measure is refused, a base URL carries no credentials, query or fragment, and a
//! page size above the provider's documented maximum is refused rather than clamped.
//! Errors name the field and what it must be, never its value: the API key is checked here
//! and then dropped, so it is in no error and in nothing this file returns.

use crate::core::json::{field_path, Segment};
use crate::core::json::{join, shown, FieldError};
use crate::core::router::options::not_json_expectation;
use serde_json::{Map, Value};

/// Default bound on the number of pages one read may fetch.
pub const DEFAULT_MAX_PAGES: u32 = 1000;
/// Largest accepted `maxPages`.
pub const MAX_MAX_PAGES: u32 = 100_000;
/// A read's deadline when neither the reader's options nor the read name one, ms.
pub const DEFAULT_TIMEOUT_MS: u32 = 5000;
/// Longest accepted deadline, ms (the largest a JavaScript timer takes).
pub const MAX_TIMEOUT_MS: u32 = i32::MAX as u32;

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
    /// Every kind, in the documented order (`CAPACITY_READER_KINDS`).
    pub const ALL: [Kind; 6] =
        [Kind::Daytona, Kind::E2b, Kind::Microsandbox, Kind::Agent37, Kind::Vercel, Kind::Freestyle];

    /// Parses a kind name (`daytona`, `e2b`, `microsandbox`, `agent37`, `vercel`, `freestyle`).
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Daytona => "daytona",
            Kind::E2b => "e2b",
            Kind::Microsandbox => "microsandbox",
            Kind::Agent37 => "agent37",
            Kind::Vercel => "vercel",
            Kind::Freestyle => "freestyle",
        }
    }

    /// Whether the provider has a list API this crate reads (the others answer
    /// `NOT_SUPPORTED` without any request, and need no key).
    pub fn lists(self) -> bool {
        !matches!(self, Kind::Vercel | Kind::Freestyle)
    }

    /// The dimensions the provider's list can measure (others are refused, never ignored).
    pub fn dimensions(self) -> &'static [&'static str] {
        match self {
            Kind::Daytona => &["cpu", "memory", "disk"],
            _ => &["sandboxes"],
        }
    }

    /// The largest page the provider's list documents, which is also the page asked for by
    /// default; `None`: the list is not paginated.
    pub fn max_page_size(self) -> Option<u32> {
        match self {
            Kind::Daytona => Some(200),
            Kind::E2b | Kind::Microsandbox => Some(100),
            Kind::Agent37 | Kind::Vercel | Kind::Freestyle => None,
        }
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

/// A reader's validated configuration: what every read and every list of its account uses.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderConfig {
    /// The provider.
    pub kind: Kind,
    /// Overrides the provider's default base URL (normalized, no trailing slash).
    pub base_url: Option<String>,
    /// Daytona only: sent as `X-Daytona-Organization-ID`.
    pub organization_id: Option<String>,
    /// Verified account limits (only dimensions the provider measures).
    pub limits: Dims,
    /// The pool's allocation per launch (likewise).
    pub demand: Dims,
    /// Bound on pages fetched in one read (default [`DEFAULT_MAX_PAGES`]).
    pub max_pages: u32,
    /// Page size for paginated list calls (at most the provider's maximum; its maximum when absent).
    pub page_size: Option<u32>,
}

impl ReaderConfig {
    /// The configuration of `kind` with every default (no limits, no demand).
    pub fn defaults(kind: Kind) -> ReaderConfig {
        ReaderConfig {
            kind,
            base_url: None,
            organization_id: None,
            limits: Dims::default(),
            demand: Dims::default(),
            max_pages: DEFAULT_MAX_PAGES,
            page_size: None,
        }
    }

    /// The page size to ask for: the configured one, else the provider's maximum.
    pub fn page_size(&self) -> u32 {
        self.page_size.or(self.kind.max_page_size()).unwrap_or(1)
    }
}

/// A builtin capacity reader, as its options make it (`createCapacityReader`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderOptions {
    /// What each read uses.
    pub config: ReaderConfig,
    /// The read's deadline when the read names none, ms.
    pub timeout_ms: u32,
}

/// The options a reader takes (`CapacityReaderOptions`).
const OPTION_KEYS: &[&str] =
    &["apiKey", "baseUrl", "organizationId", "limits", "demand", "maxPages", "pageSize", "timeoutMs"];

/// The message of a refused option: `invalid capacity reader option <field>: <expectation>`.
pub fn message(e: &FieldError) -> String {
    format!("invalid capacity reader option {}: {}", e.field, e.expectation)
}

/// A reader option JSON cannot carry, at `segments` under `prefix` (`getCapacity` for its
/// call's options; empty for the reader's spec `{ provider, options }`, whose options are
/// named by their own keys, `limits.cpu`): the refusal as the reader's own parse names it.
pub fn not_json(prefix: &str, segments: &[Segment], what: &str) -> FieldError {
    let own = prefix.is_empty() && segments.len() > 1 && segments[0] == Segment::Key("options".into());
    let segments = if own { &segments[1..] } else { segments };
    refused(field_path(prefix, segments), not_json_expectation(what))
}

fn refused(field: impl Into<String>, expectation: impl Into<String>) -> FieldError {
    FieldError::new(field, expectation)
}

/// Control characters as the options rule counts them (U+0000 to U+001F and U+007F).
fn has_control(s: &str) -> bool {
    s.chars().any(|c| c <= '\u{1f}' || c == '\u{7f}')
}

fn kind_of(value: Option<&Value>) -> Result<Kind, FieldError> {
    value.and_then(Value::as_str).and_then(Kind::parse).ok_or_else(|| {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        refused("provider", format!("must be one of {}", names.join(", ")))
    })
}

impl ReaderOptions {
    /// Reads `createCapacityReader(provider, options)` from its JSON text,
    /// `{ "provider": …, "options": … }` (`options` absent: every default); `None`: the
    /// options could not be read (a property access threw: nothing else is checked). Checked
    /// in this order, the first refusal answered: the provider; the options (an object of known keys); the
    /// API key (a non-empty string without control characters, for a provider with a list
    /// API; a string if given, for the others); then `baseUrl`, `organizationId` (Daytona
    /// only), `limits`, `demand` (the provider's dimensions, finite numbers >= 0),
    /// `maxPages` (1 to 100,000), `pageSize` (1 to the provider's maximum; refused for a
    /// list that is not paginated) and `timeoutMs` (1 to 2^31 - 1, default 5,000).
    pub fn read(spec: Option<&Value>) -> Result<ReaderOptions, FieldError> {
        let spec = spec.ok_or_else(|| refused("options", "could not be read (a property access threw)"))?;
        let kind = kind_of(spec.get("provider"))?;
        let empty = Map::new();
        let o = match spec.get("options") {
            None => &empty,
            Some(Value::Object(o)) => o,
            Some(_) => return Err(refused("options", "must be an object")),
        };
        if let Some(key) = o.keys().find(|k| !OPTION_KEYS.contains(&k.as_str())) {
            return Err(refused(shown(key), "is not a known option"));
        }
        match (kind.lists(), o.get("apiKey")) {
            (false, None | Some(Value::String(_))) => {}
            (false, Some(_)) => return Err(refused("apiKey", "must be a string")),
            (true, Some(Value::String(k))) if !k.is_empty() => {
                if has_control(k) {
                    return Err(refused("apiKey", "must not contain control characters"));
                }
            }
            (true, _) => return Err(refused("apiKey", "must be a non-empty string")),
        }
        let mut config = list_options(kind, o)?;
        config.limits = dims(kind, o.get("limits"), "limits")?;
        config.demand = dims(kind, o.get("demand"), "demand")?;
        let timeout_ms = timeout(o.get("timeoutMs"), "timeoutMs")?.unwrap_or(DEFAULT_TIMEOUT_MS);
        Ok(ReaderOptions { config, timeout_ms })
    }
}

/// Reads a finder's options (`lib/finders.js`, from the factory): `{ "provider": …,
/// "options": { apiKey, baseUrl?, organizationId?, maxPages?, pageSize? } }`. `None`: no
/// native finder (the provider has no list API here, or no key is given as a string; the
/// runtime's own label search serves). `Some(Err)`: options a reader would refuse, which
/// make every list `MALFORMED`. Limits and demand do not apply: a finder counts nothing.
pub fn finder_config(spec: &Value) -> Option<Result<ReaderConfig, FieldError>> {
    let kind = kind_of(spec.get("provider")).ok().filter(|k| k.lists())?;
    let o = spec.get("options").and_then(Value::as_object)?;
    o.get("apiKey").and_then(Value::as_str)?;
    Some(list_options(kind, o))
}

/// The deadline of one read from its options (`getCapacity(options)`, as JSON text; `null`
/// or no `timeoutMs`: `default`; `None`: they could not be read). Only `timeoutMs` is read.
pub fn read_timeout(options: Option<&Value>, default: u32) -> Result<u32, FieldError> {
    let options =
        options.ok_or_else(|| refused("getCapacity", "options could not be read (a property access threw)"))?;
    match options {
        Value::Null | Value::Array(_) => Ok(default),
        Value::Object(o) => Ok(timeout(o.get("timeoutMs"), "getCapacity.timeoutMs")?.unwrap_or(default)),
        _ => Err(refused("getCapacity", "options must be an object")),
    }
}

/// What readers and finders share: `baseUrl`, `organizationId`, `maxPages`, `pageSize`.
fn list_options(kind: Kind, o: &Map<String, Value>) -> Result<ReaderConfig, FieldError> {
    let mut config = ReaderConfig::defaults(kind);
    config.base_url = o.get("baseUrl").map(base_url).transpose()?;
    if let Some(v) = o.get("organizationId") {
        if kind != Kind::Daytona {
            return Err(refused("organizationId", "applies to daytona only"));
        }
        match v {
            Value::String(s) if !s.is_empty() && !has_control(s) => config.organization_id = Some(s.clone()),
            _ => return Err(refused("organizationId", "must be a non-empty string without control characters")),
        }
    }
    if let Some(n) = integer(o.get("maxPages"), "maxPages", 1, MAX_MAX_PAGES)? {
        config.max_pages = n;
    }
    if let Some(v) = o.get("pageSize") {
        let Some(max) = kind.max_page_size() else {
            return Err(refused("pageSize", format!("does not apply: the {} list is not paginated", kind.name())));
        };
        config.page_size = integer(Some(v), "pageSize", 1, max)?;
    }
    Ok(config)
}

/// A base URL: an absolute http(s) URL without credentials, query or fragment, kept
/// normalized and without its trailing slashes (paths are appended to it).
fn base_url(v: &Value) -> Result<String, FieldError> {
    let s = match v {
        Value::String(s) if !s.is_empty() => s,
        _ => return Err(refused("baseUrl", "must be a non-empty string")),
    };
    let url = reqwest::Url::parse(s).map_err(|_| refused("baseUrl", "must be an absolute http(s) URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refused("baseUrl", "must use http or https"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refused("baseUrl", "must not carry credentials"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(refused("baseUrl", "must not carry a query or fragment"));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

fn dims(kind: Kind, v: Option<&Value>, field: &str) -> Result<Dims, FieldError> {
    let mut out = Dims::default();
    let Some(v) = v else { return Ok(out) };
    let Value::Object(o) = v else { return Err(refused(field, "must be an object")) };
    let allowed = kind.dimensions();
    for (key, amount) in o {
        if !allowed.contains(&key.as_str()) {
            return Err(refused(join(field, key), format!("is not measurable here (allowed: {})", allowed.join(", "))));
        }
        let amount = amount
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| refused(join(field, key), "must be a finite number >= 0"))?;
        let slot = match key.as_str() {
            "cpu" => &mut out.cpu,
            "memory" => &mut out.memory,
            "disk" => &mut out.disk,
            _ => &mut out.sandboxes,
        };
        *slot = Some(amount);
    }
    Ok(out)
}

/// An optional integer within `[min, max]`.
fn integer(v: Option<&Value>, field: &str, min: u32, max: u32) -> Result<Option<u32>, FieldError> {
    let Some(v) = v else { return Ok(None) };
    v.as_f64()
        .filter(|x| x.fract() == 0.0 && *x >= f64::from(min) && *x <= f64::from(max))
        .map(|x| Some(x as u32))
        .ok_or_else(|| refused(field, format!("must be an integer from {min} to {max}")))
}

fn timeout(v: Option<&Value>, field: &str) -> Result<Option<u32>, FieldError> {
    integer(v, field, 1, MAX_TIMEOUT_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "sk_live_canary_0123456789";

    #[test]
    fn must_fire_an_option_json_cannot_carry_is_named_by_its_own_key() {
        let segs = [Segment::Key("options".into()), Segment::Key("limits".into()), Segment::Key("cpu".into())];
        let e = not_json("", &segs, "NaN");
        assert_eq!(message(&e), "invalid capacity reader option limits.cpu: must be JSON data (NaN is not)");
        let e = not_json("getCapacity", &[Segment::Key("timeoutMs".into())], "a BigInt");
        assert_eq!(e.field, "getCapacity.timeoutMs");
    }

    #[test]
    fn must_not_fire_a_spec_root_json_cannot_carry_keeps_its_name() {
        assert_eq!(not_json("", &[Segment::Key("options".into())], "a function").field, "options");
        assert_eq!(not_json("", &[Segment::Key("provider".into())], "a symbol").field, "provider");
    }

    fn reader(provider: &str, options: Value) -> Result<ReaderOptions, FieldError> {
        ReaderOptions::read(Some(&json!({"provider": provider, "options": options})))
    }

    #[test]
    fn must_not_fire_absent_options_are_every_default() {
        let r = ReaderOptions::read(Some(&json!({"provider": "vercel"}))).unwrap();
        assert_eq!(r, ReaderOptions { config: ReaderConfig::defaults(Kind::Vercel), timeout_ms: DEFAULT_TIMEOUT_MS });
        assert_eq!(r.config.max_pages, DEFAULT_MAX_PAGES);
    }

    #[test]
    fn must_not_fire_full_options_are_read_and_the_base_url_normalized() {
        let r = reader(
            "daytona",
            json!({"apiKey": KEY, "baseUrl": "http://127.0.0.1:8080/api/", "organizationId": "org-1",
                   "limits": {"cpu": 10, "memory": 20.5}, "demand": {"cpu": 1}, "maxPages": 7, "pageSize": 200,
                   "timeoutMs": 250}),
        )
        .unwrap();
        let cfg = &r.config;
        assert_eq!(cfg.base_url.as_deref(), Some("http://127.0.0.1:8080/api"));
        assert_eq!(cfg.organization_id.as_deref(), Some("org-1"));
        assert_eq!((cfg.limits.cpu, cfg.limits.memory, cfg.demand.cpu), (Some(10.0), Some(20.5), Some(1.0)));
        assert_eq!((cfg.max_pages, cfg.page_size, cfg.page_size()), (7, Some(200), 200));
        assert_eq!(r.timeout_ms, 250);
        // The provider's maximum is the default page; each kind measures its own dimensions.
        assert_eq!(reader("e2b", json!({"apiKey": KEY})).unwrap().config.page_size(), 100);
        assert!(reader("e2b", json!({"apiKey": KEY, "limits": {"sandboxes": 2}, "pageSize": 100})).is_ok());
        assert!(reader("freestyle", json!({"limits": {"sandboxes": 2}})).is_ok());
    }

    #[test]
    fn must_fire_invalid_options_are_refused_naming_the_field_never_the_value() {
        let cases: Vec<(&str, Value, &str, &str)> = vec![
            (
                "modal",
                json!({"apiKey": KEY}),
                "provider",
                "must be one of daytona, e2b, microsandbox, agent37, vercel, freestyle",
            ),
            ("daytona", json!(null), "options", "must be an object"),
            ("daytona", json!([]), "options", "must be an object"),
            ("daytona", json!({}), "apiKey", "must be a non-empty string"),
            ("e2b", json!({"apiKey": ""}), "apiKey", "must be a non-empty string"),
            ("e2b", json!({"apiKey": format!("{KEY}\n")}), "apiKey", "must not contain control characters"),
            ("e2b", json!({"apiKey": format!("{KEY}\u{7f}")}), "apiKey", "must not contain control characters"),
            ("vercel", json!({"apiKey": 5}), "apiKey", "must be a string"),
            ("e2b", json!({"apiKey": KEY, "token": KEY}), "token", "is not a known option"),
            ("e2b", json!({"apiKey": KEY, "baseUrl": ""}), "baseUrl", "must be a non-empty string"),
            ("e2b", json!({"apiKey": KEY, "baseUrl": KEY}), "baseUrl", "must be an absolute http(s) URL"),
            ("e2b", json!({"apiKey": KEY, "baseUrl": format!("file:///{KEY}")}), "baseUrl", "must use http or https"),
            (
                "e2b",
                json!({"apiKey": KEY, "baseUrl": format!("https://{KEY}:x@api.example")}),
                "baseUrl",
                "must not carry credentials",
            ),
            (
                "e2b",
                json!({"apiKey": KEY, "baseUrl": format!("https://api.example/?key={KEY}")}),
                "baseUrl",
                "must not carry a query or fragment",
            ),
            (
                "e2b",
                json!({"apiKey": KEY, "baseUrl": "https://api.example/#x"}),
                "baseUrl",
                "must not carry a query or fragment",
            ),
            ("e2b", json!({"apiKey": KEY, "organizationId": KEY}), "organizationId", "applies to daytona only"),
            (
                "daytona",
                json!({"apiKey": KEY, "organizationId": "a\r\nb"}),
                "organizationId",
                "must be a non-empty string without control characters",
            ),
            (
                "daytona",
                json!({"apiKey": KEY, "organizationId": ""}),
                "organizationId",
                "must be a non-empty string without control characters",
            ),
            (
                "e2b",
                json!({"apiKey": KEY, "limits": {"cpu": 2}}),
                "limits.cpu",
                "is not measurable here (allowed: sandboxes)",
            ),
            (
                "daytona",
                json!({"apiKey": KEY, "limits": {"sandboxes": 2}}),
                "limits.sandboxes",
                "is not measurable here (allowed: cpu, memory, disk)",
            ),
            ("daytona", json!({"apiKey": KEY, "limits": {"cpu": -1}}), "limits.cpu", "must be a finite number >= 0"),
            ("daytona", json!({"apiKey": KEY, "limits": {"cpu": "10"}}), "limits.cpu", "must be a finite number >= 0"),
            ("daytona", json!({"apiKey": KEY, "limits": {"cpu": null}}), "limits.cpu", "must be a finite number >= 0"),
            ("daytona", json!({"apiKey": KEY, "demand": []}), "demand", "must be an object"),
            ("daytona", json!({"apiKey": KEY, "maxPages": 0}), "maxPages", "must be an integer from 1 to 100000"),
            ("daytona", json!({"apiKey": KEY, "maxPages": 1.5}), "maxPages", "must be an integer from 1 to 100000"),
            ("daytona", json!({"apiKey": KEY, "pageSize": 201}), "pageSize", "must be an integer from 1 to 200"),
            ("e2b", json!({"apiKey": KEY, "pageSize": 101}), "pageSize", "must be an integer from 1 to 100"),
            (
                "agent37",
                json!({"apiKey": KEY, "pageSize": 10}),
                "pageSize",
                "does not apply: the agent37 list is not paginated",
            ),
            ("daytona", json!({"apiKey": KEY, "timeoutMs": 0}), "timeoutMs", "must be an integer from 1 to 2147483647"),
            (
                "daytona",
                json!({"apiKey": KEY, "timeoutMs": "5000"}),
                "timeoutMs",
                "must be an integer from 1 to 2147483647",
            ),
        ];
        for (provider, options, field, expectation) in cases {
            let e = reader(provider, options.clone()).unwrap_err();
            assert_eq!((e.field.as_str(), e.expectation.as_str()), (field, expectation), "{provider} {options}");
            assert!(!message(&e).contains(KEY), "{}", message(&e));
            assert_eq!(message(&e), format!("invalid capacity reader option {field}: {expectation}"));
        }
        let e = ReaderOptions::read(None).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.expectation.as_str()),
            ("options", "could not be read (a property access threw)")
        );
    }

    #[test]
    fn must_fire_an_unknown_key_is_echoed_cut_short() {
        let key = "k".repeat(100);
        let e = reader("vercel", json!({ key.clone(): 1 })).unwrap_err();
        assert_eq!(e.field, shown(&key));
        assert!(e.field.len() < key.len());
    }

    #[test]
    fn the_read_timeout_is_the_reads_own_or_the_readers() {
        let t = |v: Value| read_timeout(Some(&v), 7);
        assert_eq!(t(json!(null)), Ok(7));
        assert_eq!(t(json!({})), Ok(7));
        assert_eq!(t(json!({"timeoutMs": 250, "other": 1})), Ok(250));
        assert_eq!(t(json!(5)).unwrap_err().field, "getCapacity");
        assert_eq!(read_timeout(None, 7).unwrap_err().field, "getCapacity");
        for bad in [json!(-1), json!(0), json!(1.5), json!("100"), json!(null), json!(2_147_483_648u64)] {
            assert_eq!(t(json!({ "timeoutMs": bad })).unwrap_err().field, "getCapacity.timeoutMs");
        }
        assert_eq!(t(json!({"timeoutMs": 2_147_483_647u64})), Ok(MAX_TIMEOUT_MS));
    }

    #[test]
    fn must_fire_a_finder_with_a_key_and_a_list_api_is_native_and_refuses_what_a_reader_refuses() {
        let spec = |provider: &str, options: Value| json!({"provider": provider, "options": options});
        let cfg = finder_config(&spec("daytona", json!({"apiKey": KEY, "organizationId": "o", "pageSize": 50})));
        assert_eq!(cfg.unwrap().unwrap().organization_id.as_deref(), Some("o"));
        let bad = finder_config(&spec("e2b", json!({"apiKey": KEY, "pageSize": 101}))).unwrap();
        assert_eq!(bad.unwrap_err().field, "pageSize");
        // The key is not checked beyond being a string: a list with a key that cannot be sent is UNAUTHORIZED.
        assert!(finder_config(&spec("agent37", json!({"apiKey": "a\nb"}))).unwrap().is_ok());
    }

    #[test]
    fn must_not_fire_no_list_api_or_no_key_is_no_native_finder() {
        let spec = |provider: &str, options: Value| json!({"provider": provider, "options": options});
        assert_eq!(finder_config(&spec("vercel", json!({"apiKey": KEY}))), None);
        assert_eq!(finder_config(&spec("modal", json!({"apiKey": KEY}))), None);
        assert_eq!(finder_config(&spec("e2b", json!({}))), None);
        assert_eq!(finder_config(&spec("e2b", json!({"apiKey": 5}))), None);
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
