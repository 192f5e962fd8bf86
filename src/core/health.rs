//! Live pool health from real launch outcomes: statistics and a circuit breaker.
//!
//! Why learn from outcomes at all? Declared signals (or a resolver's answers) say how a
//! pool *should* behave. When a provider starts hanging or failing, every provision that
//! still ranks it first pays a full acquisition timeout or ends outcome-unknown, until
//! someone edits the numbers. The router sees every launch's outcome and latency, so it
//! keeps per-pool statistics and, like Envoy's outlier detection and LiteLLM's cooldowns,
//! stops routing to a pool after consecutive failures, then lets exactly one trial
//! provision probe it (half-open) after a cooldown.
//!
//! Why sans-IO and a clock parameter? Every method takes `now` (milliseconds since the
//! epoch, as the caller's clock tells it); nothing here reads a clock. The same outcome
//! sequence at the same instants gives the same states, which the property test in this
//! file and the chaos tests rely on.
//!
//! The rules:
//! - **Counted toward the circuit**: outcome-unknown failures, acquisition timeouts and
//!   malformed handles (consecutive; threshold [`HealthConfig::failure_threshold`]), and,
//!   separately, classified pre-allocation (retryable) failures (threshold
//!   [`HealthConfig::retryable_failure_threshold`]). A success resets both counts. A
//!   classified terminal failure lowers the success rate but counts toward neither.
//! - **Not a health outcome**: a capacity skip (nothing was launched), a missing package
//!   or a failed intent write (nothing was called), and a retryable failure classified
//!   with the code `PROVIDER_CAPACITY_EXHAUSTED` (capacity exhaustion is not ill health).
//! - **Open**: the pool is excluded (`CIRCUIT_OPEN`) until `retry_at`. From then on the
//!   next launch takes the single trial token (half-open). The trial's success closes the
//!   circuit; any other outcome of the trial reopens it with twice the previous cooldown,
//!   bounded by [`HealthConfig::max_cooldown_ms`]. While the trial runs, the pool is
//!   excluded for every other provision.
//! - A success observed while the circuit is open (a launch that started before it
//!   opened) closes it too: the pool just proved it can serve.

use std::collections::HashMap;

/// Default consecutive outcome-unknown failures, timeouts or malformed handles that open a
/// circuit.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 5;
/// Default consecutive classified pre-allocation (retryable) failures that open a circuit.
pub const DEFAULT_RETRYABLE_FAILURE_THRESHOLD: u32 = 10;
/// Default first cooldown of an open circuit, ms.
pub const DEFAULT_COOLDOWN_MS: u64 = 30_000;
/// Default bound on a cooldown after failed trials, ms.
pub const DEFAULT_MAX_COOLDOWN_MS: u64 = 600_000;
/// Default half-life of the exponentially weighted statistics, in launches.
pub const DEFAULT_HALF_LIFE: f64 = 20.0;
/// Default minimum samples before observed signals join the ranking (when opted in).
pub const DEFAULT_MIN_SAMPLES: u32 = 20;
/// The classified code that names capacity exhaustion: not a health failure.
pub const CAPACITY_CODE: &str = "PROVIDER_CAPACITY_EXHAUSTED";

/// The thresholds and statistics' parameters (router option `health`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthConfig {
    /// Consecutive outcome-unknown failures, timeouts or malformed handles that open the
    /// circuit.
    pub failure_threshold: u32,
    /// Consecutive classified pre-allocation failures that open the circuit.
    pub retryable_failure_threshold: u32,
    /// First cooldown, ms.
    pub cooldown_ms: u64,
    /// Largest cooldown after repeated failed trials, ms.
    pub max_cooldown_ms: u64,
    /// Half-life of the weighted latency, success rate and p95, in launches (> 0).
    pub half_life: f64,
    /// Samples a pool needs before its observed signals join the ranking.
    pub min_samples: u32,
    /// Whether ranking blends observed signals in (off: declared signals only).
    pub observed_signals: bool,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            failure_threshold: DEFAULT_FAILURE_THRESHOLD,
            retryable_failure_threshold: DEFAULT_RETRYABLE_FAILURE_THRESHOLD,
            cooldown_ms: DEFAULT_COOLDOWN_MS,
            max_cooldown_ms: DEFAULT_MAX_COOLDOWN_MS,
            half_life: DEFAULT_HALF_LIFE,
            min_samples: DEFAULT_MIN_SAMPLES,
            observed_signals: false,
        }
    }
}

/// The router option `health`, read strictly: `true` for the defaults, `false` for no
/// tracking (`Ok(None)`), or an object of the options below (the caller's
/// `clock` function is taken out by the JS layer, which calls it). These ranges and the
/// defaults above are the only copy; docs/health.md documents them.
pub fn config_of_option(value: &serde_json::Value) -> Result<Option<HealthConfig>, crate::core::CoreError> {
    use serde_json::Value;
    let invalid = |field: String, expectation: &str| crate::core::CoreError::InvalidConfiguration {
        scope: "router",
        field,
        expectation: expectation.to_string(),
    };
    let map = match value {
        Value::Bool(false) => return Ok(None),
        Value::Bool(true) => return Ok(Some(HealthConfig::default())),
        Value::Object(map) => map,
        _ => return Err(invalid("health".into(), "must be false, true or an object")),
    };
    for key in map.keys() {
        if !HEALTH_OPTIONS.contains(&key.as_str()) {
            return Err(invalid(format!("health.{}", crate::core::json::shown(key)), "is not a known option"));
        }
    }
    let int = |name: &str, default: u64, max: u64| -> Result<u64, crate::core::CoreError> {
        match map.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| invalid(format!("health.{name}"), &format!("must be an integer from 1 to {max}"))),
        }
    };
    let config = HealthConfig {
        failure_threshold: int("failureThreshold", u64::from(DEFAULT_FAILURE_THRESHOLD), 1_000)? as u32,
        retryable_failure_threshold: int(
            "retryableFailureThreshold",
            u64::from(DEFAULT_RETRYABLE_FAILURE_THRESHOLD),
            1_000,
        )? as u32,
        cooldown_ms: int("cooldownMs", DEFAULT_COOLDOWN_MS, MAX_COOLDOWN_OPTION_MS)?,
        max_cooldown_ms: int("maxCooldownMs", DEFAULT_MAX_COOLDOWN_MS, MAX_COOLDOWN_OPTION_MS)?,
        half_life: int("halfLife", DEFAULT_HALF_LIFE as u64, 100_000)? as f64,
        min_samples: int("minSamples", u64::from(DEFAULT_MIN_SAMPLES), 100_000)? as u32,
        observed_signals: match map.get("observedSignals") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(invalid("health.observedSignals".into(), "must be a boolean")),
        },
    };
    if config.max_cooldown_ms < config.cooldown_ms {
        return Err(invalid("health.maxCooldownMs".into(), "must be at least health.cooldownMs"));
    }
    Ok(Some(config))
}

/// The keys of the `health` option (`clock` is the JS layer's: a function).
pub const HEALTH_OPTIONS: [&str; 8] = [
    "clock",
    "failureThreshold",
    "retryableFailureThreshold",
    "cooldownMs",
    "maxCooldownMs",
    "halfLife",
    "minSamples",
    "observedSignals",
];

/// Largest `cooldownMs` / `maxCooldownMs` the option takes: a day.
pub const MAX_COOLDOWN_OPTION_MS: u64 = 86_400_000;

/// What one launch came to, as health counts it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LaunchOutcome {
    /// A handle, `latency_ms` after the launch started.
    Succeeded {
        /// Launch start to handle, ms.
        latency_ms: f64,
    },
    /// A classified pre-allocation (retryable) failure.
    PreAllocation,
    /// A classified pre-allocation failure whose code says capacity is exhausted: ignored.
    CapacityExhausted,
    /// A classified terminal failure (not retryable).
    Terminal,
    /// An unclassified failure: outcome unknown.
    OutcomeUnknown,
    /// The launch did not settle within its deadline.
    TimedOut,
    /// The launch resolved to something that is not a handle.
    Malformed,
}

impl LaunchOutcome {
    /// The outcome of a failure the classifier answered (`retryable`: the sanitized flag;
    /// `classified`: whether a valid code was given).
    pub fn of_failure(code: &str, classified: bool, retryable: bool) -> LaunchOutcome {
        match (classified, retryable) {
            (true, true) if code == CAPACITY_CODE => LaunchOutcome::CapacityExhausted,
            (true, true) => LaunchOutcome::PreAllocation,
            (true, false) => LaunchOutcome::Terminal,
            (false, _) => LaunchOutcome::OutcomeUnknown,
        }
    }
}

/// Why a circuit opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Consecutive outcome-unknown failures, timeouts or malformed handles.
    Failures,
    /// Consecutive classified pre-allocation failures.
    RetryableFailures,
    /// The half-open trial failed.
    TrialFailed,
}

impl Cause {
    /// The stable code (events, `health()`).
    pub fn code(self) -> &'static str {
        match self {
            Cause::Failures => "CONSECUTIVE_FAILURES",
            Cause::RetryableFailures => "CONSECUTIVE_RETRYABLE_FAILURES",
            Cause::TrialFailed => "TRIAL_FAILED",
        }
    }

    /// The cause whose code is `code`.
    pub fn from_code(code: &str) -> Option<Cause> {
        [Cause::Failures, Cause::RetryableFailures, Cause::TrialFailed].into_iter().find(|c| c.code() == code)
    }
}

/// One pool's health as a decision read it: what a decision record keeps and a replay
/// restores ([`Health::seed_of`], [`Health::seed`]); every field routing or the circuit reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolSeed {
    /// Launch outcomes recorded.
    pub samples: u64,
    /// Weighted launch-to-handle latency of successes, ms.
    pub latency_ms: Option<f64>,
    /// Weighted success rate.
    pub success_rate: Option<f64>,
    /// Consecutive outcome-unknown failures.
    pub failures: u32,
    /// Consecutive classified pre-allocation failures.
    pub retryable_failures: u32,
    /// Consecutive opens without a close.
    pub opens: u32,
    /// The circuit: None closed, else (trial in flight, until, cooldown ms, cause).
    pub circuit: Option<(bool, i64, u64, Cause)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Circuit {
    Closed,
    /// Excluded until `until`; from then a launch may take the trial.
    Open {
        until: i64,
        cooldown_ms: u64,
        cause: Cause,
    },
    /// The trial launch is in flight (it may restore `Open { until, .. }` if it ends
    /// without an outcome).
    Trial {
        until: i64,
        cooldown_ms: u64,
        cause: Cause,
    },
}

/// A circuit's state as the outside sees it at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    /// Routing as usual.
    Closed,
    /// Excluded until `retry_at` (ms).
    Open {
        /// When the next launch may probe it.
        retry_at: i64,
        /// Why it opened.
        cause: Cause,
    },
    /// The cooldown is over: the next launch is the trial (`trial_in_flight` false), or
    /// the trial runs and the pool is excluded for everyone else.
    HalfOpen {
        /// Whether the single trial is running.
        trial_in_flight: bool,
        /// Why it opened.
        cause: Cause,
    },
}

/// Why a pool is excluded now (`CIRCUIT_OPEN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// Open, retried from `retry_at` (ms).
    Open {
        /// When it may be probed.
        retry_at: i64,
        /// Why it opened.
        cause: Cause,
    },
    /// Half-open, and another provision holds the trial.
    TrialInFlight,
}

/// A state change, for the `health.circuit.*` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// `health.circuit.opened`: excluded until `retry_at`.
    Opened {
        /// When it may be probed.
        retry_at: i64,
        /// This cooldown, ms.
        cooldown_ms: u64,
        /// Why.
        cause: Cause,
        /// The consecutive count that opened it (the trial: 1).
        failures: u32,
    },
    /// `health.circuit.half-open`: a trial launch started.
    HalfOpen,
    /// `health.circuit.closed`: a success closed it.
    Closed,
}

/// Launches since weighting started are worth at most this before renormalizing.
const RENORMALIZE: f64 = 1e12;
/// Buckets of the p95 sketch: bucket `i` holds latencies up to 2^(i/4) ms.
const BUCKETS: usize = 100;

/// A decayed log-scale histogram: each launch's weight grows by 2^(1/half-life), so older
/// launches count for less without touching every bucket on every sample. Relative error
/// of a quantile: under 19 % (four buckets per doubling).
#[derive(Debug, Clone, PartialEq)]
struct Sketch {
    counts: Vec<f64>,
    weight: f64,
    total: f64,
}

impl Sketch {
    fn new() -> Self {
        Sketch { counts: vec![0.0; BUCKETS], weight: 1.0, total: 0.0 }
    }

    fn bucket(ms: f64) -> usize {
        if ms <= 1.0 || ms.is_nan() {
            return 0;
        }
        ((ms.log2() * 4.0).ceil() as usize).min(BUCKETS - 1)
    }

    fn add(&mut self, ms: f64, growth: f64) {
        if self.total > 0.0 {
            self.weight *= growth;
        }
        if self.weight > RENORMALIZE {
            for c in &mut self.counts {
                *c /= self.weight;
            }
            self.total /= self.weight;
            self.weight = 1.0;
        }
        self.counts[Self::bucket(ms)] += self.weight;
        self.total += self.weight;
    }

    /// The upper bound of the bucket holding quantile `q` (None when empty).
    fn quantile(&self, q: f64) -> Option<f64> {
        if self.total <= 0.0 {
            return None;
        }
        let target = q * self.total;
        let mut seen = 0.0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= target && *c > 0.0 {
                return Some(2f64.powf(i as f64 / 4.0));
            }
        }
        Some(2f64.powf((BUCKETS - 1) as f64 / 4.0))
    }
}

/// One pool's statistics and circuit.
#[derive(Debug, Clone, PartialEq)]
struct PoolHealth {
    samples: u64,
    latency: Option<f64>,
    success: Option<f64>,
    sketch: Sketch,
    failures: u32,
    retryable_failures: u32,
    circuit: Circuit,
    /// Consecutive opens without a close (the backoff's exponent).
    opens: u32,
}

impl PoolHealth {
    fn new() -> Self {
        PoolHealth {
            samples: 0,
            latency: None,
            success: None,
            sketch: Sketch::new(),
            failures: 0,
            retryable_failures: 0,
            circuit: Circuit::Closed,
            opens: 0,
        }
    }
}

/// Plain data about one pool (what `router.health()` returns): numbers and codes only.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The circuit at the instant asked.
    pub state: CircuitState,
    /// Launch outcomes recorded.
    pub samples: u64,
    /// Weighted launch-to-handle latency of successes, ms.
    pub latency_ms: Option<f64>,
    /// p95 of launch-to-handle latency (sketch bucket bound), ms.
    pub p95_latency_ms: Option<f64>,
    /// Weighted success rate, 0..=1.
    pub success_rate: Option<f64>,
    /// Consecutive outcome-unknown failures, timeouts and malformed handles.
    pub consecutive_failures: u32,
    /// Consecutive classified pre-allocation failures.
    pub consecutive_retryable_failures: u32,
    /// The current (or next) cooldown, ms.
    pub cooldown_ms: u64,
}

/// Observed signals of a pool, once it has enough samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    /// Weighted launch-to-handle latency, ms (None: no success yet).
    pub ready_latency_ms: Option<f64>,
    /// Weighted success rate.
    pub completion_rate: f64,
    /// The observed values' share of the blend: `n / (n + minSamples)`.
    pub weight: f64,
}

impl Observed {
    /// `declared` blended with the observed value.
    pub fn blend(self, declared: f64, observed: f64) -> f64 {
        self.weight * observed + (1.0 - self.weight) * declared
    }
}

/// Every pool's health, keyed by pool id (a router's health outlives registry changes).
#[derive(Debug, Clone)]
pub struct Health {
    config: HealthConfig,
    alpha: f64,
    growth: f64,
    slots: HashMap<String, usize>,
    pools: Vec<PoolHealth>,
    /// Pools whose circuit is not closed: when 0, routing consults nothing.
    not_closed: usize,
}

impl Health {
    /// Empty health under `config` (`half_life` must be > 0; the glue validates it).
    pub fn new(config: HealthConfig) -> Self {
        let half_life = if config.half_life > 0.0 { config.half_life } else { DEFAULT_HALF_LIFE };
        Health {
            config,
            alpha: 1.0 - 2f64.powf(-1.0 / half_life),
            growth: 2f64.powf(1.0 / half_life),
            slots: HashMap::new(),
            pools: Vec::new(),
            not_closed: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &HealthConfig {
        &self.config
    }

    /// The slot of pool `id` (created on first use).
    pub fn slot(&mut self, id: &str) -> usize {
        if let Some(&s) = self.slots.get(id) {
            return s;
        }
        let s = self.pools.len();
        self.slots.insert(id.to_string(), s);
        self.pools.push(PoolHealth::new());
        s
    }

    /// Whether any circuit is not closed (routing consults [`Health::block`] only then).
    pub fn any_not_closed(&self) -> bool {
        self.not_closed > 0
    }

    fn set(&mut self, slot: usize, circuit: Circuit) {
        let was_closed = self.pools[slot].circuit == Circuit::Closed;
        let is_closed = circuit == Circuit::Closed;
        if was_closed && !is_closed {
            self.not_closed += 1;
        } else if !was_closed && is_closed {
            self.not_closed -= 1;
        }
        self.pools[slot].circuit = circuit;
    }

    /// The circuit of `slot` at `now`.
    pub fn state(&self, slot: usize, now: i64) -> CircuitState {
        match self.pools.get(slot).map(|p| p.circuit) {
            None | Some(Circuit::Closed) => CircuitState::Closed,
            Some(Circuit::Open { until, cause, .. }) if now < until => CircuitState::Open { retry_at: until, cause },
            Some(Circuit::Open { cause, .. }) => CircuitState::HalfOpen { trial_in_flight: false, cause },
            Some(Circuit::Trial { cause, .. }) => CircuitState::HalfOpen { trial_in_flight: true, cause },
        }
    }

    /// Why `slot` is excluded at `now`, if it is.
    pub fn block(&self, slot: usize, now: i64) -> Option<Block> {
        match self.state(slot, now) {
            CircuitState::Open { retry_at, cause } => Some(Block::Open { retry_at, cause }),
            CircuitState::HalfOpen { trial_in_flight: true, .. } => Some(Block::TrialInFlight),
            _ => None,
        }
    }

    /// A launch on `slot` is about to start at `now`. `Ok(true)`: it is the half-open trial
    /// (it holds the token until [`Health::record`] or [`Health::release`]); `Ok(false)`: an
    /// ordinary launch; `Err`: the pool is excluded now (a circuit opened or a trial
    /// started since the route was decided).
    pub fn try_launch(&mut self, slot: usize, now: i64) -> Result<bool, Block> {
        let Some(p) = self.pools.get(slot) else { return Ok(false) };
        match p.circuit {
            Circuit::Closed => Ok(false),
            Circuit::Open { until, cause, .. } if now < until => Err(Block::Open { retry_at: until, cause }),
            Circuit::Open { until, cooldown_ms, cause } => {
                self.pools[slot].circuit = Circuit::Trial { until, cooldown_ms, cause };
                Ok(true)
            }
            Circuit::Trial { .. } => Err(Block::TrialInFlight),
        }
    }

    /// The trial launch on `slot` ended with no outcome health counts (a missing package,
    /// an abandoned acquisition): the token is free again.
    pub fn release(&mut self, slot: usize) {
        if let Some(p) = self.pools.get_mut(slot) {
            if let Circuit::Trial { until, cooldown_ms, cause } = p.circuit {
                p.circuit = Circuit::Open { until, cooldown_ms, cause };
            }
        }
    }

    /// Records a launch's outcome on `slot` at `now`; `trial`: this launch held the trial
    /// token. Returns the transition it caused, if any.
    pub fn record(&mut self, slot: usize, outcome: LaunchOutcome, now: i64, trial: bool) -> Option<Transition> {
        if slot >= self.pools.len() {
            return None;
        }
        if outcome == LaunchOutcome::CapacityExhausted {
            if trial {
                self.release(slot);
            }
            return None;
        }
        let (alpha, growth) = (self.alpha, self.growth);
        let p = &mut self.pools[slot];
        p.samples += 1;
        let ok = matches!(outcome, LaunchOutcome::Succeeded { .. });
        let hit = if ok { 1.0 } else { 0.0 };
        p.success = Some(p.success.map_or(hit, |s| s + alpha * (hit - s)));
        match outcome {
            LaunchOutcome::Succeeded { latency_ms } => {
                let ms = if latency_ms.is_finite() && latency_ms >= 0.0 { latency_ms } else { 0.0 };
                p.latency = Some(p.latency.map_or(ms, |l| l + alpha * (ms - l)));
                p.sketch.add(ms, growth);
                p.failures = 0;
                p.retryable_failures = 0;
                p.opens = 0;
                if p.circuit != Circuit::Closed {
                    self.set(slot, Circuit::Closed);
                    return Some(Transition::Closed);
                }
                None
            }
            LaunchOutcome::PreAllocation => {
                p.retryable_failures = p.retryable_failures.saturating_add(1);
                let n = p.retryable_failures;
                self.after_failure(
                    slot,
                    now,
                    trial,
                    n >= self.config.retryable_failure_threshold,
                    Cause::RetryableFailures,
                    n,
                )
            }
            LaunchOutcome::OutcomeUnknown | LaunchOutcome::TimedOut | LaunchOutcome::Malformed => {
                p.failures = p.failures.saturating_add(1);
                let n = p.failures;
                self.after_failure(slot, now, trial, n >= self.config.failure_threshold, Cause::Failures, n)
            }
            LaunchOutcome::Terminal => self.after_failure(slot, now, trial, false, Cause::Failures, 0),
            LaunchOutcome::CapacityExhausted => None,
        }
    }

    /// A failure's effect on the circuit: a failed trial reopens it with a longer cooldown;
    /// a closed circuit opens when `over` (a threshold reached).
    fn after_failure(
        &mut self,
        slot: usize,
        now: i64,
        trial: bool,
        over: bool,
        cause: Cause,
        n: u32,
    ) -> Option<Transition> {
        let circuit = self.pools[slot].circuit;
        let (cause, failures) = match circuit {
            Circuit::Trial { .. } if trial => (Cause::TrialFailed, 1),
            Circuit::Closed if over => (cause, n),
            _ => return None,
        };
        let p = &mut self.pools[slot];
        let doublings = p.opens.min(32);
        p.opens = p.opens.saturating_add(1);
        let cooldown_ms =
            self.config.cooldown_ms.saturating_mul(1u64 << doublings.min(40)).min(self.config.max_cooldown_ms);
        let retry_at = now.saturating_add(cooldown_ms as i64);
        self.set(slot, Circuit::Open { until: retry_at, cooldown_ms, cause });
        Some(Transition::Opened { retry_at, cooldown_ms, cause, failures })
    }

    /// Plain data about `slot` at `now` (a pool never launched has zero samples).
    pub fn snapshot(&self, slot: Option<usize>, now: i64) -> Snapshot {
        let fresh = PoolHealth::new();
        let p = slot.and_then(|s| self.pools.get(s)).unwrap_or(&fresh);
        let cooldown_ms = match p.circuit {
            Circuit::Open { cooldown_ms, .. } | Circuit::Trial { cooldown_ms, .. } => cooldown_ms,
            Circuit::Closed => self.config.cooldown_ms,
        };
        Snapshot {
            state: slot.map_or(CircuitState::Closed, |s| self.state(s, now)),
            samples: p.samples,
            latency_ms: p.latency,
            p95_latency_ms: p.sketch.quantile(0.95),
            success_rate: p.success,
            consecutive_failures: p.failures,
            consecutive_retryable_failures: p.retryable_failures,
            cooldown_ms,
        }
    }

    /// The slot of pool `id`, if it has one.
    pub fn find(&self, id: &str) -> Option<usize> {
        self.slots.get(id).copied()
    }

    /// Pool `id`'s health as routing reads it (None: never recorded, the same as fresh).
    pub fn seed_of(&self, id: &str) -> Option<PoolSeed> {
        self.seed_of_slot(self.find(id)?)
    }

    /// [`Health::seed_of`] by slot (None: no such slot, or one that recorded nothing).
    pub fn seed_of_slot(&self, slot: usize) -> Option<PoolSeed> {
        let p = self.pools.get(slot)?;
        if p.samples == 0
            && p.circuit == Circuit::Closed
            && p.failures == 0
            && p.retryable_failures == 0
            && p.opens == 0
        {
            return None;
        }
        let circuit = match p.circuit {
            Circuit::Closed => None,
            Circuit::Open { until, cooldown_ms, cause } => Some((false, until, cooldown_ms, cause)),
            Circuit::Trial { until, cooldown_ms, cause } => Some((true, until, cooldown_ms, cause)),
        };
        Some(PoolSeed {
            samples: p.samples,
            latency_ms: p.latency,
            success_rate: p.success,
            failures: p.failures,
            retryable_failures: p.retryable_failures,
            opens: p.opens,
            circuit,
        })
    }

    /// Pool `id`'s health becomes `seed` (a replay restores what the decision read).
    pub fn seed(&mut self, id: &str, seed: PoolSeed) {
        let slot = self.slot(id);
        let circuit = match seed.circuit {
            None => Circuit::Closed,
            Some((false, until, cooldown_ms, cause)) => Circuit::Open { until, cooldown_ms, cause },
            Some((true, until, cooldown_ms, cause)) => Circuit::Trial { until, cooldown_ms, cause },
        };
        self.set(slot, circuit);
        let p = &mut self.pools[slot];
        p.samples = seed.samples;
        p.latency = seed.latency_ms;
        p.success = seed.success_rate;
        p.failures = seed.failures;
        p.retryable_failures = seed.retryable_failures;
        p.opens = seed.opens;
    }

    /// Observed signals of `slot`, when ranking should use them (opted in, and at least
    /// `min_samples` samples).
    pub fn observed(&self, slot: usize) -> Option<Observed> {
        if !self.config.observed_signals {
            return None;
        }
        let p = self.pools.get(slot)?;
        let n = p.samples as f64;
        let min = f64::from(self.config.min_samples.max(1));
        if n < min {
            return None;
        }
        Some(Observed { ready_latency_ms: p.latency, completion_rate: p.success?, weight: n / (n + min) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const OK: LaunchOutcome = LaunchOutcome::Succeeded { latency_ms: 100.0 };

    fn health() -> (Health, usize) {
        let mut h = Health::new(HealthConfig { cooldown_ms: 1_000, max_cooldown_ms: 3_500, ..HealthConfig::default() });
        let s = h.slot("a");
        (h, s)
    }

    fn fail(h: &mut Health, s: usize, n: u32, outcome: LaunchOutcome) -> Vec<Transition> {
        (0..n).filter_map(|_| h.record(s, outcome, 0, false)).collect()
    }

    #[test]
    fn must_fire_threshold_consecutive_unknown_failures_open_the_circuit() {
        for outcome in [LaunchOutcome::OutcomeUnknown, LaunchOutcome::TimedOut, LaunchOutcome::Malformed] {
            let (mut h, s) = health();
            let t = fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD, outcome);
            assert_eq!(
                t,
                [Transition::Opened { retry_at: 1_000, cooldown_ms: 1_000, cause: Cause::Failures, failures: 5 }],
                "{outcome:?}"
            );
            assert_eq!(h.block(s, 999), Some(Block::Open { retry_at: 1_000, cause: Cause::Failures }));
        }
    }

    #[test]
    fn must_not_fire_one_failure_short_of_the_threshold_or_interrupted_by_a_success() {
        let (mut h, s) = health();
        assert!(fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD - 1, LaunchOutcome::OutcomeUnknown).is_empty());
        assert_eq!(h.block(s, 0), None);
        h.record(s, OK, 0, false);
        assert!(fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD - 1, LaunchOutcome::TimedOut).is_empty());
        assert_eq!(h.state(s, 0), CircuitState::Closed);
    }

    #[test]
    fn must_fire_retryable_failures_open_at_their_own_threshold() {
        let (mut h, s) = health();
        let t = fail(&mut h, s, DEFAULT_RETRYABLE_FAILURE_THRESHOLD, LaunchOutcome::PreAllocation);
        assert!(matches!(t[..], [Transition::Opened { cause: Cause::RetryableFailures, failures: 10, .. }]), "{t:?}");
    }

    #[test]
    fn must_not_fire_retryable_failures_below_their_threshold_do_not_count_toward_the_other() {
        let (mut h, s) = health();
        assert!(fail(&mut h, s, DEFAULT_RETRYABLE_FAILURE_THRESHOLD - 1, LaunchOutcome::PreAllocation).is_empty());
        assert!(fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD - 1, LaunchOutcome::OutcomeUnknown).is_empty());
        assert_eq!(h.state(s, 0), CircuitState::Closed);
    }

    #[test]
    fn must_not_fire_capacity_exhaustion_and_terminal_failures_never_open() {
        let (mut h, s) = health();
        assert!(fail(&mut h, s, 50, LaunchOutcome::CapacityExhausted).is_empty());
        assert_eq!(h.snapshot(Some(s), 0).samples, 0, "capacity exhaustion is not a sample");
        assert!(fail(&mut h, s, 50, LaunchOutcome::Terminal).is_empty());
        assert_eq!(h.state(s, 0), CircuitState::Closed);
        assert_eq!(h.snapshot(Some(s), 0).success_rate, Some(0.0));
    }

    #[test]
    fn must_fire_after_the_cooldown_exactly_one_trial_is_let_through() {
        let (mut h, s) = health();
        fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD, LaunchOutcome::OutcomeUnknown);
        assert_eq!(h.try_launch(s, 999), Err(Block::Open { retry_at: 1_000, cause: Cause::Failures }));
        assert_eq!(h.state(s, 1_000), CircuitState::HalfOpen { trial_in_flight: false, cause: Cause::Failures });
        assert_eq!(h.block(s, 1_000), None, "half-open with the token free: eligible");
        assert_eq!(h.try_launch(s, 1_000), Ok(true));
        assert_eq!(h.try_launch(s, 1_001), Err(Block::TrialInFlight), "a second trial must not start");
        assert_eq!(h.block(s, 1_001), Some(Block::TrialInFlight));
    }

    #[test]
    fn must_fire_a_successful_trial_closes_and_must_not_a_failed_one() {
        let (mut h, s) = health();
        fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD, LaunchOutcome::OutcomeUnknown);
        h.try_launch(s, 1_000).unwrap();
        assert_eq!(h.record(s, OK, 1_100, true), Some(Transition::Closed));
        assert_eq!(h.state(s, 1_100), CircuitState::Closed);
        assert!(!h.any_not_closed());

        let (mut h, s) = health();
        fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD, LaunchOutcome::OutcomeUnknown);
        h.try_launch(s, 1_000).unwrap();
        let t = h.record(s, LaunchOutcome::TimedOut, 1_100, true);
        assert_eq!(
            t,
            Some(Transition::Opened { retry_at: 3_100, cooldown_ms: 2_000, cause: Cause::TrialFailed, failures: 1 })
        );
    }

    #[test]
    fn cooldowns_double_per_failed_trial_up_to_the_bound_and_reset_on_close() {
        let (mut h, s) = health();
        fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD, LaunchOutcome::OutcomeUnknown);
        let mut now = 0;
        let mut seen = Vec::new();
        for _ in 0..4 {
            let CircuitState::Open { retry_at, .. } = h.state(s, now) else { panic!() };
            now = retry_at;
            h.try_launch(s, now).unwrap();
            if let Some(Transition::Opened { cooldown_ms, .. }) = h.record(s, LaunchOutcome::OutcomeUnknown, now, true)
            {
                seen.push(cooldown_ms);
            }
        }
        assert_eq!(seen, [2_000, 3_500, 3_500, 3_500]);
        let CircuitState::Open { retry_at, .. } = h.state(s, now) else { panic!() };
        h.try_launch(s, retry_at).unwrap();
        h.record(s, OK, retry_at, true);
        let t = fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD, LaunchOutcome::OutcomeUnknown);
        assert!(matches!(t[..], [Transition::Opened { cooldown_ms: 1_000, .. }]), "{t:?}");
    }

    #[test]
    fn a_released_trial_frees_the_token_and_a_non_trial_failure_does_not_reopen() {
        let (mut h, s) = health();
        fail(&mut h, s, DEFAULT_FAILURE_THRESHOLD, LaunchOutcome::OutcomeUnknown);
        assert_eq!(h.try_launch(s, 1_000), Ok(true));
        h.release(s);
        assert_eq!(h.try_launch(s, 1_000), Ok(true));
        assert_eq!(h.record(s, LaunchOutcome::OutcomeUnknown, 1_000, false), None);
        assert_eq!(h.block(s, 1_000), Some(Block::TrialInFlight));
    }

    #[test]
    fn statistics_weigh_recent_launches_more_and_p95_follows_the_tail() {
        let (mut h, s) = health();
        for _ in 0..20 {
            h.record(s, LaunchOutcome::Succeeded { latency_ms: 100.0 }, 0, false);
        }
        let before = h.snapshot(Some(s), 0);
        assert_eq!(before.latency_ms, Some(100.0));
        assert_eq!(before.success_rate, Some(1.0));
        assert!((100.0..=120.0).contains(&before.p95_latency_ms.unwrap()), "{before:?}");
        for _ in 0..20 {
            h.record(s, LaunchOutcome::Succeeded { latency_ms: 1_000.0 }, 0, false);
        }
        let after = h.snapshot(Some(s), 0);
        let l = after.latency_ms.unwrap();
        assert!((540.0..=560.0).contains(&l), "one half-life of 1000 ms over 100 ms: {l}");
        assert!((1_000.0..=1_200.0).contains(&after.p95_latency_ms.unwrap()), "{after:?}");
    }

    #[test]
    fn must_fire_observed_signals_from_min_samples_and_must_not_before_or_when_off() {
        let mut h = Health::new(HealthConfig { observed_signals: true, min_samples: 4, ..HealthConfig::default() });
        let s = h.slot("a");
        for _ in 0..3 {
            h.record(s, LaunchOutcome::Succeeded { latency_ms: 200.0 }, 0, false);
        }
        assert_eq!(h.observed(s), None);
        h.record(s, LaunchOutcome::Succeeded { latency_ms: 200.0 }, 0, false);
        let o = h.observed(s).unwrap();
        assert_eq!(o.weight, 0.5);
        assert_eq!(o.blend(1_000.0, o.ready_latency_ms.unwrap()), 600.0);
        let mut off = Health::new(HealthConfig::default());
        let s = off.slot("a");
        for _ in 0..40 {
            off.record(s, OK, 0, false);
        }
        assert_eq!(off.observed(s), None);
    }

    fn outcome() -> impl Strategy<Value = LaunchOutcome> {
        prop_oneof![
            (0.0f64..5_000.0).prop_map(|latency_ms| LaunchOutcome::Succeeded { latency_ms }),
            Just(LaunchOutcome::PreAllocation),
            Just(LaunchOutcome::CapacityExhausted),
            Just(LaunchOutcome::Terminal),
            Just(LaunchOutcome::OutcomeUnknown),
            Just(LaunchOutcome::TimedOut),
            Just(LaunchOutcome::Malformed),
        ]
    }

    /// Replays `steps` (pool, outcome, ms elapsed) the way a router does: each launch asks
    /// `try_launch` first and records only when let through.
    fn replay(steps: &[(usize, LaunchOutcome, u16)]) -> (Vec<Snapshot>, Vec<Transition>) {
        let mut h = Health::new(HealthConfig { cooldown_ms: 500, ..HealthConfig::default() });
        let slots: Vec<usize> = ["a", "b", "c"].iter().map(|id| h.slot(id)).collect();
        let mut now = 0i64;
        let mut transitions = Vec::new();
        for &(pool, outcome, dt) in steps {
            now += i64::from(dt);
            if let Ok(trial) = h.try_launch(slots[pool], now) {
                transitions.extend(h.record(slots[pool], outcome, now, trial));
            }
        }
        (slots.iter().map(|&s| h.snapshot(Some(s), now)).collect(), transitions)
    }

    proptest! {
        #[test]
        fn the_same_outcome_sequence_gives_the_same_states(
            steps in proptest::collection::vec((0usize..3, outcome(), 0u16..400), 0..200)
        ) {
            let first = replay(&steps);
            prop_assert_eq!(&first, &replay(&steps));
            for s in &first.0 {
                if let Some(r) = s.success_rate {
                    prop_assert!((0.0..=1.0).contains(&r));
                }
            }
        }

        #[test]
        fn a_closed_circuit_has_fewer_consecutive_failures_than_the_threshold(
            steps in proptest::collection::vec((0usize..1, outcome(), 0u16..2000), 0..200)
        ) {
            let (snaps, _) = replay(&steps);
            let s = &snaps[0];
            if s.state == CircuitState::Closed {
                prop_assert!(s.consecutive_failures < DEFAULT_FAILURE_THRESHOLD);
                prop_assert!(s.consecutive_retryable_failures < DEFAULT_RETRYABLE_FAILURE_THRESHOLD);
            }
        }
    }

    #[test]
    fn health_option_must_fire_out_of_range_or_unknown_values_name_their_field() {
        let field = |v: serde_json::Value| match config_of_option(&v) {
            Err(crate::core::CoreError::InvalidConfiguration { field, .. }) => field,
            other => panic!("{v}: {other:?}"),
        };
        assert_eq!(field(serde_json::json!("yes")), "health");
        assert_eq!(field(serde_json::Value::Null), "health");
        assert_eq!(field(serde_json::json!({"failureThreshold": 0})), "health.failureThreshold");
        assert_eq!(field(serde_json::json!({"retryableFailureThreshold": 1.5})), "health.retryableFailureThreshold");
        assert_eq!(field(serde_json::json!({"cooldownMs": -1})), "health.cooldownMs");
        assert_eq!(field(serde_json::json!({"cooldownMs": 1000, "maxCooldownMs": 10})), "health.maxCooldownMs");
        assert_eq!(field(serde_json::json!({"halfLife": null})), "health.halfLife");
        assert_eq!(field(serde_json::json!({"observedSignals": 1})), "health.observedSignals");
        assert_eq!(field(serde_json::json!({"nope": 1})), "health.nope");
    }

    #[test]
    fn health_option_must_not_fire_for_the_documented_forms() {
        assert_eq!(config_of_option(&serde_json::json!(false)), Ok(None));
        assert_eq!(config_of_option(&serde_json::json!(true)), Ok(Some(HealthConfig::default())));
        let c = config_of_option(
            &serde_json::json!({"failureThreshold": 1, "cooldownMs": 1, "maxCooldownMs": 1, "observedSignals": true}),
        )
        .unwrap()
        .unwrap();
        assert_eq!((c.failure_threshold, c.cooldown_ms, c.max_cooldown_ms, c.observed_signals), (1, 1, 1, true));
        assert_eq!(c.half_life, DEFAULT_HALF_LIFE);
    }
}
