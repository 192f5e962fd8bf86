//! The router's `telemetry` option: off (absent or `false`), on with the global providers
//! of `@opentelemetry/api` (`true`), or on with the caller's own `meterProvider` and
//! `tracerProvider` (either omitted: the global one, as OpenTelemetry instrumentations do)
//! and `propagateToLabels`. Also what the router says when a caller's provider will not
//! give it a meter or a tracer.

use crate::core::error::CoreError;
use crate::core::facts::Fact;
use crate::core::json::join;

/// The option's keys.
const KEYS: [&str; 3] = ["meterProvider", "tracerProvider", "propagateToLabels"];

/// The option, on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TelemetryOption {
    /// The caller named a `meterProvider` (else: the global one).
    pub meter_provider: bool,
    /// The caller named a `tracerProvider` (else: the global one).
    pub tracer_provider: bool,
    /// The provision span's trace context goes into the launch's labels (default false).
    pub propagate_to_labels: bool,
}

fn refused(field: impl Into<String>, expectation: impl Into<String>) -> CoreError {
    CoreError::InvalidConfiguration { scope: "router", field: field.into(), expectation: expectation.into() }
}

/// Reads the option (None: it could not be read); `Ok(None)`: telemetry is off.
pub fn read(option: Option<&Fact>) -> Result<Option<TelemetryOption>, CoreError> {
    let option = option.ok_or_else(|| refused("telemetry", "could not be read (a property access threw)"))?;
    let off = TelemetryOption { meter_provider: false, tracer_provider: false, propagate_to_labels: false };
    match option {
        Fact::Other(crate::core::facts::Other::Undefined) | Fact::Bool(false) => return Ok(None),
        Fact::Bool(true) => return Ok(Some(off)),
        o if o.is_object() => {}
        _ => {
            return Err(refused(
                "telemetry",
                "must be true, false or { meterProvider?, tracerProvider?, propagateToLabels? }",
            ))
        }
    }
    if let Some(key) = option.keys().find(|k| !KEYS.contains(k)) {
        return Err(refused(join("telemetry", key), "is not a known option"));
    }
    let propagate_to_labels = match option.get("propagateToLabels") {
        None => false,
        Some(Fact::Bool(b)) => *b,
        Some(_) => return Err(refused("telemetry.propagateToLabels", "must be a boolean")),
    };
    Ok(Some(TelemetryOption {
        meter_provider: option.get("meterProvider").is_some(),
        tracer_provider: option.get("tracerProvider").is_some(),
        propagate_to_labels,
    }))
}

/// A provider the router takes a meter or a tracer from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `telemetry.meterProvider`, asked `getMeter(name, version)`.
    Meter,
    /// `telemetry.tracerProvider`, asked `getTracer(name, version)`.
    Tracer,
}

impl Provider {
    /// The provider a method of the OpenTelemetry API asks (`getMeter`, `getTracer`).
    pub fn of_method(method: &str) -> Option<Provider> {
        [Provider::Meter, Provider::Tracer].into_iter().find(|p| p.method() == method)
    }

    fn field(self) -> &'static str {
        match self {
            Provider::Meter => "telemetry.meterProvider",
            Provider::Tracer => "telemetry.tracerProvider",
        }
    }

    fn method(self) -> &'static str {
        match self {
            Provider::Meter => "getMeter",
            Provider::Tracer => "getTracer",
        }
    }
}

/// A provider that has no method to ask (`asked`: false), or whose method threw or
/// answered no object (`asked`: true).
pub fn provider_refused(provider: Provider, asked: bool) -> CoreError {
    let method = provider.method();
    if asked {
        refused(provider.field(), format!("{method}() threw or answered no object"))
    } else {
        refused(provider.field(), format!("must have {method}(name, version)"))
    }
}

/// A meter that would not create the instrument `name`.
pub fn instrument_refused(name: &str) -> CoreError {
    refused(Provider::Meter.field(), format!("could not create {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<Option<TelemetryOption>, CoreError> {
        read(Some(&Fact::parse(text).unwrap()))
    }

    #[test]
    fn must_not_fire_absent_false_true_and_provider_objects_are_read() {
        assert_eq!(read_text(r#"{"t":"undefined"}"#), Ok(None));
        assert_eq!(read_text("false"), Ok(None));
        let on = read_text("true").unwrap().unwrap();
        assert!(!on.meter_provider && !on.tracer_provider && !on.propagate_to_labels);
        let o = read_text(r#"{"o":[["meterProvider",{"t":"instance"}],["propagateToLabels",true]]}"#).unwrap().unwrap();
        assert!(o.meter_provider && !o.tracer_provider && o.propagate_to_labels);
    }

    #[test]
    fn must_fire_every_other_value_is_invalid_configuration_naming_the_field() {
        let e = read_text("1").unwrap_err();
        assert_eq!(e.to_string(), "invalid router options: telemetry must be true, false or { meterProvider?, tracerProvider?, propagateToLabels? }");
        assert_eq!(read_text(r#"{"o":[["meter",1]]}"#).unwrap_err().field(), Some("telemetry.meter"));
        assert_eq!(
            read_text(r#"{"o":[["propagateToLabels","yes"]]}"#).unwrap_err().field(),
            Some("telemetry.propagateToLabels")
        );
        assert_eq!(read(None).unwrap_err().field(), Some("telemetry"));
    }

    #[test]
    fn provider_refusals_name_the_provider_and_its_method() {
        assert_eq!(Provider::of_method("getTracer"), Some(Provider::Tracer));
        assert_eq!(Provider::of_method("getLogger"), None);
        assert_eq!(
            provider_refused(Provider::Tracer, false).to_string(),
            "invalid router options: telemetry.tracerProvider must have getTracer(name, version)"
        );
        assert_eq!(
            provider_refused(Provider::Meter, true).to_string(),
            "invalid router options: telemetry.meterProvider getMeter() threw or answered no object"
        );
        assert_eq!(
            instrument_refused("x").to_string(),
            "invalid router options: telemetry.meterProvider could not create x"
        );
    }
}
