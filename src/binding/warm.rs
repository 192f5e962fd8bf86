//! napi glue for warm pools (`core::router::warm`, rules in `core::warm`): the router's
//! inventory and refill state, the refill jobs, and the claims' answers; nothing is decided
//! here.

use crate::binding::acquisition::write_step;
use crate::binding::clock::now_millis;
use crate::binding::error::{guard, Failure, NativeError};
use crate::binding::records::{WarmCounts, WarmMemberRecord};
use crate::binding::request::CompiledRequest;
use crate::binding::router::{now_of, RouterState};
use crate::core::error::ErrorClass;
use crate::core::ids::SandboxKey;
use crate::core::json::FieldError;
use crate::core::request::{DEFAULT_ACQUISITION_TIMEOUT_MS, SANDBOX_WARM_LABEL};
use crate::core::router::warm::FleetCounts;
use crate::core::warm::{Member, WarmConfig, WarmPool};
use napi::bindgen_prelude::{External, Uint32ArraySlice};
use napi::Env;
use napi_derive::napi;

/// The launch label that marks a warm member, its value the pool's id
/// (`core::request::SANDBOX_WARM_LABEL`).
#[napi]
pub const SANDBOX_WARM_LABEL_KEY: &str = SANDBOX_WARM_LABEL;

/// The deadline of one refill launch, ms (a request's default launch deadline).
#[napi]
pub const REFILL_TIMEOUT_MS: u32 = DEFAULT_ACQUISITION_TIMEOUT_MS as u32;

fn key_of(id: &str) -> Result<SandboxKey, Failure> {
    Ok(SandboxKey::parse_checked(id)?)
}

/// Starts the router's warm pools (`warmUp()`, once): `shared`, the inventory is the fleet's.
#[napi]
pub fn warm_start(router: &External<RouterState>, shared: bool) {
    router.router.borrow_mut().warm_start(shared);
}

/// Closes the router's warm pools (`close()`): no claim, no refill from now on.
#[napi]
pub fn warm_close(env: Env, router: &External<RouterState>) -> napi::Result<()> {
    guard(&env, || router.router.borrow_mut().warm_close())
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
    /// Members launched before this instant have expired (router-clock ms).
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

/// The refill pass's plan for every warm pool at `clockNow` (the router's clock; `healthNow`:
/// the health clock). `fleet`: the database's counts, with the fleet's inventory.
#[napi]
pub fn warm_plan(
    env: Env,
    router: &External<RouterState>,
    clock_now: Option<f64>,
    health_now: Option<f64>,
    fleet: Option<Vec<WarmCounts>>,
) -> napi::Result<Vec<WarmPlan>> {
    guard(&env, || {
        let fleet: Option<Vec<FleetCounts>> = fleet.map(|f| {
            f.into_iter()
                .map(|c| FleetCounts {
                    provider_id: c.provider_id,
                    idle: c.idle.max(0.0) as u64,
                    launching: c.launching.max(0.0) as u64,
                })
                .collect()
        });
        let plans = router.router.borrow_mut().warm_plan(now_of(health_now, clock_now), fleet.as_deref())?;
        Ok(plans
            .into_iter()
            .map(|p| WarmPlan {
                pool: p.pool as u32,
                expired: p.expired.iter().map(|m| WarmMemberRecord::of(&p.provider_id, m)).collect(),
                provider_id: p.provider_id,
                target: p.target,
                launches: p.launches,
                expiry_floor: p.expiry_floor as f64,
                resumed: p.resumed,
                check: p.check,
                reason: p.reason.map(str::to_string),
                ready: p.ready,
                idle: p.idle as f64,
                check_interval_ms: p.check_interval_ms as f64,
            })
            .collect())
    })
}

/// `n` refill launches of pool `providerId` were granted by the fleet's database.
#[napi]
pub fn warm_started(env: Env, router: &External<RouterState>, provider_id: String, n: u32) -> napi::Result<()> {
    guard(&env, || router.router.borrow_mut().warm_started(&provider_id, n))
}

/// Begins a refill of pool `pool` (registry index): a job of that one candidate, one
/// attempt, no fallback; its first step is written into `step`. Returns the member's id.
#[napi]
pub fn begin_refill(
    env: Env,
    router: &External<RouterState>,
    pool: u32,
    step: Uint32ArraySlice<'_>,
    now: Option<f64>,
) -> napi::Result<String> {
    guard(&env, || {
        let id = router.next_id()?;
        let (key, next) = router.router.borrow_mut().begin_refill(pool as usize, id, now_of(now, None))?;
        write_step(step, key, next)?;
        Ok(id.to_string())
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

/// A member whose record the JS side wrote joins this process's inventory.
#[napi]
pub fn warm_member_add(env: Env, router: &External<RouterState>, member: WarmMemberRecord) -> napi::Result<()> {
    guard(&env, || {
        let id = key_of(&member.sandbox_id)?;
        let m = Member { id, provider_sandbox_id: member.provider_sandbox_id, launched_at: member.launched_at as i64 };
        router.router.borrow_mut().warm_member_add(&member.provider_id, m)
    })
}

/// A refill of pool `providerId` failed with `code`. True when this paused the pool.
#[napi]
pub fn warm_refill_failed(
    env: Env,
    router: &External<RouterState>,
    provider_id: String,
    code: String,
) -> napi::Result<bool> {
    guard(&env, || router.router.borrow_mut().refill_failed(&provider_id, &code))
}

/// Takes member `sandboxId` out of this process's inventory (`lost`: found gone). Its
/// pool's id, or null when it is not idle here.
#[napi]
pub fn warm_forget(router: &External<RouterState>, sandbox_id: String, lost: bool) -> Option<String> {
    let id = SandboxKey::parse(&sandbox_id)?;
    router.router.borrow_mut().warm_forget(id, lost)
}

/// Counts members of pool `providerId` found gone, or expired, in the fleet's inventory.
#[napi]
pub fn warm_count(
    env: Env,
    router: &External<RouterState>,
    provider_id: String,
    lost: u32,
    expired: u32,
) -> napi::Result<()> {
    guard(&env, || router.router.borrow_mut().warm_count(&provider_id, lost, expired))
}

/// The idle members of pool `providerId` in this process's inventory, oldest first.
#[napi]
pub fn warm_idle(env: Env, router: &External<RouterState>, provider_id: String) -> napi::Result<Vec<WarmMemberRecord>> {
    guard(&env, || {
        let members = router.router.borrow_mut().warm_idle(&provider_id)?;
        Ok(members.iter().map(|m| WarmMemberRecord::of(&provider_id, m)).collect())
    })
}

/// Every idle member of this process's inventory, taken out (`close()`).
#[napi]
pub fn warm_drain(env: Env, router: &External<RouterState>) -> napi::Result<Vec<WarmMemberRecord>> {
    guard(&env, || {
        Ok(router.router.borrow_mut().warm_drain()?.iter().map(|(p, m)| WarmMemberRecord::of(p, m)).collect())
    })
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

/// The member the `Claimed` step took. `clockNow`: the router's clock (its age).
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
#[napi(object)]
pub struct ClaimAsk {
    /// The pool.
    pub provider_id: String,
    /// The earliest launch instant a member may have (router-clock ms).
    pub floor: f64,
    /// From `provisionDetached`.
    pub detached: bool,
}

/// The `Claim` step's question for the fleet's inventory.
#[napi]
pub fn acquisition_claim_ask(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<ClaimAsk> {
    guard(&env, || {
        let (provider_id, floor, detached) = router.router.borrow_mut().claim_ask(key)?;
        Ok(ClaimAsk { provider_id, floor: floor as f64, detached })
    })
}

/// The fleet's inventory answered the `Claim` step: `hit` or not (a miss writes the next
/// step: the cold launch of the same pool).
#[napi]
pub fn acquisition_claim_answer(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    hit: bool,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || match router.router.borrow_mut().claim_answer(key, hit, now_of(None, clock_now))? {
        Some(next) => write_step(step, key, next),
        None => Ok(()),
    })
}

/// A claimed member proved gone: counted lost; the next step launches the same pool cold.
#[napi]
pub fn acquisition_claim_lost(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    guard(&env, || {
        let next = router.router.borrow_mut().claim_lost(key, now_of(None, clock_now))?;
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
        let next = router.router.borrow_mut().claimed(key, now_of(None, clock_now), now_millis())?;
        write_step(step, key, next)
    })
}

/// One pool's warm state, as `router.warmStatus()` returns it.
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

fn status(id: String, p: &WarmPool) -> WarmPoolStatus {
    let s = p.stats();
    WarmPoolStatus {
        provider_id: id,
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

/// Every warm pool of the router's registry, in registration order.
#[napi]
pub fn warm_status(router: &External<RouterState>) -> Vec<WarmPoolStatus> {
    router.router.borrow().warm_status().into_iter().map(|(id, p)| status(id, &p)).collect()
}

/// Whether a claim on one pool would be warm, for `explain`.
#[napi(object)]
pub struct WarmClaimExplanation {
    /// The pool.
    pub provider_id: String,
    /// Whether this request would take a member of it now.
    pub claim: bool,
    /// Why not: `NOT_WARM`, `NOT_STARTED`, `CLOSED`, or a miss reason.
    pub reason: Option<String>,
    /// With the fleet's inventory and a compatible request: the floor to count members
    /// with (the JS side asks the database); otherwise null.
    pub floor: Option<f64>,
}

/// Per pool of `pools` (registry indices): whether compiled request `request` would claim a
/// member now (`clockNow`: the router's clock). Nothing changes.
#[napi]
pub fn warm_explain(
    env: Env,
    router: &External<RouterState>,
    request: &External<CompiledRequest>,
    pools: Vec<u32>,
    clock_now: Option<f64>,
) -> napi::Result<Vec<WarmClaimExplanation>> {
    guard(&env, || {
        let pools: Vec<usize> = pools.into_iter().map(|p| p as usize).collect();
        let answers = router.router.borrow().warm_explain(&request.req, &pools, now_of(None, clock_now))?;
        Ok(answers
            .into_iter()
            .map(|a| WarmClaimExplanation {
                provider_id: a.provider_id,
                claim: a.claim,
                reason: a.reason.map(str::to_string),
                floor: a.floor.map(|f| f as f64),
            })
            .collect())
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
