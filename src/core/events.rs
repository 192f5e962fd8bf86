//! Every event the router emits: one enum, its fields and their documentation, defined once.
//!
//! Why a macro? An event type used to be written three times (the machine's enum, the JS
//! dispatch that gave it its documented shape, the TypeScript union), and an event the JS
//! side did not know was silently dropped. Here each event is declared once, with its type
//! name, its TypeScript interface name, its documentation and each field's JavaScript name
//! and TypeScript type; the macro makes from that one declaration the [`Event`] enum, the
//! writer that turns an event into its documented object (through a [`FieldSink`], which
//! the glue implements over a JS object and the tests over a map), and the schema
//! ([`schema`]) from which `scripts/event-types.mjs` generates the event section of
//! `index.d.ts` (a test fails when the two differ). JavaScript forwards what it is given.
//!
//! Adding an event type: one entry below, the place in the core that emits it, its test, and
//! the README's event table (docs/architecture.md, "Recipes").

use std::sync::Arc;

/// A pool's id, as events name it.
pub type PoolId = Arc<str>;

/// Where the values of an event (or an error) are written: the glue builds a JavaScript
/// object, the tests a list.
pub trait FieldSink {
    /// A string field.
    fn str(&mut self, name: &'static str, value: &str);
    /// A number field.
    fn num(&mut self, name: &'static str, value: f64);
    /// A boolean field.
    fn bool(&mut self, name: &'static str, value: bool);
    /// A field whose value is `null`.
    fn null(&mut self, name: &'static str);
    /// An array of strings.
    fn strs(&mut self, name: &'static str, values: &[PoolId]);
    /// An array of `{ code, detail }` reasons.
    fn reasons(&mut self, name: &'static str, values: &[ReasonFact]);
    /// A `{ label, value }` budget key.
    fn key(&mut self, name: &'static str, label: &str, value: &str);
}

/// One rejection reason, as events and errors carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasonFact {
    /// Stable reason code (`MISSING_CAPABILITY`, …).
    pub code: &'static str,
    /// Names and numbers, never a caller's value.
    pub detail: String,
}

/// A budget's key: the rule's label and the request's value of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFact {
    /// The label (`tenant`).
    pub label: String,
    /// The request's value of it.
    pub value: String,
}

/// A field that is written as `null` when it has no value (not left out).
#[derive(Debug, Clone, PartialEq)]
pub struct Nullable<T>(pub Option<T>);

/// A value an event (or error) field can hold.
pub trait EventField {
    /// Whether the field is left out when it has no value (`?` in TypeScript).
    const OPTIONAL: bool = false;
    /// Writes the field.
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink);
}

impl EventField for String {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.str(name, self);
    }
}
impl EventField for &'static str {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.str(name, self);
    }
}
impl EventField for Arc<str> {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.str(name, self);
    }
}
impl EventField for bool {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.bool(name, *self);
    }
}
impl EventField for u32 {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.num(name, f64::from(*self));
    }
}
impl EventField for u64 {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.num(name, *self as f64);
    }
}
impl EventField for f64 {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.num(name, *self);
    }
}
impl EventField for Vec<PoolId> {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.strs(name, self);
    }
}
impl EventField for Vec<ReasonFact> {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.reasons(name, self);
    }
}
impl EventField for KeyFact {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.key(name, &self.label, &self.value);
    }
}
impl EventField for Time {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        out.str(name, &crate::core::clock::iso8601_millis(self.0));
    }
}
impl<T: EventField> EventField for Option<T> {
    const OPTIONAL: bool = true;
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        if let Some(v) = self {
            v.write_to(name, out);
        }
    }
}
impl<T: EventField> EventField for Nullable<T> {
    fn write_to(&self, name: &'static str, out: &mut dyn FieldSink) {
        match &self.0 {
            Some(v) => v.write_to(name, out),
            None => out.null(name),
        }
    }
}

/// An instant (epoch ms), written as ISO-8601 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Time(pub i64);

/// Whether an event names a sandbox (`sandboxId`, in `RoutingEventBase`) or a pool or run only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// About one sandbox: carries `sandboxId`.
    Sandbox,
    /// About a pool or a run: no `sandboxId`.
    Router,
}

/// One field of an event type, for the TypeScript generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSchema {
    /// Its JavaScript name.
    pub name: &'static str,
    /// Its TypeScript type.
    pub ts: &'static str,
    /// `?` in TypeScript: left out when it has no value.
    pub optional: bool,
    /// Its documentation.
    pub doc: &'static str,
}

/// One event type, for the TypeScript generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeSchema {
    /// `type`: `attempt.started`, …
    pub name: &'static str,
    /// The TypeScript interface (`AttemptStartedEvent`).
    pub interface: &'static str,
    /// Its documentation.
    pub doc: &'static str,
    /// Whether it carries `sandboxId`.
    pub scope: Scope,
    /// Its own fields, in order.
    pub fields: Vec<FieldSchema>,
}

macro_rules! events {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident = $name:literal as $iface:literal, $scope:ident {
            $(
                $(#[doc = $fdoc:literal])*
                $field:ident : $ty:ty = $js:literal as $ts:literal
            ),* $(,)?
        }
    ),* $(,)?) => {
        /// An event the router emits (the README's event table lists each).
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum Event {
            $(
                $(#[doc = $doc])*
                $variant {
                    $(
                        $(#[doc = $fdoc])*
                        $field: $ty
                    ),*
                }
            ),*
        }

        impl Event {
            /// Every event type's name, in declaration order.
            pub const TYPES: &'static [&'static str] = &[$($name),*];

            /// Its `type`.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $(Event::$variant { .. } => $name),*
                }
            }

            /// Whether it names a sandbox.
            pub fn scope(&self) -> Scope {
                match self {
                    $(Event::$variant { .. } => Scope::$scope),*
                }
            }

            /// Writes its own fields (not `type`, `at`, `sandboxId`), in their documented order.
            #[allow(unused_variables, reason = "variants without fields write nothing")]
            pub fn write_fields(&self, out: &mut dyn FieldSink) {
                match self {
                    $(Event::$variant { $($field),* } => {
                        $( EventField::write_to($field, $js, out); )*
                    }),*
                }
            }
        }

        /// Every event type with its fields, in declaration order: what `index.d.ts`'s event
        /// section is generated from.
        pub fn schema() -> Vec<TypeSchema> {
            vec![$(
                TypeSchema {
                    name: $name,
                    interface: $iface,
                    doc: concat!($($doc, "\n"),*),
                    scope: Scope::$scope,
                    fields: vec![$(
                        FieldSchema {
                            name: $js,
                            ts: $ts,
                            optional: <$ty as EventField>::OPTIONAL,
                            doc: concat!($($fdoc, "\n"),*),
                        }
                    ),*],
                }
            ),*]
        }
    };
}

events! {
    /// The request passed validation; a provision (or `provisionDetached`) starts.
    ProvisionValidated = "provision.validated" as "ProvisionValidatedEvent", Sandbox {
        /// True for `provisionDetached`.
        detached: bool = "detached" as "boolean",
        /// With `decisions`: the id of the provision's decision record (`router.decisions()`).
        decision_id: Option<String> = "decisionId" as "string",
    },
    /// One per pool the filters rejected.
    ProviderRejected = "provider.rejected" as "ProviderRejectedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        reasons: Vec<ReasonFact> = "reasons" as "RejectionReason[]",
    },
    /// The attempt order is known.
    ProvisionRanked = "provision.ranked" as "ProvisionRankedEvent", Sandbox {
        /// One line, as in `RoutingExplanation.summary`.
        summary: String = "summary" as "string",
        /// The attempt order, best first.
        order: Vec<PoolId> = "providerIds" as "ProviderId[]",
        /// With `decisions`: the id of the provision's decision record.
        decision_id: Option<String> = "decisionId" as "string",
    },
    /// Capacity routing or pacing skipped a pool without consuming an attempt.
    CapacitySkipped = "capacity.skipped" as "CapacitySkippedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        status: &'static str = "status" as "'UNKNOWN' | 'EXHAUSTED'",
        /// `UNKNOWN`: a `CapacityUnknownReason`, `NO_CAPACITY_READER`, or `COORDINATOR_UNAVAILABLE` (a `capacity.coordinator` that could not be asked); `EXHAUSTED`: the full dimension (`cpu`, `sandboxes`, …), or pacing's `RATE_LIMITED` (no launch token) / `COOLING_DOWN`, or the wait queue's `QUEUED` (waiters ahead wait for it) (docs/rate-limits.md).
        reason: String = "reason" as "string",
        /// `reason` as a bounded code (`EXHAUSTED_<DIMENSION>` for a full dimension): what telemetry counts.
        skip_reason: &'static str = "skipReason" as "string",
        /// Pacing or the wait queue skipped it (`RATE_LIMITED`, `COOLING_DOWN`, `QUEUED`): what `sandbox_router_rate_limited_total` counts.
        paced: bool = "paced" as "boolean",
    },
    /// Pacing: the pool had no launch token (its `rateLimit`), so the provision skipped it
    /// (`capacity.skipped` says so too).
    PoolRateLimited = "pool.rate.limited" as "PoolRateLimitedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        /// ISO-8601: when the pool's next launch token comes.
        retry_at: Time = "retryAt" as "string",
    },
    /// Pacing: a classifier answered `retryAfterMs` for this provision's failure on the pool,
    /// which is skipped (`COOLING_DOWN`) until `until`.
    PoolCooldownStarted = "pool.cooldown.started" as "PoolCooldownStartedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        /// What the classifier answered (cut to a day).
        retry_after_ms: u64 = "retryAfterMs" as "number",
        /// ISO-8601: when the cooldown ends (a longer earlier one is kept).
        until: Time = "until" as "string",
    },
    /// Pacing: a pool's `Retry-After` cooldown passed; it may launch again (reported at the
    /// first decision after its end).
    PoolCooldownEnded = "pool.cooldown.ended" as "PoolCooldownEndedEvent", Router {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// The wait queue (`queue`): every pool of the provision was blocked by something time
    /// clears, so it waits its turn.
    QueueEntered = "queue.entered" as "QueueEnteredEvent", Sandbox {
        /// Provisions waiting, this one included.
        depth: u32 = "depth" as "number",
        /// The pools it waits for.
        pools: Vec<PoolId> = "providerIds" as "ProviderId[]",
    },
    /// The wait queue: a pool freed and the waiting provision goes on to its launch (or claim).
    QueueAdmitted = "queue.admitted" as "QueueAdmittedEvent", Sandbox {
        /// How long it waited, ms.
        waited_ms: u64 = "waitedMs" as "number",
    },
    /// The wait queue: the provision waited `maxWaitMs` and no pool freed (`QUEUE_TIMEOUT`).
    QueueTimeout = "queue.timeout" as "QueueTimeoutEvent", Sandbox {
        /// How long it waited, ms.
        waited_ms: u64 = "waitedMs" as "number",
        /// The pools that still blocked it.
        pools: Vec<PoolId> = "providerIds" as "ProviderId[]",
    },
    /// Capacity routing admitted a pool for the next launch.
    CapacityAdmitted = "capacity.admitted" as "CapacityAdmittedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// A launch begins.
    AttemptStarted = "attempt.started" as "AttemptStartedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        /// 1-based.
        attempt: u32 = "attempt" as "number",
    },
    /// A launch failed.
    AttemptFailed = "attempt.failed" as "AttemptFailedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        /// 1-based.
        attempt: u32 = "attempt" as "number",
        /// Your classifier's code, or one of the router's (`PROVIDER_LAUNCH_OUTCOME_UNKNOWN`, `ACQUISITION_TIMEOUT`, …).
        code: String = "code" as "string",
        retryable: bool = "retryable" as "boolean",
    },
    /// A launch succeeded.
    AttemptSucceeded = "attempt.succeeded" as "AttemptSucceededEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        /// 1-based.
        attempt: u32 = "attempt" as "number",
    },
    /// A proven pre-allocation failure moves on to the next pool.
    FallbackAdvanced = "fallback.advanced" as "FallbackAdvancedEvent", Sandbox {
        from: PoolId = "fromProviderId" as "ProviderId",
        to: PoolId = "toProviderId" as "ProviderId",
        /// The number of the attempt about to start.
        attempt: u32 = "attempt" as "number",
    },
    /// The mapping record was stored.
    MappingPersisted = "mapping.persisted" as "MappingPersistedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// The mapping record could not be stored; a cleanup destroy follows (`cleanup.completed`).
    MappingFailed = "mapping.failed" as "MappingFailedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// The router destroyed a sandbox nobody holds: after a mapping failure, or a launch that succeeded after its deadline.
    CleanupCompleted = "cleanup.completed" as "CleanupCompletedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        reason: &'static str = "reason" as "'mapping-failed' | 'late-launch'",
        /// False: the sandbox may still exist; find it by `SANDBOX_ID_LABEL`.
        succeeded: bool = "succeeded" as "boolean",
    },
    /// The provision failed; `code` is the code of the error it rejects with.
    ProvisionExhausted = "provision.exhausted" as "ProvisionExhaustedEvent", Sandbox {
        code: String = "code" as "string",
        /// With `NO_ELIGIBLE_PROVIDER` only: the explanation's summary.
        summary: Option<String> = "summary" as "string",
        /// With `decisions`: the id of the provision's decision record.
        decision_id: Option<String> = "decisionId" as "string",
    },
    /// `destroy(id)` completed and the mapping is gone.
    SandboxDestroyed = "sandbox.destroyed" as "SandboxDestroyedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// `reconcile()`: one pool was listed (counts per class) or could not be (`reason`). Pool-level: no `sandboxId`.
    ReconcileListed = "reconcile.listed" as "ReconcileListedEvent", Router {
        pool: PoolId = "providerId" as "ProviderId",
        status: &'static str = "status" as "'known' | 'unknown'",
        reason: Option<&'static str> = "reason" as "ReconcileUnknownReason",
        orphan: Option<u32> = "orphan" as "number",
        stale_mapping: Option<u32> = "staleMapping" as "number",
        mapped: Option<u32> = "mapped" as "number",
        pending: Option<u32> = "pending" as "number",
    },
    /// `reconcile({ reclaim: true })` acted on one sandbox, mapping or intent.
    ReconcileReclaimed = "reconcile.reclaimed" as "ReconcileReclaimedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        class: &'static str = "class" as "ReconcileOutcome['class']",
        outcome: &'static str = "outcome" as "ReconcileOutcomeCode",
    },
    /// `reconcile()` finished. Totals over the pools; no `sandboxId`.
    ReconcileCompleted = "reconcile.completed" as "ReconcileCompletedEvent", Router {
        reclaim: bool = "reclaim" as "boolean",
        timed_out: bool = "timedOut" as "boolean",
        duration_ms: u64 = "durationMs" as "number",
        orphan: u32 = "orphan" as "number",
        stale_mapping: u32 = "staleMapping" as "number",
        mapped: u32 = "mapped" as "number",
        pending: u32 = "pending" as "number",
        unknown_pools: u32 = "unknownPools" as "number",
    },
    /// Live health: a pool's circuit opened; it is excluded (`CIRCUIT_OPEN`) until `retryAt`.
    CircuitOpened = "health.circuit.opened" as "HealthCircuitOpenedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        reason: &'static str = "reason" as "HealthCause",
        /// The consecutive failures that opened it (1 for a failed trial).
        consecutive_failures: u32 = "consecutiveFailures" as "number",
        cooldown_ms: u64 = "cooldownMs" as "number",
        /// ISO-8601: from then, one trial provision may use it.
        retry_at: Time = "retryAt" as "string",
    },
    /// Live health: the cooldown is over and this provision is the single trial on the pool.
    CircuitHalfOpen = "health.circuit.half-open" as "HealthCircuitHalfOpenEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// Live health: a success closed the pool's circuit.
    CircuitClosed = "health.circuit.closed" as "HealthCircuitClosedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// Live health: a candidate of this provision was passed over at launch time (its circuit opened, or another provision took its half-open trial, after the route was decided).
    HealthSkipped = "health.skipped" as "HealthSkippedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        reason: &'static str = "reason" as "'CIRCUIT_OPEN'",
    },
    /// Warm pools: a refill made an idle member.
    WarmMemberLaunched = "warm.member.launched" as "WarmMemberLaunchedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// Warm pools: a provision took an idle member (`sandboxId`: the member, now the result).
    WarmClaimed = "warm.claimed" as "WarmClaimedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        /// How long it was idle, ms (router clock).
        age_ms: u64 = "ageMs" as "number",
    },
    /// Warm pools: a provision could not claim a member of this pool and launches cold.
    WarmMiss = "warm.miss" as "WarmMissEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        reason: &'static str = "reason" as "WarmMissReason",
    },
    /// Warm pools: an idle member was retired and destroyed: it aged out (`AGE`: maxIdleMs, or close to the pool's lifetime), or the pool's target fell below its idle members (`SURPLUS`).
    WarmMemberExpired = "warm.member.expired" as "WarmMemberExpiredEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        age_ms: u64 = "ageMs" as "number",
        /// False: the destroy failed (or the provider could not be asked); its record stays for `reconcile`.
        destroyed: bool = "destroyed" as "boolean",
        reason: &'static str = "reason" as "'AGE' | 'SURPLUS'",
    },
    /// Warm pools: an idle member was found gone at the provider and dropped.
    WarmMemberLost = "warm.member.lost" as "WarmMemberLostEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// Warm pools: refills paused after `pauseAfterFailures` failures in a row.
    WarmRefillPaused = "warm.refill.paused" as "WarmRefillPausedEvent", Router {
        pool: PoolId = "providerId" as "ProviderId",
        code: String = "code" as "string",
    },
    /// Warm pools: a launch on a paused pool succeeded (its circuit closed); refills resume at once.
    WarmRefillResumed = "warm.refill.resumed" as "WarmRefillResumedEvent", Router {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// Warm pools: a demand-following pool's target (`warm: { min, max }`) moved.
    WarmTargetChanged = "warm.target.changed" as "WarmTargetChangedEvent", Router {
        pool: PoolId = "providerId" as "ProviderId",
        /// Idle members to keep from now on.
        target: u32 = "target" as "number",
        previous: u32 = "previous" as "number",
        /// `DEMAND`: claims per second × create latency; `MIN` / `MAX`: held at a bound.
        reason: &'static str = "reason" as "'MIN' | 'DEMAND' | 'MAX'",
    },
    /// Budgets: a provision reserved its candidate pool's cost, a launch and a concurrent slot against every applying rule.
    BudgetReserved = "budget.reserved" as "BudgetReservedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        /// The pool's `estimatedCost`, reserved.
        cost: f64 = "cost" as "number",
        /// Ids of the rules it was reserved against.
        rules: Vec<PoolId> = "rules" as "string[]",
    },
    /// Budgets: a reservation or a concurrent slot was given back: a failure proven pre-allocation (`PRE_ALLOCATION_FAILURE`), a pool skipped after its reservation (`NOT_LAUNCHED`: capacity, health), `router.destroy` (`DESTROYED`), or `reconcile`'s reclaim (`RECLAIMED`). `cost` and `rules` are set for a reservation.
    BudgetReleased = "budget.released" as "BudgetReleasedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        reason: &'static str = "reason" as "'PRE_ALLOCATION_FAILURE' | 'NOT_LAUNCHED' | 'DESTROYED' | 'RECLAIMED'",
        cost: Option<f64> = "cost" as "number",
        rules: Option<Vec<PoolId>> = "rules" as "string[]",
    },
    /// Budgets (shared ledger): a launch settled after its reservation had been freed, because this process's lease lapsed (the database unreachable, or the process suspended, for longer than `leaseMs`): its charge was written again, over its rules' limits if need be, never dropped.
    BudgetChargedLate = "budget.charged.late" as "BudgetChargedLateEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
    },
    /// Budgets: a rule refused a candidate pool (the pool is skipped without consuming an attempt).
    BudgetRefused = "budget.refused" as "BudgetRefusedEvent", Sandbox {
        pool: PoolId = "providerId" as "ProviderId",
        /// `BUDGET_EXCEEDED`, or `BUDGET_STORE_UNAVAILABLE` (the shared ledger could not be asked).
        reason: &'static str = "reason" as "string",
        rule: String = "rule" as "string",
        key: KeyFact = "key" as "BudgetKey",
        dimension: &'static str = "dimension" as "BudgetDimension",
        limit: f64 = "limit" as "number",
        used: f64 = "used" as "number",
        reserved: f64 = "reserved" as "number",
        /// When the window frees what is used (ISO 8601); null for `concurrent`.
        resets_at: Nullable<Time> = "resetsAt" as "string | null",
        /// True only when releasing the in-flight reservations could make room.
        retryable: bool = "retryable" as "boolean",
    },
}

/// An event as the router hands it out: the event, when (router clock, ms) and, for events
/// about a sandbox, which sandbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    /// When it was decided (the router's clock, epoch ms).
    pub at: i64,
    /// The sandbox it is about (`sandboxId`), for [`Scope::Sandbox`] events.
    pub sandbox: Option<crate::core::ids::SandboxKey>,
    /// The event.
    pub event: Event,
}

impl Emitted {
    /// Writes the whole documented object: `type`, `at`, `sandboxId` (events about a
    /// sandbox), then the event's own fields.
    pub fn write(&self, out: &mut dyn FieldSink) {
        out.str("type", self.event.type_name());
        out.str("at", &crate::core::clock::iso8601_millis(self.at));
        if self.event.scope() == Scope::Sandbox {
            if let Some(s) = self.sandbox {
                out.str("sandboxId", &s.to_string());
            }
        }
        self.event.write_fields(out);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_kept_step_names_its_pool_from_the_ids_must_fire_and_an_index_past_them_names_none_must_not() {
        let ids: Vec<PoolId> = vec!["a".into(), "b".into()];
        assert_eq!(
            Kept::Started(1, 2).event(&ids),
            Event::AttemptStarted { pool: "b".into(), attempt: 2 },
            "must-fire"
        );
        assert_eq!(Kept::Persisted(5).into_event(&ids), Event::MappingPersisted { pool: "".into() }, "must-not-fire");
        let other = Kept::of(Event::MappingPersisted { pool: "c".into() });
        assert_eq!(other.event(&[]), Event::MappingPersisted { pool: "c".into() }, "a boxed event is itself");
    }

    /// A sink that keeps `name=value` pairs, for assertions.
    #[derive(Default)]
    pub(crate) struct Pairs(pub Vec<(String, String)>);

    impl FieldSink for Pairs {
        fn str(&mut self, name: &'static str, value: &str) {
            self.0.push((name.into(), value.into()));
        }
        fn num(&mut self, name: &'static str, value: f64) {
            self.0.push((name.into(), value.to_string()));
        }
        fn bool(&mut self, name: &'static str, value: bool) {
            self.0.push((name.into(), value.to_string()));
        }
        fn null(&mut self, name: &'static str) {
            self.0.push((name.into(), "null".into()));
        }
        fn strs(&mut self, name: &'static str, values: &[PoolId]) {
            self.0.push((name.into(), values.join(",")));
        }
        fn reasons(&mut self, name: &'static str, values: &[ReasonFact]) {
            let v: Vec<String> = values.iter().map(|r| format!("{}:{}", r.code, r.detail)).collect();
            self.0.push((name.into(), v.join(";")));
        }
        fn key(&mut self, name: &'static str, label: &str, value: &str) {
            self.0.push((name.into(), format!("{label}={value}")));
        }
    }

    impl Pairs {
        pub(crate) fn names(&self) -> Vec<&str> {
            self.0.iter().map(|(k, _)| k.as_str()).collect()
        }
    }

    #[test]
    fn every_type_is_named_once_and_in_the_schema() {
        let names = Event::TYPES;
        let mut sorted = names.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "no type is declared twice");
        let schema: Vec<&str> = schema().iter().map(|t| t.name).collect();
        assert_eq!(schema, names);
        assert_eq!(names.len(), 39);
    }

    #[test]
    fn the_pacing_events_write_their_fields_in_order() {
        let e = Emitted {
            at: 0,
            sandbox: crate::core::ids::SandboxKey::parse("sbx_0123456789abcdef0123456789abcdef"),
            event: Event::PoolCooldownStarted { pool: "e2b".into(), retry_after_ms: 5_000, until: Time(5_000) },
        };
        let mut out = Pairs::default();
        e.write(&mut out);
        assert_eq!(out.names(), ["type", "at", "sandboxId", "providerId", "retryAfterMs", "until"]);
        let e = Emitted { event: Event::PoolRateLimited { pool: "e2b".into(), retry_at: Time(1_000) }, ..e };
        let mut out = Pairs::default();
        e.write(&mut out);
        assert_eq!(out.names(), ["type", "at", "sandboxId", "providerId", "retryAt"]);
    }

    #[test]
    fn must_fire_an_event_about_a_sandbox_writes_its_id_and_fields_in_order() {
        let e = Emitted {
            at: 0,
            sandbox: crate::core::ids::SandboxKey::parse("sbx_0123456789abcdef0123456789abcdef"),
            event: Event::AttemptFailed { pool: "a".into(), attempt: 2, code: "X".into(), retryable: true },
        };
        let mut out = Pairs::default();
        e.write(&mut out);
        assert_eq!(out.names(), ["type", "at", "sandboxId", "providerId", "attempt", "code", "retryable"]);
        assert_eq!(out.0[0].1, "attempt.failed");
        assert_eq!(out.0[1].1, "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn must_not_fire_a_router_event_carries_no_sandbox_id() {
        let e = Emitted {
            at: 0,
            sandbox: crate::core::ids::SandboxKey::parse("sbx_0123456789abcdef0123456789abcdef"),
            event: Event::WarmRefillResumed { pool: "a".into() },
        };
        let mut out = Pairs::default();
        e.write(&mut out);
        assert_eq!(out.names(), ["type", "at", "providerId"]);
    }

    #[test]
    fn optional_fields_are_left_out_and_nullable_ones_written_null() {
        let e = Event::ProvisionExhausted { code: "C".into(), summary: None, decision_id: None };
        let mut out = Pairs::default();
        e.write_fields(&mut out);
        assert_eq!(out.names(), ["code"], "must-not-fire: an absent optional field is left out");
        let e = Event::BudgetRefused {
            pool: "a".into(),
            reason: "BUDGET_EXCEEDED",
            rule: "r".into(),
            key: KeyFact { label: "team".into(), value: "t".into() },
            dimension: "concurrent",
            limit: 1.0,
            used: 1.0,
            reserved: 0.0,
            resets_at: Nullable(None),
            retryable: false,
        };
        let mut out = Pairs::default();
        e.write_fields(&mut out);
        assert!(out.0.contains(&("resetsAt".into(), "null".into())), "must-fire: a nullable field is written null");
        let field = |t: &str, f: &str| {
            schema().into_iter().find(|s| s.name == t).and_then(|s| s.fields.into_iter().find(|x| x.name == f))
        };
        assert!(field("provision.exhausted", "summary").unwrap().optional);
        assert!(!field("budget.refused", "resetsAt").unwrap().optional);
    }
}

/// An event as a job's machine keeps it, and a decision record with it: the three every
/// launch decides compact, naming their pool by its index in the registry the job routed on
/// (an [`Event`] is 168 bytes; these are 16, and keeping one touches no shared count), any
/// other boxed.
#[derive(Debug, Clone, PartialEq)]
pub enum Kept {
    /// `attempt.started`: the pool's index, the attempt.
    Started(u32, u32),
    /// `attempt.succeeded`: the pool's index, the attempt.
    Succeeded(u32, u32),
    /// `mapping.persisted`: the pool's index.
    Persisted(u32),
    /// Any other event.
    Other(Box<Event>),
}

impl Kept {
    /// Any event, boxed (the compact three are made as they are decided).
    #[inline]
    pub fn of(e: Event) -> Kept {
        Kept::Other(Box::new(e))
    }

    /// The event it is; `ids`: the pools' ids by index, of the registry the job routed on.
    pub fn event(&self, ids: &[PoolId]) -> Event {
        let id = |i: u32| ids.get(i as usize).cloned().unwrap_or_else(|| PoolId::from(""));
        match self {
            Kept::Started(pool, attempt) => Event::AttemptStarted { pool: id(*pool), attempt: *attempt },
            Kept::Succeeded(pool, attempt) => Event::AttemptSucceeded { pool: id(*pool), attempt: *attempt },
            Kept::Persisted(pool) => Event::MappingPersisted { pool: id(*pool) },
            Kept::Other(e) => (**e).clone(),
        }
    }

    /// The event it is, taken (`ids` as for [`Kept::event`]).
    pub fn into_event(self, ids: &[PoolId]) -> Event {
        match self {
            Kept::Other(e) => *e,
            s => s.event(ids),
        }
    }

    /// The event, when it is not one of the compact three.
    pub fn other(&self) -> Option<&Event> {
        match self {
            Kept::Other(e) => Some(e),
            _ => None,
        }
    }

    /// Whether it is a step of the decision ([`is_step`]).
    pub fn is_step(&self) -> bool {
        self.other().is_none_or(is_step)
    }
}

/// Whether an event is a step of a provision's decision (announcements about the whole
/// provision are not).
pub fn is_step(e: &Event) -> bool {
    !matches!(e, Event::ProvisionValidated { .. } | Event::ProvisionRanked { .. } | Event::ProviderRejected { .. })
}
