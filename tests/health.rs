//! Live health through the core alone, with a simulated clock: the router's loop (route
//! with the circuits, run the acquisition machine, report each outcome, record it in
//! health) as `lib/provision.js` drives it through `binding_acquisition.rs`.

use agent_relay_sandbox_router::core::acquisition::{Acquisition, Outcome, Step};
use agent_relay_sandbox_router::core::events::{Event, PoolId};
use agent_relay_sandbox_router::core::health::{Block, CircuitState, Health, HealthConfig, Transition};
use agent_relay_sandbox_router::core::pool::Pool;
use agent_relay_sandbox_router::core::registry::{route_order, Registry, RouteOptions};
use agent_relay_sandbox_router::core::request::parse_request;
use serde_json::json;
use std::rc::Rc;

const TIMEOUT_MS: i64 = 1_000;
const COOLDOWN_MS: u64 = 5_000;

/// Three pools; `a` is the cheapest (ranked first under `cost`), then `b`, then `c`.
fn registry() -> Registry {
    let mut r = Registry::default();
    for (id, cost) in [("a", 1), ("b", 2), ("c", 3)] {
        let v = json!({"id": id, "capabilities": {},
            "signals": {"estimatedCost": cost, "coldStartLatencyMs": 100, "readyLatencyMs": 100, "completionWithinBudgetRate": 1, "available": true}});
        r.add(Pool::from_json(&v, false).unwrap()).unwrap();
    }
    r
}

/// How a pool answers at this point of the run.
#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    Healthy,
    Hangs,
}

struct Run {
    reg: Registry,
    health: Health,
    slots: Vec<usize>,
    now: i64,
    /// Circuit events: (pool, type, cooldown of an opening).
    transitions: Vec<(usize, &'static str, u64)>,
}

struct Provision {
    /// The pool that served it (None: it failed).
    served: Option<usize>,
    /// The pools launched on, in order.
    launched: Vec<usize>,
    /// How long it took (simulated).
    took: i64,
}

impl Run {
    fn new() -> Self {
        let mut health = Health::new(HealthConfig { cooldown_ms: COOLDOWN_MS, ..HealthConfig::default() });
        let reg = registry();
        let slots = reg.pools().iter().map(|p| health.slot(&p.id)).collect();
        Run { reg, health, slots, now: 0, transitions: Vec::new() }
    }

    /// One provision: pool `a` behaves as `a`, the others are healthy (50 ms to a handle).
    fn provision(&mut self, a: Behaviour, request: serde_json::Value) -> Result<Provision, Vec<usize>> {
        let req = parse_request(&request).unwrap();
        let circuit: Vec<(usize, Block)> =
            (0..self.slots.len()).filter_map(|i| self.health.block(self.slots[i], self.now).map(|b| (i, b))).collect();
        let opts = RouteOptions { limit: Some(req.max_attempts as usize), circuit: &circuit, ..Default::default() };
        let order = route_order(&self.reg, &req, &opts, &mut Vec::new());
        if order.is_empty() {
            return Err(circuit.iter().map(|(i, _)| *i).collect());
        }
        let start = self.now;
        let mut m = Acquisition::new(order, req.max_attempts as usize, req.fallback_allowed, None, names());
        m.track(self.slots.clone(), self.now);
        let mut launched = Vec::new();
        loop {
            match m.next_with(None, Some(&mut self.health)) {
                Step::Done => break,
                Step::Admit(_) | Step::Reserve(_) => unreachable!("no capacity routing or budgets here"),
                Step::Claim(_) => unreachable!("no warm pools here"),
                Step::Launch(pool) => {
                    launched.push(pool);
                    if pool == 0 && a == Behaviour::Hangs {
                        self.now += TIMEOUT_MS;
                        m.set_now(self.now);
                        m.timed_out(None);
                    } else {
                        self.now += 50;
                        m.set_now(self.now);
                        m.succeeded(None);
                    }
                    m.report_health(&mut self.health);
                }
            }
        }
        for e in m.take_events() {
            let cooldown = if let Event::CircuitOpened { cooldown_ms, .. } = &e { *cooldown_ms } else { 0 };
            if let Event::CircuitOpened { pool, .. } | Event::CircuitHalfOpen { pool } | Event::CircuitClosed { pool } =
                &e
            {
                self.transitions.push((pool.parse().unwrap(), e.type_name(), cooldown));
            }
        }
        let served = match m.outcome() {
            Some(Outcome::Succeeded(p)) => Some(*p),
            _ => None,
        };
        Ok(Provision { served, launched, took: self.now - start })
    }
}

/// Pool ids as events name them: the index as text.
fn names() -> Option<Rc<[PoolId]>> {
    Some((0..4).map(|i| PoolId::from(i.to_string().as_str())).collect())
}

fn cheapest() -> serde_json::Value {
    json!({"routing": {"strategy": "cost"}})
}

#[test]
fn chaos_the_best_pool_hangs_mid_run_is_routed_around_probed_and_returned_to() {
    let mut run = Run::new();
    let threshold = HealthConfig::default().failure_threshold as usize;
    // Healthy: a serves.
    for _ in 0..10 {
        assert_eq!(run.provision(Behaviour::Healthy, cheapest()).unwrap().served, Some(0));
    }
    // a hangs: exactly `threshold` provisions time out on it (each waits one timeout, no
    // more), then the router stops choosing it.
    let mut timed_out = 0;
    let mut served_elsewhere = 0;
    for _ in 0..30 {
        let p = run.provision(Behaviour::Hangs, cheapest()).unwrap();
        assert!(p.took <= TIMEOUT_MS, "no provision waits more than one acquisition timeout");
        match p.served {
            None => timed_out += 1,
            Some(pool) => {
                assert_eq!(pool, 1, "served by the next best pool");
                served_elsewhere += 1;
            }
        }
        run.now += 10;
    }
    assert_eq!(timed_out, threshold, "the circuit opened after exactly the threshold");
    assert_eq!(served_elsewhere, 30 - threshold);
    assert!(matches!(run.transitions[..], [(0, "health.circuit.opened", _)]), "{:?}", run.transitions);
    // Still hanging after the cooldown: one trial, which fails and reopens for longer.
    let CircuitState::Open { retry_at, .. } = run.health.state(run.slots[0], run.now) else { panic!() };
    run.now = retry_at;
    let trial = run.provision(Behaviour::Hangs, cheapest()).unwrap();
    assert_eq!((trial.launched.as_slice(), trial.served), (&[0][..], None), "the trial probes a");
    assert!(matches!(run.transitions[1..], [(0, "health.circuit.half-open", _), (0, "health.circuit.opened", 10_000)]));
    assert_eq!(run.provision(Behaviour::Hangs, cheapest()).unwrap().served, Some(1), "open again: routed around");
    // Recovered: after the longer cooldown the trial succeeds, the circuit closes, and the
    // router returns to a.
    let CircuitState::Open { retry_at, .. } = run.health.state(run.slots[0], run.now) else { panic!() };
    run.now = retry_at;
    assert_eq!(run.provision(Behaviour::Healthy, cheapest()).unwrap().served, Some(0));
    assert!(matches!(run.transitions[3..], [(0, "health.circuit.half-open", _), (0, "health.circuit.closed", _)]));
    for _ in 0..5 {
        assert_eq!(run.provision(Behaviour::Healthy, cheapest()).unwrap().served, Some(0));
    }
}

#[test]
fn must_fire_an_exact_provider_request_is_refused_while_open_and_must_not_be_rerouted() {
    let mut run = Run::new();
    for _ in 0..HealthConfig::default().failure_threshold {
        run.provision(Behaviour::Hangs, cheapest()).unwrap();
    }
    let exact = json!({"providerId": "a"});
    assert_eq!(run.provision(Behaviour::Healthy, exact.clone()).err(), Some(vec![0]), "refused, not rerouted");
    run.now += COOLDOWN_MS as i64;
    assert_eq!(run.provision(Behaviour::Healthy, exact).unwrap().served, Some(0), "the trial may use it");
}

#[test]
fn must_not_fire_a_half_open_pool_lets_exactly_one_trial_through_at_a_time() {
    let mut run = Run::new();
    for _ in 0..HealthConfig::default().failure_threshold {
        run.provision(Behaviour::Hangs, cheapest()).unwrap();
    }
    run.now += COOLDOWN_MS as i64;
    // Two acquisitions begin at the same instant; the first takes the trial.
    let req = parse_request(&cheapest()).unwrap();
    let mut first = Acquisition::new(vec![0, 1], 3, true, None, None);
    first.track(run.slots.clone(), run.now);
    assert_eq!(first.next_with(None, Some(&mut run.health)), Step::Launch(0));
    let mut second = Acquisition::new(vec![0, 1], req.max_attempts as usize, true, None, None);
    second.track(run.slots.clone(), run.now);
    assert_eq!(second.next_with(None, Some(&mut run.health)), Step::Launch(1), "passed over: trial in flight");
    // The first is abandoned (its outcome never reported): the token is free again.
    first.abandon(&mut run.health);
    assert_eq!(
        run.health.state(run.slots[0], run.now),
        CircuitState::HalfOpen {
            trial_in_flight: false,
            cause: agent_relay_sandbox_router::core::health::Cause::Failures
        }
    );
}

#[test]
fn must_fire_every_candidate_excluded_at_launch_time_ends_circuit_open_without_launching() {
    let mut run = Run::new();
    for _ in 0..HealthConfig::default().failure_threshold {
        run.provision(Behaviour::Hangs, cheapest()).unwrap();
    }
    // A route decided before the circuit opened still lists a; the machine passes it over.
    let mut m = Acquisition::new(vec![0], 3, true, None, names());
    m.track(run.slots.clone(), run.now);
    assert_eq!(m.next_with(None, Some(&mut run.health)), Step::Done);
    assert_eq!(m.outcome(), Some(&Outcome::CircuitOpen { pool: 0 }));
    assert_eq!(m.launches(), 0);
    assert!(m.take_events().contains(&Event::HealthSkipped { pool: "0".into(), reason: "CIRCUIT_OPEN" }));
}

/// Health with the shared ledger (a `capacity.coordinator`): a half-open pool's single trial
/// token is taken when the machine reaches it, and must come back when the coordinator's
/// answer skips the pool, or no provision could ever probe it again.
mod with_a_coordinator {
    use super::*;
    use agent_relay_sandbox_router::core::acquisition::{CapacityPlan, SharedVerdict};
    use agent_relay_sandbox_router::core::capabilities::Resources;
    use agent_relay_sandbox_router::core::capacity::validate;
    use agent_relay_sandbox_router::core::health::LaunchOutcome;

    /// Health whose pool `a` is half-open (one outcome-unknown failure opened it with a
    /// threshold of 1; the cooldown is over at `COOLDOWN_MS`).
    fn half_open() -> (Health, usize) {
        let mut health =
            Health::new(HealthConfig { cooldown_ms: COOLDOWN_MS, failure_threshold: 1, ..HealthConfig::default() });
        let a = health.slot("a");
        assert!(matches!(health.record(a, LaunchOutcome::OutcomeUnknown, 0, false), Some(Transition::Opened { .. })));
        assert!(matches!(health.state(a, COOLDOWN_MS as i64), CircuitState::HalfOpen { trial_in_flight: false, .. }));
        (health, a)
    }

    /// One coordinated acquisition on pool `a` alone, up to its admission, answered `verdict`.
    fn admit(health: &mut Health, a: usize, verdict: SharedVerdict) -> Acquisition {
        let plan = CapacityPlan { need: Resources::default(), readers: vec![true], ledger_pools: vec![0] };
        let mut acq = Acquisition::new(vec![0], 3, true, Some(plan), None);
        acq.track(vec![a], COOLDOWN_MS as i64);
        assert_eq!(acq.next_with(None, Some(health)), Step::Admit(0));
        let measured = validate(&json!({"status": "known", "resources": [
            {"resource": "sandboxes", "used": 0, "limit": 10, "unit": "sandboxes", "headroom": 10, "required": 1}]}));
        assert!(acq.shared_demand(&measured, Some(health)).is_some());
        acq.admit_shared(verdict, Some(health), None);
        acq
    }

    #[test]
    fn coordinator_unavailable_gives_the_trial_back() {
        let (mut health, a) = half_open();
        let acq = admit(&mut health, a, SharedVerdict::Unavailable);
        assert_eq!(acq.skipped().len(), 1);
        // the token is free: the next provision may take the trial
        assert!(matches!(health.state(a, COOLDOWN_MS as i64), CircuitState::HalfOpen { trial_in_flight: false, .. }));
        assert_eq!(health.try_launch(a, COOLDOWN_MS as i64), Ok(true));
    }

    #[test]
    fn coordinator_exhausted_gives_the_trial_back() {
        let (mut health, a) = half_open();
        admit(&mut health, a, SharedVerdict::Exhausted("sandboxes".into()));
        assert!(matches!(health.state(a, COOLDOWN_MS as i64), CircuitState::HalfOpen { trial_in_flight: false, .. }));
    }

    #[test]
    fn coordinator_admitted_keeps_the_trial_for_the_launch() {
        // must-not-fire: an admitted trial launches with the token held; nobody else may probe
        let (mut health, a) = half_open();
        let mut acq = admit(&mut health, a, SharedVerdict::Admitted(7));
        assert!(matches!(health.state(a, COOLDOWN_MS as i64), CircuitState::HalfOpen { trial_in_flight: true, .. }));
        assert_eq!(health.try_launch(a, COOLDOWN_MS as i64), Err(Block::TrialInFlight));
        assert_eq!(acq.next_with(None, Some(&mut health)), Step::Launch(0));
    }
}
