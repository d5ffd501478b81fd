//! E2B's in-sandbox daemon under `/e2b/envd`, spoken on the wire as E2B's SDKs speak
//! it (Connect RPC with the JSON codec, plain `/files`): a command streamed as
//! envelopes that always end with the end-of-stream message (`unavailable` when the
//! sandbox is killed under them); the access token of one
//! sandbox opens that sandbox only, and only for its key's organization; malformed
//! requests get Connect's codes, never a 500; a killed sandbox's health says so.
//! (E2B's own SDK drives the rest: scripts/test-e2b-python.sh.)

use reqwest::{RequestBuilder, StatusCode};
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer};

/// A sandbox made through E2B's control plane: its id and access token.
pub(crate) async fn e2b_sandbox(server: &TestServer, key: &str) -> (String, String) {
    e2b_sandbox_of(
        server,
        key,
        json!({"templateID": "base", "timeout": 120, "allow_internet_access": false}),
    )
    .await
}

/// A sandbox made through E2B's control plane with `body`: its id and access token.
pub(crate) async fn e2b_sandbox_of(
    server: &TestServer,
    key: &str,
    body: Value,
) -> (String, String) {
    let made: Value = server
        .client
        .post(format!("{}/e2b/v2/sandboxes", server.url))
        .header("X-API-Key", key)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = made["sandboxID"].as_str().expect("made").to_owned();
    let token = made["envdAccessToken"]
        .as_str()
        .expect("a token")
        .to_owned();
    (id, token)
}

pub(crate) fn envd(server: &TestServer, path: &str, id: &str, token: &str) -> RequestBuilder {
    server
        .client
        .post(format!("{}/e2b/envd{path}", server.url))
        .header("E2b-Sandbox-Id", id)
        .header("E2b-Sandbox-Port", "49983")
        .header("X-Access-Token", token)
}

/// A stream's envelopes: (flag, JSON).
pub(crate) fn envelopes(mut bytes: &[u8]) -> Vec<(u8, Value)> {
    let mut out = Vec::new();
    while bytes.len() >= 5 {
        let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        let message = serde_json::from_slice(&bytes[5..5 + len]).expect("a JSON message");
        out.push((bytes[0], message));
        bytes = &bytes[5 + len..];
    }
    assert!(bytes.is_empty(), "a cut envelope");
    out
}

/// `process.Process/Start` with `body`, a stream's envelopes.
pub(crate) async fn start_process(
    server: &TestServer,
    id: &str,
    token: &str,
    body: Vec<u8>,
) -> reqwest::Response {
    envd(server, "/process.Process/Start", id, token)
        .header("content-type", "application/connect+json")
        .body(body)
        .send()
        .await
        .unwrap()
}

pub(crate) fn envelope(message: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(message).unwrap();
    [&[0u8][..], &(body.len() as u32).to_be_bytes(), &body].concat()
}

#[tokio::test]
async fn a_command_streams_as_connect_envelopes_and_ends_with_the_stream() {
    let server = TestServer::start().await;
    let (id, token) = e2b_sandbox(&server, KEY).await;
    let start = json!({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo out; echo err >&2; exit 3"],
                                   "envs": {"X": "1"}}, "stdin": false});
    let response = start_process(&server, &id, &token, envelope(&start)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "application/connect+json",
        "exactly, as the SDK compares it"
    );
    let frames = envelopes(&response.bytes().await.unwrap());
    let (last_flag, last) = frames.last().unwrap().clone();
    assert_eq!(
        (last_flag, last),
        (2, json!({})),
        "ended cleanly: {frames:?}"
    );
    let pid = frames[0].1["event"]["start"]["pid"]
        .as_u64()
        .expect("start first");
    assert!(pid > 1, "the sandbox's own pid: {pid}");
    let decoded = |stream: &str| -> String {
        frames
            .iter()
            .filter_map(|(_, m)| m["event"]["data"][stream].as_str())
            .map(|b64| {
                String::from_utf8(base64_simd::STANDARD.decode_to_vec(b64).unwrap()).unwrap()
            })
            .collect()
    };
    assert_eq!(decoded("stdout"), "out\n");
    assert_eq!(decoded("stderr"), "err\n");
    let end = &frames[frames.len() - 2].1["event"]["end"];
    assert_eq!(end["exitCode"], 3, "{frames:?}");
    assert_eq!(end["status"], "exit status 3");

    // A request that is not one envelope ends the stream with invalid_argument.
    let response = start_process(&server, &id, &token, vec![0u8, 0, 0, 0]).await;
    assert_eq!(response.status(), StatusCode::OK);
    let frames = envelopes(&response.bytes().await.unwrap());
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].0, 2);
    assert_eq!(
        frames[0].1["error"]["code"], "invalid_argument",
        "{frames:?}"
    );

    // A pid nothing runs under: not_found, as the SDK's kill() reads it.
    let response = envd(&server, "/process.Process/SendSignal", &id, &token)
        .json(&json!({"process": {"pid": 999_999}, "signal": "SIGNAL_SIGKILL"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "not_found", "{body}");
}

/// A sandbox killed under a followed command ends the stream with `unavailable`
/// naming the sandbox (E2B's SDK reads it as the sandbox's end), and its health says
/// it is gone.
#[tokio::test]
async fn a_stream_ends_unavailable_when_its_sandbox_is_killed() {
    let server = TestServer::start().await;
    let (id, token) = e2b_sandbox(&server, KEY).await;
    let start = json!({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "sleep 60"]}});
    let mut response = start_process(&server, &id, &token, envelope(&start)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response
        .chunk()
        .await
        .unwrap()
        .expect("the start event")
        .to_vec();
    assert!(String::from_utf8_lossy(&body).contains("start"), "{body:?}");
    let killed = server
        .client
        .delete(format!("{}/e2b/sandboxes/{id}", server.url))
        .header("X-API-Key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(killed.status(), StatusCode::NO_CONTENT);
    let rest = tokio::time::timeout(std::time::Duration::from_secs(20), response.bytes())
        .await
        .expect("the stream ends with its sandbox")
        .unwrap();
    body.extend_from_slice(&rest);
    let frames = envelopes(&body);
    let (flag, last) = frames.last().unwrap();
    assert_eq!(*flag, 2, "{frames:?}");
    assert_eq!(last["error"]["code"], "unavailable", "{last}");
    assert!(
        last["error"]["message"].as_str().unwrap().contains(&id),
        "{last}"
    );
    let health = server
        .client
        .get(format!("{}/e2b/envd/health", server.url))
        .header("E2b-Sandbox-Id", &id)
        .header("E2b-Sandbox-Port", "49983")
        .header("X-Access-Token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::BAD_GATEWAY, "gone");
}

#[tokio::test]
async fn an_access_token_opens_its_own_sandbox_for_its_own_organization_only() {
    let server = TestServer::start().await;
    let (first, first_token) = e2b_sandbox(&server, KEY).await;
    let (second, _) = e2b_sandbox(&server, KEY).await;
    let stat = |id: &str, token: &str| {
        envd(&server, "/filesystem.Filesystem/Stat", id, token).json(&json!({"path": "/home/user"}))
    };
    let ok = stat(&first, &first_token).send().await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let entry: Value = ok.json().await.unwrap();
    assert_eq!(entry["entry"]["type"], "FILE_TYPE_DIRECTORY", "{entry}");
    assert_eq!(entry["entry"]["owner"], "user");
    // The first sandbox's token names the first sandbox only.
    for (id, token) in [
        (second.as_str(), first_token.as_str()),
        (first.as_str(), "not-a-token"),
        (first.as_str(), ""),
    ] {
        let refused = stat(id, token).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "{id} {token}");
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["code"], "unauthenticated", "{body}");
    }
    // Another organization's key does not reach it either.
    let (_, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    let other_key = other["apiKey"]["secret"].as_str().unwrap();
    let refused = server
        .client
        .post(format!(
            "{}/e2b/envd/filesystem.Filesystem/Stat",
            server.url
        ))
        .header("E2b-Sandbox-Id", &first)
        .header("X-API-Key", other_key)
        .json(&json!({"path": "/"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    // A key that is revoked takes its tokens with it.
    let (status, made) = server
        .post("apiKey.create", json!({"name": "short-lived"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let short = made["secret"].as_str().unwrap();
    let (third, third_token) = e2b_sandbox(&server, short).await;
    assert_eq!(
        stat(&third, &third_token).send().await.unwrap().status(),
        StatusCode::OK
    );
    let (status, revoked) = server
        .post("apiKey.revoke", json!({"keyId": made["keyId"]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert_eq!(
        stat(&third, &third_token).send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    // No user but the sandbox's.
    let root = stat(&first, &first_token)
        .header("authorization", "Basic cm9vdDo=")
        .send()
        .await
        .unwrap();
    assert_eq!(root.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn files_go_in_and_out_and_health_follows_the_sandbox() {
    let server = TestServer::start().await;
    let (id, token) = e2b_sandbox(&server, KEY).await;
    let files = |method: reqwest::Method, query: &str| {
        server
            .client
            .request(method, format!("{}/e2b/envd/files?{query}", server.url))
            .header("E2b-Sandbox-Id", &id)
            .header("X-Access-Token", &token)
    };
    // Raw and gzip-encoded bodies, of no announced length.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, b"zipped").unwrap();
    let zipped = gz.finish().unwrap();
    let written: Value = files(reqwest::Method::POST, "path=notes/a.txt")
        .header("content-type", "application/octet-stream")
        .header("x-metadata-author", "me")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter([
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"plain")),
        ])))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        written,
        json!([{"path": "/home/user/notes/a.txt", "name": "a.txt", "type": "file", "metadata": {"author": "me"}}])
    );
    let response = files(reqwest::Method::POST, "path=/tmp/z.txt")
        .header("content-encoding", "gzip")
        .body(zipped)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    for (path, content) in [("notes/a.txt", "plain"), ("/tmp/z.txt", "zipped")] {
        let read = files(reqwest::Method::GET, &format!("path={path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), StatusCode::OK);
        assert_eq!(read.text().await.unwrap(), content);
    }
    let missing = files(reqwest::Method::GET, "path=/nope")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(
        body,
        json!({"code": 404, "message": "path '/nope' does not exist"})
    );
    let directory = files(reqwest::Method::GET, "path=/home")
        .send()
        .await
        .unwrap();
    assert_eq!(directory.status(), StatusCode::BAD_REQUEST);
    // A gzip body that is not gzip is refused, not written.
    let bad = files(reqwest::Method::POST, "path=bad.txt")
        .header("content-encoding", "gzip")
        .body("not gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);

    let health = |id: &str| {
        server
            .client
            .get(format!("{}/e2b/envd/health", server.url))
            .header("E2b-Sandbox-Id", id.to_owned())
            .header("X-Access-Token", &token)
    };
    assert_eq!(
        health(&id).send().await.unwrap().status(),
        StatusCode::NO_CONTENT
    );
    let (status, _) = server.post("sandbox.kill", json!({"sandboxId": id})).await;
    assert_eq!(status, StatusCode::OK);
    let gone = health(&id).send().await.unwrap();
    assert_eq!(gone.status(), StatusCode::BAD_GATEWAY);
    assert!(gone.text().await.unwrap().contains("was not found"));
}

#[tokio::test]
async fn the_code_interpreter_answers_e2bs_lines_to_its_callers_only() {
    let server = TestServer::start().await;
    let (id, token) = e2b_sandbox(&server, KEY).await;
    let execute = |port: &str, token: &str| {
        server
            .client
            .post(format!("{}/e2b/envd/execute", server.url))
            .header("E2b-Sandbox-Id", &id)
            .header("E2b-Sandbox-Port", port)
            .header("E2B-Traffic-Access-Token", token)
    };
    let ran = execute("49999", &token)
        .json(&json!({"code": "print('out'); 6 * 7", "env_vars": {"A": "b"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(ran.status(), StatusCode::OK);
    let lines: Vec<Value> = ran
        .text()
        .await
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<_> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "stdout",
            "result",
            "number_of_executions",
            "end_of_execution"
        ]
    );
    assert_eq!(lines[1]["text"], "42");
    // Output comes as it is printed: the first line is read while the run waits for
    // a file that the test writes only then.
    let waiting = "import os, time\nprint('first')\nfor _ in range(400):\n    \
                   if os.path.exists('/tmp/go'): break\n    time.sleep(0.05)\nprint('second')";
    let mut streamed = execute("49999", &token)
        .json(&json!({"code": waiting}))
        .send()
        .await
        .unwrap();
    let mut read = String::new();
    let first_line = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while !read.contains('\n') {
            let chunk = streamed.chunk().await.unwrap().expect("more of the answer");
            read.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    })
    .await;
    assert!(
        first_line.is_ok(),
        "the first line came only with the end: {read:?}"
    );
    let first: Value = serde_json::from_str(read.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&first["type"], &first["text"]),
        (&json!("stdout"), &json!("first\n"))
    );
    let (status, _) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id, "path": "/tmp/go", "content": ""}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    while let Some(chunk) = streamed.chunk().await.unwrap() {
        read.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let kinds: Vec<String> = read
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "stdout",
            "stdout",
            "number_of_executions",
            "end_of_execution"
        ],
        "{read}"
    );
    // Another port's path, a made-up token, a bad body, a language not served.
    let wrong_port = execute("49983", &token)
        .json(&json!({"code": "1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_port.status(), StatusCode::NOT_IMPLEMENTED);
    let forged = execute("49999", "key.forged")
        .json(&json!({"code": "1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    for body in [
        json!({"code": 1}),
        json!({"code": "1", "language": "r"}),
        json!({"code": "1", "context_id": "c_x", "language": "python"}),
        json!({"code": "1", "env_vars": {"A=B": "c"}}),
    ] {
        let refused = execute("49999", &token).json(&body).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{body}");
        let answer: Value = refused.json().await.unwrap();
        assert_eq!(answer["code"], 400, "{answer}");
    }
    let missing = execute("49999", &token)
        .json(&json!({"code": "1", "context_id": "c_missing"}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}
