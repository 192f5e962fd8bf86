//! The durable mapping stores: the I/O the core does not do.
//!
//! Why apart from the core? The core is sans-IO: it decides, and never opens a file, a
//! socket or a runtime. A store performs I/O by nature (SQLite through `rusqlite`,
//! PostgreSQL through `tokio-postgres` on tokio, its TLS through rustls), so it lives here,
//! and what it decides purely (the shared ledger's admission rule over hold rows) stays in
//! the core and is called from here.
//!
//! The files depend one way (an arrow is "uses"):
//!
//! ```text
//! record ← sqlite
//! record, pg_tls ← pg
//! ```
//!
//! - `record`: the rows both stores keep (a mapping, an intent, one write of a batch);
//! - `sqlite`: one SQLite file in WAL mode, versioned schema, mappings and intents;
//! - `pg`: the shared store in PostgreSQL (pool, deadlines, migrations, mappings, intents)
//!   and the shared capacity ledger's transactions around `core::shared_ledger::decide`;
//! - `pg_tls`: the PostgreSQL store's TLS (rustls behind tokio-postgres's connector) and the
//!   `sslmode` of a connection URL.

pub mod pg;
pub mod pg_tls;
pub mod record;
pub mod sqlite;
