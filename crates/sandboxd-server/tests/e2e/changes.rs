//! `sandbox.changes`: exactly the files an exec wrote, changed and removed since the
//! sandbox's image or snapshot, under its user's areas, with sizes; hostile names come
//! back as they are; another organization sees nothing.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer, id};

async fn run(server: &TestServer, sandbox: &Value, cmd: &str) {
    let out = server.exec(sandbox, cmd).await;
    assert_eq!(out["exitCode"], 0, "{cmd}: {out}");
}

async fn changes(server: &TestServer, sandbox: &Value, all: bool) -> Value {
    let all = if all { "true" } else { "false" };
    let (status, body) = server
        .get(
            "sandbox.changes",
            &[("sandboxId", id(sandbox)), ("all", all)],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn listed(body: &Value) -> Vec<(String, String, String, Option<u64>)> {
    body["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
                c["type"].as_str().unwrap_or("-").to_owned(),
                c["size"].as_u64(),
            )
        })
        .collect()
}

/// `sandbox.download {changes: true}`, unpacked: each entry's name, kind and content
/// (a link's target), sorted.
async fn changes_tar(server: &TestServer, sandbox: &Value) -> Vec<(String, String, String)> {
    let response = server
        .client
        .get(format!("{}/api/sandbox.download", server.url))
        .query(&[("sandboxId", id(sandbox)), ("changes", "true")])
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-sandboxd-format"], "tar");
    let bytes = response.bytes().await.unwrap();
    let mut archive = tar::Archive::new(bytes.as_ref());
    let mut entries = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let kind = entry.header().entry_type();
        let (kind, content) = if kind.is_dir() {
            ("dir", String::new())
        } else if kind.is_symlink() {
            let target = entry.link_name().unwrap().unwrap();
            ("link", target.to_string_lossy().into_owned())
        } else {
            let mut content = String::new();
            std::io::Read::read_to_string(&mut entry, &mut content).unwrap();
            ("file", content)
        };
        entries.push((name, kind.to_owned(), content));
    }
    entries.sort();
    entries
}

#[tokio::test]
async fn changes_list_exactly_what_an_exec_wrote_changed_and_removed() {
    let server = TestServer::start().await;
    // The starting point: a snapshot holding files to change and remove.
    let first = server.create(json!({"template": "base"})).await;
    run(
        &server,
        &first,
        "cd /home/user && echo old > change.txt && echo bye > remove.txt && echo same > keep.txt && mkdir -p gone/deep && echo x > gone/deep/f",
    )
    .await;
    let (status, snapshot) = server
        .post("sandbox.snapshot", json!({"sandboxId": id(&first)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{snapshot}");
    let sandbox = server
        .create(json!({"snapshotId": snapshot["snapshotId"]}))
        .await;
    assert_eq!(
        changes(&server, &sandbox, false).await["changes"],
        json!([])
    );

    run(
        &server,
        &sandbox,
        "cd /home/user && printf 'twelve bytes' > new.txt && mkdir -p src/app && printf 'abc' > src/app/main.py \
         && echo changed-now > change.txt && rm remove.txt && rm -r gone && ln -s keep.txt link \
         && printf 'tab' > \"$(printf 'odd\\tname')\" && echo scratch > /tmp/scratch && echo root-only > /etc/not-mine 2>/dev/null; true",
    )
    .await;
    let body = changes(&server, &sandbox, false).await;
    assert_eq!(
        listed(&body),
        [
            (
                "/home/user/change.txt".into(),
                "changed".into(),
                "file".into(),
                Some(12)
            ),
            ("/home/user/gone".into(), "removed".into(), "-".into(), None),
            (
                "/home/user/link".into(),
                "added".into(),
                "symlink".into(),
                Some(8)
            ),
            (
                "/home/user/new.txt".into(),
                "added".into(),
                "file".into(),
                Some(12)
            ),
            (
                "/home/user/odd\tname".into(),
                "added".into(),
                "file".into(),
                Some(3)
            ),
            (
                "/home/user/remove.txt".into(),
                "removed".into(),
                "-".into(),
                None
            ),
            (
                "/home/user/src".into(),
                "added".into(),
                "directory".into(),
                None
            ),
            (
                "/home/user/src/app".into(),
                "added".into(),
                "directory".into(),
                None
            ),
            (
                "/home/user/src/app/main.py".into(),
                "added".into(),
                "file".into(),
                Some(3)
            ),
            (
                "/tmp/scratch".into(),
                "added".into(),
                "file".into(),
                Some(8)
            ),
        ],
        "{body}"
    );
    assert_eq!(body["areas"], json!(["/home/user", "/tmp", "/var/tmp"]));
    assert_eq!(body["truncated"], false);
    assert_eq!(body["totalBytes"], 12 + 12 + 3 + 3 + 8);

    // The same as one tar: contents, new directories, links, removals as whiteouts.
    let unpacked = changes_tar(&server, &sandbox).await;
    assert_eq!(
        unpacked,
        [
            ("home/user/.wh.gone".into(), "file".into(), String::new()),
            (
                "home/user/.wh.remove.txt".into(),
                "file".into(),
                String::new()
            ),
            (
                "home/user/change.txt".into(),
                "file".into(),
                "changed-now\n".into()
            ),
            ("home/user/link".into(), "link".into(), "keep.txt".into()),
            (
                "home/user/new.txt".into(),
                "file".into(),
                "twelve bytes".into()
            ),
            ("home/user/odd\tname".into(), "file".into(), "tab".into()),
            ("home/user/src".into(), "dir".into(), String::new()),
            ("home/user/src/app".into(), "dir".into(), String::new()),
            (
                "home/user/src/app/main.py".into(),
                "file".into(),
                "abc".into()
            ),
            ("tmp/scratch".into(), "file".into(), "scratch\n".into()),
        ]
    );

    // A file its user may not read is listed but left out of the tar. (A name that
    // reads as a whiteout is left out too; this engine's storage refuses to make one.)
    run(&server, &sandbox, "chmod 000 /home/user/new.txt").await;
    let names: Vec<String> = changes_tar(&server, &sandbox)
        .await
        .into_iter()
        .map(|entry| entry.0)
        .collect();
    assert!(
        !names.contains(&"home/user/new.txt".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"home/user/change.txt".to_owned()),
        "{names:?}"
    );
    assert!(
        listed(&changes(&server, &sandbox, false).await)
            .iter()
            .any(|entry| entry.0 == "/home/user/new.txt"),
        "still listed"
    );

    // Everywhere: the same and more, never sandboxd's own paths.
    let everything = changes(&server, &sandbox, true).await;
    assert_eq!(everything["areas"], json!(["/"]));
    let paths: Vec<String> = listed(&everything).into_iter().map(|c| c.0).collect();
    assert!(
        paths.contains(&"/home/user/new.txt".to_owned()),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.starts_with("/.sandboxd")),
        "{paths:?}"
    );

    // A paused sandbox is resumed to be looked at.
    let (status, _) = server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed(&changes(&server, &sandbox, false).await).len(), 10);

    // Another organization: not found, as a sandbox that never existed.
    let (_, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    let key = other["apiKey"]["secret"].as_str().unwrap();
    let (status, _) = server
        .get_with_key("sandbox.changes", key, &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
