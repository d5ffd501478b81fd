//! Request hygiene: bodies refused before they are read, per-key rate limits with
//! `Retry-After`, malformed input answered with 400 and never a 5xx.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::harness::{KEY, TestServer};

/// Sends only the headers of a request that declares a huge body, and reads the reply.
async fn declare_body(server: &TestServer, path: &str, length: u64) -> (String, Duration) {
    let address = server.url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {address}\r\nx-api-key: {KEY}\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\n\r\n{{\"sandboxId\":"
    );
    let started = Instant::now();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reply = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut reply))
        .await
        .expect("the server answers without waiting for the body")
        .unwrap();
    (
        String::from_utf8_lossy(&reply[..read]).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn oversized_bodies_are_refused_before_they_are_read() {
    let server = TestServer::start().await;
    // A declared 1 GiB body: 413 at once, though not one byte of it was sent.
    for path in ["/api/sandbox.exec", "/api/sandbox.writeFile", "/mcp"] {
        let (reply, _) = declare_body(&server, path, 1 << 30).await;
        assert!(reply.starts_with("HTTP/1.1 413"), "{path}: {reply}");
        assert!(reply.contains("PAYLOAD_TOO_LARGE"), "{reply}");
    }
    // A body without a length is cut off once past the route's limit.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..64).map(|_| Ok(vec![b' '; 64 * 1024])).collect();
    let response = server
        .client
        .post(format!("{}/api/sandbox.exec", server.url))
        .header("x-api-key", KEY)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Under the limit, a file route still takes a whole 10 MiB file.
    let sandbox = server.create(json!({"template": "python"})).await;
    let (status, written) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sandbox["sandboxId"], "path": "/tmp/big",
                   "content": "a".repeat(10 * 1024 * 1024)}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{written}");
}

#[tokio::test]
async fn malformed_requests_are_400_with_a_json_error() {
    let server = TestServer::start().await;
    for (body, content_type) in [
        ("{", "application/json"),
        ("[]", "application/json"),
        ("{\"sandboxId\": 5, \"cmd\": true}", "application/json"),
        ("\u{0}\u{1}", "application/json"),
        ("{\"sandboxId\":\"x\",\"cmd\":\"id\"}", "text/plain"),
    ] {
        let response = server
            .client
            .post(format!("{}/api/sandbox.exec", server.url))
            .header("x-api-key", KEY)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{body:?}");
        let error: serde_json::Value = response.json().await.unwrap();
        assert_eq!(error["code"], "BAD_REQUEST");
    }
    let (status, _) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", "x"), ("encoding", "rot13")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn each_user_has_its_own_rate_limit() {
    let server = TestServer::start_with(|config| {
        config.rate_limit_per_second = 2;
        config.rate_limit_burst = 5;
    })
    .await;
    // A second key of the same user, and a key of another user, made before the first
    // one runs out.
    let (status, same_user) = server.post("apiKey.create", json!({"name": "other"})).await;
    assert_eq!(status, StatusCode::OK);
    let same_user = same_user["secret"].as_str().unwrap().to_owned();
    let (status, member) = server.post("member.create", json!({"name": "m"})).await;
    assert_eq!(status, StatusCode::OK, "{member}");
    let (status, other) = server
        .post(
            "apiKey.create",
            json!({"name": "theirs", "userId": member["userId"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let other = other["secret"].as_str().unwrap().to_owned();
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..8 {
        let response = server
            .client
            .get(format!("{}/api/sandbox.templates", server.url))
            .header("x-api-key", KEY)
            .send()
            .await
            .unwrap();
        statuses.push(response.status());
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            retry_after = response
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
            let error: serde_json::Value = response.json().await.unwrap();
            assert_eq!(error["code"], "TOO_MANY_REQUESTS");
        }
    }
    assert_eq!(statuses[0], StatusCode::OK, "{statuses:?}");
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert!(refused >= 3, "{statuses:?}");
    assert_eq!(retry_after, Some(1));
    // Another user is not affected; more keys of the same user buy no more requests;
    // MCP counts against the same limit.
    let (status, _) = server.get_with_key("sandbox.templates", &other, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .get_with_key("sandbox.templates", &same_user, &[])
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let response = server
        .client
        .post(format!("{}/mcp", server.url))
        .header("x-api-key", KEY)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    // After the wait, the key works again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (status, _) = server.get("sandbox.templates", &[]).await;
    assert_eq!(status, StatusCode::OK);
}
