//! A job in flight (a provision or a warm refill): its acquisition machine and what the
//! router keeps beside it, the slab of jobs by key, and the mapping record a job writes.

use super::pools::Pools;
use super::slab::Slab;
use crate::core::acquisition::Acquisition;
use crate::core::error::{ErrorClass, Failure, Fault};
use crate::core::ids::SandboxKey;
use crate::core::mapping::{CreatedAt, Mapping};
use crate::core::request::Request;
use crate::core::warm::Member;
use rustc_hash::FxHashSet;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// Where a job is, beside its machine's own phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Ask the machine.
    Machine,
    /// The launch intent is being written.
    Intent,
    /// The launch is in flight.
    Launch,
    /// The classifier is being asked.
    Classify,
    /// The caller's store is being written.
    Persist,
    /// A refill's member is being written to the fleet's inventory.
    WarmSettle,
    /// A claimed member is being re-resolved as owned.
    ClaimResolve,
    /// A gone member's shared budget charge is being given back.
    ClaimUncharge,
    /// The sandbox is being destroyed (its record could not be stored).
    Cleanup,
    /// The intent is being settled after a failure (`failed`: written as failed).
    Unintent { failed: bool },
    /// Waiting in the router's queue until `Job::wait_until` or a wake.
    Waiting,
    /// Over with a sandbox.
    Succeeded,
    /// Over without one.
    Failed,
}

/// What a job carries for warm pools, beside its machine.
pub(crate) enum WarmRole {
    /// A provision that may claim.
    Claimer(Claimer),
    /// A refill (of the job's one pool): the fleet's grant, and when it began (its create
    /// latency is measured from there).
    Refill { token: Option<i64>, begun_at: i64 },
}

/// One job in flight.
pub(crate) struct Job {
    /// The provision's sandbox id, stamped on its launches and named by its record.
    pub(crate) id: SandboxKey,
    pub(crate) machine: Acquisition,
    /// The registry it routed on.
    pub(crate) pools: Rc<RefCell<Pools>>,
    /// The request's caller labels (validated), for the mapping record.
    pub(crate) labels: Arc<crate::core::labels::Labels>,
    /// The pool of the last launch, admission or claim step.
    pub(crate) pool: usize,
    pub(crate) timeout_ms: u64,
    pub(crate) detached: bool,
    /// Warm pools: none unless they are started and the registry keeps one.
    pub(crate) warm: Option<Box<WarmRole>>,
    /// Where it is beside its machine.
    pub(crate) stage: Stage,
    /// A launch was attempted (an intent may exist).
    pub(crate) launched: bool,
    /// The current `Reserve` step carries the launch intent of [`Job::pool`] in the
    /// reservation's transaction ([`flags::INTENT`](super::step::flags::INTENT)).
    pub(crate) folding_intent: bool,
    /// The pool whose intent the reservation's transaction wrote, until its launch (which
    /// then needs no `Intent` step of its own).
    pub(crate) intent_ready: Option<usize>,
    /// An intent was written by a reservation's transaction (one may exist without a launch).
    pub(crate) intent_stored: bool,
    /// The provider's id of the sandbox the last launch returned.
    pub(crate) provider_sandbox_id: Option<String>,
    /// A failure decided outside the machine (an intent or a record that could not be
    /// written), with whether a sandbox may exist.
    pub(crate) fault: Option<(Failure, bool)>,
    /// What the wait queue keeps of a provision (None until it first waits, and for refills).
    pub(crate) wait: Option<Box<WaitState>>,
    /// A `Retry-After` cooldown to write to the fleet's pacing (under a shared coordinator):
    /// the pool's id and for how long, ms; one of the job's [`Writes`](super::provision::Writes).
    pub(crate) cooldown: Option<(String, u64)>,
    /// What its decision read and did, when the router records decisions (`decisions`).
    pub(crate) log: Option<Box<crate::core::decision::Record>>,
}

/// A provision's wait: its fairness lane, when to look again, what blocked it, and an abort
/// asked for (`ABORTED` or `ROUTER_CLOSED`).
#[derive(Default)]
pub(crate) struct WaitState {
    pub(crate) lane: Option<String>,
    pub(crate) until: i64,
    pub(crate) blocks: Vec<crate::core::acquisition::Block>,
    pub(crate) abort: Option<&'static str>,
}

impl Job {
    pub(crate) fn pool_id(&self, pool: usize) -> String {
        self.pools.borrow().pool_id(pool).to_string()
    }
}

/// Jobs in flight, by key; `ids` indexes their sandbox ids (`reconcile` asks whether a
/// stamped sandbox without a record is still being made).
#[derive(Default)]
pub(crate) struct Jobs {
    items: Slab<Job>,
    ids: FxHashSet<SandboxKey>,
}

impl Jobs {
    pub(crate) fn insert(&mut self, job: Job) -> u32 {
        self.ids.insert(job.id);
        self.items.insert(job)
    }

    pub(crate) fn get_mut(&mut self, key: u32) -> Result<&mut Job, Failure> {
        self.items.get_mut(key).ok_or_else(|| Fault::internal("(an unknown job key)"))
    }

    /// Drops job `key` (nothing when there is none).
    pub(crate) fn discard(&mut self, key: u32) {
        if let Some(job) = self.items.get(key) {
            self.ids.remove(&job.id);
            self.items.discard(key);
        }
    }

    /// Job `key` is about sandbox `id` from now on (a claimed member).
    pub(crate) fn rekey(&mut self, key: u32, id: SandboxKey) {
        if let Some(job) = self.items.get_mut(key) {
            self.ids.remove(&job.id);
            job.id = id;
            self.ids.insert(id);
        }
    }

    pub(crate) fn ids(&self) -> Vec<SandboxKey> {
        self.ids.iter().copied().collect()
    }

    pub(crate) fn has(&self, id: SandboxKey) -> bool {
        self.ids.contains(&id)
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}

/// What a job's record of the default store says about its sandbox.
pub(crate) struct NewRecord<'a> {
    pub(crate) id: SandboxKey,
    pub(crate) provider_id: &'a str,
    pub(crate) provider_sandbox_id: &'a str,
    pub(crate) labels: Arc<crate::core::labels::Labels>,
    pub(crate) detached: bool,
}

/// Writes a mapping of the default store, stamped with the router's fleet, made at `wall`.
pub(crate) fn write_record(
    store: &RefCell<crate::core::mapping::MappingStore>,
    r: NewRecord<'_>,
    fleet: Arc<str>,
    wall: i64,
) {
    let mut store = store.borrow_mut();
    let provider_id = store.intern(r.provider_id);
    store.put(Mapping {
        id: r.id,
        provider_id,
        provider_sandbox_id: r.provider_sandbox_id.into(),
        labels: r.labels,
        stamped: true,
        fleet: Some(fleet),
        created_at: CreatedAt::Millis(wall),
        detached: r.detached,
    });
}

/// A fault for an unknown pool index (the caller named a pool the registry lacks).
pub(crate) fn unknown_pool() -> Failure {
    Fault::new(
        ErrorClass::Internal,
        "INTERNAL_ERROR",
        "internal error (an unknown pool index) (a bug: please report it)",
    )
}

/// A provision's claim state: its request (the claim's rule reads it), the member it took
/// and whether from the fleet's inventory, or the floor it asks the fleet with.
pub(crate) struct Claimer {
    pub(crate) request: Rc<Request>,
    pub(crate) member: Option<Member>,
    pub(crate) floor: Option<i64>,
    pub(crate) fleet: bool,
}
