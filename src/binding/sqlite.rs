//! napi glue for the durable mapping store ([`crate::stores::sqlite`]).
//!
//! Why are writes (`apply`) and `get` synchronous native calls? In WAL mode with
//! `synchronous = NORMAL` a transaction is a few `write(2)`s to the log: tens of
//! microseconds, about a hop to a worker thread and back (see `../shared/STYLE.md`), and the
//! JS class batches the writes of one event-loop turn into one transaction, so a burst of
//! provisions pays one commit. The JS class wraps them in its async contract. `list` can read tens of thousands of rows,
//! so [`sqlite_list`] reads on tokio's blocking pool through a read-only connection of its
//! own (WAL readers never block the writer), off the JS thread.
//!
//! Errors cross typed with their stable code (`MAPPING_STORE_OPEN_FAILED`,
//! `MAPPING_STORE_SCHEMA_TOO_NEW`, `MAPPING_PERSISTENCE_FAILED`, `MAPPING_READ_FAILED`,
//! `INVALID_INPUT`); SQLite's own messages (which may name paths) never do.

use crate::binding::error::{guard, own_task, typed_future, Failure, NativeError};
use crate::binding::records::{IntentRecord, MappingRecord};
use crate::core::error::ErrorClass;
use crate::core::json::FieldError;
use crate::core::records;
use crate::stores::record::{Intent, Op, Row};
use crate::stores::sqlite::{list_file, Durability, SqliteStore, StoreError, StoreFile};
use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;

type Result<T> = std::result::Result<T, Failure>;

pub(crate) fn store_err(e: StoreError) -> Failure {
    NativeError::new(ErrorClass::MappingPersistence, e.code(), e.to_string())
}

fn invalid(e: FieldError) -> Failure {
    NativeError::invalid(ErrorClass::RequestValidation, "INVALID_INPUT", records::message(&e), e.field)
}

pub(crate) fn to_record(r: Row) -> Result<MappingRecord> {
    let labels: HashMap<String, String> =
        serde_json::from_str(&r.labels_json).map_err(|_| store_err(StoreError::ReadFailed))?;
    Ok(MappingRecord {
        id: r.id,
        provider_id: r.provider_id,
        provider_sandbox_id: r.provider_sandbox_id,
        labels,
        created_at: r.created_at,
        detached: r.detached,
    })
}

/// One write of a batch, as the JS class sends it (JSON, tagged by `op`).
#[derive(serde::Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub(crate) enum BatchOp {
    Put {
        id: String,
        #[serde(rename = "providerId")]
        provider_id: String,
        #[serde(rename = "providerSandboxId")]
        provider_sandbox_id: String,
        labels: serde_json::Map<String, Value>,
        #[serde(rename = "createdAt")]
        created_at: String,
        detached: bool,
    },
    Intent {
        id: String,
        #[serde(rename = "providerId")]
        provider_id: String,
        state: String,
        #[serde(rename = "startedAt")]
        started_at: f64,
        #[serde(rename = "expiresAt")]
        expires_at: f64,
        #[serde(rename = "ownerHost")]
        owner_host: String,
        #[serde(rename = "ownerPid")]
        owner_pid: f64,
        #[serde(rename = "ownerSession")]
        owner_session: String,
    },
    Delete {
        id: String,
    },
}

fn checked_intent(i: IntentRecord) -> Result<Intent> {
    records::sandbox_id(&i.id).map_err(invalid)?;
    records::provider_id(&i.provider_id).map_err(invalid)?;
    records::intent_state(&i.state).map_err(invalid)?;
    if !i.started_at.is_finite() || !i.expires_at.is_finite() || !i.owner_pid.is_finite() {
        return Err(invalid(FieldError::new("intent", "times and pid must be finite numbers")));
    }
    Ok(Intent {
        id: i.id,
        provider_id: i.provider_id,
        state: i.state,
        started_at: i.started_at as i64,
        expires_at: i.expires_at as i64,
        owner_host: i.owner_host,
        owner_pid: i.owner_pid as i64,
        owner_session: i.owner_session,
    })
}

pub(crate) fn checked_op(op: BatchOp) -> Result<Op> {
    Ok(match op {
        BatchOp::Put { id, provider_id, provider_sandbox_id, labels, created_at, detached } => {
            records::sandbox_id(&id).map_err(invalid)?;
            records::provider_sandbox_id(&provider_sandbox_id).map_err(invalid)?;
            if !labels.values().all(Value::is_string) {
                return Err(invalid(FieldError::new("labels", "must be an object of strings")));
            }
            let labels_json = Value::Object(labels).to_string();
            Op::Put(Row { id, provider_id, provider_sandbox_id, labels_json, created_at, detached })
        }
        BatchOp::Intent { id, provider_id, state, started_at, expires_at, owner_host, owner_pid, owner_session } => {
            Op::Intent(checked_intent(IntentRecord {
                id,
                provider_id,
                state,
                started_at,
                expires_at,
                owner_host,
                owner_pid,
                owner_session,
            })?)
        }
        BatchOp::Delete { id } => Op::Delete(id),
    })
}

/// The native half of `SqliteMappingStore`: one file, opened on first use.
#[napi]
pub struct NativeSqliteStore {
    file: StoreFile,
}

impl NativeSqliteStore {
    fn with<T>(&self, f: impl FnOnce(&mut SqliteStore) -> std::result::Result<T, StoreError>) -> Result<T> {
        self.file.with(f).map_err(store_err)
    }

    /// Where a router without a coordinator writes its budget charges (this file).
    pub(crate) fn charge_sink(&self) -> StoreFile {
        self.file.clone()
    }
}

#[napi]
impl NativeSqliteStore {
    /// A store over the file at `path` (created, in WAL mode, on first use). `full`:
    /// `synchronous = FULL` (fsync per commit) instead of `NORMAL`.
    #[napi(constructor)]
    pub fn new(path: String, full: bool) -> Self {
        NativeSqliteStore {
            file: StoreFile::new(PathBuf::from(path), if full { Durability::Full } else { Durability::Normal }),
        }
    }

    /// Opens the file now (creating and migrating it if needed); returns its schema version.
    #[napi]
    pub fn open(&self, env: Env) -> napi::Result<u32> {
        guard(&env, || self.with(|s| s.schema_version().map(|v| v as u32)))
    }

    /// The record of `id`, or null.
    #[napi]
    pub fn get(&self, env: Env, id: String) -> napi::Result<Option<MappingRecord>> {
        guard(&env, || self.with(|s| s.get(&id))?.map(to_record).transpose())
    }

    /// Every record, ordered by id, read on the JS thread (see [`sqlite_list`]).
    #[napi]
    pub fn list(&self, env: Env) -> napi::Result<Vec<MappingRecord>> {
        guard(&env, || self.with(|s| s.list())?.into_iter().map(to_record).collect())
    }

    /// Number of records.
    #[napi]
    pub fn count(&self, env: Env) -> napi::Result<u32> {
        guard(&env, || self.with(|s| s.count()).map(|n| n as u32))
    }

    /// Applies a batch of writes (`[{ op: 'put' | 'intent' | 'delete', ... }]`, JSON) in
    /// order, in one transaction: all or none (group commit). Returns, per op, whether it
    /// changed a record (for a delete: whether a record existed). Every op is validated
    /// before anything is written.
    #[napi]
    pub fn apply(&self, env: Env, ops_json: String) -> napi::Result<Vec<bool>> {
        guard(&env, || {
            let ops: Vec<BatchOp> = serde_json::from_str(&ops_json)
                .map_err(|_| invalid(FieldError::new("batch", "is not a list of writes")))?;
            let ops = ops.into_iter().map(checked_op).collect::<Result<Vec<_>>>()?;
            self.with(|s| s.apply(&ops))
        })
    }

    /// Every intent, ordered by id.
    #[napi]
    pub fn intents(&self, env: Env) -> napi::Result<Vec<IntentRecord>> {
        guard(&env, || Ok(self.with(|s| s.intents())?.into_iter().map(IntentRecord::from).collect()))
    }

    /// Closes the file (the next operation opens it again).
    #[napi]
    pub fn close(&self) {
        self.file.close();
    }
}

/// Every record of the store file at `path`, read on tokio's blocking pool through a
/// read-only connection (the file must already be open through a `NativeSqliteStore`).
#[napi(ts_return_type = "Promise<Array<MappingRecord>>")]
pub fn sqlite_list(env: &Env, path: String) -> napi::Result<PromiseRaw<'_, Vec<MappingRecord>>> {
    typed_future(env, async move {
        let rows = own_task(async move {
            tokio::task::spawn_blocking(move || list_file(std::path::Path::new(&path)).map_err(store_err))
                .await
                .unwrap_or_else(|_| Err(crate::binding::error::panicked()))
        })
        .await?;
        rows.into_iter().map(to_record).collect()
    })
}
