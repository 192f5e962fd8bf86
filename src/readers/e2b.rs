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

use super::http::{Auth, Fetch};
use super::{endpoint, page_size, parse_body, slot_reader, slots_or_unknown, PageGuard, ReaderConfig};
use crate::core::capacity::{Measurement, UnknownReason};
use serde::Deserialize;

/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.e2b.app";
/// Default and maximum page size.
pub const MAX_PAGE_SIZE: u32 = 100;
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
    let limit = page_size(cfg, MAX_PAGE_SIZE, MAX_PAGE_SIZE)?.to_string();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readers::parse_config;
    use crate::readers::test_support::{block_on, MemoryFetch};
    use serde_json::json;

    fn cfg() -> ReaderConfig {
        parse_config(&json!({"baseUrl": "http://h", "limits": {"sandboxes": 20}})).unwrap()
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
        let c = parse_config(&json!({"baseUrl": "http://127.0.0.1:9"})).unwrap();
        assert_eq!(block_on(read(&c, "k")), Measurement::Unknown(UnknownReason::LimitNotConfigured));
    }
}
