//! The agent is untrusted. Code in a sandbox can kill the agent's worker and connect to
//! its socket, but cannot pose as the agent: it never sees the sandbox's agent key
//! (`pose`). And should the agent itself be compromised (`impostor.py` given the key
//! read on the host), whatever it sends or withholds — an unbounded answer, no reading
//! at all, frames dripped forever, a port's bytes past their credit — the request
//! fails within its deadline with a clear 503 (a 502 for a port), the server's memory stays bounded, and other sandboxes are served as fast as
//! before.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use crate::harness::{TestServer, id};

const IMPOSTOR: &str = include_str!("impostor.py");
/// The deadline of one agent operation in these tests.
const OP_TIMEOUT: Duration = Duration::from_secs(3);

async fn server() -> TestServer {
    TestServer::start_with(|config| config.agent_op_timeout_secs = OP_TIMEOUT.as_secs()).await
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

/// The sandbox's agent key, as sandboxd keeps it on the host.
pub(crate) fn agent_key(server: &TestServer, sandbox_id: &str) -> String {
    let path = server
        .data_dir()
        .join("agents")
        .join(format!("{sandbox_id}.key"));
    std::fs::read_to_string(path).unwrap()
}

pub(crate) async fn put_impostor(server: &TestServer, sandbox: &Value) {
    let (status, body) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(sandbox), "path": "/tmp/impostor.py", "content": IMPOSTOR}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// Starts the impostor, holding the agent key, in `sandbox` and waits until the server's
/// connection is its.
async fn start_impostor(server: &TestServer, sandbox: &Value, mode: &str) {
    let sandbox_id = id(sandbox);
    put_impostor(server, sandbox).await;
    let key = agent_key(server, sandbox_id);
    let started = server
        .exec(
            sandbox,
            &format!(
                "setsid python3 /tmp/impostor.py {mode} {key} >/tmp/impostor.log 2>&1 </dev/null &"
            ),
        )
        .await;
    assert_eq!(started["exitCode"], 0, "{started}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let current = server.service.agents().hello(sandbox_id);
        if current.is_some_and(|hello| hello.pid == IMPOSTOR_PID) {
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

#[tokio::test]
async fn a_download_sent_past_its_credit_is_cut_off() {
    let server = server().await;
    let victim = server.create(json!({"template": "base"})).await;
    let other = server.create(json!({"template": "base"})).await;
    start_impostor(&server, &victim, "greedy").await;
    let before = rss();

    let started = Instant::now();
    let response = server
        .client
        .get(format!("{}/api/sandbox.download", server.url))
        .header("x-api-key", crate::harness::KEY)
        .query(&[("sandboxId", id(&victim)), ("path", "/tmp/anything")])
        .send()
        .await
        .unwrap();
    // The agent's word on the size is all there is before the bytes; the bytes past
    // the credit it was given end the download as they arrive, with the client not
    // reading yet (a consumer stalled for 3 s would be cut later, and for another reason).
    assert_eq!(response.status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut response = response;
    let mut received = 0usize;
    let ended = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => received += chunk.len(),
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        }
    };
    eprintln!(
        "{received} bytes reached the client before the cut, {:?} after the request",
        started.elapsed()
    );
    assert!(
        ended.is_err(),
        "a cut download is not taken for a whole one"
    );
    // What the server's buffers and the socket's took while the client did not read
    // (7 MiB here), far from the gigabyte the agent claimed.
    assert!(received < 16 << 20, "{received} bytes reached the client");
    // Cut as the bytes past the credit arrived, not 3 s later as a stalled consumer.
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    still_fast(&server, &other).await;
    let grown = rss().saturating_sub(before);
    assert!(grown < 64 << 20, "grew by {} MiB", grown >> 20);
}

#[tokio::test]
async fn a_port_that_sends_past_its_credit_is_cut_off() {
    let server = server().await;
    // The impostor floods the first connection asked of it and answers nothing else:
    // one sandbox for the connection itself, one for a preview.
    let victim = server.create(json!({"template": "base"})).await;
    let previewed = server.create(json!({"template": "base"})).await;
    let other = server.create(json!({"template": "base"})).await;
    start_impostor(&server, &victim, "portflood").await;
    start_impostor(&server, &previewed, "portflood").await;
    let before = rss();

    // Not read for a second: what reaches the caller is within the credit granted (and
    // the stream's buffer), then the connection ends.
    let owner = server
        .service
        .store()
        .authenticate(crate::harness::KEY)
        .await
        .unwrap()
        .unwrap();
    let mut stream = server
        .service
        .ports()
        .connect(&owner, id(&victim), 8000)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut received = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => break,
            Ok(Ok(n)) => received += n,
            Err(_) => panic!("the connection was not cut after {received} bytes"),
        }
    }
    assert!(
        received <= 128 * 1024,
        "{received} bytes reached the caller"
    );

    // Through a preview: no HTTP answer came, in time.
    let started = Instant::now();
    let response = server
        .client
        .get(format!(
            "{}{}",
            server.url,
            sandboxd_core::ports::preview_path(id(&previewed), 8000)
        ))
        .header("x-api-key", crate::harness::KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    still_fast(&server, &other).await;
    let grown = rss().saturating_sub(before);
    assert!(grown < 64 << 20, "grew by {} MiB", grown >> 20);
}

#[tokio::test]
async fn an_upload_never_granted_credit_fails_in_time() {
    let server = server().await;
    let victim = server.create(json!({"template": "base"})).await;
    let other = server.create(json!({"template": "base"})).await;
    start_impostor(&server, &victim, "stingy").await;

    let started = Instant::now();
    let response = server
        .client
        .post(format!("{}/api/sandbox.upload", server.url))
        .header("x-api-key", crate::harness::KEY)
        .query(&[("sandboxId", id(&victim)), ("path", "/tmp/big")])
        .body(vec![b'z'; 8 << 20])
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    failed_in_time(status, &body, started);
    still_fast(&server, &other).await;
}

/// Runs the impostor's `pose` in the sandbox, with `key` (none when empty): `tries`
/// tries to connect as its agent, each given 5 s to be refused (a refusal is seen as it
/// comes); what it printed, "refused N of TRIES".
pub(crate) async fn pose(server: &TestServer, sandbox: &Value, key: &str, tries: u32) -> String {
    put_impostor(server, sandbox).await;
    // In the background: it kills the worker that runs the command starting it.
    let started = server
        .exec(
            sandbox,
            &format!("rm -f /tmp/pose.log; setsid python3 /tmp/impostor.py pose '{key}' 5 {tries} >/tmp/pose.log 2>&1 </dev/null &"),
        )
        .await;
    assert_eq!(started["exitCode"], 0, "{started}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = server
            .get(
                "sandbox.readFile",
                &[("sandboxId", id(sandbox)), ("path", "/tmp/pose.log")],
            )
            .await;
        if status == StatusCode::OK
            && let Some(content) = body["content"].as_str()
            && content.ends_with('\n')
        {
            return content.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the impostor did not finish: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn code_in_a_sandbox_cannot_pose_as_its_agent() {
    let server = server().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let sandbox_id = id(&sandbox);
    let posed = pose(&server, &sandbox, "", 20).await;
    assert_eq!(posed, "refused 20 of 20\n");
    // The real agent comes back and serves the sandbox.
    let hello = server
        .service
        .agents()
        .wait_connected(sandbox_id, Duration::from_secs(10))
        .await
        .expect("the agent reconnects");
    assert_ne!(hello.pid, IMPOSTOR_PID);
    assert!(
        hello.key.is_empty(),
        "the key is not kept past the handshake"
    );
    let out = server.exec(&sandbox, "echo served").await;
    assert_eq!(out["stdout"], "served\n", "{out}");
}

/// Where the key could leak inside the sandbox, for its code to read (the engine's exec
/// sets the variable, empty); `{A}{B}` are the key's halves, so that no command line of
/// the search holds it whole. Prints: variables named for it; what the socket directory
/// holds (the key file is gone once the agent connected); the processes' environments
/// and command lines that hold the key (gVisor serves the agent's to the same user,
/// runc does not); the agent's executable; which of the descriptors between the agent's
/// supervisor (PID 1) and its worker (`{W}`), through which the key and the leases go,
/// open through `/proc` (gVisor lists the agent's descriptors, runc does not; neither
/// opens a socket, and they are sockets).
const LOOK_FOR_THE_KEY: &str = "\
    env | grep -c SANDBOXD_AGENT_KEY=.; \
    ls -A /.sandboxd/run; \
    printf '%s%s' {A} {B} > /tmp/k; \
    grep -lsF -f /tmp/k /proc/[0-9]*/environ /proc/[0-9]*/cmdline | wc -l; \
    rm -f /tmp/k; \
    readlink /proc/[0-9]*/exe 2>/dev/null | grep -c sandboxd-agent; \
    for f in $(ls -d /proc/1/fd/* | grep -v '/fd/[012]$') /proc/{W}/fd/0 /proc/{W}/fd/1; do (: <$f) 2>/dev/null && echo $f; (: >>$f) 2>/dev/null && echo $f; done | wc -l; \
    true";

/// What [`LOOK_FOR_THE_KEY`] prints when nothing leaks.
const NOTHING_LEAKS: &str = "0\nagent.sock\n0\n0\n0\n";

#[tokio::test]
async fn the_agent_key_is_out_of_reach_of_the_sandboxs_code() {
    let server = server().await;
    // The template's user (1000), an image's default user (root, without capabilities),
    // and under gVisor, whose /proc serves the agent's environment to its user.
    for spec in [
        json!({"template": "base"}),
        json!({"image": crate::harness::DEBIAN}),
        json!({"template": "base", "isolation": "gvisor"}),
    ] {
        let sandbox = server.create(spec).await;
        let key = agent_key(&server, id(&sandbox));
        assert_eq!(key.len(), 64);
        let worker = server
            .service
            .agents()
            .hello(id(&sandbox))
            .expect("the agent is connected")
            .pid;
        let look = LOOK_FOR_THE_KEY
            .replace("{A}", &key[..32])
            .replace("{B}", &key[32..])
            .replace("{W}", &worker.to_string());
        let out = server.exec(&sandbox, &look).await;
        assert_eq!(out["stdout"], NOTHING_LEAKS, "{sandbox} {out}");
        assert!(!out.to_string().contains(&key));
        // The container's configuration holds no key either.
        let info = server
            .docker()
            .inspect_container(crate::harness::container(&sandbox), None)
            .await
            .unwrap();
        let env = info.config.unwrap().env.unwrap_or_default();
        assert!(
            !env.iter().any(|e| e.contains(&key)),
            "in the container's configuration: {env:?}"
        );
        // Nor through the engine's exec (the path taken while the agent is away).
        let spec = sandboxd_docker::ExecSpec {
            argv: vec!["sh".into(), "-c".into(), look],
            cwd: None,
            env: Vec::new(),
            user: None,
            timeout: Duration::from_secs(10),
            max_output: 1 << 20,
            stream: None,
        };
        let engine = server
            .service
            .engine()
            .exec(crate::harness::container(&sandbox), spec)
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&engine.stdout),
            NOTHING_LEAKS,
            "{}",
            String::from_utf8_lossy(&engine.stderr)
        );
    }
}
