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
        assert_eq!(format!("{f:?}"), "HttpFetch { .. }");
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

    /// A local HTTP/1.1 server: answers the n-th connection with `responses[n]` (a head, then
    /// that many bytes of body) and closes it. Yields the request heads it read.
    async fn serve(responses: Vec<(String, usize)>) -> (Url, tokio::task::JoinHandle<Vec<String>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}/list", listener.local_addr().unwrap())).unwrap();
        let server = tokio::spawn(async move {
            let mut heads = Vec::new();
            let chunk = vec![b'x'; 64 * 1024];
            for (head, body_len) in responses {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                heads.push(String::from_utf8_lossy(&request).to_ascii_lowercase());
                let mut ok = sock.write_all(head.as_bytes()).await.is_ok();
                let mut left = body_len;
                while ok && left > 0 {
                    let n = left.min(chunk.len());
                    ok = sock.write_all(&chunk[..n]).await.is_ok();
                    left -= n;
                }
                let _ = sock.shutdown().await;
            }
            heads
        });
        (url, server)
    }

    fn with_length(n: usize) -> String {
        format!("HTTP/1.1 200 OK\r\ncontent-length: {n}\r\nconnection: close\r\n\r\n")
    }

    /// No content-length: the body runs until the server closes the connection.
    const UNTIL_CLOSE: &str = "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n";

    fn fetch_all(responses: Vec<(String, usize)>) -> (Vec<Result<usize, UnknownReason>>, Vec<String>) {
        crate::readers::test_support::block_on(async {
            let n = responses.len();
            let (url, server) = serve(responses).await;
            let mut f = HttpFetch::new(Auth::Bearer("k"), &[("x-daytona-organization-id", "org")]).unwrap();
            let mut out = Vec::new();
            for _ in 0..n {
                out.push(f.get(url.clone()).await.map(|r| r.body.len()));
            }
            // The client is done, so the server is too, unless the client never connected:
            // that must fail the test quickly, not hang it.
            let heads = tokio::time::timeout(Duration::from_secs(3), server).await;
            (out, heads.expect("the server saw every request").unwrap())
        })
    }

    #[test]
    fn must_not_fire_a_multi_mebibyte_body_is_read_whole_with_the_auth_headers() {
        // A legacy single-page Daytona list of 10,000 sandboxes is ~5 MiB.
        let size = 5 * 1024 * 1024;
        let (out, heads) = fetch_all(vec![(with_length(size), size), (UNTIL_CLOSE.to_string(), size)]);
        assert_eq!(out, vec![Ok(size), Ok(size)]);
        for head in heads {
            assert!(head.starts_with("get /list http/1.1\r\n"), "{head}");
            assert!(head.contains("\r\nauthorization: bearer k\r\n"), "{head}");
            assert!(head.contains("\r\naccept: application/json\r\n"), "{head}");
            assert!(head.contains("\r\nx-daytona-organization-id: org\r\n"), "{head}");
        }
    }

    #[test]
    fn must_fire_a_declared_length_over_the_cap_is_malformed_before_reading() {
        let (out, _) = fetch_all(vec![(with_length(MAX_BODY_BYTES + 1), 0)]);
        assert_eq!(out, vec![Err(UnknownReason::Malformed)]);
    }

    #[test]
    fn must_fire_a_streamed_body_over_the_cap_is_malformed() {
        let (out, _) = fetch_all(vec![(UNTIL_CLOSE.to_string(), MAX_BODY_BYTES + 1)]);
        assert_eq!(out, vec![Err(UnknownReason::Malformed)]);
    }

    #[test]
    fn must_not_fire_a_body_of_exactly_the_cap_is_read() {
        let (out, _) = fetch_all(vec![(with_length(MAX_BODY_BYTES), MAX_BODY_BYTES)]);
        assert_eq!(out, vec![Ok(MAX_BODY_BYTES)]);
    }

    #[test]
    fn must_fire_a_redirect_is_read_failed_and_never_followed() {
        // Following it would forward the key (E2B's X-API-KEY) to whatever host it names.
        let redirect = "HTTP/1.1 302 Found\r\nlocation: /elsewhere\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        // Two connections served: a followed redirect would use the second for /elsewhere.
        let (out, heads) = fetch_all(vec![(redirect.to_string(), 0), (with_length(2), 2)]);
        assert_eq!(out, vec![Err(UnknownReason::ReadFailed), Ok(2)]);
        assert!(heads.iter().all(|h| h.starts_with("get /list ")), "{heads:?}");
    }
}
