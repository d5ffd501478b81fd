//! Build contexts streamed as a tar (`template.context`), on the real engine: a context
//! larger than `template.build`'s `files` take (65 MiB and more) builds, each file with
//! its mode and links as links, and its rebuild comes from the cache; hostile tars
//! (`..`, absolute names, hard links, fifos, garbage), a context over its bound or over
//! the organization's, and contexts of another organization or without a key are each
//! refused with their status, and nothing of them stays in the store.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::harness::{KEY, TestServer};
use crate::templates_built::Images;
use crate::transfers::noise;

/// Posts a tar to `template.context` with `key`.
async fn upload(server: &TestServer, key: Option<&str>, tar: Vec<u8>) -> (StatusCode, Value) {
    let mut request = server
        .client
        .post(format!("{}/api/template.context", server.url))
        .header("content-type", "application/x-tar")
        .body(tar);
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A tar of regular files (name, content, mode) and symbolic links (name, target).
fn tar_of(files: &[(&str, &[u8], u32)], links: &[(&str, &str)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, content, mode) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(*mode);
        builder.append_data(&mut header, name, *content).unwrap();
    }
    for (name, target) in links {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        builder.append_link(&mut header, name, target).unwrap();
    }
    builder.into_inner().unwrap()
}

/// A tar of one entry whose name and kind are written as given (the tar crate's
/// builder refuses `..` and absolute names; a hostile client does not).
fn raw_entry(name: &str, kind: tar::EntryType, link: &str) -> Vec<u8> {
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    header.set_entry_type(kind);
    header.set_mode(0o644);
    let content: &[u8] = if kind == tar::EntryType::Regular {
        b"x"
    } else {
        b""
    };
    header.set_size(content.len() as u64);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, content).unwrap();
    builder.into_inner().unwrap()
}

/// Follows a build to its end; answers its log's lines.
async fn built(server: &TestServer, body: Value) -> Vec<String> {
    let (status, started) = server.post("template.build", body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let build_id = started["buildId"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let (_, log) = server
            .get("template.buildLog", &[("buildId", &build_id)])
            .await;
        if log["status"] != "building" {
            let lines: Vec<String> = log["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["line"].as_str().unwrap_or_default().to_owned())
                .collect();
            assert_eq!(log["status"], "ready", "{log}");
            return lines;
        }
        assert!(Instant::now() < deadline, "the build did not end");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_context_over_the_body_s_bound_builds_with_modes_and_links() {
    let _images = Images;
    let server = TestServer::start().await;
    // 65 MiB and a byte: more than `files` takes.
    let big = noise((65 << 20) + 1, 7);
    let sum = Sha256::digest(&big)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    let tar = tar_of(
        &[
            ("big.bin", &big, 0o644),
            ("bin/run.sh", b"#!/bin/sh\necho ran\n", 0o755),
            ("./notes/readme.txt", b"hello", 0o600),
        ],
        &[("run", "bin/run.sh")],
    );
    let (status, context) = upload(&server, Some(KEY), tar).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert_eq!(context["files"], 4, "{context}");
    assert_eq!(context["bytes"], (65 << 20) + 1 + 19 + 5, "{context}");
    assert_eq!(context["projectId"], server.project_id.as_str());
    let context_id = context["contextId"].as_str().unwrap().to_owned();

    let dockerfile = "FROM base\nCOPY . /ctx/\nRUN sha256sum /ctx/big.bin > /ctx/sum && /ctx/run\n";
    let body = json!({"name": "big", "dockerfile": dockerfile, "contextId": context_id});
    let lines = built(&server, body.clone()).await;
    assert!(lines.iter().any(|l| l == "ran"), "{lines:?}");
    assert!(
        lines.iter().any(|l| l == "reading the build context"),
        "{lines:?}"
    );
    let sandbox = server.create(json!({"template": "big"})).await;
    let shown = server
        .exec(
            &sandbox,
            "cut -d' ' -f1 /ctx/sum; stat -c %a /ctx/bin/run.sh /ctx/notes/readme.txt; readlink /ctx/run",
        )
        .await;
    assert_eq!(
        shown["stdout"].as_str().unwrap(),
        format!("{sum}\n755\n600\nbin/run.sh\n"),
        "{shown}"
    );

    // The same context again: every step from the cache.
    let again = built(&server, body).await;
    assert_eq!(
        again.iter().filter(|l| l.contains("---> cached")).count(),
        2,
        "{again:?}"
    );
    // ... and without reading the context again.
    assert!(
        !again.iter().any(|l| l.contains("build context")),
        "{again:?}"
    );
    // The audit log names the upload.
    let (_, audit) = server
        .get("audit.list", &[("action", "template.context")])
        .await;
    assert!(audit.to_string().contains(&context_id), "{audit}");
    let _ = server
        .post("sandbox.kill", json!({"sandboxId": sandbox["sandboxId"]}))
        .await;
}

#[tokio::test]
async fn bad_contexts_are_refused_and_leave_nothing() {
    let server = TestServer::start_with(|config| {
        config.builds.context_mb = 1;
        config.builds.contexts_mb = 2;
    })
    .await;
    for (tar, wanted) in [
        (
            raw_entry("../evil", tar::EntryType::Regular, ""),
            "goes up (..)",
        ),
        (
            raw_entry("/etc/evil", tar::EntryType::Regular, ""),
            "relative path",
        ),
        (
            raw_entry("hard", tar::EntryType::Link, "big.bin"),
            "hard link",
        ),
        (raw_entry("pipe", tar::EntryType::Fifo, ""), "a fifo"),
        (
            b"this is not a tar archive, not even close".repeat(20),
            "cannot be read",
        ),
    ] {
        let (status, error) = upload(&server, Some(KEY), tar).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{wanted}: {error}");
        assert!(error.to_string().contains(wanted), "{wanted}: {error}");
    }
    // Over the bound of one context: 413.
    let (status, error) = upload(
        &server,
        Some(KEY),
        tar_of(&[("big", &noise((1 << 20) + 1, 7), 0o644)], &[]),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{error}");
    // No key: 401.
    let (status, _) = upload(&server, None, tar_of(&[("a", b"a", 0o644)], &[])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // The organization keeps 2 MiB: two contexts of 0.75 MiB fit, a third does not.
    let part = tar_of(&[("part", &noise(3 << 18, 7), 0o644)], &[]);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, context) = upload(&server, Some(KEY), part.clone()).await;
        assert_eq!(status, StatusCode::OK, "{context}");
        ids.push(context["contextId"].as_str().unwrap().to_owned());
    }
    let (status, error) = upload(&server, Some(KEY), part.clone()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{error}");
    assert!(error.to_string().contains("build contexts"), "{error}");

    // A build names its files one way; an unknown context is not found.
    let (status, error) = server
        .post(
            "template.build",
            json!({"name": "x", "dockerfile": "FROM base\n", "contextId": ids[0], "files": {}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    let (status, _) = server
        .post(
            "template.build",
            json!({"name": "x", "dockerfile": "FROM base\n", "contextId": "nope"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A COPY of what the context does not hold is a 400 naming the line.
    let (status, error) = server
        .post(
            "template.build",
            json!({"name": "x", "dockerfile": "FROM base\nCOPY other /x\n", "contextId": ids[0]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert!(error.to_string().contains("line 2"), "{error}");

    // Another organization cannot build from it.
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let other_key = other["apiKey"]["secret"].as_str().unwrap().to_owned();
    let (status, refused) = server
        .post_with_key(
            "template.build",
            Some(&other_key),
            json!({"name": "x", "dockerfile": "FROM base\nCOPY part /x\n", "contextId": ids[0]}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");

    // Only the two contexts kept are in the store: every refused upload went (a
    // removal of everything up to the end of time counts them).
    let kept = server
        .service
        .store()
        .remove_expired_template_contexts(i64::MAX)
        .await
        .unwrap();
    assert_eq!(kept, 2);
}
