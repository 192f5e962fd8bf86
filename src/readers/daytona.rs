//! Daytona: the organization's sandbox inventory, summed over cpu / memory / disk.
//!
//! `GET {base}/sandbox?limit=<pageSize, default 200>` with `Authorization: Bearer <key>`
//! (and `X-Daytona-Organization-ID` when configured), following whichever of the three
//! documented response shapes the server speaks:
//! - cursor shape `{items, nextCursor}` (SDK ≥ 0.180): follow `cursor=` until `nextCursor`
//!   is null (or empty);
//! - paginated shape `{items, total, page, totalPages}` (the deprecated `/sandbox/paginated`,
//!   and self-hosted servers that answer it on `/sandbox`): request `page=N+1` until
//!   `page ≥ totalPages`;
//! - legacy bare array (servers before 0.180): one page.
//!
//! Why sum every returned sandbox regardless of state? Daytona's own accounting counts
//! cpu/memory only in running-ish states and disk also in stopped/paused/archiving ones, and
//! those state lists have changed between releases; a reader that guesses wrong *under*-counts
//! and lets admission overshoot a quota. Summing all states (the list already omits
//! destroyed sandboxes) can only overestimate — e.g. a stopped sandbox's cpu still counts —
//! which makes admission conservative. This matches the cloud helper's semantics.
//!
//! Units: the API reports `cpu` in cores and `memory`/`disk` in GiB; measurements report
//! vCPU and MiB (GiB × 1024). Limits and demand are configured in the same units as the API
//! (GiB) and converted the same way.
//!
//! Only configured dimensions are measured. No cpu/memory/disk limit → `LIMIT_NOT_CONFIGURED`;
//! a limit without the pool's per-launch demand for that dimension → `DEMAND_NOT_CONFIGURED`;
//! both are decided before any request. (A `sandboxes` limit never gets here: Daytona has
//! no slot quota, and the options rule refuses it, `config::Kind::dimensions`.)
//!
//! Bodies are parsed with serde into structs holding only `cpu`, `memory`, `disk`; every
//! other field is skipped without allocation. A measured field that is missing, null,
//! negative or of the wrong type makes the whole read `MALFORMED` (a sandbox we cannot size
//! is not a sandbox of size zero).

use super::config::ReaderConfig;
use super::http::{Auth, Fetch, HttpFetch};
use super::list::{endpoint, parse_body, PageGuard};
use super::stamp::{collect, fleet_filter_json, parse_rfc3339_ms, Found};
use crate::core::capacity::{Measurement, ResourceMeasurement, UnknownReason};
use serde::Deserialize;

/// Default base URL: the one the Daytona adapter is given too.
pub const DEFAULT_BASE_URL: &str = crate::core::providers::DAYTONA_API_URL;
const MIB_PER_GIB: f64 = 1024.0;

/// A measured Daytona dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// vCPU.
    Cpu,
    /// MiB.
    Memory,
    /// MiB.
    Disk,
}

impl Dim {
    fn name(self) -> &'static str {
        match self {
            Dim::Cpu => "cpu",
            Dim::Memory => "memory",
            Dim::Disk => "disk",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Dim::Cpu => "vCPU",
            Dim::Memory | Dim::Disk => "MiB",
        }
    }

    /// Factor from the configured/API unit to the measured unit.
    fn scale(self) -> f64 {
        match self {
            Dim::Cpu => 1.0,
            Dim::Memory | Dim::Disk => MIB_PER_GIB,
        }
    }
}

/// What one read measures: `(dimension, limit, required)` in measured units.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// In cpu, memory, disk order.
    pub dims: Vec<(Dim, f64, f64)>,
}

/// Decides what to measure from the configuration, before any request.
pub fn plan(cfg: &ReaderConfig) -> Result<Plan, UnknownReason> {
    let configured = [
        (Dim::Cpu, cfg.limits.cpu, cfg.demand.cpu),
        (Dim::Memory, cfg.limits.memory, cfg.demand.memory),
        (Dim::Disk, cfg.limits.disk, cfg.demand.disk),
    ];
    let mut dims = Vec::with_capacity(3);
    for (dim, limit, demand) in configured {
        let Some(limit) = limit else { continue };
        let demand = demand.ok_or(UnknownReason::DemandNotConfigured)?;
        dims.push((dim, limit * dim.scale(), demand * dim.scale()));
    }
    if dims.is_empty() {
        return Err(UnknownReason::LimitNotConfigured);
    }
    Ok(Plan { dims })
}

/// One sandbox as the readers need it (every other field is skipped).
#[derive(Debug, Deserialize)]
struct Sandbox {
    cpu: Option<f64>,
    memory: Option<f64>,
    disk: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageObject {
    items: Vec<Sandbox>,
    #[serde(default)]
    next_cursor: Option<String>,
    #[serde(default)]
    page: Option<u64>,
    #[serde(default)]
    total_pages: Option<u64>,
}

/// What a parsed page says comes next.
#[derive(Debug, PartialEq)]
enum Next {
    Done,
    Cursor(String),
    Page(u64),
}

/// The query of one list page: `limit`, the caller's extra pairs, then where to continue
/// (`cursor` or `page`, per the shape the server answered with).
fn page_url(base: &reqwest::Url, limit: &str, extra: &[(&str, &str)], next: &Option<Next>) -> reqwest::Url {
    let mut url = base.clone();
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("limit", limit);
        for (k, v) in extra {
            q.append_pair(k, v);
        }
        match next {
            Some(Next::Cursor(c)) => {
                q.append_pair("cursor", c);
            }
            Some(Next::Page(p)) => {
                q.append_pair("page", &p.to_string());
            }
            _ => {}
        }
    }
    url
}

/// Running totals in API units (cores, GiB).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Totals {
    cpu: f64,
    memory: f64,
    disk: f64,
}

fn add(totals: &mut Totals, items: &[Sandbox], plan: &Plan) -> Result<(), UnknownReason> {
    let field = |v: Option<f64>| v.filter(|x| x.is_finite() && *x >= 0.0).ok_or(UnknownReason::Malformed);
    let (want_cpu, want_mem, want_disk) = (
        plan.dims.iter().any(|d| d.0 == Dim::Cpu),
        plan.dims.iter().any(|d| d.0 == Dim::Memory),
        plan.dims.iter().any(|d| d.0 == Dim::Disk),
    );
    for s in items {
        if want_cpu {
            totals.cpu += field(s.cpu)?;
        }
        if want_mem {
            totals.memory += field(s.memory)?;
        }
        if want_disk {
            totals.disk += field(s.disk)?;
        }
    }
    Ok(())
}

/// Parses one page in any of the three shapes, adds it to `totals`, and says what is next.
fn page(body: &[u8], totals: &mut Totals, plan: &Plan) -> Result<Next, UnknownReason> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => {
            let items: Vec<Sandbox> = parse_body(body)?;
            add(totals, &items, plan)?;
            Ok(Next::Done)
        }
        Some(b'{') => {
            let p: PageObject = parse_body(body)?;
            add(totals, &p.items, plan)?;
            Ok(match (p.next_cursor, p.page, p.total_pages) {
                (Some(c), _, _) if !c.is_empty() => Next::Cursor(c),
                (_, Some(page), Some(total)) if page < total => Next::Page(page + 1),
                _ => Next::Done,
            })
        }
        _ => Err(UnknownReason::Malformed),
    }
}

/// Reads the full inventory through `fetch` and measures it against `plan`.
pub async fn measure<F: Fetch>(cfg: &ReaderConfig, plan: &Plan, fetch: &mut F) -> Measurement {
    match sum(cfg, plan, fetch).await {
        Ok(t) => Measurement::Known(
            plan.dims
                .iter()
                .map(|&(dim, limit, required)| {
                    let used = match dim {
                        Dim::Cpu => t.cpu,
                        Dim::Memory => t.memory,
                        Dim::Disk => t.disk,
                    } * dim.scale();
                    ResourceMeasurement::new(dim.name(), used, limit, dim.unit(), required)
                })
                .collect(),
        ),
        Err(reason) => Measurement::Unknown(reason),
    }
}

async fn sum<F: Fetch>(cfg: &ReaderConfig, plan: &Plan, fetch: &mut F) -> Result<Totals, UnknownReason> {
    let limit = cfg.page_size().to_string();
    let base = endpoint(cfg, DEFAULT_BASE_URL, "/sandbox")?;
    let mut guard = PageGuard::new(cfg.max_pages);
    let mut totals = Totals::default();
    let mut next: Option<Next> = None;
    let mut last_reported: Option<u64> = None;
    loop {
        let url = page_url(&base, &limit, &[], &next);
        guard.before_fetch()?;
        let fetched = fetch.get(url).await?;
        match page(&fetched.body, &mut totals, plan)? {
            Next::Done => return Ok(totals),
            Next::Cursor(c) => {
                guard.cursor(&c)?;
                next = Some(Next::Cursor(c));
            }
            Next::Page(p) => {
                // A server that ignores `page` answers page 1 forever: that is a loop.
                let reported = p - 1;
                if last_reported.is_some_and(|l| reported <= l) {
                    return Err(UnknownReason::PageLimitExceeded);
                }
                last_reported = Some(reported);
                next = Some(Next::Page(p));
            }
        }
    }
}

/// Reads a Daytona organization's capacity (see the module docs).
pub async fn read(cfg: &ReaderConfig, api_key: &str) -> Measurement {
    let plan = match plan(cfg) {
        Ok(p) => p,
        Err(r) => return Measurement::Unknown(r),
    };
    let extra: Vec<(&'static str, &str)> =
        cfg.organization_id.as_deref().map(|o| ("x-daytona-organization-id", o)).into_iter().collect();
    let mut fetch = match HttpFetch::new(Auth::Bearer(api_key), &extra) {
        Ok(f) => f,
        Err(r) => return Measurement::Unknown(r),
    };
    measure(cfg, &plan, &mut fetch).await
}

/// One listed sandbox as a finder needs it: its id, labels and creation time.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    id: String,
    #[serde(default)]
    labels: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    created_at: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedPage {
    items: Vec<Listed>,
    #[serde(default)]
    next_cursor: Option<String>,
    #[serde(default)]
    page: Option<u64>,
    #[serde(default)]
    total_pages: Option<u64>,
}

fn collect_listed(out: &mut Vec<Found>, items: &[Listed], fleet: &str) -> Result<(), UnknownReason> {
    for s in items {
        let created = s.created_at.as_ref().and_then(serde_json::Value::as_str).and_then(parse_rfc3339_ms);
        collect(out, &s.id, s.labels.as_ref(), fleet, created)?;
    }
    Ok(())
}

/// Lists the organization's sandboxes stamped with `fleet` through `fetch`: `GET /sandbox`
/// with the `labels` filter (`{"agent-relay-sbx-fleet":"<fleet>"}`), in any of the three
/// page shapes, every item checked again for the whole stamp.
pub async fn find_with<F: Fetch>(cfg: &ReaderConfig, fleet: &str, fetch: &mut F) -> Result<Vec<Found>, UnknownReason> {
    let limit = cfg.page_size().to_string();
    let base = endpoint(cfg, DEFAULT_BASE_URL, "/sandbox")?;
    let filter = fleet_filter_json(fleet);
    let mut guard = PageGuard::new(cfg.max_pages);
    let mut out = Vec::new();
    let mut next: Option<Next> = None;
    let mut last_reported: Option<u64> = None;
    loop {
        let url = page_url(&base, &limit, &[("labels", &filter)], &next);
        guard.before_fetch()?;
        let fetched = fetch.get(url).await?;
        let step = match fetched.body.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[') => {
                let items: Vec<Listed> = parse_body(&fetched.body)?;
                collect_listed(&mut out, &items, fleet)?;
                Next::Done
            }
            Some(b'{') => {
                let p: ListedPage = parse_body(&fetched.body)?;
                collect_listed(&mut out, &p.items, fleet)?;
                match (p.next_cursor, p.page, p.total_pages) {
                    (Some(c), _, _) if !c.is_empty() => Next::Cursor(c),
                    (_, Some(page), Some(total)) if page < total => Next::Page(page + 1),
                    _ => Next::Done,
                }
            }
            _ => return Err(UnknownReason::Malformed),
        };
        match step {
            Next::Done => return Ok(out),
            Next::Cursor(c) => {
                guard.cursor(&c)?;
                next = Some(Next::Cursor(c));
            }
            Next::Page(p) => {
                let reported = p - 1;
                if last_reported.is_some_and(|l| reported <= l) {
                    return Err(UnknownReason::PageLimitExceeded);
                }
                last_reported = Some(reported);
                next = Some(Next::Page(p));
            }
        }
    }
}

/// [`find_with`] over HTTP with the organization's key.
pub async fn find(cfg: &ReaderConfig, api_key: &str, fleet: &str) -> Result<Vec<Found>, UnknownReason> {
    let extra: Vec<(&'static str, &str)> =
        cfg.organization_id.as_deref().map(|o| ("x-daytona-organization-id", o)).into_iter().collect();
    let mut fetch = HttpFetch::new(Auth::Bearer(api_key), &extra)?;
    find_with(cfg, fleet, &mut fetch).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readers::test_support::config;
    use crate::readers::test_support::{block_on, MemoryFetch};
    use serde_json::json;

    const BASE: &str = "http://h/api";

    fn cfg(extra: serde_json::Value) -> ReaderConfig {
        let mut v = json!({"baseUrl": BASE, "limits": {"cpu": 10, "memory": 20, "disk": 30},
                           "demand": {"cpu": 1, "memory": 2, "disk": 3}});
        if let serde_json::Value::Object(m) = extra {
            for (k, x) in m {
                v[k] = x;
            }
        }
        config("daytona", v)
    }

    fn run(cfg: &ReaderConfig, fetch: &mut MemoryFetch) -> Measurement {
        let plan = plan(cfg).unwrap();
        block_on(measure(cfg, &plan, fetch))
    }

    fn sb(cpu: f64, mem: f64, disk: f64, state: &str) -> serde_json::Value {
        json!({"id": "x", "organizationId": "o", "state": state, "cpu": cpu, "gpu": 0, "memory": mem,
               "disk": disk, "labels": {"k": "v"}, "createdAt": "2026-01-01T00:00:00Z"})
    }

    fn used(m: &Measurement) -> Vec<(String, f64, f64, f64)> {
        match m {
            Measurement::Known(rs) => rs.iter().map(|r| (r.resource.clone(), r.used, r.limit, r.required)).collect(),
            Measurement::Unknown(r) => panic!("unknown: {r:?}"),
        }
    }

    #[test]
    fn cursor_shape_is_followed_across_pages_and_converts_gib_to_mib() {
        let p1 = json!({"items": [sb(1.0, 1.0, 3.0, "started"), sb(2.0, 4.0, 10.0, "stopped")], "nextCursor": "c1"});
        let p2 = json!({"items": [sb(4.0, 8.0, 20.0, "archived")], "nextCursor": "c/2=?&"});
        let p3 = json!({"items": [], "nextCursor": null});
        let mut f = MemoryFetch::default()
            .page("http://h/api/sandbox?limit=200", &p1.to_string())
            .page("http://h/api/sandbox?limit=200&cursor=c1", &p2.to_string())
            .page("http://h/api/sandbox?limit=200&cursor=c%2F2%3D%3F%26", &p3.to_string());
        let m = run(&cfg(json!({})), &mut f);
        assert_eq!(
            used(&m),
            vec![
                ("cpu".into(), 7.0, 10.0, 1.0),
                ("memory".into(), 13.0 * 1024.0, 20.0 * 1024.0, 2.0 * 1024.0),
                ("disk".into(), 33.0 * 1024.0, 30.0 * 1024.0, 3.0 * 1024.0),
            ]
        );
        assert_eq!(f.log.len(), 3);
        if let Measurement::Known(rs) = &m {
            assert_eq!(rs[1].unit, "MiB");
            assert_eq!(rs[0].unit, "vCPU");
            assert_eq!(rs[2].headroom, -3.0 * 1024.0);
        }
    }

    #[test]
    fn paginated_shape_requests_the_next_page_until_total_pages() {
        let p = |n: u64, cpu: f64| {
            json!({"items": [sb(cpu, 1.0, 1.0, "started")], "total": 3, "page": n, "totalPages": 3}).to_string()
        };
        let mut f = MemoryFetch::default()
            .page("http://h/api/sandbox?limit=200", &p(1, 1.0))
            .page("http://h/api/sandbox?limit=200&page=2", &p(2, 2.0))
            .page("http://h/api/sandbox?limit=200&page=3", &p(3, 4.0));
        let m = run(&cfg(json!({})), &mut f);
        assert_eq!(used(&m)[0].1, 7.0);
        assert_eq!(f.log.len(), 3);
    }

    #[test]
    fn legacy_bare_array_is_a_single_page() {
        let body = json!([sb(1.0, 0.5, 1.0, "started"), sb(1.5, 0.25, 2.0, "error")]).to_string();
        let mut f = MemoryFetch::default().page("http://h/api/sandbox?limit=200", &format!("  \n{body}"));
        let m = run(&cfg(json!({})), &mut f);
        assert_eq!(used(&m)[0].1, 2.5);
        assert_eq!(used(&m)[1].1, 0.75 * 1024.0);
        assert_eq!(used(&m)[2].1, 3.0 * 1024.0);
        assert_eq!(f.log.len(), 1);
    }

    #[test]
    fn page_size_is_configurable() {
        let c = cfg(json!({"pageSize": 50}));
        let mut f = MemoryFetch::default().page("http://h/api/sandbox?limit=50", "[]");
        assert_eq!(used(&run(&c, &mut f))[0].1, 0.0);
    }

    #[test]
    fn wrong_field_types_are_malformed() {
        for body in [
            json!({"items": [{"cpu": "2", "memory": 1, "disk": 1}], "nextCursor": null}),
            json!({"items": [{"cpu": null, "memory": 1, "disk": 1}]}),
            json!({"items": [{"memory": 1, "disk": 1}]}),
            json!({"items": [{"cpu": -1, "memory": 1, "disk": 1}]}),
            json!({"items": {"cpu": 1}}),
            json!({"items": [1, 2]}),
            json!({"items": [], "nextCursor": 5}),
            json!({"items": [], "page": "1", "totalPages": 2}),
            json!({"data": []}),
            json!("items"),
            json!(null),
        ] {
            let mut f = MemoryFetch::default().page("http://h/api/sandbox?limit=200", &body.to_string());
            assert_eq!(run(&cfg(json!({})), &mut f), Measurement::Unknown(UnknownReason::Malformed), "{body}");
        }
        for raw in ["", "not json", "{\"items\": [", "<html>"] {
            let mut f = MemoryFetch::default().page("http://h/api/sandbox?limit=200", raw);
            assert_eq!(run(&cfg(json!({})), &mut f), Measurement::Unknown(UnknownReason::Malformed), "{raw}");
        }
    }

    #[test]
    fn unmeasured_fields_may_be_missing() {
        // Only cpu is configured: a sandbox without memory/disk is still sized.
        let c = config("daytona", json!({"baseUrl": BASE, "limits": {"cpu": 4}, "demand": {"cpu": 1}}));
        let mut f = MemoryFetch::default().page("http://h/api/sandbox?limit=200", r#"[{"cpu": 2}]"#);
        assert_eq!(used(&run(&c, &mut f)), vec![("cpu".into(), 2.0, 4.0, 1.0)]);
    }

    #[test]
    fn must_fire_a_repeated_cursor_is_a_loop() {
        let p1 = json!({"items": [], "nextCursor": "a"}).to_string();
        let p2 = json!({"items": [], "nextCursor": "b"}).to_string();
        let p3 = json!({"items": [], "nextCursor": "a"}).to_string();
        let mut f = MemoryFetch::default()
            .page("http://h/api/sandbox?limit=200", &p1)
            .page("http://h/api/sandbox?limit=200&cursor=a", &p2)
            .page("http://h/api/sandbox?limit=200&cursor=b", &p3);
        assert_eq!(run(&cfg(json!({})), &mut f), Measurement::Unknown(UnknownReason::PageLimitExceeded));
        assert_eq!(f.log.len(), 3);
    }

    #[test]
    fn must_fire_a_server_that_ignores_page_is_a_loop() {
        let body = json!({"items": [], "total": 10, "page": 1, "totalPages": 10}).to_string();
        let mut f = MemoryFetch { fallback: Some(Box::new(move |_| Ok(fetched(&body)))), ..Default::default() };
        assert_eq!(run(&cfg(json!({})), &mut f), Measurement::Unknown(UnknownReason::PageLimitExceeded));
        assert_eq!(f.log.len(), 2);
    }

    fn fetched(body: &str) -> crate::readers::http::Fetched {
        crate::readers::http::Fetched { body: body.as_bytes().to_vec(), headers: Default::default() }
    }

    #[test]
    fn must_fire_an_endless_paginator_stops_at_max_pages() {
        let counter = std::sync::atomic::AtomicU64::new(0);
        let mut f = MemoryFetch {
            fallback: Some(Box::new(move |_| {
                let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Endless in effect, yet bounded: a broken page limit fails this test instead of hanging it.
                if n >= 1000 {
                    return Err(UnknownReason::ReadFailed);
                }
                Ok(fetched(&json!({"items": [], "nextCursor": format!("c{n}")}).to_string()))
            })),
            ..Default::default()
        };
        assert_eq!(run(&cfg(json!({"maxPages": 5})), &mut f), Measurement::Unknown(UnknownReason::PageLimitExceeded));
        assert_eq!(f.log.len(), 5);
    }

    #[test]
    fn must_not_fire_exactly_max_pages_pages_is_fine() {
        let counter = std::sync::atomic::AtomicU64::new(0);
        let mut f = MemoryFetch {
            fallback: Some(Box::new(move |_| {
                let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let next = if n < 4 { json!(format!("c{n}")) } else { json!(null) };
                Ok(fetched(&json!({"items": [sb(1.0, 1.0, 1.0, "started")], "nextCursor": next}).to_string()))
            })),
            ..Default::default()
        };
        assert_eq!(used(&run(&cfg(json!({"maxPages": 5})), &mut f))[0].1, 5.0);
        assert_eq!(f.log.len(), 5);
    }

    #[test]
    fn fetch_failures_pass_through_as_reasons() {
        for reason in [UnknownReason::Unauthorized, UnknownReason::RateLimited, UnknownReason::ReadFailed] {
            let mut f = MemoryFetch { fallback: Some(Box::new(move |_| Err(reason))), ..Default::default() };
            assert_eq!(run(&cfg(json!({})), &mut f), Measurement::Unknown(reason));
        }
    }

    #[test]
    fn plan_is_decided_before_any_request() {
        let p = |v: serde_json::Value| plan(&config("daytona", v));
        assert_eq!(p(json!({})), Err(UnknownReason::LimitNotConfigured));
        assert_eq!(p(json!({"demand": {"cpu": 1}})), Err(UnknownReason::LimitNotConfigured));
        assert_eq!(p(json!({"limits": {"cpu": 10}})), Err(UnknownReason::DemandNotConfigured));
        assert_eq!(
            p(json!({"limits": {"cpu": 10, "memory": 4}, "demand": {"cpu": 1}})),
            Err(UnknownReason::DemandNotConfigured)
        );
        assert_eq!(
            p(json!({"limits": {"memory": 4}, "demand": {"memory": 0.5}})),
            Ok(Plan { dims: vec![(Dim::Memory, 4096.0, 512.0)] })
        );
        // read() itself refuses before building any request.
        let c = config("daytona", json!({"baseUrl": "http://127.0.0.1:9/"}));
        assert_eq!(block_on(read(&c, "k")), Measurement::Unknown(UnknownReason::LimitNotConfigured));
    }

    #[test]
    fn ten_thousand_sandboxes_parse_quickly() {
        let items: Vec<_> = (0..10_000).map(|i| sb(1.0, 2.0, (i % 7) as f64, "started")).collect();
        let body = json!({"items": items, "nextCursor": null}).to_string();
        let mut f = MemoryFetch::default().page("http://h/api/sandbox?limit=200", &body);
        let t = std::time::Instant::now();
        let m = run(&cfg(json!({})), &mut f);
        assert_eq!(used(&m)[0].1, 10_000.0);
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "{:?}", t.elapsed());
    }

    #[test]
    fn must_not_fire_an_empty_next_cursor_ends_pagination() {
        let body = json!({"items": [sb(1.0, 1.0, 1.0, "started")], "nextCursor": ""}).to_string();
        let mut f = MemoryFetch::default().page("http://h/api/sandbox?limit=200", &body);
        assert_eq!(used(&run(&cfg(json!({})), &mut f))[0].1, 1.0);
        assert_eq!(f.log.len(), 1);
    }

    #[test]
    fn finder_filters_by_fleet_follows_cursors_and_rechecks_every_item() {
        let id = |n: u8| format!("sbx_{}", format!("{n:x}").repeat(32));
        let item = |pid: &str, labels: serde_json::Value| json!({"id": pid, "labels": labels, "createdAt": "1970-01-01T00:00:01Z", "cpu": 1});
        let p1 = json!({"items": [
            item("a", json!({"agent-relay-sbx-fleet": "f", "agent-relay-sbx-id": id(1)})),
            item("b", json!({"agent-relay-sbx-fleet": "other", "agent-relay-sbx-id": id(2)})),
            item("c", json!({"k": "v"}))], "nextCursor": "c1"});
        let p2 = json!({"items": [item("d", json!({"agent-relay-sbx-fleet": "f", "agent-relay-sbx-id": id(3)}))], "nextCursor": null});
        let q = "limit=200&labels=%7B%22agent-relay-sbx-fleet%22%3A%22f%22%7D";
        let mut f = MemoryFetch::default()
            .page(&format!("http://h/api/sandbox?{q}"), &p1.to_string())
            .page(&format!("http://h/api/sandbox?{q}&cursor=c1"), &p2.to_string());
        let found = block_on(find_with(&cfg(json!({})), "f", &mut f)).unwrap();
        assert_eq!(
            found
                .iter()
                .map(|x| (x.provider_sandbox_id.as_str(), x.sandbox_id.clone(), x.created_at_ms))
                .collect::<Vec<_>>(),
            vec![("a", id(1), Some(1000.0)), ("d", id(3), Some(1000.0))]
        );
    }

    #[test]
    fn finder_reads_the_legacy_array_and_paginated_shapes() {
        let id = format!("sbx_{}", "a".repeat(32));
        let it = json!({"id": "z", "labels": {"agent-relay-sbx-fleet": "f", "agent-relay-sbx-id": id}});
        let q = "limit=200&labels=%7B%22agent-relay-sbx-fleet%22%3A%22f%22%7D";
        let mut f = MemoryFetch::default().page(&format!("http://h/api/sandbox?{q}"), &json!([it]).to_string());
        assert_eq!(block_on(find_with(&cfg(json!({})), "f", &mut f)).unwrap().len(), 1);
        let mut f = MemoryFetch::default()
            .page(&format!("http://h/api/sandbox?{q}"), &json!({"items": [it], "page": 1, "totalPages": 2}).to_string())
            .page(
                &format!("http://h/api/sandbox?{q}&page=2"),
                &json!({"items": [it], "page": 2, "totalPages": 2}).to_string(),
            );
        assert_eq!(block_on(find_with(&cfg(json!({})), "f", &mut f)).unwrap().len(), 2);
    }
}
