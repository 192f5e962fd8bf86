//! Budgets and quotas per tenant: the rules, their windows, and the ledger that reserves
//! before a launch and settles after it.
//!
//! Why reserve, and not record spend after the call? A runaway agent loop starts hundreds
//! of sandboxes at once. A router that adds a launch's cost to the tenant's spend only
//! once the launch returned lets every concurrent request see the same remaining budget,
//! and overspends by the concurrency (LiteLLM's budgets do exactly this). So admission
//! *reserves* the chosen pool's cost, one launch and one concurrent slot against every
//! rule that matches the request, synchronously, before the launch, in the acquisition
//! machine (the same place as the capacity hold, [`crate::core::acquisition`]); nothing
//! can interleave between the check and the reservation. The reservation is settled by the
//! launch's outcome, by the capacity hold's rule:
//! - a failure proven to have allocated nothing (a classified retryable failure, a missing
//!   package, a skip before the launch) releases all of it;
//! - a success moves the cost and the launch from *reserved* to *used* and keeps the
//!   concurrent slot until the sandbox is destroyed (`router.destroy`, or `reconcile`'s
//!   reclaim of that id);
//! - an outcome-unknown failure (no classification, a deadline, a malformed handle) is
//!   charged like a success (the sandbox may exist and cost money), and its concurrent
//!   slot is held until the launch's settle window has passed
//!   ([`crate::core::acquisition::settle_window_ms`]) or reconcile reclaims it, so that a
//!   flaky provider's timeouts cannot lock a tenant out for good.
//!
//! `router.settleCost(id, actual)` replaces a charge's estimate by the actual cost
//! (OpenRouter's settlement), in whichever window the charge was made.
//!
//! Why two kinds of window? A calendar window (`{ every: 'day', timeZone }`) resets at
//! midnight in the tenant's zone, as invoices and LiteLLM's budgets do; it is computed with
//! jiff's bundled tz database, so a day across a DST change is 23 or 25 hours long, and a
//! week starts on Monday. A sliding window (`{ slidingMs }`) counts what was charged in the
//! last N ms, so there is no burst at a reset. A `concurrent` limit has no window: it counts
//! slots held now.
//!
//! Why is a refusal `retryable` only sometimes? A caller must tell "wait for the launches in
//! flight to settle" (OpenRouter's `in_flight_budget_exhausted`) from "this does not fit
//! however long you wait, until the window resets" (`weight_exceeds_budget`). A refusal is
//! retryable exactly when the request would fit if every in-flight reservation were given
//! back; `resetsAt` says when the window frees what is used.
//!
//! The core reads no clock: every call takes `now` (the router's clock, ms since the
//! epoch). The shared ledger (`PostgresMappingStore` as `capacity.coordinator`) rebuilds
//! each key's [`Usage`] from rows inside one transaction and decides with the same
//! [`check`]; the in-process [`Ledger`] keeps it in memory.

use crate::core::error::CoreError;
use crate::core::ids::SandboxKey;
use crate::core::json::{object, shown, FieldError};
use crate::core::request::RESERVED_LABELS;
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp};
use serde_json::Value;
use smallvec::SmallVec;

mod ledger;
pub mod money;

pub use ledger::{
    Buckets, Ledger, StatusQuery, DEFAULT_SETTLE_HORIZON_MS, DEFAULT_STATUS_LIMIT, MAX_SETTLE_HORIZON_MS,
    MAX_STATUS_LIMIT,
};
pub use money::{Micros, MAX_COST};

/// Reason code of a pool skipped because its cost does not fit a budget (explanations and
/// the rejections of errors).
pub const BUDGET_EXCEEDED: &str = "BUDGET_EXCEEDED";
/// Code of a provision refused because no candidate fitted the budgets.
pub const BUDGET_EXHAUSTED: &str = "BUDGET_EXHAUSTED";
/// Code of a provision refused because its request lacks the label a rule is keyed by.
pub const BUDGET_KEY_MISSING: &str = "BUDGET_KEY_MISSING";
/// Code of a provision refused because the shared budget ledger could not be asked.
pub const BUDGET_STORE_UNAVAILABLE: &str = "BUDGET_STORE_UNAVAILABLE";
/// Most rules a router takes.
pub const MAX_RULES: usize = 64;
/// Longest sliding window, ms (a year).
pub const MAX_SLIDING_MS: i64 = 366 * 86_400_000;

/// The period of a calendar window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    /// Each minute of the zone's clock.
    Minute,
    /// Each hour of the zone's clock.
    Hour,
    /// From midnight to midnight in the zone (23 or 25 hours across a DST change).
    Day,
    /// From Monday 00:00 to the next Monday 00:00 in the zone.
    Week,
    /// From the 1st 00:00 to the next 1st 00:00 in the zone.
    Month,
}

impl Every {
    const NAMES: [&'static str; 5] = ["minute", "hour", "day", "week", "month"];

    fn of(name: &str) -> Option<Every> {
        Some(match name {
            "minute" => Every::Minute,
            "hour" => Every::Hour,
            "day" => Every::Day,
            "week" => Every::Week,
            "month" => Every::Month,
            _ => return None,
        })
    }
}

/// What a rule's `cost` and `launches` are counted over.
#[derive(Debug, Clone)]
pub enum Window {
    /// Calendar-aligned in an IANA zone.
    Calendar {
        /// The period.
        every: Every,
        /// The zone (from the bundled tz database).
        zone: TimeZone,
    },
    /// The last `ms` milliseconds.
    Sliding {
        /// Its length.
        ms: i64,
    },
}

impl Window {
    /// The calendar window holding instant `now`: `[start, end)` in epoch ms.
    fn calendar(every: Every, zone: &TimeZone, now: i64) -> (i64, i64) {
        let fallback = (now, now.saturating_add(1));
        let Ok(ts) = Timestamp::from_millisecond(now) else { return fallback };
        let z = ts.to_zoned_datetime(zone.clone());
        match every {
            // Minutes and hours follow the zone's clock (an India hour starts at :30 UTC);
            // one is 60 s / 3,600 s long, so a DST jump moves the clock, not the window.
            Every::Minute | Every::Hour => {
                let into = i64::from(z.second()) * 1_000 + i64::from(z.millisecond());
                let (into, len) = match every {
                    Every::Minute => (into, 60_000),
                    _ => (into + i64::from(z.minute()) * 60_000, 3_600_000),
                };
                let start = now - into;
                (start, start + len)
            }
            Every::Day | Every::Week | Every::Month => {
                let date = z.date();
                let first = match every {
                    Every::Day => Some(date),
                    Every::Week => date.checked_sub(Span::new().days(date.weekday().to_monday_zero_offset())).ok(),
                    _ => Some(date.first_of_month()),
                };
                let step = match every {
                    Every::Day => Span::new().days(1),
                    Every::Week => Span::new().weeks(1),
                    _ => Span::new().months(1),
                };
                let start_of = |d: jiff::civil::Date| {
                    d.to_zoned_datetime(zone.clone())
                        .and_then(|z| z.start_of_day())
                        .map(|z| z.timestamp().as_millisecond())
                        .ok()
                };
                let Some(first) = first else { return fallback };
                match (start_of(first), first.checked_add(step).ok().and_then(start_of)) {
                    (Some(s), Some(e)) if s <= now && now < e => (s, e),
                    _ => fallback,
                }
            }
        }
    }

    /// The earliest charge time that counts at `now` (charges at or after it count).
    pub fn since(&self, now: i64) -> i64 {
        match self {
            Window::Calendar { every, zone } => Window::calendar(*every, zone, now).0,
            Window::Sliding { ms } => now.saturating_sub(*ms).saturating_add(1),
        }
    }

    /// When what is used now starts to be freed: a calendar window's end; for a sliding
    /// window, when its oldest counted charge (`oldest`) leaves it (None without one).
    pub fn resets_at(&self, now: i64, oldest: Option<i64>) -> Option<i64> {
        match self {
            Window::Calendar { every, zone } => Some(Window::calendar(*every, zone, now).1),
            Window::Sliding { ms } => oldest.map(|at| at.saturating_add(*ms)),
        }
    }
}

/// A rule's limits (at least one).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Limits {
    /// Sum of the pools' `estimatedCost` (settled: actual costs) per window.
    pub cost: Option<Micros>,
    /// Launches per window.
    pub launches: Option<u64>,
    /// Sandboxes of one key held at any time.
    pub concurrent: Option<u64>,
}

/// One budget rule, validated.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The rule's id (errors, events, status, and the shared ledger's key).
    pub id: String,
    /// The launch label whose value is the key (e.g. `tenant`).
    pub label: String,
    /// A request without the label passes this rule (`missing: 'allow'`) instead of being
    /// refused.
    pub missing_allow: bool,
    /// With a shared ledger that cannot be asked, this rule admits (`onStoreDown: 'allow'`)
    /// instead of refusing.
    pub store_down_allow: bool,
    /// The limits.
    pub limits: Limits,
    /// The window of `cost` and `launches` (None for a rule that only limits `concurrent`).
    pub window: Option<Window>,
}

/// One applying rule as a shared ledger decides it (it knows no zones): the rule's id and
/// limits, the label's value, and the window's bounds at the reservation's instant.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedKey {
    /// Rule index (in this router's rules).
    pub rule: usize,
    /// The rule's id: the shared ledger's key, with the value.
    pub rule_id: String,
    /// The label's value.
    pub value: String,
    /// The rule's limits.
    pub limits: Limits,
    /// Charges at or after this instant count (None: no window).
    pub since: Option<i64>,
    /// A calendar window's end.
    pub window_end: Option<i64>,
    /// A sliding window's length.
    pub sliding_ms: Option<i64>,
}

impl SharedKey {
    /// Every key of `keys` at `now`, as a shared ledger decides them.
    pub fn of(rules: &[Rule], keys: &[Key], now: i64) -> Vec<SharedKey> {
        keys.iter()
            .map(|k| {
                let r = &rules[k.rule];
                let (window_end, sliding_ms) = match &r.window {
                    Some(w @ Window::Calendar { .. }) => (w.resets_at(now, None), None),
                    Some(Window::Sliding { ms }) => (None, Some(*ms)),
                    None => (None, None),
                };
                SharedKey {
                    rule: k.rule,
                    rule_id: r.id.clone(),
                    value: k.value.to_string(),
                    limits: r.limits,
                    since: r.window.as_ref().map(|w| w.since(now)),
                    window_end,
                    sliding_ms,
                }
            })
            .collect()
    }

    /// [`check`] for this key, given its usage read from the shared ledger's totals.
    pub fn check(&self, usage: &Usage, cost: Micros) -> Result<(), Refusal> {
        let resets = |oldest: Option<i64>| match (self.window_end, self.sliding_ms) {
            (Some(end), _) => Some(end),
            (None, Some(ms)) => oldest.map(|at| at.saturating_add(ms)),
            (None, None) => None,
        };
        check_limits(&self.limits, self.rule, &self.value, usage, cost, &resets)
    }
}

fn invalid(field: impl Into<String>, expectation: impl Into<String>) -> CoreError {
    CoreError::InvalidConfiguration { scope: "router", field: field.into(), expectation: expectation.into() }
}

fn from_field(e: FieldError) -> CoreError {
    invalid(e.field, e.expectation)
}

/// Reads the router option `budgets` (an array of rules) strictly: every field's type and
/// range, no unknown key, distinct ids, a window exactly when `cost` or `launches` is
/// limited. The error names the field (`budgets[1].window.timeZone`), never a value.
pub fn rules_of_option(v: &Value) -> Result<Vec<Rule>, CoreError> {
    let Value::Array(items) = v else { return Err(invalid("budgets", "must be an array of rules")) };
    if items.len() > MAX_RULES {
        return Err(invalid("budgets", format!("must have at most {MAX_RULES} rules")));
    }
    let mut rules: Vec<Rule> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("budgets[{i}]");
        let rule = rule_of(item, &path)?;
        if rules.iter().any(|r| r.id == rule.id) {
            return Err(invalid(format!("{path}.id"), "must be distinct"));
        }
        rules.push(rule);
    }
    Ok(rules)
}

fn rule_of(v: &Value, path: &str) -> Result<Rule, CoreError> {
    let o = object(v, path, &["id", "key", "limit", "window", "missing", "onStoreDown"]).map_err(from_field)?;
    let id = o.string("id").map_err(from_field)?.ok_or_else(|| invalid(o.field("id"), "is required"))?;
    if crate::core::ids::validate_provider_id(id).is_err() {
        return Err(invalid(o.field("id"), "must be 1-64 characters of [a-z0-9][a-z0-9._-]* (like a provider id)"));
    }
    let key = o
        .object("key", &["label"])
        .map_err(from_field)?
        .ok_or_else(|| invalid(o.field("key"), "is required: { label }"))?;
    let label = key.string("label").map_err(from_field)?.ok_or_else(|| invalid(key.field("label"), "is required"))?;
    if label.is_empty() || label.len() > 256 {
        return Err(invalid(key.field("label"), "must be a label name of 1-256 characters"));
    }
    if RESERVED_LABELS.contains(&label) {
        return Err(invalid(key.field("label"), "is reserved: the router stamps it itself"));
    }
    let limit = o
        .object("limit", &["cost", "launches", "concurrent"])
        .map_err(from_field)?
        .ok_or_else(|| invalid(o.field("limit"), "is required: { cost?, launches?, concurrent? }"))?;
    let cost = match limit.non_negative("cost") {
        Ok(None) => None,
        Ok(Some(c)) => Some(Micros::of(c).ok_or_else(|| invalid(limit.field("cost"), COST_RANGE))?),
        Err(_) => return Err(invalid(limit.field("cost"), COST_RANGE)),
    };
    let count = |key: &str| -> Result<Option<u64>, CoreError> {
        Ok(limit.integer_in(key, 0, 9_007_199_254_740_991).map_err(from_field)?.map(|n| n as u64))
    };
    let limits = Limits { cost, launches: count("launches")?, concurrent: count("concurrent")? };
    if limits == Limits::default() {
        return Err(invalid(o.field("limit"), "must limit at least one of cost, launches, concurrent"));
    }
    let windowed = limits.cost.is_some() || limits.launches.is_some();
    let window = match (o.get("window"), windowed) {
        (None, true) => return Err(invalid(o.field("window"), "is required when cost or launches is limited")),
        (Some(_), false) => {
            return Err(invalid(o.field("window"), "applies to cost and launches only (concurrent has no window)"))
        }
        (None, false) => None,
        (Some(w), true) => Some(window_of(w, &o.field("window"))?),
    };
    let allow = |key: &str| -> Result<bool, CoreError> {
        Ok(o.choice(key, &["refuse", "allow"]).map_err(from_field)? == Some("allow"))
    };
    Ok(Rule {
        id: id.to_string(),
        label: label.to_string(),
        missing_allow: allow("missing")?,
        store_down_allow: allow("onStoreDown")?,
        limits,
        window,
    })
}

fn window_of(v: &Value, path: &str) -> Result<Window, CoreError> {
    let o = object(v, path, &["every", "timeZone", "slidingMs"]).map_err(from_field)?;
    match (o.get("every"), o.get("slidingMs")) {
        (Some(_), Some(_)) | (None, None) => {
            Err(invalid(path, "must be { every, timeZone } (a calendar window) or { slidingMs }"))
        }
        (None, Some(_)) => {
            if o.get("timeZone").is_some() {
                return Err(invalid(o.field("timeZone"), "applies to calendar windows only"));
            }
            let ms = o.integer_in("slidingMs", 1, MAX_SLIDING_MS).map_err(from_field)?.unwrap_or(1);
            Ok(Window::Sliding { ms })
        }
        (Some(_), None) => {
            let every = o
                .choice("every", &Every::NAMES)
                .map_err(from_field)?
                .and_then(Every::of)
                .ok_or_else(|| invalid(o.field("every"), "is required"))?;
            let name = o.string("timeZone").map_err(from_field)?.unwrap_or("UTC");
            // The zone's name is configuration, not a caller's secret, but it is still not
            // echoed: the field and the expectation say enough.
            let zone = TimeZone::get(name)
                .map_err(|_| invalid(o.field("timeZone"), "must be an IANA time zone name (e.g. Europe/Berlin)"))?;
            Ok(Window::Calendar { every, zone })
        }
    }
}

/// One rule applied to one request: the rule's index and the request's value of its label.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// Index into the rules.
    pub rule: usize,
    /// The label's value.
    pub value: std::rc::Rc<str>,
}

/// A request's keys: inline for up to two rules (no allocation per provision for the
/// usual one or two).
pub type Keys = SmallVec<[Key; 2]>;

/// The rules that apply to a request with `labels`: `Ok(keys)`, or `Err(rule)` for the
/// first rule whose label is missing and that does not say `missing: 'allow'`.
pub fn keys_of(rules: &[Rule], labels: &crate::core::labels::Labels) -> Result<Vec<Key>, usize> {
    let mut keys = Vec::with_capacity(rules.len());
    for (i, r) in rules.iter().enumerate() {
        match labels.get(&r.label) {
            Some(v) => keys.push(Key { rule: i, value: std::rc::Rc::from(v) }),
            None if r.missing_allow => {}
            None => return Err(i),
        }
    }
    Ok(keys)
}

/// The expectation of every cost a caller gives (a limit, `settleCost`'s actual cost).
pub const COST_RANGE: &str = "must be a finite number from 0 to 1000000000 (costs are kept in millionths)";

/// What one key of one rule holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Cost of settled charges in the window.
    pub used_cost: Micros,
    /// Cost of reservations in flight in the window.
    pub reserved_cost: Micros,
    /// Settled launches in the window.
    pub used_launches: u64,
    /// Launches in flight in the window.
    pub reserved_launches: u64,
    /// Concurrent slots of sandboxes that exist (or may: outcome unknown).
    pub live: u64,
    /// Concurrent slots of launches in flight.
    pub inflight: u64,
    /// The oldest charge counted in the window (a sliding window's `resetsAt`).
    pub oldest: Option<i64>,
}

/// Which limit refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// `limit.cost`.
    Cost,
    /// `limit.launches`.
    Launches,
    /// `limit.concurrent`.
    Concurrent,
}

impl Dimension {
    /// `cost`, `launches` or `concurrent`, as errors and events name it.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Cost => "cost",
            Dimension::Launches => "launches",
            Dimension::Concurrent => "concurrent",
        }
    }
}

/// Why a rule refused a reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The rule (index).
    pub rule: usize,
    /// The label's value it was keyed by.
    pub value: String,
    /// The limit that did not fit.
    pub dimension: Dimension,
    /// Its value.
    pub limit: f64,
    /// What is used (settled charges in the window; for `concurrent`, live sandboxes).
    pub used: f64,
    /// What is reserved by launches in flight.
    pub reserved: f64,
    /// What this launch needed (its cost, or 1).
    pub need: f64,
    /// When the window frees what is used (None: no window, or nothing to free).
    pub resets_at: Option<i64>,
    /// Whether giving back the reservations in flight would make room.
    pub retryable: bool,
}

/// Whether one more launch of `cost` fits `rule` given its key's `usage` at `now`: every
/// limit must hold `used + reserved + need <= limit` (costs exactly, in micro-units).
pub fn check(
    rule: &Rule,
    rule_index: usize,
    value: &str,
    usage: &Usage,
    cost: Micros,
    now: i64,
) -> Result<(), Refusal> {
    let resets = |oldest| rule.window.as_ref().and_then(|w| w.resets_at(now, oldest));
    check_limits(&rule.limits, rule_index, value, usage, cost, &resets)
}

/// [`check`] over a rule's limits, with `resets(oldest)` giving its window's `resetsAt`
/// (the shared ledger's form: it knows the window by its bounds, not its zone).
pub fn check_limits(
    limits: &Limits,
    rule_index: usize,
    value: &str,
    usage: &Usage,
    cost: Micros,
    resets: &dyn Fn(Option<i64>) -> Option<i64>,
) -> Result<(), Refusal> {
    // Every figure is an integer (micro-units, counts): the comparisons are exact.
    let refuse = |dimension, limit: i64, used: i64, reserved: i64, need: i64, scale: f64, windowed: bool| Refusal {
        rule: rule_index,
        value: value.to_string(),
        dimension,
        limit: limit as f64 / scale,
        used: used as f64 / scale,
        reserved: reserved as f64 / scale,
        need: need as f64 / scale,
        resets_at: if windowed { resets(usage.oldest) } else { None },
        retryable: reserved > 0 && used.saturating_add(need) <= limit,
    };
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    if let Some(limit) = limits.cost {
        let (u, r) = (usage.used_cost.0, usage.reserved_cost.0);
        if u.saturating_add(r).saturating_add(cost.0) > limit.0 {
            return Err(refuse(Dimension::Cost, limit.0, u, r, cost.0, money::PER_UNIT as f64, true));
        }
    }
    if let Some(limit) = limits.launches {
        let (u, r) = (count(usage.used_launches), count(usage.reserved_launches));
        if u.saturating_add(r).saturating_add(1) > count(limit) {
            return Err(refuse(Dimension::Launches, count(limit), u, r, 1, 1.0, true));
        }
    }
    if let Some(limit) = limits.concurrent {
        let (u, r) = (count(usage.live), count(usage.inflight));
        if u.saturating_add(r).saturating_add(1) > count(limit) {
            return Err(refuse(Dimension::Concurrent, count(limit), u, r, 1, 1.0, false));
        }
    }
    Ok(())
}

/// The refusal a provision reports when several candidates were refused: the first
/// retryable one (waiting could let that pool in), else the first.
pub fn reported(refusals: &[Refusal]) -> Option<&Refusal> {
    refusals.iter().find(|r| r.retryable).or_else(|| refusals.first())
}

/// How a launch's reservation is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// It launched: cost and launch are used, the slot is held until destroy.
    Allocated,
    /// It is proven to have allocated nothing: everything is given back.
    Nothing,
    /// Its outcome is unknown: charged, the slot held until `until` (ms) or a reclaim.
    Unknown {
        /// When the slot is freed.
        until: i64,
    },
}

/// A charge as a durable store keeps it (`SqliteMappingStore`): enough to rebuild the
/// ledger after a restart.
#[derive(Debug, Clone, PartialEq)]
pub struct ChargeRecord {
    /// The provision's sandbox id.
    pub sandbox: SandboxKey,
    /// When it was reserved (ms).
    pub at: i64,
    /// Its cost (estimate, or the settled actual cost).
    pub cost: Micros,
    /// Whether its launch settled (false: in flight when written).
    pub settled: bool,
    /// Whether its slot is still held, and until when (None: until destroy).
    pub live: Option<Option<i64>>,
    /// (rule id, label value) of every rule it was charged against.
    pub keys: Vec<(String, String)>,
    /// When it stops counting in every window it was charged in (ms; `i64::MAX` while its
    /// launch is in flight or its slot is held): the store may drop the row after that.
    pub counts_until: i64,
}

/// One row of `router.budgetStatus()`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusRow {
    /// Rule index.
    pub rule: usize,
    /// The label's value.
    pub value: String,
    /// What the key holds now.
    pub usage: Usage,
    /// When the window frees what is used.
    pub resets_at: Option<i64>,
}

/// The rules that apply to one provision.
#[derive(Debug, Clone)]
pub enum Applying {
    /// Their buckets in the router's in-process ledger ([`Ledger::plan_keys`]): the
    /// machine reserves in it itself.
    Local(Buckets),
    /// Each rule with the request's label value: the reservations live in a shared
    /// ledger, which the machine asks for them (`Step::Reserve`).
    Shared(Keys),
}

impl Applying {
    /// No rule applies.
    pub fn is_empty(&self) -> bool {
        match self {
            Applying::Local(buckets) => buckets.is_empty(),
            Applying::Shared(keys) => keys.is_empty(),
        }
    }
}

impl Plan {
    /// The applying rules' keys under a shared ledger (empty in process).
    pub fn shared_keys(&self) -> &[Key] {
        match &self.applying {
            Applying::Shared(keys) => keys,
            Applying::Local(_) => &[],
        }
    }
}

/// What an acquisition needs to reserve budgets ([`crate::core::acquisition::Acquisition::with_budget`]).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The provision's sandbox id: its charges are kept under it.
    pub sandbox: SandboxKey,
    /// The rules that apply to the request, as the ledger that keeps them names them.
    pub applying: Applying,
    /// Each pool's cost (its `estimatedCost`, registered or resolved), by pool index.
    pub costs: std::rc::Rc<[f64]>,
    /// How long an outcome-unknown launch holds its concurrent slot, ms (the launch's
    /// settle window).
    pub hold_ms: i64,
    /// Every rule's id (by rule index), for errors.
    pub rule_ids: std::rc::Rc<[String]>,
}

impl Refusal {
    /// One line for an error message: the rule, the limit and the numbers (never the
    /// label's value).
    pub fn text(&self, rule_id: &str) -> String {
        format!(
            "rule {rule_id} {}: {} used + {} reserved + {} needed > {}",
            self.dimension.name(),
            self.used,
            self.reserved,
            self.need,
            self.limit
        )
    }
}

/// A shared ledger's answer to one reservation.
#[derive(Debug, Clone, PartialEq)]
pub enum SharedVerdict {
    /// Reserved against every rule.
    Reserved,
    /// These rules refused (nothing was reserved).
    Refused(Vec<Refusal>),
    /// The ledger could not be asked. `Ok`: every applying rule says
    /// `onStoreDown: 'allow'`, so the launch goes ahead unreserved; `Err(rule)`: the first
    /// rule that refuses then.
    Unavailable(Result<(), usize>),
}

/// What a shared ledger that cannot be asked means for `keys`: admit unreserved when every
/// applying rule says `onStoreDown: 'allow'`, else refuse with the first that does not.
pub fn on_store_down(rules: &[Rule], keys: &[Key]) -> Result<(), usize> {
    match keys.iter().find(|k| !rules[k.rule].store_down_allow) {
        Some(k) => Err(k.rule),
        None => Ok(()),
    }
}

/// A rule's key as the field path of a missing label (`launch.labels.tenant`).
pub fn missing_field(rule: &Rule) -> String {
    format!("launch.labels.{}", shown(&rule.label))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: Value) -> Vec<Rule> {
        rules_of_option(&v).expect("valid rules")
    }

    fn err(v: Value) -> (String, String) {
        match rules_of_option(&v) {
            Err(CoreError::InvalidConfiguration { field, expectation, .. }) => (field, expectation),
            other => panic!("{other:?}"),
        }
    }

    fn key(rule: usize, v: &str) -> Key {
        Key { rule, value: v.into() }
    }

    #[test]
    fn must_fire_invalid_rules_are_refused_naming_the_field() {
        let base =
            json!({ "id": "r", "key": { "label": "tenant" }, "limit": { "cost": 1 }, "window": { "slidingMs": 1000 } });
        let with = |f: &dyn Fn(&mut Value)| {
            let mut r = base.clone();
            f(&mut r);
            json!([r])
        };
        let cases: Vec<(Value, &str)> = vec![
            (json!({}), "budgets"),
            (with(&|r| r["id"] = json!("Bad Id")), "budgets[0].id"),
            (with(&|r| r["key"] = json!({ "label": "" })), "budgets[0].key.label"),
            (with(&|r| r["key"] = json!({ "label": "agent-relay-sbx-id" })), "budgets[0].key.label"),
            (with(&|r| r["key"] = json!({ "labl": "x" })), "budgets[0].key.labl"),
            (with(&|r| r["limit"] = json!({})), "budgets[0].limit"),
            (with(&|r| r["limit"] = json!({ "cost": -1 })), "budgets[0].limit.cost"),
            (with(&|r| r["limit"] = json!({ "launches": 1.5 })), "budgets[0].limit.launches"),
            (with(&|r| r["limit"] = json!({ "cost": null })), "budgets[0].limit.cost"),
            (with(&|r| r["window"] = json!({ "every": "fortnight" })), "budgets[0].window.every"),
            (
                with(&|r| r["window"] = json!({ "every": "day", "timeZone": "Mars/Olympus" })),
                "budgets[0].window.timeZone",
            ),
            (with(&|r| r["window"] = json!({ "every": "day", "slidingMs": 5 })), "budgets[0].window"),
            (with(&|r| r["window"] = json!({ "slidingMs": 0 })), "budgets[0].window.slidingMs"),
            (with(&|r| r["window"] = json!({ "slidingMs": 10, "timeZone": "UTC" })), "budgets[0].window.timeZone"),
            (with(&|r| r.as_object_mut().unwrap().remove("window").map(|_| ()).unwrap()), "budgets[0].window"),
            (with(&|r| r["missing"] = json!("maybe")), "budgets[0].missing"),
            (with(&|r| r["onStoreDown"] = json!(true)), "budgets[0].onStoreDown"),
            (with(&|r| r["extra"] = json!(1)), "budgets[0].extra"),
            (json!([base.clone(), base.clone()]), "budgets[1].id"),
            (
                json!([{ "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 2 }, "window": { "slidingMs": 5 } }]),
                "budgets[0].window",
            ),
        ];
        for (v, field) in cases {
            assert_eq!(err(v.clone()).0, field, "{v}");
        }
        let (_, expectation) = err(with(&|r| r["window"] = json!({ "every": "day", "timeZone": "sk_canary/Zone" })));
        assert!(!expectation.contains("sk_canary"), "{expectation}");
    }

    #[test]
    fn must_not_fire_valid_rules_of_every_kind_are_read() {
        let r = rules(json!([
            { "id": "daily", "key": { "label": "tenant" }, "limit": { "cost": 10, "launches": 5 }, "window": { "every": "day", "timeZone": "Europe/Berlin" } },
            { "id": "burst", "key": { "label": "tenant" }, "limit": { "launches": 3 }, "window": { "slidingMs": 60000 }, "missing": "allow" },
            { "id": "live", "key": { "label": "team" }, "limit": { "concurrent": 0 }, "onStoreDown": "allow" },
            { "id": "utc", "key": { "label": "t" }, "limit": { "cost": 0 }, "window": { "every": "month" } },
        ]));
        assert_eq!(r.len(), 4);
        assert_eq!(r[0].limits, Limits { cost: Some(Micros(10_000_000)), launches: Some(5), concurrent: None });
        assert!(r[1].missing_allow && !r[0].missing_allow);
        assert!(r[2].store_down_allow && r[2].window.is_none());
        assert!(
            matches!(&r[3].window, Some(Window::Calendar { every: Every::Month, zone }) if zone.iana_name() == Some("UTC"))
        );
    }

    #[test]
    fn must_fire_a_request_without_the_label_is_refused_by_a_refusing_rule() {
        let r = rules(json!([
            { "id": "a", "key": { "label": "team" }, "limit": { "concurrent": 1 }, "missing": "allow" },
            { "id": "b", "key": { "label": "tenant" }, "limit": { "concurrent": 1 } },
        ]));
        assert_eq!(keys_of(&r, &vec![("team".into(), "x".into())].into()), Err(1));
        assert_eq!(missing_field(&r[1]), "launch.labels.tenant");
    }

    #[test]
    fn must_not_fire_a_missing_allow_rule_is_skipped_and_present_labels_key_their_rules() {
        let r = rules(json!([
            { "id": "a", "key": { "label": "team" }, "limit": { "concurrent": 1 }, "missing": "allow" },
            { "id": "b", "key": { "label": "tenant" }, "limit": { "concurrent": 1 } },
        ]));
        assert_eq!(keys_of(&r, &vec![("tenant".into(), "acme".into())].into()), Ok(vec![key(1, "acme")]));
        let both = vec![("team".into(), "x".into()), ("tenant".into(), "acme".into())].into();
        assert_eq!(keys_of(&r, &both), Ok(vec![key(0, "x"), key(1, "acme")]));
    }
}
