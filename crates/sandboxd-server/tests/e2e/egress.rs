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
