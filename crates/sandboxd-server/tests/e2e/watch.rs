//! The watch WebSocket (`/sandbox-watch`), with a real client: a change made in the
//! sandbox reaches the watcher as it is made, recursively into directories made later;
//! bad paths and another organization's sandbox are refused; the agent's watcher goes
//! with the session.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{KEY, TestServer, id};
use crate::stream::{connect_to, next};

/// Events until one for a path ending with `suffix` of `change`, within 20 s.
async fn wait_for(socket: &mut crate::stream::Socket, change: &str, suffix: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "no {change} of {suffix}");
        let message = next(socket).await.expect("open");
        if message["type"] == "event"
            && message["change"] == change
            && message["path"].as_str().unwrap().ends_with(suffix)
        {
            return message;
        }
    }
}

#[tokio::test]
async fn changes_reach_the_watcher_as_they_are_made() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    server.exec(&sandbox, "mkdir -p /home/user/w").await;
    let query = format!(
        "?sandboxId={}&path=/home/user/w&recursive=true",
        id(&sandbox)
    );
    let mut socket = connect_to(&server, "/sandbox-watch", &query, Some(KEY)).await;
    let ready = next(&mut socket).await.unwrap();
    assert_eq!(ready["type"], "ready", "{ready}");
    assert_eq!(ready["path"], "/home/user/w");

    server.exec(&sandbox, "echo hi > /home/user/w/a.txt").await;
    let made = wait_for(&mut socket, "create", "/w/a.txt").await;
    assert_eq!(made["name"], "a.txt", "{made}");
    // A directory made later is watched too (recursive).
    server
        .exec(&sandbox, "mkdir /home/user/w/sub && sleep 0.2 && echo x > /home/user/w/sub/b.txt && rm /home/user/w/a.txt")
        .await;
    wait_for(&mut socket, "create", "/w/sub/b.txt").await;
    wait_for(&mut socket, "remove", "/w/a.txt").await;

    // One session's watcher goes with it: 40 sessions one after another never reach
    // the agent's bound of 32 watchers.
    drop(socket);
    for _ in 0..40 {
        let mut socket = connect_to(&server, "/sandbox-watch", &query, Some(KEY)).await;
        let ready = next(&mut socket).await.unwrap();
        assert_eq!(ready["type"], "ready", "{ready}");
        drop(socket);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn bad_watches_are_refused_with_a_reason() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    for (path, says) in [
        ("relative", "absolute"),
        ("/no/such/dir", "does not exist"),
        ("/etc/passwd", "not a directory"),
    ] {
        let query = format!("?sandboxId={}&path={path}", id(&sandbox));
        let mut socket = connect_to(&server, "/sandbox-watch", &query, Some(KEY)).await;
        let refused = next(&mut socket).await.unwrap();
        assert_eq!(refused["type"], "error", "{path}: {refused}");
        assert!(
            refused["message"].as_str().unwrap().contains(says),
            "{path}: {refused}"
        );
    }
    // Without a key, and with another organization's.
    let query = format!("?sandboxId={}&path=/tmp", id(&sandbox));
    let mut socket = connect_to(&server, "/sandbox-watch", &query, None).await;
    assert_eq!(
        next(&mut socket).await.unwrap_err().map(u16::from),
        Some(4001)
    );
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{other}");
    let key = other["apiKey"]["secret"].as_str().unwrap();
    let mut socket = connect_to(&server, "/sandbox-watch", &query, Some(key)).await;
    assert_eq!(
        next(&mut socket).await.unwrap_err().map(u16::from),
        Some(4003)
    );
}
