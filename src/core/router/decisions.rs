//! The router's decision records (`core::decision` holds their form): what a provision's
//! decision read is captured where the router reads it (at its begin, at each capacity
//! reading, with each step's events), and the record is kept in the ring when the job ends.

use super::job::{Job, WarmRole};
use super::pools::{Extras, Pools};
use super::{Now, Router};
use crate::core::capacity::{request_need, Measurement};
use crate::core::decision::{is_step, BudgetRead, CapacityRead, Log, Record};
use crate::core::ids::SandboxKey;
use crate::core::request::Request;
use serde_json::Value;

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
    pub(crate) fn decision_log(
        &mut self,
        pools: &Pools,
        req: &Request,
        labels: &[(String, String)],
        extras: Option<&Extras>,
        detached: bool,
        at: Now,
    ) -> Option<Box<Log>> {
        self.decisions.as_ref()?;
        let mut log = Log {
            at: at.router,
            health_at: at.health,
            detached,
            request: req.source.clone(),
            extras: extras.cloned(),
            ..Log::default()
        };
        for (i, p) in pools.registry.pools().iter().enumerate() {
            // A pool health never recorded anything of is fresh: nothing to keep.
            let h = self.health.as_ref().and_then(|h| h.seed_of(&p.id)).filter(|s| {
                s.samples > 0 || s.circuit.is_some() || s.failures > 0 || s.retryable_failures > 0 || s.opens > 0
            });
            let pace = self.pacing.seed_of(&p.id);
            if h.is_some() || pace.is_some() {
                log.pools.push((i, h, pace));
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
        Some(Box::new(log))
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
            log.events.extend(job.machine.events().iter().skip(seen).filter(|e| is_step(e)).cloned());
            log.seen = job.machine.events().len();
        } else {
            log.events.extend(job.machine.take_events().into_iter().filter(is_step));
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
        let capacity = self.capacity.is_some();
        let outcome = match self.jobs.get_mut(key) {
            Ok(job) if job.log.is_some() && !matches!(job.warm.as_deref(), Some(WarmRole::Refill { .. })) => {
                match job.machine.outcome().and_then(|o| o.pool_of_success()) {
                    Some(pool) if job.stage == super::job::Stage::Succeeded => Ok(pool),
                    _ => Err(()),
                }
            }
            _ => return,
        };
        let outcome = match outcome {
            Ok(pool) => Ok(pool),
            Err(()) => Err(self
                .failure_of(key, capacity)
                .ok()
                .flatten()
                .map_or_else(|| "INTERNAL_ERROR".to_string(), |f| f.error.code)),
        };
        let Ok(job) = self.jobs.get_mut(key) else { return };
        let Some(log) = job.log.take() else { return };
        let registry = {
            let pools = job.pools.borrow();
            match self.decisions.as_mut() {
                Some(d) => d.facts(pools.registry.pools()),
                None => return,
            }
        };
        let record = Record {
            sandbox: job.id,
            made: outcome.is_ok(),
            log: *log,
            labels: job.labels.clone(),
            registry,
            candidates: job.machine.candidates().to_vec(),
            outcome,
        };
        if let Some(d) = self.decisions.as_mut() {
            d.push(record);
        }
    }

    /// A provision refused before its job began (`code`: no eligible pool, a budget's label
    /// missing): its record, with no step.
    #[allow(clippy::too_many_arguments, reason = "the parts of begin")]
    pub(crate) fn keep_refused(
        &mut self,
        registry: &std::rc::Rc<std::cell::RefCell<Pools>>,
        req: &Request,
        labels: Vec<(String, String)>,
        extras: Option<&Extras>,
        detached: bool,
        id: SandboxKey,
        at: Now,
        code: &str,
    ) {
        if code == "INVALID_REQUEST" {
            return;
        }
        let pools = registry.borrow();
        let Some(log) = self.decision_log(&pools, req, &labels, extras, detached, at) else { return };
        let Some(d) = self.decisions.as_mut() else { return };
        let registry = d.facts(pools.registry.pools());
        d.push(Record {
            sandbox: id,
            made: false,
            log: *log,
            labels: std::sync::Arc::new(labels),
            registry,
            candidates: Vec::new(),
            outcome: Err(code.to_string()),
        });
    }

    /// `router.decisions({ sandboxId?, since?, limit? })`: the kept records, newest first
    /// (`query`: the caller's, read strictly: `INVALID_INPUT` naming the field).
    pub fn decisions_list(&self, query: &Value) -> Result<Vec<Value>, crate::core::error::Failure> {
        let q = crate::core::decision::query_of(query).map_err(|e| {
            crate::core::error::Fault::invalid(
                crate::core::error::ErrorClass::RequestValidation,
                "INVALID_INPUT",
                format!("invalid decisions query: {} {}", e.field, e.expectation),
                e.field,
            )
        })?;
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
