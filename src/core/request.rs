//! Sandbox requests: parsing, validation and defaults.
//!
//! Why refuse unknown keys instead of warning? Inside `requires`, `routing` and
//! `resources`, a misspelled key (`requiredCapabilites`) would otherwise be ignored and
//! *widen* eligibility: the request would be served by pools that lack what the caller
//! meant to require. A typed error at the call site is the only outcome that cannot
//! silently place a workload somewhere unsafe. The same strictness applies to every
//! other object in the request, so one rule covers all.

use crate::core::capabilities::{
    capability_bit, is_capability_name, Resources, DURABILITY_LEVELS, EGRESS_CLASSES, ISOLATION_LEVELS, RESOURCE_KEYS,
    TIMEOUT_SEMANTICS,
};
use crate::core::json::{object, FieldError, Obj};
use crate::core::labels::Labels;
use crate::core::CoreError;
use serde_json::Value;
use smallvec::SmallVec;
use std::sync::Arc;

/// The label key under which the router stamps its own `sbx_…` id before launch.
pub const SANDBOX_ID_LABEL: &str = "agent-relay-sbx-id";

/// The label key under which the router stamps its fleet's name before launch (beside the
/// id), so that one label search lists everything one router fleet made.
pub const SANDBOX_FLEET_LABEL: &str = "agent-relay-sbx-fleet";

/// The label key that marks a warm pool's member (its value: the pool's id), beside the
/// stamp: on the provider side for its whole life (the port cannot relabel), and on its
/// mapping record while it is idle (a claim replaces the record's labels with the caller's).
/// See `core::warm`.
pub const SANDBOX_WARM_LABEL: &str = "agent-relay-sbx-warm";

/// The label keys the router stamps itself; a caller label on any of them is refused (the
/// warm label too: a caller's record that carried it would read as an idle member).
pub const RESERVED_LABELS: [&str; 3] = [SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL, SANDBOX_WARM_LABEL];

/// Default fleet name (router option `fleet`).
pub const DEFAULT_FLEET: &str = "default";

/// Validates a fleet name: 1–63 bytes of `[a-z0-9][a-z0-9._-]*`, a value every provider's
/// labels, metadata and query strings carry unchanged.
pub fn validate_fleet(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && matches!(b[0], b'a'..=b'z' | b'0'..=b'9')
        && b[1..].iter().all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
}

/// Default number of launch attempts.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Upper bound on launch attempts.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10;
/// Default deadline for one launch, in ms (5 minutes).
pub const DEFAULT_ACQUISITION_TIMEOUT_MS: u64 = 300_000;
/// Largest accepted launch deadline, in ms (1 hour).
pub const MAX_ACQUISITION_TIMEOUT_MS: i64 = 3_600_000;

/// Ranking strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Lowest `estimatedCost` first.
    Cost,
    /// Lowest latency (per the objective) first.
    Latency,
    /// Highest `completionWithinBudgetRate` first.
    Reliability,
    /// 35% cost, 25% latency, 40% reliability over min-max normalized values.
    Balanced,
}

impl Strategy {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Cost => "cost",
            Strategy::Latency => "latency",
            Strategy::Reliability => "reliability",
            Strategy::Balanced => "balanced",
        }
    }
}

/// Which latency signal a latency comparison uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    /// `coldStartLatencyMs`: until the provider's create call returns.
    Cold,
    /// `readyLatencyMs`: until the workload is ready (default).
    Ready,
}

impl Objective {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Objective::Cold => "cold",
            Objective::Ready => "ready",
        }
    }
}

/// A validated request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Exact pool constraint.
    pub provider_id: Option<String>,
    /// Capabilities the pool must declare.
    pub required_capabilities: Vec<String>,
    /// Capabilities the pool must not declare.
    pub forbidden_capabilities: Vec<String>,
    /// Image identity the pool must launch.
    pub image_identity: Option<String>,
    /// Binaries the pool's image must contain.
    pub required_binaries: Vec<String>,
    /// Acceptable egress classes (empty: any, including undeclared).
    pub egress: Vec<&'static str>,
    /// Timeout semantics the pool must honour.
    pub timeout_semantics: Vec<&'static str>,
    /// Coarsest acceptable timeout granularity, ms.
    pub timeout_granularity_ms: Option<f64>,
    /// Latency budget for the chosen objective, ms.
    pub max_ready_latency_ms: Option<f64>,
    /// Expected completion budget, ms (informational; passed to signal resolvers).
    pub completion_budget_ms: Option<f64>,
    /// Sandbox life the workload needs, ms.
    pub required_lifetime_ms: Option<f64>,
    /// Minimum state durability.
    pub durability: Option<&'static str>,
    /// Restrictions the pool must enforce.
    pub restrictions: Vec<String>,
    /// Minimum isolation level.
    pub isolation: Option<&'static str>,
    /// Per-sandbox resource needs.
    pub resources: Resources,
    /// Preferred regions, best first.
    pub region_preferred: Vec<String>,
    /// When true, pools outside `region_preferred` are rejected.
    pub region_required: bool,
    /// Ranking strategy (default balanced).
    pub strategy: Strategy,
    /// Latency objective (default ready).
    pub latency_objective: Objective,
    /// Whether a classified-retryable failure may advance to the next pool (default true).
    pub fallback_allowed: bool,
    /// Launch attempts bound (default 3, 1..=10; 1 when fallback is forbidden).
    pub max_attempts: u32,
    /// Deadline for one launch, ms.
    pub acquisition_timeout_ms: u64,
    /// `launch.name` is given (a warm member cannot take a name: `core::warm`).
    pub launch_name: bool,
    /// `launch.env` has at least one entry (a warm member cannot take an environment).
    pub launch_env: bool,
    /// Caller labels, sorted by key (shared with the mapping records made from it).
    pub labels: Arc<Labels>,
    /// Mask of the known required capabilities; `required_custom` is true when a custom
    /// (`x-`) name is required, which the mask cannot express.
    pub required_mask: u64,
    /// Mask of the known forbidden capabilities.
    pub forbidden_mask: u64,
    /// A custom capability is required.
    pub required_custom: bool,
    /// A custom capability is forbidden.
    pub forbidden_custom: bool,
    /// The validated text it was parsed from (its labels apart), when the glue kept it:
    /// decision records write it.
    pub source: Option<std::rc::Rc<str>>,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            provider_id: None,
            required_capabilities: Vec::new(),
            forbidden_capabilities: Vec::new(),
            image_identity: None,
            required_binaries: Vec::new(),
            egress: Vec::new(),
            timeout_semantics: Vec::new(),
            timeout_granularity_ms: None,
            max_ready_latency_ms: None,
            completion_budget_ms: None,
            required_lifetime_ms: None,
            durability: None,
            restrictions: Vec::new(),
            isolation: None,
            resources: Resources::default(),
            region_preferred: Vec::new(),
            region_required: false,
            strategy: Strategy::Balanced,
            latency_objective: Objective::Ready,
            fallback_allowed: true,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            acquisition_timeout_ms: DEFAULT_ACQUISITION_TIMEOUT_MS,
            launch_name: false,
            launch_env: false,
            labels: Arc::default(),
            required_mask: 0,
            forbidden_mask: 0,
            required_custom: false,
            forbidden_custom: false,
            source: None,
        }
    }
}

const TOP_KEYS: &[&str] =
    &["providerId", "requires", "resources", "region", "routing", "placement", "nodeAffinity", "launch"];
const REQUIRES_KEYS: &[&str] = &[
    "requiredCapabilities",
    "forbiddenCapabilities",
    "image",
    "egress",
    "timeout",
    "stateDurability",
    "restrictions",
    "isolation",
];
const TIMEOUT_KEYS: &[&str] =
    &["semantics", "granularityMs", "maxReadyLatencyMs", "completionBudgetMs", "requiredSandboxLifetimeMs"];
const ROUTING_KEYS: &[&str] =
    &["strategy", "latencyObjective", "acquisitionFallback", "maxAcquisitionAttempts", "acquisitionTimeoutMs"];
const LAUNCH_KEYS: &[&str] = &["name", "env", "labels", "createTimeoutSeconds"];

/// A field error of a request, as the core error the JS layer reports (`INVALID_REQUEST`).
pub fn invalid(e: FieldError) -> CoreError {
    CoreError::InvalidRequest { field: e.field, expectation: e.expectation }
}

/// Refuses requests that are not this router's to place: `placement.authority` of
/// `fleet` or `none`, or any `nodeAffinity` (top level or under `placement`). Runs before
/// any other validation, so such a request never reaches a pool.
pub fn check_placement(value: &Value) -> Result<(), CoreError> {
    let Value::Object(top) = value else { return Ok(()) };
    if top.contains_key("nodeAffinity") {
        return Err(CoreError::RoutingNotApplicable(
            "nodeAffinity selects a concrete node; fleet placement owns that decision",
        ));
    }
    if let Some(Value::Object(p)) = top.get("placement") {
        if p.contains_key("nodeAffinity") {
            return Err(CoreError::RoutingNotApplicable(
                "placement.nodeAffinity selects a concrete node; fleet placement owns that decision",
            ));
        }
        match p.get("authority").and_then(Value::as_str) {
            Some("fleet") => {
                return Err(CoreError::RoutingNotApplicable(
                    "placement.authority is fleet: the fleet scheduler places this workload",
                ))
            }
            Some("none") => {
                return Err(CoreError::RoutingNotApplicable(
                    "placement.authority is none: this workload needs no sandbox",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Parses and validates a request (`undefined`/`null` at the JS side arrive as `{}`).
pub fn parse_request(value: &Value) -> Result<Request, CoreError> {
    check_placement(value)?;
    read(value).map_err(invalid)
}

fn capability_names(o: &Obj<'_>, key: &str) -> Result<Vec<String>, FieldError> {
    let names = o.strings(key)?.unwrap_or_default();
    for (i, n) in names.iter().enumerate() {
        if !is_capability_name(n) {
            return Err(FieldError::new(
                format!("{}[{i}]", o.field(key)),
                "must be a known capability name or start with x-",
            ));
        }
    }
    Ok(names)
}

fn read(value: &Value) -> Result<Request, FieldError> {
    let top = object(value, "", TOP_KEYS)?;
    let mut req = Request { provider_id: top.string("providerId")?.map(str::to_string), ..Request::default() };
    if let Some(p) = top.object("placement", &["authority"])? {
        p.choice("authority", &["router"])?;
    }
    if let Some(r) = top.object("requires", REQUIRES_KEYS)? {
        req.required_capabilities = capability_names(&r, "requiredCapabilities")?;
        req.forbidden_capabilities = capability_names(&r, "forbiddenCapabilities")?;
        if let Some(both) = req.required_capabilities.iter().find(|c| req.forbidden_capabilities.contains(c)) {
            return Err(FieldError::new(
                "requires.forbiddenCapabilities",
                format!("must not also list a required capability ({both})"),
            ));
        }
        if let Some(image) = r.object("image", &["identity", "requiredBinaries"])? {
            req.image_identity = image.string("identity")?.map(str::to_string);
            req.required_binaries = image.strings("requiredBinaries")?.unwrap_or_default();
        }
        req.egress = match r.get("egress") {
            None => Vec::new(),
            Some(Value::Array(_)) => r.choices("egress", EGRESS_CLASSES)?.unwrap_or_default(),
            Some(_) => vec![r.choice("egress", EGRESS_CLASSES)?.unwrap_or("none")],
        };
        if r.get("egress").is_some() && req.egress.is_empty() {
            return Err(FieldError::new("requires.egress", "must name at least one egress class"));
        }
        if let Some(t) = r.object("timeout", TIMEOUT_KEYS)? {
            req.timeout_semantics = t.choices("semantics", TIMEOUT_SEMANTICS)?.unwrap_or_default();
            req.timeout_granularity_ms = t.non_negative("granularityMs")?;
            req.max_ready_latency_ms = t.non_negative("maxReadyLatencyMs")?;
            req.completion_budget_ms = t.non_negative("completionBudgetMs")?;
            req.required_lifetime_ms = t.non_negative("requiredSandboxLifetimeMs")?;
        }
        req.durability = r.choice("stateDurability", DURABILITY_LEVELS)?;
        req.restrictions = r.strings("restrictions")?.unwrap_or_default();
        req.isolation = r.choice("isolation", ISOLATION_LEVELS)?;
    }
    if let Some(res) = top.object("resources", RESOURCE_KEYS)? {
        req.resources = Resources::read(&res)?;
    }
    if let Some(region) = top.object("region", &["preferred", "required"])? {
        req.region_preferred = region.strings("preferred")?.unwrap_or_default();
        req.region_required = region.boolean("required")?.unwrap_or(false);
        if req.region_required && req.region_preferred.is_empty() {
            return Err(FieldError::new(
                "region.preferred",
                "must name at least one region when region.required is true",
            ));
        }
    }
    if let Some(routing) = top.object("routing", ROUTING_KEYS)? {
        req.strategy = match routing.choice("strategy", &["cost", "latency", "reliability", "balanced"])? {
            Some("cost") => Strategy::Cost,
            Some("latency") => Strategy::Latency,
            Some("reliability") => Strategy::Reliability,
            _ => Strategy::Balanced,
        };
        req.latency_objective = match routing.choice("latencyObjective", &["cold", "ready"])? {
            Some("cold") => Objective::Cold,
            _ => Objective::Ready,
        };
        req.fallback_allowed = routing.choice("acquisitionFallback", &["allowed", "forbidden"])? != Some("forbidden");
        let attempts = routing.integer_in("maxAcquisitionAttempts", 1, i64::from(MAX_ATTEMPTS_LIMIT))?;
        req.max_attempts = attempts.map_or(DEFAULT_MAX_ATTEMPTS, |a| a as u32);
        if let Some(ms) = routing.integer_in("acquisitionTimeoutMs", 1, MAX_ACQUISITION_TIMEOUT_MS)? {
            req.acquisition_timeout_ms = ms as u64;
        }
    }
    if !req.fallback_allowed {
        req.max_attempts = 1;
    }
    for (names, mask, custom) in [
        (&req.required_capabilities, &mut req.required_mask, &mut req.required_custom),
        (&req.forbidden_capabilities, &mut req.forbidden_mask, &mut req.forbidden_custom),
    ] {
        for n in names {
            match capability_bit(n) {
                Some(b) => *mask |= b,
                None => *custom = true,
            }
        }
    }
    if let Some(launch) = top.object("launch", LAUNCH_KEYS)? {
        req.launch_name = launch.string("name")?.is_some();
        req.launch_env = launch.string_map("env")?.is_some_and(|env| !env.is_empty());
        if let Some(Value::Number(n)) = launch.get("createTimeoutSeconds") {
            if n.as_f64().is_none_or(|x| x <= 0.0) {
                return Err(FieldError::new("launch.createTimeoutSeconds", "must be a finite number > 0"));
            }
        } else if launch.get("createTimeoutSeconds").is_some() {
            return Err(FieldError::new("launch.createTimeoutSeconds", "must be a finite number > 0"));
        }
        if let Some(labels) = launch.get("labels") {
            let labels = parse_labels(labels)?;
            DEFAULT_LABEL_LIMITS.check(&labels)?;
            req.labels = Arc::new(labels);
        }
    }
    Ok(req)
}

/// Bounds on a request's launch labels: every label a provision carries is stored in its
/// mapping record and, when a budget rule is keyed by it, kept as a budget key, so what a
/// caller sends is bounded too. Lengths are UTF-8 bytes. The router option
/// `limits: { labels, labelKeyBytes, labelValueBytes }` sets them (up to [`MAX_LABEL_LIMITS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelLimits {
    /// Most labels in one request.
    pub count: usize,
    /// Longest key.
    pub key_bytes: usize,
    /// Longest value.
    pub value_bytes: usize,
}

/// The default label limits (`limits.labels`, `labelKeyBytes`, `labelValueBytes`): 64
/// labels, keys of 256 bytes, values of 1,024 bytes (cloud tags allow 50 of 128 and 256
/// characters; Kubernetes 63 per name and value).
pub const DEFAULT_LABEL_LIMITS: LabelLimits = LabelLimits { count: 64, key_bytes: 256, value_bytes: 1_024 };
/// The largest label limits a router may set.
pub const MAX_LABEL_LIMITS: LabelLimits = LabelLimits { count: 1_024, key_bytes: 4_096, value_bytes: 65_536 };

impl Default for LabelLimits {
    fn default() -> Self {
        DEFAULT_LABEL_LIMITS
    }
}

impl LabelLimits {
    /// Checks `labels` against the limits: the error names the label (`launch.labels.tenant`,
    /// its key shown bounded), never its value.
    pub fn check(&self, labels: &Labels) -> Result<(), FieldError> {
        const FIELD: &str = "launch.labels";
        if labels.len() > self.count {
            return Err(FieldError::new(FIELD, format!("must have at most {} labels", self.count)));
        }
        for (k, v) in labels.iter() {
            if k.len() > self.key_bytes {
                return Err(FieldError::new(
                    crate::core::json::join(FIELD, k),
                    format!("has a key longer than {} bytes", self.key_bytes),
                ));
            }
            if v.len() > self.value_bytes {
                return Err(FieldError::new(
                    crate::core::json::join(FIELD, k),
                    format!("must be at most {} bytes long", self.value_bytes),
                ));
            }
        }
        Ok(())
    }
}

/// A request's `launch.labels`: an object of strings, without the key the router reserves
/// for its own id, within [`DEFAULT_LABEL_LIMITS`] (a router's own limits are checked where
/// it reads the labels sent apart: `LabelLimits::check`). The one rule for labels, whether they arrive inside a request or apart
/// from it (the JS layer sends per-call labels separately, so that requests that differ
/// only in labels share one compiled form).
pub fn parse_labels(value: &Value) -> Result<Labels, FieldError> {
    const FIELD: &str = "launch.labels";
    let Value::Object(map) = value else {
        return Err(FieldError::new(FIELD, "must be an object of strings"));
    };
    let mut out: SmallVec<[(&str, &str); 8]> = SmallVec::with_capacity(map.len());
    for (k, v) in map {
        match v {
            Value::String(s) => out.push((k, s)),
            _ => return Err(FieldError::new(crate::core::json::join(FIELD, k), "must be a string")),
        }
    }
    if let Some((k, _)) = out.iter().find(|(k, _)| RESERVED_LABELS.contains(k)) {
        return Err(FieldError::new(
            format!("{FIELD}.{k}"),
            "is reserved: the router stamps its own sandbox id, fleet and warm marker under these keys",
        ));
    }
    Ok(Labels::new(&mut out))
}

/// [`parse_labels`] straight from JSON text, for the provision path: `Some(labels)` when
/// `text` is an object of strings without a reserved key, exactly as
/// `parse_labels(&serde_json::from_str(text)?)` would answer (keys in order, a repeated key's
/// last value); `None` otherwise, and the caller asks [`parse_labels`] for the typed error.
///
/// Why a second reader? The general path builds a `serde_json::Value` and copies every
/// string out of it: about 4k instructions for two labels, on every provision. This borrows
/// each key and value from `text` (an escaped one is unescaped into its own copy) and copies
/// them once, into the [`Labels`] buffer. The property test
/// `labels_text_agrees_with_parse_labels` holds the two to one rule.
pub fn parse_labels_text(text: &str) -> Option<Labels> {
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
    use std::borrow::Cow;
    /// A key or value, borrowed from `text` unless it had an escape.
    struct Text<'de>(Cow<'de, str>);
    impl AsRef<str> for Text<'_> {
        fn as_ref(&self) -> &str {
            &self.0
        }
    }
    impl<'de> Deserialize<'de> for Text<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Text<'de>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a string")
                }
                fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                    Ok(Text(Cow::Borrowed(s)))
                }
                fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                    Ok(Text(Cow::Owned(s.to_owned())))
                }
            }
            d.deserialize_str(V)
        }
    }
    // Four inline: most requests carry a few labels; more spill to the heap.
    struct Pairs<'de>(SmallVec<[(Text<'de>, Text<'de>); 4]>);
    impl<'de> Deserialize<'de> for Pairs<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Pairs<'de>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object of strings")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs<'de>, A::Error> {
                    let mut out = SmallVec::new();
                    while let Some(entry) = map.next_entry::<Text<'de>, Text<'de>>()? {
                        out.push(entry);
                    }
                    Ok(Pairs(out))
                }
            }
            d.deserialize_map(V)
        }
    }
    let Pairs(mut pairs) = serde_json::from_str::<Pairs>(text).ok()?;
    if pairs.iter().any(|(k, _)| RESERVED_LABELS.contains(&k.as_ref())) {
        return None;
    }
    Some(Labels::new(&mut pairs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field_of(v: Value) -> String {
        match parse_request(&v).unwrap_err() {
            CoreError::InvalidRequest { field, .. } => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn empty_request_gets_documented_defaults() {
        let r = parse_request(&json!({})).unwrap();
        assert_eq!(r.strategy, Strategy::Balanced);
        assert_eq!(r.latency_objective, Objective::Ready);
        assert_eq!(r.max_attempts, 3);
        assert!(r.fallback_allowed);
        assert_eq!(r.acquisition_timeout_ms, DEFAULT_ACQUISITION_TIMEOUT_MS);
    }

    #[test]
    fn attempts_bound_fires_outside_1_to_10() {
        for bad in [json!(0), json!(11), json!(2.5), json!("3"), Value::Null] {
            assert_eq!(field_of(json!({"routing": {"maxAcquisitionAttempts": bad}})), "routing.maxAcquisitionAttempts");
        }
    }

    #[test]
    fn attempts_bound_does_not_fire_inside_1_to_10() {
        for ok in [1, 10] {
            let r = parse_request(&json!({"routing": {"maxAcquisitionAttempts": ok}})).unwrap();
            assert_eq!(r.max_attempts, ok as u32);
        }
    }

    #[test]
    fn forbidden_fallback_means_one_attempt() {
        let r = parse_request(&json!({"routing": {"acquisitionFallback": "forbidden", "maxAcquisitionAttempts": 5}}))
            .unwrap();
        assert_eq!(r.max_attempts, 1);
    }

    #[test]
    fn misspelled_requirement_key_is_an_error() {
        assert_eq!(field_of(json!({"requires": {"requiredCapabilites": ["pty"]}})), "requires.requiredCapabilites");
        assert_eq!(field_of(json!({"resources": {"cpus": 2}})), "resources.cpus");
        assert_eq!(field_of(json!({"routing": {"stratgy": "cost"}})), "routing.stratgy");
    }

    #[test]
    fn unknown_strategy_and_objective_are_errors() {
        assert_eq!(field_of(json!({"routing": {"strategy": "cheapest"}})), "routing.strategy");
        assert_eq!(field_of(json!({"routing": {"latencyObjective": "warm"}})), "routing.latencyObjective");
    }

    #[test]
    fn negative_or_null_resources_are_errors() {
        assert_eq!(field_of(json!({"resources": {"cpu": -1}})), "resources.cpu");
        assert_eq!(field_of(json!({"resources": {"memoryMb": null}})), "resources.memoryMb");
    }

    #[test]
    fn placement_guard_fires_before_validation() {
        let v = json!({"placement": {"authority": "fleet"}, "routing": {"strategy": "nonsense"}});
        assert_eq!(parse_request(&v).unwrap_err().code(), "ROUTING_NOT_APPLICABLE");
        let v = json!({"nodeAffinity": "node-7"});
        assert_eq!(parse_request(&v).unwrap_err().code(), "ROUTING_NOT_APPLICABLE");
        let v = json!({"placement": {"authority": "none"}});
        assert_eq!(parse_request(&v).unwrap_err().code(), "ROUTING_NOT_APPLICABLE");
    }

    #[test]
    fn placement_guard_does_not_fire_for_router_authority() {
        assert!(parse_request(&json!({"placement": {"authority": "router"}})).is_ok());
    }

    #[test]
    fn reserved_label_is_refused_and_other_labels_are_kept() {
        let v = json!({"launch": {"labels": {SANDBOX_ID_LABEL: "x"}}});
        assert_eq!(field_of(v), format!("launch.labels.{SANDBOX_ID_LABEL}"));
        let v = json!({"launch": {"labels": {"team": "a", SANDBOX_FLEET_LABEL: "default"}}});
        assert_eq!(field_of(v), format!("launch.labels.{SANDBOX_FLEET_LABEL}"));
        let r = parse_request(&json!({"launch": {"labels": {"team": "a"}}})).unwrap();
        assert_eq!(r.labels.to_vec(), vec![("team".to_string(), "a".to_string())]);
    }

    #[test]
    fn must_fire_fleet_names_outside_the_label_safe_alphabet_are_refused() {
        for bad in ["", "Default", "-x", "a b", "a/b", "a=b", &"a".repeat(64)] {
            assert!(!validate_fleet(bad), "{bad:?}");
        }
    }

    #[test]
    fn must_not_fire_label_safe_fleet_names_are_accepted() {
        for good in [DEFAULT_FLEET, "prod-eu.1", "0", "a_b", &"a".repeat(63)] {
            assert!(validate_fleet(good), "{good:?}");
        }
    }

    #[test]
    fn required_region_needs_a_region() {
        assert_eq!(field_of(json!({"region": {"required": true}})), "region.preferred");
    }

    #[test]
    fn error_messages_never_echo_values() {
        let err = parse_request(&json!({"launch": {"env": {"TOKEN": 42}}})).unwrap_err();
        assert!(!err.to_string().contains("42"));
        assert_eq!(err.field(), Some("launch.env.TOKEN"));
    }
}
