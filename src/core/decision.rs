//! Decision records (router option `decisions`): what each provision decided, and every
//! input it read, kept so that an operator can ask "why did this sandbox go there" and
//! replay the same inputs against another configuration (`router/decisions.rs`).
//!
//! Why record inputs and not only the outcome? A replay is only faithful if it sees what
//! the decision saw: the request as validated, the registry's facts, the pools' health and
//! pacing as they were read, the capacity readings, the budgets' usage, each launch's answer
//! and the clock. Everything the core reads passes through the router, so the router
//! captures it as it reads it ([`Record`]), compactly (a few vectors per provision: the record
//! is written as JSON only when it is read, handed to a sink or replayed).
//!
//! What a record never holds: a credential (none reaches the core), a provider's error text
//! (only the sanitized codes), a launch's `env` or `name`, or a label's value unless the
//! option says `labels: 'keep'` (default `'hash'`: a keyed HMAC-SHA-256, so equal values stay
//! equal within the router's key; `'drop'`: the keys only).

use crate::core::budget::{Micros, Usage};
use crate::core::capabilities::{Capabilities, Lifetime};
use crate::core::capacity::{Measurement, ResourceMeasurement, UnknownReason};
pub use crate::core::events::{is_step, Kept};
use crate::core::events::{Emitted, Event, FieldSink, PoolId, ReasonFact};
use crate::core::health::{Cause, PoolSeed};
use crate::core::ids::SandboxKey;
use crate::core::json::{object, FieldError};
use crate::core::pacing::PaceSeed;
use crate::core::pool::Pool;
use crate::core::router::pools::{Extras, Pools, ResolverFailure, SignalAnswer};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};
use std::sync::Arc;

/// The `schema` of the records this build writes and replays.
pub const SCHEMA: &str = "sandbox-router.decision/1";
/// Code of a record that cannot be replayed (another schema, a missing or malformed field).
pub const INVALID_DECISION_RECORD: &str = "INVALID_DECISION_RECORD";
/// Default `decisions.keep`: records kept in the router's ring.
pub const DEFAULT_KEEP: usize = 1_000;
/// Largest `decisions.keep`.
pub const MAX_KEEP: usize = 100_000;
/// Most records one `decisions()` call answers.
pub const MAX_LIST: usize = 100_000;

/// How a record writes label values (`decisions.labels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelMode {
    /// A keyed hash of each value (the default): equal values stay equal within the router.
    Hash,
    /// The values as given.
    Keep,
    /// The keys only.
    Drop,
}

impl LabelMode {
    /// Its option name.
    pub fn name(self) -> &'static str {
        match self {
            LabelMode::Hash => "hash",
            LabelMode::Keep => "keep",
            LabelMode::Drop => "drop",
        }
    }
}

/// The router option `decisions`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecisionConfig {
    /// Records kept in the ring.
    pub keep: usize,
    /// How label values are written.
    pub labels: LabelMode,
    /// Whether a `sink` is given (JavaScript calls it with each record).
    pub sink: bool,
}

impl DecisionConfig {
    /// Reads `decisions`: absent, `null` or `false` is off; `true` takes the defaults; an
    /// object `{ keep?, labels?, sink? }` (`sink`'s kind given apart: `sink`) is on. Each error
    /// names its field.
    pub fn read(v: &Value, sink: Option<&str>) -> Result<Option<DecisionConfig>, FieldError> {
        match v {
            Value::Null | Value::Bool(false) => return Ok(None),
            Value::Bool(true) => {
                return Ok(Some(DecisionConfig { keep: DEFAULT_KEEP, labels: LabelMode::Hash, sink: false }))
            }
            _ => {}
        }
        let o = object(v, "decisions", &["keep", "labels", "sink"])?;
        let keep = o.integer_in("keep", 1, MAX_KEEP as i64)?.map_or(DEFAULT_KEEP, |n| n as usize);
        let labels = match o.choice("labels", &["hash", "keep", "drop"])? {
            None | Some("hash") => LabelMode::Hash,
            Some("keep") => LabelMode::Keep,
            Some(_) => LabelMode::Drop,
        };
        let sink = match sink.filter(|k| *k != "undefined") {
            None => false,
            Some("function") => true,
            Some(_) => return Err(FieldError::new("decisions.sink", "must be a function (record) => void")),
        };
        Ok(Some(DecisionConfig { keep, labels, sink }))
    }
}

/// The fleet table's retention (`PostgresMappingStore.decisionSink({ keep, maxAgeMs })`):
/// at most `keep` records (the newest), none older than `max_age_ms` (written at).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Records kept, the newest (default [`DEFAULT_TABLE_KEEP`]).
    pub keep: u64,
    /// Longest a record is kept, in ms (default [`DEFAULT_TABLE_MAX_AGE_MS`]).
    pub max_age_ms: u64,
}

/// The table's default count: a fleet's history of 100,000 decisions.
pub const DEFAULT_TABLE_KEEP: u64 = 100_000;
/// The table's smallest and largest count.
pub const TABLE_KEEP: (u64, u64) = (1, 100_000_000);
/// The table's default age: 7 days.
pub const DEFAULT_TABLE_MAX_AGE_MS: u64 = 7 * 86_400_000;
/// The table's shortest and longest age: 1 s and 400 days.
pub const TABLE_MAX_AGE_MS: (u64, u64) = (1_000, 400 * 86_400_000);
/// How often one process prunes the table (at most once this many ms, after a write).
pub const TABLE_PRUNE_EVERY_MS: i64 = 1_000;
/// Records a table query answers when it names no `limit`.
pub const DEFAULT_TABLE_LIST: usize = 1_000;

impl Retention {
    /// Reads `decisionSink(options)` (`null`: every default); the error names the field.
    pub fn read(v: &Value) -> Result<Retention, FieldError> {
        if v.is_null() {
            return Ok(Retention { keep: DEFAULT_TABLE_KEEP, max_age_ms: DEFAULT_TABLE_MAX_AGE_MS });
        }
        if !v.is_object() {
            return Err(FieldError::new("options", "must be an object { keep?, maxAgeMs? }"));
        }
        let o = object(v, "", &["keep", "maxAgeMs"])?;
        let (k, a) = (TABLE_KEEP, TABLE_MAX_AGE_MS);
        let keep = o.integer_in("keep", k.0 as i64, k.1 as i64)?.map_or(DEFAULT_TABLE_KEEP, |n| n as u64);
        let age = o.integer_in("maxAgeMs", a.0 as i64, a.1 as i64)?;
        Ok(Retention { keep, max_age_ms: age.map_or(DEFAULT_TABLE_MAX_AGE_MS, |n| n as u64) })
    }

    /// The values [`Retention::read`] answered, back from JavaScript: held to its ranges.
    pub fn within(keep: f64, max_age_ms: f64) -> Retention {
        let (k, a) = (TABLE_KEEP, TABLE_MAX_AGE_MS);
        Retention { keep: (keep as u64).clamp(k.0, k.1), max_age_ms: (max_age_ms as u64).clamp(a.0, a.1) }
    }
}

/// What the fleet table keeps of a record besides its text: its id, instant and sandbox id
/// (read from the record itself: `id` `dec_…`, `at` epoch ms, `sandboxId` when it made one).
pub fn table_keys(record: &Value) -> Result<(String, i64, Option<String>), FieldError> {
    let id = record.get("id").and_then(Value::as_str).filter(|t| t.starts_with("dec_") && t.len() <= 64);
    let id = id.ok_or_else(|| FieldError::new("id", "must be a decision record's id (dec_…)"))?;
    let at = record.get("at").and_then(Value::as_f64).filter(|x| x.is_finite());
    let at = at.ok_or_else(|| FieldError::new("at", "must be epoch milliseconds"))? as i64;
    let sandbox = match record.get("sandboxId") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_str()
                .and_then(SandboxKey::parse)
                .ok_or_else(|| FieldError::new("sandboxId", "must be a sandbox id (sbx_…)"))?
                .to_string(),
        ),
    };
    Ok((id.to_string(), at, sandbox))
}

/// One capacity reading a decision made: the measurement, and what the router held on the
/// pool in each of its dimensions when it judged it (so a replay judges the same room).
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityRead {
    /// Pool index.
    pub pool: usize,
    /// What the reader answered (or why nothing could be read).
    pub measurement: Measurement,
    /// Held before this admission, per dimension of the measurement.
    pub held: Vec<f64>,
}

/// One applying budget rule's usage as the decision read it.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetRead {
    /// The rule's id.
    pub rule: String,
    /// The label's value (a label value: written per [`LabelMode`]).
    pub value: String,
    /// What the key held.
    pub usage: Usage,
}

/// A provision's decision record: what it read and did, captured while its job runs (one per
/// job when records are on), kept in the ring once it settled. One allocation: its steps and
/// candidates are inline, so a full ring drops one block per provision (and hands it to the
/// next provision, emptied).
#[derive(Debug)]
pub struct Record {
    /// The provision's sandbox id (the record's id is `dec_` and its hex).
    pub sandbox: SandboxKey,
    /// Whether the provision made a sandbox.
    pub made: bool,
    /// The router's clock at the decision, ms.
    pub at: i64,
    /// The health clock at the decision, ms.
    pub health_at: i64,
    /// `provisionDetached`.
    pub detached: bool,
    /// The request's validated text (its labels apart).
    pub request: Option<Rc<str>>,
    /// The request's launch labels: the job's own list, shared (its mapping holds it too).
    pub labels: Arc<crate::core::labels::Labels>,
    /// The registry's facts at the decision.
    pub registry: Option<Rc<RegistryFacts>>,
    /// The candidates, best first (pool indices).
    pub candidates: SmallVec<[u32; 8]>,
    /// The pool it went to, or the error code.
    pub outcome: Result<u32, Box<str>>,
    /// Each pool's health and pacing as the decision read them (pools with state only).
    pub pools: Vec<(usize, Option<PoolSeed>, Option<PaceSeed>)>,
    /// The resolver's answers and credential readiness.
    pub extras: Option<Box<Extras>>,
    /// Each applying budget rule's usage.
    pub budgets: Vec<BudgetRead>,
    /// The capacity readings, in order.
    pub capacity: Vec<CapacityRead>,
    /// The job's events (its steps), in order.
    pub events: Vec<Kept>,
    /// How many of the machine's events are in `events` already (while JavaScript has not
    /// taken them for an observer).
    pub seen: usize,
}

impl Default for Record {
    fn default() -> Self {
        Record {
            sandbox: SandboxKey::from_bytes([0; 16]),
            made: false,
            at: 0,
            health_at: 0,
            detached: false,
            request: None,
            labels: Arc::default(),
            registry: None,
            candidates: SmallVec::new(),
            outcome: Ok(0),
            pools: Vec::new(),
            extras: None,
            budgets: Vec::new(),
            capacity: Vec::new(),
            events: Vec::new(),
            seen: 0,
        }
    }
}

impl Record {
    /// Empties it for another provision, keeping its vectors' room.
    fn clear(&mut self) {
        self.request = None;
        self.registry = None;
        self.extras = None;
        self.candidates.clear();
        self.outcome = Ok(0);
        self.pools.clear();
        self.budgets.clear();
        self.capacity.clear();
        self.events.clear();
        self.seen = 0;
    }
}

/// Emptied records kept for reuse at most.
const SPARE_LOGS: usize = 8;

/// A registry's facts as records write them, made once per registry version: its pools
/// (id, capabilities, signals, rate limit, warm) and their digest.
#[derive(Debug)]
pub struct RegistryFacts {
    /// Each pool's facts, by index.
    pub pools: Vec<Value>,
    /// The pools' ids, by index.
    pub ids: Vec<PoolId>,
    /// SHA-256 of the facts' JSON, first 16 hex digits: equal registries, equal digests.
    pub digest: String,
}

impl RegistryFacts {
    /// The facts of `pools`.
    pub fn of(pools: &[Pool]) -> RegistryFacts {
        let facts: Vec<Value> = pools.iter().map(pool_facts).collect();
        let text = serde_json::to_string(&facts).unwrap_or_default();
        let digest = hex(&Sha256::digest(text.as_bytes())[..8]);
        RegistryFacts { pools: facts, ids: pools.iter().map(|p| PoolId::from(p.id.as_str())).collect(), digest }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One pool's facts: what routing reads of its definition.
fn pool_facts(p: &Pool) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(p.id));
    o.insert("capabilities".into(), capabilities_json(&p.capabilities));
    o.insert(
        "signals".into(),
        match &p.signals {
            Ok(s) => json!({
                "estimatedCost": s.estimated_cost, "coldStartLatencyMs": s.cold_start_latency_ms,
                "readyLatencyMs": s.ready_latency_ms, "completionWithinBudgetRate": s.completion_within_budget_rate,
                "available": s.available,
            }),
            Err(e) => json!({ "invalid": e.reason.code() }),
        },
    );
    if let Some(l) = p.rate_limit {
        o.insert("rateLimit".into(), json!({ "launchesPerSecond": l.launches_per_second, "burst": l.burst }));
    }
    if p.warm.is_some() {
        o.insert("warmPool".into(), json!(true));
    }
    Value::Object(o)
}

/// A pool's capabilities in the definition's own shape (so a replay can rebuild the
/// registry a record names).
fn capabilities_json(c: &Capabilities) -> Value {
    let mut o = Map::new();
    let mut put = |k: &str, v: Value| {
        o.insert(k.into(), v);
    };
    if !c.supported.is_empty() {
        put("supported", json!(c.supported));
    }
    if c.image_identity.is_some() || !c.binaries.is_empty() {
        let mut image = Map::new();
        if let Some(i) = &c.image_identity {
            image.insert("identity".into(), json!(i));
        }
        if !c.binaries.is_empty() {
            image.insert("binaries".into(), json!(c.binaries));
        }
        put("image", Value::Object(image));
    }
    if let Some(e) = c.egress {
        put("egress", json!(e));
    }
    let mut timeout = Map::new();
    if !c.timeout_semantics.is_empty() {
        timeout.insert("semantics".into(), json!(c.timeout_semantics));
    }
    if let Some(g) = c.timeout_granularity_ms {
        timeout.insert("granularityMs".into(), json!(g));
    }
    match c.max_lifetime {
        Lifetime::Unknown => {}
        Lifetime::Unbounded => {
            timeout.insert("maxSandboxLifetimeMs".into(), Value::Null);
        }
        Lifetime::Capped(ms) => {
            timeout.insert("maxSandboxLifetimeMs".into(), json!(ms));
        }
    }
    if !timeout.is_empty() {
        put("timeout", Value::Object(timeout));
    }
    if let Some(d) = c.durability {
        put("stateDurability", json!(d));
    }
    if !c.restrictions.is_empty() {
        put("restrictions", json!(c.restrictions));
    }
    if !c.regions.is_empty() {
        put("regions", json!(c.regions));
    }
    let r = &c.resources;
    let dims: Map<String, Value> = [("cpu", r.cpu), ("memoryMb", r.memory_mb), ("diskMb", r.disk_mb), ("gpu", r.gpu)]
        .into_iter()
        .filter(|(_, v)| *v != 0.0)
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    if !dims.is_empty() {
        put("resources", Value::Object(dims));
    }
    if let Some(i) = c.isolation {
        put("isolation", json!(i));
    }
    Value::Object(o)
}

/// The records a router keeps, and the key its label hashes use.
#[derive(Debug)]
pub struct Decisions {
    /// The option.
    pub config: DecisionConfig,
    ring: VecDeque<Box<Record>>,
    /// Records not yet handed to the sink (the newest), when it has one.
    unsunk: usize,
    key: [u8; 32],
    /// The current registry (held weakly: its allocation, not its pools, so no other
    /// registry can take its address) and its facts.
    facts: Option<(Weak<RefCell<Pools>>, Rc<RegistryFacts>)>,
    /// Dropped records, emptied, for the next provisions.
    #[allow(clippy::vec_box, reason = "records move boxed between the ring, this list and the jobs, never copied")]
    spare: Vec<Box<Record>>,
}

type HmacSha256 = Hmac<Sha256>;

impl Decisions {
    /// Records under `config`, label values hashed with `key` (random per router).
    pub fn new(config: DecisionConfig, key: [u8; 32]) -> Decisions {
        Decisions { config, ring: VecDeque::new(), unsunk: 0, key, facts: None, spare: Vec::new() }
    }

    /// The facts of `registry`, whose pools are `pools` (kept while it is the same registry, of
    /// the same size: a registry only grows; another registry, even of as many pools, makes
    /// them again).
    pub fn facts(&mut self, registry: &Rc<RefCell<Pools>>, pools: &[Pool]) -> Rc<RegistryFacts> {
        match &self.facts {
            Some((of, f)) if std::ptr::eq(of.as_ptr(), Rc::as_ptr(registry)) && f.ids.len() == pools.len() => f.clone(),
            _ => {
                let f = Rc::new(RegistryFacts::of(pools));
                self.facts = Some((Rc::downgrade(registry), f.clone()));
                f
            }
        }
    }

    /// An empty record for a provision's decision (one the ring dropped, when there is one).
    pub fn record(&mut self) -> Box<Record> {
        self.spare.pop().unwrap_or_default()
    }

    /// Keeps `record`, the oldest dropped past `keep` (emptied and kept for reuse).
    pub fn push(&mut self, record: Box<Record>) {
        if self.ring.len() >= self.config.keep {
            if let Some(mut old) = self.ring.pop_front() {
                if self.spare.len() < SPARE_LOGS {
                    old.clear();
                    self.spare.push(old);
                }
            }
        }
        self.ring.push_back(record);
        if self.config.sink {
            self.unsunk = (self.unsunk + 1).min(self.config.keep);
        }
    }

    /// How many records are kept.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Whether records wait for the sink.
    pub fn has_unsunk(&self) -> bool {
        self.unsunk > 0
    }

    /// The records not yet handed to the sink, oldest first, as JSON.
    pub fn take_unsunk(&mut self) -> Vec<Value> {
        let n = std::mem::take(&mut self.unsunk);
        let from = self.ring.len().saturating_sub(n);
        self.ring.iter().skip(from).map(|r| self.json(r)).collect()
    }

    /// The kept records, newest first: of `sandbox` only, at or after `since` (router
    /// clock, ms), at most `limit`.
    pub fn list(&self, sandbox: Option<SandboxKey>, since: Option<i64>, limit: usize) -> Vec<Value> {
        self.ring
            .iter()
            .rev()
            .filter(|r| sandbox.is_none_or(|s| s == r.sandbox))
            .filter(|r| since.is_none_or(|t| r.at >= t))
            .take(limit.min(MAX_LIST))
            .map(|r| self.json(r))
            .collect()
    }

    /// A label value as records write it.
    pub fn label_value(&self, value: &str) -> Value {
        match self.config.labels {
            LabelMode::Keep => json!(value),
            LabelMode::Drop => Value::Null,
            LabelMode::Hash => {
                let mut mac = match HmacSha256::new_from_slice(&self.key) {
                    Ok(m) => m,
                    Err(_) => return Value::Null,
                };
                mac.update(value.as_bytes());
                json!(format!("h:{}", hex(&mac.finalize().into_bytes()[..12])))
            }
        }
    }

    /// `record` as the documented JSON object.
    pub fn json(&self, r: &Record) -> Value {
        let empty = RegistryFacts { pools: Vec::new(), ids: Vec::new(), digest: String::new() };
        let registry = r.registry.as_deref().unwrap_or(&empty);
        let ids = &registry.ids;
        let name = |i: usize| ids.get(i).map_or(Value::Null, |p| json!(&**p));
        let mut request: Value =
            r.request.as_deref().and_then(|t| serde_json::from_str(t).ok()).unwrap_or_else(|| json!({}));
        // The launch's options are not a decision's: only its labels, as the mode writes them.
        if let Some(o) = request.as_object_mut() {
            o.remove("launch");
            if !r.labels.is_empty() {
                let labels: Map<String, Value> =
                    r.labels.iter().map(|(k, v)| (k.to_string(), self.label_value(v))).collect();
                o.insert("launch".into(), json!({ "labels": labels }));
            }
        }
        let mut health = Map::new();
        let mut pacing = Map::new();
        for (pool, h, p) in &r.pools {
            let id = ids.get(*pool).map_or_else(String::new, |p| p.to_string());
            if let Some(h) = h {
                health.insert(id.clone(), health_json(h));
            }
            if let Some(p) = p {
                pacing.insert(
                    id,
                    json!({ "tokens": p.tokens, "at": p.at, "coolingUntil": p.cooling_until, "fleetUntil": p.fleet_until }),
                );
            }
        }
        let mut inputs = Map::new();
        inputs.insert("clock".into(), json!({ "router": r.at, "health": r.health_at }));
        if !health.is_empty() {
            inputs.insert("health".into(), Value::Object(health));
        }
        if !pacing.is_empty() {
            inputs.insert("pacing".into(), Value::Object(pacing));
        }
        if let Some(x) = &r.extras {
            if let Some(u) = &x.credentials_unavailable {
                inputs.insert("credentialsUnavailable".into(), u.iter().map(|&i| name(i)).collect());
            }
            if let Some(answers) = &x.signals {
                let mut m = Map::new();
                for a in answers {
                    let v = match (&a.json, a.failed) {
                        (_, Some(f)) => json!({ "failed": failure_name(f) }),
                        (Some(t), None) => serde_json::from_str(t).unwrap_or(Value::Null),
                        (None, None) => Value::Null,
                    };
                    m.insert(name(a.pool).as_str().unwrap_or_default().to_string(), v);
                }
                inputs.insert("signals".into(), Value::Object(m));
            }
        }
        if !r.budgets.is_empty() {
            let rows: Vec<Value> = r
                .budgets
                .iter()
                .map(|b| {
                    json!({
                        "rule": b.rule, "key": self.label_value(&b.value),
                        "usedCost": b.usage.used_cost.units(), "reservedCost": b.usage.reserved_cost.units(),
                        "usedLaunches": b.usage.used_launches, "reservedLaunches": b.usage.reserved_launches,
                        "live": b.usage.live, "inflight": b.usage.inflight, "oldest": b.usage.oldest,
                    })
                })
                .collect();
            inputs.insert("budgets".into(), Value::Array(rows));
        }
        if !r.capacity.is_empty() {
            let reads: Vec<Value> = r
                .capacity
                .iter()
                .map(|c| {
                    let mut v = c.measurement.to_json();
                    if let Some(o) = v.as_object_mut() {
                        o.insert("providerId".into(), name(c.pool));
                        if !c.held.is_empty() {
                            o.insert("held".into(), json!(c.held));
                        }
                    }
                    v
                })
                .collect();
            inputs.insert("capacity".into(), Value::Array(reads));
        }
        let ids = r.registry.as_ref().map(|f| &f.ids[..]).unwrap_or_default();
        let steps: Vec<Value> = r.events.iter().map(|e| self.event_json(&e.event(ids))).collect();
        let mut out = Map::new();
        out.insert("schema".into(), json!(SCHEMA));
        out.insert("id".into(), json!(record_id(r.sandbox)));
        out.insert("at".into(), json!(r.at));
        if r.made {
            out.insert("sandboxId".into(), json!(r.sandbox.to_string()));
        }
        out.insert("detached".into(), json!(r.detached));
        out.insert("labels".into(), json!(self.config.labels.name()));
        out.insert("request".into(), request);
        // Every pool's id, and the facts of those the decision ranked (a pool it rejected is
        // named by id; the digest covers every pool's facts).
        let used: Vec<&Value> = r.candidates.iter().filter_map(|&i| registry.pools.get(i as usize)).collect();
        out.insert(
            "registry".into(),
            json!({ "digest": registry.digest, "ids": registry.ids.iter().map(|p| &**p).collect::<Vec<_>>(), "pools": used }),
        );
        out.insert("inputs".into(), Value::Object(inputs));
        out.insert("order".into(), r.candidates.iter().map(|&i| name(i as usize)).collect());
        out.insert("steps".into(), Value::Array(steps));
        out.insert(
            "outcome".into(),
            match &r.outcome {
                Ok(pool) => json!({ "providerId": name(*pool as usize) }),
                Err(code) => json!({ "code": &**code }),
            },
        );
        Value::Object(out)
    }

    /// One of the job's events as a step: its documented fields (a budget key's value as the
    /// mode writes labels).
    fn event_json(&self, e: &Event) -> Value {
        let mut s = JsonFields { map: Map::new(), decisions: self };
        s.map.insert("type".into(), json!(e.type_name()));
        e.write_fields(&mut s);
        Value::Object(s.map)
    }
}

/// `router.decisions(query)`: of one sandbox, from an instant, at most `limit`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Query {
    /// Only the record of this sandbox.
    pub sandbox: Option<SandboxKey>,
    /// Only records at or after this instant (router clock, ms).
    pub since: Option<i64>,
    /// At most this many (default: every kept record).
    pub limit: Option<usize>,
}

/// Reads a `decisions()` query (`null`: everything), strictly: `{ sandboxId?, since?, limit? }`
/// (`since`: epoch ms or an ISO-8601 instant). Each error names its field.
pub fn query_of(v: &Value) -> Result<Query, FieldError> {
    if v.is_null() {
        return Ok(Query::default());
    }
    if !v.is_object() {
        return Err(FieldError::new("options", "must be an object"));
    }
    let o = object(v, "", &["sandboxId", "since", "limit"])?;
    let sandbox = match o.string("sandboxId")? {
        None => None,
        Some(id) => Some(
            SandboxKey::parse(id)
                .ok_or_else(|| FieldError::new(o.field("sandboxId"), "must be a sandbox id (sbx_…)"))?,
        ),
    };
    let since = match o.get("since") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => {
            Some(n.as_f64().filter(|x| x.is_finite()).map(|x| x as i64).ok_or_else(|| {
                FieldError::new(o.field("since"), "must be epoch milliseconds or an ISO-8601 instant")
            })?)
        }
        Some(Value::String(t)) => Some(
            t.parse::<jiff::Timestamp>()
                .map(|ts| ts.as_millisecond())
                .map_err(|_| FieldError::new(o.field("since"), "must be epoch milliseconds or an ISO-8601 instant"))?,
        ),
        Some(_) => return Err(FieldError::new(o.field("since"), "must be epoch milliseconds or an ISO-8601 instant")),
    };
    let limit = o.integer_in("limit", 1, MAX_LIST as i64)?.map(|n| n as usize);
    Ok(Query { sandbox, since, limit })
}

/// [`query_of`] with its error typed: `INVALID_INPUT` naming the field (the router's ring and
/// the fleet's table read a query alike).
pub fn read_query(v: &Value) -> Result<Query, crate::core::error::Failure> {
    query_of(v).map_err(|e| {
        crate::core::error::Fault::invalid(
            crate::core::error::ErrorClass::RequestValidation,
            "INVALID_INPUT",
            format!("invalid decisions query: {} {}", e.field, e.expectation),
            e.field,
        )
    })
}

/// [`Retention::read`] with its error typed: `INVALID_CONFIGURATION` naming the field.
pub fn read_retention(v: &Value) -> Result<Retention, crate::core::error::Failure> {
    Retention::read(v).map_err(|e| crate::core::error::Fault::config("decisionSink", e.field, &e.expectation))
}

/// A record's [`FieldError`] typed: `INVALID_DECISION_RECORD` naming the field.
pub fn invalid_record(e: FieldError) -> crate::core::error::Failure {
    let mut f = crate::core::error::Fault::new(
        crate::core::error::ErrorClass::RequestValidation,
        INVALID_DECISION_RECORD,
        format!("invalid decision record: {} {}", e.field, e.expectation),
    );
    f.field = Some(e.field);
    f
}

/// [`table_keys`] of a record's JSON text, its error typed ([`invalid_record`]).
pub fn read_table_keys(text: &str) -> Result<(String, i64, Option<String>), crate::core::error::Failure> {
    let v: Value = serde_json::from_str(text).map_err(|_| invalid_record(FieldError::new("(root)", "must be JSON")))?;
    table_keys(&v).map_err(invalid_record)
}

/// Names provision `sandbox`'s record in `event`, when it is one of the `provision.*` events.
pub fn name_record(event: &mut Event, sandbox: SandboxKey) {
    match event {
        Event::ProvisionValidated { decision_id, .. }
        | Event::ProvisionRanked { decision_id, .. }
        | Event::ProvisionExhausted { decision_id, .. } => *decision_id = Some(record_id(sandbox)),
        _ => {}
    }
}

/// The record id of provision `sandbox`.
pub fn record_id(sandbox: SandboxKey) -> String {
    let id = sandbox.to_string();
    format!("dec_{}", id.strip_prefix(crate::core::ids::SANDBOX_ID_PREFIX).unwrap_or(&id))
}

fn failure_name(f: ResolverFailure) -> &'static str {
    match f {
        ResolverFailure::TimedOut => "TIMED_OUT",
        ResolverFailure::Threw => "THREW",
        ResolverFailure::Unreadable => "UNREADABLE",
    }
}

/// A pool's health as a record writes it (a count at zero, a figure not yet measured: left out).
fn health_json(h: &PoolSeed) -> Value {
    let mut m = Map::new();
    m.insert("samples".into(), json!(h.samples));
    for (k, v) in [("latencyMs", h.latency_ms), ("successRate", h.success_rate)] {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    }
    for (k, v) in [("failures", h.failures), ("retryableFailures", h.retryable_failures), ("opens", h.opens)] {
        if v != 0 {
            m.insert(k.into(), json!(v));
        }
    }
    if let Some((trial, until, cooldown_ms, cause)) = h.circuit {
        m.insert(
            "circuit".into(),
            json!({ "state": if trial { "trial" } else { "open" }, "until": until, "cooldownMs": cooldown_ms, "cause": cause.code() }),
        );
    }
    Value::Object(m)
}

/// Events written as JSON fields.
struct JsonFields<'a> {
    map: Map<String, Value>,
    decisions: &'a Decisions,
}

impl FieldSink for JsonFields<'_> {
    fn str(&mut self, name: &'static str, value: &str) {
        self.map.insert(name.into(), json!(value));
    }
    fn num(&mut self, name: &'static str, value: f64) {
        self.map.insert(name.into(), json!(value));
    }
    fn bool(&mut self, name: &'static str, value: bool) {
        self.map.insert(name.into(), json!(value));
    }
    fn null(&mut self, name: &'static str) {
        self.map.insert(name.into(), Value::Null);
    }
    fn strs(&mut self, name: &'static str, values: &[PoolId]) {
        self.map.insert(name.into(), values.iter().map(|v| json!(&**v)).collect());
    }
    fn reasons(&mut self, name: &'static str, values: &[ReasonFact]) {
        self.map.insert(name.into(), values.iter().map(|r| json!({ "code": r.code, "detail": r.detail })).collect());
    }
    fn key(&mut self, name: &'static str, label: &str, value: &str) {
        self.map.insert(name.into(), json!({ "label": label, "value": self.decisions.label_value(value) }));
    }
}

/// Reads a measurement a record wrote (`capacity` input), strictly.
pub fn measurement_of(v: &Value, field: &str) -> Result<(Measurement, Vec<f64>), FieldError> {
    let o = object(v, field, &["status", "resources", "reason", "providerId", "held"])?;
    match o.string("status")? {
        Some("unknown") => {
            let reason = o.string("reason")?.and_then(UnknownReason::from_code);
            let Some(reason) = reason else {
                return Err(FieldError::new(o.field("reason"), "must be a capacity reason code"));
            };
            Ok((Measurement::Unknown(reason), Vec::new()))
        }
        Some("known") => {
            let Some(Value::Array(rs)) = o.get("resources") else {
                return Err(FieldError::new(o.field("resources"), "must be an array"));
            };
            let mut out = Vec::with_capacity(rs.len());
            for (i, r) in rs.iter().enumerate() {
                let f = format!("{}.resources[{i}]", o.path());
                let r = object(r, &f, &["resource", "used", "limit", "unit", "headroom", "required"])?;
                let num = |k: &str| -> Result<f64, FieldError> {
                    r.get(k)
                        .and_then(Value::as_f64)
                        .filter(|x| x.is_finite())
                        .ok_or_else(|| FieldError::new(r.field(k), "must be a finite number"))
                };
                let resource =
                    r.string("resource")?.ok_or_else(|| FieldError::new(r.field("resource"), "must be a string"))?;
                let unit = r.string("unit")?.unwrap_or("");
                out.push(ResourceMeasurement::new(resource, num("used")?, num("limit")?, unit, num("required")?));
            }
            let held = match o.get("held") {
                None => Vec::new(),
                Some(Value::Array(h)) => h
                    .iter()
                    .map(|x| x.as_f64().filter(|x| x.is_finite()))
                    .collect::<Option<Vec<f64>>>()
                    .ok_or_else(|| FieldError::new(o.field("held"), "must be an array of finite numbers"))?,
                Some(_) => return Err(FieldError::new(o.field("held"), "must be an array of finite numbers")),
            };
            Ok((Measurement::Known(out), held))
        }
        _ => Err(FieldError::new(o.field("status"), "must be known or unknown")),
    }
}

/// Reads a pool's health a record wrote, strictly.
pub fn health_of(v: &Value, field: &str) -> Result<PoolSeed, FieldError> {
    let o = object(
        v,
        field,
        &["samples", "latencyMs", "successRate", "failures", "retryableFailures", "opens", "circuit"],
    )?;
    let int = |k: &str| -> Result<u64, FieldError> {
        match o.get(k) {
            None => Ok(0),
            Some(v) => v.as_u64().ok_or_else(|| FieldError::new(o.field(k), "must be a non-negative integer")),
        }
    };
    let opt = |k: &str| -> Result<Option<f64>, FieldError> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(x) => x
                .as_f64()
                .filter(|x| x.is_finite())
                .map(Some)
                .ok_or_else(|| FieldError::new(o.field(k), "must be a finite number or null")),
        }
    };
    let circuit = match o.object("circuit", &["state", "until", "cooldownMs", "cause"])? {
        None => None,
        Some(c) => {
            let trial = match c.string("state")? {
                Some("open") => false,
                Some("trial") => true,
                _ => return Err(FieldError::new(c.field("state"), "must be open or trial")),
            };
            let until = c
                .get("until")
                .and_then(Value::as_i64)
                .ok_or_else(|| FieldError::new(c.field("until"), "must be an integer (ms)"))?;
            let cooldown = c
                .get("cooldownMs")
                .and_then(Value::as_u64)
                .ok_or_else(|| FieldError::new(c.field("cooldownMs"), "must be a non-negative integer"))?;
            let cause = c
                .string("cause")?
                .and_then(Cause::from_code)
                .ok_or_else(|| FieldError::new(c.field("cause"), "must be a circuit cause code"))?;
            Some((trial, until, cooldown, cause))
        }
    };
    let small = |n: u64, k: &str| u32::try_from(n).map_err(|_| FieldError::new(o.field(k), "is too large"));
    Ok(PoolSeed {
        samples: int("samples")?,
        latency_ms: opt("latencyMs")?,
        success_rate: opt("successRate")?,
        failures: small(int("failures")?, "failures")?,
        retryable_failures: small(int("retryableFailures")?, "retryableFailures")?,
        opens: small(int("opens")?, "opens")?,
        circuit,
    })
}

/// Reads a pool's pacing a record wrote, strictly.
pub fn pace_of(v: &Value, field: &str) -> Result<PaceSeed, FieldError> {
    let o = object(v, field, &["tokens", "at", "coolingUntil", "fleetUntil"])?;
    let int = |k: &str| {
        o.get(k).and_then(Value::as_i64).ok_or_else(|| FieldError::new(o.field(k), "must be an integer (ms)"))
    };
    let tokens = o
        .get("tokens")
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite())
        .ok_or_else(|| FieldError::new(o.field("tokens"), "must be a finite number"))?;
    Ok(PaceSeed { tokens, at: int("at")?, cooling_until: int("coolingUntil")?, fleet_until: int("fleetUntil")? })
}

/// Reads one applying rule's usage a record wrote, strictly: (rule id, key as written, usage).
pub fn budget_of(v: &Value, field: &str) -> Result<(String, String, Usage), FieldError> {
    let o = object(
        v,
        field,
        &["rule", "key", "usedCost", "reservedCost", "usedLaunches", "reservedLaunches", "live", "inflight", "oldest"],
    )?;
    let rule = o.string("rule")?.ok_or_else(|| FieldError::new(o.field("rule"), "must be a string"))?.to_string();
    let key = match o.get("key") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => String::new(),
        _ => return Err(FieldError::new(o.field("key"), "must be a string or null")),
    };
    let cost = |k: &str| -> Result<Micros, FieldError> {
        o.get(k)
            .and_then(Value::as_f64)
            .filter(|x| *x >= 0.0)
            .and_then(Micros::of)
            .ok_or_else(|| FieldError::new(o.field(k), "must be a cost (a finite non-negative number)"))
    };
    let int = |k: &str| {
        o.get(k).and_then(Value::as_u64).ok_or_else(|| FieldError::new(o.field(k), "must be a non-negative integer"))
    };
    let oldest = match o.get("oldest") {
        None | Some(Value::Null) => None,
        Some(x) => {
            Some(x.as_i64().ok_or_else(|| FieldError::new(o.field("oldest"), "must be an integer (ms) or null"))?)
        }
    };
    Ok((
        rule,
        key,
        Usage {
            used_cost: cost("usedCost")?,
            reserved_cost: cost("reservedCost")?,
            used_launches: int("usedLaunches")?,
            reserved_launches: int("reservedLaunches")?,
            live: int("live")?,
            inflight: int("inflight")?,
            oldest,
        },
    ))
}

/// The resolver's answers a record wrote, by pool index of `ids` (a pool it does not name
/// is left out).
pub fn signals_of(
    v: &Value,
    field: &str,
    index_of: impl Fn(&str) -> Option<usize>,
) -> Result<Vec<SignalAnswer>, FieldError> {
    let Value::Object(m) = v else { return Err(FieldError::new(field, "must be an object")) };
    let mut out = Vec::new();
    for (id, answer) in m {
        let Some(pool) = index_of(id) else { continue };
        let failed = match answer.get("failed").and_then(Value::as_str) {
            Some("TIMED_OUT") => Some(ResolverFailure::TimedOut),
            Some("THREW") => Some(ResolverFailure::Threw),
            Some("UNREADABLE") => Some(ResolverFailure::Unreadable),
            Some(_) => {
                return Err(FieldError::new(
                    format!("{field}.{}", crate::core::json::shown(id)),
                    "names an unknown failure",
                ))
            }
            None => None,
        };
        let json = match (failed, answer) {
            (Some(_), _) | (None, Value::Null) => None,
            (None, a) => Some(a.to_string()),
        };
        out.push(SignalAnswer { pool, json, failed });
    }
    Ok(out)
}

/// The events of `emitted` that are a job's steps (by `sandbox`).
pub fn steps_of(emitted: &[Emitted]) -> impl Iterator<Item = &Event> {
    emitted.iter().map(|e| &e.event).filter(|e| is_step(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_must_not_fire_defaults_and_bounds_are_taken() {
        let d = Retention::read(&Value::Null).unwrap();
        assert_eq!((d.keep, d.max_age_ms), (DEFAULT_TABLE_KEEP, DEFAULT_TABLE_MAX_AGE_MS));
        let r = Retention::read(&json!({ "keep": 1, "maxAgeMs": TABLE_MAX_AGE_MS.1 })).unwrap();
        assert_eq!((r.keep, r.max_age_ms), (1, TABLE_MAX_AGE_MS.1));
        let r = Retention::read(&json!({ "keep": TABLE_KEEP.1, "maxAgeMs": 1_000 })).unwrap();
        assert_eq!((r.keep, r.max_age_ms), (TABLE_KEEP.1, 1_000));
    }

    #[test]
    fn retention_within_must_not_fire_values_in_range_come_back_as_they_are() {
        let r = Retention::within(DEFAULT_TABLE_KEEP as f64, DEFAULT_TABLE_MAX_AGE_MS as f64);
        assert_eq!((r.keep, r.max_age_ms), (DEFAULT_TABLE_KEEP, DEFAULT_TABLE_MAX_AGE_MS));
    }

    #[test]
    fn retention_within_must_fire_values_out_of_range_are_held_to_it() {
        let r = Retention::within(0.0, f64::NAN);
        assert_eq!((r.keep, r.max_age_ms), (TABLE_KEEP.0, TABLE_MAX_AGE_MS.0));
        let r = Retention::within(1e300, 1e300);
        assert_eq!((r.keep, r.max_age_ms), (TABLE_KEEP.1, TABLE_MAX_AGE_MS.1));
    }

    #[test]
    fn retention_must_fire_each_bad_field_is_named() {
        for (v, field) in [
            (json!({ "keep": 0 }), "keep"),
            (json!({ "keep": TABLE_KEEP.1 + 1 }), "keep"),
            (json!({ "keep": 2.5 }), "keep"),
            (json!({ "maxAgeMs": 999 }), "maxAgeMs"),
            (json!({ "maxAgeMs": "7d" }), "maxAgeMs"),
            (json!({ "other": 1 }), "other"),
            (json!(7), "options"),
        ] {
            let e = read_retention(&v).unwrap_err();
            assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_CONFIGURATION", Some(field)), "{v}");
        }
    }

    #[test]
    fn table_keys_must_not_fire_a_record_gives_its_id_instant_and_sandbox() {
        let sbx = format!("sbx_{}", "ab".repeat(16));
        let text = json!({ "id": "dec_1", "at": 1_700_000_000_000_i64, "sandboxId": sbx }).to_string();
        assert_eq!(read_table_keys(&text).unwrap(), ("dec_1".to_string(), 1_700_000_000_000, Some(sbx)));
        let refused = json!({ "id": "dec_2", "at": 5 }).to_string();
        assert_eq!(read_table_keys(&refused).unwrap(), ("dec_2".to_string(), 5, None));
    }

    #[test]
    fn table_keys_must_fire_a_malformed_record_is_invalid_decision_record_naming_the_field() {
        for (text, field) in [
            ("not json", "(root)"),
            (r#"{"at":1}"#, "id"),
            (r#"{"id":"x_1","at":1}"#, "id"),
            (r#"{"id":"dec_1"}"#, "at"),
            (r#"{"id":"dec_1","at":1,"sandboxId":"sbx_nope"}"#, "sandboxId"),
        ] {
            let e = read_table_keys(text).unwrap_err();
            assert_eq!((e.code.as_str(), e.field.as_deref()), (INVALID_DECISION_RECORD, Some(field)), "{text}");
        }
    }
}
