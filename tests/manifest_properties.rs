//! Property tests of manifest plans and idle verdicts: for random dependency DAGs, startup
//! respects every dependency, teardown is the reverse-dependency order, and neither depends
//! on the order of the `processes` array; for random series of idle probes, the observer
//! answers idle exactly when the specification says so.

use agent_relay_sandbox_router::core::manifest::idle::{conclude, resume, FilesSeen, IdleProbe, PidFileSeen, ProcSeen};
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
        prop_assert_eq!(plan_startup(&a), plan_startup(&b));
        prop_assert_eq!(plan_teardown(&a), plan_teardown(&b));
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

/// One observation of the idle property: what the probe saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Quiet,
    FileChanged,
    CommandRunning,
    ProbeFailed,
}

fn probe(seen: Seen) -> IdleProbe {
    let mut procs = vec![
        ProcSeen { pid: 100, state: "R".into(), pgid: 100, tty: 0 },
        ProcSeen { pid: 10, state: "S".into(), pgid: 10, tty: 0 },
    ];
    if seen == Seen::CommandRunning {
        procs.push(ProcSeen { pid: 300, state: "S".into(), pgid: 300, tty: 0 });
    }
    IdleProbe {
        answered: seen != Seen::ProbeFailed,
        exit_code: Some(0),
        timed_out: false,
        ended: true,
        self_pid: Some(100),
        pid_files: vec![PidFileSeen { name: "svc".into(), pgid: 10 }],
        procs: Some(procs),
        files: Some(FilesSeen::Changed(u64::from(seen == Seen::FileChanged))),
        output_sizes: vec![],
    }
}

const QUIET_MS: i64 = 1_000;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The specification of idle, independent of how streaks are kept: a check at `t[i]`
    /// answers idle exactly when some earlier check `j` (at `t[j] <= t[i] - quietMs`) began
    /// a run of all-quiet observations through `i` with no gap longer than `quietMs`.
    #[test]
    fn idle_exactly_when_an_all_quiet_gap_free_run_lasts_quiet_ms(
        series in prop::collection::vec(
            (prop_oneof![0i64..1_500, prop::sample::select(vec![QUIET_MS - 1, QUIET_MS, QUIET_MS + 1])], prop::sample::select(vec![Seen::Quiet, Seen::Quiet, Seen::Quiet, Seen::FileChanged, Seen::CommandRunning, Seen::ProbeFailed])),
            1..40,
        )
    ) {
        let m = parse_manifest(&json!({
            "processes": [{"name": "svc", "command": "x"}],
            "idle": {"quietMs": QUIET_MS, "evidence": ["no-running-command", "no-file-change"]}
        }))
        .unwrap();
        let idle = m.idle.clone().unwrap();
        let mut state = resume(&m, &idle, None, || Ok("0123456789abcdef".into())).unwrap();
        let mut times = Vec::new();
        let mut t = 1_700_000_000_000i64;
        for (i, (gap, seen)) in series.iter().enumerate() {
            t += gap;
            times.push(t);
            let check = conclude(&m, &idle, &state, &probe(*seen), t);
            let expected = (0..=i).rev().take_while(|&j| series[j].1 == Seen::Quiet && (j == i || times[j + 1] - times[j] <= QUIET_MS))
                .any(|j| t - times[j] >= QUIET_MS);
            prop_assert_eq!(check.idle, expected, "check {} of {:?}", i, series);
            prop_assert!(!check.idle || check.quiet_for_ms >= QUIET_MS);
            state = check.state;
        }
    }
}
