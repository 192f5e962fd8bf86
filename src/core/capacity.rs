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

use crate::core::capabilities::Resources;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

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
    /// `used` per dimension in the read that admitted it.
    baseline: Vec<(String, f64)>,
    /// Read sequence at which the launch settled successfully (None while in flight).
    settled_seq: Option<u64>,
    settled_at: Option<Instant>,
}

/// Holds in-flight and assumed allocations per pool. One per router.
#[derive(Debug)]
pub struct Ledger {
    holds: HashMap<u64, Hold>,
    order: Vec<u64>,
    next_token: u64,
    seq: u64,
    ttl: Duration,
}

impl Ledger {
    /// A ledger whose assumptions expire after `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Ledger { holds: HashMap::new(), order: Vec::new(), next_token: 1, seq: 0, ttl }
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
    fn reconcile(&mut self, pool: usize, read_seq: u64, m: &[ResourceMeasurement], now: Instant) {
        let ttl = self.ttl;
        // Expired assumptions go first.
        self.order.retain(|t| {
            let keep = match self.holds.get(t) {
                Some(h) => h.settled_at.is_none_or(|at| now.duration_since(at) < ttl),
                None => false,
            };
            if !keep {
                self.holds.remove(t);
            }
            keep
        });
        // In admission order: release while the read covers baseline + earlier releases + amount.
        let mut released: HashMap<String, f64> = HashMap::new();
        let mut drop = Vec::new();
        for t in &self.order {
            let h = &self.holds[t];
            if h.pool != pool || h.settled_seq.is_none_or(|s| s >= read_seq) {
                continue;
            }
            let reflected = h.amounts.iter().all(|(r, a)| {
                let used = m.iter().find(|x| &x.resource == r).map(|x| x.used);
                let base = h.baseline.iter().find(|(b, _)| b == r).map(|(_, u)| *u);
                match (used, base) {
                    (Some(u), Some(b)) => u + 1e-9 >= b + released.get(r).copied().unwrap_or(0.0) + a,
                    _ => false,
                }
            });
            if reflected {
                for (r, a) in &h.amounts {
                    *released.entry(r.clone()).or_default() += a;
                }
                drop.push(*t);
            } else {
                break;
            }
        }
        for t in drop {
            self.holds.remove(&t);
            self.order.retain(|x| *x != t);
        }
    }

    /// Checks `measurement` (already validated) for pool `pool`, given the request's
    /// resources. On room, holds `max(required, request need)` per dimension.
    pub fn admit(&mut self, pool: usize, read_seq: u64, measurement: &Measurement, req: &Resources) -> Admission {
        self.admit_at(pool, read_seq, measurement, req, Instant::now())
    }

    /// [`Ledger::admit`] at an explicit instant (tests).
    pub fn admit_at(
        &mut self,
        pool: usize,
        read_seq: u64,
        measurement: &Measurement,
        req: &Resources,
        now: Instant,
    ) -> Admission {
        let m = match measurement {
            Measurement::Unknown(r) => return Admission::Unknown(*r),
            Measurement::Known(m) => m,
        };
        self.reconcile(pool, read_seq, m, now);
        let mut amounts = Vec::with_capacity(m.len());
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
        }
        let token = self.next_token;
        self.next_token += 1;
        let baseline = m.iter().map(|r| (r.resource.clone(), r.used)).collect();
        self.holds.insert(token, Hold { pool, amounts, baseline, settled_seq: None, settled_at: None });
        self.order.push(token);
        Admission::Admitted(token)
    }

    /// Settles a held launch: a failure releases the hold; a success keeps it as an
    /// assumption until a later read reflects it (or the TTL passes).
    pub fn settle(&mut self, token: u64, success: bool) {
        self.settle_at(token, success, Instant::now());
    }

    /// [`Ledger::settle`] at an explicit instant (tests).
    pub fn settle_at(&mut self, token: u64, success: bool, now: Instant) {
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

    /// Total held (in flight + assumed) for a pool and dimension.
    pub fn held_for(&self, pool: usize, resource: &str) -> f64 {
        self.held(pool, resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(used: f64, limit: f64) -> Measurement {
        Measurement::Known(vec![ResourceMeasurement::new("sandboxes", used, limit, "sandboxes", 1.0)])
    }

    #[test]
    fn admits_when_every_dimension_fits_and_refuses_when_one_does_not() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(9.0, 10.0), &Resources::default()), Admission::Admitted(_)));
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(9.0, 10.0), &Resources::default()), Admission::Exhausted { .. }));
    }

    #[test]
    fn request_resources_raise_the_need_above_configured_demand() {
        let m = Measurement::Known(vec![ResourceMeasurement::new("cpu", 6.0, 10.0, "vCPU", 2.0)]);
        let mut l = Ledger::new(Duration::from_secs(60));
        let big = Resources { cpu: 5.0, ..Resources::default() };
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &m, &big), Admission::Exhausted { .. }));
        let small = Resources { cpu: 1.0, ..Resources::default() };
        assert!(matches!(l.admit(0, s, &m, &small), Admission::Admitted(_)));
        assert_eq!(l.held_for(0, "cpu"), 2.0);
    }

    #[test]
    fn failure_releases_the_hold() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s, &slots(9.0, 10.0), &Resources::default()) else { panic!() };
        l.settle(t, false);
        assert_eq!(l.held_for(0, "sandboxes"), 0.0);
    }

    #[test]
    fn success_is_held_until_a_later_read_reflects_it() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s, &slots(0.0, 1.0), &Resources::default()) else { panic!() };
        l.settle(t, true);
        // A lagging read (still 0 used) must not admit a second launch.
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(0.0, 1.0), &Resources::default()), Admission::Exhausted { .. }));
        // A read that reflects the sandbox releases the assumption; the limit itself refuses.
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(1.0, 1.0), &Resources::default()), Admission::Exhausted { .. }));
        assert_eq!(l.held_for(0, "sandboxes"), 0.0);
    }

    #[test]
    fn a_read_started_before_the_launch_settled_does_not_release_it() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let s0 = l.begin_read();
        let Admission::Admitted(t) = l.admit(0, s0, &slots(0.0, 5.0), &Resources::default()) else { panic!() };
        let early = l.begin_read();
        l.settle(t, true);
        let _ = l.admit(0, early, &slots(1.0, 5.0), &Resources::default());
        // The early read may not have seen the new sandbox even though its used is 1.
        assert!(l.held_for(0, "sandboxes") >= 1.0);
    }

    #[test]
    fn assumptions_expire_after_the_ttl() {
        let mut l = Ledger::new(Duration::from_millis(10));
        let now = Instant::now();
        let s = l.begin_read();
        let Admission::Admitted(t) = l.admit_at(0, s, &slots(0.0, 1.0), &Resources::default(), now) else { panic!() };
        l.settle_at(t, true, now);
        let s = l.begin_read();
        let later = now + Duration::from_millis(20);
        assert!(matches!(l.admit_at(0, s, &slots(0.0, 1.0), &Resources::default(), later), Admission::Admitted(_)));
    }

    #[test]
    fn holds_are_per_pool() {
        let mut l = Ledger::new(Duration::from_secs(60));
        let s = l.begin_read();
        assert!(matches!(l.admit(0, s, &slots(0.0, 1.0), &Resources::default()), Admission::Admitted(_)));
        assert!(matches!(l.admit(1, s, &slots(0.0, 1.0), &Resources::default()), Admission::Admitted(_)));
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
}
