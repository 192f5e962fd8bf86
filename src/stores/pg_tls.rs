//! TLS for the PostgreSQL store: rustls (ring provider, no OpenSSL) behind tokio-postgres's
//! `MakeTlsConnect`, and the `sslmode` of a connection URL.
//!
//! Why our own connector instead of a crate? rustls, tokio-rustls and webpki-roots are
//! already in the build (reqwest's `rustls-tls`); the glue tokio-postgres needs is a few
//! dozen lines, and owning it lets `verify-ca` check the chain without the host name.
//!
//! The modes ([`TlsMode`]); every mode that uses TLS verifies the server's certificate
//! chain against the trust roots (Mozilla's, from `webpki-roots`, plus the caller's CA):
//! - `disable`: plain text.
//! - `prefer`: TLS when the server offers it (chain and host name verified; a certificate
//!   that fails verification fails the connection, never a fallback to plain text), plain
//!   text when the server does not offer TLS.
//! - `require` and `verify-full`: TLS or no connection; chain and host name verified.
//!   (libpq's `require` does not verify the certificate; node-postgres's does. This follows
//!   node-postgres: there is no unverified TLS here.)
//! - `verify-ca`: TLS or no connection; chain verified, host name not checked.
//!
//! tokio-postgres knows `disable`, `prefer` and `require` only: [`split_sslmode`] takes the
//! `sslmode` out of a URL before tokio-postgres parses it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// How a connection uses TLS (see the module docs for what each mode verifies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain text.
    Disable,
    /// TLS (verified) when the server offers it, plain text when it does not.
    Prefer,
    /// TLS, chain and host name verified (node-postgres's meaning, not libpq's).
    Require,
    /// TLS, chain verified, host name not checked.
    VerifyCa,
    /// TLS, chain and host name verified.
    VerifyFull,
}

impl TlsMode {
    /// The mode named `s` (libpq's `sslmode` values; `allow` is not supported).
    pub fn parse(s: &str) -> Option<TlsMode> {
        Some(match s {
            "disable" => TlsMode::Disable,
            "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            _ => return None,
        })
    }

    /// tokio-postgres's mode for this one (it negotiates; the connector verifies).
    pub fn ssl_mode(self) -> SslMode {
        match self {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        }
    }
}

/// Why a URL's `sslmode` could not be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlTlsError {
    /// `sslmode` has a value this build does not know.
    BadMode,
    /// `sslmode` is given twice.
    Repeated,
    /// The URL names a file for TLS (`sslrootcert`, `sslcert`, `sslkey`, ...): not read.
    FileOption,
}

const FILE_OPTIONS: &[&str] = &["sslrootcert", "sslcert", "sslkey", "sslcrl", "sslcrldir", "sslpassword"];

/// Takes `sslmode` out of a connection string (URL form: from the query; `key=value` form:
/// the pair), so tokio-postgres parses the rest. Returns the rest and the mode, if given.
/// Anything this function cannot tokenize is passed on unchanged (tokio-postgres's parser
/// then refuses it).
pub fn split_sslmode(conn: &str) -> Result<(String, Option<TlsMode>), UrlTlsError> {
    if conn.starts_with("postgres://") || conn.starts_with("postgresql://") {
        let Some(q) = conn.find('?') else {
            return Ok((conn.to_string(), None));
        };
        let (base, query) = (&conn[..q], &conn[q + 1..]);
        let mut mode = None;
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if FILE_OPTIONS.contains(&k) {
                return Err(UrlTlsError::FileOption);
            }
            if k == "sslmode" {
                if mode.is_some() {
                    return Err(UrlTlsError::Repeated);
                }
                mode = Some(TlsMode::parse(v).ok_or(UrlTlsError::BadMode)?);
            } else {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        return Ok((rest, mode));
    }
    // key=value form: `key = value` pairs separated by whitespace; a value is either a run of
    // non-space characters or single-quoted with backslash escapes (libpq's rules).
    let b = conn.as_bytes();
    let mut i = 0;
    let mut mode = None;
    let mut rest = String::with_capacity(conn.len());
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= b.len() {
            break;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' {
            i += 1;
        }
        let key = &conn[start..i];
        skip_ws(&mut i);
        if i >= b.len() || b[i] != b'=' {
            // Not a pair: let tokio-postgres refuse it.
            return Ok((conn.to_string(), None));
        }
        i += 1;
        skip_ws(&mut i);
        let vstart = i;
        let mut value = String::new();
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            loop {
                if i >= b.len() {
                    return Ok((conn.to_string(), None));
                }
                match b[i] {
                    b'\'' => {
                        i += 1;
                        break;
                    }
                    b'\\' if i + 1 < b.len() => {
                        value.push(b[i + 1] as char);
                        i += 2;
                    }
                    _ => {
                        // Multi-byte characters are copied whole.
                        let ch = conn[i..].chars().next().unwrap_or('\u{fffd}');
                        value.push(ch);
                        i += ch.len_utf8();
                    }
                }
            }
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            value.push_str(&conn[vstart..i]);
        }
        if FILE_OPTIONS.contains(&key) {
            return Err(UrlTlsError::FileOption);
        }
        if key == "sslmode" {
            if mode.is_some() {
                return Err(UrlTlsError::Repeated);
            }
            mode = Some(TlsMode::parse(&value).ok_or(UrlTlsError::BadMode)?);
        } else {
            if !rest.is_empty() {
                rest.push(' ');
            }
            rest.push_str(&conn[start..i]);
        }
    }
    Ok((rest, mode))
}

/// Why a caller's CA could not be used (never quotes the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaError {
    /// No `BEGIN CERTIFICATE` block, or one that is not valid PEM.
    NoCertificate,
    /// A certificate that is not a usable trust anchor.
    Unusable,
}

/// The certificates of a PEM text (at least one).
pub fn parse_ca(pem: &str) -> Result<Vec<CertificateDer<'static>>, CaError> {
    let mut out = Vec::new();
    for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        out.push(c.map_err(|_| CaError::NoCertificate)?);
    }
    if out.is_empty() {
        return Err(CaError::NoCertificate);
    }
    let mut roots = RootCertStore::empty();
    for c in &out {
        roots.add(c.clone()).map_err(|_| CaError::Unusable)?;
    }
    Ok(out)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The connector of a TLS mode: trust roots are Mozilla's plus `ca`.
#[derive(Clone)]
pub struct MakeRustls {
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for MakeRustls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MakeRustls").finish_non_exhaustive()
    }
}

impl MakeRustls {
    /// A connector verifying the chain, and the host name unless `check_name` is false.
    pub fn new(ca: &[CertificateDer<'static>], check_name: bool) -> Result<MakeRustls, CaError> {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for c in ca {
            roots.add(c.clone()).map_err(|_| CaError::Unusable)?;
        }
        let provider = provider();
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots.clone()), provider.clone())
            .build()
            .map_err(|_| CaError::Unusable)?;
        let verifier: Arc<dyn ServerCertVerifier> = if check_name {
            verifier
        } else {
            Arc::new(ChainOnly { inner: verifier, roots, provider: provider.clone() })
        };
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|_| CaError::Unusable)?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        // PostgreSQL 17 checks ALPN on direct TLS (`sslnegotiation=direct`); older servers
        // ignore it.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(MakeRustls { config: Arc::new(config) })
    }
}

/// `verify-ca`: the chain is verified against the roots, the host name is not.
#[derive(Debug)]
struct ChainOnly {
    inner: Arc<WebPkiServerVerifier>,
    roots: RootCertStore,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A TLS failure (the handshake's own error is not kept: it is not shown anywhere).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("TLS handshake failed")]
pub struct TlsFailure;

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = TlsFailure;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, TlsFailure> {
        let name = ServerName::try_from(domain.to_string()).map_err(|_| TlsFailure)?;
        Ok(RustlsConnect { config: self.config.clone(), name })
    }
}

/// One connection's handshake.
pub struct RustlsConnect {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = TlsFailure;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream<S>, TlsFailure>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move {
            let s = connector.connect(self.name, stream).await.map_err(|_| TlsFailure)?;
            Ok(RustlsStream(s))
        })
    }
}

/// An encrypted connection.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM channel binding (tls-server-end-point) is not offered: authentication uses
        // plain SCRAM inside the verified TLS session.
        ChannelBinding::none()
    }
}

/// How a store connects: plain, or with this connector in this mode.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// The mode.
    pub mode: TlsMode,
    /// The connector (None for `disable`).
    pub connector: Option<MakeRustls>,
}

impl TlsSettings {
    /// Plain text.
    pub fn disabled() -> TlsSettings {
        TlsSettings { mode: TlsMode::Disable, connector: None }
    }

    /// `mode` with Mozilla's roots plus `ca`.
    pub fn new(mode: TlsMode, ca: &[CertificateDer<'static>]) -> Result<TlsSettings, CaError> {
        let connector = match mode {
            TlsMode::Disable => None,
            TlsMode::VerifyCa => Some(MakeRustls::new(ca, false)?),
            TlsMode::Prefer | TlsMode::Require | TlsMode::VerifyFull => Some(MakeRustls::new(ca, true)?),
        };
        Ok(TlsSettings { mode, connector })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_sslmode_is_taken_out_and_the_rest_kept() {
        let (rest, mode) = split_sslmode("postgres://u:p@h:5/db?application_name=x&sslmode=verify-full").unwrap();
        assert_eq!(rest, "postgres://u:p@h:5/db?application_name=x");
        assert_eq!(mode, Some(TlsMode::VerifyFull));
        let (rest, mode) = split_sslmode("postgresql://u@h/db?sslmode=disable").unwrap();
        assert_eq!((rest.as_str(), mode), ("postgresql://u@h/db", Some(TlsMode::Disable)));
        let (rest, mode) = split_sslmode("postgres://u@h/db").unwrap();
        assert_eq!((rest.as_str(), mode), ("postgres://u@h/db", None));
    }

    #[test]
    fn key_value_sslmode_is_taken_out_and_quoted_values_kept() {
        let (rest, mode) = split_sslmode("host=h user=u password='a b\\' sslmode=disable' sslmode=verify-ca").unwrap();
        assert_eq!(rest, "host=h user=u password='a b\\' sslmode=disable'");
        assert_eq!(mode, Some(TlsMode::VerifyCa));
        let (rest, mode) = split_sslmode("host = h user=u").unwrap();
        assert_eq!((rest.as_str(), mode), ("host = h user=u", None));
    }

    #[test]
    fn bad_modes_and_file_options_are_refused() {
        assert_eq!(split_sslmode("postgres://u@h/db?sslmode=allow"), Err(UrlTlsError::BadMode));
        assert_eq!(split_sslmode("postgres://u@h/db?sslmode=prefer&sslmode=require"), Err(UrlTlsError::Repeated));
        assert_eq!(split_sslmode("postgres://u@h/db?sslrootcert=/etc/ca.pem"), Err(UrlTlsError::FileOption));
        assert_eq!(split_sslmode("host=h sslmode=bogus"), Err(UrlTlsError::BadMode));
        assert_eq!(split_sslmode("host=h sslkey=/k"), Err(UrlTlsError::FileOption));
        // must-not-fire: every known mode parses
        for m in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
            assert!(split_sslmode(&format!("postgres://u@h/db?sslmode={m}")).unwrap().1.is_some());
        }
    }

    #[test]
    fn a_ca_without_a_certificate_is_refused() {
        assert_eq!(parse_ca("").unwrap_err(), CaError::NoCertificate);
        assert_eq!(parse_ca("hello").unwrap_err(), CaError::NoCertificate);
        assert!(parse_ca("-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n").is_err());
    }

    #[test]
    fn modes_map_to_tokio_postgres_negotiation() {
        assert_eq!(TlsMode::Disable.ssl_mode(), SslMode::Disable);
        assert_eq!(TlsMode::Prefer.ssl_mode(), SslMode::Prefer);
        for m in [TlsMode::Require, TlsMode::VerifyCa, TlsMode::VerifyFull] {
            assert_eq!(m.ssl_mode(), SslMode::Require);
        }
        assert!(TlsSettings::new(TlsMode::Disable, &[]).unwrap().connector.is_none());
        assert!(TlsSettings::new(TlsMode::VerifyFull, &[]).unwrap().connector.is_some());
    }
}
