//! napi glue for budgets (`core::budget`): the router's rules and in-process ledger, the
//! typed records of refusals and status, and the shared ledger's demand and verdict.
//! Nothing is decided here.
//!
//! Why is the in-process ledger settled by the glue, after each machine call? The machine
//! decides *how* a reservation settles (`Acquisition::take_budget_settle`); applying it to
//! the router's ledger right after the call that decided it keeps the machine free of a
//! second ledger argument on every report, and the same decision goes to the shared
//! ledger (through JavaScript) when a coordinator keeps the budgets.

use crate::binding::error::{Failure, NativeError};
use crate::core::acquisition::Acquisition;
use crate::core::budget::{
    self, Applying, Dimension, Key, Keys, Ledger, Limits, Plan, Refusal, Rule, SharedKey, SharedVerdict,
};
use crate::core::clock::iso8601_millis;
use crate::core::error::ErrorClass;
use crate::core::ids::SandboxKey;
use napi_derive::napi;
use std::cell::RefCell;
use std::rc::Rc;

/// A router's budgets: its rules and their in-process ledger (per process; persisted by a
/// `SqliteMappingStore` when that is the store).
pub(crate) struct BudgetCore {
    pub(crate) ledger: RefCell<Ledger>,
    pub(crate) rule_ids: Rc<[String]>,
    /// The budgets live in the shared ledger (`capacity.coordinator`).
    pub(crate) shared: bool,
    /// Where the in-process ledger's charges are written (a `SqliteMappingStore`).
    pub(crate) persist: RefCell<Option<crate::binding::sqlite::ChargeSink>>,
}

impl BudgetCore {
    /// The budgets of the option's JSON text (None: no option, or no rules).
    pub(crate) fn of_option(json: Option<&str>, coordinated: bool) -> Result<Option<BudgetCore>, Failure> {
        let Some(text) = json else { return Ok(None) };
        let v = serde_json::from_str(text).map_err(|_| {
            NativeError::invalid(
                ErrorClass::Configuration,
                "INVALID_CONFIGURATION",
                "invalid router options: budgets must be an array of rules",
                "budgets",
            )
        })?;
        let rules = budget::rules_of_option(&v)?;
        if rules.is_empty() {
            return Ok(None);
        }
        let rule_ids: Rc<[String]> = rules.iter().map(|r| r.id.clone()).collect();
        Ok(Some(BudgetCore {
            ledger: RefCell::new(Ledger::new(rules, false)),
            rule_ids,
            shared: coordinated,
            persist: RefCell::new(None),
        }))
    }

    /// These budgets, their charges kept in `sink` (a `SqliteMappingStore` file): the
    /// charges it holds are restored (a launch that was in flight when its process stopped
    /// holds its slot for a minute from `now`, as outcome unknown).
    pub(crate) fn persisted(self, sink: crate::binding::sqlite::ChargeSink, now: i64) -> BudgetCore {
        let rules = self.ledger.borrow().rules().to_vec();
        let mut ledger = Ledger::new(rules, true);
        ledger.restore(sink.load(), now.saturating_add(crate::core::acquisition::SETTLE_SLACK_MS as i64));
        ledger.take_dirty();
        BudgetCore { ledger: RefCell::new(ledger), persist: RefCell::new(Some(sink)), ..self }
    }

    /// The budget plan of one provision (None when no rule applies to its labels), or the
    /// typed `BUDGET_KEY_MISSING` error of a rule whose label the request lacks.
    pub(crate) fn plan(
        &self,
        labels: &[(String, String)],
        sandbox: SandboxKey,
        costs: impl FnOnce() -> Rc<[f64]>,
        hold_ms: u64,
    ) -> Result<Option<Plan>, Failure> {
        let mut ledger = self.ledger.borrow_mut();
        // Under a shared ledger this process keeps no buckets: the keys alone.
        let applying = if self.shared {
            budget::keys_of(ledger.rules(), labels).map(|keys| Applying::Shared(Keys::from_vec(keys)))
        } else {
            ledger.plan_keys(labels).map(Applying::Local)
        };
        let applying = match applying {
            Ok(applying) if applying.is_empty() => return Ok(None),
            Ok(applying) => applying,
            Err(rule) => return Err(key_missing(&ledger.rules()[rule])),
        };
        Ok(Some(Plan {
            sandbox,
            applying,
            costs: costs(),
            hold_ms: hold_ms.min(i64::MAX as u64) as i64,
            rule_ids: self.rule_ids.clone(),
        }))
    }

    /// Applies the settlement `machine` decided to the in-process ledger (a shared ledger's
    /// is written by JavaScript: `acquisitionBudgetSettlement`).
    pub(crate) fn apply(&self, machine: &mut Acquisition) {
        if self.shared {
            return;
        }
        if machine.settle_budget_in(&mut self.ledger.borrow_mut()) {
            self.flush();
        }
    }

    /// Explanations: the pools (by index, with `costs` by pool) whose estimated cost some
    /// applying rule of the in-process ledger has no room for at `now`, for a request with
    /// `labels`. Nothing is reserved. Empty under a shared ledger (asking it is a provision's
    /// business) and for a request a rule would refuse for its missing label.
    pub(crate) fn over_budget(&self, labels: &[(String, String)], costs: &[f64], now: i64) -> Vec<usize> {
        if self.shared {
            return Vec::new();
        }
        let mut ledger = self.ledger.borrow_mut();
        let Ok(keys) = budget::keys_of(ledger.rules(), labels) else { return Vec::new() };
        if keys.is_empty() {
            return Vec::new();
        }
        let usage: Vec<budget::Usage> = keys.iter().map(|k| ledger.usage(k, now)).collect();
        let rules = ledger.rules();
        costs
            .iter()
            .enumerate()
            .filter(|(_, &cost)| {
                keys.iter()
                    .zip(&usage)
                    .any(|(k, u)| budget::check(&rules[k.rule], k.rule, &k.value, u, cost, now).is_err())
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Writes the charges that changed to the durable store, if there is one.
    pub(crate) fn flush(&self) {
        if let Some(sink) = self.persist.borrow().as_ref() {
            sink.write(self.ledger.borrow_mut().take_dirty());
        }
    }

    /// The rule of index `i`.
    pub(crate) fn with_rule<T>(&self, i: usize, f: impl FnOnce(&Rule) -> T) -> Option<T> {
        self.ledger.borrow().rules().get(i).map(f)
    }

    /// `router.budgetStatus()` at `now`.
    pub(crate) fn status(&self, now: i64) -> Vec<BudgetStatusRecord> {
        let mut ledger = self.ledger.borrow_mut();
        let rows = ledger.status(now);
        let rules = ledger.rules();
        rows.into_iter()
            .map(|row| {
                let r = &rules[row.rule];
                status_record(r, row.value, &row.usage, row.resets_at)
            })
            .collect()
    }
}

/// `BUDGET_KEY_MISSING`: the request lacks the label `rule` is keyed by.
fn key_missing(rule: &Rule) -> Failure {
    let field = budget::missing_field(rule);
    let mut e = NativeError::invalid(
        ErrorClass::RequestValidation,
        budget::BUDGET_KEY_MISSING,
        format!("invalid request: {field} is required by budget rule {} (or the rule says missing: 'allow')", rule.id),
        field,
    );
    e.rule = Some(rule.id.clone());
    e
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

/// One rule's key, as `router.budgetStatus()` reports it.
#[napi(object)]
pub struct BudgetStatusRecord {
    /// The rule's id.
    pub rule: String,
    /// The key.
    pub key: BudgetKeyRecord,
    /// The rule's limits (each absent when not limited).
    pub limit: BudgetLimitsRecord,
    /// Settled in the window: cost, launches; and live sandboxes.
    pub used: BudgetAmountsRecord,
    /// Reserved by launches in flight.
    pub reserved: BudgetAmountsRecord,
    /// When the window frees what is used (ISO 8601); null for a rule without a window.
    pub resets_at: Option<String>,
}

/// A rule's limits.
#[napi(object)]
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

fn limits_record(l: &Limits) -> BudgetLimitsRecord {
    BudgetLimitsRecord {
        cost: l.cost,
        launches: l.launches.map(|n| n as f64),
        concurrent: l.concurrent.map(|n| n as f64),
    }
}

/// One status row from a rule and a key's usage.
pub(crate) fn status_record(r: &Rule, value: String, u: &budget::Usage, resets_at: Option<i64>) -> BudgetStatusRecord {
    BudgetStatusRecord {
        rule: r.id.clone(),
        key: BudgetKeyRecord { label: r.label.clone(), value },
        limit: limits_record(&r.limits),
        used: BudgetAmountsRecord { cost: u.used_cost, launches: u.used_launches as f64, concurrent: u.live as f64 },
        reserved: BudgetAmountsRecord {
            cost: u.reserved_cost,
            launches: u.reserved_launches as f64,
            concurrent: u.inflight as f64,
        },
        resets_at: resets_at.map(iso8601_millis),
    }
}

/// Sets the budget fields of a `BudgetExhaustedError` (or a `budget.refused` event's
/// fields) from refusal `r` of `rule`.
pub(crate) fn refusal_fields(e: &mut NativeError, rule: &Rule, r: &Refusal) {
    e.rule = Some(rule.id.clone());
    e.key = Some(BudgetKeyRecord { label: rule.label.clone(), value: r.value.clone() });
    e.dimension = Some(r.dimension.name().to_string());
    e.limit = Some(r.limit);
    e.used = Some(r.used);
    e.reserved = Some(r.reserved);
    e.resets_at = Some(r.resets_at.map(iso8601_millis));
    e.retryable = Some(r.retryable);
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

impl BudgetDemandKey {
    /// The core's form.
    pub(crate) fn to_shared(&self) -> SharedKey {
        SharedKey {
            rule: self.rule as usize,
            rule_id: self.rule_id.clone(),
            value: self.value.clone(),
            limits: Limits {
                cost: self.cost,
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

impl BudgetCore {
    /// Every rule at `now`, for the shared ledger's status.
    pub(crate) fn rule_records(&self, now: i64) -> Vec<BudgetRuleRecord> {
        let ledger = self.ledger.borrow();
        let rules = ledger.rules();
        let keys: Vec<Key> = (0..rules.len()).map(|rule| Key { rule, value: "".into() }).collect();
        SharedKey::of(rules, &keys, now)
            .into_iter()
            .map(|k| BudgetRuleRecord {
                label: rules[k.rule].label.clone(),
                rule_id: k.rule_id,
                cost: k.limits.cost,
                launches: k.limits.launches.map(|n| n as f64),
                concurrent: k.limits.concurrent.map(|n| n as f64),
                since: k.since.map(|t| t as f64),
                window_end: k.window_end.map(|t| t as f64),
                sliding_ms: k.sliding_ms.map(|t| t as f64),
            })
            .collect()
    }
}

/// The status rows of the shared ledger's answer (`usage`: rule index, key, usage).
pub(crate) fn shared_status(
    rules: &[BudgetRuleRecord],
    usage: Vec<(usize, String, budget::Usage)>,
) -> Vec<BudgetStatusRecord> {
    usage
        .into_iter()
        .filter_map(|(i, value, u)| {
            let r = rules.get(i)?;
            let resets_at = match (r.window_end, r.sliding_ms) {
                (Some(end), _) => Some(end as i64),
                (None, Some(ms)) => u.oldest.map(|at| at.saturating_add(ms as i64)),
                _ => None,
            };
            Some(BudgetStatusRecord {
                rule: r.rule_id.clone(),
                key: BudgetKeyRecord { label: r.label.clone(), value },
                limit: BudgetLimitsRecord { cost: r.cost, launches: r.launches, concurrent: r.concurrent },
                used: BudgetAmountsRecord {
                    cost: u.used_cost,
                    launches: u.used_launches as f64,
                    concurrent: u.live as f64,
                },
                reserved: BudgetAmountsRecord {
                    cost: u.reserved_cost,
                    launches: u.reserved_launches as f64,
                    concurrent: u.inflight as f64,
                },
                resets_at: resets_at.map(iso8601_millis),
            })
        })
        .collect()
}

/// The demand of `plan` for `pool` at `now`.
pub(crate) fn demand_of(core: &BudgetCore, plan: &Plan, pool: usize, now: i64, hold_ms: u64) -> BudgetDemand {
    let ledger = core.ledger.borrow();
    BudgetDemand {
        sandbox_id: plan.sandbox.to_string(),
        cost: plan.costs.get(pool).copied().unwrap_or(0.0),
        hold_ms: hold_ms as f64,
        at: now as f64,
        keys: SharedKey::of(ledger.rules(), plan.shared_keys(), now)
            .into_iter()
            .map(|k| BudgetDemandKey {
                rule: k.rule as u32,
                rule_id: k.rule_id,
                value: k.value,
                cost: k.limits.cost,
                launches: k.limits.launches.map(|n| n as f64),
                concurrent: k.limits.concurrent.map(|n| n as f64),
                since: k.since.map(|t| t as f64),
                window_end: k.window_end.map(|t| t as f64),
                sliding_ms: k.sliding_ms.map(|t| t as f64),
            })
            .collect(),
    }
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

    fn to_core(&self) -> Refusal {
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

/// The machine's form of a verdict (None: the ledger could not be asked).
pub(crate) fn verdict_of(core: &BudgetCore, plan_keys: &[Key], v: Option<BudgetVerdict>) -> SharedVerdict {
    match v {
        Some(v) if v.reserved => SharedVerdict::Reserved,
        Some(v) if !v.refusals.is_empty() => SharedVerdict::Refused(v.refusals.iter().map(|r| r.to_core()).collect()),
        _ => SharedVerdict::Unavailable(budget::on_store_down(core.ledger.borrow().rules(), plan_keys)),
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

/// The record of a settlement.
pub(crate) fn settlement_of(sandbox: SandboxKey, how: budget::Settle) -> BudgetSettlement {
    let (how, until) = match how {
        budget::Settle::Allocated => ("allocated", None),
        budget::Settle::Nothing => ("nothing", None),
        budget::Settle::Unknown { until } => ("unknown", Some(until as f64)),
    };
    BudgetSettlement { sandbox_id: sandbox.to_string(), how: how.to_string(), until_ms: until }
}
