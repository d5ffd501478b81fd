//! The HTTPS sandboxd speaks to a host whose requests carry a sandbox's credentials:
//! rustls with ring, trusting the system's certificate store and the operator's CAs
//! (`[egress] trusted_ca`), the host's name checked against its certificate.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use sandboxd_contracts::ByteStream;
use tokio_rustls::TlsConnector;

/// The connector of the server's egress proxy; the operator's CA file is read now, and
/// a file that cannot be read or holds no certificate is an error.
pub fn connector(trusted_ca: Option<&Path>) -> Result<TlsConnector, String> {
    let mut roots = RootCertStore::empty();
    // A store that cannot be read is not fatal: the operator's CAs may be all that is
    // needed.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(path) = trusted_ca {
        let shown = path.display();
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("cannot read {shown}: {e}"))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{shown} is not PEM: {e}"))?;
        if certs.is_empty() {
            return Err(format!("{shown} holds no PEM certificate"));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("{shown}: not a usable CA certificate: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// How long the host may take to complete the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS over `stream` to `host`, its certificate checked for that name, within
/// [`HANDSHAKE_TIMEOUT`].
pub async fn handshake(
    connector: &TlsConnector,
    host: &str,
    stream: Box<dyn ByteStream>,
) -> Result<Box<dyn ByteStream>, String> {
    let name = ServerName::try_from(host.to_owned()).map_err(|e| format!("{host}: {e}"))?;
    let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, stream))
        .await
        .map_err(|_| {
            format!(
                "{host} did not complete TLS within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("TLS with {host} failed: {e}"))?;
    Ok(Box::new(tls))
}
