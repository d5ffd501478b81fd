//! Per-organization quotas: an organization at its limit of running sandboxes, CPU,
//! memory or keys per user gets a 429 naming the limit, and nothing is made; another
//! organization is not affected; freeing a sandbox makes room again.

use reqwest::StatusCode;
use serde_json::json;

use crate::harness::{TestServer, id};

fn small() -> sandboxd_core::quotas::Quotas {
    sandboxd_core::quotas::Quotas {
        running_sandboxes: 2,
        cpu: 1.5,
        memory_mb: 1024,
        keys_per_user: 3,
        ..Default::default()
    }
}

#[tokio::test]
async fn an_organization_at_its_quota_gets_429_naming_the_limit() {
    let server = TestServer::start_with(|config| config.quotas = small()).await;
    let create = |body: serde_json::Value| {
        let mut body = body;
        body["environmentId"] = json!(server.env_id);
        server.post("sandbox.create", body)
    };

    // Memory: 1024 MiB in all.
    let (status, body) = create(json!({"template": "base", "cpu": 0.5, "memoryMb": 2048})).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("1024 MiB"),
        "{body}"
    );

    let (status, first) = create(json!({"template": "base", "cpu": 1, "memoryMb": 512})).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    // CPU: 1.5 in all, 1 in use.
    let (status, body) = create(json!({"template": "base", "cpu": 1, "memoryMb": 256})).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("1.5 CPUs"),
        "{body}"
    );
    let (status, second) = create(json!({"template": "base", "cpu": 0.5, "memoryMb": 256})).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    // Sandboxes: 2 at once.
    let (status, body) = create(json!({"template": "base", "cpu": 0.1, "memoryMb": 64})).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["code"], "TOO_MANY_REQUESTS");
    assert_eq!(
        body["message"],
        "the organization's quota of 2 running sandboxes is reached"
    );
    // Nothing was made by the refusals.
    let (_, list) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");

    // Another organization has quotas of its own.
    let (status, org) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{org}");
    let other_key = org["apiKey"]["secret"].as_str().unwrap();
    let (status, project) = server
        .post_with_key("project.create", Some(other_key), json!({"name": "p"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{project}");
    let other_env = project["environments"][0]["environmentId"].clone();
    let (status, body) = server
        .post_with_key(
            "sandbox.create",
            Some(other_key),
            json!({"environmentId": other_env, "template": "base", "cpu": 0.1, "memoryMb": 64}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A killed sandbox frees its share.
    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&first)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = create(json!({"template": "base", "cpu": 1, "memoryMb": 512})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn concurrent_creates_cannot_overrun_the_quota_together() {
    let server = TestServer::start_with(|config| config.quotas = small()).await;
    let body =
        json!({"environmentId": server.env_id, "template": "base", "cpu": 0.1, "memoryMb": 64});
    let creates = (0..6).map(|_| server.post("sandbox.create", body.clone()));
    let outcomes = futures_util::future::join_all(creates).await;
    let made = outcomes
        .iter()
        .filter(|(status, _)| *status == StatusCode::OK)
        .count();
    let refused = outcomes
        .iter()
        .filter(|(status, _)| *status == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((made, refused), (2, 4), "{outcomes:?}");
}

#[tokio::test]
async fn keys_per_user_are_limited() {
    let server = TestServer::start_with(|config| config.quotas = small()).await;
    // The owner holds the bootstrap key: two more fit.
    for name in ["a", "b"] {
        let (status, body) = server.post("apiKey.create", json!({"name": name})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, body) = server.post("apiKey.create", json!({"name": "c"})).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("3 keys per user"),
        "{body}"
    );
    // Revoking one makes room.
    let (_, keys) = server.get("apiKey.all", &[]).await;
    let a = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "a")
        .unwrap()["keyId"]
        .clone();
    server.post("apiKey.revoke", json!({"keyId": a})).await;
    let (status, body) = server.post("apiKey.create", json!({"name": "c"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
