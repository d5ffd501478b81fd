//! The client commands against an `https://` server: a TLS front (tokio-rustls) before
//! the real server, its certificate signed by a CA this test makes (rcgen). With the CA
//! named (`--ca-cert`, `SANDBOXD_CA_CERT`, or the profile `login` keeps) HTTP and the
//! exec WebSocket (`wss://`) work; without it the command says the certificate is not
//! trusted and how to fix that.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{KEY, RunningServer, sandboxd};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// Listens on loopback with TLS and relays each connection to `upstream` (plain).
/// Returns the front's `https://` URL and the CA certificate's PEM.
async fn tls_front(upstream: &str) -> (String, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sandboxd test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to relay.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (url, ca.pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_server_is_used_with_its_ca_and_refused_without_it() {
    let server = RunningServer::start().await;
    let (url, ca_pem) = tls_front(&server.url).await;
    let home = tempfile::tempdir().unwrap();
    let ca = home.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let ca = ca.to_str().unwrap().to_owned();
    let home_path = home.path().to_owned();
    let run = move |env: Vec<(&'static str, String)>, args: Vec<String>| {
        let home = home_path.clone();
        tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            sandboxd(&home, &env, &args)
        })
    };
    let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();

    let refused = run(
        vec![("SANDBOXD_URL", url.clone()), ("SANDBOXD_KEY", KEY.into())],
        args(&["templates"]),
    )
    .await
    .unwrap();
    assert_eq!(refused.code, 5, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("is not trusted") && refused.stderr.contains("--ca-cert"),
        "{}",
        refused.stderr
    );

    let listed = run(
        vec![
            ("SANDBOXD_URL", url.clone()),
            ("SANDBOXD_KEY", KEY.into()),
            ("SANDBOXD_CA_CERT", ca.clone()),
        ],
        args(&["templates", "--json"]),
    )
    .await
    .unwrap();
    assert_eq!(listed.code, 0, "{}", listed.stderr);

    // `login` keeps the CA with the server and key; later commands need no flags, and
    // the exec WebSocket goes over wss:// with the same trust.
    let login = run(
        vec![],
        args(&["login", "--url", &url, "--key", KEY, "--ca-cert", &ca]),
    )
    .await
    .unwrap();
    assert_eq!(login.code, 0, "{}", login.stderr);
    let created = run(vec![], args(&["create"])).await.unwrap();
    assert_eq!(created.code, 0, "{}", created.stderr);
    let id = created.stdout.trim().to_owned();
    let ran = run(vec![], args(&["exec", &id, "--", "echo hello over tls"]))
        .await
        .unwrap();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.stdout, "hello over tls\n");
    let doctor = run(vec![], args(&["doctor", "--client"])).await.unwrap();
    assert_eq!(doctor.code, 0, "{}", doctor.stdout);
    assert_eq!(run(vec![], args(&["rm", &id])).await.unwrap().code, 0);
}
