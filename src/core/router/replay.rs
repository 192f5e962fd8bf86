//! Replay (`router.replay(record)`): a recorded decision decided again by **this** router's
//! registry and options, on the record's inputs. The replay is the production code path: a
//! scratch [`Router`] built from this router's settings over its registry, its health, pacing
//! and budgets seeded with what the record says the decision read, driven step by step with
//! the record's answers (each capacity reading, each launch's outcome and classification).
//! What the record cannot answer (a pool it never read or launched on) is assumed to have
//! room and to launch, and the result says so.
//!
//! What differs from the recorded run on purpose: the replay never waits (a decision that
//! waited in the queue is replayed as its passes ran, with no wait between them), warm claims
//! are decided as launches on the same pool, a coordinator's holds and verdicts are judged
//! from the readings alone, and a record's label values are replayed as it wrote them (a hash
//! stays a hash: budget keys match within the record).

use super::pools::Extras;
use super::step::StepKind;
use super::{Now, Router, Settings};
use crate::core::capacity::{Measurement, ResourceMeasurement};
use crate::core::decision::{budget_of, health_of, measurement_of, pace_of, signals_of, SCHEMA};
use crate::core::error::{Failure, Fault};
use crate::core::events::Event;
use crate::core::ids::SandboxKey;
use crate::core::json::{object, FieldError};
use crate::core::request::parse_request;
use serde_json::Value;
use std::rc::Rc;

/// Code of a record that cannot be replayed.
pub use crate::core::decision::INVALID_DECISION_RECORD;

/// Most steps a replay drives before it gives up (a record cannot make it loop).
const MAX_STEPS: usize = 10_000;
/// Most entries an array of a record may hold (bounded work for a hostile record).
const MAX_ITEMS: usize = 100_000;

/// One side of a replay: the attempt order, and where it went (or its error's code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    /// The attempt order, best first.
    pub order: Vec<String>,
    /// The pool it went to.
    pub provider_id: Option<String>,
    /// The code of the error it failed with.
    pub code: Option<String>,
}

/// One pool whose part in the decision changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The pool.
    pub pool: String,
    /// Its part in the recorded decision.
    pub was: String,
    /// Its part in the replay.
    pub now: String,
    /// Why, as far as the replay can tell.
    pub why: String,
}

/// What `replay` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// Whether the replay decided as recorded (same order, same pool or code).
    pub same: bool,
    /// The record's decision.
    pub recorded: Side,
    /// The replay's.
    pub replayed: Side,
    /// Each pool whose part changed.
    pub changes: Vec<Change>,
    /// What the replay assumed where the record had no answer.
    pub assumed: Vec<String>,
    /// One line.
    pub summary: String,
}

use crate::core::decision::invalid_record as invalid;

/// An object of pools' states (`inputs.health`, `inputs.pacing`; absent: none), each read by
/// `read` under its field.
fn per_pool<T>(
    v: Option<&Value>,
    field: &str,
    read: impl Fn(&Value, &str) -> Result<T, FieldError>,
) -> Result<Vec<(String, T)>, Failure> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let Value::Object(m) = v else { return Err(bad(field, "must be an object")) };
    m.iter()
        .map(|(pool, v)| {
            let at = format!("{field}.{}", crate::core::json::shown(pool));
            Ok((pool.clone(), read(v, &at).map_err(invalid)?))
        })
        .collect()
}

fn bad(field: impl Into<String>, expectation: &str) -> Failure {
    invalid(FieldError::new(field, expectation))
}

/// A recorded launch's answer, in the order the record has them for one pool.
#[derive(Debug, Clone)]
enum Answer {
    Succeeded,
    Failed { code: String, retryable: bool, retry_after_ms: Option<f64> },
}

/// The record, read strictly into what the replay needs.
struct Input {
    sandbox: SandboxKey,
    detached: bool,
    request: Value,
    labels: Vec<(String, String)>,
    router_at: i64,
    health_at: i64,
    ids: Vec<String>,
    recorded: Side,
    health: Vec<(String, crate::core::health::PoolSeed)>,
    pacing: Vec<(String, crate::core::pacing::PaceSeed)>,
    budgets: Vec<(String, String, crate::core::budget::Usage)>,
    capacity: Vec<(String, Measurement)>,
    answers: Vec<(String, Answer)>,
    signals: Option<Value>,
    unavailable: Vec<String>,
}

fn strings(v: Option<&Value>, field: &str) -> Result<Vec<String>, Failure> {
    let Some(Value::Array(a)) = v else { return Err(bad(field, "must be an array of strings")) };
    if a.len() > MAX_ITEMS {
        return Err(bad(field, "is too long"));
    }
    a.iter().map(|x| x.as_str().map(str::to_string).ok_or_else(|| bad(field, "must be an array of strings"))).collect()
}

fn array<'a>(v: Option<&'a Value>, field: &str) -> Result<&'a [Value], Failure> {
    match v {
        None => Ok(&[]),
        Some(Value::Array(a)) if a.len() <= MAX_ITEMS => Ok(a),
        Some(Value::Array(_)) => Err(bad(field, "is too long")),
        Some(_) => Err(bad(field, "must be an array")),
    }
}

fn read(record: &Value) -> Result<Input, Failure> {
    let top = object(
        record,
        "",
        &[
            "schema",
            "id",
            "at",
            "sandboxId",
            "detached",
            "labels",
            "request",
            "registry",
            "inputs",
            "order",
            "steps",
            "outcome",
        ],
    )
    .map_err(invalid)?;
    match top.get("schema") {
        Some(Value::String(s)) if s == SCHEMA => {}
        _ => return Err(bad("schema", &format!("must be {SCHEMA}"))),
    }
    let id = top.string("id").map_err(invalid)?.ok_or_else(|| bad("id", "must be the record's id (dec_…)"))?;
    let sandbox = id
        .strip_prefix("dec_")
        .and_then(|hex| SandboxKey::parse(&format!("{}{hex}", crate::core::ids::SANDBOX_ID_PREFIX)))
        .ok_or_else(|| bad("id", "must be the record's id (dec_…)"))?;
    let detached = top.boolean("detached").map_err(invalid)?.unwrap_or(false);
    let Some(request) = top.get("request").filter(|v| v.is_object()) else {
        return Err(bad("request", "must be an object"));
    };
    let mut request = request.clone();
    let mut labels = Vec::new();
    if let Some(launch) = request.as_object_mut().and_then(|o| o.remove("launch")) {
        let l = launch.get("labels").and_then(Value::as_object);
        for (k, v) in l.into_iter().flatten() {
            match v {
                Value::String(s) => labels.push((k.clone(), s.clone())),
                Value::Null => labels.push((k.clone(), String::new())),
                _ => return Err(bad("request.launch.labels", "must map keys to strings (or null)")),
            }
        }
    }
    let registry = top
        .object("registry", &["digest", "ids", "pools"])
        .map_err(invalid)?
        .ok_or_else(|| bad("registry", "is required"))?;
    let ids = strings(registry.get("ids"), "registry.ids")?;
    array(registry.get("pools"), "registry.pools")?;
    let inputs = top
        .object("inputs", &["clock", "health", "pacing", "signals", "credentialsUnavailable", "budgets", "capacity"])
        .map_err(invalid)?
        .ok_or_else(|| bad("inputs", "is required"))?;
    let clock = inputs
        .object("clock", &["router", "health"])
        .map_err(invalid)?
        .ok_or_else(|| bad("inputs.clock", "is required"))?;
    let ms = |k: &str| {
        clock.get(k).and_then(Value::as_i64).ok_or_else(|| bad(format!("inputs.clock.{k}"), "must be an integer (ms)"))
    };
    let (router_at, health_at) = (ms("router")?, ms("health")?);
    let health = per_pool(inputs.get("health"), "inputs.health", health_of)?;
    let pacing = per_pool(inputs.get("pacing"), "inputs.pacing", pace_of)?;
    let mut budgets = Vec::new();
    for (i, b) in array(inputs.get("budgets"), "inputs.budgets")?.iter().enumerate() {
        budgets.push(budget_of(b, &format!("inputs.budgets[{i}]")).map_err(invalid)?);
    }
    let mut capacity = Vec::new();
    for (i, c) in array(inputs.get("capacity"), "inputs.capacity")?.iter().enumerate() {
        let field = format!("inputs.capacity[{i}]");
        let pool = c
            .get("providerId")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("{field}.providerId"), "must be a pool id"))?;
        let (m, held) = measurement_of(c, &field).map_err(invalid)?;
        // What the router held when it judged is folded into the reading: the replay's ledger
        // holds nothing of the recorded run.
        let m = match m {
            Measurement::Known(dims) if !held.is_empty() => Measurement::Known(
                dims.into_iter()
                    .zip(held.iter().copied().chain(std::iter::repeat(0.0)))
                    .map(|(d, h)| {
                        ResourceMeasurement::new(&d.resource, d.used + h.max(0.0), d.limit, &d.unit, d.required)
                    })
                    .collect(),
            ),
            m => m,
        };
        capacity.push((pool.to_string(), m));
    }
    let unavailable = match inputs.get("credentialsUnavailable") {
        None => Vec::new(),
        v => strings(v, "inputs.credentialsUnavailable")?,
    };
    let order = strings(top.get("order"), "order")?;
    // The launches' answers, from the steps (codes only: a record holds no provider text).
    let mut answers: Vec<(String, Answer)> = Vec::new();
    for (i, s) in array(top.get("steps"), "steps")?.iter().enumerate() {
        let field = format!("steps[{i}]");
        let ty = s
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("{field}.type"), "must be an event type"))?;
        let pool = || {
            s.get("providerId")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| bad(format!("{field}.providerId"), "must be a pool id"))
        };
        match ty {
            "attempt.succeeded" => answers.push((pool()?, Answer::Succeeded)),
            "attempt.failed" => {
                let code = s
                    .get("code")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(format!("{field}.code"), "must be a code"))?;
                let retryable = s.get("retryable").and_then(Value::as_bool).unwrap_or(false);
                answers.push((pool()?, Answer::Failed { code: code.to_string(), retryable, retry_after_ms: None }));
            }
            "pool.cooldown.started" => {
                // The cooldown the last failure's classification asked for.
                let ms = s.get("retryAfterMs").and_then(Value::as_f64);
                let p = pool()?;
                if let Some((_, Answer::Failed { retry_after_ms, .. })) =
                    answers.iter_mut().rev().find(|(q, _)| *q == p)
                {
                    *retry_after_ms = ms;
                }
            }
            _ => {}
        }
    }
    let outcome = top
        .object("outcome", &["providerId", "code"])
        .map_err(invalid)?
        .ok_or_else(|| bad("outcome", "is required"))?;
    let recorded = Side {
        order,
        provider_id: outcome.string("providerId").map_err(invalid)?.map(str::to_string),
        code: outcome.string("code").map_err(invalid)?.map(str::to_string),
    };
    if recorded.provider_id.is_none() == recorded.code.is_none() {
        return Err(bad("outcome", "must be { providerId } or { code }"));
    }
    Ok(Input {
        sandbox,
        detached,
        request,
        labels,
        router_at,
        health_at,
        ids,
        recorded,
        health,
        pacing,
        budgets,
        capacity,
        answers,
        signals: inputs.get("signals").cloned(),
        unavailable,
    })
}

/// A record's JSON text read for a replay: every part but the facts of the ranked pools
/// (`registry.pools`, half a record's text), which are parsed only when the replay decides
/// otherwise and the `changes` compare them. Text that is not a JSON object is no record.
pub fn record_of_text(text: &str) -> (Value, Option<&str>) {
    use serde_json::value::RawValue;
    type Raw<'a> = std::collections::BTreeMap<String, &'a RawValue>;
    let Ok(top) = serde_json::from_str::<Raw<'_>>(text) else { return (Value::Null, None) };
    let mut out = serde_json::Map::new();
    let mut pools = None;
    for (k, raw) in top {
        let v = if k == "registry" {
            match serde_json::from_str::<Raw<'_>>(raw.get()) {
                Ok(reg) => {
                    let mut m = serde_json::Map::new();
                    for (rk, rv) in reg {
                        if rk == "pools" {
                            // An array is all a replay needs to know of it now.
                            let t = rv.get();
                            pools = Some(t);
                            m.insert(rk, if t.starts_with('[') { Value::Array(Vec::new()) } else { Value::Null });
                        } else {
                            m.insert(rk, serde_json::from_str(rv.get()).unwrap_or(Value::Null));
                        }
                    }
                    Value::Object(m)
                }
                Err(_) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            }
        } else {
            serde_json::from_str(raw.get()).unwrap_or(Value::Null)
        };
        out.insert(k, v);
    }
    (Value::Object(out), pools)
}

impl Router {
    /// [`Router::replay`] of a record's JSON text (a line of a records file): the facts of its
    /// ranked pools are read only if the replay decides otherwise.
    pub fn replay_text(&self, text: &str) -> Result<Replayed, Failure> {
        let (mut record, pools) = record_of_text(text);
        let out = self.replay(&record)?;
        if out.same {
            return Ok(out);
        }
        if let (Some(pools), Some(reg)) = (pools, record.get_mut("registry")) {
            reg["pools"] = serde_json::from_str(pools).unwrap_or(Value::Null);
        }
        self.replay(&record)
    }

    /// Decides the decision `record` recorded again, by this router's registry and options on
    /// the record's inputs (see the module docs). A record of another schema, or malformed, is
    /// `INVALID_DECISION_RECORD` naming the field.
    pub fn replay(&self, record: &Value) -> Result<Replayed, Failure> {
        let input = read(record)?;
        let req = Rc::new(parse_request(&input.request).map_err(|e| match e {
            crate::core::CoreError::InvalidRequest { field, expectation } => {
                bad(format!("request.{field}"), &expectation)
            }
            _ => bad("request", "must be a valid request"),
        })?);
        // Once quietly; a replay that decides otherwise runs again observed, for the reasons
        // of the pools it now rejects (what `changes` say).
        let (replayed, mut assumed, _) = self.decide_again(&input, &req, false)?;
        if replayed == input.recorded {
            return Ok(compare(input.recorded, replayed, &input.ids, &[], assumed, |_| None));
        }
        let (_, _, rejected) = self.decide_again(&input, &req, true)?;
        assumed.dedup();
        let registry = self.registry.clone();
        let now_facts = crate::core::decision::RegistryFacts::of(registry.borrow().registry.pools());
        // The facts of the pools the decision ranked, as the record wrote them.
        let recorded_facts = record.get("registry").and_then(|r| r.get("pools")).and_then(Value::as_array);
        let changed = |pool: &str| -> Option<String> {
            let was = recorded_facts?.iter().find(|p| p.get("id").and_then(Value::as_str) == Some(pool))?;
            let i = now_facts.ids.iter().position(|id| &**id == pool)?;
            facts_diff(was, &now_facts.pools[i])
        };
        Ok(compare(input.recorded, replayed, &input.ids, &rejected, assumed, changed))
    }

    /// One run of the recorded request on a scratch router seeded with the record's inputs:
    /// the replayed side, what it assumed, and (`observe`) the pools it rejected with why.
    #[allow(clippy::type_complexity, reason = "a private triple read once by replay()")]
    fn decide_again(
        &self,
        input: &Input,
        req: &Rc<crate::core::request::Request>,
        observe: bool,
    ) -> Result<(Side, Vec<String>, Vec<(String, String)>), Failure> {
        let mut scratch = self.scratch(observe)?;
        let now = Now { health: input.health_at, router: input.router_at };
        if let Some(h) = scratch.health.as_mut() {
            for (pool, seed) in &input.health {
                h.seed(pool, *seed);
            }
        }
        for (pool, seed) in &input.pacing {
            scratch.pacing.seed(pool, *seed);
        }
        if let Some(b) = scratch.budgets.as_mut() {
            for (rule, key, usage) in &input.budgets {
                b.seed(rule, key, usage, input.router_at);
            }
        }
        let registry = scratch.registry.clone();
        let extras = {
            let pools = registry.borrow();
            let index_of = |id: &str| pools.registry.position(id);
            let signals = match &input.signals {
                None => None,
                Some(v) => Some(signals_of(v, "inputs.signals", index_of).map_err(invalid)?),
            };
            let unavailable: Vec<usize> = input.unavailable.iter().filter_map(|id| index_of(id)).collect();
            (signals.is_some() || !input.unavailable.is_empty()).then(|| Extras {
                credentials_unavailable: (!input.unavailable.is_empty()).then_some(unavailable),
                signals,
            })
        };
        let mut assumed = Vec::new();
        let mut rejected: Vec<(String, String)> = Vec::new();
        let side = match scratch.begin(
            req,
            input.detached,
            input.labels.clone().into(),
            extras.as_ref(),
            input.sandbox,
            now,
        ) {
            Err(e) => {
                if let Some(crate::core::error::Rejected::Pools(rs)) = &e.rejections {
                    for r in rs {
                        rejected.push((r.provider_id.clone(), reasons_text(&r.reasons)));
                    }
                }
                Side { order: Vec::new(), provider_id: None, code: Some(e.code.clone()) }
            }
            Ok((key, next)) => drive(&mut scratch, key, next, input, now, &mut assumed, &mut rejected)?,
        };
        Ok((side, assumed, rejected))
    }

    /// A router with this one's settings over its registry, that never waits, records and
    /// coordinates nothing, and keeps its budgets in process (what a replay drives).
    fn scratch(&self, observe: bool) -> Result<Router, Failure> {
        let mut s: Settings = self.settings.clone();
        s.queue = None;
        s.decisions = None;
        s.observe = observe;
        s.combined = false;
        s.intents = false;
        if let Some(c) = s.capacity.as_mut() {
            c.coordinated = false;
        }
        let store = Some(Rc::new(std::cell::RefCell::new(crate::core::mapping::MappingStore::default())));
        let mut r = Router::new(s, self.registry.clone(), store, None, self.clock)?;
        if let Some(b) = r.budgets.as_mut() {
            b.shared = false;
        }
        Ok(r)
    }
}

/// Rejection reasons as the explanations write them (`MISSING_CAPABILITY gpu`).
fn reasons_text(reasons: &[crate::core::events::ReasonFact]) -> String {
    reasons.iter().map(|r| format!("{} {}", r.code, r.detail)).collect::<Vec<_>>().join("; ")
}

/// Drives job `key` of the scratch router from `next` with the record's answers.
fn drive(
    r: &mut Router,
    key: u32,
    mut next: super::step::Next,
    input: &Input,
    now: Now,
    assumed: &mut Vec<String>,
    rejected: &mut Vec<(String, String)>,
) -> Result<Side, Failure> {
    let mut launches: Vec<(String, usize)> = Vec::new();
    let mut reads: Vec<(String, usize)> = Vec::new();
    let nth = |seen: &mut Vec<(String, usize)>, pool: &str| -> usize {
        match seen.iter_mut().find(|(p, _)| p == pool) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                seen.push((pool.to_string(), 1));
                0
            }
        }
    };
    let wall = now.router;
    // The order is the job's from its begin (a success may end the job in its own call).
    let order = ids_of(r, key);
    for _ in 0..MAX_STEPS {
        if r.observe {
            for e in r.job_events(key, now)? {
                if let Event::ProviderRejected { pool, reasons } = e.event {
                    rejected.push((pool.to_string(), reasons_text(&reasons)));
                }
            }
        }
        // By the registry: a success may have ended the job in its own call.
        let pool = {
            let pools = r.registry.borrow();
            if next.pool < pools.registry.pools().len() {
                pools.pool_id(next.pool).to_string()
            } else {
                String::new()
            }
        };
        next = match next.kind {
            StepKind::Launch => {
                let k = nth(&mut launches, &pool);
                let answer = input.answers.iter().filter(|(p, _)| *p == pool).map(|(_, a)| a).nth(k);
                match answer {
                    None | Some(Answer::Succeeded) => {
                        if answer.is_none() {
                            assumed.push(format!("{pool}: no launch of it recorded; assumed to succeed"));
                        }
                        r.succeeded(key, "replayed", now, wall)?
                    }
                    Some(Answer::Failed { code, retryable, retry_after_ms }) => match code.as_str() {
                        crate::core::acquisition::ACQUISITION_TIMEOUT => r.timed_out(key, now)?,
                        crate::core::acquisition::MALFORMED_HANDLE => r.malformed(key, now)?,
                        _ => {
                            let n = r.threw(key, None, now)?;
                            if n.kind == StepKind::Classify {
                                let unknown = code == crate::core::fallback::OUTCOME_UNKNOWN;
                                let (c, rt) =
                                    if unknown { (None, None) } else { (Some(code.as_str()), Some(*retryable)) };
                                r.classified(key, c, rt, *retry_after_ms, now)?
                            } else {
                                n
                            }
                        }
                    },
                }
            }
            StepKind::Admit => {
                let k = nth(&mut reads, &pool);
                let m = input.capacity.iter().filter(|(p, _)| *p == pool).map(|(_, m)| m).nth(k).cloned();
                let m = m.unwrap_or_else(|| {
                    assumed.push(format!("{pool}: capacity not read in the record; assumed to have room"));
                    Measurement::Known(Vec::new())
                });
                r.admit(key, &m, now)?
            }
            StepKind::Intent => r.intent_written(key, true, now)?,
            StepKind::Persist => r.persisted(key, true, now)?,
            StepKind::Cleanup => r.cleaned_up(key, true, now)?,
            StepKind::Unintent => r.intent_settled(key, now)?,
            StepKind::Succeeded => {
                r.end(key);
                return Ok(Side { order, provider_id: Some(pool), code: None });
            }
            StepKind::Done => {
                let code = r.failure(key)?.map(|f| f.error.code).unwrap_or_else(|| "INTERNAL_ERROR".into());
                r.end(key);
                return Ok(Side { order, provider_id: None, code: Some(code) });
            }
            // The scratch router coordinates nothing, keeps no warm pool and never waits.
            other => return Err(Fault::internal(&format!("(a replay step it cannot answer: {other:?})"))),
        };
    }
    Err(Fault::internal("(a replay that did not end)"))
}

fn ids_of(r: &mut Router, key: u32) -> Vec<String> {
    r.candidates(key).unwrap_or_default()
}

/// A pool's part in one side of a decision.
fn part(side: &Side, pool: &str) -> Option<String> {
    let pos = side.order.iter().position(|p| p == pool)?;
    let rank = ordinal(pos + 1);
    Some(match (&side.provider_id, pos) {
        (Some(p), _) if p == pool => format!("ranked {rank}, chosen"),
        _ => format!("ranked {rank}"),
    })
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Whether two JSON values are the same facts (numbers by value: a record read back writes
/// `100` where the registry holds `100.0`).
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(Some(p), Some(q)))
        }
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            x.len() == y.len() && x.iter().all(|(k, v)| same(Some(v), y.get(k)))
        }
        (a, b) => a == b,
    }
}

/// What changed in a pool's facts (its signals and capabilities), as `field was → now`.
fn facts_diff(was: &Value, now: &Value) -> Option<String> {
    let mut out = Vec::new();
    for part in ["signals", "capabilities", "rateLimit"] {
        let (a, b) = (was.get(part), now.get(part));
        if same(a, b) {
            continue;
        }
        let keys: Vec<&String> = match (a.and_then(Value::as_object), b.and_then(Value::as_object)) {
            (Some(x), Some(y)) => x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))).collect(),
            _ => {
                out.push(format!("{part} changed"));
                continue;
            }
        };
        for k in keys {
            let (x, y) = (a.and_then(|v| v.get(k)), b.and_then(|v| v.get(k)));
            if !same(x, y) {
                let show = |v: Option<&Value>| v.map_or_else(|| "none".to_string(), Value::to_string);
                out.push(format!("{k} {} → {}", show(x), show(y)));
            }
        }
    }
    (!out.is_empty()).then(|| out.join(", "))
}

fn compare(
    recorded: Side,
    replayed: Side,
    ids: &[String],
    rejected: &[(String, String)],
    assumed: Vec<String>,
    changed: impl Fn(&str) -> Option<String>,
) -> Replayed {
    let same = recorded == replayed;
    let mut pools: Vec<&String> = Vec::new();
    for p in recorded
        .order
        .iter()
        .chain(replayed.order.iter())
        .chain(recorded.provider_id.iter())
        .chain(replayed.provider_id.iter())
    {
        if !pools.contains(&p) {
            pools.push(p);
        }
    }
    let mut changes = Vec::new();
    for pool in pools {
        let was = part(&recorded, pool).unwrap_or_else(|| "not ranked".to_string());
        let now = part(&replayed, pool).unwrap_or_else(|| "not ranked".to_string());
        if was == now {
            continue;
        }
        let why = match rejected.iter().find(|(p, _)| p == pool) {
            Some((_, reasons)) => format!("now rejected: {reasons}"),
            None if !ids.iter().any(|id| id == pool) => "not in the recorded registry".to_string(),
            None if changed(pool).is_some() => format!("definition changed: {}", changed(pool).unwrap_or_default()),
            None if part(&replayed, pool).is_none() => "not ranked now (skipped or not reached)".to_string(),
            None if part(&recorded, pool).is_none() => "eligible now".to_string(),
            None => "rank or outcome changed (signals, health, capacity or budgets)".to_string(),
        };
        changes.push(Change { pool: pool.clone(), was, now, why });
    }
    let name = |s: &Side| s.provider_id.clone().or_else(|| s.code.clone()).unwrap_or_default();
    let summary = if same {
        format!("same: {}", name(&recorded))
    } else {
        let first = changes.first().map(|c| format!(": {} {}", c.pool, c.why)).unwrap_or_default();
        format!("{} → {}{}", name(&recorded), name(&replayed), first)
    };
    Replayed { same, recorded, replayed, changes, assumed, summary }
}

#[cfg(test)]
mod tests {
    //! Determinism is the test: scenarios (pools, requests, capacity readings, failing and
    //! classified launches, budgets, health, clock steps) run through a router with records
    //! on; every record replayed on an identically configured router decides the same. And
    //! must-fire pairs: a change that matters flips a recorded choice and names the pool.
    use super::super::step::{flags, StepKind};
    use super::super::{CapacitySettings, Now, Owner, Router, Settings};
    use super::Replayed;
    use crate::core::capacity::{Measurement, ResourceMeasurement, UnknownReason};
    use crate::core::decision::{DecisionConfig, LabelMode};
    use crate::core::ids::SandboxKey;
    use crate::core::mapping::MappingStore;
    use crate::core::request::parse_request;
    use crate::core::router::pools::Pools;
    use proptest::prelude::*;
    use serde_json::{json, Value};
    use std::cell::RefCell;
    use std::rc::Rc;

    const T0: i64 = 1_800_000_000_000;
    const CAPS: [&str; 4] = ["pty", "publicPorts", "snapshots", "syncExec"];

    #[derive(Debug, Clone)]
    struct World {
        /// Per pool: its capabilities (bits of CAPS) and cost.
        pools: Vec<(u8, f64)>,
        capacity: bool,
        budget: Option<u32>,
        health: bool,
    }

    /// One provision: the capability it requires (bit), its attempts, each launch's answer
    /// (0 success, 1 retryable classified failure, 2 terminal classified, 3 unclassified,
    /// 4 timeout), each capacity reading (used of 4), the clock step before it.
    #[derive(Debug, Clone)]
    struct Ask {
        need: Option<usize>,
        attempts: u32,
        launches: Vec<u8>,
        reads: Vec<u8>,
        step_ms: i64,
        tenant: u8,
    }

    fn registry(w: &World) -> Rc<RefCell<Pools>> {
        let mut p = Pools::default();
        for (i, (caps, cost)) in w.pools.iter().enumerate() {
            let supported: Vec<&str> =
                CAPS.iter().enumerate().filter(|(b, _)| caps & (1 << b) != 0).map(|(_, c)| *c).collect();
            let def = json!({
                "id": format!("p{i}"),
                "capabilities": { "supported": supported },
                "signals": { "estimatedCost": cost, "coldStartLatencyMs": 100 + i * 10, "readyLatencyMs": 1000,
                             "completionWithinBudgetRate": 0.9, "available": true },
            });
            p.add(&def, false, w.capacity).unwrap();
        }
        Rc::new(RefCell::new(p))
    }

    fn settings(w: &World, decisions: bool) -> Settings {
        let health = if w.health {
            crate::core::health::config_of_option(
                &json!({ "failureThreshold": 1, "retryableFailureThreshold": 2, "cooldownMs": 5_000 }),
            )
            .unwrap()
        } else {
            None
        };
        let budgets = match w.budget {
            Some(n) => crate::core::budget::rules_of_option(&json!([
                { "id": "launches", "key": { "label": "tenant" }, "limit": { "launches": n, "concurrent": n + 1 }, "window": { "slidingMs": 60_000 } }
            ]))
            .unwrap(),
            None => Vec::new(),
        };
        Settings {
            fleet: "f".into(),
            health,
            capacity: w.capacity.then(|| CapacitySettings {
                provider_order: (0..w.pools.len()).map(|i| format!("p{i}")).collect(),
                reservation_ttl_ms: 10_000,
                coordinated: false,
            }),
            callback_timeout_ms: 1_000,
            operation_timeout_ms: 1_000,
            capacity_timeout_ms: 1_000,
            intents: false,
            classifier: true,
            observe: false,
            owner: Owner { host: "h".into(), pid: 1.0, session: "s".into() },
            budgets,
            limits: Default::default(),
            combined: false,
            queue: None,
            decisions: decisions.then_some(DecisionConfig { keep: 10_000, labels: LabelMode::Keep, sink: false }),
            decision_key: [7; 32],
        }
    }

    fn router(w: &World, decisions: bool) -> Router {
        let store = Some(Rc::new(RefCell::new(MappingStore::default())));
        Router::new(settings(w, decisions), registry(w), store, None, T0).unwrap()
    }

    /// `router(w, true)` with an observer.
    fn observed(w: &World) -> Router {
        let store = Some(Rc::new(RefCell::new(MappingStore::default())));
        Router::new(Settings { observe: true, ..settings(w, true) }, registry(w), store, None, T0).unwrap()
    }

    fn request(a: &Ask) -> Value {
        let mut r = json!({ "routing": { "maxAcquisitionAttempts": a.attempts } });
        if let Some(b) = a.need {
            r["requires"] = json!({ "requiredCapabilities": [CAPS[b]] });
        }
        r
    }

    /// Runs `asks` on `r` as JavaScript would, answering each step from the ask.
    fn run(r: &mut Router, asks: &[Ask]) {
        let mut now = T0;
        for (n, a) in asks.iter().enumerate() {
            now += a.step_ms;
            let at = Now { health: now, router: now };
            let mut req = parse_request(&request(a)).unwrap();
            req.source = Some(Rc::from(request(a).to_string()));
            let labels = vec![("tenant".to_string(), format!("t{}", a.tenant))];
            let id = SandboxKey::from_bytes([(n % 251) as u8 + 1; 16]);
            let Ok((key, mut next)) = r.begin(&Rc::new(req), false, labels.into(), None, id, at) else { continue };
            let (mut launches, mut reads) = (a.launches.iter().cycle(), a.reads.iter().cycle());
            for _ in 0..100 {
                // As JavaScript does: an observer's events are taken at each step that has
                // some; without one, JavaScript is never asked (the record takes them itself).
                if next.flags & flags::EVENTS != 0 {
                    assert!(r.observe, "events handed to JavaScript without an observer");
                    if next.flags & flags::ENDED == 0 {
                        r.job_events(key, at).unwrap();
                    }
                }
                next = match next.kind {
                    StepKind::Launch => match launches.next().copied().unwrap_or(0) {
                        0 => r.succeeded(key, "x", at, now).unwrap(),
                        4 => r.timed_out(key, at).unwrap(),
                        k => {
                            let n = r.threw(key, None, at).unwrap();
                            assert_eq!(n.kind, StepKind::Classify);
                            match k {
                                1 => r.classified(key, Some("FULL"), Some(true), None, at).unwrap(),
                                2 => r.classified(key, Some("BAD"), Some(false), None, at).unwrap(),
                                _ => r.classified(key, None, None, None, at).unwrap(),
                            }
                        }
                    },
                    StepKind::Admit => {
                        let used = f64::from(reads.next().copied().unwrap_or(0));
                        let m = if used >= 5.0 {
                            Measurement::Unknown(UnknownReason::Malformed)
                        } else {
                            Measurement::Known(vec![ResourceMeasurement::new("sandboxes", used, 4.0, "sandboxes", 1.0)])
                        };
                        r.admit(key, &m, at).unwrap()
                    }
                    StepKind::Succeeded | StepKind::Done => break,
                    other => panic!("a step the scenario does not answer: {other:?}"),
                };
            }
            r.end(key);
        }
    }

    fn world() -> impl Strategy<Value = World> {
        (
            proptest::collection::vec((0u8..16, 1u32..50), 1..6),
            any::<bool>(),
            proptest::option::of(1u32..4),
            any::<bool>(),
        )
            .prop_map(|(pools, capacity, budget, health)| World {
                pools: pools.into_iter().map(|(c, cost)| (c, f64::from(cost) / 100.0)).collect(),
                capacity,
                budget,
                health,
            })
    }

    fn asks() -> impl Strategy<Value = Vec<Ask>> {
        proptest::collection::vec(
            (
                proptest::option::of(0usize..4),
                1u32..4,
                proptest::collection::vec(0u8..5, 1..4),
                proptest::collection::vec(0u8..6, 1..4),
                0i64..3_000,
                0u8..3,
            )
                .prop_map(|(need, attempts, launches, reads, step_ms, tenant)| Ask {
                    need,
                    attempts,
                    launches,
                    reads,
                    step_ms,
                    tenant,
                }),
            1..8,
        )
    }

    fn records(r: &Router) -> Vec<Value> {
        let mut all = r.decisions_list(&Value::Null).unwrap();
        all.reverse();
        all
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]
        /// Every record replays the same on an identically configured router.
        #[test]
        fn every_record_replays_the_same_on_the_same_configuration(w in world(), a in asks()) {
            let mut r = router(&w, true);
            run(&mut r, &a);
            let twin = router(&w, false);
            for rec in records(&r) {
                let out: Replayed = twin.replay(&rec).unwrap();
                prop_assert!(out.same, "{}\n{rec:#}", out.summary);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]
        /// With an observer a record copies each step's events as JavaScript takes them;
        /// without one it takes them from the machine once, at the end: the same records.
        #[test]
        fn an_observer_changes_no_record(w in world(), a in asks()) {
            let (mut quiet, mut watched) = (router(&w, true), observed(&w));
            run(&mut quiet, &a);
            run(&mut watched, &a);
            prop_assert_eq!(records(&quiet), records(&watched));
        }
    }

    #[test]
    fn must_fire_an_observed_provision_hands_its_events_to_javascript() {
        let mut r = observed(&two());
        let req = Rc::new(parse_request(&json!({})).unwrap());
        let (_, next) = r
            .begin(
                &req,
                false,
                Default::default(),
                None,
                SandboxKey::from_bytes([1; 16]),
                Now { health: T0, router: T0 },
            )
            .unwrap();
        assert_ne!(next.flags & flags::EVENTS, 0);
    }

    #[test]
    fn must_not_fire_a_recorded_provision_without_an_observer_keeps_its_events_from_javascript() {
        let mut r = router(&two(), true);
        let req = Rc::new(parse_request(&json!({})).unwrap());
        let at = Now { health: T0, router: T0 };
        let (key, next) = r.begin(&req, false, Default::default(), None, SandboxKey::from_bytes([1; 16]), at).unwrap();
        assert_eq!(next.flags & flags::EVENTS, 0);
        let next = r.succeeded(key, "x", at, T0).unwrap();
        assert_eq!(next.flags & flags::EVENTS, 0);
        let steps: Vec<String> =
            records(&r)[0]["steps"].as_array().unwrap().iter().map(|s| s["type"].to_string()).collect();
        assert_eq!(
            steps,
            ["\"attempt.started\"", "\"attempt.succeeded\"", "\"mapping.persisted\""],
            "the record took them"
        );
    }

    /// The scenarios the property draws reach what it claims to cover: failed and classified
    /// launches, capacity skips, budget refusals, circuits and no eligible pool all occur in
    /// 500 of them (so `same` is not the easy answer of records that did nothing).
    #[test]
    fn the_scenarios_cover_failures_capacity_budgets_circuits_and_refusals() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut seen = std::collections::BTreeMap::<String, usize>::new();
        for _ in 0..500 {
            let w = world().new_tree(&mut runner).unwrap().current();
            let a = asks().new_tree(&mut runner).unwrap().current();
            let mut r = router(&w, true);
            run(&mut r, &a);
            for rec in records(&r) {
                for s in rec["steps"].as_array().unwrap() {
                    *seen.entry(s["type"].as_str().unwrap().to_string()).or_default() += 1;
                }
                if let Some(code) = rec["outcome"]["code"].as_str() {
                    *seen.entry(code.to_string()).or_default() += 1;
                }
                let circuits = rec["inputs"]["health"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, h)| h.get("circuit").is_some());
                *seen.entry("a circuit read open".to_string()).or_default() += circuits.count();
            }
        }
        for kind in [
            "attempt.failed",
            "fallback.advanced",
            "capacity.skipped",
            "budget.refused",
            "health.circuit.opened",
            "a circuit read open",
            "NO_ELIGIBLE_PROVIDER",
            "PROVIDER_CAPACITY_EXHAUSTED",
            "BUDGET_EXHAUSTED",
            "ACQUISITION_TIMEOUT",
        ] {
            assert!(seen.get(kind).copied().unwrap_or(0) > 0, "{kind} never occurs: {seen:?}");
        }
    }

    /// Two pools, p0 cheaper; one provision on p0 recorded.
    fn recorded(w: &World) -> Value {
        let mut r = router(w, true);
        run(&mut r, &[Ask { need: Some(0), attempts: 2, launches: vec![0], reads: vec![0], step_ms: 0, tenant: 0 }]);
        records(&r).pop().unwrap()
    }

    fn two() -> World {
        World { pools: vec![(0b1, 0.01), (0b1, 0.02)], capacity: false, budget: None, health: true }
    }

    #[test]
    fn must_fire_a_pool_made_dearer_flips_the_choice_and_is_named() {
        let rec = recorded(&two());
        let dearer = World { pools: vec![(0b1, 0.05), (0b1, 0.02)], ..two() };
        let out = router(&dearer, false).replay(&rec).unwrap();
        assert!(!out.same);
        assert_eq!(
            (out.recorded.provider_id.as_deref(), out.replayed.provider_id.as_deref()),
            (Some("p0"), Some("p1"))
        );
        let c = out.changes.iter().find(|c| c.pool == "p0").unwrap();
        assert!(c.why.contains("estimatedCost 0.01 → 0.05"), "{}", c.why);
    }

    #[test]
    fn must_fire_a_capability_removed_flips_the_choice_with_the_reason() {
        let rec = recorded(&two());
        let without = World { pools: vec![(0, 0.01), (0b1, 0.02)], ..two() };
        let out = router(&without, false).replay(&rec).unwrap();
        assert!(!out.same);
        let c = out.changes.iter().find(|c| c.pool == "p0").unwrap();
        assert!(c.why.contains("REQUIRED_CAPABILITY_MISSING"), "{}", c.why);
        assert!(out.summary.starts_with("p0 → p1"), "{}", out.summary);
    }

    #[test]
    fn must_fire_a_budget_lowered_flips_the_choice() {
        let w = World { budget: Some(3), ..two() };
        let mut r = router(&w, true);
        let ask = Ask { need: Some(0), attempts: 2, launches: vec![0], reads: vec![0], step_ms: 10, tenant: 0 };
        run(&mut r, &[ask.clone(), ask.clone()]);
        let rec = records(&r).pop().unwrap();
        assert!(router(&w, false).replay(&rec).unwrap().same, "must-not-fire: the same budget");
        let lower = World { budget: Some(1), ..w };
        let out = router(&lower, false).replay(&rec).unwrap();
        assert!(!out.same, "{}", out.summary);
        assert_eq!(out.replayed.code.as_deref(), Some("BUDGET_EXHAUSTED"));
    }

    #[test]
    fn must_fire_an_open_circuit_in_the_inputs_flips_the_choice() {
        let mut rec = recorded(&two());
        rec["inputs"]["health"] = json!({ "p0": { "samples": 1, "failures": 1, "opens": 1,
            "circuit": { "state": "open", "until": T0 + 60_000, "cooldownMs": 60_000, "cause": "CONSECUTIVE_FAILURES" } } });
        let out = router(&two(), false).replay(&rec).unwrap();
        assert!(!out.same);
        assert_eq!(out.replayed.provider_id.as_deref(), Some("p1"));
    }

    #[test]
    fn must_not_fire_a_change_to_a_pool_that_was_never_eligible_changes_nothing() {
        let w = World { pools: vec![(0b1, 0.01), (0b1, 0.02), (0, 0.001)], ..two() };
        let rec = recorded(&w);
        let changed = World { pools: vec![(0b1, 0.01), (0b1, 0.02), (0b10, 0.0001)], ..two() };
        let out = router(&changed, false).replay(&rec).unwrap();
        assert!(out.same, "{}", out.summary);
        assert!(out.changes.is_empty());
    }

    #[test]
    fn hostile_records_are_typed_errors_naming_the_field() {
        let rec = recorded(&two());
        let r = router(&two(), false);
        let field = |v: Value| r.replay(&v).unwrap_err().field.unwrap_or_default();
        let with = |path: &[&str], v: Value| {
            let mut x = rec.clone();
            let mut at = &mut x;
            for p in &path[..path.len() - 1] {
                at = &mut at[*p];
            }
            at[path[path.len() - 1]] = v;
            x
        };
        assert!(r.replay(&json!(5)).is_err_and(|e| e.code == super::INVALID_DECISION_RECORD));
        assert_eq!(field(with(&["schema"], json!("sandbox-router.decision/2"))), "schema");
        assert_eq!(field(with(&["id"], json!("sbx_nope"))), "id");
        assert_eq!(field(with(&["inputs", "clock", "router"], json!(1.5))), "inputs.clock.router");
        assert_eq!(field(with(&["order"], json!([1]))), "order");
        assert_eq!(field(with(&["steps"], json!(Value::Array(vec![json!({}); 100_001])))), "steps");
        assert_eq!(field(with(&["request", "routing", "strategy"], json!("fastest"))), "request.routing.strategy");
        assert_eq!(field(with(&["outcome"], json!({}))), "outcome");
        assert_eq!(field(with(&["inputs", "health"], json!({ "p0": { "samples": -1 } }))), "inputs.health.p0.samples");
        assert_eq!(field(with(&["extra"], json!(1))), "extra");
        // A record naming a pool the registry lacks: a typed answer, not a crash.
        let ghost = with(&["order"], json!(["ghost"]));
        assert!(r.replay(&ghost).is_ok());
    }
}
