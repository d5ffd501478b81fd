//! The agent is untrusted: code in a sandbox can stop the real agent and answer the
//! server itself (`impostor.py`). Whatever it sends or withholds — an unbounded answer,
//! no reading at all, frames dripped forever — the request fails within its deadline
//! with a clear 503, the server's memory stays bounded, and other sandboxes are served
//! as fast as before.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, id};

const IMPOSTOR: &str = include_str!("impostor.py");
/// The deadline of one agent operation in these tests.
const OP_TIMEOUT: Duration = Duration::from_secs(3);

async fn server() -> TestServer {
    TestServer::start_with(|config| config.agent_op_timeout = OP_TIMEOUT).await
}

/// This process's resident memory, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// The pid the impostor announces in its Hello.
const IMPOSTOR_PID: u32 = 999_999;

/// Starts the impostor in `sandbox` and waits until the server's connection is its.
async fn start_impostor(server: &TestServer, sandbox: &Value, mode: &str) {
    let sandbox_id = id(sandbox);
    let (status, body) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sandbox_id, "path": "/tmp/impostor.py", "content": IMPOSTOR}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let started = server
        .exec(
            sandbox,
            &format!("setsid python3 /tmp/impostor.py {mode} >/tmp/impostor.log 2>&1 </dev/null &"),
        )
        .await;
    assert_eq!(started["exitCode"], 0, "{started}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let current = server.service.agents().connection(sandbox_id);
        if current.is_some_and(|conn| conn.hello.pid == IMPOSTOR_PID) {
            return;
        }
        assert!(Instant::now() < deadline, "the impostor did not take over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Another sandbox's commands run as fast as ever.
async fn still_fast(server: &TestServer, other: &Value) {
    for _ in 0..5 {
        let started = Instant::now();
        let out = server.exec(other, "echo fine").await;
        assert_eq!(out["stdout"], "fine\n", "{out}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}

/// The request failed with 503 within the deadline (and a little slack).
fn failed_in_time(status: StatusCode, body: &Value, started: Instant) {
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["code"], "SERVICE_UNAVAILABLE", "{body}");
    assert!(
        started.elapsed() < OP_TIMEOUT + Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_unbounded_answer_is_cut_off_and_memory_stays_bounded() {
    let server = server().await;
    let victim = server.create(json!({"template": "base"})).await;
    let other = server.create(json!({"template": "base"})).await;
    start_impostor(&server, &victim, "flood").await;
    let before = rss();

    let started = Instant::now();
    let (status, body) = server
        .get(
            "sandbox.processOutput",
            &[
                ("sandboxId", id(&victim)),
                ("processId", "p_anything"),
                ("stream", "stdout"),
                ("offset", "0"),
            ],
        )
        .await;
    failed_in_time(status, &body, started);
    // The flood goes on; the server reads and drops it without keeping it.
    still_fast(&server, &other).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let grown = rss().saturating_sub(before);
    eprintln!(
        "resident memory grew by {} KiB during the flood",
        grown >> 10
    );
    assert!(grown < 64 << 20, "grew by {} MiB", grown >> 20);
}

#[tokio::test]
async fn an_agent_that_never_reads_cannot_hold_a_request() {
    let server = server().await;
    let victim = server.create(json!({"template": "base"})).await;
    let other = server.create(json!({"template": "base"})).await;
    start_impostor(&server, &victim, "deaf").await;

    // More than the socket's buffers hold: the sends themselves must time out.
    let content = "y".repeat(8 << 20);
    let started = Instant::now();
    let (status, body) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(&victim), "path": "/tmp/big", "content": content}),
        )
        .await;
    failed_in_time(status, &body, started);
    still_fast(&server, &other).await;
}

#[tokio::test]
async fn frames_dripped_forever_do_not_extend_the_deadline() {
    let server = server().await;
    let victim = server.create(json!({"template": "base"})).await;
    let other = server.create(json!({"template": "base"})).await;
    start_impostor(&server, &victim, "drip").await;

    let started = Instant::now();
    let (status, body) = server
        .get(
            "sandbox.listFiles",
            &[("sandboxId", id(&victim)), ("path", "/tmp")],
        )
        .await;
    failed_in_time(status, &body, started);
    still_fast(&server, &other).await;
}
