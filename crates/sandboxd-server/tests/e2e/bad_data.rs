//! Times that come out of a sandbox, whatever they are, never break a request: a file
//! dated past the year 9999, before 1970, or before the year 0 is listed (clamped to
//! what RFC 3339 holds), through the agent and through the engine's fallback alike.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::TestServer;

const DATED: &str = "mkdir -p /tmp/t && cd /tmp/t && touch -d @300000000000 far && \
                     touch -d @-1000000000 before-1970 && touch -d @-100000000000 before-0 && \
                     touch -d '9999-12-31 23:59:59' y9999 && \
                     for f in *; do echo \"$f $(stat -c %Y $f)\"; done";

async fn list_dated_files(server: &TestServer) {
    let sandbox = server.create(json!({"template": "base"})).await;
    let made = server.exec(&sandbox, DATED).await;
    assert_eq!(made["exitCode"], 0, "{made}");
    let (status, listing) = server
        .get(
            "sandbox.listFiles",
            &[
                ("sandboxId", sandbox["sandboxId"].as_str().unwrap()),
                ("path", "/tmp/t"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{listing}");
    let entries = listing["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 4, "{listing}");
    // What the file system kept (it may bound times itself), formatted as sandboxd must.
    for line in made["stdout"].as_str().unwrap().lines() {
        let (name, secs) = line.split_once(' ').unwrap();
        let secs: i64 = secs.parse().unwrap();
        let expected = sandboxd_core::rfc3339::format_millis(secs.saturating_mul(1000));
        let entry: &Value = entries.iter().find(|e| e["name"] == name).unwrap();
        assert_eq!(entry["modifiedAt"], expected, "{name}: {entry}");
    }
    let far = entries.iter().find(|e| e["name"] == "far").unwrap();
    assert!(far["modifiedAt"].as_str().unwrap() > "2400", "{far}");
}

#[tokio::test]
async fn far_future_and_ancient_file_times_are_listed_through_the_agent() {
    let server = TestServer::start().await;
    list_dated_files(&server).await;
}

#[tokio::test]
async fn far_future_and_ancient_file_times_are_listed_through_the_engine() {
    let server = TestServer::start_without_agent().await;
    list_dated_files(&server).await;
}
