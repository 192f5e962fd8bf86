//! Property tests of the routing decision: invariants that must hold for every input.

use agent_relay_sandbox_router::core::capabilities::{ISOLATION_LEVELS, NAMED_CAPABILITIES};
use agent_relay_sandbox_router::core::pool::Pool;
use agent_relay_sandbox_router::core::registry::{route, Registry, RouteOptions};
use agent_relay_sandbox_router::core::request::parse_request;
use agent_relay_sandbox_router::core::requirements::{rejections, CheckContext};
use proptest::prelude::*;
use serde_json::{json, Value};

fn extras_json() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop::sample::select(vec!["none", "allowlist", "open"])),
        prop::option::of(prop::sample::select(vec!["ephemeral", "session", "persistent"])),
        prop::sample::subsequence(vec!["command-lifetime", "sandbox-lifetime", "idle"], 0..3),
        prop::option::of(0u32..3000),
        0u8..3,
        0u32..5000,
        prop::option::of(prop::sample::select(vec!["agent-v4", "agent-v5"])),
        prop::sample::subsequence(vec!["read-only-root", "no-privilege"], 0..2),
    )
        .prop_map(|(egress, durability, semantics, granularity, lifetime_kind, lifetime, image, restrictions)| {
            let mut v = json!({"semantics": semantics, "restrictions": restrictions});
            if let Some(e) = egress {
                v["egress"] = json!(e);
            }
            if let Some(d) = durability {
                v["durability"] = json!(d);
            }
            if let Some(g) = granularity {
                v["granularity"] = json!(g);
            }
            match lifetime_kind {
                0 => {}
                1 => v["lifetime"] = Value::Null,
                _ => v["lifetime"] = json!(lifetime),
            }
            if let Some(i) = image {
                v["image"] = json!(i);
            }
            v
        })
}

fn pool_json() -> impl Strategy<Value = Value> {
    (pool_base(), extras_json()).prop_map(|(mut v, x)| {
        let caps = &mut v["capabilities"];
        let mut timeout = json!({"semantics": x["semantics"]});
        if let Some(g) = x.get("granularity") {
            timeout["granularityMs"] = g.clone();
        }
        if let Some(l) = x.get("lifetime") {
            timeout["maxSandboxLifetimeMs"] = l.clone();
        }
        caps["timeout"] = timeout;
        caps["restrictions"] = x["restrictions"].clone();
        if let Some(e) = x.get("egress") {
            caps["egress"] = e.clone();
        }
        if let Some(d) = x.get("durability") {
            caps["stateDurability"] = d.clone();
        }
        if let Some(i) = x.get("image") {
            caps["image"] = json!({"identity": i, "binaries": ["node"]});
        }
        v
    })
}

fn pool_base() -> impl Strategy<Value = Value> {
    (
        prop::sample::subsequence(NAMED_CAPABILITIES.to_vec(), 0..5),
        prop::sample::subsequence(vec!["eu-west", "us-east", "ap-south"], 0..3),
        0u32..8,
        prop::option::of(prop::sample::select(ISOLATION_LEVELS.to_vec())),
        (0u32..5, 0u32..2000, 0u32..20000, 0u32..=100, prop::bool::weighted(0.9)),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(caps, regions, cpu, iso, (cost, cold, ready, rate, available), invalid)| {
            let mut v = json!({
                "capabilities": {"supported": caps, "regions": regions, "resources": {"cpu": cpu}},
                "signals": {"estimatedCost": cost as f64 / 4.0, "coldStartLatencyMs": cold,
                            "readyLatencyMs": ready, "completionWithinBudgetRate": rate as f64 / 100.0,
                            "available": available},
            });
            if let Some(i) = iso {
                v["capabilities"]["isolation"] = json!(i);
            }
            if invalid {
                v["signals"]["estimatedCost"] = json!(-1);
            }
            v
        })
}

fn request_json() -> impl Strategy<Value = Value> {
    (request_base(), extras_json(), prop::bool::weighted(0.5), prop::option::of(0usize..12)).prop_map(
        |(mut v, x, use_extras, only)| {
            if use_extras {
                let r = &mut v["requires"];
                let mut timeout = r.get("timeout").cloned().unwrap_or(json!({}));
                timeout["semantics"] = x["semantics"].clone();
                if let Some(g) = x.get("granularity") {
                    timeout["granularityMs"] = g.clone();
                }
                if let Some(l) = x.get("lifetime").and_then(Value::as_u64) {
                    timeout["requiredSandboxLifetimeMs"] = json!(l);
                }
                r["timeout"] = timeout;
                r["restrictions"] = x["restrictions"].clone();
                if let Some(e) = x.get("egress") {
                    r["egress"] = json!([e, "open"]);
                }
                if let Some(d) = x.get("durability") {
                    r["stateDurability"] = d.clone();
                }
                if let Some(i) = x.get("image") {
                    r["image"] = json!({"identity": i, "requiredBinaries": ["node"]});
                }
            }
            if let Some(o) = only {
                v["providerId"] = json!(format!("p{o:03}"));
            }
            v
        },
    )
}

fn request_base() -> impl Strategy<Value = Value> {
    (
        prop::sample::subsequence(NAMED_CAPABILITIES.to_vec(), 0..2),
        prop::sample::subsequence(NAMED_CAPABILITIES.to_vec(), 0..2),
        prop::sample::subsequence(vec!["eu-west", "us-east"], 0..2),
        prop::bool::ANY,
        0u32..6,
        prop::sample::select(vec!["cost", "latency", "reliability", "balanced"]),
        prop::sample::select(vec!["cold", "ready"]),
        prop::option::of(0u32..20000),
        prop::option::of(prop::sample::select(ISOLATION_LEVELS.to_vec())),
    )
        .prop_map(|(req, forb, regions, required, cpu, strategy, objective, budget, iso)| {
            let forb: Vec<&str> = forb.into_iter().filter(|f| !req.contains(f)).collect();
            let mut v = json!({
                "requires": {"requiredCapabilities": req, "forbiddenCapabilities": forb},
                "resources": {"cpu": cpu},
                "routing": {"strategy": strategy, "latencyObjective": objective},
            });
            if !regions.is_empty() {
                v["region"] = json!({"preferred": regions, "required": required});
            }
            if let Some(b) = budget {
                v["requires"]["timeout"] = json!({"maxReadyLatencyMs": b});
            }
            if let Some(i) = iso {
                v["requires"]["isolation"] = json!(i);
            }
            v
        })
}

fn registry(pools: &[Value], order: &[usize]) -> Registry {
    let mut r = Registry::default();
    for &i in order {
        let mut v = pools[i].clone();
        v["id"] = json!(format!("p{i:03}"));
        r.add(Pool::from_json(&v, false).unwrap()).unwrap();
    }
    r
}

fn order_of(r: &Registry, req: &Value) -> Vec<String> {
    let req = parse_request(req).unwrap();
    route(r.pools(), &req, &RouteOptions::default())
        .eligible
        .iter()
        .map(|x| r.pools()[x.index].id.to_string())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn order_is_invariant_under_registration_order(
        pools in prop::collection::vec(pool_json(), 1..12),
        req in request_json(),
        seed in any::<u64>(),
    ) {
        let n = pools.len();
        let forward: Vec<usize> = (0..n).collect();
        let mut shuffled = forward.clone();
        // Deterministic Fisher-Yates from the seed.
        let mut s = seed | 1;
        for i in (1..n).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            shuffled.swap(i, (s % (i as u64 + 1)) as usize);
        }
        prop_assert_eq!(order_of(&registry(&pools, &forward), &req), order_of(&registry(&pools, &shuffled), &req));
    }

    #[test]
    fn no_eligible_pool_violates_a_requirement(pools in prop::collection::vec(pool_json(), 1..12), req in request_json()) {
        let r = registry(&pools, &(0..pools.len()).collect::<Vec<_>>());
        let parsed = parse_request(&req).unwrap();
        let d = route(r.pools(), &parsed, &RouteOptions::default());
        for e in &d.eligible {
            let p = &r.pools()[e.index];
            prop_assert!(rejections(&p.id, &p.capabilities, &parsed, CheckContext::default()).is_empty());
            let s = p.signals.as_ref().expect("eligible pools have valid signals");
            prop_assert!(s.available);
            if let Some(b) = parsed.max_ready_latency_ms {
                prop_assert!(agent_relay_sandbox_router::core::ranking::latency_of(s, parsed.latency_objective) <= b);
            }
        }
        prop_assert_eq!(d.eligible.len() + d.rejected_count, pools.len());
    }

    #[test]
    fn balanced_scores_are_finite_and_within_unit_interval(pools in prop::collection::vec(pool_json(), 1..12), req in request_json()) {
        let mut req = req;
        req["routing"]["strategy"] = json!("balanced");
        let r = registry(&pools, &(0..pools.len()).collect::<Vec<_>>());
        let d = route(r.pools(), &parse_request(&req).unwrap(), &RouteOptions::default());
        for e in &d.eligible {
            prop_assert!(e.score.is_finite() && (0.0..=1.0).contains(&e.score), "{}", e.score);
            for x in [e.cost.normalized, e.latency.normalized, e.reliability.normalized] {
                prop_assert!(x.is_finite() && (0.0..=1.0).contains(&x));
            }
        }
    }

    #[test]
    fn limited_ranking_is_a_prefix_of_the_full_ranking(pools in prop::collection::vec(pool_json(), 1..20), req in request_json(), k in 1usize..5) {
        let r = registry(&pools, &(0..pools.len()).collect::<Vec<_>>());
        let parsed = parse_request(&req).unwrap();
        let full: Vec<String> = route(r.pools(), &parsed, &RouteOptions::default()).eligible.iter().map(|x| r.pools()[x.index].id.to_string()).collect();
        let top: Vec<String> = route(r.pools(), &parsed, &RouteOptions { limit: Some(k), ..RouteOptions::default() })
            .eligible.iter().map(|x| r.pools()[x.index].id.to_string()).collect();
        prop_assert_eq!(&full[..full.len().min(k)], &top[..]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The hot path (verdict mode, compact buffer, top-k) agrees with the explained path.
    #[test]
    fn hot_path_order_equals_the_explained_order(pools in prop::collection::vec(pool_json(), 1..25), req in request_json(), k in 1usize..6) {
        use agent_relay_sandbox_router::core::registry::route_order;
        let r = registry(&pools, &(0..pools.len()).collect::<Vec<_>>());
        let parsed = parse_request(&req).unwrap();
        let full: Vec<usize> = route(r.pools(), &parsed, &RouteOptions::default()).eligible.iter().map(|x| x.index).collect();
        let mut scratch = Vec::new();
        let fast = route_order(&r, &parsed, &RouteOptions { limit: Some(k), ..RouteOptions::default() }, &mut scratch);
        prop_assert_eq!(&full[..full.len().min(k)], &fast[..]);
        let all = route_order(&r, &parsed, &RouteOptions::default(), &mut scratch);
        prop_assert_eq!(full, all);
    }
}

/// Every per-request option of the router, as generated inputs: detached requests and
/// pools with or without `launchDetached`, credential readiness, resolver answers (valid,
/// invalid, unresolved), a capacity `providerOrder` (a subset, in any order, possibly
/// naming unknown ids), and the request's attempt bound and fallback policy.
#[derive(Debug, Clone)]
struct Extras {
    detached: bool,
    launch_detached: Vec<bool>,
    unavailable: Vec<usize>,
    overrides: Vec<(usize, u8, Value)>,
    order: Option<Vec<String>>,
    max_attempts: u32,
    fallback_forbidden: bool,
}

fn extras_strategy() -> impl Strategy<Value = Extras> {
    (
        prop::bool::weighted(0.3),
        prop::collection::vec(prop::bool::weighted(0.7), 25),
        prop::collection::vec(0usize..25, 0..6),
        prop::collection::vec((0usize..25, 0u8..3, pool_base()), 0..8),
        prop::option::of(prop::collection::vec(0usize..30, 0..12)),
        1u32..=10,
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(detached, launch_detached, unavailable, overrides, order, max_attempts, fallback_forbidden)| Extras {
                detached,
                launch_detached,
                unavailable,
                overrides: overrides.into_iter().map(|(i, kind, v)| (i, kind, v["signals"].clone())).collect(),
                order: order.map(|o| {
                    let mut seen = Vec::new();
                    for i in o {
                        let id = format!("p{i:03}");
                        if !seen.contains(&id) {
                            seen.push(id);
                        }
                    }
                    seen
                }),
                max_attempts,
                fallback_forbidden,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Item 3 of issue 13: the provision path (`route_order_into`: compact profiles,
    /// `admits`, `top_k`) and the explained paths (`route` in verdict and in detail mode,
    /// `route_interned`, which explanations are built from) make the same decision under
    /// every option the router passes, extras included, with the attempt bound the
    /// binding applies (`maxAcquisitionAttempts`, or every candidate under capacity order).
    #[test]
    fn hot_path_equals_explained_path_over_every_option(
        pools in prop::collection::vec(pool_json(), 1..25),
        req in request_json(),
        x in extras_strategy(),
        circuit in prop::collection::vec((0usize..25, any::<bool>()), 0..4),
        observed in prop::option::of(prop::collection::vec(
            prop::option::of((prop::option::of(0.0f64..5000.0), 0.0f64..=1.0, 0.5f64..1.0)), 25)),
    ) {
        use agent_relay_sandbox_router::core::health::{Block, Cause, Observed};
        use agent_relay_sandbox_router::core::registry::{route_interned, route_order, Workspace};
        use agent_relay_sandbox_router::core::requirements::Interner;
        use agent_relay_sandbox_router::core::signals::{signal_state, unresolved};
        use std::collections::HashMap;
        let mut req = req;
        req["routing"]["maxAcquisitionAttempts"] = json!(x.max_attempts);
        if x.fallback_forbidden {
            req["routing"]["acquisitionFallback"] = json!("forbidden");
        }
        let parsed = parse_request(&req).unwrap();
        let mut r = Registry::default();
        for (i, p) in pools.iter().enumerate() {
            let mut v = p.clone();
            v["id"] = json!(format!("p{i:03}"));
            r.add(Pool::from_json(&v, x.launch_detached[i]).unwrap()).unwrap();
        }
        let n = pools.len();
        let unavailable: Vec<usize> = x.unavailable.iter().copied().filter(|i| *i < n).collect();
        let overrides: HashMap<usize, _> = x
            .overrides
            .iter()
            .filter(|(i, _, _)| *i < n)
            .map(|(i, kind, s)| {
                let state = match kind {
                    0 => signal_state(s),
                    1 => signal_state(&json!({"estimatedCost": -1})),
                    _ => unresolved("threw"),
                };
                (*i, state)
            })
            .collect();
        let with_overrides = !x.overrides.is_empty();
        let limit = if x.order.is_some() { None } else { Some(parsed.max_attempts as usize) };
        // Live health: pools whose circuit excludes them, and observed signals blended in.
        let circuit: Vec<(usize, Block)> = circuit
            .into_iter()
            .filter(|(i, _)| *i < n)
            .map(|(i, open)| {
                (i, if open { Block::Open { retry_at: 1_000, cause: Cause::Failures } } else { Block::TrialInFlight })
            })
            .collect();
        let observed: Option<Vec<Option<Observed>>> = observed.map(|v| {
            v.into_iter()
                .map(|o| o.map(|(l, r, w)| Observed { ready_latency_ms: l, completion_rate: r, weight: w }))
                .collect()
        });
        let opts = RouteOptions {
            detached: x.detached,
            credentials_unavailable: &unavailable,
            signals: with_overrides.then_some(&overrides),
            provider_order: x.order.as_deref(),
            limit,
            detail: false,
            circuit: &circuit,
            observed: observed.as_deref(),
            over_budget: &[],
            paced: &[],
        };
        let fast = route_order(&r, &parsed, &opts, &mut Vec::new());
        let verdict = route(r.pools(), &parsed, &RouteOptions { limit: None, ..opts.clone() });
        let detail = route(r.pools(), &parsed, &RouteOptions { limit: None, detail: true, ..opts.clone() });
        let (mut interner, mut work) = (Interner::default(), Workspace::default());
        let interned = route_interned(&r, &parsed, &RouteOptions { limit: None, ..opts.clone() }, &mut interner, &mut work);
        let order = |e: &[agent_relay_sandbox_router::core::ranking::Ranked]| e.iter().map(|x| x.index).collect::<Vec<_>>();
        let full = order(&verdict.eligible);
        let k = limit.unwrap_or(full.len()).min(full.len());
        prop_assert_eq!(&full[..k], &fast[..], "hot path vs explained order");
        prop_assert_eq!(&verdict.eligible, &detail.eligible, "verdict vs detail mode");
        prop_assert_eq!(&detail.eligible[..], interned.eligible, "owned vs interned");
        prop_assert_eq!(verdict.rejected_count, detail.rejected.len());
        prop_assert_eq!(
            detail.rejected.iter().map(|p| p.index).collect::<Vec<_>>(),
            interned.rejected.iter().map(|p| p.index).collect::<Vec<_>>()
        );
        for (p, x) in detail.rejected.iter().zip(interned.rejected) {
            prop_assert!(!p.reasons.is_empty(), "a rejected pool has a reason");
            // The interned path decides requirements over the compact profiles: the same
            // reasons, in the same order, as the full check gives.
            let owned: Vec<&str> = p.reasons.iter().map(|y| y.reason.code()).collect();
            let kept: Vec<&str> = interner.reasons[x.start..x.end].iter().map(|y| y.reason.code()).collect();
            prop_assert_eq!(owned, kept, "owned vs interned reasons");
        }
        for (i, _) in &circuit {
            prop_assert!(!full.contains(i), "a pool whose circuit excludes it is never a candidate");
        }
        prop_assert_eq!(full.len() + verdict.rejected_count, n);
    }
}

/// Label texts as JSON.stringify writes them and as hostile callers could: objects with
/// string and non-string values, repeated keys, the reserved keys, escapes, not objects.
fn labels_text() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "team",
        "a",
        "b",
        "\\u0061",
        "é",
        "agent-relay-sbx-id",
        "agent-relay-sbx-fleet",
        "",
        "__proto__",
    ]);
    let value = prop::sample::select(vec![
        "\"x\"",
        "\"\"",
        "\"\\n\\u00e9\"",
        "1",
        "null",
        "true",
        "[]",
        "{}",
        "{\"$invalid\":\"function\"}",
    ]);
    prop_oneof![
        8 => prop::collection::vec((key, value), 0..6).prop_map(|entries| {
            let body: Vec<String> = entries.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", body.join(","))
        }),
        1 => prop::sample::select(vec!["null", "[]", "\"x\"", "5", "{", "", "{\"a\":\"b\"} x"]).prop_map(str::to_string),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The provision path's labels reader never answers differently from the general rule:
    /// when it accepts, the labels are the same; when the general rule refuses, so does it.
    /// (It may also defer on valid text the general rule accepts, such as a repeated key
    /// whose earlier value is not a string: the caller then asks the general rule.)
    #[test]
    fn labels_text_agrees_with_parse_labels(text in labels_text()) {
        use agent_relay_sandbox_router::core::request::{parse_labels, parse_labels_text};
        let general = serde_json::from_str::<Value>(&text).ok().map(|v| parse_labels(&v));
        match (parse_labels_text(&text), general) {
            (Some(fast), Some(Ok(slow))) => prop_assert_eq!(fast, slow),
            (Some(fast), other) => prop_assert!(false, "fast path accepted {text:?} as {fast:?}; general: {other:?}"),
            (None, _) => {}
        }
    }
}

#[test]
fn labels_text_reads_ordinary_labels_itself() {
    use agent_relay_sandbox_router::core::request::parse_labels_text;
    // must-fire: what JSON.stringify writes for ordinary labels is read by the fast path
    assert_eq!(
        parse_labels_text(r#"{"team":"a","requestId":"r-1","x":"\u00e9"}"#).map(|l| l.to_vec()),
        Some(vec![("requestId".into(), "r-1".into()), ("team".into(), "a".into()), ("x".into(), "é".into())])
    );
    assert_eq!(parse_labels_text("{}").map(|l| l.to_vec()), Some(vec![]));
    // must-not-fire: a non-string value, a reserved key, not an object: deferred
    assert_eq!(parse_labels_text(r#"{"a":1}"#), None);
    assert_eq!(parse_labels_text(r#"{"agent-relay-sbx-id":"x"}"#), None);
    assert_eq!(parse_labels_text("null"), None);
}
