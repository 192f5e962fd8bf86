//! Pacing: a pool's declared create-rate limit (`rateLimit: { launchesPerSecond, burst }`,
//! a token bucket) and its `Retry-After` cooldown, as the router keeps them in process.
//!
//! A launch takes a token before it is attempted (before its capacity read, when capacity
//! routing reads one); a pool with no token, or cooling down, is skipped without consuming
//! an attempt, like a capacity skip (`RATE_LIMITED`, `COOLING_DOWN`). A token taken for a
//! launch that then did not happen (its capacity read skipped the pool) is given back.
//!
//! State is kept per pool id only while it says something: a bucket that has refilled and
//! a cooldown that has passed are the same as no entry, and are dropped when next touched
//! (and by [`Pacing::prune`]); so the map holds at most one entry per pool the router has
//! launched on recently, whatever the load. Time is the router's clock (epoch ms), given.
//!
//! In a fleet (`capacity.coordinator`), the bucket and the cooldown that count are the
//! fleet's, in PostgreSQL (`stores::pg::capacity`, taken in the admission's own statement).
//! This process's bucket still goes first: the fleet's bucket, drained by every process, never
//! holds more than this one, so a pool this process has no token for is skipped without asking
//! the database. A refusal from the fleet is kept here ([`Pacing::fleet_refused`]) until the
//! time the fleet named, so a waiting provision sleeps until then instead of asking again, at
//! least [`FLEET_RECHECK_MS`] later.

use crate::core::json::{object, FieldError};
use rustc_hash::FxHashMap;
use serde_json::Value;

/// Skip reason of a pool without a launch token now.
pub const RATE_LIMITED: &str = "RATE_LIMITED";
/// Skip reason of a pool cooling down after a `Retry-After`.
pub const COOLING_DOWN: &str = "COOLING_DOWN";
/// Largest `launchesPerSecond` (a limit above it is no limit a provider declares).
pub const MAX_LAUNCHES_PER_SECOND: f64 = 1_000_000.0;
/// Smallest `launchesPerSecond`: one launch a day.
pub const MIN_LAUNCHES_PER_SECOND: f64 = 1.0 / 86_400.0;
/// Largest `burst`.
pub const MAX_BURST: i64 = 1_000_000;
/// Longest cooldown a classifier's `retryAfterMs` may ask for (one day); longer is refused.
pub const MAX_RETRY_AFTER_MS: i64 = 86_400_000;

/// The least a refusal from the fleet's bucket holds a pool back here, ms: a provision
/// waiting on the fleet asks the database at most once per token interval of the pool, and
/// never more often than this (100 times a second per pool), whatever the declared rate.
pub const FLEET_RECHECK_MS: i64 = 10;

/// The least a waiting provision sleeps past the time its pool frees, ms (see [`wake_at`]).
pub const WAKE_MARGIN_MS: i64 = 2;

/// When a provision waiting for `pool` to free at `until` looks again: a little past it,
/// [`WAKE_MARGIN_MS`] or 1 % of the pool's interval (`limit`), whichever is more. Why: the
/// router's clock counts whole milliseconds, a timer may fire up to a millisecond early by the
/// event loop's clock, and a burst's first launch leaves the process a few milliseconds after
/// it took its token (the other provisions of the burst are routed in between); a waiter
/// woken exactly at the token would follow it by a little less than the interval, which an
/// account counting creates at exactly its rate refuses. It costs at most 1 % of the rate.
pub fn wake_at(until: i64, limit: Option<RateLimit>) -> i64 {
    let margin = limit.map_or(0, |l| (l.ms_per_token() / 100.0).ceil() as i64).max(WAKE_MARGIN_MS);
    until.saturating_add(margin)
}

const RATE_LIMIT_KEYS: [&str; 2] = ["launchesPerSecond", "burst"];

/// The skip reason named `name` as the fleet's admission answers it: [`RATE_LIMITED`],
/// [`COOLING_DOWN`], or `QUEUED` (another lane's turn, [`crate::core::queue::QUEUED`]); None
/// for any other text.
pub fn reason_of(name: &str) -> Option<&'static str> {
    [RATE_LIMITED, COOLING_DOWN, crate::core::queue::QUEUED].into_iter().find(|r| *r == name)
}

/// A pool's declared create-rate limit: `launches_per_second` tokens a second, at most
/// `burst` kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Tokens added per second.
    pub launches_per_second: f64,
    /// Most tokens kept (default 1): how many launches may start at once after a quiet spell.
    pub burst: u32,
}

impl RateLimit {
    /// Reads `{ launchesPerSecond, burst? }` at `path`, strictly (each error names its field).
    pub fn read(value: &Value, path: &str) -> Result<RateLimit, FieldError> {
        let o = object(value, path, &RATE_LIMIT_KEYS)?;
        let rate = match o.get("launchesPerSecond") {
            None => {
                return Err(FieldError::new(
                    o.field("launchesPerSecond"),
                    "is required: the launches the provider allows per second (e.g. 5)",
                ))
            }
            Some(v) => v.as_f64().filter(|x| (MIN_LAUNCHES_PER_SECOND..=MAX_LAUNCHES_PER_SECOND).contains(x)),
        };
        let Some(launches_per_second) = rate else {
            return Err(FieldError::new(
                o.field("launchesPerSecond"),
                format!("must be a number from 1/86400 (one a day) to {MAX_LAUNCHES_PER_SECOND}"),
            ));
        };
        let burst = o.integer_in("burst", 1, MAX_BURST)?.map_or(1, |b| b as u32);
        Ok(RateLimit { launches_per_second, burst })
    }

    /// Milliseconds for one token to come.
    fn ms_per_token(self) -> f64 {
        1000.0 / self.launches_per_second
    }
}

/// Why a pool cannot launch now, and when it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocked {
    /// [`RATE_LIMITED`] or [`COOLING_DOWN`].
    pub reason: &'static str,
    /// When the next token comes, or the cooldown ends (router clock, ms).
    pub until: i64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pace {
    /// Tokens in the bucket at `at` (may be fractional).
    tokens: f64,
    at: i64,
    /// A cooldown in force until then (0: none).
    cooling_until: i64,
    /// The fleet's bucket has no token for this pool until then (0: no refusal kept).
    fleet_until: i64,
}

impl Pace {
    const EMPTY: Pace = Pace { tokens: 0.0, at: 0, cooling_until: 0, fleet_until: 0 };
}

/// One pool's pacing as a decision read it: what a decision record keeps and a replay
/// restores ([`Pacing::seed_of`], [`Pacing::seed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaceSeed {
    /// Tokens in the bucket at `at`.
    pub tokens: f64,
    /// When the bucket was last set (router clock, ms).
    pub at: i64,
    /// A cooldown in force until then (0: none).
    pub cooling_until: i64,
    /// The fleet's bucket refused it until then (0: none).
    pub fleet_until: i64,
}

/// Every pool's bucket and cooldown, by pool id.
#[derive(Debug, Default)]
pub struct Pacing {
    pools: FxHashMap<String, Pace>,
    /// Pools whose cooldown a take found passed, since [`Pacing::take_ended`].
    ended: Vec<String>,
}

impl Pacing {
    /// Whether `pool` (with `limit`, if it declares one) may launch at `now`; takes a token
    /// if so. A pool with neither a limit nor a cooldown always may, and leaves no state.
    pub fn take(&mut self, pool: &str, limit: Option<RateLimit>, now: i64) -> Result<(), Blocked> {
        // One lookup: a take runs in every paced provision.
        let Some(p) = self.pools.get_mut(pool) else {
            if let Some(limit) = limit {
                let full = Pace { tokens: f64::from(limit.burst) - 1.0, at: now, ..Pace::EMPTY };
                self.pools.insert(pool.to_string(), full);
            }
            return Ok(());
        };
        verdict(*p, limit, now)?;
        if p.cooling_until != 0 {
            // Its cooldown passed (the verdict refuses one in force): the first launch after it says so.
            self.ended.push(pool.to_string());
        }
        match limit {
            Some(limit) => *p = Pace { tokens: refilled(*p, limit, now) - 1.0, at: now, ..Pace::EMPTY },
            // A passed cooldown says nothing more.
            None => {
                self.pools.remove(pool);
            }
        }
        Ok(())
    }

    /// What [`Pacing::take`] would answer at `now`, taking nothing (explanations).
    pub fn peek(&self, pool: &str, limit: Option<RateLimit>, now: i64) -> Result<(), Blocked> {
        self.pools.get(pool).map_or(Ok(()), |p| verdict(*p, limit, now))
    }

    /// How many launches `pool` could start at `now` (whole tokens; none while it cools
    /// down; `u32::MAX` without a limit), taking nothing: how many refills a warm pass plans.
    pub fn available(&self, pool: &str, limit: Option<RateLimit>, now: i64) -> u32 {
        let entry = self.pools.get(pool).copied();
        if entry.is_some_and(|p| p.cooling_until > now || p.fleet_until > now) {
            return 0;
        }
        let Some(limit) = limit else { return u32::MAX };
        let tokens = entry.map_or(f64::from(limit.burst), |p| refilled(p, limit, now));
        tokens.floor() as u32
    }

    /// Gives back a token taken for a launch that did not happen (its capacity read skipped
    /// the pool): the bucket is as if it had not been taken, at most `burst`.
    pub fn refund(&mut self, pool: &str, limit: Option<RateLimit>, now: i64) {
        let (Some(limit), Some(p)) = (limit, self.pools.get_mut(pool)) else { return };
        p.tokens = (refilled(*p, limit, now) + 1.0).min(f64::from(limit.burst));
        p.at = now;
    }

    /// `pool` answered "retry after `ms`" at `now`: it is skipped as [`COOLING_DOWN`] until
    /// then (a later, longer answer extends it; a shorter one does not shorten it).
    /// Answers the cooldown's end (None: `ms` asked for none).
    pub fn cool(&mut self, pool: &str, limit: Option<RateLimit>, ms: i64, now: i64) -> Option<i64> {
        let until = now.saturating_add(ms.clamp(0, MAX_RETRY_AFTER_MS));
        if until <= now {
            return None;
        }
        let p = self.entry(pool, limit, now);
        p.cooling_until = p.cooling_until.max(until);
        Some(p.cooling_until)
    }

    /// The fleet's bucket refused `pool` at `now` (`blocked`: no token until, or cooling down
    /// until, a time the database named, on this router's clock): it is skipped here until
    /// then too, and at least [`FLEET_RECHECK_MS`]. Answers the cooldown's end when the refusal
    /// began or extended a cooldown here (another process's `Retry-After`), else None.
    pub fn fleet_refused(&mut self, pool: &str, limit: Option<RateLimit>, blocked: Blocked, now: i64) -> Option<i64> {
        let until = blocked.until.max(now.saturating_add(FLEET_RECHECK_MS));
        let p = self.entry(pool, limit, now);
        if blocked.reason == COOLING_DOWN {
            let started = until > p.cooling_until;
            p.cooling_until = p.cooling_until.max(until);
            return started.then_some(p.cooling_until);
        }
        p.fleet_until = p.fleet_until.max(until);
        None
    }

    /// `pool`'s entry, made as a full bucket at `now` when it has none.
    fn entry(&mut self, pool: &str, limit: Option<RateLimit>, now: i64) -> &mut Pace {
        self.pools.entry(pool.to_string()).or_insert(Pace {
            tokens: limit.map_or(0.0, |l| f64::from(l.burst)),
            at: now,
            ..Pace::EMPTY
        })
    }

    /// Drops every entry that says nothing at `now` (a full bucket, no cooldown); `limit_of`
    /// gives a pool's current limit.
    pub fn prune(&mut self, now: i64, limit_of: impl Fn(&str) -> Option<RateLimit>) {
        self.pools.retain(|id, p| {
            p.cooling_until > now
                || p.fleet_until > now
                || limit_of(id).is_some_and(|l| refilled(*p, l, now) < f64::from(l.burst))
        });
    }

    /// The pools whose cooldown ended since the last call (`pool.cooldown.ended`), once.
    pub fn take_ended(&mut self) -> Vec<String> {
        std::mem::take(&mut self.ended)
    }

    /// When `pool`'s cooldown ends, if one is in force at `now`.
    pub fn cooling_until(&self, pool: &str, now: i64) -> Option<i64> {
        self.pools.get(pool).map(|p| p.cooling_until).filter(|&u| u > now)
    }

    /// `pool`'s state (None: none, the same as a full bucket and no cooldown).
    pub fn seed_of(&self, pool: &str) -> Option<PaceSeed> {
        self.pools.get(pool).map(|p| PaceSeed {
            tokens: p.tokens,
            at: p.at,
            cooling_until: p.cooling_until,
            fleet_until: p.fleet_until,
        })
    }

    /// `pool`'s state becomes `seed` (a replay restores what the decision read).
    pub fn seed(&mut self, pool: &str, seed: PaceSeed) {
        let pace =
            Pace { tokens: seed.tokens, at: seed.at, cooling_until: seed.cooling_until, fleet_until: seed.fleet_until };
        self.pools.insert(pool.to_string(), pace);
    }

    /// How many pools have state now.
    pub fn len(&self) -> usize {
        self.pools.len()
    }

    /// Whether no pool has state.
    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }
}

/// When the bucket `p` holds a whole token again: reckoned from when it was last set, so
/// the answer is the same whenever it is asked (at least 1 ms after `now`).
fn next_token(p: Pace, limit: RateLimit, now: i64) -> i64 {
    let from = p.at.min(now);
    let wait = ((1.0 - p.tokens).max(0.0) * limit.ms_per_token()).ceil() as i64;
    from.saturating_add(wait).max(now.saturating_add(1))
}

/// Whether a pool whose entry is `p` may launch at `now`: not while it cools down or the
/// fleet's bucket refused it, nor without a whole token under `limit`.
fn verdict(p: Pace, limit: Option<RateLimit>, now: i64) -> Result<(), Blocked> {
    if p.cooling_until > now {
        return Err(Blocked { reason: COOLING_DOWN, until: p.cooling_until });
    }
    if p.fleet_until > now {
        return Err(Blocked { reason: RATE_LIMITED, until: p.fleet_until });
    }
    let Some(limit) = limit else { return Ok(()) };
    if refilled(p, limit, now) < 1.0 {
        return Err(Blocked { reason: RATE_LIMITED, until: next_token(p, limit, now) });
    }
    Ok(())
}

/// The bucket's tokens at `now`: what it held, plus what came since, at most `burst`. A
/// clock that stepped back adds nothing.
fn refilled(p: Pace, limit: RateLimit, now: i64) -> f64 {
    let elapsed = (now.saturating_sub(p.at)).max(0) as f64;
    (p.tokens + elapsed / limit.ms_per_token()).min(f64::from(limit.burst))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const FIVE: RateLimit = RateLimit { launches_per_second: 5.0, burst: 2 };

    #[test]
    fn must_fire_a_pool_without_a_token_is_rate_limited_until_the_next_one_must_not_with_a_token() {
        let mut p = Pacing::default();
        assert_eq!(p.take("e2b", Some(FIVE), 1_000), Ok(()));
        assert_eq!(p.take("e2b", Some(FIVE), 1_000), Ok(()));
        // The burst is spent: the next token comes 200 ms later.
        assert_eq!(p.take("e2b", Some(FIVE), 1_000), Err(Blocked { reason: RATE_LIMITED, until: 1_200 }));
        assert_eq!(p.take("e2b", Some(FIVE), 1_199), Err(Blocked { reason: RATE_LIMITED, until: 1_200 }));
        assert_eq!(p.take("e2b", Some(FIVE), 1_200), Ok(()));
    }

    #[test]
    fn must_fire_a_cooldown_skips_the_pool_until_it_ends_must_not_after_or_without_one() {
        let mut p = Pacing::default();
        p.cool("daytona", None, 3_000, 10_000);
        assert_eq!(p.take("daytona", None, 12_999), Err(Blocked { reason: COOLING_DOWN, until: 13_000 }));
        assert_eq!(p.take("daytona", None, 13_000), Ok(()));
        // The passed cooldown said nothing more: no state is left.
        assert!(p.is_empty());
        // No Retry-After (0 ms): no cooldown.
        p.cool("daytona", None, 0, 20_000);
        assert_eq!(p.take("daytona", None, 20_000), Ok(()));
        assert!(p.is_empty());
    }

    #[test]
    fn must_fire_a_longer_cooldown_extends_must_not_a_shorter_one_shortening_it() {
        let mut p = Pacing::default();
        p.cool("e2b", Some(FIVE), 5_000, 0);
        p.cool("e2b", Some(FIVE), 1_000, 100);
        assert_eq!(p.peek("e2b", Some(FIVE), 4_999), Err(Blocked { reason: COOLING_DOWN, until: 5_000 }));
        p.cool("e2b", Some(FIVE), 9_000, 100);
        assert_eq!(p.peek("e2b", Some(FIVE), 5_000), Err(Blocked { reason: COOLING_DOWN, until: 9_100 }));
    }

    #[test]
    fn must_fire_a_refund_gives_the_token_back_must_not_above_the_burst() {
        let mut p = Pacing::default();
        let one = RateLimit { launches_per_second: 1.0, burst: 1 };
        assert_eq!(p.take("a", Some(one), 0), Ok(()));
        assert!(p.take("a", Some(one), 0).is_err());
        p.refund("a", Some(one), 0);
        assert_eq!(p.take("a", Some(one), 0), Ok(()));
        // A refund into a bucket that refilled meanwhile keeps it at its burst.
        p.refund("a", Some(one), 10_000);
        p.refund("a", Some(one), 10_000);
        assert_eq!(p.take("a", Some(one), 10_000), Ok(()));
        assert!(p.take("a", Some(one), 10_000).is_err());
    }

    #[test]
    fn must_fire_prune_drops_a_refilled_bucket_must_not_a_draining_one_or_a_cooldown() {
        let mut p = Pacing::default();
        p.take("a", Some(FIVE), 0).unwrap();
        p.take("b", Some(FIVE), 0).unwrap();
        p.cool("c", None, 60_000, 0);
        // At 100 ms, a's and b's buckets hold 1.5 of 2: kept.
        p.prune(100, |_| Some(FIVE));
        assert_eq!(p.len(), 3);
        // At 1 s they are full again; c still cools.
        p.prune(1_000, |id| (id != "c").then_some(FIVE));
        assert_eq!(p.len(), 1);
        p.prune(60_000, |_| None);
        assert!(p.is_empty());
    }

    #[test]
    fn must_fire_available_counts_whole_tokens_and_none_while_cooling_must_not_limit_an_unlimited_pool() {
        let mut p = Pacing::default();
        assert_eq!(p.available("a", Some(FIVE), 0), 2);
        p.take("a", Some(FIVE), 0).unwrap();
        assert_eq!(p.available("a", Some(FIVE), 0), 1);
        assert_eq!(p.available("a", Some(FIVE), 199), 1);
        assert_eq!(p.available("a", Some(FIVE), 200), 2);
        p.cool("a", Some(FIVE), 1_000, 300);
        assert_eq!(p.available("a", Some(FIVE), 300), 0);
        assert_eq!(p.available("b", None, 0), u32::MAX);
    }

    #[test]
    fn must_fire_a_clock_stepping_back_adds_no_token_must_not_forward() {
        let mut p = Pacing::default();
        let one = RateLimit { launches_per_second: 1.0, burst: 1 };
        p.take("a", Some(one), 10_000).unwrap();
        assert!(p.take("a", Some(one), 5_000).is_err());
        assert!(p.take("a", Some(one), 11_000).is_ok());
    }

    #[test]
    fn must_fire_a_fleet_refusal_holds_the_pool_back_with_a_local_token_must_not_after_its_time() {
        let mut p = Pacing::default();
        // This process has its whole burst, but the fleet's bucket is empty until 1_250.
        assert_eq!(p.available("e2b", Some(FIVE), 1_000), 2);
        let none = Blocked { reason: RATE_LIMITED, until: 1_250 };
        assert_eq!(p.fleet_refused("e2b", Some(FIVE), none, 1_000), None);
        assert_eq!(p.peek("e2b", Some(FIVE), 1_249), Err(none));
        assert_eq!(p.available("e2b", Some(FIVE), 1_249), 0);
        assert_eq!(p.take("e2b", Some(FIVE), 1_249), Err(none));
        // At the fleet's time the local bucket decides again (and still holds its burst).
        assert_eq!(p.take("e2b", Some(FIVE), 1_250), Ok(()));
        assert_eq!(p.take("e2b", Some(FIVE), 1_250), Ok(()));
        // Kept while it says something, pruned after.
        let mut q = Pacing::default();
        q.fleet_refused("a", Some(FIVE), none, 1_000);
        q.prune(1_100, |_| Some(FIVE));
        assert_eq!(q.len(), 1);
        q.prune(1_250, |_| Some(FIVE));
        assert!(q.is_empty());
    }

    #[test]
    fn must_fire_a_fleet_refusal_waits_at_least_the_recheck_floor_must_not_longer_than_named() {
        let mut p = Pacing::default();
        // A token "now" (the database's clock a little ahead): still not asked again at once.
        let now_token = Blocked { reason: RATE_LIMITED, until: 500 };
        p.fleet_refused("a", Some(FIVE), now_token, 500);
        assert_eq!(p.peek("a", Some(FIVE), 500), Err(Blocked { reason: RATE_LIMITED, until: 500 + FLEET_RECHECK_MS }));
        assert_eq!(p.peek("a", Some(FIVE), 500 + FLEET_RECHECK_MS), Ok(()));
        // A later time is kept as named.
        let later = Blocked { reason: RATE_LIMITED, until: 900 };
        p.fleet_refused("a", Some(FIVE), later, 600);
        assert_eq!(p.peek("a", Some(FIVE), 899), Err(later));
        assert_eq!(p.peek("a", Some(FIVE), 900), Ok(()));
    }

    #[test]
    fn must_fire_a_cooldown_learned_from_the_fleet_starts_here_must_not_again_when_not_extended() {
        let mut p = Pacing::default();
        let cooling = Blocked { reason: COOLING_DOWN, until: 4_000 };
        assert_eq!(p.fleet_refused("e2b", None, cooling, 1_000), Some(4_000));
        assert_eq!(p.take("e2b", None, 3_999), Err(cooling));
        // The same cooldown seen again (another provision's admission): not a new start.
        assert_eq!(p.fleet_refused("e2b", None, Blocked { reason: COOLING_DOWN, until: 3_000 }, 2_000), None);
        assert_eq!(p.fleet_refused("e2b", None, cooling, 2_000), None);
        // A longer one extends it.
        assert_eq!(p.fleet_refused("e2b", None, Blocked { reason: COOLING_DOWN, until: 6_000 }, 2_000), Some(6_000));
        assert_eq!(p.take("e2b", None, 6_000), Ok(()));
        assert_eq!(p.take_ended(), vec!["e2b".to_string()]);
    }

    #[test]
    fn must_fire_a_waiter_wakes_one_percent_of_the_interval_past_its_token_must_not_less_than_the_floor() {
        let one = RateLimit { launches_per_second: 1.0, burst: 1 };
        assert_eq!(wake_at(5_000, Some(one)), 5_010, "1 % of a second");
        assert_eq!(wake_at(5_000, Some(FIVE)), 5_002, "1 % of 200 ms is under the floor");
        assert_eq!(wake_at(5_000, None), 5_000 + WAKE_MARGIN_MS, "a cooldown's end");
        let daily = RateLimit { launches_per_second: MIN_LAUNCHES_PER_SECOND, burst: 1 };
        assert_eq!(wake_at(0, Some(daily)), 864_000, "1 % of a day");
    }

    #[test]
    fn rate_limit_is_read_strictly_naming_the_field() {
        let ok = RateLimit::read(&json!({ "launchesPerSecond": 5 }), "rateLimit").unwrap();
        assert_eq!(ok, RateLimit { launches_per_second: 5.0, burst: 1 });
        let bad = |v: Value| RateLimit::read(&v, "rateLimit").unwrap_err().field;
        assert_eq!(bad(json!({})), "rateLimit.launchesPerSecond");
        assert_eq!(bad(json!({ "launchesPerSecond": 0 })), "rateLimit.launchesPerSecond");
        assert_eq!(bad(json!({ "launchesPerSecond": -1 })), "rateLimit.launchesPerSecond");
        assert_eq!(bad(json!({ "launchesPerSecond": null })), "rateLimit.launchesPerSecond");
        assert_eq!(bad(json!({ "launchesPerSecond": "5" })), "rateLimit.launchesPerSecond");
        assert_eq!(bad(json!({ "launchesPerSecond": 5, "burst": 0 })), "rateLimit.burst");
        assert_eq!(bad(json!({ "launchesPerSecond": 5, "burst": 1.5 })), "rateLimit.burst");
        assert_eq!(bad(json!({ "launchesPerSecond": 5, "brust": 2 })), "rateLimit.brust");
        assert_eq!(bad(json!(5)), "rateLimit");
    }

    proptest! {
        /// However takes and refunds interleave, no window of one second holds more than
        /// `rate + burst` taken tokens.
        #[test]
        fn never_more_than_rate_plus_burst_in_a_second(
            rate in 1u32..20, burst in 1u32..10, steps in proptest::collection::vec((0i64..50, any::<bool>()), 1..400)
        ) {
            let limit = RateLimit { launches_per_second: f64::from(rate), burst };
            let mut p = Pacing::default();
            let mut now = 0i64;
            let mut taken: Vec<i64> = Vec::new();
            for (dt, refund) in steps {
                now += dt;
                if p.take("x", Some(limit), now).is_ok() {
                    if refund {
                        p.refund("x", Some(limit), now);
                    } else {
                        taken.push(now);
                    }
                }
            }
            for (i, &t) in taken.iter().enumerate() {
                let within = taken[i..].iter().take_while(|&&u| u < t + 1_000).count();
                prop_assert!(within as u32 <= rate + burst, "{within} launches within a second of {t}");
            }
        }
    }
}
