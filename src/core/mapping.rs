//! The in-memory mapping store: `sbx_…` id ↔ provider id ↔ provider sandbox id ↔ labels.
//!
//! Why a store at all? The `sbx_…` id is what callers keep; every later operation
//! (run, upload, destroy) resolves the original provider through this record and never
//! reroutes. This in-memory store is the default and a test/local reference; durable,
//! cross-process identity needs a caller-supplied store with the same contract.

use crate::core::clock::iso8601_millis;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// When a record was made: an instant taken by the router, or a caller's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreatedAt {
    /// Milliseconds since the Unix epoch (formatted on read: the write path stays cheap).
    Millis(i64),
    /// ISO-8601 text as given.
    Text(String),
}

/// One sandbox's identity record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Router id, `sbx_…`.
    pub id: String,
    /// Pool that launched it.
    pub provider_id: String,
    /// The provider's own sandbox id (never handed out as the router id).
    pub provider_sandbox_id: String,
    /// Labels given at launch. Shared with the compiled request they came from, so
    /// storing a record copies no label.
    pub labels: Arc<Vec<(String, String)>>,
    /// Whether the router's id label (`SANDBOX_ID_LABEL` = `id`) follows `labels`.
    pub stamped: bool,
    /// Creation time.
    pub created_at: CreatedAt,
    /// Whether it came from `provisionDetached`.
    pub detached: bool,
}

impl Mapping {
    /// Every label, the router's id label included.
    pub fn all_labels(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self.labels.iter().cloned().collect();
        if self.stamped {
            out.push((crate::core::request::SANDBOX_ID_LABEL.to_string(), self.id.clone()));
        }
        out
    }

    /// Creation time as ISO-8601.
    pub fn created_at_text(&self) -> String {
        match &self.created_at {
            CreatedAt::Millis(ms) => iso8601_millis(*ms),
            CreatedAt::Text(t) => t.clone(),
        }
    }
}

/// Records keyed by router id. Fx hashing: the keys are router-made random ids, so a
/// flooding attack on the hash is not possible and SipHash's cost buys nothing.
#[derive(Debug, Default)]
pub struct MappingStore {
    records: FxHashMap<String, Mapping>,
}

impl MappingStore {
    /// Inserts or replaces a record.
    pub fn put(&mut self, m: Mapping) {
        self.records.insert(m.id.clone(), m);
    }

    /// The record for `id`.
    pub fn get(&self, id: &str) -> Option<&Mapping> {
        self.records.get(id)
    }

    /// Removes `id`; true if it existed.
    pub fn delete(&mut self, id: &str) -> bool {
        self.records.remove(id).is_some()
    }

    /// Every record, ordered by id for determinism.
    pub fn list(&self) -> Vec<&Mapping> {
        let mut all: Vec<&Mapping> = self.records.values().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str) -> Mapping {
        Mapping {
            id: id.into(),
            provider_id: "p".into(),
            provider_sandbox_id: "remote-1".into(),
            labels: Arc::new(vec![]),
            stamped: true,
            created_at: CreatedAt::Millis(0),
            detached: false,
        }
    }

    #[test]
    fn put_get_delete_round_trip() {
        let mut s = MappingStore::default();
        s.put(m("sbx_b"));
        s.put(m("sbx_a"));
        assert_eq!(s.get("sbx_a").unwrap().provider_sandbox_id, "remote-1");
        assert_eq!(
            s.get("sbx_a").unwrap().all_labels(),
            vec![(crate::core::request::SANDBOX_ID_LABEL.to_string(), "sbx_a".to_string())]
        );
        assert_eq!(s.get("sbx_a").unwrap().created_at_text(), "1970-01-01T00:00:00.000Z");
        assert_eq!(s.list().iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), ["sbx_a", "sbx_b"]);
        assert!(s.delete("sbx_a"));
        assert!(!s.delete("sbx_a"));
        assert_eq!(s.len(), 1);
    }
}
