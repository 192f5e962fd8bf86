//! The driver protocol: what the router asks JavaScript to do next for a job, on which
//! pool, within how long, and the flags JavaScript reads before it performs the step. Every
//! job kind (provisions, refills, warm tasks, operations, reconcile runs) answers a
//! [`Next`]; `lib/driver.js` dispatches on its [`StepKind`].

/// What the caller must do next for a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// Launch on the pool, then report the outcome.
    Launch = 0,
    /// Read that pool's capacity, then report it.
    Admit = 1,
    /// Over: [`Router::failure`] says how, unless it succeeded.
    Done = 2,
    /// Reserve that pool's cost in the shared budget ledger, then report it.
    Reserve = 3,
    /// Ask the fleet's inventory (PostgreSQL) for a member of the pool, then report it.
    Claim = 4,
    /// A member of the pool was taken from this process's inventory; confirm it or report it lost.
    Claimed = 5,
    /// Write the launch intent record ([`Router::intent`], state `launching`), then report
    /// [`Router::intent_written`]; the launch follows.
    Intent = 6,
    /// Ask the caller's classifier about the value the launch threw, then report
    /// [`Router::classified`].
    Classify = 7,
    /// Write the provision's record ([`Router::record`]) to the caller's store, then report
    /// [`Router::persisted`].
    Persist = 8,
    /// Destroy the sandbox the launch returned (its record could not be stored), then
    /// report [`Router::cleaned_up`].
    Cleanup = 9,
    /// The provision failed after a launch: write its intent as `failed` (the bound's
    /// `failed` flag; a sandbox may exist) or remove it, then report
    /// [`Router::intent_settled`].
    Unintent = 10,
    /// Over with a sandbox: hand the caller `{ id, providerId, labels }`.
    Succeeded = 11,
    /// Under a shared coordinator, admit the pool: the coordinator's read sequence, the
    /// pool's capacity read, then ([`Router::demand`]) the coordinator's admission.
    Coordinate = 12,
    /// A refill's member: write it to the fleet's inventory (its record and the member in
    /// one transaction; [`Router::refill_member`]), then report [`Router::persisted`].
    WarmSettle = 13,
    /// An operation by id: read the sandbox's record from the caller's store, then report
    /// [`Router::operation_read`].
    ReadRecord = 20,
    /// An operation by id: find the record's pool in the caller's registry (and whether its
    /// runtime has the method and `getById`, and this process the handle from launch), then
    /// report [`Router::operation_found`].
    FindPool = 21,
    /// An operation by id: `getById(providerSandboxId, { owned: true })` on the pool, then
    /// report [`Router::operation_settled`].
    Resolve = 22,
    /// An operation by id: the runtime's method on the handle (flag `ID_HANDLE`: the handle
    /// is `{ id: providerSandboxId }`), then report [`Router::operation_settled`].
    Call = 23,
    /// `destroy`: remove the record from the caller's store, then report
    /// [`Router::operation_unmapped`].
    Unmap = 24,
    /// A destroyed or reclaimed sandbox: give back its slot in the shared ledger
    /// (`releaseSandbox`), then report [`Router::operation_released`].
    Release = 25,
    /// A claimed member this process holds no live handle of: re-resolve it as owned
    /// (`getById(id, { owned: true })`), then report [`Router::claim_resolved`].
    ClaimResolve = 40,
    /// A fleet claim's member proved gone under shared budgets: give its charge back to the
    /// provision (`warmUncharge`), then report [`Router::claim_uncharged`].
    ClaimUncharge = 41,
    /// The provision waits in the router's queue (`queue`): wait until the bound passes, it
    /// is woken (flag [`flags::WAKE`]: `routerWakes` names it) or its signal aborts
    /// ([`Router::abort`]), then report [`Router::waited`].
    Wait = 14,
    /// Warm task: re-resolve its member as owned, then report [`Router::warm_resolved`].
    WarmResolve = 42,
    /// Warm task: destroy its member (the live handle held), then report
    /// [`Router::warm_destroyed`].
    WarmDestroy = 43,
    /// Warm task: remove its member's record from the caller's store, then report
    /// [`Router::warm_unmapped`].
    WarmUnmap = 44,
    /// Warm task: list the pool's stamped sandboxes with its native finder (one call), then
    /// report [`Router::warm_listed`].
    WarmList = 45,
    /// Warm task: one call to the fleet's inventory ([`Router::warm_fleet_ask`] says
    /// which), then report [`Router::warm_fleet_answered`].
    WarmFleet = 46,
    /// Warm task: read the caller's store's records (`list()`), then report
    /// [`Router::warm_records`].
    WarmRecords = 47,
    /// Reconcile (`reconcile.rs`): list the pool with its finder within the bound, then report
    /// [`Router::reconcile_listed`].
    ReconcileList = 30,
    /// Reconcile: read the store's `list()` (flag [`flags::INTENTS`]: its `intents()`) within
    /// the bound, then report [`Router::reconcile_mappings`] / [`Router::reconcile_intents`].
    ReconcileRead = 31,
    /// Reconcile: signal the pids [`Router::reconcile_pids`] names with `process.kill(pid, 0)`,
    /// then report [`Router::reconcile_signalled`].
    ReconcileSignal = 32,
    /// Reconcile: an action begins ([`Router::reconcile_target`] names it): report whether a
    /// provision of this process is making its id now ([`Router::reconcile_rechecked`]).
    ReconcileRecheck = 33,
    /// Reconcile: take the idle member out of the fleet's inventory (`warmTake`), then report
    /// [`Router::reconcile_settled`].
    ReconcileWarmTake = 34,
    /// Reconcile: read the store's record of the id (`get`) within the bound, then report
    /// [`Router::reconcile_settled`].
    ReconcileRecord = 35,
    /// Reconcile: re-resolve the sandbox as owned (`getById(id, { owned: true })`) within the
    /// bound, then report [`Router::reconcile_settled`].
    ReconcileLookup = 36,
    /// Reconcile: destroy the sandbox that lookup answered within the bound, then report
    /// [`Router::reconcile_settled`].
    ReconcileDestroy = 37,
    /// Reconcile: delete the store's record of the id within the bound, then report
    /// [`Router::reconcile_settled`].
    ReconcileDelete = 38,
    /// Reconcile: give the sandbox's slot back in the shared ledger (`releaseSandbox`), then
    /// report [`Router::reconcile_released`].
    ReconcileRelease = 39,
}

impl StepKind {
    /// Every kind with the name JavaScript knows it by (`binding.stepKinds()`), so the
    /// numbers are written once, here.
    pub const ALL: &'static [(StepKind, &'static str)] = &[
        (StepKind::Launch, "Launch"),
        (StepKind::Admit, "Admit"),
        (StepKind::Done, "Done"),
        (StepKind::Reserve, "Reserve"),
        (StepKind::Claim, "Claim"),
        (StepKind::Claimed, "Claimed"),
        (StepKind::Intent, "Intent"),
        (StepKind::Classify, "Classify"),
        (StepKind::Persist, "Persist"),
        (StepKind::Cleanup, "Cleanup"),
        (StepKind::Unintent, "Unintent"),
        (StepKind::Succeeded, "Succeeded"),
        (StepKind::Coordinate, "Coordinate"),
        (StepKind::WarmSettle, "WarmSettle"),
        (StepKind::Wait, "Wait"),
        (StepKind::ReadRecord, "ReadRecord"),
        (StepKind::FindPool, "FindPool"),
        (StepKind::Resolve, "Resolve"),
        (StepKind::Call, "Call"),
        (StepKind::Unmap, "Unmap"),
        (StepKind::Release, "Release"),
        (StepKind::ClaimResolve, "ClaimResolve"),
        (StepKind::ClaimUncharge, "ClaimUncharge"),
        (StepKind::WarmResolve, "WarmResolve"),
        (StepKind::WarmDestroy, "WarmDestroy"),
        (StepKind::WarmUnmap, "WarmUnmap"),
        (StepKind::WarmList, "WarmList"),
        (StepKind::WarmFleet, "WarmFleet"),
        (StepKind::WarmRecords, "WarmRecords"),
        (StepKind::ReconcileList, "ReconcileList"),
        (StepKind::ReconcileRead, "ReconcileRead"),
        (StepKind::ReconcileSignal, "ReconcileSignal"),
        (StepKind::ReconcileRecheck, "ReconcileRecheck"),
        (StepKind::ReconcileWarmTake, "ReconcileWarmTake"),
        (StepKind::ReconcileRecord, "ReconcileRecord"),
        (StepKind::ReconcileLookup, "ReconcileLookup"),
        (StepKind::ReconcileDestroy, "ReconcileDestroy"),
        (StepKind::ReconcileDelete, "ReconcileDelete"),
        (StepKind::ReconcileRelease, "ReconcileRelease"),
    ];
}

/// The step flags (`step[4]`): what JavaScript reads before it performs the step.
pub mod flags {
    /// The job decided events: read them (`acquisitionEvents`).
    pub const EVENTS: u32 = 1;
    /// The job decided writes for the shared ledger: perform them without waiting
    /// (`acquisitionWrites`).
    pub const WRITES: u32 = 2;
    /// The job is ended already (the success call settled it): do not end it again.
    pub const ENDED: u32 = 4;
    /// `Unintent`: write the intent as `failed` (else remove it).
    pub const FAILED_INTENT: u32 = 8;
    /// The router decided events outside a job: hand them on (`routerEvents`).
    pub const ROUTER_EVENTS: u32 = 16;
    /// Warm work may be due: poll the warm pools soon (`warmPoll`).
    pub const WARM: u32 = 32;
    /// Start more lanes of this reconcile run first (`reconcileForks` says how many).
    pub const FORK: u32 = 64;
    /// `ReconcileRead`: read the store's intents (else its mappings).
    pub const INTENTS: u32 = 128;
    /// `Persist`: write the record and the job's shared-ledger writes (`acquisitionWrites`)
    /// in one transaction (`settleLaunch`), and not apart; `Unmap`: the destroy's writes in
    /// one statement (`forget`: the record, the holds, the budget slot), reported with
    /// `operationForgotten` (no `Release` follows). Set when the mapping store is the
    /// coordinator (`stores::pg::launch`).
    pub const COMBINED: u32 = 1 << 10;
    /// `Reserve`: take the read sequence of the capacity step that follows in the
    /// reservation's transaction (`prepareLaunch`), so `Coordinate` needs none of its own.
    pub const SEQUENCE: u32 = 1 << 11;
    /// `Reserve`: write the launch intent (`acquisitionIntent`) in the reservation's
    /// transaction too (`prepareLaunch`, which writes it only if the reservation is made), and
    /// report whether it was written; the launch that follows then has no `Intent` step. Set
    /// when the mapping store is the coordinator and keeps intents.
    pub const INTENT: u32 = 1 << 12;
    /// Waiting provisions are to be woken now (`routerWakes` names them): a pool may have
    /// freed for them, their turn came, or they are to end (aborted, the router closed).
    pub const WAKE: u32 = 1 << 13;
}

/// A step as the caller performs it: what, on which pool, within how long, and the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Next {
    /// What to do.
    pub kind: StepKind,
    /// The pool it concerns (registration index).
    pub pool: usize,
    /// The bound on the I/O it asks for, ms (0: none).
    pub bound_ms: u64,
    /// [`flags`].
    pub flags: u32,
}
