//! Files: write, read, list, limits and errors, odd names, ownership.

use reqwest::StatusCode;
use serde_json::json;

use crate::harness::{BUSYBOX, TestServer, id};

#[tokio::test]
async fn write_read_and_list_with_metadata() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let sid = id(&sandbox);
    let names = ["main.py", "a b.txt", "tab\there", "ünïcødé.md"];
    for name in names {
        let path = format!("/home/user/app/{name}");
        let (status, out) = server
            .post(
                "sandbox.writeFile",
                json!({"sandboxId": sid, "path": path, "content": format!("content of {name}")}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{out}");
        assert_eq!(out["path"], path);
        let (status, read) = server
            .get("sandbox.readFile", &[("sandboxId", sid), ("path", &path)])
            .await;
        assert_eq!(status, StatusCode::OK, "{read}");
        assert_eq!(read["content"], format!("content of {name}"));
        assert_eq!(read["encoding"], "utf8");
    }
    server.exec(&sandbox, "mkdir /home/user/app/sub").await;
    let (status, listing) = server
        .get(
            "sandbox.listFiles",
            &[("sandboxId", sid), ("path", "/home/user/app")],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let entries = listing["entries"].as_array().unwrap();
    let listed: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        ["sub", "a b.txt", "main.py", "tab\there", "ünïcødé.md"]
    );
    assert_eq!(entries[0]["type"], "directory");
    assert_eq!(entries[2]["type"], "file");
    assert_eq!(entries[2]["size"], "content of main.py".len());
    assert_eq!(entries[2]["mode"], "644");
    assert!(entries[2]["modifiedAt"].as_str().unwrap().ends_with('Z'));

    // Files and created parents belong to the sandbox user.
    let owners = server
        .exec(
            &sandbox,
            "stat -c '%u:%g %a' /home/user/app /home/user/app/main.py",
        )
        .await;
    assert_eq!(owners["stdout"], "1000:1000 755\n1000:1000 644\n");

    // Default listing is the workdir.
    let (_, home) = server.get("sandbox.listFiles", &[("sandboxId", sid)]).await;
    assert_eq!(home["path"], "/home/user");
    assert!(
        home["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "app")
    );
}

#[tokio::test]
async fn binary_content_and_modes_round_trip() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let sid = id(&sandbox);
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let (status, out) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sid, "path": "/tmp/bin/data.bin", "encoding": "base64", "content": base64_simd::STANDARD.encode_to_string(&bytes), "mode": 0o750}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["size"], 70_000);
    let (status, read) = server
        .get(
            "sandbox.readFile",
            &[
                ("sandboxId", sid),
                ("path", "/tmp/bin/data.bin"),
                ("encoding", "base64"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        base64_simd::STANDARD
            .decode_to_vec(read["content"].as_str().unwrap())
            .unwrap(),
        bytes
    );
    let mode = server
        .exec(
            &sandbox,
            "stat -c %a /tmp/bin/data.bin; sha256sum /tmp/bin/data.bin | cut -c1-8",
        )
        .await;
    assert!(mode["stdout"].as_str().unwrap().starts_with("750\n"));
}

#[tokio::test]
async fn file_limits_and_errors() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let sid = id(&sandbox);
    let limit = 10 * 1024 * 1024;
    let (status, body) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sid, "path": "/tmp/big", "content": "a".repeat(limit + 1)}),
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let (status, _) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sid, "path": "/tmp/max", "content": "a".repeat(limit)}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, read) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", sid), ("path", "/tmp/max")],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["size"], limit);
    server
        .exec(&sandbox, "head -c 10485761 /dev/zero > /tmp/over")
        .await;
    let (status, body) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", sid), ("path", "/tmp/over")],
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let (status, _) = server
        .get("sandbox.readFile", &[("sandboxId", sid), ("path", "/tmp")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", sid), ("path", "/tmp/missing")],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", sid), ("path", "relative")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = server
        .get(
            "sandbox.listFiles",
            &[("sandboxId", sid), ("path", "/nope")],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A directory cannot be created where a file is.
    let (status, body) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sid, "path": "/tmp/max/inside", "content": "x"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // The sandbox user cannot write where it has no permission.
    let (status, body) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sid, "path": "/etc/newdir/x", "content": "x"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn busybox_listing_without_agent_falls_back_to_names() {
    let server = TestServer::start_without_agent().await;
    let sandbox = server.create(json!({"image": BUSYBOX})).await;
    let sid = id(&sandbox);
    for name in ["b.txt", "with space"] {
        let (status, _) = server
            .post(
                "sandbox.writeFile",
                json!({"sandboxId": sid, "path": format!("/data/{name}"), "content": "x"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    server.exec(&sandbox, "mkdir /data/dir").await;
    let (status, listing) = server
        .get(
            "sandbox.listFiles",
            &[("sandboxId", sid), ("path", "/data")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{listing}");
    assert_eq!(
        listing["entries"],
        json!([
            {"name": "dir", "type": "directory", "size": null, "mode": null, "modifiedAt": null},
            {"name": "b.txt", "type": "file", "size": null, "mode": null, "modifiedAt": null},
            {"name": "with space", "type": "file", "size": null, "mode": null, "modifiedAt": null}
        ])
    );
}
