//! The router's warm pools (`core::warm` holds their rules): the inventory and counters of
//! this process, refill jobs, and the claims' answers.
//!
//! Why do refills run as provision jobs? A member is the router's own sandbox: a refill is
//! an acquisition of one candidate (its pool), one attempt, no fallback, stepped with the
//! very calls a provision uses, so it is admitted and held under the capacity policy,
//! counted in live health, bounded by a deadline, recorded by a launch intent, and seen in
//! flight by `reconcile`, exactly as a provision's launch.

use super::pools::Pools;
use super::provision::{write_record, Job, NewRecord, Next, Stage, WarmRole};
use super::{Now, Router};
use crate::core::acquisition::{Acquisition, CapacityPlan};
use crate::core::capabilities::Lifetime;
use crate::core::error::{Failure, Fault};
use crate::core::events::{Event, PoolId};
use crate::core::ids::SandboxKey;
use crate::core::request::{Request, DEFAULT_ACQUISITION_TIMEOUT_MS, SANDBOX_WARM_LABEL};
use crate::core::warm::{reserve_count, routable, Member, MissReason, Warm, WarmConfig, WarmPool};
use std::sync::Arc;

/// One warm pool's declaration in a registry: (index, id, config, lifetime).
pub fn warm_pools(pools: &Pools) -> Vec<(usize, String, WarmConfig, Lifetime)> {
    pools
        .registry
        .pools()
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.warm.map(|c| (i, p.id.clone(), c, p.capabilities.max_lifetime)))
        .collect()
}

/// What one warm pool needs now (a refill pass's plan).
#[derive(Debug, Clone)]
pub struct PoolPlan {
    /// The pool's index in the registry.
    pub pool: usize,
    /// Its id.
    pub provider_id: String,
    /// Its `size`.
    pub target: u32,
    /// Refill launches to start now (this process's inventory: counted in flight already;
    /// the fleet's: to ask the database for).
    pub launches: u32,
    /// Members that expired (this process's inventory; taken out of it): destroy them.
    pub expired: Vec<Member>,
    /// Members launched before this instant have expired (router-clock ms).
    pub expiry_floor: i64,
    /// Refills resumed now.
    pub resumed: bool,
    /// Its idle members are due a re-resolution.
    pub check: bool,
    /// Why it cannot fill now (`PAUSED`, `CIRCUIT_OPEN`, `NOT_IN_PROVIDER_ORDER`).
    pub reason: Option<&'static str>,
    /// Whether it holds `size` idle members.
    pub ready: bool,
    /// Its idle members.
    pub idle: u64,
    /// Its `checkIntervalMs`.
    pub check_interval_ms: u64,
}

/// The fleet's counts of one pool, as the database answered them.
#[derive(Debug, Clone)]
pub struct FleetCounts {
    /// The pool.
    pub provider_id: String,
    /// Idle members, every process's.
    pub idle: u64,
    /// Refill launches granted and in flight, every process's.
    pub launching: u64,
}

/// A refill's success.
#[derive(Debug, Clone)]
pub struct RefillSuccess {
    /// The member's router id.
    pub sandbox_id: SandboxKey,
    /// Its pool.
    pub provider_id: String,
    /// When it became idle, router-clock epoch ms.
    pub launched_at: i64,
    /// The default store's record is written and the member is idle here; false: the
    /// caller writes the store (then [`Router::warm_member_add`]) or the fleet's inventory.
    pub recorded: bool,
}

/// Whether a claim on one pool would be warm, for `explain`.
#[derive(Debug, Clone)]
pub struct ClaimExplanation {
    /// The pool.
    pub provider_id: String,
    /// Whether the request would take a member of it now.
    pub claim: bool,
    /// Why not.
    pub reason: Option<&'static str>,
    /// With the fleet's inventory and a compatible request: the floor to count members with.
    pub floor: Option<i64>,
}

impl Router {
    fn warm_mut(&mut self) -> Result<&mut Warm, Failure> {
        self.warm.as_mut().ok_or_else(|| Fault::internal("(warm pools are not started)"))
    }

    /// Starts the warm pools (`warmUp()`, once): `shared`, the inventory is the fleet's.
    /// Every warm pool of the registry is made now; claims are offered from now on.
    pub fn warm_start(&mut self, shared: bool) {
        let pools = warm_pools(&self.registry.borrow());
        let w = self.warm.get_or_insert_with(|| Warm::new(shared));
        for (_, id, config, lifetime) in pools {
            w.pool(&id, config, lifetime);
        }
    }

    /// Closes the warm pools (`close()`): no claim, no refill from now on.
    pub fn warm_close(&mut self) -> Result<(), Failure> {
        self.warm_mut().map(|w| w.closed = true)
    }

    /// The refill pass's plan for every warm pool at `now`: expired members taken out,
    /// paused pools resumed when a launch succeeded since, checks that fell due, and how
    /// many refills to start. `fleet`: the database's counts. Nothing once closed.
    pub fn warm_plan(&mut self, now: Now, fleet: Option<&[FleetCounts]>) -> Result<Vec<PoolPlan>, Failure> {
        let pools = warm_pools(&self.registry.borrow());
        let mut out = Vec::with_capacity(pools.len());
        for (index, id, config, lifetime) in pools {
            let closed = self.circuit_closed(&id, now.health);
            let can_route = routable(self.provider_order(), &id);
            let counts = fleet.and_then(|f| f.iter().find(|c| c.provider_id == id));
            let w = self.warm_mut()?;
            if w.closed {
                continue;
            }
            let shared = w.shared;
            let p = w.pool(&id, config, lifetime);
            let resumed = p.resume();
            let expired = if shared { Vec::new() } else { p.take_expired(now.router) };
            let check = p.check_due(now.router);
            let (idle, launches) = if shared {
                let (idle, launching) = counts.map_or((0, 0), |c| (c.idle, c.launching));
                let want = if can_route { p.wanted(closed) } else { 0 };
                (idle, reserve_count(config.size, idle, launching, want))
            } else {
                let n = if can_route { p.plan(closed) } else { 0 };
                (p.idle().len() as u64, n)
            };
            let standing = p.standing(idle, closed, can_route);
            out.push(PoolPlan {
                pool: index,
                provider_id: id,
                target: config.size,
                launches,
                expired,
                expiry_floor: p.expiry_floor(now.router),
                resumed,
                check,
                reason: standing.reason(),
                ready: idle >= u64::from(config.size),
                idle,
                check_interval_ms: config.check_interval_ms,
            });
        }
        Ok(out)
    }

    /// `n` refill launches of pool `provider_id` were granted by the fleet's database.
    pub fn warm_started(&mut self, provider_id: &str, n: u32) -> Result<(), Failure> {
        let w = self.warm_mut()?;
        if let Some(p) = w.get_mut(provider_id) {
            p.started(n);
        }
        Ok(())
    }

    /// Begins a refill of pool `pool` (registry index) as member `id`: a job of that one
    /// candidate, one attempt, no fallback, with the default launch deadline. Its key and
    /// first step.
    pub fn begin_refill(&mut self, pool: usize, id: SandboxKey, now: Now) -> Result<(u32, Next), Failure> {
        let registry = self.registry.clone();
        let mut inner = registry.borrow_mut();
        let Some(p) = inner.registry.pools().get(pool) else { return Err(Fault::internal("(an unknown warm pool)")) };
        if p.warm.is_none() {
            return Err(Fault::internal("(a pool without a warm option)"));
        }
        let pool_id = p.id.clone();
        let plan = match self.capacity.as_mut() {
            Some(c) => Some(CapacityPlan {
                need: Default::default(),
                readers: inner.readers.clone(),
                ledger_pools: inner.registry.pools().iter().map(|p| c.ledger_key(&p.id)).collect(),
            }),
            None => None,
        };
        let health_id = self.health_id;
        let tracking = self.health.as_mut().map(|h| (inner.health_slots(h, health_id), now.health));
        let names = self.observe.then(|| inner.ids());
        drop(inner);
        let mut machine = Acquisition::new(vec![pool], 1, false, plan, names);
        if let Some((slots, at)) = tracking {
            machine.track(slots, at);
        }
        let key = self.jobs.insert(Job {
            id,
            machine,
            pools: registry,
            labels: Arc::new(vec![(SANDBOX_WARM_LABEL.to_string(), pool_id)]),
            pool,
            timeout_ms: DEFAULT_ACQUISITION_TIMEOUT_MS,
            detached: false,
            warm: Some(Box::new(WarmRole::Refill)),
            stage: Stage::Machine,
            launched: false,
            provider_sandbox_id: None,
            fault: None,
        });
        let next = self.step(key, now)?;
        Ok((key, next))
    }

    /// A refill's launch returned a handle: the success is recorded (capacity hold, health),
    /// and with the default store (and this process's inventory) the member's record is
    /// written and the member is idle; otherwise its record is written next (the caller's
    /// store, or the fleet's inventory).
    pub(crate) fn refill_succeeded(
        &mut self,
        key: u32,
        provider_sandbox_id: &str,
        now: Now,
        wall: i64,
    ) -> Result<(), Failure> {
        self.launch_reported(key)?.provider_sandbox_id = Some(provider_sandbox_id.to_string());
        self.report(key, now, |m, l| m.succeeded(l))?;
        let Router { jobs, warm, store, fleet, .. } = self;
        let job = jobs.get_mut(key)?;
        let provider_id = job.pool_id(job.pool);
        let member =
            Member { id: job.id, provider_sandbox_id: provider_sandbox_id.to_string(), launched_at: now.router };
        let w = warm.as_mut().ok_or_else(|| Fault::internal("(warm pools are not started)"))?;
        let recorded = !w.shared && store.is_some();
        if let Some(store) = store.as_ref().filter(|_| recorded) {
            write_record(
                store,
                NewRecord {
                    id: job.id,
                    provider_id: &provider_id,
                    provider_sandbox_id,
                    labels: job.labels.clone(),
                    detached: false,
                },
                fleet.clone(),
                wall,
            );
        }
        if let Some(p) = w.get_mut(&provider_id) {
            p.refill_succeeded(recorded.then_some(member));
        }
        job.stage = if recorded {
            job.machine.announce(Event::WarmMemberLaunched { pool: PoolId::from(provider_id.as_str()) });
            Stage::Succeeded
        } else if w.shared {
            Stage::WarmSettle
        } else {
            Stage::Persist
        };
        Ok(())
    }

    /// Refill job `key`'s member: (its id, its pool, the provider's id, when it became idle
    /// on the router's clock).
    pub fn refill_member(&mut self, key: u32, now: Now) -> Result<(SandboxKey, String, String, i64), Failure> {
        let job = self.jobs.get_mut(key)?;
        let psid = job.provider_sandbox_id.clone().ok_or_else(|| Fault::internal("(no member launched)"))?;
        Ok((job.id, job.pool_id(job.pool), psid, now.router))
    }

    /// A member whose record the caller wrote joins this process's inventory.
    pub fn warm_member_add(&mut self, provider_id: &str, member: Member) -> Result<(), Failure> {
        let w = self.warm_mut()?;
        if let Some(p) = w.get_mut(provider_id) {
            p.insert(member);
        }
        Ok(())
    }

    /// A refill of pool `provider_id` failed with `code`. True when this failure paused
    /// the pool's refills.
    pub fn refill_failed(&mut self, provider_id: &str, code: &str) -> Result<bool, Failure> {
        Ok(self.warm_mut()?.get_mut(provider_id).is_some_and(|p| p.refill_failed(code)))
    }

    /// Takes member `id` out of this process's inventory (`lost`: count it found gone).
    /// Its pool's id, or None when it is not idle here.
    pub fn warm_forget(&mut self, id: SandboxKey, lost: bool) -> Option<String> {
        let w = self.warm.as_mut()?;
        let (pool, _) = w.remove(id)?;
        if lost {
            if let Some(p) = w.get_mut(&pool) {
                p.lost_elsewhere();
            }
        }
        Some(pool)
    }

    /// Counts members of pool `provider_id` found gone, or expired, in the fleet's inventory.
    pub fn warm_count(&mut self, provider_id: &str, lost: u32, expired: u32) -> Result<(), Failure> {
        let w = self.warm_mut()?;
        if let Some(p) = w.get_mut(provider_id) {
            for _ in 0..lost {
                p.lost_elsewhere();
            }
            p.expired_elsewhere(u64::from(expired));
        }
        Ok(())
    }

    /// The idle members of pool `provider_id` here, oldest first.
    pub fn warm_idle(&mut self, provider_id: &str) -> Result<Vec<Member>, Failure> {
        Ok(self.warm_mut()?.get(provider_id).map(|p| p.idle().to_vec()).unwrap_or_default())
    }

    /// Every idle member here, taken out (`close()`).
    pub fn warm_drain(&mut self) -> Result<Vec<(String, Member)>, Failure> {
        Ok(self.warm_mut()?.drain())
    }

    fn claimer(&mut self, key: u32) -> Result<(&mut Option<Member>, &mut Option<i64>), Failure> {
        match self.jobs.get_mut(key)?.warm.as_deref_mut() {
            Some(WarmRole::Claimer { member, floor, .. }) => Ok((member, floor)),
            _ => Err(Fault::internal("(not a claiming provision)")),
        }
    }

    /// The member the `Claimed` step took: (sandbox id, provider sandbox id, age at `now`).
    pub fn claimed_member(&mut self, key: u32, now: Now) -> Result<(SandboxKey, String, i64), Failure> {
        let (member, _) = self.claimer(key)?;
        let m = member.as_ref().ok_or_else(|| Fault::internal("(no member was taken)"))?;
        Ok((m.id, m.provider_sandbox_id.clone(), now.router.saturating_sub(m.launched_at).max(0)))
    }

    /// The `Claim` step's question for the fleet's inventory: (pool id, floor, detached).
    pub fn claim_ask(&mut self, key: u32) -> Result<(String, i64, bool), Failure> {
        let job = self.jobs.get_mut(key)?;
        let (provider_id, detached) = (job.pool_id(job.pool), job.detached);
        let (_, floor) = self.claimer(key)?;
        let floor = floor.ok_or_else(|| Fault::internal("(no claim was asked)"))?;
        Ok((provider_id, floor, detached))
    }

    /// The fleet's inventory answered the `Claim` step: `hit`, or not (the machine goes on
    /// to the cold launch; the miss is counted).
    pub fn claim_answer(&mut self, key: u32, hit: bool, now: Now) -> Result<Option<Next>, Failure> {
        let Router { jobs, warm, .. } = self;
        let job = jobs.get_mut(key)?;
        let provider_id = job.pool_id(job.pool);
        let p = warm.as_mut().and_then(|w| w.get_mut(&provider_id));
        let reason = match (hit, p) {
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
        };
        match reason {
            Some(r) => {
                job.machine.claim_missed(r);
                Ok(Some(self.step(key, now)?))
            }
            None => Ok(None),
        }
    }

    /// A claimed member proved gone: it is counted lost, and the machine goes on to the cold
    /// launch of the same pool.
    pub fn claim_lost(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        let Router { jobs, warm, .. } = self;
        let job = jobs.get_mut(key)?;
        let provider_id = job.pool_id(job.pool);
        if let Some(p) = warm.as_mut().and_then(|w| w.get_mut(&provider_id)) {
            p.lost_elsewhere();
        }
        job.machine.claim_missed(MissReason::Empty);
        self.step(key, now)
    }

    /// A claim is confirmed: the job is over (claimed), and with the default store (and
    /// this process's inventory) the member's record is rewritten with this provision's
    /// labels. Whether the record was written.
    pub fn claimed(&mut self, key: u32, now: Now, wall: i64) -> Result<Next, Failure> {
        let member = self.claimer(key)?.0.take();
        let Router { jobs, budgets, warm, store, fleet, .. } = self;
        let job = jobs.get_mut(key)?;
        let provider_id = job.pool_id(job.pool);
        job.machine.claimed();
        job.stage = Stage::Succeeded;
        if let (Some(b), Some(m)) = (budgets.as_mut().filter(|b| !b.shared), member.as_ref()) {
            // The charge (kept: a claim is charged like a launch) follows the member's id.
            b.apply(&mut job.machine);
            b.ledger.rekey(job.id, m.id);
            b.flush();
        }
        let shared = warm.as_ref().is_some_and(|w| w.shared);
        if let Some(m) = &member {
            // The job is about the member from now on: its record, its events.
            job.provider_sandbox_id = Some(m.provider_sandbox_id.clone());
            match store.as_ref() {
                Some(store) if !shared => {
                    write_record(
                        store,
                        NewRecord {
                            id: m.id,
                            provider_id: &provider_id,
                            provider_sandbox_id: &m.provider_sandbox_id,
                            labels: job.labels.clone(),
                            detached: job.detached,
                        },
                        fleet.clone(),
                        wall,
                    );
                }
                // A caller's store gets the record with the caller's labels next.
                None if !shared => job.stage = Stage::Persist,
                _ => {}
            }
            self.jobs.rekey(key, m.id);
        }
        self.step(key, now)
    }

    /// Every warm pool of the registry, in registration order (before `warmUp()`: their
    /// targets, nothing else).
    pub fn warm_status(&self) -> Vec<(String, WarmPool)> {
        let pools = warm_pools(&self.registry.borrow());
        pools
            .into_iter()
            .map(|(_, id, config, lifetime)| {
                let p = self.warm.as_ref().and_then(|w| w.get(&id)).cloned();
                (id, p.unwrap_or_else(|| WarmPool::new(config, lifetime)))
            })
            .collect()
    }

    /// Per pool of `pools` (registry indices): whether `req` would claim a member now.
    pub fn warm_explain(&self, req: &Request, pools: &[usize], now: Now) -> Result<Vec<ClaimExplanation>, Failure> {
        let inner = self.registry.borrow();
        pools
            .iter()
            .map(|&i| {
                let p = inner.registry.pools().get(i).ok_or_else(super::provision::unknown_pool)?;
                let out = |claim: bool, reason: Option<&'static str>, floor: Option<i64>| ClaimExplanation {
                    provider_id: p.id.clone(),
                    claim,
                    reason,
                    floor,
                };
                let Some(config) = p.warm else { return Ok(out(false, Some("NOT_WARM"), None)) };
                let Some(w) = self.warm.as_ref() else { return Ok(out(false, Some("NOT_STARTED"), None)) };
                if w.closed {
                    return Ok(out(false, Some("CLOSED"), None));
                }
                let fresh = WarmPool::new(config, p.capabilities.max_lifetime);
                let wp = w.get(&p.id).unwrap_or(&fresh);
                if w.shared {
                    return Ok(match wp.floor(now.router, req) {
                        Ok(f) => out(false, None, Some(f)),
                        Err(r) => out(false, Some(r.code()), None),
                    });
                }
                Ok(match wp.would_claim(now.router, req) {
                    Ok(()) => out(true, None, None),
                    Err(r) => out(false, Some(r.code()), None),
                })
            })
            .collect()
    }
}
