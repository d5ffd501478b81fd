//! TLS for the client commands (`https://` and `wss://` servers): rustls with ring,
//! trusting the system's certificate store and, when one is named (`--ca-cert`,
//! `SANDBOXD_CA_CERT`, or the profile `login` kept), the CA that signed a private
//! server's certificate. HTTP and the WebSockets share one configuration.
//!
//! No redirect is followed, so the key header never travels on; a certificate that is not
//! trusted is named as such.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A connected WebSocket, plain or TLS.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The TLS configuration of one command.
pub fn config(ca_cert: Option<&Path>) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = RootCertStore::empty();
    // A store that cannot be read is not fatal: a named CA may be all that is needed.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = ca_cert {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .with_context(|| format!("cannot read the CA certificate {}", path.display()))?
            .collect::<Result<_, _>>()
            .with_context(|| format!("{} is not a PEM certificate", path.display()))?;
        if certs.is_empty() {
            bail!("{} holds no PEM certificate", path.display());
        }
        for cert in certs {
            roots
                .add(cert)
                .with_context(|| format!("{} is not a usable CA certificate", path.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// An HTTP client speaking TLS with `config`. It follows no redirect: the key travels
/// in a header a redirect would carry to wherever it points.
pub fn http(config: &Arc<rustls::ClientConfig>) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .use_preconfigured_tls((**config).clone())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("cannot set up the HTTP client")
}

/// Opens a WebSocket (`ws://` or `wss://`) with `config` for TLS.
pub async fn websocket(
    request: impl IntoClientRequest + Unpin,
    config: &Arc<rustls::ClientConfig>,
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    let connector = tokio_tungstenite::Connector::Rustls(config.clone());
    let (socket, _) =
        tokio_tungstenite::connect_async_tls_with_config(request, None, false, Some(connector))
            .await?;
    Ok(socket)
}

/// Whether a failure came from a certificate the configuration does not trust.
pub fn untrusted(error: &dyn std::fmt::Debug) -> bool {
    let text = format!("{error:?}");
    text.contains("InvalidCertificate") || text.contains("UnknownIssuer")
}

/// What to say when a server's certificate is not trusted.
pub fn untrusted_hint(url: &str) -> String {
    format!(
        "the TLS certificate of {url} is not trusted: pass --ca-cert FILE (or set \
         SANDBOXD_CA_CERT) naming the CA that signed it, or add that CA to the system's store"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_named_ca_must_be_a_pem_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("ca.pem");
        std::fs::write(&bad, "not a certificate").unwrap();
        let error = config(Some(&bad)).unwrap_err();
        assert!(
            format!("{error:#}").contains("no PEM certificate"),
            "{error:#}"
        );
        let missing = config(Some(&dir.path().join("absent.pem"))).unwrap_err();
        assert!(
            format!("{missing:#}").contains("cannot read"),
            "{missing:#}"
        );
        assert!(config(None).is_ok());
    }
}
