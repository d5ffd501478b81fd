//! Pause and resume: a paused sandbox keeps its processes and their memory and uses no
//! CPU; any call reaching inside resumes it; `autoPause` pauses at the idle timeout
//! instead of killing; the paused timeout kills; a restart of sandboxd keeps a paused
//! sandbox paused; a paused sandbox holds no CPU quota.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, container, id};

/// A Python process counting in memory, writing its count to `/tmp/n` now and then: a
/// count that went on from where it was proves the same process ran on.
const COUNTER: &str = "python3 -c \"
import os
n = 0
while True:
    n += 1
    if n % 100000 == 0:
        open('/tmp/n.tmp', 'w').write(str(n))
        os.replace('/tmp/n.tmp', '/tmp/n')
\"";

pub(crate) async fn start_counter(server: &TestServer, sandbox: &Value) -> String {
    let (status, process) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(sandbox), "cmd": COUNTER}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{process}");
    process["processId"].as_str().unwrap().to_owned()
}

/// The counter's value, read through the API (which resumes a paused sandbox).
pub(crate) async fn count(server: &TestServer, sandbox: &Value) -> u64 {
    let (status, read) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", id(sandbox)), ("path", "/tmp/n")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{read}");
    read["content"].as_str().unwrap().trim().parse().unwrap()
}

/// Asserts that the sandbox's CPU time stands still for a second.
pub(crate) async fn uses_no_cpu(server: &TestServer, sandbox: &Value) {
    let first = cpu_time_ms(server, sandbox).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second = cpu_time_ms(server, sandbox).await;
    assert!(
        second - first <= 20,
        "{first} → {second} ms of CPU while paused"
    );
}

/// Waits until the counter has counted to at least `at_least`.
pub(crate) async fn counted(server: &TestServer, sandbox: &Value, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, read) = server
            .get(
                "sandbox.readFile",
                &[("sandboxId", id(sandbox)), ("path", "/tmp/n")],
            )
            .await;
        if status == StatusCode::OK {
            let n: u64 = read["content"].as_str().unwrap().trim().parse().unwrap();
            if n >= at_least {
                return n;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the counter did not count: {read}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) async fn one(server: &TestServer, sandbox: &Value) -> Value {
    let (status, row) = server
        .get("sandbox.one", &[("sandboxId", id(sandbox))])
        .await;
    assert_eq!(status, StatusCode::OK, "{row}");
    row
}

pub(crate) async fn cpu_time_ms(server: &TestServer, sandbox: &Value) -> u64 {
    let (status, stats) = server
        .get("sandbox.stats", &[("sandboxId", id(sandbox))])
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    stats["cpuTimeMs"].as_u64().unwrap()
}

/// The engine's state of the sandbox's container.
pub(crate) async fn engine_state(
    server: &TestServer,
    sandbox: &Value,
) -> bollard::models::ContainerState {
    let inspect = server
        .docker()
        .inspect_container(
            container(sandbox),
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
        .unwrap();
    inspect.state.unwrap()
}

async fn engine_paused(server: &TestServer, sandbox: &Value) -> bool {
    engine_state(server, sandbox).await.paused.unwrap()
}

/// Kills the sandbox and waits for its container to go.
pub(crate) async fn kill(server: &TestServer, sandbox: &Value) {
    server
        .post("sandbox.kill", json!({"sandboxId": id(sandbox)}))
        .await;
    server.wait_container_removed(sandbox).await;
}

pub(crate) async fn process_running(server: &TestServer, sandbox: &Value, process: &str) -> bool {
    let (status, list) = server
        .get("sandbox.processList", &[("sandboxId", id(sandbox))])
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list.as_array()
        .unwrap()
        .iter()
        .any(|p| p["processId"] == process && p["status"] == "running")
}

pub(crate) async fn wait_status(
    server: &TestServer,
    sandbox: &Value,
    status: &str,
    within: Duration,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let row = one(server, sandbox).await;
        if row["status"] == status {
            return row;
        }
        assert!(Instant::now() < deadline, "never {status}: {row}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_paused_sandbox_keeps_its_processes_uses_no_cpu_and_any_call_resumes_it() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "timeoutMs": 600_000}))
        .await;
    assert_eq!(sandbox["autoPause"], false);
    assert_eq!(sandbox["pausedTimeoutMs"], 86_400_000);
    assert!(sandbox["pausedAt"].is_null());
    let process = start_counter(&server, &sandbox).await;
    let before = counted(&server, &sandbox, 1_000_000).await;

    let (status, paused) = server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["status"], "paused");
    assert!(paused["pausedAt"].is_string());
    // While paused, expiresAt is the end of the paused timeout.
    let expires = humantime::parse_rfc3339(paused["expiresAt"].as_str().unwrap()).unwrap();
    assert!(expires > std::time::SystemTime::now() + Duration::from_secs(23 * 3600));
    assert!(engine_paused(&server, &sandbox).await);
    let (status, again) = server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(
        (status, &again["status"]),
        (StatusCode::OK, &json!("paused"))
    );

    // No CPU while paused (reading its use does not wake it).
    uses_no_cpu(&server, &sandbox).await;
    assert_eq!(one(&server, &sandbox).await["status"], "paused");

    // A file read reaches inside: it resumes the sandbox, and the counter goes on from
    // where it was, in the same process.
    let after = count(&server, &sandbox).await;
    assert!(after >= before, "{before} → {after}");
    let row = one(&server, &sandbox).await;
    assert_eq!(row["status"], "running");
    assert!(row["pausedAt"].is_null());
    assert!(!engine_paused(&server, &sandbox).await);
    assert!(process_running(&server, &sandbox, &process).await);
    let later = counted(&server, &sandbox, after + 500_000).await;
    assert!(later > after);

    // Paused again and resumed by asking.
    server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    let (status, resumed) = server
        .post("sandbox.resume", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["status"], "running");
    assert!(process_running(&server, &sandbox, &process).await);
    let out = server.exec(&sandbox, "echo still here").await;
    assert_eq!(out["stdout"], "still here\n");

    // Killing a paused sandbox removes its container.
    server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    let (status, killed) = server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(
        (status, &killed["status"]),
        (StatusCode::OK, &json!("killed"))
    );
    server.wait_container_removed(&sandbox).await;
    let (status, body) = server
        .post("sandbox.resume", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "{body}");
}

#[tokio::test]
async fn auto_pause_at_the_idle_timeout_then_an_exec_resumes_it() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "timeoutMs": 10_000, "autoPause": true}))
        .await;
    assert_eq!(sandbox["autoPause"], true);
    let process = start_counter(&server, &sandbox).await;
    let before = counted(&server, &sandbox, 500_000).await;
    // Idle for its timeout: paused, not killed.
    wait_status(&server, &sandbox, "paused", Duration::from_secs(30)).await;
    // The row says paused before the engine has frozen the container (so that a call
    // arriving meanwhile waits for the pause): the engine follows.
    let frozen = tokio::time::Instant::now() + Duration::from_secs(10);
    while !engine_paused(&server, &sandbox).await {
        assert!(
            tokio::time::Instant::now() < frozen,
            "the engine never paused the sandbox"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = server.exec(&sandbox, "cat /tmp/n").await;
    assert_eq!(out["exitCode"], 0, "{out}");
    let after: u64 = out["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert!(after >= before, "{before} → {after}");
    assert_eq!(one(&server, &sandbox).await["status"], "running");
    assert!(process_running(&server, &sandbox, &process).await);
    // The audit log says why.
    let (_, audit) = server
        .get("audit.list", &[("resourceId", id(&sandbox))])
        .await;
    let actions: Vec<(&str, &str)> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or_default(),
                e["metadata"]["reason"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        actions.contains(&("sandbox.pause", "idle timeout")),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("sandbox.resume", "a call reached it")),
        "{actions:?}"
    );
}

#[tokio::test]
async fn a_paused_sandbox_is_killed_at_its_paused_timeout() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "timeoutMs": 600_000, "pausedTimeoutMs": 10_000}))
        .await;
    let (status, _) = server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let killed = wait_status(&server, &sandbox, "killed", Duration::from_secs(30)).await;
    assert!(killed["killedAt"].is_string());
    server.wait_container_removed(&sandbox).await;

    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base", "pausedTimeoutMs": 5}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("pausedTimeoutMs"), "{body}");
}

#[tokio::test]
async fn a_restart_of_sandboxd_keeps_a_paused_sandbox_and_its_processes() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "timeoutMs": 600_000}))
        .await;
    let process = start_counter(&server, &sandbox).await;
    let before = counted(&server, &sandbox, 500_000).await;
    server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    let stopped = server.stop().await;
    let server = TestServer::start_in(stopped).await;
    // Reconcile at start leaves it paused, its container frozen.
    assert_eq!(one(&server, &sandbox).await["status"], "paused");
    assert!(engine_paused(&server, &sandbox).await);
    // Its agent lost its connection while frozen; the call that wakes it finds it back.
    let after = count(&server, &sandbox).await;
    assert!(after >= before, "{before} → {after}");
    assert!(process_running(&server, &sandbox, &process).await);
    server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    server.wait_container_removed(&sandbox).await;
}

#[tokio::test]
async fn a_paused_sandbox_holds_memory_but_no_cpu_quota() {
    let server = TestServer::start_with(|config| {
        config.quotas = sandboxd_core::quotas::Quotas {
            running_sandboxes: 3,
            cpu: 1.0,
            memory_mb: 1024,
            keys_per_user: 3,
            ..Default::default()
        }
    })
    .await;
    let first = server
        .create(json!({"template": "base", "cpu": 1, "memoryMb": 512}))
        .await;
    let create_second = || {
        server.post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base", "cpu": 1, "memoryMb": 512}),
        )
    };
    let (status, body) = create_second().await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    server
        .post("sandbox.pause", json!({"sandboxId": id(&first)}))
        .await;
    let (status, second) = create_second().await;
    assert_eq!(status, StatusCode::OK, "{second}");
    // The paused one still holds its memory: a third of 512 MiB does not fit.
    let (status, body) = create_second().await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    // No CPU left for the paused one to run again: it stays paused.
    let (status, body) = server
        .post("sandbox.resume", json!({"sandboxId": id(&first)}))
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(one(&server, &first).await["status"], "paused");
    assert!(engine_paused(&server, &first).await);
    server
        .post("sandbox.kill", json!({"sandboxId": id(&second)}))
        .await;
    let (status, body) = server
        .post("sandbox.resume", json!({"sandboxId": id(&first)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for sandbox in [&first, &second] {
        server
            .post("sandbox.kill", json!({"sandboxId": id(sandbox)}))
            .await;
        server.wait_container_removed(sandbox).await;
    }
}
