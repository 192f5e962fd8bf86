//! The shared store: mappings, intents and capacity holds in PostgreSQL (`tokio-postgres`).
//!
//! Why PostgreSQL? Many router processes on many machines need one truth for two things: which
//! provider sandbox an `sbx_` id names, and how much of a pool's quota is held by launches in
//! flight. Users who outgrow one process already run PostgreSQL; its transactions and row
//! locks are the coordination, so the router needs no coordinator service of its own.
//!
//! Every database call is bounded twice: by a client-side deadline around the whole call
//! (acquiring a connection, connecting, every round trip; see [`PgStore::bounded`]) and by
//! the server's `statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout`
//! (set as connection options), so a lock held by a client that vanished mid-transaction is
//! freed by the server. A connection that timed out or failed is discarded, never reused.
//!
//! Schema, versioned in `sandbox_router_schema` and migrated forward on first use, in one
//! transaction that first takes a transaction-scoped advisory lock
//! ([`MIGRATION_LOCK`]): two processes starting at once migrate one after the other (the
//! second finds the work done). A table cannot be row-locked before it exists, which is why
//! this one lock is advisory. A database whose version is newer than this build's is refused.
//! - v1 mappings and intents (the SQLite store's two tables, same columns);
//! - v2 the shared capacity ledger: `pools` (one row per pool id: the admission lock),
//!   `sessions` (each router process's lease), `holds` (one row per admitted launch), and the
//!   read sequence.
//! - v3 budgets: `budget_keys` (one row per rule and label value: the reservation lock),
//!   `budget_charges` (one row per provision and rule), and `holds.sandbox_id` (a destroyed
//!   sandbox gives its hold back).
//! - v4 the fleet's warm inventory, `warm`: one row per refill launch granted (`launching`,
//!   with its launcher's session and an expiry, like a hold) or per idle member (`idle`,
//!   with its ids and launch instant). See "The warm inventory" below.
//! - v5 and v6: running totals (a pool's `held`, a budget key's totals) and sweeps that read
//!   only what can have lapsed (issue 34; see the migrations' comments);
//! - v7 the fleet's pacing: a pool's token bucket and `Retry-After` cooldown on its row, and
//!   the turns of the lanes waiting for its tokens (`lanes`, `turns`).
//!
//! # The warm inventory
//!
//! With the store as `capacity.coordinator`, a warm pool's `size` is the fleet's target and
//! its members are the fleet's. Three transactions keep that true:
//! - a **reservation** (`warm_reserve`) takes the pool's admission row lock (the
//!   `sandbox_router_pools` row `warm/<fleet>/<pool>`: no pool id contains a `/`, so it
//!   never meets a capacity pool's row), expires the launching rows of dead sessions or
//!   past their settle window, counts idle and launching rows and grants what the core's
//!   rule allows (`core::warm::reserve_count`): refills of the whole fleet never exceed the
//!   target;
//! - a **settlement** (`warm_settle`) turns the granted row into an idle member and writes
//!   the member's mapping record in one transaction (a process that dies between its
//!   launch and this commit leaves a stamped sandbox with a `launching` intent, which
//!   `reconcile` reclaims as any launch's);
//! - a **claim** (`warm_claim`) picks the oldest idle member above the core's floor with
//!   `FOR UPDATE SKIP LOCKED`, deletes its row and rewrites its mapping with the claiming
//!   provision's labels, in one transaction: two processes never get one member (the
//!   second skips the locked row and takes the next, or none), and a process that dies
//!   mid-claim loses nothing (the rollback leaves the member idle; after the commit it is
//!   mapped).
//!
//! Nothing from the database's own messages (which can name users, hosts, databases) leaves
//! this file: every failure is a [`PgFailure`] without text.

use crate::core::warm::reserve_count;
use crate::stores::pg_tls::TlsSettings;
use crate::stores::record::{Intent, Row};
use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;
use tokio::sync::{OnceCell, Semaphore};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Statement};

mod budget;
mod capacity;
mod decisions;
mod launch;

pub use budget::{Settled, StatusAsk};
pub use capacity::Verdict;
pub use decisions::DecisionRow;
pub use launch::{BudgetAsk, BudgetSettlement, HoldSettlement, LaunchSettled, Prepared};

/// The advisory lock key that serializes migrations (any constant unlikely to be used by the
/// application sharing the database: "sbxroute" in ASCII).
pub const MIGRATION_LOCK: i64 = 0x7362_7872_6f75_7465;

/// Forward migrations; entry `i` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // v1: the mapping seam and intents.
    "CREATE TABLE sandbox_router_mappings (
        id TEXT PRIMARY KEY,
        provider_id TEXT NOT NULL,
        provider_sandbox_id TEXT NOT NULL,
        labels TEXT NOT NULL,
        created_at TEXT NOT NULL,
        detached BOOLEAN NOT NULL DEFAULT FALSE
    );
    CREATE TABLE sandbox_router_intents (
        id TEXT PRIMARY KEY,
        provider_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('launching', 'failed')),
        started_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        owner_host TEXT NOT NULL,
        owner_pid BIGINT NOT NULL,
        owner_session TEXT NOT NULL
    );",
    // v2: the shared capacity ledger.
    "CREATE SEQUENCE sandbox_router_read_seq;
    CREATE TABLE sandbox_router_pools (pool TEXT PRIMARY KEY);
    CREATE TABLE sandbox_router_sessions (
        session TEXT PRIMARY KEY,
        lease_until TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE sandbox_router_holds (
        token BIGSERIAL PRIMARY KEY,
        pool TEXT NOT NULL,
        session TEXT NOT NULL,
        amounts TEXT NOT NULL,
        expect TEXT NOT NULL,
        settled_seq BIGINT,
        expires_at TIMESTAMPTZ NOT NULL
    );
    CREATE INDEX sandbox_router_holds_pool ON sandbox_router_holds (pool);",
    // v3: budgets, and the sandbox each hold is for.
    "ALTER TABLE sandbox_router_holds ADD COLUMN sandbox_id TEXT;
    CREATE INDEX sandbox_router_holds_sandbox ON sandbox_router_holds (sandbox_id);
    CREATE TABLE sandbox_router_budget_keys (rule TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (rule, key));
    CREATE TABLE sandbox_router_budget_charges (
        id BIGSERIAL PRIMARY KEY,
        sandbox_id TEXT NOT NULL,
        rule TEXT NOT NULL,
        key TEXT NOT NULL,
        at_ms BIGINT NOT NULL,
        cost DOUBLE PRECISION NOT NULL,
        settled BOOLEAN NOT NULL DEFAULT FALSE,
        live BOOLEAN NOT NULL DEFAULT TRUE,
        live_until TIMESTAMPTZ,
        session TEXT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
    CREATE INDEX sandbox_router_budget_charges_key ON sandbox_router_budget_charges (rule, key, at_ms);
    CREATE INDEX sandbox_router_budget_charges_sandbox ON sandbox_router_budget_charges (sandbox_id);",
    // v4: the fleet's warm inventory.
    "CREATE TABLE sandbox_router_warm (
        token BIGSERIAL PRIMARY KEY,
        fleet TEXT NOT NULL,
        pool TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('launching', 'idle')),
        id TEXT UNIQUE,
        provider_sandbox_id TEXT,
        launched_at BIGINT,
        session TEXT NOT NULL,
        expires_at TIMESTAMPTZ
    );
    CREATE INDEX sandbox_router_warm_pool ON sandbox_router_warm (fleet, pool, state, launched_at);",
    // v5: running totals (issue 34). A pool's row keeps what its holds hold (`held`, exact
    // numeric sums per resource; `ok`: the last admission's verdict), so an admission is one
    // conditional statement; hold amounts become JSON objects. A budget key's row keeps its
    // window's totals; a charge its cost in micro-units, its state (0 in flight, 1 settled)
    // and the window it counts in (`win`). Old processes still running fail closed against
    // it (the columns they read and write are gone or retyped) instead of writing around the
    // totals. The keys' window sums are built by their first reservation (`built`): the
    // rules' windows are the routers' configuration.
    "ALTER TABLE sandbox_router_pools ADD COLUMN held JSONB NOT NULL DEFAULT '{}'::jsonb;
    ALTER TABLE sandbox_router_pools ADD COLUMN ok BOOLEAN NOT NULL DEFAULT FALSE;
    ALTER TABLE sandbox_router_holds ADD COLUMN amounts_v5 JSONB;
    ALTER TABLE sandbox_router_holds ADD COLUMN expect_v5 JSONB;
    UPDATE sandbox_router_holds h SET
        amounts_v5 = (SELECT coalesce(jsonb_object_agg(e->>0, (e->>1)::numeric), '{}'::jsonb)
            FROM jsonb_array_elements(h.amounts::jsonb) e),
        expect_v5 = (SELECT coalesce(jsonb_object_agg(e->>0, (e->>1)::numeric), '{}'::jsonb)
            FROM jsonb_array_elements(h.expect::jsonb) e);
    ALTER TABLE sandbox_router_holds DROP COLUMN amounts;
    ALTER TABLE sandbox_router_holds DROP COLUMN expect;
    ALTER TABLE sandbox_router_holds RENAME COLUMN amounts_v5 TO amounts;
    ALTER TABLE sandbox_router_holds RENAME COLUMN expect_v5 TO expect;
    ALTER TABLE sandbox_router_holds ALTER COLUMN amounts SET NOT NULL;
    ALTER TABLE sandbox_router_holds ALTER COLUMN expect SET NOT NULL;
    INSERT INTO sandbox_router_pools (pool) SELECT DISTINCT pool FROM sandbox_router_holds ON CONFLICT (pool) DO NOTHING;
    UPDATE sandbox_router_pools p SET held = coalesce((SELECT jsonb_object_agg(x.r, x.n) FROM (
        SELECT e.key AS r, sum(e.value::numeric) AS n FROM sandbox_router_holds h, jsonb_each_text(h.amounts) e
        WHERE h.pool = p.pool GROUP BY e.key) x), '{}'::jsonb);
    ALTER TABLE sandbox_router_budget_keys
        ADD COLUMN window_start BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN used_cost BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN used_launches BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN reserved_cost BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN reserved_launches BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN live BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN inflight BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN last_at BIGINT NOT NULL DEFAULT -9223372036854775808,
        ADD COLUMN built BOOLEAN NOT NULL DEFAULT TRUE;
    ALTER TABLE sandbox_router_budget_charges ADD COLUMN micros BIGINT, ADD COLUMN state SMALLINT, ADD COLUMN win BIGINT;
    UPDATE sandbox_router_budget_charges SET micros = round(cost * 1000000)::bigint, state = CASE WHEN settled THEN 1 ELSE 0 END;
    ALTER TABLE sandbox_router_budget_charges DROP COLUMN cost, DROP COLUMN settled;
    ALTER TABLE sandbox_router_budget_charges RENAME COLUMN micros TO cost;
    ALTER TABLE sandbox_router_budget_charges ALTER COLUMN cost SET NOT NULL,
        ALTER COLUMN state SET NOT NULL, ALTER COLUMN state SET DEFAULT 0;
    INSERT INTO sandbox_router_budget_keys (rule, key)
        SELECT DISTINCT rule, key FROM sandbox_router_budget_charges ON CONFLICT (rule, key) DO NOTHING;
    UPDATE sandbox_router_budget_keys t SET built = FALSE,
        live = (SELECT count(*) FROM sandbox_router_budget_charges c WHERE c.rule = t.rule AND c.key = t.key AND c.state = 1 AND c.live),
        inflight = (SELECT count(*) FROM sandbox_router_budget_charges c WHERE c.rule = t.rule AND c.key = t.key AND c.state = 0),
        last_at = coalesce((SELECT max(c.at_ms) FROM sandbox_router_budget_charges c WHERE c.rule = t.rule AND c.key = t.key),
            -9223372036854775808)
    WHERE EXISTS (SELECT 1 FROM sandbox_router_budget_charges c WHERE c.rule = t.rule AND c.key = t.key);
    DROP INDEX sandbox_router_budget_charges_key;
    CREATE INDEX sandbox_router_budget_charges_sliding ON sandbox_router_budget_charges (rule, key, at_ms) WHERE win = 0;
    CREATE INDEX sandbox_router_budget_charges_inflight ON sandbox_router_budget_charges (rule, key) WHERE state = 0;
    CREATE INDEX sandbox_router_budget_charges_unknown ON sandbox_router_budget_charges (rule, key, live_until)
        WHERE live AND live_until IS NOT NULL;
    CREATE INDEX sandbox_router_budget_charges_done ON sandbox_router_budget_charges (rule, key, win)
        WHERE state = 1 AND NOT live AND win IS NOT NULL;
    CREATE INDEX sandbox_router_budget_charges_gone ON sandbox_router_budget_charges (rule, key)
        WHERE state = 1 AND NOT live AND win IS NULL;",
    // v6: sweeps that do not walk dead index entries (issue 34). Every settled charge leaves
    // a dead entry in an index on in-flight charges until VACUUM removes it, and a bitmap
    // scan visits each again; with a day's window VACUUM comes ever more rarely (its
    // threshold is a fraction of the live rows). A reservation's sweep of expired in-flight
    // charges scans `expires_at <= now()` (a settled charge's old entry lies in that range
    // only once its hold has expired), and finds the charges of lapsed leases from the
    // sessions whose lease lapsed (normally none). An admission's sweep of holds reads the
    // expired ones by (pool, expires_at), the settled ones by (pool, settled_seq) and those
    // of lapsed leases by session.
    "DROP INDEX sandbox_router_budget_charges_inflight;
    CREATE INDEX sandbox_router_budget_charges_expiring ON sandbox_router_budget_charges (rule, key, expires_at)
        WHERE state = 0;
    CREATE INDEX sandbox_router_budget_charges_session ON sandbox_router_budget_charges (session) WHERE state = 0;
    DROP INDEX sandbox_router_holds_pool;
    CREATE INDEX sandbox_router_holds_pool ON sandbox_router_holds (pool, expires_at);
    CREATE INDEX sandbox_router_holds_settled ON sandbox_router_holds (pool, settled_seq) WHERE settled_seq IS NOT NULL;
    CREATE INDEX sandbox_router_holds_session ON sandbox_router_holds (session) WHERE settled_seq IS NULL;",
    // v7: the fleet's pacing (issue 33): each pool's token bucket (`tokens` at `tokens_at`;
    // null: a full bucket) and its `Retry-After` cooldown, on the pool's admission row, so an
    // admission takes its token in its own statement (`capacity.rs`); and the fleet's turns of a paced pool: each lane's last token, and the claims of the lanes
    // waiting for one (one per process and lane; see `capacity.rs`).
    "ALTER TABLE sandbox_router_pools ADD COLUMN tokens DOUBLE PRECISION, ADD COLUMN tokens_at TIMESTAMPTZ,
        ADD COLUMN cooling_until TIMESTAMPTZ;
    CREATE TABLE sandbox_router_lanes (pool TEXT NOT NULL, lane TEXT NOT NULL, served_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (pool, lane));
    CREATE INDEX sandbox_router_lanes_served ON sandbox_router_lanes (pool, served_at);
    CREATE TABLE sandbox_router_turns (pool TEXT NOT NULL, lane TEXT NOT NULL, session TEXT NOT NULL,
        since TIMESTAMPTZ NOT NULL, until TIMESTAMPTZ NOT NULL, PRIMARY KEY (pool, lane, session));",
    // v8: the fleet's decision history (issue 32; `decisions.rs`): each record as JSONB with
    // its id, instant (`at`, the deciding router's clock) and sandbox id; `n` orders the
    // writes, so the count retention is one range delete, and `written_at` the age retention.
    "CREATE TABLE sandbox_router_decisions (n BIGSERIAL NOT NULL, id TEXT PRIMARY KEY, at BIGINT NOT NULL,
        sandbox_id TEXT, record JSONB NOT NULL, written_at TIMESTAMPTZ NOT NULL DEFAULT now());
    CREATE INDEX sandbox_router_decisions_n ON sandbox_router_decisions (n);
    CREATE INDEX sandbox_router_decisions_at ON sandbox_router_decisions (at, n);
    CREATE INDEX sandbox_router_decisions_sandbox ON sandbox_router_decisions (sandbox_id);
    CREATE INDEX sandbox_router_decisions_written ON sandbox_router_decisions (written_at);",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What went wrong, without any of the database's text. The glue gives it the code of the
/// operation it failed (a write, a read, an admission).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PgFailure {
    /// Connecting, a query, or the commit failed (database down, refused, killed the
    /// connection, failed mid-transaction).
    #[error("the database call failed")]
    Failed,
    /// The call did not finish within its deadline.
    #[error("the database call did not finish within its deadline")]
    TimedOut,
    /// The database's schema is newer than this build's.
    #[error("the database has schema version {0}, newer than this build's {SCHEMA_VERSION}")]
    SchemaTooNew(i64),
    /// A stored row is not a record this build can read.
    #[error("a stored row is malformed")]
    Malformed,
    /// The TLS connection failed: the server's certificate was not trusted or not for its
    /// host name, or the server does not offer TLS where the mode requires it.
    #[error("the TLS connection to the database failed")]
    Tls,
}

impl From<tokio_postgres::Error> for PgFailure {
    fn from(e: tokio_postgres::Error) -> Self {
        // tokio-postgres does not expose its error kinds; a TLS failure (our connector's,
        // or "server does not support TLS") is the one whose text starts like this. The text
        // itself goes nowhere.
        if e.to_string().starts_with("error performing TLS handshake") {
            PgFailure::Tls
        } else {
            PgFailure::Failed
        }
    }
}

/// Tuning of a store (the connection itself is a [`Config`], password included, kept here
/// and nowhere else).
#[derive(Debug, Clone)]
pub struct PgSettings {
    /// Bound of every call (client side), and of every statement (server side).
    pub timeout: Duration,
    /// Most connections open at once.
    pub pool_size: usize,
    /// Lease of this process's in-flight holds: renewed every third of it while the store
    /// is open; a process that died stops renewing, and its holds expire.
    pub lease: Duration,
}

/// A connection and its prepared statements.
struct Conn {
    client: Client,
    statements: HashMap<&'static str, Statement>,
}

impl Conn {
    async fn statement(&mut self, sql: &'static str) -> Result<Statement, PgFailure> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).await?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }
}

/// A small pool: at most `pool_size` connections, idle ones reused, failed ones dropped.
struct Pool {
    config: Config,
    tls: TlsSettings,
    idle: StdMutex<Vec<Conn>>,
    permits: Semaphore,
    /// One connection beyond `pool_size` for the lease's renewal alone: a burst of
    /// admissions queued on `permits` must not delay it past the lease (the process's own
    /// in-flight holds and budget reservations would then look abandoned, and be freed).
    lease_permit: Semaphore,
}

/// A connection borrowed from the pool: given back by [`Lease::done`] only; dropped (and so
/// closed) when the call failed or its deadline cancelled it.
struct Lease<'a> {
    conn: Option<Conn>,
    pool: &'a Pool,
    _permit: tokio::sync::SemaphorePermit<'a>,
}

impl Lease<'_> {
    fn conn(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("a lease holds its connection until done")
    }

    fn done(mut self) {
        if let Some(c) = self.conn.take() {
            if !c.client.is_closed() {
                if let Ok(mut idle) = self.pool.idle.lock() {
                    idle.push(c);
                }
            }
        }
    }
}

impl Pool {
    async fn get(&self, for_lease: bool) -> Result<Lease<'_>, PgFailure> {
        let permits = if for_lease { &self.lease_permit } else { &self.permits };
        let permit = permits.acquire().await.map_err(|_| PgFailure::Failed)?;
        let reused = {
            let mut idle = self.idle.lock().map_err(|_| PgFailure::Failed)?;
            let mut found = None;
            while let Some(c) = idle.pop() {
                if !c.client.is_closed() {
                    found = Some(c);
                    break;
                }
            }
            found
        };
        let conn = match reused {
            Some(c) => c,
            None => {
                let client = match &self.tls.connector {
                    None => {
                        let (client, connection) = self.config.connect(NoTls).await?;
                        tokio::spawn(async move {
                            let _ = connection.await;
                        });
                        client
                    }
                    Some(tls) => {
                        let (client, connection) = self.config.connect(tls.clone()).await?;
                        tokio::spawn(async move {
                            let _ = connection.await;
                        });
                        client
                    }
                };
                Conn { client, statements: HashMap::new() }
            }
        };
        Ok(Lease { conn: Some(conn), pool: self, _permit: permit })
    }
}

/// Holds whose settlement could not be written yet (retried by the lease task).
#[derive(Debug, Clone, Copy)]
struct PendingSettle {
    token: i64,
    allocated: bool,
    ttl_ms: i64,
}

/// One database: the pool, the migration state, this process's session.
pub struct PgStore {
    pool: Pool,
    settings: PgSettings,
    ready: OnceCell<i64>,
    session: String,
    session_ready: OnceCell<()>,
    pending: StdMutex<Vec<PendingSettle>>,
    /// Budget settlements not written yet: (sandbox, how, until).
    pending_budget: StdMutex<Vec<(String, String, i64)>>,
    /// This process's budget reservations not settled yet (`budget::Remembered`).
    remembered: StdMutex<budget::Remembered>,
    /// The rules this process reserves under, with the start of their current window at
    /// the last reservation (the lease task's clean-up of idle key rows).
    rules_seen: StdMutex<HashMap<String, (i64, i16)>>,
    /// The retries and clean-up that follow a renewal are running.
    upkeep: std::sync::atomic::AtomicBool,
    closed: std::sync::atomic::AtomicBool,
    /// When this process last pruned the decision table (epoch ms; `decisions.rs`).
    decisions_pruned_at: std::sync::atomic::AtomicI64,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the config: it holds the password.
        f.debug_struct("PgStore").field("session", &self.session).finish_non_exhaustive()
    }
}

fn rand_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    if getrandom::fill(&mut b).is_err() {
        // The session id only has to differ between live processes.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        b = (t ^ u128::from(std::process::id())).to_le_bytes()[..bytes.min(16)].to_vec();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const PUT: &str = "WITH gone AS (DELETE FROM sandbox_router_intents WHERE id = $1)
    INSERT INTO sandbox_router_mappings (id, provider_id, provider_sandbox_id, labels, created_at, detached)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (id) DO UPDATE SET provider_id = EXCLUDED.provider_id,
      provider_sandbox_id = EXCLUDED.provider_sandbox_id, labels = EXCLUDED.labels,
      created_at = EXCLUDED.created_at, detached = EXCLUDED.detached";
/// [`PUT`]'s parameters for `row`.
pub(super) fn put_params(row: &Row) -> [&(dyn ToSql + Sync); 6] {
    [&row.id, &row.provider_id, &row.provider_sandbox_id, &row.labels_json, &row.created_at, &row.detached]
}

const GET: &str = "SELECT id, provider_id, provider_sandbox_id, labels, created_at, detached
    FROM sandbox_router_mappings WHERE id = $1";
const DELETE: &str = "WITH gone AS (DELETE FROM sandbox_router_intents WHERE id = $1)
    DELETE FROM sandbox_router_mappings WHERE id = $1";
const LIST: &str = "SELECT id, provider_id, provider_sandbox_id, labels, created_at, detached
    FROM sandbox_router_mappings ORDER BY id";
const COUNT: &str = "SELECT count(*) FROM sandbox_router_mappings";
const PUT_INTENT: &str = "INSERT INTO sandbox_router_intents
    (id, provider_id, state, started_at, expires_at, owner_host, owner_pid, owner_session)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (id) DO UPDATE SET provider_id = EXCLUDED.provider_id, state = EXCLUDED.state,
      started_at = EXCLUDED.started_at, expires_at = EXCLUDED.expires_at,
      owner_host = EXCLUDED.owner_host, owner_pid = EXCLUDED.owner_pid,
      owner_session = EXCLUDED.owner_session";
const INTENTS: &str = "SELECT id, provider_id, state, started_at, expires_at, owner_host, owner_pid, owner_session
    FROM sandbox_router_intents ORDER BY id";
const NEXT_SEQ: &str = "SELECT nextval('sandbox_router_read_seq')";
const RENEW: &str = "INSERT INTO sandbox_router_sessions (session, lease_until)
    VALUES ($1, now() + $2 * interval '1 millisecond')
    ON CONFLICT (session) DO UPDATE SET lease_until = EXCLUDED.lease_until";
// A warm pool's row is its refills' lock (see "The warm inventory").
const LOCK_POOL: &str = "INSERT INTO sandbox_router_pools (pool) VALUES ($1)
    ON CONFLICT (pool) DO UPDATE SET pool = EXCLUDED.pool";
// A session's end: its in-flight holds (with their pools' totals) and reservations (with
// their keys' totals) go.
const END_SESSION: &str = concat!(
    "WITH gone AS (DELETE FROM sandbox_router_holds WHERE session = $1 AND settled_seq IS NULL RETURNING pool, amounts),
    held AS (",
    capacity::minus_gone!(),
    "),
    ",
    budget::end_session_budget!(),
    "
    DELETE FROM sandbox_router_sessions WHERE session = $1"
);
const HELD: &str = "SELECT count(*) FROM sandbox_router_holds h WHERE h.pool = $1 AND h.expires_at > now()
    AND (h.settled_seq IS NOT NULL OR EXISTS (SELECT 1 FROM sandbox_router_sessions s
        WHERE s.session = h.session AND s.lease_until > now()))";

const WARM_EXPIRE_LAUNCHING: &str = "DELETE FROM sandbox_router_warm w WHERE w.fleet = $1 AND w.pool = $2
    AND w.state = 'launching' AND (w.expires_at <= now() OR NOT EXISTS (SELECT 1 FROM sandbox_router_sessions s
        WHERE s.session = w.session AND s.lease_until > now()))";
const WARM_COUNT: &str = "SELECT count(*) FILTER (WHERE state = 'idle'), count(*) FILTER (WHERE state = 'launching')
    FROM sandbox_router_warm WHERE fleet = $1 AND pool = $2";
const WARM_RESERVE: &str = "INSERT INTO sandbox_router_warm (fleet, pool, state, session, expires_at)
    SELECT $1, $2, 'launching', $3, now() + $4 * interval '1 millisecond' FROM generate_series(1, $5) RETURNING token";
const WARM_RELEASE: &str = "DELETE FROM sandbox_router_warm WHERE token = $1 AND state = 'launching'";
// The granted row becomes the idle member; a row that expired meanwhile is made again
// (the member exists: better kept than destroyed).
const WARM_SETTLE: &str = "WITH up AS (UPDATE sandbox_router_warm SET state = 'idle', id = $4,
        provider_sandbox_id = $5, launched_at = $6, expires_at = NULL WHERE token = $1 AND state = 'launching'
        RETURNING token)
    INSERT INTO sandbox_router_warm (fleet, pool, state, id, provider_sandbox_id, launched_at, session)
    SELECT $2, $3, 'idle', $4, $5, $6, $7 WHERE NOT EXISTS (SELECT 1 FROM up)";
const WARM_PICK: &str = "SELECT token, id, provider_sandbox_id, launched_at FROM sandbox_router_warm
    WHERE fleet = $1 AND pool = $2 AND state = 'idle' AND launched_at >= $3
    ORDER BY launched_at, token LIMIT 1 FOR UPDATE SKIP LOCKED";
const WARM_DELETE: &str = "DELETE FROM sandbox_router_warm WHERE token = $1";
const WARM_EXPIRE: &str = "DELETE FROM sandbox_router_warm WHERE token IN (SELECT token FROM sandbox_router_warm
        WHERE fleet = $1 AND pool = $2 AND state = 'idle' AND launched_at < $3 FOR UPDATE SKIP LOCKED)
    RETURNING pool, id, provider_sandbox_id, launched_at";
const WARM_TAKE: &str = "DELETE FROM sandbox_router_warm WHERE token IN (SELECT token FROM sandbox_router_warm
        WHERE id = $1 AND state = 'idle' FOR UPDATE SKIP LOCKED)
    RETURNING pool, id, provider_sandbox_id, launched_at";
const WARM_MINE: &str = "SELECT pool, id, provider_sandbox_id, launched_at FROM sandbox_router_warm
    WHERE fleet = $1 AND pool = $2 AND state = 'idle' AND session = $3 ORDER BY launched_at, token";
const WARM_TAKE_MINE: &str = "WITH gone AS (DELETE FROM sandbox_router_warm WHERE session = $2 AND state = 'launching')
    DELETE FROM sandbox_router_warm WHERE token IN (SELECT token FROM sandbox_router_warm
        WHERE fleet = $1 AND state = 'idle' AND session = $2 FOR UPDATE SKIP LOCKED)
    RETURNING pool, id, provider_sandbox_id, launched_at";
const WARM_COUNTS: &str = "SELECT pool, count(*) FILTER (WHERE state = 'idle'),
        count(*) FILTER (WHERE state = 'launching' AND expires_at > now() AND EXISTS (SELECT 1
            FROM sandbox_router_sessions s WHERE s.session = w.session AND s.lease_until > now()))
    FROM sandbox_router_warm w WHERE fleet = $1 GROUP BY pool ORDER BY pool";
const WARM_CLAIMABLE: &str = "SELECT count(*) FROM sandbox_router_warm
    WHERE fleet = $1 AND pool = $2 AND state = 'idle' AND launched_at >= $3";

/// An idle member of the fleet's inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmRow {
    /// Its pool.
    pub pool: String,
    /// Its router id.
    pub id: String,
    /// The provider's id of it.
    pub provider_sandbox_id: String,
    /// When it became idle, router-clock epoch ms.
    pub launched_at: i64,
}

fn warm_row(r: &tokio_postgres::Row) -> Result<WarmRow, PgFailure> {
    Ok(WarmRow {
        pool: r.try_get(0).map_err(|_| PgFailure::Malformed)?,
        id: r.try_get::<_, Option<String>>(1).map_err(|_| PgFailure::Malformed)?.ok_or(PgFailure::Malformed)?,
        provider_sandbox_id: r
            .try_get::<_, Option<String>>(2)
            .map_err(|_| PgFailure::Malformed)?
            .ok_or(PgFailure::Malformed)?,
        launched_at: r.try_get::<_, Option<i64>>(3).map_err(|_| PgFailure::Malformed)?.ok_or(PgFailure::Malformed)?,
    })
}

/// One pool's counts in the fleet's inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmCount {
    /// The pool.
    pub pool: String,
    /// Idle members.
    pub idle: i64,
    /// Granted launches in flight (of live sessions, unexpired).
    pub launching: i64,
}

fn row_of(r: &tokio_postgres::Row) -> Result<Row, PgFailure> {
    Ok(Row {
        id: r.try_get(0).map_err(|_| PgFailure::Malformed)?,
        provider_id: r.try_get(1).map_err(|_| PgFailure::Malformed)?,
        provider_sandbox_id: r.try_get(2).map_err(|_| PgFailure::Malformed)?,
        labels_json: r.try_get(3).map_err(|_| PgFailure::Malformed)?,
        created_at: r.try_get(4).map_err(|_| PgFailure::Malformed)?,
        detached: r.try_get(5).map_err(|_| PgFailure::Malformed)?,
    })
}

impl PgStore {
    /// A store over `config`, connecting as `tls` says (nothing is connected until the
    /// first call). The server-side bounds and the TLS negotiation mode are set on the
    /// connection options here.
    pub fn new(mut config: Config, tls: TlsSettings, settings: PgSettings) -> PgStore {
        config.ssl_mode(tls.mode.ssl_mode());
        let ms = settings.timeout.as_millis().max(1);
        config.options(format!(
            "-c statement_timeout={ms} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={} -c plan_cache_mode=force_generic_plan",
            ms * 2
        ));
        config.connect_timeout(settings.timeout);
        config.keepalives(true);
        if config.get_application_name().is_none() {
            config.application_name("agent-relay-sandbox-router");
        }
        PgStore {
            pool: Pool {
                config,
                tls,
                idle: StdMutex::new(Vec::new()),
                permits: Semaphore::new(settings.pool_size.max(1)),
                lease_permit: Semaphore::new(1),
            },
            settings,
            ready: OnceCell::new(),
            session: rand_hex(12),
            session_ready: OnceCell::new(),
            pending: StdMutex::new(Vec::new()),
            pending_budget: StdMutex::new(Vec::new()),
            remembered: StdMutex::new(budget::Remembered::default()),
            rules_seen: StdMutex::new(HashMap::new()),
            upkeep: std::sync::atomic::AtomicBool::new(false),
            closed: std::sync::atomic::AtomicBool::new(false),
            decisions_pruned_at: std::sync::atomic::AtomicI64::new(i64::MIN),
        }
    }

    /// This process's session id (the owner of its holds).
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Runs `f` on a pooled, migrated connection within the deadline. The connection goes
    /// back to the pool only if `f` succeeded in time.
    async fn bounded<T, F>(&self, f: F) -> Result<T, PgFailure>
    where
        F: for<'c> FnOnce(
            &'c mut Conn,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, PgFailure>> + Send + 'c>>,
    {
        self.bounded_on(false, f).await
    }

    /// [`PgStore::bounded`] on the pool's connections (`for_lease` false) or on the lease's
    /// own (true: the renewal, which no queue of admissions may delay).
    async fn bounded_on<T, F>(&self, for_lease: bool, f: F) -> Result<T, PgFailure>
    where
        F: for<'c> FnOnce(
            &'c mut Conn,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, PgFailure>> + Send + 'c>>,
    {
        let work = async {
            let mut lease = self.pool.get(for_lease).await?;
            if self.ready.get().is_none() {
                let version = migrate(lease.conn()).await?;
                let _ = self.ready.set(version);
            }
            let out = f(lease.conn()).await?;
            lease.done();
            Ok(out)
        };
        match tokio::time::timeout(self.settings.timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(PgFailure::TimedOut),
        }
    }

    /// Connects and migrates now; the schema version.
    pub async fn open(&self) -> Result<i64, PgFailure> {
        self.bounded(|_| Box::pin(async { Ok(()) })).await?;
        Ok(self.ready.get().copied().unwrap_or(SCHEMA_VERSION))
    }

    /// Inserts or replaces a mapping, removing the id's intent in the same statement.
    pub async fn put(&self, row: Row) -> Result<(), PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(PUT).await?;
                c.client.execute(&s, &put_params(&row)).await?;
                Ok(())
            })
        })
        .await
    }

    /// The mapping of `id`.
    pub async fn get(&self, id: String) -> Result<Option<Row>, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(GET).await?;
                let rows = c.client.query(&s, &[&id]).await?;
                rows.first().map(row_of).transpose()
            })
        })
        .await
    }

    /// Removes the mapping and the intent of `id`; true if a mapping existed.
    pub async fn delete(&self, id: String) -> Result<bool, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(DELETE).await?;
                Ok(c.client.execute(&s, &[&id]).await? > 0)
            })
        })
        .await
    }

    /// Every mapping, ordered by id.
    pub async fn list(&self) -> Result<Vec<Row>, PgFailure> {
        self.bounded(|c| {
            Box::pin(async move {
                let s = c.statement(LIST).await?;
                c.client.query(&s, &[]).await?.iter().map(row_of).collect()
            })
        })
        .await
    }

    /// Number of mappings.
    pub async fn count(&self) -> Result<i64, PgFailure> {
        self.bounded(|c| {
            Box::pin(async move {
                let s = c.statement(COUNT).await?;
                c.client.query_one(&s, &[]).await?.try_get(0).map_err(|_| PgFailure::Malformed)
            })
        })
        .await
    }

    /// Inserts or replaces an intent.
    pub async fn put_intent(&self, i: Intent) -> Result<(), PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(PUT_INTENT).await?;
                c.client
                    .execute(
                        &s,
                        &[
                            &i.id,
                            &i.provider_id,
                            &i.state,
                            &i.started_at,
                            &i.expires_at,
                            &i.owner_host,
                            &i.owner_pid,
                            &i.owner_session,
                        ],
                    )
                    .await?;
                Ok(())
            })
        })
        .await
    }

    /// Every intent, ordered by id.
    pub async fn intents(&self) -> Result<Vec<Intent>, PgFailure> {
        self.bounded(|c| {
            Box::pin(async move {
                let s = c.statement(INTENTS).await?;
                let rows = c.client.query(&s, &[]).await?;
                rows.iter()
                    .map(|r| {
                        Ok(Intent {
                            id: r.try_get(0).map_err(|_| PgFailure::Malformed)?,
                            provider_id: r.try_get(1).map_err(|_| PgFailure::Malformed)?,
                            state: r.try_get(2).map_err(|_| PgFailure::Malformed)?,
                            started_at: r.try_get(3).map_err(|_| PgFailure::Malformed)?,
                            expires_at: r.try_get(4).map_err(|_| PgFailure::Malformed)?,
                            owner_host: r.try_get(5).map_err(|_| PgFailure::Malformed)?,
                            owner_pid: r.try_get(6).map_err(|_| PgFailure::Malformed)?,
                            owner_session: r.try_get(7).map_err(|_| PgFailure::Malformed)?,
                        })
                    })
                    .collect()
            })
        })
        .await
    }

    // --- the shared capacity ledger ----------------------------------------------------

    /// Registers this process's session (its lease) once, and starts renewing it: every
    /// third of the lease, on tokio, so a blocked JS thread does not let it lapse. The task
    /// also retries settlements that could not be written.
    async fn ensure_session(self: &Arc<Self>) -> Result<(), PgFailure> {
        self.session_ready
            .get_or_try_init(|| async {
                self.renew().await?;
                let weak = Arc::downgrade(self);
                let every = (self.settings.lease / 3).max(Duration::from_millis(50));
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(every).await;
                        let Some(store) = weak.upgrade() else { return };
                        if store.closed.load(std::sync::atomic::Ordering::Relaxed) {
                            return;
                        }
                        let _ = store.renew().await;
                        // The rest waits for the pool's connections like any call: on its
                        // own task, so that a queue of admissions never delays the next
                        // renewal (a lapsed lease frees this process's own reservations).
                        if !store.upkeep.swap(true, std::sync::atomic::Ordering::AcqRel) {
                            let store = Arc::clone(&store);
                            tokio::spawn(async move {
                                store.retry_settlements().await;
                                store.retry_budget_settlements().await;
                                store.clean_up_keys().await;
                                store.upkeep.store(false, std::sync::atomic::Ordering::Release);
                            });
                        }
                    }
                });
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// A read sequence number, taken before a capacity read starts: a hold that settled
    /// with a smaller number settled before the read started.
    pub async fn begin_read(self: &Arc<Self>) -> Result<i64, PgFailure> {
        self.ensure_session().await?;
        self.bounded(|c| {
            Box::pin(async move {
                let s = c.statement(NEXT_SEQ).await?;
                c.client.query_one(&s, &[]).await?.try_get(0).map_err(|_| PgFailure::Malformed)
            })
        })
        .await
    }

    async fn renew(&self) -> Result<(), PgFailure> {
        let session = self.session.clone();
        let lease_ms = self.settings.lease.as_millis() as f64;
        self.bounded_on(true, move |c| {
            Box::pin(async move {
                let s = c.statement(RENEW).await?;
                c.client.execute(&s, &[&session, &lease_ms]).await?;
                Ok(())
            })
        })
        .await
    }

    /// Live holds of `pool` (in flight or assumed, unexpired), every process's.
    pub async fn held(&self, pool: String) -> Result<i64, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(HELD).await?;
                c.client.query_one(&s, &[&pool]).await?.try_get(0).map_err(|_| PgFailure::Malformed)
            })
        })
        .await
    }

    /// Stops renewing the lease, releases this process's in-flight holds and ends its
    /// session (best effort, bounded), and closes the idle connections.
    pub async fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Relaxed);
        if self.session_ready.get().is_some() {
            self.retry_settlements().await;
            self.retry_budget_settlements().await;
            let session = self.session.clone();
            let _ = self
                .bounded(move |c| {
                    Box::pin(async move {
                        let s = c.statement(END_SESSION).await?;
                        c.client.execute(&s, &[&session]).await?;
                        Ok(())
                    })
                })
                .await;
        }
        if let Ok(mut idle) = self.pool.idle.lock() {
            idle.clear();
        }
    }
}

impl PgStore {
    // --- the fleet's warm inventory (see the module docs) -------------------------------

    /// Grants up to `want` refill launches of `pool` toward the fleet's target `size`, in
    /// one transaction under the pool's warm row lock; each granted launch is a row held
    /// for `hold_ms` (and this process's lease). Returns the grants' tokens.
    pub async fn warm_reserve(
        self: &Arc<Self>,
        fleet: String,
        pool: String,
        size: u32,
        want: u32,
        hold_ms: f64,
    ) -> Result<Vec<i64>, PgFailure> {
        if want == 0 {
            return Ok(Vec::new());
        }
        self.ensure_session().await?;
        let session = self.session.clone();
        self.bounded(move |c| {
            Box::pin(async move {
                let begin = c.statement("BEGIN").await?;
                let commit = c.statement("COMMIT").await?;
                let lock = c.statement(LOCK_POOL).await?;
                let expire = c.statement(WARM_EXPIRE_LAUNCHING).await?;
                let count = c.statement(WARM_COUNT).await?;
                let reserve = c.statement(WARM_RESERVE).await?;
                let client = &c.client;
                let row_key = format!("warm/{fleet}/{pool}");
                let by_key: [&(dyn ToSql + Sync); 1] = [&row_key];
                let by_pool: [&(dyn ToSql + Sync); 2] = [&fleet, &pool];
                let (b, l, e, n) = tokio::join!(
                    client.execute(&begin, &[]),
                    client.execute(&lock, &by_key),
                    client.execute(&expire, &by_pool),
                    client.query_one(&count, &by_pool),
                );
                b?;
                l?;
                e?;
                let n = n?;
                let idle: i64 = n.try_get(0).map_err(|_| PgFailure::Malformed)?;
                let launching: i64 = n.try_get(1).map_err(|_| PgFailure::Malformed)?;
                let grant = reserve_count(size, idle.max(0) as u64, launching.max(0) as u64, want);
                if grant == 0 {
                    client.execute(&commit, &[]).await?;
                    return Ok(Vec::new());
                }
                let grant = i32::try_from(grant).map_err(|_| PgFailure::Malformed)?;
                let row: [&(dyn ToSql + Sync); 5] = [&fleet, &pool, &session, &hold_ms, &grant];
                let (tokens, done) = tokio::join!(client.query(&reserve, &row), client.execute(&commit, &[]));
                let tokens =
                    tokens?.iter().map(|r| r.try_get(0).map_err(|_| PgFailure::Malformed)).collect::<Result<_, _>>()?;
                done?;
                Ok(tokens)
            })
        })
        .await
    }

    /// Gives a granted refill launch back (it failed).
    pub async fn warm_release(&self, token: i64) -> Result<bool, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(WARM_RELEASE).await?;
                Ok(c.client.execute(&s, &[&token]).await? > 0)
            })
        })
        .await
    }

    /// A granted refill launched member `member`: it becomes idle and its mapping record
    /// (`record`, its labels the stamp and the warm label) is written, in one transaction.
    pub async fn warm_settle(&self, token: i64, fleet: String, member: WarmRow, record: Row) -> Result<(), PgFailure> {
        let session = self.session.clone();
        self.bounded(move |c| {
            Box::pin(async move {
                let begin = c.statement("BEGIN").await?;
                let commit = c.statement("COMMIT").await?;
                let settle = c.statement(WARM_SETTLE).await?;
                let put = c.statement(PUT).await?;
                let client = &c.client;
                let idle: [&(dyn ToSql + Sync); 7] = [
                    &token,
                    &fleet,
                    &member.pool,
                    &member.id,
                    &member.provider_sandbox_id,
                    &member.launched_at,
                    &session,
                ];
                let mapping = put_params(&record);
                let (b, w, p, done) = tokio::join!(
                    client.execute(&begin, &[]),
                    client.execute(&settle, &idle),
                    client.execute(&put, &mapping),
                    client.execute(&commit, &[]),
                );
                b?;
                w?;
                p?;
                done?;
                Ok(())
            })
        })
        .await
    }

    /// Claims the oldest idle member of `pool` launched at or after `floor`, in one
    /// transaction: its row is deleted and its mapping written by `record` (given the
    /// member's id and provider sandbox id), and, with `charge` (the claiming provision's
    /// id, under shared budgets), that provision's reservation becomes the member's settled
    /// charge. None when there is none (or every one is being claimed by another
    /// transaction right now).
    pub async fn warm_claim(
        &self,
        fleet: String,
        pool: String,
        floor: i64,
        charge: Option<String>,
        record: impl FnOnce(&WarmRow) -> Row + Send + 'static,
    ) -> Result<Option<WarmRow>, PgFailure> {
        let claiming = charge.clone();
        let claimed = self
            .bounded(move |c| {
                Box::pin(async move {
                    let begin = c.statement("BEGIN").await?;
                    let commit = c.statement("COMMIT").await?;
                    let pick = c.statement(WARM_PICK).await?;
                    let delete = c.statement(WARM_DELETE).await?;
                    let put = c.statement(PUT).await?;
                    let recharge = match &charge {
                        Some(_) => Some(c.statement(budget::WARM_CHARGE).await?),
                        None => None,
                    };
                    let client = &c.client;
                    let by_pool: [&(dyn ToSql + Sync); 3] = [&fleet, &pool, &floor];
                    let (b, picked) = tokio::join!(client.execute(&begin, &[]), client.query(&pick, &by_pool));
                    b?;
                    let picked = picked?;
                    let Some(r) = picked.first() else {
                        client.execute(&commit, &[]).await?;
                        return Ok(None);
                    };
                    let token: i64 = r.try_get(0).map_err(|_| PgFailure::Malformed)?;
                    let member = WarmRow {
                        pool: pool.clone(),
                        id: r
                            .try_get::<_, Option<String>>(1)
                            .map_err(|_| PgFailure::Malformed)?
                            .ok_or(PgFailure::Malformed)?,
                        provider_sandbox_id: r
                            .try_get::<_, Option<String>>(2)
                            .map_err(|_| PgFailure::Malformed)?
                            .ok_or(PgFailure::Malformed)?,
                        launched_at: r
                            .try_get::<_, Option<i64>>(3)
                            .map_err(|_| PgFailure::Malformed)?
                            .ok_or(PgFailure::Malformed)?,
                    };
                    let row = record(&member);
                    let mapping = put_params(&row);
                    let by_token: [&(dyn ToSql + Sync); 1] = [&token];
                    let charged = async {
                        match (&recharge, &charge) {
                            (Some(s), Some(provision)) => client.execute(s, &[provision, &member.id]).await.map(|_| ()),
                            _ => Ok(()),
                        }
                    };
                    let (d, p, r, done) = tokio::join!(
                        client.execute(&delete, &by_token),
                        client.execute(&put, &mapping),
                        charged,
                        client.execute(&commit, &[]),
                    );
                    d?;
                    p?;
                    r?;
                    done?;
                    Ok(Some(member))
                })
            })
            .await?;
        if let (Some(provision), Some(_)) = (&claiming, &claimed) {
            // The claim's transaction settled the reservation: no settlement of it is late.
            self.mark_claimed(provision, true);
        }
        Ok(claimed)
    }

    async fn warm_rows(
        &self,
        sql: &'static str,
        params: Vec<Box<dyn ToSql + Sync + Send>>,
    ) -> Result<Vec<WarmRow>, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(sql).await?;
                let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
                c.client.query(&s, &refs).await?.iter().map(warm_row).collect()
            })
        })
        .await
    }

    /// Takes the idle members of `pool` launched before `floor` out of the inventory
    /// (expired: the caller destroys them).
    pub async fn warm_expire(&self, fleet: String, pool: String, floor: i64) -> Result<Vec<WarmRow>, PgFailure> {
        self.warm_rows(WARM_EXPIRE, vec![Box::new(fleet), Box::new(pool), Box::new(floor)]).await
    }

    /// A member claimed with a charge (see [`PgStore::warm_claim`]) was found gone: this
    /// process's charge under `member` goes back to provision `provision`, in flight again.
    /// True when it was found.
    pub async fn warm_uncharge(&self, member: String, provision: String) -> Result<bool, PgFailure> {
        let session = self.session.clone();
        self.mark_claimed(&provision, false);
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(budget::WARM_UNCHARGE).await?;
                let n: i64 = c
                    .client
                    .query_one(&s, &[&member, &provision, &session])
                    .await?
                    .try_get(0)
                    .map_err(|_| PgFailure::Malformed)?;
                Ok(n > 0)
            })
        })
        .await
    }

    /// Takes member `id` out of the inventory if it is idle (and not being claimed).
    pub async fn warm_take(&self, id: String) -> Result<Option<WarmRow>, PgFailure> {
        Ok(self.warm_rows(WARM_TAKE, vec![Box::new(id)]).await?.into_iter().next())
    }

    /// The idle members of `pool` this process launched (it re-resolves them).
    pub async fn warm_mine(&self, fleet: String, pool: String) -> Result<Vec<WarmRow>, PgFailure> {
        self.warm_rows(WARM_MINE, vec![Box::new(fleet), Box::new(pool), Box::new(self.session.clone())]).await
    }

    /// Takes every idle member this process launched out of the inventory, and gives its
    /// granted launches back (`close()`).
    pub async fn warm_take_mine(&self, fleet: String) -> Result<Vec<WarmRow>, PgFailure> {
        self.warm_rows(WARM_TAKE_MINE, vec![Box::new(fleet), Box::new(self.session.clone())]).await
    }

    /// Every pool's counts in the fleet's inventory.
    pub async fn warm_counts(&self, fleet: String) -> Result<Vec<WarmCount>, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(WARM_COUNTS).await?;
                c.client
                    .query(&s, &[&fleet])
                    .await?
                    .iter()
                    .map(|r| {
                        Ok(WarmCount {
                            pool: r.try_get(0).map_err(|_| PgFailure::Malformed)?,
                            idle: r.try_get(1).map_err(|_| PgFailure::Malformed)?,
                            launching: r.try_get(2).map_err(|_| PgFailure::Malformed)?,
                        })
                    })
                    .collect()
            })
        })
        .await
    }

    /// Idle members of `pool` launched at or after `floor` (what a claim could take now).
    pub async fn warm_claimable(&self, fleet: String, pool: String, floor: i64) -> Result<i64, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(WARM_CLAIMABLE).await?;
                c.client.query_one(&s, &[&fleet, &pool, &floor]).await?.try_get(0).map_err(|_| PgFailure::Malformed)
            })
        })
        .await
    }
}

/// Migrates the database to [`SCHEMA_VERSION`] in one transaction, under
/// [`MIGRATION_LOCK`]; the version found or reached.
async fn migrate(c: &mut Conn) -> Result<i64, PgFailure> {
    let tx = c.client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS sandbox_router_schema (version INTEGER NOT NULL)").await?;
    let found: Option<i32> = match tx.query_opt("SELECT version FROM sandbox_router_schema", &[]).await? {
        Some(r) => Some(r.try_get(0).map_err(|_| PgFailure::Malformed)?),
        None => None,
    };
    let from = i64::from(found.unwrap_or(0));
    if from > SCHEMA_VERSION {
        return Err(PgFailure::SchemaTooNew(from));
    }
    for m in &MIGRATIONS[from as usize..] {
        tx.batch_execute(m).await?;
    }
    let to = SCHEMA_VERSION as i32;
    if found.is_none() {
        tx.execute("INSERT INTO sandbox_router_schema (version) VALUES ($1)", &[&to]).await?;
    } else if from < SCHEMA_VERSION {
        tx.execute("UPDATE sandbox_router_schema SET version = $1", &[&to]).await?;
    }
    tx.commit().await?;
    Ok(SCHEMA_VERSION)
}
