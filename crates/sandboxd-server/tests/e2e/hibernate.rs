//! Hibernation: `sandbox.pause {memory: "disk"}` saves a gVisor sandbox's processes with
//! their memory to the host's disk and stops its container; a resume (asked, or any call
//! reaching inside) restores the same processes, which go on counting from where they
//! were. The sandbox stays paused on disk across a restart of sandboxd and of the engine. A sandbox paused
//! in memory moves to disk when asked, and by itself once paused longer than `[pause]
//! to_disk_after_secs`; a sandbox of the container tier is refused with 400 naming its
//! tier.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::engine_restart::PrivateEngine;
use crate::harness::{TestServer, id};
use crate::pause::{counted, engine_state, kill, one, process_running, start_counter};

async fn gvisor_sandbox(server: &TestServer) -> Value {
    server
        .create(json!({"template": "base", "isolation": "gvisor", "timeoutMs": 600_000}))
        .await
}

/// A gVisor sandbox whose counter has counted a while: the sandbox, the counter's
/// process and its count.
async fn counting_gvisor_sandbox(server: &TestServer) -> (Value, String, u64) {
    let sandbox = gvisor_sandbox(server).await;
    let process = start_counter(server, &sandbox).await;
    let before = counted(server, &sandbox, 200_000).await;
    (sandbox, process, before)
}

async fn hibernate(server: &TestServer, sandbox: &Value) -> Value {
    let (status, paused) = server
        .post(
            "sandbox.pause",
            json!({"sandboxId": id(sandbox), "memory": "disk"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(paused["pausedTo"], "disk", "{paused}");
    // The checkpoint's size on disk (a few hundred KiB for a shell, more for Python's
    // counter), or the memory limit it was admitted with where the engine's data root is
    // out of reach (a private engine's runtime keeps its checkpoints itself).
    let bytes = paused["hibernatedBytes"].as_i64().unwrap();
    assert!(bytes > 64 * 1024, "{paused}");
    paused
}

async fn container_running(server: &TestServer, sandbox: &Value) -> bool {
    engine_state(server, sandbox).await.running.unwrap()
}

/// Waits (a minute at most) for the reaper to pause the sandbox to disk: its row moves
/// first, then the engine saves and stops its container.
async fn on_disk_by_itself(server: &TestServer, sandbox: &Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = one(server, sandbox).await;
        if row["pausedTo"] == "disk" && !container_running(server, sandbox).await {
            assert!(row["hibernatedBytes"].as_i64().unwrap() > 0, "{row}");
            return;
        }
        assert!(Instant::now() < deadline, "never paused to disk: {row}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The sandbox's processes went on from where they were: the counter runs, as the
/// same process, and counts past where it stood.
async fn went_on(server: &TestServer, sandbox: &Value, process: &str, before: u64) {
    went_on_by(server, sandbox, process, before, 100_000).await;
}

async fn went_on_by(server: &TestServer, sandbox: &Value, process: &str, before: u64, by: u64) {
    assert!(process_running(server, sandbox, process).await);
    let after = counted(server, sandbox, before + by).await;
    assert!(after > before, "{before} → {after}");
}

#[tokio::test]
async fn a_hibernated_sandbox_holds_no_container_and_its_resume_restores_its_processes() {
    let server = TestServer::start().await;
    let (sandbox, process, before) = counting_gvisor_sandbox(&server).await;

    let paused = hibernate(&server, &sandbox).await;
    assert!(
        paused["hibernatedBytes"].as_i64().unwrap() < paused["memoryMb"].as_i64().unwrap() << 20,
        "the checkpoint's own size, not the memory limit: {paused}"
    );
    assert!(
        !container_running(&server, &sandbox).await,
        "a hibernated sandbox's container is stopped"
    );
    // Asked again: answered as it is.
    let again = hibernate(&server, &sandbox).await;
    assert_eq!(one(&server, &sandbox).await["pausedTo"], "disk", "{again}");

    let (status, resumed) = server
        .post("sandbox.resume", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["status"], "running");
    assert!(resumed.get("pausedTo").is_none(), "{resumed}");
    assert!(container_running(&server, &sandbox).await);
    went_on(&server, &sandbox, &process, before).await;

    // A second time, woken by a call reaching inside rather than asked.
    let before = counted(&server, &sandbox, 0).await;
    hibernate(&server, &sandbox).await;
    let echoed = server.exec(&sandbox, "echo back").await;
    assert_eq!(echoed["stdout"], "back\n", "{echoed}");
    went_on(&server, &sandbox, &process, before).await;

    kill(&server, &sandbox).await;
}

#[tokio::test]
async fn a_hibernated_sandbox_outlives_a_restart_of_sandboxd() {
    let server = TestServer::start().await;
    let (sandbox, process, before) = counting_gvisor_sandbox(&server).await;
    hibernate(&server, &sandbox).await;

    let stopped = server.stop().await;
    let server = TestServer::start_in(stopped).await;
    // Reconcile leaves it paused on disk, its container stopped.
    let row = one(&server, &sandbox).await;
    assert_eq!(row["status"], "paused", "{row}");
    assert_eq!(row["pausedTo"], "disk", "{row}");
    assert!(!container_running(&server, &sandbox).await);

    let (status, resumed) = server
        .post("sandbox.resume", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    went_on(&server, &sandbox, &process, before).await;
    kill(&server, &sandbox).await;
}

#[tokio::test]
async fn a_sandbox_paused_in_memory_moves_to_disk_and_other_tiers_are_refused() {
    let server = TestServer::start().await;

    // The container tier: its runtime cannot save processes.
    let plain = server.create(json!({"template": "base"})).await;
    let (status, refused) = server
        .post(
            "sandbox.pause",
            json!({"sandboxId": id(&plain), "memory": "disk"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let told = refused.to_string();
    assert!(
        told.contains("memory") && told.contains("container") && told.contains("gvisor"),
        "{refused}"
    );
    assert_eq!(one(&server, &plain).await["status"], "running");
    let (status, refused) = server
        .post(
            "sandbox.pause",
            json!({"sandboxId": id(&plain), "memory": "swap"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");

    // Paused in memory, then moved to disk, then resumed.
    let (sandbox, process, before) = counting_gvisor_sandbox(&server).await;
    let (status, paused) = server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["pausedTo"], "ram", "{paused}");
    hibernate(&server, &sandbox).await;
    assert!(!container_running(&server, &sandbox).await);
    let (status, resumed) = server
        .post("sandbox.resume", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    went_on(&server, &sandbox, &process, before).await;

    for sandbox in [&plain, &sandbox] {
        kill(&server, sandbox).await;
    }
}

#[tokio::test]
async fn a_sandbox_paused_in_memory_longer_than_to_disk_after_moves_to_disk() {
    let server = TestServer::start_with(|config| config.pause.to_disk_after_secs = 1).await;
    let (sandbox, process, before) = counting_gvisor_sandbox(&server).await;
    let (status, paused) = server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["pausedTo"], "ram", "{paused}");

    // The reaper moves it to disk at one of its next passes.
    let deadline = Instant::now() + Duration::from_secs(60);
    on_disk_by_itself(&server, &sandbox).await;
    // The audit log says why (written once the engine is done).
    loop {
        let (_, audit) = server
            .get("audit.list", &[("resourceId", id(&sandbox))])
            .await;
        if audit.to_string().contains("to_disk_after") {
            break;
        }
        assert!(Instant::now() < deadline, "the audit log says why: {audit}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (status, resumed) = server
        .post("sandbox.resume", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    went_on(&server, &sandbox, &process, before).await;
    kill(&server, &sandbox).await;
}

#[tokio::test]
async fn a_hibernated_sandbox_is_killed_with_its_checkpoint() {
    let server = TestServer::start().await;
    let sandbox = gvisor_sandbox(&server).await;
    hibernate(&server, &sandbox).await;
    let (status, killed) = server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{killed}");
    assert_eq!(killed["status"], "killed");
    assert!(killed.get("pausedTo").is_none(), "{killed}");
    // The container, and the checkpoint in its directory, go.
    server.wait_container_removed(&sandbox).await;
}

/// A shell counting in memory (the test engine's image has no Python), writing its count
/// to `/tmp/n` now and then.
const SHELL_COUNTER: &str = "n=0; while true; do n=$((n+1)); if [ $((n % 5000)) -eq 0 ]; then echo $n > /tmp/n.tmp && mv /tmp/n.tmp /tmp/n; fi; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernated_sandbox_outlives_a_restart_of_the_engine() {
    // The machine's engine's gVisor runtime, with the checkpoint API on.
    let host: Value = serde_json::from_str(
        &std::fs::read_to_string("/etc/docker/daemon.json").expect("the engine's daemon.json"),
    )
    .expect("its JSON");
    let config = json!({"experimental": true, "runtimes": host["runtimes"]});
    let mut engine = PrivateEngine::start_with_config(&config.to_string());
    let docker =
        sandboxd_docker::DockerEngine::connect_unix(&engine.socket().display().to_string())
            .await
            .expect("the test's engine answers");
    let server = TestServer::start_with_engine(docker, |_| {}).await;
    let sandbox = server
        .create(json!({"template": "python", "isolation": "gvisor", "timeoutMs": 600_000}))
        .await;
    let (status, process) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox), "cmd": SHELL_COUNTER}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{process}");
    let process = process["processId"].as_str().unwrap().to_owned();
    let before = counted(&server, &sandbox, 10_000).await;
    hibernate(&server, &sandbox).await;
    let container = sandbox["containerId"].as_str().unwrap();
    assert!(!engine.running(container));

    engine.stop();
    engine.resume();
    // Back, the engine leaves the stopped container as it is, and so does sandboxd.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!engine.running(container));
    let row = one(&server, &sandbox).await;
    assert_eq!(row["pausedTo"], "disk", "{row}");

    let (status, resumed) = server
        .post("sandbox.resume", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert!(engine.running(container));
    went_on_by(&server, &sandbox, &process, before, 10_000).await;
    server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
}

#[tokio::test]
async fn auto_pause_to_disk_hibernates_at_the_idle_timeout() {
    let server = TestServer::start().await;
    let (status, refused) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base", "autoPause": "disk"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused.to_string().contains("autoPause"), "{refused}");

    let sandbox = server
        .create(
            json!({"template": "base", "isolation": "gvisor", "timeoutMs": 10_000,
            "autoPause": "disk"}),
        )
        .await;
    assert_eq!(sandbox["autoPause"], true, "{sandbox}");
    assert_eq!(sandbox["autoPauseTo"], "disk", "{sandbox}");
    let process = start_counter(&server, &sandbox).await;
    let before = counted(&server, &sandbox, 200_000).await;
    on_disk_by_itself(&server, &sandbox).await;
    // A command resumes it, with its processes.
    let echoed = server.exec(&sandbox, "echo awake").await;
    assert_eq!(echoed["stdout"], "awake\n", "{echoed}");
    went_on(&server, &sandbox, &process, before).await;
    kill(&server, &sandbox).await;
}

#[tokio::test]
async fn two_resumes_at_once_and_a_resume_racing_a_kill_each_answer_once() {
    let server = TestServer::start().await;
    let (sandbox, process, before) = counting_gvisor_sandbox(&server).await;
    hibernate(&server, &sandbox).await;
    let resume = || server.post("sandbox.resume", json!({"sandboxId": id(&sandbox)}));
    let ((first, a), (second, b)) = tokio::join!(resume(), resume());
    assert_eq!((first, second), (StatusCode::OK, StatusCode::OK), "{a} {b}");
    assert_eq!(
        (a["status"].clone(), b["status"].clone()),
        (json!("running"), json!("running"))
    );
    went_on(&server, &sandbox, &process, before).await;

    hibernate(&server, &sandbox).await;
    let kill = server.post("sandbox.kill", json!({"sandboxId": id(&sandbox)}));
    let ((resumed, answer), (killed, _)) = tokio::join!(resume(), kill);
    assert_eq!(killed, StatusCode::OK);
    // The resume either came first (and the kill after it) or found the sandbox killed.
    assert!(
        resumed == StatusCode::OK
            || (resumed == StatusCode::PRECONDITION_FAILED
                && answer.to_string().contains("killed")),
        "{resumed} {answer}"
    );
    assert_eq!(one(&server, &sandbox).await["status"], "killed");
    server.wait_container_removed(&sandbox).await;
}
