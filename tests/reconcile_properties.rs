//! Property tests of reconcile's classification (`core::reconcile`): for random listings,
//! stores, intents and in-flight sets over a small universe of ids (so that collisions,
//! duplicates and mismatches are common), the safety invariants hold:
//!
//! - a sandbox whose mapping matches (same id, pool and provider sandbox id) is never an
//!   orphan;
//! - an id in flight is never reclaimed (no orphan, stale mapping, stale intent or work);
//! - nothing without a verified stamp is ever reclaimed;
//! - every listed item is in exactly one class, and the work list is exactly the orphans,
//!   stale mappings and stale intents;
//! - an intent-based orphan's reason and every stale intent come from the one predicate
//!   `launch_over`.

use agent_relay_sandbox_router::core::reconcile::{
    classify, launch_over, Classification, Facts, IntentFact, Launch, Listed, Listing, MappingFact, OrphanReason,
    PendingReason, Pool, Run, Work, WorkKind,
};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

const NOW: f64 = 1_800_000_000_000.0;
const POOLS: [&str; 2] = ["a", "b"];

fn sbx(n: u8) -> String {
    format!("sbx_{n:032x}")
}

fn facts() -> Facts<'static> {
    Facts { fleet: "default", session: "mine", host: "here", now_ms: NOW, grace_ms: 900_000.0 }
}

fn time() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![Just(None), (0u32..4).prop_map(|k| Some(NOW - [0.0, 1.0, 900_000.0, 3_600_000.0][k as usize]))]
}

fn listed() -> impl Strategy<Value = Listed> {
    (0u8..6, proptest::option::of(0u8..8), any::<bool>(), time()).prop_map(|(p, id, verified, created)| Listed {
        provider_sandbox_id: format!("p{p}"),
        sandbox_id: id.map(sbx),
        verified: verified && id.is_some(),
        created_at_ms: created,
    })
}

fn pool() -> impl Strategy<Value = Listing> {
    prop_oneof![1 => Just(Listing::Unknown), 4 => prop::collection::vec(listed(), 0..10).prop_map(Listing::Listed)]
}

fn mapping() -> impl Strategy<Value = MappingFact> {
    (0u8..8, 0usize..2, 0u8..6, prop_oneof![Just(Some("default")), Just(Some("other")), Just(None)], time()).prop_map(
        |(id, pool, p, fleet, created)| MappingFact {
            id: sbx(id),
            provider_id: POOLS[pool].to_string(),
            provider_sandbox_id: format!("p{p}"),
            fleet: fleet.map(str::to_string),
            created_at_ms: created,
            warm: None,
        },
    )
}

fn intent() -> impl Strategy<Value = IntentFact> {
    (
        0u8..8,
        proptest::option::of(0usize..2),
        prop_oneof![Just(Some("launching")), Just(Some("failed")), Just(None)],
        proptest::option::of(prop_oneof![Just(NOW - 1.0), Just(NOW), Just(NOW + 60_000.0)]),
        prop_oneof![Just(Some("here")), Just(Some("there")), Just(None)],
        proptest::option::of(1u64..4),
        prop_oneof![Just(Some("mine")), Just(Some("theirs")), Just(None)],
    )
        .prop_map(|(id, pool, state, expires, host, pid, session)| IntentFact {
            id: sbx(id),
            provider_id: pool.map(|p| POOLS[p].to_string()),
            state: state.map(str::to_string),
            expires_at_ms: expires,
            owner_host: host.map(str::to_string),
            owner_pid: pid,
            owner_session: session.map(str::to_string),
        })
}

#[derive(Debug, Clone)]
struct World {
    pools: Vec<Pool>,
    mappings: Vec<MappingFact>,
    intents: Vec<IntentFact>,
    in_flight: HashSet<String>,
    gone: Vec<u64>,
}

fn world() -> impl Strategy<Value = World> {
    (
        pool(),
        pool(),
        prop::collection::vec(mapping(), 0..10),
        prop::collection::vec(intent(), 0..10),
        prop::collection::hash_set(0u8..8, 0..4),
        prop::collection::vec(1u64..4, 0..3),
    )
        .prop_map(|(a, b, mappings, intents, in_flight, gone)| World {
            pools: vec![Pool { provider_id: "a".into(), listing: a }, Pool { provider_id: "b".into(), listing: b }],
            mappings,
            intents,
            in_flight: in_flight.into_iter().map(sbx).collect(),
            gone,
        })
}

fn run(w: &World) -> Classification {
    let run = Run {
        facts: facts(),
        pools: &w.pools,
        mappings: &w.mappings,
        intents: &w.intents,
        gone_pids: &w.gone,
        warm_pools: &[],
    };
    classify(&run, &|id| w.in_flight.contains(id))
}

fn items(w: &World, p: usize) -> &[Listed] {
    match &w.pools[p].listing {
        Listing::Listed(items) => items,
        Listing::Unknown => &[],
    }
}

/// The id a reclaim action acts on.
fn acts_on(w: &World, wk: &Work) -> String {
    match wk.kind {
        WorkKind::Orphan | WorkKind::WarmMember => {
            items(w, wk.pool)[wk.index].sandbox_id.clone().expect("an orphan has a stamp")
        }
        WorkKind::StaleMapping => w.mappings[wk.index].id.clone(),
        WorkKind::StaleIntent => w.intents[wk.index].id.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn a_sandbox_whose_mapping_matches_is_never_an_orphan(w in world()) {
        let c = run(&w);
        let last: HashMap<&str, &MappingFact> = w.mappings.iter().map(|m| (m.id.as_str(), m)).collect();
        for (p, pool) in c.pools.iter().enumerate() {
            for &(i, _) in &pool.orphan {
                let o = &items(&w, p)[i];
                let m = last.get(o.sandbox_id.as_deref().unwrap());
                prop_assert!(
                    !m.is_some_and(|m| m.provider_id == POOLS[p] && m.provider_sandbox_id == o.provider_sandbox_id),
                    "{o:?} is mapped"
                );
            }
        }
    }

    #[test]
    fn an_in_flight_id_is_never_reclaimed(w in world()) {
        let c = run(&w);
        for wk in &c.work {
            prop_assert!(!w.in_flight.contains(&acts_on(&w, wk)), "{wk:?} is in flight");
        }
        for (p, pool) in c.pools.iter().enumerate() {
            prop_assert!(pool.orphan.iter().all(|&(i, _)| !w.in_flight.contains(items(&w, p)[i].sandbox_id.as_deref().unwrap())));
            prop_assert!(pool.stale_mapping.iter().all(|&j| !w.in_flight.contains(&w.mappings[j].id)));
        }
        prop_assert!(c.stale_intents.iter().all(|&k| !w.in_flight.contains(&w.intents[k].id)));
    }

    #[test]
    fn nothing_without_a_verified_stamp_is_reclaimed(w in world()) {
        let c = run(&w);
        for wk in c.work.iter().filter(|wk| wk.kind == WorkKind::Orphan) {
            let f = &items(&w, wk.pool)[wk.index];
            prop_assert!(f.verified && f.sandbox_id.is_some(), "{f:?} is reclaimed");
        }
    }

    #[test]
    fn every_listed_item_is_in_one_class_and_the_work_is_exactly_what_is_reclaimable(w in world()) {
        let c = run(&w);
        let mut reclaimable = c.stale_intents.len();
        for (p, pool) in c.pools.iter().enumerate() {
            let from_items = pool.pending.iter().filter(|x| x.reason != PendingReason::NotListedYet).count();
            prop_assert_eq!(pool.mapped.len() + pool.orphan.len() + from_items, items(&w, p).len());
            reclaimable += pool.orphan.len() + pool.stale_mapping.len();
        }
        prop_assert_eq!(c.work.len(), reclaimable);
    }

    #[test]
    fn intent_reasons_and_stale_intents_come_from_the_one_predicate(w in world()) {
        let c = run(&w);
        let f = facts();
        let last: HashMap<&str, &IntentFact> = w.intents.iter().map(|i| (i.id.as_str(), i)).collect();
        let in_flight = |id: &str| w.in_flight.contains(id);
        let gone = |pid: u64| w.gone.contains(&pid);
        for (p, pool) in c.pools.iter().enumerate() {
            for &(i, why) in &pool.orphan {
                if matches!(why, OrphanReason::DuplicateOfMapped | OrphanReason::GraceElapsed) {
                    continue;
                }
                let id = items(&w, p)[i].sandbox_id.as_deref().unwrap();
                let intent = last.get(id).expect("an intent-based reason has an intent");
                prop_assert_eq!(launch_over(intent, &f, &in_flight, &gone), Launch::Over(why));
            }
        }
        for &k in &c.stale_intents {
            let id = w.intents[k].id.as_str();
            prop_assert!(matches!(launch_over(last[id], &f, &in_flight, &gone), Launch::Over(_)));
        }
    }
}
