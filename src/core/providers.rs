//! The builtin providers: what each one's configuration holds, which adapter and SDK it
//! needs, how its capacity is read, and what the router says when one of its calls fails.
//!
//! Why one catalogue? `createSandboxRouter`'s validation (`core::factory`), the lazy
//! adapters' loading (`lib/provider-adapters.js`), the builtin capacity readers and the
//! reconcile finders all follow from the same facts about a provider: its credential, its
//! base-URL option, its SDK. Written once here, they cannot drift apart.

use crate::core::capacity::{Measurement, ResourceMeasurement, UnknownReason};
use crate::core::facts::Fact;
use crate::core::packages::{self, Package};

/// What a configuration field must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// A non-empty string.
    Text,
    /// A finite number >= 0.
    Amount,
    /// A finite number >= 0, or null.
    AmountOrNull,
    /// A boolean.
    Flag,
    /// An object (not an array, not null).
    Object,
    /// An array.
    List,
}

impl FieldType {
    /// Whether `v` holds a value of this type.
    pub fn holds(self, v: &Fact) -> bool {
        match self {
            FieldType::Text => matches!(v, Fact::Text(s) if !s.is_empty()),
            FieldType::Amount => matches!(v, Fact::Number(n) if *n >= 0.0),
            FieldType::AmountOrNull => matches!(v, Fact::Null) || FieldType::Amount.holds(v),
            FieldType::Flag => matches!(v, Fact::Bool(_)),
            FieldType::Object => v.is_object(),
            FieldType::List => matches!(v, Fact::List(_)),
        }
    }

    /// What a field of this type must be, as an error says it.
    pub fn expectation(self) -> &'static str {
        match self {
            FieldType::Text => "must be a non-empty string",
            FieldType::Amount => "must be a finite number >= 0",
            FieldType::AmountOrNull => "must be a finite number >= 0 or null",
            FieldType::Flag => "must be a boolean",
            FieldType::Object => "must be an object",
            FieldType::List => "must be an array",
        }
    }
}

/// An SDK client the adapter is handed instead of the raw credential (Daytona's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    /// The SDK's class.
    pub export: &'static str,
    /// The adapter options it is built from (and which the adapter no longer gets).
    pub keys: &'static [&'static str],
    /// The adapter option that holds it.
    pub option: &'static str,
}

/// A builtin provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provider {
    /// Its name in `providers` (`daytona`, …).
    pub name: &'static str,
    /// Required fields, each a non-empty string.
    pub required: &'static [&'static str],
    /// Required fields, each an object with a string `type` (Freestyle's `persistence`).
    pub typed: &'static [&'static str],
    /// Optional fields and what each must hold.
    pub optional: &'static [(&'static str, FieldType)],
    /// The adapter options an entry does not set, and their values.
    pub defaults: &'static [(&'static str, &'static str)],
    /// `@agent-relay/sandbox`'s adapter class.
    pub adapter: &'static str,
    /// The vendor SDK the adapter needs, if any.
    pub sdk: Option<Package>,
    /// The SDK client the adapter is given, if any.
    pub client: Option<Client>,
    /// The field holding the credential the builtin capacity reader and finder use; None:
    /// the provider has no list API this crate reads.
    pub credential: Option<&'static str>,
    /// The field the reader's base URL defaults to, if any.
    pub base_url: Option<&'static str>,
    /// Whether its adapter has `launchDetached`.
    pub detached: bool,
}

/// Daytona's API, when `apiUrl` is not given (the adapter's and the capacity reader's).
pub const DAYTONA_API_URL: &str = "https://app.daytona.io/api";

/// The builtin providers, in their documented order (`SUPPORTED_PROVIDERS`, then `local`).
pub const PROVIDERS: [Provider; 6] = [
    Provider {
        name: "daytona",
        required: &["apiKey"],
        typed: &[],
        optional: &[
            ("apiUrl", FieldType::Text),
            ("target", FieldType::Text),
            ("snapshot", FieldType::Text),
            ("defaultHomeDir", FieldType::Text),
            ("organizationId", FieldType::Text),
            ("createParams", FieldType::Object),
        ],
        defaults: &[("apiUrl", DAYTONA_API_URL), ("target", "us"), ("defaultHomeDir", "/home/daytona")],
        adapter: "DaytonaRuntime",
        sdk: Some(packages::DAYTONA_SDK),
        client: Some(Client {
            export: "Daytona",
            keys: &["apiKey", "apiUrl", "target", "organizationId"],
            option: "daytona",
        }),
        credential: Some("apiKey"),
        base_url: Some("apiUrl"),
        detached: true,
    },
    Provider {
        name: "e2b",
        required: &["apiKey"],
        typed: &[],
        optional: &[
            ("template", FieldType::Text),
            ("runBudgetMs", FieldType::Amount),
            ("createTimeoutMs", FieldType::Amount),
        ],
        defaults: &[("template", "base")],
        adapter: "E2BSandboxRuntime",
        sdk: Some(packages::E2B_SDK),
        client: None,
        credential: Some("apiKey"),
        base_url: None,
        detached: true,
    },
    Provider {
        name: "vercel",
        required: &["token", "teamId", "projectId", "defaultHomeDir", "namePrefix"],
        typed: &[],
        optional: &[
            ("source", FieldType::Object),
            ("vcpus", FieldType::Amount),
            ("sandboxTimeoutMs", FieldType::Amount),
            ("persistent", FieldType::Flag),
            ("ports", FieldType::List),
            ("env", FieldType::Object),
        ],
        defaults: &[],
        adapter: "VercelSandboxRuntime",
        sdk: Some(packages::VERCEL_SDK),
        client: None,
        credential: None,
        base_url: None,
        detached: false,
    },
    Provider {
        name: "freestyle",
        required: &["apiKey", "defaultHomeDir", "namePrefix"],
        typed: &["persistence"],
        optional: &[
            ("baseUrl", FieldType::Text),
            ("snapshotId", FieldType::Text),
            ("idleTimeoutSeconds", FieldType::AmountOrNull),
        ],
        defaults: &[],
        adapter: "FreestyleRuntime",
        sdk: Some(packages::FREESTYLE_SDK),
        client: None,
        credential: None,
        base_url: None,
        detached: true,
    },
    Provider {
        name: "agent37",
        required: &["apiKey", "baseUrl", "defaultHomeDir"],
        typed: &[],
        optional: &[],
        defaults: &[],
        adapter: "Agent37Runtime",
        sdk: None,
        client: None,
        credential: Some("apiKey"),
        base_url: Some("baseUrl"),
        detached: true,
    },
    Provider {
        name: "microsandbox",
        required: &["apiKey", "homeDir", "image"],
        typed: &[],
        optional: &[("url", FieldType::Text)],
        defaults: &[],
        adapter: "MicrosandboxRuntime",
        sdk: Some(packages::MICROSANDBOX_SDK),
        client: None,
        credential: Some("apiKey"),
        base_url: Some("url"),
        detached: true,
    },
];

/// The embedded local runtime's name in `providers` (real child processes; no package).
pub const LOCAL: &str = "local";

/// The builtin provider named `name` (not `local`).
pub fn find(name: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.name == name)
}

/// Every provider name `providers` takes, `local` last (`SUPPORTED_PROVIDERS`).
pub fn supported() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|p| p.name).chain([LOCAL])
}

/// The runtime port's methods besides the launches, which a lazy runtime delegates.
pub const PORT_METHODS: [&str; 12] = [
    "getById",
    "findByLabels",
    "findAllByLabels",
    "countByLabels",
    "uploadBundle",
    "runScript",
    "startScript",
    "getScriptStatus",
    "getScriptLogs",
    "start",
    "stop",
    "destroy",
];

impl Provider {
    /// The methods a lazy runtime of this provider has: `launch`, `launchDetached` when the
    /// adapter has it, then the port's.
    pub fn methods(&self) -> impl Iterator<Item = &'static str> {
        let detached: &'static [&'static str] = if self.detached { &["launchDetached"] } else { &[] };
        ["launch"].into_iter().chain(detached.iter().copied()).chain(PORT_METHODS)
    }

    /// The method named `name`, if a lazy runtime of this provider has it.
    pub fn method(&self, name: &str) -> Option<&'static str> {
        self.methods().find(|m| *m == name)
    }

    /// Every field an entry of this provider may hold besides the common ones.
    pub fn keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.required.iter().chain(self.typed).copied().chain(self.optional.iter().map(|(k, _)| *k))
    }

    /// The package whose missing export `package` names (`@agent-relay/sandbox`: the
    /// adapter; the SDK: its client).
    pub fn export_of(&'static self, package: &Package) -> Option<packages::Export> {
        if package.name == packages::SANDBOX.name {
            return Some(packages::Export::Adapter { class: self.adapter, provider: self.name });
        }
        match (self.sdk, self.client) {
            (Some(sdk), Some(client)) if sdk.name == package.name => Some(packages::Export::Client(client.export)),
            _ => None,
        }
    }
}

/// Capabilities a factory pool declares when the caller declares none: synchronous
/// execution and file transfer, nothing else. Resources are zero and region, image,
/// isolation and durability are undeclared, so requests needing them are refused until
/// the caller declares the configured pool's real envelope (`DEFAULT_CAPABILITIES`).
pub const DEFAULT_SUPPORTED: [&str; 2] = ["syncExec", "fileTransfer"];

/// Routing signals a factory pool declares when the caller declares none: equal
/// placeholders, not measurements (`DEFAULT_SIGNALS`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DefaultSignals {
    /// The same cost for every pool.
    pub estimated_cost: f64,
    /// Pessimistic (60 s), so an unmeasured pool never meets a latency budget by accident.
    pub cold_start_latency_ms: f64,
    /// Pessimistic, likewise.
    pub ready_latency_ms: f64,
    /// A coin toss.
    pub completion_within_budget_rate: f64,
    /// Available until told otherwise.
    pub available: bool,
}

/// The placeholders of [`DefaultSignals`].
pub const DEFAULT_SIGNALS: DefaultSignals = DefaultSignals {
    estimated_cost: 1.0,
    cold_start_latency_ms: 60_000.0,
    ready_latency_ms: 60_000.0,
    completion_within_budget_rate: 0.5,
    available: true,
};

/// A `ProviderRuntimeError`'s code and message: `PROVIDER_RUNTIME_ERROR` for a call of
/// pool `provider_id` that failed, `OPERATION_TIMEOUT` (with the deadline) for one that did
/// not settle in time, whose outcome is unknown. Names and numbers only.
pub fn runtime_error(provider_id: &str, operation: &str, timeout_ms: Option<f64>) -> (&'static str, String) {
    match timeout_ms {
        None => ("PROVIDER_RUNTIME_ERROR", format!("provider {provider_id} failed during {operation}")),
        Some(ms) => (
            "OPERATION_TIMEOUT",
            format!("provider {provider_id} did not settle {operation} within {ms} ms; outcome unknown"),
        ),
    }
}

/// What the credential-first surface keeps of an SDK error: the first of its candidate
/// HTTP statuses (`status`, `statusCode`, `response.status`, in that order) that is an
/// integer from 100 to 599.
pub fn kept_status(candidates: &[serde_json::Value]) -> Option<u16> {
    candidates
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .find(|s| s.fract() == 0.0 && (100.0..=599.0).contains(s))
        .map(|s| s as u16)
}

/// Longest class name repeated.
const MAX_CLASS_NAME: usize = 64;

/// What the credential-first surface keeps of an SDK error's class name: an identifier
/// (`[A-Za-z_$][A-Za-z0-9_$]*`) of at most 64 characters; anything else is not repeated.
pub fn kept_class_name(name: &str) -> Option<&str> {
    let ident =
        |b: u8, first: bool| b.is_ascii_alphabetic() || b == b'_' || b == b'$' || (!first && b.is_ascii_digit());
    let bytes = name.as_bytes();
    let ok =
        !bytes.is_empty() && bytes.len() <= MAX_CLASS_NAME && bytes.iter().enumerate().all(|(i, &b)| ident(b, i == 0));
    ok.then_some(name)
}

/// The local pool's capacity: its live sandboxes (`used`, counted by the local runtime)
/// against `capacity.limits.sandboxes`; `LIMIT_NOT_CONFIGURED` without that limit.
pub fn local_measurement(limit: Option<f64>, required: f64, used: Option<f64>) -> Measurement {
    match (limit, used) {
        (Some(limit), Some(used)) => {
            Measurement::Known(vec![ResourceMeasurement::new("sandboxes", used, limit, "sandboxes", required)])
        }
        _ => Measurement::Unknown(UnknownReason::LimitNotConfigured),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_catalogue_lists_six_providers_then_local() {
        let names: Vec<&str> = supported().collect();
        assert_eq!(names, ["daytona", "e2b", "vercel", "freestyle", "agent37", "microsandbox", "local"]);
        assert!(PROVIDERS.iter().all(|p| find(p.name) == Some(p)));
        assert_eq!(find(LOCAL), None);
    }

    #[test]
    fn must_fire_vercel_runtimes_have_no_launch_detached_and_must_not_fire_for_the_others() {
        let vercel = find("vercel").unwrap();
        assert_eq!(vercel.method("launchDetached"), None);
        assert_eq!(vercel.methods().count(), 13);
        let e2b = find("e2b").unwrap();
        assert_eq!(e2b.method("launchDetached"), Some("launchDetached"));
        assert_eq!(e2b.methods().take(2).collect::<Vec<_>>(), ["launch", "launchDetached"]);
        assert_eq!(e2b.method("eval"), None);
    }

    #[test]
    fn missing_exports_name_the_adapter_or_the_client() {
        let daytona = find("daytona").unwrap();
        assert_eq!(
            daytona.export_of(&packages::SANDBOX),
            Some(packages::Export::Adapter { class: "DaytonaRuntime", provider: "daytona" })
        );
        assert_eq!(daytona.export_of(&packages::DAYTONA_SDK), Some(packages::Export::Client("Daytona")));
        assert_eq!(find("e2b").unwrap().export_of(&packages::E2B_SDK), None);
    }

    #[test]
    fn runtime_errors_name_the_pool_and_the_operation() {
        assert_eq!(
            runtime_error("e2b", "launch", None),
            ("PROVIDER_RUNTIME_ERROR", "provider e2b failed during launch".into())
        );
        assert_eq!(
            runtime_error("e2b", "destroy", Some(5000.0)),
            ("OPERATION_TIMEOUT", "provider e2b did not settle destroy within 5000 ms; outcome unknown".into())
        );
    }

    #[test]
    fn must_fire_a_numeric_status_in_range_is_kept_and_must_not_fire_for_any_other() {
        assert_eq!(kept_status(&[json!(null), json!(429), json!(503)]), Some(429));
        assert_eq!(kept_status(&[json!("429"), json!(42), json!(503)]), Some(503));
        for bad in [json!("429"), json!(42), json!(600), json!(429.5), json!(null), json!({})] {
            assert_eq!(kept_status(std::slice::from_ref(&bad)), None, "{bad}");
        }
    }

    #[test]
    fn must_fire_an_identifier_class_name_is_kept_and_must_not_fire_for_any_other() {
        assert_eq!(kept_class_name("QuotaError"), Some("QuotaError"));
        assert_eq!(kept_class_name("$_x9"), Some("$_x9"));
        for bad in ["", "9Lives", "evil sk_canary", "a.b", &"A".repeat(65)] {
            assert_eq!(kept_class_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn must_fire_a_local_limit_is_measured_and_must_not_fire_without_one() {
        let known = local_measurement(Some(4.0), 1.0, Some(1.0));
        assert_eq!(known, Measurement::Known(vec![ResourceMeasurement::new("sandboxes", 1.0, 4.0, "sandboxes", 1.0)]));
        assert_eq!(local_measurement(None, 1.0, None), Measurement::Unknown(UnknownReason::LimitNotConfigured));
    }
}
