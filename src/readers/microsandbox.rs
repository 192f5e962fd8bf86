//! Microsandbox (hosted): every sandbox in the account, counted against slots.
//!
//! `GET {base}/v1/sandboxes?limit=100` with `Authorization: Bearer <key>`, following
//! `next_cursor` (as `cursor=`) while `has_more` is true. Body:
//! `{"data": [...], "has_more": bool, "next_cursor": string|null}`.
//!
//! Why all states? The API has no state filter and the account's limit is on sandboxes that
//! exist (created, stopped and failed ones included), so the conservative reading counts
//! every listed sandbox against `limits.sandboxes`. `has_more: true` without a cursor is
//! `MALFORMED` (we could not finish the count); a response without `has_more` continues
//! only while a cursor is present.

use super::config::ReaderConfig;
use super::http::{Auth, Fetch, HttpFetch};
use super::list::{endpoint, parse_body, PageGuard};
use super::slots::{slot_reader, slots_or_unknown};
use super::stamp::{collect, fleet_filter_json, parse_rfc3339_ms, Found};
use crate::core::capacity::{Measurement, UnknownReason};
use serde::Deserialize;

/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.microsandbox.dev";

#[derive(Debug, Deserialize)]
struct Sandbox {
    #[allow(dead_code, reason = "parsed to check the item's shape")]
    id: String,
}

#[derive(Debug, Deserialize)]
struct Page {
    data: Vec<Sandbox>,
    #[serde(default)]
    has_more: Option<bool>,
    #[serde(default)]
    next_cursor: Option<String>,
}

/// Counts every sandbox through `fetch` and measures them against `limit`.
pub async fn measure<F: Fetch>(cfg: &ReaderConfig, limit: f64, required: f64, fetch: &mut F) -> Measurement {
    slots_or_unknown(count(cfg, fetch).await, limit, required)
}

async fn count<F: Fetch>(cfg: &ReaderConfig, fetch: &mut F) -> Result<usize, UnknownReason> {
    let limit = cfg.page_size().to_string();
    let base = endpoint(cfg, DEFAULT_BASE_URL, "/v1/sandboxes")?;
    let mut guard = PageGuard::new(cfg.max_pages);
    let mut cursor: Option<String> = None;
    let mut total = 0usize;
    loop {
        let mut url = base.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("limit", &limit);
            if let Some(c) = &cursor {
                q.append_pair("cursor", c);
            }
        }
        guard.before_fetch()?;
        let fetched = fetch.get(url).await?;
        let page: Page = parse_body(&fetched.body)?;
        total += page.data.len();
        let next = page.next_cursor.filter(|c| !c.is_empty());
        match (page.has_more, next) {
            (Some(false), _) | (None, None) => return Ok(total),
            (Some(true), None) => return Err(UnknownReason::Malformed),
            (_, Some(c)) => {
                guard.cursor(&c)?;
                cursor = Some(c);
            }
        }
    }
}

/// Reads a Microsandbox account's sandbox count (see the module docs).
pub async fn read(cfg: &ReaderConfig, api_key: &str) -> Measurement {
    match slot_reader(cfg, Auth::Bearer(api_key)) {
        Ok((limit, required, mut fetch)) => measure(cfg, limit, required, &mut fetch).await,
        Err(m) => m,
    }
}

#[derive(Debug, Deserialize)]
struct ListedSpec {
    #[serde(default)]
    labels: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One listed sandbox as a finder needs it (`spec` may be null).
#[derive(Debug, Deserialize)]
struct Listed {
    id: String,
    #[serde(default)]
    created_at: Option<serde_json::Value>,
    #[serde(default)]
    spec: Option<ListedSpec>,
}

#[derive(Debug, Deserialize)]
struct ListedPage {
    data: Vec<Listed>,
    #[serde(default)]
    has_more: Option<bool>,
    #[serde(default)]
    next_cursor: Option<String>,
}

/// Lists the account's sandboxes stamped with `fleet` through `fetch`:
/// `GET /v1/sandboxes?labels={"agent-relay-sbx-fleet":"<fleet>"}`, following `next_cursor`;
/// every item's `spec.labels` is checked again for the whole stamp.
pub async fn find_with<F: Fetch>(cfg: &ReaderConfig, fleet: &str, fetch: &mut F) -> Result<Vec<Found>, UnknownReason> {
    let limit = cfg.page_size().to_string();
    let base = endpoint(cfg, DEFAULT_BASE_URL, "/v1/sandboxes")?;
    let filter = fleet_filter_json(fleet);
    let mut guard = PageGuard::new(cfg.max_pages);
    let mut cursor: Option<String> = None;
    let mut out = Vec::new();
    loop {
        let mut url = base.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("limit", &limit).append_pair("labels", &filter);
            if let Some(c) = &cursor {
                q.append_pair("cursor", c);
            }
        }
        guard.before_fetch()?;
        let fetched = fetch.get(url).await?;
        let page: ListedPage = parse_body(&fetched.body)?;
        for s in &page.data {
            let created = s.created_at.as_ref().and_then(serde_json::Value::as_str).and_then(parse_rfc3339_ms);
            collect(&mut out, &s.id, s.spec.as_ref().and_then(|sp| sp.labels.as_ref()), fleet, created)?;
        }
        let next = page.next_cursor.filter(|c| !c.is_empty());
        match (page.has_more, next) {
            (Some(false), _) | (None, None) => return Ok(out),
            (Some(true), None) => return Err(UnknownReason::Malformed),
            (_, Some(c)) => {
                guard.cursor(&c)?;
                cursor = Some(c);
            }
        }
    }
}

/// [`find_with`] over HTTP with the account's key.
pub async fn find(cfg: &ReaderConfig, api_key: &str, fleet: &str) -> Result<Vec<Found>, UnknownReason> {
    let mut fetch = HttpFetch::new(Auth::Bearer(api_key), &[])?;
    find_with(cfg, fleet, &mut fetch).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readers::test_support::config;
    use crate::readers::test_support::{block_on, MemoryFetch};
    use serde_json::json;

    fn cfg() -> ReaderConfig {
        config("microsandbox", json!({"baseUrl": "http://h", "limits": {"sandboxes": 10}, "demand": {"sandboxes": 2}}))
    }

    fn page(n: usize, has_more: bool, next: Option<&str>) -> String {
        let data: Vec<_> = (0..n)
            .map(|i| {
                json!({"id": format!("u{i}"), "org_id": "o", "name": "x", "status": "stopped", "ephemeral": false,
                            "created_at": "2026-01-01T00:00:00Z", "spec": null})
            })
            .collect();
        json!({"data": data, "has_more": has_more, "next_cursor": next}).to_string()
    }

    #[test]
    fn follows_next_cursor_while_has_more() {
        let mut f = MemoryFetch::default()
            .page("http://h/v1/sandboxes?limit=100", &page(2, true, Some("c1")))
            .page("http://h/v1/sandboxes?limit=100&cursor=c1", &page(3, false, None));
        let m = block_on(measure(&cfg(), 10.0, 2.0, &mut f));
        let Measurement::Known(rs) = m else { panic!("{m:?}") };
        assert_eq!((rs[0].used, rs[0].limit, rs[0].required), (5.0, 10.0, 2.0));
    }

    #[test]
    fn must_fire_has_more_without_a_cursor_is_malformed() {
        let mut f = MemoryFetch::default().page("http://h/v1/sandboxes?limit=100", &page(1, true, None));
        assert_eq!(block_on(measure(&cfg(), 10.0, 1.0, &mut f)), Measurement::Unknown(UnknownReason::Malformed));
    }

    #[test]
    fn must_not_fire_has_more_false_with_a_stale_cursor_ends() {
        let mut f = MemoryFetch::default().page("http://h/v1/sandboxes?limit=100", &page(1, false, Some("stale")));
        assert!(matches!(block_on(measure(&cfg(), 10.0, 1.0, &mut f)), Measurement::Known(_)));
    }

    #[test]
    fn wrong_shapes_are_malformed() {
        for body in [
            r#"[]"#,
            r#"{"data": {}}"#,
            r#"{"data": [{"id": 1}]}"#,
            r#"{"data": [], "has_more": "no"}"#,
            r#"{"data": [], "next_cursor": 3}"#,
        ] {
            let mut f = MemoryFetch::default().page("http://h/v1/sandboxes?limit=100", body);
            assert_eq!(
                block_on(measure(&cfg(), 10.0, 1.0, &mut f)),
                Measurement::Unknown(UnknownReason::Malformed),
                "{body}"
            );
        }
    }

    #[test]
    fn must_fire_a_repeated_cursor_is_a_loop() {
        let mut f = MemoryFetch::default()
            .page("http://h/v1/sandboxes?limit=100", &page(1, true, Some("x")))
            .page("http://h/v1/sandboxes?limit=100&cursor=x", &page(1, true, Some("x")));
        assert_eq!(
            block_on(measure(&cfg(), 10.0, 1.0, &mut f)),
            Measurement::Unknown(UnknownReason::PageLimitExceeded)
        );
    }

    #[test]
    fn finder_reads_spec_labels_across_cursor_pages() {
        let id = format!("sbx_{}", "c".repeat(32));
        let stamped = json!({"agent-relay-sbx-fleet": "f", "agent-relay-sbx-id": id});
        let p1 = json!({"data": [
            {"id": "u1", "created_at": "1970-01-01T00:00:03Z", "spec": {"labels": stamped}},
            {"id": "u2", "spec": null},
            {"id": "u3", "spec": {"labels": {"agent-relay-sbx-id": id}}}], "has_more": true, "next_cursor": "n"});
        let p2 = json!({"data": [{"id": "u4", "spec": {"labels": stamped}}], "has_more": false, "next_cursor": null});
        let q = "limit=100&labels=%7B%22agent-relay-sbx-fleet%22%3A%22f%22%7D";
        let mut f = MemoryFetch::default()
            .page(&format!("http://h/v1/sandboxes?{q}"), &p1.to_string())
            .page(&format!("http://h/v1/sandboxes?{q}&cursor=n"), &p2.to_string());
        let found = block_on(find_with(&cfg(), "f", &mut f)).unwrap();
        assert_eq!(
            found.iter().map(|x| (x.provider_sandbox_id.as_str(), x.created_at_ms)).collect::<Vec<_>>(),
            vec![("u1", Some(3000.0)), ("u4", None)]
        );
    }
}
