//! napi glue for the default in-memory mapping store (`core::mapping`). The JS class
//! `InMemoryMappingStore` adds the async contract; a router whose store is exactly that
//! class hands its native half to `NativeRouter`, so a provision's success call writes the
//! record itself (labels from the validated request, the id and fleet labels added).

use crate::binding::error::guard;
use crate::binding::records::MappingRecord;
use crate::core::ids::SandboxKey;
use crate::core::mapping::{labels_of, CreatedAt, Mapping, MappingStore};
use napi::Env;
use napi_derive::napi;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

fn to_record(m: &Mapping) -> MappingRecord {
    MappingRecord {
        id: m.id.to_string(),
        provider_id: m.provider_id.to_string(),
        provider_sandbox_id: m.provider_sandbox_id.to_string(),
        labels: m.all_labels().into_iter().collect(),
        created_at: m.created_at_text(),
        detached: m.detached,
    }
}

/// The default in-memory mapping store (sync core; the JS class adds the async contract).
#[napi]
pub struct NativeMappingStore {
    pub(crate) store: Rc<RefCell<MappingStore>>,
}

impl Default for NativeMappingStore {
    fn default() -> Self {
        Self::new()
    }
}

#[napi]
impl NativeMappingStore {
    /// An empty store.
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeMappingStore { store: Rc::new(RefCell::new(MappingStore::default())) }
    }

    /// Inserts or replaces a record. `labels_json` is a JSON object of strings. Throws the
    /// typed `INVALID_SANDBOX_ID` / `INVALID_INPUT` error.
    #[napi]
    #[allow(clippy::too_many_arguments, reason = "a napi method: one typed argument per record field")]
    pub fn put(
        &self,
        env: Env,
        id: String,
        provider_id: String,
        provider_sandbox_id: String,
        labels_json: String,
        created_at: String,
        detached: bool,
    ) -> napi::Result<()> {
        guard(&env, || {
            let key = SandboxKey::parse_checked(&id)?;
            let labels = labels_of(&labels_json)?;
            let mut store = self.store.borrow_mut();
            let provider_id = store.intern(&provider_id);
            store.put(Mapping {
                id: key,
                provider_id,
                provider_sandbox_id: provider_sandbox_id.into_boxed_str(),
                labels: Arc::new(labels.into()),
                stamped: false,
                fleet: None,
                created_at: CreatedAt::Text(created_at.into_boxed_str()),
                detached,
            });
            Ok(())
        })
    }

    /// The record for `id`, or null.
    #[napi]
    pub fn get(&self, id: String) -> Option<MappingRecord> {
        self.store.borrow().get(&id).map(to_record)
    }

    /// Removes `id`; true if it existed.
    #[napi]
    pub fn delete(&self, id: String) -> bool {
        self.store.borrow_mut().delete(&id)
    }

    /// Every record, ordered by id.
    #[napi]
    pub fn list(&self) -> Vec<MappingRecord> {
        self.store.borrow().list().into_iter().map(to_record).collect()
    }

    /// Number of records.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.store.borrow().len() as u32
    }
}
