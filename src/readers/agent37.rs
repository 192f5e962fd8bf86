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

use super::config::ReaderConfig;
use super::http::{Auth, Fetch, HttpFetch};
use super::list::{endpoint, parse_body, PageGuard};
use super::slots::{slot_reader, slots_or_unknown};
use super::stamp::{collect, Found};
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

/// One listed instance as a finder needs it.
#[derive(Debug, Deserialize)]
struct Listed {
    id: String,
    #[serde(default)]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Unix seconds.
    #[serde(default)]
    created: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct ListedAll {
    data: Vec<Listed>,
}

/// Lists the account's instances stamped with `fleet` through `fetch`. The list carries
/// each instance's `metadata` but documents no filter and no pagination, so this is one
/// `GET /v1/instances` filtered here. (Whether an adapter writes launch labels into
/// `metadata` is the adapter's business: an instance without them is simply not found.)
pub async fn find_with<F: Fetch>(cfg: &ReaderConfig, fleet: &str, fetch: &mut F) -> Result<Vec<Found>, UnknownReason> {
    let url = endpoint(cfg, DEFAULT_BASE_URL, "/v1/instances")?;
    PageGuard::new(cfg.max_pages).before_fetch()?;
    let fetched = fetch.get(url).await?;
    let list: ListedAll = parse_body(&fetched.body)?;
    let mut out = Vec::new();
    for i in &list.data {
        let created = i.created.as_ref().and_then(serde_json::Value::as_f64).filter(|s| s.is_finite() && *s >= 0.0);
        collect(&mut out, &i.id, i.metadata.as_ref(), fleet, created.map(|s| s * 1000.0))?;
    }
    Ok(out)
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
        config("agent37", json!({"baseUrl": "http://h", "limits": {"sandboxes": 10}}))
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

    #[test]
    fn finder_filters_instances_by_metadata_and_converts_unix_seconds() {
        let id = format!("sbx_{}", "d".repeat(32));
        let body = json!({"data": [
            {"id": "inst_1", "metadata": {"agent-relay-sbx-fleet": "f", "agent-relay-sbx-id": id}, "created": 1755000000},
            {"id": "inst_2", "metadata": {"k": "v"}},
            {"id": "inst_3"}]})
        .to_string();
        let mut f = MemoryFetch::default().page("http://h/v1/instances", &body);
        let found = block_on(find_with(&cfg(), "f", &mut f)).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].provider_sandbox_id.as_str(), found[0].created_at_ms),
            ("inst_1", Some(1_755_000_000_000.0))
        );
    }
}
