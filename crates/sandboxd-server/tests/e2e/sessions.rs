//! WebSocket sessions follow their key: a session whose key is revoked, whose member
//! loses the grant, or that reaches its maximum lifetime is closed with its code, and
//! the command it was running dies with it; a browser token follows the key it was
//! issued for.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::harness::{TestServer, id};
use crate::stream::{Socket, connect_to, next, send};

/// A key of the owner's; returns (key id, secret).
async fn owner_key(server: &TestServer) -> (String, String) {
    let (status, key) = server
        .post("apiKey.create", json!({"name": "session"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{key}");
    (
        key["keyId"].as_str().unwrap().to_owned(),
        key["secret"].as_str().unwrap().to_owned(),
    )
}

async fn ready(socket: &mut Socket) {
    assert_eq!(next(socket).await.unwrap()["type"], "ready");
}

/// Waits for the server to close the socket; returns the close code.
async fn closed(socket: &mut Socket) -> u16 {
    loop {
        match next(socket).await {
            Ok(_) => continue,
            Err(code) => return code.map(u16::from).unwrap_or_default(),
        }
    }
}

async fn revoke(server: &TestServer, key_id: &str) {
    let (status, body) = server.post("apiKey.revoke", json!({"keyId": key_id})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_revoked_key_closes_its_session_and_kills_its_command() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let (key_id, secret) = owner_key(&server).await;
    let query = format!("?sandboxId={}", id(&sandbox));
    let mut socket = connect_to(&server, "/sandbox-exec", &query, Some(&secret)).await;
    ready(&mut socket).await;
    send(&mut socket, json!({"type": "exec", "cmd": "sleep 31"})).await;
    server.wait_running(&sandbox, "sleep 31").await;

    revoke(&server, &key_id).await;
    let started = std::time::Instant::now();
    assert_eq!(closed(&mut socket).await, 4001);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    server
        .wait_gone(&sandbox, |cmd| cmd.contains("sleep 31"))
        .await;
}

#[tokio::test]
async fn a_member_who_loses_the_grant_is_closed_4003() {
    let server = TestServer::start().await;
    let (status, member) = server
        .post(
            "member.create",
            json!({"name": "runner", "projectIds": [server.project_id],
                   "permissions": ["service:create", "service:read", "deployment:create"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{member}");
    let user_id = member["userId"].as_str().unwrap();
    let (_, key) = server
        .post("apiKey.create", json!({"name": "k", "userId": user_id}))
        .await;
    let secret = key["secret"].as_str().unwrap();
    let (status, sandbox) = server
        .post_with_key(
            "sandbox.create",
            Some(secret),
            json!({"environmentId": server.env_id, "template": "base"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{sandbox}");
    let query = format!("?sandboxId={}", id(&sandbox));
    let mut socket = connect_to(&server, "/sandbox-exec", &query, Some(secret)).await;
    ready(&mut socket).await;

    let (status, body) = server
        .post(
            "member.update",
            json!({"userId": user_id, "permissions": ["service:read"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(closed(&mut socket).await, 4003);
}

#[tokio::test]
async fn a_token_session_follows_the_key_it_was_issued_for() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let (key_id, secret) = owner_key(&server).await;
    let (status, token) = server
        .post_with_key(
            "sandbox.execToken",
            Some(&secret),
            json!({"sandboxId": id(&sandbox)}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{token}");
    let query = format!(
        "?sandboxId={}&token={}",
        id(&sandbox),
        token["token"].as_str().unwrap()
    );
    let mut socket = connect_to(&server, "/sandbox-exec", &query, None).await;
    ready(&mut socket).await;
    revoke(&server, &key_id).await;
    assert_eq!(closed(&mut socket).await, 4001);

    // A token whose key was revoked before it was used opens nothing.
    let (_, fresh_secret) = owner_key(&server).await;
    let (_, token) = server
        .post_with_key(
            "sandbox.execToken",
            Some(&fresh_secret),
            json!({"sandboxId": id(&sandbox)}),
        )
        .await;
    let (_, keys) = server.get("apiKey.all", &[]).await;
    let fresh_id = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k: &&Value| k["revokedAt"].is_null() && k["name"] == "session")
        .unwrap()["keyId"]
        .as_str()
        .unwrap()
        .to_owned();
    revoke(&server, &fresh_id).await;
    let query = format!(
        "?sandboxId={}&token={}",
        id(&sandbox),
        token["token"].as_str().unwrap()
    );
    let mut socket = connect_to(&server, "/sandbox-exec", &query, None).await;
    assert_eq!(closed(&mut socket).await, 4001);
}

#[tokio::test]
async fn a_terminal_closes_when_its_key_is_revoked() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let (key_id, secret) = owner_key(&server).await;
    let query = format!("?sandboxId={}&cmd=sleep%2032", id(&sandbox));
    let mut socket = connect_to(&server, "/sandbox-pty", &query, Some(&secret)).await;
    ready(&mut socket).await;
    server.wait_running(&sandbox, "sleep 32").await;
    revoke(&server, &key_id).await;
    assert_eq!(closed(&mut socket).await, 4001);
    server
        .wait_gone(&sandbox, |cmd| cmd.contains("sleep 32"))
        .await;
}

#[tokio::test]
async fn sessions_end_at_their_maximum_lifetime() {
    let server = TestServer::start_with(|config| {
        config.session_max_lifetime_secs = 2;
    })
    .await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let query = format!("?sandboxId={}", id(&sandbox));
    let mut socket = connect_to(&server, "/sandbox-exec", &query, Some(crate::harness::KEY)).await;
    ready(&mut socket).await;
    let started = std::time::Instant::now();
    assert_eq!(closed(&mut socket).await, u16::from(CloseCode::from(4008)));
    assert!(started.elapsed() < Duration::from_secs(5));
}
