//! The shared capacity ledger's statements: an admission is one conditional statement.
//!
//! Why not the transaction it was (lock the pool's row, expire, read every hold, decide in
//! Rust, insert, commit)? Every admission in the fleet took the same pool row for two round
//! trips and a decision in between: 45-51 % of the server's time at one process and 91-92 %
//! at four went to that lock, and throughput *fell* as processes were added. Now the pool's
//! row keeps a running total of what its holds hold (`held`, a JSON object of resource →
//! amount, exact `numeric` sums), and one `INSERT … ON CONFLICT DO UPDATE` decides and
//! holds: PostgreSQL locks the pool's row, re-reads its latest version (so concurrent
//! admissions are serialized exactly as before), subtracts what the holds this admission
//! releases held, checks `used + held + need <= limit` in every dimension, and adds the
//! need, in the same statement that inserts the hold. The row is locked for that one
//! statement, never across a round trip.
//!
//! The rule is the one of `core::shared_ledger::decide`, clause for clause: a settled hold
//! is released once a read that started after it settled reports, in every dimension, at
//! least the usage expected when it was admitted; expired holds and in-flight holds of a
//! lapsed lease go first; the new hold expects `used + held + need`. Each of the three is
//! read through its own index (schema v6: expired by `(pool, expires_at)`, in flight of a
//! lapsed lease from the sessions whose lease lapsed, settled by `(pool, settled_seq)`), so
//! the sweep does not walk the dead entries of every hold deleted since the last VACUUM
//! (a session's row lives as long as its in-flight holds: `END_SESSION`). The holds this
//! statement releases are taken `FOR UPDATE SKIP LOCKED`: one being settled or released by
//! another statement right now is left to that one (it is still counted here: never an
//! under-count), and the statement never waits on a hold row while holding the pool's row
//! (every other statement that deletes holds locks them before the pool: no deadlock).
//!
//! Every statement that deletes a hold subtracts its amounts from its pool's total in the
//! same statement ([`minus_gone!`]), so `held` is always the sum of the holds' amounts
//! (the v5 migration built it from the existing rows).

use super::{PendingSettle, PgFailure, PgStore};
use crate::core::shared_ledger::Dim;
use std::sync::Arc;
use tokio_postgres::types::ToSql;

/// `UPDATE … pools` subtracting, per pool, the amounts of the holds a `gone` CTE
/// (`RETURNING pool, amounts`) deleted.
macro_rules! minus_gone {
    () => {
        "UPDATE sandbox_router_pools p SET held = (SELECT coalesce(jsonb_object_agg(x.k, x.v), '{}'::jsonb)
            FROM (SELECT k, sum(v) AS v FROM (
                SELECT e.key AS k, e.value::numeric AS v FROM jsonb_each_text(p.held) e
                UNION ALL SELECT e.key, -(e.value::numeric) FROM gone g, jsonb_each_text(g.amounts) e WHERE g.pool = p.pool
            ) y GROUP BY k HAVING sum(v) <> 0) x)
        WHERE p.pool IN (SELECT pool FROM gone)"
    };
}
pub(super) use minus_gone;

/// The tokens in a pool row's bucket at `c.t` (`$10` tokens a second, at most `$11`): what it
/// held at `tokens_at`, plus what came since; a row that never paced is a full bucket.
macro_rules! refilled {
    ($row:literal) => {
        concat!(
            "least($11::float8, CASE WHEN ",
            $row,
            ".tokens_at IS NULL THEN $11::float8 ELSE ",
            $row,
            ".tokens + greatest(0, extract(epoch FROM c.t - ",
            $row,
            ".tokens_at)) * $10::float8 END)"
        )
    };
}

// $1 pool, $2 read sequence, $3..$6 the measurement's dimensions (resource, used, limit,
// need), $7 session, $8 in-flight ms, $9 sandbox id, $10 / $11 the pool's rate limit
// (launches a second, burst; null: none), $12 the provision's fairness lane (null: none, a
// warm refill, which goes after every lane waiting), $13 whether it waits when refused (it
// then claims its lane's turn). Answers (token, exhausted resource, pacing reason, ms until
// it may ask again).
//
// Pacing (schema v7): the pool's row also keeps the fleet's token bucket (`tokens` at
// `tokens_at`) and its `Retry-After` cooldown (`cooling_until`), judged at one reading of
// the database's clock (`c`). A launch is admitted only if the pool is not cooling down, its
// bucket has a token (when it declares a limit), it is its lane's turn, and every dimension
// fits; an admission takes the token and the hold together, so a refused one takes neither.
//
// Turns (a pool with a limit): each process's first waiter of a lane that was refused for
// pacing keeps a claim (`turns`: pool, lane, session, since when, until when it is expected
// back), renewed by each refusal and dropped when served; a lane's last token is kept in
// `lanes`. The token goes to the lane served least recently (never, or more than a minute
// ago, first), then to the oldest claim: a lane that bursts waits behind its own burst in
// every process while another lane's next provision is served at the next token. A claim of
// a process whose lease lapsed, or past its time, counts for nothing.
const ADMIT: &str = concat!(
    "WITH c AS (SELECT clock_timestamp() AS t),
d AS (
    SELECT * FROM unnest($3::text[], $4::float8[], $5::float8[], $6::float8[]) WITH ORDINALITY AS d(r, used, lim, need, i)
),
gone AS (
    DELETE FROM sandbox_router_holds WHERE token = ANY (ARRAY(
        SELECT e.token FROM (SELECT h.token FROM sandbox_router_holds h WHERE h.pool = $1 AND h.expires_at <= now()
            FOR UPDATE SKIP LOCKED) e
        UNION
        SELECT l.token FROM (SELECT h.token FROM sandbox_router_holds h
            WHERE h.session = ANY (",
    super::budget::lapsed_sessions!(),
    ") AND h.settled_seq IS NULL AND h.pool = $1
            FOR UPDATE SKIP LOCKED) l
        UNION
        SELECT r.token FROM (SELECT h.token FROM sandbox_router_holds h
            WHERE h.pool = $1 AND h.settled_seq < $2 AND NOT EXISTS (
                SELECT 1 FROM jsonb_each_text(h.expect) e LEFT JOIN d ON d.r = e.key
                WHERE d.r IS NULL OR d.used + 1e-9 < e.value::float8)
            FOR UPDATE SKIP LOCKED) r))
    RETURNING amounts
),
freed AS (
    SELECT e.key AS r, sum(e.value::numeric) AS n FROM gone, jsonb_each_text(gone.amounts) e GROUP BY e.key
),
need AS (SELECT coalesce(jsonb_object_agg(d.r, d.need), '{}'::jsonb) AS m FROM d),
me AS (
    SELECT (SELECT l.served_at FROM sandbox_router_lanes l WHERE l.pool = $1 AND l.lane = $12) AS served,
        coalesce((SELECT w.since FROM sandbox_router_turns w WHERE w.pool = $1 AND w.lane = $12 AND w.session = $7
            AND w.until > c.t), c.t) AS since
    FROM c
),
ahead AS (
    SELECT $10::float8 IS NOT NULL AND EXISTS (SELECT 1 FROM sandbox_router_turns w
        LEFT JOIN sandbox_router_lanes l ON l.pool = w.pool AND l.lane = w.lane, me, c
        WHERE w.pool = $1 AND w.until > c.t AND (w.lane, w.session) IS DISTINCT FROM ($12, $7)
            AND EXISTS (SELECT 1 FROM sandbox_router_sessions s WHERE s.session = w.session AND s.lease_until > now())
            AND ($12::text IS NULL
                OR (coalesce(l.served_at, '-infinity'), w.since) < (coalesce(me.served, '-infinity'), me.since))) AS yes
),
up AS (
    INSERT INTO sandbox_router_pools AS p (pool, held, ok, tokens, tokens_at)
    SELECT $1, CASE WHEN f.fits THEN (SELECT m FROM need) ELSE '{}'::jsonb END, f.fits,
        CASE WHEN f.fits AND $10::float8 IS NOT NULL THEN $11::float8 - 1 END,
        CASE WHEN f.fits AND $10::float8 IS NOT NULL THEN (SELECT t FROM c) END
    FROM (SELECT NOT EXISTS (SELECT 1 FROM d WHERE d.used + d.need > d.lim + 1e-9) AND NOT (SELECT yes FROM ahead) AS fits) f
    ON CONFLICT (pool) DO UPDATE SET (held, ok, tokens, tokens_at) = (SELECT
        (SELECT coalesce(jsonb_object_agg(x.k, x.v), '{}'::jsonb) FROM (
            SELECT k, sum(v) AS v FROM (
                SELECT e.key AS k, e.value::numeric AS v FROM jsonb_each_text(p.held) e
                UNION ALL SELECT r, -n FROM freed
                UNION ALL SELECT e.key, e.value::numeric FROM need, jsonb_each_text(need.m) e WHERE v.ok
            ) y GROUP BY k HAVING sum(v) <> 0) x),
        v.ok,
        CASE WHEN v.ok AND $10::float8 IS NOT NULL THEN v.tokens - 1 ELSE p.tokens END,
        CASE WHEN v.ok AND $10::float8 IS NOT NULL THEN v.t ELSE p.tokens_at END
        FROM (SELECT c.t, k.tokens,
            coalesce(p.cooling_until <= c.t, TRUE) AND ($10::float8 IS NULL OR k.tokens >= 1) AND NOT (SELECT yes FROM ahead)
            AND NOT EXISTS (SELECT 1 FROM d d2
                WHERE d2.used + coalesce((p.held->>d2.r)::float8, 0)
                    - coalesce((SELECT n FROM freed WHERE freed.r = d2.r), 0)::float8 + d2.need > d2.lim + 1e-9) AS ok
            FROM c, LATERAL (SELECT ",
    refilled!("p"),
    " AS tokens) k) v)
    RETURNING p.ok, p.held, p.tokens, p.tokens_at, p.cooling_until
),
ins AS (
    INSERT INTO sandbox_router_holds (pool, session, amounts, expect, expires_at, sandbox_id)
    SELECT $1, $7, (SELECT m FROM need),
        (SELECT coalesce(jsonb_object_agg(d.r, d.used + coalesce((up.held->>d.r)::numeric, 0)), '{}'::jsonb) FROM d),
        now() + $8 * interval '1 millisecond', $9
    FROM up WHERE up.ok
    RETURNING token
),
paced AS (
    SELECT CASE WHEN up.cooling_until > c.t THEN 'COOLING_DOWN' WHEN k.tokens < 1 THEN 'RATE_LIMITED' ELSE 'QUEUED' END AS why,
        CASE WHEN up.cooling_until > c.t THEN extract(epoch FROM up.cooling_until - c.t) * 1000
            WHEN k.tokens < 1 THEN (1 - k.tokens) * 1000 / $10::float8
            ELSE greatest(0, 2 - k.tokens) * 1000 / $10::float8 END AS ms
    FROM up, c, LATERAL (SELECT ", refilled!("up"), " AS tokens) k
    WHERE NOT up.ok AND (up.cooling_until > c.t OR ($10::float8 IS NOT NULL AND (k.tokens < 1 OR (SELECT yes FROM ahead))))
),
served AS (
    INSERT INTO sandbox_router_lanes AS l (pool, lane, served_at)
    SELECT $1, $12, c.t FROM up, c WHERE up.ok AND $12::text IS NOT NULL
    ON CONFLICT (pool, lane) DO UPDATE SET served_at = excluded.served_at
),
stale AS (
    DELETE FROM sandbox_router_lanes l USING c
    WHERE $12::text IS NOT NULL AND l.pool = $1 AND l.served_at < c.t - interval '1 minute' AND l.lane <> $12
),
done AS (
    DELETE FROM sandbox_router_turns w USING c
    WHERE $10::float8 IS NOT NULL AND w.pool = $1 AND CASE WHEN w.lane = $12 AND w.session = $7
        THEN (SELECT ok FROM up) ELSE w.until <= c.t END
),
claim AS (
    INSERT INTO sandbox_router_turns AS w (pool, lane, session, since, until)
    SELECT $1, $12, $7, me.since, c.t + (paced.ms + 500) * interval '1 millisecond' FROM paced, me, c
    WHERE $12::text IS NOT NULL AND $13::bool
    ON CONFLICT (pool, lane, session) DO UPDATE SET since = excluded.since, until = excluded.until
)
SELECT (SELECT token FROM ins),
    (SELECT d.r FROM d, up WHERE NOT up.ok
        AND d.used + coalesce((up.held->>d.r)::float8, 0) + d.need > d.lim + 1e-9 ORDER BY d.i LIMIT 1),
    (SELECT why FROM paced), (SELECT ms::float8 FROM paced)"
);

// $1 pool, $2 ms: the pool cools down for the fleet until the database's clock passes
// `now + $2` (a longer cooldown in force is kept).
const COOL: &str = "INSERT INTO sandbox_router_pools AS p (pool, cooling_until)
    VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond')
    ON CONFLICT (pool) DO UPDATE SET cooling_until = greatest(p.cooling_until, excluded.cooling_until)";

pub(super) const SETTLE_KEEP: &str = "UPDATE sandbox_router_holds SET settled_seq = nextval('sandbox_router_read_seq'),
    expires_at = now() + $2 * interval '1 millisecond' WHERE token = $1";
pub(super) const SETTLE_DROP: &str =
    concat!("WITH gone AS (DELETE FROM sandbox_router_holds WHERE token = $1 RETURNING pool, amounts) ", minus_gone!());

/// The coordinator's answer to one admission.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Held under this token.
    Admitted(i64),
    /// The first dimension without room.
    Exhausted(String),
    /// The fleet's pacing refused it: `COOLING_DOWN` (a `Retry-After` in force),
    /// `RATE_LIMITED` (no token in the pool's bucket) or `QUEUED` (another lane's turn), for
    /// `in_ms` more (the database's clock).
    Paced {
        /// The skip reason (`core::pacing::reason_of`).
        reason: &'static str,
        /// How long until it may ask again, ms.
        in_ms: f64,
    },
}

/// A pool's declared rate limit as the admission takes its tokens, the provision's fairness
/// lane (None: a warm refill, after every waiting lane) and whether it waits when refused:
/// (launches a second, burst, lane, waits).
pub type Pace = (f64, u32, Option<String>, bool);

impl PgStore {
    /// Admits one launch on `pool` against every process's holds: one statement (see the
    /// module docs). `inflight_ms`: the hold's expiry while its launch is in flight (the
    /// launch's own deadline plus slack), on top of this process's lease: a hold whose
    /// admission committed but whose answer was lost still frees itself.
    pub async fn admit(
        self: &Arc<Self>,
        pool: String,
        read_seq: i64,
        dims: Vec<Dim>,
        inflight_ms: f64,
        sandbox: Option<String>,
        pace: Option<Pace>,
    ) -> Result<Verdict, PgFailure> {
        self.ensure_session().await?;
        let session = self.session.clone();
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(ADMIT).await?;
                let resources: Vec<&str> = dims.iter().map(|d| d.resource.as_str()).collect();
                let used: Vec<f64> = dims.iter().map(|d| d.used).collect();
                let limits: Vec<f64> = dims.iter().map(|d| d.limit).collect();
                let needs: Vec<f64> = dims.iter().map(|d| d.need).collect();
                let rate: Option<f64> = pace.as_ref().map(|p| p.0);
                let burst: Option<f64> = pace.as_ref().map(|p| f64::from(p.1));
                let lane: Option<&str> = pace.as_ref().and_then(|p| p.2.as_deref());
                let waits: bool = pace.as_ref().is_some_and(|p| p.3);
                let params: [&(dyn ToSql + Sync); 13] = [
                    &pool,
                    &read_seq,
                    &resources,
                    &used,
                    &limits,
                    &needs,
                    &session,
                    &inflight_ms,
                    &sandbox,
                    &rate,
                    &burst,
                    &lane,
                    &waits,
                ];
                let row = c.client.query_one(&s, &params).await?;
                let token: Option<i64> = row.try_get(0).map_err(|_| PgFailure::Malformed)?;
                let resource: Option<String> = row.try_get(1).map_err(|_| PgFailure::Malformed)?;
                let paced: Option<String> = row.try_get(2).map_err(|_| PgFailure::Malformed)?;
                let in_ms: Option<f64> = row.try_get(3).map_err(|_| PgFailure::Malformed)?;
                match (token, paced, in_ms, resource) {
                    (Some(t), ..) => Ok(Verdict::Admitted(t)),
                    // Pacing first, as in process: a pool without a token is not read.
                    (None, Some(why), Some(in_ms), _) => match crate::core::pacing::reason_of(&why) {
                        Some(reason) => Ok(Verdict::Paced { reason, in_ms }),
                        None => Err(PgFailure::Malformed),
                    },
                    (None, _, _, Some(r)) => Ok(Verdict::Exhausted(r)),
                    _ => Err(PgFailure::Malformed),
                }
            })
        })
        .await
    }

    /// The pool cools down for the whole fleet for `ms` (a classifier's `retryAfterMs` in
    /// one process): every process's admission on it is refused as `COOLING_DOWN` until then.
    /// One statement; a longer cooldown in force is kept.
    pub async fn cool(self: &Arc<Self>, pool: String, ms: f64) -> Result<(), PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(COOL).await?;
                c.client.execute(&s, &[&pool, &ms]).await?;
                Ok(())
            })
        })
        .await
    }

    /// Settles a hold by the in-process ledger's rule: `allocated` keeps it as an assumption
    /// for `ttl_ms` (until a read reflects it); otherwise it is released (and its pool's
    /// total with it). A settlement that cannot be written now is kept and retried with the
    /// lease renewal.
    pub async fn settle(&self, token: i64, allocated: bool, ttl_ms: i64) -> Result<(), PgFailure> {
        let r = self.settle_once(PendingSettle { token, allocated, ttl_ms }).await;
        if r.is_err() {
            self.keep_settlement(PendingSettle { token, allocated, ttl_ms });
        }
        r
    }

    pub(super) fn keep_settlement(&self, p: PendingSettle) {
        if let Ok(mut q) = self.pending.lock() {
            q.push(p);
        }
    }

    async fn settle_once(&self, p: PendingSettle) -> Result<(), PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                if p.allocated {
                    let s = c.statement(SETTLE_KEEP).await?;
                    c.client.execute(&s, &[&p.token, &(p.ttl_ms as f64)]).await?;
                } else {
                    let s = c.statement(SETTLE_DROP).await?;
                    c.client.execute(&s, &[&p.token]).await?;
                }
                Ok(())
            })
        })
        .await
    }

    pub(super) async fn retry_settlements(&self) {
        let todo: Vec<PendingSettle> = match self.pending.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => return,
        };
        for p in todo {
            if self.settle_once(p).await.is_err() {
                self.keep_settlement(p);
            }
        }
    }
}
