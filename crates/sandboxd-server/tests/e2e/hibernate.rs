//! Hibernation: `sandbox.pause {memory: "disk"}` saves a gVisor sandbox's processes with
//! their memory to the host's disk and stops its container; a resume (asked, or any call
//! reaching inside) restores the same processes, which go on counting from where they
//! were. The sandbox stays paused on disk across a restart of sandboxd. A sandbox paused
//! in memory moves to disk when asked; a sandbox of the container tier is refused with
//! 400 naming its tier.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, id};
use crate::pause::{counted, engine_state, kill, one, process_running, start_counter};

async fn gvisor_sandbox(server: &TestServer) -> Value {
    server
        .create(json!({"template": "base", "isolation": "gvisor", "timeoutMs": 600_000}))
        .await
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
    assert!(
        paused["hibernatedBytes"].as_i64().unwrap() > 1024 * 1024,
        "{paused}"
    );
    paused
}

async fn container_running(server: &TestServer, sandbox: &Value) -> bool {
    engine_state(server, sandbox).await.running.unwrap()
}

/// The sandbox's processes went on from where they were: the counter runs, as the
/// same process, and counts past where it stood.
async fn went_on(server: &TestServer, sandbox: &Value, process: &str, before: u64) {
    assert!(process_running(server, sandbox, process).await);
    let after = counted(server, sandbox, before + 100_000).await;
    assert!(after > before, "{before} → {after}");
}

#[tokio::test]
async fn a_hibernated_sandbox_holds_no_container_and_its_resume_restores_its_processes() {
    let server = TestServer::start().await;
    let sandbox = gvisor_sandbox(&server).await;
    let process = start_counter(&server, &sandbox).await;
    let before = counted(&server, &sandbox, 200_000).await;

    hibernate(&server, &sandbox).await;
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
    let sandbox = gvisor_sandbox(&server).await;
    let process = start_counter(&server, &sandbox).await;
    let before = counted(&server, &sandbox, 200_000).await;
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
    let sandbox = gvisor_sandbox(&server).await;
    let process = start_counter(&server, &sandbox).await;
    let before = counted(&server, &sandbox, 200_000).await;
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
