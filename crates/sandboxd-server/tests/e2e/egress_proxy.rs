//! The egress proxy against a pretend internet: web servers on 127.0.0.2 (the host's
//! loopback, which the test's `[egress] allowed_networks` opens for that address only)
//! stand for `allowed.test`, `api.allowed.test` and `blocked.test`, named through
//! `[egress] hosts`. Programs in an `allowlist` sandbox reach what its list allows, by
//! CONNECT and by absolute-form requests, and nothing else.

use std::net::SocketAddr;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::harness::{TestServer, id};

/// The pretend internet's address.
const FAR: &str = "127.0.0.2";

/// A web server answering every request with `hello from the pretend internet`, then
/// the request's head as it arrived (so a test sees what the proxy sent on).
async fn pretend_internet() -> SocketAddr {
    let listener = TcpListener::bind((FAR, 0))
        .await
        .expect("127.0.0.2 is loopback");
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let body = format!(
                    "hello from the pretend internet\n{}",
                    String::from_utf8_lossy(&head)
                );
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    address
}

async fn server_with_pretend_names() -> TestServer {
    TestServer::start_with(|config| {
        let mut hosts: std::collections::BTreeMap<String, String> = [
            "allowed.test",
            "api.allowed.test",
            "deep.api.allowed.test",
            "blocked.test",
        ]
        .map(|name| (name.to_owned(), FAR.to_owned()))
        .into();
        // A name that resolves to the host's loopback, which no sandbox may reach.
        hosts.insert("loop.test".into(), "127.0.0.1".into());
        config.egress = sandboxd_core::egress::Operator::parse(&hosts, &[format!("{FAR}/32")])
            .expect("settings");
    })
    .await
}

async fn sh(server: &TestServer, sandbox: &Value, cmd: &str) -> (i64, String) {
    let out = server.exec(sandbox, cmd).await;
    let text = format!(
        "{}{}",
        out["stdout"].as_str().unwrap_or_default(),
        out["stderr"].as_str().unwrap_or_default()
    );
    (out["exitCode"].as_i64().unwrap_or(-1), text)
}

#[tokio::test]
async fn programs_reach_the_allowed_hosts_through_the_proxy_and_nothing_else() {
    let far = pretend_internet().await;
    let port = far.port();
    let server = server_with_pretend_names().await;
    let sandbox = server
        .create(json!({
            "template": "base",
            "networkMode": "allowlist",
            "egress": {"allow": [format!("allowed.test:{port}"), format!("*.api.allowed.test:{port}"), format!("loop.test:{port}")]},
        }))
        .await;

    // An absolute-form request, as curl sends plain HTTP through HTTP_PROXY.
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS http://allowed.test:{port}/plain"),
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("hello from the pretend internet\nGET /plain HTTP/1.1\r\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("host: allowed.test:{port}"))
            || out.contains(&format!("Host: allowed.test:{port}")),
        "{out}"
    );
    assert!(
        !out.to_ascii_lowercase().contains("proxy-connection"),
        "hop-by-hop headers stay: {out}"
    );

    // A tunnel (CONNECT), as HTTPS always goes.
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS --proxytunnel http://allowed.test:{port}/tunnelled"),
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("GET /tunnelled HTTP/1.1"), "{out}");

    // Python's standard library reads the same variables.
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("python3 -c \"import urllib.request; print(urllib.request.urlopen('http://deep.api.allowed.test:{port}/py').read().decode())\""),
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("GET /py HTTP/1.1"),
        "a wildcard covers names two labels below: {out}"
    );

    // Refusals: not listed, the bare name of a wildcard, an address, a name that
    // resolves to loopback, a port not listed.
    for (url, why) in [
        (
            format!("http://blocked.test:{port}/"),
            "not in the sandbox's egress list",
        ),
        (
            format!("http://api.allowed.test:{port}/"),
            "not in the sandbox's egress list",
        ),
        (format!("http://{FAR}:{port}/"), "an IP address"),
        (format!("http://loop.test:{port}/"), "loopback"),
        (
            format!("http://allowed.test:{}/", port.wrapping_add(1)),
            "not in the sandbox's egress list",
        ),
    ] {
        let (code, out) = sh(
            &server,
            &sandbox,
            &format!("curl -sS -w ' %{{http_code}}' {url}"),
        )
        .await;
        assert_eq!(code, 0, "{url}: {out}");
        assert!(out.ends_with(" 403"), "{url}: {out}");
        assert!(out.contains(why), "{url}: {out}");
    }
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS --proxytunnel http://blocked.test:{port}/"),
    )
    .await;
    assert_ne!(code, 0, "a refused tunnel fails: {out}");
    assert!(out.contains("403"), "{out}");

    // Without the proxy there is no way out: no name resolves and no interface leads
    // anywhere (127.0.0.2 inside is the sandbox's own loopback).
    for cmd in [
        format!("curl -sS --noproxy '*' --max-time 5 http://allowed.test:{port}/"),
        format!("curl -sS --noproxy '*' --max-time 5 http://{FAR}:{port}/"),
    ] {
        let (code, out) = sh(&server, &sandbox, &cmd).await;
        assert_ne!(code, 0, "{cmd}: {out}");
        assert!(!out.contains("pretend internet"), "{cmd}: {out}");
    }

    // A new list holds for the next connection.
    let (status, _) = server
        .post(
            "sandbox.setEgress",
            json!({"sandboxId": id(&sandbox), "allow": [format!("blocked.test:{port}")]}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK);
    let (_, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS -w ' %{{http_code}}' http://blocked.test:{port}/now"),
    )
    .await;
    assert!(
        out.contains("GET /now HTTP/1.1") && out.ends_with(" 200"),
        "{out}"
    );
    let (_, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS -w ' %{{http_code}}' http://allowed.test:{port}/"),
    )
    .await;
    assert!(out.ends_with(" 403"), "{out}");
}

#[tokio::test]
async fn an_internet_sandbox_has_no_proxy_and_an_isolated_one_no_way_out() {
    let far = pretend_internet().await;
    let server = server_with_pretend_names().await;
    let isolated = server.create(json!({"template": "base"})).await;
    let (code, out) = sh(
        &server,
        &isolated,
        &format!(
            "curl -sS --max-time 5 -x http://127.0.0.1:49980 http://allowed.test:{}/",
            far.port()
        ),
    )
    .await;
    assert_ne!(code, 0, "nothing listens where the proxy would: {out}");
    assert!(!out.contains("pretend internet"), "{out}");
}
