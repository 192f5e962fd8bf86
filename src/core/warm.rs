//! Warm pools: idle sandboxes kept ready per pool, claimed by provisions in attempt order.
//!
//! Why does a router keep warm pools, and not the adapters? What an agent platform waits
//! for is the provider's cold start (hundreds of milliseconds to seconds), not the router's
//! microseconds. A member is an ordinary sandbox the router launched ahead of demand, so one
//! implementation serves every adapter of the port unchanged, and the rules that make a
//! pool safe are stated once, here:
//!
//! - **Which requests may take a member** ([`incompatibility`], [`WarmPool::floor`]): the
//!   port's `launch` takes a name, an environment and labels, and a member was launched
//!   before the request existed. So a request with a `launch.name` or a non-empty
//!   `launch.env` is not warm-compatible (an empty `env` injects nothing, and is). Labels
//!   are the caller's record (the mapping); the member's provider-side labels stay the stamp
//!   and the warm label, since the port cannot relabel. A request that needs
//!   `requiredSandboxLifetimeMs` takes only a member whose remaining life under the pool's
//!   declared `maxSandboxLifetimeMs` is at least that.
//! - **Which member** ([`WarmPool::claim`]): the oldest claimable one. Members age toward
//!   expiry whether or not they are used; handing out the oldest first means fewer expire
//!   unused, and the floor (one number) is the same rule in memory and in PostgreSQL.
//! - **When a member expires** ([`WarmConfig::expiry_age_ms`]): after `maxIdleMs`, or
//!   earlier when the pool declares a lifetime: a member is never handed out with less than
//!   a quarter of that lifetime (and at least one check interval) left, so a caller never
//!   gets a sandbox about to be killed. An expired member is not claimable the instant it
//!   expires (the claim's floor excludes it), even before the hygiene pass destroys it.
//!   A member beyond the pool's current target ([`WarmPool::take_surplus`]) expires once it
//!   has been idle one check interval: that is how a demand-following pool shrinks.
//! - **How many members to keep** ([`WarmPool::retarget`]): `size`, or with `{ min, max }`
//!   a target that follows demand (Little's law): claims per second × create latency p90 ×
//!   [`SAFETY`], plus a burst allowance of two standard deviations of Poisson arrivals
//!   (`2·√(λ·T)`), between `min` and `max`. It rises at once and falls at most once per
//!   [`DEMAND_FAST_MS`].
//! - **How fast to refill** ([`WarmPool::plan`], [`reserve_count`]): up to the target
//!   (counting launches in flight), with at most the *pace* in flight: the launches that
//!   keep up with demand (claim rate × create latency × [`SAFETY`]), at least
//!   [`PACE_FLOOR`] or half the target, capped by `refill.concurrency` (default: the
//!   target's ceiling) and by the room the pool's last capacity read showed. Across a fleet
//!   the target is fleet-wide and the database grants the launches under one lock.
//!   Demand is what reached the claim step (claims and misses for want of a member): a
//!   request a budget refused never does, so budgets cap the pace and the target too.
//! - **When refilling stops** ([`WarmPool::refill_failed`], [`WarmPool::resume`]): after
//!   `refill.pauseAfterFailures` consecutive refill failures the pool is paused, and an
//!   open circuit stops refills while it is open. A paused pool resumes the moment a launch
//!   on it succeeds again (a provision's cold launch, or a half-open trial that closes its
//!   circuit): the evidence that the pool is healthy again. Refills never probe a failing
//!   pool on their own, so a dead provider costs `pauseAfterFailures` launches, not a
//!   launch every interval forever.
//!
//! The router (`core::router::warm`) turns these rules into work for the caller (destroy
//! this member, list that pool, launch a refill, wake me at t); this module only decides.
//! Times are the router's clock (`clock` option), epoch ms, passed in.

use crate::core::capabilities::Lifetime;
use crate::core::error::{ErrorClass, Failure, Fault};
use crate::core::ids::SandboxKey;
use crate::core::json::{object, FieldError};
use crate::core::request::Request;
use rustc_hash::FxHashMap;
use serde_json::Value;

/// Default `maxIdleMs`: ten minutes.
pub const DEFAULT_MAX_IDLE_MS: u64 = 600_000;
/// Default `checkIntervalMs`: thirty seconds.
pub const DEFAULT_CHECK_INTERVAL_MS: u64 = 30_000;
/// Default `refill.pauseAfterFailures`.
pub const DEFAULT_PAUSE_AFTER_FAILURES: u32 = 3;
/// Largest `size`, `min`, `max` and `refill.concurrency`.
pub const MAX_SIZE: u32 = 1_000;
/// The safety factor of the pace and of a demand-following target: Little's law gives the
/// members in flight (claim rate × create time); half as many again covers a create that
/// takes longer than its p90 and a demand estimate that lags a rise.
pub const SAFETY: f64 = 1.5;
/// The fewest refill launches a pool may have in flight while below its target (or half
/// the target, when larger): an empty pool fills in about two create times.
pub const PACE_FLOOR: u32 = 2;
/// Time constant of the fast demand estimate, ms: how quickly a rise is seen.
pub const DEMAND_FAST_MS: f64 = 5_000.0;
/// Time constant of the slow demand estimate, ms: how slowly a fall is believed.
pub const DEMAND_SLOW_MS: f64 = 30_000.0;
/// A demand below this many claims per second counts as none.
pub const MIN_DEMAND_PER_S: f64 = 0.01;
/// Create latencies kept per pool; the p90 is read from them.
const LATENCY_SAMPLES: usize = 32;
/// The sandbox lifetime of `@agent-relay/sandbox`'s `E2BSandboxRuntime`: it creates every
/// sandbox with `timeoutMs: createTimeoutMs`, default 120 s (`DEFAULT_CREATE_TIMEOUT_MS` in
/// its `src/e2b/runtime.ts`, which the package does not export: this is the one copy).
pub const E2B_CREATE_TIMEOUT_MS: f64 = 120_000.0;

/// The keys of a pool's `warm` option.
pub const WARM_OPTIONS: [&str; 6] = ["size", "min", "max", "maxIdleMs", "checkIntervalMs", "refill"];
/// The keys of `warm.refill`.
pub const REFILL_OPTIONS: [&str; 2] = ["concurrency", "pauseAfterFailures"];

/// How many idle members a pool keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizing {
    /// `size`: a fixed target.
    Fixed(u32),
    /// `{ min, max }`: a target that follows demand between the two.
    Demand {
        /// The fewest idle members (the target never falls below it).
        min: u32,
        /// The most members, idle and launching (never launched beyond).
        max: u32,
    },
}

impl Sizing {
    /// The largest target it allows (`size`, or `max`).
    pub fn ceiling(self) -> u32 {
        match self {
            Sizing::Fixed(n) => n,
            Sizing::Demand { max, .. } => max,
        }
    }

    /// The smallest target it allows (`size`, or `min`).
    pub fn bottom(self) -> u32 {
        match self {
            Sizing::Fixed(n) => n,
            Sizing::Demand { min, .. } => min,
        }
    }
}

/// A pool's `warm` option, validated, with its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmConfig {
    /// `size` (0 to [`MAX_SIZE`]), or `min` and `max`: one of the two is required.
    pub sizing: Sizing,
    /// A member idle this long is destroyed and replaced, ms (1,000 to 86,400,000).
    pub max_idle_ms: u64,
    /// How often idle members are checked at the provider, ms (100 to 3,600,000).
    pub check_interval_ms: u64,
    /// The most refill launches in flight at once, per process (1 to [`MAX_SIZE`]; default:
    /// `size`, or `max`).
    pub refill_concurrency: u32,
    /// Consecutive refill failures that pause the pool (1 to 1,000).
    pub pause_after_failures: u32,
}

/// Validates a factory provider's `warm` option (JSON text) at `field`
/// (`providers.local.warm`) by the one rule: `INVALID_CONFIGURATION` naming the key
/// (`providers.local.warm.size`).
pub fn check_option(option_json: &str, field: &str) -> Result<(), Failure> {
    let bad = |e: FieldError| {
        Fault::invalid(
            ErrorClass::Configuration,
            "INVALID_CONFIGURATION",
            format!("invalid configuration: {} {}", e.field, e.expectation),
            e.field,
        )
    };
    let v = serde_json::from_str(option_json).map_err(|_| bad(FieldError::new(field, "must be an object")))?;
    WarmConfig::read(&v, field).map(drop).map_err(bad)
}

impl WarmConfig {
    /// Reads a pool's `warm` option at `path` (e.g. `warm`), strictly: unknown keys,
    /// wrong types and out-of-range values are errors naming the field.
    pub fn read(value: &Value, path: &str) -> Result<WarmConfig, FieldError> {
        let o = object(value, path, &WARM_OPTIONS)?;
        let max_size = i64::from(MAX_SIZE);
        let size = o.integer_in("size", 0, max_size)?;
        let min = o.integer_in("min", 0, max_size)?;
        let max = o.integer_in("max", 0, max_size)?;
        let err = |key: &str, what: &str| Err(FieldError::new(o.field(key), what));
        let sizing = match (size, min, max) {
            (Some(_), Some(_), _) => return err("min", "cannot be combined with size: give size, or min and max"),
            (Some(_), None, Some(_)) => return err("max", "cannot be combined with size: give size, or min and max"),
            (Some(n), None, None) => Sizing::Fixed(n as u32),
            (None, Some(a), Some(b)) if a > b => return err("min", "must be at most max"),
            (None, Some(a), Some(b)) => Sizing::Demand { min: a as u32, max: b as u32 },
            (None, Some(_), None) => {
                return err("max", &format!("is required with min: the most members to keep (0 to {MAX_SIZE})"))
            }
            (None, None, Some(_)) => {
                return err("min", &format!("is required with max: the fewest idle members to keep (0 to {MAX_SIZE})"))
            }
            (None, None, None) => {
                return err(
                    "size",
                    &format!(
                        "is required: the number of idle members to keep (0 to {MAX_SIZE}), or min and max to follow demand"
                    ),
                )
            }
        };
        let max_idle_ms = o.integer_in("maxIdleMs", 1_000, 86_400_000)?.map_or(DEFAULT_MAX_IDLE_MS, |v| v as u64);
        let check_interval_ms =
            o.integer_in("checkIntervalMs", 100, 3_600_000)?.map_or(DEFAULT_CHECK_INTERVAL_MS, |v| v as u64);
        let (mut refill_concurrency, mut pause_after_failures) =
            (sizing.ceiling().max(1), DEFAULT_PAUSE_AFTER_FAILURES);
        if let Some(r) = o.object("refill", &REFILL_OPTIONS)? {
            refill_concurrency = r.integer_in("concurrency", 1, max_size)?.map_or(refill_concurrency, |v| v as u32);
            pause_after_failures =
                r.integer_in("pauseAfterFailures", 1, 1_000)?.map_or(pause_after_failures, |v| v as u32);
        }
        Ok(WarmConfig { sizing, max_idle_ms, check_interval_ms, refill_concurrency, pause_after_failures })
    }

    /// Checks the option against the pool's declared lifetime: a pool whose sandboxes live
    /// too briefly to leave any idle time (see [`WarmConfig::expiry_age_ms`]) is refused,
    /// naming `path.maxIdleMs`.
    pub fn check_lifetime(&self, lifetime: Lifetime, path: &str) -> Result<(), FieldError> {
        match self.expiry_age_ms(lifetime) {
            Some(_) => Ok(()),
            None => Err(FieldError::new(
                format!("{path}.maxIdleMs"),
                "leaves no idle time: the pool's capabilities.timeout.maxSandboxLifetimeMs must exceed a quarter of itself and warm.checkIntervalMs",
            )),
        }
    }

    /// The age at which an idle member expires, ms: `maxIdleMs`, or, for a pool that
    /// declares a lifetime `L`, at most `L − max(L/4, checkIntervalMs)` (a member always has
    /// that much life left when it is handed out). `None`: the lifetime leaves no idle time.
    pub fn expiry_age_ms(&self, lifetime: Lifetime) -> Option<u64> {
        match lifetime {
            Lifetime::Capped(l) => {
                let l = l.max(0.0).min(u64::MAX as f64 / 2.0) as u64;
                let margin = (l / 4).max(self.check_interval_ms);
                (l > margin).then(|| self.max_idle_ms.min(l - margin))
            }
            Lifetime::Unbounded | Lifetime::Unknown => Some(self.max_idle_ms),
        }
    }
}

/// The sandbox lifetime a factory pool of `provider` declares (`maxSandboxLifetimeMs`),
/// when its caller declares none: the adapter's own, from the entry's adapter options
/// (`createTimeoutMs` for E2B) or the adapter's default. `None`: the caller declared one
/// (`declared`, kept as it is), or the adapter kills no sandbox on a timer of its own.
pub fn factory_lifetime_ms(provider: &str, create_timeout_ms: Option<f64>, declared: bool) -> Option<f64> {
    if declared {
        return None;
    }
    match provider {
        "e2b" => Some(create_timeout_ms.filter(|t| t.is_finite() && *t > 0.0).unwrap_or(E2B_CREATE_TIMEOUT_MS)),
        _ => None,
    }
}

/// Why a provision did not claim a member of a pool (`warm.miss`'s `reason`; the status
/// counts them as `empty`, `paused` and `incompatible`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MissReason {
    /// No claimable member.
    Empty,
    /// No claimable member, and refills are paused.
    Paused,
    /// The request has a non-empty `launch.env`.
    LaunchEnv,
    /// The request has a `launch.name`.
    LaunchName,
    /// The request's `requiredSandboxLifetimeMs` is more than any member has left.
    Lifetime,
}

impl MissReason {
    /// The documented code.
    pub fn code(self) -> &'static str {
        match self {
            MissReason::Empty => "EMPTY",
            MissReason::Paused => "PAUSED",
            MissReason::LaunchEnv => "LAUNCH_ENV",
            MissReason::LaunchName => "LAUNCH_NAME",
            MissReason::Lifetime => "LIFETIME",
        }
    }

    /// Whether the request (not the pool's inventory) caused the miss.
    pub fn incompatible(self) -> bool {
        matches!(self, MissReason::LaunchEnv | MissReason::LaunchName | MissReason::Lifetime)
    }
}

/// Whether a request can take any warm member: `None`, or why not (env first, then name).
pub fn incompatibility(req: &Request) -> Option<MissReason> {
    if req.launch_env {
        Some(MissReason::LaunchEnv)
    } else if req.launch_name {
        Some(MissReason::LaunchName)
    } else {
        None
    }
}

/// One idle member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its router id (stamped on it when it was launched).
    pub id: SandboxKey,
    /// The provider's id of it.
    pub provider_sandbox_id: String,
    /// When it became idle (its launch succeeded), router-clock epoch ms.
    pub launched_at: i64,
}

/// How a warm pool stands, for `warmUp()`'s report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Its target's members are idle.
    Ready,
    /// Refills are running or about to run.
    Filling,
    /// Refills are paused after consecutive failures.
    Paused,
    /// The pool's circuit is open: no refill until it closes.
    CircuitOpen,
    /// Under capacity routing the pool is not in `providerOrder`: never a candidate, so
    /// never refilled.
    NotRoutable,
    /// The pool's last capacity read left no room for another member.
    AtCapacity,
}

impl Standing {
    /// The documented code (`null` for ready and filling, which are not reasons).
    pub fn reason(self) -> Option<&'static str> {
        match self {
            Standing::Ready | Standing::Filling => None,
            Standing::Paused => Some("PAUSED"),
            Standing::CircuitOpen => Some("CIRCUIT_OPEN"),
            Standing::NotRoutable => Some("NOT_IN_PROVIDER_ORDER"),
            Standing::AtCapacity => Some("AT_CAPACITY"),
        }
    }
}

/// Why a pool's target is what it is (`warmStatus().targetReason`, `warm.target.changed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetReason {
    /// `size`: fixed.
    Size,
    /// Demand × latency is at or below `min`.
    Min,
    /// Following demand between `min` and `max`.
    Demand,
    /// Demand × latency reaches `max`.
    Max,
}

impl TargetReason {
    /// The documented code.
    pub fn code(self) -> &'static str {
        match self {
            TargetReason::Size => "SIZE",
            TargetReason::Min => "MIN",
            TargetReason::Demand => "DEMAND",
            TargetReason::Max => "MAX",
        }
    }
}

/// A pool's counters since its warm pool started (this process's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WarmStats {
    /// Members handed to provisions.
    pub claims: u64,
    /// Misses with no claimable member.
    pub empty: u64,
    /// Misses with no claimable member while paused.
    pub paused: u64,
    /// Misses of requests that could not take a member.
    pub incompatible: u64,
    /// Members launched (refills that succeeded).
    pub launched: u64,
    /// Refills that failed.
    pub refill_failures: u64,
    /// Members destroyed for their age, or beyond the target.
    pub expired: u64,
    /// Members found gone at the provider, dropped.
    pub lost: u64,
    /// The code of the last refill failure.
    pub last_failure: Option<String>,
}

/// Claims per second, as two exponentially decayed rates (time constants
/// [`DEMAND_FAST_MS`] and [`DEMAND_SLOW_MS`]); the estimate is the larger: a rise is seen
/// within seconds, a fall believed only over half a minute. Two numbers per pool, whatever
/// the traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DemandRate {
    fast: f64,
    slow: f64,
    at: Option<i64>,
}

impl DemandRate {
    fn decayed(&self, now: i64) -> (f64, f64) {
        let dt = self.at.map_or(0.0, |t| now.saturating_sub(t).max(0) as f64);
        (self.fast * (-dt / DEMAND_FAST_MS).exp(), self.slow * (-dt / DEMAND_SLOW_MS).exp())
    }

    /// One unit of demand (a claim, or a miss for want of a member) at `now`.
    pub fn observe(&mut self, now: i64) {
        let (fast, slow) = self.decayed(now);
        self.fast = fast + 1_000.0 / DEMAND_FAST_MS;
        self.slow = slow + 1_000.0 / DEMAND_SLOW_MS;
        self.at = Some(self.at.map_or(now, |t| t.max(now)));
    }

    /// Claims per second at `now` (0 below [`MIN_DEMAND_PER_S`]).
    pub fn per_second(&self, now: i64) -> f64 {
        let (fast, slow) = self.decayed(now);
        let r = fast.max(slow);
        if r < MIN_DEMAND_PER_S {
            0.0
        } else {
            r
        }
    }
}

/// The last [`LATENCY_SAMPLES`] create latencies of a pool's refills, ms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateLatency {
    samples: Vec<f64>,
    next: usize,
}

impl CreateLatency {
    /// Records one refill's launch-to-member time.
    pub fn record(&mut self, ms: f64) {
        if !ms.is_finite() || ms < 0.0 {
            return;
        }
        if self.samples.len() < LATENCY_SAMPLES {
            self.samples.push(ms);
        } else {
            self.samples[self.next] = ms;
        }
        self.next = (self.next + 1) % LATENCY_SAMPLES;
    }

    /// The 90th percentile of the kept samples (nearest rank); None before the first.
    pub fn p90(&self) -> Option<f64> {
        if self.samples.is_empty() {
            return None;
        }
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        let rank = ((s.len() as f64) * 0.9).ceil() as usize;
        Some(s[rank.clamp(1, s.len()) - 1])
    }
}

/// One pool's warm inventory and refill state, in this process.
#[derive(Debug, Clone)]
pub struct WarmPool {
    config: WarmConfig,
    lifetime: Lifetime,
    /// The pool's declared `coldStartLatencyMs`: the create latency before any is seen.
    prior_ms: Option<f64>,
    /// Idle members, oldest first.
    idle: Vec<Member>,
    launching: u32,
    /// Refill jobs of this pool in flight (until each has ended, record written or not).
    jobs: u32,
    failures: u32,
    /// Paused: the number of launch successes seen when it paused.
    paused: Option<u64>,
    successes: u64,
    last_check: Option<i64>,
    stats: WarmStats,
    demand: DemandRate,
    latency: CreateLatency,
    target: u32,
    target_reason: TargetReason,
    target_at: i64,
    /// The launches the demand needs in flight (Little's law), as last computed.
    needed: u32,
    /// Room for members the pool's last capacity read showed, and when.
    room: Option<(u32, i64)>,
    /// The fleet's counts of this pool (idle, launching), as the last pass read them, and when.
    fleet: Option<(u64, u64, i64)>,
}

/// The fleet-wide rule for refills: how many of `want` launches to grant when `idle`
/// members are idle and `launching` launches are in flight, every process's, toward a
/// target of `size`. Never beyond the target.
pub fn reserve_count(size: u32, idle: u64, launching: u64, want: u32) -> u32 {
    let have = idle.saturating_add(launching);
    let missing = u64::from(size).saturating_sub(have);
    missing.min(u64::from(want)) as u32
}

impl WarmPool {
    /// An empty pool under `config`, whose sandboxes live at most `lifetime`.
    pub fn new(config: WarmConfig, lifetime: Lifetime) -> Self {
        let (target, target_reason) = match config.sizing {
            Sizing::Fixed(n) => (n, TargetReason::Size),
            Sizing::Demand { min, .. } => (min, TargetReason::Min),
        };
        WarmPool {
            config,
            lifetime,
            prior_ms: None,
            idle: Vec::new(),
            launching: 0,
            jobs: 0,
            failures: 0,
            paused: None,
            successes: 0,
            last_check: None,
            stats: WarmStats::default(),
            demand: DemandRate::default(),
            latency: CreateLatency::default(),
            target,
            target_reason,
            target_at: i64::MIN,
            needed: 0,
            room: None,
            fleet: None,
        }
    }

    /// Takes a (possibly changed) declaration: a caller's registry may change between calls.
    pub fn configure(&mut self, config: WarmConfig, lifetime: Lifetime) {
        if config.sizing != self.config.sizing {
            let (target, reason) = match config.sizing {
                Sizing::Fixed(n) => (n, TargetReason::Size),
                Sizing::Demand { min, .. } if self.target <= min => (min, TargetReason::Min),
                Sizing::Demand { max, .. } if self.target >= max => (max, TargetReason::Max),
                Sizing::Demand { .. } => (self.target, TargetReason::Demand),
            };
            self.target = target;
            self.target_reason = reason;
        }
        self.config = config;
        self.lifetime = lifetime;
    }

    /// The create latency assumed before a refill of this pool was timed (its declared
    /// `coldStartLatencyMs`).
    pub fn set_prior(&mut self, ms: Option<f64>) {
        self.prior_ms = ms.filter(|m| m.is_finite() && *m >= 0.0);
    }

    /// The option it runs under.
    pub fn config(&self) -> &WarmConfig {
        &self.config
    }

    /// The expiry age (the declaration was checked at registration; an impossible one
    /// expires everything).
    fn expiry_age(&self) -> i64 {
        self.config.expiry_age_ms(self.lifetime).map_or(0, |a| a.min(i64::MAX as u64) as i64)
    }

    /// Members launched at or after this instant have not expired at `now`.
    pub fn expiry_floor(&self, now: i64) -> i64 {
        now.saturating_sub(self.expiry_age()).saturating_add(1)
    }

    /// The earliest launch instant a member may have for `req` to claim it at `now`: not
    /// expired, and (with `requiredSandboxLifetimeMs`) with that much life left. Or why the
    /// request can take no member at all.
    pub fn floor(&self, now: i64, req: &Request) -> Result<i64, MissReason> {
        if let Some(r) = incompatibility(req) {
            return Err(r);
        }
        let floor = self.expiry_floor(now);
        let Some(required) = req.required_lifetime_ms else { return Ok(floor) };
        match self.lifetime {
            Lifetime::Unbounded => Ok(floor),
            Lifetime::Unknown => Err(MissReason::Lifetime),
            Lifetime::Capped(l) if required > l => Err(MissReason::Lifetime),
            // remaining = l − (now − launched) ≥ required ⇔ launched ≥ now − (l − required)
            Lifetime::Capped(l) => Ok(floor.max(now.saturating_sub((l - required).floor() as i64))),
        }
    }

    /// Claims the oldest member `req` may take at `now` (counted), or the miss (counted).
    pub fn claim(&mut self, now: i64, req: &Request) -> Result<Member, MissReason> {
        let found =
            self.floor(now, req).and_then(|floor| match self.idle.iter().position(|m| m.launched_at >= floor) {
                Some(i) => Ok(self.idle.remove(i)),
                None => Err(self.empty_reason(now)),
            });
        match &found {
            Ok(_) => self.claimed(),
            Err(r) => self.missed(*r),
        }
        found
    }

    /// Whether `req` would claim a member at `now` (nothing changes): `Ok(())` or the miss.
    pub fn would_claim(&self, now: i64, req: &Request) -> Result<(), MissReason> {
        let floor = self.floor(now, req)?;
        if self.idle.iter().any(|m| m.launched_at >= floor) {
            Ok(())
        } else {
            Err(self.empty_reason(now))
        }
    }

    /// Why no member fits although the request is compatible: unexpired members that are
    /// too old for its lifetime, or none at all (paused or not).
    fn empty_reason(&self, now: i64) -> MissReason {
        let floor = self.expiry_floor(now);
        if self.idle.iter().any(|m| m.launched_at >= floor) {
            MissReason::Lifetime
        } else if self.paused.is_some() {
            MissReason::Paused
        } else {
            MissReason::Empty
        }
    }

    /// Counts a claim made elsewhere (the fleet's inventory in PostgreSQL).
    pub fn claimed(&mut self) {
        self.stats.claims += 1;
    }

    /// Counts a miss.
    pub fn missed(&mut self, reason: MissReason) {
        match reason {
            MissReason::Empty => self.stats.empty += 1,
            MissReason::Paused => self.stats.paused += 1,
            _ => self.stats.incompatible += 1,
        }
    }

    /// One unit of demand at `now`: a claim, or a miss for want of a member (an
    /// incompatible request is no demand for members).
    pub fn demand_seen(&mut self, now: i64) {
        self.demand.observe(now);
    }

    /// Whether a claim or a miss here may make a refill due, so that warm work is worth a
    /// poll now: the pool may want more members than it holds and is making (its size, or
    /// the most a `{ min, max }` pool's demand can raise its target to). A pool that cannot
    /// grow (`size: 0`, or every member held or in flight) waits for its timer instead.
    pub fn may_grow(&self) -> bool {
        u64::from(self.config.sizing.ceiling()) > self.idle.len() as u64 + u64::from(self.launching)
    }

    /// The miss reason of an empty fleet inventory (paused or not).
    pub fn empty(&self) -> MissReason {
        if self.paused.is_some() {
            MissReason::Paused
        } else {
            MissReason::Empty
        }
    }

    /// Removes and returns the members that have expired at `now` (counted).
    pub fn take_expired(&mut self, now: i64) -> Vec<Member> {
        let floor = self.expiry_floor(now);
        if self.idle.first().is_none_or(|m| m.launched_at >= floor) {
            return Vec::new();
        }
        let (expired, kept): (Vec<Member>, Vec<Member>) =
            std::mem::take(&mut self.idle).into_iter().partition(|m| m.launched_at < floor);
        self.idle = kept;
        self.stats.expired += expired.len() as u64;
        expired
    }

    /// Removes and returns the members beyond the current target that have been idle at
    /// least one check interval at `now`, oldest first (counted as expired): a pool whose
    /// target fell shrinks to it, never below it.
    pub fn take_surplus(&mut self, now: i64) -> Vec<Member> {
        let surplus = self.idle.len().saturating_sub(self.target as usize);
        let settled = now.saturating_sub(self.config.check_interval_ms as i64);
        let n = self.idle.iter().take(surplus).take_while(|m| m.launched_at <= settled).count();
        self.stats.expired += n as u64;
        self.idle.drain(..n).collect()
    }

    /// Counts members expired elsewhere (taken from the fleet's inventory).
    pub fn expired_elsewhere(&mut self, n: u64) {
        self.stats.expired += n;
    }

    /// The target at `now`, recomputed from demand (a `{ min, max }` pool): it rises at once
    /// and falls at most once per [`DEMAND_FAST_MS`]. Also recomputes the pace. Some((the
    /// previous target, the new one)) when it moved.
    pub fn retarget(&mut self, now: i64) -> Option<(u32, u32)> {
        let rate = self.demand.per_second(now);
        let latency_s = self.latency.p90().or(self.prior_ms).map(|ms| ms / 1_000.0);
        // Little's law: the members a demand of `rate` keeps in flight.
        let in_flight = latency_s.map_or(0.0, |t| rate * t);
        self.needed = (in_flight * SAFETY).ceil().min(f64::from(MAX_SIZE)) as u32;
        let Sizing::Demand { min, max } = self.config.sizing else {
            self.target = self.config.sizing.ceiling();
            self.target_reason = TargetReason::Size;
            return None;
        };
        let want = (in_flight * SAFETY + 2.0 * in_flight.sqrt()).ceil().min(f64::from(MAX_SIZE)) as u32;
        let (next, reason) = if want <= min {
            (min, TargetReason::Min)
        } else if want >= max {
            (max, TargetReason::Max)
        } else {
            (want, TargetReason::Demand)
        };
        let previous = self.target;
        let falls_too_soon = next < previous && (now.saturating_sub(self.target_at) as f64) < DEMAND_FAST_MS;
        if next == previous || falls_too_soon {
            if next == previous {
                self.target_reason = reason;
            }
            return None;
        }
        self.target = next;
        self.target_reason = reason;
        self.target_at = now;
        Some((previous, next))
    }

    /// The current target: idle members to keep.
    pub fn target(&self) -> u32 {
        self.target
    }

    /// Whether the pool holds fewer idle and launching members than its target.
    pub fn wants_more(&self) -> bool {
        (self.idle.len() as u64).saturating_add(u64::from(self.launching)) < u64::from(self.target)
    }

    /// Why the target is what it is.
    pub fn target_reason(&self) -> TargetReason {
        self.target_reason
    }

    /// Claims per second at `now` (the demand estimate).
    pub fn demand_per_second(&self, now: i64) -> f64 {
        self.demand.per_second(now)
    }

    /// The create latency the pace and target use, ms (the refills' p90, else the pool's
    /// declared `coldStartLatencyMs`); None when neither is known.
    pub fn create_latency_ms(&self) -> Option<f64> {
        self.latency.p90().or(self.prior_ms)
    }

    /// The pool's last capacity read at `now` left room for `room` more sandboxes.
    pub fn capacity_read(&mut self, room: u32, now: i64) {
        self.room = Some((room, now));
    }

    /// The room the last capacity read showed, while it is fresh (one check interval).
    fn room_at(&self, now: i64) -> Option<u32> {
        self.room.filter(|(_, at)| now.saturating_sub(*at) < self.config.check_interval_ms as i64).map(|(r, _)| r)
    }

    /// The rate limit's cap on refill launches in flight (the fleet rate-limit issue plugs
    /// in here); None: no limit.
    fn rate_limit_cap(&self) -> Option<u32> {
        None
    }

    /// The most refill launches to have in flight (the pace): what the observed demand
    /// needs (Little's law × [`SAFETY`], recomputed by [`WarmPool::retarget`]), at least
    /// [`PACE_FLOOR`] or half the target, at most `refill.concurrency`, the rate limit and
    /// (with `now`) the room the pool's last capacity read showed, while it is fresh.
    pub fn pace(&self, now: Option<i64>) -> u32 {
        let floor = PACE_FLOOR.max(self.target.div_ceil(2));
        let mut cap = self.config.refill_concurrency;
        if let Some(room) = now.and_then(|n| self.room_at(n)) {
            cap = cap.min(room);
        }
        if let Some(limit) = self.rate_limit_cap() {
            cap = cap.min(limit);
        }
        self.needed.max(floor).min(cap)
    }

    /// The launches the observed demand needs in flight (before the floor and the caps).
    pub fn needed(&self) -> u32 {
        self.needed
    }

    /// Refill launches this process may start now: none while paused or while the pool's
    /// circuit is not closed, else up to the pace in flight.
    pub fn wanted(&self, circuit_closed: bool) -> u32 {
        self.wanted_at(circuit_closed, None)
    }

    /// [`WarmPool::wanted`], capped by the room a capacity read fresh at `now` showed.
    pub fn wanted_at(&self, circuit_closed: bool, now: Option<i64>) -> u32 {
        if self.paused.is_some() || !circuit_closed {
            return 0;
        }
        self.pace(now).saturating_sub(self.launching)
    }

    /// Refill launches to start now from this process's own inventory (counted as in
    /// flight): the wanted ones, up to the target.
    pub fn plan(&mut self, circuit_closed: bool) -> u32 {
        self.plan_at(circuit_closed, None)
    }

    /// [`WarmPool::plan`], capped by the room a capacity read fresh at `now` showed.
    pub fn plan_at(&mut self, circuit_closed: bool, now: Option<i64>) -> u32 {
        self.plan_within(circuit_closed, now, u32::MAX)
    }

    /// [`WarmPool::plan_at`], at most `tokens` (the pool's launch tokens now: `core::pacing`).
    pub fn plan_within(&mut self, circuit_closed: bool, now: Option<i64>, tokens: u32) -> u32 {
        let want = self.wanted_at(circuit_closed, now).min(tokens);
        let n = reserve_count(self.target, self.idle.len() as u64, u64::from(self.launching), want);
        self.launching += n;
        n
    }

    /// `n` refill launches started (granted by the fleet's database).
    pub fn started(&mut self, n: u32) {
        self.launching = self.launching.saturating_add(n);
    }

    /// A refill counted in flight will not be made after all.
    pub fn refill_cancelled(&mut self) {
        self.launching = self.launching.saturating_sub(1);
    }

    /// A refill job of this pool began.
    pub fn job_began(&mut self) {
        self.jobs += 1;
    }

    /// A refill job of this pool ended.
    pub fn job_ended(&mut self) {
        self.jobs = self.jobs.saturating_sub(1);
    }

    /// Refill jobs of this pool in flight.
    pub fn jobs(&self) -> u32 {
        self.jobs
    }

    /// A refill launch succeeded; `member` joins the idle members (None: it
    /// lives in the fleet's database, or its record is written next).
    pub fn refill_succeeded(&mut self, member: Option<Member>) {
        self.launching = self.launching.saturating_sub(1);
        self.failures = 0;
        self.successes += 1;
        self.stats.launched += 1;
        if let Some(m) = member {
            self.insert(m);
        }
    }

    /// A refill's launch-to-member time, for the pace and the target.
    pub fn create_observed(&mut self, took_ms: f64) {
        self.latency.record(took_ms);
    }

    /// A refill failed with `code` (the launch, its admission, or its record). True when
    /// this failure paused the pool (`refill.pauseAfterFailures` in a row).
    pub fn refill_failed(&mut self, code: &str) -> bool {
        self.launching = self.launching.saturating_sub(1);
        self.failures += 1;
        self.stats.refill_failures += 1;
        self.stats.last_failure = Some(code.to_string());
        if self.paused.is_none() && self.failures >= self.config.pause_after_failures {
            self.paused = Some(self.successes);
            true
        } else {
            false
        }
    }

    /// A launch on this pool (a provision's) succeeded.
    pub fn launch_succeeded(&mut self) {
        self.successes += 1;
    }

    /// Resumes a paused pool once a launch on it succeeded after the pause. True when it
    /// resumed now.
    pub fn resume(&mut self) -> bool {
        match self.paused {
            Some(at) if self.successes > at => {
                self.paused = None;
                self.failures = 0;
                true
            }
            _ => false,
        }
    }

    /// Whether refills are paused.
    pub fn is_paused(&self) -> bool {
        self.paused.is_some()
    }

    /// Adds an idle member (a refill's, or one adopted from the store), oldest first; a
    /// member already here is not added twice.
    pub fn insert(&mut self, m: Member) {
        if self.idle.iter().any(|x| x.id == m.id) {
            return;
        }
        let at = self.idle.partition_point(|x| x.launched_at <= m.launched_at);
        self.idle.insert(at, m);
    }

    /// Removes an idle member (destroyed, reclaimed); None when it is not idle here (a
    /// provision claimed it meanwhile).
    pub fn remove(&mut self, id: SandboxKey) -> Option<Member> {
        let i = self.idle.iter().position(|m| m.id == id)?;
        Some(self.idle.remove(i))
    }

    /// A member found gone at the provider: dropped (counted) if it is still idle here.
    pub fn lost(&mut self, id: SandboxKey) -> Option<Member> {
        let m = self.remove(id)?;
        self.stats.lost += 1;
        Some(m)
    }

    /// Counts a member found gone elsewhere (at a claim, or in the fleet's inventory).
    pub fn lost_elsewhere(&mut self) {
        self.stats.lost += 1;
    }

    /// Every idle member, oldest first.
    pub fn idle(&self) -> &[Member] {
        &self.idle
    }

    /// Takes every idle member out (`close()`).
    pub fn drain(&mut self) -> Vec<Member> {
        std::mem::take(&mut self.idle)
    }

    /// Refill launches in flight from this process.
    pub fn launching(&self) -> u32 {
        self.launching
    }

    /// Whether its idle members are due a check at `now` (every `checkIntervalMs`; the
    /// first call starts the interval).
    pub fn check_due(&mut self, now: i64) -> bool {
        match self.last_check {
            None => {
                self.last_check = Some(now);
                false
            }
            Some(t) if now.saturating_sub(t) >= self.config.check_interval_ms as i64 => {
                self.last_check = Some(now);
                true
            }
            Some(_) => false,
        }
    }

    /// When work of this process's inventory falls due next (a check, an expiry, a surplus
    /// member's), router-clock ms; None when nothing is scheduled.
    pub fn next_due(&self) -> Option<i64> {
        let interval = self.config.check_interval_ms as i64;
        let check = self.last_check.filter(|_| !self.idle.is_empty()).map(|t| t.saturating_add(interval));
        let expiry = self.idle.first().map(|m| m.launched_at.saturating_add(self.expiry_age()));
        let surplus =
            (self.idle.len() > self.target as usize).then(|| self.idle[0].launched_at.saturating_add(interval));
        [check, expiry, surplus].into_iter().flatten().min()
    }

    /// When a demand-following target should be looked at again (its demand decays), or
    /// None (a fixed target, or one at `min`).
    pub fn next_retarget(&self, now: i64) -> Option<i64> {
        match self.config.sizing {
            Sizing::Demand { min, .. } if self.target > min => Some(now.saturating_add(DEMAND_FAST_MS as i64)),
            _ => None,
        }
    }

    /// The fleet's counts of this pool, read by a pass at `at`.
    pub fn fleet_counted(&mut self, idle: u64, launching: u64, at: i64) {
        self.fleet = Some((idle, launching, at));
    }

    /// The fleet's idle members as last counted, if counted at or after `since`.
    pub fn fleet_idle_since(&self, since: i64) -> Option<u64> {
        self.fleet.filter(|(_, _, at)| *at >= since).map(|(idle, _, _)| idle)
    }

    /// How it stands with `idle` members (this process's, or the fleet's).
    pub fn standing(&self, idle: u64, circuit_closed: bool, routable: bool) -> Standing {
        if idle >= u64::from(self.target) {
            Standing::Ready
        } else if !routable {
            Standing::NotRoutable
        } else if self.paused.is_some() {
            Standing::Paused
        } else if !circuit_closed {
            Standing::CircuitOpen
        } else {
            Standing::Filling
        }
    }

    /// [`WarmPool::standing`] at `now`, also saying when the last capacity read left no room.
    pub fn standing_at(&self, idle: u64, circuit_closed: bool, routable: bool, now: i64) -> Standing {
        match self.standing(idle, circuit_closed, routable) {
            Standing::Filling if self.room_at(now) == Some(0) && self.launching == 0 => Standing::AtCapacity,
            s => s,
        }
    }

    /// Its counters.
    pub fn stats(&self) -> &WarmStats {
        &self.stats
    }
}

/// Whether a pool may be refilled under the router's capacity policy: a capacity-routed
/// router never selects a pool outside `providerOrder`, so a member there could never be
/// claimed.
pub fn routable(provider_order: Option<&[String]>, pool_id: &str) -> bool {
    provider_order.is_none_or(|o| o.iter().any(|p| p == pool_id))
}

/// The room a capacity measurement leaves for more sandboxes: the fewest whole `required`
/// steps any resource's headroom holds.
pub fn room_of(resources: &[crate::core::capacity::ResourceMeasurement]) -> Option<u32> {
    resources
        .iter()
        .filter(|r| r.required > 0.0)
        .map(|r| (r.headroom / r.required).floor().clamp(0.0, f64::from(MAX_SIZE)) as u32)
        .min()
}

/// The warm pools of one router, by pool id, once `warmUp()` started them.
#[derive(Debug, Clone, Default)]
pub struct Warm {
    pools: FxHashMap<String, WarmPool>,
    /// The inventory is the fleet's, in PostgreSQL (`capacity.coordinator`): members are
    /// not held here, only this process's counters and refills.
    pub shared: bool,
    /// `close()` ran: nothing is claimed or refilled any more.
    pub closed: bool,
    /// `close({ keepWarm: true })`: idle members stay recorded for the next process.
    pub keep_warm: bool,
    /// Members whose live handle this process holds (it launched or re-resolved them), with
    /// their pools.
    held: FxHashMap<SandboxKey, String>,
    /// Warm work may be due (a claim, a miss, a launch success): the caller polls soon.
    pub kick: bool,
    /// When the last pass decided what was due (router-clock ms): what fell due after it
    /// wakes the timer at once, what it left waiting does not.
    pub passed_at: Option<i64>,
}

impl Warm {
    /// No pools yet.
    pub fn new(shared: bool) -> Self {
        Warm { shared, ..Warm::default() }
    }

    /// The pool `id` under its current declaration (created on first sight).
    pub fn pool(&mut self, id: &str, config: WarmConfig, lifetime: Lifetime) -> &mut WarmPool {
        let p = self.pools.entry(id.to_string()).or_insert_with(|| WarmPool::new(config, lifetime));
        p.configure(config, lifetime);
        p
    }

    /// The pool `id`, if it was seen.
    pub fn get(&self, id: &str) -> Option<&WarmPool> {
        self.pools.get(id)
    }

    /// The pool `id`, if it was seen.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut WarmPool> {
        self.pools.get_mut(id)
    }

    /// A launch on pool `id` succeeded: a paused pool resumes now. True when it resumed.
    pub fn launch_succeeded(&mut self, id: &str) -> bool {
        match self.pools.get_mut(id) {
            Some(p) => {
                p.launch_succeeded();
                let resumed = p.resume();
                self.kick |= resumed;
                resumed
            }
            None => false,
        }
    }

    /// This process holds member `id`'s live handle (of pool `pool`).
    pub fn hold(&mut self, id: SandboxKey, pool: &str) {
        self.held.insert(id, pool.to_string());
    }

    /// This process no longer holds member `id`'s handle; whether it did.
    pub fn let_go(&mut self, id: SandboxKey) -> bool {
        self.held.remove(&id).is_some()
    }

    /// Whether this process holds member `id`'s live handle.
    pub fn holds(&self, id: SandboxKey) -> bool {
        self.held.contains_key(&id)
    }

    /// The members of pool `pool` whose handles this process holds.
    pub fn held_in(&self, pool: &str) -> Vec<SandboxKey> {
        self.held.iter().filter(|(_, p)| p.as_str() == pool).map(|(id, _)| *id).collect()
    }

    /// The ids of the pools seen.
    pub fn pool_ids(&self) -> Vec<String> {
        self.pools.keys().cloned().collect()
    }

    /// Removes member `id` from whichever pool holds it idle: its pool's id and the member.
    pub fn remove(&mut self, id: SandboxKey) -> Option<(String, Member)> {
        self.pools.iter_mut().find_map(|(pool, p)| p.remove(id).map(|m| (pool.clone(), m)))
    }

    /// Removes every idle member (`close()`), by pool id.
    pub fn drain(&mut self) -> Vec<(String, Member)> {
        let mut ids: Vec<String> = self.pools.keys().cloned().collect();
        ids.sort();
        let mut out = Vec::new();
        for id in ids {
            if let Some(p) = self.pools.get_mut(&id) {
                out.extend(p.drain().into_iter().map(|m| (id.clone(), m)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> WarmConfig {
        WarmConfig::read(&json!({"size": 2}), "warm").unwrap()
    }

    #[test]
    fn check_option_must_refuse_naming_the_factory_key() {
        let e = check_option(r#"{"size":-1}"#, "providers.local.warm").unwrap_err();
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_CONFIGURATION", Some("providers.local.warm.size")));
        assert!(e.message.starts_with("invalid configuration: providers.local.warm.size "), "{}", e.message);
        let e = check_option("not json", "providers.local.warm").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("providers.local.warm"));
    }

    #[test]
    fn check_option_must_not_refuse_a_valid_option() {
        assert!(check_option(r#"{"size":2}"#, "providers.local.warm").is_ok());
    }

    fn key(n: u8) -> SandboxKey {
        SandboxKey::parse(&format!("sbx_{:032x}", n)).unwrap()
    }

    fn member(n: u8, at: i64) -> Member {
        Member { id: key(n), provider_sandbox_id: format!("p{n}"), launched_at: at }
    }

    fn req() -> Request {
        Request::default()
    }

    fn pool(lifetime: Lifetime) -> WarmPool {
        WarmPool::new(config(), lifetime)
    }

    #[test]
    fn must_not_fire_a_minimal_option_is_read_with_its_documented_defaults() {
        assert_eq!(
            config(),
            WarmConfig {
                sizing: Sizing::Fixed(2),
                max_idle_ms: DEFAULT_MAX_IDLE_MS,
                check_interval_ms: DEFAULT_CHECK_INTERVAL_MS,
                // The default concurrency is the size.
                refill_concurrency: 2,
                pause_after_failures: DEFAULT_PAUSE_AFTER_FAILURES,
            }
        );
        let full = json!({"size": 0, "maxIdleMs": 1000, "checkIntervalMs": 100, "refill": {"concurrency": 64, "pauseAfterFailures": 1}});
        let c = WarmConfig::read(&full, "warm").unwrap();
        assert_eq!(
            (c.sizing, c.max_idle_ms, c.check_interval_ms, c.refill_concurrency, c.pause_after_failures),
            (Sizing::Fixed(0), 1000, 100, 64, 1)
        );
    }

    #[test]
    fn must_fire_every_invalid_option_names_its_field() {
        let cases = [
            (json!(5), "warm"),
            (json!({}), "warm.size"),
            (json!({"size": -1}), "warm.size"),
            (json!({"size": 1001}), "warm.size"),
            (json!({"size": 1.5}), "warm.size"),
            (json!({"size": "2"}), "warm.size"),
            (json!({"size": 1, "maxIdleMs": 999}), "warm.maxIdleMs"),
            (json!({"size": 1, "maxIdleMs": null}), "warm.maxIdleMs"),
            (json!({"size": 1, "checkIntervalMs": 99}), "warm.checkIntervalMs"),
            (json!({"size": 1, "refill": 3}), "warm.refill"),
            (json!({"size": 1, "refill": {"concurrency": 0}}), "warm.refill.concurrency"),
            (json!({"size": 1, "refill": {"pauseAfterFailures": 0}}), "warm.refill.pauseAfterFailures"),
            (json!({"size": 1, "refill": {"pace": 1}}), "warm.refill.pace"),
            (json!({"size": 1, "sise": 2}), "warm.sise"),
        ];
        for (v, field) in cases {
            let e = WarmConfig::read(&v, "warm").unwrap_err();
            assert_eq!(e.field, field, "{v}");
        }
    }

    #[test]
    fn must_fire_a_lifetime_that_leaves_no_idle_time_is_refused_must_not_a_longer_one() {
        let c = WarmConfig::read(&json!({"size": 1, "checkIntervalMs": 30000}), "warm").unwrap();
        assert_eq!(c.check_lifetime(Lifetime::Capped(30_000.0), "warm").unwrap_err().field, "warm.maxIdleMs");
        assert!(c.check_lifetime(Lifetime::Capped(60_000.0), "warm").is_ok());
        assert!(c.check_lifetime(Lifetime::Unbounded, "warm").is_ok());
        // L = 1 h: the quarter (15 min) wins over the interval; maxIdleMs (10 min) is shorter still.
        assert_eq!(c.expiry_age_ms(Lifetime::Capped(3_600_000.0)), Some(600_000));
        // L = 10 min: 10 − 2.5 = 7.5 min.
        assert_eq!(c.expiry_age_ms(Lifetime::Capped(600_000.0)), Some(450_000));
    }

    #[test]
    fn must_fire_launch_env_and_name_are_not_warm_compatible() {
        let mut r = req();
        r.launch_env = true;
        assert_eq!(incompatibility(&r), Some(MissReason::LaunchEnv));
        let mut r = req();
        r.launch_name = true;
        assert_eq!(incompatibility(&r), Some(MissReason::LaunchName));
        let mut p = pool(Lifetime::Unbounded);
        p.insert(member(1, 0));
        assert_eq!(p.claim(10, &r), Err(MissReason::LaunchName));
        assert_eq!(p.idle().len(), 1, "an incompatible request takes nothing");
        assert_eq!(p.stats().incompatible, 1);
    }

    #[test]
    fn must_not_fire_a_plain_request_with_labels_and_an_empty_env_is_compatible() {
        let parsed = crate::core::request::parse_request(
            &json!({"launch": {"env": {}, "labels": {"team": "a"}, "createTimeoutSeconds": 5}}),
        )
        .unwrap();
        assert_eq!(incompatibility(&parsed), None);
        let mut p = pool(Lifetime::Unbounded);
        p.insert(member(1, 0));
        assert_eq!(p.claim(10, &parsed).unwrap().id, key(1));
        assert_eq!(p.stats().claims, 1);
        let with_env = crate::core::request::parse_request(&json!({"launch": {"env": {"A": "b"}}})).unwrap();
        assert_eq!(incompatibility(&with_env), Some(MissReason::LaunchEnv));
    }

    #[test]
    fn must_fire_a_required_lifetime_longer_than_what_is_left_misses_must_not_a_shorter_one() {
        // L = 1 h; a member launched 40 min ago has 20 min left.
        let mut p = pool(Lifetime::Capped(3_600_000.0));
        p.insert(member(1, 0));
        let now = 40 * 60_000 - 1; // younger than the 10 min maxIdle? no: use a long maxIdle
        p.configure(WarmConfig { max_idle_ms: 86_400_000, ..config() }, Lifetime::Capped(3_600_000.0));
        let mut r = req();
        r.required_lifetime_ms = Some(30.0 * 60_000.0);
        assert_eq!(p.claim(now, &r), Err(MissReason::Lifetime));
        assert_eq!(p.stats().incompatible, 1);
        r.required_lifetime_ms = Some(15.0 * 60_000.0);
        assert_eq!(p.claim(now, &r).unwrap().id, key(1));
        // More than the pool ever grants: never.
        let mut p = pool(Lifetime::Capped(60_000.0));
        r.required_lifetime_ms = Some(61_000.0);
        assert_eq!(p.floor(0, &r), Err(MissReason::Lifetime));
        // An undeclared lifetime satisfies no requirement (routing refuses it too).
        p.configure(config(), Lifetime::Unknown);
        assert_eq!(p.floor(0, &r), Err(MissReason::Lifetime));
        r.required_lifetime_ms = None;
        assert!(p.floor(0, &r).is_ok());
    }

    #[test]
    fn must_fire_an_expired_member_is_never_claimed_must_not_a_fresh_one() {
        let mut p = pool(Lifetime::Unbounded);
        p.insert(member(1, 0));
        // At exactly maxIdleMs it has expired.
        assert_eq!(p.claim(DEFAULT_MAX_IDLE_MS as i64, &req()), Err(MissReason::Empty));
        assert_eq!(p.idle().len(), 1, "left for the hygiene pass to destroy");
        assert_eq!(p.claim(DEFAULT_MAX_IDLE_MS as i64 - 1, &req()).unwrap().id, key(1));
    }

    #[test]
    fn must_fire_expired_members_are_taken_for_destruction_must_not_fresh_ones() {
        let mut p = pool(Lifetime::Unbounded);
        p.insert(member(1, 0));
        p.insert(member(2, 100));
        let gone = p.take_expired(DEFAULT_MAX_IDLE_MS as i64 + 50);
        assert_eq!(gone.iter().map(|m| m.id).collect::<Vec<_>>(), vec![key(1)]);
        assert_eq!(p.idle().iter().map(|m| m.id).collect::<Vec<_>>(), vec![key(2)]);
        assert_eq!(p.stats().expired, 1);
        assert!(p.take_expired(DEFAULT_MAX_IDLE_MS as i64 + 99).is_empty());
    }

    #[test]
    fn a_member_close_to_the_pools_lifetime_expires_before_max_idle() {
        // L = 10 min: expiry at 7.5 min, before maxIdleMs (10 min).
        let mut p = pool(Lifetime::Capped(600_000.0));
        p.insert(member(1, 0));
        assert!(p.take_expired(449_999).is_empty());
        assert_eq!(p.take_expired(450_000).len(), 1);
    }

    #[test]
    fn claims_take_the_oldest_claimable_member_first() {
        let mut p = pool(Lifetime::Unbounded);
        p.insert(member(2, 20));
        p.insert(member(1, 10));
        p.insert(member(3, 30));
        p.insert(member(3, 30));
        assert_eq!(p.idle().len(), 3, "a member is held once");
        assert_eq!(p.claim(40, &req()).unwrap().id, key(1));
        assert_eq!(p.claim(40, &req()).unwrap().id, key(2));
    }

    #[test]
    fn must_fire_an_empty_pool_misses_as_empty_or_paused() {
        let mut p = pool(Lifetime::Unbounded);
        assert_eq!(p.claim(0, &req()), Err(MissReason::Empty));
        for _ in 0..DEFAULT_PAUSE_AFTER_FAILURES {
            p.plan(true);
            p.refill_failed("X");
        }
        assert_eq!(p.claim(0, &req()), Err(MissReason::Paused));
        assert_eq!((p.stats().empty, p.stats().paused), (1, 1));
    }

    #[test]
    fn refills_fill_up_to_the_target_at_most_concurrency_at_a_time() {
        let c = WarmConfig { sizing: Sizing::Fixed(5), refill_concurrency: 2, ..config() };
        let mut p = WarmPool::new(c, Lifetime::Unbounded);
        assert_eq!(p.plan(true), 2);
        assert_eq!(p.plan(true), 0, "two in flight already");
        p.refill_succeeded(Some(member(1, 0)));
        assert_eq!(p.plan(true), 1);
        p.refill_succeeded(Some(member(2, 0)));
        p.refill_succeeded(Some(member(3, 0)));
        p.insert(member(4, 0));
        assert_eq!(p.plan(true), 1, "target 5: 4 idle");
        p.refill_succeeded(Some(member(5, 0)));
        assert_eq!(p.plan(true), 0, "full");
        assert_eq!(p.standing(p.idle().len() as u64, true, true), Standing::Ready);
    }

    #[test]
    fn must_fire_an_open_circuit_stops_refills_must_not_a_closed_one() {
        let mut p = pool(Lifetime::Unbounded);
        assert_eq!(p.plan(false), 0);
        assert_eq!(p.standing(0, false, true), Standing::CircuitOpen);
        assert_eq!(p.plan(true), 2);
    }

    #[test]
    fn must_fire_refills_pause_after_n_consecutive_failures_must_not_after_n_minus_1() {
        let mut p = pool(Lifetime::Unbounded);
        for i in 1..DEFAULT_PAUSE_AFTER_FAILURES {
            p.plan(true);
            assert!(!p.refill_failed("PROVIDER_LAUNCH_OUTCOME_UNKNOWN"), "failure {i}");
        }
        assert!(!p.is_paused());
        assert!(p.wanted(true) > 0);
        // A success in between resets the count.
        p.plan(true);
        p.refill_succeeded(Some(member(1, 0)));
        for _ in 1..DEFAULT_PAUSE_AFTER_FAILURES {
            p.plan(true);
            p.refill_failed("X");
        }
        assert!(!p.is_paused());
        p.plan(true);
        assert!(p.refill_failed("X"));
        assert!(p.is_paused());
        assert_eq!(p.plan(true), 0);
        assert_eq!(p.standing(0, true, true), Standing::Paused);
        assert_eq!(p.stats().last_failure.as_deref(), Some("X"));
        p.plan(true);
        assert!(!p.refill_failed("Y"), "pausing is reported once");
    }

    #[test]
    fn must_fire_a_paused_pool_resumes_after_a_launch_success_must_not_without_one() {
        let mut p = WarmPool::new(WarmConfig { pause_after_failures: 1, ..config() }, Lifetime::Unbounded);
        p.plan(true);
        assert!(p.refill_failed("X"));
        assert!(!p.resume(), "no success since the pause");
        assert!(p.is_paused());
        p.launch_succeeded();
        assert!(p.resume());
        assert!(!p.is_paused());
        assert!(!p.resume(), "resuming is reported once");
        assert_eq!(p.plan(true), 1, "refills again: one still counted in flight from before the pause");
    }

    #[test]
    fn must_fire_a_lost_member_is_dropped_must_not_one_claimed_meanwhile() {
        let mut p = pool(Lifetime::Unbounded);
        p.insert(member(1, 0));
        p.insert(member(2, 1));
        assert_eq!(p.lost(key(1)).map(|m| m.id), Some(key(1)));
        assert_eq!(p.stats().lost, 1);
        let claimed = p.claim(5, &req()).unwrap();
        assert_eq!(claimed.id, key(2));
        assert_eq!(p.lost(key(2)), None, "a claimed member is the caller's now");
        assert_eq!(p.stats().lost, 1);
    }

    #[test]
    fn must_fire_the_fleet_grants_nothing_beyond_the_target_must_not_refuse_below_it() {
        assert_eq!(reserve_count(4, 3, 1, 2), 0);
        assert_eq!(reserve_count(4, 4, 0, 2), 0);
        assert_eq!(reserve_count(4, 5, 2, 2), 0);
        assert_eq!(reserve_count(4, 1, 1, 2), 2);
        assert_eq!(reserve_count(4, 2, 1, 2), 1);
        assert_eq!(reserve_count(0, 0, 0, 2), 0);
    }

    #[test]
    fn checks_fall_due_every_interval_from_the_first_observation() {
        let mut p = pool(Lifetime::Unbounded);
        assert!(!p.check_due(0));
        assert!(!p.check_due(DEFAULT_CHECK_INTERVAL_MS as i64 - 1));
        assert!(p.check_due(DEFAULT_CHECK_INTERVAL_MS as i64));
        assert!(!p.check_due(DEFAULT_CHECK_INTERVAL_MS as i64 + 1));
    }

    #[test]
    fn a_pool_outside_the_provider_order_is_never_refilled() {
        let order = vec!["a".to_string()];
        assert!(routable(Some(&order), "a"));
        assert!(!routable(Some(&order), "b"));
        assert!(routable(None, "b"));
        assert_eq!(pool(Lifetime::Unbounded).standing(0, true, false), Standing::NotRoutable);
    }

    #[test]
    fn the_router_finds_and_drains_members_across_pools() {
        let mut w = Warm::new(false);
        w.pool("a", config(), Lifetime::Unbounded).insert(member(1, 0));
        w.pool("b", config(), Lifetime::Unbounded).insert(member(2, 0));
        assert_eq!(w.remove(key(2)).map(|(p, m)| (p, m.id)), Some(("b".to_string(), key(2))));
        assert_eq!(w.remove(key(2)), None);
        w.pool("b", config(), Lifetime::Unbounded).insert(member(3, 0));
        let drained: Vec<(String, SandboxKey)> = w.drain().into_iter().map(|(p, m)| (p, m.id)).collect();
        assert_eq!(drained, vec![("a".to_string(), key(1)), ("b".to_string(), key(3))]);
    }

    // --- issue 35: demand, pace, target, surplus, lifetimes -----------------------------

    fn demand(min: u32, max: u32) -> WarmConfig {
        WarmConfig::read(&json!({"min": min, "max": max}), "warm").unwrap()
    }

    /// `n` claims spread evenly over `[from, to)` ms.
    fn claims(p: &mut WarmPool, n: u32, from: i64, to: i64) {
        for i in 0..n {
            p.demand_seen(from + (to - from) * i64::from(i) / i64::from(n));
        }
    }

    #[test]
    fn must_fire_min_and_max_are_read_as_a_demand_following_size_must_not_with_size() {
        let c = demand(2, 30);
        assert_eq!(c.sizing, Sizing::Demand { min: 2, max: 30 });
        assert_eq!(c.refill_concurrency, 30, "the default concurrency is the ceiling");
        for (v, field) in [
            (json!({"size": 2, "min": 1, "max": 3}), "warm.min"),
            (json!({"size": 2, "max": 3}), "warm.max"),
            (json!({"min": 1}), "warm.max"),
            (json!({"max": 1}), "warm.min"),
            (json!({"min": 4, "max": 3}), "warm.min"),
            (json!({"min": 0, "max": 1001}), "warm.max"),
            (json!({"size": 2, "refill": {"concurrency": 1001}}), "warm.refill.concurrency"),
        ] {
            assert_eq!(WarmConfig::read(&v, "warm").unwrap_err().field, field, "{v}");
        }
        assert_eq!(WarmConfig::read(&json!({"size": 0}), "warm").unwrap().refill_concurrency, 1);
        assert_eq!(WarmConfig::read(&json!({"size": 500}), "warm").unwrap().refill_concurrency, 500);
    }

    #[test]
    fn demand_rises_within_seconds_and_falls_over_half_a_minute() {
        let mut d = DemandRate::default();
        assert_eq!(d.per_second(0), 0.0);
        // 10 claims per second for 10 s: the fast estimate is close to 10 by then.
        for i in 0..100 {
            d.observe(i * 100);
        }
        let at_peak = d.per_second(10_000);
        assert!((8.0..=10.5).contains(&at_peak), "{at_peak}");
        // No claim for 30 s: the slow estimate still remembers a third of it...
        let later = d.per_second(40_000);
        assert!(later > 1.0 && later < at_peak / 2.0, "{later}");
        // ...and after ten minutes there is none.
        assert_eq!(d.per_second(640_000), 0.0);
        // A clock that goes back never adds time.
        let before = d.per_second(10_000);
        d.observe(5_000);
        assert!(d.per_second(10_000) >= before);
    }

    #[test]
    fn the_create_latency_is_the_p90_of_the_last_samples() {
        let mut l = CreateLatency::default();
        assert_eq!(l.p90(), None);
        for ms in 1..=10 {
            l.record(f64::from(ms) * 100.0);
        }
        assert_eq!(l.p90(), Some(900.0));
        l.record(f64::NAN);
        l.record(-1.0);
        assert_eq!(l.p90(), Some(900.0), "nonsense is not a sample");
        for _ in 0..LATENCY_SAMPLES {
            l.record(50.0);
        }
        assert_eq!(l.p90(), Some(50.0), "only the last samples count");
    }

    #[test]
    fn must_fire_the_pace_rises_with_demand_must_not_while_demand_is_steady() {
        // size 10, creates of 500 ms: the floor is half the target (5).
        let mut p = WarmPool::new(WarmConfig::read(&json!({"size": 10}), "warm").unwrap(), Lifetime::Unbounded);
        p.create_observed(500.0);
        p.retarget(0);
        assert_eq!(p.pace(None), 5, "no demand: the floor");
        // Steady 5 claims per second: λ·T·1.5 = 3.75 → 4, under the floor: the pace holds.
        claims(&mut p, 100, 0, 20_000);
        p.retarget(20_000);
        assert_eq!(p.needed(), 4);
        assert_eq!(p.pace(None), 5, "must-not-fire: a steady demand the floor covers");
        claims(&mut p, 100, 20_000, 40_000);
        p.retarget(40_000);
        assert_eq!(p.pace(None), 5);
        // 20 per second: λ·T·1.5 = 15 → capped by refill.concurrency (the size).
        claims(&mut p, 200, 40_000, 50_000);
        p.retarget(50_000);
        assert!(p.needed() >= 12, "{}", p.needed());
        assert_eq!(p.pace(None), 10, "must-fire: the pace rose, to the cap");
        // A smaller concurrency caps it lower.
        p.configure(WarmConfig { refill_concurrency: 3, ..*p.config() }, Lifetime::Unbounded);
        assert_eq!(p.pace(None), 3);
    }

    #[test]
    fn with_only_size_a_demand_the_pool_can_serve_keeps_a_member_idle() {
        // Size 10, 5 claims/s, 500 ms creates: λ·T = 2.5 < 10. Simulate in 10 ms ticks:
        // claims arrive every 200 ms, refills land 500 ms after they start.
        let mut p = WarmPool::new(WarmConfig::read(&json!({"size": 10}), "warm").unwrap(), Lifetime::Unbounded);
        let mut inflight: Vec<i64> = Vec::new();
        let mut n = 0u8;
        let mut lowest = usize::MAX;
        for tick in 0..6_000i64 {
            let now = tick * 10;
            inflight.retain(|&done| {
                if done <= now {
                    n = n.wrapping_add(1);
                    p.refill_succeeded(Some(member(n, now)));
                    p.create_observed(500.0);
                    false
                } else {
                    true
                }
            });
            if tick >= 300 && tick % 20 == 0 {
                p.demand_seen(now);
                if p.claim(now, &req()).is_ok() {
                    lowest = lowest.min(p.idle().len());
                }
            }
            p.retarget(now);
            for _ in 0..p.plan(true) {
                inflight.push(now + 500);
            }
        }
        assert_eq!(p.stats().empty, 0, "never dry");
        assert!(lowest >= 1, "at least one member idle after every claim: {lowest}");
    }

    #[test]
    fn must_fire_a_demand_following_target_rises_at_once_must_not_fall_within_the_fast_window() {
        let mut p = WarmPool::new(demand(2, 30), Lifetime::Unbounded);
        assert_eq!((p.target(), p.target_reason()), (2, TargetReason::Min), "no demand: min");
        p.create_observed(500.0);
        assert_eq!(p.retarget(0), None, "must-not-fire: still at min");
        // 10 per second: λ·T = 5 → 5·1.5 + 2·√5 = 11.97 → 12.
        claims(&mut p, 100, 0, 10_000);
        let moved = p.retarget(10_000);
        assert!(matches!(moved, Some((2, t)) if (10..=12).contains(&t)), "{moved:?}");
        assert_eq!(p.target_reason(), TargetReason::Demand);
        let high = p.target();
        // Demand stops: within the fast window the target does not fall...
        assert_eq!(p.retarget(12_000), None, "must-not-fire: a fall within 5 s");
        assert_eq!(p.target(), high);
        // ...after it, it does, and never below min.
        let fell = p.retarget(16_000);
        assert!(matches!(fell, Some((h, t)) if h == high && t < high), "{fell:?}");
        p.retarget(1_000_000);
        assert_eq!(p.retarget(1_000_000 + 10_000), None);
        assert_eq!((p.target(), p.target_reason()), (2, TargetReason::Min), "must-fire: back to min, never below");
    }

    #[test]
    fn must_fire_a_demand_following_target_stops_at_max_must_not_beyond() {
        let mut p = WarmPool::new(demand(1, 6), Lifetime::Unbounded);
        p.create_observed(2_000.0);
        claims(&mut p, 500, 0, 10_000);
        assert_eq!(p.retarget(10_000), Some((1, 6)));
        assert_eq!(p.target_reason(), TargetReason::Max);
        // Never a launch beyond max: 6 idle and launching at most.
        let mut launched = 0;
        for _ in 0..5 {
            launched += p.plan(true);
        }
        assert_eq!(launched, 6);
        assert_eq!(p.plan(true), 0, "must-not-fire: beyond max");
        // Without any latency known, a demand-following pool holds min.
        let mut q = WarmPool::new(demand(3, 9), Lifetime::Unbounded);
        claims(&mut q, 100, 0, 10_000);
        assert_eq!(q.retarget(10_000), None);
        assert_eq!(q.target(), 3);
        // The declared coldStartLatencyMs stands in until a refill was timed.
        q.set_prior(Some(1_000.0));
        assert!(q.retarget(10_000).is_some());
    }

    #[test]
    fn must_fire_a_member_beyond_the_target_expires_after_a_check_interval_must_not_before() {
        let c = WarmConfig { check_interval_ms: 1_000, ..demand(1, 5) };
        let mut p = WarmPool::new(c, Lifetime::Unbounded);
        for n in 1..=4 {
            p.insert(member(n, i64::from(n) * 100));
        }
        // Target 1 (min): 3 surplus members; at 900 ms none has been idle a full interval.
        assert!(p.take_surplus(900).is_empty(), "must-not-fire: not idle long enough");
        let gone = p.take_surplus(1_250);
        assert_eq!(gone.iter().map(|m| m.id).collect::<Vec<_>>(), vec![key(1), key(2)], "oldest first");
        let gone = p.take_surplus(5_000);
        assert_eq!(gone.len(), 1);
        assert_eq!(p.idle().len(), 1, "never below the target");
        assert!(p.take_surplus(10_000).is_empty());
        assert_eq!(p.stats().expired, 3);
        assert_eq!(p.next_due(), Some(400 + DEFAULT_MAX_IDLE_MS as i64));
    }

    #[test]
    fn must_fire_a_fresh_capacity_read_caps_the_pace_must_not_a_stale_one() {
        let mut p = WarmPool::new(
            WarmConfig::read(&json!({"size": 8, "checkIntervalMs": 1000}), "warm").unwrap(),
            Lifetime::Unbounded,
        );
        p.capacity_read(1, 0);
        assert_eq!(p.plan_at(true, Some(500)), 1, "must-fire: one sandbox of room");
        assert_eq!(p.plan_at(true, Some(600)), 0);
        assert_eq!(p.standing_at(0, true, true, 600), Standing::Filling, "one launching");
        p.refill_failed("X");
        assert_eq!(p.standing_at(0, true, true, 600), Standing::Filling);
        p.capacity_read(0, 700);
        assert_eq!(p.standing_at(0, true, true, 800), Standing::AtCapacity);
        assert_eq!(p.plan_at(true, Some(1_800)), 4, "must-not-fire: the read is stale, the floor applies");
    }

    #[test]
    fn must_fire_a_factory_pool_declares_the_adapters_lifetime_must_not_over_a_declared_one() {
        assert_eq!(factory_lifetime_ms("e2b", None, false), Some(E2B_CREATE_TIMEOUT_MS));
        assert_eq!(factory_lifetime_ms("e2b", Some(300_000.0), false), Some(300_000.0), "the entry's createTimeoutMs");
        assert_eq!(factory_lifetime_ms("e2b", Some(0.0), false), Some(E2B_CREATE_TIMEOUT_MS));
        assert_eq!(factory_lifetime_ms("e2b", None, true), None, "the caller's declaration is kept");
        assert_eq!(factory_lifetime_ms("daytona", None, false), None, "no timer of its own");
        // A 120 s lifetime leaves 90 s of idle time by default: members expire first.
        let c = WarmConfig::read(&json!({"size": 1}), "warm").unwrap();
        assert_eq!(c.expiry_age_ms(Lifetime::Capped(E2B_CREATE_TIMEOUT_MS)), Some(90_000));
    }

    #[test]
    fn must_fire_a_launch_success_resumes_a_paused_pool_at_once_must_not_an_unpaused_one() {
        let mut w = Warm::new(false);
        w.pool("a", WarmConfig { pause_after_failures: 1, ..config() }, Lifetime::Unbounded);
        assert!(!w.launch_succeeded("a"), "must-not-fire: not paused");
        assert!(!w.kick);
        let p2 = w.get_mut("a").unwrap();
        p2.plan(true);
        assert!(p2.refill_failed("X"));
        assert!(w.launch_succeeded("a"), "must-fire: resumed by the success itself");
        assert!(w.kick, "warm work is due");
        assert!(!w.get("a").unwrap().is_paused());
    }

    #[test]
    fn the_room_of_a_measurement_is_its_tightest_resource() {
        use crate::core::capacity::ResourceMeasurement;
        let rs = [
            ResourceMeasurement::new("sandboxes", 7.0, 10.0, "sandboxes", 1.0),
            ResourceMeasurement::new("cpu", 0.0, 16.0, "vcpu", 4.0),
        ];
        assert_eq!(room_of(&rs), Some(3));
        assert_eq!(room_of(&[]), None);
    }
}
