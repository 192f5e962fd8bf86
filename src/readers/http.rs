//! The HTTP side of the readers: one shared client, authenticated GETs, status mapping,
//! and the [`Fetch`] seam.
//!
//! Why one client in a `OnceLock`? A reqwest `Client` owns a connection pool and the TLS
//! configuration; building one per read would redo the TLS setup and throw away keep-alive
//! connections. The client is shared by every reader in the process, but no credential is:
//! auth headers are attached per request.
//!
//! Why no redirects? E2B authenticates with a custom `X-API-KEY` header, which reqwest would
//! forward to whatever host a redirect names. A list API has no reason to redirect, so a
//! `3xx` is simply an unexpected status (`READ_FAILED`).
//!
//! Why a [`Fetch`] trait? Pagination logic (cursor loops, page bounds, shape detection) is
//! the part that breaks; unit tests drive it with in-memory pages, while the JS tests drive
//! the real client against mock servers.
//!
//! Status mapping: 2xx → body; 401/403 → `UNAUTHORIZED`; 429 → `RATE_LIMITED`; any other
//! status, or a transport error → `READ_FAILED`; a body larger than [`MAX_BODY_BYTES`] →
//! `MALFORMED`. There is no timeout here: the caller owns the deadline and cancels by
//! dropping the future. Error details (which may contain URLs) are discarded, never logged.

use crate::core::capacity::UnknownReason;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION};
use reqwest::{Client, Url};
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

/// Largest response body a reader accepts (a 200-item page is ~100 KiB; a legacy
/// single-page Daytona list of 10,000 sandboxes is ~5 MiB).
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// A successful (2xx) answer.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The raw body.
    pub body: Vec<u8>,
    /// Response headers (E2B paginates with `X-Next-Token`).
    pub headers: HeaderMap,
}

/// Performs one GET. Implemented by [`HttpFetch`] and by in-memory pages in tests.
pub trait Fetch {
    /// GETs `url`; a non-2xx status or transport failure is already mapped to a reason.
    fn get(&mut self, url: Url) -> impl Future<Output = Result<Fetched, UnknownReason>> + Send;
}

/// How a provider authenticates.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    /// `Authorization: Bearer <key>`.
    Bearer(&'a str),
    /// A custom header carrying the key as is (E2B's `X-API-KEY`).
    Header(&'static str, &'a str),
}

static CLIENT: OnceLock<Option<Client>> = OnceLock::new();

/// The process-wide client (`None` only if TLS initialisation failed).
pub fn client() -> Option<&'static Client> {
    CLIENT
        .get_or_init(|| {
            Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .pool_idle_timeout(Duration::from_secs(30))
                .connect_timeout(Duration::from_secs(30))
                .user_agent(concat!("agent-relay-sandbox-router/", env!("CARGO_PKG_VERSION")))
                .build()
                .ok()
        })
        .as_ref()
}

/// Maps a status code: `Ok` for 2xx, otherwise the reason.
pub fn classify_status(status: u16) -> Result<(), UnknownReason> {
    match status {
        200..=299 => Ok(()),
        401 | 403 => Err(UnknownReason::Unauthorized),
        429 => Err(UnknownReason::RateLimited),
        _ => Err(UnknownReason::ReadFailed),
    }
}

/// GETs over the shared client with a fixed set of (sensitive) headers.
pub struct HttpFetch {
    headers: HeaderMap,
}

impl std::fmt::Debug for HttpFetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpFetch { .. }")
    }
}

impl HttpFetch {
    /// Prepares the headers: auth (marked sensitive) plus `extra` (e.g. an organization id).
    /// A key that is empty or cannot be a header value cannot authenticate: `UNAUTHORIZED`.
    pub fn new(auth: Auth<'_>, extra: &[(&'static str, &str)]) -> Result<Self, UnknownReason> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let (name, value) = match auth {
            Auth::Bearer(key) if !key.is_empty() => (AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {key}"))),
            Auth::Header(name, key) if !key.is_empty() => (HeaderName::from_static(name), HeaderValue::from_str(key)),
            _ => return Err(UnknownReason::Unauthorized),
        };
        let mut value = value.map_err(|_| UnknownReason::Unauthorized)?;
        value.set_sensitive(true);
        headers.insert(name, value);
        for (name, v) in extra {
            let v = HeaderValue::from_str(v).map_err(|_| UnknownReason::Malformed)?;
            headers.insert(HeaderName::from_static(name), v);
        }
        Ok(HttpFetch { headers })
    }
}

impl Fetch for HttpFetch {
    fn get(&mut self, url: Url) -> impl Future<Output = Result<Fetched, UnknownReason>> + Send {
        let headers = self.headers.clone();
        async move {
            let client = client().ok_or(UnknownReason::ReadFailed)?;
            let mut resp = client.get(url).headers(headers).send().await.map_err(|_| UnknownReason::ReadFailed)?;
            classify_status(resp.status().as_u16())?;
            if resp.content_length().is_some_and(|n| n > MAX_BODY_BYTES as u64) {
                return Err(UnknownReason::Malformed);
            }
            let headers = std::mem::take(resp.headers_mut());
            let mut body = Vec::with_capacity(resp.content_length().map_or(16 * 1024, |n| n as usize));
            while let Some(chunk) = resp.chunk().await.map_err(|_| UnknownReason::ReadFailed)? {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(UnknownReason::Malformed);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Fetched { body, headers })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_mapping() {
        for s in [200, 204, 299] {
            assert_eq!(classify_status(s), Ok(()));
        }
        assert_eq!(classify_status(401), Err(UnknownReason::Unauthorized));
        assert_eq!(classify_status(403), Err(UnknownReason::Unauthorized));
        assert_eq!(classify_status(429), Err(UnknownReason::RateLimited));
        for s in [301, 302, 400, 404, 500, 502, 503] {
            assert_eq!(classify_status(s), Err(UnknownReason::ReadFailed), "{s}");
        }
    }

    #[test]
    fn auth_headers_are_sensitive_and_never_debug_printed() {
        let f = HttpFetch::new(Auth::Bearer("sk_canary"), &[("x-daytona-organization-id", "org")]).unwrap();
        assert!(f.headers[AUTHORIZATION].is_sensitive());
        assert_eq!(f.headers[AUTHORIZATION].to_str().unwrap(), "Bearer sk_canary");
        assert!(!format!("{f:?}").contains("sk_canary"));
        let f = HttpFetch::new(Auth::Header("x-api-key", "e2b_canary"), &[]).unwrap();
        assert_eq!(f.headers["x-api-key"].to_str().unwrap(), "e2b_canary");
        assert!(f.headers["x-api-key"].is_sensitive());
    }

    #[test]
    fn a_key_that_cannot_be_sent_is_unauthorized() {
        assert_eq!(HttpFetch::new(Auth::Bearer(""), &[]).unwrap_err(), UnknownReason::Unauthorized);
        assert_eq!(HttpFetch::new(Auth::Bearer("a\nb"), &[]).unwrap_err(), UnknownReason::Unauthorized);
        assert_eq!(HttpFetch::new(Auth::Header("x-api-key", ""), &[]).unwrap_err(), UnknownReason::Unauthorized);
    }

    #[test]
    fn the_shared_client_builds_once() {
        let a = client().unwrap() as *const Client;
        let b = client().unwrap() as *const Client;
        assert_eq!(a, b);
    }
}
