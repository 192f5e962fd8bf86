//! The in-memory mapping store: `sbx_…` id ↔ provider id ↔ provider sandbox id ↔ labels.
//!
//! Why a store at all? The `sbx_…` id is what callers keep; every later operation
//! (run, upload, destroy) resolves the original provider through this record and never
//! reroutes. This in-memory store is the default and a test/local reference; durable,
//! cross-process identity needs a caller-supplied store with the same contract.

use std::collections::HashMap;

/// One sandbox's identity record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Router id, `sbx_…`.
    pub id: String,
    /// Pool that launched it.
    pub provider_id: String,
    /// The provider's own sandbox id (never handed out as the router id).
    pub provider_sandbox_id: String,
    /// Labels stamped at launch (caller labels plus the router's id label).
    pub labels: Vec<(String, String)>,
    /// ISO-8601 creation time.
    pub created_at: String,
    /// Whether it came from `provisionDetached`.
    pub detached: bool,
}

/// Records keyed by router id.
#[derive(Debug, Default)]
pub struct MappingStore {
    records: HashMap<String, Mapping>,
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
            labels: vec![],
            created_at: "2026-01-01T00:00:00.000Z".into(),
            detached: false,
        }
    }

    #[test]
    fn put_get_delete_round_trip() {
        let mut s = MappingStore::default();
        s.put(m("sbx_b"));
        s.put(m("sbx_a"));
        assert_eq!(s.get("sbx_a").unwrap().provider_sandbox_id, "remote-1");
        assert_eq!(s.list().iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), ["sbx_a", "sbx_b"]);
        assert!(s.delete("sbx_a"));
        assert!(!s.delete("sbx_a"));
        assert_eq!(s.len(), 1);
    }
}
