//! napi glue for the factory (`createSandboxRouter`, `createProviderRuntime`) and the lazy
//! provider adapters: the catalogue's answers, the factory's plan, and the typed errors of
//! a package that will not load or an adapter call that failed. Every rule is the core's
//! (`core::factory`, `core::providers`, `core::packages`); this file converts.

use crate::binding::capacity::MeasurementRecord;
use crate::binding::checks::ErrorTextRecord;
use crate::binding::error::{guard, internal, Failure, NativeError};
use crate::core::error::ErrorClass;
use crate::core::factory::{self, CapacitySource, ConfigError, Pool};
use crate::core::facts::Fact;
use crate::core::packages::{self, PackageError};
use crate::core::providers::{self, DEFAULT_SIGNALS, DEFAULT_SUPPORTED};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;

/// The optional package telemetry needs (`@opentelemetry/api`).
#[napi]
pub const TELEMETRY_PACKAGE: &str = packages::TELEMETRY_API.name;

/// The providers `createSandboxRouter` takes, `local` last (`SUPPORTED_PROVIDERS`).
#[napi]
pub fn supported_providers(env: Env) -> napi::Result<Vec<&'static str>> {
    guard(&env, || Ok(providers::supported().collect()))
}

/// The capabilities a factory pool declares when its entry declares none.
#[napi(object, object_from_js = false)]
pub struct DefaultCapabilitiesRecord {
    /// `syncExec` and `fileTransfer`, nothing else.
    pub supported: Vec<&'static str>,
}

/// `DEFAULT_CAPABILITIES`: synchronous execution and file transfer only; no resources,
/// region, image, isolation or durability, so requests needing them are refused until
/// the caller declares the pool's real envelope.
#[napi]
pub fn default_capabilities(env: Env) -> napi::Result<DefaultCapabilitiesRecord> {
    guard(&env, || Ok(DefaultCapabilitiesRecord { supported: DEFAULT_SUPPORTED.to_vec() }))
}

/// The routing signals a factory pool declares when its entry declares none.
#[napi(object, object_from_js = false)]
pub struct DefaultSignalsRecord {
    /// 1, the same for every pool.
    pub estimated_cost: f64,
    /// 60000: pessimistic, so an unmeasured pool never meets a latency budget by accident.
    pub cold_start_latency_ms: f64,
    /// 60000, likewise.
    pub ready_latency_ms: f64,
    /// 0.5.
    pub completion_within_budget_rate: f64,
    /// true.
    pub available: bool,
}

/// `DEFAULT_SIGNALS`: equal placeholders, not measurements.
#[napi]
pub fn default_signals(env: Env) -> napi::Result<DefaultSignalsRecord> {
    let s = DEFAULT_SIGNALS;
    guard(&env, || {
        Ok(DefaultSignalsRecord {
            estimated_cost: s.estimated_cost,
            cold_start_latency_ms: s.cold_start_latency_ms,
            ready_latency_ms: s.ready_latency_ms,
            completion_within_budget_rate: s.completion_within_budget_rate,
            available: s.available,
        })
    })
}

/// How a pool's capacity is read.
#[napi(string_enum)]
pub enum CapacitySourceName {
    /// The entry's own `capacity.getCapacity`.
    Custom,
    /// A builtin reader (`createCapacityReader`) with the plan's `reader` options.
    Builtin,
    /// The local runtime's count of its live sandboxes (`localMeasurement`).
    Local,
}

/// An option of a builtin reader (and finder), and the entry's field that holds it.
#[napi(object, object_from_js = false)]
pub struct CopiedRecord {
    /// The reader's option (`apiKey`, `baseUrl`, …).
    pub option: &'static str,
    /// The path of the entry's field (`["capacity", "baseUrl"]`).
    pub from: Vec<&'static str>,
}

/// An adapter option an entry does not set, and its value.
#[napi(object, object_from_js = false)]
pub struct DefaultRecord {
    /// The option.
    pub key: &'static str,
    /// Its value.
    pub value: &'static str,
}

/// An SDK client the adapter is handed instead of the raw credential (Daytona's).
#[napi(object, object_from_js = false)]
pub struct ClientRecord {
    /// The SDK's class.
    pub export: &'static str,
    /// The adapter options it is built from (taken out of the adapter's).
    pub keys: Vec<&'static str>,
    /// The adapter option that holds it.
    pub option: &'static str,
}

/// How a lazy runtime of a builtin provider is built on its first operation.
#[napi(object, object_from_js = false, use_nullable = true)]
pub struct RecipeRecord {
    /// The provider (`e2b`, …).
    pub provider: &'static str,
    /// `@agent-relay/sandbox`, which holds the adapters.
    pub sandbox_package: &'static str,
    /// The adapter class it exports for this provider.
    pub adapter: &'static str,
    /// The vendor SDK loaded before the adapter is made, if any.
    pub sdk: Option<&'static str>,
    /// The SDK client the adapter is given, if any.
    pub client: Option<ClientRecord>,
    /// The methods the runtime delegates (`launch`, `launchDetached` when it has one, the
    /// port's).
    pub methods: Vec<&'static str>,
    /// The adapter options an entry does not set.
    pub defaults: Vec<DefaultRecord>,
}

/// What one pool is built from (`core::factory::Pool`).
#[napi(object, object_from_js = false, use_nullable = true)]
pub struct PoolPlanRecord {
    /// The entry's name in `providers`.
    pub name: &'static str,
    /// The pool's id: the entry's `id`, else its name.
    pub id: String,
    /// How its lazy runtime is built; null: the local runtime.
    pub recipe: Option<RecipeRecord>,
    /// The entry's fields its adapter is given, over the defaults.
    pub adapter_keys: Vec<&'static str>,
    /// How its capacity is read.
    pub capacity: CapacitySourceName,
    /// The builtin reader's (and the finder's) options, by the entry's fields.
    pub reader: Vec<CopiedRecord>,
    /// Whether reconcile lists the pool with a native finder.
    pub finder: bool,
    /// The local pool's `capacity.limits.sandboxes`, when it is a number.
    pub local_limit: Option<f64>,
    /// The local pool's `capacity.demand.sandboxes`, else 1.
    pub local_required: f64,
}

impl From<Pool> for PoolPlanRecord {
    fn from(p: Pool) -> Self {
        PoolPlanRecord {
            name: p.name,
            id: p.id,
            recipe: p.provider.map(|provider| RecipeRecord {
                provider: provider.name,
                sandbox_package: packages::SANDBOX.name,
                adapter: provider.adapter,
                sdk: provider.sdk.map(|s| s.name),
                client: provider.client.map(|c| ClientRecord {
                    export: c.export,
                    keys: c.keys.to_vec(),
                    option: c.option,
                }),
                methods: provider.methods().collect(),
                defaults: provider.defaults.iter().map(|&(key, value)| DefaultRecord { key, value }).collect(),
            }),
            adapter_keys: p.adapter_keys,
            capacity: match p.capacity {
                CapacitySource::Custom => CapacitySourceName::Custom,
                CapacitySource::Builtin => CapacitySourceName::Builtin,
                CapacitySource::Local => CapacitySourceName::Local,
            },
            reader: p.reader.into_iter().map(|c| CopiedRecord { option: c.option, from: c.from }).collect(),
            finder: p.finder,
            local_limit: p.local_limit,
            local_required: p.local_required,
        }
    }
}

fn config_error(e: ConfigError) -> Failure {
    let message = e.message();
    let mut out = NativeError::invalid(ErrorClass::Configuration, "INVALID_CONFIGURATION", message, e.field);
    out.provider_id = e.provider.map(str::to_string);
    out
}

fn facts(text: Option<&str>) -> Result<Option<Fact>, Failure> {
    match text {
        None => Ok(None),
        Some(t) => Fact::parse(t).map(Some).ok_or_else(|| internal("(factory options that are not facts)")),
    }
}

/// Validates `createSandboxRouter`'s options, given as facts (`lib/factory.js` `factsOf`;
/// null: they could not be read), and plans each pool in `providers` order. Throws the
/// typed `INVALID_CONFIGURATION` error naming the field (and `providerId`), never a value.
#[napi]
pub fn factory_plan(env: Env, facts_json: Option<String>) -> napi::Result<Vec<PoolPlanRecord>> {
    guard(&env, || {
        let pools = factory::plan(facts(facts_json.as_deref())?.as_ref()).map_err(config_error)?;
        Ok(pools.into_iter().map(PoolPlanRecord::from).collect())
    })
}

/// Validates `createProviderRuntime`'s arguments, given as the facts of
/// `{ provider, options, internals }` (null: they could not be read), and plans the
/// runtime. Throws like `factoryPlan`.
#[napi]
pub fn runtime_plan(env: Env, facts_json: Option<String>) -> napi::Result<PoolPlanRecord> {
    guard(&env, || Ok(factory::runtime_plan(facts(facts_json.as_deref())?.as_ref()).map_err(config_error)?.into()))
}

/// The local pool's capacity: `used` live sandboxes (null: not counted) against `limit`
/// (null: `{ status: 'unknown', reason: 'LIMIT_NOT_CONFIGURED' }`), `required` per launch.
#[napi]
pub fn local_measurement(
    env: Env,
    limit: Option<f64>,
    required: f64,
    used: Option<f64>,
) -> napi::Result<MeasurementRecord> {
    guard(&env, || Ok(providers::local_measurement(limit, required, used).into()))
}

/// The code and message of a `ProviderRuntimeError` of pool `providerId` during
/// `operation`; with `timeoutMs`, one that did not settle within it (outcome unknown).
#[napi]
pub fn provider_runtime_error(
    env: Env,
    provider_id: String,
    operation: String,
    timeout_ms: Option<f64>,
) -> napi::Result<ErrorTextRecord> {
    guard(&env, || {
        let (code, message) = providers::runtime_error(&provider_id, &operation, timeout_ms);
        Ok(ErrorTextRecord { code, message })
    })
}

/// What a `ProviderRuntimeError` keeps of an SDK error.
#[napi(object, object_from_js = false)]
pub struct KeptFactsRecord {
    /// Its numeric HTTP status, when it has one (100 to 599).
    pub status: Option<u32>,
    /// Its class name, when it is an identifier of at most 64 characters.
    pub error_class: Option<String>,
}

/// What the credential-first surface keeps of an SDK error, from its facts read once
/// (JSON text `{ statuses: [status, statusCode, response.status], className }`; null: it
/// could not be read, or is not an object): the first status that is an integer 100–599,
/// and the class name when it is an identifier. Nothing else, never its text.
#[napi]
pub fn kept_error_facts(env: Env, facts_json: Option<String>) -> napi::Result<KeptFactsRecord> {
    guard(&env, || {
        let v = facts_json.and_then(|t| serde_json::from_str::<Value>(&t).ok()).unwrap_or(Value::Null);
        let statuses = v.get("statuses").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        Ok(KeptFactsRecord {
            status: providers::kept_status(statuses).map(u32::from),
            error_class: v
                .get("className")
                .and_then(Value::as_str)
                .and_then(providers::kept_class_name)
                .map(str::to_string),
        })
    })
}

/// A package error, as `lib/errors.js` `fromNative` reads it (a `ProviderPackageMissingError`
/// or a `ProviderOperationUnsupportedError`).
#[napi(object, object_from_js = false)]
pub struct PackageErrorRecord {
    /// The JS class to raise.
    pub error_class: &'static str,
    /// `PROVIDER_PACKAGE_MISSING`, `PROVIDER_PACKAGE_LOAD_FAILED` or
    /// `PROVIDER_OPERATION_UNSUPPORTED`.
    pub code: &'static str,
    /// The package, the range, what to run; never the loader's text.
    pub message: String,
    /// The package it is about.
    pub package_name: &'static str,
    /// The module a broken install could not find, when known.
    pub missing_module: Option<String>,
}

impl From<PackageError> for PackageErrorRecord {
    fn from(e: PackageError) -> Self {
        PackageErrorRecord {
            error_class: e.class().name(),
            code: e.code(),
            message: e.message(),
            package_name: e.package().name,
            missing_module: e.missing_module().map(str::to_string),
        }
    }
}

fn package(name: &str) -> Result<&'static packages::Package, Failure> {
    packages::find(name).ok_or_else(|| internal("(a package the router does not load)"))
}

fn provider(name: &str) -> Result<&'static providers::Provider, Failure> {
    providers::find(name).ok_or_else(|| internal("(a provider the router does not build)"))
}

/// The typed error for optional package `packageName`, whose load threw: `notFound` when
/// the thrown error's `code` was Node's module-not-found, `text` its message when it had
/// one (read for a module name only, never repeated).
#[napi]
pub fn package_load_error(
    env: Env,
    package_name: String,
    not_found: bool,
    text: Option<String>,
) -> napi::Result<PackageErrorRecord> {
    guard(&env, || Ok(packages::load_failure(package(&package_name)?, not_found, text.as_deref()).into()))
}

/// The typed error for optional package `packageName` lacking the export the router needs:
/// `provider`'s adapter (`@agent-relay/sandbox`), its SDK client, or the OpenTelemetry API.
#[napi]
pub fn package_export_missing(
    env: Env,
    package_name: String,
    provider_name: Option<String>,
) -> napi::Result<PackageErrorRecord> {
    guard(&env, || {
        let p = package(&package_name)?;
        let export = match provider_name {
            None if *p == packages::TELEMETRY_API => packages::Export::TelemetryApi,
            None => return Err(internal("(a missing export of no provider)")),
            Some(name) => provider(&name)?.export_of(p).ok_or_else(|| internal("(an export no provider needs)"))?,
        };
        Ok(PackageError::NoExport(p, export).into())
    })
}

/// The typed `PROVIDER_OPERATION_UNSUPPORTED` error: `provider`'s installed adapter has no
/// `method`.
#[napi]
pub fn operation_unsupported(env: Env, provider_name: String, method: String) -> napi::Result<PackageErrorRecord> {
    guard(&env, || {
        let p = provider(&provider_name)?;
        let method = p.method(&method).ok_or_else(|| internal("(a method no runtime delegates)"))?;
        Ok(PackageError::Unsupported { provider: p.name, method }.into())
    })
}
