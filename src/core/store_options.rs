//! The durable mapping stores' options: `SqliteMappingStore` and `PostgresMappingStore`,
//! each default and range defined once here.
//!
//! The options cross once, as the facts JavaScript read (`core::facts`); what comes back is
//! the normalized configuration the native store is opened with. Errors name the option,
//! never its value (a connection URL or a password is a secret).

use crate::core::error::CoreError;
use crate::core::facts::Fact;
use crate::core::json::{join, shown, FieldError};

/// A store option refused: `INVALID_CONFIGURATION`, `invalid <scope> options: …`.
pub fn refused(scope: &'static str, e: FieldError) -> CoreError {
    CoreError::InvalidConfiguration { scope, field: e.field, expectation: e.expectation }
}

/// `SqliteMappingStore`'s scope in its errors.
pub const SQLITE: &str = "SqliteMappingStore";
/// `PostgresMappingStore`'s scope in its errors.
pub const POSTGRES: &str = "PostgresMappingStore";

fn unknown_key<'a>(o: &'a Fact, known: &[&str]) -> Option<&'a str> {
    o.keys().find(|k| !known.contains(k))
}

/// `SqliteMappingStore`'s options, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// The file's path, as given (the caller resolves it).
    pub path: String,
    /// `durability: 'full'`: every write is fsynced (default `normal`).
    pub full: bool,
}

/// Reads `new SqliteMappingStore(options)` (None: the options could not be read): a path,
/// or `{ path, durability? }` with `durability` `normal` (the default) or `full`.
pub fn sqlite(options: Option<&Fact>) -> Result<SqliteOptions, CoreError> {
    let bad = |field: &str, expectation: &str| refused(SQLITE, FieldError::new(field, expectation));
    let o = options.ok_or_else(|| bad("options", "could not be read"))?;
    if let Fact::Text(path) = o {
        return sqlite_of(Some(path), None).map_err(|e| refused(SQLITE, e));
    }
    if !o.is_object() {
        return Err(bad("options", "must be a path or { path, durability? }"));
    }
    if let Some(key) = unknown_key(o, &["path", "durability"]) {
        return Err(bad(&shown(key), "is not a known option"));
    }
    let path = match o.get("path") {
        Some(Fact::Text(p)) => Some(p.as_str()),
        _ => None,
    };
    sqlite_of(path, o.get("durability")).map_err(|e| refused(SQLITE, e))
}

fn sqlite_of(path: Option<&str>, durability: Option<&Fact>) -> Result<SqliteOptions, FieldError> {
    let path = path
        .filter(|p| !p.is_empty() && !p.contains('\0'))
        .ok_or_else(|| FieldError::new("path", "must be a non-empty path"))?;
    let full = match durability {
        None => false,
        Some(Fact::Text(d)) if d == "normal" => false,
        Some(Fact::Text(d)) if d == "full" => true,
        Some(_) => return Err(FieldError::new("durability", "must be 'normal' or 'full'")),
    };
    Ok(SqliteOptions { path: path.to_string(), full })
}

/// The TLS modes of `connection.ssl.mode` (libpq's, without `allow`).
pub const SSL_MODES: [&str; 5] = ["disable", "prefer", "require", "verify-ca", "verify-full"];

/// `connection.ssl`, normalized: `true` is `{}` (the URL's `sslmode`, else `verify-full`),
/// `false` is `{ mode: 'disable' }`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ssl {
    /// One of [`SSL_MODES`].
    pub mode: Option<String>,
    /// Extra trusted CA certificates, PEM text.
    pub ca: Option<String>,
}

/// The connection a `PostgresMappingStore` opens (the native store checks its contents).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Connection {
    /// A connection URL (or libpq's `key=value` form).
    pub url: Option<String>,
    /// Host, IP address or unix socket directory.
    pub host: Option<String>,
    /// Port.
    pub port: Option<u32>,
    /// User.
    pub user: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Database.
    pub database: Option<String>,
    /// TLS.
    pub ssl: Option<Ssl>,
}

/// `PostgresMappingStore`'s options, normalized with their defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// What to connect to.
    pub connection: Connection,
    /// Bound of one database call, ms.
    pub timeout_ms: u32,
    /// Connections at most.
    pub pool_size: u32,
    /// Lease of this process's in-flight holds, ms.
    pub lease_ms: u32,
}

/// Default bound of one database call, ms.
pub const DEFAULT_TIMEOUT_MS: u32 = 5_000;
/// Largest `timeoutMs`.
pub const MAX_TIMEOUT_MS: u32 = 600_000;
/// Default size of the connection pool.
pub const DEFAULT_POOL_SIZE: u32 = 10;
/// Largest `poolSize`.
pub const MAX_POOL_SIZE: u32 = 1_000;
/// Default lease of a process's in-flight holds, ms.
pub const DEFAULT_LEASE_MS: u32 = 30_000;
/// Largest `leaseMs`.
pub const MAX_LEASE_MS: u32 = 3_600_000;

const POSTGRES_KEYS: [&str; 4] = ["connection", "timeoutMs", "poolSize", "leaseMs"];
const CONNECTION_KEYS: [&str; 7] = ["url", "host", "port", "user", "password", "database", "ssl"];

/// Reads `new PostgresMappingStore(options)` (None: the options could not be read): a
/// connection URL, or `{ connection, timeoutMs?, poolSize?, leaseMs? }`; `connection` a URL
/// or `{ url?, host?, port?, user?, password?, database?, ssl? }`.
pub fn postgres(options: Option<&Fact>) -> Result<PostgresOptions, CoreError> {
    let bad = |field: &str, expectation: &str| refused(POSTGRES, FieldError::new(field, expectation));
    let o = options.ok_or_else(|| bad("options", "could not be read"))?;
    if let Fact::Text(url) = o {
        let connection = Connection { url: Some(url.clone()), ..Connection::default() };
        return Ok(PostgresOptions {
            connection,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            pool_size: DEFAULT_POOL_SIZE,
            lease_ms: DEFAULT_LEASE_MS,
        });
    }
    if !o.is_object() {
        return Err(bad("options", "must be a URL or { connection, ... }"));
    }
    if let Some(key) = unknown_key(o, &POSTGRES_KEYS) {
        return Err(bad(&shown(key), "is not a known option"));
    }
    let connection = connection(o.get("connection")).map_err(|e| refused(POSTGRES, e))?;
    let int = |field: &str, default: u32, max: u32| match o.get(field) {
        None => Ok(default),
        Some(Fact::Number(n)) if n.fract() == 0.0 && *n >= 1.0 && *n <= f64::from(max) => Ok(*n as u32),
        Some(_) => Err(bad(field, &format!("must be an integer from 1 to {max}"))),
    };
    Ok(PostgresOptions {
        connection,
        timeout_ms: int("timeoutMs", DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS)?,
        pool_size: int("poolSize", DEFAULT_POOL_SIZE, MAX_POOL_SIZE)?,
        lease_ms: int("leaseMs", DEFAULT_LEASE_MS, MAX_LEASE_MS)?,
    })
}

fn connection(c: Option<&Fact>) -> Result<Connection, FieldError> {
    let c = match c {
        Some(Fact::Text(url)) => return Ok(Connection { url: Some(url.clone()), ..Connection::default() }),
        Some(c) if c.is_object() => c,
        _ => return Err(FieldError::new("connection", "must be a URL or an object")),
    };
    let mut out = Connection::default();
    for key in c.keys() {
        if !CONNECTION_KEYS.contains(&key) {
            return Err(FieldError::new(join("connection", key), "is not a known option"));
        }
        let Some(v) = c.get(key) else { continue };
        if key == "ssl" {
            out.ssl = Some(ssl(v)?);
            continue;
        }
        if key == "port" {
            match v {
                Fact::Number(n) if n.fract() == 0.0 && (1.0..=65535.0).contains(n) => out.port = Some(*n as u32),
                _ => return Err(FieldError::new("connection.port", "must be a port number")),
            }
            continue;
        }
        let Fact::Text(s) = v else {
            return Err(FieldError::new(format!("connection.{key}"), "must be a string"));
        };
        let slot = match key {
            "url" => &mut out.url,
            "host" => &mut out.host,
            "user" => &mut out.user,
            "password" => &mut out.password,
            _ => &mut out.database,
        };
        *slot = Some(s.clone());
    }
    Ok(out)
}

fn ssl(v: &Fact) -> Result<Ssl, FieldError> {
    match v {
        Fact::Bool(true) => return Ok(Ssl::default()),
        Fact::Bool(false) => return Ok(Ssl { mode: Some("disable".into()), ca: None }),
        v if v.is_object() => {}
        _ => return Err(FieldError::new("connection.ssl", "must be a boolean or { mode?, ca? }")),
    }
    let mut out = Ssl::default();
    for key in v.keys() {
        let Some(x) = v.get(key) else { continue };
        match (key, x) {
            ("mode", Fact::Text(m)) if SSL_MODES.contains(&m.as_str()) => out.mode = Some(m.clone()),
            ("mode", _) => {
                return Err(FieldError::new("connection.ssl.mode", format!("must be one of {}", SSL_MODES.join(", "))))
            }
            ("ca", Fact::Text(ca)) if !ca.is_empty() => out.ca = Some(ca.clone()),
            ("ca", _) => return Err(FieldError::new("connection.ssl.ca", "must be PEM text (a non-empty string)")),
            _ => return Err(FieldError::new(join("connection.ssl", key), "is not a known option")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(text: &str) -> Fact {
        Fact::parse(text).unwrap()
    }

    fn field(e: CoreError) -> String {
        e.field().unwrap().to_string()
    }

    #[test]
    fn must_not_fire_a_path_or_path_options_open_the_file() {
        assert_eq!(
            sqlite(Some(&facts(r#""/tmp/a.db""#))).unwrap(),
            SqliteOptions { path: "/tmp/a.db".into(), full: false }
        );
        let o = sqlite(Some(&facts(r#"{"o":[["path","a.db"],["durability","full"]]}"#))).unwrap();
        assert!(o.full);
    }

    #[test]
    fn must_fire_each_bad_sqlite_option_is_named() {
        let e = sqlite(Some(&facts(r#"{"o":[["path",""]]}"#))).unwrap_err();
        assert_eq!(e.to_string(), "invalid SqliteMappingStore options: path must be a non-empty path");
        assert_eq!(field(sqlite(Some(&facts(r#"{"o":[["path","a"],["mode","x"]]}"#))).unwrap_err()), "mode");
        assert_eq!(
            field(sqlite(Some(&facts(r#"{"o":[["path","a"],["durability","off"]]}"#))).unwrap_err()),
            "durability"
        );
        assert_eq!(field(sqlite(Some(&facts("3"))).unwrap_err()), "options");
        assert_eq!(
            sqlite(None).unwrap_err().to_string(),
            "invalid SqliteMappingStore options: options could not be read"
        );
        assert_eq!(field(sqlite(Some(&facts(r#""a\u0000b""#))).unwrap_err()), "path");
    }

    #[test]
    fn must_not_fire_a_url_or_full_options_take_their_defaults() {
        let o = postgres(Some(&facts(r#""postgres://u@h/db""#))).unwrap();
        assert_eq!((o.timeout_ms, o.pool_size, o.lease_ms), (5_000, 10, 30_000));
        let text = r#"{"o":[["connection",{"o":[["host","h"],["port",5433],["ssl",true],["password",{"t":"undefined"}]]}],["leaseMs",60000]]}"#;
        let o = postgres(Some(&facts(text))).unwrap();
        assert_eq!(
            (o.connection.port, o.connection.ssl, o.connection.password, o.lease_ms),
            (Some(5433), Some(Ssl::default()), None, 60_000)
        );
        let o = postgres(Some(&facts(r#"{"o":[["connection",{"o":[["ssl",false]]}]]}"#))).unwrap();
        assert_eq!(o.connection.ssl.unwrap().mode.as_deref(), Some("disable"));
    }

    #[test]
    fn must_fire_each_bad_postgres_option_is_named_never_with_its_value() {
        for (text, name) in [
            (r#"{"o":[["connection","u"],["timeoutMs",0]]}"#, "timeoutMs"),
            (r#"{"o":[["connection","u"],["poolSize",1001]]}"#, "poolSize"),
            (r#"{"o":[["connection","u"],["bogus",1]]}"#, "bogus"),
            (r#"{"o":[["connection",5]]}"#, "connection"),
            (r#"{"o":[["connection",{"o":[["bogus",1]]}]]}"#, "connection.bogus"),
            (r#"{"o":[["connection",{"o":[["port",70000]]}]]}"#, "connection.port"),
            (r#"{"o":[["connection",{"o":[["password",5]]}]]}"#, "connection.password"),
            (r#"{"o":[["connection",{"o":[["ssl","yes"]]}]]}"#, "connection.ssl"),
            (r#"{"o":[["connection",{"o":[["ssl",{"o":[["mode","allow"]]}]]}]]}"#, "connection.ssl.mode"),
            (r#"{"o":[["connection",{"o":[["ssl",{"o":[["ca",""]]}]]}]]}"#, "connection.ssl.ca"),
            (r#"{"o":[["connection",{"o":[["ssl",{"o":[["key","sk_canary"]]}]]}]]}"#, "connection.ssl.key"),
        ] {
            let e = postgres(Some(&facts(text))).unwrap_err();
            assert!(!e.to_string().contains("sk_canary"));
            assert_eq!(field(e), name, "{text}");
        }
        let e = postgres(Some(&facts(r#"{"o":[["connection","u"],["leaseMs",1.5]]}"#))).unwrap_err();
        assert_eq!(e.to_string(), "invalid PostgresMappingStore options: leaseMs must be an integer from 1 to 3600000");
    }
}
