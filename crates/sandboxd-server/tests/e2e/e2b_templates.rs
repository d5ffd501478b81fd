//! E2B's template builder under `/e2b`, spoken as E2B's SDK speaks it: a build named
//! (202), its files' upload link (201) and the upload through it (no key: the URL's
//! token), its steps (202), its status while it waits, builds and is ready, its log a
//! page at a time. Each refusal with its status: bad names, bad hashes, forged or other
//! projects' upload tokens, steps that cannot be built (400, the build still waiting),
//! a second start (409); another organization finds none of it. E2B's own SDK builds
//! and uses a template in `tests/python/e2b_templates.py`.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::e2b::call;
use crate::harness::{KEY, TestServer};
use crate::templates_built::Images;

/// A plain tar of `a.txt`, executable.
fn archive() -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(5);
    header.set_mode(0o755);
    header.set_cksum();
    builder
        .append_data(&mut header, "a.txt", &b"hello"[..])
        .unwrap();
    builder.into_inner().unwrap()
}

#[tokio::test]
async fn an_e2b_build_waits_for_its_steps_and_refuses_what_it_cannot_take() {
    let _images = Images;
    let server = TestServer::start().await;
    for body in [
        json!({}),
        json!({"name": "Bad Name"}),
        json!({"name": "base"}),
        json!({"name": "app", "tags": [""]}),
    ] {
        let (status, answer) = call(
            &server,
            Method::POST,
            "/v3/templates",
            KEY,
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["code"], 400, "{answer}");
    }
    let (status, named) = call(
        &server,
        Method::POST,
        "/v3/templates",
        KEY,
        Some(json!({"name": "app:v1"})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{named}");
    assert_eq!(
        (named["names"].clone(), named["tags"].clone()),
        (json!(["app"]), json!(["v1"]))
    );
    let template = named["templateID"].as_str().unwrap().to_owned();
    let build = named["buildID"].as_str().unwrap().to_owned();
    assert_eq!(build.len(), 36, "a UUID: {build}");
    let status_path = format!("/templates/{template}/builds/{build}/status");
    let (status, waiting) = call(&server, Method::GET, &status_path, KEY, None).await;
    assert_eq!(
        (status, waiting["status"].clone()),
        (StatusCode::OK, json!("waiting")),
        "{waiting}"
    );

    // The upload link, and the upload through it.
    let hash = "ab".repeat(32);
    let (status, bad) = call(
        &server,
        Method::GET,
        &format!("/templates/{template}/files/nothex"),
        KEY,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    let link_path = format!("/templates/{template}/files/{hash}");
    let (status, link) = call(&server, Method::GET, &link_path, KEY, None).await;
    assert_eq!(status, StatusCode::CREATED, "{link}");
    assert_eq!(link["present"], false);
    let url = link["url"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("{}/e2b/template-files/", server.url)),
        "{url}"
    );
    let put = |url: String| {
        let client = server.client.clone();
        async move {
            client
                .put(url)
                .body(archive())
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let forged = url.replace("token=", "token=x");
    assert_eq!(put(forged).await, StatusCode::UNAUTHORIZED);
    let other_hash = url.replace(&hash, &"cd".repeat(32));
    assert_eq!(
        put(other_hash).await,
        StatusCode::UNAUTHORIZED,
        "a token is for its hash"
    );
    assert_eq!(put(url.clone()).await, StatusCode::OK);
    let (_, link) = call(&server, Method::GET, &link_path, KEY, None).await;
    assert_eq!(link, json!({"present": true}));

    // Another organization finds none of it.
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let other_key = other["apiKey"]["secret"].as_str().unwrap();
    for (method, path) in [
        (Method::GET, status_path.clone()),
        (Method::GET, link_path.clone()),
        (
            Method::POST,
            format!("/v2/templates/{template}/builds/{build}"),
        ),
    ] {
        let (status, answer) = call(
            &server,
            method,
            &path,
            other_key,
            Some(json!({"fromTemplate": "base"})),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {answer}");
    }

    // Steps that cannot be built are refused, and the build still waits.
    let start_path = format!("/v2/templates/{template}/builds/{build}");
    let copy = |files_hash: &str| json!({"type": "COPY", "args": ["a.txt", "/opt/", "", ""], "filesHash": files_hash, "force": false});
    for (body, wanted) in [
        (
            json!({"fromImage": "x", "fromImageRegistry": {"type": "registry"}, "steps": []}),
            "pulls no image",
        ),
        (
            json!({"fromTemplate": "base", "steps": [copy(&"cd".repeat(32))]}),
            "not uploaded",
        ),
        (
            json!({"fromTemplate": "base", "steps": [{"type": "ADD", "args": ["a"]}]}),
            "ADD is not taken",
        ),
        (
            json!({"fromImage": "registry.example/x:1", "steps": []}),
            "registry.example/x:1",
        ),
        (
            json!({"fromTemplate": "base", "steps": [{"type": "RUN"}]}),
            "steps.0",
        ),
    ] {
        let (status, answer) =
            call(&server, Method::POST, &start_path, KEY, Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains(wanted), "{body}: {message}");
    }
    let (_, still) = call(&server, Method::GET, &status_path, KEY, None).await;
    assert_eq!(still["status"], "waiting", "{still}");

    // The steps start the build once; it is ready with its log a page at a time.
    let steps = json!({"fromTemplate": "base", "steps": [copy(&hash)], "readyCmd": "true"});
    let (status, answer) = call(&server, Method::POST, &start_path, KEY, Some(steps.clone())).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let (status, answer) = call(&server, Method::POST, &start_path, KEY, Some(steps)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let ended = loop {
        let path = format!("{status_path}?logsOffset={}&limit=2", seen.len());
        let (status, page) = call(&server, Method::GET, &path, KEY, None).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let entries = page["logEntries"].as_array().unwrap().clone();
        assert!(entries.len() <= 2, "{page}");
        let done = page["status"] != "building" && entries.is_empty();
        seen.extend(entries);
        if done {
            break page;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the build did not end: {page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ended["status"], "ready", "{ended}");
    let copied = seen
        .iter()
        .find(|e| e["message"].as_str().unwrap_or_default().contains("COPY"))
        .unwrap_or_else(|| panic!("{seen:?}"));
    assert_eq!(copied["step"], "1", "E2B's step: {copied}");
    assert!(
        copied["timestamp"].as_str().unwrap().ends_with('Z'),
        "{copied}"
    );
    let (status, alias) = call(&server, Method::GET, "/templates/aliases/app", KEY, None).await;
    assert_eq!(
        (status, alias),
        (
            StatusCode::OK,
            json!({"templateID": template, "public": false})
        )
    );
    let (status, _) = call(
        &server,
        Method::GET,
        "/templates/aliases/app",
        other_key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A configured template exists for every key.
    let (status, base) = call(
        &server,
        Method::GET,
        "/templates/aliases/base",
        other_key,
        None,
    )
    .await;
    assert_eq!(
        (status, base),
        (
            StatusCode::OK,
            json!({"templateID": "base", "public": true})
        )
    );

    // A sandbox of it: the file with its mode, the ready command passed.
    let (status, made) = call(
        &server,
        Method::POST,
        "/v2/sandboxes",
        KEY,
        Some(json!({"templateID": "app", "allow_internet_access": false})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["sandboxID"].as_str().unwrap().to_owned();
    let run = server
        .exec(
            &json!({"sandboxId": id}),
            "stat -c '%a %u' /opt/a.txt; cat /opt/a.txt",
        )
        .await;
    assert_eq!(run["stdout"], "755 1000\nhello", "{run}");
    let (status, _) = call(
        &server,
        Method::DELETE,
        &format!("/sandboxes/{id}"),
        KEY,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, removed) = server
        .post("template.remove", json!({"templateId": template}))
        .await;
    assert_eq!((status, removed), (StatusCode::OK, json!(true)));
}
