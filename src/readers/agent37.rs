//! Agent37: every instance in the account, counted against slots.
//!
//! `GET {base}/v1/instances` with `Authorization: Bearer <key>`; the list is not paginated:
//! `{"data": [{"id", "status", ...}]}`.
//!
//! Why all states? Agent37's account limits (1 free, 10 after a first top-up, 50 after
//! $500) cap instances that exist, not only running ones; sleeping and stopped instances
//! keep their slot. Counting every listed instance is the conservative reading. The size
//! fields differ between sources (`vcpu` vs `resources`), which is one more reason this
//! reader only counts.

use super::http::{Auth, Fetch};
use super::{endpoint, parse_body, slot_reader, slots_or_unknown, PageGuard, ReaderConfig};
use crate::core::capacity::{Measurement, UnknownReason};
use serde::Deserialize;

/// Default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.agent37.com";

#[derive(Debug, Deserialize)]
struct Instance {
    #[allow(dead_code, reason = "parsed to check the item's shape")]
    id: String,
}

#[derive(Debug, Deserialize)]
struct List {
    data: Vec<Instance>,
}

/// Counts every instance through `fetch` and measures them against `limit`.
pub async fn measure<F: Fetch>(cfg: &ReaderConfig, limit: f64, required: f64, fetch: &mut F) -> Measurement {
    slots_or_unknown(count(cfg, fetch).await, limit, required)
}

async fn count<F: Fetch>(cfg: &ReaderConfig, fetch: &mut F) -> Result<usize, UnknownReason> {
    let url = endpoint(cfg, DEFAULT_BASE_URL, "/v1/instances")?;
    PageGuard::new(cfg.max_pages).before_fetch()?;
    let fetched = fetch.get(url).await?;
    let list: List = parse_body(&fetched.body)?;
    Ok(list.data.len())
}

/// Reads an Agent37 account's instance count (see the module docs).
pub async fn read(cfg: &ReaderConfig, api_key: &str) -> Measurement {
    match slot_reader(cfg, Auth::Bearer(api_key)) {
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
        parse_config(&json!({"baseUrl": "http://h", "limits": {"sandboxes": 10}})).unwrap()
    }

    #[test]
    fn counts_every_instance_in_one_request() {
        let body = json!({"data": [
            {"id": "inst_1", "status": "running", "template": "hermes", "vcpu": 2, "created": 1755000000},
            {"id": "inst_2", "status": "sleeping", "resources": {"cpu": 1, "memory": 2, "disk": 3}},
            {"id": "inst_3", "status": "stopped"}]})
        .to_string();
        let mut f = MemoryFetch::default().page("http://h/v1/instances", &body);
        let m = block_on(measure(&cfg(), 10.0, 1.0, &mut f));
        let Measurement::Known(rs) = m else { panic!("{m:?}") };
        assert_eq!((rs[0].used, rs[0].headroom), (3.0, 7.0));
        assert_eq!(f.log, vec!["http://h/v1/instances".to_string()]);
    }

    #[test]
    fn wrong_shapes_are_malformed() {
        for body in [r#"[]"#, r#"{"error": "invalid_api_key"}"#, r#"{"data": [{"id": 7}]}"#, r#"{"data": null}"#, "{"] {
            let mut f = MemoryFetch::default().page("http://h/v1/instances", body);
            assert_eq!(
                block_on(measure(&cfg(), 10.0, 1.0, &mut f)),
                Measurement::Unknown(UnknownReason::Malformed),
                "{body}"
            );
        }
    }
}
