//! E2B: running sandboxes counted against the account's concurrency limit.
//!
//! `GET {base}/v2/sandboxes?state=running&limit=100` with `X-API-KEY: <key>`, following the
//! opaque `X-Next-Token` response header (sent back as `nextToken=`) until it is absent.
//! The body is a bare JSON array of sandboxes.
//!
//! Why only running sandboxes? E2B's documented limit is on *concurrent* (running)
//! sandboxes; paused ones do not count against it. There is no quota API (over the limit,
//! create answers 429), so the limit is `limits.sandboxes` from the caller's plan
//! (20 on Hobby, 100 on Pro, more with add-ons — never guessed here). Every returned item
//! is counted, even if a server ignored the state filter: over-counting is conservative.
//!
//! Items are parsed only far enough to prove they are sandbox objects (`sandboxID` string);
//! anything else is `MALFORMED`.

use super::config::ReaderConfig;
use super::http::{Auth, Fetch, HttpFetch};
use super::list::{endpoint, parse_body, PageGuard};
use super::slots::{slot_reader, slots_or_unknown};
use super::stamp::{collect, parse_rfc3339_ms, Found};
use crate::core::capacity::{Measurement, UnknownReason};
use crate::core::request::SANDBOX_FLEET_LABEL;
use serde::Deserialize;

/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.e2b.app";
/// The pagination header.
pub const NEXT_TOKEN_HEADER: &str = "x-next-token";

#[derive(Debug, Deserialize)]
struct Sandbox {
    #[serde(rename = "sandboxID")]
    #[allow(dead_code, reason = "parsed to check the item's shape")]
    sandbox_id: String,
}

/// Counts running sandboxes through `fetch` and measures them against `limit`.
pub async fn measure<F: Fetch>(cfg: &ReaderConfig, limit: f64, required: f64, fetch: &mut F) -> Measurement {
    slots_or_unknown(count(cfg, fetch).await, limit, required)
}

async fn count<F: Fetch>(cfg: &ReaderConfig, fetch: &mut F) -> Result<usize, UnknownReason> {
    let limit = cfg.page_size().to_string();
    let base = endpoint(cfg, DEFAULT_BASE_URL, "/v2/sandboxes")?;
    let mut guard = PageGuard::new(cfg.max_pages);
    let mut token: Option<String> = None;
    let mut total = 0usize;
    loop {
        let mut url = base.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("state", "running").append_pair("limit", &limit);
            if let Some(t) = &token {
                q.append_pair("nextToken", t);
            }
        }
        guard.before_fetch()?;
        let fetched = fetch.get(url).await?;
        let items: Vec<Sandbox> = parse_body(&fetched.body)?;
        total += items.len();
        match fetched.headers.get(NEXT_TOKEN_HEADER) {
            None => return Ok(total),
            Some(v) => {
                let t = v.to_str().map_err(|_| UnknownReason::Malformed)?;
                if t.is_empty() {
                    return Ok(total);
                }
                guard.cursor(t)?;
                token = Some(t.to_string());
            }
        }
    }
}

/// Reads an E2B account's running-sandbox count (see the module docs).
pub async fn read(cfg: &ReaderConfig, api_key: &str) -> Measurement {
    match slot_reader(cfg, Auth::Header("x-api-key", api_key)) {
        Ok((limit, required, mut fetch)) => measure(cfg, limit, required, &mut fetch).await,
        Err(m) => m,
    }
}

/// One listed sandbox as a finder needs it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    #[serde(rename = "sandboxID")]
    sandbox_id: String,
    #[serde(default)]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    started_at: Option<serde_json::Value>,
}

/// Lists the account's sandboxes (running and paused: `state` omitted) stamped with `fleet`
/// through `fetch`: `GET /v2/sandboxes?metadata=agent-relay-sbx-fleet%3D<fleet>`, following
/// `X-Next-Token`; every item is checked again for the whole stamp in its `metadata`.
/// E2B reports no creation time, only `startedAt` (a resumed sandbox restarts it): the age
/// of a paused-and-resumed orphan is understated, never overstated.
pub async fn find_with<F: Fetch>(cfg: &ReaderConfig, fleet: &str, fetch: &mut F) -> Result<Vec<Found>, UnknownReason> {
    let limit = cfg.page_size().to_string();
    let base = endpoint(cfg, DEFAULT_BASE_URL, "/v2/sandboxes")?;
    let filter = format!("{SANDBOX_FLEET_LABEL}={fleet}");
    let mut guard = PageGuard::new(cfg.max_pages);
    let mut token: Option<String> = None;
    let mut out = Vec::new();
    loop {
        let mut url = base.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("metadata", &filter).append_pair("limit", &limit);
            if let Some(t) = &token {
                q.append_pair("nextToken", t);
            }
        }
        guard.before_fetch()?;
        let fetched = fetch.get(url).await?;
        let items: Vec<Listed> = parse_body(&fetched.body)?;
        for s in &items {
            let started = s.started_at.as_ref().and_then(serde_json::Value::as_str).and_then(parse_rfc3339_ms);
            collect(&mut out, &s.sandbox_id, s.metadata.as_ref(), fleet, started)?;
        }
        match fetched.headers.get(NEXT_TOKEN_HEADER) {
            None => return Ok(out),
            Some(v) => {
                let t = v.to_str().map_err(|_| UnknownReason::Malformed)?;
                if t.is_empty() {
                    return Ok(out);
                }
                guard.cursor(t)?;
                token = Some(t.to_string());
            }
        }
    }
}

/// [`find_with`] over HTTP with the account's key.
pub async fn find(cfg: &ReaderConfig, api_key: &str, fleet: &str) -> Result<Vec<Found>, UnknownReason> {
    let mut fetch = HttpFetch::new(Auth::Header("x-api-key", api_key), &[])?;
    find_with(cfg, fleet, &mut fetch).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readers::test_support::config;
    use crate::readers::test_support::{block_on, MemoryFetch};
    use serde_json::json;

    fn cfg() -> ReaderConfig {
        config("e2b", json!({"baseUrl": "http://h", "limits": {"sandboxes": 20}}))
    }

    fn sbs(n: usize) -> String {
        let items: Vec<_> = (0..n)
            .map(|i| json!({"sandboxID": format!("i{i}"), "templateID": "t", "cpuCount": 2, "memoryMB": 512, "state": "running"}))
            .collect();
        json!(items).to_string()
    }

    #[test]
    fn follows_the_next_token_header_until_absent() {
        let mut f = MemoryFetch::default()
            .page_with_header("http://h/v2/sandboxes?state=running&limit=100", &sbs(3), "x-next-token", "t+1")
            .page_with_header(
                "http://h/v2/sandboxes?state=running&limit=100&nextToken=t%2B1",
                &sbs(2),
                "x-next-token",
                "t2",
            )
            .page("http://h/v2/sandboxes?state=running&limit=100&nextToken=t2", &sbs(1));
        let m = block_on(measure(&cfg(), 20.0, 1.0, &mut f));
        let Measurement::Known(rs) = m else { panic!("{m:?}") };
        assert_eq!(
            (rs[0].resource.as_str(), rs[0].used, rs[0].limit, rs[0].unit.as_str(), rs[0].required),
            ("sandboxes", 6.0, 20.0, "sandboxes", 1.0)
        );
        assert_eq!(rs[0].headroom, 14.0);
    }

    #[test]
    fn wrong_shapes_are_malformed() {
        for body in [r#"{"sandboxes": []}"#, r#"[{"sandboxID": 5}]"#, r#"[1]"#, r#"[{"templateID": "t"}]"#, "nope", ""]
        {
            let mut f = MemoryFetch::default().page("http://h/v2/sandboxes?state=running&limit=100", body);
            assert_eq!(
                block_on(measure(&cfg(), 20.0, 1.0, &mut f)),
                Measurement::Unknown(UnknownReason::Malformed),
                "{body}"
            );
        }
    }

    #[test]
    fn must_fire_a_repeated_token_is_a_loop() {
        let mut f = MemoryFetch::default()
            .page_with_header("http://h/v2/sandboxes?state=running&limit=100", &sbs(1), "x-next-token", "same")
            .page_with_header(
                "http://h/v2/sandboxes?state=running&limit=100&nextToken=same",
                &sbs(1),
                "x-next-token",
                "same",
            );
        assert_eq!(
            block_on(measure(&cfg(), 20.0, 1.0, &mut f)),
            Measurement::Unknown(UnknownReason::PageLimitExceeded)
        );
    }

    #[test]
    fn must_not_fire_an_empty_token_ends_pagination() {
        let mut f = MemoryFetch::default().page_with_header(
            "http://h/v2/sandboxes?state=running&limit=100",
            "[]",
            "x-next-token",
            "",
        );
        assert!(matches!(block_on(measure(&cfg(), 20.0, 1.0, &mut f)), Measurement::Known(_)));
    }

    #[test]
    fn missing_limit_is_decided_before_any_request() {
        let c = config("e2b", json!({"baseUrl": "http://127.0.0.1:9"}));
        assert_eq!(block_on(read(&c, "k")), Measurement::Unknown(UnknownReason::LimitNotConfigured));
    }

    #[test]
    fn finder_sends_the_metadata_filter_follows_tokens_and_rechecks_items() {
        let id = format!("sbx_{}", "b".repeat(32));
        let p1 = json!([
            {"sandboxID": "i1", "metadata": {"agent-relay-sbx-fleet": "f", "agent-relay-sbx-id": id}, "startedAt": "1970-01-01T00:00:02Z", "state": "paused"},
            {"sandboxID": "i2", "metadata": {"agent-relay-sbx-fleet": "g", "agent-relay-sbx-id": id}},
            {"sandboxID": "i3"}
        ]);
        let p2 = json!([{"sandboxID": "i4", "metadata": {"agent-relay-sbx-fleet": "f", "agent-relay-sbx-id": id}}]);
        let mut f = MemoryFetch::default()
            .page_with_header(
                "http://h/v2/sandboxes?metadata=agent-relay-sbx-fleet%3Df&limit=100",
                &p1.to_string(),
                "x-next-token",
                "t1",
            )
            .page("http://h/v2/sandboxes?metadata=agent-relay-sbx-fleet%3Df&limit=100&nextToken=t1", &p2.to_string());
        let found = block_on(find_with(&cfg(), "f", &mut f)).unwrap();
        assert_eq!(
            found.iter().map(|x| (x.provider_sandbox_id.as_str(), x.created_at_ms)).collect::<Vec<_>>(),
            vec![("i1", Some(2000.0)), ("i4", None)]
        );
    }
}
