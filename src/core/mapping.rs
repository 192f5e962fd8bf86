//! The in-memory mapping store: `sbx_…` id ↔ provider id ↔ provider sandbox id ↔ labels.
//!
//! Why a store at all? The `sbx_…` id is what callers keep; every later operation
//! (run, upload, destroy) resolves the original provider through this record and never
//! reroutes. This in-memory store is the default and a test/local reference; durable,
//! cross-process identity needs a caller-supplied store with the same contract.

use crate::core::clock::iso8601_millis;
use crate::core::error::{ErrorClass, Failure, Fault};
use crate::core::ids::SandboxKey;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// When a record was made: an instant taken by the router, or a caller's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreatedAt {
    /// Milliseconds since the Unix epoch (formatted on read: the write path stays cheap).
    Millis(i64),
    /// ISO-8601 text as given.
    Text(Box<str>),
}

/// One sandbox's identity record.
///
/// Why this shape? A router keeps one record per live sandbox, and the provision path
/// writes one per launch: the id is its 128-bit value, the pool id is shared with every
/// other record of that pool, and the labels with the compiled request, so a record owns
/// one heap block (the provider's sandbox id). Measured with `perf`: the String-per-field
/// record spent most of a write in the allocator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Router id, `sbx_…`.
    pub id: SandboxKey,
    /// Pool that launched it (interned by the store: see [`MappingStore::intern`]).
    pub provider_id: Arc<str>,
    /// The provider's own sandbox id (never handed out as the router id).
    pub provider_sandbox_id: Box<str>,
    /// Labels given at launch. Shared with the compiled request they came from, so
    /// storing a record copies no label.
    pub labels: Arc<crate::core::labels::Labels>,
    /// Whether the router's id label (`SANDBOX_ID_LABEL` = `id`) follows `labels`.
    pub stamped: bool,
    /// The router's fleet label (`SANDBOX_FLEET_LABEL` = this) follows `labels` too, when
    /// set (interned by the store like pool ids).
    pub fleet: Option<Arc<str>>,
    /// Creation time.
    pub created_at: CreatedAt,
    /// Whether it came from `provisionDetached`.
    pub detached: bool,
}

/// A caller record's labels (JSON text of an object of strings), or `INVALID_INPUT` naming
/// `labels`.
pub fn labels_of(json: &str) -> Result<Vec<(String, String)>, Failure> {
    let invalid = |what: &str| {
        Fault::invalid(
            ErrorClass::RequestValidation,
            "INVALID_INPUT",
            format!("mapping labels must be {what}"),
            "labels",
        )
    };
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, s)),
                _ => Err(invalid("strings")),
            })
            .collect(),
        _ => Err(invalid("an object")),
    }
}

impl Mapping {
    /// Every label, the router's id label included.
    pub fn all_labels(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self.labels.to_vec();
        if self.stamped {
            out.push((crate::core::request::SANDBOX_ID_LABEL.to_string(), self.id.to_string()));
        }
        if let Some(fleet) = &self.fleet {
            out.push((crate::core::request::SANDBOX_FLEET_LABEL.to_string(), fleet.to_string()));
        }
        out
    }

    /// Creation time as ISO-8601.
    pub fn created_at_text(&self) -> String {
        match &self.created_at {
            CreatedAt::Millis(ms) => iso8601_millis(*ms),
            CreatedAt::Text(t) => t.to_string(),
        }
    }
}

/// Records keyed by router id. Fx hashing: the keys are router-made random ids, so a
/// flooding attack on the hash is not possible and SipHash's cost buys nothing.
#[derive(Debug, Default)]
pub struct MappingStore {
    records: FxHashMap<SandboxKey, Mapping>,
    /// Pool ids seen, one shared copy each (bounded by the number of distinct pools).
    providers: FxHashSet<Arc<str>>,
}

impl MappingStore {
    /// The store's shared copy of `provider_id`, made on first use.
    pub fn intern(&mut self, provider_id: &str) -> Arc<str> {
        if let Some(p) = self.providers.get(provider_id) {
            return Arc::clone(p);
        }
        let p: Arc<str> = Arc::from(provider_id);
        self.providers.insert(Arc::clone(&p));
        p
    }

    /// Inserts or replaces a record.
    pub fn put(&mut self, m: Mapping) {
        self.records.insert(m.id, m);
    }

    /// The record for `id` (`None` for an unknown or malformed id).
    pub fn get(&self, id: &str) -> Option<&Mapping> {
        self.records.get(&SandboxKey::parse(id)?)
    }

    /// Removes `id`; true if it existed.
    pub fn delete(&mut self, id: &str) -> bool {
        SandboxKey::parse(id).is_some_and(|k| self.records.remove(&k).is_some())
    }

    /// Every record, ordered by id for determinism.
    pub fn list(&self) -> Vec<&Mapping> {
        let mut all: Vec<&Mapping> = self.records.values().collect();
        all.sort_unstable_by_key(|m| m.id);
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

    #[test]
    fn labels_of_must_refuse_a_non_string_value_and_a_non_object_naming_labels() {
        let e = labels_of(r#"{"team":1}"#).unwrap_err();
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_INPUT", Some("labels")));
        assert_eq!(e.message, "mapping labels must be strings");
        assert_eq!(labels_of("[]").unwrap_err().message, "mapping labels must be an object");
    }

    #[test]
    fn labels_of_must_not_refuse_an_object_of_strings() {
        assert_eq!(labels_of(r#"{"team":"a"}"#).unwrap(), vec![("team".to_string(), "a".to_string())]);
        assert_eq!(labels_of("{}").unwrap(), vec![]);
    }

    fn id(last: char) -> String {
        format!("sbx_{}{last}", "0".repeat(31))
    }

    fn m(store: &mut MappingStore, id: &str) -> Mapping {
        Mapping {
            id: SandboxKey::parse(id).unwrap(),
            provider_id: store.intern("p"),
            provider_sandbox_id: "remote-1".into(),
            labels: Arc::default(),
            stamped: true,
            fleet: None,
            created_at: CreatedAt::Millis(0),
            detached: false,
        }
    }

    #[test]
    fn put_get_delete_round_trip() {
        let mut s = MappingStore::default();
        let (a, b) = (id('a'), id('b'));
        let rb = m(&mut s, &b);
        s.put(rb);
        let ra = m(&mut s, &a);
        s.put(ra);
        assert_eq!(&*s.get(&a).unwrap().provider_sandbox_id, "remote-1");
        assert_eq!(
            s.get(&a).unwrap().all_labels(),
            vec![(crate::core::request::SANDBOX_ID_LABEL.to_string(), a.clone())]
        );
        assert_eq!(s.get(&a).unwrap().created_at_text(), "1970-01-01T00:00:00.000Z");
        assert_eq!(s.list().iter().map(|x| x.id.to_string()).collect::<Vec<_>>(), [a.clone(), b.clone()]);
        assert!(s.get("sbx_A").is_none());
        assert!(!s.delete("not-an-id"));
        assert!(s.delete(&a));
        assert!(!s.delete(&a));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn intern_shares_one_copy_per_pool() {
        let mut s = MappingStore::default();
        let (x, y, z) = (s.intern("daytona"), s.intern("daytona"), s.intern("e2b"));
        assert!(Arc::ptr_eq(&x, &y));
        assert!(!Arc::ptr_eq(&x, &z));
        assert_eq!(&*z, "e2b");
    }
}
