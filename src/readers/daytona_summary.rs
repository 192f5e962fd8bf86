//! Daytona capacity *display* helpers: a strict limits parser and an inventory summary.
//!
//! Ported in spirit from the cloud dashboard's Daytona capacity helper. Two pure functions:
//!
//! **`parse_daytona_capacity_limits(value)`** — strict. Input `{ cpu?, memory?, disk? }`
//! (cpu in vCPU, memory/disk in **GiB**, as Daytona's API and pricing pages state them).
//! Every given value must be a finite number > 0 (strings, `null`, booleans, zero and
//! negatives are refused), unknown keys are refused (with a did-you-mean), and at least one
//! limit must be present. Errors name the field (`limits.memory`), never the value. Output:
//! ```json
//! { "cpu": 10, "memoryMiB": 10240, "diskMiB": null, "provided": ["cpu", "memory"] }
//! ```
//! (absent limits are `null`; `provided` lists the given dimensions in cpu/memory/disk order).
//!
//! **`summarize_daytona_capacity(items, limits, options)`** — lenient, for display. `items`
//! is the inventory: an array of Daytona sandboxes, or any list-page object carrying `items`.
//! `limits` is the parser's input form (or none). Options (all optional, unknown keys refused):
//! `warningRatio` (default 0.8), `criticalRatio` (default 0.95; must be ≥ `warningRatio`),
//! `now` (RFC 3339 string or epoch milliseconds; default: the current time),
//! `idleAfterMs` (default 1,800,000 = 30 min), `idleListLimit` (default 100). Output:
//! ```json
//! {
//!   "provider": "daytona",
//!   "generatedAt": "2026-11-30T06:00:00.000Z",
//!   "organization": { "sandboxes": 3, "cpu": 7, "memoryMiB": 13312, "diskMiB": 33792,
//!                     "accounted": { "cpu": 1, "memoryMiB": 1024, "diskMiB": 13312 } },
//!   "byState": { "started": { "sandboxes": 1, "cpu": 1, "memoryMiB": 1024, "diskMiB": 3072 }, … },
//!   "utilization": {
//!     "cpu":    { "used": 7, "limit": 10, "unit": "vCPU", "headroom": 3, "ratio": 0.7,
//!                 "percent": 70, "level": "ok", "limitSource": "configured" },
//!     "memory": { "used": 13312, "limit": null, "unit": "MiB", "headroom": null, "ratio": null,
//!                 "percent": null, "level": null, "limitSource": "not_configured" },
//!     "disk":   { … }
//!   },
//!   "level": "ok",
//!   "thresholds": { "warningRatio": 0.8, "criticalRatio": 0.95 },
//!   "idle": { "idleAfterMs": 1800000, "sandboxes": 1, "cpu": 1, "memoryMiB": 1024, "diskMiB": 3072,
//!             "unknownActivity": 0, "truncated": false,
//!             "items": [ { "id": "…", "name": "…", "state": "started",
//!                          "lastActivityAt": "…", "idleMs": 5400000,
//!                          "cpu": 1, "memoryMiB": 1024, "diskMiB": 3072 } ] },
//!   "dataQuality": { "coercedValues": 0, "skippedItems": 0 },
//!   "provisioningCheck": "not_covered"
//! }
//! ```
//!
//! Semantics:
//! - `organization` sums every listed sandbox across all states — the same conservative sum
//!   the admission reader uses (it may overestimate: stopped sandboxes' cpu/memory count).
//!   `organization.accounted` applies Daytona's own accounting for comparison (cpu/memory in
//!   `creating restoring started starting stopping pending_build building_snapshot unknown
//!   pulling_snapshot forking pausing resuming`; disk also in `stopped paused archiving
//!   resizing snapshotting`).
//! - `utilization.<dim>.used` is the all-state sum; `ratio = used / limit`; `level` is
//!   `critical` when `ratio ≥ criticalRatio`, `warning` when `ratio ≥ warningRatio`, else `ok`.
//!   A dimension without a limit has `limitSource: "not_configured"` and null limit/ratio/level
//!   (never a guessed tier). Top-level `level` is the worst configured level, or null.
//! - `idle` is per-sandbox ("workspace") detail: `started` sandboxes whose `lastActivityAt`
//!   (falling back to `updatedAt`, then `createdAt`) is at least `idleAfterMs` before `now`,
//!   most idle first, at most `idleListLimit` listed (`truncated` says if more exist); totals
//!   cover all of them. `unknownActivity` counts started sandboxes with no parseable timestamp.
//! - `provisioningCheck: "not_covered"`: this summary is for dashboards. Admission uses the
//!   strict measurement (`readers::daytona`), which refuses what this helper coerces.
//!
//! Why lenient here? A dashboard should still render an inventory with one odd row. So
//! numeric fields are coerced: a numeric string is parsed, and a missing, null, negative,
//! non-finite or non-numeric value counts as 0; each coercion is counted in
//! `dataQuality.coercedValues`, and non-object items are skipped (`skippedItems`). A state
//! that is not a string is reported as `unknown`.

use crate::core::clock::{iso8601_millis, parse_rfc3339_ms};
use crate::core::json::{object, FieldError};
use serde_json::Value;
use std::collections::BTreeMap;

const MIB_PER_GIB: f64 = 1024.0;
/// Default `warningRatio`.
pub const DEFAULT_WARNING_RATIO: f64 = 0.8;
/// Default `criticalRatio`.
pub const DEFAULT_CRITICAL_RATIO: f64 = 0.95;
/// Default `idleAfterMs` (30 minutes).
pub const DEFAULT_IDLE_AFTER_MS: f64 = 30.0 * 60.0 * 1000.0;
/// Default `idleListLimit`.
pub const DEFAULT_IDLE_LIST_LIMIT: usize = 100;

const COMPUTE_STATES: &[&str] = &[
    "creating",
    "restoring",
    "started",
    "starting",
    "stopping",
    "pending_build",
    "building_snapshot",
    "unknown",
    "pulling_snapshot",
    "forking",
    "pausing",
    "resuming",
];
const DISK_ONLY_STATES: &[&str] = &["stopped", "paused", "archiving", "resizing", "snapshotting"];

/// Validated Daytona limits in measured units.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DaytonaCapacityLimits {
    /// vCPU.
    pub cpu: Option<f64>,
    /// MiB (input GiB × 1024).
    pub memory_mib: Option<f64>,
    /// MiB (input GiB × 1024).
    pub disk_mib: Option<f64>,
}

impl DaytonaCapacityLimits {
    /// The dimensions given, in cpu/memory/disk order.
    pub fn provided(&self) -> Vec<&'static str> {
        [("cpu", self.cpu), ("memory", self.memory_mib), ("disk", self.disk_mib)]
            .into_iter()
            .filter_map(|(n, v)| v.map(|_| n))
            .collect()
    }
}

/// Strictly parses `{ cpu?, memory?, disk? }` (memory/disk in GiB). See the module docs.
pub fn parse_daytona_capacity_limits(value: &Value) -> Result<DaytonaCapacityLimits, FieldError> {
    let o = object(value, "limits", &["cpu", "memory", "disk"])?;
    let positive = |key: &str| -> Result<Option<f64>, FieldError> {
        match o.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) if n.as_f64().is_some_and(|x| x.is_finite() && x > 0.0) => Ok(n.as_f64()),
            Some(_) => Err(FieldError::new(
                o.field(key),
                if key == "cpu" { "must be a finite number > 0 (vCPU)" } else { "must be a finite number > 0 (GiB)" },
            )),
        }
    };
    let limits = DaytonaCapacityLimits {
        cpu: positive("cpu")?,
        memory_mib: positive("memory")?.map(|g| g * MIB_PER_GIB),
        disk_mib: positive("disk")?.map(|g| g * MIB_PER_GIB),
    };
    if limits.provided().is_empty() {
        return Err(FieldError::new("limits", "must set at least one of cpu, memory, disk"));
    }
    Ok(limits)
}

/// Options of [`summarize_daytona_capacity`] (see the module docs for defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SummaryOptions {
    /// Ratio at which a dimension becomes `warning`.
    pub warning_ratio: f64,
    /// Ratio at which a dimension becomes `critical`.
    pub critical_ratio: f64,
    /// The summary's clock, epoch milliseconds.
    pub now_ms: f64,
    /// Minimum inactivity for a started sandbox to be idle.
    pub idle_after_ms: f64,
    /// Most idle sandboxes listed individually.
    pub idle_list_limit: usize,
}

impl SummaryOptions {
    /// Defaults with the given clock.
    pub fn defaults(now_ms: f64) -> Self {
        SummaryOptions {
            warning_ratio: DEFAULT_WARNING_RATIO,
            critical_ratio: DEFAULT_CRITICAL_RATIO,
            now_ms,
            idle_after_ms: DEFAULT_IDLE_AFTER_MS,
            idle_list_limit: DEFAULT_IDLE_LIST_LIMIT,
        }
    }
}

/// Strictly parses summary options (`null`/absent → defaults); `default_now_ms` is used when
/// `now` is not given.
pub fn parse_summary_options(value: Option<&Value>, default_now_ms: f64) -> Result<SummaryOptions, FieldError> {
    let mut out = SummaryOptions::defaults(default_now_ms);
    let Some(value) = value.filter(|v| !v.is_null()) else { return Ok(out) };
    let o = object(value, "options", &["warningRatio", "criticalRatio", "now", "idleAfterMs", "idleListLimit"])?;
    let ratio = |key: &str| -> Result<Option<f64>, FieldError> {
        match o.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) if n.as_f64().is_some_and(|x| x.is_finite() && x > 0.0) => Ok(n.as_f64()),
            Some(_) => Err(FieldError::new(o.field(key), "must be a finite number > 0")),
        }
    };
    if let Some(w) = ratio("warningRatio")? {
        out.warning_ratio = w;
    }
    if let Some(c) = ratio("criticalRatio")? {
        out.critical_ratio = c;
    }
    if out.warning_ratio > out.critical_ratio {
        return Err(FieldError::new(o.field("warningRatio"), "must not exceed criticalRatio"));
    }
    match o.get("now") {
        None => {}
        Some(Value::String(s)) => {
            out.now_ms = parse_rfc3339_ms(s)
                .ok_or_else(|| FieldError::new(o.field("now"), "must be an RFC 3339 timestamp or epoch milliseconds"))?
        }
        Some(Value::Number(n)) if n.as_f64().is_some_and(|x| x.is_finite() && x >= 0.0) => {
            out.now_ms = n.as_f64().unwrap_or(0.0)
        }
        Some(_) => return Err(FieldError::new(o.field("now"), "must be an RFC 3339 timestamp or epoch milliseconds")),
    }
    if let Some(ms) = o.non_negative("idleAfterMs")? {
        out.idle_after_ms = ms;
    }
    if let Some(n) = o.integer_in("idleListLimit", 0, 100_000)? {
        out.idle_list_limit = n as usize;
    }
    Ok(out)
}

/// The inventory items: a bare array, or a list-page object with an `items` array.
pub fn inventory_items(value: &Value) -> Result<&[Value], FieldError> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Object(map) => match map.get("items") {
            Some(Value::Array(items)) => Ok(items),
            _ => Err(FieldError::new("items.items", "must be an array of sandboxes")),
        },
        _ => Err(FieldError::new("items", "must be an array of sandboxes or a list page with items")),
    }
}

/// What the summary names its provider.
pub const PROVIDER: &str = "daytona";
/// What the summary says of admission: not covered (admission uses the strict reader).
pub const PROVISIONING_CHECK: &str = "not_covered";

/// Totals of a group of sandboxes (memory and disk in MiB).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Sum {
    /// How many.
    pub sandboxes: u64,
    /// vCPU.
    pub cpu: f64,
    /// MiB.
    pub memory_mib: f64,
    /// MiB.
    pub disk_mib: f64,
}

impl Sum {
    fn add(&mut self, cpu: f64, mem: f64, disk: f64) {
        self.sandboxes += 1;
        self.cpu += cpu;
        self.memory_mib += mem;
        self.disk_mib += disk;
    }
}

/// The organization: every listed sandbox, and Daytona's own accounting for comparison
/// (its `sandboxes` is not counted: Daytona accounts dimensions, not sandboxes).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Organization {
    /// Every listed sandbox across all states.
    pub total: Sum,
    /// cpu and memory in Daytona's compute states, disk also in its disk-only states.
    pub accounted: Sum,
}

/// How close one dimension is to its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Below `warningRatio`.
    Ok,
    /// At least `warningRatio`.
    Warning,
    /// At least `criticalRatio`.
    Critical,
}

impl Level {
    /// `ok`, `warning` or `critical`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warning => "warning",
            Level::Critical => "critical",
        }
    }
}

/// One dimension's utilization (the limit's figures are `None` without a configured limit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Utilization {
    /// The all-state sum.
    pub used: f64,
    /// The configured limit.
    pub limit: Option<f64>,
    /// `vCPU` or `MiB`.
    pub unit: &'static str,
    /// `limit - used`.
    pub headroom: Option<f64>,
    /// `used / limit`.
    pub ratio: Option<f64>,
    /// The ratio in percent, one decimal.
    pub percent: Option<f64>,
    /// The ratio's level.
    pub level: Option<Level>,
}

impl Utilization {
    /// `configured` or `not_configured`.
    pub fn limit_source(&self) -> &'static str {
        if self.limit.is_some() {
            "configured"
        } else {
            "not_configured"
        }
    }
}

/// One idle sandbox, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleItem {
    /// Its `id`, when a string.
    pub id: Option<String>,
    /// Its `name`, when a string.
    pub name: Option<String>,
    /// Its state (`started`).
    pub state: String,
    /// The timestamp its idleness is measured from, as given.
    pub last_activity_at: String,
    /// `now` minus that timestamp.
    pub idle_ms: f64,
    /// vCPU.
    pub cpu: f64,
    /// MiB.
    pub memory_mib: f64,
    /// MiB.
    pub disk_mib: f64,
}

/// The idle sandboxes: totals over all of them, the most idle listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Idle {
    /// The idleness threshold.
    pub idle_after_ms: f64,
    /// Totals over every idle sandbox.
    pub total: Sum,
    /// Started sandboxes without a parseable timestamp.
    pub unknown_activity: u64,
    /// Whether more were idle than are listed.
    pub truncated: bool,
    /// The most idle first, at most `idleListLimit`.
    pub items: Vec<IdleItem>,
}

/// The display summary of an inventory (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// `now`, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub generated_at: String,
    /// The organization's totals.
    pub organization: Organization,
    /// Totals per state, by state name.
    pub by_state: BTreeMap<String, Sum>,
    /// cpu, memory, disk.
    pub utilization: [Utilization; 3],
    /// The worst configured level.
    pub level: Option<Level>,
    /// The thresholds used.
    pub warning_ratio: f64,
    /// (likewise)
    pub critical_ratio: f64,
    /// The idle sandboxes.
    pub idle: Idle,
    /// Numeric fields coerced leniently.
    pub coerced_values: u64,
    /// Items that are not objects.
    pub skipped_items: u64,
}

fn coerce(v: Option<&Value>, coerced: &mut u64) -> f64 {
    let clean = |x: f64| x.is_finite() && x >= 0.0;
    match v {
        Some(Value::Number(n)) if n.as_f64().is_some_and(clean) => n.as_f64().unwrap_or(0.0),
        Some(Value::String(s)) => {
            *coerced += 1;
            s.trim().parse::<f64>().ok().filter(|x| clean(*x)).unwrap_or(0.0)
        }
        _ => {
            *coerced += 1;
            0.0
        }
    }
}

fn level(ratio: f64, o: &SummaryOptions) -> Level {
    if ratio >= o.critical_ratio {
        Level::Critical
    } else if ratio >= o.warning_ratio {
        Level::Warning
    } else {
        Level::Ok
    }
}

fn utilization(used: f64, limit: Option<f64>, unit: &'static str, o: &SummaryOptions) -> Utilization {
    let ratio = limit.map(|l| used / l);
    Utilization {
        used,
        limit,
        unit,
        headroom: limit.map(|l| l - used),
        ratio,
        percent: ratio.map(|r| (r * 1000.0).round() / 10.0),
        level: ratio.map(|r| level(r, o)),
    }
}

/// Summarizes an inventory for display (see the module docs for the shape). Pure: the clock
/// comes from `options.now_ms`.
pub fn summarize_daytona_capacity(
    items: &[Value],
    limits: Option<&DaytonaCapacityLimits>,
    options: &SummaryOptions,
) -> Summary {
    let mut coerced = 0u64;
    let mut skipped = 0u64;
    let mut org = Organization::default();
    let mut by_state: BTreeMap<String, Sum> = BTreeMap::new();
    let mut idle: Vec<IdleItem> = Vec::new();
    let mut unknown_activity = 0u64;
    for item in items {
        let Value::Object(m) = item else {
            skipped += 1;
            continue;
        };
        let cpu = coerce(m.get("cpu"), &mut coerced);
        let mem = coerce(m.get("memory"), &mut coerced) * MIB_PER_GIB;
        let disk = coerce(m.get("disk"), &mut coerced) * MIB_PER_GIB;
        let state = m.get("state").and_then(Value::as_str).unwrap_or("unknown");
        org.total.add(cpu, mem, disk);
        by_state.entry(state.to_string()).or_default().add(cpu, mem, disk);
        let compute = COMPUTE_STATES.contains(&state);
        if compute || DISK_ONLY_STATES.contains(&state) {
            org.accounted.disk_mib += disk;
        }
        if compute {
            org.accounted.cpu += cpu;
            org.accounted.memory_mib += mem;
        }
        if state == "started" {
            let stamp = ["lastActivityAt", "updatedAt", "createdAt"]
                .iter()
                .filter_map(|k| m.get(*k).and_then(Value::as_str))
                .find_map(|s| parse_rfc3339_ms(s).map(|ms| (s, ms)));
            match stamp {
                None => unknown_activity += 1,
                Some((activity, ms)) => {
                    let idle_ms = (options.now_ms - ms).max(0.0);
                    if idle_ms >= options.idle_after_ms {
                        idle.push(IdleItem {
                            id: m.get("id").and_then(Value::as_str).map(str::to_string),
                            name: m.get("name").and_then(Value::as_str).map(str::to_string),
                            state: state.to_string(),
                            last_activity_at: activity.to_string(),
                            idle_ms,
                            cpu,
                            memory_mib: mem,
                            disk_mib: disk,
                        });
                    }
                }
            }
        }
    }

    let l = limits.copied().unwrap_or_default();
    let utilization = [
        utilization(org.total.cpu, l.cpu, "vCPU", options),
        utilization(org.total.memory_mib, l.memory_mib, "MiB", options),
        utilization(org.total.disk_mib, l.disk_mib, "MiB", options),
    ];
    let level = utilization.iter().filter_map(|u| u.level).max();

    // Stable: of two equally idle sandboxes, the one listed first stays first.
    idle.sort_by(|a, b| b.idle_ms.total_cmp(&a.idle_ms));
    let mut idle_total = Sum::default();
    for i in &idle {
        idle_total.add(i.cpu, i.memory_mib, i.disk_mib);
    }
    let truncated = idle.len() > options.idle_list_limit;
    idle.truncate(options.idle_list_limit);

    Summary {
        generated_at: iso8601_millis(options.now_ms.floor() as i64),
        organization: org,
        by_state,
        utilization,
        level,
        warning_ratio: options.warning_ratio,
        critical_ratio: options.critical_ratio,
        idle: Idle {
            idle_after_ms: options.idle_after_ms,
            total: idle_total,
            unknown_activity,
            truncated,
            items: idle,
        },
        coerced_values: coerced,
        skipped_items: skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: &str = "2026-11-30T12:00:00Z";

    fn opts() -> SummaryOptions {
        parse_summary_options(Some(&json!({"now": NOW})), 0.0).unwrap()
    }

    #[test]
    fn limits_parser_converts_gib_to_mib_and_lists_what_was_provided() {
        let l = parse_daytona_capacity_limits(&json!({"cpu": 10, "memory": 10, "disk": 30})).unwrap();
        assert_eq!(l, DaytonaCapacityLimits { cpu: Some(10.0), memory_mib: Some(10_240.0), disk_mib: Some(30_720.0) });
        assert_eq!(l.provided(), vec!["cpu", "memory", "disk"]);
        let l = parse_daytona_capacity_limits(&json!({"memory": 0.5})).unwrap();
        assert_eq!(l, DaytonaCapacityLimits { cpu: None, memory_mib: Some(512.0), disk_mib: None });
        assert_eq!(l.provided(), vec!["memory"]);
    }

    #[test]
    fn limits_parser_refuses_strings_negatives_zero_unknown_keys_and_empty() {
        for (bad, field) in [
            (json!({"cpu": "10"}), "limits.cpu"),
            (json!({"cpu": -1}), "limits.cpu"),
            (json!({"cpu": 0}), "limits.cpu"),
            (json!({"memory": null}), "limits.memory"),
            (json!({"disk": true}), "limits.disk"),
            (json!({"cpus": 4}), "limits.cpus"),
            (json!({"cpu": 4, "sandboxes": 1}), "limits.sandboxes"),
            (json!({}), "limits"),
            (json!([]), "limits"),
            (json!(10), "limits"),
        ] {
            let err = parse_daytona_capacity_limits(&bad).unwrap_err();
            assert_eq!(err.field, field, "{bad}");
        }
        let err = parse_daytona_capacity_limits(&json!({"cpus": 4})).unwrap_err();
        assert!(err.expectation.contains("did you mean cpu"), "{}", err.expectation);
    }

    #[test]
    fn options_are_strict_and_default_sensibly() {
        let o = parse_summary_options(None, 5.0).unwrap();
        assert_eq!(o, SummaryOptions::defaults(5.0));
        assert_eq!(parse_summary_options(Some(&Value::Null), 5.0).unwrap(), SummaryOptions::defaults(5.0));
        let o = parse_summary_options(Some(&json!({"warningRatio": 0.5, "criticalRatio": 0.9, "now": 1000, "idleAfterMs": 60000, "idleListLimit": 3})), 0.0).unwrap();
        assert_eq!(
            (o.warning_ratio, o.critical_ratio, o.now_ms, o.idle_after_ms, o.idle_list_limit),
            (0.5, 0.9, 1000.0, 60000.0, 3)
        );
        for (bad, field) in [
            (json!({"warningRatio": 0.99}), "options.warningRatio"),
            (json!({"warningRatio": "0.5"}), "options.warningRatio"),
            (json!({"criticalRatio": -1}), "options.criticalRatio"),
            (json!({"now": "yesterday"}), "options.now"),
            (json!({"now": -5}), "options.now"),
            (json!({"idleAfterMs": -1}), "options.idleAfterMs"),
            (json!({"warnRatio": 0.5}), "options.warnRatio"),
        ] {
            assert_eq!(parse_summary_options(Some(&bad), 0.0).unwrap_err().field, field, "{bad}");
        }
    }

    fn sb(id: &str, state: &str, cpu: Value, mem: Value, disk: Value, activity: &str) -> Value {
        json!({"id": id, "name": format!("n-{id}"), "state": state, "cpu": cpu, "memory": mem, "disk": disk,
               "lastActivityAt": activity, "createdAt": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn totals_states_and_accounting() {
        let items = vec![
            sb("a", "started", json!(1), json!(1), json!(3), "2026-11-30T11:59:00Z"),
            sb("b", "stopped", json!(2), json!(4), json!(10), "2026-11-30T10:00:00Z"),
            sb("c", "archived", json!(4), json!(8), json!(20), "2026-11-30T10:00:00Z"),
        ];
        let s = summarize_daytona_capacity(&items, None, &opts());
        let o = s.organization;
        assert_eq!(o.total, Sum { sandboxes: 3, cpu: 7.0, memory_mib: 13.0 * 1024.0, disk_mib: 33.0 * 1024.0 });
        assert_eq!((o.accounted.cpu, o.accounted.memory_mib, o.accounted.disk_mib), (1.0, 1024.0, 13.0 * 1024.0));
        assert_eq!(s.by_state["stopped"], Sum { sandboxes: 1, cpu: 2.0, memory_mib: 4096.0, disk_mib: 10240.0 });
        assert_eq!(s.generated_at, "2026-11-30T12:00:00.000Z");
        // No limits: every dimension is not_configured, no level, never a guessed tier.
        for u in &s.utilization {
            assert_eq!(u.limit_source(), "not_configured");
            assert_eq!((u.limit, u.level, u.ratio, u.headroom, u.percent), (None, None, None, None, None));
        }
        assert_eq!(s.level, None);
    }

    #[test]
    fn thresholds_and_provenance() {
        let items: Vec<Value> =
            (0..8).map(|i| sb(&i.to_string(), "started", json!(1), json!(1), json!(1), NOW)).collect();
        let limits = parse_daytona_capacity_limits(&json!({"cpu": 10, "memory": 8.2})).unwrap();
        let s = summarize_daytona_capacity(&items, Some(&limits), &opts());
        // cpu 8/10 = 0.8 → warning at the boundary; memory 8/8.2 ≈ 0.976 → critical; disk not configured.
        let [cpu, memory, disk] = s.utilization;
        assert_eq!(cpu.level, Some(Level::Warning));
        assert_eq!((cpu.percent, cpu.headroom), (Some(80.0), Some(2.0)));
        assert_eq!(memory.level, Some(Level::Critical));
        assert_eq!(memory.limit_source(), "configured");
        assert_eq!(disk.limit_source(), "not_configured");
        assert_eq!(s.level, Some(Level::Critical));
        let o =
            parse_summary_options(Some(&json!({"now": NOW, "warningRatio": 0.9, "criticalRatio": 0.99})), 0.0).unwrap();
        let s = summarize_daytona_capacity(&items, Some(&limits), &o);
        assert_eq!(s.utilization[0].level, Some(Level::Ok));
        assert_eq!(s.utilization[1].level, Some(Level::Warning));
        assert_eq!(s.level, Some(Level::Warning));
    }

    #[test]
    fn lenient_coercion_is_counted() {
        let items = vec![
            sb("a", "started", json!("2"), json!(null), json!(-3), NOW),
            json!("not an object"),
            json!({"cpu": 1, "memory": 1, "disk": 1, "state": 7}),
        ];
        let s = summarize_daytona_capacity(&items, None, &opts());
        assert_eq!((s.organization.total.cpu, s.organization.total.memory_mib), (3.0, 1024.0));
        assert_eq!((s.coerced_values, s.skipped_items), (3, 1));
        assert_eq!(s.by_state["unknown"].sandboxes, 1);
    }

    #[test]
    fn idle_sandboxes_are_listed_most_idle_first_and_truncated() {
        let items = vec![
            sb("fresh", "started", json!(1), json!(1), json!(1), "2026-11-30T11:50:00Z"),
            sb("old", "started", json!(2), json!(2), json!(2), "2026-11-30T08:00:00Z"),
            sb("older", "started", json!(4), json!(4), json!(4), "2026-11-29T12:00:00Z"),
            sb("stopped", "stopped", json!(8), json!(8), json!(8), "2026-01-01T00:00:00Z"),
            json!({"id": "nostamp", "state": "started", "cpu": 1, "memory": 1, "disk": 1}),
        ];
        let o = parse_summary_options(Some(&json!({"now": NOW, "idleListLimit": 1})), 0.0).unwrap();
        let s = summarize_daytona_capacity(&items, None, &o);
        let idle = &s.idle;
        assert_eq!((idle.total.sandboxes, idle.total.cpu), (2, 6.0));
        assert_eq!(idle.unknown_activity, 1);
        assert!(idle.truncated);
        assert_eq!(idle.items.len(), 1);
        assert_eq!(idle.items[0].id.as_deref(), Some("older"));
        assert_eq!((idle.items[0].idle_ms, idle.items[0].memory_mib), (86_400_000.0, 4096.0));
    }

    #[test]
    fn inventory_accepts_arrays_and_list_pages() {
        assert_eq!(inventory_items(&json!([1])).unwrap().len(), 1);
        assert_eq!(inventory_items(&json!({"items": [1, 2], "nextCursor": null})).unwrap().len(), 2);
        assert_eq!(inventory_items(&json!({"items": 3})).unwrap_err().field, "items.items");
        assert_eq!(inventory_items(&json!("x")).unwrap_err().field, "items");
    }

    #[test]
    fn limits_errors_name_the_unit_of_their_dimension() {
        let e = |v: Value| parse_daytona_capacity_limits(&v).unwrap_err().expectation;
        assert!(e(json!({"cpu": 0})).contains("(vCPU)"));
        assert!(e(json!({"memory": 0})).contains("(GiB)"));
        assert!(e(json!({"disk": -1})).contains("(GiB)"));
    }

    #[test]
    fn must_fire_a_zero_ratio_is_refused() {
        for (bad, field) in [
            (json!({"warningRatio": 0}), "options.warningRatio"),
            (json!({"criticalRatio": 0}), "options.criticalRatio"),
        ] {
            assert_eq!(parse_summary_options(Some(&bad), 0.0).unwrap_err().field, field, "{bad}");
        }
    }

    #[test]
    fn must_not_fire_equal_warning_and_critical_ratios_are_accepted() {
        let o = parse_summary_options(Some(&json!({"warningRatio": 0.9, "criticalRatio": 0.9})), 0.0).unwrap();
        assert_eq!((o.warning_ratio, o.critical_ratio), (0.9, 0.9));
    }

    #[test]
    fn idle_list_is_not_truncated_when_every_idle_sandbox_is_listed() {
        let items = vec![
            sb("a", "started", json!(1), json!(1), json!(1), "2026-11-30T08:00:00Z"),
            sb("b", "started", json!(1), json!(1), json!(1), "2026-11-30T09:00:00Z"),
        ];
        let o = parse_summary_options(Some(&json!({"now": NOW, "idleListLimit": 2})), 0.0).unwrap();
        let s = summarize_daytona_capacity(&items, None, &o);
        assert_eq!((s.idle.total.sandboxes, s.idle.items.len(), s.idle.truncated), (2, 2, false));
    }
}
