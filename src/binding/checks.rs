//! napi glue for the checks JavaScript asks of the core outside the provision path: the
//! error classes' names, the internal error, and the typed errors of caller values that
//! `lib/` reads once and hands over as facts (`core::facts`): mapping records, the stores'
//! options, the `telemetry` option, a reader option JSON cannot carry, why a pool could
//! not be listed. Every rule is the core's; this file converts.

use crate::binding::error::{error_value, guard, internal, panicked, Failure, NativeError};
use crate::core::capacity::ListFailure;
use crate::core::error::{CoreError, ErrorClass};
use crate::core::facts::Fact;
use crate::core::json::FieldError;
use crate::core::records;
use crate::core::store_options::{self, Connection, Ssl};
use crate::core::telemetry_option::{self, Provider};
use crate::readers::config;
use napi::bindgen_prelude::Object;
use napi::Env;
use napi_derive::napi;

/// The names of the JS classes a native error may name (`errorClass`): the core's
/// `ErrorClass` list, in declaration order. `lib/errors.js` maps each to its class.
#[napi]
pub fn error_class_names(env: Env) -> napi::Result<Vec<&'static str>> {
    guard(&env, || Ok(ErrorClass::ALL.iter().map(|c| c.name()).collect()))
}

/// The internal error (`INTERNAL_ERROR`): what a value that is not a native error, or a
/// panic, becomes. Carries no text but its own.
#[napi(ts_return_type = "Error")]
pub fn internal_error<'env>(env: &'env Env) -> napi::Result<Object<'env>> {
    error_value(env, || Ok(panicked()))
}

/// An error's code and message, for a class whose constructor callers use too
/// (`ProviderRuntimeError`, `ManifestStartError`).
#[napi(object, object_from_js = false)]
pub struct ErrorTextRecord {
    /// The stable code.
    pub code: &'static str,
    /// Names and numbers only.
    pub message: String,
}

fn facts(text: Option<String>) -> Option<Fact> {
    text.as_deref().and_then(Fact::parse)
}

/// The typed `INVALID_INPUT` error for `field`, whose value JSON cannot carry
/// (`expectation`: what lib/serialize.js found there).
#[napi(ts_return_type = "Error")]
pub fn invalid_input<'env>(env: &'env Env, field: String, expectation: String) -> napi::Result<Object<'env>> {
    error_value(env, || Ok(Failure::from(CoreError::InvalidInput { field, expectation })))
}

/// The typed `INVALID_INPUT` error for `field`, whose value could not be read (a property
/// access threw).
#[napi(ts_return_type = "Error")]
pub fn unreadable_input<'env>(env: &'env Env, field: String) -> napi::Result<Object<'env>> {
    let expectation = "could not be read (a property access threw)".to_string();
    error_value(env, || Ok(Failure::from(CoreError::InvalidInput { field, expectation })))
}

fn record_error(e: FieldError) -> Failure {
    NativeError::invalid(ErrorClass::RequestValidation, "INVALID_INPUT", records::message(&e), e.field)
}

/// Checks a record for the in-memory store's `put`, given as facts (`lib/facts.js`; null:
/// it could not be read): throws the typed `INVALID_INPUT` error naming the field.
#[napi]
pub fn check_mapping_record(env: Env, facts_json: Option<String>) -> napi::Result<()> {
    guard(&env, || records::memory_record(facts(facts_json).as_ref()).map_err(record_error))
}

/// Checks a record for a durable store's `put` (an object of string labels, an `sbx_` id, a
/// provider sandbox id); throws like `checkMappingRecord`.
#[napi]
pub fn check_mapping_put(env: Env, facts_json: Option<String>) -> napi::Result<()> {
    guard(&env, || records::put(facts(facts_json).as_ref()).map_err(record_error))
}

/// Checks an intent record for a durable store's `intent`; throws like `checkMappingRecord`.
#[napi]
pub fn check_mapping_intent(env: Env, facts_json: Option<String>) -> napi::Result<()> {
    guard(&env, || records::intent(facts(facts_json).as_ref()).map_err(record_error))
}

/// `SqliteMappingStore`'s options, normalized.
#[napi(object, object_from_js = false)]
pub struct SqliteOptionsRecord {
    /// The file's path, as given.
    pub path: String,
    /// `durability: 'full'` (default `normal`).
    pub full: bool,
}

/// Reads `SqliteMappingStore`'s options from their facts (null: they could not be read);
/// throws the typed `INVALID_CONFIGURATION` error naming the option.
#[napi]
pub fn sqlite_options(env: Env, facts_json: Option<String>) -> napi::Result<SqliteOptionsRecord> {
    guard(&env, || {
        let o = store_options::sqlite(facts(facts_json).as_ref())?;
        Ok(SqliteOptionsRecord { path: o.path, full: o.full })
    })
}

/// `connection.ssl`, as the native store takes it.
#[napi(object, object_from_js = false)]
pub struct SslRecord {
    /// The TLS mode (absent: the URL's `sslmode`, else `verify-full`).
    pub mode: Option<String>,
    /// Extra trusted CA certificates, PEM text.
    pub ca: Option<String>,
}

/// A connection, as the native store takes it.
#[napi(object, object_from_js = false)]
pub struct ConnectionRecord {
    /// A connection URL.
    pub url: Option<String>,
    /// Host, IP address or unix socket directory.
    pub host: Option<String>,
    /// Port.
    pub port: Option<u32>,
    /// User.
    pub user: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Database.
    pub database: Option<String>,
    /// TLS.
    pub ssl: Option<SslRecord>,
}

impl From<Connection> for ConnectionRecord {
    fn from(c: Connection) -> Self {
        ConnectionRecord {
            url: c.url,
            host: c.host,
            port: c.port,
            user: c.user,
            password: c.password,
            database: c.database,
            ssl: c.ssl.map(|Ssl { mode, ca }| SslRecord { mode, ca }),
        }
    }
}

/// `PostgresMappingStore`'s options, normalized with their defaults.
#[napi(object, object_from_js = false)]
pub struct PostgresOptionsRecord {
    /// What to connect to (handed to the native store, then dropped).
    pub connection: ConnectionRecord,
    /// Bound of one database call, ms (default 5000, at most 600000).
    pub timeout_ms: u32,
    /// Connections at most (default 10, at most 1000).
    pub pool_size: u32,
    /// Lease of this process's in-flight holds, ms (default 30000, at most 3600000).
    pub lease_ms: u32,
}

/// Reads `PostgresMappingStore`'s options from their facts (null: they could not be read);
/// throws the typed `INVALID_CONFIGURATION` error naming the option, never its value.
#[napi]
pub fn postgres_options(env: Env, facts_json: Option<String>) -> napi::Result<PostgresOptionsRecord> {
    guard(&env, || {
        let o = store_options::postgres(facts(facts_json).as_ref())?;
        Ok(PostgresOptionsRecord {
            connection: o.connection.into(),
            timeout_ms: o.timeout_ms,
            pool_size: o.pool_size,
            lease_ms: o.lease_ms,
        })
    })
}

/// The `telemetry` option, on.
#[napi(object, object_from_js = false)]
pub struct TelemetryOptionRecord {
    /// The caller named a `meterProvider` (else: the global one).
    pub meter_provider: bool,
    /// The caller named a `tracerProvider` (else: the global one).
    pub tracer_provider: bool,
    /// The provision span's trace context goes into the launch's labels.
    pub propagate_to_labels: bool,
}

/// Reads the router's `telemetry` option from its facts (null: it could not be read): null
/// when telemetry is off; throws the typed `INVALID_CONFIGURATION` error naming the field.
#[napi]
pub fn telemetry_option(env: Env, facts_json: Option<String>) -> napi::Result<Option<TelemetryOptionRecord>> {
    guard(&env, || {
        Ok(telemetry_option::read(facts(facts_json).as_ref())?.map(|o| TelemetryOptionRecord {
            meter_provider: o.meter_provider,
            tracer_provider: o.tracer_provider,
            propagate_to_labels: o.propagate_to_labels,
        }))
    })
}

/// The typed `INVALID_CONFIGURATION` error for the caller's telemetry provider asked with
/// `method` (`getMeter`, `getTracer`): it has no such method (`asked`: false), or the method
/// threw or answered no object.
#[napi(ts_return_type = "Error")]
pub fn telemetry_provider_refused<'env>(env: &'env Env, method: String, asked: bool) -> napi::Result<Object<'env>> {
    error_value(env, || {
        let provider = Provider::of_method(&method)
            .ok_or_else(|| internal("(a telemetry provider method the router does not call)"))?;
        Ok(Failure::from(telemetry_option::provider_refused(provider, asked)))
    })
}

/// The typed `INVALID_CONFIGURATION` error for a meter that would not create instrument
/// `name`.
#[napi(ts_return_type = "Error")]
pub fn telemetry_instrument_refused<'env>(env: &'env Env, name: String) -> napi::Result<Object<'env>> {
    error_value(env, || Ok(Failure::from(telemetry_option::instrument_refused(&name))))
}

/// The typed `INVALID_CONFIGURATION` error for a capacity reader option JSON cannot carry
/// (`field`: the option's path; `expectation`: what lib/serialize.js found there).
#[napi(ts_return_type = "Error")]
pub fn reader_option_refused<'env>(env: &'env Env, field: String, expectation: String) -> napi::Result<Object<'env>> {
    error_value(env, || {
        let e = FieldError::new(field, expectation);
        Ok(NativeError::invalid(ErrorClass::Configuration, "INVALID_CONFIGURATION", config::message(&e), e.field))
    })
}

/// What happened when a pool's runtime was asked to list its stamped sandboxes.
#[napi(string_enum)]
pub enum ListFailureName {
    /// The runtime has no `findAllByLabels`.
    NoLabelSearch,
    /// Its `findAllByLabels` threw or rejected.
    Threw,
    /// It did not answer within the deadline.
    TimedOut,
}

/// The reason a pool could not be listed (`NOT_SUPPORTED`, `READ_FAILED`, `TIMEOUT`), as the
/// core names what happened.
#[napi]
pub fn unlisted_reason(env: Env, failure: ListFailureName) -> napi::Result<&'static str> {
    let failure = match failure {
        ListFailureName::NoLabelSearch => ListFailure::NoLabelSearch,
        ListFailureName::Threw => ListFailure::Threw,
        ListFailureName::TimedOut => ListFailure::TimedOut,
    };
    guard(&env, || Ok(failure.reason().code()))
}
