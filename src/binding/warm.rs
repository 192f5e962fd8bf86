//! napi glue for warm pools (`core::warm`): the router's inventory and refill state, the
//! refill machines, and the claim's answers; nothing is decided here.
//!
//! Why do refills run on the provision's machine? A member is the router's own sandbox:
//! a refill is an acquisition of one candidate (its pool), one attempt, no fallback, begun
//! here and then stepped with the very calls a provision uses (`acquisitionStep`,
//! `acquisitionAdmit`, `acquisitionIntent`, the outcome reports, `acquisitionEnd`), so it
//! is admitted and held under the capacity policy, counted in live health, bounded by a
//! deadline, recorded by a launch intent, and seen in flight by `reconcile`, exactly as a
//! provision's launch. Only its success is its own call ([`warm_refill_succeeded`]): the
//! record carries the warm label and the member joins the inventory.
//!
//! The inventory lives in this process (`core::warm::Warm`), or, with a PostgreSQL
//! coordinator, in the database (`stores::pg`): then this process keeps only its counters,
//! its refills in flight and its pause state, and `lib/warm*.js` asks the database.

use crate::binding::acquisition::{insert, step_into, with, Entry, WarmRole};
use crate::binding::error::{guard, internal, Failure, NativeError};
use crate::binding::ids::next_sandbox_id;
use crate::binding::mapping::write_record;
use crate::binding::registry::{registry_of, RegistryInner};
use crate::binding::request::request_of;
use crate::binding::router::{instant, router_of, RouterCore};
use crate::core::acquisition::{Acquisition, CapacityPlan};
use crate::core::capabilities::Lifetime;
use crate::core::error::ErrorClass;
use crate::core::health::CircuitState;
use crate::core::ids::SandboxKey;
use crate::core::json::FieldError;
use crate::core::request::{DEFAULT_ACQUISITION_TIMEOUT_MS, SANDBOX_WARM_LABEL};
use crate::core::warm::{reserve_count, routable, Member, MissReason, Warm, WarmConfig, WarmPool};
use napi::bindgen_prelude::Uint32ArraySlice;
use napi::Env;
use napi_derive::napi;
use std::sync::Arc;

/// The launch label that marks a warm member, its value the pool's id
/// (`core::request::SANDBOX_WARM_LABEL`).
#[napi]
pub const SANDBOX_WARM_LABEL_KEY: &str = SANDBOX_WARM_LABEL;

/// The deadline of one refill launch, ms (a request's default launch deadline).
#[napi]
pub const REFILL_TIMEOUT_MS: u32 = DEFAULT_ACQUISITION_TIMEOUT_MS as u32;

/// An idle member, as JavaScript sees it.
#[napi(object)]
pub struct WarmMemberRecord {
    /// Its pool.
    pub provider_id: String,
    /// Its router id.
    pub sandbox_id: String,
    /// The provider's id of it.
    pub provider_sandbox_id: String,
    /// When it became idle, router-clock epoch ms.
    pub launched_at: f64,
}

fn record(provider_id: &str, m: &Member) -> WarmMemberRecord {
    WarmMemberRecord {
        provider_id: provider_id.to_string(),
        sandbox_id: m.id.to_string(),
        provider_sandbox_id: m.provider_sandbox_id.clone(),
        launched_at: m.launched_at as f64,
    }
}

fn key_of(id: &str) -> Result<SandboxKey, Failure> {
    Ok(SandboxKey::parse_checked(id)?)
}

/// Runs `f` with the router's started warm pools (an internal error before `warmStart`).
fn warm_of<T>(core: &RouterCore, f: impl FnOnce(&mut Warm) -> T) -> Result<T, Failure> {
    let mut w = core.warm.borrow_mut();
    let w = w.as_mut().ok_or_else(|| internal("(warm pools are not started)"))?;
    Ok(f(w))
}

/// Whether pool `id`'s circuit is closed at `now` (always, without health tracking).
fn circuit_closed(core: &RouterCore, id: &str, now: Option<f64>) -> bool {
    core.health.as_ref().is_none_or(|h| {
        let h = h.borrow();
        h.find(id).is_none_or(|slot| matches!(h.state(slot, instant(now)), CircuitState::Closed))
    })
}

/// Starts a router's warm pools (`warmUp()`, once): `shared`, the inventory is the fleet's
/// (a PostgreSQL coordinator). Every warm pool of `registry` is made now, so members
/// adopted from a durable store can join before the first refill pass; claims are offered
/// from now on.
#[napi]
pub fn warm_start(env: Env, router: u32, registry: u32, shared: bool) -> napi::Result<()> {
    guard(&env, || {
        let (core, registry) = (router_of(router)?, registry_of(registry)?);
        let pools = warm_pools(&registry.borrow());
        let mut w = core.warm.borrow_mut();
        let w = w.get_or_insert_with(|| Warm::new(shared));
        for (_, id, config, lifetime) in pools {
            w.pool(&id, config, lifetime);
        }
        Ok(())
    })
}

/// Closes a router's warm pools (`close()`): no claim, no refill from now on.
#[napi]
pub fn warm_close(env: Env, router: u32) -> napi::Result<()> {
    guard(&env, || warm_of(&*router_of(router)?, |w| w.closed = true))
}

/// A pool's warm counts in the fleet's inventory, as the database answered them.
#[napi(object)]
pub struct WarmCounts {
    /// The pool.
    pub provider_id: String,
    /// Idle members, every process's.
    pub idle: f64,
    /// Refill launches granted and in flight, every process's.
    pub launching: f64,
}

/// What one warm pool needs now.
#[napi(object)]
pub struct WarmPlan {
    /// The pool's index in the registry.
    pub pool: u32,
    /// Its id.
    pub provider_id: String,
    /// Its `size`.
    pub target: u32,
    /// Refill launches to start now (this process's inventory: counted in flight already;
    /// the fleet's: to ask the database for, then `warmStarted` with what it granted).
    pub launches: u32,
    /// Members that expired (this process's inventory; taken out of it): destroy them.
    pub expired: Vec<WarmMemberRecord>,
    /// Members launched before this instant have expired (router-clock ms): the fleet's
    /// inventory expires them in the database.
    pub expiry_floor: f64,
    /// Refills resumed now (a launch on the pool succeeded since they paused).
    pub resumed: bool,
    /// Its idle members are due a re-resolution.
    pub check: bool,
    /// Why it cannot fill now (`PAUSED`, `CIRCUIT_OPEN`, `NOT_IN_PROVIDER_ORDER`); null
    /// when it is full or filling.
    pub reason: Option<String>,
    /// Whether it holds `size` idle members.
    pub ready: bool,
    /// Its idle members (this process's, or the fleet's count given).
    pub idle: f64,
    /// Its `checkIntervalMs` (the background pass runs at the shortest).
    pub check_interval_ms: f64,
}

/// One warm pool's declaration in `registry`: (index, id, config, lifetime).
fn warm_pools(inner: &RegistryInner) -> Vec<(usize, String, WarmConfig, Lifetime)> {
    inner
        .registry
        .pools()
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.warm.map(|c| (i, p.id.clone(), c, p.capabilities.max_lifetime)))
        .collect()
}

/// The refill pass's plan for every warm pool of `registry` at `now` (the router's clock;
/// `healthNow`: the health clock, for circuits): expired members taken out, paused pools
/// resumed when a launch succeeded since, checks that fell due, and how many refills to
/// start. `fleet`: the database's counts, with the fleet's inventory. Nothing once closed.
#[napi]
pub fn warm_plan(
    env: Env,
    router: u32,
    registry: u32,
    now: Option<f64>,
    health_now: Option<f64>,
    fleet: Option<Vec<WarmCounts>>,
) -> napi::Result<Vec<WarmPlan>> {
    guard(&env, || {
        let (core, registry) = (router_of(router)?, registry_of(registry)?);
        let inner = registry.borrow();
        let pools = warm_pools(&inner);
        drop(inner);
        let at = instant(now);
        let mut out = Vec::with_capacity(pools.len());
        for (index, id, config, lifetime) in pools {
            let closed = circuit_closed(&core, &id, health_now);
            let can_route = routable(core.provider_order(), &id);
            let counts = fleet.as_ref().and_then(|f| f.iter().find(|c| c.provider_id == id));
            let plan = warm_of(&core, |w| {
                if w.closed {
                    return None;
                }
                let shared = w.shared;
                let p = w.pool(&id, config, lifetime);
                let resumed = p.resume();
                let expired = if shared { Vec::new() } else { p.take_expired(at) };
                let check = p.check_due(at);
                let (idle, launches) = match (shared, counts) {
                    (false, _) => {
                        let n = if can_route { p.plan(closed) } else { 0 };
                        (p.idle().len() as u64, n)
                    }
                    (true, c) => {
                        let (idle, launching) =
                            c.map_or((0, 0), |c| (c.idle.max(0.0) as u64, c.launching.max(0.0) as u64));
                        let want = if can_route { p.wanted(closed) } else { 0 };
                        (idle, reserve_count(config.size, idle, launching, want))
                    }
                };
                let standing = p.standing(idle, closed, can_route);
                Some(WarmPlan {
                    pool: index as u32,
                    provider_id: id.clone(),
                    target: config.size,
                    launches,
                    expired: expired.iter().map(|m| record(&id, m)).collect(),
                    expiry_floor: p.expiry_floor(at) as f64,
                    resumed,
                    check,
                    reason: standing.reason().map(str::to_string),
                    ready: idle >= u64::from(config.size),
                    idle: idle as f64,
                    check_interval_ms: config.check_interval_ms as f64,
                })
            })?;
            out.extend(plan);
        }
        Ok(out)
    })
}

/// `n` refill launches of pool `providerId` were granted by the fleet's database.
#[napi]
pub fn warm_started(env: Env, router: u32, provider_id: String, n: u32) -> napi::Result<()> {
    guard(&env, || {
        warm_of(&*router_of(router)?, |w| {
            if let Some(p) = w.get_mut(&provider_id) {
                p.started(n);
            }
        })
    })
}

/// Begins a refill of pool `pool` (registry index) for router `router`: an acquisition of
/// that one candidate, one attempt, no fallback, under the router's capacity policy and
/// health, with the default launch deadline; its first step is written into `step` as for
/// `beginAcquisition`. Returns the member's sandbox id (stamped on its launch).
#[napi]
pub fn begin_refill(
    env: Env,
    router: u32,
    registry: u32,
    pool: u32,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
) -> napi::Result<String> {
    guard(&env, || {
        let (core, registry) = (router_of(router)?, registry_of(registry)?);
        let id = next_sandbox_id()?;
        let key = key_of(&id)?;
        let pool = pool as usize;
        let mut inner = registry.borrow_mut();
        let Some(p) = inner.registry.pools().get(pool) else { return Err(internal("(an unknown warm pool)")) };
        if p.warm.is_none() {
            return Err(internal("(a pool without a warm option)"));
        }
        let pool_id = p.id.clone();
        let plan = core.capacity.as_ref().map(|c| CapacityPlan {
            need: Default::default(),
            readers: inner.readers.clone(),
            ledger_pools: inner.registry.pools().iter().map(|p| c.ledger_key(&p.id)).collect(),
        });
        let tracking = core.health.as_ref().map(|h| {
            let slots = inner.health_slots(&mut h.borrow_mut(), core.health_id());
            (slots, instant(now))
        });
        drop(inner);
        let mut machine = Acquisition::new(vec![pool], 1, false, plan, core.observe);
        if let Some((slots, at)) = tracking {
            machine.track(slots, at);
        }
        let machine_key = insert(Entry {
            id: key,
            machine,
            router: core.clone(),
            registry: registry.clone(),
            labels: Arc::new(vec![(SANDBOX_WARM_LABEL.to_string(), pool_id)]),
            pool,
            timeout_ms: DEFAULT_ACQUISITION_TIMEOUT_MS,
            detached: false,
            warm: Some(Box::new(WarmRole::Refill { pool })),
        });
        step_into(machine_key, step, None)?;
        Ok(id)
    })
}

/// A refill's success, as `acquisitionSucceeded` answers a provision's.
#[napi(object)]
pub struct RefillSuccess {
    /// The member's router id.
    pub sandbox_id: String,
    /// Its pool.
    pub provider_id: String,
    /// When it became idle, router-clock epoch ms.
    pub launched_at: f64,
    /// The default store's record is written and the member is idle in this process's
    /// inventory; false: the JS side writes the caller's store (then `warmMemberAdd`) or
    /// the fleet's inventory.
    pub recorded: bool,
}

/// The refill's launch returned a handle with the provider's sandbox id: the machine
/// records the success (capacity hold, health), and with the default store (and this
/// process's inventory) the member's record is written (the stamp and the warm label)
/// and the member is idle. `now`: the health clock; `clockNow`: the router's (its age).
/// The machine lives on until `acquisitionEnd` (its events and hold settlement).
#[napi]
pub fn warm_refill_succeeded(
    env: Env,
    key: u32,
    provider_sandbox_id: String,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<RefillSuccess> {
    guard(&env, || {
        with(key, |e| -> Result<RefillSuccess, Failure> {
            let Some(WarmRole::Refill { pool }) = e.warm.as_deref() else { return Err(internal("(not a refill)")) };
            let pool = *pool;
            e.report(now, |m, l| m.succeeded(l));
            let provider_id = e.pool_id(pool);
            let launched_at = instant(clock_now);
            let member = Member { id: e.id, provider_sandbox_id: provider_sandbox_id.clone(), launched_at };
            let router = e.router.clone();
            let mut warm = router.warm.borrow_mut();
            let w = warm.as_mut().ok_or_else(|| internal("(warm pools are not started)"))?;
            let recorded = !w.shared && router.store.is_some();
            if let Some(store) = router.store.as_ref().filter(|_| recorded) {
                write_record(
                    store,
                    e.id,
                    &provider_id,
                    &provider_sandbox_id,
                    e.labels.clone(),
                    router.fleet.clone(),
                    false,
                );
            }
            if let Some(p) = w.get_mut(&provider_id) {
                p.refill_succeeded(recorded.then_some(member));
            }
            Ok(RefillSuccess { sandbox_id: e.id.to_string(), provider_id, launched_at: launched_at as f64, recorded })
        })?
    })
}

/// A member whose record the JS side wrote (a caller's store after a refill, or one
/// adopted from a durable store at `warmUp()`) joins this process's inventory.
#[napi]
pub fn warm_member_add(env: Env, router: u32, member: WarmMemberRecord) -> napi::Result<()> {
    guard(&env, || {
        let id = key_of(&member.sandbox_id)?;
        warm_of(&*router_of(router)?, |w| {
            if let Some(p) = w.get_mut(&member.provider_id) {
                p.insert(Member {
                    id,
                    provider_sandbox_id: member.provider_sandbox_id,
                    launched_at: member.launched_at as i64,
                });
            }
        })
    })
}

/// A refill of pool `providerId` failed with `code` (its launch, admission, intent or
/// record). True when this failure paused the pool's refills.
#[napi]
pub fn warm_refill_failed(env: Env, router: u32, provider_id: String, code: String) -> napi::Result<bool> {
    guard(&env, || warm_of(&*router_of(router)?, |w| w.get_mut(&provider_id).is_some_and(|p| p.refill_failed(&code))))
}

/// Takes member `sandboxId` out of this process's inventory (destroyed, reclaimed, or
/// found gone: `lost` counts it so). Its pool's id, or null when it is not idle here.
#[napi]
pub fn warm_forget(env: Env, router: u32, sandbox_id: String, lost: bool) -> napi::Result<Option<String>> {
    guard(&env, || {
        let Some(id) = SandboxKey::parse(&sandbox_id) else { return Ok(None) };
        let core = router_of(router)?;
        let mut w = core.warm.borrow_mut();
        let Some(w) = w.as_mut() else { return Ok(None) };
        Ok(w.remove(id).map(|(pool, _)| {
            if lost {
                if let Some(p) = w.get_mut(&pool) {
                    p.lost_elsewhere();
                }
            }
            pool
        }))
    })
}

/// Counts members of pool `providerId` found gone, or expired, in the fleet's inventory.
#[napi]
pub fn warm_count(env: Env, router: u32, provider_id: String, lost: u32, expired: u32) -> napi::Result<()> {
    guard(&env, || {
        warm_of(&*router_of(router)?, |w| {
            if let Some(p) = w.get_mut(&provider_id) {
                for _ in 0..lost {
                    p.lost_elsewhere();
                }
                p.expired_elsewhere(u64::from(expired));
            }
        })
    })
}

/// The idle members of pool `providerId` in this process's inventory, oldest first.
#[napi]
pub fn warm_idle(env: Env, router: u32, provider_id: String) -> napi::Result<Vec<WarmMemberRecord>> {
    guard(&env, || {
        warm_of(&*router_of(router)?, |w| {
            w.get(&provider_id).map(|p| p.idle().iter().map(|m| record(&provider_id, m)).collect()).unwrap_or_default()
        })
    })
}

/// Every idle member of this process's inventory, taken out (`close()` destroys them or
/// leaves them for the next process).
#[napi]
pub fn warm_drain(env: Env, router: u32) -> napi::Result<Vec<WarmMemberRecord>> {
    guard(&env, || warm_of(&*router_of(router)?, |w| w.drain().iter().map(|(p, m)| record(p, m)).collect()))
}

/// The member a provision took from this process's inventory (after a `Claimed` step).
#[napi(object)]
pub struct ClaimedMember {
    /// Its router id: the provision's result id.
    pub sandbox_id: String,
    /// The provider's id of it.
    pub provider_sandbox_id: String,
    /// How long it was idle, ms (router clock).
    pub age_ms: f64,
}

/// A claiming provision's member slot and fleet floor (an internal error otherwise).
fn claimer(e: &mut Entry) -> Result<(&mut Option<Member>, &mut Option<i64>), Failure> {
    match e.warm.as_deref_mut() {
        Some(WarmRole::Claimer { member, floor, .. }) => Ok((member, floor)),
        _ => Err(internal("(not a claiming provision)")),
    }
}

/// The member the `Claimed` step took. `clockNow`: the router's clock (its age).
#[napi]
pub fn acquisition_member(env: Env, key: u32, clock_now: Option<f64>) -> napi::Result<ClaimedMember> {
    guard(&env, || {
        with(key, |e| -> Result<ClaimedMember, Failure> {
            let (member, _) = claimer(e)?;
            let m = member.as_ref().ok_or_else(|| internal("(no member was taken)"))?;
            Ok(ClaimedMember {
                sandbox_id: m.id.to_string(),
                provider_sandbox_id: m.provider_sandbox_id.clone(),
                age_ms: instant(clock_now).saturating_sub(m.launched_at).max(0) as f64,
            })
        })?
    })
}

/// What to ask the fleet's inventory for (after a `Claim` step).
#[napi(object)]
pub struct ClaimAsk {
    /// The pool.
    pub provider_id: String,
    /// The earliest launch instant a member may have (router-clock ms): not expired, and
    /// with the request's required lifetime left (`core::warm::WarmPool::floor`).
    pub floor: f64,
    /// From `provisionDetached`.
    pub detached: bool,
}

/// The `Claim` step's question for the fleet's inventory.
#[napi]
pub fn acquisition_claim_ask(env: Env, key: u32) -> napi::Result<ClaimAsk> {
    guard(&env, || {
        with(key, |e| -> Result<ClaimAsk, Failure> {
            let provider_id = e.pool_id(e.pool);
            let detached = e.detached;
            let (_, floor) = claimer(e)?;
            let floor = floor.ok_or_else(|| internal("(no claim was asked)"))?;
            Ok(ClaimAsk { provider_id, floor: floor as f64, detached })
        })?
    })
}

/// The fleet's inventory answered the `Claim` step: `hit` (a member is now mapped to this
/// provision; confirm with `acquisitionClaimed`, or report it lost) or not (the machine
/// goes on to the cold launch; the miss is counted, `PAUSED` while refills are paused).
#[napi]
pub fn acquisition_claim_answer(env: Env, key: u32, hit: bool) -> napi::Result<()> {
    guard(&env, || {
        with(key, |e| {
            let provider_id = e.pool_id(e.pool);
            let reason = {
                let mut warm = e.router.warm.borrow_mut();
                let p = warm.as_mut().and_then(|w| w.get_mut(&provider_id));
                match (hit, p) {
                    (true, Some(p)) => {
                        p.claimed();
                        None
                    }
                    (true, None) => None,
                    (false, Some(p)) => {
                        let r = p.empty();
                        p.missed(r);
                        Some(r)
                    }
                    (false, None) => Some(MissReason::Empty),
                }
            };
            if let Some(r) = reason {
                e.machine.claim_missed(r);
            }
        })
    })
}

/// A claimed member proved gone when the claiming process re-resolved it: it is counted
/// lost, and the machine goes on to the cold launch of the same pool.
#[napi]
pub fn acquisition_claim_lost(env: Env, key: u32) -> napi::Result<()> {
    guard(&env, || {
        with(key, |e| {
            let provider_id = e.pool_id(e.pool);
            if let Some(p) = e.router.warm.borrow_mut().as_mut().and_then(|w| w.get_mut(&provider_id)) {
                p.lost_elsewhere();
            }
            e.machine.claim_missed(MissReason::Empty);
        })
    })
}

/// A claim is confirmed: the machine is over (claimed), and with the default store (and
/// this process's inventory) the member's record is rewritten with this provision's
/// labels (its own id and fleet added) and `detached`. Returns whether the record was
/// written (false: the JS side writes the caller's store; the fleet's claim wrote it).
#[napi]
pub fn acquisition_claimed(env: Env, key: u32) -> napi::Result<bool> {
    guard(&env, || {
        with(key, |e| -> Result<bool, Failure> {
            let provider_id = e.pool_id(e.pool);
            let (labels, detached, router) = (e.labels.clone(), e.detached, e.router.clone());
            let (member, _) = claimer(e)?;
            let member = member.take();
            e.machine.claimed();
            if let (Some(b), Some(m)) = (router.budgets.as_ref().filter(|b| !b.shared), member.as_ref()) {
                // The charge (kept: a claim is charged like a launch) follows the member's id.
                b.apply(&mut e.machine);
                b.ledger.borrow_mut().rekey(e.id, m.id);
                b.flush();
            }
            let shared = router.warm.borrow().as_ref().is_some_and(|w| w.shared);
            match (member, router.store.as_ref()) {
                (Some(m), Some(store)) if !shared => {
                    write_record(
                        store,
                        m.id,
                        &provider_id,
                        &m.provider_sandbox_id,
                        labels,
                        router.fleet.clone(),
                        detached,
                    );
                    Ok(true)
                }
                _ => Ok(false),
            }
        })?
    })
}

/// One pool's warm state, as `router.warmStatus()` returns it (this process's counters;
/// with the fleet's inventory, `idle` and `launching` are given by the caller).
#[napi(object)]
pub struct WarmPoolStatus {
    /// The pool.
    pub provider_id: String,
    /// Its `size`.
    pub target: u32,
    /// Idle members (this process's inventory).
    pub idle: u32,
    /// Refill launches in flight from this process.
    pub launching: u32,
    /// Members handed to provisions.
    pub claims: f64,
    /// Misses with no claimable member.
    pub misses_empty: f64,
    /// Misses of requests that could not take a member.
    pub misses_incompatible: f64,
    /// Misses with no claimable member while refills were paused.
    pub misses_paused: f64,
    /// Members launched by refills.
    pub launched: f64,
    /// Refills that failed.
    pub refill_failures: f64,
    /// The code of the last refill failure.
    pub last_failure_code: Option<String>,
    /// Members destroyed for their age.
    pub expired: f64,
    /// Members found gone and dropped.
    pub lost: f64,
    /// Whether refills are paused.
    pub paused: bool,
}

fn status(id: &str, p: &WarmPool) -> WarmPoolStatus {
    let s = p.stats();
    WarmPoolStatus {
        provider_id: id.to_string(),
        target: p.config().size,
        idle: p.idle().len() as u32,
        launching: p.launching(),
        claims: s.claims as f64,
        misses_empty: s.empty as f64,
        misses_incompatible: s.incompatible as f64,
        misses_paused: s.paused as f64,
        launched: s.launched as f64,
        refill_failures: s.refill_failures as f64,
        last_failure_code: s.last_failure.clone(),
        expired: s.expired as f64,
        lost: s.lost as f64,
        paused: p.is_paused(),
    }
}

/// Every warm pool of `registry`, in registration order (before `warmUp()`: their targets,
/// nothing else).
#[napi]
pub fn warm_status(env: Env, router: u32, registry: u32) -> napi::Result<Vec<WarmPoolStatus>> {
    guard(&env, || {
        let (core, registry) = (router_of(router)?, registry_of(registry)?);
        let pools = warm_pools(&registry.borrow());
        let warm = core.warm.borrow();
        Ok(pools
            .into_iter()
            .map(|(_, id, config, lifetime)| match warm.as_ref().and_then(|w| w.get(&id)) {
                Some(p) => status(&id, p),
                None => status(&id, &WarmPool::new(config, lifetime)),
            })
            .collect())
    })
}

/// Whether a claim on one pool would be warm, for `explain`.
#[napi(object)]
pub struct WarmClaimExplanation {
    /// The pool.
    pub provider_id: String,
    /// Whether this request would take a member of it now.
    pub claim: bool,
    /// Why not: `NOT_WARM` (no warm option), `NOT_STARTED` (before `warmUp()`), `CLOSED`,
    /// or a miss reason (`EMPTY`, `PAUSED`, `LAUNCH_ENV`, `LAUNCH_NAME`, `LIFETIME`).
    pub reason: Option<String>,
    /// With the fleet's inventory and a compatible request: the floor to count members
    /// with (the JS side asks the database); otherwise null.
    pub floor: Option<f64>,
}

/// Per pool of `pools` (registry indices, e.g. `explain`'s eligible pools in rank order):
/// whether compiled request `request` would claim a member now (`clockNow`: the router's
/// clock). Nothing changes.
#[napi]
pub fn warm_explain(
    env: Env,
    router: u32,
    registry: u32,
    request: u32,
    pools: Vec<u32>,
    clock_now: Option<f64>,
) -> napi::Result<Vec<WarmClaimExplanation>> {
    guard(&env, || {
        let (core, registry, req) = (router_of(router)?, registry_of(registry)?, request_of(request)?);
        let inner = registry.borrow();
        let warm = core.warm.borrow();
        let now = instant(clock_now);
        let explain = |i: u32| -> Result<WarmClaimExplanation, Failure> {
            let p = inner.registry.pools().get(i as usize).ok_or_else(|| internal("(an unknown pool index)"))?;
            let out = |claim: bool, reason: Option<&str>, floor: Option<f64>| WarmClaimExplanation {
                provider_id: p.id.clone(),
                claim,
                reason: reason.map(str::to_string),
                floor,
            };
            let Some(config) = p.warm else { return Ok(out(false, Some("NOT_WARM"), None)) };
            let Some(w) = warm.as_ref() else { return Ok(out(false, Some("NOT_STARTED"), None)) };
            if w.closed {
                return Ok(out(false, Some("CLOSED"), None));
            }
            let fresh = WarmPool::new(config, p.capabilities.max_lifetime);
            let wp = w.get(&p.id).unwrap_or(&fresh);
            if w.shared {
                return Ok(match wp.floor(now, &req) {
                    Ok(f) => out(false, None, Some(f as f64)),
                    Err(r) => out(false, Some(r.code()), None),
                });
            }
            Ok(match wp.would_claim(now, &req) {
                Ok(()) => out(true, None, None),
                Err(r) => out(false, Some(r.code()), None),
            })
        };
        pools.into_iter().map(explain).collect()
    })
}

/// Validates a factory provider's `warm` option (JSON text) by the one rule
/// (`core::warm::WarmConfig::read`); throws the typed `INVALID_CONFIGURATION` error naming
/// `field` and the key (`providers.local.warm.size`).
#[napi]
pub fn check_warm_option(env: Env, option_json: String, field: String) -> napi::Result<()> {
    guard(&env, || {
        let bad = |e: FieldError| {
            NativeError::invalid(
                ErrorClass::Configuration,
                "INVALID_CONFIGURATION",
                format!(
                    "invalid configuration: {}{} {}",
                    field,
                    e.field.strip_prefix("warm").unwrap_or(""),
                    e.expectation
                ),
                format!("{}{}", field, e.field.strip_prefix("warm").unwrap_or("")),
            )
        };
        let v = serde_json::from_str(&option_json).map_err(|_| bad(FieldError::new("warm", "must be an object")))?;
        WarmConfig::read(&v, "warm").map(drop).map_err(bad)
    })
}
