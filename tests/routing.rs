//! Routing decisions end to end over the core (no Node): filters, ranking, explain.

use agent_relay_sandbox_router::core::explain::{compact_size, interned_summary, summary, write_compact, NONE};
use agent_relay_sandbox_router::core::pool::Pool;
use agent_relay_sandbox_router::core::reasons::Reason;
use agent_relay_sandbox_router::core::registry::{route, route_interned, Registry, RouteOptions, Workspace};
use agent_relay_sandbox_router::core::request::parse_request;
use agent_relay_sandbox_router::core::requirements::Interner;
use serde_json::{json, Value};

fn signals(cost: f64, cold: f64, ready: f64, rate: f64) -> Value {
    json!({"estimatedCost": cost, "coldStartLatencyMs": cold, "readyLatencyMs": ready,
           "completionWithinBudgetRate": rate, "available": true})
}

fn reg(pools: Vec<(&str, Value, Value)>) -> Registry {
    let mut r = Registry::default();
    for (id, caps, sig) in pools {
        r.add(Pool::from_json(&json!({"id": id, "capabilities": caps, "signals": sig}), false).unwrap()).unwrap();
    }
    r
}

fn ids(r: &Registry, req: Value) -> Vec<String> {
    route(r.pools(), &parse_request(&req).unwrap(), &RouteOptions::default())
        .eligible
        .into_iter()
        .map(|x| r.pools()[x.index].id.to_string())
        .collect()
}

#[test]
fn each_strategy_orders_by_its_dimension() {
    let r = reg(vec![
        ("cheap", json!({}), signals(0.01, 900.0, 9000.0, 0.90)),
        ("fast", json!({}), signals(0.50, 100.0, 1000.0, 0.95)),
        ("solid", json!({}), signals(0.30, 500.0, 5000.0, 0.999)),
    ]);
    assert_eq!(ids(&r, json!({"routing": {"strategy": "cost"}})), ["cheap", "solid", "fast"]);
    assert_eq!(ids(&r, json!({"routing": {"strategy": "latency"}})), ["fast", "solid", "cheap"]);
    assert_eq!(ids(&r, json!({"routing": {"strategy": "reliability"}})), ["solid", "fast", "cheap"]);
}

#[test]
fn balanced_uses_35_25_40_weights() {
    // a: best cost only (0.35); b: best latency only (0.25); c: best reliability only (0.40).
    let r = reg(vec![
        ("a", json!({}), signals(0.0, 0.0, 100.0, 0.0)),
        ("b", json!({}), signals(1.0, 0.0, 0.0, 0.0)),
        ("c", json!({}), signals(1.0, 0.0, 100.0, 1.0)),
    ]);
    let req = parse_request(&json!({})).unwrap();
    let d = route(r.pools(), &req, &RouteOptions::default());
    let scores: Vec<(String, f64)> = d.eligible.iter().map(|x| (r.pools()[x.index].id.to_string(), x.score)).collect();
    assert_eq!(scores[0].0, "c");
    assert!((scores[0].1 - 0.40).abs() < 1e-12);
    assert_eq!(scores[1].0, "a");
    assert!((scores[1].1 - 0.35).abs() < 1e-12);
    assert_eq!(scores[2].0, "b");
    assert!((scores[2].1 - 0.25).abs() < 1e-12);
}

#[test]
fn ties_break_by_provider_id_bytes_not_registration() {
    let r = reg(vec![
        ("zeta", json!({}), signals(0.1, 1.0, 1.0, 0.9)),
        ("alpha", json!({}), signals(0.1, 1.0, 1.0, 0.9)),
        ("beta", json!({}), signals(0.1, 1.0, 1.0, 0.9)),
    ]);
    assert_eq!(ids(&r, json!({})), ["alpha", "beta", "zeta"]);
    let d = route(r.pools(), &parse_request(&json!({})).unwrap(), &RouteOptions::default());
    assert!(d.eligible.iter().all(|x| x.tie_break));
}

#[test]
fn dimension_without_spread_favours_no_one() {
    let r = reg(vec![("a", json!({}), signals(0.5, 1.0, 10.0, 0.9)), ("b", json!({}), signals(0.5, 1.0, 20.0, 0.9))]);
    let d = route(r.pools(), &parse_request(&json!({})).unwrap(), &RouteOptions::default());
    assert_eq!(r.pools()[d.eligible[0].index].id, "a");
    assert_eq!(d.eligible[0].cost.normalized, d.eligible[1].cost.normalized);
    assert!(!d.eligible[0].tie_break);
}

#[test]
fn region_preference_tiers_outrank_strategy_and_required_rejects() {
    let r = reg(vec![
        ("us-cheap", json!({"regions": ["us-east"]}), signals(0.01, 1.0, 1.0, 0.99)),
        ("eu-dear", json!({"regions": ["eu-west"]}), signals(0.90, 1.0, 1.0, 0.99)),
        ("nowhere", json!({}), signals(0.00, 1.0, 1.0, 0.99)),
    ]);
    let pref = json!({"region": {"preferred": ["eu-west", "us-east"]}, "routing": {"strategy": "cost"}});
    assert_eq!(ids(&r, pref), ["eu-dear", "us-cheap", "nowhere"]);
    let req = json!({"region": {"preferred": ["eu-west"], "required": true}});
    assert_eq!(ids(&r, req), ["eu-dear"]);
}

#[test]
fn invalid_signals_make_the_pool_ineligible_not_the_request() {
    let r = reg(vec![
        (
            "bad",
            json!({}),
            json!({"estimatedCost": -1, "coldStartLatencyMs": 1, "readyLatencyMs": 1,
                                  "completionWithinBudgetRate": 0.5, "available": true}),
        ),
        ("rate", json!({}), signals(0.1, 1.0, 1.0, 1.5)),
        ("good", json!({}), signals(0.1, 1.0, 1.0, 0.5)),
    ]);
    let req = parse_request(&json!({})).unwrap();
    let d = route(r.pools(), &req, &RouteOptions { detail: true, ..RouteOptions::default() });
    assert_eq!(d.eligible.len(), 1);
    let codes: Vec<&str> = d.rejected.iter().map(|x| x.reasons[0].reason.code()).collect();
    assert_eq!(codes, ["INVALID_SIGNALS", "INVALID_SIGNALS"]);
}

#[test]
fn latency_budget_uses_the_objective() {
    let r = reg(vec![("p", json!({}), signals(0.1, 100.0, 5000.0, 0.9))]);
    let ready = json!({"requires": {"timeout": {"maxReadyLatencyMs": 1000}}});
    assert!(ids(&r, ready).is_empty());
    let cold = json!({"requires": {"timeout": {"maxReadyLatencyMs": 1000}}, "routing": {"latencyObjective": "cold"}});
    assert_eq!(ids(&r, cold), ["p"]);
}

#[test]
fn unavailable_pool_is_rejected_after_requirements() {
    let mut s = signals(0.1, 1.0, 1.0, 0.9);
    s["available"] = json!(false);
    let r = reg(vec![("p", json!({}), s)]);
    let req = parse_request(&json!({"requires": {"requiredCapabilities": ["pty"]}})).unwrap();
    let d = route(r.pools(), &req, &RouteOptions { detail: true, ..RouteOptions::default() });
    // Requirements fail first; operational signals are not consulted for that pool.
    assert_eq!(d.rejected[0].reasons.len(), 1);
    assert_eq!(d.rejected[0].reasons[0].reason.code(), "REQUIRED_CAPABILITY_MISSING");
    let d = route(
        r.pools(),
        &parse_request(&json!({})).unwrap(),
        &RouteOptions { detail: true, ..RouteOptions::default() },
    );
    assert_eq!(d.rejected[0].reasons[0].reason.code(), "UNAVAILABLE");
}

#[test]
fn explain_summary_counts_reasons_kubernetes_style() {
    let r = reg(vec![
        ("a", json!({"regions": ["us-east"], "resources": {"cpu": 8}}), signals(0.1, 1.0, 1.0, 0.9)),
        ("b", json!({"regions": ["us-east"], "resources": {"cpu": 8}}), signals(0.1, 1.0, 1.0, 0.9)),
        (
            "c",
            json!({"supported": ["pty"], "regions": ["us-east"], "resources": {"cpu": 8}}),
            signals(0.1, 1.0, 1.0, 0.9),
        ),
        (
            "d",
            json!({"supported": ["pty"], "regions": ["eu-west"], "resources": {"cpu": 2}}),
            signals(0.1, 1.0, 1.0, 0.9),
        ),
        ("e", json!({"regions": ["eu-west"], "resources": {"cpu": 8}}), signals(0.1, 1.0, 1.0, 0.9)),
    ]);
    let req = parse_request(&json!({"requires": {"requiredCapabilities": ["pty"]},
        "region": {"preferred": ["eu-west"], "required": true}, "resources": {"cpu": 4}}))
    .unwrap();
    let d = route(r.pools(), &req, &RouteOptions { detail: true, ..RouteOptions::default() });
    assert_eq!(
        summary(d.eligible.len(), d.total, &d.rejected),
        "0/5 providers eligible: 3 missing capability pty, 3 region not in [eu-west], 1 insufficient cpu"
    );
    let d_reasons = &d.rejected[3].reasons;
    assert_eq!(d_reasons[0].reason.code(), "RESOURCES_INSUFFICIENT");
    assert_eq!(d_reasons[0].detail, "cpu 4 > 2");
}

#[test]
fn compact_layout_carries_ranks_breakdowns_and_reasons_by_index() {
    let r = reg(vec![
        ("b", json!({"regions": ["eu-west"]}), signals(0.2, 1.0, 10.0, 0.9)),
        ("a", json!({"supported": ["pty"], "regions": ["us-east"]}), signals(0.1, 1.0, 20.0, 0.8)),
        ("c", json!({"regions": ["eu-west"]}), signals(0.1, 1.0, 20.0, 0.8)),
    ]);
    let req = parse_request(&json!({"requires": {"forbiddenCapabilities": ["pty"]},
        "region": {"preferred": ["eu-west"]}, "routing": {"strategy": "cost"}}))
    .unwrap();
    let (mut texts, mut work) = (Interner::default(), Workspace::default());
    let d = route_interned(&r, &req, &RouteOptions::default(), &mut texts, &mut work);
    let (ni, nf) = compact_size(&d);
    assert_eq!((ni, nf), (2 * 4 + 2 + 2, 2 * 11));
    // Too small: nothing written, the sizes reported.
    let w = write_compact(&d, &texts, &mut [0; 3], &mut [0.0; 22]);
    assert!(!w.fits);
    assert_eq!((w.ints, w.floats), (ni, nf));
    let (mut ints, mut floats) = (vec![7u32; ni], vec![-1.0; nf]);
    let w = write_compact(&d, &texts, &mut ints, &mut floats);
    assert!(w.fits);
    // c (cost 0.1) before b (0.2), both tier 0; no capacity order; no tie.
    assert_eq!(&ints[..8], &[2, 0, NONE, 0, 0, 0, NONE, 0]);
    assert_eq!(&floats[..7], &[1.0, 0.1, 1.0, 20.0, 0.0, 0.8, 0.0]);
    // Declared and observed side by side: NaN when observed signals are not blended in.
    assert!(floats[7..11].iter().all(|x| x.is_nan()));
    assert_eq!(&ints[8..], &[1, 1, Reason::ForbiddenCapabilityPresent.index(), 0]);
    assert_eq!(texts.details.as_slice(), ["pty"]);
    assert_eq!(interned_summary(&d, &texts), "2/3 providers eligible: 1 forbidden capability pty");
}

#[test]
fn interned_decision_equals_the_owned_one() {
    let r = reg(vec![
        ("a", json!({"regions": ["us-east"], "resources": {"cpu": 2}}), signals(0.1, 1.0, 1.0, 0.9)),
        ("b", json!({"supported": ["pty"], "regions": ["us-east"]}), signals(0.1, 1.0, 1.0, 0.9)),
        ("c", json!({"regions": ["eu-west"], "resources": {"cpu": 8}}), signals(0.1, 1.0, 1.0, 0.9)),
    ]);
    let req = parse_request(&json!({"requires": {"requiredCapabilities": ["pty"]},
        "region": {"preferred": ["eu-west"], "required": true}, "resources": {"cpu": 4}}))
    .unwrap();
    let owned = route(r.pools(), &req, &RouteOptions { detail: true, ..RouteOptions::default() });
    let (mut interner, mut work) = (Interner::default(), Workspace::default());
    // A reused interner and workspace (a previous, different explanation in them) give the
    // same answer.
    route_interned(
        &r,
        &parse_request(&json!({"providerId": "zz"})).unwrap(),
        &RouteOptions::default(),
        &mut interner,
        &mut work,
    );
    let interned = route_interned(&r, &req, &RouteOptions::default(), &mut interner, &mut work);
    assert_eq!(owned.eligible, interned.eligible);
    assert_eq!(summary(owned.eligible.len(), owned.total, &owned.rejected), interned_summary(&interned, &interner));
    let texts = |i: usize| -> Vec<(&str, &str)> {
        let x = interned.rejected[i];
        interner.reasons[x.start..x.end].iter().map(|y| (y.reason.code(), interner.details.get(y.detail))).collect()
    };
    for (i, o) in owned.rejected.iter().enumerate() {
        assert_eq!(o.index, interned.rejected[i].index);
        let want: Vec<(&str, &str)> = o.reasons.iter().map(|y| (y.reason.code(), y.detail.as_str())).collect();
        assert_eq!(want, texts(i));
    }
}

#[test]
fn exact_provider_constraint_selects_only_that_pool() {
    let r = reg(vec![("a", json!({}), signals(0.1, 1.0, 1.0, 0.9)), ("b", json!({}), signals(0.0, 1.0, 1.0, 0.9))]);
    assert_eq!(ids(&r, json!({"providerId": "a"})), ["a"]);
    assert_eq!(ids(&r, json!({})), ["b", "a"]);
}

#[test]
fn regions_beyond_the_64_interned_bits_still_route_exactly() {
    use agent_relay_sandbox_router::core::registry::route_order;
    let mut r = Registry::default();
    for i in 0..70 {
        let pool = json!({"id": format!("p{i:02}"), "capabilities": {"regions": [format!("region-{i}")]},
                          "signals": signals(i as f64, 1.0, 1.0, 0.9)});
        r.add(Pool::from_json(&pool, false).unwrap()).unwrap();
    }
    for target in [3, 64, 69] {
        let req =
            parse_request(&json!({"region": {"preferred": [format!("region-{target}")], "required": true}})).unwrap();
        let order = route_order(&r, &req, &RouteOptions::default(), &mut Vec::new());
        assert_eq!(order, vec![target], "hot path, region-{target}");
        let d = route(r.pools(), &req, &RouteOptions::default());
        assert_eq!(d.eligible.iter().map(|x| x.index).collect::<Vec<_>>(), vec![target], "explained path");
        let pref = parse_request(
            &json!({"region": {"preferred": [format!("region-{target}")]}, "routing": {"strategy": "cost"}}),
        )
        .unwrap();
        assert_eq!(
            route_order(&r, &pref, &RouteOptions { limit: Some(2), ..RouteOptions::default() }, &mut Vec::new())[0],
            target
        );
    }
}
