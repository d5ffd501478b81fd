//! Egress by allow-list: the policy kept with the sandbox, returned, replaced while it
//! runs, and a container with nothing but loopback whose programs are pointed at the
//! agent's proxy.

use reqwest::StatusCode;
use serde_json::json;

use crate::harness::{TestServer, id};

#[tokio::test]
async fn an_allowlist_sandbox_keeps_its_list_and_has_only_loopback() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({
            "template": "base",
            "networkMode": "allowlist",
            "envVars": "HTTPS_PROXY=http://elsewhere:1",
            "egress": {"allow": ["PyPI.org", "*.pythonhosted.org", "pypi.org"]},
        }))
        .await;
    assert_eq!(sandbox["networkMode"], "allowlist");
    assert_eq!(
        sandbox["egress"]["allow"],
        json!(["pypi.org", "*.pythonhosted.org"])
    );
    let out = server
        .exec(&sandbox, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo $HTTPS_PROXY $https_proxy $NO_PROXY")
        .await;
    let proxy = "http://127.0.0.1:49980";
    assert_eq!(
        out["stdout"],
        format!("lo\n{proxy} {proxy} localhost,127.0.0.1,::1\n")
    );

    let (status, updated) = server
        .post(
            "sandbox.setEgress",
            json!({"sandboxId": id(&sandbox), "allow": ["api.example.com:8443"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["egress"]["allow"], json!(["api.example.com:8443"]));
    let (_, one) = server
        .get("sandbox.one", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(one["egress"]["allow"], json!(["api.example.com:8443"]));

    // Every bad entry is named; nothing changes.
    let (status, refused) = server
        .post(
            "sandbox.setEgress",
            json!({"sandboxId": id(&sandbox), "allow": ["ok.example", "127.0.0.1", "*"]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("[1]") && message.contains("[2]"),
        "{refused}"
    );
    let (_, one) = server
        .get("sandbox.one", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(one["egress"]["allow"], json!(["api.example.com:8443"]));

    let (_, page) = server
        .get("audit.list", &[("resourceId", id(&sandbox))])
        .await;
    let set = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "sandbox.setEgress")
        .expect("audited");
    assert_eq!(set["metadata"]["allow"], json!(["api.example.com:8443"]));
}

#[tokio::test]
async fn an_egress_list_is_only_for_the_allowlist_mode() {
    let server = TestServer::start().await;
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base", "egress": {"allow": ["example.com"]}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let isolated = server.create(json!({"template": "base"})).await;
    assert!(isolated.get("egress").is_none(), "{isolated}");
    let (status, body) = server
        .post(
            "sandbox.setEgress",
            json!({"sandboxId": id(&isolated), "allow": ["example.com"]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("allowlist"),
        "{body}"
    );
}

/// A key of `scopes` for the owner's own user.
async fn owners_key(server: &TestServer, scopes: serde_json::Value) -> String {
    let (status, key) = server
        .post(
            "apiKey.create",
            json!({"name": "narrowed", "scopes": scopes}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{key}");
    key["secret"].as_str().unwrap().to_owned()
}

async fn list_of(server: &TestServer, sandbox_id: &str) -> serde_json::Value {
    let (_, one) = server
        .get("sandbox.one", &[("sandboxId", sandbox_id)])
        .await;
    one["egress"]["allow"].clone()
}

/// The approval loop cannot be stepped around: a key that may only ask (it may use the
/// sandbox, not decide) narrows a list but never widens it, by `setEgress` or by a
/// create's own list; a key holding `egress:decide` does both.
#[tokio::test]
async fn only_a_key_that_may_decide_widens_a_list_and_any_key_narrows_it() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "networkMode": "allowlist",
            "egress": {"allow": ["a.example", "b.example"]}}))
        .await;
    let sid = id(&sandbox);
    let agent = owners_key(
        &server,
        json!(["service:read", "service:create", "deployment:create"]),
    )
    .await;
    let set = |allow: serde_json::Value| json!({"sandboxId": sid, "allow": allow});
    for widening in [
        json!(["a.example", "b.example", "c.example"]),
        json!(["*.example"]),
        json!(["a.example:8443"]),
    ] {
        let (status, refused) = server
            .post_with_key("sandbox.setEgress", Some(&agent), set(widening.clone()))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{widening}: {refused}");
        assert!(
            refused["message"]
                .as_str()
                .unwrap()
                .contains("egress:decide"),
            "{refused}"
        );
        assert_eq!(
            list_of(&server, sid).await,
            json!(["a.example", "b.example"])
        );
    }
    let (status, narrowed) = server
        .post_with_key("sandbox.setEgress", Some(&agent), set(json!(["a.example"])))
        .await;
    assert_eq!(status, StatusCode::OK, "{narrowed}");
    assert_eq!(narrowed["egress"]["allow"], json!(["a.example"]));
    // Adding back what was removed is adding.
    let (status, _) = server
        .post_with_key(
            "sandbox.setEgress",
            Some(&agent),
            set(json!(["a.example", "b.example"])),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // A create's own list is adding too; an empty one is not.
    let create = |allow: serde_json::Value| {
        json!({"environmentId": server.env_id, "template": "base",
            "networkMode": "allowlist", "egress": {"allow": allow}})
    };
    let (status, refused) = server
        .post_with_key("sandbox.create", Some(&agent), create(json!(["x.example"])))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    let (status, made) = server
        .post_with_key("sandbox.create", Some(&agent), create(json!([])))
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");

    // A key that may decide widens.
    let decider = owners_key(
        &server,
        json!(["service:read", "deployment:create", "egress:decide"]),
    )
    .await;
    let (status, widened) = server
        .post_with_key(
            "sandbox.setEgress",
            Some(&decider),
            set(json!(["a.example", "c.example"])),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{widened}");
    assert_eq!(
        widened["egress"]["allow"],
        json!(["a.example", "c.example"])
    );
}

/// A request is decided by another user than the asker: the asker's own second key
/// (even one holding `egress:decide`) cannot approve it, another member can, and an
/// owner can with a key that holds `organization:admin` (deliberately, not with an
/// agent's key narrowed from theirs).
#[tokio::test]
async fn a_request_is_decided_by_another_user_or_an_administrators_key() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "networkMode": "allowlist", "egress": {"allow": []}}))
        .await;
    let sid = id(&sandbox);
    let grants = json!({"permissions": ["service:read", "deployment:create", "egress:decide"],
        "sandboxIds": [sid]});
    let (asker, deciding_key) = crate::tenancy::member_with_key(&server, grants.clone()).await;
    let (status, asking_key) = server
        .post(
            "apiKey.create",
            json!({"name": "asker", "userId": asker, "scopes": ["service:read", "deployment:create"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{asking_key}");
    let asking_key = asking_key["secret"].as_str().unwrap().to_owned();
    let ask = |host: &str| json!({"sandboxId": sid, "host": host});
    let (status, asked) = server
        .post_with_key(
            "sandbox.requestEgress",
            Some(&asking_key),
            ask("one.example"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{asked}");
    let approve = json!({"requestId": asked["requestId"], "approve": true});
    let (status, refused) = server
        .post_with_key("egress.decide", Some(&deciding_key), approve.clone())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("another user"),
        "{refused}"
    );
    assert_eq!(list_of(&server, sid).await, json!([]));
    let (_, other_member) = crate::tenancy::member_with_key(&server, grants).await;
    let (status, approved) = server
        .post_with_key("egress.decide", Some(&other_member), approve)
        .await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(list_of(&server, sid).await, json!(["one.example"]));

    // The owner's agent key asks; the owner's narrowed deciding key cannot approve,
    // the owner's full key can.
    let owner_agent = owners_key(&server, json!(["service:read", "deployment:create"])).await;
    let owner_decider = owners_key(
        &server,
        json!(["service:read", "deployment:create", "egress:decide"]),
    )
    .await;
    let (_, asked) = server
        .post_with_key(
            "sandbox.requestEgress",
            Some(&owner_agent),
            ask("two.example"),
        )
        .await;
    let approve = json!({"requestId": asked["requestId"], "approve": true});
    let (status, refused) = server
        .post_with_key("egress.decide", Some(&owner_decider), approve.clone())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    let (status, approved) = server.post("egress.decide", approve).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(
        list_of(&server, sid).await,
        json!(["one.example", "two.example"])
    );
}
