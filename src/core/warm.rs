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
//! - **When to refill and how many** ([`WarmPool::plan`], [`reserve_count`]): up to the
//!   target (`size` idle members, counting launches in flight), at most
//!   `refill.concurrency` launches at once from one process; across a fleet the target is
//!   fleet-wide and the database grants the launches under one lock.
//! - **When refilling stops** ([`WarmPool::refill_failed`], [`WarmPool::resume`]): after
//!   `refill.pauseAfterFailures` consecutive refill failures the pool is paused, and an
//!   open circuit stops refills while it is open. A paused pool resumes when a launch on it
//!   succeeds again (a provision's cold launch, or a half-open trial that closes its
//!   circuit): the evidence that the pool is healthy again. Refills never probe a failing
//!   pool on their own, so a dead provider costs `pauseAfterFailures` launches, not a
//!   launch every interval forever.
//!
//! The caller (the glue, and `lib/warm*.js` for the I/O) launches, re-resolves and destroys
//! members; this module only decides. Times are the router's clock (`clock` option), epoch
//! ms, passed in.

use crate::core::capabilities::Lifetime;
use crate::core::ids::SandboxKey;
use crate::core::json::{object, FieldError};
use crate::core::request::Request;
use rustc_hash::FxHashMap;
use serde_json::Value;

/// Default `maxIdleMs`: ten minutes.
pub const DEFAULT_MAX_IDLE_MS: u64 = 600_000;
/// Default `checkIntervalMs`: thirty seconds.
pub const DEFAULT_CHECK_INTERVAL_MS: u64 = 30_000;
/// Default `refill.concurrency`.
pub const DEFAULT_REFILL_CONCURRENCY: u32 = 2;
/// Default `refill.pauseAfterFailures`.
pub const DEFAULT_PAUSE_AFTER_FAILURES: u32 = 3;
/// Largest `size`.
pub const MAX_SIZE: u32 = 1_000;

/// The keys of a pool's `warm` option.
pub const WARM_OPTIONS: [&str; 4] = ["size", "maxIdleMs", "checkIntervalMs", "refill"];
/// The keys of `warm.refill`.
pub const REFILL_OPTIONS: [&str; 2] = ["concurrency", "pauseAfterFailures"];

/// A pool's `warm` option, validated, with its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmConfig {
    /// Idle members to keep (0 to [`MAX_SIZE`]; required).
    pub size: u32,
    /// A member idle this long is destroyed and replaced, ms (1,000 to 86,400,000).
    pub max_idle_ms: u64,
    /// How often idle members are re-resolved and expired ones replaced, ms (100 to
    /// 3,600,000).
    pub check_interval_ms: u64,
    /// Refill launches in flight at once, per process (1 to 64).
    pub refill_concurrency: u32,
    /// Consecutive refill failures that pause the pool (1 to 1,000).
    pub pause_after_failures: u32,
}

impl WarmConfig {
    /// Reads a pool's `warm` option at `path` (e.g. `warm`), strictly: unknown keys,
    /// wrong types and out-of-range values are errors naming the field.
    pub fn read(value: &Value, path: &str) -> Result<WarmConfig, FieldError> {
        let o = object(value, path, &WARM_OPTIONS)?;
        let size = o.integer_in("size", 0, i64::from(MAX_SIZE))?.ok_or_else(|| {
            FieldError::new(
                o.field("size"),
                format!("is required: the number of idle members to keep (0 to {MAX_SIZE})"),
            )
        })? as u32;
        let max_idle_ms = o.integer_in("maxIdleMs", 1_000, 86_400_000)?.map_or(DEFAULT_MAX_IDLE_MS, |v| v as u64);
        let check_interval_ms =
            o.integer_in("checkIntervalMs", 100, 3_600_000)?.map_or(DEFAULT_CHECK_INTERVAL_MS, |v| v as u64);
        let (mut refill_concurrency, mut pause_after_failures) =
            (DEFAULT_REFILL_CONCURRENCY, DEFAULT_PAUSE_AFTER_FAILURES);
        if let Some(r) = o.object("refill", &REFILL_OPTIONS)? {
            refill_concurrency = r.integer_in("concurrency", 1, 64)?.map_or(refill_concurrency, |v| v as u32);
            pause_after_failures =
                r.integer_in("pauseAfterFailures", 1, 1_000)?.map_or(pause_after_failures, |v| v as u32);
        }
        Ok(WarmConfig { size, max_idle_ms, check_interval_ms, refill_concurrency, pause_after_failures })
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
    /// `size` members are idle.
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
}

impl Standing {
    /// The documented code (`null` for ready and filling, which are not reasons).
    pub fn reason(self) -> Option<&'static str> {
        match self {
            Standing::Ready | Standing::Filling => None,
            Standing::Paused => Some("PAUSED"),
            Standing::CircuitOpen => Some("CIRCUIT_OPEN"),
            Standing::NotRoutable => Some("NOT_IN_PROVIDER_ORDER"),
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
    /// Members destroyed for their age.
    pub expired: u64,
    /// Members found gone when re-resolved, dropped.
    pub lost: u64,
    /// The code of the last refill failure.
    pub last_failure: Option<String>,
}

/// One pool's warm inventory and refill state, in this process.
#[derive(Debug, Clone)]
pub struct WarmPool {
    config: WarmConfig,
    lifetime: Lifetime,
    /// Idle members, oldest first.
    idle: Vec<Member>,
    launching: u32,
    failures: u32,
    /// Paused: the number of launch successes seen when it paused.
    paused: Option<u64>,
    successes: u64,
    last_check: Option<i64>,
    stats: WarmStats,
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
        WarmPool {
            config,
            lifetime,
            idle: Vec::new(),
            launching: 0,
            failures: 0,
            paused: None,
            successes: 0,
            last_check: None,
            stats: WarmStats::default(),
        }
    }

    /// Takes a (possibly changed) declaration: a caller's registry may change between calls.
    pub fn configure(&mut self, config: WarmConfig, lifetime: Lifetime) {
        self.config = config;
        self.lifetime = lifetime;
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
        let (expired, kept): (Vec<Member>, Vec<Member>) =
            std::mem::take(&mut self.idle).into_iter().partition(|m| m.launched_at < floor);
        self.idle = kept;
        self.stats.expired += expired.len() as u64;
        expired
    }

    /// Counts members expired elsewhere (taken from the fleet's inventory).
    pub fn expired_elsewhere(&mut self, n: u64) {
        self.stats.expired += n;
    }

    /// Refill launches this process may start now: none while paused or while the pool's
    /// circuit is not closed, else up to `refill.concurrency` in flight.
    pub fn wanted(&self, circuit_closed: bool) -> u32 {
        if self.paused.is_some() || !circuit_closed {
            return 0;
        }
        self.config.refill_concurrency.saturating_sub(self.launching)
    }

    /// Refill launches to start now from this process's own inventory (counted as in
    /// flight): the wanted ones, up to the target.
    pub fn plan(&mut self, circuit_closed: bool) -> u32 {
        let n = reserve_count(
            self.config.size,
            self.idle.len() as u64,
            u64::from(self.launching),
            self.wanted(circuit_closed),
        );
        self.launching += n;
        n
    }

    /// `n` refill launches started (granted by the fleet's database).
    pub fn started(&mut self, n: u32) {
        self.launching = self.launching.saturating_add(n);
    }

    /// A refill launch succeeded; `member` joins the idle members (None: it lives in the
    /// fleet's database).
    pub fn refill_succeeded(&mut self, member: Option<Member>) {
        self.launching = self.launching.saturating_sub(1);
        self.failures = 0;
        self.successes += 1;
        self.stats.launched += 1;
        if let Some(m) = member {
            self.insert(m);
        }
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

    /// A member found gone when re-resolved: dropped (counted) if it is still idle here.
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

    /// Refill launches in flight from this process.
    pub fn launching(&self) -> u32 {
        self.launching
    }

    /// Whether its idle members are due a re-resolution at `now` (every
    /// `checkIntervalMs`; the first call starts the interval).
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

    /// How it stands with `idle` members (this process's, or the fleet's).
    pub fn standing(&self, idle: u64, circuit_closed: bool, routable: bool) -> Standing {
        if idle >= u64::from(self.config.size) {
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

/// The warm pools of one router, by pool id, once `warmUp()` started them.
#[derive(Debug, Clone, Default)]
pub struct Warm {
    pools: FxHashMap<String, WarmPool>,
    /// The inventory is the fleet's, in PostgreSQL (`capacity.coordinator`): members are
    /// not held here, only this process's counters and refills.
    pub shared: bool,
    /// `close()` ran: nothing is claimed or refilled any more.
    pub closed: bool,
}

impl Warm {
    /// No pools yet.
    pub fn new(shared: bool) -> Self {
        Warm { pools: FxHashMap::default(), shared, closed: false }
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

    /// A launch on pool `id` succeeded (a paused pool may resume).
    pub fn launch_succeeded(&mut self, id: &str) {
        if let Some(p) = self.pools.get_mut(id) {
            p.launch_succeeded();
        }
    }

    /// Removes member `id` from whichever pool holds it idle: its pool's id and the member.
    pub fn remove(&mut self, id: SandboxKey) -> Option<(String, Member)> {
        self.pools.iter_mut().find_map(|(pool, p)| p.remove(id).map(|m| (pool.clone(), m)))
    }

    /// Removes every idle member (`close()`), by pool id.
    pub fn drain(&mut self) -> Vec<(String, Member)> {
        let mut ids: Vec<&String> = self.pools.keys().collect();
        ids.sort();
        let ids: Vec<String> = ids.into_iter().cloned().collect();
        let mut out = Vec::new();
        for id in ids {
            if let Some(p) = self.pools.get_mut(&id) {
                out.extend(std::mem::take(&mut p.idle).into_iter().map(|m| (id.clone(), m)));
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
                size: 2,
                max_idle_ms: DEFAULT_MAX_IDLE_MS,
                check_interval_ms: DEFAULT_CHECK_INTERVAL_MS,
                refill_concurrency: DEFAULT_REFILL_CONCURRENCY,
                pause_after_failures: DEFAULT_PAUSE_AFTER_FAILURES,
            }
        );
        let full = json!({"size": 0, "maxIdleMs": 1000, "checkIntervalMs": 100, "refill": {"concurrency": 64, "pauseAfterFailures": 1}});
        let c = WarmConfig::read(&full, "warm").unwrap();
        assert_eq!(
            (c.size, c.max_idle_ms, c.check_interval_ms, c.refill_concurrency, c.pause_after_failures),
            (0, 1000, 100, 64, 1)
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
        let c = WarmConfig { size: 5, refill_concurrency: 2, ..config() };
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
}
