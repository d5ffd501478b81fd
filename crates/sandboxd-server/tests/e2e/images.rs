//! Images a tenant names: a pull that fails tells the caller which image, never the
//! engine's reason (which would let a tenant probe the operator's network through the
//! engine); an allow-list refuses other images before the engine is asked; a reference
//! that cannot be parsed is the caller's error.

use reqwest::StatusCode;
use serde_json::json;

use crate::harness::{BUSYBOX, DEBIAN, TestServer};

#[tokio::test]
async fn a_failed_pull_does_not_tell_the_engines_reason() {
    let server = TestServer::start().await;
    // A registry that refuses connections on loopback, and one whose name is unknown.
    for image in [
        "127.0.0.1:1/probe/image:1",
        "registry.invalid/probe/image:1",
    ] {
        let (status, body) = server
            .post(
                "sandbox.create",
                json!({"environmentId": server.env_id, "image": image}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(
            body["message"],
            format!("image {image} is not present and could not be pulled"),
            "only the image is named: {body}"
        );
    }
}

#[tokio::test]
async fn an_allow_list_refuses_other_images_before_the_engine_is_asked() {
    let server = TestServer::start_with(|config| {
        config.allowed_images = vec!["docker.io/sandboxd-local/busybox:*".into()];
    })
    .await;
    let allowed = server.create(json!({"image": BUSYBOX})).await;
    assert_eq!(allowed["status"], "running", "{allowed}");

    for image in [
        "127.0.0.1:1/probe/image:1",
        "busybox",
        "evil.example/sandboxd-local/busybox:latest",
        DEBIAN,
    ] {
        let (status, body) = server
            .post(
                "sandbox.create",
                json!({"environmentId": server.env_id, "image": image}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["issues"][0]["path"], "image", "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("not among the images"),
            "{body}"
        );
    }
    // Refused before any row or container was made.
    let (_, list) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    // Templates are the operator's own and stay usable (`base` is the Debian image).
    let template = server.create(json!({"template": "base"})).await;
    assert_eq!(template["status"], "running", "{template}");
}

#[tokio::test]
async fn a_reference_the_engine_cannot_parse_is_the_callers_error() {
    let server = TestServer::start().await;
    // Refused by the check (not ASCII), then by the engine's own parser: 400 both times,
    // never a server error.
    for image in ["\u{5670}", "a::b", "UPPER/case"] {
        let (status, body) = server
            .post(
                "sandbox.create",
                json!({"environmentId": server.env_id, "image": image}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{image}: {body}");
    }
}
