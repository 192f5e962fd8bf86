//! A provision's and a destroy's writes, folded into as few transactions as they allow.
//!
//! Why? A coordinated provision with one budget rule cost ten transactions per provision
//! and destroy (the intent, the read sequence, the admission, the reservation, the
//! mapping, the hold's settlement, the budget's settlement; a destroy's read, delete and
//! release), each an async hop to tokio and at least one round trip. What can be decided
//! together is now written together:
//!
//! 1. **before the capacity read** ([`PgStore::launch_transaction`]): the budget
//!    reservation, the launch intent (written only if the reservation was made: it is part
//!    of the same transaction, and conditional on the charge rows the reservation inserted)
//!    and the read sequence: one transaction, one round trip (`BEGIN`, the key rows made,
//!    the reservation, the intent and sequence, `COMMIT`, pipelined). A sequence taken
//!    before the read starts is exactly what the read sequence must be.
//! 2. **the admission**, after the read: one statement (`stores::pg::capacity`).
//! 3. **after the launch** ([`PgStore::settle_launch`]): the mapping record (which ends the
//!    intent), the hold's settlement and the budget's settlement: one transaction.
//!
//! A destroy is one statement ([`FORGET`]): the mapping and intent deleted, the holds
//! deleted with their pool's total, the budget slot given back.
//!
//! Every statement keeps its own rule (the reservation's lock order, the admission's
//! conditional update): folding changes how many times the client waits, not what any
//! statement decides. A failure anywhere rolls the transaction back, and the caller is
//! told as before: a reservation that was not made, a record that was not written (the
//! provision destroys its sandbox), settlements that are kept and retried with the lease.

use super::budget::{reserved_of, BudgetStatements, ReserveArgs, Reserved, Settled};
use super::capacity::minus_gone;
use super::{put_params, PendingSettle, PgFailure, PgStore, PUT};
use crate::core::budget::{Micros, Refusal, SharedKey};
use crate::stores::record::{Intent, Row};
use std::sync::Arc;
use tokio_postgres::types::ToSql;

/// A budget reservation to make in [`PgStore::launch_transaction`].
#[derive(Debug, Clone)]
pub struct BudgetAsk {
    /// The provision's sandbox id.
    pub sandbox: String,
    /// Every applying rule.
    pub keys: Vec<SharedKey>,
    /// The pool's cost.
    pub cost: Micros,
    /// The router's clock at the reservation (ms).
    pub at: i64,
    /// How long the reservation may stay unsettled (ms).
    pub hold_ms: f64,
}

/// What [`PgStore::launch_transaction`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The reservation's verdict (None when none was asked).
    pub budget: Option<Result<(), Vec<Refusal>>>,
    /// The read sequence (None when none was asked, or the reservation was refused).
    pub seq: Option<i64>,
    /// The launch intent asked was written (committed with the reservation).
    pub intent: bool,
}

// The launch intent ($1..$8, as PUT_INTENT), written only when the provision $9 holds a
// reservation in flight (or $9 is NULL), and the read sequence when $10.
const INTENT_SEQ: &str = "WITH i AS (
    INSERT INTO sandbox_router_intents (id, provider_id, state, started_at, expires_at, owner_host, owner_pid, owner_session)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8
    WHERE $1::text IS NOT NULL AND ($9::text IS NULL
        OR EXISTS (SELECT 1 FROM sandbox_router_budget_charges WHERE sandbox_id = $9 AND state + 0 = 0))
    ON CONFLICT (id) DO UPDATE SET provider_id = EXCLUDED.provider_id, state = EXCLUDED.state,
      started_at = EXCLUDED.started_at, expires_at = EXCLUDED.expires_at,
      owner_host = EXCLUDED.owner_host, owner_pid = EXCLUDED.owner_pid,
      owner_session = EXCLUDED.owner_session
    RETURNING 1
)
SELECT CASE WHEN $10 THEN nextval('sandbox_router_read_seq') END, (SELECT count(*) FROM i)";

/// A destroyed sandbox ($1): its mapping and intent, its holds (with their pools'
/// totals), its budget slot. Answers (mapping existed, slots released).
pub(super) const FORGET: &str = concat!(
    "WITH m AS (DELETE FROM sandbox_router_mappings WHERE id = $1 RETURNING id),
    i AS (DELETE FROM sandbox_router_intents WHERE id = $1),
    gone AS (DELETE FROM sandbox_router_holds WHERE sandbox_id = $1 RETURNING pool, amounts),
    held AS (",
    minus_gone!(),
    "),
    ",
    super::budget::release_budget!(),
    "
    SELECT (SELECT count(*) FROM m), (SELECT count(*) FROM c)"
);

/// A sandbox gone ($1, reclaimed or destroyed elsewhere): its holds and budget slot.
/// Answers the slots released.
pub(super) const RELEASE_SANDBOX: &str = concat!(
    "WITH gone AS (DELETE FROM sandbox_router_holds WHERE sandbox_id = $1 RETURNING pool, amounts),
    held AS (",
    minus_gone!(),
    "),
    ",
    super::budget::release_budget!(),
    "
    SELECT count(*) FROM c"
);

/// The hold settlement of [`PgStore::settle_launch`].
#[derive(Debug, Clone, Copy)]
pub struct HoldSettlement {
    /// The hold.
    pub token: i64,
    /// Kept as an assumption (true) or released.
    pub allocated: bool,
    /// How long an assumption lives, ms.
    pub ttl_ms: i64,
}

/// The budget settlement of [`PgStore::settle_launch`].
#[derive(Debug, Clone)]
pub struct BudgetSettlement {
    /// The provision's sandbox id.
    pub sandbox: String,
    /// `allocated`, `unknown` or `nothing`.
    pub how: String,
    /// `unknown`: when its slot is freed (router clock, ms).
    pub until: i64,
}

/// What [`PgStore::settle_launch`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchSettled {
    /// The record was written (false: it was not asked, or the transaction failed).
    pub recorded: bool,
    /// The budget's settlement found its reservation freed and wrote the charge again.
    pub late: bool,
}

impl PgStore {
    /// Transaction 1 of a provision (module docs): the reservation (if `budget`), the
    /// intent (if `intent`: only when the reservation was made) and the read sequence (if
    /// `seq`), in one transaction. A reservation refused commits nothing but the sweeps of
    /// what time had ended. A key row removed meanwhile by another process's clean-up, or
    /// window sums not built yet since the v5 migration, are rebuilt and tried once more.
    pub async fn launch_transaction(
        self: &Arc<Self>,
        budget: Option<BudgetAsk>,
        intent: Option<Intent>,
        seq: bool,
    ) -> Result<Prepared, PgFailure> {
        self.ensure_session().await?;
        if budget.is_none() && intent.is_none() {
            // Nothing to fold: the sequence alone (and no budget table is touched).
            let seq = if seq { Some(self.begin_read().await?) } else { None };
            return Ok(Prepared { budget: None, seq, intent: false });
        }
        for attempt in 0..2 {
            let (b, i) = (budget.clone(), intent.clone());
            let session = self.session.clone();
            let (reserved, got_seq, wrote) = self
                .bounded(move |c| {
                    Box::pin(async move {
                        let begin = c.statement("BEGIN").await?;
                        let commit = c.statement("COMMIT").await?;
                        let statements = match &b {
                            Some(_) => Some(BudgetStatements::prepare(c).await?),
                            None => None,
                        };
                        let intent_seq = c.statement(INTENT_SEQ).await?;
                        let client = &c.client;
                        let args = b.as_ref().map(|b| ReserveArgs::of(&b.keys));
                        let reserve = async {
                            let (Some(b), Some(args), Some(statements)) = (&b, &args, &statements) else {
                                return Ok(None);
                            };
                            let by_key: [&(dyn ToSql + Sync); 2] = [&args.rules, &args.values];
                            let params: [&(dyn ToSql + Sync); 12] = [
                                &args.rules,
                                &args.values,
                                &args.since,
                                &args.kinds,
                                &args.limit_cost,
                                &args.limit_launches,
                                &args.limit_concurrent,
                                &b.sandbox,
                                &b.at,
                                &b.cost.0,
                                &session,
                                &b.hold_ms,
                            ];
                            let (e, rows) = tokio::join!(
                                client.execute(&statements.ensure, &by_key),
                                client.query(&statements.reserve, &params)
                            );
                            e?;
                            rows.map(Some)
                        };
                        let want_intent_or_seq = i.is_some() || seq;
                        let tail = async {
                            if !want_intent_or_seq {
                                return Ok(None);
                            }
                            let sandbox = b.as_ref().map(|b| b.sandbox.clone());
                            let id = i.as_ref().map(|x| x.id.clone());
                            let (provider, state, host, owner) = match &i {
                                Some(x) => (
                                    x.provider_id.clone(),
                                    x.state.clone(),
                                    x.owner_host.clone(),
                                    x.owner_session.clone(),
                                ),
                                None => (String::new(), String::new(), String::new(), String::new()),
                            };
                            let (started, expires, pid) = match &i {
                                Some(x) => (x.started_at, x.expires_at, x.owner_pid),
                                None => (0, 0, 0),
                            };
                            let params: [&(dyn ToSql + Sync); 10] =
                                [&id, &provider, &state, &started, &expires, &host, &pid, &owner, &sandbox, &seq];
                            client.query_one(&intent_seq, &params).await.map(Some)
                        };
                        let (bg, r, t, done) =
                            tokio::join!(client.execute(&begin, &[]), reserve, tail, client.execute(&commit, &[]));
                        bg?;
                        let rows = r?;
                        let t = t?;
                        done?;
                        let reserved = match (&b, &args, rows) {
                            (Some(b), Some(args), Some(rows)) => Some(reserved_of(&rows, &b.keys, args, b.cost)?),
                            _ => None,
                        };
                        let (got_seq, wrote): (Option<i64>, i64) = match t {
                            Some(row) => (
                                row.try_get(0).map_err(|_| PgFailure::Malformed)?,
                                row.try_get(1).map_err(|_| PgFailure::Malformed)?,
                            ),
                            None => (None, 0),
                        };
                        Ok((reserved, got_seq, wrote > 0))
                    })
                })
                .await?;
            let verdict = match reserved {
                None => None,
                Some(Reserved::Yes(windows)) => {
                    if let Some(b) = &budget {
                        self.remember(&b.sandbox, &b.keys, windows, b.cost, b.at);
                        self.note_rules(&b.keys);
                    }
                    Some(Ok(()))
                }
                Some(Reserved::Refused(r)) => {
                    if let Some(b) = &budget {
                        self.note_rules(&b.keys);
                    }
                    Some(Err(r))
                }
                Some(Reserved::Retry { rebuild }) => {
                    if attempt == 1 {
                        return Err(PgFailure::Failed);
                    }
                    if rebuild {
                        if let Some(b) = &budget {
                            self.rebuild(&b.keys).await?;
                        }
                    }
                    continue;
                }
            };
            let (seq, intent) = match &verdict {
                Some(Err(_)) => (None, false),
                _ => (got_seq, wrote),
            };
            return Ok(Prepared { budget: verdict, seq, intent });
        }
        Err(PgFailure::Failed)
    }

    /// Transaction 3 of a provision (module docs): the mapping `record`, the hold's and the
    /// budget's settlements, in one transaction. Settlements that could not be written are
    /// kept and retried with the lease renewal; a record that could not be written is the
    /// error (the caller destroys the sandbox).
    pub async fn settle_launch(
        &self,
        record: Option<Row>,
        hold: Option<HoldSettlement>,
        budget: Option<BudgetSettlement>,
    ) -> Result<LaunchSettled, PgFailure> {
        let (r, h, b) = (record.clone(), hold, budget.clone());
        let outcome = self
            .bounded(move |c| {
                Box::pin(async move {
                    let begin = c.statement("BEGIN").await?;
                    let commit = c.statement("COMMIT").await?;
                    let put = c.statement(PUT).await?;
                    let keep = c.statement(super::capacity::SETTLE_KEEP).await?;
                    let drop_hold = c.statement(super::capacity::SETTLE_DROP).await?;
                    let statements = match &b {
                        Some(_) => Some(BudgetStatements::prepare(c).await?),
                        None => None,
                    };
                    let client = &c.client;
                    let write = async {
                        let Some(row) = &r else { return Ok(0) };
                        client.execute(&put, &put_params(row)).await
                    };
                    let settle_hold = async {
                        match h {
                            None => Ok(0),
                            Some(h) if h.allocated => client.execute(&keep, &[&h.token, &(h.ttl_ms as f64)]).await,
                            Some(h) => client.execute(&drop_hold, &[&h.token]).await,
                        }
                    };
                    let settle_budget = async {
                        match (&b, &statements) {
                            (Some(b), Some(statements)) => {
                                PgStore::settle_budget_on(client, statements, &b.sandbox, &b.how, b.until).await
                            }
                            _ => Ok(0),
                        }
                    };
                    let (bg, w, sh, sb, done) = tokio::join!(
                        client.execute(&begin, &[]),
                        write,
                        settle_hold,
                        settle_budget,
                        client.execute(&commit, &[])
                    );
                    bg?;
                    w?;
                    sh?;
                    let n = sb?;
                    done?;
                    Ok(n)
                })
            })
            .await;
        match outcome {
            Ok(n) => {
                let late = match &budget {
                    Some(b) => self.after_settlement(&b.sandbox, &b.how, b.until, n).await.unwrap_or(Settled::OnTime),
                    None => Settled::OnTime,
                };
                Ok(LaunchSettled { recorded: record.is_some(), late: late == Settled::Late })
            }
            Err(e) => {
                if let Some(h) = hold {
                    self.keep_settlement(PendingSettle { token: h.token, allocated: h.allocated, ttl_ms: h.ttl_ms });
                }
                if let Some(b) = budget {
                    self.keep_budget_settlement(b.sandbox, b.how, b.until);
                }
                if record.is_some() {
                    Err(e)
                } else {
                    Ok(LaunchSettled { recorded: false, late: false })
                }
            }
        }
    }

    /// A destroy's writes ([`FORGET`]): whether a mapping existed, whether a budget slot was
    /// released.
    pub async fn forget(&self, id: String) -> Result<(bool, bool), PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(FORGET).await?;
                let row = c.client.query_one(&s, &[&id]).await?;
                let mapped: i64 = row.try_get(0).map_err(|_| PgFailure::Malformed)?;
                let slots: i64 = row.try_get(1).map_err(|_| PgFailure::Malformed)?;
                Ok((mapped > 0, slots > 0))
            })
        })
        .await
    }

    /// Sandbox `sandbox` is gone: its capacity holds are deleted (with their pools' totals)
    /// and its budget charges stop holding a concurrent slot (their cost and launch stay).
    /// True when a slot was released.
    pub async fn release_sandbox(&self, sandbox: String) -> Result<bool, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(RELEASE_SANDBOX).await?;
                let n: i64 = c.client.query_one(&s, &[&sandbox]).await?.try_get(0).map_err(|_| PgFailure::Malformed)?;
                Ok(n > 0)
            })
        })
        .await
    }
}
