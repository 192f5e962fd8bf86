//! The router's wait queue (`core::queue` holds its order and rules): when a provision
//! waits instead of failing, until when it sleeps, who is woken when something frees, and
//! how a wait ends (admitted, `QUEUE_TIMEOUT`, `QUEUE_FULL`, `ABORTED`, `ROUTER_CLOSED`).
//!
//! A waiting job's step is [`StepKind::Wait`](super::step::StepKind::Wait) with the time to
//! its next look as the bound; JavaScript sleeps that long, or less when the router names it
//! among the jobs to wake (flag `WAKE`), and reports [`Router::waited`]. Its machine is
//! rewound then and runs a new pass over its candidates, skipping the pools waiters ahead of
//! it wait for.

use super::job::{Stage, WarmRole};
use super::step::Next;
use super::{Now, Router};
use crate::core::acquisition::Wake;
use crate::core::error::{ErrorClass, Extra, Failure, Fault, SkipFact};
use crate::core::events::{Event, PoolId};
use crate::core::queue::{QueueStatus, ABORTED, QUEUE_FULL, QUEUE_TIMEOUT, RECHECK_MS, ROUTER_CLOSED};

/// What one pool's pacing says now, for `queueStatus()`.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolPace {
    /// The pool's id.
    pub id: String,
    /// Whole launch tokens it holds now (None: it declares no `rateLimit`).
    pub tokens: Option<u32>,
    /// When its `Retry-After` cooldown ends (None: none in force).
    pub cooling_until: Option<i64>,
}

impl Router {
    /// The pools waiters ahead of job `key` wait for, when the router has a queue: its next
    /// pass skips them.
    pub(crate) fn queue_behind(&mut self, key: u32) {
        let Some(q) = &self.queue else { return };
        if q.is_empty() {
            return;
        }
        if let Ok(job) = self.jobs.get_mut(key) {
            let ahead = q.ahead_of(key, job.wait.as_ref().and_then(|w| w.lane.as_deref()));
            job.machine.queue_behind(ahead);
        }
    }

    /// Job `key`'s pass ran out of candidates at `now`: it waits (true: its stage is
    /// `Waiting`, its machine rewound) when the router has an open queue, it is a provision,
    /// and a block of its pass is one time clears; otherwise it fails (false), with the
    /// queue's error when the wait itself ended it (full, timed out, aborted).
    pub(crate) fn wait_or_fail(&mut self, key: u32, now: i64) -> Result<bool, Failure> {
        let Router { jobs, queue, pacing, .. } = self;
        let Some(q) = queue.as_mut() else { return Ok(false) };
        let job = jobs.get_mut(key)?;
        if matches!(job.warm.as_deref(), Some(WarmRole::Refill { .. })) {
            return Ok(false);
        }
        let abort = job.wait.as_ref().and_then(|w| w.abort);
        if let Some(code) = abort {
            job.fault = Some((aborted_fault(code, job.id), false));
            job.machine.restate(code);
            self.unqueue(key);
            return Ok(false);
        }
        let blocks = if q.closed { Vec::new() } else { job.machine.waitable(pacing) };
        if blocks.is_empty() {
            self.unqueue(key);
            return Ok(false);
        }
        // The pools it contends for: a budget's slot is its key's, not the pool's, so a
        // provision of another key is not held back by it.
        let mut pools: Vec<PoolId> = Vec::new();
        for b in blocks.iter().filter(|b| b.reason != crate::core::budget::BUDGET_EXCEEDED) {
            let p = PoolId::from(job.pools.borrow().pool_id(b.pool));
            if !pools.contains(&p) {
                pools.push(p);
            }
        }
        let entered = match q.get(key) {
            Some(w) => w.entered,
            None => {
                if !q.enter(key, job.wait.as_ref().and_then(|w| w.lane.as_deref()), pools.clone(), now) {
                    job.fault = Some((full(q.config.max_depth, job.id), false));
                    job.machine.restate(QUEUE_FULL);
                    return Ok(false);
                }
                job.machine.announce(Event::QueueEntered { depth: q.len() as u32, pools: pools.clone() });
                now
            }
        };
        q.waits_for(key, pools);
        let deadline = entered.saturating_add(q.config.max_wait_ms as i64);
        let wait = job.wait.get_or_insert_with(Box::default);
        if now >= deadline {
            wait.blocks = blocks;
            self.time_out(key, now)?;
            return Ok(false);
        }
        let wake = blocks
            .iter()
            .map(|b| match b.wake {
                Wake::At(t) => t,
                Wake::Recheck => now.saturating_add(RECHECK_MS),
                Wake::Woken => deadline,
            })
            .min()
            .unwrap_or(deadline)
            .min(deadline);
        wait.until = wake;
        wait.blocks = blocks;
        job.machine.rewind();
        job.stage = Stage::Waiting;
        Ok(true)
    }

    /// Waiting job `key`'s wait ran out at `now`: it leaves the queue with `QUEUE_TIMEOUT`.
    fn time_out(&mut self, key: u32, now: i64) -> Result<(), Failure> {
        let Router { jobs, queue, .. } = self;
        let job = jobs.get_mut(key)?;
        let Some(w) = queue.as_mut().and_then(|q| q.leave(key)) else { return Ok(()) };
        let waited = now.saturating_sub(w.entered).max(0);
        let blocks = job.wait.as_ref().map(|s| s.blocks.clone()).unwrap_or_default();
        let pools = job.pools.borrow();
        let skips: Vec<SkipFact> = blocks
            .iter()
            .map(|b| SkipFact {
                provider_id: pools.pool_id(b.pool).to_string(),
                status: crate::core::capacity::SkipStatus::Exhausted.name(),
                reason: b.reason.clone(),
            })
            .collect();
        let shown: Vec<String> = skips.iter().map(|s| format!("{} {}", s.provider_id, s.reason)).collect();
        let mut e = Fault::new(
            ErrorClass::QueueTimeout,
            QUEUE_TIMEOUT,
            format!("waited {waited} ms in the queue and no pool freed: {}", shown.join(", ")),
        );
        e.sandbox_id = Some(job.id.to_string());
        e.retryable = Some(true);
        e.extra.push(("waitedMs", Extra::Num(waited as f64)));
        e.capacity_rejections = Some(skips);
        drop(pools);
        job.fault = Some((e, false));
        job.machine.restate(QUEUE_TIMEOUT);
        job.machine.announce(Event::QueueTimeout { waited_ms: waited as u64, pools: w.pools });
        self.wake_firsts();
        Ok(())
    }

    /// Waiting job `key` woke at `now` (its bound passed, or it was woken): it ends when it
    /// was aborted or its wait ran out; otherwise its next pass begins.
    pub fn waited(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        let job = self.jobs.get_mut(key)?;
        if job.stage != Stage::Waiting {
            return Err(Fault::internal("(a wait report out of turn)"));
        }
        job.stage = Stage::Machine;
        let deadline = self.queue.as_ref().and_then(|q| Some(q.get(key)?.deadline(q.config.max_wait_ms)));
        let aborted = job.wait.as_ref().and_then(|w| w.abort);
        if let Some(code) = aborted {
            // The machine was rewound: it holds nothing, and ends as aborted.
            job.machine.abort(None);
            job.fault = Some((aborted_fault(code, job.id), false));
            job.machine.restate(code);
            self.unqueue(key);
        } else if deadline.is_some_and(|d| now.router >= d) {
            job.machine.abort(None);
            self.time_out(key, now.router)?;
        } else {
            self.queue_behind(key);
        }
        self.step(key, now)
    }

    /// Job `key` goes on to a launch or a claim: it leaves the queue if it waited
    /// (`queue.admitted`), and the waiters behind it may try.
    pub(crate) fn admitted(&mut self, key: u32, now: i64) {
        let Some(w) = self.queue.as_mut().and_then(|q| q.leave(key)) else { return };
        if let Ok(job) = self.jobs.get_mut(key) {
            let waited_ms = now.saturating_sub(w.entered).max(0) as u64;
            job.machine.announce(Event::QueueAdmitted { waited_ms });
        }
        self.wake_firsts();
    }

    /// A job that ends leaves the queue (it was ended while waiting: its caller's bug, or a
    /// crash); the waiters behind it may try.
    pub(crate) fn unqueue(&mut self, key: u32) {
        if self.queue.as_mut().is_some_and(|q| q.leave(key).is_some()) {
            self.wake_firsts();
        }
    }

    /// Something freed (a waiter left, a sandbox was given back, a job ended): every waiter
    /// first in line that sleeps is woken to look again.
    pub(crate) fn wake_firsts(&mut self) {
        let Some(q) = &self.queue else { return };
        if q.is_empty() {
            return;
        }
        for key in q.firsts() {
            let sleeping = self.jobs.get_mut(key).is_ok_and(|j| j.stage == Stage::Waiting);
            if sleeping && !self.wakes.contains(&key) {
                self.wakes.push(key);
            }
        }
    }

    /// The waiting jobs to wake now (flag `WAKE`), once.
    pub fn take_wakes(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.wakes)
    }

    /// The provision's `AbortSignal` fired: a job that waits is woken to end `ABORTED`; one
    /// that has not launched yet ends so before its launch; a launch under way is not
    /// stopped (the provision ends as it ends). Aborting an unknown or ended job does nothing.
    pub fn abort(&mut self, key: u32) {
        let Ok(job) = self.jobs.get_mut(key) else { return };
        if matches!(job.stage, Stage::Succeeded | Stage::Failed) {
            return;
        }
        let wait = job.wait.get_or_insert_with(Box::default);
        wait.abort.get_or_insert(ABORTED);
        if job.stage == Stage::Waiting && !self.wakes.contains(&key) {
            self.wakes.push(key);
        }
    }

    /// Right after [`Router::begin`] of a provision whose signal had fired already: it ends
    /// `ABORTED` before its first step is performed (nothing was asked of anyone yet).
    pub fn abort_begun(&mut self, key: u32, now: Now) -> Result<Next, Failure> {
        let job = self.jobs.get_mut(key)?;
        job.stage = Stage::Machine;
        job.intent_ready = None;
        job.fault = Some((aborted_fault(ABORTED, job.id), false));
        self.report(key, now, |m, l| {
            m.abort(l);
            m.restate(ABORTED);
        })?;
        self.step(key, now)
    }

    /// A job about to write its intent or launch: when an abort was asked for, its machine
    /// gives back what it holds and ends, and true is answered (the caller steps it again).
    pub(crate) fn abort_before_launch(&mut self, key: u32, now: Now) -> Result<bool, Failure> {
        let job = self.jobs.get_mut(key)?;
        let Some(code) = job.wait.as_ref().and_then(|w| w.abort) else { return Ok(false) };
        job.stage = Stage::Machine;
        job.intent_ready = None;
        job.fault = Some((aborted_fault(code, job.id), false));
        self.report(key, now, |m, l| {
            m.abort(l);
            m.restate(code);
        })?;
        self.unqueue(key);
        Ok(true)
    }

    /// `router.close()`: every waiting provision ends `ROUTER_CLOSED`, and none waits from now on.
    pub fn close_queue(&mut self) {
        let Some(q) = &mut self.queue else { return };
        q.closed = true;
        for key in q.keys() {
            if let Ok(job) = self.jobs.get_mut(key) {
                job.wait.get_or_insert_with(Box::default).abort = Some(ROUTER_CLOSED);
                if job.stage == Stage::Waiting && !self.wakes.contains(&key) {
                    self.wakes.push(key);
                }
            }
        }
    }

    /// `queueStatus()`: the queue's depth and oldest wait, overall and per fairness lane
    /// (None without a queue), and each pool's tokens and cooldown at `now`.
    pub fn queue_status(&self, now: i64) -> (Option<QueueStatus>, Vec<PoolPace>) {
        let pools = self.registry.borrow();
        let limits = pools.rate_limits().map(|l| &**l);
        let paces = (0..pools.registry.pools().len())
            .map(|i| {
                let id = pools.pool_id(i);
                let limit = limits.and_then(|l| l.get(i).copied().flatten());
                PoolPace {
                    id: id.to_string(),
                    tokens: limit.map(|l| self.pacing.available(id, Some(l), now)),
                    cooling_until: self.pacing.cooling_until(id, now),
                }
            })
            .collect();
        (self.queue.as_ref().map(|q| q.status(now)), paces)
    }

    /// The fairness lane of a provision with `labels`, when the queue has `fairBy`.
    pub(crate) fn lane_of(&self, labels: &crate::core::labels::Labels) -> Option<String> {
        let label = self.queue.as_ref()?.config.fair_by.as_deref()?;
        Some(labels.get(label).unwrap_or_default().to_string())
    }
}

/// `QUEUE_FULL`: `max` provisions wait already.
fn full(max: u32, id: crate::core::ids::SandboxKey) -> Failure {
    let mut e = Fault::new(
        ErrorClass::CapacityExhausted,
        QUEUE_FULL,
        format!("the wait queue is full ({max} provisions wait, queue.maxDepth); nothing was launched"),
    );
    e.sandbox_id = Some(id.to_string());
    e.retryable = Some(true);
    e
}

/// `ABORTED` or `ROUTER_CLOSED` of provision `id`.
fn aborted_fault(code: &'static str, id: crate::core::ids::SandboxKey) -> Failure {
    let message = if code == ROUTER_CLOSED {
        "the router was closed while the provision waited; nothing was launched"
    } else {
        "the provision was aborted (its signal) before its launch; nothing was launched and nothing is held"
    };
    let mut e = Fault::new(ErrorClass::Aborted, code, message);
    e.sandbox_id = Some(id.to_string());
    e
}
