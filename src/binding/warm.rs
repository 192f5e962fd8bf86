//! napi glue for warm pools (`core::router::warm`, rules in `core::warm`): the poll, the
//! timer, the warm steps' reports, the claims' answers, the waiters' reports and the
//! status; nothing is decided here.

use crate::binding::acquisition::write_step;
use crate::binding::clock::now_millis;
use crate::binding::clock::{now_and_wall, now_of};
use crate::binding::error::{guard, Failure};
use crate::binding::reconcile::ReconcileSettled;
use crate::binding::records::{WarmCounts, WarmMemberRecord};
use crate::binding::request::CompiledRequest;
use crate::binding::router::RouterState;
use crate::core::ids::SandboxKey;
use crate::core::request::SANDBOX_WARM_LABEL;
use crate::core::router::warm::{FleetCounts, FleetOp, FleetReply, Resolution, StartFacts, StoreRecord};
use crate::core::warm::Member;
use napi::bindgen_prelude::{External, Uint32ArraySlice};
use napi::Env;
use napi_derive::napi;

/// The launch label that marks a warm member, its value the pool's id
/// (`core::request::SANDBOX_WARM_LABEL`).
#[napi]
pub const SANDBOX_WARM_LABEL_KEY: &str = SANDBOX_WARM_LABEL;

fn key_of(id: &str) -> Result<SandboxKey, Failure> {
    Ok(SandboxKey::parse_checked(id)?)
}

fn member(r: WarmMemberRecord) -> Result<(String, Member), Failure> {
    let id = key_of(&r.sandbox_id)?;
    Ok((r.provider_id, Member { id, provider_sandbox_id: r.provider_sandbox_id, launched_at: r.launched_at as i64 }))
}

/// What JavaScript knows about the router's stores when its warm pools start.
#[napi(object)]
pub struct WarmStartFacts {
    /// The mapping store is the capacity coordinator itself (`PostgresMappingStore`).
    pub store_is_coordinator: bool,
    /// The mapping store is an `InMemoryMappingStore` (or a subclass of it).
    pub store_in_memory: bool,
    /// The mapping store has `list()`.
    pub store_lists: bool,
}

/// Starts the router's warm pools (`warmUp()`, once).
#[napi]
pub fn warm_start(router: &External<RouterState>, facts: WarmStartFacts) {
    router.router.borrow_mut().warm_start(StartFacts {
        store_is_coordinator: facts.store_is_coordinator,
        store_in_memory: facts.store_in_memory,
        store_lists: facts.store_lists,
    });
}

/// What a re-resolution (`getById(id, { owned: true })`) found, from how the call settled.
fn resolution(how: ReconcileSettled) -> Resolution {
    match how {
        ReconcileSettled::Value => Resolution::Found,
        ReconcileSettled::Nothing => Resolution::Gone,
        ReconcileSettled::Threw | ReconcileSettled::TimedOut => Resolution::Failed,
        ReconcileSettled::NoMethod => Resolution::Unsupported,
    }
}

/// Every op of the `WarmFleet` step by name (`core::router::warm::FleetOp`).
#[napi]
pub fn warm_fleet_ops() -> std::collections::HashMap<String, u32> {
    FleetOp::ALL.iter().map(|(op, name)| (name.to_string(), *op as u32)).collect()
}

/// A piece of warm work `warmPoll` began (its first step is in the step buffer).
#[napi(object, use_nullable = true)]
pub struct WarmPolled {
    /// A refill job (its record needs the stamp and the launch's parts).
    pub refill: bool,
    /// The sandbox it is about: the refill's member to be, or the task's member.
    pub sandbox_id: Option<String>,
    /// The provider's id of the task's member.
    pub provider_sandbox_id: Option<String>,
    /// A fleet refill's grant.
    pub token: Option<f64>,
}

/// The next piece of warm work, begun, its first step written into `step`; null when none
/// is due. `now`: the health clock; `clockNow`: the router's.
#[napi]
pub fn warm_poll(
    env: Env,
    router: &External<RouterState>,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<Option<WarmPolled>> {
    guard(&env, || {
        let polled = router.router.borrow_mut().warm_poll(now_of(now, clock_now), &mut || router.next_id())?;
        let Some(p) = polled else { return Ok(None) };
        write_step(step, p.key, p.next)?;
        Ok(Some(WarmPolled {
            refill: p.refill,
            sandbox_id: p.sandbox.map(|s| s.to_string()),
            provider_sandbox_id: p.provider_sandbox_id,
            token: p.token.map(|t| t as f64),
        }))
    })
}

/// When to poll again, ms from now; null: nothing is scheduled.
#[napi]
pub fn warm_timeout(router: &External<RouterState>, now: Option<f64>, clock_now: Option<f64>) -> Option<f64> {
    router.router.borrow().warm_timeout(now_of(now, clock_now)).map(|ms| ms as f64)
}

/// A task the caller could not drive (its bug): forgotten, so the waiters still settle.
#[napi]
pub fn warm_abandon(router: &External<RouterState>, key: u32) {
    router.router.borrow_mut().warm_abandon(key);
}

/// A `warmUp()` begins waiting: its id.
#[napi]
pub fn warm_up_begin(router: &External<RouterState>, clock_now: Option<f64>) -> u32 {
    router.router.borrow_mut().warm_up_begin(now_of(None, clock_now))
}

/// One warm pool's standing in `warmUp()`'s report.
#[napi(object, use_nullable = true)]
pub struct WarmPoolReport {
    /// The pool.
    pub provider_id: String,
    /// Its target.
    pub target: u32,
    /// Its idle members.
    pub idle: f64,
    /// Whether it holds its target.
    pub ready: bool,
    /// Why not.
    pub reason: Option<String>,
    /// The code of its last refill failure.
    pub last_failure_code: Option<String>,
}

/// `warmUp()`'s report.
#[napi(object)]
pub struct WarmUpReport {
    /// Every warm pool holds its target.
    pub ready: bool,
    /// Per pool.
    pub pools: Vec<WarmPoolReport>,
}

/// `warmUp()` `id`'s report once it is settled; null: not yet.
#[napi]
pub fn warm_up_answer(
    router: &External<RouterState>,
    id: u32,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> Option<WarmUpReport> {
    let r = router.router.borrow_mut().warm_up_answer(id, now_of(now, clock_now))?;
    Some(WarmUpReport {
        ready: r.ready,
        pools: r
            .pools
            .into_iter()
            .map(|p| WarmPoolReport {
                provider_id: p.provider_id,
                target: p.target,
                idle: p.idle as f64,
                ready: p.ready,
                reason: p.reason.map(str::to_string),
                last_failure_code: p.last_failure_code,
            })
            .collect(),
    })
}

/// `close(options)`: `optionsJson` the options as JSON text (null: none given; text that
/// is not JSON: unreadable), `storeInMemory` whether the mapping store is an
/// `InMemoryMappingStore`. Throws the typed `INVALID_CONFIGURATION` error naming
/// `keepWarm`. True: wait for `warmCloseAnswer`.
#[napi]
pub fn warm_close(
    env: Env,
    router: &External<RouterState>,
    options_json: Option<String>,
    store_in_memory: bool,
) -> napi::Result<bool> {
    guard(&env, || router.router.borrow_mut().warm_close(options_json.as_deref(), store_in_memory))
}

/// `close()`'s answer.
#[napi(object)]
pub struct WarmCloseReport {
    /// Idle members destroyed (or found gone already).
    pub destroyed: u32,
    /// Idle members whose destroy failed: they stay recorded, for `reconcile`.
    pub failed: u32,
    /// Idle members left recorded for the next process (`keepWarm`).
    pub kept: u32,
}

/// `close()`'s report once every refill and task has settled; null: not yet.
#[napi]
pub fn warm_close_answer(router: &External<RouterState>) -> Option<WarmCloseReport> {
    router.router.borrow_mut().warm_close_answer().map(|r| WarmCloseReport {
        destroyed: r.destroyed,
        failed: r.failed,
        kept: r.kept,
    })
}

/// The `WarmResolve` step of task `key` ended with `outcome`; the next step into `step`.
#[napi]
pub fn warm_resolved(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    outcome: ReconcileSettled,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        let next = router.router.borrow_mut().warm_resolved(key, resolution(outcome), now_of(now, clock_now))?;
        write_step(step, key, next)
    })
}

/// The `WarmDestroy` step of task `key`: whether the destroy succeeded.
#[napi]
pub fn warm_destroyed(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    ok: bool,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        let next = router.router.borrow_mut().warm_destroyed(key, ok, now_of(now, clock_now))?;
        write_step(step, key, next)
    })
}

/// The `WarmUnmap` step of task `key` was performed (best effort).
#[napi]
pub fn warm_unmapped(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    guard(&env, || {
        let next = router.router.borrow_mut().warm_unmapped(key)?;
        write_step(step, key, next)
    })
}

/// The `WarmList` step of task `key`: `finder` false when the pool has no native finder;
/// `providerSandboxIds` what it listed (null: it could not list).
#[napi]
#[allow(clippy::too_many_arguments, reason = "a report: key, facts, the step buffer and the two clocks")]
pub fn warm_listed(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    finder: bool,
    provider_sandbox_ids: Option<Vec<String>>,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        let next = router.router.borrow_mut().warm_listed(key, finder, provider_sandbox_ids, now_of(now, clock_now))?;
        write_step(step, key, next)
    })
}

/// What a `WarmFleet` step asks of the fleet's inventory.
#[napi(object, use_nullable = true)]
pub struct WarmFleetAsk {
    /// The call (`warmFleetOps()`).
    pub op: u32,
    /// Its pool.
    pub provider_id: String,
    /// Reserve: the pool's target.
    pub target: u32,
    /// Reserve: the launches wanted.
    pub want: u32,
    /// Reserve: how long a grant may stay unsettled, ms.
    pub hold_ms: f64,
    /// Expire: members launched before this instant have expired (router-clock ms).
    pub floor: f64,
    /// Take: the member.
    pub sandbox_id: Option<String>,
    /// Release: the grant.
    pub token: Option<f64>,
}

/// The `WarmFleet` step's question for task `key`.
#[napi]
pub fn warm_fleet_ask(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<WarmFleetAsk> {
    guard(&env, || {
        let a = router.router.borrow_mut().warm_fleet_ask(key)?;
        Ok(WarmFleetAsk {
            op: a.op as u32,
            provider_id: a.provider_id,
            target: a.target,
            want: a.want,
            hold_ms: a.hold_ms as f64,
            floor: a.floor as f64,
            sandbox_id: a.sandbox.map(|s| s.to_string()),
            token: a.token.map(|t| t as f64),
        })
    })
}

/// What the fleet's inventory answered (the field of the op asked).
#[napi(object)]
pub struct WarmFleetReply {
    /// Counts.
    pub counts: Option<Vec<WarmCounts>>,
    /// Reserve: the grants.
    pub tokens: Option<Vec<f64>>,
    /// Expire, Take, Mine, TakeMine: the members.
    pub members: Option<Vec<WarmMemberRecord>>,
}

/// The `WarmFleet` step of task `key` answered `reply` (null: it failed or timed out); the
/// next step into `step`. Returns the members whose live handles to let go of.
#[napi]
pub fn warm_fleet_answered(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    reply: Option<WarmFleetReply>,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
    clock_now: Option<f64>,
) -> napi::Result<Vec<String>> {
    guard(&env, || {
        let reply = match reply {
            None => None,
            Some(r) => Some(FleetReply {
                counts: r
                    .counts
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| FleetCounts {
                        provider_id: c.provider_id,
                        idle: c.idle.max(0.0) as u64,
                        launching: c.launching.max(0.0) as u64,
                    })
                    .collect(),
                tokens: r.tokens.unwrap_or_default().into_iter().map(|t| t as i64).collect(),
                members: r.members.unwrap_or_default().into_iter().map(member).collect::<Result<_, _>>()?,
            }),
        };
        let (next, dropped) = router.router.borrow_mut().warm_fleet_answered(key, reply, now_of(now, clock_now))?;
        write_step(step, key, next)?;
        Ok(dropped.into_iter().map(|s| s.to_string()).collect())
    })
}

/// One mapping record, as adoption reads it from the caller's store (each field read once,
/// inside a guard; anything not of its type is null).
#[napi(object)]
pub struct WarmStoreRecord {
    /// Its id.
    pub id: String,
    /// Its pool.
    pub provider_id: Option<String>,
    /// The provider's id of its sandbox.
    pub provider_sandbox_id: Option<String>,
    /// Its warm label's value.
    pub warm: Option<String>,
    /// Its fleet label's value.
    pub fleet: Option<String>,
    /// `createdAt`, epoch ms (`Date.parse`).
    pub created_at_ms: Option<f64>,
}

/// The `WarmRecords` step of task `key`: the store's records (null: it failed or timed out).
#[napi]
pub fn warm_records(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    records: Option<Vec<WarmStoreRecord>>,
    step: Uint32ArraySlice<'_>,
) -> napi::Result<()> {
    guard(&env, || {
        let records = records.map(|rs| {
            rs.into_iter()
                .map(|r| StoreRecord {
                    id: r.id,
                    provider_id: r.provider_id,
                    provider_sandbox_id: r.provider_sandbox_id,
                    warm: r.warm,
                    fleet: r.fleet,
                    created_at_ms: r.created_at_ms,
                })
                .collect()
        });
        let next = router.router.borrow_mut().warm_records(key, records)?;
        write_step(step, key, next)
    })
}

/// A refill's member (after its launch succeeded).
#[napi(object)]
pub struct RefillMember {
    /// The member's router id.
    pub sandbox_id: String,
    /// Its pool.
    pub provider_id: String,
    /// The provider's id of it.
    pub provider_sandbox_id: String,
    /// When it became idle, router-clock epoch ms.
    pub launched_at: f64,
}

/// Refill job `key`'s member. `clockNow`: the router's clock.
#[napi]
pub fn acquisition_refill_member(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    clock_now: Option<f64>,
) -> napi::Result<RefillMember> {
    guard(&env, || {
        let (id, provider_id, provider_sandbox_id, at) =
            router.router.borrow_mut().refill_member(key, now_of(None, clock_now))?;
        Ok(RefillMember { sandbox_id: id.to_string(), provider_id, provider_sandbox_id, launched_at: at as f64 })
    })
}

/// The member a provision took (after a `Claimed` or `ClaimResolve` step).
#[napi(object)]
pub struct ClaimedMember {
    /// Its router id: the provision's result id.
    pub sandbox_id: String,
    /// The provider's id of it.
    pub provider_sandbox_id: String,
    /// How long it was idle, ms (router clock).
    pub age_ms: f64,
}

/// The member the claim took. `clockNow`: the router's clock (its age).
#[napi]
pub fn acquisition_member(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    clock_now: Option<f64>,
) -> napi::Result<ClaimedMember> {
    guard(&env, || {
        let (id, provider_sandbox_id, age) = router.router.borrow_mut().claimed_member(key, now_of(None, clock_now))?;
        Ok(ClaimedMember { sandbox_id: id.to_string(), provider_sandbox_id, age_ms: age as f64 })
    })
}

/// What to ask the fleet's inventory for (after a `Claim` step).
#[napi(object, use_nullable = true)]
pub struct ClaimAsk {
    /// The pool.
    pub provider_id: String,
    /// The earliest launch instant a member may have (router-clock ms).
    pub floor: f64,
    /// From `provisionDetached`.
    pub detached: bool,
    /// Under shared budgets: the provision whose reservation the claim turns into the
    /// member's charge.
    pub charge: Option<String>,
}

/// The `Claim` step's question for the fleet's inventory.
#[napi]
pub fn acquisition_claim_ask(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<ClaimAsk> {
    guard(&env, || {
        let (provider_id, floor, detached, charge) = router.router.borrow_mut().claim_ask(key)?;
        Ok(ClaimAsk { provider_id, floor: floor as f64, detached, charge: charge.map(|c| c.to_string()) })
    })
}

/// The fleet's inventory answered the `Claim` step with `member` (null: none, or it failed);
/// the next step into `step`.
#[napi]
pub fn acquisition_claim_answer(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    member: Option<WarmMemberRecord>,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        let m = member.map(self::member).transpose()?.map(|(_, m)| m);
        let next = router.router.borrow_mut().claim_answer(key, m, now_of(None, clock_now))?;
        write_step(step, key, next)
    })
}

/// The `ClaimResolve` step ended with `outcome`; the next step into `step`. Returns the
/// record to remove (without waiting) of a member found gone, or null.
#[napi]
pub fn acquisition_claim_resolved(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    outcome: ReconcileSettled,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<Option<String>> {
    guard(&env, || {
        let (next, forget) = router.router.borrow_mut().claim_resolved(
            key,
            resolution(outcome),
            now_of(None, clock_now),
            now_millis(),
        )?;
        write_step(step, key, next)?;
        Ok(forget.map(|f| f.to_string()))
    })
}

/// The `ClaimUncharge` step was performed; the next step (the cold launch) into `step`.
#[napi]
pub fn acquisition_claim_uncharged(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        let next = router.router.borrow_mut().claim_uncharged(key, now_of(None, clock_now))?;
        write_step(step, key, next)
    })
}

/// A claim is confirmed: the job is about the member from now on; the next step (its record
/// to a caller's store, or the success).
#[napi]
pub fn acquisition_claimed(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        let (at, wall) = now_and_wall(None, clock_now);
        let next = router.router.borrow_mut().claimed(key, at, wall)?;
        write_step(step, key, next)
    })
}

/// A pool's misses, as `warmStatus()` counts them.
#[napi(object)]
pub struct WarmMisses {
    /// No claimable member.
    pub empty: f64,
    /// Requests that could not take a member.
    pub incompatible: f64,
    /// No claimable member while refills were paused.
    pub paused: f64,
}

/// One pool's warm state, as `router.warmStatus()` returns it.
#[napi(object, use_nullable = true)]
pub struct WarmPoolStatus {
    /// The pool.
    pub provider_id: String,
    /// Idle members to keep now.
    pub target: u32,
    /// Why (`SIZE`, `MIN`, `DEMAND`, `MAX`).
    pub target_reason: String,
    /// `min`, for a demand-following pool.
    pub min: Option<u32>,
    /// `max`, for a demand-following pool.
    pub max: Option<u32>,
    /// Idle members (this process's, or the fleet's with `scope: 'fleet'`).
    pub idle: f64,
    /// Refill launches in flight (same scope).
    pub launching: f64,
    /// `process` or `fleet`.
    pub scope: String,
    /// Members handed to provisions.
    pub claims: f64,
    /// Misses.
    pub misses: WarmMisses,
    /// Members launched by refills.
    pub launched: f64,
    /// Refills that failed.
    pub refill_failures: f64,
    /// The code of the last refill failure.
    pub last_failure_code: Option<String>,
    /// Members retired for their age or beyond the target.
    pub expired: f64,
    /// Members found gone and dropped.
    pub lost: f64,
    /// Whether refills are paused.
    pub paused: bool,
    /// Claims per second (the demand estimate).
    pub demand_per_second: f64,
    /// The create latency the pace and target use, ms (refills' p90, else the declared
    /// `coldStartLatencyMs`).
    pub create_latency_ms: Option<f64>,
    /// Refill launches allowed in flight now.
    pub pace: u32,
}

/// Whether `warmStatus()` needs the fleet's counts.
#[napi]
pub fn warm_status_fleet(router: &External<RouterState>) -> bool {
    router.router.borrow().warm_status_fleet()
}

/// Every warm pool of the router's registry, in registration order; `counts`: the fleet's.
#[napi]
pub fn warm_status(
    router: &External<RouterState>,
    counts: Option<Vec<WarmCounts>>,
    clock_now: Option<f64>,
) -> Vec<WarmPoolStatus> {
    let counts: Option<Vec<FleetCounts>> = counts.map(|c| {
        c.into_iter()
            .map(|c| FleetCounts {
                provider_id: c.provider_id,
                idle: c.idle.max(0.0) as u64,
                launching: c.launching.max(0.0) as u64,
            })
            .collect()
    });
    router
        .router
        .borrow()
        .warm_status(counts.as_deref(), now_of(None, clock_now))
        .into_iter()
        .map(|p| {
            let s = p.stats;
            WarmPoolStatus {
                provider_id: p.provider_id,
                target: p.target,
                target_reason: p.target_reason.to_string(),
                min: p.min,
                max: p.max,
                idle: p.idle as f64,
                launching: p.launching as f64,
                scope: p.scope.to_string(),
                claims: s.claims as f64,
                misses: WarmMisses {
                    empty: s.empty as f64,
                    incompatible: s.incompatible as f64,
                    paused: s.paused as f64,
                },
                launched: s.launched as f64,
                refill_failures: s.refill_failures as f64,
                last_failure_code: s.last_failure,
                expired: s.expired as f64,
                lost: s.lost as f64,
                paused: p.paused,
                demand_per_second: p.demand_per_second,
                create_latency_ms: p.create_latency_ms,
                pace: p.pace,
            }
        })
        .collect()
}

/// One point of the idle-members gauge.
#[napi(object)]
pub struct WarmIdlePoint {
    /// The pool.
    pub provider_id: String,
    /// Its idle members.
    pub idle: u32,
}

/// The idle-members gauge (empty with the fleet's inventory, or before `warmUp()`).
#[napi]
pub fn warm_idle_gauge(router: &External<RouterState>) -> Vec<WarmIdlePoint> {
    router
        .router
        .borrow()
        .warm_idle_gauge()
        .into_iter()
        .map(|(provider_id, idle)| WarmIdlePoint { provider_id, idle })
        .collect()
}

/// Whether a claim on one pool would be warm, for `explain`.
#[napi(object, use_nullable = true)]
pub struct WarmClaimExplanation {
    /// The pool.
    pub provider_id: String,
    /// Whether this request would take a member of it now.
    pub claim: bool,
    /// Why not: `NOT_WARM`, `NOT_STARTED`, `CLOSED`, or a miss reason.
    pub reason: Option<String>,
    /// With the fleet's inventory and a compatible request: the floor to count members
    /// with (ask the database, then call again with the counts); otherwise null.
    pub floor: Option<f64>,
}

/// Per pool of `pools` (registry indices): whether compiled request `request` would claim a
/// member now (`clockNow`: the router's clock); null when the registry keeps no warm pool.
/// `counts`: the fleet's claimable members per pool, for the pools that had a floor (null:
/// not asked, or the database failed). Nothing changes.
#[napi]
pub fn warm_explain(
    env: Env,
    router: &External<RouterState>,
    request: &External<CompiledRequest>,
    pools: Vec<u32>,
    clock_now: Option<f64>,
    counts: Option<Vec<Option<f64>>>,
) -> napi::Result<Option<Vec<WarmClaimExplanation>>> {
    guard(&env, || {
        let pools: Vec<usize> = pools.into_iter().map(|p| p as usize).collect();
        let answers =
            router.router.borrow().warm_explain(&request.req, &pools, counts.as_deref(), now_of(None, clock_now))?;
        Ok(answers.map(|a| {
            a.into_iter()
                .map(|a| WarmClaimExplanation {
                    provider_id: a.provider_id,
                    claim: a.claim,
                    reason: a.reason.map(str::to_string),
                    floor: a.floor.map(|f| f as f64),
                })
                .collect()
        }))
    })
}

/// The sandbox lifetime (`capabilities.timeout.maxSandboxLifetimeMs`) a factory pool of
/// `provider` declares (`core::warm::factory_lifetime_ms`): the adapter's own, from
/// `createTimeoutMs` (its adapter option) or the adapter's default; null when the caller
/// declared one (`declared`, kept) or the adapter has none.
#[napi]
pub fn factory_lifetime_ms(provider: String, create_timeout_ms: Option<f64>, declared: bool) -> Option<f64> {
    crate::core::warm::factory_lifetime_ms(&provider, create_timeout_ms, declared)
}

/// Validates a factory provider's `warm` option (JSON text) by the one rule
/// (`core::warm::WarmConfig::read`); throws the typed `INVALID_CONFIGURATION` error naming
/// `field` and the key (`providers.local.warm.size`).
#[napi]
pub fn check_warm_option(env: Env, option_json: String, field: String) -> napi::Result<()> {
    guard(&env, || crate::core::warm::check_option(&option_json, &field))
}
