//! Background processes: a handle at once, output kept while nobody listens (even
//! across a restart of sandboxd), stdin, signals, the ring buffer.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, id};

async fn start(server: &TestServer, sandbox: &Value, body: Value) -> Value {
    let mut body = body;
    body["sandboxId"] = json!(id(sandbox));
    let (status, process) = server.post("sandbox.processStart", body).await;
    assert_eq!(status, StatusCode::OK, "{process}");
    process
}

async fn wait(server: &TestServer, sandbox: &Value, process: &Value, timeout_ms: u64) -> Value {
    let (status, view) = server
        .post(
            "sandbox.processWait",
            json!({"sandboxId": id(sandbox), "processId": process["processId"], "timeoutMs": timeout_ms}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    view
}

async fn output(
    server: &TestServer,
    sandbox: &Value,
    process: &Value,
    stream: &str,
    offset: u64,
) -> Value {
    let offset = offset.to_string();
    let (status, out) = server
        .get(
            "sandbox.processOutput",
            &[
                ("sandboxId", id(sandbox)),
                ("processId", process["processId"].as_str().unwrap()),
                ("stream", stream),
                ("offset", &offset),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    out
}

#[tokio::test]
async fn a_process_outlives_its_client_and_sandboxd() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let started = std::time::Instant::now();
    let process = start(
        &server,
        &sandbox,
        json!({"cmd": "echo begin; sleep 2; echo done; echo oops >&2"}),
    )
    .await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "the handle comes at once"
    );
    assert_eq!(process["status"], "running");
    assert_eq!(
        process["cmd"],
        "echo begin; sleep 2; echo done; echo oops >&2"
    );
    // Nobody is connected while it runs; sandboxd itself restarts.
    let data = server.stop().await;
    let server = TestServer::start_in(data).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.service.agents().hello(id(&sandbox)).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "agent did not reconnect"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let ended = wait(&server, &sandbox, &process, 10_000).await;
    assert_eq!(ended["status"], "exited");
    assert_eq!(ended["exitCode"], 0);
    assert!(ended["endedAt"].is_string());
    let out = output(&server, &sandbox, &process, "stdout", 0).await;
    assert_eq!(out["data"], "begin\ndone\n");
    assert_eq!(
        (out["start"].as_u64(), out["end"].as_u64()),
        (Some(0), Some(11))
    );
    assert_eq!(out["exited"], true);
    // Reading on from the end gives nothing more.
    let more = output(&server, &sandbox, &process, "stdout", 11).await;
    assert_eq!(
        (more["data"].as_str(), more["start"].as_u64()),
        (Some(""), Some(11))
    );
    assert_eq!(
        output(&server, &sandbox, &process, "stderr", 0).await["data"],
        "oops\n"
    );
    let (_, list) = server
        .get("sandbox.processList", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(list[0]["processId"], process["processId"]);
}

#[tokio::test]
async fn stdin_signals_and_the_ring_buffer() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let sid = id(&sandbox);

    let cat = start(
        &server,
        &sandbox,
        json!({"cmd": "tr a-z A-Z", "stdin": true}),
    )
    .await;
    assert_eq!(cat["stdinOpen"], true);
    let (status, written) = server
        .post(
            "sandbox.processWrite",
            json!({"sandboxId": sid, "processId": cat["processId"], "data": "hello "}),
        )
        .await;
    assert_eq!(
        (status, written["written"].as_u64()),
        (StatusCode::OK, Some(6))
    );
    let (status, _) = server
        .post("sandbox.processWrite", json!({"sandboxId": sid, "processId": cat["processId"], "data": "d29ybGQ=", "encoding": "base64", "close": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let ended = wait(&server, &sandbox, &cat, 10_000).await;
    assert_eq!(ended["exitCode"], 0);
    assert_eq!(
        output(&server, &sandbox, &cat, "stdout", 0).await["data"],
        "HELLO WORLD"
    );
    let (status, _) = server
        .post(
            "sandbox.processWrite",
            json!({"sandboxId": sid, "processId": cat["processId"], "data": "late"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "stdin is closed");

    let sleeper = start(&server, &sandbox, json!({"cmd": "sleep 300"})).await;
    let still = wait(&server, &sandbox, &sleeper, 200).await;
    assert_eq!(
        still["status"], "running",
        "a wait that times out leaves it running"
    );
    let (status, _) = server
        .post(
            "sandbox.processSignal",
            json!({"sandboxId": sid, "processId": sleeper["processId"], "signal": "TERM"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let ended = wait(&server, &sandbox, &sleeper, 10_000).await;
    assert_eq!(ended["exitCode"], 143);

    // 3 MiB of output: the last MiB is kept, and a read from 0 says where it starts.
    let flood = start(
        &server,
        &sandbox,
        json!({"cmd": "head -c 3145728 /dev/zero | tr '\\0' x; printf END"}),
    )
    .await;
    wait(&server, &sandbox, &flood, 20_000).await;
    let out = output(&server, &sandbox, &flood, "stdout", 0).await;
    let total = 3 * 1024 * 1024 + 3;
    assert_eq!(out["end"].as_u64(), Some(total));
    assert_eq!(out["start"].as_u64(), Some(total - 1024 * 1024));
    assert!(out["data"].as_str().unwrap().ends_with("xEND"));

    let (status, _) = server
        .post(
            "sandbox.processSignal",
            json!({"sandboxId": sid, "processId": "p_nope", "signal": "TERM"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post(
            "sandbox.processSignal",
            json!({"sandboxId": sid, "processId": sleeper["processId"], "signal": "STOP"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn processes_need_the_agent() {
    let server = TestServer::start_without_agent().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let (status, body) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox), "cmd": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
}
