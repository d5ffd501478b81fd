//! Credentials that never enter the sandbox: an HTTPS server on 127.0.0.2 (its
//! certificate signed by a CA this test makes, trusted through `[egress] trusted_ca`)
//! stands for an API. The sandbox asks for `http://api.secret.test:PORT/…` through the
//! proxy; sandboxd speaks TLS to the host and adds the header, replacing the program's.
//! The value is nowhere the sandbox can read.

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::egress_proxy::sh;
use crate::harness::{TestServer, id};

const FAR: &str = "127.0.0.2";
const SECRET: &str = "Bearer s3cr3t-token-0123456789";

/// An HTTPS server for `api.secret.test` answering each request with its head; the CA's
/// PEM.
async fn secret_api() -> (SocketAddr, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sandboxd egress test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["api.secret.test".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind((FAR, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let body = format!("over TLS\n{}", String::from_utf8_lossy(&head));
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (address, ca.pem())
}

#[tokio::test]
async fn a_credential_is_added_on_the_way_out_and_never_enters_the_sandbox() {
    let (api, ca_pem) = secret_api().await;
    let port = api.port();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let server = TestServer::start_with(|config| {
        let hosts = [("api.secret.test".to_owned(), FAR.to_owned())].into();
        config.egress.hosts = hosts;
        config.egress.allowed_networks = vec![format!("{FAR}/32")];
        config.egress.trusted_ca = Some(ca.clone());
    })
    .await;

    // A credential for a host the list does not allow on 443 is refused, and named.
    let (status, refused) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base", "networkMode": "allowlist",
                "egress": {"allow": ["api.secret.test:8080"],
                    "credentials": [{"host": "api.secret.test", "header": "Authorization", "value": SECRET}]}}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{refused}");
    assert!(!refused.to_string().contains("s3cr3t"), "{refused}");

    let sandbox = server
        .create(json!({
            "template": "base",
            "networkMode": "allowlist",
            "egress": {
                "allow": ["api.secret.test", format!("api.secret.test:{port}")],
                "credentials": [{"host": "api.secret.test", "header": "Authorization", "value": SECRET}],
            },
        }))
        .await;
    assert!(
        !sandbox.to_string().contains("s3cr3t"),
        "never returned: {sandbox}"
    );

    // Plain HTTP from the program; TLS and the header from sandboxd, the program's own
    // header replaced.
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!(
            "curl -sS -H 'Authorization: Bearer forged' http://api.secret.test:{port}/v1/things"
        ),
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("over TLS\nGET /v1/things HTTP/1.1\r\n"),
        "{out}"
    );
    let lower = out.to_ascii_lowercase();
    assert!(
        lower.contains(&format!("authorization: {}", SECRET.to_ascii_lowercase())),
        "{out}"
    );
    assert!(
        !out.contains("forged"),
        "the program's header is replaced: {out}"
    );

    // The value is nowhere inside: not in the environment of any process, not in a file
    // the sandbox can read.
    let (_, found) = sh(
        &server,
        &sandbox,
        // The pattern is put together by the shell, so no command line holds it.
        "p=s3cr3; env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'; \
         grep -rs \"${p}t-token\" /etc /home /tmp /root /run 2>/dev/null; echo end",
    )
    .await;
    assert!(found.trim_end().ends_with("end"), "{found}");
    assert!(!found.contains("s3cr3t"), "{found}");

    // Nor in what the API returns or the audit log keeps.
    let (_, one) = server
        .get("sandbox.one", &[("sandboxId", id(&sandbox))])
        .await;
    assert!(!one.to_string().contains("s3cr3t"), "{one}");
    let (_, audit) = server
        .get("audit.list", &[("resourceId", id(&sandbox))])
        .await;
    assert!(!audit.to_string().contains("s3cr3t"), "{audit}");
}
