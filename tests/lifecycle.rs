//! The provisioning lifecycle through the core alone, against a mock runtime: route,
//! allocate the id, stamp it into the labels, admit on capacity, launch, classify, fall
//! back (or not), record the mapping. The machine driven here, `core::acquisition`, is the
//! one the router ships: `lib/provision.js` drives it through `binding_acquisition.rs`
//! exactly as `provision` below does.

use agent_relay_sandbox_router::binding::id_source::SandboxIdSource;
use agent_relay_sandbox_router::core::acquisition::{Acquisition, Attempt, CapacityPlan, Outcome as End, Step};
use agent_relay_sandbox_router::core::capabilities::Resources;
use agent_relay_sandbox_router::core::capacity::{Ledger, Measurement, ResourceMeasurement};
use agent_relay_sandbox_router::core::ids::{is_sandbox_id, SandboxKey};
use agent_relay_sandbox_router::core::mapping::{CreatedAt, Mapping, MappingStore};
use agent_relay_sandbox_router::core::pool::Pool;
use agent_relay_sandbox_router::core::registry::{route_order, Registry, RouteOptions};
use agent_relay_sandbox_router::core::request::{parse_request, SANDBOX_ID_LABEL};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// How a mock pool answers a launch.
#[derive(Clone, Copy)]
enum Outcome {
    Ok,
    /// Refused before allocating anything (a classifier may prove it).
    RefusedBeforeAllocation,
    /// Allocated remotely, then threw: the sandbox exists without a handle.
    AllocatedThenThrew,
}

#[derive(Default)]
struct MockRuntime {
    outcomes: HashMap<usize, Outcome>,
    /// Every sandbox that exists remotely: (pool, labels).
    remote: Vec<(usize, Vec<(String, String)>)>,
    launches: Vec<usize>,
}

impl MockRuntime {
    fn launch(&mut self, pool: usize, labels: &[(String, String)]) -> Result<String, ()> {
        self.launches.push(pool);
        match self.outcomes.get(&pool).copied().unwrap_or(Outcome::Ok) {
            Outcome::Ok => {
                self.remote.push((pool, labels.to_vec()));
                Ok(format!("remote-{}", self.remote.len()))
            }
            Outcome::RefusedBeforeAllocation => Err(()),
            Outcome::AllocatedThenThrew => {
                self.remote.push((pool, labels.to_vec()));
                Err(())
            }
        }
    }

    fn find_by_label(&self, key: &str, value: &str) -> usize {
        self.remote.iter().filter(|(_, l)| l.iter().any(|(k, v)| k == key && v == value)).count()
    }
}

fn registry(n: usize) -> Registry {
    let mut r = Registry::default();
    for i in 0..n {
        let v = json!({"id": format!("p{i}"), "capabilities": {},
            "signals": {"estimatedCost": i, "coldStartLatencyMs": 1, "readyLatencyMs": 1, "completionWithinBudgetRate": 1, "available": true}});
        r.add(Pool::from_json(&v, false).unwrap()).unwrap();
    }
    r
}

struct Outcomes {
    result: Result<(String, usize), End>,
    attempts: Vec<Attempt>,
    id: String,
}

/// One provision, exactly as the router runs it, with `classify` standing in for the
/// caller's classifier (None: no classifier).
fn provision(
    reg: &Registry,
    rt: &mut MockRuntime,
    store: &mut MappingStore,
    ids: &mut SandboxIdSource,
    request: Value,
    classify: Option<&dyn Fn(usize) -> (String, bool)>,
) -> Outcomes {
    let req = parse_request(&request).unwrap();
    let order = route_order(
        reg,
        &req,
        &RouteOptions { limit: Some(req.max_attempts as usize), ..Default::default() },
        &mut Vec::new(),
    );
    let id = ids.next_key().unwrap().to_string();
    let mut labels: Vec<(String, String)> = req.labels.to_vec();
    labels.push((SANDBOX_ID_LABEL.to_string(), id.clone()));
    run(reg, rt, store, &req, order, id, &labels, classify, None)
}

/// The loop `lib/provision.js` runs: ask the machine, perform, report.
#[allow(clippy::too_many_arguments)]
fn run(
    reg: &Registry,
    rt: &mut MockRuntime,
    store: &mut MappingStore,
    req: &agent_relay_sandbox_router::core::request::Request,
    order: Vec<usize>,
    id: String,
    labels: &[(String, String)],
    classify: Option<&dyn Fn(usize) -> (String, bool)>,
    mut capacity: Option<(&mut Ledger, &dyn Fn(usize) -> Measurement)>,
) -> Outcomes {
    let plan = capacity.as_ref().map(|_| CapacityPlan {
        need: Resources::default(),
        readers: vec![true; reg.pools().len()],
        ledger_pools: (0..reg.pools().len()).collect(),
    });
    let mut acq = Acquisition::new(order, req.max_attempts as usize, req.fallback_allowed, plan, None);
    loop {
        let ledger = capacity.as_mut().map(|(l, _)| &mut **l);
        match acq.next(ledger) {
            Step::Done => break,
            // Only with budgets under a shared ledger, which this harness never sets up.
            Step::Reserve(_) => unreachable!("no budgets here"),
            Step::Admit(pool) => {
                let (ledger, read) = capacity.as_mut().expect("admission only under capacity");
                let m = read(pool);
                acq.admit(ledger, &m);
            }
            Step::Claim(_) => unreachable!("no warm pools here"),
            Step::Launch(pool) => match rt.launch(pool, labels) {
                Ok(remote) => {
                    acq.succeeded(capacity.as_mut().map(|(l, _)| &mut **l));
                    let provider_id = store.intern(&reg.pools()[pool].id);
                    store.put(Mapping {
                        id: SandboxKey::parse(&id).expect("a router id"),
                        provider_id,
                        provider_sandbox_id: remote.into_boxed_str(),
                        labels: Arc::clone(&req.labels),
                        stamped: true,
                        fleet: None,
                        created_at: CreatedAt::Millis(0),
                        detached: false,
                    });
                }
                Err(()) => {
                    let answer = classify.map(|f| f(pool));
                    let (code, retryable) = match &answer {
                        None => (None, None),
                        Some((c, r)) => (Some(c.as_str()), Some(*r)),
                    };
                    acq.failed(capacity.as_mut().map(|(l, _)| &mut **l), code, retryable);
                }
            },
        }
    }
    let attempts = acq.attempts().to_vec();
    match acq.outcome().cloned().expect("over") {
        End::Succeeded(pool) => Outcomes { result: Ok((id.clone(), pool)), attempts, id },
        other => Outcomes { result: Err(other), attempts, id },
    }
}

fn pre_allocation(_: usize) -> (String, bool) {
    ("PROVIDER_CAPACITY_PRE_ALLOCATION".into(), true)
}

#[test]
fn success_records_a_mapping_under_a_fresh_sbx_id() {
    let reg = registry(3);
    let (mut rt, mut store, mut ids) = (MockRuntime::default(), MappingStore::default(), SandboxIdSource::default());
    let out = provision(&reg, &mut rt, &mut store, &mut ids, json!({"launch": {"labels": {"team": "a"}}}), None);
    let (id, pool) = out.result.unwrap();
    assert!(is_sandbox_id(&id));
    assert_eq!(pool, 0);
    let m = store.get(&id).unwrap();
    assert_eq!(&*m.provider_sandbox_id, "remote-1");
    assert_eq!(m.all_labels(), vec![("team".into(), "a".into()), (SANDBOX_ID_LABEL.into(), id.clone())]);
}

#[test]
fn retryable_failure_falls_back_when_allowed() {
    let reg = registry(3);
    let mut rt = MockRuntime::default();
    rt.outcomes.insert(0, Outcome::RefusedBeforeAllocation);
    let (mut store, mut ids) = (MappingStore::default(), SandboxIdSource::default());
    let out = provision(&reg, &mut rt, &mut store, &mut ids, json!({}), Some(&pre_allocation));
    assert_eq!(out.result.unwrap().1, 1);
    assert_eq!(rt.launches, vec![0, 1]);
}

#[test]
fn retryable_failure_does_not_fall_back_when_forbidden() {
    let reg = registry(3);
    let mut rt = MockRuntime::default();
    rt.outcomes.insert(0, Outcome::RefusedBeforeAllocation);
    let (mut store, mut ids) = (MappingStore::default(), SandboxIdSource::default());
    let req = json!({"routing": {"acquisitionFallback": "forbidden"}});
    let out = provision(&reg, &mut rt, &mut store, &mut ids, req, Some(&pre_allocation));
    assert!(matches!(out.result.unwrap_err(), End::Terminal { pool: 0, .. }));
    assert_eq!(rt.launches, vec![0]);
    assert!(store.is_empty());
}

#[test]
fn unclassified_failure_is_terminal_and_outcome_unknown() {
    let reg = registry(3);
    let mut rt = MockRuntime::default();
    rt.outcomes.insert(0, Outcome::AllocatedThenThrew);
    let (mut store, mut ids) = (MappingStore::default(), SandboxIdSource::default());
    let out = provision(&reg, &mut rt, &mut store, &mut ids, json!({}), None);
    assert!(matches!(out.result.unwrap_err(), End::Terminal { pool: 0, .. }));
    assert_eq!(out.attempts[0].code, "PROVIDER_LAUNCH_OUTCOME_UNKNOWN");
    assert_eq!(rt.launches, vec![0], "no second allocation risked");
    // Orphan-proof: the sandbox the throwing launch allocated carries the router's id label.
    assert_eq!(rt.find_by_label(SANDBOX_ID_LABEL, &out.id), 1);
}

#[test]
fn attempts_stop_at_the_bound() {
    let reg = registry(5);
    let mut rt = MockRuntime::default();
    for p in 0..5 {
        rt.outcomes.insert(p, Outcome::RefusedBeforeAllocation);
    }
    let (mut store, mut ids) = (MappingStore::default(), SandboxIdSource::default());
    let out = provision(
        &reg,
        &mut rt,
        &mut store,
        &mut ids,
        json!({"routing": {"maxAcquisitionAttempts": 2}}),
        Some(&pre_allocation),
    );
    assert_eq!(out.result.unwrap_err(), End::Exhausted { pool: 1 });
    assert_eq!(rt.launches, vec![0, 1]);
    assert!(out.attempts.iter().all(|a| a.code == "PROVIDER_CAPACITY_PRE_ALLOCATION" && a.retryable));
}

#[test]
fn a_nonsense_classification_is_terminal() {
    let reg = registry(3);
    let mut rt = MockRuntime::default();
    rt.outcomes.insert(0, Outcome::RefusedBeforeAllocation);
    let (mut store, mut ids) = (MappingStore::default(), SandboxIdSource::default());
    let lower = |_: usize| ("not a code".to_string(), true);
    let out = provision(&reg, &mut rt, &mut store, &mut ids, json!({}), Some(&lower));
    assert!(matches!(out.result.unwrap_err(), End::Terminal { .. }));
    assert_eq!(rt.launches, vec![0]);
}

#[test]
fn many_provisions_get_unique_ids_and_one_mapping_each() {
    let reg = registry(2);
    let (mut runtime, mut store, mut ids) =
        (MockRuntime::default(), MappingStore::default(), SandboxIdSource::default());
    let mut seen = std::collections::HashSet::new();
    for _ in 0..2000 {
        let out = provision(&reg, &mut runtime, &mut store, &mut ids, json!({}), None);
        assert!(seen.insert(out.result.unwrap().0));
    }
    assert_eq!(store.len(), 2000);
}

fn slots(used: f64, limit: f64) -> Measurement {
    Measurement::Known(vec![ResourceMeasurement::new("sandboxes", used, limit, "sandboxes", 1.0)])
}

/// Capacity routing: every candidate of the explicit order, admitted against the ledger.
fn provision_with_capacity(
    reg: &Registry,
    rt: &mut MockRuntime,
    ledger: &mut Ledger,
    read: &dyn Fn(usize) -> Measurement,
    classify: Option<&dyn Fn(usize) -> (String, bool)>,
) -> Outcomes {
    let req = parse_request(&json!({})).unwrap();
    let order: Vec<usize> = (0..reg.pools().len()).collect();
    let id = SandboxIdSource::default().next_key().unwrap().to_string();
    let labels = vec![(SANDBOX_ID_LABEL.to_string(), id.clone())];
    let mut store = MappingStore::default();
    run(reg, rt, &mut store, &req, order, id, &labels, classify, Some((ledger, read)))
}

#[test]
fn capacity_must_fire_a_full_pool_is_skipped_without_a_launch() {
    let reg = registry(2);
    let mut rt = MockRuntime::default();
    let mut ledger = Ledger::new(60_000);
    let read = |pool: usize| if pool == 0 { slots(3.0, 3.0) } else { slots(0.0, 3.0) };
    let out = provision_with_capacity(&reg, &mut rt, &mut ledger, &read, None);
    assert_eq!(out.result.unwrap().1, 1);
    assert_eq!(rt.launches, vec![1], "the full pool was never launched");
}

#[test]
fn capacity_must_not_fire_holds_stop_a_second_launch_that_a_lagging_read_would_allow() {
    let reg = registry(1);
    let mut rt = MockRuntime::default();
    let mut ledger = Ledger::new(60_000);
    // The reader lags: it keeps reporting 0 of 1 used after the first launch.
    let read = |_: usize| slots(0.0, 1.0);
    assert!(provision_with_capacity(&reg, &mut rt, &mut ledger, &read, None).result.is_ok());
    let second = provision_with_capacity(&reg, &mut rt, &mut ledger, &read, None);
    assert_eq!(second.result.unwrap_err(), End::NoCapacity);
    assert_eq!(rt.launches, vec![0], "one slot, one launch");
}

#[test]
fn capacity_a_proven_pre_allocation_failure_releases_its_hold() {
    let reg = registry(1);
    let mut rt = MockRuntime::default();
    rt.outcomes.insert(0, Outcome::RefusedBeforeAllocation);
    let mut ledger = Ledger::new(60_000);
    let read = |_: usize| slots(0.0, 1.0);
    let out = provision_with_capacity(&reg, &mut rt, &mut ledger, &read, Some(&pre_allocation));
    assert_eq!(out.result.unwrap_err(), End::Exhausted { pool: 0 });
    assert_eq!(ledger.held_for(0, "sandboxes"), 0.0, "released: nothing was allocated");
    rt.outcomes.insert(0, Outcome::AllocatedThenThrew);
    let out = provision_with_capacity(&reg, &mut rt, &mut ledger, &read, None);
    assert!(matches!(out.result.unwrap_err(), End::Terminal { .. }));
    assert_eq!(ledger.held_for(0, "sandboxes"), 1.0, "kept: the sandbox may exist");
}
