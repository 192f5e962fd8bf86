//! The records both mapping stores keep: a mapping row, a launch intent, one write of a
//! batch.
//!
//! Why a file of their own? The SQLite and the PostgreSQL store hold the same two tables
//! with the same columns, and the glue converts both stores' rows the same way; neither
//! store owns the shapes, so neither imports the other for them.

/// A mapping row (labels as their JSON text: validated by the caller before a write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `sbx_…`.
    pub id: String,
    /// Pool id.
    pub provider_id: String,
    /// The provider's sandbox id.
    pub provider_sandbox_id: String,
    /// Labels, a JSON object of strings.
    pub labels_json: String,
    /// ISO-8601.
    pub created_at: String,
    /// From `provisionDetached`.
    pub detached: bool,
}

/// A launch in flight, or one that failed with its outcome unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// `sbx_…`.
    pub id: String,
    /// Pool of the current attempt.
    pub provider_id: String,
    /// `launching` or `failed`.
    pub state: String,
    /// Epoch ms.
    pub started_at: i64,
    /// Epoch ms after which the writer's provision has certainly ended.
    pub expires_at: i64,
    /// Host name of the writer.
    pub owner_host: String,
    /// Process id of the writer.
    pub owner_pid: i64,
    /// Random per-router session id of the writer.
    pub owner_session: String,
}

/// One write of a batch (`SqliteStore::apply`, and the PostgreSQL store's writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A mapping's put (it completes the id's intent).
    Put(Row),
    /// An intent's put (never beside an existing mapping).
    Intent(Intent),
    /// A delete of the id's mapping and intent.
    Delete(String),
}
