//! The router's decision records (`core::decision` holds their form): what a provision's
//! decision read is captured where the router reads it (at its begin, at each capacity
//! reading, with each step's events), and the record is kept in the ring when the job ends.

use super::job::{Job, WarmRole};
use super::pools::{Extras, Pools};
use super::{Now, Router};
use crate::core::capacity::{request_need, Measurement};
use crate::core::decision::{BudgetRead, CapacityRead, Record};
use crate::core::ids::SandboxKey;
use crate::core::request::Request;
use serde_json::Value;
use std::sync::Arc;

impl Router {
    /// Whether this router records decisions (`decisions`).
    pub fn records_decisions(&self) -> bool {
        self.decisions.is_some()
    }

    /// Whether the jobs' machines write events: for an observer or telemetry, or a record.
    pub(crate) fn writes_events(&self) -> bool {
        self.observe || self.decisions.is_some()
    }

    /// What the decision of a provision on `pools` reads at its begin (`at`): each pool's
    /// health and pacing, the applying budgets' usage, the callbacks' answers. None when the
    /// router records no decisions.
    #[allow(clippy::too_many_arguments, reason = "the parts of a begin")]
    pub(crate) fn decision_log(
        &mut self,
        pools: &Pools,
        slots: Option<&[usize]>,
        req: &Request,
        labels: &crate::core::labels::Labels,
        extras: Option<&Extras>,
        detached: bool,
        at: Now,
    ) -> Option<Box<Record>> {
        let mut log = self.decisions.as_mut()?.record();
        log.at = at.router;
        log.health_at = at.health;
        log.detached = detached;
        log.request = req.source.clone();
        log.extras = extras.cloned().map(Box::new);
        // What of a pool's health a decision reads: its circuit when it is not closed, and its
        // statistics when ranking blends them (`observedSignals`); otherwise nothing.
        let health = self.health.as_ref().filter(|h| h.any_not_closed() || h.config().observed_signals);
        let paced = !self.pacing.is_empty();
        if health.is_some() || paced {
            let all = pools.registry.pools();
            log.pools.reserve(all.len());
            for (i, p) in all.iter().enumerate() {
                let h = health.and_then(|h| match slots {
                    Some(slots) => slots.get(i).and_then(|&s| h.seed_of_slot(s)),
                    None => h.seed_of(&p.id),
                });
                let h = h.filter(|s| s.circuit.is_some() || health.is_some_and(|h| h.config().observed_signals));
                let pace = if paced { self.pacing.seed_of(&p.id) } else { None };
                if h.is_some() || pace.is_some() {
                    log.pools.push((i, h, pace));
                }
            }
        }
        if let Some(b) = self.budgets.as_mut().filter(|b| !b.shared) {
            if let Ok(keys) = crate::core::budget::keys_of(b.ledger.rules(), labels) {
                for k in keys {
                    let usage = b.ledger.usage(&k, at.router);
                    let rule = b.ledger.rules()[k.rule].id.clone();
                    log.budgets.push(BudgetRead { rule, value: k.value.to_string(), usage });
                }
            }
        }
        Some(log)
    }

    /// Job `key`'s capacity reading of its current pool: what the decision saw, with what the
    /// router held there before it judged (`held_after`: held once it judged; the new hold,
    /// when admitted, is taken off).
    pub(crate) fn log_capacity(&mut self, key: u32, m: &Measurement, held_after: impl Fn(&str) -> f64) {
        let Ok(job) = self.jobs.get_mut(key) else { return };
        let (pool, admitted) = (job.pool, job.machine.launching());
        let Some(log) = job.log.as_deref_mut() else { return };
        let req_resources = job.machine.need();
        let held = match m {
            Measurement::Known(dims) => dims
                .iter()
                .map(|d| {
                    let after = held_after(&d.resource);
                    if admitted {
                        after - d.required.max(request_need(&d.resource, &req_resources))
                    } else {
                        after
                    }
                })
                .collect(),
            Measurement::Unknown(_) => Vec::new(),
        };
        log.capacity.push(CapacityRead { pool, measurement: m.clone(), held });
    }

    /// The job's machine events as they are decided: into its log (copied, when JavaScript
    /// also reads them for an observer; taken, when nothing else reads them).
    pub(crate) fn log_events(&mut self, key: u32) {
        let observe = self.observe;
        let Ok(job) = self.jobs.get_mut(key) else { return };
        let Some(log) = job.log.as_deref_mut() else { return };
        if !job.machine.has_events() {
            return;
        }
        if observe {
            let seen = log.seen;
            log.events.extend(job.machine.kept().iter().skip(seen).filter(|s| s.is_step()).cloned());
            log.seen = job.machine.kept().len();
        } else {
            // Written into the list the record lent the machine at its begin: taken back whole
            // (without an observer nothing announces the provision, so each is a step).
            let steps = job.machine.take_kept();
            if log.events.is_empty() {
                log.events = steps;
            } else {
                log.events.extend(steps);
            }
        }
    }

    /// The events JavaScript takes for the observer were copied into the log already.
    pub(crate) fn events_taken(job: &mut Job) {
        if let Some(log) = job.log.as_deref_mut() {
            log.seen = 0;
        }
    }

    /// Job `key` ends: its record is kept (a provision's; a refill's is not a decision).
    pub(crate) fn keep_decision(&mut self, key: u32) {
        if self.decisions.is_none() {
            return;
        }
        self.log_events(key);
        let Ok(job) = self.jobs.get_mut(key) else { return };
        if job.log.is_none() || matches!(job.warm.as_deref(), Some(WarmRole::Refill { .. })) {
            return;
        }
        let outcome = match job.machine.outcome().and_then(|o| o.pool_of_success()) {
            Some(pool) if job.stage == super::job::Stage::Succeeded => Ok(pool as u32),
            _ => Err(self.failure_code(key)),
        };
        let Router { jobs, decisions: Some(d), .. } = self else { return };
        let Ok(job) = jobs.get_mut(key) else { return };
        let Some(mut record) = job.log.take() else { return };
        record.registry = Some(d.facts(&job.pools, job.pools.borrow().registry.pools()));
        record.sandbox = job.id;
        record.made = outcome.is_ok();
        record.labels = Arc::clone(&job.labels);
        record.candidates.extend(job.machine.candidates().iter().map(|&c| c as u32));
        record.outcome = outcome;
        d.push(record);
    }

    /// The code a failed provision's record names (apart: a provision rarely fails).
    #[cold]
    #[inline(never)]
    fn failure_code(&mut self, key: u32) -> Box<str> {
        let capacity = self.capacity.is_some();
        let code = self.failure_of(key, capacity).ok().flatten().map(|f| f.error.code);
        code.map_or_else(|| "INTERNAL_ERROR".into(), String::into_boxed_str)
    }

    /// A provision refused before its job began (`code`: no eligible pool, a budget's label
    /// missing): its record, with no step.
    #[allow(clippy::too_many_arguments, reason = "the parts of begin")]
    pub(crate) fn keep_refused(
        &mut self,
        of: &std::rc::Rc<std::cell::RefCell<Pools>>,
        registry: &Pools,
        req: &Request,
        labels: &crate::core::labels::Labels,
        extras: Option<&Extras>,
        detached: bool,
        id: SandboxKey,
        at: Now,
        code: &str,
    ) {
        if code == "INVALID_REQUEST" {
            return;
        }
        let pools = registry;
        let Some(mut record) = self.decision_log(pools, None, req, labels, extras, detached, at) else { return };
        let Some(d) = self.decisions.as_mut() else { return };
        record.sandbox = id;
        record.labels = Arc::new(labels.clone());
        record.registry = Some(d.facts(of, pools.registry.pools()));
        record.outcome = Err(code.into());
        d.push(record);
    }

    /// `router.decisions({ sandboxId?, since?, limit? })`: the kept records, newest first
    /// (`query`: the caller's, read strictly: `INVALID_INPUT` naming the field).
    pub fn decisions_list(&self, query: &Value) -> Result<Vec<Value>, crate::core::error::Failure> {
        let q = crate::core::decision::read_query(query)?;
        Ok(match &self.decisions {
            Some(d) => d.list(q.sandbox, q.since, q.limit.unwrap_or(usize::MAX)),
            None => Vec::new(),
        })
    }

    /// Whether records wait for the sink.
    pub fn decisions_unsunk(&self) -> bool {
        self.decisions.as_ref().is_some_and(|d| d.has_unsunk())
    }

    /// The records not yet handed to the sink, oldest first.
    pub fn take_unsunk_decisions(&mut self) -> Vec<Value> {
        self.decisions.as_mut().map(|d| d.take_unsunk()).unwrap_or_default()
    }
}
