//! The router's driver protocol, step by step: each step kind the router answers, and each
//! bound (timer) it chooses, in must-fire / must-not-fire pairs. A test plays JavaScript:
//! it begins a job, performs nothing, and reports what the step did at clock readings it
//! picks, then reads the next step.

use super::step::{flags, StepKind};
use super::{CapacitySettings, Now, Owner, Router, Settings};
use crate::core::capacity::{Measurement, ResourceMeasurement, UnknownReason};
use crate::core::events::Event;
use crate::core::health::HealthConfig;
use crate::core::ids::SandboxKey;
use crate::core::mapping::MappingStore;
use crate::core::request::{parse_request, Request};
use crate::core::router::pools::Pools;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;

const CALLBACK_MS: u64 = 1_234;
const OPERATION_MS: u64 = 56_789;
const CAPACITY_MS: u64 = 4_321;
const T0: i64 = 1_700_000_000_000;

fn settings() -> Settings {
    Settings {
        fleet: "fleet-a".into(),
        health: None,
        capacity: None,
        callback_timeout_ms: CALLBACK_MS,
        operation_timeout_ms: OPERATION_MS,
        capacity_timeout_ms: CAPACITY_MS,
        intents: false,
        classifier: false,
        observe: false,
        owner: Owner { host: "h".into(), pid: 1.0, session: "s".into() },
        budgets: Vec::new(),
        limits: Default::default(),
        combined: false,
        queue: None,
        decisions: None,
        decision_key: [0; 32],
    }
}

fn pools(n: usize) -> Rc<RefCell<Pools>> {
    let mut p = Pools::default();
    for i in 0..n {
        let def = json!({
            "id": format!("p{i}"),
            "capabilities": {},
            "signals": { "estimatedCost": i + 1, "coldStartLatencyMs": 100, "readyLatencyMs": 1000,
                         "completionWithinBudgetRate": 0.9, "available": true },
        });
        p.add(&def, false, true).unwrap();
    }
    Rc::new(RefCell::new(p))
}

/// A router over `n` pools with `s`; `default_store`: the in-memory store the success call
/// writes itself (else the caller's store: a `Persist` step).
fn router(s: Settings, n: usize, default_store: bool) -> Router {
    let store = default_store.then(|| Rc::new(RefCell::new(MappingStore::default())));
    Router::new(s, pools(n), store, None, T0).unwrap()
}

fn request(v: serde_json::Value) -> Rc<Request> {
    Rc::new(parse_request(&v).unwrap())
}

fn id(n: u8) -> SandboxKey {
    SandboxKey::from_bytes([n; 16])
}

fn at(ms: i64) -> Now {
    Now { health: T0 + ms, router: T0 + ms }
}

/// Begins a provision of `req`; its key and first step.
fn begin(r: &mut Router, req: &Rc<Request>, n: u8) -> (u32, super::step::Next) {
    r.begin(req, false, Default::default(), None, id(n), at(0)).unwrap()
}

#[test]
fn must_fire_a_launch_step_is_bounded_by_the_request_acquisition_timeout() {
    let mut r = router(settings(), 2, true);
    let (_, next) = begin(&mut r, &request(json!({ "routing": { "acquisitionTimeoutMs": 7_000 } })), 1);
    assert_eq!(next.kind, StepKind::Launch);
    assert_eq!(next.bound_ms, 7_000);
    assert_eq!(next.pool, 0, "the cheapest pool first");
}

#[test]
fn must_not_fire_a_launch_step_without_a_request_timeout_takes_the_default_bound() {
    let mut r = router(settings(), 2, true);
    let (_, next) = begin(&mut r, &request(json!({})), 1);
    assert_eq!(next.kind, StepKind::Launch);
    assert_eq!(next.bound_ms, crate::core::request::DEFAULT_ACQUISITION_TIMEOUT_MS);
}

#[test]
fn must_fire_an_intent_capable_store_gets_the_intent_step_first_within_the_callback_bound() {
    let mut r = router(Settings { intents: true, ..settings() }, 1, false);
    let (key, next) = begin(&mut r, &request(json!({})), 1);
    assert_eq!((next.kind, next.bound_ms), (StepKind::Intent, CALLBACK_MS));
    let next = r.intent_written(key, true, at(1)).unwrap();
    assert_eq!(next.kind, StepKind::Launch, "no intent, no launch: the launch follows the written intent");
}

#[test]
fn must_not_fire_without_intents_the_first_step_is_the_launch() {
    let mut r = router(settings(), 1, false);
    let (_, next) = begin(&mut r, &request(json!({})), 1);
    assert_eq!(next.kind, StepKind::Launch);
}

#[test]
fn must_fire_an_intent_that_could_not_be_written_ends_the_job_before_any_launch() {
    let mut r = router(Settings { intents: true, ..settings() }, 1, false);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.intent_written(key, false, at(1)).unwrap();
    assert_eq!(next.kind, StepKind::Done);
    let ending = r.failure(key).unwrap().expect("a failure");
    assert!(!ending.may_exist, "nothing was launched");
}

#[test]
fn must_fire_a_classifier_is_asked_about_a_thrown_launch_within_the_callback_bound() {
    let mut r = router(Settings { classifier: true, ..settings() }, 2, true);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.threw(key, None, at(1)).unwrap();
    assert_eq!((next.kind, next.bound_ms), (StepKind::Classify, CALLBACK_MS));
    // A proven pre-allocation failure: the next pool is launched.
    let next = r.classified(key, Some("QUOTA_EXCEEDED"), Some(true), None, at(2)).unwrap();
    assert_eq!((next.kind, next.pool), (StepKind::Launch, 1));
}

#[test]
fn must_not_fire_without_a_classifier_a_thrown_launch_is_judged_by_the_router_alone() {
    let mut r = router(settings(), 2, true);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.threw(key, None, at(1)).unwrap();
    assert_ne!(next.kind, StepKind::Classify);
    // An unclassified throw may have allocated: no fallback.
    assert_eq!(next.kind, StepKind::Done);
    assert!(r.failure(key).unwrap().expect("a failure").may_exist);
}

#[test]
fn must_fire_the_default_store_is_written_by_the_success_call_and_the_job_ends_there() {
    let mut r = router(settings(), 1, true);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.succeeded(key, "prov-1", at(1), T0 + 1).unwrap();
    assert_eq!(next.kind, StepKind::Succeeded);
    assert_ne!(next.flags & flags::ENDED, 0, "nothing more is asked: ended in the same call");
    assert_eq!(r.jobs_in_flight(), 0);
}

#[test]
fn must_not_fire_a_caller_store_gets_a_persist_step_within_the_callback_bound() {
    let mut r = router(settings(), 1, false);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.succeeded(key, "prov-1", at(1), T0 + 1).unwrap();
    assert_eq!((next.kind, next.bound_ms), (StepKind::Persist, CALLBACK_MS));
    assert_eq!(next.flags & flags::ENDED, 0);
    let next = r.persisted(key, true, at(2)).unwrap();
    assert_eq!(next.kind, StepKind::Succeeded);
}

#[test]
fn must_fire_a_record_that_could_not_be_stored_is_cleaned_up_within_the_operation_bound() {
    let mut r = router(settings(), 1, false);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    r.succeeded(key, "prov-1", at(1), T0 + 1).unwrap();
    let next = r.persisted(key, false, at(2)).unwrap();
    assert_eq!((next.kind, next.bound_ms), (StepKind::Cleanup, OPERATION_MS));
    let next = r.cleaned_up(key, false, at(3)).unwrap();
    assert_eq!(next.kind, StepKind::Done);
    let ending = r.failure(key).unwrap().expect("a failure");
    assert_eq!(ending.error.code, "MAPPING_PERSISTENCE_FAILED");
    assert!(ending.may_exist, "the clean-up failed: the sandbox may still exist");
}

#[test]
fn must_not_fire_a_cleaned_up_sandbox_does_not_exist_any_more() {
    let mut r = router(settings(), 1, false);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    r.succeeded(key, "prov-1", at(1), T0 + 1).unwrap();
    r.persisted(key, false, at(2)).unwrap();
    r.cleaned_up(key, true, at(3)).unwrap();
    assert!(!r.failure(key).unwrap().expect("a failure").may_exist);
}

#[test]
fn must_fire_with_intents_a_failure_after_a_launch_settles_the_intent_as_failed() {
    let mut r = router(Settings { intents: true, ..settings() }, 1, false);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    r.intent_written(key, true, at(1)).unwrap();
    r.succeeded(key, "prov-1", at(2), T0 + 2).unwrap();
    r.persisted(key, false, at(3)).unwrap();
    let next = r.cleaned_up(key, false, at(4)).unwrap();
    assert_eq!((next.kind, next.bound_ms), (StepKind::Unintent, CALLBACK_MS));
    assert_ne!(next.flags & flags::FAILED_INTENT, 0, "a sandbox may exist: the intent stays, as failed");
    assert_eq!(r.intent_settled(key, at(5)).unwrap().kind, StepKind::Done);
}

#[test]
fn must_not_fire_with_intents_a_destroyed_sandbox_removes_its_intent() {
    let mut r = router(Settings { intents: true, ..settings() }, 1, false);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    r.intent_written(key, true, at(1)).unwrap();
    r.succeeded(key, "prov-1", at(2), T0 + 2).unwrap();
    r.persisted(key, false, at(3)).unwrap();
    let next = r.cleaned_up(key, true, at(4)).unwrap();
    assert_eq!(next.kind, StepKind::Unintent);
    assert_eq!(next.flags & flags::FAILED_INTENT, 0, "nothing exists: the intent is removed");
}

#[test]
fn must_fire_a_capacity_policy_reads_capacity_first_within_the_capacity_bound() {
    let cap = CapacitySettings { provider_order: vec!["p0".into()], reservation_ttl_ms: 60_000, coordinated: false };
    let mut r = router(Settings { capacity: Some(cap), ..settings() }, 1, true);
    let (key, next) = begin(&mut r, &request(json!({})), 1);
    assert_eq!((next.kind, next.bound_ms), (StepKind::Admit, CAPACITY_MS));
    let room = Measurement::Known(vec![ResourceMeasurement::new("sandboxes", 0.0, 10.0, "sandboxes", 1.0)]);
    let next = r.admit(key, &room, at(1)).unwrap();
    assert_eq!(next.kind, StepKind::Launch, "room: the pool is admitted and launched");
}

#[test]
fn must_not_fire_an_unknown_measurement_skips_the_pool_without_a_launch() {
    let cap = CapacitySettings { provider_order: vec!["p0".into()], reservation_ttl_ms: 60_000, coordinated: false };
    let mut r = router(Settings { capacity: Some(cap), ..settings() }, 1, true);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.admit(key, &Measurement::Unknown(UnknownReason::Timeout), at(1)).unwrap();
    assert_eq!(next.kind, StepKind::Done);
    assert_eq!(r.failure(key).unwrap().expect("a failure").error.code, "PROVIDER_CAPACITY_EXHAUSTED");
}

#[test]
fn must_fire_a_launch_past_its_deadline_ends_the_job_and_may_have_allocated() {
    let mut r = router(settings(), 2, true);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.timed_out(key, at(30_000)).unwrap();
    assert_eq!(next.kind, StepKind::Done, "a timeout is not a proven pre-allocation failure: no fallback");
    assert!(r.failure(key).unwrap().expect("a failure").may_exist);
}

#[test]
fn must_not_fire_a_malformed_handle_is_not_a_timeout() {
    let mut r = router(settings(), 1, true);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.malformed(key, at(1)).unwrap();
    assert_eq!(next.kind, StepKind::Done);
    assert_ne!(r.failure(key).unwrap().expect("a failure").error.code, "PROVISION_TIMEOUT");
}

#[test]
fn must_fire_a_late_launch_with_a_handle_is_destroyed_within_the_operation_bound() {
    let r = router(settings(), 1, true);
    assert_eq!(r.late_launch(true), OPERATION_MS);
}

#[test]
fn must_not_fire_a_late_launch_without_a_handle_destroys_nothing() {
    let r = router(settings(), 1, true);
    assert_eq!(r.late_launch(false), 0);
}

#[test]
fn must_fire_an_observing_router_announces_the_job_in_the_core_event_enum() {
    let mut r = router(Settings { observe: true, ..settings() }, 2, true);
    let (key, next) = begin(&mut r, &request(json!({})), 1);
    assert_ne!(next.flags & flags::EVENTS, 0);
    let events = r.job_events(key, at(0)).unwrap();
    let types: Vec<&str> = events.iter().map(|e| e.event.type_name()).collect();
    assert_eq!(&types[..2], ["provision.validated", "provision.ranked"]);
    assert!(events.iter().all(|e| e.sandbox == Some(id(1))), "a job's events name its sandbox");
    assert!(matches!(events[0].event, Event::ProvisionValidated { detached: false, .. }));
}

#[test]
fn must_not_fire_a_router_without_an_observer_records_no_event() {
    let mut r = router(settings(), 2, true);
    let (key, next) = begin(&mut r, &request(json!({})), 1);
    assert_eq!(next.flags & flags::EVENTS, 0);
    assert!(r.job_events(key, at(0)).unwrap().is_empty());
    r.succeeded(key, "prov-1", at(1), T0 + 1).unwrap();
    assert!(r.take_events().is_empty());
}

#[test]
fn must_fire_live_health_opens_a_circuit_after_its_threshold_of_failures() {
    let health = HealthConfig { failure_threshold: 2, ..HealthConfig::default() };
    let mut r = router(Settings { health: Some(health), ..settings() }, 2, true);
    for n in 1..=2 {
        let (key, next) = begin(&mut r, &request(json!({})), n);
        assert_eq!(next.pool, 0);
        r.threw(key, None, at(i64::from(n))).unwrap();
        r.end(key);
    }
    let (_, next) = begin(&mut r, &request(json!({})), 3);
    assert_eq!(next.pool, 1, "p0's circuit is open: the route passes it over");
}

#[test]
fn must_not_fire_one_failure_below_the_threshold_keeps_the_pool() {
    let health = HealthConfig { failure_threshold: 2, ..HealthConfig::default() };
    let mut r = router(Settings { health: Some(health), ..settings() }, 2, true);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    r.threw(key, None, at(1)).unwrap();
    r.end(key);
    let (_, next) = begin(&mut r, &request(json!({})), 2);
    assert_eq!(next.pool, 0);
}

#[test]
fn must_fire_a_job_in_flight_is_seen_by_reconcile_until_it_ends() {
    let mut r = router(settings(), 1, false);
    let (key, _) = begin(&mut r, &request(json!({})), 7);
    assert!(r.in_flight(id(7)));
    r.succeeded(key, "prov-1", at(1), T0 + 1).unwrap();
    r.persisted(key, true, at(2)).unwrap();
    r.end(key);
    assert!(!r.in_flight(id(7)));
    assert_eq!(r.jobs_in_flight(), 0, "an ended job leaves nothing behind");
}

#[test]
fn must_not_fire_an_out_of_turn_report_is_an_internal_error_not_a_state_change() {
    let mut r = router(settings(), 1, false);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    // No record was asked for yet: a persisted report is out of turn.
    let e = r.persisted(key, true, at(1)).unwrap_err();
    assert_eq!(e.code, "INTERNAL_ERROR");
    assert_eq!(r.step(key, at(2)).unwrap().kind, StepKind::Launch, "the job is where it was");
}

// --- issue 34: budgets' plans, late charges, combined transactions --------------------------

fn in_process_budget() -> Settings {
    let rules = crate::core::budget::rules_of_option(
        &json!([{ "id": "n", "key": { "label": "t" }, "limit": { "launches": 1000 }, "window": { "slidingMs": 60_000 } }]),
    )
    .unwrap();
    Settings { budgets: rules, ..settings() }
}

fn labels(t: &str) -> crate::core::labels::Labels {
    vec![("t".to_string(), t.to_string())].into()
}

#[test]
fn unplan_must_fire_a_provision_refused_after_its_plan_gives_its_buckets_back() {
    let mut r = router(in_process_budget(), 1, true);
    let none = request(json!({ "requires": { "requiredCapabilities": ["pty"] } }));
    for i in 0..200u8 {
        let e = r.begin(&none, false, labels(&format!("tenant-{i}")), None, id(i), at(0)).unwrap_err();
        assert_eq!(e.code, "NO_ELIGIBLE_PROVIDER");
    }
    let (kept, _) = r.budgets.as_ref().unwrap().ledger.buckets();
    assert!(kept <= 8, "{kept} buckets kept for 200 refused tenants: their plans were given back");
}

#[test]
fn unplan_must_not_fire_a_provision_in_flight_keeps_its_bucket_until_it_ends() {
    let mut r = router(in_process_budget(), 1, false);
    let (key, next) = r.begin(&request(json!({})), false, labels("acme"), None, id(1), at(0)).unwrap();
    assert_eq!(next.kind, StepKind::Launch);
    assert_eq!(r.budgets.as_ref().unwrap().ledger.buckets().0, 1, "the plan's bucket is kept in flight");
    r.end(key);
    assert_eq!(r.jobs_in_flight(), 0);
}

#[test]
fn late_must_fire_a_settlement_the_shared_ledger_answers_late_is_budget_charged_late() {
    let mut r = router(Settings { observe: true, ..settings() }, 1, true);
    r.budget_settled(id(7), "p0", true, T0 + 5);
    let events = r.take_events();
    assert_eq!(events.iter().map(|e| e.event.type_name()).collect::<Vec<_>>(), ["budget.charged.late"]);
    assert_eq!((events[0].at, events[0].sandbox), (T0 + 5, Some(id(7))));
}

#[test]
fn late_must_not_fire_a_settlement_written_on_time_emits_nothing() {
    let mut r = router(Settings { observe: true, ..settings() }, 1, true);
    r.budget_settled(id(7), "p0", false, T0 + 5);
    assert!(r.take_events().is_empty());
}

/// Begins a provision on `r` and, under a coordinator, admits it (`Coordinate`: room, then
/// the coordinator's admission); its key, at the `Launch` step.
fn launching(r: &mut Router) -> u32 {
    let (key, next) = begin(r, &request(json!({})), 1);
    if next.kind == StepKind::Coordinate {
        let room = Measurement::Known(vec![ResourceMeasurement::new("sandboxes", 0.0, 10.0, "sandboxes", 1.0)]);
        assert!(r.demand(key, &room, at(1)).unwrap().is_ok(), "a demand for the coordinator");
        let next = r.admit_decided(key, crate::core::acquisition::SharedVerdict::Admitted(7), at(1)).unwrap();
        assert_eq!(next.kind, StepKind::Launch);
    } else {
        assert_eq!(next.kind, StepKind::Launch);
    }
    key
}

fn coordinated(combined: bool) -> Settings {
    Settings {
        capacity: Some(CapacitySettings {
            provider_order: vec!["p0".into()],
            reservation_ttl_ms: 1_000,
            coordinated: true,
        }),
        combined,
        ..settings()
    }
}

#[test]
fn combined_must_fire_the_store_is_the_coordinator_the_record_and_its_settlements_are_one_step() {
    let mut r = router(coordinated(true), 1, false);
    let key = launching(&mut r);
    let next = r.succeeded(key, "prov-1", at(1), T0 + 1).unwrap();
    assert_eq!(next.kind, StepKind::Persist);
    assert_ne!(next.flags & flags::COMBINED, 0);
}

#[test]
fn combined_must_not_fire_a_store_apart_from_the_coordinator_or_no_coordinator_writes_the_record_alone() {
    for s in [coordinated(false), Settings { combined: true, ..settings() }] {
        let mut r = router(s, 1, false);
        let key = launching(&mut r);
        let next = r.succeeded(key, "prov-1", at(1), T0 + 1).unwrap();
        assert_eq!(next.kind, StepKind::Persist);
        assert_eq!(next.flags & flags::COMBINED, 0);
    }
}

#[test]
fn sequence_must_fire_a_shared_reservation_takes_the_read_sequence_in_its_transaction() {
    let mut r = router(Settings { budgets: in_process_budget().budgets, ..coordinated(false) }, 1, false);
    let (_, next) = r.begin(&request(json!({})), false, labels("acme"), None, id(1), at(0)).unwrap();
    assert_eq!(next.kind, StepKind::Reserve);
    assert_ne!(next.flags & flags::SEQUENCE, 0);
}

#[test]
fn sequence_must_not_fire_an_in_process_ledger_reserves_without_a_step() {
    let mut r = router(in_process_budget(), 1, false);
    let (_, next) = r.begin(&request(json!({})), false, labels("acme"), None, id(1), at(0)).unwrap();
    assert_eq!(next.kind, StepKind::Launch);
    assert_eq!(next.flags & flags::SEQUENCE, 0);
}

/// A provision under a shared budget with a store that keeps intents and is (`combined`) or
/// is not the coordinator: the router, its key, its first step (`Reserve`).
fn reserving(combined: bool) -> (Router, u32, super::step::Next) {
    let s = Settings { budgets: in_process_budget().budgets, intents: true, ..coordinated(combined) };
    let mut r = router(s, 1, false);
    let (key, next) = r.begin(&request(json!({})), false, labels("acme"), None, id(1), at(0)).unwrap();
    assert_eq!(next.kind, StepKind::Reserve);
    (r, key, next)
}

/// The reservation made (`intent_written`: its transaction wrote the intent), then the
/// admission (`admitted`, else no room): the step that follows.
fn reserved(r: &mut Router, key: u32, intent_written: bool, admitted: bool) -> StepKind {
    let next = r.budget_decided(key, Some(Ok(())), intent_written, at(1)).unwrap();
    assert_eq!(next.kind, StepKind::Coordinate);
    let room = Measurement::Known(vec![ResourceMeasurement::new("sandboxes", 0.0, 10.0, "sandboxes", 1.0)]);
    assert!(r.demand(key, &room, at(1)).unwrap().is_ok());
    use crate::core::acquisition::SharedVerdict;
    let verdict = if admitted { SharedVerdict::Admitted(7) } else { SharedVerdict::Exhausted("sandboxes".into()) };
    r.admit_decided(key, verdict, at(1)).unwrap().kind
}

#[test]
fn intent_fold_must_fire_the_coordinator_store_writes_the_intent_with_the_reservation_and_the_launch_follows() {
    let (mut r, key, next) = reserving(true);
    assert_ne!(next.flags & flags::INTENT, 0);
    // The intent the transaction carries, asked during the Reserve step; written before the
    // capacity read, it outlives that bound too.
    let i = r.intent(key, T0).unwrap();
    assert_eq!((i.state, i.provider_id.as_str()), ("launching", "p0"));
    let folded = i.expires_at - T0;
    assert_eq!(reserved(&mut r, key, true, true), StepKind::Launch, "no Intent step of its own");
    let (mut r, key, _) = reserving(false);
    assert_eq!(reserved(&mut r, key, false, true), StepKind::Intent);
    let apart = r.intent(key, T0).unwrap().expires_at - T0;
    assert_eq!(folded - apart, CAPACITY_MS as i64);
}

#[test]
fn intent_fold_must_not_fire_a_store_apart_from_the_coordinator_or_an_intent_not_written_has_its_own_step() {
    let (mut r, key, next) = reserving(false);
    assert_eq!(next.flags & flags::INTENT, 0);
    assert!(r.intent(key, T0).is_err(), "no intent out of turn");
    assert_eq!(reserved(&mut r, key, false, true), StepKind::Intent);
    // The flag, but the transaction did not write it (a reservation made without a charge row).
    let (mut r, key, _) = reserving(true);
    assert_eq!(reserved(&mut r, key, false, true), StepKind::Intent);
}

#[test]
fn intent_fold_must_fire_a_folded_intent_whose_pool_refused_is_removed_at_the_end() {
    let (mut r, key, _) = reserving(true);
    assert_eq!(reserved(&mut r, key, true, false), StepKind::Unintent, "written, never launched: removed");
    let next = r.step(key, at(1)).unwrap();
    assert_eq!((next.kind, next.flags & flags::FAILED_INTENT), (StepKind::Unintent, 0));
}

#[test]
fn intent_fold_must_not_fire_no_intent_written_and_no_launch_leaves_nothing_to_remove() {
    let (mut r, key, _) = reserving(true);
    assert_eq!(reserved(&mut r, key, false, false), StepKind::Done);
}

/// A router over two pools whose first declares `rateLimit` `limit` (None: no limit).
fn paced_router(limit: Option<serde_json::Value>, s: Settings) -> Router {
    let mut p = Pools::default();
    for i in 0..2 {
        let mut def = json!({
            "id": format!("p{i}"),
            "capabilities": {},
            "signals": { "estimatedCost": i + 1, "coldStartLatencyMs": 100, "readyLatencyMs": 1000,
                         "completionWithinBudgetRate": 0.9, "available": true },
        });
        if let (0, Some(l)) = (i, &limit) {
            def["rateLimit"] = l.clone();
        }
        p.add(&def, false, true).unwrap();
    }
    let store = Some(Rc::new(RefCell::new(MappingStore::default())));
    Router::new(s, Rc::new(RefCell::new(p)), store, None, T0).unwrap()
}

#[test]
fn must_fire_a_pool_without_a_launch_token_is_not_launched_must_not_once_its_token_came() {
    let mut r = paced_router(Some(json!({ "launchesPerSecond": 2 })), settings());
    let req = request(json!({ "routing": { "maxAcquisitionAttempts": 1 } }));
    let (key, next) = begin(&mut r, &req, 1);
    assert_eq!((next.kind, next.pool), (StepKind::Launch, 0));
    r.succeeded(key, "prov-1", at(0), T0).unwrap();
    r.end(key);
    // The same instant: p0's token is spent, so the launch step names p1 (no attempt used).
    let (key, next) = begin(&mut r, &req, 2);
    assert_eq!((next.kind, next.pool), (StepKind::Launch, 1));
    r.succeeded(key, "prov-2", at(0), T0).unwrap();
    r.end(key);
    // 500 ms later (two a second) p0 has a token again.
    let (key, next) = r.begin(&req, false, Default::default(), None, id(3), at(500)).unwrap();
    assert_eq!((next.kind, next.pool), (StepKind::Launch, 0));
    r.end(key);
}

#[test]
fn must_fire_a_classified_retry_after_cools_the_pool_must_not_without_one() {
    for (retry_after, cooled) in [(Some(3_000.0), true), (None, false)] {
        let mut r = paced_router(None, Settings { classifier: true, ..settings() });
        let req = request(json!({}));
        let (key, _) = begin(&mut r, &req, 1);
        r.threw(key, None, at(1)).unwrap();
        let next = r.classified(key, Some("TOO_MANY_REQUESTS"), Some(true), retry_after, at(2)).unwrap();
        assert_eq!((next.kind, next.pool), (StepKind::Launch, 1));
        r.end(key);
        let (key, next) = r.begin(&req, false, Default::default(), None, id(2), at(2_000)).unwrap();
        assert_eq!(next.pool, if cooled { 1 } else { 0 }, "retry-after {retry_after:?}");
        r.end(key);
        // The cooldown ends 3 s after the answer (at 2 ms).
        let (key, next) = r.begin(&req, false, Default::default(), None, id(3), at(3_002)).unwrap();
        assert_eq!(next.pool, 0);
        r.end(key);
    }
}

#[test]
fn must_fire_an_explanation_shows_a_paced_pool_must_not_one_with_a_token() {
    let mut r = paced_router(Some(json!({ "launchesPerSecond": 1 })), settings());
    let registry = r.registry().clone();
    assert!(r.paced_now(&registry.borrow(), T0).is_empty());
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    r.succeeded(key, "prov-1", at(0), T0).unwrap();
    r.end(key);
    let paced = r.paced_now(&registry.borrow(), T0 + 10);
    assert_eq!(paced.len(), 1);
    assert_eq!((paced[0].0, paced[0].1.reason, paced[0].1.until), (0, "RATE_LIMITED", T0 + 1_000));
    assert!(r.paced_now(&registry.borrow(), T0 + 1_000).is_empty());
}

fn queued(max_wait_ms: u64) -> Settings {
    let queue = crate::core::queue::QueueConfig { max_wait_ms, max_depth: 10, fair_by: None };
    Settings { queue: Some(queue), ..settings() }
}

/// A one-pool router (`p0` paced at one launch a second) whose first provision spent the token.
fn one_paced_pool(s: Settings) -> Router {
    let mut p = Pools::default();
    let def = json!({
        "id": "p0", "capabilities": {}, "rateLimit": { "launchesPerSecond": 1 },
        "signals": { "estimatedCost": 1, "coldStartLatencyMs": 100, "readyLatencyMs": 1000,
                     "completionWithinBudgetRate": 0.9, "available": true },
    });
    p.add(&def, false, true).unwrap();
    let store = Some(Rc::new(RefCell::new(MappingStore::default())));
    let mut r = Router::new(s, Rc::new(RefCell::new(p)), store, None, T0).unwrap();
    let (key, next) = begin(&mut r, &request(json!({})), 1);
    assert_eq!(next.kind, StepKind::Launch);
    r.succeeded(key, "prov-1", at(0), T0).unwrap();
    r.end(key);
    r
}

#[test]
fn must_fire_a_paced_provision_waits_until_the_next_token_must_not_without_a_queue() {
    let mut r = one_paced_pool(queued(5_000));
    let (key, next) = begin(&mut r, &request(json!({})), 2);
    assert_eq!(
        (next.kind, next.bound_ms),
        (StepKind::Wait, 1_010),
        "sleeps until the token, and 1 % of the interval past it"
    );
    let next = r.waited(key, at(1_000)).unwrap();
    assert_eq!(next.kind, StepKind::Launch, "admitted with the token");
    let mut off = one_paced_pool(settings());
    let (_, next) = begin(&mut off, &request(json!({})), 2);
    assert_eq!(next.kind, StepKind::Done);
}

#[test]
fn must_fire_a_wait_past_max_wait_ends_queue_timeout_must_not_before() {
    let mut r = one_paced_pool(queued(300));
    let (key, next) = begin(&mut r, &request(json!({})), 2);
    assert_eq!((next.kind, next.bound_ms), (StepKind::Wait, 300), "never past the deadline");
    let next = r.waited(key, at(299)).unwrap();
    assert_eq!(next.kind, StepKind::Wait, "before the deadline it looks again and sleeps");
    let next = r.waited(key, at(300)).unwrap();
    assert_eq!(next.kind, StepKind::Done);
    assert_eq!(r.failure(key).unwrap().unwrap().error.code, "QUEUE_TIMEOUT");
    assert_eq!(r.queue.as_ref().unwrap().len(), 0);
}

#[test]
fn must_fire_a_newcomer_skips_a_pool_waiters_wait_for_must_not_once_they_left() {
    let mut r = one_paced_pool(queued(5_000));
    let req = request(json!({}));
    let (first, _) = begin(&mut r, &req, 2);
    // At the token's time the newcomer does not take it: the waiter ahead goes first.
    let (second, next) = r.begin(&req, false, Default::default(), None, id(3), at(1_000)).unwrap();
    assert_eq!(next.kind, StepKind::Wait);
    assert!(r.take_wakes().is_empty());
    assert_eq!(r.waited(first, at(1_000)).unwrap().kind, StepKind::Launch);
    assert_eq!(r.take_wakes(), vec![second], "the one behind is woken when the first leaves");
    assert_eq!(r.waited(second, at(1_000)).unwrap().kind, StepKind::Wait, "and sleeps to the next token");
}

#[test]
fn must_fire_an_abort_while_waiting_ends_aborted_and_gives_back_nothing_it_did_not_take() {
    let mut r = one_paced_pool(queued(5_000));
    let (key, _) = begin(&mut r, &request(json!({})), 2);
    r.abort(key);
    assert_eq!(r.take_wakes(), vec![key]);
    assert_eq!(r.waited(key, at(10)).unwrap().kind, StepKind::Done);
    assert_eq!(r.failure(key).unwrap().unwrap().error.code, "ABORTED");
    r.end(key);
    assert_eq!(r.jobs_in_flight(), 0);
}

#[test]
fn must_fire_an_abort_before_the_launch_gives_the_token_back_must_not_after_the_launch() {
    let mut r = paced_router(Some(json!({ "launchesPerSecond": 1 })), queued(5_000));
    let req = request(json!({ "routing": { "maxAcquisitionAttempts": 1 } }));
    let (key, next) = begin(&mut r, &req, 1);
    assert_eq!((next.kind, next.pool), (StepKind::Launch, 0));
    let next = r.abort_begun(key, at(0)).unwrap();
    assert_eq!(next.kind, StepKind::Done);
    r.end(key);
    let (key, next) = begin(&mut r, &req, 2);
    assert_eq!((next.kind, next.pool), (StepKind::Launch, 0), "p0's token was given back");
    // Abort after the launch step was handed out: the launch under way is not stopped.
    r.abort(key);
    assert_eq!(r.succeeded(key, "prov-2", at(1), T0).unwrap().kind, StepKind::Succeeded);
}

#[test]
fn must_fire_close_ends_every_waiter_router_closed_must_not_a_later_provision_waits() {
    let mut r = one_paced_pool(queued(5_000));
    let (a, _) = begin(&mut r, &request(json!({})), 2);
    r.close_queue();
    assert_eq!(r.take_wakes(), vec![a]);
    assert_eq!(r.waited(a, at(5)).unwrap().kind, StepKind::Done);
    assert_eq!(r.failure(a).unwrap().unwrap().error.code, "ROUTER_CLOSED");
    let (b, next) = begin(&mut r, &request(json!({})), 3);
    assert_eq!(next.kind, StepKind::Done);
    assert_eq!(r.failure(b).unwrap().unwrap().error.code, "LAUNCH_RATE_LIMITED");
}

#[test]
fn must_not_fire_spent_attempts_are_no_wait_must_fire_with_attempts_left() {
    // Attempts spent: a retryable failure on a cooling pool with no attempt left fails at once.
    let mut r = paced_router(None, Settings { classifier: true, ..queued(5_000) });
    let req = request(json!({ "routing": { "maxAcquisitionAttempts": 1 } }));
    let (key, _) = begin(&mut r, &req, 1);
    r.threw(key, None, at(1)).unwrap();
    let next = r.classified(key, Some("TOO_MANY_REQUESTS"), Some(true), Some(1_000.0), at(2)).unwrap();
    assert_eq!(next.kind, StepKind::Done, "no attempt left: no wait");
    // With attempts left it waits out the cooldown (must-fire).
    let req = request(json!({ "routing": { "maxAcquisitionAttempts": 3 } }));
    let mut one = one_paced_pool(Settings { classifier: true, ..queued(5_000) });
    let (key, _) = one.begin(&req, false, Default::default(), None, id(9), at(1_000)).unwrap();
    one.threw(key, None, at(1_001)).unwrap();
    let next = one.classified(key, Some("TOO_MANY_REQUESTS"), Some(true), Some(2_000.0), at(1_002)).unwrap();
    assert_eq!((next.kind, next.bound_ms), (StepKind::Wait, 2_010));
}

/// A router over `p0` (paced at five launches a second) and `p1` (no limit), both read by
/// capacity routing, whose capacity a shared coordinator admits (the fleet's pacing too).
fn fleet_paced(observe: bool) -> Router {
    let capacity = CapacitySettings {
        provider_order: vec!["p0".into(), "p1".into()],
        reservation_ttl_ms: 1_000,
        coordinated: true,
    };
    let s = Settings { capacity: Some(capacity), classifier: true, observe, ..settings() };
    paced_router(Some(json!({ "launchesPerSecond": 5 })), s)
}

fn room() -> Measurement {
    Measurement::Known(vec![ResourceMeasurement::new("sandboxes", 0.0, 10.0, "sandboxes", 1.0)])
}

/// Begins a provision on a [`fleet_paced`] router at `ms` and answers its first admission
/// with `verdict`: the key and the step that follows.
fn fleet_admitted(
    r: &mut Router,
    n: u8,
    ms: i64,
    verdict: crate::core::acquisition::SharedVerdict,
) -> (u32, super::step::Next) {
    let (key, next) = r.begin(&request(json!({})), false, Default::default(), None, id(n), at(ms)).unwrap();
    assert_eq!((next.kind, next.pool), (StepKind::Coordinate, 0));
    let demand = r.demand(key, &room(), at(ms)).unwrap().unwrap();
    assert_eq!(demand.rate_limit.map(|l| l.launches_per_second), Some(5.0), "the admission takes a fleet token");
    assert_eq!((demand.lane.as_deref(), demand.waits), (Some(""), false), "its lane's turn, no claim without a queue");
    (key, r.admit_decided(key, verdict, at(ms)).unwrap())
}

#[test]
fn fleet_pacing_must_fire_a_refusal_skips_the_pool_and_holds_it_back_must_not_after_the_fleets_time() {
    use crate::core::acquisition::SharedVerdict;
    let mut r = fleet_paced(false);
    let no_token = SharedVerdict::Paced { reason: "RATE_LIMITED", in_ms: 300 };
    let (key, next) = fleet_admitted(&mut r, 1, 0, no_token);
    assert_eq!((next.kind, next.pool), (StepKind::Coordinate, 1), "skipped like a local pacing skip");
    let demand = r.demand(key, &room(), at(0)).unwrap().unwrap();
    assert_eq!(demand.rate_limit, None, "a pool without a limit takes no token");
    r.end(key);
    // This process's bucket has tokens, but the fleet said none until 300 ms: not asked again.
    let (key, next) = r.begin(&request(json!({})), false, Default::default(), None, id(2), at(299)).unwrap();
    assert_eq!((next.kind, next.pool), (StepKind::Coordinate, 1));
    r.end(key);
    // At the fleet's time it is asked again.
    let (key, _) = fleet_admitted(&mut r, 3, 300, SharedVerdict::Admitted(9));
    r.end(key);
}

#[test]
fn fleet_pacing_must_fire_every_pool_refused_by_the_fleet_fails_launch_rate_limited_with_its_time() {
    use crate::core::acquisition::SharedVerdict;
    let mut r = fleet_paced(false);
    let (key, next) = fleet_admitted(&mut r, 1, 0, SharedVerdict::Paced { reason: "RATE_LIMITED", in_ms: 700 });
    assert_eq!(next.pool, 1);
    r.demand(key, &room(), at(0)).unwrap().unwrap();
    let next = r.admit_decided(key, SharedVerdict::Paced { reason: "COOLING_DOWN", in_ms: 400 }, at(0)).unwrap();
    assert_eq!(next.kind, StepKind::Done);
    let f = r.failure(key).unwrap().unwrap();
    assert_eq!(f.error.code, "LAUNCH_RATE_LIMITED");
    let retry = f.error.extra.iter().find(|(k, _)| *k == "retryAfterMs").map(|(_, v)| v.clone());
    assert_eq!(retry, Some(crate::core::error::Extra::Num(400.0)), "the first pool to free");
}

#[test]
fn fleet_cooldown_must_fire_one_learned_from_the_fleet_starts_here_must_not_a_token_refusal() {
    use crate::core::acquisition::SharedVerdict;
    let types = |r: &mut Router, key| -> Vec<&'static str> {
        r.job_events(key, at(0)).unwrap().iter().map(|e| e.event.type_name()).collect()
    };
    let mut r = fleet_paced(true);
    let (key, _) = fleet_admitted(&mut r, 1, 0, SharedVerdict::Paced { reason: "COOLING_DOWN", in_ms: 2_000 });
    let seen = types(&mut r, key);
    assert!(seen.contains(&"pool.cooldown.started"), "{seen:?}");
    assert!(!seen.contains(&"pool.rate.limited"), "{seen:?}");
    r.end(key);
    let mut r = fleet_paced(true);
    let (key, _) = fleet_admitted(&mut r, 1, 0, SharedVerdict::Paced { reason: "RATE_LIMITED", in_ms: 200 });
    let seen = types(&mut r, key);
    assert!(seen.contains(&"pool.rate.limited"), "{seen:?}");
    assert!(!seen.contains(&"pool.cooldown.started"), "{seen:?}");
}

#[test]
fn fleet_cooldown_must_fire_a_retry_after_under_a_coordinator_is_written_for_the_fleet_must_not_in_process() {
    let mut r = fleet_paced(false);
    let (key, next) = fleet_admitted(&mut r, 1, 0, crate::core::acquisition::SharedVerdict::Admitted(7));
    assert_eq!(next.kind, StepKind::Launch);
    r.threw(key, None, at(1)).unwrap();
    let next = r.classified(key, Some("TOO_MANY_REQUESTS"), Some(true), Some(2_500.0), at(2)).unwrap();
    assert_ne!(next.flags & flags::WRITES, 0);
    assert_eq!(r.writes(key).unwrap().cooldown, Some(("p0".to_string(), 2_500)));
    assert_eq!(r.writes(key).unwrap().cooldown, None, "written once");
    // No coordinator: the cooldown is this process's only.
    let mut local = paced_router(None, Settings { classifier: true, ..settings() });
    let (key, _) = begin(&mut local, &request(json!({})), 1);
    local.threw(key, None, at(1)).unwrap();
    let next = local.classified(key, Some("TOO_MANY_REQUESTS"), Some(true), Some(2_500.0), at(2)).unwrap();
    assert_eq!(next.flags & flags::WRITES, 0);
    assert_eq!(local.writes(key).unwrap().cooldown, None);
}

#[test]
fn fleet_turns_must_fire_a_provision_with_a_queue_claims_its_lanes_turn_must_not_without_one() {
    let capacity = CapacitySettings {
        provider_order: vec!["p0".into(), "p1".into()],
        reservation_ttl_ms: 1_000,
        coordinated: true,
    };
    let queue = crate::core::queue::QueueConfig { max_wait_ms: 5_000, max_depth: 10, fair_by: Some("t".into()) };
    let s = Settings { capacity: Some(capacity), queue: Some(queue), ..settings() };
    let mut r = paced_router(Some(json!({ "launchesPerSecond": 5 })), s);
    let (key, next) = r.begin(&request(json!({})), false, labels("acme"), None, id(1), at(0)).unwrap();
    assert_eq!(next.kind, StepKind::Coordinate);
    let demand = r.demand(key, &room(), at(0)).unwrap().unwrap();
    assert_eq!((demand.lane.as_deref(), demand.waits), (Some("acme"), true));
    // The pool without a limit: no turn (`fleet_admitted` holds the no-queue side).
    let next =
        r.admit_decided(key, crate::core::acquisition::SharedVerdict::Exhausted("sandboxes".into()), at(0)).unwrap();
    assert_eq!(next.pool, 1);
    let demand = r.demand(key, &room(), at(0)).unwrap().unwrap();
    assert_eq!((demand.lane, demand.waits), (None, false));
}

#[test]
fn provider_id_kept_must_fire_a_job_that_goes_on_after_the_success_call_keeps_it_for_its_record() {
    // The caller's store: the success call asks for a `Persist` step, whose record names it.
    let mut r = router(settings(), 1, false);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.succeeded(key, "remote-7", at(1), T0).unwrap();
    assert_eq!(next.kind, StepKind::Persist);
    assert_eq!(&*r.record(key, T0).unwrap().provider_sandbox_id, "remote-7");
}

#[test]
fn provider_id_kept_must_not_fire_a_job_that_ends_in_the_success_call_the_record_has_its_own_copy() {
    // The default store, no observer: the job ends in the call; the record was written from the argument.
    let mut r = router(settings(), 1, true);
    let (key, _) = begin(&mut r, &request(json!({})), 1);
    let next = r.succeeded(key, "remote-7", at(1), T0).unwrap();
    assert_eq!(next.kind, StepKind::Succeeded);
    assert_ne!(next.flags & flags::ENDED, 0);
    assert_eq!(r.jobs_in_flight(), 0, "nothing kept after the call");
    let store = r.store.as_ref().unwrap().borrow();
    assert_eq!(&*store.get(&id(1).to_string()).unwrap().provider_sandbox_id, "remote-7");
}
