//! HTTPS for the listener: the certificate and key read from PEM files,
//! read again on reload so a renewed certificate needs no restart.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tower_levee::BoxError;

use crate::config::TlsConfig;

/// The listener's TLS, swappable.
pub(crate) struct Acceptor {
    current: ArcSwap<TlsAcceptor>,
}

impl Acceptor {
    pub(crate) fn load(config: &TlsConfig) -> Result<Self, BoxError> {
        Ok(Acceptor {
            current: ArcSwap::from_pointee(acceptor(config)?),
        })
    }

    /// Reads the files again.
    pub(crate) fn reload(&self, config: &TlsConfig) -> Result<(), BoxError> {
        self.current.store(Arc::new(acceptor(config)?));
        Ok(())
    }

    pub(crate) fn get(&self) -> Arc<TlsAcceptor> {
        self.current.load_full()
    }
}

fn acceptor(config: &TlsConfig) -> Result<TlsAcceptor, BoxError> {
    let certs = CertificateDer::pem_file_iter(&config.cert_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("tls.cert_file {}: {e}", config.cert_file.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "tls.cert_file {}: no certificate in it",
            config.cert_file.display()
        )
        .into());
    }
    let key = PrivateKeyDer::from_pem_file(&config.key_file)
        .map_err(|e| format!("tls.key_file {}: {e}", config.key_file.display()))?;
    // The process's provider: ring, the one this build enables.
    let mut server = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls: the certificate and key do not make a server: {e}"))?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(server)))
}
