//! Keys and grants never widen: a narrowed or expiring key, and an administrator's key
//! narrowed to administration, make nothing that can do more or live longer than
//! themselves — on every path that creates a key or a member or changes one.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::TestServer;

/// A key the owner makes with `body`; returns its reply.
async fn owner_key(server: &TestServer, body: Value) -> Value {
    let (status, key) = server.post("apiKey.create", body).await;
    assert_eq!(status, StatusCode::OK, "{key}");
    key
}

fn secret(key: &Value) -> &str {
    key["secret"].as_str().unwrap()
}

#[tokio::test]
async fn a_narrowed_expiring_key_makes_no_wider_or_longer_lived_key() {
    let server = TestServer::start().await;
    let reader = owner_key(
        &server,
        json!({"name": "reader", "scopes": ["service:read"], "expiresInMs": 600_000}),
    )
    .await;
    let reader_expiry = humantime::parse_rfc3339(reader["expiresAt"].as_str().unwrap()).unwrap();

    // No scopes and no expiry asked: the new key is the reader's, not an owner's.
    let (status, minted) = server
        .post_with_key("apiKey.create", Some(secret(&reader)), json!({"name": "x"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{minted}");
    assert_eq!(minted["scopes"], json!(["service:read"]));
    let minted_expiry = humantime::parse_rfc3339(minted["expiresAt"].as_str().unwrap()).unwrap();
    assert!(minted_expiry <= reader_expiry, "{minted}");

    // A longer expiry is cut to the reader's.
    let (status, longer) = server
        .post_with_key(
            "apiKey.create",
            Some(secret(&reader)),
            json!({"name": "y", "expiresInMs": 315_360_000_000_i64}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{longer}");
    let longer_expiry = humantime::parse_rfc3339(longer["expiresAt"].as_str().unwrap()).unwrap();
    assert!(longer_expiry <= reader_expiry, "{longer}");

    // The minted key can do no more than the reader.
    let minted_secret = secret(&minted);
    let (status, _) = server
        .post_with_key("project.create", Some(minted_secret), json!({"name": "p"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = server.get_with_key("audit.list", minted_secret, &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = server
        .get_with_key(
            "sandbox.list",
            minted_secret,
            &[("projectId", &server.project_id)],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn an_organization_made_with_a_narrowed_key_gets_a_key_as_narrow() {
    let server = TestServer::start().await;
    let narrowed = owner_key(
        &server,
        json!({"name": "org-maker", "scopes": ["organization:admin", "service:read"],
               "expiresInMs": 600_000}),
    )
    .await;
    let (status, org) = server
        .post_with_key(
            "organization.create",
            Some(secret(&narrowed)),
            json!({"name": "second"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{org}");
    let key = &org["apiKey"];
    assert_eq!(
        key["scopes"],
        json!(["service:read", "organization:admin"]),
        "{org}"
    );
    assert!(key["expiresAt"].is_string(), "{org}");
    let (status, _) = server
        .post_with_key("project.create", Some(secret(key)), json!({"name": "p"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn an_administration_key_grants_nothing_it_does_not_hold() {
    let server = TestServer::start().await;
    let admin = owner_key(
        &server,
        json!({"name": "admin-only", "scopes": ["organization:admin", "service:read"]}),
    )
    .await;
    let key = Some(secret(&admin));

    // Members it adds hold at most what it holds; it makes no owner or admin.
    let (status, body) = server
        .post_with_key(
            "member.create",
            key,
            json!({"name": "m", "permissions": ["service:read", "service:delete"]}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = server
        .post_with_key("member.create", key, json!({"name": "a", "role": "admin"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, member) = server
        .post_with_key(
            "member.create",
            key,
            json!({"name": "m", "permissions": ["service:read"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{member}");
    let user_id = member["userId"].as_str().unwrap();

    // Nor does a change widen them.
    for change in [
        json!({"userId": user_id, "permissions": ["deployment:create"]}),
        json!({"userId": user_id, "role": "admin"}),
        json!({"userId": user_id, "role": "owner"}),
    ] {
        let (status, body) = server.post_with_key("member.update", key, change).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    }
    let (_, members) = server.get("member.all", &[]).await;
    let stored = members
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["userId"] == user_id)
        .unwrap();
    assert_eq!(stored["role"], "member", "{stored}");
    assert_eq!(stored["permissions"], json!(["service:read"]), "{stored}");

    // A key it makes for that member is bounded by its own scopes too.
    let (status, made) = server
        .post_with_key(
            "apiKey.create",
            key,
            json!({"name": "k", "userId": user_id}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(
        made["scopes"],
        json!(["service:read", "organization:admin"])
    );
    let (status, _) = server
        .post_with_key(
            "apiKey.create",
            key,
            json!({"name": "k", "userId": user_id, "scopes": ["deployment:create"]}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}
