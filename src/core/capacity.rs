//! Capacity: measurements, strict validation, admission and in-process reservations.
//!
//! Why reservations on top of measurements? A measurement is a point-in-time
//! observation, not a reservation: fifty concurrent provisions that each read "9 of 10
//! slots used" would all launch. So admission holds the amount it admitted from the check
//! until the launch settles (released on failure), and after a success keeps it as an
//! *assumed* allocation until a read that started after the launch reports usage that
//! includes it (Kubernetes' scheduler "assumes" pods the same way). Assumptions expire
//! after a TTL so a reader that never catches up cannot block a pool forever. The rule is
//! conservative: under concurrent destroys it may under-admit until the TTL, never
//! overshoot a limit that a sequential run would respect.
//!
//! A held launch's sandbox that is destroyed gives its hold back at once
//! ([`Ledger::release_sandbox`]): the hold stood for a sandbox that exists, and it no
//! longer does. Without that, a create-and-destroy burst kept a pool "full" against an
//! accurate read of an empty account until the TTL passed.

use crate::core::capabilities::Resources;
use crate::core::ids::SandboxKey;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Why a measurement is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnknownReason {
    /// No verified account limit configured for any dimension.
    LimitNotConfigured,
    /// The provider has no account-wide inventory this reader can use.
    NotSupported,
    /// A limit is configured but the pool's per-launch demand is not.
    DemandNotConfigured,
    /// The read did not finish within its deadline.
    Timeout,
    /// Transport failure or an unexpected HTTP status.
    ReadFailed,
    /// The answer did not have the documented shape or types.
    Malformed,
    /// The provider answered 429.
    RateLimited,
    /// The provider refused the credential (401/403).
    Unauthorized,
    /// Pagination did not end within the page bound.
    PageLimitExceeded,
}

impl UnknownReason {
    /// Every reason.
    pub const ALL: [UnknownReason; 9] = [
        UnknownReason::LimitNotConfigured,
        UnknownReason::NotSupported,
        UnknownReason::DemandNotConfigured,
        UnknownReason::Timeout,
        UnknownReason::ReadFailed,
        UnknownReason::Malformed,
        UnknownReason::RateLimited,
        UnknownReason::Unauthorized,
        UnknownReason::PageLimitExceeded,
    ];

    /// Stable code.
    pub fn code(self) -> &'static str {
        match self {
            UnknownReason::LimitNotConfigured => "LIMIT_NOT_CONFIGURED",
            UnknownReason::NotSupported => "NOT_SUPPORTED",
            UnknownReason::DemandNotConfigured => "DEMAND_NOT_CONFIGURED",
            UnknownReason::Timeout => "TIMEOUT",
            UnknownReason::ReadFailed => "READ_FAILED",
            UnknownReason::Malformed => "MALFORMED",
            UnknownReason::RateLimited => "RATE_LIMITED",
            UnknownReason::Unauthorized => "UNAUTHORIZED",
            UnknownReason::PageLimitExceeded => "PAGE_LIMIT_EXCEEDED",
        }
    }

    /// Parses a code.
    pub fn from_code(code: &str) -> Option<UnknownReason> {
        UnknownReason::ALL.into_iter().find(|r| r.code() == code)
    }
}

/// What happened when a pool's runtime was asked to list its stamped sandboxes
/// (reconcile's fallback finder, its label search).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFailure {
    /// The runtime has no label search.
    NoLabelSearch,
    /// The search threw or rejected (its text is the provider's: only the fact is kept).
    Threw,
    /// It did not answer within its deadline.
    TimedOut,
}

impl ListFailure {
    /// Why nothing of the pool could be said.
    pub fn reason(self) -> UnknownReason {
        match self {
            ListFailure::NoLabelSearch => UnknownReason::NotSupported,
            ListFailure::Threw => UnknownReason::ReadFailed,
            ListFailure::TimedOut => UnknownReason::Timeout,
        }
    }
}

/// One measured quota dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceMeasurement {
    /// `cpu`, `memory`, `disk`, `sandboxes` (or a custom reader's name).
    pub resource: String,
    /// Account-wide usage.
    pub used: f64,
    /// The verified limit.
    pub limit: f64,
    /// `vCPU`, `MiB`, `sandboxes`.
    pub unit: String,
    /// `limit - used` (may be negative when over quota).
    pub headroom: f64,
    /// The pool's allocation per launch.
    pub required: f64,
}

impl ResourceMeasurement {
    /// Builds a dimension, computing headroom.
    pub fn new(resource: &str, used: f64, limit: f64, unit: &str, required: f64) -> Self {
        ResourceMeasurement {
            resource: resource.into(),
            used,
            limit,
            unit: unit.into(),
            headroom: limit - used,
            required,
        }
    }
}

/// A capacity observation.
#[derive(Debug, Clone, PartialEq)]
pub enum Measurement {
    /// Every configured dimension was measured.
    Known(Vec<ResourceMeasurement>),
    /// Nothing trustworthy could be said.
    Unknown(UnknownReason),
}

impl Measurement {
    /// The public JSON shape.
    pub fn to_json(&self) -> Value {
        match self {
            Measurement::Known(rs) => json!({
                "status": "known",
                "resources": rs.iter().map(|r| json!({
                    "resource": r.resource, "used": r.used, "limit": r.limit, "unit": r.unit,
                    "headroom": r.headroom, "required": r.required,
                })).collect::<Vec<_>>(),
            }),
            Measurement::Unknown(reason) => json!({"status": "unknown", "reason": reason.code()}),
        }
    }
}

fn finite_non_negative(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite() && *x >= 0.0)
}

/// Validates a measurement from any reader (custom readers included) strictly: exactly the
/// documented shape, finite non-negative numbers, a headroom consistent with limit - used,
/// a known reason. Anything else is `MALFORMED` — never "room".
pub fn validate(value: &Value) -> Measurement {
    let malformed = Measurement::Unknown(UnknownReason::Malformed);
    let Value::Object(o) = value else { return malformed };
    match o.get("status").and_then(Value::as_str) {
        Some("unknown") => o
            .get("reason")
            .and_then(Value::as_str)
            .and_then(UnknownReason::from_code)
            .map_or(malformed, Measurement::Unknown),
        Some("known") => {
            let Some(Value::Array(items)) = o.get("resources") else { return malformed };
            if items.is_empty() {
                return malformed;
            }
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let resource = item.get("resource").and_then(Value::as_str).filter(|s| !s.is_empty());
                let unit = item.get("unit").and_then(Value::as_str).filter(|s| !s.is_empty());
                let used = finite_non_negative(item.get("used"));
                let limit = finite_non_negative(item.get("limit"));
                let required = finite_non_negative(item.get("required"));
                let headroom = item.get("headroom").and_then(Value::as_f64).filter(|x| x.is_finite());
                let (Some(resource), Some(unit), Some(used), Some(limit), Some(required), Some(headroom)) =
                    (resource, unit, used, limit, required, headroom)
                else {
                    return malformed;
                };
                let expected = limit - used;
                if (headroom - expected).abs() > 1e-9 * limit.abs().max(1.0) && !(expected < 0.0 && headroom == 0.0) {
                    return malformed;
                }
                if out.iter().any(|r: &ResourceMeasurement| r.resource == resource) {
                    return malformed;
                }
                out.push(ResourceMeasurement {
                    resource: resource.into(),
                    used,
                    limit,
                    unit: unit.into(),
                    headroom: expected,
                    required,
                });
            }
            Measurement::Known(out)
        }
        _ => malformed,
    }
}

/// The request's own need in a measured dimension (launch slots are always 1).
pub fn request_need(resource: &str, req: &Resources) -> f64 {
    match resource {
        "cpu" => req.cpu,
        "memory" => req.memory_mb,
        "disk" => req.disk_mb,
        "gpu" => req.gpu,
        "sandboxes" => 1.0,
        _ => 0.0,
    }
}

/// Outcome of an admission check.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Room for this launch; the amounts are now held under this token.
    Admitted(u64),
    /// A dimension is full: `resource`, `used + held + need > limit`.
    Exhausted {
        /// The first dimension without room.
        resource: String,
        /// Human detail, e.g. `sandboxes 10 + 0 held + 1 > 10`.
        detail: String,
    },
    /// The measurement could not support a decision.
    Unknown(UnknownReason),
}

#[derive(Debug, Clone)]
struct Hold {
    pool: usize,
    amounts: Vec<(String, f64)>,
    /// Per dimension, the usage a read must report before this hold counts as reflected:
    /// the admitting read's `used`, plus everything held at admission, plus this need.
    /// Everything admitted before this hold is inside that figure, so one read's usage
    /// cannot release two holds that it can only account for once.
    expect: Vec<(String, f64)>,
    /// Read sequence at which the launch settled successfully (None while in flight).
    settled_seq: Option<u64>,
    settled_at: Option<i64>,
    /// The provision's sandbox id, when the router said it (its destroy releases the hold).
    sandbox: Option<SandboxKey>,
}

/// Holds in-flight and assumed allocations per pool. One per router.
#[derive(Debug)]
pub struct Ledger {
    holds: HashMap<u64, Hold>,
    order: Vec<u64>,
    next_token: u64,
    seq: u64,
    ttl_ms: i64,
}

impl Ledger {
    /// A ledger whose assumptions expire `ttl_ms` after their launch settled (the router's
    /// clock: every instant below is its reading, epoch ms).
    pub fn new(ttl_ms: u64) -> Self {
        Ledger {
            holds: HashMap::new(),
            order: Vec::new(),
            next_token: 1,
            seq: 0,
            ttl_ms: ttl_ms.min(i64::MAX as u64) as i64,
        }
    }

    /// Marks the start of a read; pass the returned sequence to [`Ledger::admit`].
    pub fn begin_read(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn held(&self, pool: usize, resource: &str) -> f64 {
        self.order
            .iter()
            .filter_map(|t| self.holds.get(t))
            .filter(|h| h.pool == pool)
            .flat_map(|h| h.amounts.iter())
            .filter(|(r, _)| r == resource)
            .map(|(_, a)| *a)
            .sum()
    }

    /// Releases assumptions that a read started at `read_seq` reflects, and expired ones.
    fn reconcile(&mut self, pool: usize, read_seq: u64, m: &[ResourceMeasurement], now: i64) {
        let ttl = self.ttl_ms;
        // Expired assumptions go first.
        self.order.retain(|t| {
            let keep = match self.holds.get(t) {
                Some(h) => h.settled_at.is_none_or(|at| now.saturating_sub(at) < ttl),
                None => false,
            };
            if !keep {
                self.holds.remove(t);
            }
            keep
        });
        // A settled hold is reflected once a read that started after it settled reports, in
        // every dimension, at least the usage expected when it was admitted.
        let mut drop = Vec::new();
        for t in &self.order {
            let h = &self.holds[t];
            if h.pool != pool || h.settled_seq.is_none_or(|s| s >= read_seq) {
                continue;
            }
            let reflected =
                h.expect.iter().all(|(r, e)| m.iter().find(|x| &x.resource == r).is_some_and(|x| x.used + 1e-9 >= *e));
            if reflected {
                drop.push(*t);
            }
        }
        for t in drop {
            self.holds.remove(&t);
            self.order.retain(|x| *x != t);
        }
    }

    /// Checks `measurement` (already validated) for pool `pool`, given the request's
    /// resources, at `now`. On room, holds `max(required, request need)` per dimension.
    pub fn admit(
        &mut self,
        pool: usize,
        read_seq: u64,
        measurement: &Measurement,
        req: &Resources,
        now: i64,
    ) -> Admission {
        let m = match measurement {
            Measurement::Unknown(r) => return Admission::Unknown(*r),
            Measurement::Known(m) => m,
        };
        self.reconcile(pool, read_seq, m, now);
        let mut amounts = Vec::with_capacity(m.len());
        let mut expect = Vec::with_capacity(m.len());
        for r in m {
            let need = r.required.max(request_need(&r.resource, req));
            let held = self.held(pool, &r.resource);
            if r.used + held + need > r.limit + 1e-9 {
                return Admission::Exhausted {
                    resource: r.resource.clone(),
                    detail: format!(
                        "{} {} used + {} held + {} needed > {} limit",
                        r.resource, r.used, held, need, r.limit
                    ),
                };
            }
            amounts.push((r.resource.clone(), need));
            expect.push((r.resource.clone(), r.used + held + need));
        }
        let token = self.next_token;
        self.next_token += 1;
        self.holds.insert(token, Hold { pool, amounts, expect, settled_seq: None, settled_at: None, sandbox: None });
        self.order.push(token);
        Admission::Admitted(token)
    }

    /// Settles a held launch at `now`: a failure releases the hold; a success keeps it as an
    /// assumption until a later read reflects it (or the TTL passes).
    pub fn settle(&mut self, token: u64, success: bool, now: i64) {
        if !success {
            self.holds.remove(&token);
            self.order.retain(|t| *t != token);
            return;
        }
        self.seq += 1;
        let seq = self.seq;
        if let Some(h) = self.holds.get_mut(&token) {
            h.settled_seq = Some(seq);
            h.settled_at = Some(now);
        }
    }

    /// [`Ledger::settle`] for the launch of provision `sandbox`: a kept hold is given back
    /// when that sandbox is destroyed ([`Ledger::release_sandbox`]).
    pub fn settle_owned(&mut self, token: u64, success: bool, sandbox: Option<SandboxKey>, now: i64) {
        if success {
            if let Some(h) = self.holds.get_mut(&token) {
                h.sandbox = sandbox;
            }
        }
        self.settle(token, success, now);
    }

    /// The sandbox of provision `sandbox` was destroyed: its kept hold, if any, is released.
    /// True when there was one.
    pub fn release_sandbox(&mut self, sandbox: SandboxKey) -> bool {
        let Some(token) =
            self.order.iter().copied().find(|t| self.holds.get(t).is_some_and(|h| h.sandbox == Some(sandbox)))
        else {
            return false;
        };
        self.holds.remove(&token);
        self.order.retain(|t| *t != token);
        true
    }

    /// Total held (in flight + assumed) for a pool and dimension.
    pub fn held_for(&self, pool: usize, resource: &str) -> f64 {
        self.held(pool, resource)
    }
}

/// Whether a skipped pool's capacity was unknown or exhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipStatus {
    /// The measurement could not support a decision (or there is no reader).
    Unknown,
    /// A dimension is full.
    Exhausted,
}

impl SkipStatus {
    /// `UNKNOWN` or `EXHAUSTED`, as errors and events name it.
    pub fn name(self) -> &'static str {
        match self {
            SkipStatus::Unknown => "UNKNOWN",
            SkipStatus::Exhausted => "EXHAUSTED",
        }
    }
}

/// The capacity-skip reason when the shared ledger could not be asked.
pub const COORDINATOR_UNAVAILABLE: &str = "COORDINATOR_UNAVAILABLE";

/// The capacity dimensions the core knows (`capacity::request_need`); a reader's other
/// dimensions are counted as [`EXHAUSTED_OTHER`], since their names are the reader's text.
const DIMENSIONS: [(&str, &str); 5] = [
    ("cpu", "EXHAUSTED_CPU"),
    ("memory", "EXHAUSTED_MEMORY"),
    ("disk", "EXHAUSTED_DISK"),
    ("gpu", "EXHAUSTED_GPU"),
    ("sandboxes", "EXHAUSTED_SANDBOXES"),
];

/// A full dimension the core does not name.
pub const EXHAUSTED_OTHER: &str = "EXHAUSTED_OTHER";
/// A pool skipped without a capacity reader.
pub const NO_CAPACITY_READER: &str = "NO_CAPACITY_READER";
/// An unknown measurement whose reason is none of the core's (never expected: the machine
/// only records its own reasons; kept so the set stays closed whatever it is given).
pub const UNKNOWN_OTHER: &str = "UNKNOWN";

/// The bounded reason of a capacity skip (`sandbox_router_capacity_skips_total`'s
/// attribute `reason`): an unknown measurement's reason code as the event names it
/// (`TIMEOUT`, `READ_FAILED`, …, `NO_CAPACITY_READER`, `COORDINATOR_UNAVAILABLE`), or
/// `EXHAUSTED_<DIMENSION>` for a full dimension of the core's (`EXHAUSTED_OTHER` for any
/// other: a reader names its own dimensions).
pub fn skip_reason(status: SkipStatus, reason: &str) -> &'static str {
    match status {
        SkipStatus::Exhausted if reason == crate::core::pacing::RATE_LIMITED => crate::core::pacing::RATE_LIMITED,
        SkipStatus::Exhausted if reason == crate::core::pacing::COOLING_DOWN => crate::core::pacing::COOLING_DOWN,
        SkipStatus::Exhausted if reason == crate::core::queue::QUEUED => crate::core::queue::QUEUED,
        SkipStatus::Exhausted => DIMENSIONS.iter().find(|(d, _)| *d == reason).map_or(EXHAUSTED_OTHER, |(_, r)| r),
        SkipStatus::Unknown => match reason {
            NO_CAPACITY_READER => NO_CAPACITY_READER,
            COORDINATOR_UNAVAILABLE => COORDINATOR_UNAVAILABLE,
            _ => UnknownReason::from_code(reason).map_or(UNKNOWN_OTHER, UnknownReason::code),
        },
    }
}

/// Every value [`skip_reason`] can answer, for the documentation's table.
pub fn skip_reasons() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = UnknownReason::ALL.iter().map(|r| r.code()).collect();
    out.extend([NO_CAPACITY_READER, COORDINATOR_UNAVAILABLE, UNKNOWN_OTHER]);
    out.extend(DIMENSIONS.iter().map(|(_, r)| *r));
    out.push(EXHAUSTED_OTHER);
    // Pacing's RATE_LIMITED is also a reader's (`UnknownReason`): listed once.
    out.push(crate::core::pacing::COOLING_DOWN);
    out.push(crate::core::queue::QUEUED);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unlisted_pool_is_named_by_what_happened() {
        assert_eq!(ListFailure::NoLabelSearch.reason().code(), "NOT_SUPPORTED");
        assert_eq!(ListFailure::Threw.reason().code(), "READ_FAILED");
        assert_eq!(ListFailure::TimedOut.reason().code(), "TIMEOUT");
    }

    fn slots(used: f64, limit: f64) -> Measurement {
        Measurement::Known(vec![ResourceMeasurement::new("sandboxes", used, limit, "sandboxes", 1.0)])
    }

    #[test]
    fn admits_when_every_dimension_fits_and_refuses_when_one_does_not() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(9.0, 10.0), &Resources::default(), 0), Admission::Admitted(_)));
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(9.0, 10.0), &Resources::default(), 0), Admission::Exhausted { .. }));
    }

    #[test]
    fn request_resources_raise_the_need_above_configured_demand() {
        let m = Measurement::Known(vec![ResourceMeasurement::new("cpu", 6.0, 10.0, "vCPU", 2.0)]);
        let mut l = Ledger::new(60_000);
        let big = Resources { cpu: 5.0, ..Resources::default() };
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &m, &big, 0), Admission::Exhausted { .. }));
        let small = Resources { cpu: 1.0, ..Resources::default() };
        assert!(matches!(l.admit(0, s, &m, &small, 0), Admission::Admitted(_)));
        assert_eq!(l.held_for(0, "cpu"), 2.0);
    }

    fn sbx(n: u128) -> SandboxKey {
        SandboxKey::parse(&format!("sbx_{n:032x}")).unwrap()
    }

    #[test]
    fn must_fire_destroying_a_sandbox_releases_its_kept_hold_against_an_accurate_empty_read() {
        // The case: ten quick create-and-destroys against ten slots.
        let mut l = Ledger::new(60_000);
        for i in 0..10 {
            let s = l.begin_read();
            let Admission::Admitted(t) = l.admit(0, s, &slots(0.0, 10.0), &Resources::default(), 0) else { panic!() };
            l.settle_owned(t, true, Some(sbx(i)), 0);
        }
        for i in 0..10 {
            assert!(l.release_sandbox(sbx(i)), "hold {i}");
        }
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(0.0, 10.0), &Resources::default(), 0), Admission::Admitted(_)));
        assert_eq!(l.held_for(0, "sandboxes"), 1.0);
    }

    #[test]
    fn must_not_fire_a_live_sandbox_keeps_its_hold_and_another_destroy_releases_nothing() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), 0) else { panic!() };
        l.settle_owned(t, true, Some(sbx(1)), 0);
        assert!(!l.release_sandbox(sbx(2)), "another sandbox's destroy");
        let s = l.begin_read();
        // A lagging read of an empty account is still refused: the sandbox exists.
        assert!(matches!(l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), 0), Admission::Exhausted { .. }));
        // A failed launch's hold was released at once and names no sandbox.
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), 0) else { panic!() };
        l.settle_owned(t, false, Some(sbx(1)), 0);
        assert!(!l.release_sandbox(sbx(1)));
    }

    #[test]
    fn failure_releases_the_hold() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s, &slots(9.0, 10.0), &Resources::default(), 0) else { panic!() };
        l.settle(t, false, 0);
        assert_eq!(l.held_for(0, "sandboxes"), 0.0);
    }

    #[test]
    fn success_is_held_until_a_later_read_reflects_it() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), 0) else { panic!() };
        l.settle(t, true, 0);
        // A lagging read (still 0 used) must not admit a second launch.
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), 0), Admission::Exhausted { .. }));
        // A read that reflects the sandbox releases the assumption; the limit itself refuses.
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(1.0, 1.0), &Resources::default(), 0), Admission::Exhausted { .. }));
        assert_eq!(l.held_for(0, "sandboxes"), 0.0);
    }

    #[test]
    fn a_read_started_before_the_launch_settled_does_not_release_it() {
        let mut l = Ledger::new(60_000);
        let s0 = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s0, &slots(0.0, 5.0), &Resources::default(), 0) else { panic!() };
        let early = l.begin_read();
        l.settle(t, true, 0);
        let _ = l.admit(0, early, &slots(1.0, 5.0), &Resources::default(), 0);
        // The early read may not have seen the new sandbox even though its used is 1.
        assert!(l.held_for(0, "sandboxes") >= 1.0);
    }

    #[test]
    fn assumptions_expire_after_the_ttl() {
        let mut l = Ledger::new(10);
        let now = 1_000;
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), now) else { panic!() };
        l.settle(t, true, now);
        let s = l.begin_read();
        let later = now + 20;
        assert!(matches!(l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), later), Admission::Admitted(_)));
    }

    #[test]
    fn holds_are_per_pool() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), 0), Admission::Admitted(_)));
        assert!(matches!(l.admit(1, s, &slots(0.0, 1.0), &Resources::default(), 0), Admission::Admitted(_)));
    }

    #[test]
    fn strict_validation_refuses_bad_shapes() {
        let good = json!({"status": "known", "resources": [
            {"resource": "sandboxes", "used": 3, "limit": 10, "unit": "sandboxes", "headroom": 7, "required": 1}]});
        assert!(matches!(validate(&good), Measurement::Known(_)));
        for bad in [
            json!({"status": "known", "resources": []}),
            json!({"status": "known", "resources": [{"resource": "cpu", "used": "3", "limit": 10, "unit": "vCPU", "headroom": 7, "required": 1}]}),
            json!({"status": "known", "resources": [{"resource": "cpu", "used": 3, "limit": 10, "unit": "vCPU", "headroom": 99, "required": 1}]}),
            json!({"status": "known", "resources": [{"resource": "cpu", "used": -1, "limit": 10, "unit": "vCPU", "headroom": 11, "required": 1}]}),
            json!({"status": "known", "resources": [{"resource": "cpu", "used": 1, "limit": 10, "unit": "vCPU", "headroom": 9}]}),
            json!({"status": "unknown", "reason": "SOMETHING"}),
            json!({"status": "maybe"}),
            json!(null),
            json!("known"),
        ] {
            assert_eq!(validate(&bad), Measurement::Unknown(UnknownReason::Malformed), "{bad}");
        }
        assert_eq!(
            validate(&json!({"status": "unknown", "reason": "TIMEOUT"})),
            Measurement::Unknown(UnknownReason::Timeout)
        );
    }

    fn item(resource: &str, used: f64, limit: f64, headroom: f64) -> Value {
        json!({"status": "known", "resources": [
            {"resource": resource, "used": used, "limit": limit, "unit": "u", "headroom": headroom, "required": 1}]})
    }

    fn is_malformed(v: &Value) -> bool {
        validate(v) == Measurement::Unknown(UnknownReason::Malformed)
    }

    #[test]
    fn to_json_is_the_shape_validate_accepts() {
        let known = Measurement::Known(vec![
            ResourceMeasurement::new("cpu", 1.5, 10.0, "vCPU", 1.0),
            ResourceMeasurement::new("memory", 2048.0, 1024.0, "MiB", 512.0),
        ]);
        assert_eq!(
            known.to_json(),
            json!({"status": "known", "resources": [
                {"resource": "cpu", "used": 1.5, "limit": 10.0, "unit": "vCPU", "headroom": 8.5, "required": 1.0},
                {"resource": "memory", "used": 2048.0, "limit": 1024.0, "unit": "MiB", "headroom": -1024.0, "required": 512.0}]})
        );
        assert_eq!(validate(&known.to_json()), known);
        for reason in UnknownReason::ALL {
            let m = Measurement::Unknown(reason);
            assert_eq!(m.to_json(), json!({"status": "unknown", "reason": reason.code()}));
            assert_eq!(validate(&m.to_json()), m, "{reason:?}");
        }
    }

    #[test]
    fn must_fire_a_headroom_off_by_one_unit_is_malformed() {
        assert!(is_malformed(&item("cpu", 3.0, 10.0, 8.0)));
        // The tolerance is relative to the limit, but one whole unit is never noise.
        assert!(is_malformed(&item("memory", 100.0, 1e6, 999_901.0)));
    }

    #[test]
    fn must_not_fire_a_headroom_within_the_relative_tolerance_is_accepted() {
        // Rounding noise on a large limit (5e-7 against a tolerance of 1e-9 * 1e6).
        assert!(matches!(validate(&item("memory", 100.0, 1e6, 999_900.000_000_5)), Measurement::Known(_)));
        // Exactly at the tolerance is still accepted (the refusal is strictly above it).
        assert!(matches!(validate(&item("cpu", 10.0, 10.0, 1e-9 * 10.0)), Measurement::Known(_)));
    }

    #[test]
    fn must_not_fire_an_over_quota_headroom_clamped_to_zero_is_accepted() {
        let Measurement::Known(rs) = validate(&item("cpu", 12.0, 10.0, 0.0)) else {
            panic!("clamped headroom refused")
        };
        // The stored headroom is always limit - used, never the reader's clamp.
        assert_eq!(rs[0].headroom, -2.0);
        assert!(matches!(validate(&item("cpu", 12.0, 10.0, -2.0)), Measurement::Known(_)));
    }

    #[test]
    fn must_fire_a_zero_or_positive_headroom_that_contradicts_usage_is_malformed() {
        // Over quota yet reporting room.
        assert!(is_malformed(&item("cpu", 12.0, 10.0, 5.0)));
        // Room left yet reporting zero: only an over-quota headroom may be clamped.
        assert!(is_malformed(&item("cpu", 3.0, 10.0, 0.0)));
    }

    #[test]
    fn must_fire_a_repeated_dimension_is_malformed() {
        let v = json!({"status": "known", "resources": [
            {"resource": "cpu", "used": 1, "limit": 10, "unit": "vCPU", "headroom": 9, "required": 1},
            {"resource": "cpu", "used": 9, "limit": 10, "unit": "vCPU", "headroom": 1, "required": 1}]});
        assert!(is_malformed(&v));
    }

    #[test]
    fn must_not_fire_distinct_dimensions_are_all_kept() {
        let v = json!({"status": "known", "resources": [
            {"resource": "cpu", "used": 1, "limit": 10, "unit": "vCPU", "headroom": 9, "required": 1},
            {"resource": "memory", "used": 512, "limit": 1024, "unit": "MiB", "headroom": 512, "required": 256}]});
        let Measurement::Known(rs) = validate(&v) else { panic!("refused") };
        assert_eq!(rs.iter().map(|r| r.resource.as_str()).collect::<Vec<_>>(), ["cpu", "memory"]);
    }

    #[test]
    fn request_need_covers_every_dimension_and_a_launch_always_takes_one_slot() {
        let req = Resources { cpu: 2.0, memory_mb: 512.0, disk_mb: 4096.0, gpu: 1.0 };
        for (resource, need) in
            [("cpu", 2.0), ("memory", 512.0), ("disk", 4096.0), ("gpu", 1.0), ("sandboxes", 1.0), ("custom", 0.0)]
        {
            assert_eq!(request_need(resource, &req), need, "{resource}");
        }
        // A pool configured with zero slot demand still needs one slot per launch.
        let mut l = Ledger::new(60_000);
        let full = Measurement::Known(vec![ResourceMeasurement::new("sandboxes", 10.0, 10.0, "sandboxes", 0.0)]);
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &full, &Resources::default(), 0), Admission::Exhausted { .. }));
    }

    #[test]
    fn request_memory_disk_and_gpu_raise_the_need_above_configured_demand() {
        for (resource, req) in [
            ("memory", Resources { memory_mb: 2048.0, ..Resources::default() }),
            ("disk", Resources { disk_mb: 2048.0, ..Resources::default() }),
            ("gpu", Resources { gpu: 2.0, ..Resources::default() }),
        ] {
            let m = Measurement::Known(vec![ResourceMeasurement::new(resource, 0.0, 1.5, "u", 1.0)]);
            let mut l = Ledger::new(60_000);
            let s = l.begin_read();
            assert!(matches!(l.admit(0, s, &m, &req, 0), Admission::Exhausted { .. }), "{resource}");
            assert!(matches!(l.admit(0, s, &m, &Resources::default(), 0), Admission::Admitted(_)), "{resource}");
        }
    }

    /// `used` such that `used + 1` lands exactly on the admission slack `10 + 1e-9`.
    fn used_at_the_slack() -> f64 {
        let used = (10.0 + 1e-9) - 1.0;
        assert_eq!(used + 1.0, 10.0 + 1e-9);
        used
    }

    #[test]
    fn must_not_fire_usage_up_to_the_rounding_slack_admits() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let a = l.admit(0, s, &slots(used_at_the_slack(), 10.0), &Resources::default(), 0);
        assert!(matches!(a, Admission::Admitted(_)), "{a:?}");
    }

    #[test]
    fn must_fire_usage_past_the_rounding_slack_is_exhausted() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let past = f64::from_bits(used_at_the_slack().to_bits() + 1);
        let a = l.admit(0, s, &slots(past, 10.0), &Resources::default(), 0);
        assert!(matches!(a, Admission::Exhausted { .. }), "{a:?}");
    }

    #[test]
    fn tokens_are_positive_distinct_and_increasing() {
        // The binding hands tokens to JS as i64 and clamps negatives to 0 on settle.
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let tokens: Vec<u64> = (0..3)
            .map(|_| match l.admit(0, s, &slots(0.0, 10.0), &Resources::default(), 0) {
                Admission::Admitted(t) => t,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(tokens, [1, 2, 3]);
        assert_eq!(l.held_for(0, "sandboxes"), 3.0);
    }

    #[test]
    fn a_failed_launch_releases_only_its_own_hold() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let Admission::Admitted(a) = l.admit(0, s, &slots(0.0, 10.0), &Resources::default(), 0) else { panic!() };
        let Admission::Admitted(_b) = l.admit(0, s, &slots(0.0, 10.0), &Resources::default(), 0) else { panic!() };
        let Admission::Admitted(_c) = l.admit(1, s, &slots(0.0, 10.0), &Resources::default(), 0) else { panic!() };
        l.settle(a, false, 0);
        assert_eq!(l.held_for(0, "sandboxes"), 1.0);
        assert_eq!(l.held_for(1, "sandboxes"), 1.0);
    }

    #[test]
    fn two_launches_settled_before_a_read_are_both_released_by_it() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let Admission::Admitted(a) = l.admit(0, s, &slots(0.0, 3.0), &Resources::default(), 0) else { panic!() };
        let Admission::Admitted(b) = l.admit(0, s, &slots(0.0, 3.0), &Resources::default(), 0) else { panic!() };
        l.settle(a, true, 0);
        l.settle(b, true, 0);
        // A read that started after both settled and counts both releases both assumptions.
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(2.0, 3.0), &Resources::default(), 0), Admission::Admitted(_)));
        assert_eq!(l.held_for(0, "sandboxes"), 1.0);
    }

    #[test]
    fn a_read_reflecting_one_of_two_settled_launches_releases_only_one() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        let Admission::Admitted(a) = l.admit(0, s, &slots(0.0, 3.0), &Resources::default(), 0) else { panic!() };
        let Admission::Admitted(b) = l.admit(0, s, &slots(0.0, 3.0), &Resources::default(), 0) else { panic!() };
        l.settle(a, true, 0);
        l.settle(b, true, 0);
        // The lagging read counts one new sandbox: the other launch stays assumed, so
        // 1 used + 1 held + 1 needed fits the limit of 3 once, not twice.
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(1.0, 3.0), &Resources::default(), 0), Admission::Admitted(_)));
        assert_eq!(l.held_for(0, "sandboxes"), 2.0);
    }

    #[test]
    fn a_lagging_read_does_not_release_the_same_usage_twice() {
        let mut l = Ledger::new(60_000);
        let r1 = l.begin_read();
        let Admission::Admitted(a) = l.admit(0, r1, &slots(0.0, 3.0), &Resources::default(), 0) else { panic!() };
        let Admission::Admitted(b) = l.admit(0, r1, &slots(0.0, 3.0), &Resources::default(), 0) else { panic!() };
        l.settle(a, true, 0);
        l.settle(b, true, 0);
        // r2 sees a but not yet b: a is released, b stays assumed, and c fits (1 + 1 + 1 <= 3).
        let r2 = l.begin_read();
        assert!(matches!(l.admit(0, r2, &slots(1.0, 3.0), &Resources::default(), 0), Admission::Admitted(_)));
        // r3 still sees only a. a, b and c all exist or are launching: a fourth launch would overshoot.
        let r3 = l.begin_read();
        assert!(matches!(l.admit(0, r3, &slots(1.0, 3.0), &Resources::default(), 0), Admission::Exhausted { .. }));
    }

    #[test]
    fn must_not_fire_an_in_flight_or_other_pool_hold_is_never_released_by_a_read() {
        let mut l = Ledger::new(60_000);
        let s = l.begin_read();
        // Pool 0: in flight (never settled). Pool 1: settled.
        let Admission::Admitted(_) = l.admit(0, s, &slots(0.0, 5.0), &Resources::default(), 0) else { panic!() };
        let Admission::Admitted(t1) = l.admit(1, s, &slots(0.0, 5.0), &Resources::default(), 0) else { panic!() };
        l.settle(t1, true, 0);
        // A later pool-0 read showing usage reflects neither of them.
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(1.0, 5.0), &Resources::default(), 0), Admission::Admitted(_)));
        assert_eq!(l.held_for(0, "sandboxes"), 2.0);
        assert_eq!(l.held_for(1, "sandboxes"), 1.0);
    }

    #[test]
    fn must_not_fire_an_assumption_is_held_until_its_ttl() {
        let ttl: i64 = 10;
        let mut l = Ledger::new(ttl as u64);
        let now = 1_000;
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), now) else { panic!() };
        l.settle(t, true, now);
        let s = l.begin_read();
        let just_before = now + ttl - 1;
        let a = l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), just_before);
        assert!(matches!(a, Admission::Exhausted { .. }));
    }

    #[test]
    fn must_fire_an_assumption_expires_at_exactly_its_ttl() {
        let ttl: i64 = 10;
        let mut l = Ledger::new(ttl as u64);
        let now = 1_000;
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), now) else { panic!() };
        l.settle(t, true, now);
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(0.0, 1.0), &Resources::default(), now + ttl), Admission::Admitted(_)));
    }

    #[test]
    fn skip_reasons_are_bounded_whatever_a_reader_names_its_dimensions() {
        assert_eq!(skip_reason(SkipStatus::Exhausted, "sandboxes"), "EXHAUSTED_SANDBOXES");
        assert_eq!(skip_reason(SkipStatus::Exhausted, "cpu"), "EXHAUSTED_CPU");
        // must not pass through: a reader's own dimension (its text, maybe a secret)
        assert_eq!(skip_reason(SkipStatus::Exhausted, "tenant-secret-quota"), EXHAUSTED_OTHER);
        assert_eq!(skip_reason(SkipStatus::Unknown, "TIMEOUT"), "TIMEOUT");
        assert_eq!(skip_reason(SkipStatus::Unknown, "NO_CAPACITY_READER"), NO_CAPACITY_READER);
        assert_eq!(skip_reason(SkipStatus::Unknown, COORDINATOR_UNAVAILABLE), COORDINATOR_UNAVAILABLE);
        assert_eq!(skip_reason(SkipStatus::Unknown, "anything else"), UNKNOWN_OTHER);
        let all = skip_reasons();
        for r in UnknownReason::ALL {
            assert_eq!(skip_reason(SkipStatus::Unknown, r.code()), r.code());
            assert!(all.contains(&r.code()));
        }
        let mut distinct = all.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), all.len());
    }
}
