//! E2B's network settings on sandboxd's modes: all traffic denied but named hosts is an
//! allowlist sandbox reaching those hosts only (against the pretend internet of
//! `egress_proxy`), an update replaces its list, and what sandboxd cannot honour (deny
//! lists of addresses, addresses in an allow list, another mode later) is refused.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::egress_proxy::{pretend_internet, server_with_pretend_names, sh};
use crate::harness::{KEY, TestServer};

async fn e2b_create(server: &TestServer, body: Value) -> (StatusCode, Value) {
    let made = server
        .client
        .post(format!("{}/e2b/v2/sandboxes", server.url))
        .header("X-API-Key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    (made.status(), made.json().await.unwrap())
}

async fn update(server: &TestServer, id: &str, body: Value) -> (StatusCode, String) {
    let answer = server
        .client
        .put(format!("{}/e2b/sandboxes/{id}/network", server.url))
        .header("X-API-Key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    (answer.status(), answer.text().await.unwrap())
}

#[tokio::test]
async fn all_denied_but_named_hosts_reaches_those_hosts_only_and_an_update_replaces_them() {
    let far = pretend_internet().await;
    let port = far.port();
    let server = server_with_pretend_names().await;
    let (status, made) = e2b_create(
        &server,
        json!({"templateID": "base", "timeout": 120, "network": {
            "denyOut": ["0.0.0.0/0"], "allowOut": [format!("allowed.test:{port}")]}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["sandboxID"].as_str().unwrap().to_owned();
    let sandbox = json!({"sandboxId": id});
    let (_, one) = server.get("sandbox.one", &[("sandboxId", &id)]).await;
    assert_eq!(one["networkMode"], "allowlist");
    assert_eq!(
        one["egress"]["allow"],
        json!([format!("allowed.test:{port}")])
    );
    let reach = |host: &str| format!("curl -fsS -m 10 http://{host}:{port}/");
    let (code, out) = sh(&server, &sandbox, &reach("allowed.test")).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("hello from the pretend internet"), "{out}");
    let (code, out) = sh(&server, &sandbox, &reach("blocked.test")).await;
    assert_ne!(code, 0, "a host not named is not reached: {out}");

    let (status, body) = update(
        &server,
        &id,
        json!({"denyOut": ["0.0.0.0/0"], "allowOut": [format!("blocked.test:{port}")]}),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let mut reached = false;
    for _ in 0..40 {
        if sh(&server, &sandbox, &reach("blocked.test")).await.0 == 0 {
            reached = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(reached, "the new list is taken");
    let (code, _) = sh(&server, &sandbox, &reach("allowed.test")).await;
    assert_ne!(code, 0, "the old list is gone");

    // Another mode later is a conflict that says so; the list stays.
    let (status, body) = update(&server, &id, json!({"allowOut": ["x.test"]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("allowlist") && body.contains("internet"),
        "{body}"
    );
    let (_, one) = server.get("sandbox.one", &[("sandboxId", &id)]).await;
    assert_eq!(
        one["egress"]["allow"],
        json!([format!("blocked.test:{port}")])
    );
}

#[tokio::test]
async fn what_sandboxd_cannot_honour_is_refused_and_nothing_is_made() {
    let server = TestServer::start().await;
    for (network, field) in [
        (json!({"denyOut": ["8.8.8.8"]}), "network.denyOut"),
        (
            json!({"denyOut": ["0.0.0.0/0"], "allowOut": ["1.1.1.1"]}),
            "network.allowOut",
        ),
        (
            json!({"egressProxy": {"address": "socks5://proxy.test:1080"}}),
            "network.egressProxy",
        ),
    ] {
        let (status, body) = e2b_create(
            &server,
            json!({"templateID": "base", "timeout": 60, "network": network}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["code"], 400);
        assert!(body["message"].as_str().unwrap().contains(field), "{body}");
    }
    let (_, all) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    assert_eq!(all.as_array().map(Vec::len), Some(0), "{all}");
    // No internet access and no list is no network at all.
    let (status, made) = e2b_create(
        &server,
        json!({"templateID": "base", "timeout": 60, "network": {"denyOut": ["0.0.0.0/0"]}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let (_, one) = server
        .get(
            "sandbox.one",
            &[("sandboxId", made["sandboxID"].as_str().unwrap())],
        )
        .await;
    assert_eq!(one["networkMode"], "isolated");
}
