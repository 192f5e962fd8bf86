//! napi glue for the Daytona display helpers (`parseDaytonaCapacityLimits`,
//! `summarizeDaytonaCapacity`): the caller's values cross once as JSON text, the answers
//! cross typed.
//!
//! Why these field orders? The records are the objects users get, and the helpers used to
//! answer JSON text that JavaScript parsed: its keys came in alphabetical order. Each record
//! declares its fields in that order, so the objects are the same, key order included.

use crate::binding::clock::now_millis;
use crate::binding::error::{guard, Failure};
use crate::core::json::{input, FieldError};
use crate::core::CoreError;
use crate::readers::daytona_summary::{
    inventory_items, parse_daytona_capacity_limits as parse_limits, parse_summary_options,
    summarize_daytona_capacity as summarize, DaytonaCapacityLimits, Idle, IdleItem, Organization, Sum, Summary,
    Utilization, PROVIDER, PROVISIONING_CHECK,
};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use std::collections::BTreeMap;

fn invalid(e: FieldError) -> Failure {
    CoreError::InvalidInput { field: e.field, expectation: e.expectation }.into()
}

/// Strictly parsed Daytona limits: vCPU, MiB (null when not given), and what was given.
#[napi(object, use_nullable = true)]
pub struct DaytonaLimitsRecord {
    /// vCPU.
    pub cpu: Option<f64>,
    /// MiB (input GiB × 1024).
    #[napi(js_name = "diskMiB")]
    pub disk_mib: Option<f64>,
    /// MiB (input GiB × 1024).
    #[napi(js_name = "memoryMiB")]
    pub memory_mib: Option<f64>,
    /// The dimensions given, in cpu/memory/disk order.
    pub provided: Vec<String>,
}

impl From<DaytonaCapacityLimits> for DaytonaLimitsRecord {
    fn from(l: DaytonaCapacityLimits) -> Self {
        DaytonaLimitsRecord {
            cpu: l.cpu,
            disk_mib: l.disk_mib,
            memory_mib: l.memory_mib,
            provided: l.provided().into_iter().map(str::to_string).collect(),
        }
    }
}

/// Strictly parses Daytona limits `{ cpu?, memory?, disk? }` (vCPU; GiB for memory/disk),
/// given as JSON text: finite numbers > 0, no unknown keys, at least one. Throws the typed
/// `INVALID_INPUT` error naming the field.
#[napi]
pub fn parse_daytona_capacity_limits(env: Env, limits_json: Option<String>) -> napi::Result<DaytonaLimitsRecord> {
    guard(&env, || limits_of(limits_json.as_deref()))
}

fn limits_of(limits_json: Option<&str>) -> Result<DaytonaLimitsRecord, Failure> {
    let v = input(limits_json, "limits")?;
    Ok(parse_limits(&v).map_err(invalid)?.into())
}

/// A group's totals (memory and disk in MiB).
#[napi(object)]
pub struct DaytonaSumRecord {
    /// vCPU.
    pub cpu: f64,
    /// MiB.
    #[napi(js_name = "diskMiB")]
    pub disk_mib: f64,
    /// MiB.
    #[napi(js_name = "memoryMiB")]
    pub memory_mib: f64,
    /// How many sandboxes.
    pub sandboxes: f64,
}

impl From<Sum> for DaytonaSumRecord {
    fn from(s: Sum) -> Self {
        DaytonaSumRecord { cpu: s.cpu, disk_mib: s.disk_mib, memory_mib: s.memory_mib, sandboxes: s.sandboxes as f64 }
    }
}

/// Daytona's own accounting of the organization (no count).
#[napi(object)]
pub struct DaytonaAccountedRecord {
    /// vCPU.
    pub cpu: f64,
    /// MiB.
    #[napi(js_name = "diskMiB")]
    pub disk_mib: f64,
    /// MiB.
    #[napi(js_name = "memoryMiB")]
    pub memory_mib: f64,
}

/// The organization's totals across all states, and its accounting.
#[napi(object)]
pub struct DaytonaOrganizationRecord {
    /// cpu/memory in Daytona's compute states, disk also in its disk-only states.
    pub accounted: DaytonaAccountedRecord,
    /// vCPU.
    pub cpu: f64,
    /// MiB.
    #[napi(js_name = "diskMiB")]
    pub disk_mib: f64,
    /// MiB.
    #[napi(js_name = "memoryMiB")]
    pub memory_mib: f64,
    /// Every listed sandbox.
    pub sandboxes: f64,
}

impl From<Organization> for DaytonaOrganizationRecord {
    fn from(o: Organization) -> Self {
        let a = o.accounted;
        DaytonaOrganizationRecord {
            accounted: DaytonaAccountedRecord { cpu: a.cpu, disk_mib: a.disk_mib, memory_mib: a.memory_mib },
            cpu: o.total.cpu,
            disk_mib: o.total.disk_mib,
            memory_mib: o.total.memory_mib,
            sandboxes: o.total.sandboxes as f64,
        }
    }
}

/// One dimension's utilization (null figures without a configured limit).
#[napi(object, use_nullable = true)]
pub struct DaytonaUtilizationRecord {
    /// `limit - used`.
    pub headroom: Option<f64>,
    /// `ok`, `warning` or `critical`.
    pub level: Option<String>,
    /// The configured limit.
    pub limit: Option<f64>,
    /// `configured` or `not_configured`.
    pub limit_source: String,
    /// The ratio in percent, one decimal.
    pub percent: Option<f64>,
    /// `used / limit`.
    pub ratio: Option<f64>,
    /// `vCPU` or `MiB`.
    pub unit: String,
    /// The all-state sum.
    pub used: f64,
}

impl From<Utilization> for DaytonaUtilizationRecord {
    fn from(u: Utilization) -> Self {
        DaytonaUtilizationRecord {
            headroom: u.headroom,
            level: u.level.map(|l| l.name().to_string()),
            limit: u.limit,
            limit_source: u.limit_source().to_string(),
            percent: u.percent,
            ratio: u.ratio,
            unit: u.unit.to_string(),
            used: u.used,
        }
    }
}

/// Utilization per dimension.
#[napi(object)]
pub struct DaytonaUtilizationsRecord {
    /// vCPU.
    pub cpu: DaytonaUtilizationRecord,
    /// MiB.
    pub disk: DaytonaUtilizationRecord,
    /// MiB.
    pub memory: DaytonaUtilizationRecord,
}

/// The thresholds a summary used.
#[napi(object)]
pub struct DaytonaThresholdsRecord {
    /// Ratio at which a dimension is `critical`.
    pub critical_ratio: f64,
    /// Ratio at which a dimension is `warning`.
    pub warning_ratio: f64,
}

/// One idle sandbox (`id`, `name` null when not strings).
#[napi(object, use_nullable = true)]
pub struct DaytonaIdleItemRecord {
    /// vCPU.
    pub cpu: f64,
    /// MiB.
    #[napi(js_name = "diskMiB")]
    pub disk_mib: f64,
    /// Its id.
    pub id: Option<String>,
    /// `now` minus its last activity.
    pub idle_ms: f64,
    /// The timestamp its idleness is measured from, as given.
    pub last_activity_at: String,
    /// MiB.
    #[napi(js_name = "memoryMiB")]
    pub memory_mib: f64,
    /// Its name.
    pub name: Option<String>,
    /// Its state.
    pub state: String,
}

impl From<IdleItem> for DaytonaIdleItemRecord {
    fn from(i: IdleItem) -> Self {
        DaytonaIdleItemRecord {
            cpu: i.cpu,
            disk_mib: i.disk_mib,
            id: i.id,
            idle_ms: i.idle_ms,
            last_activity_at: i.last_activity_at,
            memory_mib: i.memory_mib,
            name: i.name,
            state: i.state,
        }
    }
}

/// The idle sandboxes: totals over all of them, the most idle listed.
#[napi(object)]
pub struct DaytonaIdleRecord {
    /// vCPU.
    pub cpu: f64,
    /// MiB.
    #[napi(js_name = "diskMiB")]
    pub disk_mib: f64,
    /// The idleness threshold.
    pub idle_after_ms: f64,
    /// The most idle first, at most `idleListLimit`.
    pub items: Vec<DaytonaIdleItemRecord>,
    /// MiB.
    #[napi(js_name = "memoryMiB")]
    pub memory_mib: f64,
    /// How many are idle.
    pub sandboxes: f64,
    /// Whether more are idle than listed.
    pub truncated: bool,
    /// Started sandboxes without a parseable timestamp.
    pub unknown_activity: f64,
}

impl From<Idle> for DaytonaIdleRecord {
    fn from(i: Idle) -> Self {
        DaytonaIdleRecord {
            cpu: i.total.cpu,
            disk_mib: i.total.disk_mib,
            idle_after_ms: i.idle_after_ms,
            items: i.items.into_iter().map(Into::into).collect(),
            memory_mib: i.total.memory_mib,
            sandboxes: i.total.sandboxes as f64,
            truncated: i.truncated,
            unknown_activity: i.unknown_activity as f64,
        }
    }
}

/// Counts of what the lenient reading did.
#[napi(object)]
pub struct DaytonaDataQualityRecord {
    /// Numeric fields coerced.
    pub coerced_values: f64,
    /// Items that are not objects.
    pub skipped_items: f64,
}

/// The display summary of a Daytona organization inventory (`summarizeDaytonaCapacity`).
#[napi(object, use_nullable = true)]
pub struct DaytonaSummaryRecord {
    /// Totals per state, by state name.
    pub by_state: BTreeMap<String, DaytonaSumRecord>,
    /// What the lenient reading did.
    pub data_quality: DaytonaDataQualityRecord,
    /// `now`, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub generated_at: String,
    /// The idle sandboxes.
    pub idle: DaytonaIdleRecord,
    /// The worst configured level, or null.
    pub level: Option<String>,
    /// The organization's totals.
    pub organization: DaytonaOrganizationRecord,
    /// `daytona`.
    pub provider: String,
    /// `not_covered`: admission does not use this summary.
    pub provisioning_check: String,
    /// The thresholds used.
    pub thresholds: DaytonaThresholdsRecord,
    /// Utilization per dimension.
    pub utilization: DaytonaUtilizationsRecord,
}

impl From<Summary> for DaytonaSummaryRecord {
    fn from(s: Summary) -> Self {
        let [cpu, memory, disk] = s.utilization;
        DaytonaSummaryRecord {
            by_state: s.by_state.into_iter().map(|(k, v)| (k, v.into())).collect(),
            data_quality: DaytonaDataQualityRecord {
                coerced_values: s.coerced_values as f64,
                skipped_items: s.skipped_items as f64,
            },
            generated_at: s.generated_at,
            idle: s.idle.into(),
            level: s.level.map(|l| l.name().to_string()),
            organization: s.organization.into(),
            provider: PROVIDER.to_string(),
            provisioning_check: PROVISIONING_CHECK.to_string(),
            thresholds: DaytonaThresholdsRecord { critical_ratio: s.critical_ratio, warning_ratio: s.warning_ratio },
            utilization: DaytonaUtilizationsRecord { cpu: cpu.into(), disk: disk.into(), memory: memory.into() },
        }
    }
}

/// Display summary of a Daytona inventory (array of sandboxes or a list page with `items`),
/// against optional limits in the `parseDaytonaCapacityLimits` input form (`null` for
/// none), with options `{ warningRatio? (0.8), criticalRatio? (0.95), now?, idleAfterMs?
/// (1800000), idleListLimit? (100) }` (`now` defaults to the wall clock), each given as
/// JSON text. Throws the typed `INVALID_INPUT` error for invalid items, limits or options.
/// Not used for admission (`provisioningCheck: "not_covered"`).
#[napi]
pub fn summarize_daytona_capacity(
    env: Env,
    items_json: Option<String>,
    limits_json: Option<String>,
    options_json: Option<String>,
) -> napi::Result<DaytonaSummaryRecord> {
    guard(&env, || summary_of(items_json.as_deref(), limits_json.as_deref(), options_json.as_deref()))
}

fn summary_of(
    items_json: Option<&str>,
    limits_json: Option<&str>,
    options_json: Option<&str>,
) -> Result<DaytonaSummaryRecord, Failure> {
    let items_value = input(items_json, "items")?;
    let items = inventory_items(&items_value).map_err(invalid)?;
    let limits_value = input(limits_json, "limits")?;
    let limits = match limits_value {
        Value::Null => None,
        ref v => Some(parse_limits(v).map_err(invalid)?),
    };
    let options_value = Some(input(options_json, "options")?).filter(|v| !v.is_null());
    let options = parse_summary_options(options_value.as_ref(), now_millis() as f64).map_err(invalid)?;
    Ok(summarize(items, limits.as_ref(), &options).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn must_fire_invalid_limits_name_their_field_in_a_typed_error() {
        let err = limits_of(Some(r#"{"cpu": "10"}"#)).err().unwrap();
        assert_eq!((err.code.as_str(), err.field.as_deref()), ("INVALID_INPUT", Some("limits.cpu")));
        let err = summary_of(Some("[]"), Some("null"), Some("{not json")).err().unwrap();
        assert_eq!(err.field.as_deref(), Some("options"));
        let err = summary_of(None, Some("null"), Some("null")).err().unwrap();
        assert_eq!(err.message, "invalid input: items is not JSON-serializable");
        assert_eq!(limits_of(None).err().unwrap().field.as_deref(), Some("limits"));
    }

    #[test]
    fn must_not_fire_a_valid_summary_answers_its_constants_and_clock() {
        let s = summary_of(Some("[]"), Some("null"), Some(r#"{"now": 0}"#)).unwrap();
        assert_eq!(s.generated_at, "1970-01-01T00:00:00.000Z");
        assert_eq!((s.provider.as_str(), s.provisioning_check.as_str()), ("daytona", "not_covered"));
        assert_eq!((s.level, s.utilization.cpu.limit_source.as_str()), (None, "not_configured"));
        let l = limits_of(Some(r#"{"disk": 0.5}"#)).unwrap();
        assert_eq!((l.cpu, l.disk_mib, l.memory_mib, l.provided), (None, Some(512.0), None, vec!["disk".to_string()]));
    }
}
