//! The wait queue (router option `queue: { maxWaitMs, maxDepth, fairBy }`): provisions whose
//! pools are all blocked by something time clears wait here, in a fair order, instead of
//! failing.
//!
//! What may wait: a pool skipped for pacing (no launch token, a `Retry-After` cooldown), for
//! capacity (a dimension full), for a budget's concurrent slot (or a refusal that launches
//! in flight could free), or because waiters ahead of the provision wait for it
//! ([`QUEUED`]). What may not: no eligible pool, a circuit open, a cost or launch budget
//! spent for its window, an unreadable capacity. A provision with at least one waitable
//! block waits; one with none fails at once, as without a queue.
//!
//! The order: without `fairBy`, first come, first served. With `fairBy: { label }`, each
//! value of that launch label is a lane and the lanes take turns (start-time fair queuing:
//! a waiter's rank is its lane's next rank, but never below the rank last served, so a lane
//! that bursts 100 waits behind its own burst while a quiet lane's next waiter goes next).
//!
//! Who tries: a waiter is *first in line* when no waiter ahead of it waits for any of its
//! pools. Only a first-in-line waiter sleeps on a timer (the earliest time one of its blocks
//! may clear: the next token, the cooldown's end, or a re-check of capacity after
//! [`RECHECK_MS`]); the others sleep until they are woken, when a waiter leaves or a sandbox
//! is given back. A newcomer, and a waiter that tries, skips the pools waiters ahead of it
//! wait for ([`QUEUED`]), so nobody takes a token or a slot out of turn.
//!
//! In a fleet (`capacity.coordinator`) the lanes are ordered across every process, by the
//! fleet's turns (`stores::pg::capacity`: the lane served least recently goes first), so here
//! a waiter is held back only by waiters ahead of it in its own lane ([`Queue::per_lane`]):
//! each lane's first waiter asks the fleet, and the fleet says whose turn it is.
//!
//! State is bounded: at most `maxDepth` waiters, and one lane per label value that has a
//! waiter (a lane is dropped with its last waiter).

use crate::core::events::PoolId;
use crate::core::json::{object, FieldError};
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Code of a provision that waited `maxWaitMs` without a pool freeing.
pub const QUEUE_TIMEOUT: &str = "QUEUE_TIMEOUT";
/// Code of a provision refused because `maxDepth` provisions wait already.
pub const QUEUE_FULL: &str = "QUEUE_FULL";
/// Code of a provision whose `AbortSignal` fired before its launch.
pub const ABORTED: &str = "ABORTED";
/// Code of a waiting provision when its router is closed.
pub const ROUTER_CLOSED: &str = "ROUTER_CLOSED";
/// Skip reason of a pool that waiters ahead of this provision wait for.
pub const QUEUED: &str = "QUEUED";
/// How long a first-in-line waiter blocked by capacity or a budget slot sleeps before it
/// reads again, ms, when no release in this process wakes it sooner (the room may free in
/// another process or at the provider).
pub const RECHECK_MS: i64 = 1_000;
/// Default `maxWaitMs`.
pub const DEFAULT_MAX_WAIT_MS: u64 = 30_000;
/// Longest `maxWaitMs` (an hour).
pub const MAX_WAIT_MS: u64 = 3_600_000;
/// Default `maxDepth`.
pub const DEFAULT_MAX_DEPTH: u32 = 1_000;
/// Largest `maxDepth`.
pub const MAX_DEPTH: u32 = 100_000;

/// The `queue` option, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// Longest wait, ms.
    pub max_wait_ms: u64,
    /// Most provisions waiting at once.
    pub max_depth: u32,
    /// The launch label whose values take turns (None: first come, first served).
    pub fair_by: Option<String>,
}

impl QueueConfig {
    /// Reads the `queue` option: absent, `null` or `false` is no queue; `true` or an object
    /// `{ maxWaitMs?, maxDepth?, fairBy?: { label } }` is one (each error names its field).
    pub fn read(v: &Value) -> Result<Option<QueueConfig>, FieldError> {
        match v {
            Value::Null | Value::Bool(false) => return Ok(None),
            Value::Bool(true) => {
                return Ok(Some(QueueConfig {
                    max_wait_ms: DEFAULT_MAX_WAIT_MS,
                    max_depth: DEFAULT_MAX_DEPTH,
                    fair_by: None,
                }))
            }
            _ => {}
        }
        let o = object(v, "queue", &["maxWaitMs", "maxDepth", "fairBy"])?;
        let max_wait_ms = o.integer_in("maxWaitMs", 1, MAX_WAIT_MS as i64)?.map_or(DEFAULT_MAX_WAIT_MS, |n| n as u64);
        let max_depth = o.integer_in("maxDepth", 1, i64::from(MAX_DEPTH))?.map_or(DEFAULT_MAX_DEPTH, |n| n as u32);
        let fair_by = match o.object("fairBy", &["label"])? {
            None => None,
            Some(f) => match f.string("label")? {
                Some(label) => Some(label.to_string()),
                None => {
                    return Err(FieldError::new(
                        f.field("label"),
                        "is required: the launch label whose values take turns",
                    ))
                }
            },
        };
        Ok(Some(QueueConfig { max_wait_ms, max_depth, fair_by }))
    }
}

/// One waiting provision.
#[derive(Debug, Clone)]
pub struct Waiter {
    rank: u64,
    seq: u64,
    lane: Option<String>,
    /// When it entered (router clock, ms).
    pub entered: i64,
    /// The pools it waits for.
    pub pools: Vec<PoolId>,
}

impl Waiter {
    /// When its wait runs out (router clock, ms).
    pub fn deadline(&self, max_wait_ms: u64) -> i64 {
        self.entered.saturating_add(max_wait_ms as i64)
    }
}

#[derive(Debug, Clone, Copy)]
struct Lane {
    next: u64,
    waiting: u32,
}

/// What [`Queue::status`] reports: the depth and oldest wait, overall and per lane.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueStatus {
    /// Provisions waiting.
    pub depth: usize,
    /// How long the oldest has waited, ms (0 when none waits).
    pub oldest_wait_ms: i64,
    /// Per fairness lane (label value; `""` for requests without the label): (value,
    /// depth, oldest wait ms), by value.
    pub lanes: Vec<(String, usize, i64)>,
}

/// The waiters, in their fair order.
#[derive(Debug)]
pub struct Queue {
    /// The option.
    pub config: QueueConfig,
    order: BTreeMap<(u64, u64), u32>,
    waiters: FxHashMap<u32, Waiter>,
    lanes: HashMap<String, Lane>,
    /// The rank of the waiter served last (fair queuing's virtual clock).
    served: u64,
    seq: u64,
    /// `router.close()` was called: nobody waits from now on.
    pub closed: bool,
    /// Only waiters of the same lane hold a waiter back (a fleet orders the lanes itself).
    pub per_lane: bool,
}

impl Queue {
    /// An empty queue.
    pub fn new(config: QueueConfig) -> Queue {
        Queue {
            config,
            order: BTreeMap::new(),
            waiters: FxHashMap::default(),
            lanes: HashMap::new(),
            served: 0,
            seq: 0,
            closed: false,
            per_lane: false,
        }
    }

    /// How many wait.
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Whether nobody waits.
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Waiter `key`, if it waits.
    pub fn get(&self, key: u32) -> Option<&Waiter> {
        self.waiters.get(&key)
    }

    /// Job `key` starts to wait at `now` for `pools`, in lane `lane` (its value of the
    /// `fairBy` label). False when `maxDepth` wait already (nothing changes).
    pub fn enter(&mut self, key: u32, lane: Option<&str>, pools: Vec<PoolId>, now: i64) -> bool {
        if self.waiters.contains_key(&key) {
            return true;
        }
        if self.waiters.len() >= self.config.max_depth as usize {
            return false;
        }
        self.seq += 1;
        let seq = self.seq;
        let (rank, lane) = match (&self.config.fair_by, lane) {
            (None, _) => (seq, None),
            (Some(_), value) => {
                let value = value.unwrap_or("").to_string();
                let served = self.served;
                let l = self.lanes.entry(value.clone()).or_insert(Lane { next: 0, waiting: 0 });
                let rank = l.next.max(served + 1);
                l.next = rank + 1;
                l.waiting += 1;
                (rank, Some(value))
            }
        };
        self.order.insert((rank, seq), key);
        self.waiters.insert(key, Waiter { rank, seq, lane, entered: now, pools });
        true
    }

    /// Waiter `key` waits for `pools` now (what blocked its last try).
    pub fn waits_for(&mut self, key: u32, pools: Vec<PoolId>) {
        if let Some(w) = self.waiters.get_mut(&key) {
            w.pools = pools;
        }
    }

    /// Waiter `key` leaves (admitted, timed out, aborted): its lane is dropped with its
    /// last waiter. None when it did not wait.
    pub fn leave(&mut self, key: u32) -> Option<Waiter> {
        let w = self.waiters.remove(&key)?;
        self.order.remove(&(w.rank, w.seq));
        self.served = self.served.max(w.rank);
        if let Some(value) = &w.lane {
            if let Some(l) = self.lanes.get_mut(value) {
                l.waiting -= 1;
                if l.waiting == 0 {
                    self.lanes.remove(value);
                }
            }
        }
        Some(w)
    }

    /// The pools waiters ahead of `key` wait for (every waiter's, for a job that does not
    /// wait; with [`Queue::per_lane`], only those of its own lane, `lane` for a job that does
    /// not wait): the pools `key` must skip as [`QUEUED`].
    pub fn ahead_of(&self, key: u32, lane: Option<&str>) -> Vec<PoolId> {
        let (until, lane) = match self.waiters.get(&key) {
            Some(w) => (Some((w.rank, w.seq)), w.lane.as_deref()),
            None => (None, lane),
        };
        let mut pools: Vec<PoolId> = Vec::new();
        for (&at, k) in &self.order {
            if Some(at) == until {
                break;
            }
            let w = &self.waiters[k];
            if self.per_lane && w.lane.as_deref() != lane {
                continue;
            }
            for p in &w.pools {
                if !pools.contains(p) {
                    pools.push(p.clone());
                }
            }
        }
        pools
    }

    /// Every pool a waiter waits for (warm refills leave them to the waiters).
    pub fn waited_pools(&self) -> Vec<PoolId> {
        let mut pools: Vec<PoolId> = Vec::new();
        for w in self.waiters.values() {
            for p in &w.pools {
                if !pools.contains(p) {
                    pools.push(p.clone());
                }
            }
        }
        pools
    }

    /// Whether no waiter ahead of `key` (of its lane, with [`Queue::per_lane`]) waits for any
    /// of its pools.
    pub fn first_in_line(&self, key: u32) -> bool {
        let Some(w) = self.waiters.get(&key) else { return false };
        let ahead = self.ahead_of(key, None);
        !w.pools.iter().any(|p| ahead.contains(p))
    }

    /// Every waiter first in line now, in fair order (those to wake when something frees).
    pub fn firsts(&self) -> Vec<u32> {
        let mut seen: Vec<(Option<&str>, &PoolId)> = Vec::new();
        let mut out = Vec::new();
        for k in self.order.values() {
            let w = &self.waiters[k];
            let lane = if self.per_lane { w.lane.as_deref() } else { None };
            if !w.pools.iter().any(|p| seen.contains(&(lane, p))) {
                out.push(*k);
            }
            for p in &w.pools {
                if !seen.contains(&(lane, p)) {
                    seen.push((lane, p));
                }
            }
        }
        out
    }

    /// Every waiter, in fair order.
    pub fn keys(&self) -> Vec<u32> {
        self.order.values().copied().collect()
    }

    /// The depth and oldest wait at `now`, overall and per lane.
    pub fn status(&self, now: i64) -> QueueStatus {
        let age = |w: &Waiter| now.saturating_sub(w.entered).max(0);
        let mut lanes: Vec<(String, usize, i64)> = self
            .lanes
            .keys()
            .map(|value| {
                let of = self.waiters.values().filter(|w| w.lane.as_deref() == Some(value.as_str()));
                let (n, oldest) = of.fold((0, 0), |(n, o), w| (n + 1, o.max(age(w))));
                (value.clone(), n, oldest)
            })
            .collect();
        lanes.sort_by(|a, b| a.0.cmp(&b.0));
        QueueStatus {
            depth: self.waiters.len(),
            oldest_wait_ms: self.waiters.values().map(age).max().unwrap_or(0),
            lanes,
        }
    }

    /// How many lanes are kept (the bound tests read it).
    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn fifo() -> Queue {
        Queue::new(QueueConfig { max_wait_ms: 1_000, max_depth: 3, fair_by: None })
    }

    fn fair() -> Queue {
        Queue::new(QueueConfig { max_wait_ms: 1_000, max_depth: 1_000, fair_by: Some("tenant".into()) })
    }

    fn p(id: &str) -> Vec<PoolId> {
        vec![PoolId::from(id)]
    }

    #[test]
    fn option_reads_defaults_and_names_the_field() {
        assert_eq!(QueueConfig::read(&json!(false)).unwrap(), None);
        let c = QueueConfig::read(&json!({})).unwrap().unwrap();
        assert_eq!((c.max_wait_ms, c.max_depth, c.fair_by), (DEFAULT_MAX_WAIT_MS, DEFAULT_MAX_DEPTH, None));
        assert_eq!(QueueConfig::read(&json!(true)).unwrap().unwrap().max_depth, DEFAULT_MAX_DEPTH);
        let c = QueueConfig::read(&json!({ "maxWaitMs": 5, "maxDepth": 2, "fairBy": { "label": "t" } })).unwrap();
        assert_eq!(c.unwrap().fair_by.as_deref(), Some("t"));
        for (bad, field) in [
            (json!({ "maxWaitMs": 0 }), "queue.maxWaitMs"),
            (json!({ "maxWaitMs": 1.5 }), "queue.maxWaitMs"),
            (json!({ "maxDepth": 100_001 }), "queue.maxDepth"),
            (json!({ "fairBy": {} }), "queue.fairBy.label"),
            (json!({ "fairBy": { "label": "" } }), "queue.fairBy.label"),
            (json!({ "fairBy": "t" }), "queue.fairBy"),
            (json!({ "maxwait": 1 }), "queue.maxwait"),
            (json!(3), "queue"),
        ] {
            assert_eq!(QueueConfig::read(&bad).unwrap_err().field, field, "{bad}");
        }
    }

    #[test]
    fn depth_bound_refuses_past_max_depth_and_admits_below_it() {
        let mut q = fifo();
        assert!(q.enter(1, None, p("a"), 0) && q.enter(2, None, p("a"), 0) && q.enter(3, None, p("a"), 0));
        assert!(!q.enter(4, None, p("a"), 0), "a fourth is refused");
        q.leave(1);
        assert!(q.enter(4, None, p("a"), 0), "room again");
    }

    #[test]
    fn fifo_first_in_line_is_the_oldest_of_a_pool_and_not_a_later_one() {
        let mut q = fifo();
        q.enter(7, None, p("a"), 0);
        q.enter(8, None, p("a"), 1);
        q.enter(9, None, p("b"), 2);
        assert!(q.first_in_line(7));
        assert!(!q.first_in_line(8), "behind 7 on pool a");
        assert!(q.first_in_line(9), "pool b: nobody ahead waits for it");
        assert_eq!(q.firsts(), vec![7, 9]);
        assert_eq!(q.ahead_of(8, None), p("a"));
        assert_eq!(q.ahead_of(99, None).len(), 2, "a newcomer skips every waited pool");
        q.leave(7);
        assert!(q.first_in_line(8));
    }

    #[test]
    fn fair_lanes_take_turns_and_a_burst_waits_behind_itself() {
        let mut q = fair();
        for k in 0..100 {
            q.enter(k, Some("burst"), p("a"), 0);
        }
        q.enter(500, Some("steady"), p("a"), 1);
        let order = q.keys();
        assert_eq!(order.iter().position(|&k| k == 500), Some(1), "the steady lane's waiter goes second");
        // FIFO (no fairBy): it would go last.
        let mut f = Queue::new(QueueConfig { max_wait_ms: 1, max_depth: 1_000, fair_by: None });
        for k in 0..100 {
            f.enter(k, Some("burst"), p("a"), 0);
        }
        f.enter(500, Some("steady"), p("a"), 1);
        assert_eq!(f.keys().last(), Some(&500));
    }

    #[test]
    fn per_lane_must_fire_a_waiter_of_another_lane_is_first_in_line_must_not_in_one_process() {
        for per_lane in [true, false] {
            let mut q = fair();
            q.per_lane = per_lane;
            for k in 0..3 {
                q.enter(k, Some("burst"), p("a"), 0);
            }
            q.enter(500, Some("steady"), p("a"), 1);
            // In one process the fair order holds the steady waiter behind the burst's first.
            assert_eq!(q.first_in_line(500), per_lane, "per_lane {per_lane}");
            assert_eq!(q.firsts(), if per_lane { vec![0, 500] } else { vec![0] });
            // Within its lane a waiter still waits its turn.
            assert!(!q.first_in_line(1));
            // A newcomer of a third lane skips nothing of the others' in a fleet; of the steady
            // lane it is behind the steady waiter.
            assert_eq!(q.ahead_of(999, Some("other")).is_empty(), per_lane);
            assert_eq!(q.ahead_of(999, Some("steady")), p("a"));
            assert_eq!(q.ahead_of(999, Some("burst")), p("a"));
            assert_eq!(q.waited_pools(), p("a"));
        }
    }

    #[test]
    fn lanes_are_dropped_with_their_last_waiter() {
        let mut q = fair();
        for k in 0..50 {
            q.enter(k, Some(&format!("tenant-{k}")), p("a"), 0);
        }
        assert_eq!(q.lanes(), 50);
        for k in 0..50 {
            q.leave(k);
        }
        assert_eq!((q.lanes(), q.len()), (0, 0));
    }

    #[test]
    fn status_reports_depth_oldest_and_lanes() {
        let mut q = fair();
        q.enter(1, Some("x"), p("a"), 100);
        q.enter(2, Some("y"), p("a"), 300);
        q.enter(3, None, p("a"), 350);
        let s = q.status(400);
        assert_eq!((s.depth, s.oldest_wait_ms), (3, 300));
        assert_eq!(s.lanes, vec![(String::new(), 1, 50), ("x".into(), 1, 300), ("y".into(), 1, 100)]);
    }

    proptest! {
        /// Whatever enters and leaves: the order holds every waiter once, lanes only those
        /// with a waiter, and each lane's waiters stay in their arrival order.
        #[test]
        fn order_and_lanes_stay_consistent(ops in proptest::collection::vec((0u32..40, 0u8..4, any::<bool>()), 1..200)) {
            let mut q = fair();
            let mut arrivals: Vec<(u32, u8)> = Vec::new();
            for (key, lane, enter) in ops {
                if enter {
                    if q.get(key).is_none() {
                        arrivals.push((key, lane));
                    }
                    q.enter(key, Some(&lane.to_string()), p("a"), 0);
                } else if q.leave(key).is_some() {
                    arrivals.retain(|(k, _)| *k != key);
                }
            }
            let keys = q.keys();
            prop_assert_eq!(keys.len(), q.len());
            let lanes: std::collections::HashSet<u8> = arrivals.iter().map(|(_, l)| *l).collect();
            prop_assert_eq!(q.lanes(), lanes.len());
            for lane in lanes {
                let want: Vec<u32> = arrivals.iter().filter(|(_, l)| *l == lane).map(|(k, _)| *k).collect();
                let got: Vec<u32> = keys.iter().copied().filter(|k| want.contains(k)).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
