//! What the egress proxy lets through is bound to the host it allowed: a request's
//! `Host` is its URL's (another, or two, is refused and logged), a tunnel to HTTPS's
//! port must greet its own host in its ClientHello (another name, or none, closes it
//! before a byte goes on), and no name reaches sandboxd's own host (its API, its
//! metrics) unless the operator lists that address alone.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpListener;

use crate::egress_proxy::{
    FAR, allowlisted, log_until, pretend_internet, server_with_pretend_names, sh,
};
use crate::harness::TestServer;

/// The refusals of the sandbox's egress log whose reason contains `why`.
async fn refusals(server: &TestServer, sandbox: &Value, why: &str) -> Vec<Value> {
    let wanted = |entries: &[Value]| {
        entries
            .iter()
            .filter(|e| {
                e["decision"] == "refused" && e["reason"].as_str().unwrap_or_default().contains(why)
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    let (entries, _) =
        log_until(server, sandbox, None, |entries| !wanted(entries).is_empty()).await;
    wanted(&entries)
}

#[tokio::test]
async fn a_host_header_other_than_the_urls_is_refused_and_logged() {
    let far = pretend_internet().await;
    let port = far.port();
    let server = server_with_pretend_names().await;
    let sandbox = allowlisted(&server, json!([format!("allowed.test:{port}")])).await;
    let fetch =
        |extra: &str| format!("curl -sS -w ' %{{http_code}}' {extra} http://allowed.test:{port}/f");

    // Another host in `Host`: a front end routing by it would serve that host.
    let (_, out) = sh(&server, &sandbox, &fetch("-H 'Host: blocked.test'")).await;
    assert!(out.ends_with(" 400"), "{out}");
    assert!(out.contains("sandboxd egress proxy"), "{out}");
    assert!(!out.contains("pretend internet"), "{out}");
    // Two of them.
    let twice = format!(
        "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', 49980)); \
         s.sendall(b'GET http://allowed.test:{port}/x HTTP/1.1\\r\\nHost: allowed.test:{port}\\r\\nHost: blocked.test\\r\\n\\r\\n'); \
         print(s.recv(4096).decode().splitlines()[0])\""
    );
    let (_, out) = sh(&server, &sandbox, &twice).await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");

    // Its own host, however written, goes on; the host sees the name sandboxd wrote.
    let (_, out) = sh(
        &server,
        &sandbox,
        &fetch(&format!("-H 'Host: ALLOWED.test.:{port}'")),
    )
    .await;
    assert!(out.ends_with(" 200"), "{out}");
    assert!(
        out.contains(&format!("host: allowed.test:{port}\r\n")),
        "{out}"
    );

    let refused = refusals(&server, &sandbox, "Host header").await;
    assert!(!refused.is_empty(), "logged as refused");
    assert_eq!(refused[0]["host"], "allowed.test");
    assert!(server.metrics().await.contains("reason=\"host_mismatch\""));
}

/// A server on HTTPS's port of the pretend internet that keeps what each connection
/// sent first.
async fn https_front_end() -> Arc<Mutex<Vec<Vec<u8>>>> {
    let listener = TcpListener::bind((FAR, 443))
        .await
        .expect("port 443 of 127.0.0.2 (the tests run as root)");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut first = vec![0u8; 64 * 1024];
                if let Ok(Ok(n)) =
                    tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut first))
                        .await
                    && n > 0
                {
                    kept.lock().unwrap().push(first[..n].to_vec());
                }
            });
        }
    });
    seen
}

/// Greets `name` (none: no SNI) through a CONNECT to `allowed.test:443`; prints what
/// became of the handshake.
const GREET: &str = r#"
import socket, ssl, sys
for name in sys.argv[1:]:
    s = socket.create_connection(('127.0.0.1', 49980))
    s.sendall(b'CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n')
    head = b''
    while b'\r\n\r\n' not in head:
        head += s.recv(1)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.wrap_socket(s, server_hostname=None if name == 'none' else name)
        print(name, 'handshake')
    except Exception as e:
        print(name, type(e).__name__, e)
"#;

#[tokio::test]
async fn a_tunnel_to_https_must_greet_the_host_it_was_allowed_to() {
    let seen = https_front_end().await;
    let server = server_with_pretend_names().await;
    let sandbox = allowlisted(&server, json!(["allowed.test"])).await;
    let (_, written) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sandbox["sandboxId"], "path": "/tmp/greet.py", "content": GREET}),
        )
        .await;
    assert!(written.is_object(), "{written}");
    let (_, out) = sh(&server, &sandbox, "python3 /tmp/greet.py blocked.test none").await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    for line in &lines {
        assert!(line.contains("UNRECOGNIZED_NAME"), "{out}");
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the front end: {:?}",
        seen.lock().unwrap().len()
    );
    let (_, out) = sh(&server, &sandbox, "python3 /tmp/greet.py Allowed.Test").await;
    assert!(!out.contains("UNRECOGNIZED_NAME"), "{out}");
    let reached = seen.lock().unwrap().clone();
    assert_eq!(reached.len(), 1, "the allowed greeting went on");
    assert_eq!(reached[0][0], 0x16, "a TLS handshake record");
    assert!(
        reached[0]
            .windows(12)
            .any(|w| w.eq_ignore_ascii_case(b"allowed.test")),
        "its name went on"
    );
    let refused = refusals(&server, &sandbox, "TLS handshake").await;
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(server.metrics().await.contains("reason=\"sni_mismatch\""));
}

#[tokio::test]
async fn sandboxd_itself_is_not_reachable_through_a_name_that_resolves_to_it() {
    let far = pretend_internet().await;
    let server = TestServer::start_with(|config| {
        let hosts = [
            ("self.test".to_owned(), "127.0.0.1".to_owned()),
            ("allowed.test".to_owned(), FAR.to_owned()),
        ]
        .into();
        // The operator opens loopback's network (a lab's internal range, say): that
        // does not open sandboxd's own address in it; the pretend internet is listed
        // alone.
        config.egress.hosts = hosts;
        config.egress.allowed_networks = vec!["127.0.0.0/8".to_owned(), format!("{FAR}/32")];
    })
    .await;
    let api_port = server.url.rsplit(':').next().unwrap().to_owned();
    let sandbox = allowlisted(
        &server,
        json!([
            format!("self.test:{api_port}"),
            format!("allowed.test:{}", far.port())
        ]),
    )
    .await;
    let (_, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS -w ' %{{http_code}}' http://self.test:{api_port}/api/sandbox.templates"),
    )
    .await;
    assert!(out.ends_with(" 403"), "{out}");
    assert!(out.contains("sandboxd's own host"), "{out}");
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS --proxytunnel http://self.test:{api_port}/api/sandbox.templates"),
    )
    .await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("403"), "{out}");
    let (_, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS http://allowed.test:{}/x", far.port()),
    )
    .await;
    assert!(out.starts_with("hello from the pretend internet"), "{out}");
    assert!(
        !refusals(&server, &sandbox, "sandboxd's own host")
            .await
            .is_empty()
    );
    assert!(server.metrics().await.contains("reason=\"own_address\""));
}
