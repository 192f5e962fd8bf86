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
use hashbrown::HashTable;
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp};
use rustc_hash::FxHashMap;
use serde_json::Value;
use smallvec::SmallVec;
use std::collections::VecDeque;

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
/// Tolerance of every comparison against a cost limit (rounding of sums of decimals).
const EPS: f64 = 1e-9;

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
    pub cost: Option<f64>,
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

impl Rule {
    fn limits_only(limits: Limits) -> Rule {
        Rule {
            id: String::new(),
            label: String::new(),
            missing_allow: false,
            store_down_allow: false,
            limits,
            window: None,
        }
    }
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

    /// [`check`] for this key, given its usage rebuilt from the shared ledger's rows.
    pub fn check(&self, usage: &Usage, cost: f64) -> Result<(), Refusal> {
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
    let cost = limit.non_negative("cost").map_err(from_field)?;
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
pub fn keys_of(rules: &[Rule], labels: &[(String, String)]) -> Result<Vec<Key>, usize> {
    let mut keys = Vec::with_capacity(rules.len());
    for (i, r) in rules.iter().enumerate() {
        match labels.iter().find(|(k, _)| *k == r.label) {
            Some((_, v)) => keys.push(Key { rule: i, value: std::rc::Rc::from(v.as_str()) }),
            None if r.missing_allow => {}
            None => return Err(i),
        }
    }
    Ok(keys)
}

/// What one key of one rule holds now.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    /// Cost of settled charges in the window.
    pub used_cost: f64,
    /// Cost of reservations in flight in the window.
    pub reserved_cost: f64,
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
/// limit must hold `used + reserved + need <= limit`.
pub fn check(rule: &Rule, rule_index: usize, value: &str, usage: &Usage, cost: f64, now: i64) -> Result<(), Refusal> {
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
    cost: f64,
    resets: &dyn Fn(Option<i64>) -> Option<i64>,
) -> Result<(), Refusal> {
    let refuse = |dimension, limit: f64, used: f64, reserved: f64, need: f64, windowed: bool| Refusal {
        rule: rule_index,
        value: value.to_string(),
        dimension,
        limit,
        used,
        reserved,
        need,
        resets_at: if windowed { resets(usage.oldest) } else { None },
        retryable: reserved > 0.0 && used + need <= limit + EPS,
    };
    let rule = Rule::limits_only(*limits);
    if let Some(limit) = rule.limits.cost {
        if usage.used_cost + usage.reserved_cost + cost > limit + EPS {
            return Err(refuse(Dimension::Cost, limit, usage.used_cost, usage.reserved_cost, cost, true));
        }
    }
    if let Some(limit) = rule.limits.launches {
        if usage.used_launches + usage.reserved_launches + 1 > limit {
            let (u, r) = (usage.used_launches as f64, usage.reserved_launches as f64);
            return Err(refuse(Dimension::Launches, limit as f64, u, r, 1.0, true));
        }
    }
    if let Some(limit) = rule.limits.concurrent {
        if usage.live + usage.inflight + 1 > limit {
            let (u, r) = (usage.live as f64, usage.inflight as f64);
            return Err(refuse(Dimension::Concurrent, limit as f64, u, r, 1.0, false));
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

#[derive(Debug, Clone, Copy, PartialEq)]
enum EvState {
    Reserved,
    Used,
    Gone,
}

/// One charge in one windowed bucket (24 bytes: a tenant's day of launches is a long
/// deque of these, so the charge is named by its slot, not its 16-byte id).
#[derive(Debug, Clone)]
struct Ev {
    at: i64,
    cost: f64,
    /// The charge's slot in [`Ledger::charges`].
    slot: u32,
    state: EvState,
}

/// One rule's key: its charges in the window (oldest first) and their sums.
#[derive(Debug)]
struct Bucket {
    rule: usize,
    value: std::rc::Rc<str>,
    events: VecDeque<Ev>,
    /// Sequence number of `events[0]`.
    base: u64,
    used_cost: f64,
    reserved_cost: f64,
    used_launches: u64,
    reserved_launches: u64,
    live: u64,
    inflight: u64,
    /// Slots of outcome-unknown launches: (until, charge slot).
    unknown: Vec<(i64, u32)>,
    /// The calendar window last computed, `[start, end)` (empty until then).
    span: (i64, i64),
}

impl Bucket {
    fn usage(&self) -> Usage {
        Usage {
            used_cost: self.used_cost.max(0.0),
            reserved_cost: self.reserved_cost.max(0.0),
            used_launches: self.used_launches,
            reserved_launches: self.reserved_launches,
            live: self.live + self.unknown.len() as u64,
            inflight: self.inflight,
            oldest: self.events.iter().find(|e| e.state != EvState::Gone).map(|e| e.at),
        }
    }

    fn ev(&mut self, seq: u64) -> Option<&mut Ev> {
        let i = seq.checked_sub(self.base)?;
        self.events.get_mut(i as usize)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Live {
    /// In flight, or the sandbox exists.
    Held,
    /// Outcome unknown: held until then.
    Until(i64),
    /// Given back.
    Released,
}

/// A charge's place in one of its buckets: the bucket, and the sequence number of its
/// event there ([`NO_EVENT`] for a rule without a window).
#[derive(Debug, Clone, Copy)]
struct Place {
    bucket: u32,
    seq: u64,
}

const NO_EVENT: u64 = u64::MAX;

impl Place {
    fn seq(self) -> Option<u64> {
        (self.seq != NO_EVENT).then_some(self.seq)
    }
}

/// One provision's charge: what it reserved, in which buckets.
#[derive(Debug, Clone)]
struct Charge {
    sandbox: SandboxKey,
    at: i64,
    cost: f64,
    settled: bool,
    live: Live,
    places: SmallVec<[Place; 2]>,
}

/// A provision's buckets in the in-process ledger (see [`Ledger::plan_keys`]).
pub type Buckets = SmallVec<[u32; 2]>;

/// A charge as a durable store keeps it (`SqliteMappingStore`): enough to rebuild the
/// ledger after a restart.
#[derive(Debug, Clone, PartialEq)]
pub struct ChargeRecord {
    /// The provision's sandbox id.
    pub sandbox: SandboxKey,
    /// When it was reserved (ms).
    pub at: i64,
    /// Its cost (estimate, or the settled actual cost).
    pub cost: f64,
    /// Whether its launch settled (false: in flight when written).
    pub settled: bool,
    /// Whether its slot is still held, and until when (None: until destroy).
    pub live: Option<Option<i64>>,
    /// (rule id, label value) of every rule it was charged against.
    pub keys: Vec<(String, String)>,
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

/// The in-process budget ledger of one router (without a shared coordinator).
///
/// Why slots? Every successful provision leaves a charge for as long as its windows count
/// it (a calendar day keeps a day's launches), so the bytes per charge are what a busy
/// router pays in page faults and cache misses as the ledger grows. Charges live in one
/// vector (a slot is reused once its charge is forgotten), found by id through a hash table
/// of bare 4-byte slots (the id is read from the slot: measured, a map holding the 16-byte
/// ids cost twice what the rest of a reservation does), and the windows' events name the
/// slot.
#[derive(Debug)]
pub struct Ledger {
    rules: Vec<Rule>,
    buckets: Vec<Bucket>,
    /// Each rule's buckets by label value (Fx: hashed once per rule per provision; the
    /// values are callers' labels, but a key's bucket is found by the text, never by a
    /// hash alone).
    index: Vec<FxHashMap<std::rc::Rc<str>, u32>>,
    charges: Vec<Option<Charge>>,
    free: Vec<u32>,
    /// Slots of `charges` by their charge's sandbox id: (slot, [`id_hash`] of the id), so
    /// that growing the table reads no charge.
    by_id: HashTable<(u32, u32)>,
    /// Charges changed since the last [`Ledger::take_dirty`] (only when persisted).
    dirty: Option<Vec<SandboxKey>>,
}

impl Ledger {
    /// A ledger for `rules`; `persist`: record which charges change, for a durable store.
    pub fn new(rules: Vec<Rule>, persist: bool) -> Ledger {
        Ledger {
            index: rules.iter().map(|_| FxHashMap::default()).collect(),
            rules,
            buckets: Vec::new(),
            charges: Vec::new(),
            free: Vec::new(),
            by_id: HashTable::new(),
            dirty: persist.then(Vec::new),
        }
    }

    /// The rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// [`keys_of`] in this ledger: each applying rule's bucket (made on first use), in rule
    /// order, for [`Ledger::reserve_in`].
    pub fn plan_keys(&mut self, labels: &[(String, String)]) -> Result<Buckets, usize> {
        let mut buckets = Buckets::new();
        for i in 0..self.rules.len() {
            let r = &self.rules[i];
            match labels.iter().find(|(k, _)| *k == r.label) {
                Some((_, v)) => buckets.push(self.bucket_of(i, v)),
                None if r.missing_allow => {}
                None => return Err(i),
            }
        }
        Ok(buckets)
    }

    /// The rule (index) of bucket `b`.
    pub fn rule_of(&self, b: u32) -> usize {
        self.buckets[b as usize].rule
    }

    fn bucket_of(&mut self, rule: usize, value: &str) -> u32 {
        if let Some(&b) = self.index[rule].get(value) {
            return b;
        }
        let value: std::rc::Rc<str> = value.into();
        let b = self.buckets.len() as u32;
        self.buckets.push(Bucket {
            rule,
            value: value.clone(),
            events: VecDeque::new(),
            base: 0,
            used_cost: 0.0,
            reserved_cost: 0.0,
            used_launches: 0,
            reserved_launches: 0,
            live: 0,
            inflight: 0,
            unknown: Vec::new(),
            span: (0, 0),
        });
        self.index[rule].insert(value, b);
        b
    }

    fn bucket(&mut self, key: &Key) -> u32 {
        self.bucket_of(key.rule, &key.value)
    }

    fn charge(&mut self, slot: u32) -> Option<&mut Charge> {
        self.charges.get_mut(slot as usize).and_then(Option::as_mut)
    }

    fn touch(&mut self, sandbox: SandboxKey) {
        if let Some(d) = &mut self.dirty {
            d.push(sandbox);
        }
    }

    /// Drops what `now` has moved past in bucket `b`: charges older than its window, and
    /// outcome-unknown slots whose time is up.
    fn prune(&mut self, b: u32, now: i64) {
        let bucket = &mut self.buckets[b as usize];
        // A calendar window's bounds are computed once per window, not per admission.
        let since = match &self.rules[bucket.rule].window {
            None => None,
            Some(w @ Window::Calendar { .. }) => {
                if !(bucket.span.0 <= now && now < bucket.span.1) {
                    let end = w.resets_at(now, None).unwrap_or(now);
                    bucket.span = (w.since(now), end);
                }
                Some(bucket.span.0)
            }
            Some(w) => Some(w.since(now)),
        };
        let mut forgotten = Vec::new();
        if let Some(since) = since {
            while bucket.events.front().is_some_and(|e| e.at < since) {
                let Some(e) = bucket.events.pop_front() else { break };
                bucket.base += 1;
                match e.state {
                    EvState::Used => {
                        bucket.used_cost -= e.cost;
                        bucket.used_launches = bucket.used_launches.saturating_sub(1);
                    }
                    EvState::Reserved => {
                        bucket.reserved_cost -= e.cost;
                        bucket.reserved_launches = bucket.reserved_launches.saturating_sub(1);
                    }
                    // Its charge was given back and is gone; the slot may hold another.
                    EvState::Gone => continue,
                }
                forgotten.push(e.slot);
            }
            if bucket.events.is_empty() {
                // Sums of decimals drift; an empty window is exactly zero.
                bucket.used_cost = 0.0;
                bucket.reserved_cost = 0.0;
            }
        }
        if bucket.unknown.is_empty() && forgotten.is_empty() {
            return;
        }
        let mut expired = Vec::new();
        bucket.unknown.retain(|(until, s)| {
            let keep = *until > now;
            if !keep {
                expired.push(*s);
            }
            keep
        });
        for s in expired {
            if let Some(c) = self.charge(s) {
                // Every bucket of a charge holds its slot until the same instant.
                if matches!(c.live, Live::Until(t) if t <= now) {
                    c.live = Live::Released;
                }
            }
            forgotten.push(s);
        }
        for s in forgotten {
            self.forget_if_done(s);
        }
    }

    /// Removes the charge in `slot` if nothing can change it any more: its slot given back
    /// and every one of its charges out of its window.
    fn forget_if_done(&mut self, slot: u32) {
        let Some(c) = self.charges.get(slot as usize).and_then(Option::as_ref) else { return };
        if c.live != Live::Released {
            return;
        }
        let in_window = c.places.iter().any(|p| p.seq().is_some_and(|q| q >= self.buckets[p.bucket as usize].base));
        if !in_window {
            let sandbox = c.sandbox;
            self.remove(slot);
            self.touch(sandbox);
        }
    }

    fn remove(&mut self, slot: u32) {
        if let Some(c) = self.charges[slot as usize].take() {
            self.unindex(slot, c.sandbox);
            self.free.push(slot);
        }
    }

    /// The slot of `sandbox`'s charge.
    fn slot_of(&self, sandbox: SandboxKey) -> Option<u32> {
        let charges = &self.charges;
        let h = id_hash(sandbox);
        let owns =
            |&(slot, hs): &(u32, u32)| hs == h && charges[slot as usize].as_ref().is_some_and(|c| c.sandbox == sandbox);
        self.by_id.find(spread(h), owns).map(|e| e.0)
    }

    /// Indexes `slot` (its charge in place) under its sandbox id.
    fn index(&mut self, slot: u32) {
        let Some(sandbox) = self.charges[slot as usize].as_ref().map(|c| c.sandbox) else { return };
        let h = id_hash(sandbox);
        self.by_id.insert_unique(spread(h), (slot, h), |e| spread(e.1));
    }

    fn unindex(&mut self, slot: u32, sandbox: SandboxKey) {
        let h = id_hash(sandbox);
        if let Ok(entry) = self.by_id.find_entry(spread(h), |e| e.0 == slot) {
            entry.remove();
        }
    }

    /// The usage of `key` at `now`.
    pub fn usage(&mut self, key: &Key, now: i64) -> Usage {
        let b = self.bucket(key);
        self.prune(b, now);
        self.buckets[b as usize].usage()
    }

    /// [`Ledger::reserve_in`] with `keys` (each rule's bucket found by its value).
    pub fn reserve(&mut self, sandbox: SandboxKey, keys: &[Key], cost: f64, now: i64) -> Result<(), Vec<Refusal>> {
        let buckets: Buckets = keys.iter().map(|k| self.bucket(k)).collect();
        self.reserve_in(sandbox, &buckets, cost, now).map(|_| ())
    }

    /// Reserves one launch of `cost` for provision `sandbox` in `buckets` (every rule that
    /// applies, from [`Ledger::plan_keys`]), at `now`: all or nothing. Returns the charge's
    /// slot (for [`Ledger::settle_in`]); on a refusal, every refusing rule's [`Refusal`] (in
    /// rule order) and nothing reserved.
    pub fn reserve_in(
        &mut self,
        sandbox: SandboxKey,
        buckets: &[u32],
        cost: f64,
        now: i64,
    ) -> Result<u32, Vec<Refusal>> {
        // A provision reserves again only after its previous launch settled or was skipped
        // (the machine settles first): a reservation still in flight under its id is given
        // back before anything is counted.
        if let Some(old) = self.slot_of(sandbox) {
            self.settle_slot(old, Settle::Nothing);
        }
        let mut refusals = Vec::new();
        for &b in buckets {
            self.prune(b, now);
            let bucket = &self.buckets[b as usize];
            if let Err(r) = check(&self.rules[bucket.rule], bucket.rule, &bucket.value, &bucket.usage(), cost, now) {
                refusals.push(r);
            }
        }
        if !refusals.is_empty() {
            return Err(refusals);
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.charges.push(None);
                (self.charges.len() - 1) as u32
            }
        };
        let mut places = SmallVec::with_capacity(buckets.len());
        for &b in buckets {
            let windowed = self.rules[self.buckets[b as usize].rule].window.is_some();
            let bucket = &mut self.buckets[b as usize];
            bucket.inflight += 1;
            let seq = if windowed {
                // Kept in time order: a clock that steps back does not reorder the window.
                let t = bucket.events.back().map_or(now, |e| e.at.max(now));
                bucket.events.push_back(Ev { at: t, cost, slot, state: EvState::Reserved });
                bucket.reserved_cost += cost;
                bucket.reserved_launches += 1;
                bucket.base + bucket.events.len() as u64 - 1
            } else {
                NO_EVENT
            };
            places.push(Place { bucket: b, seq });
        }
        self.charges[slot as usize] = Some(Charge { sandbox, at: now, cost, settled: false, live: Live::Held, places });
        self.index(slot);
        self.touch(sandbox);
        Ok(slot)
    }

    /// Settles provision `sandbox`'s reservation in flight (nothing happens without one).
    pub fn settle(&mut self, sandbox: SandboxKey, how: Settle) {
        if let Some(slot) = self.slot_of(sandbox) {
            self.settle_slot(slot, how);
        }
    }

    /// [`Ledger::settle`] of the charge [`Ledger::reserve_in`] put in `slot`, found there
    /// while it is still `sandbox`'s (else by its id).
    pub fn settle_in(&mut self, slot: u32, sandbox: SandboxKey, how: Settle) {
        match self.charges.get(slot as usize).and_then(Option::as_ref) {
            Some(c) if c.sandbox == sandbox => self.settle_slot(slot, how),
            _ => self.settle(sandbox, how),
        }
    }

    fn settle_slot(&mut self, slot: u32, how: Settle) {
        let Ledger { charges, buckets, .. } = self;
        let Some(c) = charges.get_mut(slot as usize).and_then(Option::as_mut) else { return };
        if c.settled {
            return;
        }
        let (cost, sandbox) = (c.cost, c.sandbox);
        for p in &c.places {
            let bucket = &mut buckets[p.bucket as usize];
            bucket.inflight = bucket.inflight.saturating_sub(1);
            match how {
                Settle::Allocated => bucket.live += 1,
                Settle::Unknown { until } => bucket.unknown.push((until, slot)),
                Settle::Nothing => {}
            }
            if let Some(e) = p.seq().and_then(|s| bucket.ev(s)) {
                if e.state == EvState::Reserved {
                    e.state = if how == Settle::Nothing { EvState::Gone } else { EvState::Used };
                    bucket.reserved_cost -= cost;
                    bucket.reserved_launches = bucket.reserved_launches.saturating_sub(1);
                    if how != Settle::Nothing {
                        bucket.used_cost += cost;
                        bucket.used_launches += 1;
                    }
                }
            }
        }
        match how {
            Settle::Nothing => self.remove(slot),
            Settle::Allocated | Settle::Unknown { .. } => {
                c.settled = true;
                c.live = match how {
                    Settle::Unknown { until } => Live::Until(until),
                    _ => Live::Held,
                };
            }
        }
        self.touch(sandbox);
    }

    /// The sandbox of provision `sandbox` is gone (destroyed, or reclaimed): its concurrent
    /// slot is given back. Its cost and launch stay charged. True when it held a slot.
    pub fn release(&mut self, sandbox: SandboxKey) -> bool {
        let Some(slot) = self.slot_of(sandbox) else { return false };
        let Ledger { charges, buckets, .. } = self;
        let Some(c) = charges[slot as usize].as_mut() else { return false };
        if !c.settled || c.live == Live::Released {
            return false;
        }
        let was = std::mem::replace(&mut c.live, Live::Released);
        for p in &c.places {
            let bucket = &mut buckets[p.bucket as usize];
            match was {
                Live::Held => bucket.live = bucket.live.saturating_sub(1),
                Live::Until(_) => bucket.unknown.retain(|(_, s)| *s != slot),
                Live::Released => {}
            }
        }
        self.touch(sandbox);
        self.forget_if_done(slot);
        true
    }

    /// The charge made under provision `from` now belongs to sandbox `to`: a warm claim
    /// hands out a member whose id (in its stamp) was made when it was launched, so
    /// `destroy` and `settleCost` name `to`. Nothing happens without a charge under `from`.
    pub fn rekey(&mut self, from: SandboxKey, to: SandboxKey) {
        if from == to {
            return;
        }
        let Some(slot) = self.slot_of(from) else { return };
        // A charge already under `to` (none is: warm members are charged to nobody) is
        // no longer found by it.
        if let Some(other) = self.slot_of(to) {
            self.unindex(other, to);
        }
        self.unindex(slot, from);
        if let Some(c) = self.charge(slot) {
            c.sandbox = to;
        }
        self.index(slot);
        self.touch(from);
        self.touch(to);
    }

    /// Replaces provision `sandbox`'s cost (the estimate, or an earlier settlement) with
    /// `actual`, in the windows it was charged in. False when the ledger no longer knows it
    /// (never charged, or every window it counted in is over).
    pub fn settle_cost(&mut self, sandbox: SandboxKey, actual: f64) -> bool {
        let Some(slot) = self.slot_of(sandbox) else { return false };
        let Ledger { charges, buckets, .. } = self;
        let Some(c) = charges[slot as usize].as_mut() else { return false };
        let old = std::mem::replace(&mut c.cost, actual);
        for p in &c.places {
            let bucket = &mut buckets[p.bucket as usize];
            if let Some(e) = p.seq().and_then(|s| bucket.ev(s)) {
                e.cost = actual;
                match e.state {
                    EvState::Used => bucket.used_cost += actual - old,
                    EvState::Reserved => bucket.reserved_cost += actual - old,
                    EvState::Gone => {}
                }
            }
        }
        self.touch(sandbox);
        true
    }

    /// Every key the ledger knows, per rule, at `now` (rule order, then first use).
    pub fn status(&mut self, now: i64) -> Vec<StatusRow> {
        let mut out = Vec::with_capacity(self.buckets.len());
        for b in 0..self.buckets.len() {
            self.prune(b as u32, now);
            let bucket = &self.buckets[b];
            let usage = bucket.usage();
            let resets_at = self.rules[bucket.rule].window.as_ref().and_then(|w| w.resets_at(now, usage.oldest));
            out.push(StatusRow { rule: bucket.rule, value: bucket.value.to_string(), usage, resets_at });
        }
        out.sort_by_key(|r| r.rule);
        out
    }

    /// Charges changed since the last call, as a durable store writes them: the record, or
    /// None when the charge is gone (delete its row). Empty unless persisted.
    pub fn take_dirty(&mut self) -> Vec<(SandboxKey, Option<ChargeRecord>)> {
        let Some(d) = &mut self.dirty else { return Vec::new() };
        let mut ids = std::mem::take(d);
        ids.sort_unstable_by_key(|k| k.to_string());
        ids.dedup();
        ids.into_iter().map(|s| (s, self.record(s))).collect()
    }

    fn record(&self, s: SandboxKey) -> Option<ChargeRecord> {
        let c = self.charges[self.slot_of(s)? as usize].as_ref()?;
        Some(ChargeRecord {
            sandbox: s,
            at: c.at,
            cost: c.cost,
            settled: c.settled,
            live: match c.live {
                Live::Held => Some(None),
                Live::Until(t) => Some(Some(t)),
                Live::Released => None,
            },
            keys: c
                .places
                .iter()
                .map(|p| {
                    let bucket = &self.buckets[p.bucket as usize];
                    (self.rules[bucket.rule].id.clone(), bucket.value.to_string())
                })
                .collect(),
        })
    }

    /// Rebuilds charges from a durable store (oldest first) after a restart. A charge whose
    /// launch was in flight when its process stopped is settled as outcome unknown, its slot
    /// held until `unknown_until`; charges of rules that no longer exist are dropped.
    pub fn restore(&mut self, mut records: Vec<ChargeRecord>, unknown_until: i64) {
        records.sort_by_key(|r| r.at);
        for r in records {
            let buckets: Buckets = r
                .keys
                .iter()
                .filter_map(|(id, value)| {
                    let rule = self.rules.iter().position(|x| &x.id == id)?;
                    Some(self.bucket_of(rule, value))
                })
                .collect();
            if buckets.is_empty() || self.slot_of(r.sandbox).is_some() {
                continue;
            }
            let live = match (r.settled, r.live) {
                (_, None) => Live::Released,
                (false, Some(_)) => Live::Until(unknown_until),
                (true, Some(None)) => Live::Held,
                (true, Some(Some(t))) => Live::Until(t),
            };
            let slot = self.charges.len() as u32;
            let mut places = SmallVec::with_capacity(buckets.len());
            for b in buckets {
                let windowed = self.rules[self.buckets[b as usize].rule].window.is_some();
                let bucket = &mut self.buckets[b as usize];
                match live {
                    Live::Held => bucket.live += 1,
                    Live::Until(t) => bucket.unknown.push((t, slot)),
                    Live::Released => {}
                }
                let seq = if windowed {
                    let t = bucket.events.back().map_or(r.at, |e| e.at.max(r.at));
                    bucket.events.push_back(Ev { at: t, cost: r.cost, slot, state: EvState::Used });
                    bucket.used_cost += r.cost;
                    bucket.used_launches += 1;
                    bucket.base + bucket.events.len() as u64 - 1
                } else {
                    NO_EVENT
                };
                places.push(Place { bucket: b, seq });
            }
            self.charges.push(Some(Charge { sandbox: r.sandbox, at: r.at, cost: r.cost, settled: true, live, places }));
            self.index(slot);
        }
    }

    /// Number of charges the ledger keeps (memory tests).
    pub fn charges(&self) -> usize {
        self.by_id.len()
    }
}

/// The hash a charge is indexed by (32 bits: kept beside its slot).
fn id_hash(sandbox: SandboxKey) -> u32 {
    use std::hash::BuildHasher;
    let h = rustc_hash::FxBuildHasher.hash_one(sandbox);
    (h >> 32) as u32 ^ h as u32
}

/// [`id_hash`] as the table's 64-bit hash (its bucket from the low bits, its tag from the top).
fn spread(h: u32) -> u64 {
    u64::from(h) << 32 | u64::from(h)
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
    use proptest::prelude::*;
    use serde_json::json;

    const MIN: i64 = 60_000;
    const HOUR: i64 = 3_600_000;

    fn sbx(n: u128) -> SandboxKey {
        SandboxKey::parse(&format!("sbx_{n:032x}")).expect("a key")
    }

    fn rules(v: Value) -> Vec<Rule> {
        rules_of_option(&v).expect("valid rules")
    }

    fn err(v: Value) -> (String, String) {
        match rules_of_option(&v) {
            Err(CoreError::InvalidConfiguration { field, expectation, .. }) => (field, expectation),
            other => panic!("{other:?}"),
        }
    }

    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>().expect("a timestamp").as_millisecond()
    }

    fn key(rule: usize, v: &str) -> Key {
        Key { rule, value: v.into() }
    }

    fn cost_rule(limit: f64, window: Value) -> Vec<Rule> {
        rules(json!([{ "id": "spend", "key": { "label": "tenant" }, "limit": { "cost": limit }, "window": window }]))
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
        assert_eq!(r[0].limits, Limits { cost: Some(10.0), launches: Some(5), concurrent: None });
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
        assert_eq!(keys_of(&r, &[("team".into(), "x".into())]), Err(1));
        assert_eq!(missing_field(&r[1]), "launch.labels.tenant");
    }

    #[test]
    fn must_not_fire_a_missing_allow_rule_is_skipped_and_present_labels_key_their_rules() {
        let r = rules(json!([
            { "id": "a", "key": { "label": "team" }, "limit": { "concurrent": 1 }, "missing": "allow" },
            { "id": "b", "key": { "label": "tenant" }, "limit": { "concurrent": 1 } },
        ]));
        assert_eq!(keys_of(&r, &[("tenant".into(), "acme".into())]), Ok(vec![key(1, "acme")]));
        let both = [("team".into(), "x".into()), ("tenant".into(), "acme".into())];
        assert_eq!(keys_of(&r, &both), Ok(vec![key(0, "x"), key(1, "acme")]));
    }

    #[test]
    fn must_fire_a_cost_that_does_not_fit_is_refused_and_must_not_fire_one_that_fits() {
        let mut l = Ledger::new(cost_rule(3.0, json!({ "slidingMs": HOUR })), false);
        let k = [key(0, "acme")];
        assert!(l.reserve(sbx(1), &k, 2.0, 0).is_ok());
        let refused = l.reserve(sbx(2), &k, 2.0, 1).unwrap_err();
        assert_eq!(refused.len(), 1);
        let r = &refused[0];
        assert_eq!((r.dimension, r.limit, r.used, r.reserved, r.need), (Dimension::Cost, 3.0, 0.0, 2.0, 2.0));
        assert!(r.retryable, "the reservation in flight could free room");
        // A cheaper pool still fits (1 + 2 <= 3).
        assert!(l.reserve(sbx(2), &k, 1.0, 2).is_ok());
    }

    #[test]
    fn must_fire_a_refusal_is_not_retryable_when_used_alone_leaves_no_room() {
        let mut l = Ledger::new(cost_rule(3.0, json!({ "slidingMs": HOUR })), false);
        let k = [key(0, "acme")];
        l.reserve(sbx(1), &k, 2.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        let r = &l.reserve(sbx(2), &k, 2.0, 1).unwrap_err()[0];
        assert_eq!((r.used, r.reserved, r.retryable), (2.0, 0.0, false));
        assert_eq!(r.resets_at, Some(HOUR), "the sliding window frees the oldest charge an hour after it");
        // Over the limit on its own: never retryable, even with reservations in flight.
        l.reserve(sbx(3), &k, 1.0, 2).unwrap();
        let r = &l.reserve(sbx(4), &k, 5.0, 3).unwrap_err()[0];
        assert!(!r.retryable);
    }

    #[test]
    fn must_fire_launches_and_concurrent_limits_refuse_at_their_bounds() {
        let r = rules(json!([
            { "id": "n", "key": { "label": "t" }, "limit": { "launches": 2 }, "window": { "slidingMs": MIN } },
            { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 1 } },
        ]));
        let mut l = Ledger::new(r, false);
        let k = [key(0, "a"), key(1, "a")];
        l.reserve(sbx(1), &k, 0.0, 0).unwrap();
        let refused = l.reserve(sbx(2), &k, 0.0, 1).unwrap_err();
        assert_eq!(refused.iter().map(|r| r.dimension).collect::<Vec<_>>(), [Dimension::Concurrent]);
        assert!(refused[0].retryable && refused[0].resets_at.is_none());
        l.settle(sbx(1), Settle::Allocated);
        assert!(!l.reserve(sbx(2), &k, 0.0, 2).unwrap_err()[0].retryable, "a live sandbox is not in flight");
        assert!(l.release(sbx(1)), "destroy gives the slot back");
        l.reserve(sbx(2), &k, 0.0, 3).unwrap();
        l.settle(sbx(2), Settle::Allocated);
        l.release(sbx(2));
        let refused = l.reserve(sbx(3), &k, 0.0, 4).unwrap_err();
        assert_eq!(refused[0].dimension, Dimension::Launches, "2 launches per minute, however many were destroyed");
        assert!(l.reserve(sbx(3), &k, 0.0, MIN + 1).is_ok(), "the first launch left the window");
    }

    #[test]
    fn must_not_fire_keys_are_separate_budgets() {
        let mut l = Ledger::new(cost_rule(1.0, json!({ "slidingMs": HOUR })), false);
        l.reserve(sbx(1), &[key(0, "acme")], 1.0, 0).unwrap();
        assert!(l.reserve(sbx(2), &[key(0, "globex")], 1.0, 0).is_ok());
        assert!(l.reserve(sbx(3), &[key(0, "acme")], 1.0, 0).is_err());
    }

    #[test]
    fn must_fire_a_pre_allocation_failure_gives_everything_back() {
        let r = rules(json!([
            { "id": "s", "key": { "label": "t" }, "limit": { "cost": 1, "launches": 1 }, "window": { "every": "day" } },
            { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 1 } },
        ]));
        let mut l = Ledger::new(r, false);
        let k = [key(0, "a"), key(1, "a")];
        l.reserve(sbx(1), &k, 1.0, 0).unwrap();
        l.settle(sbx(1), Settle::Nothing);
        assert_eq!(l.usage(&k[0], 0), Usage::default());
        assert_eq!(l.usage(&k[1], 0), Usage::default());
        assert!(l.reserve(sbx(2), &k, 1.0, 0).is_ok());
        assert_eq!(l.charges(), 1);
    }

    #[test]
    fn must_not_fire_success_and_outcome_unknown_keep_the_charge() {
        let r = rules(json!([
            { "id": "s", "key": { "label": "t" }, "limit": { "cost": 2 }, "window": { "every": "day" } },
            { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 2 } },
        ]));
        let mut l = Ledger::new(r, false);
        let k = [key(0, "a"), key(1, "a")];
        l.reserve(sbx(1), &k, 1.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        l.reserve(sbx(2), &k, 1.0, 0).unwrap();
        l.settle(sbx(2), Settle::Unknown { until: 500 });
        let u = l.usage(&k[0], 10);
        assert_eq!((u.used_cost, u.reserved_cost, u.used_launches), (2.0, 0.0, 2));
        assert_eq!(l.usage(&k[1], 10).live, 2);
        // The outcome-unknown slot lapses at its settle window; its cost stays charged.
        assert_eq!(l.usage(&k[1], 500).live, 1);
        assert_eq!(l.usage(&k[0], 500).used_cost, 2.0);
    }

    #[test]
    fn must_fire_a_rekeyed_charge_is_released_by_its_new_id_and_must_not_fire_by_the_old() {
        let mut l = Ledger::new(
            rules(
                json!([{"id": "c", "key": {"label": "t"}, "limit": {"concurrent": 1, "launches": 5}, "window": {"slidingMs": 60000}}]),
            ),
            false,
        );
        let buckets = l.plan_keys(&[("t".to_string(), "a".to_string())]).unwrap();
        l.reserve_in(sbx(1), &buckets, 1.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        l.rekey(sbx(1), sbx(2));
        assert!(!l.release(sbx(1)), "the old id holds nothing");
        assert!(l.reserve_in(sbx(3), &buckets, 1.0, 1).is_err(), "the slot is still held");
        assert!(l.settle_cost(sbx(2), 2.0), "the new id names the charge");
        assert!(l.release(sbx(2)), "the new id gives the slot back");
        assert!(l.reserve_in(sbx(3), &buckets, 1.0, 2).is_ok());
    }

    #[test]
    fn must_fire_settle_cost_replaces_the_estimate_and_must_not_fire_for_an_unknown_sandbox() {
        let mut l = Ledger::new(cost_rule(10.0, json!({ "every": "hour" })), false);
        let k = [key(0, "a")];
        l.reserve(sbx(1), &k, 2.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        assert!(l.settle_cost(sbx(1), 7.5));
        assert_eq!(l.usage(&k[0], 1).used_cost, 7.5);
        assert!(l.reserve(sbx(2), &k, 3.0, 2).is_err(), "7.5 + 3 > 10");
        assert!(!l.settle_cost(sbx(9), 1.0));
        assert_eq!(l.usage(&k[0], 1).used_cost, 7.5);
    }

    #[test]
    fn must_fire_a_calendar_window_resets_at_midnight_in_its_zone_and_must_not_fire_before() {
        let mut l = Ledger::new(cost_rule(1.0, json!({ "every": "day", "timeZone": "America/New_York" })), false);
        let k = [key(0, "a")];
        // 23:30 in New York (EST, UTC-5) is 04:30 UTC the next day.
        let late = ms("2026-01-15T04:30:00Z");
        l.reserve(sbx(1), &k, 1.0, late).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        let r = &l.reserve(sbx(2), &k, 1.0, ms("2026-01-15T04:59:59.999Z")).unwrap_err()[0];
        assert_eq!(r.resets_at, Some(ms("2026-01-15T05:00:00Z")), "midnight in New York");
        assert!(l.reserve(sbx(2), &k, 1.0, ms("2026-01-15T05:00:00Z")).is_ok());
    }

    #[test]
    fn must_fire_a_day_across_the_spring_dst_change_is_23_hours_long() {
        let zone = TimeZone::get("Europe/Berlin").unwrap();
        // 2026-03-29: clocks go from 02:00 CET to 03:00 CEST.
        let w = Window::Calendar { every: Every::Day, zone };
        let noon = ms("2026-03-29T10:00:00Z");
        assert_eq!(w.since(noon), ms("2026-03-28T23:00:00Z"), "midnight CET");
        assert_eq!(w.resets_at(noon, None), Some(ms("2026-03-29T22:00:00Z")), "midnight CEST");
        let mut l = Ledger::new(cost_rule(1.0, json!({ "every": "day", "timeZone": "Europe/Berlin" })), false);
        let k = [key(0, "a")];
        l.reserve(sbx(1), &k, 1.0, noon).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        // 23:59:59 CEST is within the same 23-hour day: still refused…
        assert!(l.reserve(sbx(2), &k, 1.0, ms("2026-03-29T21:59:59Z")).is_err());
        // …and a UTC-day rule would have reset two hours ago, which this one must not.
        assert!(l.reserve(sbx(2), &k, 1.0, ms("2026-03-29T22:00:00Z")).is_ok());
    }

    #[test]
    fn must_fire_a_day_across_the_autumn_dst_change_is_25_hours_long_and_hours_follow_the_clock() {
        let zone = TimeZone::get("Europe/Berlin").unwrap();
        // 2026-10-25: clocks go from 03:00 CEST back to 02:00 CET.
        let day = Window::Calendar { every: Every::Day, zone: zone.clone() };
        let t = ms("2026-10-25T12:00:00Z");
        let (s, e) = (day.since(t), day.resets_at(t, None).unwrap());
        assert_eq!((s, e), (ms("2026-10-24T22:00:00Z"), ms("2026-10-25T23:00:00Z")));
        assert_eq!(e - s, 25 * HOUR);
        // The repeated 02:00-03:00 hour is two windows, each an hour long.
        let hour = Window::Calendar { every: Every::Hour, zone };
        let first = ms("2026-10-25T00:30:00Z"); // 02:30 CEST
        let second = ms("2026-10-25T01:30:00Z"); // 02:30 CET
        assert_eq!(hour.since(first), ms("2026-10-25T00:00:00Z"));
        assert_eq!(hour.since(second), ms("2026-10-25T01:00:00Z"));
        assert_eq!(hour.resets_at(first, None), Some(hour.since(second)));
    }

    #[test]
    fn must_not_fire_hours_in_a_half_hour_zone_start_at_half_past_utc() {
        let hour = Window::Calendar { every: Every::Hour, zone: TimeZone::get("Asia/Kolkata").unwrap() };
        let t = ms("2026-05-01T10:10:00Z"); // 15:40 IST
        assert_eq!(hour.since(t), ms("2026-05-01T09:30:00Z"));
        assert_eq!(hour.resets_at(t, None), Some(ms("2026-05-01T10:30:00Z")));
    }

    #[test]
    fn weeks_start_on_monday_and_months_on_the_first_in_the_zone() {
        let utc = TimeZone::get("UTC").unwrap();
        let week = Window::Calendar { every: Every::Week, zone: utc.clone() };
        let t = ms("2026-01-15T12:00:00Z"); // a Thursday
        assert_eq!(week.since(t), ms("2026-01-12T00:00:00Z"));
        assert_eq!(week.resets_at(t, None), Some(ms("2026-01-19T00:00:00Z")));
        let month = Window::Calendar { every: Every::Month, zone: TimeZone::get("Asia/Tokyo").unwrap() };
        assert_eq!(month.since(ms("2026-02-28T16:00:00Z")), ms("2026-02-28T15:00:00Z"), "March 1st in Tokyo");
        let minute = Window::Calendar { every: Every::Minute, zone: utc };
        assert_eq!(minute.since(ms("2026-01-01T00:00:59.999Z")), ms("2026-01-01T00:00:00Z"));
    }

    #[test]
    fn must_fire_a_sliding_window_forgets_a_charge_exactly_its_length_later() {
        let mut l = Ledger::new(cost_rule(1.0, json!({ "slidingMs": 1000 })), false);
        let k = [key(0, "a")];
        l.reserve(sbx(1), &k, 1.0, 5_000).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        assert!(l.reserve(sbx(2), &k, 1.0, 5_999).is_err(), "must not fire 1 ms before");
        assert!(l.reserve(sbx(2), &k, 1.0, 6_000).is_ok());
    }

    #[test]
    fn a_window_that_rolls_over_mid_launch_does_not_double_count_the_settlement() {
        let mut l = Ledger::new(cost_rule(1.0, json!({ "every": "minute" })), false);
        let k = [key(0, "a")];
        l.reserve(sbx(1), &k, 1.0, 59_000).unwrap();
        // The minute ends while the launch is in flight; it settles in the next minute.
        assert_eq!(l.usage(&k[0], 60_000).reserved_cost, 0.0);
        l.settle(sbx(1), Settle::Allocated);
        assert_eq!(l.usage(&k[0], 60_001).used_cost, 0.0);
        assert!(l.reserve(sbx(2), &k, 1.0, 60_002).is_ok());
    }

    #[test]
    fn must_not_fire_a_given_back_charge_leaving_its_window_does_not_forget_the_charge_in_its_slot() {
        // A reservation given back leaves a spent event behind; its slot is reused at once.
        // When that event leaves the window, the new charge in the slot must stay.
        let r = rules(json!([
            { "id": "s", "key": { "label": "t" }, "limit": { "launches": 10 }, "window": { "slidingMs": 100 } },
            { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 10 } },
        ]));
        let mut l = Ledger::new(r, false);
        let k = [key(0, "a"), key(1, "a")];
        l.reserve(sbx(1), &k, 0.0, 0).unwrap();
        l.settle(sbx(1), Settle::Nothing);
        l.reserve(sbx(2), &k, 0.0, 50).unwrap();
        l.settle(sbx(2), Settle::Allocated);
        assert_eq!(l.usage(&k[0], 120).used_launches, 1, "the spent event left, the launch counts");
        assert_eq!(l.charges(), 1);
        assert!(l.settle_cost(sbx(2), 1.0), "the charge in the reused slot is still known");
        assert!(l.release(sbx(2)));
        assert_eq!(l.usage(&k[1], 120).live, 0);
        assert_eq!(l.charges(), 1, "released, but still counted in its window");
        l.usage(&k[0], 151);
        assert_eq!(l.charges(), 0, "forgotten once its window is over");
    }

    #[test]
    fn forgotten_charges_free_their_memory() {
        let r = rules(json!([
            { "id": "s", "key": { "label": "t" }, "limit": { "launches": 1000000 }, "window": { "slidingMs": 10 } },
            { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 1000000 } },
        ]));
        let mut l = Ledger::new(r, false);
        let k = [key(0, "a"), key(1, "a")];
        for i in 0..1_000u128 {
            l.reserve(sbx(i + 1), &k, 0.0, i as i64).unwrap();
            l.settle(sbx(i + 1), Settle::Allocated);
            l.release(sbx(i + 1));
        }
        l.usage(&k[0], 10_000);
        assert_eq!(l.charges(), 0);
    }

    #[test]
    fn persisted_charges_restore_the_spend_after_a_restart() {
        let r = || {
            rules(json!([
                { "id": "s", "key": { "label": "t" }, "limit": { "cost": 3 }, "window": { "every": "day" } },
                { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 2 } },
            ]))
        };
        let mut l = Ledger::new(r(), true);
        let k = [key(0, "a"), key(1, "a")];
        l.reserve(sbx(1), &k, 1.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        l.reserve(sbx(2), &k, 1.5, 1).unwrap();
        let rows: Vec<ChargeRecord> = l.take_dirty().into_iter().filter_map(|(_, r)| r).collect();
        assert_eq!(rows.len(), 2);
        assert!(l.take_dirty().is_empty());
        let mut again = Ledger::new(r(), true);
        again.restore(rows, 100);
        assert_eq!(again.usage(&k[0], 2).used_cost, 2.5, "a restart does not reset spend");
        assert_eq!(again.usage(&k[1], 2).live, 2, "the launch in flight is held as outcome unknown");
        assert_eq!(again.usage(&k[1], 100).live, 1);
        assert!(again.release(sbx(1)));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Reserve { key: u8, cost: u8 },
        Settle { which: u8, how: u8 },
        Release { which: u8 },
        Wait { ms: u16 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..2, 0u8..5).prop_map(|(key, cost)| Op::Reserve { key, cost }),
            (any::<u8>(), 0u8..3).prop_map(|(which, how)| Op::Settle { which, how }),
            any::<u8>().prop_map(|which| Op::Release { which }),
            (0u16..400).prop_map(|ms| Op::Wait { ms }),
        ]
    }

    proptest! {
        /// No admission sequence ever lets used + reserved exceed a limit, in any window
        /// kind, whatever the settlements, destroys and waits in between.
        #[test]
        fn no_admission_sequence_exceeds_a_limit(ops in proptest::collection::vec(op(), 1..200)) {
            let r = rules(json!([
                { "id": "cost", "key": { "label": "t" }, "limit": { "cost": 7 }, "window": { "slidingMs": 1000 } },
                { "id": "day", "key": { "label": "t" }, "limit": { "cost": 9, "launches": 5 }, "window": { "every": "minute", "timeZone": "Europe/Berlin" } },
                { "id": "live", "key": { "label": "t" }, "limit": { "concurrent": 3 } },
            ]));
            let mut l = Ledger::new(r, false);
            let mut now = 1_790_000_000_000i64;
            let mut made: Vec<SandboxKey> = Vec::new();
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Reserve { key: k, cost } => {
                        let v = if k == 0 { "a" } else { "b" };
                        let keys = [key(0, v), key(1, v), key(2, v)];
                        let s = sbx(i as u128 + 1);
                        if l.reserve(s, &keys, f64::from(cost), now).is_ok() {
                            made.push(s);
                        }
                    }
                    Op::Settle { which, how } if !made.is_empty() => {
                        let s = made[which as usize % made.len()];
                        let how = match how { 0 => Settle::Allocated, 1 => Settle::Nothing, _ => Settle::Unknown { until: now + 300 } };
                        l.settle(s, how);
                    }
                    Op::Release { which } if !made.is_empty() => {
                        let s = made[which as usize % made.len()];
                        l.release(s);
                    }
                    Op::Wait { ms } => now += i64::from(ms),
                    _ => {}
                }
                for v in ["a", "b"] {
                    let c = l.usage(&key(0, v), now);
                    prop_assert!(c.used_cost + c.reserved_cost <= 7.0 + 1e-9, "{c:?}");
                    let d = l.usage(&key(1, v), now);
                    prop_assert!(d.used_cost + d.reserved_cost <= 9.0 + 1e-9, "{d:?}");
                    prop_assert!(d.used_launches + d.reserved_launches <= 5, "{d:?}");
                    let c = l.usage(&key(2, v), now);
                    prop_assert!(c.live + c.inflight <= 3, "{c:?}");
                }
            }
        }
    }
}
