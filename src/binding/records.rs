//! The typed records that cross the seam (`#[napi(object)]` values), each with its
//! conversion from or into the core's type. A leaf: it uses only the core, so the glue
//! files that share a record (the router's calls, the stores' transactions) import it from
//! here and never from each other.

use crate::core::budget::{Dimension, Limits, Micros, Refusal, Settle, SharedKey, Usage};
use crate::core::clock::iso8601_millis;
use crate::core::ids::SandboxKey;
use crate::core::router::provision::{BudgetAsk, Demand, IntentFact};
use napi_derive::napi;
use std::collections::HashMap;

/// One dimension of a measurement with this request's need: what a shared coordinator
/// decides on.
#[napi(object)]
pub struct DemandDim {
    /// `cpu`, `memory`, `disk`, `sandboxes`, …
    pub resource: String,
    /// Reported usage.
    pub used: f64,
    /// Account limit.
    pub limit: f64,
    /// `max(configured demand, request need)`.
    pub need: f64,
}

/// What to ask a shared coordinator for one admission.
#[napi(object)]
pub struct DemandRecord {
    /// The pool's id.
    pub provider_id: String,
    /// The dimensions to decide on.
    pub dims: Vec<DemandDim>,
    /// How long the hold may stay unsettled, ms (the launch's settle window).
    pub hold_ms: f64,
    /// The provision's sandbox id: a successful launch's hold is kept under it.
    pub sandbox_id: String,
    /// The pool's declared `rateLimit`: the admission takes a token of the fleet's bucket.
    pub rate_limit: Option<RateLimitRecord>,
    /// With `rateLimit`: the provision's fairness lane (its `fairBy` label's value, `""`
    /// without one), whose turn the fleet keeps; none for a warm refill (it goes after every
    /// lane waiting).
    pub lane: Option<String>,
    /// With `rateLimit`: the provision waits when refused (the router has a queue), so its
    /// lane claims a turn.
    pub waits: Option<bool>,
}

/// A pool's declared `rateLimit`, as a shared coordinator's admission takes its tokens.
#[napi(object)]
pub struct RateLimitRecord {
    /// Tokens a second.
    pub launches_per_second: f64,
    /// Most tokens kept.
    pub burst: u32,
}

impl From<Demand> for DemandRecord {
    fn from(d: Demand) -> Self {
        DemandRecord {
            provider_id: d.provider_id,
            dims: d
                .dims
                .into_iter()
                .map(|d| DemandDim { resource: d.resource, used: d.used, limit: d.limit, need: d.need })
                .collect(),
            hold_ms: d.hold_ms as f64,
            sandbox_id: d.sandbox.to_string(),
            rate_limit: d
                .rate_limit
                .map(|l| RateLimitRecord { launches_per_second: l.launches_per_second, burst: l.burst }),
            lane: d.lane,
            waits: d.rate_limit.map(|_| d.waits),
        }
    }
}

/// The coordinator's verdict on one admission.
#[napi(object)]
pub struct AdmitVerdict {
    /// The hold's token when admitted.
    pub token: Option<f64>,
    /// The first dimension without room when not.
    pub resource: Option<String>,
    /// When the fleet's pacing refused it: `RATE_LIMITED` (its bucket has no token),
    /// `COOLING_DOWN` (a `Retry-After` in force) or `QUEUED` (another lane's turn).
    pub paced: Option<String>,
    /// With `paced`: how long until the pool may launch, ms.
    pub retry_in_ms: Option<f64>,
}

/// A shared hold the machine settled, for JavaScript to write to the coordinator.
#[napi(object)]
pub struct HoldSettlement {
    /// The hold's token.
    pub token: f64,
    /// Kept as an assumption (true) or released (false).
    pub allocated: bool,
}

/// A budget's key: the label and the request's value of it.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct BudgetKeyRecord {
    /// The label name (`tenant`).
    pub label: String,
    /// Its value in the request.
    pub value: String,
}

/// One rule's key, as `router.budgetStatus()` reports it (every field present: a limit
/// that does not apply and a window that never resets are null).
#[napi(object, use_nullable = true)]
pub struct BudgetStatusRecord {
    /// The rule's id.
    pub rule: String,
    /// The key.
    pub key: BudgetKeyRecord,
    /// The rule's limits (each null when not limited).
    pub limit: BudgetLimitsRecord,
    /// Settled in the window: cost, launches; and live sandboxes.
    pub used: BudgetAmountsRecord,
    /// Reserved by launches in flight.
    pub reserved: BudgetAmountsRecord,
    /// When the window frees what is used (ISO 8601); null for a rule without a window.
    pub resets_at: Option<String>,
}

/// A rule's limits (null when not limited).
#[napi(object, use_nullable = true)]
pub struct BudgetLimitsRecord {
    /// `limit.cost`.
    pub cost: Option<f64>,
    /// `limit.launches`.
    pub launches: Option<f64>,
    /// `limit.concurrent`.
    pub concurrent: Option<f64>,
}

/// Amounts of one key.
#[napi(object)]
pub struct BudgetAmountsRecord {
    /// Cost (in the window).
    pub cost: f64,
    /// Launches (in the window).
    pub launches: f64,
    /// Concurrent slots.
    pub concurrent: f64,
}

impl BudgetStatusRecord {
    /// One row from a rule's id, label and limits, a key's value and usage.
    pub(crate) fn of(
        rule: &str,
        label: &str,
        limits: &Limits,
        value: String,
        u: &Usage,
        resets_at: Option<i64>,
    ) -> Self {
        BudgetStatusRecord {
            rule: rule.to_string(),
            key: BudgetKeyRecord { label: label.to_string(), value },
            limit: BudgetLimitsRecord {
                cost: limits.cost.map(Micros::units),
                launches: limits.launches.map(|n| n as f64),
                concurrent: limits.concurrent.map(|n| n as f64),
            },
            used: BudgetAmountsRecord {
                cost: u.used_cost.units(),
                launches: u.used_launches as f64,
                concurrent: u.live as f64,
            },
            reserved: BudgetAmountsRecord {
                cost: u.reserved_cost.units(),
                launches: u.reserved_launches as f64,
                concurrent: u.inflight as f64,
            },
            resets_at: resets_at.map(iso8601_millis),
        }
    }
}

/// What `budgetStatus` / `budgetCount` ask (read once in `lib/budgets.js`): a rule (by id),
/// a label value, a page size and the cursor (the last row of the page before).
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct BudgetStatusQuery {
    /// Only this rule's keys (its id).
    pub rule: Option<String>,
    /// Only this label value.
    pub key: Option<String>,
    /// At most this many rows (default 1,000; at most 10,000).
    pub limit: Option<u32>,
    /// The cursor's rule id: rows after (`afterRule`, `afterKey`) in status order.
    pub after_rule: Option<String>,
    /// The cursor's label value.
    pub after_key: Option<String>,
}

impl BudgetStatusQuery {
    /// The core's form.
    pub(crate) fn to_core(&self) -> crate::core::router::budgets::Query {
        crate::core::router::budgets::Query {
            rule: self.rule.clone(),
            key: self.key.clone(),
            limit: self.limit,
            after: match (&self.after_rule, &self.after_key) {
                (Some(r), Some(k)) => Some((r.clone(), k.clone())),
                _ => None,
            },
        }
    }
}

/// What to ask a shared budget ledger for one reservation.
#[napi(object)]
pub struct BudgetDemand {
    /// The provision's sandbox id (its charges are kept under it).
    pub sandbox_id: String,
    /// The pool's cost.
    pub cost: f64,
    /// How long the reservation may stay unsettled, ms (the launch's settle window).
    pub hold_ms: f64,
    /// The router's clock at the reservation (ms): the charge's time.
    pub at: f64,
    /// Every applying rule.
    pub keys: Vec<BudgetDemandKey>,
}

impl From<BudgetAsk> for BudgetDemand {
    fn from(a: BudgetAsk) -> Self {
        BudgetDemand {
            sandbox_id: a.sandbox.to_string(),
            cost: a.cost,
            hold_ms: a.hold_ms as f64,
            at: a.at as f64,
            keys: a.keys.into_iter().map(BudgetDemandKey::from).collect(),
        }
    }
}

/// One applying rule of a [`BudgetDemand`] (see `core::budget::SharedKey`).
#[napi(object)]
pub struct BudgetDemandKey {
    /// Rule index in the router's rules.
    pub rule: u32,
    /// The rule's id.
    pub rule_id: String,
    /// The label's value.
    pub value: String,
    /// `limit.cost`.
    pub cost: Option<f64>,
    /// `limit.launches`.
    pub launches: Option<f64>,
    /// `limit.concurrent`.
    pub concurrent: Option<f64>,
    /// Charges at or after this instant (ms) count.
    pub since: Option<f64>,
    /// A calendar window's end (ms).
    pub window_end: Option<f64>,
    /// A sliding window's length (ms).
    pub sliding_ms: Option<f64>,
}

impl From<SharedKey> for BudgetDemandKey {
    fn from(k: SharedKey) -> Self {
        BudgetDemandKey {
            rule: k.rule as u32,
            rule_id: k.rule_id,
            value: k.value,
            cost: k.limits.cost.map(Micros::units),
            launches: k.limits.launches.map(|n| n as f64),
            concurrent: k.limits.concurrent.map(|n| n as f64),
            since: k.since.map(|t| t as f64),
            window_end: k.window_end.map(|t| t as f64),
            sliding_ms: k.sliding_ms.map(|t| t as f64),
        }
    }
}

impl BudgetDemandKey {
    /// The core's form.
    pub(crate) fn to_shared(&self) -> SharedKey {
        SharedKey {
            rule: self.rule as usize,
            rule_id: self.rule_id.clone(),
            value: self.value.clone(),
            limits: Limits {
                cost: self.cost.map(Micros::saturating),
                launches: self.launches.map(|n| n.max(0.0) as u64),
                concurrent: self.concurrent.map(|n| n.max(0.0) as u64),
            },
            since: self.since.map(|t| t as i64),
            window_end: self.window_end.map(|t| t as i64),
            sliding_ms: self.sliding_ms.map(|t| t as i64),
        }
    }
}

/// One rule as the shared ledger reports it (`router.budgetStatus()` with a coordinator):
/// its id, label and limits, and its window's bounds at the instant asked.
#[napi(object)]
pub struct BudgetRuleRecord {
    /// The rule's id.
    pub rule_id: String,
    /// Its label.
    pub label: String,
    /// `limit.cost`.
    pub cost: Option<f64>,
    /// `limit.launches`.
    pub launches: Option<f64>,
    /// `limit.concurrent`.
    pub concurrent: Option<f64>,
    /// Charges at or after this instant (ms) count.
    pub since: Option<f64>,
    /// A calendar window's end (ms).
    pub window_end: Option<f64>,
    /// A sliding window's length (ms).
    pub sliding_ms: Option<f64>,
}

/// The status rows of the shared ledger's answer (`usage`: rule index, key, usage).
pub(crate) fn shared_status(rules: &[BudgetRuleRecord], usage: Vec<(usize, String, Usage)>) -> Vec<BudgetStatusRecord> {
    usage
        .into_iter()
        .filter_map(|(i, value, u)| {
            let r = rules.get(i)?;
            let resets_at = match (r.window_end, r.sliding_ms) {
                (Some(end), _) => Some(end as i64),
                (None, Some(ms)) => u.oldest.map(|at| at.saturating_add(ms as i64)),
                _ => None,
            };
            let limits = Limits {
                cost: r.cost.map(Micros::saturating),
                launches: r.launches.map(|n| n as u64),
                concurrent: r.concurrent.map(|n| n as u64),
            };
            Some(BudgetStatusRecord::of(&r.rule_id, &r.label, &limits, value, &u, resets_at))
        })
        .collect()
}

/// One rule's refusal, as the shared ledger answers it.
#[napi(object)]
pub struct BudgetRefusalRecord {
    /// Rule index.
    pub rule: u32,
    /// The label's value.
    pub value: String,
    /// `cost`, `launches` or `concurrent`.
    pub dimension: String,
    /// The limit.
    pub limit: f64,
    /// Used.
    pub used: f64,
    /// Reserved in flight.
    pub reserved: f64,
    /// Needed.
    pub need: f64,
    /// When the window frees what is used (ms).
    pub resets_at: Option<f64>,
    /// Whether releasing the reservations in flight would make room.
    pub retryable: bool,
}

/// The shared ledger's answer to one reservation.
#[napi(object)]
pub struct BudgetVerdict {
    /// Reserved against every rule.
    pub reserved: bool,
    /// Otherwise, the rules that refused.
    pub refusals: Vec<BudgetRefusalRecord>,
}

impl BudgetRefusalRecord {
    /// From the core's refusal.
    pub(crate) fn of(r: Refusal) -> BudgetRefusalRecord {
        BudgetRefusalRecord {
            rule: r.rule as u32,
            value: r.value,
            dimension: r.dimension.name().to_string(),
            limit: r.limit,
            used: r.used,
            reserved: r.reserved,
            need: r.need,
            resets_at: r.resets_at.map(|t| t as f64),
            retryable: r.retryable,
        }
    }

    /// The core's form.
    pub(crate) fn to_core(&self) -> Refusal {
        Refusal {
            rule: self.rule as usize,
            value: self.value.clone(),
            dimension: match self.dimension.as_str() {
                "cost" => Dimension::Cost,
                "launches" => Dimension::Launches,
                _ => Dimension::Concurrent,
            },
            limit: self.limit,
            used: self.used,
            reserved: self.reserved,
            need: self.need,
            resets_at: self.resets_at.map(|t| t as i64),
            retryable: self.retryable,
        }
    }
}

impl BudgetVerdict {
    /// The core's form: reserved, or the refusals.
    pub(crate) fn to_core(&self) -> Result<(), Vec<Refusal>> {
        if self.reserved {
            Ok(())
        } else {
            Err(self.refusals.iter().map(BudgetRefusalRecord::to_core).collect())
        }
    }
}

/// What a shared ledger must write after a launch: `allocated`, `nothing` or `unknown`
/// (with `untilMs`).
#[napi(object)]
pub struct BudgetSettlement {
    /// The provision's sandbox id.
    pub sandbox_id: String,
    /// `allocated`, `nothing` or `unknown`.
    pub how: String,
    /// `unknown`: when its slot is freed (ms).
    pub until_ms: Option<f64>,
}

impl BudgetSettlement {
    /// The record of a settlement.
    pub(crate) fn of(sandbox: SandboxKey, how: Settle) -> BudgetSettlement {
        let (how, until) = match how {
            Settle::Allocated => ("allocated", None),
            Settle::Nothing => ("nothing", None),
            Settle::Unknown { until } => ("unknown", Some(until as f64)),
        };
        BudgetSettlement { sandbox_id: sandbox.to_string(), how: how.to_string(), until_ms: until }
    }
}

/// An idle member, as JavaScript sees it.
#[napi(object)]
pub struct WarmMemberRecord {
    /// Its pool.
    pub provider_id: String,
    /// Its router id.
    pub sandbox_id: String,
    /// The provider's id of it.
    pub provider_sandbox_id: String,
    /// When it became idle, router-clock epoch ms.
    pub launched_at: f64,
}

/// A pool's warm counts in the fleet's inventory, as the database answered them.
#[napi(object)]
pub struct WarmCounts {
    /// The pool.
    pub provider_id: String,
    /// Idle members, every process's.
    pub idle: f64,
    /// Refill launches granted and in flight, every process's.
    pub launching: f64,
}

/// A mapping record, as the default store's `list`/`get` answer it.
#[napi(object)]
pub struct MappingRecord {
    /// `sbx_…`.
    pub id: String,
    /// Its pool.
    pub provider_id: String,
    /// The provider's id of the sandbox.
    pub provider_sandbox_id: String,
    /// Its labels (the stamp included).
    pub labels: HashMap<String, String>,
    /// ISO-8601.
    pub created_at: String,
    /// From `provisionDetached`.
    pub detached: bool,
}

/// A launch intent record, as an intent-capable store writes it.
#[napi(object)]
pub struct IntentRecord {
    /// `sbx_…`.
    pub id: String,
    /// Pool of the current attempt.
    pub provider_id: String,
    /// `launching` or `failed`.
    pub state: String,
    /// Epoch ms.
    pub started_at: f64,
    /// Epoch ms after which the writer's provision has certainly ended.
    pub expires_at: f64,
    /// Host name of the writer.
    pub owner_host: String,
    /// Process id of the writer.
    pub owner_pid: f64,
    /// Random per-router session id of the writer.
    pub owner_session: String,
}

impl From<IntentFact> for IntentRecord {
    fn from(i: IntentFact) -> Self {
        IntentRecord {
            id: i.id,
            provider_id: i.provider_id,
            state: i.state.to_string(),
            started_at: i.started_at as f64,
            expires_at: i.expires_at as f64,
            owner_host: i.owner_host,
            owner_pid: i.owner_pid,
            owner_session: i.owner_session,
        }
    }
}

impl From<crate::stores::record::Intent> for IntentRecord {
    fn from(i: crate::stores::record::Intent) -> Self {
        IntentRecord {
            id: i.id,
            provider_id: i.provider_id,
            state: i.state,
            started_at: i.started_at as f64,
            expires_at: i.expires_at as f64,
            owner_host: i.owner_host,
            owner_pid: i.owner_pid as f64,
            owner_session: i.owner_session,
        }
    }
}
