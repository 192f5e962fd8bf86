//! Property tests of manifest plans: for random dependency DAGs, startup respects every
//! dependency, teardown is the reverse-dependency order, and neither depends on the order
//! of the `processes` array.

use agent_relay_sandbox_router::core::manifest::{parse_manifest, plan_startup, plan_teardown, Manifest, Phase};
use agent_relay_sandbox_router::core::CoreError;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::HashMap;

/// A random DAG as manifest process objects: node `i` may depend only on nodes `< i`
/// (so it is acyclic), and names are a random permutation so that name order and
/// dependency order disagree.
fn dag() -> impl Strategy<Value = Vec<Value>> {
    (1usize..14)
        .prop_flat_map(|n| {
            let deps = (0..n).map(|i| prop::sample::subsequence((0..i).collect::<Vec<_>>(), 0..=i)).collect::<Vec<_>>();
            let names = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
            let flush = prop::collection::vec(any::<bool>(), n);
            (deps, names, flush)
        })
        .prop_map(|(deps, names, flush)| {
            let name = |i: usize| format!("p{:02}", names[i]);
            deps.iter()
                .enumerate()
                .map(|(i, d)| {
                    let mut p = json!({
                        "name": name(i),
                        "command": format!("run {i}"),
                        "dependsOn": d.iter().map(|j| name(*j)).collect::<Vec<_>>(),
                    });
                    if flush[i] {
                        p["teardown"] = json!({"flushCommand": "sync", "graceMs": i});
                    }
                    p
                })
                .collect()
        })
}

fn manifest(items: &[Value]) -> Manifest {
    parse_manifest(&json!({ "processes": items })).expect("a DAG is a valid manifest")
}

fn deps_by_name(m: &Manifest) -> HashMap<String, Vec<String>> {
    m.processes.iter().map(|p| (p.name.clone(), p.depends_on.clone())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn startup_respects_every_dependency(items in dag()) {
        let m = manifest(&items);
        let plan = plan_startup(&m);
        let wave_of: HashMap<&str, usize> = plan
            .waves
            .iter()
            .enumerate()
            .flat_map(|(w, ps)| ps.iter().map(move |p| (p.name.as_str(), w)))
            .collect();
        // Every process exactly once.
        prop_assert_eq!(wave_of.len(), m.processes.len());
        prop_assert_eq!(plan.order().len(), m.processes.len());
        for (name, deps) in deps_by_name(&m) {
            for d in &deps {
                prop_assert!(wave_of[d.as_str()] < wave_of[name.as_str()], "{} must start after {}", name, d);
            }
            // Levels are tight: a process in wave n > 0 waits on something in wave n - 1.
            let w = wave_of[name.as_str()];
            if w == 0 {
                prop_assert!(deps.is_empty());
            } else {
                prop_assert!(deps.iter().any(|d| wave_of[d.as_str()] == w - 1));
            }
        }
        for wave in &plan.waves {
            prop_assert!(!wave.is_empty());
            prop_assert!(wave.windows(2).all(|p| p[0].name < p[1].name), "a wave is ordered by name");
        }
    }

    #[test]
    fn teardown_is_the_reverse_dependency_order(items in dag()) {
        let m = manifest(&items);
        let startup = plan_startup(&m);
        let teardown = plan_teardown(&m);
        let order = teardown.order();
        prop_assert_eq!(order.len(), m.processes.len());
        let pos: HashMap<&str, usize> = order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let wave_of: HashMap<&str, usize> = teardown
            .waves
            .iter()
            .enumerate()
            .flat_map(|(w, s)| s.iter().map(move |s| (s.name.as_str(), w)))
            .collect();
        for (name, deps) in deps_by_name(&m) {
            for d in &deps {
                prop_assert!(pos[name.as_str()] < pos[d.as_str()], "{} must stop before {}", name, d);
                prop_assert!(wave_of[name.as_str()] < wave_of[d.as_str()]);
            }
        }
        // Exactly the startup waves, reversed.
        let up: Vec<Vec<&str>> = startup.waves.iter().map(|w| w.iter().map(|p| p.name.as_str()).collect()).collect();
        let mut down: Vec<Vec<&str>> = teardown.waves.iter().map(|w| w.iter().map(|s| s.name.as_str()).collect()).collect();
        down.reverse();
        prop_assert_eq!(up, down);
        // Every step is history-safe: [flush,] signal, wait, kill.
        for step in teardown.waves.iter().flatten() {
            let n = step.phases.len();
            prop_assert!(n == 3 || n == 4);
            prop_assert!(n == 3 || matches!(step.phases[0], Phase::Flush { .. }), "flush first");
            prop_assert!(matches!(step.phases[n - 3], Phase::Signal { .. }), "then signal");
            prop_assert!(matches!(step.phases[n - 2], Phase::Wait { .. }), "then wait");
            prop_assert!(matches!(step.phases[n - 1], Phase::Kill));
        }
    }

    #[test]
    fn plans_ignore_the_order_of_the_processes_array(
        (items, shuffled) in dag().prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle()))
    ) {
        let a = manifest(&items);
        let b = manifest(&shuffled);
        prop_assert_eq!(plan_startup(&a).to_json().to_string(), plan_startup(&b).to_json().to_string());
        prop_assert_eq!(plan_teardown(&a).to_json().to_string(), plan_teardown(&b).to_json().to_string());
        // Identical input, identical output.
        prop_assert_eq!(plan_startup(&a), plan_startup(&a));
    }

    #[test]
    fn a_back_edge_is_refused_with_the_same_cycle_whatever_the_order(
        (items, shuffled, from, to) in dag()
            .prop_filter("needs two processes", |v| v.len() >= 2)
            .prop_flat_map(|v| {
                let n = v.len();
                (Just(v.clone()), Just(v).prop_shuffle(), 0..n, 0..n)
            })
    ) {
        // `hi` may depend on `lo` (the DAG direction); make it so, then make `lo` depend on
        // `hi`, which closes the cycle lo → hi → lo (possibly through other processes).
        let (lo, hi) = (from.min(to), from.max(to));
        prop_assume!(lo != hi);
        let lo_name = items[lo]["name"].clone();
        let hi_name = items[hi]["name"].clone();
        let close = |v: &[Value]| -> Vec<Value> {
            let mut v = v.to_vec();
            for p in v.iter_mut() {
                let me = p["name"].clone();
                let deps = p["dependsOn"].as_array_mut().unwrap();
                if me == hi_name && !deps.contains(&lo_name) {
                    deps.push(lo_name.clone());
                }
                if me == lo_name {
                    deps.push(hi_name.clone());
                }
            }
            v
        };
        let a = close(&items);
        let b = close(&shuffled);
        let expectation = |v: &[Value]| match parse_manifest(&json!({ "processes": v })) {
            Err(CoreError::InvalidInput { field, expectation }) => {
                assert!(field.contains(".dependsOn["), "{field}");
                expectation
            }
            other => panic!("a cycle must be refused, got {other:?}"),
        };
        let ea = expectation(&a);
        prop_assert!(ea.contains("dependency cycle "), "{}", ea);
        let names = ea.rsplit("cycle ").next().unwrap().split(" → ").collect::<Vec<_>>();
        prop_assert!(names.len() >= 3 && names.first() == names.last(), "{}", ea);
        prop_assert_eq!(ea, expectation(&b));
    }
}
