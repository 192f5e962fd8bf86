//! A router's budgets: its rules and their in-process ledger (`core::budget`), or, with a
//! coordinator, only the rules (the charges live in PostgreSQL).
//!
//! Why is the ledger settled by the router, after each machine call? The machine decides
//! *how* a reservation settles (`Acquisition::take_budget_settle`); applying it to the
//! router's ledger right after the call that decided it keeps the machine free of a second
//! ledger argument on every report, and the same decision goes to the shared ledger
//! (through JavaScript) when a coordinator keeps the budgets.

use crate::core::acquisition::{Acquisition, SETTLE_SLACK_MS};
use crate::core::budget::{self, Applying, ChargeRecord, Key, Keys, Ledger, Plan, Refusal, Rule, SharedKey};
use crate::core::error::{ErrorClass, Failure, Fault};
use crate::core::events::{KeyFact, PoolId};
use crate::core::ids::SandboxKey;
use std::rc::Rc;

/// Where an in-process ledger's charges are kept across restarts: the router's
/// `SqliteMappingStore` file (`stores::sqlite`). Writes are synchronous and a failed write
/// is dropped: the in-process ledger stays the truth for this process.
pub trait ChargeSink {
    /// Writes `changes` (a record, or None to delete).
    fn write(&self, changes: Vec<(SandboxKey, Option<ChargeRecord>)>);
    /// Every charge kept (empty when they cannot be read).
    fn load(&self) -> Vec<ChargeRecord>;
}

/// A router's budgets.
pub struct Budgets {
    /// The rules and the in-process ledger (its charges unused under a shared ledger).
    pub ledger: Ledger,
    /// The rules' ids, by index.
    pub rule_ids: Rc<[String]>,
    /// The rules' ids as events name them.
    pub rule_names: Rc<[PoolId]>,
    /// The budgets live in the shared ledger (`capacity.coordinator`).
    pub shared: bool,
    sink: Option<Box<dyn ChargeSink>>,
}

impl Budgets {
    /// Budgets of `rules` (None when there are none), kept in the shared ledger when
    /// `shared`, else in process (and in `sink`, whose charges are restored at `now`: a
    /// launch that was in flight when its process stopped holds its slot for a minute, as
    /// outcome unknown).
    pub fn new(rules: Vec<Rule>, shared: bool, sink: Option<Box<dyn ChargeSink>>, now: i64) -> Option<Budgets> {
        if rules.is_empty() {
            return None;
        }
        let rule_ids: Rc<[String]> = rules.iter().map(|r| r.id.clone()).collect();
        let rule_names: Rc<[PoolId]> = rules.iter().map(|r| PoolId::from(r.id.as_str())).collect();
        let sink = if shared { None } else { sink };
        let mut ledger = Ledger::new(rules, sink.is_some());
        if let Some(s) = &sink {
            ledger.restore(s.load(), now.saturating_add(SETTLE_SLACK_MS as i64));
            ledger.take_dirty();
        }
        Some(Budgets { ledger, rule_ids, rule_names, shared, sink })
    }

    /// The budget plan of one provision (None when no rule applies to its labels), or the
    /// typed `BUDGET_KEY_MISSING` failure of a rule whose label the request lacks.
    pub fn plan(
        &mut self,
        labels: &[(String, String)],
        sandbox: SandboxKey,
        costs: impl FnOnce() -> Rc<[f64]>,
        hold_ms: u64,
    ) -> Result<Option<Plan>, Failure> {
        // Under a shared ledger this process keeps no buckets: the keys alone.
        let applying = if self.shared {
            budget::keys_of(self.ledger.rules(), labels).map(|keys| Applying::Shared(Keys::from_vec(keys)))
        } else {
            self.ledger.plan_keys(labels).map(Applying::Local)
        };
        let applying = match applying {
            Ok(applying) if applying.is_empty() => return Ok(None),
            Ok(applying) => applying,
            Err(rule) => return Err(key_missing(&self.ledger.rules()[rule])),
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
    /// is written by JavaScript).
    pub fn apply(&mut self, machine: &mut Acquisition) {
        if !self.shared && machine.settle_budget_in(&mut self.ledger) {
            self.flush();
        }
    }

    /// Explanations: the pools (by index, with `costs` by pool) whose estimated cost some
    /// applying rule of the in-process ledger has no room for at `now`. Nothing is reserved.
    /// Empty under a shared ledger and for a request a rule would refuse for its missing label.
    pub fn over_budget(&mut self, labels: &[(String, String)], costs: &[f64], now: i64) -> Vec<usize> {
        if self.shared {
            return Vec::new();
        }
        let Ok(keys) = budget::keys_of(self.ledger.rules(), labels) else { return Vec::new() };
        if keys.is_empty() {
            return Vec::new();
        }
        let usage: Vec<budget::Usage> = keys.iter().map(|k| self.ledger.usage(k, now)).collect();
        let rules = self.ledger.rules();
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
    pub fn flush(&mut self) {
        if let Some(sink) = &self.sink {
            sink.write(self.ledger.take_dirty());
        }
    }

    /// The rules.
    pub fn rules(&self) -> &[Rule] {
        self.ledger.rules()
    }

    /// The ids of the rules a plan applies, in rule order (events name them).
    pub fn applying_names(&self, plan: &Plan) -> Vec<PoolId> {
        match &plan.applying {
            Applying::Shared(keys) => keys.iter().map(|k| self.rule_names[k.rule].clone()).collect(),
            Applying::Local(buckets) => {
                buckets.iter().map(|&b| self.rule_names[self.ledger.rule_of(b)].clone()).collect()
            }
        }
    }

    /// The shared keys of the rules at `now` with the label value `""`: what the shared
    /// ledger's status is asked with.
    pub fn rule_keys(&self, now: i64) -> Vec<SharedKey> {
        let rules = self.ledger.rules();
        let keys: Vec<Key> = (0..rules.len()).map(|rule| Key { rule, value: "".into() }).collect();
        SharedKey::of(rules, &keys, now)
    }

    /// The shared keys of `plan` at `now` (a shared ledger's reservation).
    pub fn demand_keys(&self, plan: &Plan, now: i64) -> Vec<SharedKey> {
        SharedKey::of(self.ledger.rules(), plan.shared_keys(), now)
    }

    /// The verdict of a shared ledger that could not be asked: admit unreserved when every
    /// applying rule allows it, else the first rule that refuses then.
    pub fn on_store_down(&self, keys: &[Key]) -> Result<(), usize> {
        budget::on_store_down(self.ledger.rules(), keys)
    }
}

/// `BUDGET_KEY_MISSING`: the request lacks the label `rule` is keyed by.
fn key_missing(rule: &Rule) -> Failure {
    let field = budget::missing_field(rule);
    let mut e = Fault::invalid(
        ErrorClass::RequestValidation,
        budget::BUDGET_KEY_MISSING,
        format!("invalid request: {field} is required by budget rule {} (or the rule says missing: 'allow')", rule.id),
        field,
    );
    e.rule = Some(rule.id.clone());
    e
}

/// Sets the budget fields of a `BudgetExhaustedError` from refusal `r` of `rule`.
pub fn refusal_fields(e: &mut Fault, rule: &Rule, r: &Refusal) {
    e.rule = Some(rule.id.clone());
    e.key = Some(KeyFact { label: rule.label.clone(), value: r.value.clone() });
    e.dimension = Some(r.dimension.name().to_string());
    e.limit = Some(r.limit);
    e.used = Some(r.used);
    e.reserved = Some(r.reserved);
    e.resets_at = Some(r.resets_at.map(crate::core::clock::iso8601_millis));
    e.retryable = Some(r.retryable);
}
