//! The in-process budget ledger of one router: state proportional to what must be
//! remembered.
//!
//! Why not keep every charge? A router runs for months with a new tenant, user or request
//! id on every call. A ledger that keeps a bucket for every key it has seen and a record
//! for every charge its windows count grows with the traffic, not with what matters: a
//! daily cost rule kept a day of charges (15 MiB per 100,000 provisions of 100 tenants),
//! and a new tenant per request kept two buckets each for the router's lifetime (86 MiB
//! per 100,000 provisions, never given back). Rate limiters that run for years keep a few
//! numbers per key with an expiry instead (Redis-backed limiters, Envoy's rate limit
//! service); so does this ledger:
//!
//! - **A calendar window keeps running totals** per (rule, key, window): used and reserved
//!   cost and launches of the current window, and the window's start. When the rule's
//!   window rolls over (its span is computed once per window, per rule), the totals of the
//!   one before are over: the next touch of the key starts from zero.
//! - **A sliding window keeps one small event per charge for the window's span** (time,
//!   cost, state: 24 bytes), because what leaves the window must be subtracted exactly.
//! - **A charge itself** (its id, cost and buckets, ~100 bytes) is kept while it can still
//!   change something: while its launch is in flight, while its sandbox holds a concurrent
//!   slot (until `destroy`, a reclaim, or an outcome-unknown launch's settle window), and
//!   for the **settle horizon** after that ([`DEFAULT_SETTLE_HORIZON_MS`], the router option
//!   `limits.settleHorizonMs`), during which `settleCost` may still replace its cost in
//!   whatever window still counts it. After the horizon `settleCost` answers false.
//! - **A bucket that holds nothing** (no cost or launch in its current window, no slot, no
//!   launch in flight, no event, and no provision in flight whose plan names it) is freed:
//!   its slot and its place in the index are reused. Buckets are visited for this by a
//!   cursor that moves a few slots at every new key and every reservation, so the number of
//!   slots stays within a small factor of the keys that hold something, however many keys
//!   have come and gone. A provision's plan *pins* its buckets ([`Ledger::plan_keys`],
//!   released by [`Ledger::unplan`]) so that a bucket is never freed under a provision that
//!   will reserve in it.
//!
//! A charge names its buckets by (slot, generation): a bucket freed and reused for another
//! key has a new generation, so a late settlement or `settleCost` never touches another
//! key's totals. Charges are found by id through a hashbrown `HashTable` of (slot, 32-bit
//! hash) pairs (8 bytes each; growth reads no charge); docs/performance.md says why each
//! layout was chosen. Time only moves forward here: the ledger keeps the latest instant it
//! was given (`now`) and judges expiry by it, so a clock that steps back frees nothing
//! early.

use super::{check, ChargeRecord, Key, Micros, Refusal, Rule, Settle, StatusRow, Usage, Window};
use crate::core::ids::SandboxKey;
use hashbrown::HashTable;
use smallvec::SmallVec;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// The settle horizon's default and range: the router option `limits.settleHorizonMs`
/// (`core::router::options`).
pub use crate::core::router::options::{DEFAULT_SETTLE_HORIZON_MS, MAX_SETTLE_HORIZON_MS};
/// The most rows one `budgetStatus` page holds.
pub const MAX_STATUS_LIMIT: usize = 10_000;
/// The rows of a `budgetStatus` page that does not say `limit`.
pub const DEFAULT_STATUS_LIMIT: usize = 1_000;
/// Bucket slots visited for freeing before a new key takes a slot.
const SWEEP_PER_NEW_KEY: usize = 4;
/// Bucket slots visited at each reservation (keys that stop being used are freed too).
const SWEEP_PER_RESERVATION: usize = 1;
/// A free bucket slot's rule.
const FREE: u16 = u16::MAX;
/// A place's mark for a rule without a window.
const NO_WINDOW: i64 = i64::MIN;

/// A provision's buckets in the in-process ledger (see [`Ledger::plan_keys`]).
pub type Buckets = SmallVec<[u32; 2]>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EvState {
    Reserved,
    Used,
    /// Given back: counts nothing, kept so that sequence numbers stay dense.
    Gone,
}

/// One charge in one sliding window (24 bytes).
#[derive(Debug, Clone)]
struct Ev {
    at: i64,
    cost: Micros,
    state: EvState,
}

/// One rule's key.
#[derive(Debug)]
struct Bucket {
    /// The label's value (empty while the slot is free).
    value: Box<str>,
    /// Bumped when the slot is freed: a charge's place names the generation it was made in.
    gen: u32,
    /// Provisions in flight whose plan names this bucket.
    pins: u32,
    /// Rule index ([`FREE`] while the slot is free).
    rule: u16,
    /// A calendar rule: the start of the window the totals below belong to. A sliding
    /// rule: the sequence number of `events[0]`.
    window: i64,
    used_cost: Micros,
    reserved_cost: Micros,
    used_launches: u64,
    reserved_launches: u32,
    /// Slots of sandboxes that exist.
    live: u32,
    /// Slots of launches in flight.
    inflight: u32,
    /// Slots of outcome-unknown launches, held until their settle window passes.
    unknown: u32,
    /// A sliding rule's charges in the window, oldest first (None while there are none).
    #[allow(
        clippy::box_collection,
        reason = "8 bytes in every bucket instead of a 32-byte empty VecDeque: most buckets have none"
    )]
    events: Option<Box<VecDeque<Ev>>>,
}

impl Bucket {
    fn usage(&self) -> Usage {
        Usage {
            used_cost: self.used_cost,
            reserved_cost: self.reserved_cost,
            used_launches: self.used_launches,
            reserved_launches: u64::from(self.reserved_launches),
            live: u64::from(self.live) + u64::from(self.unknown),
            inflight: u64::from(self.inflight),
            oldest: self.events.as_ref().and_then(|q| q.iter().find(|e| e.state != EvState::Gone)).map(|e| e.at),
        }
    }

    /// Whether it holds nothing (its window refreshed) and no plan names it.
    fn idle(&self) -> bool {
        self.pins == 0
            && self.inflight == 0
            && self.live == 0
            && self.unknown == 0
            && self.used_launches == 0
            && self.reserved_launches == 0
            && self.used_cost == Micros::ZERO
            && self.reserved_cost == Micros::ZERO
            && self.events.is_none()
    }

    fn ev(&mut self, seq: i64) -> Option<&mut Ev> {
        let i = seq.checked_sub(self.window)?;
        self.events.as_mut()?.get_mut(usize::try_from(i).ok()?)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Reserved, its launch in flight.
    Reserved,
    /// Settled; its sandbox exists (or may) and holds its slot until released.
    Held,
    /// Settled with its outcome unknown: the slot is held until then.
    Until(i64),
    /// Its slot given back; kept for the settle horizon only.
    Released,
}

/// A charge's place in one of its buckets: the bucket (slot and generation) and its mark
/// there: a sliding window's event sequence number, a calendar window's start, or
/// [`NO_WINDOW`].
#[derive(Debug, Clone, Copy)]
struct Place {
    bucket: u32,
    gen: u32,
    mark: i64,
}

/// One provision's charge.
#[derive(Debug, Clone)]
struct Charge {
    sandbox: SandboxKey,
    at: i64,
    cost: Micros,
    state: State,
    places: SmallVec<[Place; 2]>,
}

/// What `budgetStatus` asks of the in-process ledger: rows in (rule, value) order, after
/// `after`, at most `limit`, optionally of one rule and one value.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatusQuery<'a> {
    /// Only this rule's keys.
    pub rule: Option<usize>,
    /// Only this label value.
    pub value: Option<&'a str>,
    /// Only rows after this (rule, value), in status order (the cursor: the last row of the
    /// page before).
    pub after: Option<(usize, &'a str)>,
    /// At most this many rows.
    pub limit: usize,
}

/// The in-process budget ledger of one router (without a shared coordinator). See the
/// module docs for what it keeps and for how long.
#[derive(Debug)]
pub struct Ledger {
    rules: Vec<Rule>,
    /// Each calendar rule's current window `[start, end)`, computed once per window.
    spans: Vec<(i64, i64)>,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    /// Bucket slots by (rule, value); found by comparing the bucket itself.
    index: HashTable<u32>,
    /// The slot the freeing cursor visits next.
    cursor: usize,
    charges: Vec<Option<Charge>>,
    /// Each charge slot's generation (bumped when its charge is removed).
    gens: Vec<u32>,
    free: Vec<u32>,
    /// Slots of `charges` by their charge's sandbox id: (slot, [`id_hash`] of the id), so
    /// that growing the table reads no charge.
    by_id: HashTable<(u32, u32)>,
    /// Outcome-unknown slots by when they lapse: (until, charge slot, generation).
    lapses: BinaryHeap<Reverse<(i64, u32, u32)>>,
    /// Released charges by when they are forgotten (in that order: the horizon is fixed and
    /// `now` only grows): (at, charge slot, generation).
    forget: VecDeque<(i64, u32, u32)>,
    /// The latest instant the ledger was given.
    now: i64,
    horizon: i64,
    /// Charges changed since the last [`Ledger::take_dirty`] (only when persisted).
    dirty: Option<Vec<SandboxKey>>,
}

impl Ledger {
    /// A ledger for `rules`; `persist`: record which charges change, for a durable store.
    pub fn new(rules: Vec<Rule>, persist: bool) -> Ledger {
        Ledger {
            spans: rules.iter().map(|_| (i64::MAX, i64::MIN)).collect(),
            rules,
            buckets: Vec::new(),
            free_buckets: Vec::new(),
            index: HashTable::new(),
            cursor: 0,
            charges: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            by_id: HashTable::new(),
            lapses: BinaryHeap::new(),
            forget: VecDeque::new(),
            now: i64::MIN,
            horizon: DEFAULT_SETTLE_HORIZON_MS,
            dirty: persist.then(Vec::new),
        }
    }

    /// Sets the settle horizon (ms, clamped to 0..=[`MAX_SETTLE_HORIZON_MS`]): how long a
    /// charge stays adjustable by `settleCost` after its slot was given back.
    pub fn set_settle_horizon(&mut self, ms: i64) {
        self.horizon = ms.clamp(0, MAX_SETTLE_HORIZON_MS);
    }

    /// The settle horizon, ms.
    pub fn settle_horizon(&self) -> i64 {
        self.horizon
    }

    /// The rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The applying rules' buckets for a request with `labels` (made on first use), in
    /// rule order, for [`Ledger::reserve_in`]; or `Err(rule)` for the first rule whose
    /// label is missing and that does not say `missing: 'allow'`. The buckets are pinned:
    /// none is freed until [`Ledger::unplan`] is given them (when the provision ends).
    pub fn plan_keys(&mut self, labels: &crate::core::labels::Labels) -> Result<Buckets, usize> {
        let mut buckets = Buckets::new();
        for i in 0..self.rules.len() {
            let r = &self.rules[i];
            match labels.iter().find(|(k, _)| *k == r.label) {
                Some((_, v)) => {
                    let b = self.bucket_of(i, v);
                    self.buckets[b as usize].pins += 1;
                    buckets.push(b);
                }
                None if r.missing_allow => {}
                None => {
                    self.unplan(&buckets);
                    return Err(i);
                }
            }
        }
        Ok(buckets)
    }

    /// The provision whose plan named `buckets` has ended: they may be freed once they
    /// hold nothing. (A plan never given back keeps its buckets: memory, never a wrong
    /// budget.)
    pub fn unplan(&mut self, buckets: &[u32]) {
        for &b in buckets {
            if let Some(bucket) = self.buckets.get_mut(b as usize) {
                bucket.pins = bucket.pins.saturating_sub(1);
            }
        }
    }

    /// The rule (index) of bucket `b`.
    pub fn rule_of(&self, b: u32) -> usize {
        self.buckets[b as usize].rule as usize
    }

    fn key_hash(rule: usize, value: &str) -> u64 {
        use std::hash::BuildHasher;
        rustc_hash::FxBuildHasher.hash_one((rule, value))
    }

    fn find(&self, rule: usize, value: &str) -> Option<u32> {
        let buckets = &self.buckets;
        self.index
            .find(Ledger::key_hash(rule, value), |&b| {
                let x = &buckets[b as usize];
                x.rule as usize == rule && &*x.value == value
            })
            .copied()
    }

    fn bucket_of(&mut self, rule: usize, value: &str) -> u32 {
        if let Some(b) = self.find(rule, value) {
            return b;
        }
        self.sweep(SWEEP_PER_NEW_KEY);
        let fresh = Bucket {
            value: value.into(),
            gen: 0,
            pins: 0,
            rule: rule as u16,
            window: i64::MIN,
            used_cost: Micros::ZERO,
            reserved_cost: Micros::ZERO,
            used_launches: 0,
            reserved_launches: 0,
            live: 0,
            inflight: 0,
            unknown: 0,
            events: None,
        };
        let b = match self.free_buckets.pop() {
            Some(b) => {
                let gen = self.buckets[b as usize].gen;
                self.buckets[b as usize] = Bucket { gen, ..fresh };
                b
            }
            None => {
                self.buckets.push(fresh);
                (self.buckets.len() - 1) as u32
            }
        };
        if matches!(self.rules[rule].window, Some(Window::Sliding { .. })) {
            self.buckets[b as usize].window = 0;
        }
        let buckets = &self.buckets;
        self.index.insert_unique(Ledger::key_hash(rule, value), b, |&x| {
            let x = &buckets[x as usize];
            Ledger::key_hash(x.rule as usize, &x.value)
        });
        b
    }

    /// Visits `n` bucket slots from the cursor and frees those that hold nothing.
    fn sweep(&mut self, n: usize) {
        for _ in 0..n.min(self.buckets.len()) {
            if self.cursor >= self.buckets.len() {
                self.cursor = 0;
            }
            let b = self.cursor as u32;
            self.cursor += 1;
            if self.buckets[b as usize].rule != FREE {
                self.refresh(b, self.now);
                if self.buckets[b as usize].idle() {
                    self.free_bucket(b);
                }
            }
        }
    }

    fn free_bucket(&mut self, b: u32) {
        let bucket = &self.buckets[b as usize];
        let h = Ledger::key_hash(bucket.rule as usize, &bucket.value);
        if let Ok(entry) = self.index.find_entry(h, |&x| x == b) {
            entry.remove();
        }
        let bucket = &mut self.buckets[b as usize];
        bucket.value = Box::from("");
        bucket.rule = FREE;
        bucket.gen = bucket.gen.wrapping_add(1);
        bucket.events = None;
        self.free_buckets.push(b);
    }

    /// Rule `rule`'s calendar window at `now`.
    fn span(&mut self, rule: usize, now: i64) -> (i64, i64) {
        let s = self.spans[rule];
        if s.0 <= now && now < s.1 {
            return s;
        }
        let s = match &self.rules[rule].window {
            Some(Window::Calendar { every, zone }) => Window::calendar(*every, zone, now),
            _ => (now, now.saturating_add(1)),
        };
        self.spans[rule] = s;
        s
    }

    /// Brings bucket `b` to `now`: a calendar window that rolled over starts from zero; a
    /// sliding window's charges older than its span leave it.
    fn refresh(&mut self, b: u32, now: i64) {
        let rule = self.buckets[b as usize].rule as usize;
        match self.rules[rule].window {
            None => {}
            Some(Window::Calendar { .. }) => {
                let (start, _) = self.span(rule, now);
                let bucket = &mut self.buckets[b as usize];
                // Only forward: a clock that steps back keeps the later window's totals.
                if start > bucket.window {
                    bucket.window = start;
                    bucket.used_cost = Micros::ZERO;
                    bucket.reserved_cost = Micros::ZERO;
                    bucket.used_launches = 0;
                    bucket.reserved_launches = 0;
                }
            }
            Some(Window::Sliding { ms }) => {
                let since = now.saturating_sub(ms).saturating_add(1);
                let bucket = &mut self.buckets[b as usize];
                let Some(q) = bucket.events.as_mut() else { return };
                while q.front().is_some_and(|e| e.at < since) {
                    let Some(e) = q.pop_front() else { break };
                    bucket.window += 1;
                    match e.state {
                        EvState::Used => {
                            bucket.used_cost = bucket.used_cost.minus(e.cost);
                            bucket.used_launches = bucket.used_launches.saturating_sub(1);
                        }
                        EvState::Reserved => {
                            bucket.reserved_cost = bucket.reserved_cost.minus(e.cost);
                            bucket.reserved_launches = bucket.reserved_launches.saturating_sub(1);
                        }
                        EvState::Gone => {}
                    }
                }
                if q.is_empty() {
                    bucket.events = None;
                }
            }
        }
    }

    /// Moves the ledger's clock to `now` (never back) and applies what that ends:
    /// outcome-unknown slots whose time is up, charges past their settle horizon.
    fn advance(&mut self, now: i64) {
        if now > self.now {
            self.now = now;
        }
        let now = self.now;
        while let Some(&Reverse((until, slot, gen))) = self.lapses.peek() {
            if until > now {
                break;
            }
            self.lapses.pop();
            if self.gens[slot as usize] != gen {
                continue;
            }
            let Some(c) = self.charges[slot as usize].as_mut() else { continue };
            if c.state != State::Until(until) {
                continue;
            }
            c.state = State::Released;
            for p in &c.places {
                let bucket = &mut self.buckets[p.bucket as usize];
                if bucket.gen == p.gen {
                    bucket.unknown = bucket.unknown.saturating_sub(1);
                }
            }
            let sandbox = c.sandbox;
            self.forget.push_back((now.saturating_add(self.horizon), slot, gen));
            self.touch(sandbox);
        }
        while let Some(&(at, slot, gen)) = self.forget.front() {
            if at > now {
                break;
            }
            self.forget.pop_front();
            if self.gens[slot as usize] == gen
                && self.charges[slot as usize].as_ref().is_some_and(|c| c.state == State::Released)
            {
                self.remove(slot);
            }
        }
    }

    fn charge(&mut self, slot: u32) -> Option<&mut Charge> {
        self.charges.get_mut(slot as usize).and_then(Option::as_mut)
    }

    fn touch(&mut self, sandbox: SandboxKey) {
        if let Some(d) = &mut self.dirty {
            d.push(sandbox);
        }
    }

    /// Removes the charge in `slot` from memory (a durable store's row is dropped by
    /// [`Ledger::take_dirty`] only for a charge given back whole).
    fn remove(&mut self, slot: u32) -> Option<Charge> {
        let c = self.charges[slot as usize].take()?;
        self.unindex(slot, c.sandbox);
        self.gens[slot as usize] = self.gens[slot as usize].wrapping_add(1);
        self.free.push(slot);
        Some(c)
    }

    /// The slot of `sandbox`'s charge.
    fn slot_of(&self, sandbox: SandboxKey) -> Option<u32> {
        let charges = &self.charges;
        let h = id_hash(sandbox);
        let owns =
            |&(slot, hs): &(u32, u32)| hs == h && charges[slot as usize].as_ref().is_some_and(|c| c.sandbox == sandbox);
        self.by_id.find(spread(h), owns).map(|e| e.0)
    }

    /// Indexes `slot` (its charge in place) under its sandbox id.
    fn index_charge(&mut self, slot: u32) {
        let Some(sandbox) = self.charges[slot as usize].as_ref().map(|c| c.sandbox) else { return };
        let h = id_hash(sandbox);
        self.by_id.insert_unique(spread(h), (slot, h), |e| spread(e.1));
    }

    fn unindex(&mut self, slot: u32, sandbox: SandboxKey) {
        let h = id_hash(sandbox);
        if let Ok(entry) = self.by_id.find_entry(spread(h), |e| e.0 == slot) {
            entry.remove();
        }
    }

    /// Key (`rule`, `value`) holds `usage` at `now`: what a decision read of it, as a replay
    /// restores it. Its totals are set as they were; a sliding window's charges become one at
    /// the oldest (they leave the window together: a replay decides at the recorded instant).
    /// The key stays pinned (a replay's router is dropped after it).
    pub fn seed(&mut self, rule: usize, value: &str, usage: &Usage, now: i64) {
        if rule >= self.rules.len() {
            return;
        }
        self.advance(now);
        let now = self.now;
        let b = self.bucket_of(rule, value);
        self.refresh(b, now);
        let calendar = matches!(self.rules[rule].window, Some(Window::Calendar { .. }));
        let start = if calendar { Some(self.span(rule, now).0) } else { None };
        let sliding = matches!(self.rules[rule].window, Some(Window::Sliding { .. }));
        let bucket = &mut self.buckets[b as usize];
        bucket.pins += 1;
        bucket.used_cost = usage.used_cost;
        bucket.reserved_cost = usage.reserved_cost;
        bucket.used_launches = usage.used_launches;
        bucket.reserved_launches = u32::try_from(usage.reserved_launches).unwrap_or(u32::MAX);
        bucket.live = u32::try_from(usage.live).unwrap_or(u32::MAX);
        bucket.inflight = u32::try_from(usage.inflight).unwrap_or(u32::MAX);
        bucket.unknown = 0;
        if let Some(start) = start {
            bucket.window = start;
        }
        if sliding && (usage.used_launches > 0 || usage.used_cost != Micros::ZERO) {
            let at = usage.oldest.unwrap_or(now);
            let mut q = VecDeque::new();
            q.push_back(Ev { at, cost: usage.used_cost, state: EvState::Used });
            bucket.events = Some(Box::new(q));
        }
    }

    /// The usage of `key` at `now` (a key the ledger does not keep holds nothing).
    pub fn usage(&mut self, key: &Key, now: i64) -> Usage {
        self.advance(now);
        let Some(b) = self.find(key.rule, &key.value) else { return Usage::default() };
        self.refresh(b, self.now);
        self.buckets[b as usize].usage()
    }

    /// [`Ledger::reserve_in`] with `keys` (each rule's bucket found by its value).
    pub fn reserve(&mut self, sandbox: SandboxKey, keys: &[Key], cost: f64, now: i64) -> Result<(), Vec<Refusal>> {
        let mut buckets = Buckets::new();
        for k in keys {
            let b = self.bucket_of(k.rule, &k.value);
            self.buckets[b as usize].pins += 1;
            buckets.push(b);
        }
        let r = self.reserve_in(sandbox, &buckets, cost, now).map(|_| ());
        self.unplan(&buckets);
        r
    }

    /// Reserves one launch of `cost` for provision `sandbox` in `buckets` (every rule that
    /// applies, from [`Ledger::plan_keys`]), at `now`: all or nothing. Returns the charge's
    /// slot (for [`Ledger::settle_in`]); on a refusal, every refusing rule's [`Refusal`] (in
    /// rule order) and nothing reserved. `cost` is in units (converted exactly to
    /// micro-units; a cost beyond [`super::MAX_COST`] fits no cost limit).
    pub fn reserve_in(
        &mut self,
        sandbox: SandboxKey,
        buckets: &[u32],
        cost: f64,
        now: i64,
    ) -> Result<u32, Vec<Refusal>> {
        let cost = Micros::saturating(cost);
        self.advance(now);
        self.sweep(SWEEP_PER_RESERVATION);
        let now = self.now;
        // A provision reserves again only after its previous launch settled or was skipped
        // (the machine settles first): a reservation still in flight under its id is given
        // back before anything is counted.
        if let Some(old) = self.slot_of(sandbox) {
            self.settle_slot(old, Settle::Nothing);
        }
        let mut refusals = Vec::new();
        for &b in buckets {
            self.refresh(b, now);
            let bucket = &self.buckets[b as usize];
            let rule = bucket.rule as usize;
            if let Err(r) = check(&self.rules[rule], rule, &bucket.value, &bucket.usage(), cost, now) {
                refusals.push(r);
            }
        }
        if !refusals.is_empty() {
            return Err(refusals);
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.charges.push(None);
                self.gens.push(0);
                (self.charges.len() - 1) as u32
            }
        };
        let mut places = SmallVec::with_capacity(buckets.len());
        for &b in buckets {
            let bucket = &mut self.buckets[b as usize];
            bucket.inflight += 1;
            let mark = match self.rules[bucket.rule as usize].window {
                None => NO_WINDOW,
                Some(Window::Calendar { .. }) => {
                    bucket.reserved_cost = bucket.reserved_cost.plus(cost);
                    bucket.reserved_launches += 1;
                    bucket.window
                }
                Some(Window::Sliding { .. }) => {
                    let q = bucket.events.get_or_insert_with(Default::default);
                    // Kept in time order: a clock that steps back does not reorder the window.
                    let at = q.back().map_or(now, |e| e.at.max(now));
                    q.push_back(Ev { at, cost, state: EvState::Reserved });
                    bucket.reserved_cost = bucket.reserved_cost.plus(cost);
                    bucket.reserved_launches += 1;
                    bucket.window + q.len() as i64 - 1
                }
            };
            places.push(Place { bucket: b, gen: bucket.gen, mark });
        }
        self.charges[slot as usize] = Some(Charge { sandbox, at: now, cost, state: State::Reserved, places });
        self.index_charge(slot);
        self.touch(sandbox);
        Ok(slot)
    }

    /// Settles provision `sandbox`'s reservation in flight (nothing happens without one).
    pub fn settle(&mut self, sandbox: SandboxKey, how: Settle) {
        if let Some(slot) = self.slot_of(sandbox) {
            self.settle_slot(slot, how);
        }
    }

    /// [`Ledger::settle`] of the charge [`Ledger::reserve_in`] put in `slot`, found there
    /// while it is still `sandbox`'s (else by its id).
    pub fn settle_in(&mut self, slot: u32, sandbox: SandboxKey, how: Settle) {
        match self.charges.get(slot as usize).and_then(Option::as_ref) {
            Some(c) if c.sandbox == sandbox => self.settle_slot(slot, how),
            _ => self.settle(sandbox, how),
        }
    }

    fn settle_slot(&mut self, slot: u32, how: Settle) {
        let Ledger { charges, buckets, rules, .. } = self;
        let Some(c) = charges.get_mut(slot as usize).and_then(Option::as_mut) else { return };
        if c.state != State::Reserved {
            return;
        }
        let (cost, sandbox) = (c.cost, c.sandbox);
        for p in &c.places {
            let bucket = &mut buckets[p.bucket as usize];
            if bucket.gen != p.gen {
                // Not possible while the launch is in flight (its slot pins the bucket).
                continue;
            }
            bucket.inflight = bucket.inflight.saturating_sub(1);
            match how {
                Settle::Allocated => bucket.live += 1,
                Settle::Unknown { .. } => bucket.unknown += 1,
                Settle::Nothing => {}
            }
            let counted = match rules[bucket.rule as usize].window {
                None => false,
                Some(Window::Calendar { .. }) => bucket.window == p.mark,
                Some(Window::Sliding { .. }) => match bucket.ev(p.mark) {
                    Some(e) if e.state == EvState::Reserved => {
                        e.state = if how == Settle::Nothing { EvState::Gone } else { EvState::Used };
                        true
                    }
                    _ => false,
                },
            };
            if counted {
                bucket.reserved_cost = bucket.reserved_cost.minus(cost);
                bucket.reserved_launches = bucket.reserved_launches.saturating_sub(1);
                if how != Settle::Nothing {
                    bucket.used_cost = bucket.used_cost.plus(cost);
                    bucket.used_launches += 1;
                }
            }
        }
        match how {
            Settle::Nothing => {
                self.remove(slot);
            }
            Settle::Allocated => c.state = State::Held,
            Settle::Unknown { until } => {
                c.state = State::Until(until);
                let gen = self.gens[slot as usize];
                self.lapses.push(Reverse((until, slot, gen)));
            }
        }
        self.touch(sandbox);
    }

    /// The sandbox of provision `sandbox` is gone (destroyed, or reclaimed): its concurrent
    /// slot is given back. Its cost and launch stay charged; the charge stays adjustable by
    /// [`Ledger::settle_cost`] for the settle horizon. True when it held a slot.
    pub fn release(&mut self, sandbox: SandboxKey) -> bool {
        let Some(slot) = self.slot_of(sandbox) else { return false };
        let Ledger { charges, buckets, .. } = self;
        let Some(c) = charges[slot as usize].as_mut() else { return false };
        let was = c.state;
        if matches!(was, State::Reserved | State::Released) {
            return false;
        }
        c.state = State::Released;
        for p in &c.places {
            let bucket = &mut buckets[p.bucket as usize];
            if bucket.gen != p.gen {
                continue;
            }
            match was {
                State::Held => bucket.live = bucket.live.saturating_sub(1),
                State::Until(_) => bucket.unknown = bucket.unknown.saturating_sub(1),
                State::Reserved | State::Released => {}
            }
        }
        let gen = self.gens[slot as usize];
        self.forget.push_back((self.now.saturating_add(self.horizon), slot, gen));
        self.touch(sandbox);
        true
    }

    /// The charge made under provision `from` now belongs to sandbox `to`: a warm claim
    /// hands out a member whose id (in its stamp) was made when it was launched, so
    /// `destroy` and `settleCost` name `to`. Nothing happens without a charge under `from`.
    pub fn rekey(&mut self, from: SandboxKey, to: SandboxKey) {
        if from == to {
            return;
        }
        let Some(slot) = self.slot_of(from) else { return };
        // A charge already under `to` (none is: warm members are charged to nobody) is
        // no longer found by it.
        if let Some(other) = self.slot_of(to) {
            self.unindex(other, to);
        }
        self.unindex(slot, from);
        if let Some(c) = self.charge(slot) {
            c.sandbox = to;
        }
        self.index_charge(slot);
        self.touch(from);
        self.touch(to);
    }

    /// Replaces provision `sandbox`'s cost (the estimate, or an earlier settlement) with
    /// `actual` (units), in the windows that still count it. False when the ledger no
    /// longer knows the charge: never charged, or its slot was given back more than the
    /// settle horizon ago.
    pub fn settle_cost(&mut self, sandbox: SandboxKey, actual: f64) -> bool {
        let actual = Micros::saturating(actual);
        let Some(slot) = self.slot_of(sandbox) else { return false };
        let Ledger { charges, buckets, rules, .. } = self;
        let Some(c) = charges[slot as usize].as_mut() else { return false };
        let old = std::mem::replace(&mut c.cost, actual);
        let reserved = c.state == State::Reserved;
        for p in &c.places {
            let bucket = &mut buckets[p.bucket as usize];
            if bucket.gen != p.gen {
                continue;
            }
            let (reserved_now, counted) = match rules[bucket.rule as usize].window {
                None => (false, false),
                Some(Window::Calendar { .. }) => (reserved, bucket.window == p.mark),
                Some(Window::Sliding { .. }) => match bucket.ev(p.mark) {
                    Some(e) if e.state != EvState::Gone => {
                        e.cost = actual;
                        (e.state == EvState::Reserved, true)
                    }
                    _ => (false, false),
                },
            };
            if counted {
                let sum = if reserved_now { &mut bucket.reserved_cost } else { &mut bucket.used_cost };
                *sum = sum.minus(old).plus(actual);
            }
        }
        self.touch(sandbox);
        true
    }

    /// Every key that holds something, per rule, at `now` (rule order, then value order).
    pub fn status(&mut self, now: i64) -> Vec<StatusRow> {
        self.status_page(now, &StatusQuery { limit: usize::MAX, ..StatusQuery::default() })
    }

    /// One page of [`Ledger::status`]: the rows `q` asks for, in (rule, value) order. An
    /// exact (rule, value) reads one bucket; otherwise every bucket is visited once (and
    /// those found holding nothing are freed), keeping the first `q.limit` rows.
    pub fn status_page(&mut self, now: i64, q: &StatusQuery<'_>) -> Vec<StatusRow> {
        self.advance(now);
        let now = self.now;
        let limit = q.limit;
        if limit == 0 {
            return Vec::new();
        }
        let after = |rule: usize, value: &str| match q.after {
            None => true,
            Some((r, v)) => (rule, value) > (r, v),
        };
        let mut picked: Vec<u32> = Vec::new();
        if let (Some(rule), Some(value)) = (q.rule, q.value) {
            if let Some(b) = self.find(rule, value) {
                self.refresh(b, now);
                if !self.buckets[b as usize].holds_nothing() && after(rule, value) {
                    picked.push(b);
                }
            }
        } else {
            // The `limit` smallest (rule, value) after the cursor: a max-heap of that size.
            let mut heap: BinaryHeap<(usize, Box<str>, u32)> = BinaryHeap::new();
            for b in 0..self.buckets.len() as u32 {
                let rule = self.buckets[b as usize].rule;
                if rule == FREE || q.rule.is_some_and(|r| r != rule as usize) {
                    continue;
                }
                if q.value.is_some_and(|v| v != &*self.buckets[b as usize].value) {
                    continue;
                }
                self.refresh(b, now);
                let bucket = &self.buckets[b as usize];
                if bucket.holds_nothing() {
                    if bucket.idle() {
                        self.free_bucket(b);
                    }
                    continue;
                }
                if !after(rule as usize, &bucket.value) {
                    continue;
                }
                let smaller = heap.peek().is_none_or(|top| (rule as usize, &*bucket.value) < (top.0, &*top.1));
                if heap.len() < limit {
                    heap.push((rule as usize, bucket.value.clone(), b));
                } else if smaller {
                    heap.pop();
                    heap.push((rule as usize, bucket.value.clone(), b));
                }
            }
            picked = heap.into_sorted_vec().into_iter().map(|(_, _, b)| b).collect();
        }
        picked
            .into_iter()
            .map(|b| {
                let bucket = &self.buckets[b as usize];
                let rule = bucket.rule as usize;
                let usage = bucket.usage();
                let resets_at = self.rules[rule].window.as_ref().and_then(|w| w.resets_at(now, usage.oldest));
                StatusRow { rule, value: bucket.value.to_string(), usage, resets_at }
            })
            .collect()
    }

    /// How many rows [`Ledger::status_page`] would list for `rule` and `value` (each
    /// optional), without building them.
    pub fn count(&mut self, now: i64, rule: Option<usize>, value: Option<&str>) -> usize {
        self.advance(now);
        let now = self.now;
        if let (Some(rule), Some(value)) = (rule, value) {
            return self.find(rule, value).is_some_and(|b| {
                self.refresh(b, now);
                !self.buckets[b as usize].holds_nothing()
            }) as usize;
        }
        let mut n = 0;
        for b in 0..self.buckets.len() as u32 {
            let r = self.buckets[b as usize].rule;
            if r == FREE || rule.is_some_and(|x| x != r as usize) {
                continue;
            }
            if value.is_some_and(|v| v != &*self.buckets[b as usize].value) {
                continue;
            }
            self.refresh(b, now);
            if !self.buckets[b as usize].holds_nothing() {
                n += 1;
            }
        }
        n
    }

    /// Charges changed since the last call, as a durable store writes them: the record, or
    /// None when the charge was given back whole (delete its row). Empty unless persisted.
    /// A charge forgotten after its settle horizon is not reported: its row says until when
    /// it counts ([`ChargeRecord::counts_until`]), and the store drops it after that.
    pub fn take_dirty(&mut self) -> Vec<(SandboxKey, Option<ChargeRecord>)> {
        let Some(d) = &mut self.dirty else { return Vec::new() };
        let mut ids = std::mem::take(d);
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter().map(|s| (s, self.record(s))).collect()
    }

    fn record(&self, s: SandboxKey) -> Option<ChargeRecord> {
        let c = self.charges[self.slot_of(s)? as usize].as_ref()?;
        let counts_until = match c.state {
            State::Reserved | State::Held | State::Until(_) => i64::MAX,
            State::Released => c
                .places
                .iter()
                .filter(|p| self.buckets[p.bucket as usize].gen == p.gen)
                .map(|p| {
                    let bucket = &self.buckets[p.bucket as usize];
                    match &self.rules[bucket.rule as usize].window {
                        None => i64::MIN,
                        Some(w @ Window::Calendar { .. }) => w.resets_at(p.mark, None).unwrap_or(i64::MIN),
                        Some(Window::Sliding { ms }) => c.at.saturating_add(*ms),
                    }
                })
                .max()
                .unwrap_or(i64::MIN),
        };
        Some(ChargeRecord {
            sandbox: s,
            at: c.at,
            cost: c.cost,
            settled: c.state != State::Reserved,
            live: match c.state {
                State::Reserved | State::Held => Some(None),
                State::Until(t) => Some(Some(t)),
                State::Released => None,
            },
            keys: c
                .places
                .iter()
                .filter(|p| self.buckets[p.bucket as usize].gen == p.gen)
                .map(|p| {
                    let bucket = &self.buckets[p.bucket as usize];
                    (self.rules[bucket.rule as usize].id.clone(), bucket.value.to_string())
                })
                .collect(),
            counts_until,
        })
    }

    /// Rebuilds the ledger from a durable store's charges after a restart, at `now`. Each
    /// record's cost and launch count again in the windows that still count it; a charge
    /// that still holds a slot is kept (a launch that was in flight when its process
    /// stopped is settled as outcome unknown, its slot held until `unknown_until`); charges
    /// of rules that no longer exist are dropped. Returns the rows the store should rewrite:
    /// None for a released charge that counts in no window any more (drop its row), or the
    /// record with when it stops counting (a row written before `counts_until` was kept).
    pub fn restore(
        &mut self,
        mut records: Vec<ChargeRecord>,
        now: i64,
        unknown_until: i64,
    ) -> Vec<(SandboxKey, Option<ChargeRecord>)> {
        self.advance(now);
        let now = self.now;
        records.sort_by_key(|r| r.at);
        let mut rewrite = Vec::new();
        for r in records {
            let mut buckets = Buckets::new();
            for (id, value) in &r.keys {
                let Some(rule) = self.rules.iter().position(|x| &x.id == id) else { continue };
                let b = self.bucket_of(rule, value);
                self.buckets[b as usize].pins += 1;
                buckets.push(b);
            }
            if buckets.is_empty() || self.slot_of(r.sandbox).is_some() {
                self.unplan(&buckets);
                if buckets.is_empty() {
                    rewrite.push((r.sandbox, None));
                }
                continue;
            }
            let state = match (r.settled, r.live) {
                (_, None) => State::Released,
                (false, Some(_)) => State::Until(unknown_until),
                (true, Some(None)) => State::Held,
                (true, Some(Some(t))) if t > now => State::Until(t),
                (true, Some(Some(_))) => State::Released,
            };
            let mut places: SmallVec<[Place; 2]> = SmallVec::with_capacity(buckets.len());
            let mut counts_until = i64::MIN;
            for &b in &buckets {
                self.refresh(b, now);
                let rule = self.buckets[b as usize].rule as usize;
                let end = self.span(rule, now).1;
                let bucket = &mut self.buckets[b as usize];
                match state {
                    State::Held => bucket.live += 1,
                    State::Until(_) => bucket.unknown += 1,
                    State::Reserved | State::Released => {}
                }
                let mark = match &self.rules[bucket.rule as usize].window {
                    None => NO_WINDOW,
                    Some(w @ Window::Calendar { .. }) => {
                        // Counted when it was charged in the window that is current now.
                        if w.since(r.at) == bucket.window {
                            bucket.used_cost = bucket.used_cost.plus(r.cost);
                            bucket.used_launches += 1;
                            counts_until = counts_until.max(end);
                        }
                        bucket.window
                    }
                    Some(Window::Sliding { ms }) => {
                        if r.at >= now.saturating_sub(*ms).saturating_add(1) {
                            let q = bucket.events.get_or_insert_with(Default::default);
                            let at = q.back().map_or(r.at, |e| e.at.max(r.at));
                            q.push_back(Ev { at, cost: r.cost, state: EvState::Used });
                            bucket.used_cost = bucket.used_cost.plus(r.cost);
                            bucket.used_launches += 1;
                            counts_until = counts_until.max(at.saturating_add(*ms));
                            bucket.window + q.len() as i64 - 1
                        } else {
                            i64::MIN
                        }
                    }
                };
                places.push(Place { bucket: b, gen: bucket.gen, mark });
            }
            self.unplan(&buckets);
            if state == State::Released {
                // Its totals are counted; nothing it could change is left to remember.
                if counts_until == i64::MIN {
                    rewrite.push((r.sandbox, None));
                } else if r.counts_until != counts_until {
                    rewrite.push((r.sandbox, Some(ChargeRecord { counts_until, live: None, ..r })));
                }
                continue;
            }
            let slot = match self.free.pop() {
                Some(s) => s,
                None => {
                    self.charges.push(None);
                    self.gens.push(0);
                    (self.charges.len() - 1) as u32
                }
            };
            if let State::Until(t) = state {
                self.lapses.push(Reverse((t, slot, self.gens[slot as usize])));
            }
            self.charges[slot as usize] = Some(Charge { sandbox: r.sandbox, at: r.at, cost: r.cost, state, places });
            self.index_charge(slot);
        }
        rewrite
    }

    /// The latest instant the ledger was given (ms; `i64::MIN` before any).
    pub fn now(&self) -> i64 {
        self.now
    }

    /// Number of charges the ledger keeps (memory tests).
    pub fn charges(&self) -> usize {
        self.by_id.len()
    }

    /// Number of keys (buckets) the ledger keeps, and of slots (memory tests).
    pub fn buckets(&self) -> (usize, usize) {
        (self.buckets.len() - self.free_buckets.len(), self.buckets.len())
    }
}

impl Bucket {
    /// Whether a status lists it: nothing used, reserved or held (pins do not count).
    fn holds_nothing(&self) -> bool {
        self.inflight == 0
            && self.live == 0
            && self.unknown == 0
            && self.used_launches == 0
            && self.reserved_launches == 0
            && self.used_cost == Micros::ZERO
            && self.reserved_cost == Micros::ZERO
    }
}

/// The hash a charge is indexed by (32 bits: kept beside its slot).
fn id_hash(sandbox: SandboxKey) -> u32 {
    use std::hash::BuildHasher;
    let h = rustc_hash::FxBuildHasher.hash_one(sandbox);
    (h >> 32) as u32 ^ h as u32
}

/// [`id_hash`] as the table's 64-bit hash (its bucket from the low bits, its tag from the top).
fn spread(h: u32) -> u64 {
    u64::from(h) << 32 | u64::from(h)
}

#[cfg(test)]
mod tests {
    use super::super::{rules_of_option, Dimension, Every, Key, Settle, Usage, Window};
    use super::*;
    use jiff::tz::TimeZone;
    use jiff::Timestamp;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    const MIN: i64 = 60_000;
    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 86_400_000;

    fn sbx(n: u128) -> SandboxKey {
        SandboxKey::parse(&format!("sbx_{n:032x}")).expect("a key")
    }

    fn rules(v: Value) -> Vec<Rule> {
        rules_of_option(&v).expect("valid rules")
    }

    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>().expect("a timestamp").as_millisecond()
    }

    fn key(rule: usize, v: &str) -> Key {
        Key { rule, value: v.into() }
    }

    fn cost_rule(limit: f64, window: Value) -> Vec<Rule> {
        rules(json!([{ "id": "spend", "key": { "label": "tenant" }, "limit": { "cost": limit }, "window": window }]))
    }

    fn labels(v: &str) -> crate::core::labels::Labels {
        vec![("tenant".to_string(), v.to_string())].into()
    }

    /// One provision as the machine makes it: plan, reserve, settle, end (unplan).
    fn provision(l: &mut Ledger, id: u128, tenant: &str, cost: f64, now: i64) -> bool {
        let plan = l.plan_keys(&labels(tenant)).expect("keyed");
        let ok = match l.reserve_in(sbx(id), &plan, cost, now) {
            Ok(slot) => {
                l.settle_in(slot, sbx(id), Settle::Allocated);
                true
            }
            Err(_) => false,
        };
        l.unplan(&plan);
        ok
    }

    #[test]
    fn must_fire_a_cost_that_does_not_fit_is_refused_and_must_not_fire_one_that_fits() {
        let mut l = Ledger::new(cost_rule(3.0, json!({ "slidingMs": HOUR })), false);
        let k = [key(0, "acme")];
        assert!(l.reserve(sbx(1), &k, 2.0, 0).is_ok());
        let refused = l.reserve(sbx(2), &k, 2.0, 1).unwrap_err();
        assert_eq!(refused.len(), 1);
        let r = &refused[0];
        assert_eq!((r.dimension, r.limit, r.used, r.reserved, r.need), (Dimension::Cost, 3.0, 0.0, 2.0, 2.0));
        assert!(r.retryable, "the reservation in flight could free room");
        // A cheaper pool still fits (1 + 2 <= 3).
        assert!(l.reserve(sbx(2), &k, 1.0, 2).is_ok());
    }

    #[test]
    fn must_fire_a_refusal_is_not_retryable_when_used_alone_leaves_no_room() {
        let mut l = Ledger::new(cost_rule(3.0, json!({ "slidingMs": HOUR })), false);
        let k = [key(0, "acme")];
        l.reserve(sbx(1), &k, 2.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        let r = &l.reserve(sbx(2), &k, 2.0, 1).unwrap_err()[0];
        assert_eq!((r.used, r.reserved, r.retryable), (2.0, 0.0, false));
        assert_eq!(r.resets_at, Some(HOUR), "the sliding window frees the oldest charge an hour after it");
        // Over the limit on its own: never retryable, even with reservations in flight.
        l.reserve(sbx(3), &k, 1.0, 2).unwrap();
        let r = &l.reserve(sbx(4), &k, 5.0, 3).unwrap_err()[0];
        assert!(!r.retryable);
    }

    #[test]
    fn must_fire_launches_and_concurrent_limits_refuse_at_their_bounds() {
        let r = rules(json!([
            { "id": "n", "key": { "label": "t" }, "limit": { "launches": 2 }, "window": { "slidingMs": MIN } },
            { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 1 } },
        ]));
        let mut l = Ledger::new(r, false);
        let k = [key(0, "a"), key(1, "a")];
        l.reserve(sbx(1), &k, 0.0, 0).unwrap();
        let refused = l.reserve(sbx(2), &k, 0.0, 1).unwrap_err();
        assert_eq!(refused.iter().map(|r| r.dimension).collect::<Vec<_>>(), [Dimension::Concurrent]);
        assert!(refused[0].retryable && refused[0].resets_at.is_none());
        l.settle(sbx(1), Settle::Allocated);
        assert!(!l.reserve(sbx(2), &k, 0.0, 2).unwrap_err()[0].retryable, "a live sandbox is not in flight");
        assert!(l.release(sbx(1)), "destroy gives the slot back");
        l.reserve(sbx(2), &k, 0.0, 3).unwrap();
        l.settle(sbx(2), Settle::Allocated);
        l.release(sbx(2));
        let refused = l.reserve(sbx(3), &k, 0.0, 4).unwrap_err();
        assert_eq!(refused[0].dimension, Dimension::Launches, "2 launches per minute, however many were destroyed");
        assert!(l.reserve(sbx(3), &k, 0.0, MIN + 1).is_ok(), "the first launch left the window");
    }

    #[test]
    fn must_not_fire_keys_are_separate_budgets() {
        let mut l = Ledger::new(cost_rule(1.0, json!({ "slidingMs": HOUR })), false);
        l.reserve(sbx(1), &[key(0, "acme")], 1.0, 0).unwrap();
        assert!(l.reserve(sbx(2), &[key(0, "globex")], 1.0, 0).is_ok());
        assert!(l.reserve(sbx(3), &[key(0, "acme")], 1.0, 0).is_err());
    }

    #[test]
    fn must_fire_a_pre_allocation_failure_gives_everything_back() {
        let r = rules(json!([
            { "id": "s", "key": { "label": "t" }, "limit": { "cost": 1, "launches": 1 }, "window": { "every": "day" } },
            { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 1 } },
        ]));
        let mut l = Ledger::new(r, false);
        let k = [key(0, "a"), key(1, "a")];
        l.reserve(sbx(1), &k, 1.0, 0).unwrap();
        l.settle(sbx(1), Settle::Nothing);
        assert_eq!(l.usage(&k[0], 0), Usage::default());
        assert_eq!(l.usage(&k[1], 0), Usage::default());
        assert!(l.reserve(sbx(2), &k, 1.0, 0).is_ok());
        assert_eq!(l.charges(), 1);
    }

    #[test]
    fn must_not_fire_success_and_outcome_unknown_keep_the_charge() {
        let r = rules(json!([
            { "id": "s", "key": { "label": "t" }, "limit": { "cost": 2 }, "window": { "every": "day" } },
            { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 2 } },
        ]));
        let mut l = Ledger::new(r, false);
        let k = [key(0, "a"), key(1, "a")];
        l.reserve(sbx(1), &k, 1.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        l.reserve(sbx(2), &k, 1.0, 0).unwrap();
        l.settle(sbx(2), Settle::Unknown { until: 500 });
        let u = l.usage(&k[0], 10);
        assert_eq!((u.used_cost.units(), u.reserved_cost.units(), u.used_launches), (2.0, 0.0, 2));
        assert_eq!(l.usage(&k[1], 10).live, 2);
        // The outcome-unknown slot lapses at its settle window; its cost stays charged.
        assert_eq!(l.usage(&k[1], 500).live, 1);
        assert_eq!(l.usage(&k[0], 500).used_cost.units(), 2.0);
    }

    #[test]
    fn must_fire_a_rekeyed_charge_is_released_by_its_new_id_and_must_not_fire_by_the_old() {
        let mut l = Ledger::new(
            rules(
                json!([{"id": "c", "key": {"label": "t"}, "limit": {"concurrent": 1, "launches": 5}, "window": {"slidingMs": 60000}}]),
            ),
            false,
        );
        let buckets = l.plan_keys(&vec![("t".to_string(), "a".to_string())].into()).unwrap();
        l.reserve_in(sbx(1), &buckets, 1.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        l.rekey(sbx(1), sbx(2));
        assert!(!l.release(sbx(1)), "the old id holds nothing");
        assert!(l.reserve_in(sbx(3), &buckets, 1.0, 1).is_err(), "the slot is still held");
        assert!(l.settle_cost(sbx(2), 2.0), "the new id names the charge");
        assert!(l.release(sbx(2)), "the new id gives the slot back");
        assert!(l.reserve_in(sbx(3), &buckets, 1.0, 2).is_ok());
    }

    #[test]
    fn must_fire_settle_cost_replaces_the_estimate_and_must_not_fire_for_an_unknown_sandbox() {
        let mut l = Ledger::new(cost_rule(10.0, json!({ "every": "hour" })), false);
        let k = [key(0, "a")];
        l.reserve(sbx(1), &k, 2.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        assert!(l.settle_cost(sbx(1), 7.5));
        assert_eq!(l.usage(&k[0], 1).used_cost.units(), 7.5);
        assert!(l.reserve(sbx(2), &k, 3.0, 2).is_err(), "7.5 + 3 > 10");
        assert!(!l.settle_cost(sbx(9), 1.0));
        assert_eq!(l.usage(&k[0], 1).used_cost.units(), 7.5);
    }

    #[test]
    fn must_fire_a_calendar_window_resets_at_midnight_in_its_zone_and_must_not_fire_before() {
        let mut l = Ledger::new(cost_rule(1.0, json!({ "every": "day", "timeZone": "America/New_York" })), false);
        let k = [key(0, "a")];
        // 23:30 in New York (EST, UTC-5) is 04:30 UTC the next day.
        let late = ms("2026-01-15T04:30:00Z");
        l.reserve(sbx(1), &k, 1.0, late).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        let r = &l.reserve(sbx(2), &k, 1.0, ms("2026-01-15T04:59:59.999Z")).unwrap_err()[0];
        assert_eq!(r.resets_at, Some(ms("2026-01-15T05:00:00Z")), "midnight in New York");
        assert!(l.reserve(sbx(2), &k, 1.0, ms("2026-01-15T05:00:00Z")).is_ok());
    }

    #[test]
    fn must_fire_a_day_across_the_spring_dst_change_is_23_hours_long() {
        let zone = TimeZone::get("Europe/Berlin").unwrap();
        // 2026-03-29: clocks go from 02:00 CET to 03:00 CEST.
        let w = Window::Calendar { every: Every::Day, zone };
        let noon = ms("2026-03-29T10:00:00Z");
        assert_eq!(w.since(noon), ms("2026-03-28T23:00:00Z"), "midnight CET");
        assert_eq!(w.resets_at(noon, None), Some(ms("2026-03-29T22:00:00Z")), "midnight CEST");
        let mut l = Ledger::new(cost_rule(1.0, json!({ "every": "day", "timeZone": "Europe/Berlin" })), false);
        let k = [key(0, "a")];
        l.reserve(sbx(1), &k, 1.0, noon).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        // 23:59:59 CEST is within the same 23-hour day: still refused…
        assert!(l.reserve(sbx(2), &k, 1.0, ms("2026-03-29T21:59:59Z")).is_err());
        // …and a UTC-day rule would have reset two hours ago, which this one must not.
        assert!(l.reserve(sbx(2), &k, 1.0, ms("2026-03-29T22:00:00Z")).is_ok());
    }

    #[test]
    fn must_fire_a_day_across_the_autumn_dst_change_is_25_hours_long_and_hours_follow_the_clock() {
        let zone = TimeZone::get("Europe/Berlin").unwrap();
        // 2026-10-25: clocks go from 03:00 CEST back to 02:00 CET.
        let day = Window::Calendar { every: Every::Day, zone: zone.clone() };
        let t = ms("2026-10-25T12:00:00Z");
        let (s, e) = (day.since(t), day.resets_at(t, None).unwrap());
        assert_eq!((s, e), (ms("2026-10-24T22:00:00Z"), ms("2026-10-25T23:00:00Z")));
        assert_eq!(e - s, 25 * HOUR);
        // The repeated 02:00-03:00 hour is two windows, each an hour long.
        let hour = Window::Calendar { every: Every::Hour, zone };
        let first = ms("2026-10-25T00:30:00Z"); // 02:30 CEST
        let second = ms("2026-10-25T01:30:00Z"); // 02:30 CET
        assert_eq!(hour.since(first), ms("2026-10-25T00:00:00Z"));
        assert_eq!(hour.since(second), ms("2026-10-25T01:00:00Z"));
        assert_eq!(hour.resets_at(first, None), Some(hour.since(second)));
    }

    #[test]
    fn must_not_fire_hours_in_a_half_hour_zone_start_at_half_past_utc() {
        let hour = Window::Calendar { every: Every::Hour, zone: TimeZone::get("Asia/Kolkata").unwrap() };
        let t = ms("2026-05-01T10:10:00Z"); // 15:40 IST
        assert_eq!(hour.since(t), ms("2026-05-01T09:30:00Z"));
        assert_eq!(hour.resets_at(t, None), Some(ms("2026-05-01T10:30:00Z")));
    }

    #[test]
    fn weeks_start_on_monday_and_months_on_the_first_in_the_zone() {
        let utc = TimeZone::get("UTC").unwrap();
        let week = Window::Calendar { every: Every::Week, zone: utc.clone() };
        let t = ms("2026-01-15T12:00:00Z"); // a Thursday
        assert_eq!(week.since(t), ms("2026-01-12T00:00:00Z"));
        assert_eq!(week.resets_at(t, None), Some(ms("2026-01-19T00:00:00Z")));
        let month = Window::Calendar { every: Every::Month, zone: TimeZone::get("Asia/Tokyo").unwrap() };
        assert_eq!(month.since(ms("2026-02-28T16:00:00Z")), ms("2026-02-28T15:00:00Z"), "March 1st in Tokyo");
        let minute = Window::Calendar { every: Every::Minute, zone: utc };
        assert_eq!(minute.since(ms("2026-01-01T00:00:59.999Z")), ms("2026-01-01T00:00:00Z"));
    }

    #[test]
    fn must_fire_a_sliding_window_forgets_a_charge_exactly_its_length_later() {
        let mut l = Ledger::new(cost_rule(1.0, json!({ "slidingMs": 1000 })), false);
        let k = [key(0, "a")];
        l.reserve(sbx(1), &k, 1.0, 5_000).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        assert!(l.reserve(sbx(2), &k, 1.0, 5_999).is_err(), "must not fire 1 ms before");
        assert!(l.reserve(sbx(2), &k, 1.0, 6_000).is_ok());
    }

    #[test]
    fn a_window_that_rolls_over_mid_launch_does_not_double_count_the_settlement() {
        let mut l = Ledger::new(cost_rule(1.0, json!({ "every": "minute" })), false);
        let k = [key(0, "a")];
        l.reserve(sbx(1), &k, 1.0, 59_000).unwrap();
        // The minute ends while the launch is in flight; it settles in the next minute.
        assert_eq!(l.usage(&k[0], 60_000).reserved_cost.units(), 0.0);
        l.settle(sbx(1), Settle::Allocated);
        assert_eq!(l.usage(&k[0], 60_001).used_cost.units(), 0.0);
        assert!(l.reserve(sbx(2), &k, 1.0, 60_002).is_ok());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Reserve { key: u8, cost: u8 },
        Settle { which: u8, how: u8 },
        Release { which: u8 },
        Wait { ms: u16 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..2, 0u8..5).prop_map(|(key, cost)| Op::Reserve { key, cost }),
            (any::<u8>(), 0u8..3).prop_map(|(which, how)| Op::Settle { which, how }),
            any::<u8>().prop_map(|which| Op::Release { which }),
            (0u16..400).prop_map(|ms| Op::Wait { ms }),
        ]
    }

    proptest! {
        /// No admission sequence ever lets used + reserved exceed a limit, in any window
        /// kind, whatever the settlements, destroys and waits in between.
        #[test]
        fn no_admission_sequence_exceeds_a_limit(ops in proptest::collection::vec(op(), 1..200)) {
            let r = rules(json!([
                { "id": "cost", "key": { "label": "t" }, "limit": { "cost": 7 }, "window": { "slidingMs": 1000 } },
                { "id": "day", "key": { "label": "t" }, "limit": { "cost": 9, "launches": 5 }, "window": { "every": "minute", "timeZone": "Europe/Berlin" } },
                { "id": "live", "key": { "label": "t" }, "limit": { "concurrent": 3 } },
            ]));
            let mut l = Ledger::new(r, false);
            let mut now = 1_790_000_000_000i64;
            let mut made: Vec<SandboxKey> = Vec::new();
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Reserve { key: k, cost } => {
                        let v = if k == 0 { "a" } else { "b" };
                        let keys = [key(0, v), key(1, v), key(2, v)];
                        let s = sbx(i as u128 + 1);
                        if l.reserve(s, &keys, f64::from(cost), now).is_ok() {
                            made.push(s);
                        }
                    }
                    Op::Settle { which, how } if !made.is_empty() => {
                        let s = made[which as usize % made.len()];
                        let how = match how { 0 => Settle::Allocated, 1 => Settle::Nothing, _ => Settle::Unknown { until: now + 300 } };
                        l.settle(s, how);
                    }
                    Op::Release { which } if !made.is_empty() => {
                        let s = made[which as usize % made.len()];
                        l.release(s);
                    }
                    Op::Wait { ms } => now += i64::from(ms),
                    _ => {}
                }
                for v in ["a", "b"] {
                    let c = l.usage(&key(0, v), now);
                    prop_assert!(c.used_cost.plus(c.reserved_cost) <= Micros(7_000_000), "{c:?}");
                    let d = l.usage(&key(1, v), now);
                    prop_assert!(d.used_cost.plus(d.reserved_cost) <= Micros(9_000_000), "{d:?}");
                    prop_assert!(d.used_launches + d.reserved_launches <= 5, "{d:?}");
                    let c = l.usage(&key(2, v), now);
                    prop_assert!(c.live + c.inflight <= 3, "{c:?}");
                }
            }
        }
    }

    // --- what the ledger keeps, and for how long (issue 34) --------------------------------

    #[test]
    fn must_fire_an_empty_bucket_is_freed_and_its_slot_reused() {
        let r = rules(json!([{ "id": "live", "key": { "label": "tenant" }, "limit": { "concurrent": 5 } }]));
        let mut l = Ledger::new(r, false);
        assert!(provision(&mut l, 1, "a", 0.0, 0));
        assert!(l.release(sbx(1)));
        assert_eq!(l.buckets(), (1, 1), "kept until a sweep finds it empty");
        // The next new key sweeps: `a` holds nothing (no slot, no window) and is freed.
        assert!(provision(&mut l, 2, "b", 0.0, 1));
        assert_eq!(l.buckets(), (1, 1), "b took a's slot");
        assert_eq!(l.usage(&key(0, "a"), 2), Usage::default());
        assert_eq!(l.usage(&key(0, "b"), 2).live, 1);
    }

    #[test]
    fn must_not_fire_a_bucket_with_a_live_charge_is_kept() {
        let r = rules(json!([{ "id": "live", "key": { "label": "tenant" }, "limit": { "concurrent": 1 } }]));
        let mut l = Ledger::new(r, false);
        assert!(provision(&mut l, 1, "a", 0.0, 0));
        for i in 0..20 {
            assert!(provision(&mut l, 100 + i, &format!("t{i}"), 0.0, 1));
            l.release(sbx(100 + i));
        }
        assert_eq!(l.usage(&key(0, "a"), 2).live, 1, "a's sandbox still holds its slot");
        assert!(!provision(&mut l, 2, "a", 0.0, 3), "and its limit still refuses");
    }

    #[test]
    fn must_fire_a_calendar_bucket_is_freed_once_its_window_is_over_and_must_not_fire_inside_it() {
        let mut l = Ledger::new(cost_rule(100.0, json!({ "every": "day" })), false);
        let day1 = ms("2026-01-01T12:00:00Z");
        for i in 0..10u128 {
            assert!(provision(&mut l, i + 1, &format!("d1-{i}"), 1.0, day1));
            l.release(sbx(i + 1));
        }
        // Inside its day, each key holds its spend: new keys the same day must not free them.
        for i in 0..10u128 {
            assert!(provision(&mut l, 100 + i, &format!("d1b-{i}"), 1.0, day1 + 1));
            l.release(sbx(100 + i));
        }
        assert_eq!(l.buckets().0, 20, "every tenant active today is remembered");
        assert_eq!(l.usage(&key(0, "d1-3"), day1 + 2).used_cost, Micros(1_000_000));
        // The next day the same number of new keys takes the first day's slots.
        let day2 = day1 + DAY;
        for i in 0..20u128 {
            assert!(provision(&mut l, 200 + i, &format!("d2-{i}"), 1.0, day2));
            l.release(sbx(200 + i));
        }
        // The first new key of the day sweeps before the ledger has seen the day (a plan
        // reads no clock): one slot more, at most.
        let (keys, slots) = l.buckets();
        assert!(keys == 20 && slots <= 21, "day 1's memory reused: {keys} keys in {slots} slots");
        assert_eq!(l.usage(&key(0, "d1-3"), day2), Usage::default());
    }

    #[test]
    fn must_fire_a_sliding_bucket_is_freed_once_its_charges_leave_the_window_and_must_not_fire_before() {
        let mut l = Ledger::new(cost_rule(100.0, json!({ "slidingMs": MIN })), false);
        assert!(provision(&mut l, 1, "a", 1.0, 0));
        l.release(sbx(1));
        assert!(provision(&mut l, 2, "b", 1.0, MIN - 1));
        assert_eq!(l.buckets().0, 2, "a's charge is still in its window");
        assert!(provision(&mut l, 3, "c", 1.0, MIN));
        assert_eq!(l.usage(&key(0, "a"), MIN), Usage::default(), "a left its window");
        assert!(provision(&mut l, 4, "d", 1.0, MIN));
        assert_eq!(l.buckets(), (3, 3), "d took a's slot");
    }

    #[test]
    fn must_not_fire_a_bucket_named_by_a_plan_in_flight_is_never_freed() {
        let mut l = Ledger::new(cost_rule(100.0, json!({ "slidingMs": MIN })), false);
        let plan = l.plan_keys(&labels("held")).unwrap();
        // Many other keys come and go before the provision reserves (a slow capacity read).
        for i in 0..50u128 {
            assert!(provision(&mut l, 10 + i, &format!("t{i}"), 0.0, 2 * MIN * (i as i64 + 1)));
        }
        let slot = l.reserve_in(sbx(1), &plan, 1.0, 200 * MIN).expect("its bucket is still its own");
        l.settle_in(slot, sbx(1), Settle::Allocated);
        l.unplan(&plan);
        assert_eq!(l.usage(&key(0, "held"), 200 * MIN).used_cost, Micros(1_000_000));
        // must-fire: once unplanned and empty, it goes like any other.
        l.release(sbx(1));
        for i in 0..8u128 {
            provision(&mut l, 100 + i, &format!("u{i}"), 0.0, 300 * MIN);
        }
        assert_eq!(l.usage(&key(0, "held"), 300 * MIN), Usage::default());
    }

    #[test]
    fn must_fire_a_charge_past_the_settle_horizon_is_dropped() {
        let mut l = Ledger::new(cost_rule(100.0, json!({ "every": "day" })), false);
        l.set_settle_horizon(10 * MIN);
        assert!(provision(&mut l, 1, "a", 2.0, 0));
        assert!(l.release(sbx(1)));
        assert_eq!(l.charges(), 1);
        l.usage(&key(0, "a"), 10 * MIN);
        assert_eq!(l.charges(), 0, "forgotten once the horizon passed");
        assert!(!l.settle_cost(sbx(1), 5.0), "settleCost no longer finds it");
        assert_eq!(l.usage(&key(0, "a"), 10 * MIN + 1).used_cost, Micros(2_000_000), "its spend still counts today");
    }

    #[test]
    fn must_not_fire_a_charge_inside_the_settle_horizon_is_adjustable() {
        let mut l = Ledger::new(cost_rule(100.0, json!({ "every": "day" })), false);
        l.set_settle_horizon(10 * MIN);
        assert!(provision(&mut l, 1, "a", 2.0, 0));
        assert!(l.release(sbx(1)));
        l.usage(&key(0, "a"), 10 * MIN - 1);
        assert!(l.settle_cost(sbx(1), 0.2), "still within the horizon");
        assert_eq!(l.usage(&key(0, "a"), 10 * MIN - 1).used_cost.units(), 0.2);
        // A live sandbox's charge has no horizon: it stays for as long as the slot is held.
        assert!(provision(&mut l, 2, "a", 1.0, 0));
        l.usage(&key(0, "a"), DAY - 1);
        assert!(l.settle_cost(sbx(2), 0.5));
    }

    #[test]
    fn settle_cost_reads_back_its_decimal_and_a_million_settlements_sum_exactly() {
        let r = rules(
            json!([{ "id": "spend", "key": { "label": "tenant" }, "limit": { "cost": 1000000 }, "window": { "every": "month" } }]),
        );
        let mut l = Ledger::new(r, false);
        assert!(provision(&mut l, 1, "a", 1.0, 0));
        assert!(l.settle_cost(sbx(1), 0.2));
        assert_eq!(l.usage(&key(0, "a"), 0).used_cost.units(), 0.2, "not 0.19999999999999996");
        l.release(sbx(1));
        for i in 2..=1_000_000u128 {
            let plan = l.plan_keys(&labels("a")).unwrap();
            let slot = l.reserve_in(sbx(i), &plan, 0.3, 1).unwrap();
            l.settle_in(slot, sbx(i), Settle::Allocated);
            l.settle_cost(sbx(i), 0.2);
            l.release(sbx(i));
            l.unplan(&plan);
        }
        assert_eq!(l.usage(&key(0, "a"), 2).used_cost.units(), 200_000.0);
        assert_eq!(l.usage(&key(0, "a"), 2).used_launches, 1_000_000);
    }

    #[test]
    fn memory_of_new_keys_stays_bounded_after_their_windows() {
        let r = rules(json!([
            { "id": "burst", "key": { "label": "tenant" }, "limit": { "launches": 5, "concurrent": 5 }, "window": { "slidingMs": 1000 } },
        ]));
        let mut l = Ledger::new(r, false);
        l.set_settle_horizon(1000);
        // 100 provisions per window, each a new tenant, destroyed at once: ~100 keys and
        // ~100 charges hold something at any time.
        for i in 0..20_000u128 {
            assert!(provision(&mut l, i + 1, &format!("t{i}"), 0.0, (i * 10) as i64));
            l.release(sbx(i + 1));
        }
        let (keys, slots) = l.buckets();
        assert!(keys <= 200 && slots <= 400, "{keys} keys in {slots} slots");
        assert!(l.charges() <= 250, "{} charges", l.charges());
    }

    #[test]
    fn must_fire_status_pages_filter_and_count_without_building_rows() {
        let r = rules(json!([
            { "id": "a", "key": { "label": "tenant" }, "limit": { "launches": 100 }, "window": { "every": "day" } },
            { "id": "b", "key": { "label": "tenant" }, "limit": { "concurrent": 100 } },
        ]));
        let mut l = Ledger::new(r, false);
        for (i, t) in ["m", "c", "x", "a"].iter().enumerate() {
            let plan = l.plan_keys(&labels(t)).unwrap();
            let slot = l.reserve_in(sbx(i as u128 + 1), &plan, 0.0, 0).unwrap();
            l.settle_in(slot, sbx(i as u128 + 1), Settle::Allocated);
            l.unplan(&plan);
        }
        let page = |l: &mut Ledger, q: StatusQuery<'_>| -> Vec<(usize, String)> {
            l.status_page(1, &q).into_iter().map(|r| (r.rule, r.value)).collect()
        };
        let first = page(&mut l, StatusQuery { limit: 3, ..Default::default() });
        assert_eq!(first, [(0, "a".into()), (0, "c".into()), (0, "m".into())]);
        let next = page(&mut l, StatusQuery { limit: 3, after: Some((0, "m")), ..Default::default() });
        assert_eq!(next, [(0, "x".into()), (1, "a".into()), (1, "c".into())]);
        let rule_b =
            page(&mut l, StatusQuery { limit: 10, rule: Some(1), after: Some((1, "c")), ..Default::default() });
        assert_eq!(rule_b, [(1, "m".into()), (1, "x".into())]);
        assert_eq!(
            page(&mut l, StatusQuery { limit: 10, rule: Some(1), value: Some("x"), ..Default::default() }),
            [(1, "x".into())]
        );
        assert_eq!(l.count(1, None, None), 8);
        assert_eq!(l.count(1, Some(0), None), 4);
        assert_eq!(l.count(1, Some(0), Some("c")), 1);
        assert_eq!(l.count(1, None, Some("c")), 2);
    }

    #[test]
    fn must_not_fire_status_lists_no_key_that_holds_nothing() {
        let r = rules(json!([{ "id": "b", "key": { "label": "tenant" }, "limit": { "concurrent": 100 } }]));
        let mut l = Ledger::new(r, false);
        assert!(provision(&mut l, 1, "gone", 0.0, 0));
        l.release(sbx(1));
        let _planned = l.plan_keys(&labels("planned")).unwrap();
        assert!(l.status(1).is_empty());
        assert_eq!(l.count(1, None, None), 0);
        assert_eq!(l.count(1, Some(0), Some("planned")), 0);
    }

    #[test]
    fn persisted_charges_restore_the_spend_after_a_restart() {
        let r = || {
            rules(json!([
                { "id": "s", "key": { "label": "t" }, "limit": { "cost": 3 }, "window": { "every": "day" } },
                { "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 2 } },
            ]))
        };
        let mut l = Ledger::new(r(), true);
        l.set_settle_horizon(MIN);
        let k = [key(0, "a"), key(1, "a")];
        l.reserve(sbx(1), &k, 1.0, 0).unwrap();
        l.settle(sbx(1), Settle::Allocated);
        l.reserve(sbx(2), &k, 1.5, 1).unwrap();
        l.reserve(sbx(3), &k, 0.25, 1).unwrap_err();
        l.reserve(sbx(4), &[key(0, "a")], 0.25, 1).unwrap();
        l.settle(sbx(4), Settle::Allocated);
        l.release(sbx(4));
        let rows: Vec<ChargeRecord> = l.take_dirty().into_iter().filter_map(|(_, r)| r).collect();
        assert_eq!(rows.len(), 3);
        assert!(l.take_dirty().is_empty());
        // The released charge says until when it counts: the end of its day.
        let released = rows.iter().find(|r| r.sandbox == sbx(4)).unwrap();
        assert_eq!((released.live, released.counts_until), (None, DAY));
        // Forgetting it after the horizon writes nothing: its row stays until the day ends.
        l.usage(&k[0], 2 * MIN);
        assert_eq!(l.charges(), 2);
        assert!(l.take_dirty().is_empty());
        let mut again = Ledger::new(r(), true);
        again.restore(rows, 2, 100);
        assert_eq!(again.usage(&k[0], 2).used_cost.units(), 2.75, "a restart does not reset spend");
        assert_eq!(again.usage(&k[1], 2).live, 2, "the launch in flight is held as outcome unknown");
        assert_eq!(again.usage(&k[1], 100).live, 1);
        assert!(again.release(sbx(1)));
        assert_eq!(again.usage(&k[0], DAY).used_cost, Micros::ZERO, "the next day starts from zero");
    }

    /// The model the ledger must agree with: every charge kept for ever, every figure a sum
    /// over them (the ledger this one replaced, and the shared ledger's old summing query).
    #[derive(Debug, Default)]
    struct Model {
        charges: Vec<MCharge>,
    }

    #[derive(Debug, Clone)]
    struct MCharge {
        id: u128,
        at: i64,
        cost: i64,
        keys: Vec<usize>,
        /// 0 reserved, 1 held, 2 unknown, 3 released
        state: u8,
        until: i64,
        /// Forgotten by the ledger (past the horizon): settle_cost no longer finds it.
        forgotten_at: Option<i64>,
        gone: bool,
    }

    const WINDOWS: [i64; 2] = [1000, 0];

    impl Model {
        fn usage(&self, rule: usize, key: usize, now: i64) -> Usage {
            let in_window = |c: &MCharge| match rule {
                0 => c.at > now - WINDOWS[0],
                1 => c.at / MIN == now / MIN,
                _ => false,
            };
            let mine = self.charges.iter().filter(|c| !c.gone && c.keys.contains(&key));
            let mut u = Usage::default();
            for c in mine {
                if rule < 2 && in_window(c) {
                    if rule == 0 {
                        u.oldest = Some(u.oldest.map_or(c.at, |o: i64| o.min(c.at)));
                    }
                    if c.state == 0 {
                        u.reserved_cost = u.reserved_cost.plus(Micros(c.cost));
                        u.reserved_launches += 1;
                    } else {
                        u.used_cost = u.used_cost.plus(Micros(c.cost));
                        u.used_launches += 1;
                    }
                }
                match c.state {
                    0 => u.inflight += 1,
                    1 => u.live += 1,
                    2 if c.until > now => u.live += 1,
                    _ => {}
                }
            }
            u
        }
    }

    #[derive(Debug, Clone)]
    enum MOp {
        Reserve { key: u8, cost: u8 },
        Settle { which: u8, how: u8 },
        Release { which: u8 },
        SettleCost { which: u8, cost: u8 },
        Wait { ms: u16 },
    }

    fn mop() -> impl Strategy<Value = MOp> {
        prop_oneof![
            (0u8..3, 0u8..5).prop_map(|(key, cost)| MOp::Reserve { key, cost }),
            (any::<u8>(), 0u8..3).prop_map(|(which, how)| MOp::Settle { which, how }),
            any::<u8>().prop_map(|which| MOp::Release { which }),
            (any::<u8>(), 0u8..9).prop_map(|(which, cost)| MOp::SettleCost { which, cost }),
            (0u16..700).prop_map(|ms| MOp::Wait { ms }),
        ]
    }

    proptest! {
        /// After any sequence of reservations, settlements, destroys, `settleCost` and
        /// waits, every key's totals equal the sums over its charges (the model keeps every
        /// charge for ever), in a sliding window, a calendar window that rolls over, and a
        /// concurrent limit; and a charge is adjustable exactly while the ledger says so.
        #[test]
        fn totals_equal_the_sums_over_the_charges(ops in proptest::collection::vec(mop(), 1..250)) {
            let r = rules(json!([
                { "id": "slide", "key": { "label": "tenant" }, "limit": { "cost": 1000 }, "window": { "slidingMs": 1000 } },
                { "id": "minute", "key": { "label": "tenant" }, "limit": { "cost": 1000, "launches": 1000 }, "window": { "every": "minute" } },
                { "id": "live", "key": { "label": "tenant" }, "limit": { "concurrent": 1000 } },
            ]));
            let horizon = 500;
            let mut l = Ledger::new(r, false);
            l.set_settle_horizon(horizon);
            let mut m = Model::default();
            let mut now = 0i64;
            let names = ["a", "b", "c"];
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    MOp::Reserve { key, cost } => {
                        let id = i as u128 + 1;
                        let plan = l.plan_keys(&labels(names[key as usize])).unwrap();
                        let micros = i64::from(cost) * 250_000;
                        if l.reserve_in(sbx(id), &plan, micros as f64 / 1e6, now).is_ok() {
                            m.charges.push(MCharge { id, at: now, cost: micros, keys: vec![key as usize], state: 0, until: 0, forgotten_at: None, gone: false });
                        }
                        l.unplan(&plan);
                    }
                    MOp::Settle { which, how } if !m.charges.is_empty() => {
                        let n = which as usize % m.charges.len();
                        let c = &mut m.charges[n];
                        let how = match how { 0 => Settle::Allocated, 1 => Settle::Nothing, _ => Settle::Unknown { until: now + 300 } };
                        l.settle(sbx(c.id), how);
                        if c.state == 0 && !c.gone {
                            match how {
                                Settle::Allocated => c.state = 1,
                                Settle::Nothing => c.gone = true,
                                Settle::Unknown { until } => { c.state = 2; c.until = until; }
                            }
                        }
                    }
                    MOp::Release { which } if !m.charges.is_empty() => {
                        let n = which as usize % m.charges.len();
                        let c = &mut m.charges[n];
                        // An unknown slot that lapsed became released in `Wait`.
                        let held = !c.gone && (c.state == 1 || c.state == 2);
                        prop_assert_eq!(l.release(sbx(c.id)), held);
                        if held {
                            c.state = 3;
                            c.forgotten_at = Some(now + horizon);
                        }
                    }
                    MOp::SettleCost { which, cost } if !m.charges.is_empty() => {
                        let n = which as usize % m.charges.len();
                        let c = &mut m.charges[n];
                        let micros = i64::from(cost) * 100_000;
                        let known = !c.gone && c.forgotten_at.is_none_or(|t| now < t);
                        let found = l.settle_cost(sbx(c.id), micros as f64 / 1e6);
                        prop_assert_eq!(found, known, "{:?}", c);
                        if found { c.cost = micros; }
                    }
                    MOp::Wait { ms } => {
                        now += i64::from(ms);
                        // Unknown slots lapse at their time; their horizon starts then.
                        for c in m.charges.iter_mut().filter(|c| c.state == 2 && c.until <= now) {
                            c.state = 3;
                            c.forgotten_at = Some(now + horizon);
                        }
                    }
                    _ => {}
                }
                for (k, name) in names.iter().enumerate() {
                    for rule in 0..3 {
                        let got = l.usage(&key(rule, name), now);
                        let want = m.usage(rule, k, now);
                        prop_assert_eq!(got, want, "rule {} key {} at {}", rule, name, now);
                    }
                }
            }
        }
    }
}
