//! The durable mapping store: one SQLite file (bundled SQLite, through `rusqlite`).
//!
//! Why SQLite and not a JSON file? A provision writes one record and a destroy removes one;
//! a file rewritten per change is O(n) per write and is torn by a crash mid-write. SQLite
//! in WAL mode appends each committed transaction to the write-ahead log, so a write costs
//! one `write(2)` and a process killed at any instant leaves a file that opens cleanly with
//! every committed transaction in it (the crash test in `__test__/crash.test.mjs` kills a
//! writer with SIGKILL at random points and checks exactly that).
//!
//! Durability, precisely: `synchronous = NORMAL` in WAL mode. A transaction that returned is
//! in the OS page cache and survives the death of this process. It is *not* fsynced per
//! commit, so a power loss or kernel crash may roll back the last transactions (the database
//! stays consistent). `synchronous = FULL` (the `durability: "full"` option) fsyncs every
//! commit and survives power loss, at a few milliseconds per write on ordinary disks.
//!
//! Schema, versioned with `PRAGMA user_version` and migrated forward in one transaction on
//! open ([`MIGRATIONS`]):
//! - v1 `mappings`: the mapping seam's records (`id` → pool, provider sandbox id, labels as
//!   JSON, createdAt text, detached).
//! - v2 `intents`: launches in flight (`id` → pool, state `launching`/`failed`, start and
//!   expiry in epoch ms, the writer's host, pid and session). `put` of a mapping removes the
//!   id's intent in the same transaction, so a record is never both.
//! - v3 `budget_charges`: the router's budget charges (`core::budget::ChargeRecord`, one row
//!   per provision), written by a router whose store this is and that has no coordinator, so
//!   that a restart does not reset a tenant's spend.
//! - v4 `budget_charges.cost_micros` (the exact cost, `core::budget::Micros`) and
//!   `counts_until` (when the row stops counting in every window: rows past it are dropped
//!   at each write, through an index).
//!
//! A file whose version is newer than this build knows is refused ([`StoreError::SchemaTooNew`])
//! rather than written by code that does not understand it.

use crate::core::budget::ChargeRecord;
use crate::core::ids::SandboxKey;
use crate::stores::record::{Intent, Op, Row};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a write waits for another connection's lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Forward migrations; entry `i` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // v1: the mapping seam.
    "CREATE TABLE mappings (
        id TEXT PRIMARY KEY NOT NULL,
        provider_id TEXT NOT NULL,
        provider_sandbox_id TEXT NOT NULL,
        labels TEXT NOT NULL,
        created_at TEXT NOT NULL,
        detached INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;",
    // v2: intent records (launches in flight).
    "CREATE TABLE intents (
        id TEXT PRIMARY KEY NOT NULL,
        provider_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('launching', 'failed')),
        started_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        owner_host TEXT NOT NULL,
        owner_pid INTEGER NOT NULL,
        owner_session TEXT NOT NULL
    ) WITHOUT ROWID;",
    // v3: budget charges (one row per provision that reserved a budget).
    "CREATE TABLE budget_charges (
        id TEXT PRIMARY KEY NOT NULL,
        at INTEGER NOT NULL,
        cost REAL NOT NULL,
        settled INTEGER NOT NULL,
        live INTEGER NOT NULL,
        live_until INTEGER,
        keys TEXT NOT NULL
    ) WITHOUT ROWID;",
    // v4: costs in exact micro-units, and until when a charge counts (its row goes then:
    // the ledger no longer keeps a charge for its whole window, only its totals).
    "ALTER TABLE budget_charges ADD COLUMN cost_micros INTEGER;
    ALTER TABLE budget_charges ADD COLUMN counts_until INTEGER NOT NULL DEFAULT 9223372036854775807;
    UPDATE budget_charges SET cost_micros = CAST(round(cost * 1000000) AS INTEGER);
    CREATE INDEX budget_charges_until ON budget_charges (counts_until);",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What can go wrong, each with a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file could not be created, opened, or put in WAL mode.
    #[error("the mapping store file could not be opened")]
    OpenFailed,
    /// The file was written by a newer version of this package.
    #[error("the mapping store file has schema version {0}, newer than this build's {SCHEMA_VERSION}")]
    SchemaTooNew(i64),
    /// A write failed (disk full, locked past the busy timeout, read-only file…).
    #[error("the mapping store could not write")]
    WriteFailed,
    /// A read failed, or a stored row is not a record.
    #[error("the mapping store could not read")]
    ReadFailed,
}

impl StoreError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::OpenFailed => "MAPPING_STORE_OPEN_FAILED",
            StoreError::SchemaTooNew(_) => "MAPPING_STORE_SCHEMA_TOO_NEW",
            StoreError::WriteFailed => "MAPPING_PERSISTENCE_FAILED",
            StoreError::ReadFailed => "MAPPING_READ_FAILED",
        }
    }
}

/// How much a commit is worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// WAL + `synchronous = NORMAL`: survives the process, not necessarily power loss.
    #[default]
    Normal,
    /// WAL + `synchronous = FULL`: every commit fsynced.
    Full,
}

/// One open store file.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

fn write_err(_: rusqlite::Error) -> StoreError {
    StoreError::WriteFailed
}

fn read_err(_: rusqlite::Error) -> StoreError {
    StoreError::ReadFailed
}

impl SqliteStore {
    /// Opens (creating it if absent) the store at `path`, in WAL mode, migrated to
    /// [`SCHEMA_VERSION`].
    pub fn open(path: &Path, durability: Durability) -> Result<SqliteStore, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|_| StoreError::OpenFailed)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|_| StoreError::OpenFailed)?;
        let mode: String =
            conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(|_| StoreError::OpenFailed)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::OpenFailed);
        }
        let sync = match durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", sync).map_err(|_| StoreError::OpenFailed)?;
        let mut store = SqliteStore { conn, path: path.to_path_buf() };
        store.migrate()?;
        Ok(store)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(read_err)
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        // IMMEDIATE: two processes opening a fresh file at once migrate one after the other.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|_| StoreError::OpenFailed)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|_| StoreError::OpenFailed)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew(version));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
            tx.execute_batch(sql).map_err(|_| StoreError::OpenFailed)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64).map_err(|_| StoreError::OpenFailed)?;
        }
        tx.commit().map_err(|_| StoreError::OpenFailed)
    }

    /// Applies `ops` in order in ONE transaction (group commit): all or none. Returns, per
    /// op, whether it changed a mapping (for a delete: whether a mapping existed).
    ///
    /// Why? A commit costs about the same whether it carries one row or a thousand, so
    /// writes that arrive together share one (`SqliteMappingStore` in `lib/mappings.js`
    /// gathers the writes issued in one turn of the event loop).
    pub fn apply(&mut self, ops: &[Op]) -> Result<Vec<bool>, StoreError> {
        let tx = self.conn.transaction().map_err(write_err)?;
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            out.push(match op {
                Op::Put(row) => {
                    put_in(&tx, row)?;
                    true
                }
                Op::Intent(i) => {
                    intent_in(&tx, i)?;
                    false
                }
                Op::Delete(id) => delete_in(&tx, id)?,
            });
        }
        tx.commit().map_err(write_err)?;
        Ok(out)
    }

    /// Inserts or replaces a mapping and removes the id's intent, in one transaction.
    pub fn put(&mut self, row: &Row) -> Result<(), StoreError> {
        self.apply(std::slice::from_ref(&Op::Put(row.clone()))).map(|_| ())
    }

    /// The mapping of `id`, if any (intents are not mappings).
    pub fn get(&self, id: &str) -> Result<Option<Row>, StoreError> {
        let mut s = self
            .conn
            .prepare_cached(
                "SELECT id, provider_id, provider_sandbox_id, labels, created_at, detached FROM mappings WHERE id = ?1",
            )
            .map_err(read_err)?;
        s.query_row([id], row_of).optional().map_err(read_err)
    }

    /// Removes the mapping and the intent of `id`; true if a mapping existed.
    pub fn delete(&mut self, id: &str) -> Result<bool, StoreError> {
        Ok(self.apply(&[Op::Delete(id.to_string())])?.first().copied().unwrap_or(false))
    }

    /// Every mapping, ordered by id.
    pub fn list(&self) -> Result<Vec<Row>, StoreError> {
        list_rows(&self.conn)
    }

    /// Number of mappings.
    pub fn count(&self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM mappings", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(read_err)
    }

    /// Writes (inserts or replaces) an intent. A mapping for the id wins: no intent is
    /// written beside an existing mapping.
    pub fn put_intent(&mut self, i: &Intent) -> Result<(), StoreError> {
        self.apply(std::slice::from_ref(&Op::Intent(i.clone()))).map(|_| ())
    }

    /// Writes budget charges in one transaction: a record replaces its row, None deletes it;
    /// rows that stopped counting before `now` (router clock, ms) are dropped too.
    pub fn write_charges(
        &mut self,
        changes: &[(SandboxKey, Option<ChargeRecord>)],
        now: i64,
    ) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(write_err)?;
        tx.execute("DELETE FROM budget_charges WHERE counts_until < ?1", [now]).map_err(write_err)?;
        for (id, record) in changes {
            let id = id.to_string();
            match record {
                None => {
                    tx.execute("DELETE FROM budget_charges WHERE id = ?1", [&id]).map_err(write_err)?;
                }
                Some(c) => {
                    let keys = serde_json::to_string(&c.keys).map_err(|_| StoreError::WriteFailed)?;
                    let (live, until) = match c.live {
                        None => (false, None),
                        Some(until) => (true, until),
                    };
                    tx.execute(
                        "INSERT OR REPLACE INTO budget_charges
                         (id, at, cost, settled, live, live_until, keys, cost_micros, counts_until)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                        params![id, c.at, c.cost.units(), c.settled, live, until, keys, c.cost.0, c.counts_until],
                    )
                    .map_err(write_err)?;
                }
            }
        }
        tx.commit().map_err(write_err)
    }

    /// Every budget charge (a row that cannot be read is skipped: a budget is rebuilt from
    /// what can be trusted, never refused for it).
    pub fn charges(&self) -> Result<Vec<ChargeRecord>, StoreError> {
        let mut s = self
            .conn
            .prepare_cached(
                "SELECT id, at, coalesce(cost_micros, CAST(round(cost * 1000000) AS INTEGER)), settled, live,
                 live_until, keys, counts_until FROM budget_charges",
            )
            .map_err(read_err)?;
        let rows = s
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, bool>(3)?,
                    r.get::<_, bool>(4)?,
                    r.get::<_, Option<i64>>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })
            .map_err(read_err)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, at, cost, settled, live, until, keys, counts_until) = row.map_err(read_err)?;
            let (Some(sandbox), Ok(keys)) = (SandboxKey::parse(&id), serde_json::from_str(&keys)) else { continue };
            let cost = crate::core::budget::Micros(cost.clamp(0, crate::core::budget::Micros::MAX.0));
            out.push(ChargeRecord { sandbox, at, cost, settled, live: live.then_some(until), keys, counts_until });
        }
        Ok(out)
    }

    /// Every intent, ordered by id.
    pub fn intents(&self) -> Result<Vec<Intent>, StoreError> {
        let mut s = self
            .conn
            .prepare_cached(
                "SELECT id, provider_id, state, started_at, expires_at, owner_host, owner_pid, owner_session
                 FROM intents ORDER BY id",
            )
            .map_err(read_err)?;
        let rows = s
            .query_map([], |r| {
                Ok(Intent {
                    id: r.get(0)?,
                    provider_id: r.get(1)?,
                    state: r.get(2)?,
                    started_at: r.get(3)?,
                    expires_at: r.get(4)?,
                    owner_host: r.get(5)?,
                    owner_pid: r.get(6)?,
                    owner_session: r.get(7)?,
                })
            })
            .map_err(read_err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(read_err)
    }
}

fn put_in(tx: &rusqlite::Transaction<'_>, row: &Row) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO mappings (id, provider_id, provider_sandbox_id, labels, created_at, detached)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![
            row.id,
            row.provider_id,
            row.provider_sandbox_id,
            row.labels_json,
            row.created_at,
            row.detached
        ])
    })
    .map_err(write_err)?;
    tx.prepare_cached("DELETE FROM intents WHERE id = ?1").and_then(|mut s| s.execute([&row.id])).map_err(write_err)?;
    Ok(())
}

fn intent_in(tx: &rusqlite::Transaction<'_>, i: &Intent) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO intents
           (id, provider_id, state, started_at, expires_at, owner_host, owner_pid, owner_session)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8
         WHERE NOT EXISTS (SELECT 1 FROM mappings WHERE id = ?1)",
    )
    .and_then(|mut s| {
        s.execute(params![
            i.id,
            i.provider_id,
            i.state,
            i.started_at,
            i.expires_at,
            i.owner_host,
            i.owner_pid,
            i.owner_session
        ])
    })
    .map(|_| ())
    .map_err(write_err)
}

fn delete_in(tx: &rusqlite::Transaction<'_>, id: &str) -> Result<bool, StoreError> {
    let n =
        tx.prepare_cached("DELETE FROM mappings WHERE id = ?1").and_then(|mut s| s.execute([id])).map_err(write_err)?;
    tx.prepare_cached("DELETE FROM intents WHERE id = ?1").and_then(|mut s| s.execute([id])).map_err(write_err)?;
    Ok(n > 0)
}

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        provider_id: r.get(1)?,
        provider_sandbox_id: r.get(2)?,
        labels_json: r.get(3)?,
        created_at: r.get(4)?,
        detached: r.get(5)?,
    })
}

fn list_rows(conn: &Connection) -> Result<Vec<Row>, StoreError> {
    let mut s = conn
        .prepare_cached(
            "SELECT id, provider_id, provider_sandbox_id, labels, created_at, detached FROM mappings ORDER BY id",
        )
        .map_err(read_err)?;
    let rows = s.query_map([], row_of).map_err(read_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(read_err)
}

/// Every mapping of the store at `path`, read through a connection of its own (read-only,
/// so it can run on a worker thread beside the writer: WAL readers never block writers).
/// The file must exist and be migrated (open it with [`SqliteStore::open`] first).
pub fn list_file(path: &Path) -> Result<Vec<Row>, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|_| StoreError::OpenFailed)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|_| StoreError::OpenFailed)?;
    list_rows(&conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("sqlite-store-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn row(id: &str) -> Row {
        Row {
            id: id.into(),
            provider_id: "p".into(),
            provider_sandbox_id: "remote".into(),
            labels_json: r#"{"a":"b"}"#.into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            detached: false,
        }
    }

    fn intent(id: &str) -> Intent {
        Intent {
            id: id.into(),
            provider_id: "p".into(),
            state: "launching".into(),
            started_at: 1,
            expires_at: 2,
            owner_host: "h".into(),
            owner_pid: 7,
            owner_session: "s".into(),
        }
    }

    #[test]
    fn created_on_first_open_in_wal_mode_at_the_current_version() {
        let d = dir();
        let path = d.join("m.db");
        let s = SqliteStore::open(&path, Durability::Normal).unwrap();
        assert!(path.exists());
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        let mode: String = s.conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn put_get_delete_list_round_trip_and_survive_reopening() {
        let d = dir();
        let path = d.join("m.db");
        {
            let mut s = SqliteStore::open(&path, Durability::Normal).unwrap();
            s.put(&row("sbx_b")).unwrap();
            s.put(&row("sbx_a")).unwrap();
            assert!(s.delete("sbx_b").unwrap());
            assert!(!s.delete("sbx_b").unwrap());
        }
        let s = SqliteStore::open(&path, Durability::Full).unwrap();
        assert_eq!(s.get("sbx_a").unwrap(), Some(row("sbx_a")));
        assert_eq!(s.get("sbx_b").unwrap(), None);
        assert_eq!(s.list().unwrap(), vec![row("sbx_a")]);
        assert_eq!(list_file(&path).unwrap(), vec![row("sbx_a")]);
        assert_eq!(s.count().unwrap(), 1);
    }

    #[test]
    fn must_fire_a_mapping_put_completes_its_intent() {
        let d = dir();
        let mut s = SqliteStore::open(&d.join("m.db"), Durability::Normal).unwrap();
        s.put_intent(&intent("sbx_a")).unwrap();
        assert_eq!(s.intents().unwrap(), vec![intent("sbx_a")]);
        assert_eq!(s.get("sbx_a").unwrap(), None, "an intent is not a mapping");
        s.put(&row("sbx_a")).unwrap();
        assert!(s.intents().unwrap().is_empty());
    }

    #[test]
    fn must_not_fire_an_intent_never_shadows_an_existing_mapping() {
        let d = dir();
        let mut s = SqliteStore::open(&d.join("m.db"), Durability::Normal).unwrap();
        s.put(&row("sbx_a")).unwrap();
        s.put_intent(&intent("sbx_a")).unwrap();
        assert!(s.intents().unwrap().is_empty());
        s.put_intent(&intent("sbx_b")).unwrap();
        assert!(s.delete("sbx_b").is_ok_and(|existed| !existed));
        assert!(s.intents().unwrap().is_empty(), "delete removes the intent too");
    }

    #[test]
    fn apply_writes_a_batch_in_order_in_one_transaction() {
        let d = dir();
        let mut s = SqliteStore::open(&d.join("m.db"), Durability::Normal).unwrap();
        s.put(&row("sbx_x")).unwrap();
        let out = s
            .apply(&[
                Op::Intent(intent("sbx_a")),
                Op::Put(row("sbx_a")),
                Op::Delete("sbx_x".into()),
                Op::Delete("sbx_missing".into()),
                Op::Intent(intent("sbx_b")),
            ])
            .unwrap();
        assert_eq!(out, vec![false, true, true, false, false]);
        assert_eq!(s.list().unwrap(), vec![row("sbx_a")]);
        assert_eq!(s.intents().unwrap().iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), vec!["sbx_b"]);
    }

    #[test]
    fn a_version_1_file_is_migrated_with_its_records() {
        let d = dir();
        let path = d.join("v1.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(MIGRATIONS[0]).unwrap();
            c.pragma_update(None, "user_version", 1).unwrap();
            c.execute(
                "INSERT INTO mappings VALUES ('sbx_a', 'p', 'remote', '{\"a\":\"b\"}', '2026-01-01T00:00:00.000Z', 0)",
                [],
            )
            .unwrap();
        }
        let mut s = SqliteStore::open(&path, Durability::Normal).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(s.get("sbx_a").unwrap(), Some(row("sbx_a")));
        s.put_intent(&intent("sbx_b")).unwrap();
        assert_eq!(s.intents().unwrap().len(), 1);
    }

    #[test]
    fn must_fire_a_file_from_a_newer_version_is_refused_unchanged() {
        let d = dir();
        let path = d.join("v9.db");
        {
            let c = Connection::open(&path).unwrap();
            c.pragma_update(None, "user_version", 9).unwrap();
        }
        assert_eq!(SqliteStore::open(&path, Durability::Normal).unwrap_err(), StoreError::SchemaTooNew(9));
        let c = Connection::open(&path).unwrap();
        let v: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(v, 9);
    }

    #[test]
    fn must_fire_a_path_that_cannot_be_a_file_fails_to_open() {
        let d = dir();
        assert_eq!(SqliteStore::open(&d, Durability::Normal).unwrap_err(), StoreError::OpenFailed);
        assert_eq!(
            SqliteStore::open(&d.join("missing-dir").join("m.db"), Durability::Normal).unwrap_err(),
            StoreError::OpenFailed
        );
    }
}

/// One store file, opened on first use and shared by the handles that use it (the
/// `SqliteMappingStore` and its router's budget charges).
#[derive(Clone)]
pub struct StoreFile {
    path: PathBuf,
    durability: Durability,
    slot: Arc<Mutex<Option<SqliteStore>>>,
}

impl StoreFile {
    /// The file at `path` (nothing is opened yet).
    pub fn new(path: PathBuf, durability: Durability) -> Self {
        StoreFile { path, durability, slot: Arc::new(Mutex::new(None)) }
    }

    /// Runs `f` with the store, opening it first if need be.
    pub fn with<T>(&self, f: impl FnOnce(&mut SqliteStore) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut slot = self.slot.lock().map_err(|_| StoreError::OpenFailed)?;
        if slot.is_none() {
            *slot = Some(SqliteStore::open(&self.path, self.durability)?);
        }
        let store = slot.as_mut().ok_or(StoreError::OpenFailed)?;
        f(store)
    }

    /// Closes the file (the next use opens it again).
    pub fn close(&self) {
        if let Ok(mut slot) = self.slot.lock() {
            slot.take();
        }
    }
}

/// A router's budget charges in its `SqliteMappingStore` file. Why synchronous writes? A
/// charge changes at a reservation and at a settlement, in the native call that decided it;
/// a WAL commit is tens of microseconds, and the store's own writes of the same provision
/// (the intent, the record) cost as much. A write that fails is dropped: the in-process
/// ledger stays the truth for this process, and the next write of that charge carries its
/// state again.
impl crate::core::router::budgets::ChargeSink for StoreFile {
    fn write(&self, changes: Vec<(SandboxKey, Option<ChargeRecord>)>, now: i64) {
        if !changes.is_empty() {
            let _ = self.with(|s| s.write_charges(&changes, now));
        }
    }

    fn load(&self) -> Vec<ChargeRecord> {
        self.with(|s| s.charges()).unwrap_or_default()
    }
}
