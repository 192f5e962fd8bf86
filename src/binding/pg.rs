//! napi glue for the PostgreSQL store and coordinator ([`crate::stores::pg`]).
//!
//! Why async native calls here, when the SQLite store writes synchronously? A PostgreSQL
//! call is a network round trip (or several, for an admission): it must not block the JS
//! thread. Each method runs on napi's tokio runtime and resolves to a typed value; a failure
//! rejects with a typed error that carries only its stable code (`MAPPING_PERSISTENCE_FAILED`
//! for writes, `MAPPING_READ_FAILED` for reads, `MAPPING_STORE_OPEN_FAILED` /
//! `MAPPING_STORE_SCHEMA_TOO_NEW` for `open`, `COORDINATOR_UNAVAILABLE` for the ledger).
//!
//! The warm inventory (`stores::pg`'s `warm_*`): with the store as a coordinator, the
//! fleet's idle members and granted refills; each call's failure is
//! `COORDINATOR_UNAVAILABLE`, except a member's settlement, which writes its record:
//! `MAPPING_PERSISTENCE_FAILED`.
//!
//! TLS (`stores::pg_tls`): the mode comes from `ssl` (the JS class maps `ssl: true` to `{}`
//! and `ssl: false` to `{ mode: 'disable' }`) or from the URL's `sslmode`; the CA is PEM
//! text, never a file. A TLS failure rejects with the operation's code and
//! `details.tls: true`.
//!
//! The connection options, password included, are turned into a `tokio_postgres::Config`
//! in the constructor and live only in native memory: the JS class keeps no copy, and no
//! error or value that crosses back carries any of it (the database's own messages, which
//! may name users or hosts, are dropped in `stores::pg`).

use crate::binding::error::{guard, typed_future, Failure, NativeError};
use crate::binding::records::{
    shared_status, AdmitVerdict, BudgetDemand, BudgetDemandKey, BudgetRefusalRecord, BudgetRuleRecord,
    BudgetSettlement, BudgetStatusQuery, BudgetStatusRecord, BudgetVerdict, DemandRecord,
};
use crate::binding::records::{IntentRecord, MappingRecord};
use crate::binding::records::{WarmCounts, WarmMemberRecord};
use crate::binding::sqlite::{checked_op, to_record, BatchOp};
use crate::core::budget::{Micros, Refusal};
use crate::core::decision;
use crate::core::error::ErrorClass;
use crate::core::shared_ledger::Dim;
use crate::stores::pg::{
    BudgetAsk, BudgetSettlement as PgBudgetSettlement, DecisionRow, HoldSettlement, PgFailure, PgSettings, PgStore,
    Settled, StatusAsk, Verdict, WarmRow,
};
use crate::stores::pg_tls::{parse_ca, split_sslmode, CaError, TlsMode, TlsSettings, UrlTlsError};
use crate::stores::record::Op;
use crate::stores::record::Row;
use napi::bindgen_prelude::PromiseRaw;
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::Host;
use tokio_postgres::Config;

/// Connection options as an object (or use `url`). A `host` that starts with `/` is a
/// directory holding the server's unix socket.
#[napi(object, object_to_js = false)]
pub struct PgConnectOptions {
    /// `postgres://user:password@host:port/database?options` (libpq's URL form; also the
    /// `key=value` form). Exclusive with the other fields.
    pub url: Option<String>,
    /// Host name, IP address, or unix socket directory.
    pub host: Option<String>,
    /// Port (default 5432).
    pub port: Option<u32>,
    /// User.
    pub user: Option<String>,
    /// Password (kept in native memory only).
    pub password: Option<String>,
    /// Database (default: the user's name).
    pub database: Option<String>,
    /// TLS (absent: the URL's `sslmode`, else none).
    pub ssl: Option<PgSslOptions>,
}

/// TLS options of a connection.
#[napi(object, object_to_js = false)]
pub struct PgSslOptions {
    /// `disable`, `prefer`, `require`, `verify-ca` or `verify-full` (default: the URL's
    /// `sslmode`, else `verify-full`).
    pub mode: Option<String>,
    /// Extra trusted CA certificates, PEM text (Mozilla's roots are always trusted).
    pub ca: Option<String>,
}

type Result<T> = std::result::Result<T, Failure>;

fn config_err(field: &str, what: &str) -> Failure {
    NativeError::invalid(
        ErrorClass::Configuration,
        "INVALID_CONFIGURATION",
        format!("invalid PostgresMappingStore options: {field} {what}"),
        field,
    )
}

const MODES: &str = "must be one of disable, prefer, require, verify-ca, verify-full";

fn config_of(o: PgConnectOptions) -> Result<(Config, TlsSettings)> {
    let fields =
        o.host.is_some() || o.port.is_some() || o.user.is_some() || o.password.is_some() || o.database.is_some();
    let mut url_mode = None;
    let config = match o.url {
        Some(url) => {
            if fields {
                return Err(config_err("connection", "takes either url or host/port/user/password/database, not both"));
            }
            let (rest, mode) = split_sslmode(&url).map_err(|e| match e {
                UrlTlsError::BadMode => config_err("connection.sslmode", MODES),
                UrlTlsError::Repeated => config_err("connection.sslmode", "is given more than once"),
                UrlTlsError::FileOption => config_err(
                    "connection.url",
                    "names a TLS file (sslrootcert, sslcert, sslkey, ...): files are not read; pass the CA's PEM text as connection.ssl.ca",
                ),
            })?;
            url_mode = mode;
            // The parser's error text may quote the URL (and so the password): dropped.
            Config::from_str(&rest)
                .map_err(|_| config_err("connection.url", "is not a PostgreSQL connection string"))?
        }
        None => {
            let mut c = Config::new();
            match o.host {
                Some(h) if !h.is_empty() => c.host(&h),
                _ => return Err(config_err("connection.host", "must be a non-empty host or socket directory")),
            };
            if let Some(p) = o.port {
                let p = u16::try_from(p)
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| config_err("connection.port", "must be a port number"))?;
                c.port(p);
            }
            if let Some(u) = o.user {
                c.user(&u);
            }
            if let Some(p) = o.password {
                c.password(p);
            }
            if let Some(d) = o.database {
                c.dbname(&d);
            }
            c
        }
    };
    if config.get_hosts().is_empty() {
        return Err(config_err("connection.host", "is missing"));
    }
    if config.get_user().is_none() {
        return Err(config_err("connection.user", "is missing"));
    }
    let (mode, ca) = match o.ssl {
        None => (url_mode.unwrap_or(TlsMode::Disable), None),
        Some(ssl) => {
            let explicit = match ssl.mode {
                Some(m) => Some(TlsMode::parse(&m).ok_or_else(|| config_err("connection.ssl.mode", MODES))?),
                None => None,
            };
            if let (Some(a), Some(b)) = (explicit, url_mode) {
                if a != b {
                    return Err(config_err("connection.ssl.mode", "conflicts with the url's sslmode"));
                }
            }
            (explicit.or(url_mode).unwrap_or(TlsMode::VerifyFull), ssl.ca)
        }
    };
    let ca = match ca {
        None => Vec::new(),
        Some(pem) => {
            if mode == TlsMode::Disable {
                return Err(config_err("connection.ssl.ca", "is given but TLS is disabled"));
            }
            // Never quoted: the text is the caller's.
            parse_ca(&pem).map_err(|e| match e {
                CaError::NoCertificate => {
                    config_err("connection.ssl.ca", "must be PEM text with at least one certificate")
                }
                CaError::Unusable => config_err("connection.ssl.ca", "holds a certificate that cannot be a trust root"),
            })?
        }
    };
    if mode != TlsMode::Disable
        && mode != TlsMode::Prefer
        && config.get_hosts().iter().all(|h| !matches!(h, Host::Tcp(_)))
    {
        return Err(config_err("connection.ssl", "needs a TCP host: PostgreSQL does not offer TLS over a unix socket"));
    }
    let tls = TlsSettings::new(mode, &ca)
        .map_err(|_| config_err("connection.ssl.ca", "holds a certificate that cannot be a trust root"))?;
    Ok((config, tls))
}

fn fail(code: &str, what: &str, f: PgFailure) -> Failure {
    let class = ErrorClass::MappingPersistence;
    match f {
        PgFailure::SchemaTooNew(v) => NativeError::new(
            class,
            "MAPPING_STORE_SCHEMA_TOO_NEW",
            format!("the database has mapping schema version {v}, newer than this build knows"),
        ),
        PgFailure::TimedOut => {
            let mut e =
                NativeError::new(class, code, format!("{what}: the database call did not finish within its deadline"));
            e.timed_out = Some(true);
            e
        }
        PgFailure::Tls => {
            let mut e = NativeError::new(
                class,
                code,
                format!(
                    "{what}: the TLS connection failed (the server's certificate is not trusted or not for its host, or the server does not offer TLS)"
                ),
            );
            e.tls = Some(true);
            e
        }
        PgFailure::Failed | PgFailure::Malformed => {
            NativeError::new(class, code, format!("{what}: the database call failed"))
        }
    }
}

fn unavailable(f: PgFailure) -> Failure {
    fail(COORDINATOR, "the capacity coordinator is unavailable", f)
}

fn member_of(r: WarmRow) -> WarmMemberRecord {
    WarmMemberRecord {
        provider_id: r.pool,
        sandbox_id: r.id,
        provider_sandbox_id: r.provider_sandbox_id,
        launched_at: r.launched_at as f64,
    }
}

fn now_text() -> String {
    crate::core::clock::iso8601_millis(crate::binding::clock::now_millis())
}

const WRITE: &str = "MAPPING_PERSISTENCE_FAILED";
const READ: &str = "MAPPING_READ_FAILED";
const COORDINATOR: &str = "COORDINATOR_UNAVAILABLE";

/// What `PostgresMappingStore.decisionSink(options)` keeps (`core::decision::Retention`).
#[napi(object)]
pub struct DecisionRetention {
    /// Records kept, the newest.
    pub keep: f64,
    /// Longest a record is kept, in ms.
    pub max_age_ms: f64,
}

/// Reads `decisionSink(options)` (`optionsJson`: JSON text; `null`: the defaults) by the
/// core's rule; throws `INVALID_CONFIGURATION` naming the field.
#[napi]
pub fn decision_retention(env: Env, options_json: String) -> napi::Result<DecisionRetention> {
    guard(&env, || {
        let v = serde_json::from_str(&options_json).unwrap_or(Value::Bool(false));
        let r = decision::read_retention(&v)?;
        Ok(DecisionRetention { keep: r.keep as f64, max_age_ms: r.max_age_ms as f64 })
    })
}

/// The native half of `PostgresMappingStore`: a connection pool, the schema, this process's
/// session in the shared capacity ledger.
#[napi]
pub struct NativePgStore {
    inner: Arc<PgStore>,
}

#[napi]
impl NativePgStore {
    /// A store over `connection` (nothing connects until the first call). `timeoutMs`
    /// bounds every call; `poolSize` connections at most; `leaseMs`: the lease of this
    /// process's in-flight holds. Throws the typed `INVALID_CONFIGURATION` error.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        connection: PgConnectOptions,
        timeout_ms: u32,
        pool_size: u32,
        lease_ms: u32,
    ) -> napi::Result<Self> {
        guard(&env, || {
            let (config, tls) = config_of(connection)?;
            let settings = PgSettings {
                timeout: Duration::from_millis(u64::from(timeout_ms.max(1))),
                pool_size: pool_size.max(1) as usize,
                lease: Duration::from_millis(u64::from(lease_ms.max(1))),
            };
            Ok(NativePgStore { inner: Arc::new(PgStore::new(config, tls, settings)) })
        })
    }

    /// This process's session id in the shared ledger.
    #[napi(getter)]
    pub fn session(&self) -> String {
        self.inner.session().to_string()
    }

    /// Keeps a decision record (`recordJson`: its JSON text) in the fleet's table, then prunes
    /// the table past `keep` records and `maxAgeMs` (`decisionRetention`'s values) at most once
    /// a second (`stores::pg` decisions.rs). A record that is not one rejects with
    /// `INVALID_DECISION_RECORD`; a failed write with `MAPPING_PERSISTENCE_FAILED`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn keep_decision<'env>(
        &self,
        env: &'env Env,
        record_json: String,
        keep: f64,
        max_age_ms: f64,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let (id, at, sandbox_id) = decision::read_table_keys(&record_json)?;
            let retention = decision::Retention::within(keep, max_age_ms);
            let row = DecisionRow { id, at, sandbox_id, text: record_json };
            let now = crate::binding::clock::now_millis();
            inner
                .keep_decision(row, retention, now)
                .await
                .map_err(|f| fail(WRITE, "the decision record could not be written", f))
        })
    }

    /// The fleet's kept decision records (`queryJson`: `{ sandboxId?, since?, limit? }` as
    /// JSON text, read by the core's rule: `INVALID_INPUT` naming the field), newest first.
    #[napi(ts_return_type = "Promise<Array<Record<string, unknown>>>")]
    pub fn decisions<'env>(&self, env: &'env Env, query_json: String) -> napi::Result<PromiseRaw<'env, Vec<Value>>> {
        let query = serde_json::from_str(&query_json).unwrap_or(Value::Bool(false));
        let inner = self.inner.clone();
        typed_future(env, async move {
            let q = decision::read_query(&query)?;
            let texts =
                inner.decisions(q).await.map_err(|f| fail(READ, "the decision records could not be read", f))?;
            let read = |t: &String| {
                serde_json::from_str(t)
                    .map_err(|_| fail(READ, "the decision records could not be read", PgFailure::Malformed))
            };
            texts.iter().map(read).collect()
        })
    }

    /// Connects and migrates now; the schema version.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn open<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, u32>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let v = inner
                .open()
                .await
                .map_err(|f| fail("MAPPING_STORE_OPEN_FAILED", "the mapping store could not be opened", f))?;
            Ok(v as u32)
        })
    }

    /// One write (`{ op: 'put' | 'intent' | 'delete', ... }`, JSON, validated before
    /// anything is sent). Resolves to whether it changed a record (a delete: whether a
    /// mapping existed).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn apply<'env>(&self, env: &'env Env, op_json: String) -> napi::Result<PromiseRaw<'env, bool>> {
        let checked = serde_json::from_str::<BatchOp>(&op_json)
            .map_err(|_| {
                NativeError::invalid(
                    ErrorClass::RequestValidation,
                    "INVALID_INPUT",
                    "invalid mapping record: the write is malformed",
                    "record",
                )
            })
            .and_then(checked_op);
        let inner = self.inner.clone();
        typed_future(env, async move {
            let what = "the mapping store could not write";
            match checked? {
                Op::Put(row) => inner.put(row).await.map(|_| true).map_err(|f| fail(WRITE, what, f)),
                Op::Intent(i) => inner.put_intent(i).await.map(|_| true).map_err(|f| fail(WRITE, what, f)),
                Op::Delete(id) => inner.delete(id).await.map_err(|f| fail(WRITE, what, f)),
            }
        })
    }

    /// The record of `id`, or null.
    #[napi(ts_return_type = "Promise<MappingRecord | null>")]
    pub fn get<'env>(&self, env: &'env Env, id: String) -> napi::Result<PromiseRaw<'env, Option<MappingRecord>>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            inner
                .get(id)
                .await
                .map_err(|f| fail(READ, "the mapping store could not read", f))?
                .map(to_record)
                .transpose()
        })
    }

    /// Every record, ordered by id.
    #[napi(ts_return_type = "Promise<Array<MappingRecord>>")]
    pub fn list<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Vec<MappingRecord>>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let rows = inner.list().await.map_err(|f| fail(READ, "the mapping store could not read", f))?;
            rows.into_iter().map(to_record).collect()
        })
    }

    /// Number of records.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn count<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, u32>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let n = inner.count().await.map_err(|f| fail(READ, "the mapping store could not read", f))?;
            Ok(n.clamp(0, i64::from(u32::MAX)) as u32)
        })
    }

    /// Every intent record, ordered by id.
    #[napi(ts_return_type = "Promise<Array<IntentRecord>>")]
    pub fn intents<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Vec<IntentRecord>>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let rows = inner.intents().await.map_err(|f| fail(READ, "the mapping store could not read", f))?;
            Ok(rows.into_iter().map(IntentRecord::from).collect())
        })
    }

    /// A read sequence number for the shared ledger, taken before a capacity read starts.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn begin_read<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, f64>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let s = inner
                .begin_read()
                .await
                .map_err(|f| fail(COORDINATOR, "the capacity coordinator is unavailable", f))?;
            Ok(s as f64)
        })
    }

    /// Admits one launch in the shared ledger (one statement under the pool's row lock):
    /// `demand` is the router's (`acquisitionDemand`): the pool, the dimensions, how long the
    /// hold may stay unsettled, the provision's id (its destroy releases the hold) and the
    /// pool's rate limit (the fleet's bucket gives a token with the hold).
    #[napi(ts_return_type = "Promise<AdmitVerdict>")]
    pub fn admit<'env>(
        &self,
        env: &'env Env,
        read_seq: f64,
        demand: DemandRecord,
    ) -> napi::Result<PromiseRaw<'env, AdmitVerdict>> {
        let DemandRecord { provider_id: pool, dims, hold_ms, sandbox_id, rate_limit, lane, waits } = demand;
        let sandbox_id = Some(sandbox_id).filter(|s| !s.is_empty());
        let dims: Vec<Dim> = dims
            .into_iter()
            .map(|d| Dim { resource: d.resource, used: d.used, limit: d.limit, need: d.need })
            .collect();
        let hold_ms = if hold_ms.is_finite() && hold_ms > 0.0 { hold_ms } else { 60_000.0 };
        let pace = rate_limit.map(|l| (l.launches_per_second, l.burst, lane, waits.unwrap_or(false)));
        let inner = self.inner.clone();
        typed_future(env, async move {
            let v = inner
                .admit(pool, read_seq as i64, dims, hold_ms, sandbox_id, pace)
                .await
                .map_err(|f| fail(COORDINATOR, "the capacity coordinator is unavailable", f))?;
            let none = AdmitVerdict { token: None, resource: None, paced: None, retry_in_ms: None };
            Ok(match v {
                Verdict::Admitted(t) => AdmitVerdict { token: Some(t as f64), ..none },
                Verdict::Exhausted(r) => AdmitVerdict { resource: Some(r), ..none },
                Verdict::Paced { reason, in_ms } => {
                    AdmitVerdict { paced: Some(reason.to_string()), retry_in_ms: Some(in_ms), ..none }
                }
            })
        })
    }

    /// Cools `pool` down for the whole fleet for `ms` (a classifier's `retryAfterMs`): every
    /// process's admission on it is refused as `COOLING_DOWN` until then.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn cool<'env>(&self, env: &'env Env, pool: String, ms: f64) -> napi::Result<PromiseRaw<'env, bool>> {
        let inner = self.inner.clone();
        typed_future(env, async move { Ok(inner.cool(pool, ms).await.is_ok()) })
    }

    /// Settles a hold (see `stores::pg::PgStore::settle`). Resolves to whether it was
    /// written now (false: kept and retried with the lease renewal).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn settle<'env>(
        &self,
        env: &'env Env,
        token: f64,
        allocated: bool,
        ttl_ms: f64,
    ) -> napi::Result<PromiseRaw<'env, bool>> {
        let inner = self.inner.clone();
        typed_future(env, async move { Ok(inner.settle(token as i64, allocated, ttl_ms as i64).await.is_ok()) })
    }

    /// Reserves a provision's budgets in the shared ledger (one transaction: the keys' rows
    /// locked, what time has ended applied to their totals, every limit checked):
    /// reserved, or the rules that refused.
    #[napi(ts_return_type = "Promise<BudgetVerdict>")]
    pub fn reserve_budget<'env>(
        &self,
        env: &'env Env,
        demand: BudgetDemand,
    ) -> napi::Result<PromiseRaw<'env, BudgetVerdict>> {
        let inner = self.inner.clone();
        let ask = budget_ask(demand);
        typed_future(env, async move {
            let r = inner
                .reserve_budget(ask.sandbox, ask.keys, ask.cost, ask.at, ask.hold_ms)
                .await
                .map_err(|f| fail(COORDINATOR, "the budget ledger is unavailable", f))?;
            Ok(verdict_record(r))
        })
    }

    /// A provision's first transaction before a launch (`stores::pg::launch`): its budget
    /// reservation (`demand`), its launch intent (`intentJson`, a mapping store's intent
    /// write: written only when the reservation was made) and a read sequence (`seq`), in
    /// one transaction. Fails as `COORDINATOR_UNAVAILABLE` (nothing was written).
    #[napi(ts_return_type = "Promise<LaunchPrepared>")]
    pub fn prepare_launch<'env>(
        &self,
        env: &'env Env,
        demand: Option<BudgetDemand>,
        intent_json: Option<String>,
        seq: bool,
    ) -> napi::Result<PromiseRaw<'env, LaunchPrepared>> {
        let intent = intent_json.map(|j| {
            match serde_json::from_str::<BatchOp>(&j).map_err(|_| bad_write()).and_then(checked_op) {
                Ok(Op::Intent(i)) => Ok(i),
                Ok(_) => Err(bad_write()),
                Err(e) => Err(e),
            }
        });
        let ask = demand.map(budget_ask);
        let inner = self.inner.clone();
        typed_future(env, async move {
            let intent = intent.transpose()?;
            let p = inner
                .launch_transaction(ask, intent, seq)
                .await
                .map_err(|f| fail(COORDINATOR, "the capacity coordinator is unavailable", f))?;
            Ok(LaunchPrepared { verdict: p.budget.map(verdict_record), seq: p.seq.map(|s| s as f64), intent: p.intent })
        })
    }

    /// A provision's last transaction (`stores::pg::launch`): its mapping record
    /// (`recordJson`, a mapping store's put), its capacity hold's settlement and its budget
    /// settlement, in one transaction. Rejects with `MAPPING_PERSISTENCE_FAILED` when a
    /// record was asked and could not be written (the settlements are then kept and retried
    /// with the lease renewal); `late`: the budget's reservation had been freed (this
    /// process's lease lapsed) and its charge was written again.
    #[napi(ts_return_type = "Promise<LaunchSettledRecord>")]
    pub fn settle_launch<'env>(
        &self,
        env: &'env Env,
        record_json: Option<String>,
        hold: Option<HoldSettlementRecord>,
        budget: Option<BudgetSettlement>,
    ) -> napi::Result<PromiseRaw<'env, LaunchSettledRecord>> {
        let record = record_json.map(|j| {
            match serde_json::from_str::<BatchOp>(&j).map_err(|_| bad_write()).and_then(checked_op) {
                Ok(Op::Put(row)) => Ok(row),
                Ok(_) => Err(bad_write()),
                Err(e) => Err(e),
            }
        });
        let hold =
            hold.map(|h| HoldSettlement { token: h.token as i64, allocated: h.allocated, ttl_ms: h.ttl_ms as i64 });
        let budget = budget.map(|b| PgBudgetSettlement {
            sandbox: b.sandbox_id,
            how: b.how,
            until: b.until_ms.unwrap_or(0.0) as i64,
        });
        let inner = self.inner.clone();
        typed_future(env, async move {
            let record = record.transpose()?;
            let s = inner
                .settle_launch(record, hold, budget)
                .await
                .map_err(|f| fail(WRITE, "the mapping store could not write", f))?;
            Ok(LaunchSettledRecord { recorded: s.recorded, late: s.late })
        })
    }

    /// A destroy's writes in one statement: the mapping and intent of `id` deleted, its
    /// capacity holds released, its budget slot given back. Rejects with
    /// `MAPPING_PERSISTENCE_FAILED`.
    #[napi(ts_return_type = "Promise<Forgotten>")]
    pub fn forget<'env>(&self, env: &'env Env, id: String) -> napi::Result<PromiseRaw<'env, Forgotten>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let (mapped, budget) =
                inner.forget(id).await.map_err(|f| fail(WRITE, "the mapping store could not write", f))?;
            Ok(Forgotten { mapped, budget })
        })
    }

    /// Settles a provision's budget reservation (`allocated`, `unknown` until `untilMs`, or
    /// `nothing`): `written`, `late` (its reservation had been freed: the charge was written
    /// again), or `kept` (not written now: retried with the lease).
    #[napi(ts_return_type = "Promise<BudgetSettlementOutcome>")]
    pub fn settle_budget<'env>(
        &self,
        env: &'env Env,
        sandbox_id: String,
        how: String,
        until_ms: f64,
    ) -> napi::Result<PromiseRaw<'env, BudgetSettlementOutcome>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            Ok(match inner.settle_budget(sandbox_id, how, until_ms as i64).await {
                Ok(Settled::OnTime) => BudgetSettlementOutcome::Written,
                Ok(Settled::Late) => BudgetSettlementOutcome::Late,
                Err(_) => BudgetSettlementOutcome::Kept,
            })
        })
    }

    /// Sandbox `id` is gone: its capacity holds are deleted and its budget charges stop
    /// holding a concurrent slot. Resolves to whether a slot was released.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release_sandbox<'env>(&self, env: &'env Env, id: String) -> napi::Result<PromiseRaw<'env, bool>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            inner.release_sandbox(id).await.map_err(|f| fail(COORDINATOR, "the budget ledger is unavailable", f))
        })
    }

    /// Replaces a provision's budget cost (0 to 1e9, kept in millionths); resolves to
    /// whether a charge was found.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn settle_budget_cost<'env>(
        &self,
        env: &'env Env,
        id: String,
        cost: f64,
    ) -> napi::Result<PromiseRaw<'env, bool>> {
        let inner = self.inner.clone();
        let cost = Micros::of(cost).ok_or_else(|| {
            NativeError::invalid(
                ErrorClass::RequestValidation,
                "INVALID_INPUT",
                format!("invalid settleCost: actualCost {}", crate::core::budget::COST_RANGE),
                "actualCost",
            )
        });
        typed_future(env, async move {
            inner
                .settle_budget_cost(id, cost?)
                .await
                .map_err(|f| fail(COORDINATOR, "the budget ledger is unavailable", f))
        })
    }

    /// One page of every process's budget keys of `rules` (the router's, in its order), as
    /// `query` asks (`router.budgetStatus()`).
    #[napi(ts_return_type = "Promise<Array<BudgetStatusRecord>>")]
    pub fn budget_status<'env>(
        &self,
        env: &'env Env,
        rules: Vec<BudgetRuleRecord>,
        query: Option<BudgetStatusQuery>,
    ) -> napi::Result<PromiseRaw<'env, Vec<BudgetStatusRecord>>> {
        let inner = self.inner.clone();
        let asked = status_ask(&rules, &query.unwrap_or_default());
        typed_future(env, async move {
            let (windows, ask) = asked?;
            let usage = inner
                .budget_status(windows, ask)
                .await
                .map_err(|f| fail(COORDINATOR, "the budget ledger is unavailable", f))?;
            Ok(shared_status(&rules, usage))
        })
    }

    /// How many rows `budgetStatus` would list for `query`'s rule and key, every process's.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn budget_count<'env>(
        &self,
        env: &'env Env,
        rules: Vec<BudgetRuleRecord>,
        query: Option<BudgetStatusQuery>,
    ) -> napi::Result<PromiseRaw<'env, f64>> {
        let inner = self.inner.clone();
        let asked = status_ask(&rules, &query.unwrap_or_default());
        typed_future(env, async move {
            let (windows, ask) = asked?;
            let n = inner
                .budget_count(windows, ask)
                .await
                .map_err(|f| fail(COORDINATOR, "the budget ledger is unavailable", f))?;
            Ok(n as f64)
        })
    }

    /// Unexpired holds of `pool`, every process's (for tests and dashboards).
    #[napi(ts_return_type = "Promise<number>")]
    pub fn held<'env>(&self, env: &'env Env, pool: String) -> napi::Result<PromiseRaw<'env, u32>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let n =
                inner.held(pool).await.map_err(|f| fail(COORDINATOR, "the capacity coordinator is unavailable", f))?;
            Ok(n.clamp(0, i64::from(u32::MAX)) as u32)
        })
    }

    /// Grants up to `want` refill launches of pool `pool` of fleet `fleet` toward the
    /// fleet's target `size` (one transaction under the pool's warm lock); `holdMs`: how long
    /// a grant may stay unsettled. Resolves to the grants' tokens.
    #[napi(ts_return_type = "Promise<Array<number>>")]
    pub fn warm_reserve<'env>(
        &self,
        env: &'env Env,
        fleet: String,
        pool: String,
        size: u32,
        want: u32,
        hold_ms: f64,
    ) -> napi::Result<PromiseRaw<'env, Vec<f64>>> {
        let inner = self.inner.clone();
        let hold_ms = if hold_ms.is_finite() && hold_ms > 0.0 { hold_ms } else { 60_000.0 };
        typed_future(env, async move {
            let tokens = inner.warm_reserve(fleet, pool, size, want, hold_ms).await.map_err(unavailable)?;
            Ok(tokens.into_iter().map(|t| t as f64).collect())
        })
    }

    /// Gives a granted refill launch back (it failed).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn warm_release<'env>(&self, env: &'env Env, token: f64) -> napi::Result<PromiseRaw<'env, bool>> {
        let inner = self.inner.clone();
        typed_future(env, async move { inner.warm_release(token as i64).await.map_err(unavailable) })
    }

    /// A granted refill (`token`) launched `member` of fleet `fleet`: it becomes idle and its
    /// record (the stamp and the warm label) is written, in one transaction. Fails as
    /// `MAPPING_PERSISTENCE_FAILED` (the caller destroys the member).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn warm_settle<'env>(
        &self,
        env: &'env Env,
        token: f64,
        fleet: String,
        member: WarmMemberRecord,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            crate::core::ids::SandboxKey::parse_checked(&member.sandbox_id)?;
            let labels = serde_json::json!({
                crate::core::request::SANDBOX_ID_LABEL: member.sandbox_id,
                crate::core::request::SANDBOX_FLEET_LABEL: fleet,
                crate::core::request::SANDBOX_WARM_LABEL: member.provider_id,
            });
            let record = Row {
                id: member.sandbox_id.clone(),
                provider_id: member.provider_id.clone(),
                provider_sandbox_id: member.provider_sandbox_id.clone(),
                labels_json: labels.to_string(),
                created_at: now_text(),
                detached: false,
            };
            let row = WarmRow {
                pool: member.provider_id,
                id: member.sandbox_id,
                provider_sandbox_id: member.provider_sandbox_id,
                launched_at: member.launched_at as i64,
            };
            inner
                .warm_settle(token as i64, fleet, row, record)
                .await
                .map_err(|f| fail(WRITE, "the warm member's record could not be written", f))
        })
    }

    /// Claims the oldest idle member of pool `pool` of fleet `fleet` launched at or after
    /// `floor` (router-clock ms), in one transaction (`FOR UPDATE SKIP LOCKED`): its record
    /// is rewritten with `labels` (the provision's own; its id and fleet added) and
    /// `detached`; with `charge` (the provision's id, under shared budgets) its reservation
    /// becomes the member's settled charge. Resolves to the member, or null when none is
    /// claimable.
    #[napi(ts_return_type = "Promise<WarmMemberRecord | null>")]
    #[allow(clippy::too_many_arguments, reason = "a napi method: flat typed arguments, as JavaScript passes them")]
    pub fn warm_claim<'env>(
        &self,
        env: &'env Env,
        fleet: String,
        pool: String,
        floor: f64,
        labels: HashMap<String, String>,
        detached: bool,
        charge: Option<String>,
    ) -> napi::Result<PromiseRaw<'env, Option<WarmMemberRecord>>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let stamp_fleet = fleet.clone();
            let record = move |m: &WarmRow| {
                let mut all: serde_json::Map<String, serde_json::Value> =
                    labels.into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect();
                all.insert(crate::core::request::SANDBOX_ID_LABEL.into(), m.id.clone().into());
                all.insert(crate::core::request::SANDBOX_FLEET_LABEL.into(), stamp_fleet.into());
                all.remove(crate::core::request::SANDBOX_WARM_LABEL);
                Row {
                    id: m.id.clone(),
                    provider_id: m.pool.clone(),
                    provider_sandbox_id: m.provider_sandbox_id.clone(),
                    labels_json: serde_json::Value::Object(all).to_string(),
                    created_at: now_text(),
                    detached,
                }
            };
            let claimed = inner.warm_claim(fleet, pool, floor as i64, charge, record).await.map_err(unavailable)?;
            Ok(claimed.map(member_of))
        })
    }

    /// Takes the idle members of pool `pool` launched before `floor` out of the inventory
    /// (expired: the caller destroys them).
    #[napi(ts_return_type = "Promise<Array<WarmMemberRecord>>")]
    pub fn warm_expire<'env>(
        &self,
        env: &'env Env,
        fleet: String,
        pool: String,
        floor: f64,
    ) -> napi::Result<PromiseRaw<'env, Vec<WarmMemberRecord>>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            Ok(inner
                .warm_expire(fleet, pool, floor as i64)
                .await
                .map_err(unavailable)?
                .into_iter()
                .map(member_of)
                .collect())
        })
    }

    /// A member claimed with `charge` was found gone: this process's charge under
    /// `memberId` goes back to provision `provisionId`, in flight again (true when found).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn warm_uncharge<'env>(
        &self,
        env: &'env Env,
        member_id: String,
        provision_id: String,
    ) -> napi::Result<PromiseRaw<'env, bool>> {
        let inner = self.inner.clone();
        typed_future(env, async move { inner.warm_uncharge(member_id, provision_id).await.map_err(unavailable) })
    }

    /// Takes member `sandboxId` out of the inventory if it is idle: the member, or null.
    #[napi(ts_return_type = "Promise<WarmMemberRecord | null>")]
    pub fn warm_take<'env>(
        &self,
        env: &'env Env,
        sandbox_id: String,
    ) -> napi::Result<PromiseRaw<'env, Option<WarmMemberRecord>>> {
        let inner = self.inner.clone();
        typed_future(env, async move { Ok(inner.warm_take(sandbox_id).await.map_err(unavailable)?.map(member_of)) })
    }

    /// The idle members of pool `pool` that this process launched (it re-resolves them).
    #[napi(ts_return_type = "Promise<Array<WarmMemberRecord>>")]
    pub fn warm_mine<'env>(
        &self,
        env: &'env Env,
        fleet: String,
        pool: String,
    ) -> napi::Result<PromiseRaw<'env, Vec<WarmMemberRecord>>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            Ok(inner.warm_mine(fleet, pool).await.map_err(unavailable)?.into_iter().map(member_of).collect())
        })
    }

    /// Takes every idle member this process launched out of the inventory and gives its
    /// granted refills back (`close()`).
    #[napi(ts_return_type = "Promise<Array<WarmMemberRecord>>")]
    pub fn warm_take_mine<'env>(
        &self,
        env: &'env Env,
        fleet: String,
    ) -> napi::Result<PromiseRaw<'env, Vec<WarmMemberRecord>>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            Ok(inner.warm_take_mine(fleet).await.map_err(unavailable)?.into_iter().map(member_of).collect())
        })
    }

    /// Every pool's counts in the fleet's inventory of fleet `fleet`.
    #[napi(ts_return_type = "Promise<Array<WarmCounts>>")]
    pub fn warm_counts<'env>(&self, env: &'env Env, fleet: String) -> napi::Result<PromiseRaw<'env, Vec<WarmCounts>>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            Ok(inner
                .warm_counts(fleet)
                .await
                .map_err(unavailable)?
                .into_iter()
                .map(|c| WarmCounts { provider_id: c.pool, idle: c.idle as f64, launching: c.launching as f64 })
                .collect())
        })
    }

    /// Idle members of pool `pool` launched at or after `floor`: what a claim could take.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn warm_claimable<'env>(
        &self,
        env: &'env Env,
        fleet: String,
        pool: String,
        floor: f64,
    ) -> napi::Result<PromiseRaw<'env, u32>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            let n = inner.warm_claimable(fleet, pool, floor as i64).await.map_err(unavailable)?;
            Ok(n.clamp(0, i64::from(u32::MAX)) as u32)
        })
    }

    /// Ends this process's session (its in-flight holds are released) and closes idle
    /// connections.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let inner = self.inner.clone();
        typed_future(env, async move {
            inner.close().await;
            Ok(())
        })
    }
}

fn bad_write() -> Failure {
    NativeError::invalid(
        ErrorClass::RequestValidation,
        "INVALID_INPUT",
        "invalid mapping record: the write is malformed",
        "record",
    )
}

/// The store's form of a demand (its cost in exact micro-units; a cost beyond the range
/// fits no cost limit).
fn budget_ask(demand: BudgetDemand) -> BudgetAsk {
    let hold_ms = if demand.hold_ms.is_finite() && demand.hold_ms > 0.0 { demand.hold_ms } else { 60_000.0 };
    BudgetAsk {
        keys: demand.keys.iter().map(BudgetDemandKey::to_shared).collect(),
        sandbox: demand.sandbox_id,
        cost: Micros::saturating(demand.cost),
        at: demand.at as i64,
        hold_ms,
    }
}

fn verdict_record(r: std::result::Result<(), Vec<Refusal>>) -> BudgetVerdict {
    match r {
        Ok(()) => BudgetVerdict { reserved: true, refusals: Vec::new() },
        Err(rs) => BudgetVerdict { reserved: false, refusals: rs.into_iter().map(BudgetRefusalRecord::of).collect() },
    }
}

/// Each rule's (id, since, window kind) and the query in the store's terms (an unknown rule
/// id is the typed `INVALID_INPUT`).
#[allow(clippy::type_complexity, reason = "a private helper's pair of plain values")]
fn status_ask(rules: &[BudgetRuleRecord], q: &BudgetStatusQuery) -> Result<(Vec<(String, i64, i16)>, StatusAsk)> {
    let windows = rules
        .iter()
        .map(|r| {
            let kind = if r.window_end.is_some() {
                1
            } else if r.sliding_ms.is_some() {
                2
            } else {
                0
            };
            (r.rule_id.clone(), r.since.map_or(i64::MAX, |t| t as i64), kind)
        })
        .collect();
    let ids: Vec<&str> = rules.iter().map(|r| r.rule_id.as_str()).collect();
    let query = q.to_core();
    let (rule, after) = crate::core::router::budgets::query_of(&ids, &query)?;
    let after = after.map(|(r, k)| (r, k.to_string()));
    let limit = crate::core::router::budgets::limit_of(q.limit);
    Ok((windows, StatusAsk { rule, key: q.key.clone(), after, limit }))
}

/// What `prepareLaunch` did: the reservation's verdict (absent when none was asked) and
/// the read sequence (absent when none was asked or the reservation was refused).
#[napi(object)]
pub struct LaunchPrepared {
    /// The budget reservation's verdict.
    pub verdict: Option<BudgetVerdict>,
    /// The read sequence for the capacity read that follows.
    pub seq: Option<f64>,
    /// The launch intent asked was written with the reservation.
    pub intent: bool,
}

/// A capacity hold's settlement, for `settleLaunch`.
#[napi(object)]
pub struct HoldSettlementRecord {
    /// The hold's token.
    pub token: f64,
    /// Kept as an assumption (the launch succeeded or its outcome is unknown) or released.
    pub allocated: bool,
    /// How long an assumption lives, ms (`capacity.reservationTtlMs`).
    pub ttl_ms: f64,
}

/// What `settleLaunch` wrote.
#[napi(object)]
pub struct LaunchSettledRecord {
    /// The record was written.
    pub recorded: bool,
    /// The budget's reservation had been freed (the lease lapsed) and its charge was
    /// written again, over its limit if need be.
    pub late: bool,
}

/// What `forget` deleted.
#[napi(object)]
pub struct Forgotten {
    /// A mapping existed.
    pub mapped: bool,
    /// A budget slot was given back.
    pub budget: bool,
}

/// How a budget settlement went.
#[napi(string_enum = "lowercase")]
pub enum BudgetSettlementOutcome {
    /// Written.
    Written,
    /// Its reservation had been freed (this process's lease lapsed): the charge was written
    /// again, over its limit if need be.
    Late,
    /// Not written now: kept and retried with the lease renewal.
    Kept,
}

/// The PostgreSQL store's forward migrations, in order (entry `i` takes the schema from
/// version `i` to `i + 1`): what the migration tests build an older database with.
#[napi]
pub fn pg_migrations() -> Vec<String> {
    crate::stores::pg::MIGRATIONS.iter().map(|m| m.to_string()).collect()
}
