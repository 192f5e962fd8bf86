//! The router's options: every default and range, defined once, and the rule of each
//! option, naming the field of any error.
//!
//! JavaScript reads the caller's options once (a guarded copy) and hands two things: the
//! data options as JSON text ([`read`]'s `data`), and, for every option it was given, what
//! kind of value it is and which of the methods that matter it has ([`Given`]). Functions
//! and objects with methods (the registry, stores, the observer, callbacks, clocks) stay in
//! JavaScript; this module decides whether each is acceptable, and what every omitted field
//! is (oxc-resolver's habit: omitted fields come from `RouterOptions::default()`).

use crate::core::error::{CoreError, Failure, Fault};
use crate::core::ids::validate_provider_id;
use crate::core::json::{field_path, Segment};
use crate::core::request::{validate_fleet, LabelLimits, DEFAULT_FLEET, DEFAULT_LABEL_LIMITS, MAX_LABEL_LIMITS};
use serde_json::{Map, Value};

/// Every option a router takes, in the documented order.
pub const ROUTER_OPTIONS: [&str; 17] = [
    "registry",
    "mappings",
    "observer",
    "classifyProviderFailure",
    "resolveRoutingSignals",
    "provisioning",
    "capacity",
    "callbackTimeoutMs",
    "operationTimeoutMs",
    "fleet",
    "health",
    "clock",
    "budgets",
    "limits",
    "telemetry",
    "queue",
    "decisions",
];

/// The methods whose presence decides an option (JavaScript reports which of these a given
/// object has; the core decides what is acceptable).
pub const METHODS: [&str; 10] =
    ["list", "put", "get", "delete", "intent", "intents", "emit", "onEvent", "event", "hasAvailableCredentials"];

/// Default bound on caller callbacks (readiness, resolver, classifier, mapping store), ms.
pub const DEFAULT_CALLBACK_TIMEOUT_MS: u64 = 10_000;
/// Longest `callbackTimeoutMs`.
pub const MAX_CALLBACK_TIMEOUT_MS: u64 = 3_600_000;
/// Default deadline of one capacity read, ms.
pub const DEFAULT_CAPACITY_TIMEOUT_MS: u64 = 5_000;
/// Longest `capacity.timeoutMs`.
pub const MAX_CAPACITY_TIMEOUT_MS: u64 = 600_000;
/// Default life of a post-launch capacity assumption that no read has reflected yet, ms.
pub const DEFAULT_RESERVATION_TTL_MS: u64 = 60_000;
/// Longest `capacity.reservationTtlMs`.
pub const MAX_RESERVATION_TTL_MS: u64 = 86_400_000;
/// Default bound on one runtime call made for an operation by id (or a clean-up), ms.
pub const DEFAULT_OPERATION_TIMEOUT_MS: u64 = 600_000;
/// Longest `operationTimeoutMs`.
pub const MAX_OPERATION_TIMEOUT_MS: u64 = 86_400_000;

// The label limits' default and largest values are `core::request::DEFAULT_LABEL_LIMITS` and
// `MAX_LABEL_LIMITS`, beside their type (the request's validation reads them without a router).
/// How long a budget charge stays adjustable by `settleCost` after its sandbox is gone (its
/// concurrent slot given back), ms: five minutes of the router's clock
/// (`limits.settleHorizonMs`).
pub const DEFAULT_SETTLE_HORIZON_MS: i64 = 300_000;
/// The longest settle horizon a router takes (a day).
pub const MAX_SETTLE_HORIZON_MS: i64 = 86_400_000;

/// What the router option `limits` sets: the label limits, and the budgets' settle
/// horizon (`core::budget::Ledger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bounds on launch labels.
    pub labels: LabelLimits,
    /// How long a budget charge stays adjustable by `settleCost` after its sandbox is gone, ms.
    pub settle_horizon_ms: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { labels: DEFAULT_LABEL_LIMITS, settle_horizon_ms: DEFAULT_SETTLE_HORIZON_MS }
    }
}

/// Reads the router option `limits` strictly (`{ labels?, labelKeyBytes?, labelValueBytes?,
/// settleHorizonMs? }`, each an integer in its range); the error names the field
/// (`limits.labelValueBytes`).
pub fn limits(v: &Value) -> Result<Limits, Failure> {
    use crate::core::json::{object, FieldError};
    let bad = |e: FieldError| err(e.field, &e.expectation);
    let o = object(v, "limits", &["labels", "labelKeyBytes", "labelValueBytes", "settleHorizonMs"]).map_err(bad)?;
    let int = |key: &str, max: usize, default: usize| -> Result<usize, Failure> {
        Ok(o.integer_in(key, 1, max as i64).map_err(bad)?.map_or(default, |n| n as usize))
    };
    let (d, m) = (DEFAULT_LABEL_LIMITS, MAX_LABEL_LIMITS);
    Ok(Limits {
        labels: LabelLimits {
            count: int("labels", m.count, d.count)?,
            key_bytes: int("labelKeyBytes", m.key_bytes, d.key_bytes)?,
            value_bytes: int("labelValueBytes", m.value_bytes, d.value_bytes)?,
        },
        settle_horizon_ms: o
            .integer_in("settleHorizonMs", 0, MAX_SETTLE_HORIZON_MS)
            .map_err(bad)?
            .unwrap_or(DEFAULT_SETTLE_HORIZON_MS),
    })
}

/// Reads the router option `queue` (`core::queue::QueueConfig::read`); the error names the
/// field (`queue.maxWaitMs`).
pub fn queue(v: &Value) -> Result<Option<crate::core::queue::QueueConfig>, Failure> {
    crate::core::queue::QueueConfig::read(v).map_err(|e| err(e.field, &e.expectation))
}

/// Reads the router option `decisions` (`core::decision::DecisionConfig::read`; `sink`: the
/// kind of `decisions.sink`); the error names the field (`decisions.keep`).
pub fn decisions(v: &Value, sink: Option<&str>) -> Result<Option<crate::core::decision::DecisionConfig>, Failure> {
    crate::core::decision::DecisionConfig::read(v, sink).map_err(|e| err(e.field, &e.expectation))
}

/// What kind of value JavaScript found for one option, and which of [`METHODS`] it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// The option's name (a caller's key, as given).
    pub key: String,
    /// `typeof` the value, or `null` / `array`.
    pub kind: String,
    /// The methods of [`METHODS`] it has (a getter that threw counts as none).
    pub methods: Vec<String>,
    /// `capacity.coordinator`: whether it is a `PostgresMappingStore` (None: not given).
    pub postgres: Option<bool>,
    /// `decisions.sink`: what kind of value it is (None: `decisions` is not an object).
    pub sink: Option<String>,
}

impl Given {
    fn has(&self, m: &str) -> bool {
        self.methods.iter().any(|x| x == m)
    }
}

/// The router's options, validated, every omitted field at its default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterOptions {
    /// The fleet stamped into every launch.
    pub fleet: String,
    /// `callbackTimeoutMs`.
    pub callback_timeout_ms: u64,
    /// `operationTimeoutMs`.
    pub operation_timeout_ms: u64,
    /// Capacity routing.
    pub capacity: Option<CapacityOptions>,
    /// One capacity read's deadline (`capacity.timeoutMs`, or its default: `getCapacity()`
    /// reads without a capacity policy too), ms.
    pub capacity_timeout_ms: u64,
    /// The observer's method to call (`emit`, `onEvent`, `event`), or None when the
    /// observer is a function (or absent: see `observer`).
    pub observer_method: Option<&'static str>,
    /// Whether the router has an observer.
    pub observer: bool,
    /// Whether the caller gave a mapping store (else the router makes the default one).
    pub mappings: bool,
    /// Whether that store takes launch intents (`intent` and `intents`).
    pub intents: bool,
    /// Whether the router has a failure classifier.
    pub classifier: bool,
    /// Whether the router has a signal resolver.
    pub resolver: bool,
    /// Whether the router asks credential readiness.
    pub provisioning: bool,
    /// Whether the router has its own clock (`clock`).
    pub clock: bool,
    /// Whether `health` has its own clock.
    pub health_clock: bool,
    /// `limits`: label limits and the budgets' settle horizon.
    pub limits: Limits,
    /// `queue`: the wait queue (None: off, the default).
    pub queue: Option<crate::core::queue::QueueConfig>,
    /// `decisions`: decision records (None: off, the default).
    pub decisions: Option<crate::core::decision::DecisionConfig>,
}

/// A router's capacity policy, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityOptions {
    /// The explicit provider order that replaces strategy ranking.
    pub provider_order: Vec<String>,
    /// One read's deadline, ms.
    pub timeout_ms: u64,
    /// Life of a post-launch assumption, ms.
    pub reservation_ttl_ms: u64,
    /// Whether the holds live in a shared coordinator (`PostgresMappingStore`).
    pub coordinated: bool,
}

impl Default for RouterOptions {
    fn default() -> Self {
        RouterOptions {
            fleet: DEFAULT_FLEET.to_string(),
            callback_timeout_ms: DEFAULT_CALLBACK_TIMEOUT_MS,
            operation_timeout_ms: DEFAULT_OPERATION_TIMEOUT_MS,
            capacity: None,
            capacity_timeout_ms: DEFAULT_CAPACITY_TIMEOUT_MS,
            observer_method: None,
            observer: false,
            mappings: false,
            intents: false,
            classifier: false,
            resolver: false,
            provisioning: false,
            clock: false,
            health_clock: false,
            limits: Limits::default(),
            queue: None,
            decisions: None,
        }
    }
}

fn err(field: impl Into<String>, expectation: &str) -> Failure {
    Fault::config("router", field, expectation)
}

/// A caller's key as a message echoes it: at most 64 characters, the cut marked.
pub fn shown(key: &str) -> String {
    crate::core::json::shown(key).into_owned()
}

/// An integer option in 1..=max (omitted: `default`).
fn int_in(data: &Map<String, Value>, key: &str, field: &str, default: u64, max: u64) -> Result<u64, Failure> {
    match data.get(key) {
        None => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=max).contains(&n) && v.as_f64().is_some_and(|f| f.fract() == 0.0) => Ok(n),
            _ => Err(err(field, &format!("must be an integer from 1 to {max}"))),
        },
    }
}

/// Reads the options: `given` (every key the caller gave, with its kind and methods),
/// `health_clock` (the kind of `health.clock`, when `health` is an object) and `data` (the
/// data options as JSON: `capacity` without its coordinator, the timeouts, `fleet`). The
/// first refusal is the typed `INVALID_CONFIGURATION` error naming the field.
pub fn read(given: &[Given], health_clock: Option<&str>, data: &Value) -> Result<RouterOptions, Failure> {
    for g in given {
        if !ROUTER_OPTIONS.contains(&g.key.as_str()) {
            return Err(err(shown(&g.key), "is not a known option"));
        }
    }
    let find = |key: &str| given.iter().find(|g| g.key == key && g.kind != "undefined");
    let empty = Map::new();
    let data = data.as_object().unwrap_or(&empty);
    let mut o = RouterOptions::default();
    match find("registry") {
        Some(g) if g.has("list") && g.kind == "object" => {}
        _ => return Err(err("registry", "must be a ProviderRegistry (an object with list())")),
    }
    if let Some(g) = find("mappings") {
        if !(g.kind == "object" && ["put", "get", "delete"].iter().all(|m| g.has(m))) {
            return Err(err("mappings", "must be a mapping store (put, get and delete methods)"));
        }
        o.mappings = true;
        o.intents = g.has("intent") && g.has("intents");
    }
    if let Some(g) = find("classifyProviderFailure") {
        if g.kind != "function" {
            return Err(err("classifyProviderFailure", "must be a function"));
        }
        o.classifier = true;
    }
    if let Some(g) = find("resolveRoutingSignals") {
        if g.kind != "function" {
            return Err(err("resolveRoutingSignals", "must be a function"));
        }
        o.resolver = true;
    }
    if let Some(g) = find("provisioning") {
        if !(g.kind == "object" && g.has("hasAvailableCredentials")) {
            return Err(err("provisioning", "must have hasAvailableCredentials(providerId)"));
        }
        o.provisioning = true;
    }
    if let Some(c) = find("capacity") {
        let c = capacity(c, data.get("capacity"))?;
        o.capacity_timeout_ms = c.timeout_ms;
        o.capacity = Some(c);
    }
    if let Some(g) = find("observer") {
        o.observer_method = match g.kind.as_str() {
            "function" => None,
            "object" => Some(
                ["emit", "onEvent", "event"]
                    .into_iter()
                    .find(|m| g.has(m))
                    .ok_or_else(|| err("observer", "must be a function or an object with emit(event)"))?,
            ),
            _ => return Err(err("observer", "must be a function or an object with emit(event)")),
        };
        o.observer = true;
    }
    o.callback_timeout_ms =
        int_in(data, "callbackTimeoutMs", "callbackTimeoutMs", DEFAULT_CALLBACK_TIMEOUT_MS, MAX_CALLBACK_TIMEOUT_MS)?;
    o.operation_timeout_ms = int_in(
        data,
        "operationTimeoutMs",
        "operationTimeoutMs",
        DEFAULT_OPERATION_TIMEOUT_MS,
        MAX_OPERATION_TIMEOUT_MS,
    )?;
    if find("fleet").is_some() {
        match data.get("fleet").and_then(Value::as_str) {
            Some(f) if validate_fleet(f) => o.fleet = f.to_string(),
            _ => return Err(err("fleet", "must be 1-63 characters of [a-z0-9][a-z0-9._-]* (a label-safe name)")),
        }
    }
    if find("limits").is_some() {
        o.limits = limits(data.get("limits").unwrap_or(&Value::Null))?;
    }
    if find("queue").is_some() {
        o.queue = queue(data.get("queue").unwrap_or(&Value::Null))?;
    }
    if let Some(g) = find("decisions") {
        o.decisions = decisions(data.get("decisions").unwrap_or(&Value::Null), g.sink.as_deref())?;
    }
    if let Some(g) = find("clock") {
        if g.kind != "function" {
            return Err(err("clock", "must be a function returning milliseconds since the epoch"));
        }
        o.clock = true;
    }
    o.health_clock = match health_clock.filter(|k| *k != "undefined") {
        Some("function") => true,
        Some(_) => return Err(err("health.clock", "must be a function returning milliseconds since the epoch")),
        None => false,
    };
    Ok(o)
}

/// The `capacity` option: `c` its kind, `data` its data (the coordinator apart).
fn capacity(c: &Given, data: Option<&Value>) -> Result<CapacityOptions, Failure> {
    let Some(data) = data.and_then(Value::as_object).filter(|_| c.kind == "object") else {
        return Err(err("capacity", "must be an object"));
    };
    let order = data.get("providerOrder").and_then(Value::as_array).filter(|a| !a.is_empty());
    let Some(order) = order else {
        return Err(err("capacity.providerOrder", "must be a non-empty array of provider ids"));
    };
    let mut provider_order: Vec<String> = Vec::with_capacity(order.len());
    for (i, id) in order.iter().enumerate() {
        let field = format!("capacity.providerOrder[{i}]");
        match id.as_str() {
            Some(id) if validate_provider_id(id).is_ok() => {
                if provider_order.iter().any(|p| p == id) {
                    return Err(err(field, "must be a distinct provider id"));
                }
                provider_order.push(id.to_string());
            }
            _ => return Err(err(field, "must be a valid provider id")),
        }
    }
    let coordinated = match c.postgres {
        None => false,
        Some(true) => true,
        Some(false) => return Err(err("capacity.coordinator", "must be a PostgresMappingStore")),
    };
    let reservation_ttl_ms = int_in(
        data,
        "reservationTtlMs",
        "capacity.reservationTtlMs",
        DEFAULT_RESERVATION_TTL_MS,
        MAX_RESERVATION_TTL_MS,
    )?;
    let timeout_ms =
        int_in(data, "timeoutMs", "capacity.timeoutMs", DEFAULT_CAPACITY_TIMEOUT_MS, MAX_CAPACITY_TIMEOUT_MS)?;
    Ok(CapacityOptions { provider_order, timeout_ms, reservation_ttl_ms, coordinated })
}

/// Options that could not be read at all (`what`: the options' own kind when they are not
/// an object, `unreadable` when a property access threw, or the option that could not be
/// read: `mappings`, `budgets`).
pub fn refused(what: &str) -> Failure {
    match what {
        "unreadable" => err("options", "could not be read (a property access threw)"),
        "mappings" => err("mappings", "could not be read"),
        "budgets" => err("budgets", "could not be read (a property access threw)"),
        // `jsonLinesSink(path)`: its path.
        "decisions.file" => Fault::config("jsonLinesSink", "path", "must be a non-empty file path"),
        // `provision(request, { signal })`: a signal that is not an AbortSignal.
        "signal" => Fault::invalid(
            crate::core::error::ErrorClass::RequestValidation,
            "INVALID_REQUEST",
            "invalid options: signal must be an AbortSignal",
            "options.signal",
        ),
        // `route(request, options)` / `explain(request, options)`: their options.
        "call" => Fault::invalid(
            crate::core::error::ErrorClass::RequestValidation,
            "INVALID_REQUEST",
            "invalid options: could not be read",
            "options",
        ),
        _ => err("options", "must be an object"),
    }
}

/// A caller's value JSON cannot carry, found at `segments` (keys and array indices) under
/// option `prefix` of `scope`'s options; `what` says what it is (`a function`, `NaN`, …).
pub fn not_json(scope: &str, prefix: &str, segments: &[Segment], what: &str) -> Failure {
    refusal(scope, field_path(prefix, segments), &not_json_expectation(what))
}

/// What a field holding a value JSON cannot carry must be (`what`: `a function`, `NaN`, …).
pub fn not_json_expectation(what: &str) -> String {
    format!("must be JSON data ({what} is not)")
}

/// A caller's value that could not be read at all (a cycle, a throwing getter or toJSON),
/// under `field` of `scope`.
pub fn unreadable(scope: &str, field: &str) -> Failure {
    refusal(scope, field.to_string(), "must be readable plain data (no cycles, throwing getters or toJSON)")
}

/// The typed refusal of `field` in `scope`: `request` (`INVALID_REQUEST`), `input` (a
/// manifest's or a manifest call's, `INVALID_INPUT`), otherwise the scope's options
/// (`INVALID_CONFIGURATION`).
fn refusal(scope: &str, field: String, expectation: &str) -> Failure {
    match scope {
        "input" => CoreError::InvalidInput { field, expectation: expectation.to_string() }.into(),
        "request" => Fault::invalid(
            crate::core::error::ErrorClass::RequestValidation,
            "INVALID_REQUEST",
            format!("invalid request: {field} {expectation}"),
            field,
        ),
        _ => Fault::config(scope, field, expectation),
    }
}

/// A clock's reading (`field`: `clock` or `health.clock`): a finite number of milliseconds,
/// else the typed error naming the option (a clock that threw reads as NaN).
pub fn clock_reading(reading: f64, field: &str) -> Result<i64, Failure> {
    if reading.is_finite() {
        Ok(reading as i64)
    } else {
        Err(Fault::invalid(
            crate::core::error::ErrorClass::Configuration,
            "INVALID_CONFIGURATION",
            format!("invalid router options: {field} must return a finite number of milliseconds"),
            field,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn g(key: &str, kind: &str, methods: &[&str]) -> Given {
        Given {
            key: key.into(),
            kind: kind.into(),
            methods: methods.iter().map(|m| m.to_string()).collect(),
            postgres: None,
            sink: None,
        }
    }

    fn registry() -> Given {
        g("registry", "object", &["list"])
    }

    fn read_(given: &[Given], data: &Value) -> Result<RouterOptions, Failure> {
        read(given, None, data)
    }

    fn field_of(r: Result<RouterOptions, Failure>) -> String {
        r.unwrap_err().field.unwrap_or_default()
    }

    #[test]
    fn limits_must_fire_out_of_range_or_unknown_is_refused_naming_the_field() {
        for (limits, field) in [
            (json!({ "labels": 0 }), "limits.labels"),
            (json!({ "labels": 1_025 }), "limits.labels"),
            (json!({ "labelKeyBytes": 4_097 }), "limits.labelKeyBytes"),
            (json!({ "labelValueBytes": 65_537 }), "limits.labelValueBytes"),
            (json!({ "labelValueBytes": 1.5 }), "limits.labelValueBytes"),
            (json!({ "settleHorizonMs": -1 }), "limits.settleHorizonMs"),
            (json!({ "settleHorizonMs": 86_400_001 }), "limits.settleHorizonMs"),
            (json!({ "labelz": 1 }), "limits.labelz"),
            (json!(7), "limits"),
        ] {
            let given = [registry(), g("limits", "object", &[])];
            let e = read_(&given, &json!({ "limits": limits })).unwrap_err();
            assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_CONFIGURATION", Some(field)), "{limits}");
        }
    }

    #[test]
    fn limits_must_not_fire_omitted_fields_take_their_defaults_and_the_edges_pass() {
        assert_eq!(read_(&[registry()], &json!({})).unwrap().limits, Limits::default());
        let given = [registry(), g("limits", "object", &[])];
        let o =
            read_(&given, &json!({ "limits": { "labels": 1_024, "labelValueBytes": 65_536, "settleHorizonMs": 0 } }))
                .unwrap();
        assert_eq!(o.limits.labels, LabelLimits { count: 1_024, key_bytes: 256, value_bytes: 65_536 });
        assert_eq!(o.limits.settle_horizon_ms, 0);
        assert_eq!(Limits::default().settle_horizon_ms, DEFAULT_SETTLE_HORIZON_MS);
    }

    #[test]
    fn must_not_fire_the_least_options_take_every_default() {
        let o = read_(&[registry()], &json!({})).unwrap();
        assert_eq!(o, RouterOptions::default());
        assert_eq!((o.callback_timeout_ms, o.operation_timeout_ms), (10_000, 600_000));
    }

    #[test]
    fn must_fire_each_malformed_option_is_refused_naming_its_field() {
        assert_eq!(field_of(read_(&[], &json!({}))), "registry");
        assert_eq!(field_of(read_(&[g("registry", "object", &[])], &json!({}))), "registry");
        assert_eq!(field_of(read_(&[registry(), g("nope", "number", &[])], &json!({}))), "nope");
        assert_eq!(field_of(read_(&[registry(), g("mappings", "object", &["put", "get"])], &json!({}))), "mappings");
        assert_eq!(field_of(read_(&[registry(), g("observer", "object", &[])], &json!({}))), "observer");
        assert_eq!(field_of(read_(&[registry(), g("clock", "number", &[])], &json!({}))), "clock");
        for (v, field) in [
            (json!(0), "callbackTimeoutMs"),
            (json!(3_600_001), "callbackTimeoutMs"),
            (json!(1.5), "callbackTimeoutMs"),
        ] {
            let given = [registry(), g("callbackTimeoutMs", "number", &[])];
            assert_eq!(field_of(read_(&given, &json!({ "callbackTimeoutMs": v }))), field);
        }
        let cap = g("capacity", "object", &[]);
        let given = [registry(), cap.clone()];
        assert_eq!(field_of(read_(&given, &json!({ "capacity": {} }))), "capacity.providerOrder");
        assert_eq!(
            field_of(read_(&given, &json!({ "capacity": { "providerOrder": ["a", "a"] } }))),
            "capacity.providerOrder[1]"
        );
        assert_eq!(
            field_of(read_(&given, &json!({ "capacity": { "providerOrder": ["a"], "timeoutMs": 600_001 } }))),
            "capacity.timeoutMs"
        );
        let not_pg = Given { postgres: Some(false), ..cap };
        assert_eq!(
            field_of(read_(&[registry(), not_pg], &json!({ "capacity": { "providerOrder": ["a"] } }))),
            "capacity.coordinator"
        );
        assert_eq!(field_of(read_(&[registry(), g("fleet", "string", &[])], &json!({ "fleet": "Bad Name" }))), "fleet");
    }

    #[test]
    fn must_not_fire_valid_options_are_read_with_their_values() {
        let given = [
            registry(),
            g("observer", "object", &["onEvent", "event"]),
            g("mappings", "object", &["put", "get", "delete", "intent", "intents"]),
            g("capacity", "object", &[]),
            g("callbackTimeoutMs", "number", &[]),
            g("fleet", "string", &[]),
        ];
        let o = read_(
            &given,
            &json!({ "capacity": { "providerOrder": ["b", "a"] }, "callbackTimeoutMs": 5, "fleet": "blue" }),
        )
        .unwrap();
        assert_eq!(o.observer_method, Some("onEvent"), "the first method found, in emit, onEvent, event order");
        assert!(o.intents && o.mappings);
        assert_eq!(o.callback_timeout_ms, 5);
        assert_eq!(o.fleet, "blue");
        let c = o.capacity.unwrap();
        assert_eq!(
            (c.provider_order, c.timeout_ms, c.reservation_ttl_ms, c.coordinated),
            (vec!["b".into(), "a".into()], 5_000, 60_000, false)
        );
    }

    #[test]
    fn field_paths_name_keys_and_indices_as_the_readers_do() {
        let segs = [Segment::Key("capacity".into()), Segment::Key("providerOrder".into()), Segment::Index(2)];
        assert_eq!(field_path("", &segs), "capacity.providerOrder[2]");
        assert_eq!(field_path("health", &[Segment::Key("cooldownMs".into())]), "health.cooldownMs");
        assert_eq!(field_path("", &[]), "(root)");
        let long = "k".repeat(70);
        assert!(field_path("", &[Segment::Key(long)]).ends_with("…[+6 bytes]"));
        let e = not_json("router", "budgets", &[Segment::Index(0), Segment::Key("id".into())], "a function");
        assert_eq!(e.field.as_deref(), Some("budgets[0].id"));
        assert_eq!(e.message, "invalid router options: budgets[0].id must be JSON data (a function is not)");
    }

    #[test]
    fn must_fire_a_value_json_cannot_carry_in_input_is_invalid_input_at_its_field() {
        let e = not_json("input", "manifest", &[Segment::Key("processes".into()), Segment::Index(1)], "NaN");
        assert_eq!((e.code.as_str(), e.class), ("INVALID_INPUT", crate::core::error::ErrorClass::RequestValidation));
        assert_eq!(e.field.as_deref(), Some("manifest.processes[1]"));
        assert_eq!(e.message, "invalid input: manifest.processes[1] must be JSON data (NaN is not)");
    }

    #[test]
    fn must_not_fire_a_value_json_cannot_carry_in_options_is_not_invalid_input() {
        let e = not_json("router", "", &[Segment::Key("fleet".into())], "a symbol");
        assert_eq!(e.code, "INVALID_CONFIGURATION");
        assert_eq!(not_json("request", "", &[], "NaN").code, "INVALID_REQUEST");
    }

    #[test]
    fn clock_readings_must_be_finite() {
        assert_eq!(clock_reading(5.0, "clock").unwrap(), 5);
        let e = clock_reading(f64::NAN, "health.clock").unwrap_err();
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_CONFIGURATION", Some("health.clock")));
    }
}
