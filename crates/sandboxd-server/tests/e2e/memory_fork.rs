//! Forks and snapshots with memory: `sandbox.fork {memory: true}` gives sandboxes that
//! each continue the source's processes from one instant (a Python process counting in
//! memory goes on from the source's count, as the same process the agent knows, in
//! each), independent from then on; `sandbox.snapshot {memory: true}` keeps such an
//! instant, and a sandbox created from it, even after its source is gone, starts there.
//! No fork holds an agent key that works for its source or a sibling: the key the saved
//! agent held is refused everywhere afterwards. E2B's fork of a gVisor sandbox keeps its
//! memory. Refusals: a sandbox of the container tier
//! (400 naming `memory`).

use std::collections::HashSet;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, id};
use crate::impostor::{agent_key, pose};
use crate::pause::{counted, kill, one, process_running, start_counter};

async fn counting_gvisor_sandbox(server: &TestServer) -> (Value, String, u64) {
    let sandbox = server
        .create(json!({"template": "base", "isolation": "gvisor", "timeoutMs": 600_000}))
        .await;
    let process = start_counter(server, &sandbox).await;
    let before = counted(server, &sandbox, 200_000).await;
    (sandbox, process, before)
}

async fn fork_with_memory(server: &TestServer, sandbox: &Value, count: u32) -> Value {
    let (status, forked) = server
        .post(
            "sandbox.fork",
            json!({"sandboxId": id(sandbox), "count": count, "memory": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{forked}");
    forked
}

async fn remove_snapshot(server: &TestServer, snapshot: &Value) {
    let (status, removed) = server
        .post(
            "snapshot.remove",
            json!({"snapshotId": snapshot["snapshotId"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{removed}");
}

/// The counter's process runs in `sandbox` as the one the agent started, and counts past
/// `from`.
async fn counts_on(server: &TestServer, sandbox: &Value, process: &str, from: u64) -> u64 {
    assert!(
        process_running(server, sandbox, process).await,
        "the counter runs on as the same process in {}",
        id(sandbox)
    );
    counted(server, sandbox, from + 100_000).await
}

#[tokio::test]
async fn forks_with_memory_continue_the_source_s_processes_then_diverge() {
    let server = TestServer::start().await;
    let (source, process, before) = counting_gvisor_sandbox(&server).await;
    let saved_key = agent_key(&server, id(&source));

    let forked = fork_with_memory(&server, &source, 3).await;
    let snapshot = &forked["snapshot"];
    assert!(
        snapshot["memoryBytes"].as_i64().unwrap() > 1024 * 1024,
        "{snapshot}"
    );
    let forks = forked["sandboxes"].as_array().unwrap().clone();
    assert_eq!(forks.len(), 3);

    // Each fork starts where the source stood, with the counter's file of that instant
    // and the counter's memory; each counts on, as does the source.
    let mut counts = Vec::new();
    for fork in &forks {
        assert_eq!(fork["status"], "running", "{fork}");
        let started = counted(&server, fork, 0).await;
        assert!(
            started >= before,
            "a fork starts at the source's count: {started} < {before}"
        );
        counts.push(counts_on(&server, fork, &process, started).await);
    }
    counts_on(&server, &source, &process, before).await;

    // Independent from then on: the counter stopped in one fork counts on in the others.
    let (status, stopped) = server
        .post(
            "sandbox.processSignal",
            json!({"sandboxId": id(&forks[0]), "processId": process, "signal": "KILL"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stopped}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while process_running(&server, &forks[0], &process).await {
        assert!(
            std::time::Instant::now() < deadline,
            "the fork's counter never stopped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for (fork, count) in forks.iter().zip(&counts).skip(1) {
        counts_on(&server, fork, &process, *count).await;
    }
    assert!(process_running(&server, &source, &process).await);

    // Identity: every sandbox has a key of its own, none the key the checkpoint holds,
    // which neither the source nor a fork takes any more; a fork's own key is taken.
    let mut keys = HashSet::new();
    keys.insert(agent_key(&server, id(&source)));
    for fork in &forks {
        keys.insert(agent_key(&server, id(fork)));
    }
    assert_eq!(keys.len(), 4, "four sandboxes, four keys");
    assert!(
        !keys.contains(&saved_key),
        "the saved key is replaced everywhere"
    );
    assert_eq!(
        pose(&server, &forks[1], &saved_key, 5).await,
        "refused 5 of 5\n"
    );
    assert_eq!(
        pose(&server, &source, &saved_key, 5).await,
        "refused 5 of 5\n"
    );
    let own = agent_key(&server, id(&forks[2]));
    assert_ne!(
        pose(&server, &forks[2], &own, 2).await,
        "refused 2 of 2\n",
        "the control: the fork's own key is taken"
    );

    for sandbox in forks.iter().chain([&source]) {
        kill(&server, sandbox).await;
    }
    remove_snapshot(&server, snapshot).await;
}

#[tokio::test]
async fn a_snapshot_with_memory_starts_sandboxes_where_it_was_taken_after_its_source_is_gone() {
    let server = TestServer::start().await;
    let (source, process, before) = counting_gvisor_sandbox(&server).await;
    let (status, snapshot) = server
        .post(
            "sandbox.snapshot",
            json!({"sandboxId": id(&source), "memory": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{snapshot}");
    let memory = snapshot["memoryBytes"].as_i64().unwrap();
    assert!(memory > 1024 * 1024, "{snapshot}");
    // The source runs on as it was.
    assert_eq!(one(&server, &source).await["status"], "running");
    counts_on(&server, &source, &process, before).await;
    kill(&server, &source).await;

    let started = server
        .create(json!({"snapshotId": snapshot["snapshotId"], "timeoutMs": 600_000}))
        .await;
    let count = counted(&server, &started, 0).await;
    assert!(count >= before, "{count} < {before}");
    counts_on(&server, &started, &process, count).await;
    // A second sandbox from it starts at the same instant, with its own key.
    let again = server
        .create(json!({"snapshotId": snapshot["snapshotId"], "timeoutMs": 600_000}))
        .await;
    counts_on(&server, &again, &process, before).await;
    assert_ne!(
        agent_key(&server, id(&started)),
        agent_key(&server, id(&again))
    );

    // Listed with its memory; removed with it once its sandboxes are gone.
    let (_, listed) = server
        .get(
            "snapshot.one",
            &[("snapshotId", snapshot["snapshotId"].as_str().unwrap())],
        )
        .await;
    assert_eq!(listed["memoryBytes"], memory, "{listed}");
    kill(&server, &started).await;
    kill(&server, &again).await;
    remove_snapshot(&server, &snapshot).await;
    let root = server
        .docker()
        .info()
        .await
        .unwrap()
        .docker_root_dir
        .unwrap();
    let kept = std::path::Path::new(&root)
        .join("sandboxd-memory")
        .join(snapshot["snapshotId"].as_str().unwrap());
    assert!(!kept.exists(), "the memory goes with its snapshot");
}

#[tokio::test]
async fn e2b_s_fork_of_a_gvisor_sandbox_keeps_its_memory() {
    let server = TestServer::start().await;
    let (source, process, before) = counting_gvisor_sandbox(&server).await;
    let (status, forks) = crate::e2b::call(
        &server,
        reqwest::Method::POST,
        &format!("/sandboxes/{}/fork", id(&source)),
        crate::harness::KEY,
        Some(json!({"count": 1, "timeout": 120})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{forks}");
    let fork = one(
        &server,
        &json!({"sandboxId": forks[0]["sandbox"]["sandboxID"]}),
    )
    .await;
    counts_on(&server, &fork, &process, before).await;
    let (_, snapshots) = server.get("snapshot.all", &[]).await;
    for snapshot in snapshots.as_array().unwrap() {
        assert!(snapshot["memoryBytes"].as_i64().unwrap() > 0, "{snapshot}");
    }
    kill(&server, &fork).await;
    kill(&server, &source).await;
}

#[tokio::test]
async fn memory_is_refused_for_a_sandbox_of_the_container_tier() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    for (procedure, body) in [
        (
            "sandbox.fork",
            json!({"sandboxId": id(&sandbox), "memory": true}),
        ),
        (
            "sandbox.snapshot",
            json!({"sandboxId": id(&sandbox), "memory": true}),
        ),
    ] {
        let (status, refused) = server.post(procedure, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{procedure}: {refused}");
        assert!(
            refused.to_string().contains("memory") && refused.to_string().contains("gvisor"),
            "{refused}"
        );
    }
    kill(&server, &sandbox).await;
}
