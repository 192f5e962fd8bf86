//! `createSandboxRouter` and `createProviderRuntime`: the one rule for their options, and
//! the plan JavaScript assembles the router from.
//!
//! JavaScript reads the caller's options once, inside a guard, and hands them over as
//! [`Fact`]s (`core::facts`): a factory option holds functions (`moduleLoader`,
//! `capacity.getCapacity`), class instances (a mapping store) and data, and the rule must
//! tell them apart. Nothing of the rule is in JavaScript: which keys exist, which are
//! required, what each must hold, every default, how the capacity reader and the finder of
//! a pool are wired.
//!
//! The plan names the entry's own fields by their paths (`capacity.baseUrl`, `apiKey`),
//! never by value: a credential is validated here and then dropped, so it is in no error
//! and in nothing this file returns.

use crate::core::facts::{Fact, Other, Refused};
use crate::core::json::{join, shown, FieldError};
use crate::core::pacing::RateLimit;
use crate::core::providers::{self, FieldType, Provider};
use crate::core::warm::WarmConfig;
use serde_json::{Map, Value};

/// A refused factory option: the field's path (`providers.e2b.apiKey`) and what it must be;
/// `provider`: the provider entry it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The provider entry (`e2b`), for an error inside one.
    pub provider: Option<&'static str>,
    /// Dotted path of the option.
    pub field: String,
    /// What it must be.
    pub expectation: String,
}

impl ConfigError {
    /// `invalid configuration: <field> <expectation>` (`INVALID_CONFIGURATION`).
    pub fn message(&self) -> String {
        format!("invalid configuration: {} {}", self.field, self.expectation)
    }

    fn top(field: impl Into<String>, expectation: impl Into<String>) -> ConfigError {
        ConfigError { provider: None, field: field.into(), expectation: expectation.into() }
    }

    fn entry(provider: &'static str, field: &str, expectation: impl Into<String>) -> ConfigError {
        ConfigError {
            provider: Some(provider),
            field: format!("providers.{provider}.{field}"),
            expectation: expectation.into(),
        }
    }
}

/// Whether `createSandboxRouter` takes option `key`: every router option (which the router
/// checks) but `registry`, and its own `providers` and `moduleLoader`. (Written as the
/// router's list, so a new router option is the factory's too: `queue` was missing when the
/// list was written out here.)
pub fn factory_option(key: &str) -> bool {
    key == "providers"
        || key == "moduleLoader"
        || (key != "registry" && crate::core::router::options::ROUTER_OPTIONS.contains(&key))
}

/// Keys every provider entry may hold besides its provider's own.
const COMMON_KEYS: [&str; 7] = ["id", "capabilities", "signals", "capacity", "adapterOptions", "warm", "rateLimit"];
/// The builtin capacity reader's options an entry's `capacity` may hold.
const CAPACITY_KEYS: [&str; 5] = ["limits", "demand", "baseUrl", "maxPages", "pageSize"];
/// The custom reader's one method.
const GET_CAPACITY: &str = "getCapacity";
/// The local runtime's one option.
const ROOT_DIR: &str = "rootDir";

/// How a pool's capacity is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapacitySource {
    /// The entry's own reader (`capacity.getCapacity`).
    Custom,
    /// A builtin reader (`createCapacityReader`), with the options of [`Pool::reader`].
    Builtin,
    /// The local runtime's count of its live sandboxes.
    Local,
}

/// One option of a builtin reader (and finder), and the entry's field it is taken from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    /// The reader's option (`apiKey`, `baseUrl`, …).
    pub option: &'static str,
    /// The path of the entry's field that holds it (`["capacity", "baseUrl"]`).
    pub from: Vec<&'static str>,
}

/// What JavaScript builds one pool from.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// The entry's name in `providers`.
    pub name: &'static str,
    /// The pool's id: the entry's `id`, else its name.
    pub id: String,
    /// The builtin provider; None: the local runtime.
    pub provider: Option<&'static Provider>,
    /// The entry's fields its adapter is given (over the provider's defaults).
    pub adapter_keys: Vec<&'static str>,
    /// How its capacity is read.
    pub capacity: CapacitySource,
    /// The builtin reader's options, by the entry's fields (also the finder's, with
    /// [`Pool::finder`]).
    pub reader: Vec<Copied>,
    /// Whether reconcile lists the pool with a native finder (a provider with a list API).
    pub finder: bool,
    /// [`CapacitySource::Local`]: `capacity.limits.sandboxes`, when it is a number.
    pub local_limit: Option<f64>,
    /// [`CapacitySource::Local`]: `capacity.demand.sandboxes`, else 1.
    pub local_required: f64,
}

/// Validates `createSandboxRouter`'s options (None: they could not be read) and plans
/// its pools, in the order `providers` lists them (an `undefined` entry is skipped).
pub fn plan(options: Option<&Fact>) -> Result<Vec<Pool>, ConfigError> {
    let options = options.ok_or_else(unreadable)?;
    if !options.is_object() {
        return Err(ConfigError::top("options", "must be an object"));
    }
    if let Some(key) = options.keys().find(|k| !factory_option(k)) {
        return Err(ConfigError::top(shown(key), "is not a known option"));
    }
    check_loader(options)?;
    let providers = options.get("providers").filter(|p| p.is_object() && p.keys().next().is_some());
    let Some(Fact::Object(entries)) = providers else {
        return Err(ConfigError::top("providers", "must be an object naming at least one provider"));
    };
    let mut pools = Vec::with_capacity(entries.len());
    for (name, entry) in entries {
        if *entry == Fact::Other(Other::Undefined) {
            continue;
        }
        let Some(name) = providers::supported().find(|p| p == name) else {
            let names: Vec<&str> = providers::supported().collect();
            return Err(ConfigError::top(
                join("providers", name),
                format!("is not a supported provider ({})", names.join(", ")),
            ));
        };
        pools.push(match providers::find(name) {
            Some(provider) => builtin(provider, Some(entry))?,
            None => local(entry)?,
        });
    }
    Ok(pools)
}

/// Validates `createProviderRuntime(provider, options, internals)`, read as one object
/// `{ provider, options, internals }` (None: it could not be read), and plans the runtime.
/// The local runtime takes its options as they are.
pub fn runtime_plan(spec: Option<&Fact>) -> Result<Pool, ConfigError> {
    let spec = spec.ok_or_else(unreadable)?;
    let name = match spec.get("provider") {
        Some(Fact::Text(p)) => providers::supported().find(|s| s == p),
        _ => None,
    };
    let Some(name) = name else {
        let names: Vec<&str> = providers::supported().collect();
        return Err(ConfigError::top("provider", format!("must be one of {}", names.join(", "))));
    };
    let Some(provider) = providers::find(name) else {
        return Ok(Pool {
            name,
            id: name.to_string(),
            provider: None,
            adapter_keys: Vec::new(),
            capacity: CapacitySource::Local,
            reader: Vec::new(),
            finder: false,
            local_limit: None,
            local_required: 1.0,
        });
    };
    let pool = builtin(provider, spec.get("options"))?;
    if let Some(internals) = spec.get("internals") {
        check_loader(internals)?;
    }
    Ok(pool)
}

fn unreadable() -> ConfigError {
    ConfigError::top("options", "could not be read (a property access threw)")
}

fn check_loader(options: &Fact) -> Result<(), ConfigError> {
    match options.get("moduleLoader") {
        Some(f) if !f.is_function() => {
            Err(ConfigError::top("moduleLoader", "must be a function (specifier) => Promise<module>"))
        }
        _ => Ok(()),
    }
}

/// A builtin provider's entry (None: absent).
fn builtin(provider: &'static Provider, entry: Option<&Fact>) -> Result<Pool, ConfigError> {
    let p = provider.name;
    let entry = entry.filter(|e| e.is_object()).ok_or_else(|| ConfigError::entry(p, "(entry)", "must be an object"))?;
    if let Some(key) = entry.keys().find(|k| !COMMON_KEYS.contains(k) && !provider.keys().any(|x| x == *k)) {
        return Err(ConfigError::entry(p, &shown(key), "is not a known option"));
    }
    for &field in provider.required {
        let v = entry.get(field).ok_or_else(|| ConfigError::entry(p, field, "is required"))?;
        check_type(p, field, v, FieldType::Text)?;
    }
    for &field in provider.typed {
        let v = entry.get(field).ok_or_else(|| ConfigError::entry(p, field, "is required"))?;
        if !matches!(v.get("type"), Some(Fact::Text(_))) {
            return Err(ConfigError::entry(p, field, "must be an object with a type"));
        }
    }
    for &(field, ty) in provider.optional {
        if let Some(v) = entry.get(field) {
            check_type(p, field, v, ty)?;
        }
    }
    let capacity = check_common(p, entry)?;
    let adapter_keys = provider.keys().filter(|k| entry.get(k).is_some()).collect();
    Ok(Pool {
        name: p,
        id: id_of(entry, p),
        provider: Some(provider),
        adapter_keys,
        capacity,
        reader: reader_options(provider, entry),
        finder: provider.credential.is_some(),
        local_limit: None,
        local_required: 1.0,
    })
}

/// The local runtime's entry.
fn local(entry: &Fact) -> Result<Pool, ConfigError> {
    let p = providers::LOCAL;
    if !entry.is_object() {
        return Err(ConfigError::entry(p, "(entry)", "must be an object"));
    }
    if let Some(key) = entry.keys().find(|k| !COMMON_KEYS.contains(k) && *k != ROOT_DIR) {
        return Err(ConfigError::entry(p, &shown(key), "is not a known option"));
    }
    if let Some(v) = entry.get(ROOT_DIR) {
        check_type(p, ROOT_DIR, v, FieldType::Text)?;
    }
    let capacity = match check_common(p, entry)? {
        CapacitySource::Builtin => CapacitySource::Local,
        custom => custom,
    };
    let sandboxes = |dims: &str| match entry.get("capacity").and_then(|c| c.get(dims)).and_then(|d| d.get("sandboxes"))
    {
        Some(Fact::Number(n)) => Some(*n),
        _ => None,
    };
    Ok(Pool {
        name: p,
        id: id_of(entry, p),
        provider: None,
        adapter_keys: Vec::new(),
        capacity,
        reader: Vec::new(),
        finder: false,
        local_limit: sandboxes("limits"),
        local_required: sandboxes("demand").unwrap_or(1.0),
    })
}

fn id_of(entry: &Fact, name: &str) -> String {
    match entry.get("id") {
        Some(Fact::Text(id)) => id.clone(),
        _ => name.to_string(),
    }
}

fn check_type(provider: &'static str, field: &str, v: &Fact, ty: FieldType) -> Result<(), ConfigError> {
    if ty.holds(v) {
        Ok(())
    } else {
        Err(ConfigError::entry(provider, field, ty.expectation()))
    }
}

/// The keys every entry may hold; answers how the pool's capacity is read.
fn check_common(p: &'static str, entry: &Fact) -> Result<CapacitySource, ConfigError> {
    for (field, ty) in [
        ("id", FieldType::Text),
        ("capabilities", FieldType::Object),
        ("signals", FieldType::Object),
        ("adapterOptions", FieldType::Object),
    ] {
        if let Some(v) = entry.get(field) {
            check_type(p, field, v, ty)?;
        }
    }
    if let Some(warm) = entry.get("warm") {
        let refused = |e: FieldError| ConfigError::entry(p, &e.field, e.expectation);
        let value = match warm.to_json("warm") {
            Ok(Value::Null) => Value::Object(Map::new()),
            Ok(v) => v,
            Err(Refused::At(e)) => return Err(refused(e)),
            Err(Refused::Cycle) => return Err(ConfigError::entry(p, "warm", "could not be read")),
        };
        WarmConfig::read(&value, "warm").map_err(refused)?;
    }
    if let Some(limit) = entry.get("rateLimit") {
        let refused = |e: FieldError| ConfigError::entry(p, &e.field, e.expectation);
        let value = match limit.to_json("rateLimit") {
            Ok(v) => v,
            Err(Refused::At(e)) => return Err(refused(e)),
            Err(Refused::Cycle) => return Err(ConfigError::entry(p, "rateLimit", "could not be read")),
        };
        RateLimit::read(&value, "rateLimit").map_err(refused)?;
    }
    let Some(c) = entry.get("capacity") else { return Ok(CapacitySource::Builtin) };
    if !c.is_object() {
        return Err(ConfigError::entry(p, "capacity", "must be an object"));
    }
    let custom = c.get(GET_CAPACITY).is_some_and(Fact::is_function);
    for key in c.keys() {
        if custom && key != GET_CAPACITY {
            return Err(ConfigError::entry(p, &join("capacity", key), "is not allowed beside getCapacity"));
        }
        if !custom && !CAPACITY_KEYS.contains(&key) {
            return Err(ConfigError::entry(p, &join("capacity", key), "is not a known option"));
        }
    }
    if custom {
        return Ok(CapacitySource::Custom);
    }
    for dims in ["limits", "demand"] {
        if let Some(v) = c.get(dims) {
            check_type(p, &format!("capacity.{dims}"), v, FieldType::Object)?;
        }
    }
    Ok(CapacitySource::Builtin)
}

/// The builtin reader's options: the credential, the base URL (`capacity.baseUrl`, else
/// the provider's own URL option), Daytona's organization, then the entry's `capacity`.
fn reader_options(provider: &Provider, entry: &Fact) -> Vec<Copied> {
    let Some(credential) = provider.credential else { return Vec::new() };
    let capacity = entry.get("capacity");
    let mut out = vec![Copied { option: "apiKey", from: vec![credential] }];
    let base_url = match (capacity.and_then(|c| c.get("baseUrl")), provider.base_url) {
        (Some(_), _) => Some(vec!["capacity", "baseUrl"]),
        (None, Some(own)) if entry.get(own).is_some() => Some(vec![own]),
        _ => None,
    };
    out.extend(base_url.map(|from| Copied { option: "baseUrl", from }));
    if entry.get("organizationId").is_some() {
        out.push(Copied { option: "organizationId", from: vec!["organizationId"] });
    }
    for option in ["limits", "demand", "maxPages", "pageSize"] {
        if capacity.and_then(|c| c.get(option)).is_some() {
            out.push(Copied { option, from: vec!["capacity", option] });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn factory_option_must_fire_for_every_router_option_but_registry_must_not_for_registry_or_a_typo() {
        for key in crate::core::router::options::ROUTER_OPTIONS.iter().filter(|k| **k != "registry") {
            assert!(factory_option(key), "{key}");
        }
        assert!(factory_option("providers") && factory_option("moduleLoader"));
        assert!(factory_option("queue") && factory_option("decisions"));
        assert!(!factory_option("registry"));
        assert!(!factory_option("decisons"));
    }

    use super::*;
    use serde_json::json;

    /// Facts as `lib/facts.js` writes them, from a JSON value (objects in key order; an
    /// object `{ "t": kind }` stands for itself).
    fn facts(v: Value) -> Fact {
        fn tag(v: Value) -> Value {
            match v {
                Value::Object(m) if m.len() == 1 && m.contains_key("t") => Value::Object(m),
                Value::Object(m) => json!({ "o": m.into_iter().map(|(k, v)| json!([k, tag(v)])).collect::<Vec<_>>() }),
                Value::Array(a) => Value::Array(a.into_iter().map(tag).collect()),
                v => v,
            }
        }
        Fact::of(tag(v)).unwrap()
    }

    fn function() -> Value {
        json!({ "t": "function" })
    }

    fn with(mut entry: Value, key: &str, v: Value) -> Value {
        entry[key] = v;
        entry
    }

    fn fails(options: Value) -> ConfigError {
        plan(Some(&facts(options))).unwrap_err()
    }

    fn e2b() -> Value {
        json!({ "apiKey": "sk_canary-e2b" })
    }

    #[test]
    fn must_fire_a_non_object_entry_is_invalid_configuration_naming_its_field() {
        let e = fails(json!({ "providers": { "daytona": "sk_canary" } }));
        assert_eq!((e.provider, e.field.as_str()), (Some("daytona"), "providers.daytona.(entry)"));
        assert_eq!(e.message(), "invalid configuration: providers.daytona.(entry) must be an object");
        assert!(!e.message().contains("sk_canary"));
    }

    #[test]
    fn must_not_fire_a_valid_entry_of_each_provider_builds() {
        let entries = json!({
            "daytona": { "apiKey": "k" },
            "e2b": { "apiKey": "k", "runBudgetMs": 0 },
            "vercel": { "token": "t", "teamId": "a", "projectId": "b", "defaultHomeDir": "/h", "namePrefix": "r", "ports": [] },
            "freestyle": { "apiKey": "k", "defaultHomeDir": "/h", "namePrefix": "r", "persistence": { "type": "ephemeral" }, "idleTimeoutSeconds": null },
            "agent37": { "apiKey": "k", "baseUrl": "http://x", "defaultHomeDir": "/h" },
            "microsandbox": { "apiKey": "k", "homeDir": "/h", "image": "i" },
            "local": {},
        });
        let pools = plan(Some(&facts(json!({ "providers": entries })))).unwrap();
        let names: Vec<&str> = pools.iter().map(|p| p.name).collect();
        // In the entries' order (`json!` sorts an object's keys).
        assert_eq!(names, ["agent37", "daytona", "e2b", "freestyle", "local", "microsandbox", "vercel"]);
        assert!(pools.iter().all(|p| p.id == p.name));
    }

    #[test]
    fn must_fire_each_missing_or_wrong_typed_required_field_names_provider_and_field() {
        let e = fails(json!({ "providers": { "e2b": {} } }));
        assert_eq!((e.field.as_str(), e.expectation.as_str()), ("providers.e2b.apiKey", "is required"));
        let e = fails(json!({ "providers": { "e2b": { "apiKey": "" } } }));
        assert_eq!(e.expectation, "must be a non-empty string");
        let e = fails(json!({ "providers": { "e2b": { "apiKey": 12345 } } }));
        assert!(!e.message().contains("12345"));
        let freestyle = json!({ "apiKey": "k", "defaultHomeDir": "/h", "namePrefix": "r", "persistence": "ephemeral" });
        let e = fails(json!({ "providers": { "freestyle": freestyle } }));
        assert_eq!(
            (e.field.as_str(), e.expectation.as_str()),
            ("providers.freestyle.persistence", "must be an object with a type")
        );
    }

    #[test]
    fn must_fire_optional_fields_of_the_wrong_type_and_must_not_fire_when_absent() {
        let e = fails(json!({ "providers": { "e2b": with(e2b(), "runBudgetMs", json!(-1)) } }));
        assert_eq!(
            (e.field.as_str(), e.expectation.as_str()),
            ("providers.e2b.runBudgetMs", "must be a finite number >= 0")
        );
        let nan = json!({ "t": "NaN" });
        assert_eq!(
            fails(json!({ "providers": { "e2b": with(e2b(), "createTimeoutMs", nan) } })).field,
            "providers.e2b.createTimeoutMs"
        );
        let undefined = json!({ "t": "undefined" });
        assert!(plan(Some(&facts(json!({ "providers": { "e2b": with(e2b(), "template", undefined) } })))).is_ok());
    }

    #[test]
    fn must_fire_unknown_providers_keys_and_options_are_refused() {
        let e = fails(json!({ "providers": { "modal": {} } }));
        assert_eq!(e.field, "providers.modal");
        assert_eq!(
            e.expectation,
            "is not a supported provider (daytona, e2b, vercel, freestyle, agent37, microsandbox, local)"
        );
        assert_eq!(
            fails(json!({ "providers": { "e2b": with(e2b(), "apikey", json!("x")) } })).field,
            "providers.e2b.apikey"
        );
        assert_eq!(fails(json!({ "providers": { "local": { "apiKey": "x" } } })).field, "providers.local.apiKey");
        assert_eq!(fails(json!({ "providers": {} })).field, "providers");
        assert_eq!(fails(json!({ "registry": {}, "providers": { "local": {} } })).field, "registry");
        assert_eq!(fails(json!("x")).field, "options");
        assert_eq!(plan(None).unwrap_err().expectation, "could not be read (a property access threw)");
    }

    #[test]
    fn must_fire_huge_unknown_keys_are_cut_in_the_field() {
        let key = "k".repeat(100_000);
        let e = fails(json!({ "providers": { key.clone(): {} } }));
        assert!(e.field.len() < 200 && e.field.ends_with("bytes]"), "{}", e.field.len());
        let e = fails(json!({ "providers": { "local": { key: 1 } } }));
        assert!(e.field.len() < 200);
    }

    #[test]
    fn must_fire_a_module_loader_that_is_not_a_function_and_must_not_fire_for_one() {
        let e = fails(json!({ "providers": { "local": {} }, "moduleLoader": "x" }));
        assert_eq!(
            e.message(),
            "invalid configuration: moduleLoader must be a function (specifier) => Promise<module>"
        );
        assert!(plan(Some(&facts(json!({ "providers": { "local": {} }, "moduleLoader": function() })))).is_ok());
    }

    #[test]
    fn must_fire_capacity_keys_beside_a_custom_reader_and_must_not_fire_for_the_reader_alone() {
        let custom = json!({ "getCapacity": function(), "limits": {} });
        let e = fails(json!({ "providers": { "e2b": with(e2b(), "capacity", custom) } }));
        assert_eq!(
            (e.field.as_str(), e.expectation.as_str()),
            ("providers.e2b.capacity.limits", "is not allowed beside getCapacity")
        );
        let pools = plan(Some(&facts(
            json!({ "providers": { "e2b": with(e2b(), "capacity", json!({ "getCapacity": function() })) } }),
        )))
        .unwrap();
        assert_eq!(pools[0].capacity, CapacitySource::Custom);
        let e = fails(json!({ "providers": { "e2b": with(e2b(), "capacity", json!({ "limit": 1 })) } }));
        assert_eq!(
            (e.field.as_str(), e.expectation.as_str()),
            ("providers.e2b.capacity.limit", "is not a known option")
        );
        let e = fails(json!({ "providers": { "e2b": with(e2b(), "capacity", json!({ "limits": 5 })) } }));
        assert_eq!(e.field, "providers.e2b.capacity.limits");
    }

    #[test]
    fn must_fire_an_invalid_rate_limit_names_its_field_and_must_not_fire_for_a_valid_one() {
        let e = fails(json!({ "providers": { "local": { "rateLimit": { "launchesPerSecond": 0 } } } }));
        assert_eq!(e.field, "providers.local.rateLimit.launchesPerSecond");
        let e = fails(json!({ "providers": { "local": { "rateLimit": { "launchesPerSecond": 5, "burst": 0 } } } }));
        assert_eq!(e.field, "providers.local.rateLimit.burst");
        assert!(plan(Some(&facts(json!({ "providers": { "local": { "rateLimit": { "launchesPerSecond": 5 } } } }))))
            .is_ok());
    }

    #[test]
    fn must_fire_an_invalid_warm_option_names_its_field_and_must_not_fire_for_a_valid_one() {
        let warm = json!({ "size": 1, "refill": { "concurrency": -2 } });
        assert_eq!(
            fails(json!({ "providers": { "local": { "warm": warm } } })).field,
            "providers.local.warm.refill.concurrency"
        );
        let warm = json!({ "size": 1, "refill": { "concurrency": function() } });
        let e = fails(json!({ "providers": { "local": { "warm": warm } } }));
        assert_eq!(
            (e.field.as_str(), e.expectation.as_str()),
            ("providers.local.warm.refill.concurrency", "must be JSON data (a function is not)")
        );
        let e = fails(json!({ "providers": { "local": { "warm": { "t": "cycle" } } } }));
        assert_eq!((e.field.as_str(), e.expectation.as_str()), ("providers.local.warm", "could not be read"));
        assert!(plan(Some(&facts(json!({ "providers": { "local": { "warm": { "size": 1 } } } })))).is_ok());
    }

    #[test]
    fn the_plan_names_the_adapter_and_reader_fields_never_their_values() {
        let entry = json!({ "apiKey": "sk_canary", "apiUrl": "http://d", "organizationId": "o", "id": "day", "capacity": { "limits": { "cpu": 1 } } });
        let pool = plan(Some(&facts(json!({ "providers": { "daytona": entry } })))).unwrap().remove(0);
        assert_eq!((pool.id.as_str(), pool.capacity, pool.finder), ("day", CapacitySource::Builtin, true));
        assert_eq!(pool.adapter_keys, ["apiKey", "apiUrl", "organizationId"]);
        let reader: Vec<(&str, Vec<&str>)> = pool.reader.iter().map(|c| (c.option, c.from.clone())).collect();
        assert_eq!(
            reader,
            [
                ("apiKey", vec!["apiKey"]),
                ("baseUrl", vec!["apiUrl"]),
                ("organizationId", vec!["organizationId"]),
                ("limits", vec!["capacity", "limits"])
            ]
        );
        assert!(!format!("{pool:?}").contains("sk_canary"));
        let entry = json!({ "apiKey": "k", "url": "http://m", "homeDir": "/h", "image": "i", "capacity": { "baseUrl": "http://c" } });
        let pool = plan(Some(&facts(json!({ "providers": { "microsandbox": entry } })))).unwrap().remove(0);
        assert_eq!(pool.reader[1], Copied { option: "baseUrl", from: vec!["capacity", "baseUrl"] });
        let vercel =
            json!({ "token": "t", "teamId": "a", "projectId": "b", "defaultHomeDir": "/h", "namePrefix": "r" });
        let pool = plan(Some(&facts(json!({ "providers": { "vercel": vercel } })))).unwrap().remove(0);
        assert_eq!((pool.reader.len(), pool.finder), (0, false));
    }

    #[test]
    fn the_local_pool_counts_against_its_sandbox_limit() {
        let entry = json!({ "capacity": { "limits": { "sandboxes": 4 } } });
        let pool = plan(Some(&facts(json!({ "providers": { "local": entry } })))).unwrap().remove(0);
        assert_eq!((pool.capacity, pool.local_limit, pool.local_required), (CapacitySource::Local, Some(4.0), 1.0));
        let pool = plan(Some(&facts(json!({ "providers": { "local": {} } })))).unwrap().remove(0);
        assert_eq!(pool.local_limit, None);
    }

    #[test]
    fn must_fire_create_provider_runtime_refuses_unknown_providers_and_must_not_fire_for_local() {
        let e = runtime_plan(Some(&facts(json!({ "provider": "modal" })))).unwrap_err();
        assert_eq!(e.message(), "invalid configuration: provider must be one of daytona, e2b, vercel, freestyle, agent37, microsandbox, local");
        assert_eq!(
            runtime_plan(Some(&facts(json!({ "provider": "local", "options": { "x": 1 } })))).unwrap().provider,
            None
        );
        let e = runtime_plan(Some(&facts(json!({ "provider": "agent37", "options": { "apiKey": "k" } })))).unwrap_err();
        assert_eq!(e.field, "providers.agent37.baseUrl");
        let ok = json!({ "apiKey": "k", "baseUrl": "http://x", "defaultHomeDir": "/h" });
        let e = runtime_plan(Some(&facts(
            json!({ "provider": "agent37", "options": ok, "internals": { "moduleLoader": 1 } }),
        )))
        .unwrap_err();
        assert_eq!(e.field, "moduleLoader");
        assert!(runtime_plan(Some(&facts(json!({ "provider": "agent37", "options": ok })))).is_ok());
    }
}
