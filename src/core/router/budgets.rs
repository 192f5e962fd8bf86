//! A router's budgets: its rules and their in-process ledger (`core::budget`), or, with a
//! coordinator, only the rules (the charges live in PostgreSQL).
//!
//! Why is the ledger settled by the router, after each machine call? The machine decides
//! *how* a reservation settles (`Acquisition::take_budget_settle`); applying it to the
//! router's ledger right after the call that decided it keeps the machine free of a second
//! ledger argument on every report, and the same decision goes to the shared ledger
//! (through JavaScript) when a coordinator keeps the budgets.

use crate::core::acquisition::{Acquisition, SETTLE_SLACK_MS};
use crate::core::budget::{
    self, Applying, ChargeRecord, Key, Keys, Ledger, Micros, Plan, Refusal, Rule, SharedKey, StatusQuery, StatusRow,
};
use crate::core::error::{ErrorClass, Failure, Fault};
use crate::core::events::{KeyFact, PoolId};
use crate::core::ids::SandboxKey;
use std::rc::Rc;

/// Where an in-process ledger's charges are kept across restarts: the router's
/// `SqliteMappingStore` file (`stores::sqlite`). Writes are synchronous and a failed write
/// is dropped: the in-process ledger stays the truth for this process.
pub trait ChargeSink {
    /// Writes `changes` (a record, or None to delete) at `now` (the ledger's clock: rows
    /// that stopped counting before it go too).
    fn write(&self, changes: Vec<(SandboxKey, Option<ChargeRecord>)>, now: i64);
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
    /// outcome unknown). A charge stays adjustable by `settleCost` for `settle_horizon_ms`
    /// after its sandbox is gone (`core::budget::Ledger`, option `limits.settleHorizonMs`).
    pub fn new(
        rules: Vec<Rule>,
        shared: bool,
        sink: Option<Box<dyn ChargeSink>>,
        now: i64,
        settle_horizon_ms: i64,
    ) -> Option<Budgets> {
        if rules.is_empty() {
            return None;
        }
        let rule_ids: Rc<[String]> = rules.iter().map(|r| r.id.clone()).collect();
        let rule_names: Rc<[PoolId]> = rules.iter().map(|r| PoolId::from(r.id.as_str())).collect();
        let sink = if shared { None } else { sink };
        let mut ledger = Ledger::new(rules, sink.is_some());
        ledger.set_settle_horizon(settle_horizon_ms);
        if let Some(s) = &sink {
            let rewrite = ledger.restore(s.load(), now, now.saturating_add(SETTLE_SLACK_MS as i64));
            ledger.take_dirty();
            s.write(rewrite, now);
        }
        Some(Budgets { ledger, rule_ids, rule_names, shared, sink })
    }

    /// The budget plan of one provision (None when no rule applies to its labels), or the
    /// typed `BUDGET_KEY_MISSING` failure of a rule whose label the request lacks.
    pub fn plan(
        &mut self,
        labels: &crate::core::labels::Labels,
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

    /// The job of `machine` has ended (or never began): the buckets its plan pinned may be
    /// freed once they hold nothing (`core::budget::Ledger::unplan`).
    pub fn unplan(&mut self, plan: Option<&Plan>) {
        if let Some(Applying::Local(buckets)) = plan.map(|p| &p.applying) {
            self.ledger.unplan(buckets);
        }
    }

    /// Applies the settlement `machine` decided to the in-process ledger (a shared ledger's
    /// is written by JavaScript).
    pub fn apply(&mut self, machine: &mut Acquisition) {
        if !self.shared && machine.settle_budget_in(&mut self.ledger) {
            self.flush();
        }
    }

    /// A replay: rule `rule` (by id) held `usage` for key `value` at `now` (an unknown rule,
    /// one this router no longer has, is left out).
    pub fn seed(&mut self, rule: &str, value: &str, usage: &crate::core::budget::Usage, now: i64) {
        if let Some(i) = self.ledger.rules().iter().position(|r| r.id == rule) {
            self.ledger.seed(i, value, usage, now);
        }
    }

    /// Explanations: the pools (by index, with `costs` by pool) whose estimated cost some
    /// applying rule of the in-process ledger has no room for at `now`. Nothing is reserved.
    /// Empty under a shared ledger and for a request a rule would refuse for its missing label.
    pub fn over_budget(&mut self, labels: &crate::core::labels::Labels, costs: &[f64], now: i64) -> Vec<usize> {
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
                keys.iter().zip(&usage).any(|(k, u)| {
                    budget::check(&rules[k.rule], k.rule, &k.value, u, Micros::saturating(cost), now).is_err()
                })
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Writes the charges that changed to the durable store, if there is one.
    pub fn flush(&mut self) {
        if let Some(sink) = &self.sink {
            let now = self.ledger.now();
            sink.write(self.ledger.take_dirty(), now);
        }
    }

    /// `router.budgetStatus(query)` at `now`: one page of the in-process ledger's keys that
    /// hold something, in rule order then key order. An unknown rule id is the typed
    /// `INVALID_INPUT` naming the field.
    pub fn status(&mut self, now: i64, q: &Query) -> Result<Vec<StatusRow>, Failure> {
        let (rule, after) = query_of(&self.rule_ids, q)?;
        let query = StatusQuery { rule, value: q.key.as_deref(), after, limit: limit_of(q.limit) };
        Ok(self.ledger.status_page(now, &query))
    }

    /// `router.budgetCount(query)` at `now`: how many rows the status would list (every
    /// page), without building them.
    pub fn count(&mut self, now: i64, q: &Query) -> Result<usize, Failure> {
        let (rule, _) = query_of(&self.rule_ids, q)?;
        Ok(self.ledger.count(now, rule, q.key.as_deref()))
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

/// What `budgetStatus` / `budgetCount` ask: a rule (by id), a label value, a page size and
/// the cursor (the rule id and label value of the last row of the page before).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Only this rule's keys (its id).
    pub rule: Option<String>,
    /// Only this label value.
    pub key: Option<String>,
    /// At most this many rows (default [`budget::DEFAULT_STATUS_LIMIT`], at most
    /// [`budget::MAX_STATUS_LIMIT`]).
    pub limit: Option<u32>,
    /// The cursor: rows after (rule id, label value) in status order.
    pub after: Option<(String, String)>,
}

fn invalid_query(field: &str, expectation: &str) -> Failure {
    Fault::invalid(
        ErrorClass::RequestValidation,
        "INVALID_INPUT",
        format!("invalid budgetStatus query: {field} {expectation}"),
        field,
    )
}

/// Reads a `budgetStatus` (`paged`) or `budgetCount` query as the caller gave it (JSON;
/// `null`: no query): `{ rule?, key?, limit?, cursor? }`, `cursor` being `{ rule, key }`
/// (the last row of the page before, `{ rule: row.rule, key: row.key.value }`); `limit`
/// and `cursor` only when `paged`. Refusals are the typed `INVALID_INPUT` naming the field.
pub fn query_of_value(v: &serde_json::Value, paged: bool) -> Result<Query, Failure> {
    use serde_json::Value;
    let o = match v {
        Value::Null => return Ok(Query::default()),
        Value::Object(o) => o,
        _ => return Err(invalid_query("options", "must be an object")),
    };
    let mut q = Query::default();
    for (k, v) in o {
        match (k.as_str(), v) {
            (_, Value::Null) if k != "cursor" => {}
            ("rule", Value::String(s)) => q.rule = Some(s.clone()),
            ("key", Value::String(s)) => q.key = Some(s.clone()),
            ("rule" | "key", _) => return Err(invalid_query(k, "must be a string")),
            ("limit", v) if paged => match v.as_u64() {
                Some(n)
                    if (1..=budget::MAX_STATUS_LIMIT as u64).contains(&n)
                        && v.as_f64().is_some_and(|f| f.fract() == 0.0) =>
                {
                    q.limit = Some(n as u32)
                }
                _ => {
                    return Err(invalid_query(
                        "limit",
                        &format!("must be an integer from 1 to {}", budget::MAX_STATUS_LIMIT),
                    ))
                }
            },
            ("cursor", v) if paged => {
                match (v.get("rule").and_then(Value::as_str), v.get("key").and_then(Value::as_str)) {
                    (Some(r), Some(k)) => q.after = Some((r.to_string(), k.to_string())),
                    _ => {
                        return Err(invalid_query("cursor", "must be { rule, key }: the last row's rule and key.value"))
                    }
                }
            }
            _ => return Err(invalid_query(&crate::core::router::options::shown(k), "is not a known option")),
        }
    }
    Ok(q)
}

fn unknown_rule(field: &str) -> Failure {
    Fault::invalid(
        ErrorClass::RequestValidation,
        "INVALID_INPUT",
        format!("invalid budgetStatus query: {field} is not a budget rule of this router"),
        field,
    )
}

/// The query's rule index and cursor, by the rules' ids `ids` (an unknown rule id is the
/// typed `INVALID_INPUT` naming the field: `rule`, `cursor.rule`).
#[allow(clippy::type_complexity, reason = "a rule index and a cursor, read once by the callers")]
pub fn query_of<'q, S: AsRef<str>>(
    ids: &[S],
    q: &'q Query,
) -> Result<(Option<usize>, Option<(usize, &'q str)>), Failure> {
    let index = |id: &str, field: &str| ids.iter().position(|r| r.as_ref() == id).ok_or_else(|| unknown_rule(field));
    let rule = q.rule.as_deref().map(|id| index(id, "rule")).transpose()?;
    let after = match &q.after {
        Some((r, k)) => Some((index(r, "cursor.rule")?, k.as_str())),
        None => None,
    };
    Ok((rule, after))
}

/// A page's size: `limit` within 1..=[`budget::MAX_STATUS_LIMIT`], the default without.
pub fn limit_of(limit: Option<u32>) -> usize {
    limit.map_or(budget::DEFAULT_STATUS_LIMIT, |n| (n as usize).clamp(1, budget::MAX_STATUS_LIMIT))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(v: serde_json::Value, paged: bool) -> String {
        query_of_value(&v, paged).unwrap_err().field.unwrap_or_default()
    }

    #[test]
    fn query_must_fire_unknown_options_bad_limits_and_cursors_are_invalid_input_naming_the_field() {
        assert_eq!(field(json!({ "rule": 1 }), true), "rule");
        assert_eq!(field(json!({ "key": [] }), true), "key");
        assert_eq!(field(json!({ "limit": 0 }), true), "limit");
        assert_eq!(field(json!({ "limit": 10_001 }), true), "limit");
        assert_eq!(field(json!({ "limit": 2.5 }), true), "limit");
        assert_eq!(field(json!({ "cursor": { "rule": "r" } }), true), "cursor");
        assert_eq!(field(json!({ "cursor": null }), true), "cursor");
        assert_eq!(field(json!({ "limit": 5 }), false), "limit", "budgetCount takes no page");
        assert_eq!(field(json!({ "ruel": "r" }), true), "ruel");
        assert_eq!(field(json!("r"), true), "options");
        let e = query_of_value(&json!({ "rule": 1 }), true).unwrap_err();
        assert_eq!(e.code, "INVALID_INPUT");
        // A rule id the router does not have.
        let q = query_of_value(&json!({ "rule": "nope" }), true).unwrap();
        assert_eq!(query_of(&["spend"], &q).unwrap_err().field.as_deref(), Some("rule"));
        let q = query_of_value(&json!({ "cursor": { "rule": "nope", "key": "k" } }), true).unwrap();
        assert_eq!(query_of(&["spend"], &q).unwrap_err().field.as_deref(), Some("cursor.rule"));
    }

    #[test]
    fn query_must_not_fire_a_valid_query_is_read_and_absent_fields_take_their_defaults() {
        assert_eq!(query_of_value(&json!(null), true).unwrap(), Query::default());
        let q = query_of_value(
            &json!({ "rule": "spend", "key": "acme", "limit": 10_000, "cursor": { "rule": "spend", "key": "a" } }),
            true,
        )
        .unwrap();
        assert_eq!(q.limit, Some(10_000));
        assert_eq!(query_of(&["other", "spend"], &q).unwrap(), (Some(1), Some((1, "a"))));
        assert_eq!(limit_of(None), budget::DEFAULT_STATUS_LIMIT);
        assert_eq!(query_of_value(&json!({ "rule": null, "key": "k" }), false).unwrap().key.as_deref(), Some("k"));
    }
}
