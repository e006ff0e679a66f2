//! The append session's connection: plain TCP for `http://`, TLS (rustls,
//! the system's roots plus the builder's CA certificates) for `https://`.
//! The WebSocket runs over either through one type, so the session code
//! does not care which.

use crate::ClientError;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A session's byte stream.
pub enum SessionIo {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Where a session URL points: the TCP address, the TLS name (for
/// `https://`) and the `ws://`/`wss://` URL of the upgrade request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub addr: String,
    pub tls_name: Option<String>,
    pub ws_url: String,
}

/// Splits a normalized `http(s)://host:port/path` URL.
pub(crate) fn target(url: &str) -> Result<Target, ClientError> {
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(ClientError::InvalidUrl {
            url: url.into(),
            reason: "an append session needs an http:// or https:// URL".into(),
        });
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = match authority.strip_prefix('[') {
        // [v6]:port: the name is the address inside the brackets.
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    let port_given = authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| !p.contains(']'));
    let addr = match (port_given, tls) {
        (true, _) => authority.to_string(),
        (false, true) => format!("{authority}:443"),
        (false, false) => format!("{authority}:80"),
    };
    Ok(Target {
        addr,
        tls_name: tls.then(|| host.to_string()),
        ws_url: format!("{}://{rest}", if tls { "wss" } else { "ws" }),
    })
}

fn tls_error(url: &str, reason: String) -> ClientError {
    ClientError::InvalidUrl {
        url: url.into(),
        reason,
    }
}

/// The TLS settings of a session: the system's roots and `ca_pems`,
/// HTTP/1.1 only (the WebSocket upgrade is an HTTP/1.1 request).
fn tls_config(url: &str, ca_pems: &[Vec<u8>]) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are skipped, as reqwest does; the
    // handshake then fails with a clear error if nothing trusts the server.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    for pem in ca_pems {
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| tls_error(url, format!("a CA certificate: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| tls_error(url, format!("a CA certificate: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(url, e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Connects to `t` (and makes the TLS handshake for `https://`).
pub(crate) async fn connect(
    t: &Target,
    url: &str,
    ca_pems: &[Vec<u8>],
) -> Result<SessionIo, String> {
    let tcp = TcpStream::connect(&t.addr)
        .await
        .map_err(|e| format!("connecting to {}: {e}", t.addr))?;
    let _ = tcp.set_nodelay(true);
    let Some(name) = &t.tls_name else {
        return Ok(SessionIo::Plain(tcp));
    };
    let config = tls_config(url, ca_pems).map_err(|e| e.to_string())?;
    let server_name = ServerName::try_from(name.clone())
        .map_err(|e| format!("{name} is not a TLS server name: {e}"))?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(server_name, tcp)
        .await
        .map_err(|e| format!("TLS handshake with {}: {e}", t.addr))?;
    Ok(SessionIo::Tls(Box::new(tls)))
}

impl AsyncRead for SessionIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SessionIo::Plain(s) => Pin::new(s).poll_read(cx, buf),
            SessionIo::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for SessionIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SessionIo::Plain(s) => Pin::new(s).poll_write(cx, b),
            SessionIo::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, b),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SessionIo::Plain(s) => Pin::new(s).poll_flush(cx),
            SessionIo::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SessionIo::Plain(s) => Pin::new(s).poll_shutdown(cx),
            SessionIo::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_targets() {
        let t = |u: &str| target(u).unwrap();
        assert_eq!(
            t("http://127.0.0.1:7070/v1/streams/s/session"),
            Target {
                addr: "127.0.0.1:7070".into(),
                tls_name: None,
                ws_url: "ws://127.0.0.1:7070/v1/streams/s/session".into(),
            }
        );
        assert_eq!(
            t("https://localhost:8443/v1/streams/s/session"),
            Target {
                addr: "localhost:8443".into(),
                tls_name: Some("localhost".into()),
                ws_url: "wss://localhost:8443/v1/streams/s/session".into(),
            }
        );
        let v6 = t("https://[::1]:8443/x");
        assert_eq!(
            (v6.addr.as_str(), v6.tls_name.as_deref()),
            ("[::1]:8443", Some("::1"))
        );
        let bare = t("https://logs.example.com/x");
        assert_eq!(bare.addr, "logs.example.com:443");
        assert_eq!(t("http://[::1]/x").addr, "[::1]:80");
        assert!(matches!(
            target("ftp://x/y"),
            Err(ClientError::InvalidUrl { .. })
        ));
    }
}
