//! Commands: output, exit codes, cwd and env, timeouts that kill the whole tree, caps.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{BUSYBOX, TestServer, container, id};

#[tokio::test]
async fn runs_through_sh_with_cwd_env_and_exit_code() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "envVars": "FROM_CREATE=1"}))
        .await;
    let (status, out) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&sandbox), "cmd": "echo out; echo err >&2; echo $FROM_CREATE$EXTRA; pwd; exit 3",
                   "cwd": "/tmp", "env": {"EXTRA": "x y"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        out,
        json!({"stdout": "out\n1x y\n/tmp\n", "stderr": "err\n", "exitCode": 3, "timedOut": false, "truncated": false, "oomKilled": false})
    );

    // cwd and env are taken literally, never interpreted by a shell.
    let (status, out) = server
        .post("sandbox.exec", json!({"sandboxId": id(&sandbox), "cmd": "printf %s \"$V\"", "env": {"V": "$(id) `id` ; rm -rf /"}}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out["stdout"], "$(id) `id` ; rm -rf /");
    let (status, out) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&sandbox), "cmd": "pwd", "cwd": "/tmp/a b; touch /tmp/pwned"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(out["exitCode"], 0, "a missing cwd fails the command");
    let check = server
        .exec(&sandbox, "test -e /tmp/pwned && echo yes || echo no")
        .await;
    assert_eq!(check["stdout"], "no\n");
}

async fn timeout_kills_the_tree(image: Value) {
    let server = TestServer::start().await;
    let mut body = image;
    body["pidsLimit"] = json!(64);
    let sandbox = server.create(body).await;
    let started_at =
        |info: bollard::models::ContainerInspectResponse| info.state.and_then(|s| s.started_at);
    let boot = started_at(
        server
            .docker()
            .inspect_container(container(&sandbox), None)
            .await
            .unwrap(),
    );
    let started = std::time::Instant::now();
    let (status, out) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&sandbox), "cmd": "echo before; sleep 300 & (sleep 301 &); sleep 302", "timeoutMs": 1000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out["exitCode"], 124);
    assert_eq!(out["timedOut"], true);
    assert_eq!(out["stdout"], "before\n");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let left = server.commands(&sandbox).await;
    assert!(left.iter().all(|cmd| !cmd.contains("sleep")), "{left:?}");
    let now = started_at(
        server
            .docker()
            .inspect_container(container(&sandbox), None)
            .await
            .unwrap(),
    );
    assert_eq!(
        boot, now,
        "the marker kill did the work, the container was not restarted"
    );
    let (_, one) = server
        .get("sandbox.one", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(one["status"], "running");
}

#[tokio::test]
async fn timeout_kills_the_whole_tree_on_gnu_images() {
    timeout_kills_the_tree(json!({"template": "base"})).await;
}

#[tokio::test]
async fn timeout_kills_the_whole_tree_on_busybox_images() {
    timeout_kills_the_tree(json!({"image": BUSYBOX})).await;
}

/// Exhausts the pids limit from a process that survives its failed forks, so the
/// command runs until its timeout.
pub(crate) const FORK_BOMB: &str = "python3 -c 'import os, time\nwhile True:\n    try:\n        os.fork() or time.sleep(1000)\n    except OSError:\n        time.sleep(0.01)'";

async fn fork_bomb_leaves_the_sandbox_usable(server: TestServer, cmd: &str) -> (TestServer, bool) {
    let sandbox = server
        .create(json!({"template": "base", "pidsLimit": 32}))
        .await;
    server
        .exec(&sandbox, "echo kept > /home/user/kept.txt")
        .await;
    let boot = started_at(&server, &sandbox).await;
    let (status, out) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&sandbox), "cmd": cmd, "timeoutMs": 2000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["exitCode"], 124, "{out}");
    let (_, one) = server
        .get("sandbox.one", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(one["status"], "running", "{one}");
    let after = server
        .exec(&sandbox, "cat /home/user/kept.txt; echo ok")
        .await;
    assert_eq!(after["stdout"], "kept\nok\n", "{after}");
    let restarted = started_at(&server, &sandbox).await != boot;
    (server, restarted)
}

async fn started_at(server: &TestServer, sandbox: &Value) -> Option<String> {
    let info = server
        .docker()
        .inspect_container(container(sandbox), None)
        .await
        .unwrap();
    info.state.and_then(|s| s.started_at)
}

#[tokio::test]
async fn fork_bomb_is_killed_by_the_agent_without_a_restart() {
    let server = TestServer::start().await;
    let (_server, restarted) = fork_bomb_leaves_the_sandbox_usable(server, FORK_BOMB).await;
    // The agent kills without forking: no restart was needed.
    assert!(!restarted);
}

#[tokio::test]
async fn fork_bomb_without_the_agent_restarts_the_container() {
    let server = TestServer::start_without_agent().await;
    let (_server, restarted) =
        fork_bomb_leaves_the_sandbox_usable(server, "while :; do sleep 1000 & done").await;
    assert!(
        restarted,
        "the marker kill cannot fork, so the container was restarted"
    );
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn output_flood_is_capped_and_memory_stays_bounded() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    // Warm up the paths once so the peak below measures the flood, not first use.
    server
        .exec(&sandbox, "head -c 2000000 /dev/zero | tr '\\0' a")
        .await;
    let before = peak_rss_kib();
    let out = server
        .exec(&sandbox, "head -c 200000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero | tr '\\0' b >&2; echo done >&2")
        .await;
    let after = peak_rss_kib();
    assert_eq!(out["truncated"], true);
    assert_eq!(out["exitCode"], 0);
    assert_eq!(out["stdout"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(out["stderr"].as_str().unwrap().len(), 1024 * 1024);
    // 200 MB went through the server; its peak memory grew by far less.
    assert!(
        after - before < 48 * 1024,
        "peak RSS grew by {} KiB",
        after - before
    );
}

#[tokio::test]
async fn exec_needs_a_running_sandbox() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"image": BUSYBOX})).await;
    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&sandbox), "cmd": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(body["code"], "PRECONDITION_FAILED");
    assert_eq!(body["message"], "sandbox is killed");
}
