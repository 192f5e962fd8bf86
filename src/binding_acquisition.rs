//! napi glue for the acquisition machine (`core::acquisition`) and the router's capacity
//! ledger: typed steps, events and failures, nothing decided here.
//!
//! The JS provision loop (`lib/provision.js`) asks [`acquisition_step`] what to do,
//! performs it (a capacity read, a launch, a classifier call) and reports the outcome with
//! one call; the machine settles capacity holds on the ledger itself. Events come back only
//! when the router has an observer (`observe`), as typed records with pool indices that the
//! JS side names.

use crate::binding::guard;
use crate::binding_health::SharedHealth;
use crate::core::acquisition::{Acquisition, Event, Outcome, SkipStatus, Step};
use crate::core::capacity::{validate, Ledger};
use crate::core::health::Transition;
use crate::core::ids::SandboxKey;
use napi::bindgen_prelude::Uint32ArraySlice;
use napi_derive::napi;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A typed error value crossing the seam (returned in an `Either`, never thrown).
#[napi(object)]
pub struct NativeError {
    /// Stable code (see the README's error table).
    pub code: String,
    /// Human message (ids, codes, field paths; never a caller's value).
    pub message: String,
    /// Field path, for validation errors.
    pub field: Option<String>,
    /// `NO_ELIGIBLE_PROVIDER`: the one-line summary.
    pub summary: Option<String>,
    /// `NO_ELIGIBLE_PROVIDER`: every rejected pool and why.
    pub rejections: Option<Vec<crate::binding::RejectionRecord>>,
}

/// The ledger and its pool numbering (by pool id: a router's ledger outlives registry
/// changes and serves caller registries that are re-read on every call).
pub(crate) struct LedgerInner {
    ledger: Ledger,
    pools: HashMap<String, usize>,
    /// The holds live in a shared ledger (a coordinator): the machine admits on the
    /// coordinator's verdicts and hands its settlements out (`acquisitionSettlement`).
    coordinated: bool,
}

/// In-process capacity reservations of one router (see `core::capacity::Ledger`).
#[napi]
pub struct NativeLedger {
    inner: Rc<RefCell<LedgerInner>>,
}

#[napi]
impl NativeLedger {
    /// A ledger whose post-launch assumptions expire after `ttl_ms`. `coordinated`: the
    /// holds are kept by a shared coordinator instead (see `acquisitionDemand`).
    #[napi(constructor)]
    pub fn new(ttl_ms: u32, coordinated: Option<bool>) -> Self {
        NativeLedger {
            inner: Rc::new(RefCell::new(LedgerInner {
                ledger: Ledger::new(std::time::Duration::from_millis(u64::from(ttl_ms))),
                pools: HashMap::new(),
                coordinated: coordinated.unwrap_or(false),
            })),
        }
    }
}

impl NativeLedger {
    /// The ledger's key for pool `id`.
    pub(crate) fn key_for(&self, id: &str) -> usize {
        let mut inner = self.inner.borrow_mut();
        let next = inner.pools.len();
        *inner.pools.entry(id.to_string()).or_insert(next)
    }

    pub(crate) fn shared(&self) -> Rc<RefCell<LedgerInner>> {
        self.inner.clone()
    }
}

/// What the JS side must do next: `out[0]` of [`acquisition_step`] (a numeric enum: it
/// crosses once per step, on the hot path, in the buffer the JS side lends).
#[napi]
#[derive(Clone, Copy)]
pub enum StepKind {
    /// Launch on `pool`, then report the outcome.
    Launch = 0,
    /// Read `pool`'s capacity, then call `admit`.
    Admit = 1,
    /// Over: `failure` says how, unless it succeeded.
    Done = 2,
}

/// Event types the machine decides (the JS side adds `type`'s other events).
#[napi(string_enum)]
pub enum EventType {
    /// `capacity.admitted`
    #[napi(value = "capacity.admitted")]
    CapacityAdmitted,
    /// `capacity.skipped`
    #[napi(value = "capacity.skipped")]
    CapacitySkipped,
    /// `attempt.started`
    #[napi(value = "attempt.started")]
    AttemptStarted,
    /// `attempt.succeeded`
    #[napi(value = "attempt.succeeded")]
    AttemptSucceeded,
    /// `attempt.failed`
    #[napi(value = "attempt.failed")]
    AttemptFailed,
    /// `fallback.advanced`
    #[napi(value = "fallback.advanced")]
    FallbackAdvanced,
    /// `provision.exhausted`
    #[napi(value = "provision.exhausted")]
    ProvisionExhausted,
    /// `health.circuit.opened`
    #[napi(value = "health.circuit.opened")]
    CircuitOpened,
    /// `health.circuit.half-open`
    #[napi(value = "health.circuit.half-open")]
    CircuitHalfOpen,
    /// `health.circuit.closed`
    #[napi(value = "health.circuit.closed")]
    CircuitClosed,
    /// `health.skipped`
    #[napi(value = "health.skipped")]
    HealthSkipped,
}

/// One decided event. Pools are registration indices; the JS side names them.
#[napi(object)]
pub struct EventRecord {
    /// The event type.
    #[napi(js_name = "type")]
    pub kind: EventType,
    /// The pool (every type but `fallback.advanced` and `provision.exhausted`).
    pub pool: Option<u32>,
    /// Attempt number (`attempt.*`, `fallback.advanced`).
    pub attempt: Option<u32>,
    /// Sanitized code (`attempt.failed`, `provision.exhausted`).
    pub code: Option<String>,
    /// `attempt.failed`.
    pub retryable: Option<bool>,
    /// `capacity.skipped`: `UNKNOWN` or `EXHAUSTED`.
    pub status: Option<String>,
    /// `capacity.skipped`: the unknown reason or the full dimension.
    pub reason: Option<String>,
    /// `fallback.advanced`: from this pool…
    pub from: Option<u32>,
    /// …to this one.
    pub to: Option<u32>,
    /// `health.circuit.opened`: when the pool may be probed (ISO 8601).
    pub retry_at: Option<String>,
    /// `health.circuit.opened`: this cooldown, ms.
    pub cooldown_ms: Option<f64>,
    /// `health.circuit.opened`: the consecutive failures that opened it.
    pub failures: Option<u32>,
}

/// How an acquisition failed: which error class the JS side builds.
#[napi(string_enum = "kebab-case")]
pub enum FailureKind {
    /// A terminal launch failure (`ProviderProvisioningError` with the code).
    Terminal,
    /// Every allowed attempt failed retryably (`PROVIDER_ACQUISITION_EXHAUSTED`).
    Exhausted,
    /// Attempts failed retryably and the remaining candidates had no capacity
    /// (`PROVIDER_ACQUISITION_EXHAUSTED`, with capacity rejections).
    ExhaustedByCapacity,
    /// No candidate had capacity; nothing was launched (`ProviderCapacityExhaustedError`).
    NoCapacity,
    /// The launch deadline passed (`AcquisitionTimeoutError`).
    TimedOut,
    /// The runtime threw the router's own package error: it is rethrown as it is.
    Package,
    /// Every remaining candidate's circuit excluded it at launch time; nothing was
    /// launched (`NoEligibleProviderError`, `CIRCUIT_OPEN` rejections).
    CircuitOpen,
}

/// A failed attempt.
#[napi(object)]
pub struct AttemptRecord {
    /// Pool index.
    pub pool: u32,
    /// Sanitized code.
    pub code: String,
    /// Whether the failure was retryable.
    pub retryable: bool,
}

/// A candidate skipped for capacity.
#[napi(object)]
pub struct SkipRecord {
    /// Pool index.
    pub pool: u32,
    /// `UNKNOWN` or `EXHAUSTED`.
    pub status: String,
    /// The unknown reason, `NO_CAPACITY_READER`, or the full dimension.
    pub reason: String,
}

/// How an acquisition failed, with everything its error reports.
#[napi(object)]
pub struct AcquisitionFailure {
    /// Which error to build.
    pub kind: FailureKind,
    /// The error's code.
    pub code: String,
    /// The pool that failed last (none for `no-capacity`).
    pub pool: Option<u32>,
    /// Launches made.
    pub launches: u32,
    /// Failed attempts, in order.
    pub attempts: Vec<AttemptRecord>,
    /// Candidates skipped for capacity, in order.
    pub skipped: Vec<SkipRecord>,
}

fn status_name(s: SkipStatus) -> &'static str {
    match s {
        SkipStatus::Unknown => "UNKNOWN",
        SkipStatus::Exhausted => "EXHAUSTED",
    }
}

fn event_record(e: Event) -> EventRecord {
    let mut r = EventRecord {
        kind: EventType::AttemptStarted,
        pool: None,
        attempt: None,
        code: None,
        retryable: None,
        status: None,
        reason: None,
        from: None,
        to: None,
        retry_at: None,
        cooldown_ms: None,
        failures: None,
    };
    match e {
        Event::CapacityAdmitted { pool } => {
            r.kind = EventType::CapacityAdmitted;
            r.pool = Some(pool as u32);
        }
        Event::CapacitySkipped { pool, status, reason } => {
            r.kind = EventType::CapacitySkipped;
            r.pool = Some(pool as u32);
            r.status = Some(status_name(status).to_string());
            r.reason = Some(reason);
        }
        Event::AttemptStarted { pool, attempt } => {
            r.pool = Some(pool as u32);
            r.attempt = Some(attempt);
        }
        Event::AttemptSucceeded { pool, attempt } => {
            r.kind = EventType::AttemptSucceeded;
            r.pool = Some(pool as u32);
            r.attempt = Some(attempt);
        }
        Event::AttemptFailed { pool, attempt, code, retryable } => {
            r.kind = EventType::AttemptFailed;
            r.pool = Some(pool as u32);
            r.attempt = Some(attempt);
            r.code = Some(code);
            r.retryable = Some(retryable);
        }
        Event::FallbackAdvanced { from, to, attempt } => {
            r.kind = EventType::FallbackAdvanced;
            r.from = Some(from as u32);
            r.to = Some(to as u32);
            r.attempt = Some(attempt);
        }
        Event::ProvisionExhausted { code } => {
            r.kind = EventType::ProvisionExhausted;
            r.code = Some(code);
        }
        Event::Circuit { pool, transition } => {
            r.pool = Some(pool as u32);
            match transition {
                Transition::Opened { retry_at, cooldown_ms, cause, failures } => {
                    r.kind = EventType::CircuitOpened;
                    r.retry_at = Some(crate::core::clock::iso8601_millis(retry_at));
                    r.cooldown_ms = Some(cooldown_ms as f64);
                    r.reason = Some(cause.code().to_string());
                    r.failures = Some(failures);
                }
                Transition::HalfOpen => r.kind = EventType::CircuitHalfOpen,
                Transition::Closed => r.kind = EventType::CircuitClosed,
            }
        }
        Event::HealthSkipped { pool } => {
            r.kind = EventType::HealthSkipped;
            r.pool = Some(pool as u32);
            r.reason = Some("CIRCUIT_OPEN".to_string());
        }
    }
    r
}

/// One provision's acquisition in flight: the machine, the router's ledger (capacity
/// routing only) and the pool of its last step.
pub(crate) struct Entry {
    /// The provision's sandbox id (`sbx_…`), stamped on its launches and named by its record.
    id: SandboxKey,
    machine: Acquisition,
    ledger: Option<Rc<RefCell<LedgerInner>>>,
    pool: u32,
    /// The request's caller labels (validated), for the mapping record.
    labels: std::sync::Arc<Vec<(String, String)>>,
    /// The registry it routed on (for pool ids).
    registry: Rc<RefCell<crate::binding::RegistryInner>>,
    /// The router's health, when it tracks outcomes.
    health: Option<SharedHealth>,
}

impl Entry {
    pub(crate) fn new(
        id: SandboxKey,
        machine: Acquisition,
        ledger: Option<Rc<RefCell<LedgerInner>>>,
        labels: std::sync::Arc<Vec<(String, String)>>,
        registry: Rc<RefCell<crate::binding::RegistryInner>>,
        health: Option<SharedHealth>,
    ) -> Self {
        Entry { id, machine, ledger, pool: 0, labels, registry, health }
    }

    /// Reports an outcome: sets the clock (`now`, ms), runs `f` with the ledger, then
    /// records the launch's outcome in the router's health.
    fn report<T>(&mut self, now: Option<f64>, f: impl FnOnce(&mut Acquisition, Option<&mut Ledger>) -> T) -> T {
        if self.health.is_some() {
            self.machine.set_now(crate::binding_health::instant(now));
        }
        let out = self.with_ledger(f);
        if let Some(h) = &self.health {
            self.machine.report_health(&mut h.borrow_mut().health);
        }
        out
    }

    /// Runs `f` with the ledger (if any) borrowed mutably.
    fn with_ledger<T>(&mut self, f: impl FnOnce(&mut Acquisition, Option<&mut Ledger>) -> T) -> T {
        match &self.ledger {
            Some(l) if !l.borrow().coordinated => {
                let mut inner = l.borrow_mut();
                f(&mut self.machine, Some(&mut inner.ledger))
            }
            // No ledger, or a shared one: the machine records its settlements instead.
            _ => f(&mut self.machine, None),
        }
    }
}

/// Acquisitions in flight, by key.
///
/// Why keys and not a napi class per provision? A provision makes a handful of calls to its
/// machine; a call to a free function with an integer costs a fraction of a method call on
/// a wrapped class, and no JS object is made per provision. The JS side ends every machine
/// it begins exactly once (`acquisitionEnd`, in a `finally`, or when a deadline ends it).
///
/// `ids` holds the sandbox id of every machine in flight: `reconcile` asks it (through
/// `acquisitionInFlight`) whether a stamped sandbox without a record is still being made.
#[derive(Default)]
struct Machines {
    items: Vec<Option<Entry>>,
    free: Vec<u32>,
    ids: rustc_hash::FxHashSet<SandboxKey>,
}

thread_local! {
    static MACHINES: RefCell<Machines> = RefCell::new(Machines::default());
}

/// Stores a new machine; returns its key.
pub(crate) fn insert(entry: Entry) -> u32 {
    MACHINES.with(|m| {
        let mut m = m.borrow_mut();
        m.ids.insert(entry.id);
        match m.free.pop() {
            Some(k) => {
                m.items[k as usize] = Some(entry);
                k
            }
            None => {
                m.items.push(Some(entry));
                (m.items.len() - 1) as u32
            }
        }
    })
}

fn with<T>(key: u32, f: impl FnOnce(&mut Entry) -> T) -> napi::Result<T> {
    MACHINES.with(|m| {
        let mut m = m.borrow_mut();
        match m.items.get_mut(key as usize).and_then(Option::as_mut) {
            Some(e) => Ok(f(e)),
            None => Err(crate::binding::encode(
                "INTERNAL_ERROR",
                "internal error: unknown acquisition key",
                None,
                Value::Null,
            )),
        }
    })
}

/// What to do now, written into `out` (a buffer the JS side lends, so one call answers
/// both): `out[0]` is the [`StepKind`], `out[1]` the pool (registration index) it concerns.
#[napi]
pub fn acquisition_step(key: u32, out: Uint32ArraySlice<'_>) -> napi::Result<()> {
    guard(|| step_into(key, out))
}

/// Takes the machine's next step and writes it into `out` (see [`acquisition_step`]).
pub(crate) fn step_into(key: u32, mut out: Uint32ArraySlice<'_>) -> napi::Result<()> {
    // SAFETY: JavaScript cannot run during this synchronous call, so nothing else touches
    // the buffer while we write, and nothing keeps the slice beyond this call.
    let out = unsafe { out.as_mut() };
    if out.len() < 2 {
        return Err(crate::binding::encode(
            "INTERNAL_ERROR",
            "internal error: step buffer too small",
            None,
            Value::Null,
        ));
    }
    let (kind, pool) = with(key, |e| match next(e) {
        Step::Admit(pool) => (StepKind::Admit, pool as u32),
        Step::Launch(pool) => (StepKind::Launch, pool as u32),
        Step::Done => (StepKind::Done, 0),
    })?;
    with(key, |e| e.pool = pool)?;
    out[0] = kind as u32;
    out[1] = pool;
    Ok(())
}

/// The machine's next step, with the ledger and the health (when the router has them).
fn next(e: &mut Entry) -> Step {
    let mut ledger = e.ledger.as_ref().map(|l| l.borrow_mut());
    let mut health = e.health.as_ref().map(|h| h.borrow_mut());
    e.machine.next_with(ledger.as_mut().map(|l| &mut l.ledger), health.as_mut().map(|h| &mut h.health))
}

/// Reports the current candidate's capacity read: the measurement as JSON text (what the
/// reader answered, serialized once), validated strictly here; anything malformed is
/// `unknown: MALFORMED`.
/// `now`: the router's injected health clock (ms); omitted, the wall clock (read here).
#[napi]
pub fn acquisition_admit(key: u32, measurement_json: String, now: Option<f64>) -> napi::Result<()> {
    guard(|| {
        let m = validate(&serde_json::from_str::<Value>(&measurement_json).unwrap_or(Value::Null));
        with(key, |e| {
            if e.health.is_some() {
                e.machine.set_now(crate::binding_health::instant(now));
            }
            if let Some(l) = &e.ledger {
                let mut inner = l.borrow_mut();
                let mut health = e.health.as_ref().map(|h| h.borrow_mut());
                e.machine.admit_with(&mut inner.ledger, &m, health.as_mut().map(|h| &mut h.health));
            }
        })
    })
}

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

/// Under a shared coordinator, step one of an admission: the measurement (JSON text, validated
/// here) as the dimensions to decide on, or null when the machine skipped the pool already
/// (an unknown or malformed measurement).
#[napi]
/// `now`: the router's injected health clock (ms); omitted, the wall clock (read here).
pub fn acquisition_demand(
    key: u32,
    measurement_json: String,
    now: Option<f64>,
) -> napi::Result<Option<Vec<DemandDim>>> {
    guard(|| {
        let m = validate(&serde_json::from_str::<Value>(&measurement_json).unwrap_or(Value::Null));
        with(key, |e| {
            if e.health.is_some() {
                e.machine.set_now(crate::binding_health::instant(now));
            }
            let mut health = e.health.as_ref().map(|h| h.borrow_mut());
            e.machine.shared_demand(&m, health.as_mut().map(|h| &mut h.health)).map(|dims| {
                dims.into_iter()
                    .map(|d| DemandDim { resource: d.resource, used: d.used, limit: d.limit, need: d.need })
                    .collect()
            })
        })
    })
}

/// Under a shared coordinator, step two: its verdict. `token`: admitted under it;
/// otherwise `resource`: exhausted in it; neither: the coordinator was unavailable (the
/// pool is skipped as `UNKNOWN: COORDINATOR_UNAVAILABLE`).
#[napi]
/// `now`: the router's injected health clock (ms); omitted, the wall clock (read here).
pub fn acquisition_admit_decided(
    key: u32,
    token: Option<f64>,
    resource: Option<String>,
    now: Option<f64>,
) -> napi::Result<()> {
    use crate::core::acquisition::SharedVerdict;
    guard(|| {
        let verdict = match (token, resource) {
            (Some(t), _) if t.is_finite() && t >= 1.0 => SharedVerdict::Admitted(t as u64),
            (_, Some(r)) => SharedVerdict::Exhausted(r),
            _ => SharedVerdict::Unavailable,
        };
        with(key, |e| {
            if e.health.is_some() {
                e.machine.set_now(crate::binding_health::instant(now));
            }
            let mut health = e.health.as_ref().map(|h| h.borrow_mut());
            e.machine.admit_shared(verdict, health.as_mut().map(|h| &mut h.health));
        })
    })
}

/// A shared hold the machine settled, for the JS side to write to the coordinator.
#[napi(object)]
pub struct HoldSettlement {
    /// The hold's token.
    pub token: f64,
    /// Kept as an assumption (true) or released (false).
    pub allocated: bool,
}

/// The shared hold settled by the last report, if any (taken: a second call returns null).
#[napi]
pub fn acquisition_settlement(key: u32) -> napi::Result<Option<HoldSettlement>> {
    guard(|| {
        with(key, |e| e.machine.take_settlement().map(|(t, allocated)| HoldSettlement { token: t as f64, allocated }))
    })
}

/// The launch returned a handle with a provider id. With `store_key` (the default mapping
/// store), the record is written here too: `{ id, pool id, providerSandboxId, labels,
/// createdAt, detached }`, the labels being the request's plus the router's id and fleet
/// labels (`fleet`: the router's fleet, as [`crate::binding::fleet_key`] numbered it).
/// `now`: the router's injected health clock (ms); omitted, the wall clock (read here).
///
/// A machine that records no events (no observer) ends here, before the record is written
/// (whether or not that write fails): nothing more is asked of it, and ending it in the same
/// call saves the provision a native call. An observed machine, or one whose holds are in a
/// shared ledger (its settlement is still to be read), ends with [`acquisition_end`].
#[napi]
pub fn acquisition_succeeded(
    key: u32,
    store_key: Option<u32>,
    provider_sandbox_id: String,
    detached: bool,
    fleet: u32,
    now: Option<f64>,
) -> napi::Result<bool> {
    acquisition_succeeded_with(key, store_key, &provider_sandbox_id, detached, fleet, now)
}

/// [`acquisition_succeeded`] with the provider sandbox id borrowed (see `binding_fast.rs`).
pub(crate) fn acquisition_succeeded_with(
    key: u32,
    store_key: Option<u32>,
    provider_sandbox_id: &str,
    detached: bool,
    fleet: u32,
    now: Option<f64>,
) -> napi::Result<bool> {
    guard(|| {
        let (id, labels, registry, pool, keep) = with(key, |e| {
            e.report(now, |m, l| m.succeeded(l));
            // A coordinated machine stays until its hold's settlement is read
            // (`acquisitionSettlement`); the JS side then ends it.
            let coordinated = e.ledger.as_ref().is_some_and(|l| l.borrow().coordinated);
            (e.id, e.labels.clone(), e.registry.clone(), e.pool as usize, e.machine.observing() || coordinated)
        })?;
        if !keep {
            acquisition_end(key);
        }
        if let Some(store) = store_key {
            let registry = registry.borrow();
            crate::binding::write_record(
                store,
                labels,
                id,
                registry.pool_id(pool),
                provider_sandbox_id,
                detached,
                crate::binding::fleet_named(fleet)?,
            )?;
        }
        Ok(!keep)
    })
}

/// The launch failed; `code` / `retryable`: the classifier's answer, if it gave one of the
/// right types (the machine sanitizes and decides).
/// `now`: the router's injected health clock (ms); omitted, the wall clock (read here).
#[napi]
pub fn acquisition_failed(
    key: u32,
    code: Option<String>,
    retryable: Option<bool>,
    now: Option<f64>,
) -> napi::Result<()> {
    guard(|| with(key, |e| e.report(now, |m, l| m.failed(l, code.as_deref(), retryable))))
}

/// The launch resolved to something that is not a handle.
/// `now`: the router's injected health clock (ms); omitted, the wall clock (read here).
#[napi]
pub fn acquisition_malformed(key: u32, now: Option<f64>) -> napi::Result<()> {
    guard(|| with(key, |e| e.report(now, |m, l| m.malformed(l))))
}

/// The launch did not settle within its deadline.
/// `now`: the router's injected health clock (ms); omitted, the wall clock (read here).
#[napi]
pub fn acquisition_timed_out(key: u32, now: Option<f64>) -> napi::Result<()> {
    guard(|| with(key, |e| e.report(now, |m, l| m.timed_out(l))))
}

/// The runtime threw the router's own package error with this code.
/// `now`: the router's injected health clock (ms); omitted, the wall clock (read here).
#[napi]
pub fn acquisition_package_failed(key: u32, code: String, now: Option<f64>) -> napi::Result<()> {
    guard(|| with(key, |e| e.report(now, |m, l| m.package_failed(l, &code))))
}

/// The candidates, best first (pool indices): the order `provision.ranked` reports.
#[napi]
pub fn acquisition_candidates(key: u32) -> napi::Result<napi::bindgen_prelude::Uint32Array> {
    guard(|| {
        with(key, |e| {
            napi::bindgen_prelude::Uint32Array::new(e.machine.candidates().iter().map(|&i| i as u32).collect())
        })
    })
}

/// Events decided since the last call (empty unless the machine observes).
#[napi]
pub fn acquisition_events(key: u32) -> napi::Result<Vec<EventRecord>> {
    guard(|| with(key, |e| e.machine.take_events().into_iter().map(event_record).collect()))
}

/// How it failed, once over (null while running or after a success).
#[napi]
pub fn acquisition_failure(key: u32) -> napi::Result<Option<AcquisitionFailure>> {
    guard(|| with(key, |e| failure_of(&e.machine)))
}

/// Forgets the machine (its key may be reused); a half-open trial token it still holds is
/// freed. Ending an unknown key does nothing.
#[napi]
pub fn acquisition_end(key: u32) {
    let ended = MACHINES.with(|m| {
        let mut m = m.borrow_mut();
        let entry = m.items.get_mut(key as usize).and_then(Option::take);
        if let Some(e) = &entry {
            let id = e.id;
            m.ids.remove(&id);
            m.free.push(key);
        }
        entry
    });
    if let Some(mut e) = ended {
        if let Some(h) = &e.health {
            e.machine.abandon(&mut h.borrow_mut().health);
        }
    }
}

/// Whether a machine in flight (of any router in this process) made sandbox id `id`. Ids
/// are 128 random bits, so another router's provision never answers for this one's.
#[napi]
pub fn acquisition_in_flight(id: String) -> bool {
    SandboxKey::parse(&id).is_some_and(|k| MACHINES.with(|m| m.borrow().ids.contains(&k)))
}

/// Machines in flight (for the leak tests).
#[napi]
pub fn acquisitions_in_flight() -> u32 {
    MACHINES.with(|m| m.borrow().items.iter().filter(|e| e.is_some()).count() as u32)
}

fn failure_of(machine: &Acquisition) -> Option<AcquisitionFailure> {
    let outcome = machine.outcome()?;
    let (kind, pool) = match outcome {
        Outcome::Succeeded(_) => return None,
        Outcome::Terminal { pool, .. } => (FailureKind::Terminal, Some(*pool as u32)),
        Outcome::Exhausted { pool } => (FailureKind::Exhausted, Some(*pool as u32)),
        Outcome::ExhaustedByCapacity => (FailureKind::ExhaustedByCapacity, None),
        Outcome::NoCapacity => (FailureKind::NoCapacity, None),
        Outcome::TimedOut { pool } => (FailureKind::TimedOut, Some(*pool as u32)),
        Outcome::PackageFailed { pool, .. } => (FailureKind::Package, Some(*pool as u32)),
        Outcome::CircuitOpen { pool } => (FailureKind::CircuitOpen, Some(*pool as u32)),
    };
    Some(AcquisitionFailure {
        kind,
        code: outcome.code().unwrap_or_default().to_string(),
        pool,
        launches: machine.launches(),
        attempts: machine
            .attempts()
            .iter()
            .map(|a| AttemptRecord { pool: a.pool as u32, code: a.code.clone(), retryable: a.retryable })
            .collect(),
        skipped: machine
            .skipped()
            .iter()
            .map(|s| SkipRecord {
                pool: s.pool as u32,
                status: status_name(s.status).to_string(),
                reason: s.reason.clone(),
            })
            .collect(),
    })
}
