//! The shared budget ledger's statements: running totals per (rule, key, window),
//! maintained by the reservations and settlements themselves.
//!
//! Why not sum the charges? An admission that sums every charge of the key in its window,
//! under the key's lock, costs more as the window fills: with a daily window one router
//! process fell from 518 to 319 provisions per second within ten seconds. Now each
//! (rule, key) row of `sandbox_router_budget_keys` (the reservation lock it always was)
//! keeps the totals of its current window: used and reserved cost (exact micro-units,
//! `BIGINT`) and launches, live and in-flight slots, the window's start (calendar), the
//! latest charge's time. A charge row remembers the window it counts in (`win`: the
//! calendar window's start, `0` for a sliding window while it is inside it, NULL when it
//! counts in none), so a settlement adjusts the totals exactly when its charge still counts.
//!
//! Every sweep below finds its candidates `FOR UPDATE SKIP LOCKED` and states its conditions
//! again on the row it changes, in a form no index predicate implies (`state + 0 = 1`): a row
//! changed between the statement's snapshot and its lock is re-checked against the plan's
//! filter only, and PostgreSQL leaves out of that filter the conditions a partial index's
//! predicate implies.
//!
//! The key rows have no index but their primary key: a key's row is updated at every
//! reservation and settlement, and only an update that changes no indexed column can be a
//! HOT update (no new index entry, the old version pruned in place). With an index on a
//! changing column the one hot tenant's row left a new index entry per update, and a day of
//! them slowed every admission of that key.
//!
//! A reservation is one statement ([`RESERVE`]) after one that makes missing key rows
//! ([`ENSURE`]), in one transaction (with the launch intent and the read sequence,
//! `stores::pg::launch`): it takes the keys' rows `FOR UPDATE` in (rule, key) order,
//! applies what time has ended to the totals (a calendar window that rolled over starts
//! from zero; sliding charges that left the window, in-flight reservations whose lease
//! lapsed or whose hold expired, and outcome-unknown slots whose time is up are each
//! taken `FOR UPDATE SKIP LOCKED` and subtracted once), checks every limit
//! (`used + reserved + need <= limit`, all or nothing), and reserves. The work is
//! proportional to what changed since the key's last admission, never to the window's
//! charges. Charge rows that count in no window and hold no slot ([`GARBAGE`]) and key rows
//! that hold nothing ([`CLEANUP`]) are deleted by the lease task, off the admission path.
//!
//! The sweep of in-flight reservations reads only what can have lapsed: the key's charges
//! whose hold expired (`expires_at <= now()`, schema v6's `expiring` index) and the charges
//! of sessions whose lease lapsed. A charge in flight always has its session's row: the
//! session is written before its first reservation and deleted only with its in-flight
//! charges (`END_SESSION`). Statements that find a charge by its sandbox write its state
//! test as `state + 0 = 0`, so that no index on in-flight charges (whose dead entries only
//! VACUUM removes) is chosen for them.
//!
//! Lock order: statements that change a charge and then its key's totals (settlements,
//! releases, `settleCost`, the warm claim) lock the charge first; the reservation locks
//! the totals and never waits on a charge (`SKIP LOCKED`): no deadlock.
//!
//! The v5 migration builds every key's slot counts from the existing rows at once; a key's
//! window sums need its rule's window, which is the routers' configuration and not the
//! database's, so they are built by the key's first reservation after the migration
//! ([`REBUILD`], once per key; `built`).
//!
//! A process whose lease lapsed (the database unreachable for longer than `leaseMs`, the
//! process suspended) may find its in-flight reservation freed by another process when its
//! launch settles. It must not launch uncharged: the store remembers its own reservations
//! in flight, and a settlement that finds its charge gone writes it again as a late charge
//! ([`LATE`], over the limit if need be), reported to the caller.

use super::{PgFailure, PgStore};
use crate::core::budget::{Micros, Refusal, SharedKey, Usage};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

/// `c`'s charge is a reservation whose settlement can no longer come: its hold expired or
/// its process's lease lapsed. (`state + 0`: a condition no partial index's predicate
/// implies, so it is re-checked on a row changed under the statement; module docs.)
macro_rules! lapsed {
    ($c:literal) => {
        concat!(
            $c,
            ".state + 0 = 0 AND (",
            $c,
            ".expires_at <= now() OR NOT EXISTS (SELECT 1 FROM sandbox_router_sessions s WHERE s.session = ",
            $c,
            ".session AND s.lease_until > now()))"
        )
    };
}

/// The sessions whose lease lapsed (normally none): the sweeps of in-flight charges and
/// holds start from them (module docs).
macro_rules! lapsed_sessions {
    () => {
        "ARRAY(SELECT s.session FROM sandbox_router_sessions s WHERE s.lease_until <= now())"
    };
}
pub(super) use lapsed_sessions;

/// Makes the key rows a reservation will lock ($1 rules, $2 values, in (rule, key) order).
pub(super) const ENSURE: &str = "INSERT INTO sandbox_router_budget_keys (rule, key)
    SELECT r, k FROM unnest($1::text[], $2::text[]) AS t(r, k) ORDER BY r, k ON CONFLICT (rule, key) DO NOTHING";

// $1 rules, $2 values, $3 since, $4 kind (0 no window, 1 calendar, 2 sliding), $5..$7 the
// limits (cost, launches, concurrent; NULL: none), $8 sandbox, $9 at, $10 cost, $11
// session, $12 hold ms. One row per key (input order): ok, complete, built, the figures
// after what time has ended (used and reserved cost and launches, live, in flight), the
// oldest counted charge (sliding), the window's start.
pub(super) const RESERVE: &str = concat!(
    "WITH keys AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::smallint[], $5::bigint[], $6::bigint[], $7::bigint[])
        WITH ORDINALITY AS k(rule, key, since, kind, lc, ll, lk, i)
),
lapsed AS (
    DELETE FROM sandbox_router_budget_charges x WHERE x.id = ANY (ARRAY(
        SELECT e.id FROM (SELECT c.id FROM sandbox_router_budget_charges c JOIN keys k ON c.rule = k.rule AND c.key = k.key
            WHERE c.state = 0 AND c.expires_at <= now() FOR UPDATE OF c SKIP LOCKED) e
        UNION
        SELECT l.id FROM (SELECT c.id FROM sandbox_router_budget_charges c JOIN keys k ON c.rule = k.rule AND c.key = k.key
            WHERE c.session = ANY (",
    lapsed_sessions!(),
    ") AND c.state = 0 FOR UPDATE OF c SKIP LOCKED) l)) AND ",
    lapsed!("x"),
    "
    RETURNING x.rule, x.key, x.cost, x.win
),
slid AS (
    UPDATE sandbox_router_budget_charges x SET win = NULL WHERE x.id IN (
        SELECT c.id FROM sandbox_router_budget_charges c JOIN keys k ON c.rule = k.rule AND c.key = k.key
        WHERE k.kind = 2 AND c.win = 0 AND c.at_ms < k.since AND NOT (",
    lapsed!("c"),
    ") FOR UPDATE OF c SKIP LOCKED) AND x.win + 0 = 0 AND NOT (",
    lapsed!("x"),
    ")
    RETURNING x.rule, x.key, x.cost, x.state
),
lapsed_slots AS (
    UPDATE sandbox_router_budget_charges x SET live = FALSE WHERE x.id IN (
        SELECT c.id FROM sandbox_router_budget_charges c JOIN keys k ON c.rule = k.rule AND c.key = k.key
        WHERE c.state = 1 AND c.live AND c.live_until <= now()
        FOR UPDATE OF c SKIP LOCKED) AND x.state = 1 AND x.live AND x.live_until <= now()
    RETURNING x.rule, x.key
),
t AS (
    SELECT x.*, k.since, k.kind, k.lc, k.ll, k.lk, k.i
    FROM sandbox_router_budget_keys x JOIN keys k ON x.rule = k.rule AND x.key = k.key
    WHERE x.rule = ANY ($1::text[]) AND x.key = ANY ($2::text[])
    ORDER BY x.rule, x.key FOR UPDATE OF x
),
nv AS (
    SELECT t.rule, t.key, t.i, t.kind, t.since, t.lc, t.ll, t.lk, t.built,
        CASE WHEN t.kind = 1 THEN greatest(t.since, t.window_start) ELSE 0 END AS ws,
        CASE WHEN NOT t.built OR (t.kind = 1 AND t.since > t.window_start) OR (t.kind <> 1 AND t.window_start <> 0)
            THEN 0 ELSE t.used_cost - s.uc END AS uc,
        CASE WHEN NOT t.built OR (t.kind = 1 AND t.since > t.window_start) OR (t.kind <> 1 AND t.window_start <> 0)
            THEN 0 ELSE t.used_launches - s.ul END AS ul,
        CASE WHEN NOT t.built OR (t.kind = 1 AND t.since > t.window_start) OR (t.kind <> 1 AND t.window_start <> 0)
            THEN 0 ELSE t.reserved_cost - s.rc - l.cc END AS rc,
        CASE WHEN NOT t.built OR (t.kind = 1 AND t.since > t.window_start) OR (t.kind <> 1 AND t.window_start <> 0)
            THEN 0 ELSE t.reserved_launches - s.rl - l.cl END AS rl,
        t.live - ls.n AS lv,
        t.inflight - l.n AS fl
    FROM t
    CROSS JOIN LATERAL (SELECT count(*) AS n,
            coalesce(sum(cost) FILTER (WHERE win = t.window_start), 0)::bigint AS cc,
            count(*) FILTER (WHERE win = t.window_start) AS cl
        FROM lapsed WHERE lapsed.rule = t.rule AND lapsed.key = t.key) l
    CROSS JOIN LATERAL (SELECT coalesce(sum(cost) FILTER (WHERE state = 1), 0)::bigint AS uc,
            count(*) FILTER (WHERE state = 1) AS ul,
            coalesce(sum(cost) FILTER (WHERE state = 0), 0)::bigint AS rc,
            count(*) FILTER (WHERE state = 0) AS rl
        FROM slid WHERE slid.rule = t.rule AND slid.key = t.key) s
    CROSS JOIN LATERAL (SELECT count(*) AS n FROM lapsed_slots WHERE lapsed_slots.rule = t.rule AND lapsed_slots.key = t.key) ls
),
verdict AS (
    SELECT count(*) = cardinality($1::text[]) AS complete, coalesce(bool_and(built), TRUE) AS built,
        count(*) = cardinality($1::text[]) AND coalesce(bool_and(built
            AND (lc IS NULL OR uc + rc + $10::bigint <= lc)
            AND (ll IS NULL OR ul + rl + 1 <= ll)
            AND (lk IS NULL OR lv + fl + 1 <= lk)), TRUE) AS ok
    FROM nv
),
up AS (
    UPDATE sandbox_router_budget_keys x SET
        window_start = CASE WHEN nv.built THEN nv.ws ELSE x.window_start END,
        used_cost = CASE WHEN nv.built THEN nv.uc ELSE x.used_cost END,
        used_launches = CASE WHEN nv.built THEN nv.ul ELSE x.used_launches END,
        reserved_cost = CASE WHEN nv.built THEN nv.rc + CASE WHEN v.ok AND nv.kind <> 0 THEN $10::bigint ELSE 0 END
            ELSE x.reserved_cost END,
        reserved_launches = CASE WHEN nv.built THEN nv.rl + CASE WHEN v.ok AND nv.kind <> 0 THEN 1 ELSE 0 END
            ELSE x.reserved_launches END,
        live = nv.lv,
        inflight = nv.fl + CASE WHEN v.ok THEN 1 ELSE 0 END,
        last_at = CASE WHEN v.ok THEN greatest(x.last_at, $9::bigint) ELSE x.last_at END
    FROM nv, verdict v WHERE x.rule = nv.rule AND x.key = nv.key
    RETURNING x.rule
),
ins AS (
    INSERT INTO sandbox_router_budget_charges (sandbox_id, rule, key, at_ms, cost, state, win, session, expires_at)
    SELECT $8, nv.rule, nv.key, $9, $10, 0, CASE WHEN nv.kind = 0 THEN NULL ELSE nv.ws END, $11::text,
        now() + $12::float8 * interval '1 millisecond'
    FROM nv, verdict v WHERE v.ok
    RETURNING id
)
SELECT nv.i, v.ok, v.complete, v.built, nv.uc, nv.rc, nv.ul, nv.rl, nv.lv, nv.fl,
    CASE WHEN nv.kind = 2 THEN (SELECT min(c.at_ms) FROM sandbox_router_budget_charges c
        WHERE c.rule = nv.rule AND c.key = nv.key AND c.win = 0 AND c.at_ms >= nv.since) END,
    nv.ws,
    (SELECT count(*) FROM up) + (SELECT count(*) FROM ins)
FROM nv, verdict v ORDER BY nv.i"
);

// The window sums of keys the v5 migration could not build ($1 rules, $2 values, $3 since,
// $4 kind): their charges are locked first (the order of every statement that changes a
// charge), then the keys, then each charge in its rule's window is marked and summed.
pub(super) const REBUILD: &str = "WITH keys AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::smallint[]) AS k(rule, key, since, kind)
),
lc AS (
    SELECT c.id FROM sandbox_router_budget_charges c JOIN keys k ON c.rule = k.rule AND c.key = k.key
    ORDER BY c.id FOR UPDATE OF c
),
lt AS (
    SELECT x.rule, x.key FROM sandbox_router_budget_keys x JOIN keys k ON x.rule = k.rule AND x.key = k.key
    WHERE NOT x.built AND (SELECT count(*) FROM lc) >= 0 ORDER BY x.rule, x.key FOR UPDATE OF x
),
marked AS (
    UPDATE sandbox_router_budget_charges c SET win = CASE WHEN k.kind = 1 THEN k.since ELSE 0 END
    FROM keys k, lt WHERE c.rule = k.rule AND c.key = k.key AND lt.rule = k.rule AND lt.key = k.key
        AND k.kind <> 0 AND c.at_ms >= k.since
    RETURNING c.rule, c.key, c.cost, c.state
)
UPDATE sandbox_router_budget_keys x SET built = TRUE,
    window_start = CASE WHEN k.kind = 1 THEN k.since ELSE 0 END,
    used_cost = coalesce((SELECT sum(m.cost) FROM marked m WHERE m.rule = x.rule AND m.key = x.key AND m.state = 1), 0)::bigint,
    used_launches = (SELECT count(*) FROM marked m WHERE m.rule = x.rule AND m.key = x.key AND m.state = 1),
    reserved_cost = coalesce((SELECT sum(m.cost) FROM marked m WHERE m.rule = x.rule AND m.key = x.key AND m.state = 0), 0)::bigint,
    reserved_launches = (SELECT count(*) FROM marked m WHERE m.rule = x.rule AND m.key = x.key AND m.state = 0)
FROM keys k, lt WHERE x.rule = k.rule AND x.key = k.key AND lt.rule = x.rule AND lt.key = x.key";

/// Moves a charge `c` (`RETURNING rule, key, cost, win, live`) from in flight to settled in
/// its key's totals: `$live` (0 or 1) for whether its slot is now held.
macro_rules! settled_totals {
    () => {
        " UPDATE sandbox_router_budget_keys t SET inflight = t.inflight - 1,
            live = t.live + CASE WHEN c.live THEN 1 ELSE 0 END,
            reserved_cost = t.reserved_cost - CASE WHEN c.win = t.window_start THEN c.cost ELSE 0 END,
            reserved_launches = t.reserved_launches - CASE WHEN c.win = t.window_start THEN 1 ELSE 0 END,
            used_cost = t.used_cost + CASE WHEN c.win = t.window_start THEN c.cost ELSE 0 END,
            used_launches = t.used_launches + CASE WHEN c.win = t.window_start THEN 1 ELSE 0 END
        FROM c WHERE t.rule = c.rule AND t.key = c.key"
    };
}

pub(super) const ALLOCATED: &str = concat!(
    "WITH c AS (UPDATE sandbox_router_budget_charges SET state = 1 WHERE sandbox_id = $1 AND state + 0 = 0
        RETURNING rule, key, cost, win, live)",
    settled_totals!()
);
pub(super) const UNKNOWN: &str = concat!(
    "WITH c AS (UPDATE sandbox_router_budget_charges SET state = 1,
        live_until = now() + greatest($2 - at_ms, 0) * interval '1 millisecond'
        WHERE sandbox_id = $1 AND state + 0 = 0 RETURNING rule, key, cost, win, live)",
    settled_totals!()
);
pub(super) const NOTHING: &str =
    "WITH c AS (DELETE FROM sandbox_router_budget_charges WHERE sandbox_id = $1 AND state + 0 = 0
        RETURNING rule, key, cost, win)
    UPDATE sandbox_router_budget_keys t SET inflight = t.inflight - 1,
        reserved_cost = t.reserved_cost - CASE WHEN c.win = t.window_start THEN c.cost ELSE 0 END,
        reserved_launches = t.reserved_launches - CASE WHEN c.win = t.window_start THEN 1 ELSE 0 END
    FROM c WHERE t.rule = c.rule AND t.key = c.key";
// A late settlement ($1 sandbox, $2 rules, $3 values, $4 windows (NULL: none), $5 at, $6
// cost, $7 session, $8 how long its slot is held (NULL: until released), $9 whether it
// holds one): written as settled, counted where its window is still the key's current one.
pub(super) const LATE: &str = "WITH k AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[]) AS k(rule, key, win)
),
ins AS (
    INSERT INTO sandbox_router_budget_charges (sandbox_id, rule, key, at_ms, cost, state, live, live_until, win, session, expires_at)
    SELECT $1, k.rule, k.key, $5, $6, 1, $9, now() + $8 * interval '1 millisecond', k.win, $7, now()
    FROM k WHERE NOT EXISTS (SELECT 1 FROM sandbox_router_budget_charges WHERE sandbox_id = $1)
    RETURNING rule, key, win, live
)
INSERT INTO sandbox_router_budget_keys AS t (rule, key, window_start, used_cost, used_launches, live, last_at)
SELECT i.rule, i.key, coalesce(i.win, 0), CASE WHEN i.win IS NULL THEN 0 ELSE $6 END,
    CASE WHEN i.win IS NULL THEN 0 ELSE 1 END, CASE WHEN i.live THEN 1 ELSE 0 END, $5
FROM ins i
ON CONFLICT (rule, key) DO UPDATE SET
    used_cost = t.used_cost + CASE WHEN EXCLUDED.used_launches = 1 AND EXCLUDED.window_start = t.window_start THEN $6 ELSE 0 END,
    used_launches = t.used_launches + CASE WHEN EXCLUDED.used_launches = 1 AND EXCLUDED.window_start = t.window_start THEN 1 ELSE 0 END,
    live = t.live + EXCLUDED.live,
    last_at = greatest(t.last_at, $5)
RETURNING t.rule";
/// A destroyed or reclaimed sandbox's charges stop holding their slot (settled or not: a
/// destroy can overtake its own provision's settlement, which then finds the charge no
/// longer live and holds nothing).
macro_rules! release_budget {
    () => {
        "c AS (UPDATE sandbox_router_budget_charges SET live = FALSE WHERE sandbox_id = $1 AND live
            AND (live_until IS NULL OR live_until > now()) RETURNING rule, key, state),
        slots AS (UPDATE sandbox_router_budget_keys t SET live = t.live - 1
            FROM c WHERE t.rule = c.rule AND t.key = c.key AND c.state = 1 RETURNING t.rule)"
    };
}
pub(super) use release_budget;

// $1 sandbox, $2 cost: the charge's cost, in every window that still counts it.
pub(super) const COST: &str = "WITH old AS (
    SELECT id, cost FROM sandbox_router_budget_charges WHERE sandbox_id = $1 FOR UPDATE
),
c AS (
    UPDATE sandbox_router_budget_charges x SET cost = $2 FROM old WHERE x.id = old.id
    RETURNING x.rule, x.key, x.win, x.state, $2 - old.cost AS delta
),
up AS (
    UPDATE sandbox_router_budget_keys t SET
        used_cost = t.used_cost + CASE WHEN c.state = 1 AND c.win = t.window_start THEN c.delta ELSE 0 END,
        reserved_cost = t.reserved_cost + CASE WHEN c.state = 0 AND c.win = t.window_start THEN c.delta ELSE 0 END
    FROM c WHERE t.rule = c.rule AND t.key = c.key RETURNING t.rule
)
SELECT count(*) FROM c";
// A warm claim under shared budgets: the claiming provision's reservation ($1) becomes the
// member's ($2) charge, settled as a launch that succeeded, in the claim's transaction.
pub(super) const WARM_CHARGE: &str = concat!(
    "WITH c AS (UPDATE sandbox_router_budget_charges SET sandbox_id = $2, state = 1 WHERE sandbox_id = $1 AND state + 0 = 0
        RETURNING rule, key, cost, win, live)",
    settled_totals!()
);
// A claimed member found gone: this session's charge under the member ($1) is the
// provision's ($2) reservation in flight again (its cold launch settles it).
pub(super) const WARM_UNCHARGE: &str = "WITH c AS (UPDATE sandbox_router_budget_charges SET sandbox_id = $2, state = 0
        WHERE sandbox_id = $1 AND state = 1 AND session = $3 RETURNING rule, key, cost, win, live),
    up AS (UPDATE sandbox_router_budget_keys t SET inflight = t.inflight + 1,
        live = t.live - CASE WHEN c.live THEN 1 ELSE 0 END,
        used_cost = t.used_cost - CASE WHEN c.win = t.window_start THEN c.cost ELSE 0 END,
        used_launches = t.used_launches - CASE WHEN c.win = t.window_start THEN 1 ELSE 0 END,
        reserved_cost = t.reserved_cost + CASE WHEN c.win = t.window_start THEN c.cost ELSE 0 END,
        reserved_launches = t.reserved_launches + CASE WHEN c.win = t.window_start THEN 1 ELSE 0 END
    FROM c WHERE t.rule = c.rule AND t.key = c.key RETURNING t.rule)
    SELECT count(*) FROM c";
/// This session's reservations in flight go (`close()`), out of their keys' totals (each
/// total judged against its key's latest window). `state + 0`: a form no partial index's
/// predicate implies, so a row settled meanwhile is re-checked (see [`CLEANUP`]).
macro_rules! end_session_budget {
    () => {
        "reserved AS (DELETE FROM sandbox_router_budget_charges WHERE session = $1 AND state + 0 = 0
            RETURNING rule, key, cost, win),
        unreserved AS (UPDATE sandbox_router_budget_keys t SET
            inflight = t.inflight - (SELECT count(*) FROM reserved r WHERE r.rule = t.rule AND r.key = t.key),
            reserved_cost = t.reserved_cost - coalesce((SELECT sum(r.cost) FROM reserved r
                WHERE r.rule = t.rule AND r.key = t.key AND r.win = t.window_start), 0)::bigint,
            reserved_launches = t.reserved_launches - (SELECT count(*) FROM reserved r
                WHERE r.rule = t.rule AND r.key = t.key AND r.win = t.window_start)
            WHERE (t.rule, t.key) IN (SELECT rule, key FROM reserved) RETURNING t.rule)"
    };
}
pub(super) use end_session_budget;

// One page of one rule's keys ($1 rule, $2 since, $3 kind, $4 after this key, $5 only
// this key (NULL: any), $6 at most): each key's figures as the next reservation would see
// them (what time has ended is subtracted here too, without writing), keys that hold
// nothing left out. A key whose window sums are not built yet is summed from its charges.
macro_rules! status_of {
    () => {
        concat!("SELECT t.key,
            CASE WHEN NOT t.built THEN o.uc WHEN $3::smallint = 1 AND $2 > t.window_start THEN 0 ELSE t.used_cost - p.uc END AS uc,
            CASE WHEN NOT t.built THEN o.rc WHEN $3::smallint = 1 AND $2 > t.window_start THEN 0 ELSE t.reserved_cost - p.rc - p.lc END AS rc,
            CASE WHEN NOT t.built THEN o.ul WHEN $3::smallint = 1 AND $2 > t.window_start THEN 0 ELSE t.used_launches - p.ul END AS ul,
            CASE WHEN NOT t.built THEN o.rl WHEN $3::smallint = 1 AND $2 > t.window_start THEN 0 ELSE t.reserved_launches - p.rl - p.ll END AS rl,
            t.live - p.gone_slots AS lv,
            t.inflight - p.lapsed AS fl,
            CASE WHEN $3::smallint = 2 THEN (SELECT min(c.at_ms) FROM sandbox_router_budget_charges c
                WHERE c.rule = t.rule AND c.key = t.key AND c.win = 0 AND c.at_ms >= $2) END AS oldest
        FROM sandbox_router_budget_keys t
        CROSS JOIN LATERAL (SELECT
                coalesce(sum(c.cost) FILTER (WHERE c.state = 1 AND c.win = 0 AND $3::smallint = 2 AND c.at_ms < $2), 0)::bigint AS uc,
                count(*) FILTER (WHERE c.state = 1 AND c.win = 0 AND $3::smallint = 2 AND c.at_ms < $2) AS ul,
                coalesce(sum(c.cost) FILTER (WHERE c.state = 0 AND c.win = 0 AND $3::smallint = 2 AND c.at_ms < $2
                    AND NOT (", lapsed!("c"), ")), 0)::bigint AS rc,
                count(*) FILTER (WHERE c.state = 0 AND c.win = 0 AND $3::smallint = 2 AND c.at_ms < $2
                    AND NOT (", lapsed!("c"), ")) AS rl,
                coalesce(sum(c.cost) FILTER (WHERE ", lapsed!("c"), " AND c.win = t.window_start), 0)::bigint AS lc,
                count(*) FILTER (WHERE ", lapsed!("c"), " AND c.win = t.window_start) AS ll,
                count(*) FILTER (WHERE ", lapsed!("c"), ") AS lapsed,
                count(*) FILTER (WHERE c.state = 1 AND c.live AND c.live_until <= now()) AS gone_slots
            FROM sandbox_router_budget_charges c WHERE c.rule = t.rule AND c.key = t.key
                AND (c.state = 0 OR (c.live AND c.live_until IS NOT NULL) OR ($3::smallint = 2 AND c.win = 0 AND c.at_ms < $2))) p
        CROSS JOIN LATERAL (SELECT
                coalesce(sum(c.cost) FILTER (WHERE c.state = 1), 0)::bigint AS uc, count(*) FILTER (WHERE c.state = 1) AS ul,
                coalesce(sum(c.cost) FILTER (WHERE c.state = 0), 0)::bigint AS rc, count(*) FILTER (WHERE c.state = 0) AS rl
            FROM sandbox_router_budget_charges c WHERE NOT t.built AND $3::smallint <> 0 AND c.rule = t.rule AND c.key = t.key
                AND c.at_ms >= $2) o
        WHERE t.rule = $1")
    };
}

pub(super) const STATUS: &str = concat!(
    "SELECT * FROM (",
    status_of!(),
    " AND t.key > $4 AND ($5::text IS NULL OR t.key = $5)) s
    WHERE s.uc <> 0 OR s.rc <> 0 OR s.ul <> 0 OR s.rl <> 0 OR s.lv <> 0 OR s.fl <> 0
    ORDER BY s.key LIMIT $6"
);
pub(super) const COUNT: &str = concat!(
    "SELECT count(*) FROM (",
    status_of!(),
    " AND ($4::text IS NULL OR t.key = $4)) s
    WHERE s.uc <> 0 OR s.rc <> 0 OR s.ul <> 0 OR s.rl <> 0 OR s.lv <> 0 OR s.fl <> 0"
);

// Key rows that hold nothing ($1 rule, $2 since: no charge at or after it; `i64::MAX` for
// a rule without a window), at most 500, with their charge rows (none counts or holds).
// (No index serves it: a key's row is updated at every reservation and settlement, and an
// index on the columns that change would make every one of those updates a new index entry
// instead of a HOT update; the lease task's scan of one rule's rows is the cheaper side.)
// Charge rows that count in no window any more and hold no slot ($1 rule, $2 its window's
// start, $3 its kind), at most 1,000, for the lease task; a key whose window sums are not
// built yet keeps its rows.
pub(super) const GARBAGE: &str = "WITH g AS (
    SELECT id FROM sandbox_router_budget_charges
    WHERE rule = $1 AND state = 1 AND NOT live AND (win IS NULL OR ($3::smallint = 1 AND win < $2))
    LIMIT 1000 FOR UPDATE SKIP LOCKED
)
DELETE FROM sandbox_router_budget_charges x USING g WHERE x.id = g.id AND x.state + 0 = 1 AND NOT x.live
    AND (x.win IS NULL OR ($3::smallint = 1 AND x.win + 0 < $2))
    AND EXISTS (SELECT 1 FROM sandbox_router_budget_keys b WHERE b.rule = x.rule AND b.key = x.key AND b.built)";

pub(super) const CLEANUP: &str = "WITH idle AS (
    SELECT rule, key FROM sandbox_router_budget_keys
    WHERE rule = $1 AND live = 0 AND inflight = 0 AND last_at < $2 AND built
    LIMIT 500 FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM sandbox_router_budget_keys t USING idle WHERE t.rule = idle.rule AND t.key = idle.key
        AND t.live + t.inflight = 0 AND t.last_at < $2 AND t.built
    RETURNING t.rule, t.key
)
DELETE FROM sandbox_router_budget_charges c USING gone WHERE c.rule = gone.rule AND c.key = gone.key";

/// How long the store remembers a reservation of its own whose settlement has not come
/// (its late settlement is written while it does).
const REMEMBER: Duration = Duration::from_secs(86_400);
/// Most reservations of its own a store remembers.
const REMEMBER_MAX: usize = 100_000;

/// A reservation this process made, remembered until its settlement: what a late
/// settlement writes again if another process freed it (its lease lapsed).
#[derive(Debug, Clone)]
pub(super) struct Reservation {
    /// (rule id, value, the window it counts in: NULL for none).
    keys: Vec<(String, String, Option<i64>)>,
    cost: Micros,
    at: i64,
    /// Claimed with a warm member: the claim's transaction settled it.
    claimed: bool,
    made: Instant,
}

/// The reservations this process made and has not settled, by sandbox id.
#[derive(Debug, Default)]
pub(super) struct Remembered {
    by_id: HashMap<String, Reservation>,
}

impl Remembered {
    fn insert(&mut self, id: String, r: Reservation) {
        if self.by_id.len() >= REMEMBER_MAX {
            let now = Instant::now();
            self.by_id.retain(|_, r| now.duration_since(r.made) < REMEMBER);
            if self.by_id.len() >= REMEMBER_MAX {
                // Still full: the oldest goes (a late settlement of it would not be written).
                if let Some(oldest) = self.by_id.iter().min_by_key(|(_, r)| r.made).map(|(k, _)| k.clone()) {
                    self.by_id.remove(&oldest);
                }
            }
        }
        self.by_id.insert(id, r);
    }
}

/// What a settlement wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The reservation was settled (or there was none to settle).
    OnTime,
    /// The reservation had been freed (its process's lease lapsed): the charge was written
    /// again as settled, counted where its window is still current, over a limit if need be.
    Late,
}

/// The kind of a shared key's window, as the statements number it.
fn kind_of(k: &SharedKey) -> i16 {
    if k.window_end.is_some() {
        1
    } else if k.sliding_ms.is_some() {
        2
    } else {
        0
    }
}

/// Keys in lock order: (rule id, value).
fn ordered(keys: &[SharedKey]) -> Vec<(usize, &SharedKey)> {
    let mut v: Vec<(usize, &SharedKey)> = keys.iter().enumerate().collect();
    v.sort_by(|a, b| (&a.1.rule_id, &a.1.value).cmp(&(&b.1.rule_id, &b.1.value)));
    v
}

/// The parameters of [`RESERVE`] for `keys` (in lock order) and a charge.
pub(super) struct ReserveArgs {
    pub(super) rules: Vec<String>,
    pub(super) values: Vec<String>,
    pub(super) since: Vec<i64>,
    pub(super) kinds: Vec<i16>,
    pub(super) limit_cost: Vec<Option<i64>>,
    pub(super) limit_launches: Vec<Option<i64>>,
    pub(super) limit_concurrent: Vec<Option<i64>>,
    /// Input position of each ordered key.
    order: Vec<usize>,
}

impl ReserveArgs {
    pub(super) fn of(keys: &[SharedKey]) -> ReserveArgs {
        let o = ordered(keys);
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        ReserveArgs {
            rules: o.iter().map(|(_, k)| k.rule_id.clone()).collect(),
            values: o.iter().map(|(_, k)| k.value.clone()).collect(),
            since: o.iter().map(|(_, k)| k.since.unwrap_or(i64::MAX)).collect(),
            kinds: o.iter().map(|(_, k)| kind_of(k)).collect(),
            limit_cost: o.iter().map(|(_, k)| k.limits.cost.map(|m| m.0)).collect(),
            limit_launches: o.iter().map(|(_, k)| k.limits.launches.map(clamp)).collect(),
            limit_concurrent: o.iter().map(|(_, k)| k.limits.concurrent.map(clamp)).collect(),
            order: o.iter().map(|(i, _)| *i).collect(),
        }
    }
}

/// What [`RESERVE`] answered.
pub(super) enum Reserved {
    /// Reserved against every key: the windows the charges count in, by input key.
    Yes(Vec<Option<i64>>),
    /// The keys' figures refused it.
    Refused(Vec<Refusal>),
    /// A key row was missing (removed by the lease task between the two statements) or its
    /// window sums were not built yet: nothing was reserved; rebuild (if asked) and retry.
    Retry { rebuild: bool },
}

/// Reads [`RESERVE`]'s rows (`rows`, in lock order) for `keys`, a charge of `cost`.
pub(super) fn reserved_of(
    rows: &[tokio_postgres::Row],
    keys: &[SharedKey],
    args: &ReserveArgs,
    cost: Micros,
) -> Result<Reserved, PgFailure> {
    let bad = |_| PgFailure::Malformed;
    let Some(first) = rows.first() else { return Ok(Reserved::Retry { rebuild: false }) };
    let ok: bool = first.try_get(1).map_err(bad)?;
    let complete: bool = first.try_get(2).map_err(bad)?;
    let built: bool = first.try_get(3).map_err(bad)?;
    if !complete || !built {
        return Ok(Reserved::Retry { rebuild: complete && !built });
    }
    if rows.len() != keys.len() {
        return Err(PgFailure::Malformed);
    }
    let mut windows = vec![None; keys.len()];
    let mut refusals = Vec::new();
    for r in rows {
        let pos: i64 = r.try_get(0).map_err(bad)?;
        let at = usize::try_from(pos - 1).ok().and_then(|p| args.order.get(p).copied()).ok_or(PgFailure::Malformed)?;
        let k = &keys[at];
        let int = |i: usize| r.try_get::<_, i64>(i).map_err(bad);
        let count = |i: usize| -> Result<u64, PgFailure> { Ok(int(i)?.max(0) as u64) };
        let u = Usage {
            used_cost: Micros(int(4)?.max(0)),
            reserved_cost: Micros(int(5)?.max(0)),
            used_launches: count(6)?,
            reserved_launches: count(7)?,
            live: count(8)?,
            inflight: count(9)?,
            oldest: r.try_get(10).map_err(bad)?,
        };
        let ws: i64 = r.try_get(11).map_err(bad)?;
        windows[at] = match kind_of(k) {
            0 => None,
            _ => Some(ws),
        };
        if !ok {
            if let Err(refusal) = k.check(&u, cost) {
                refusals.push(refusal);
            }
        }
    }
    if ok {
        return Ok(Reserved::Yes(windows));
    }
    if refusals.is_empty() {
        // The statement refused what the rule admits: the two copies of the rule disagree.
        return Err(PgFailure::Malformed);
    }
    refusals.sort_by_key(|r| r.rule);
    Ok(Reserved::Refused(refusals))
}

impl PgStore {
    /// Remembers this process's reservation for provision `sandbox` (see [`Reservation`]).
    pub(super) fn remember(&self, sandbox: &str, keys: &[SharedKey], windows: Vec<Option<i64>>, cost: Micros, at: i64) {
        let r = Reservation {
            keys: keys.iter().zip(windows).map(|(k, w)| (k.rule_id.clone(), k.value.clone(), w)).collect(),
            cost,
            at,
            claimed: false,
            made: Instant::now(),
        };
        if let Ok(mut m) = self.remembered.lock() {
            m.insert(sandbox.to_string(), r);
        }
    }

    pub(super) fn forget_reservation(&self, sandbox: &str) -> Option<Reservation> {
        self.remembered.lock().ok()?.by_id.remove(sandbox)
    }

    pub(super) fn mark_claimed(&self, sandbox: &str, claimed: bool) {
        if let Ok(mut m) = self.remembered.lock() {
            if let Some(r) = m.by_id.get_mut(sandbox) {
                r.claimed = claimed;
            }
        }
    }

    /// Reserves one launch of `cost` for provision `sandbox` against every key, in one
    /// transaction (see the module docs). `at`: the router's clock (the charge's time, and
    /// the windows' instant); `hold_ms`: how long the reservation may stay unsettled.
    pub async fn reserve_budget(
        self: &Arc<Self>,
        sandbox: String,
        keys: Vec<SharedKey>,
        cost: Micros,
        at: i64,
        hold_ms: f64,
    ) -> Result<Result<(), Vec<Refusal>>, PgFailure> {
        let out = self
            .launch_transaction(Some(super::launch::BudgetAsk { sandbox, keys, cost, at, hold_ms }), None, false)
            .await?;
        Ok(out.budget.unwrap_or(Ok(())))
    }

    /// Runs [`REBUILD`] for `keys` (its own transaction).
    pub(super) async fn rebuild(&self, keys: &[SharedKey]) -> Result<(), PgFailure> {
        let args = ReserveArgs::of(keys);
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(REBUILD).await?;
                c.client.execute(&s, &[&args.rules, &args.values, &args.since, &args.kinds]).await?;
                Ok(())
            })
        })
        .await
    }

    /// The statements of a settlement `how` (`allocated`, `unknown`, else `nothing`) of
    /// provision `sandbox`, executed on `client` (inside the caller's transaction or alone);
    /// the number of charges it settled.
    pub(super) async fn settle_budget_on(
        client: &Client,
        statements: &BudgetStatements,
        sandbox: &str,
        how: &str,
        until: i64,
    ) -> Result<u64, tokio_postgres::Error> {
        match how {
            "allocated" => client.execute(&statements.allocated, &[&sandbox]).await,
            "unknown" => client.execute(&statements.unknown, &[&sandbox, &until]).await,
            _ => client.execute(&statements.nothing, &[&sandbox]).await,
        }
    }

    /// After a settlement of `sandbox` that settled `n` charges: `Late` (and the charge
    /// written again) when it found none but this process had reserved it and no claim
    /// settled it; the reservation is forgotten either way.
    pub(super) async fn after_settlement(
        &self,
        sandbox: &str,
        how: &str,
        until: i64,
        n: u64,
    ) -> Result<Settled, PgFailure> {
        let Some(r) = self.forget_reservation(sandbox) else { return Ok(Settled::OnTime) };
        if n > 0 || r.claimed || !matches!(how, "allocated" | "unknown") {
            return Ok(Settled::OnTime);
        }
        let session = self.session.clone();
        let sandbox = sandbox.to_string();
        let how = how.to_string();
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(LATE).await?;
                let rules: Vec<&str> = r.keys.iter().map(|k| k.0.as_str()).collect();
                let values: Vec<&str> = r.keys.iter().map(|k| k.1.as_str()).collect();
                let wins: Vec<Option<i64>> = r.keys.iter().map(|k| k.2).collect();
                let hold: Option<f64> = (how == "unknown").then(|| until.saturating_sub(r.at).max(0) as f64);
                let live = true;
                let params: [&(dyn ToSql + Sync); 9] =
                    [&sandbox, &rules, &values, &wins, &r.at, &r.cost.0, &session, &hold, &live];
                c.client.execute(&s, &params).await?;
                Ok(Settled::Late)
            })
        })
        .await
    }

    /// Settles provision `sandbox`'s reservation: `allocated` (used, its slot held until
    /// released), `unknown` (used, its slot held until `until`, the router's clock), or
    /// `nothing` (removed). One that cannot be written now is retried with the lease.
    /// `Late`: its reservation had been freed, and the charge was written again.
    pub async fn settle_budget(&self, sandbox: String, how: String, until: i64) -> Result<Settled, PgFailure> {
        let r = self.settle_budget_once(sandbox.clone(), how.clone(), until).await;
        if r.is_err() {
            self.keep_budget_settlement(sandbox, how, until);
        }
        r
    }

    pub(super) fn keep_budget_settlement(&self, sandbox: String, how: String, until: i64) {
        if let Ok(mut p) = self.pending_budget.lock() {
            p.push((sandbox, how, until));
        }
    }

    async fn settle_budget_once(&self, sandbox: String, how: String, until: i64) -> Result<Settled, PgFailure> {
        let (id, h) = (sandbox.clone(), how.clone());
        let n = self
            .bounded(move |c| {
                Box::pin(async move {
                    let statements = BudgetStatements::prepare(c).await?;
                    Ok(PgStore::settle_budget_on(&c.client, &statements, &id, &h, until).await?)
                })
            })
            .await?;
        self.after_settlement(&sandbox, &how, until, n).await
    }

    pub(super) async fn retry_budget_settlements(&self) {
        let todo = match self.pending_budget.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => return,
        };
        for (sandbox, how, until) in todo {
            if self.settle_budget_once(sandbox.clone(), how.clone(), until).await.is_err() {
                self.keep_budget_settlement(sandbox, how, until);
            }
        }
    }

    /// Replaces provision `sandbox`'s cost in every rule it was charged against; true when
    /// a charge was found.
    pub async fn settle_budget_cost(&self, sandbox: String, cost: Micros) -> Result<bool, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(COST).await?;
                let n: i64 =
                    c.client.query_one(&s, &[&sandbox, &cost.0]).await?.try_get(0).map_err(|_| PgFailure::Malformed)?;
                Ok(n > 0)
            })
        })
        .await
    }

    /// One page of every process's budget keys of `rules` (`(id, since, kind)` in the
    /// router's order), as `query` asks: (rule index, key, usage) in (rule, key) order.
    pub async fn budget_status(
        &self,
        rules: Vec<(String, i64, i16)>,
        query: StatusAsk,
    ) -> Result<Vec<(usize, String, Usage)>, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(STATUS).await?;
                let mut out = Vec::new();
                let start = query.after.as_ref().map_or(0, |(r, _)| *r);
                for (i, (id, since, kind)) in rules.iter().enumerate().skip(start) {
                    if out.len() >= query.limit || query.rule.is_some_and(|r| r != i) {
                        continue;
                    }
                    let after = match &query.after {
                        Some((r, k)) if *r == i => k.clone(),
                        _ => String::new(),
                    };
                    let limit = (query.limit - out.len()) as i64;
                    let params: [&(dyn ToSql + Sync); 6] = [id, since, kind, &after, &query.key, &limit];
                    for r in c.client.query(&s, &params).await? {
                        out.push((i, r.try_get::<_, String>(0).map_err(|_| PgFailure::Malformed)?, usage_of(&r, 1)?));
                    }
                }
                Ok(out)
            })
        })
        .await
    }

    /// How many rows [`PgStore::budget_status`] would list for `query`'s rule and key.
    pub async fn budget_count(&self, rules: Vec<(String, i64, i16)>, query: StatusAsk) -> Result<i64, PgFailure> {
        self.bounded(move |c| {
            Box::pin(async move {
                let s = c.statement(COUNT).await?;
                let mut n = 0i64;
                for (i, (id, since, kind)) in rules.iter().enumerate() {
                    if query.rule.is_some_and(|r| r != i) {
                        continue;
                    }
                    let params: [&(dyn ToSql + Sync); 4] = [id, since, kind, &query.key];
                    n += c
                        .client
                        .query_one(&s, &params)
                        .await?
                        .try_get::<_, i64>(0)
                        .map_err(|_| PgFailure::Malformed)?;
                }
                Ok(n)
            })
        })
        .await
    }

    /// Remembers the window of a rule this process reserves under (the lease task's
    /// clean-up asks about it); the rules are the routers' configuration: bounded.
    pub(super) fn note_rules(&self, keys: &[SharedKey]) {
        if let Ok(mut m) = self.rules_seen.lock() {
            for k in keys {
                let since = k.since.unwrap_or(i64::MAX);
                if m.len() < 1_024 || m.contains_key(&k.rule_id) {
                    m.insert(k.rule_id.clone(), (since, kind_of(k)));
                }
            }
        }
    }

    /// The lease task's clean-up: key rows of the rules this process reserves under that
    /// hold nothing (no slot, nothing in flight, no charge in the rule's current window),
    /// with their charge rows, at most 500 per rule per renewal.
    pub(super) async fn clean_up_keys(&self) {
        let rules: Vec<(String, i64, i16)> = match self.rules_seen.lock() {
            Ok(m) => m.iter().map(|(k, v)| (k.clone(), v.0, v.1)).collect(),
            Err(_) => return,
        };
        for (rule, since, kind) in rules {
            let _ = self
                .bounded(move |c| {
                    Box::pin(async move {
                        let garbage = c.statement(GARBAGE).await?;
                        c.client.execute(&garbage, &[&rule, &since, &kind]).await?;
                        let s = c.statement(CLEANUP).await?;
                        c.client.execute(&s, &[&rule, &since]).await?;
                        Ok(())
                    })
                })
                .await;
        }
    }
}

/// A status page's ask (rule index, key, cursor, size), in the store's terms.
#[derive(Debug, Clone, Default)]
pub struct StatusAsk {
    /// Only this rule (index into the rules given).
    pub rule: Option<usize>,
    /// Only this key.
    pub key: Option<String>,
    /// After (rule index, key).
    pub after: Option<(usize, String)>,
    /// At most this many rows.
    pub limit: usize,
}

/// A status row's figures from column `at` on (used, reserved cost; used, reserved
/// launches; live; in flight; oldest).
fn usage_of(r: &tokio_postgres::Row, at: usize) -> Result<Usage, PgFailure> {
    let int = |i: usize| r.try_get::<_, i64>(at + i).map_err(|_| PgFailure::Malformed);
    Ok(Usage {
        used_cost: Micros(int(0)?.max(0)),
        reserved_cost: Micros(int(1)?.max(0)),
        used_launches: int(2)?.max(0) as u64,
        reserved_launches: int(3)?.max(0) as u64,
        live: int(4)?.max(0) as u64,
        inflight: int(5)?.max(0) as u64,
        oldest: r.try_get(at + 6).map_err(|_| PgFailure::Malformed)?,
    })
}

/// The budget ledger's prepared statements on one connection.
pub(super) struct BudgetStatements {
    pub(super) ensure: tokio_postgres::Statement,
    pub(super) reserve: tokio_postgres::Statement,
    pub(super) allocated: tokio_postgres::Statement,
    pub(super) unknown: tokio_postgres::Statement,
    pub(super) nothing: tokio_postgres::Statement,
}

impl BudgetStatements {
    pub(super) async fn prepare(c: &mut super::Conn) -> Result<BudgetStatements, PgFailure> {
        Ok(BudgetStatements {
            ensure: c.statement(ENSURE).await?,
            reserve: c.statement(RESERVE).await?,
            allocated: c.statement(ALLOCATED).await?,
            unknown: c.statement(UNKNOWN).await?,
            nothing: c.statement(NOTHING).await?,
        })
    }
}
