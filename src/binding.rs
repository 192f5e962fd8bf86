//! napi glue: turns JS values into core types and back, and nothing else.
//!
//! Why strings across the seam? A request crosses as one JSON string (V8's
//! `JSON.stringify` and serde_json are both faster than walking a JS object property by
//! property through napi), and hot-path answers come back as compact strings the JS side
//! splits. Errors cross as a JSON-encoded reason (`{"code","message","field"}`) that the
//! JS layer turns into an instance of the right error class. Every entry point runs
//! inside `guard`, so a Rust panic becomes a typed `INTERNAL_ERROR`, never a crash.

use crate::core::explain::summary;
use crate::core::fallback::{after_failure, sanitize, Next};
use crate::core::ids::{validate_provider_id, validate_sandbox_id, SandboxIdSource, SandboxKey};
use crate::core::mapping::{CreatedAt, Mapping, MappingStore};
use crate::core::ranking::Slim;
use crate::core::registry::{route, route_order_into, Decision, Pool, Registry, RouteOptions};
use crate::core::request::{parse_request, Request};
use crate::core::signals::{signal_state, unresolved, SignalState};
use crate::core::CoreError;
use napi::{Error, Result, Status};
use napi_derive::napi;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

/// Objects reachable by integer key from the hot-path free functions.
///
/// Why? On this seam a call to a method of a napi class costs 3-4x a call to a free
/// function (the wrapper must be unwrapped and borrow-checked). The classes stay the
/// owners (their `Drop`, run when JS collects them, removes the entry); the provision hot
/// path calls free functions with the keys instead.
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T: Clone> Slab<T> {
    const fn new() -> Self {
        Slab { items: Vec::new(), free: Vec::new() }
    }

    fn insert(&mut self, t: T) -> u32 {
        match self.free.pop() {
            Some(k) => {
                self.items[k as usize] = Some(t);
                k
            }
            None => {
                self.items.push(Some(t));
                (self.items.len() - 1) as u32
            }
        }
    }

    fn get(&self, k: u32) -> Option<T> {
        self.items.get(k as usize).and_then(Clone::clone)
    }

    fn remove(&mut self, k: u32) {
        if let Some(slot) = self.items.get_mut(k as usize) {
            if slot.take().is_some() {
                self.free.push(k);
            }
        }
    }
}

thread_local! {
    static REGISTRIES: RefCell<Slab<Rc<RefCell<RegistryInner>>>> = const { RefCell::new(Slab::new()) };
    static REQUESTS: RefCell<Slab<Rc<Request>>> = const { RefCell::new(Slab::new()) };
    static STORES: RefCell<Slab<Rc<RefCell<MappingStore>>>> = const { RefCell::new(Slab::new()) };
}

/// The registry behind hot-path key `key` (see [`Slab`]).
pub(crate) fn registry_by_key(key: u32) -> Result<Rc<RefCell<RegistryInner>>> {
    REGISTRIES.with(|s| s.borrow().get(key)).ok_or_else(|| stale("registry"))
}

/// The compiled request behind hot-path key `key`.
pub(crate) fn request_by_key(key: u32) -> Result<Rc<Request>> {
    REQUESTS.with(|s| s.borrow().get(key)).ok_or_else(|| stale("request"))
}

fn stale(what: &str) -> Error {
    encode("INTERNAL_ERROR", &format!("internal error: unknown {what} handle"), None, Value::Null)
}

/// An error crossing the seam: a JSON-encoded `{ code, message, field?, ...extra }` that
/// `lib/errors.js` turns into an instance of the right class.
pub(crate) fn encode(code: &str, message: &str, field: Option<&str>, extra: Value) -> Error {
    let mut v = json!({"code": code, "message": message});
    if let Some(f) = field {
        v["field"] = json!(f);
    }
    if let Value::Object(map) = extra {
        for (k, x) in map {
            v[k] = x;
        }
    }
    Error::new(Status::GenericFailure, v.to_string())
}

/// A core error, encoded with its stable code and field.
pub(crate) fn core_err(e: CoreError) -> Error {
    encode(e.code(), &e.to_string(), e.field(), Value::Null)
}

/// Runs `f`, turning a panic into a typed `INTERNAL_ERROR` (its payload is not exposed).
pub(crate) fn guard<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => Err(encode(
            "INTERNAL_ERROR",
            "internal error in the native routing core (a bug: please report it)",
            None,
            Value::Null,
        )),
    }
}

fn parse_json(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|_| {
        encode("INVALID_REQUEST", &format!("invalid request: {what} is not serializable JSON"), Some(what), Value::Null)
    })
}

fn request_from(text: &str) -> Result<Request> {
    parse_request(&parse_json(text, "request")?).map_err(core_err)
}

/// Validates a provider id; throws an encoded `INVALID_PROVIDER_ID` error.
#[napi]
pub fn check_provider_id(id: String) -> Result<()> {
    guard(|| validate_provider_id(&id).map_err(core_err))
}

/// Validates a sandbox id; throws an encoded `INVALID_SANDBOX_ID` error.
#[napi]
pub fn check_sandbox_id(id: String) -> Result<()> {
    guard(|| validate_sandbox_id(&id).map_err(core_err))
}

/// A validated, parsed request, reusable across calls. The JS layer caches these so a
/// repeated request is parsed once (parsing costs more than routing six pools).
#[napi]
pub struct CompiledRequest {
    req: Rc<Request>,
    key: u32,
}

impl Drop for CompiledRequest {
    fn drop(&mut self) {
        let _ = REQUESTS.try_with(|s| s.borrow_mut().remove(self.key));
    }
}

#[napi]
impl CompiledRequest {
    /// Parses and validates request JSON; throws an encoded error.
    #[napi(constructor)]
    pub fn new(request_json: String) -> Result<Self> {
        guard(|| {
            let req = Rc::new(request_from(&request_json)?);
            let key = REQUESTS.with(|s| s.borrow_mut().insert(req.clone()));
            Ok(CompiledRequest { req, key })
        })
    }

    /// `maxAttempts|fallback(0/1)|acquisitionTimeoutMs|key`.
    #[napi(getter)]
    pub fn info(&self) -> String {
        format!(
            "{}|{}|{}|{}",
            self.req.max_attempts,
            u8::from(self.req.fallback_allowed),
            self.req.acquisition_timeout_ms,
            self.key
        )
    }
}

/// Sanitizes a classifier answer and decides what follows a failed attempt.
/// Returns `ADVANCE:<pos>:<code>`, `TERMINAL:<code>` or `EXHAUSTED:<code>`.
#[napi]
pub fn decide_after_failure(
    code: Option<String>,
    retryable: Option<bool>,
    fallback_allowed: bool,
    attempts_made: u32,
    max_attempts: u32,
    candidates: u32,
) -> Result<String> {
    guard(|| {
        let c = sanitize(code.as_deref(), retryable);
        Ok(
            match after_failure(
                &c,
                fallback_allowed,
                attempts_made as usize,
                max_attempts as usize,
                candidates as usize,
            ) {
                Next::Advance(pos) => format!("ADVANCE:{pos}:{}", c.code),
                Next::Terminal => format!("TERMINAL:{}", c.code),
                Next::Exhausted => format!("EXHAUSTED:{}", c.code),
            },
        )
    })
}

/// Deliberately panics inside `guard`; used by tests to prove a panic becomes a typed error.
#[napi]
pub fn debug_panic() -> Result<()> {
    guard(|| panic!("deliberate panic for the FFI-boundary test"))
}

/// The registered pools of one registry, parsed once.
#[napi]
pub struct NativeRegistry {
    inner: Rc<RefCell<RegistryInner>>,
    key: u32,
}

/// What a registry holds; shared by its class and its hot-path key.
pub(crate) struct RegistryInner {
    pub(crate) registry: Registry,
    ids: SandboxIdSource,
    scratch: Vec<Slim>,
    order: Vec<usize>,
}

impl Drop for NativeRegistry {
    fn drop(&mut self) {
        let _ = REGISTRIES.try_with(|s| s.borrow_mut().remove(self.key));
    }
}

impl Default for NativeRegistry {
    fn default() -> Self {
        Self::new()
    }
}

/// Per-request routing inputs that only the slow paths use.
#[napi(object)]
pub struct RouteExtras {
    /// Pool indices whose credential readiness answered false.
    pub credentials_unavailable: Option<Vec<u32>>,
    /// JSON object: pool index → signals object, or `{"$unresolved": "what happened"}`.
    pub signals_json: Option<String>,
    /// Capacity routing: the explicit provider order that replaces strategy ranking.
    pub provider_order: Option<Vec<String>>,
}

fn signal_overrides(json_text: Option<&str>) -> Result<Option<HashMap<usize, SignalState>>> {
    let Some(text) = json_text else { return Ok(None) };
    let v = parse_json(text, "signals")?;
    let mut out = HashMap::new();
    if let Value::Object(map) = v {
        for (k, s) in map {
            let Ok(i) = k.parse::<usize>() else { continue };
            let state = match s.get("$unresolved").and_then(Value::as_str) {
                Some(what) => unresolved(what),
                None => signal_state(&s),
            };
            out.insert(i, state);
        }
    }
    Ok(Some(out))
}

#[napi]
impl NativeRegistry {
    /// An empty registry.
    #[napi(constructor)]
    pub fn new() -> Self {
        let inner = Rc::new(RefCell::new(RegistryInner {
            registry: Registry::default(),
            ids: SandboxIdSource::default(),
            scratch: Vec::new(),
            order: Vec::new(),
        }));
        let key = REGISTRIES.with(|s| s.borrow_mut().insert(inner.clone()));
        NativeRegistry { inner, key }
    }

    /// The key for the hot-path free functions.
    #[napi(getter)]
    pub fn key(&self) -> u32 {
        self.key
    }

    /// Adds a pool from `{ id, capabilities, signals }` JSON; returns its index.
    #[napi]
    pub fn add_pool(&self, definition_json: String, has_launch_detached: bool) -> Result<u32> {
        guard(|| {
            let v = serde_json::from_str::<Value>(&definition_json).map_err(|_| {
                encode("INVALID_PROVIDER_DEFINITION", "provider definition is not serializable", None, Value::Null)
            })?;
            let pool = Pool::from_json(&v, has_launch_detached).map_err(core_err)?;
            self.inner.borrow_mut().registry.add(pool).map(|i| i as u32).map_err(core_err)
        })
    }

    /// Number of pools.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.inner.borrow().registry.pools().len() as u32
    }

    /// A fresh `sbx_` id.
    #[napi]
    pub fn next_sandbox_id(&self) -> Result<String> {
        guard(|| self.inner.borrow_mut().ids.next_id().map_err(core_err))
    }

    /// The provision plan with per-request extras (readiness, resolver, capacity order);
    /// see [`registry_plan`] for the result and errors.
    #[napi]
    pub fn plan(
        &self,
        request: &CompiledRequest,
        detached: bool,
        extras: Option<RouteExtras>,
        allocate_id: bool,
    ) -> Result<String> {
        guard(|| self.inner.borrow_mut().plan(&request.req, detached, extras.as_ref(), allocate_id))
    }

    /// Indices of pools that pass the hard requirements and credentials (for a resolver).
    #[napi]
    pub fn survivors(
        &self,
        request: &CompiledRequest,
        detached: bool,
        extras: Option<RouteExtras>,
    ) -> Result<Vec<u32>> {
        guard(|| {
            let unavailable: Vec<usize> = extras
                .as_ref()
                .and_then(|e| e.credentials_unavailable.as_ref())
                .map(|v| v.iter().map(|i| *i as usize).collect())
                .unwrap_or_default();
            let opts = RouteOptions { detached, credentials_unavailable: &unavailable, ..RouteOptions::default() };
            let inner = self.inner.borrow();
            Ok(crate::core::registry::requirement_survivors(inner.registry.pools(), &request.req, &opts)
                .into_iter()
                .map(|i| i as u32)
                .collect())
        })
    }
}

/// The provision hot path: plan for registry `registry_key` and compiled request
/// `request_key` without extras. Returns `sbx_id|i,j,k` (pool indices, best first, at
/// most `maxAttempts`; the id is empty unless `allocate_id`). Throws an encoded
/// `NO_ELIGIBLE_PROVIDER` error (with the explained rejections and the id) when nothing is
/// eligible.
#[napi]
pub fn registry_plan(registry_key: u32, request_key: u32, detached: bool, allocate_id: bool) -> Result<String> {
    guard(|| {
        let inner = REGISTRIES.with(|s| s.borrow().get(registry_key)).ok_or_else(|| stale("registry"))?;
        let req = REQUESTS.with(|s| s.borrow().get(request_key)).ok_or_else(|| stale("request"))?;
        let mut inner = inner.borrow_mut();
        inner.plan(&req, detached, None, allocate_id)
    })
}

impl RegistryInner {
    fn plan(
        &mut self,
        req: &Request,
        detached: bool,
        extras: Option<&RouteExtras>,
        allocate_id: bool,
    ) -> Result<String> {
        let capacity = extras.is_some_and(|e| e.provider_order.is_some());
        // Capacity skips consume no attempt, so capacity routing needs every candidate.
        let limit = if capacity { None } else { Some(req.max_attempts as usize) };
        let mut order = std::mem::take(&mut self.order);
        match extras {
            None => route_order_into(
                &self.registry,
                req,
                &RouteOptions { detached, limit, ..RouteOptions::default() },
                &mut self.scratch,
                &mut order,
            ),
            Some(e) => {
                let unavailable: Vec<usize> = e
                    .credentials_unavailable
                    .as_ref()
                    .map(|v| v.iter().map(|i| *i as usize).collect())
                    .unwrap_or_default();
                let overrides = signal_overrides(e.signals_json.as_deref())?;
                let opts = RouteOptions {
                    detached,
                    credentials_unavailable: &unavailable,
                    signals: overrides.as_ref(),
                    provider_order: e.provider_order.as_deref(),
                    limit,
                    detail: false,
                };
                route_order_into(&self.registry, req, &opts, &mut self.scratch, &mut order)
            }
        }
        let id = if allocate_id { self.ids.next_id().map_err(core_err)? } else { String::new() };
        if order.is_empty() {
            self.order = order;
            return Err(self.no_eligible(req, detached, extras, allocate_id.then_some(id.as_str()))?);
        }
        use std::fmt::Write;
        let mut out = id;
        out.push('|');
        for (n, i) in order.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            let _ = write!(out, "{i}");
        }
        self.order = order;
        Ok(out)
    }

    /// Every pool's verdict with every reason, texts interned (explanations).
    pub(crate) fn decide_interned(
        &self,
        req: &Request,
        detached: bool,
        extras: Option<&RouteExtras>,
        interner: &mut crate::core::requirements::Interner,
    ) -> Result<crate::core::registry::InternedDecision> {
        let unavailable: Vec<usize> = extras
            .and_then(|e| e.credentials_unavailable.as_ref())
            .map(|v| v.iter().map(|i| *i as usize).collect())
            .unwrap_or_default();
        let overrides = signal_overrides(extras.and_then(|e| e.signals_json.as_deref()))?;
        let opts = RouteOptions {
            detached,
            credentials_unavailable: &unavailable,
            signals: overrides.as_ref(),
            provider_order: extras.and_then(|e| e.provider_order.as_deref()),
            limit: None,
            detail: true,
        };
        Ok(crate::core::registry::route_interned(self.registry.pools(), req, &opts, interner))
    }

    fn decide(
        &self,
        req: &Request,
        detached: bool,
        extras: Option<&RouteExtras>,
        limit: Option<usize>,
        detail: bool,
    ) -> Result<Decision> {
        let unavailable: Vec<usize> = extras
            .and_then(|e| e.credentials_unavailable.as_ref())
            .map(|v| v.iter().map(|i| *i as usize).collect())
            .unwrap_or_default();
        let overrides = signal_overrides(extras.and_then(|e| e.signals_json.as_deref()))?;
        let opts = RouteOptions {
            detached,
            credentials_unavailable: &unavailable,
            signals: overrides.as_ref(),
            provider_order: extras.and_then(|e| e.provider_order.as_deref()),
            limit,
            detail,
        };
        Ok(route(self.registry.pools(), req, &opts))
    }

    fn no_eligible(
        &self,
        req: &Request,
        detached: bool,
        extras: Option<&RouteExtras>,
        id: Option<&str>,
    ) -> Result<Error> {
        let d = self.decide(req, detached, extras, None, true)?;
        let pools = self.registry.pools();
        let line = summary(0, d.total, &d.rejected);
        let rejections: Vec<Value> = d
            .rejected
            .iter()
            .map(|r| {
                json!({"providerId": pools[r.index].id,
                       "reasons": r.reasons.iter().map(|x| json!({"code": x.reason.code(), "detail": x.detail})).collect::<Vec<_>>()})
            })
            .collect();
        Ok(encode(
            "NO_ELIGIBLE_PROVIDER",
            &line,
            None,
            json!({"summary": line, "rejections": rejections, "sandboxId": id}),
        ))
    }
}

/// The default in-memory mapping store (sync core; the JS class adds the async contract).
#[napi]
pub struct NativeMappingStore {
    store: Rc<RefCell<MappingStore>>,
    key: u32,
}

impl Drop for NativeMappingStore {
    fn drop(&mut self) {
        let _ = STORES.try_with(|s| s.borrow_mut().remove(self.key));
    }
}

impl Default for NativeMappingStore {
    fn default() -> Self {
        Self::new()
    }
}

/// The router's hot-path mapping write into store `store_key`: labels are the compiled
/// request's caller labels plus the router's id label, and `createdAt` is taken here.
#[napi]
pub fn store_record(
    store_key: u32,
    request_key: u32,
    id: String,
    provider_id: String,
    provider_sandbox_id: String,
    detached: bool,
) -> Result<()> {
    guard(|| {
        let key = SandboxKey::parse_checked(&id).map_err(core_err)?;
        let store = STORES.with(|s| s.borrow().get(store_key)).ok_or_else(|| stale("mapping store"))?;
        let req = REQUESTS.with(|s| s.borrow().get(request_key)).ok_or_else(|| stale("request"))?;
        let created_at = CreatedAt::Millis(crate::core::clock::now_millis());
        let labels = req.labels.clone();
        let mut store = store.borrow_mut();
        let provider_id = store.intern(&provider_id);
        store.put(Mapping {
            id: key,
            provider_id,
            provider_sandbox_id: provider_sandbox_id.into_boxed_str(),
            labels,
            stamped: true,
            created_at,
            detached,
        });
        Ok(())
    })
}

/// A mapping record as JS sees it.
#[napi(object)]
pub struct MappingRecord {
    /// Router id.
    pub id: String,
    /// Pool id.
    pub provider_id: String,
    /// Provider's sandbox id.
    pub provider_sandbox_id: String,
    /// Launch labels.
    pub labels: HashMap<String, String>,
    /// ISO-8601 creation time.
    pub created_at: String,
    /// From `provisionDetached`.
    pub detached: bool,
}

fn to_record(m: &Mapping) -> MappingRecord {
    MappingRecord {
        id: m.id.to_string(),
        provider_id: m.provider_id.to_string(),
        provider_sandbox_id: m.provider_sandbox_id.to_string(),
        labels: m.all_labels().into_iter().collect(),
        created_at: m.created_at_text(),
        detached: m.detached,
    }
}

#[napi]
impl NativeMappingStore {
    /// An empty store.
    #[napi(constructor)]
    pub fn new() -> Self {
        let store = Rc::new(RefCell::new(MappingStore::default()));
        let key = STORES.with(|s| s.borrow_mut().insert(store.clone()));
        NativeMappingStore { store, key }
    }

    /// The key for [`store_record`].
    #[napi(getter)]
    pub fn key(&self) -> u32 {
        self.key
    }

    /// Inserts or replaces a record. `labels_json` is a JSON object of strings.
    #[napi]
    pub fn put(
        &self,
        id: String,
        provider_id: String,
        provider_sandbox_id: String,
        labels_json: String,
        created_at: String,
        detached: bool,
    ) -> Result<()> {
        guard(|| {
            let key = SandboxKey::parse_checked(&id).map_err(core_err)?;
            let labels = match serde_json::from_str::<Value>(&labels_json) {
                Ok(Value::Object(map)) => map
                    .into_iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => Ok((k, s)),
                        _ => {
                            Err(encode("INVALID_INPUT", "mapping labels must be strings", Some("labels"), Value::Null))
                        }
                    })
                    .collect::<Result<Vec<_>>>()?,
                _ => {
                    return Err(encode(
                        "INVALID_INPUT",
                        "mapping labels must be an object",
                        Some("labels"),
                        Value::Null,
                    ))
                }
            };
            let labels = std::sync::Arc::new(labels);
            let created_at = CreatedAt::Text(created_at.into_boxed_str());
            let mut store = self.store.borrow_mut();
            let provider_id = store.intern(&provider_id);
            store.put(Mapping {
                id: key,
                provider_id,
                provider_sandbox_id: provider_sandbox_id.into_boxed_str(),
                labels,
                stamped: false,
                created_at,
                detached,
            });
            Ok(())
        })
    }

    /// The record for `id`, or null.
    #[napi]
    pub fn get(&self, id: String) -> Option<MappingRecord> {
        self.store.borrow().get(&id).map(to_record)
    }

    /// Removes `id`; true if it existed.
    #[napi]
    pub fn delete(&self, id: String) -> bool {
        self.store.borrow_mut().delete(&id)
    }

    /// Every record, ordered by id.
    #[napi]
    pub fn list(&self) -> Vec<MappingRecord> {
        self.store.borrow().list().into_iter().map(to_record).collect()
    }

    /// Number of records.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.store.borrow().len() as u32
    }
}

/// Validates a capacity measurement strictly and returns it normalized (JSON).
/// Anything malformed comes back as `{ status: "unknown", reason: "MALFORMED" }`.
#[napi]
pub fn validate_measurement(measurement_json: String) -> Result<String> {
    guard(|| {
        let v = serde_json::from_str::<Value>(&measurement_json).unwrap_or(Value::Null);
        Ok(crate::core::capacity::validate(&v).to_json().to_string())
    })
}

/// In-process capacity reservations of one router (see `core::capacity::Ledger`).
#[napi]
pub struct NativeLedger {
    ledger: crate::core::capacity::Ledger,
    pools: HashMap<String, usize>,
}

#[napi]
impl NativeLedger {
    /// A ledger whose post-launch assumptions expire after `ttl_ms`.
    #[napi(constructor)]
    pub fn new(ttl_ms: u32) -> Self {
        NativeLedger {
            ledger: crate::core::capacity::Ledger::new(std::time::Duration::from_millis(u64::from(ttl_ms))),
            pools: HashMap::new(),
        }
    }

    /// Starts a read; pass the sequence to `admit`.
    #[napi]
    pub fn begin_read(&mut self) -> i64 {
        self.ledger.begin_read() as i64
    }

    /// Admission check for a launch on `provider_id` given a raw measurement and the
    /// request's resources. Returns `ADMITTED:<token>`, `EXHAUSTED:<resource>:<detail>` or
    /// `UNKNOWN:<reason>`.
    #[napi]
    pub fn admit(
        &mut self,
        provider_id: String,
        read_seq: i64,
        measurement_json: String,
        resources_json: String,
    ) -> Result<String> {
        use crate::core::capacity::{validate, Admission};
        guard(|| {
            let m = validate(&serde_json::from_str::<Value>(&measurement_json).unwrap_or(Value::Null));
            let res_value = serde_json::from_str::<Value>(&resources_json).unwrap_or_else(|_| json!({}));
            let resources =
                crate::core::json::object(&res_value, "resources", crate::core::capabilities::RESOURCE_KEYS)
                    .and_then(|o| crate::core::capabilities::Resources::read(&o))
                    .map_err(|e| {
                        encode(
                            "INVALID_REQUEST",
                            &format!("invalid request: {} {}", e.field, e.expectation),
                            Some(&e.field),
                            Value::Null,
                        )
                    })?;
            let next = self.pools.len();
            let pool = *self.pools.entry(provider_id).or_insert(next);
            Ok(match self.ledger.admit(pool, read_seq.max(0) as u64, &m, &resources) {
                Admission::Admitted(t) => format!("ADMITTED:{t}"),
                Admission::Exhausted { resource, detail } => format!("EXHAUSTED:{resource}:{detail}"),
                Admission::Unknown(r) => format!("UNKNOWN:{}", r.code()),
            })
        })
    }

    /// Settles an admitted launch (failure releases; success becomes an assumption).
    #[napi]
    pub fn settle(&mut self, token: i64, success: bool) {
        self.ledger.settle(token.max(0) as u64, success);
    }
}

thread_local! {
    static IDS: RefCell<SandboxIdSource> = RefCell::new(SandboxIdSource::default());
}

/// `count` fresh sandbox ids (1..=256), concatenated (36 characters each). The JS layer
/// takes ids from such a batch, so allocating one costs a slice, not a native call.
#[napi]
pub fn sandbox_ids(count: u32) -> Result<String> {
    guard(|| {
        let n = count.clamp(1, 256) as usize;
        IDS.with(|ids| {
            let mut ids = ids.borrow_mut();
            let mut out = String::with_capacity(36 * n);
            for _ in 0..n {
                out.push_str(&ids.next_id().map_err(core_err)?);
            }
            Ok(out)
        })
    })
}
