//! TLS with rustls (ring provider): the certificate and key come from PEM
//! files and are read again on [`Tls::reload`] (the CLI calls it on
//! SIGHUP). Connections already open keep the session they negotiated;
//! handshakes after the reload get the new certificate, so nothing is
//! dropped.

use rustls::crypto::ring;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use tokio_rustls::TlsAcceptor;

/// The certificate new handshakes get; replaced whole on reload.
struct Current(RwLock<Arc<CertifiedKey>>);

impl fmt::Debug for Current {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Current(..)")
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// A TLS endpoint's configuration: where its PEM files are, and the
/// acceptor every connection goes through.
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    current: Arc<Current>,
    acceptor: TlsAcceptor,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish()
    }
}

fn load(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("cannot read the certificate {}: {e}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad PEM in {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("no certificate in {}", cert.display()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read a private key from {}: {e}", key.display()))?;
    let signing = ring::sign::any_supported_type(&key_der)
        .map_err(|e| format!("unusable private key in {}: {e}", key.display()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|e| format!("{} does not match {}: {e}", key.display(), cert.display()))?;
    Ok(Arc::new(certified))
}

impl Tls {
    /// Reads the PEM files; fails with a message naming the file at fault.
    pub fn from_files(
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Result<Arc<Tls>, String> {
        let (cert, key) = (cert.into(), key.into());
        let current = Arc::new(Current(RwLock::new(load(&cert, &key)?)));
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS versions: {e}"))?
                .with_no_client_auth()
                .with_cert_resolver(current.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(Tls {
            cert,
            key,
            current,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        }))
    }

    /// Reads the files again. On any error the old certificate stays.
    pub fn reload(&self) -> Result<(), String> {
        let fresh = load(&self.cert, &self.key)?;
        *self.current.0.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }

    pub fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}
