//! napi glue: turns JS values into core types and back, and nothing else.
//!
//! What crosses, and in which form:
//! - a request and a definition cross once each as JSON text (V8's `JSON.stringify` and
//!   serde_json are both faster than walking a JS object through napi), to be validated;
//! - answers cross typed: `#[napi(object)]` structs, string enums and typed arrays
//!   (`RequestInfo`, an attempt order as a `Uint32Array`, an acquisition's steps, events and
//!   failure in `binding_acquisition.rs`);
//! - errors of the provision path cross as a typed [`NativeError`] value (code, message,
//!   field, and for `NO_ELIGIBLE_PROVIDER` the summary and rejections), returned in an
//!   `Either`; the older entry points that throw still encode their reason as JSON, which
//!   `lib/errors.js` turns into the right class.
//!
//! Every entry point runs inside `guard`, so a Rust panic becomes a typed
//! `INTERNAL_ERROR`, never a crash.

use crate::binding_acquisition::{insert as insert_machine, Entry as MachineEntry, NativeError, NativeLedger};
use crate::binding_health::{health_by_key, HealthInner, HealthView, SharedHealth};
use crate::core::acquisition::{Acquisition, CapacityPlan};
use crate::core::explain::summary;
use crate::core::ids::{validate_provider_id, validate_sandbox_id, SandboxIdSource, SandboxKey};
use crate::core::mapping::{CreatedAt, Mapping, MappingStore};
use crate::core::ranking::Slim;
use crate::core::registry::{route, route_order_into, Decision, Pool, Registry, RouteOptions};
use crate::core::request::{parse_labels, parse_request, Request};
use crate::core::signals::{signal_state, unresolved, SignalState};
use crate::core::CoreError;
use napi::bindgen_prelude::{Either, Uint32ArraySlice};
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
pub(crate) struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T: Clone> Slab<T> {
    pub(crate) const fn new() -> Self {
        Slab { items: Vec::new(), free: Vec::new() }
    }

    pub(crate) fn insert(&mut self, t: T) -> u32 {
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

    pub(crate) fn get(&self, k: u32) -> Option<T> {
        self.items.get(k as usize).and_then(Clone::clone)
    }

    pub(crate) fn remove(&mut self, k: u32) {
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
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(panicked()))
}

/// The error a panic becomes (see [`guard`]).
pub(crate) fn panicked() -> Error {
    encode("INTERNAL_ERROR", "internal error in the native routing core (a bug: please report it)", None, Value::Null)
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

/// Whether `name` is a valid fleet name (router option `fleet`): 1–63 characters of
/// `[a-z0-9][a-z0-9._-]*`.
#[napi]
pub fn check_fleet(name: String) -> bool {
    crate::core::request::validate_fleet(&name)
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

    /// What the JS layer needs of a compiled request, read once per compile.
    #[napi(getter)]
    pub fn info(&self) -> RequestInfo {
        RequestInfo { key: self.key, acquisition_timeout_ms: self.req.acquisition_timeout_ms as f64 }
    }
}

/// What the JS layer keeps of a compiled request.
#[napi(object)]
pub struct RequestInfo {
    /// The key of this request for the hot-path free functions.
    pub key: u32,
    /// The launch deadline, ms (the JS side runs the timer; the machine decides the rest).
    pub acquisition_timeout_ms: f64,
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
    /// Per pool: whether its definition has a capacity reader.
    readers: Vec<bool>,
    scratch: Vec<Slim>,
    /// The health slot of each pool, for the health (by its id) they were taken from.
    health_slots: Option<(u64, Rc<[usize]>)>,
    /// The last provision's attempt order (see [`RouteMemo`]).
    memo: Option<RouteMemo>,
}

/// The attempt order of the last provision that began on a registry, for the next one
/// that asks the same question.
///
/// Why? Callers provision from a few request templates, and with the labels taken apart
/// (`lib/serialize.js`) consecutive provisions usually share one compiled request. The
/// answer is a pure function of the registry, the request, `detached` and the limit as long
/// as nothing else feeds the route: no per-request extras, every circuit closed and no
/// observed signals (those change with time and with every outcome). Then the route over
/// the pools is skipped (callgrind: about 2k of a provision's 51k instructions at 6 pools).
/// The memo holds its request, so the address it compares stays that request's; the
/// registry only grows, and `add_pool` clears it. `tests`: `memo_answers_as_the_route`.
struct RouteMemo {
    req: Rc<Request>,
    detached: bool,
    limit: Option<usize>,
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

/// Runs `f` with the [`RouteOptions`] that `extras` describe (credentials unavailable,
/// resolver overrides, capacity order), plus `detached`, `limit` and `detail`: the one
/// conversion every decision path shares.
fn with_options<T>(
    extras: Option<&RouteExtras>,
    detached: bool,
    limit: Option<usize>,
    detail: bool,
    health: Option<&HealthView<'_>>,
    f: impl FnOnce(&RouteOptions<'_>) -> T,
) -> Result<T> {
    let circuit = health.map(HealthView::circuit).unwrap_or_default();
    let observed = health.and_then(HealthView::observed);
    let unavailable: Vec<usize> = extras
        .and_then(|e| e.credentials_unavailable.as_ref())
        .map(|v| v.iter().map(|i| *i as usize).collect())
        .unwrap_or_default();
    let overrides = signal_overrides(extras.and_then(|e| e.signals_json.as_deref()))?;
    Ok(f(&RouteOptions {
        detached,
        credentials_unavailable: &unavailable,
        signals: overrides.as_ref(),
        provider_order: extras.and_then(|e| e.provider_order.as_deref()),
        limit,
        detail,
        circuit: &circuit,
        observed: observed.as_deref(),
    }))
}

/// Runs `f` with the registry and the view of `health` (None without health) at `now`.
pub(crate) fn with_health<T>(
    inner: &mut RegistryInner,
    health: Option<&SharedHealth>,
    now: Option<f64>,
    f: impl FnOnce(&mut RegistryInner, Option<&HealthView<'_>>) -> T,
) -> T {
    match health {
        None => f(inner, None),
        Some(h) => {
            let mut h = h.borrow_mut();
            let slots = inner.health_slots(&mut h);
            let now = crate::binding_health::instant(now);
            let view = HealthView { health: &h.health, slots: &slots, shared: &slots, now };
            f(inner, Some(&view))
        }
    }
}

#[napi]
impl NativeRegistry {
    /// An empty registry.
    #[napi(constructor)]
    pub fn new() -> Self {
        let inner = Rc::new(RefCell::new(RegistryInner {
            registry: Registry::default(),
            readers: Vec::new(),
            scratch: Vec::new(),
            health_slots: None,
            memo: None,
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
    pub fn add_pool(
        &self,
        definition_json: String,
        has_launch_detached: bool,
        has_capacity_reader: bool,
    ) -> Result<u32> {
        guard(|| {
            let v = serde_json::from_str::<Value>(&definition_json).map_err(|_| {
                encode("INVALID_PROVIDER_DEFINITION", "provider definition is not serializable", None, Value::Null)
            })?;
            let pool = Pool::from_json(&v, has_launch_detached).map_err(core_err)?;
            let mut inner = self.inner.borrow_mut();
            let index = inner.registry.add(pool).map_err(core_err)?;
            inner.readers.push(has_capacity_reader);
            inner.memo = None;
            Ok(index as u32)
        })
    }

    /// Number of pools.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.inner.borrow().registry.pools().len() as u32
    }

    /// The attempt order `router.route()` reports, with per-request extras (readiness,
    /// resolver, capacity order): pool indices, best first, at most `maxAcquisitionAttempts`;
    /// or the typed `NO_ELIGIBLE_PROVIDER` error. See [`registry_order`].
    #[napi]
    pub fn order(
        &self,
        request: &CompiledRequest,
        detached: bool,
        extras: Option<RouteExtras>,
        out: Uint32ArraySlice<'_>,
        health: Option<u32>,
        now: Option<f64>,
    ) -> Result<Either<u32, NativeError>> {
        guard(|| {
            let mut inner = self.inner.borrow_mut();
            let limit = Some(request.req.max_attempts as usize);
            let health = health_by_key(health);
            let found = with_health(&mut inner, health.as_ref(), now, |inner, h| {
                inner.candidates(&request.req, detached, extras.as_ref(), limit, h)
            })?;
            Ok(match found {
                Ok(order) => Either::A(lend(&order, out)?),
                Err(e) => Either::B(e),
            })
        })
    }

    /// Starts a provision's acquisition (see `core::acquisition`): plans the candidates
    /// with the per-request extras and, under capacity routing (`ledger` given), admits each
    /// against the router's ledger. `observe`: record events. Returns the machine, or the
    /// typed `NO_ELIGIBLE_PROVIDER` error. The machine is a key for the `acquisition*`
    /// functions; the caller ends it with `acquisitionEnd`. Its first step is written into
    /// `step` as `acquisitionStep` would. `id`: the provision's sandbox id (made before the
    /// callbacks that precede this call, which name it).
    #[napi]
    #[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments cross the seam cheapest")]
    pub fn begin(
        &self,
        request: &CompiledRequest,
        detached: bool,
        extras: Option<RouteExtras>,
        ledger: Option<&NativeLedger>,
        observe: bool,
        labels_json: Option<String>,
        step: Uint32ArraySlice<'_>,
        id: String,
        health: Option<u32>,
        now: Option<f64>,
    ) -> Result<Either<u32, NativeError>> {
        guard(|| {
            let id = SandboxKey::parse_checked(&id).map_err(core_err)?;
            let extras = extras.as_ref();
            let health = health_by_key(health);
            let args = Begin { detached, extras, ledger, observe, labels_json: labels_json.as_deref(), health, now };
            begin(&self.inner, &request.req, args, step, id)
        })
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
            let inner = self.inner.borrow();
            // Survivors of the hard requirements and credentials only: the resolver's answers
            // and the capacity order come after it.
            let credentials = extras.map(|e| RouteExtras {
                credentials_unavailable: e.credentials_unavailable,
                signals_json: None,
                provider_order: None,
            });
            with_options(credentials.as_ref(), detached, None, false, None, |opts| {
                crate::core::registry::requirement_survivors(inner.registry.pools(), &request.req, opts)
                    .into_iter()
                    .map(|i| i as u32)
                    .collect()
            })
        })
    }
}

/// Writes pool indices into a buffer the JS side lends (no allocation crosses the seam);
/// returns how many. The buffer holds at least `maxAcquisitionAttempts` (10) entries.
fn lend(order: &[usize], mut out: Uint32ArraySlice<'_>) -> Result<u32> {
    // SAFETY: JavaScript cannot run during this synchronous call, so nothing else touches
    // the buffer while we write, and nothing keeps the slice beyond this call.
    let out = unsafe { out.as_mut() };
    if out.len() < order.len() {
        return Err(encode("INTERNAL_ERROR", "internal error: order buffer too small", None, Value::Null));
    }
    for (slot, &i) in out.iter_mut().zip(order) {
        *slot = i as u32;
    }
    Ok(order.len() as u32)
}

fn registry_and_request(registry_key: u32, request_key: u32) -> Result<(Rc<RefCell<RegistryInner>>, Rc<Request>)> {
    let inner = REGISTRIES.with(|s| s.borrow().get(registry_key)).ok_or_else(|| stale("registry"))?;
    let req = REQUESTS.with(|s| s.borrow().get(request_key)).ok_or_else(|| stale("request"))?;
    Ok((inner, req))
}

/// The `router.route()` hot path without extras: registry `registry_key`, compiled request
/// `request_key`. Writes the pool indices, best first, at most `maxAcquisitionAttempts`,
/// into `out` and returns how many; or the typed `NO_ELIGIBLE_PROVIDER` error (summary and
/// rejections).
/// `health`, `now`: the router's `NativeHealth` key (omitted: no tracking) and its injected
/// clock's reading (ms; omitted: the wall clock, read here).
#[napi]
pub fn registry_order(
    registry_key: u32,
    request_key: u32,
    detached: bool,
    out: Uint32ArraySlice<'_>,
    health: Option<u32>,
    now: Option<f64>,
) -> Result<Either<u32, NativeError>> {
    guard(|| {
        let (inner, req) = registry_and_request(registry_key, request_key)?;
        let mut inner = inner.borrow_mut();
        let health = health_by_key(health);
        let limit = Some(req.max_attempts as usize);
        let found =
            with_health(&mut inner, health.as_ref(), now, |inner, h| inner.candidates(&req, detached, None, limit, h))?;
        Ok(match found {
            Ok(order) => Either::A(lend(&order, out)?),
            Err(e) => Either::B(e),
        })
    })
}

/// The provision hot path without extras: [`NativeRegistry::begin`] by keys, with no
/// capacity routing. The provision's sandbox id is made here: it is returned (the machine's
/// key goes to `step[2]`). A refusal returns the typed error (the JS side names it by an id
/// of its own).
/// `health`, `now`: the router's `NativeHealth` key (omitted: no tracking) and its injected
/// clock's reading (ms; omitted: the wall clock, read here).
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments cross the seam cheapest")]
pub fn begin_acquisition(
    registry_key: u32,
    request_key: u32,
    detached: bool,
    observe: bool,
    labels_json: Option<String>,
    step: Uint32ArraySlice<'_>,
    health: Option<u32>,
    now: Option<f64>,
) -> Result<Either<String, NativeError>> {
    begin_acquisition_with(registry_key, request_key, detached, observe, labels_json.as_deref(), step, health, now)
}

/// [`begin_acquisition`] with the labels' text borrowed (see `binding_fast.rs`).
#[allow(clippy::too_many_arguments, reason = "the arguments of begin_acquisition")]
pub(crate) fn begin_acquisition_with(
    registry_key: u32,
    request_key: u32,
    detached: bool,
    observe: bool,
    labels_json: Option<&str>,
    step: Uint32ArraySlice<'_>,
    health: Option<u32>,
    now: Option<f64>,
) -> Result<Either<String, NativeError>> {
    guard(|| {
        let (inner, req) = registry_and_request(registry_key, request_key)?;
        let health = health_by_key(health);
        let args = Begin { detached, extras: None, ledger: None, observe, labels_json, health, now };
        let id = IDS.with(|ids| ids.borrow_mut().next_id()).map_err(core_err)?;
        let key = SandboxKey::parse_checked(&id).map_err(core_err)?;
        Ok(match begin(&inner, &req, args, step, key)? {
            Either::A(_) => Either::A(id),
            Either::B(e) => Either::B(e),
        })
    })
}

/// What a provision's acquisition starts from, beside the registry and the request.
struct Begin<'a> {
    detached: bool,
    extras: Option<&'a RouteExtras>,
    ledger: Option<&'a NativeLedger>,
    observe: bool,
    labels_json: Option<&'a str>,
    health: Option<SharedHealth>,
    now: Option<f64>,
}

/// Starts an acquisition on registry `registry` (see [`NativeRegistry::begin`]) for sandbox
/// `id`. The machine's key is returned, and written to `step[2]` when the buffer has room.
fn begin(
    registry: &Rc<RefCell<RegistryInner>>,
    req: &Rc<Request>,
    args: Begin<'_>,
    mut step: Uint32ArraySlice<'_>,
    id: SandboxKey,
) -> Result<Either<u32, NativeError>> {
    let Begin { detached, extras, ledger, observe, labels_json, health, now } = args;
    // The request's own checks come first: its labels, then routing.
    let labels = match labels_json.map(labels_from).transpose()? {
        None => Vec::new(),
        Some(Ok(labels)) => labels,
        Some(Err(e)) => return Ok(Either::B(e)),
    };
    let mut inner = registry.borrow_mut();
    // Capacity skips consume no attempt, so capacity routing needs every candidate.
    let limit = if ledger.is_some() { None } else { Some(req.max_attempts as usize) };
    let found = with_health(&mut inner, health.as_ref(), now, |inner, h| {
        inner
            .remembered_candidates(req, detached, extras, limit, h)
            .map(|r| r.map(|order| (order, h.map(|h| (h.shared.clone(), h.now)))))
    })?;
    let (order, slots) = match found {
        Ok(found) => found,
        Err(e) => return Ok(Either::B(e)),
    };
    let capacity = ledger.map(|l| CapacityPlan {
        need: req.resources,
        readers: inner.readers.clone(),
        ledger_pools: inner.registry.pools().iter().map(|p| l.key_for(&p.id)).collect(),
    });
    let mut machine = Acquisition::new(order, req.max_attempts as usize, req.fallback_allowed, capacity, observe);
    if let Some((slots, now)) = slots {
        machine.track(slots, now);
    }
    drop(inner);
    let key = insert_machine(MachineEntry::new(
        id,
        machine,
        ledger.map(NativeLedger::shared),
        std::sync::Arc::new(labels),
        registry.clone(),
        health,
    ));
    {
        // SAFETY: JavaScript cannot run during this synchronous call, and nothing keeps the
        // slice beyond it.
        let out = unsafe { step.as_mut() };
        if let Some(slot) = out.get_mut(2) {
            *slot = key;
        }
    }
    // The first step, in the same call.
    crate::binding_acquisition::step_into(key, step)?;
    Ok(Either::A(key))
}

impl RegistryInner {
    /// The id of pool `index`.
    pub(crate) fn pool_id(&self, index: usize) -> &str {
        &self.registry.pools()[index].id
    }

    /// The health slot of each pool (cached per health; a registry only grows).
    pub(crate) fn health_slots(&mut self, h: &mut HealthInner) -> Rc<[usize]> {
        match &self.health_slots {
            Some((id, slots)) if *id == h.id && slots.len() == self.registry.pools().len() => slots.clone(),
            _ => {
                let slots: Rc<[usize]> = self.registry.pools().iter().map(|p| h.health.slot(&p.id)).collect();
                self.health_slots = Some((h.id, slots.clone()));
                slots
            }
        }
    }
}

/// A request's labels sent apart from it (JSON text), validated by the one rule
/// (`request::parse_labels`): the labels, or the typed `INVALID_REQUEST` error.
pub(crate) fn labels_from(text: &str) -> Result<std::result::Result<Vec<(String, String)>, NativeError>> {
    if let Some(labels) = crate::core::request::parse_labels_text(text) {
        return Ok(Ok(labels));
    }
    let v = parse_json(text, "launch.labels")?;
    Ok(parse_labels(&v).map_err(|e| {
        let (field, expectation) = (e.field, e.expectation);
        NativeError {
            code: "INVALID_REQUEST".to_string(),
            message: format!("invalid request: {field} {expectation}"),
            field: Some(field),
            summary: None,
            rejections: None,
        }
    }))
}

impl RegistryInner {
    /// [`RegistryInner::candidates`], answered from the memo when it holds this question
    /// and nothing but the registry and the request feeds the route (see [`RouteMemo`]).
    fn remembered_candidates(
        &mut self,
        req: &Rc<Request>,
        detached: bool,
        extras: Option<&RouteExtras>,
        limit: Option<usize>,
        health: Option<&HealthView<'_>>,
    ) -> Result<std::result::Result<Vec<usize>, NativeError>> {
        let pure = extras.is_none()
            && health.is_none_or(|h| !h.health.any_not_closed() && !h.health.config().observed_signals);
        if !pure {
            return self.candidates(req, detached, extras, limit, health);
        }
        if let Some(m) = &self.memo {
            if Rc::ptr_eq(&m.req, req) && m.detached == detached && m.limit == limit {
                return Ok(Ok(m.order.clone()));
            }
        }
        let found = self.candidates(req, detached, None, limit, health)?;
        if let Ok(order) = &found {
            self.memo = Some(RouteMemo { req: req.clone(), detached, limit, order: order.clone() });
        }
        Ok(found)
    }

    /// The candidates of one provision or route, best first (at most `limit`), or the typed
    /// `NO_ELIGIBLE_PROVIDER` error. The outer `Result` is for internal failures only.
    fn candidates(
        &mut self,
        req: &Request,
        detached: bool,
        extras: Option<&RouteExtras>,
        limit: Option<usize>,
        health: Option<&HealthView<'_>>,
    ) -> Result<std::result::Result<Vec<usize>, NativeError>> {
        let mut order = Vec::new();
        let (registry, scratch) = (&self.registry, &mut self.scratch);
        with_options(extras, detached, limit, false, health, |opts| {
            route_order_into(registry, req, opts, scratch, &mut order)
        })?;
        if order.is_empty() {
            return Ok(Err(self.no_eligible(req, detached, extras, health)?));
        }
        Ok(Ok(order))
    }

    /// Every pool's verdict with every reason, texts interned (explanations).
    pub(crate) fn decide_interned(
        &self,
        req: &Request,
        detached: bool,
        extras: Option<&RouteExtras>,
        interner: &mut crate::core::requirements::Interner,
        health: Option<&HealthView<'_>>,
    ) -> Result<crate::core::registry::InternedDecision<'_>> {
        with_options(extras, detached, None, true, health, |opts| {
            crate::core::registry::route_interned(self.registry.pools(), req, opts, interner)
        })
    }

    fn decide(
        &self,
        req: &Request,
        detached: bool,
        extras: Option<&RouteExtras>,
        limit: Option<usize>,
        detail: bool,
        health: Option<&HealthView<'_>>,
    ) -> Result<Decision<'_>> {
        with_options(extras, detached, limit, detail, health, |opts| route(self.registry.pools(), req, opts))
    }

    fn no_eligible(
        &self,
        req: &Request,
        detached: bool,
        extras: Option<&RouteExtras>,
        health: Option<&HealthView<'_>>,
    ) -> Result<NativeError> {
        let d = self.decide(req, detached, extras, None, true, health)?;
        let pools = self.registry.pools();
        let line = summary(0, d.total, &d.rejected);
        let rejections = d
            .rejected
            .iter()
            .map(|r| RejectionRecord {
                provider_id: pools[r.index].id.clone(),
                reasons: r
                    .reasons
                    .iter()
                    .map(|x| ReasonRecord { code: x.reason.code().to_string(), detail: x.detail.clone() })
                    .collect(),
            })
            .collect();
        Ok(NativeError {
            code: "NO_ELIGIBLE_PROVIDER".to_string(),
            message: line.clone(),
            field: None,
            summary: Some(line),
            rejections: Some(rejections),
        })
    }
}

/// A rejected pool in a typed error: its id and why.
#[napi(object)]
pub struct RejectionRecord {
    /// The pool's id.
    pub provider_id: String,
    /// Why it was rejected.
    pub reasons: Vec<ReasonRecord>,
}

/// One rejection reason: a stable code and a detail.
#[napi(object)]
pub struct ReasonRecord {
    /// Stable reason code (e.g. `MISSING_CAPABILITY`).
    pub code: String,
    /// What exactly (names and numbers, never a caller's value).
    pub detail: String,
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

/// Validates a request's `launch.labels` sent apart from the request (JSON text): null when
/// valid, else the typed `INVALID_REQUEST` error naming the field. (`begin` checks them
/// itself; `route` and `explain` call this.)
#[napi]
pub fn check_labels(labels_json: String) -> Result<Option<NativeError>> {
    guard(|| Ok(labels_from(&labels_json)?.err()))
}

/// Writes a mapping record into store `store_key` (the default store): `labels` are the
/// caller's (the record adds the router's id label); `createdAt` is taken here.
pub(crate) fn write_record(
    store_key: u32,
    labels: std::sync::Arc<Vec<(String, String)>>,
    key: SandboxKey,
    provider_id: &str,
    provider_sandbox_id: &str,
    detached: bool,
    fleet: std::sync::Arc<str>,
) -> Result<()> {
    let store = STORES.with(|s| s.borrow().get(store_key)).ok_or_else(|| stale("mapping store"))?;
    let mut store = store.borrow_mut();
    let provider_id = store.intern(provider_id);
    store.put(Mapping {
        id: key,
        provider_id,
        provider_sandbox_id: provider_sandbox_id.into(),
        labels,
        stamped: true,
        fleet: Some(fleet),
        created_at: CreatedAt::Millis(crate::core::clock::now_millis()),
        detached,
    });
    Ok(())
}

thread_local! {
    /// Fleet names by key (see [`fleet_key`]): one entry per distinct name a router was
    /// given in this process.
    static FLEETS: RefCell<Vec<std::sync::Arc<str>>> = const { RefCell::new(Vec::new()) };
}

/// The key of fleet name `name` (validated by the fleet rule), made once per router: the
/// success of every provision names its fleet by this number instead of sending the name.
#[napi]
pub fn fleet_key(name: String) -> Result<u32> {
    guard(|| {
        if !crate::core::request::validate_fleet(&name) {
            return Err(encode(
                "INVALID_CONFIGURATION",
                "invalid router options: fleet must be 1-63 characters of [a-z0-9][a-z0-9._-]*",
                Some("fleet"),
                Value::Null,
            ));
        }
        Ok(FLEETS.with(|f| {
            let mut f = f.borrow_mut();
            match f.iter().position(|n| **n == *name) {
                Some(i) => i as u32,
                None => {
                    f.push(std::sync::Arc::from(name.as_str()));
                    (f.len() - 1) as u32
                }
            }
        }))
    })
}

/// The fleet name of `key` (see [`fleet_key`]).
pub(crate) fn fleet_named(key: u32) -> Result<std::sync::Arc<str>> {
    FLEETS
        .with(|f| f.borrow().get(key as usize).cloned())
        .ok_or_else(|| encode("INTERNAL_ERROR", "internal error: unknown fleet key", None, Value::Null))
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
                fleet: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::health::{Health, HealthConfig, LaunchOutcome};
    use crate::core::request::parse_request;
    use proptest::prelude::*;
    use serde_json::json;

    fn pool(i: usize, cost: u32, ready: u32, rate: u32, available: bool, pty: bool) -> Value {
        json!({
            "id": format!("p{i}"),
            "capabilities": {"supported": if pty { vec!["pty"] } else { vec![] }, "regions": ["eu-west"]},
            "signals": {"estimatedCost": cost as f64 / 4.0, "coldStartLatencyMs": 100, "readyLatencyMs": ready,
                        "completionWithinBudgetRate": rate as f64 / 100.0, "available": available},
        })
    }

    fn registry(pools: &[Value]) -> RegistryInner {
        let mut inner = RegistryInner {
            registry: Registry::default(),
            readers: Vec::new(),
            scratch: Vec::new(),
            health_slots: None,
            memo: None,
        };
        for p in pools {
            inner.registry.add(Pool::from_json(p, false).unwrap()).unwrap();
            inner.readers.push(false);
        }
        inner
    }

    fn request(strategy: &str, pty: bool, attempts: u32) -> Rc<Request> {
        let required: Vec<&str> = if pty { vec!["pty"] } else { vec![] };
        let v = json!({"requires": {"requiredCapabilities": required}, "routing": {"strategy": strategy, "maxAcquisitionAttempts": attempts}});
        Rc::new(parse_request(&v).unwrap())
    }

    fn answer(r: Result<std::result::Result<Vec<usize>, NativeError>>) -> std::result::Result<Vec<usize>, String> {
        r.unwrap().map_err(|e| e.code)
    }

    proptest! {
        /// Through the memo, any sequence of questions (repeats included) gets the answers
        /// the route gives without it.
        #[test]
        fn memo_answers_as_the_route(
            pools in prop::collection::vec((0u32..8, 0u32..5000, 50u32..=100, prop::bool::weighted(0.8), any::<bool>()), 1..8),
            questions in prop::collection::vec((0usize..4, any::<bool>(), any::<bool>(), 1u32..4, prop::option::of(1usize..4)), 1..24),
        ) {
            let pools: Vec<Value> = pools.iter().enumerate().map(|(i, &(c, r, q, a, p))| pool(i, c, r, q, a, p)).collect();
            let mut memo = registry(&pools);
            let mut plain = registry(&pools);
            let strategies = ["cost", "latency", "reliability", "balanced"];
            // A handful of distinct request objects, each asked about again and again.
            let requests: Vec<Rc<Request>> = questions.iter().map(|&(s, pty, _, n, _)| request(strategies[s], pty, n)).collect();
            for (i, &(_, _, detached, _, limit)) in questions.iter().enumerate() {
                for req in [&requests[i], &requests[i / 2]] {
                    prop_assert_eq!(
                        answer(memo.remembered_candidates(req, detached, None, limit, None)),
                        answer(plain.candidates(req, detached, None, limit, None))
                    );
                }
            }
        }
    }

    #[test]
    fn memo_must_fire_a_repeated_question_is_answered_from_it() {
        let mut inner = registry(&[pool(0, 1, 100, 90, true, false), pool(1, 2, 100, 90, true, false)]);
        let req = request("cost", false, 2);
        assert_eq!(answer(inner.remembered_candidates(&req, false, None, Some(2), None)), Ok(vec![0, 1]));
        // Spoil the memo's answer: a second identical question must read it back.
        inner.memo.as_mut().unwrap().order = vec![1];
        assert_eq!(answer(inner.remembered_candidates(&req, false, None, Some(2), None)), Ok(vec![1]));
    }

    #[test]
    fn memo_must_not_fire_after_a_pool_is_added_or_for_another_request() {
        let reg = NativeRegistry::new();
        let req = request("cost", false, 3);
        let ask = |reg: &NativeRegistry| {
            answer(reg.inner.borrow_mut().remembered_candidates(&req, false, None, Some(3), None))
        };
        reg.add_pool(pool(0, 4, 100, 90, true, false).to_string(), false, false).unwrap();
        assert_eq!(ask(&reg), Ok(vec![0]));
        reg.add_pool(pool(1, 1, 100, 90, true, false).to_string(), false, false).unwrap();
        assert_eq!(ask(&reg), Ok(vec![1, 0]));
        // Same content, another request object: asked afresh (its answer is the same).
        let other = request("cost", false, 3);
        reg.inner.borrow_mut().memo.as_mut().unwrap().order = vec![];
        assert_eq!(
            answer(reg.inner.borrow_mut().remembered_candidates(&other, false, None, Some(3), None)),
            Ok(vec![1, 0])
        );
    }

    #[test]
    fn memo_must_not_fire_while_a_circuit_is_open() {
        let mut inner = registry(&[pool(0, 1, 100, 90, true, false), pool(1, 2, 100, 90, true, false)]);
        let req = request("cost", false, 2);
        let mut health = Health::new(HealthConfig::default());
        let slots: Rc<[usize]> = vec![health.slot("p0"), health.slot("p1")].into();
        let ask = |inner: &mut RegistryInner, health: &Health| {
            let view = HealthView { health, slots: &slots, shared: &slots, now: 0 };
            answer(inner.remembered_candidates(&req, false, None, Some(2), Some(&view)))
        };
        assert_eq!(ask(&mut inner, &health), Ok(vec![0, 1]));
        while !health.any_not_closed() {
            health.record(slots[0], LaunchOutcome::TimedOut, 0, false);
        }
        assert_eq!(ask(&mut inner, &health), Ok(vec![1]));
    }
}
