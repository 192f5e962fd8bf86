//! The provisioning lifecycle through the core alone, against a mock runtime: route,
//! allocate the id, stamp it into the labels, launch, classify, fall back (or not),
//! record the mapping. The JS router drives the same core functions.

use agent_relay_sandbox_router::core::fallback::{sanitize, Acquisition, Classification, Next};
use agent_relay_sandbox_router::core::ids::{is_sandbox_id, SandboxIdSource, SandboxKey};
use agent_relay_sandbox_router::core::mapping::{CreatedAt, Mapping, MappingStore};
use agent_relay_sandbox_router::core::registry::{route_order, Pool, Registry, RouteOptions};
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
    result: Result<(String, usize), Next>,
    attempts: Vec<(usize, Classification)>,
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
    let id = ids.next_id().unwrap();
    let mut labels: Vec<(String, String)> = req.labels.iter().cloned().collect();
    labels.push((SANDBOX_ID_LABEL.to_string(), id.clone()));
    let mut acq = Acquisition::new(order.clone(), req.max_attempts as usize, req.fallback_allowed);
    let mut attempts = Vec::new();
    while let Some(pool) = acq.launch() {
        match rt.launch(pool, &labels) {
            Ok(remote) => {
                acq.succeeded();
                let provider_id = store.intern(&reg.pools()[pool].id);
                store.put(Mapping {
                    id: SandboxKey::parse(&id).expect("a router id"),
                    provider_id,
                    provider_sandbox_id: remote.into_boxed_str(),
                    labels: Arc::clone(&req.labels),
                    stamped: true,
                    created_at: CreatedAt::Millis(0),
                    detached: false,
                });
                return Outcomes { result: Ok((id.clone(), pool)), attempts, id };
            }
            Err(()) => {
                let c = match classify {
                    None => sanitize(None, None),
                    Some(f) => {
                        let (code, retryable) = f(pool);
                        sanitize(Some(&code), Some(retryable))
                    }
                };
                let next = acq.failed(&c);
                attempts.push((pool, c));
                if !matches!(next, Next::Advance(_)) {
                    return Outcomes { result: Err(next), attempts, id };
                }
            }
        }
    }
    Outcomes { result: Err(Next::Exhausted), attempts, id }
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
    assert_eq!(out.result.unwrap_err(), Next::Terminal);
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
    assert_eq!(out.result.unwrap_err(), Next::Terminal);
    assert_eq!(out.attempts[0].1.code, "PROVIDER_LAUNCH_OUTCOME_UNKNOWN");
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
    assert_eq!(out.result.unwrap_err(), Next::Exhausted);
    assert_eq!(rt.launches, vec![0, 1]);
    assert!(out.attempts.iter().all(|(_, c)| c.code == "PROVIDER_CAPACITY_PRE_ALLOCATION" && c.retryable));
}

#[test]
fn a_nonsense_classification_is_terminal() {
    let reg = registry(3);
    let mut rt = MockRuntime::default();
    rt.outcomes.insert(0, Outcome::RefusedBeforeAllocation);
    let (mut store, mut ids) = (MappingStore::default(), SandboxIdSource::default());
    let lower = |_: usize| ("not a code".to_string(), true);
    let out = provision(&reg, &mut rt, &mut store, &mut ids, json!({}), Some(&lower));
    assert_eq!(out.result.unwrap_err(), Next::Terminal);
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
