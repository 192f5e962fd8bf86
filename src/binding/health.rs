//! napi glue for live pool health (`core::health`): one `NativeHealth` per router, reached
//! by integer key from the hot-path free functions, and its plain-data snapshot.
//!
//! Nothing is decided here: the core's `Health` says which pools are excluded and why, the
//! acquisition machine records outcomes and takes the half-open trial token. The glue
//! passes the router's clock in (`now`, ms), maps pool indices of a registry to health
//! slots (by pool id, cached per registry), and turns snapshots into typed records.

use crate::binding::{guard, Slab};
use crate::core::clock::iso8601_millis;
use crate::core::health::{Block, CircuitState, Health, HealthConfig};
use napi_derive::napi;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// A router's health and a process-unique id (registries cache their slot maps by it).
pub(crate) struct HealthInner {
    pub(crate) health: Health,
    pub(crate) id: u64,
}

pub(crate) type SharedHealth = Rc<RefCell<HealthInner>>;

thread_local! {
    static HEALTHS: RefCell<Slab<SharedHealth>> = const { RefCell::new(Slab::new()) };
    static NEXT_ID: Cell<u64> = const { Cell::new(1) };
}

/// The instant health works with: the router's injected clock's reading, or (none given:
/// the default clock) the wall clock, read here so that JS makes no clock call and passes
/// no argument for it. The core never reads a clock; the glue passes the instant in.
pub(crate) fn instant(now: Option<f64>) -> i64 {
    now.map_or_else(crate::core::clock::now_millis, |n| n as i64)
}

/// The health behind hot-path key `key` (None: no key given, or a stale one).
pub(crate) fn health_by_key(key: Option<u32>) -> Option<SharedHealth> {
    key.and_then(|k| HEALTHS.with(|s| s.borrow().get(k)))
}

/// The health options, validated by `lib/options.js` (defaults in the README).
#[napi(object)]
pub struct HealthOptions {
    /// Consecutive outcome-unknown failures, timeouts or malformed handles that open a circuit.
    pub failure_threshold: u32,
    /// Consecutive classified pre-allocation failures that open a circuit.
    pub retryable_failure_threshold: u32,
    /// First cooldown, ms.
    pub cooldown_ms: f64,
    /// Bound on a cooldown after failed trials, ms.
    pub max_cooldown_ms: f64,
    /// Half-life of the weighted statistics, in launches.
    pub half_life: f64,
    /// Samples before observed signals join the ranking.
    pub min_samples: u32,
    /// Whether ranking blends observed signals in.
    pub observed_signals: bool,
}

/// One router's live pool health (see `core::health`).
#[napi]
pub struct NativeHealth {
    inner: SharedHealth,
    key: u32,
}

impl Drop for NativeHealth {
    fn drop(&mut self) {
        let _ = HEALTHS.try_with(|s| s.borrow_mut().remove(self.key));
    }
}

/// A circuit's state.
#[napi(string_enum = "kebab-case")]
pub enum CircuitStateName {
    /// Routing as usual.
    Closed,
    /// Excluded until `retryAt`.
    Open,
    /// The cooldown is over: the next provision may probe it (one at a time).
    HalfOpen,
}

/// One pool's health, as `router.health()` returns it: numbers and codes only.
#[napi(object)]
pub struct PoolHealthRecord {
    /// The pool's id.
    pub provider_id: String,
    /// The circuit's state now.
    pub state: CircuitStateName,
    /// Why it opened (`CONSECUTIVE_FAILURES`, `CONSECUTIVE_RETRYABLE_FAILURES`,
    /// `TRIAL_FAILED`); null when closed.
    pub cause: Option<String>,
    /// Open: when it may be probed (ISO 8601). Otherwise null.
    pub retry_at: Option<String>,
    /// Half-open: whether the single trial provision is running.
    pub trial_in_flight: bool,
    /// Launch outcomes recorded.
    pub samples: f64,
    /// Weighted success rate (0..1); null before the first outcome.
    pub success_rate: Option<f64>,
    /// Weighted launch-to-handle latency of successes, ms; null before the first success.
    pub latency_ms: Option<f64>,
    /// p95 of launch-to-handle latency (a sketch's bucket bound, within 19 %), ms.
    pub p95_latency_ms: Option<f64>,
    /// Consecutive outcome-unknown failures, timeouts and malformed handles.
    pub consecutive_failures: u32,
    /// Consecutive classified pre-allocation failures.
    pub consecutive_retryable_failures: u32,
    /// The current cooldown (open or half-open), or the first one (closed), ms.
    pub cooldown_ms: f64,
}

#[napi]
impl NativeHealth {
    /// Empty health under `options`.
    #[napi(constructor)]
    pub fn new(options: HealthOptions) -> Self {
        let config = HealthConfig {
            failure_threshold: options.failure_threshold.max(1),
            retryable_failure_threshold: options.retryable_failure_threshold.max(1),
            cooldown_ms: options.cooldown_ms.max(0.0) as u64,
            max_cooldown_ms: options.max_cooldown_ms.max(0.0) as u64,
            half_life: options.half_life,
            min_samples: options.min_samples,
            observed_signals: options.observed_signals,
        };
        let id = NEXT_ID.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        });
        let inner = Rc::new(RefCell::new(HealthInner { health: Health::new(config), id }));
        let key = HEALTHS.with(|s| s.borrow_mut().insert(inner.clone()));
        NativeHealth { inner, key }
    }

    /// The key for the hot-path free functions.
    #[napi(getter)]
    pub fn key(&self) -> u32 {
        self.key
    }

    /// Every pool of `provider_ids`, in that order, at `now` (ms; omitted: the wall clock).
    #[napi]
    pub fn snapshot(&self, provider_ids: Vec<String>, now: Option<f64>) -> napi::Result<Vec<PoolHealthRecord>> {
        guard(|| {
            let inner = self.inner.borrow();
            let h = &inner.health;
            let now = instant(now);
            Ok(provider_ids
                .into_iter()
                .map(|id| {
                    let slot = h.find(&id);
                    let s = h.snapshot(slot, now);
                    let (state, cause, retry_at, trial) = match s.state {
                        CircuitState::Closed => (CircuitStateName::Closed, None, None, false),
                        CircuitState::Open { retry_at, cause } => {
                            (CircuitStateName::Open, Some(cause), Some(iso8601_millis(retry_at)), false)
                        }
                        CircuitState::HalfOpen { trial_in_flight, cause } => {
                            (CircuitStateName::HalfOpen, Some(cause), None, trial_in_flight)
                        }
                    };
                    PoolHealthRecord {
                        provider_id: id,
                        state,
                        cause: cause.map(|c| c.code().to_string()),
                        retry_at,
                        trial_in_flight: trial,
                        samples: s.samples as f64,
                        success_rate: s.success_rate,
                        latency_ms: s.latency_ms,
                        p95_latency_ms: s.p95_latency_ms,
                        consecutive_failures: s.consecutive_failures,
                        consecutive_retryable_failures: s.consecutive_retryable_failures,
                        cooldown_ms: s.cooldown_ms as f64,
                    }
                })
                .collect())
        })
    }
}

/// What routing needs of a router's health for one decision.
pub(crate) struct HealthView<'a> {
    pub(crate) health: &'a Health,
    /// Health slot of each pool of the registry, by pool index.
    pub(crate) slots: &'a [usize],
    /// The same slots, shared (an acquisition keeps them without a copy).
    pub(crate) shared: &'a Rc<[usize]>,
    pub(crate) now: i64,
}

impl HealthView<'_> {
    /// Pools excluded now, with why (empty, without a scan, when every circuit is closed).
    pub(crate) fn circuit(&self) -> Vec<(usize, Block)> {
        if !self.health.any_not_closed() {
            return Vec::new();
        }
        self.slots.iter().enumerate().filter_map(|(i, &s)| self.health.block(s, self.now).map(|b| (i, b))).collect()
    }

    /// Observed signals by pool index (None when ranking does not blend them in).
    pub(crate) fn observed(&self) -> Option<Vec<Option<crate::core::health::Observed>>> {
        self.health.config().observed_signals.then(|| self.slots.iter().map(|&s| self.health.observed(s)).collect())
    }
}
