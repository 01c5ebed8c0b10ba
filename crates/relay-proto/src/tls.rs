//! TLS, used only on the Relay link (a Relay is reached over the internet; the broker's own
//! API is plain HTTP on loopback). rustls with the ring provider throughout.
//!
//! Every reqwest client is built from here: with rustls compiled in, reqwest needs either a
//! process-wide crypto provider or a ready configuration. Plain-HTTP clients get a
//! configuration with no roots at all; only clients of an `https://` Relay load the system's
//! CA store. (The broker's own loopback client is not reqwest at all.)

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the certificate chain {path}: {reason}")]
    Certificates { path: String, reason: String },
    #[error("cannot read the private key {path}: {reason}")]
    Key { path: String, reason: String },
    #[error("the certificate and key do not make a usable TLS server: {0}")]
    Server(rustls::Error),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A reqwest client for plain HTTP (an `http://` Relay, test helpers). It trusts no
/// certificate, so an `https://` URL given to it fails instead of being half-trusted.
pub fn plain_http_client() -> reqwest::ClientBuilder {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .no_proxy()
        .tls_backend_preconfigured(config)
}

/// A client for a Relay at `url`. For `https://` it trusts the system's CA store, which
/// honours `SSL_CERT_FILE` / `SSL_CERT_DIR` (a self-hosted Relay with a private CA).
pub fn relay_client(url: &str) -> reqwest::ClientBuilder {
    if !url.starts_with("https://") {
        return plain_http_client();
    }
    let Some(verifier) = system_verifier() else {
        return plain_http_client();
    };
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    reqwest::Client::builder()
        .no_proxy()
        .tls_backend_preconfigured(config)
}

/// A TLS client configuration trusting the system's CA store (with `SSL_CERT_FILE` /
/// `SSL_CERT_DIR`), for what is not reqwest: the Relay's PostgreSQL connections. `None`
/// when the store has no certificate at all.
pub fn verifying_config() -> Option<rustls::ClientConfig> {
    let verifier = system_verifier()?;
    Some(
        rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth(),
    )
}

/// The verifier over the system's CA store, loaded once per process: the broker builds a
/// Relay client for every poll and delivery, and parsing the store costs milliseconds.
/// `None` (connections then fail with "unknown issuer") when the store has no certificate.
fn system_verifier() -> Option<Arc<rustls_platform_verifier::Verifier>> {
    static VERIFIER: OnceLock<Option<Arc<rustls_platform_verifier::Verifier>>> = OnceLock::new();
    VERIFIER
        .get_or_init(
            || match rustls_platform_verifier::Verifier::new(provider()) {
                Ok(v) => Some(Arc::new(v)),
                Err(e) => {
                    tracing::warn!(error = %e, "no trusted CA certificates for the Relay (set SSL_CERT_FILE)");
                    None
                }
            },
        )
        .clone()
}

/// A server configuration from PEM files: the certificate chain (leaf first) and its key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect())
        .map_err(|e| TlsError::Certificates {
            path: cert.display().to_string(),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Certificates {
            path: cert.display().to_string(),
            reason: "no PEM certificate in it".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.display().to_string(),
        reason: e.to_string(),
    })?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(TlsError::Server)?;
    Ok(Arc::new(config))
}
