//! The fleet's decision history (`PostgresMappingStore.decisionSink`, `.decisions`): one row a
//! record in `sandbox_router_decisions`, written by every process of the fleet, read newest
//! first. Retention: after a write, at most once a second per process
//! ([`TABLE_PRUNE_EVERY_MS`]), the rows past the newest `keep` and those older than
//! `maxAgeMs` are deleted (each an index range; docs/decisions.md "A fleet's history").

use super::{PgFailure, PgStore};
use crate::core::decision::{Query, Retention, DEFAULT_TABLE_LIST, TABLE_PRUNE_EVERY_MS};
use std::sync::atomic::Ordering;

const INSERT: &str = "INSERT INTO sandbox_router_decisions (id, at, sandbox_id, record)
    VALUES ($1, $2, $3, $4::text::jsonb) ON CONFLICT (id) DO NOTHING";
const PRUNE_COUNT: &str = "DELETE FROM sandbox_router_decisions
    WHERE n <= (SELECT max(n) FROM sandbox_router_decisions) - $1";
const PRUNE_AGE: &str = "DELETE FROM sandbox_router_decisions
    WHERE written_at < now() - $1::bigint * interval '1 millisecond'";
const BY_SANDBOX: &str = "SELECT record::text FROM sandbox_router_decisions
    WHERE sandbox_id = $1 AND at >= $2 ORDER BY at DESC, n DESC LIMIT $3";
const SINCE: &str = "SELECT record::text FROM sandbox_router_decisions
    WHERE at >= $1 ORDER BY at DESC, n DESC LIMIT $2";

/// One record to keep: its id, instant, sandbox id (`core::decision::table_keys`) and JSON text.
pub struct DecisionRow {
    /// `dec_…`.
    pub id: String,
    /// Epoch ms of the deciding router's clock.
    pub at: i64,
    /// The sandbox it made.
    pub sandbox_id: Option<String>,
    /// The record, as JSON text.
    pub text: String,
}

impl PgStore {
    /// Writes `row` (a record already kept is left as it is), then prunes past `retention`
    /// when this process has not pruned for [`TABLE_PRUNE_EVERY_MS`] (`now_ms`: the wall clock).
    pub async fn keep_decision(&self, row: DecisionRow, retention: Retention, now_ms: i64) -> Result<(), PgFailure> {
        let last = self.decisions_pruned_at.load(Ordering::Relaxed);
        let prune = now_ms.saturating_sub(last) >= TABLE_PRUNE_EVERY_MS
            && self.decisions_pruned_at.compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed).is_ok();
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(INSERT).await?;
                c.client.execute(&s, &[&row.id, &row.at, &row.sandbox_id, &row.text]).await?;
                if prune {
                    let keep = retention.keep as i64;
                    let age = retention.max_age_ms as i64;
                    let s = c.statement(PRUNE_COUNT).await?;
                    c.client.execute(&s, &[&keep]).await?;
                    let s = c.statement(PRUNE_AGE).await?;
                    c.client.execute(&s, &[&age]).await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// The kept records `query` asks for, newest first, as JSON text (at most
    /// [`DEFAULT_TABLE_LIST`] when it names no limit).
    pub async fn decisions(&self, query: Query) -> Result<Vec<String>, PgFailure> {
        let limit = query.limit.unwrap_or(DEFAULT_TABLE_LIST) as i64;
        let since = query.since.unwrap_or(i64::MIN);
        let sandbox = query.sandbox.map(|k| k.to_string());
        self.bounded(move |c| {
            Box::pin(async move {
                let rows = match &sandbox {
                    Some(id) => {
                        let s = c.statement(BY_SANDBOX).await?;
                        c.client.query(&s, &[id, &since, &limit]).await?
                    }
                    None => {
                        let s = c.statement(SINCE).await?;
                        c.client.query(&s, &[&since, &limit]).await?
                    }
                };
                rows.iter().map(|r| r.try_get::<_, String>(0).map_err(|_| PgFailure::Malformed)).collect()
            })
        })
        .await
    }
}
