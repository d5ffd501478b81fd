//! The sandbox's main process and container against what its code does: PID 1 cannot
//! be signalled from inside, orphans are reaped, and a container that stops anyway is
//! started again or reported, never left as a `running` row that answers with the
//! engine's text.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::attacks::still_running;
use crate::harness::{TestServer, container, id};

/// `kill -9 -1` as the sandbox user kills every process it may signal; the agent's
/// supervisor is PID 1, which no signal from inside reaches, so the container lives,
/// the worker is restarted and the next command runs through the agent again.
#[tokio::test]
async fn kill_minus_one_and_stopping_pid_1_cannot_stop_the_sandbox() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let pid1 = server
        .exec(&sandbox, "cat /proc/1/cmdline | tr '\\0' ' '")
        .await;
    assert!(
        pid1["stdout"]
            .as_str()
            .unwrap()
            .contains("sandboxd-agent supervise"),
        "{pid1}"
    );
    for attack in [
        "kill -9 -1 2>/dev/null; true",
        "kill -STOP 1; kill -9 1; true",
    ] {
        // The command may lose its own agent connection with everything else (503).
        let (status, body) = server
            .post(
                "sandbox.exec",
                json!({"sandboxId": id(&sandbox), "cmd": attack}),
            )
            .await;
        assert!(
            status == StatusCode::OK || status == StatusCode::SERVICE_UNAVAILABLE,
            "{status} {body}"
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let agent = server
                .service
                .agents()
                .wait_connected(id(&sandbox), std::time::Duration::from_secs(1))
                .await;
            if agent.is_some() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the agent came back");
        }
        let state = server
            .docker()
            .inspect_container(crate::harness::container(&sandbox), None)
            .await
            .unwrap()
            .state
            .unwrap();
        assert_eq!(state.running, Some(true), "{state:?}");
        still_running(&server, &sandbox).await;
        let pid1_state = server.exec(&sandbox, "grep State /proc/1/status").await;
        assert!(
            !pid1_state["stdout"].as_str().unwrap().contains("stopped"),
            "{pid1_state}"
        );
    }
}

/// Orphans of the sandbox's commands are reaped: no zombies pile up under PID 1.
#[tokio::test]
async fn orphans_are_reaped() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let out = server
        .exec(
            &sandbox,
            "for i in 1 2 3 4 5 6 7 8; do (sleep 0.2 &); done; sleep 1.5; \
             grep -l '^State:.*zombie' /proc/[0-9]*/status 2>/dev/null | wc -l",
        )
        .await;
    assert_eq!(out["stdout"], "0\n", "{out}");
}

/// Polls until `check` holds, for at most `within`; returns how long it took.
async fn eventually<F, Fut>(within: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < within, "not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

/// Kills the sandbox's container from outside, as the host or the OOM killer would.
async fn engine_kill(server: &TestServer, sandbox: &Value) {
    let kill = bollard::query_parameters::KillContainerOptionsBuilder::default().build();
    server
        .docker()
        .kill_container(crate::harness::container(sandbox), Some(kill))
        .await
        .unwrap();
}

async fn container_running(server: &TestServer, sandbox: &Value) -> bool {
    let inspect = server
        .docker()
        .inspect_container(crate::harness::container(sandbox), None)
        .await
        .unwrap();
    inspect.state.and_then(|s| s.running) == Some(true)
}

/// A container that stops anyway (killed by the engine here) is noticed at once, from
/// the engine's events, and started again with no request needed, files kept; one that
/// cannot be started makes the sandbox `error` at once, and a command a 412 naming that
/// state, never the engine's text.
#[tokio::test]
async fn a_stopped_container_is_restarted_or_reported_at_once() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    server.exec(&sandbox, "echo kept > /tmp/kept").await;
    engine_kill(&server, &sandbox).await;
    let took = eventually(Duration::from_secs(5), || async {
        container_running(&server, &sandbox).await
    })
    .await;
    eprintln!("running again {took:?} after the kill");
    // Its agent, started anew, was offered its key again, and the key's file is gone
    // once it connected.
    let agent = server
        .service
        .agents()
        .wait_connected(id(&sandbox), Duration::from_secs(5))
        .await;
    assert!(agent.is_some(), "the restarted sandbox's agent connects");
    let run_dir = server.data_dir().join("agents").join(id(&sandbox));
    assert!(run_dir.join("agent.sock").exists());
    assert!(
        !run_dir.join("agent.key").exists(),
        "the key file is taken away"
    );
    let out = server.exec(&sandbox, "cat /tmp/kept").await;
    assert_eq!(out["stdout"], "kept\n", "{out}");
    still_running(&server, &sandbox).await;

    // Now it cannot start: its agent directory (a bind source) is gone.
    std::fs::remove_dir_all(server.data_dir().join("agents").join(id(&sandbox))).unwrap();
    engine_kill(&server, &sandbox).await;
    eventually(Duration::from_secs(5), || async {
        let (_, one) = server
            .get("sandbox.one", &[("sandboxId", id(&sandbox))])
            .await;
        one["status"] == "error"
    })
    .await;
    let (status, body) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&sandbox), "cmd": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "{body}");
    assert_eq!(body["message"], "sandbox is error", "{body}");
}

/// A container removed behind the server's back (`docker rm -f`, a host wiped) makes the
/// sandbox `error`: a command right after is a 412 naming that state, never a 500.
#[tokio::test]
async fn a_container_removed_from_outside_is_reported_not_a_server_fault() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let remove = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
        .force(true)
        .build();
    server
        .docker()
        .remove_container(crate::harness::container(&sandbox), Some(remove))
        .await
        .unwrap();
    let (status, body) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&sandbox), "cmd": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "{body}");
    assert_eq!(body["message"], "sandbox is error", "{body}");
    let (_, one) = server
        .get("sandbox.one", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(one["status"], "error", "{one}");
}

/// A container that keeps stopping is restarted three times, then given up on.
#[tokio::test]
async fn a_container_that_keeps_stopping_is_given_up_on() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    for _ in 0..3 {
        engine_kill(&server, &sandbox).await;
        eventually(Duration::from_secs(5), || async {
            container_running(&server, &sandbox).await
        })
        .await;
    }
    engine_kill(&server, &sandbox).await;
    eventually(Duration::from_secs(5), || async {
        let (_, one) = server
            .get("sandbox.one", &[("sandboxId", id(&sandbox))])
            .await;
        one["status"] == "error"
    })
    .await;
    assert!(!container_running(&server, &sandbox).await);
}

/// A workdir that already exists and is not the sandbox user's (`/etc`) is used as it
/// is: neither the agent nor the engine's fallback makes it the user's.
#[tokio::test]
async fn an_existing_workdir_is_never_re_owned() {
    for server in [
        TestServer::start().await,
        TestServer::start_without_agent().await,
    ] {
        let sandbox = server
            .create(json!({"template": "base", "workdir": "/etc"}))
            .await;
        assert_eq!(sandbox["status"], "running", "{sandbox}");
        let owner = server.exec(&sandbox, "stat -c '%u %a' /etc; id -u").await;
        assert_eq!(owner["stdout"], "0 755\n1000\n", "{owner}");
    }
}

/// A command whose sandbox another request kills meanwhile ends at once, with the
/// sandbox's state (412), not with "the server is unavailable".
#[tokio::test]
async fn a_command_cut_by_a_kill_names_the_killed_sandbox() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let command = server.post(
        "sandbox.exec",
        json!({"sandboxId": id(&sandbox), "cmd": "sleep 30", "timeoutMs": 20000}),
    );
    let kill = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (status, body) = server
            .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    };
    let started = Instant::now();
    let ((status, body), ()) = tokio::join!(command, kill);
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(body["message"], "sandbox is killed", "{body}");
}

/// Background processes (interpreter contexts included) are bounded per sandbox: past
/// 64 running, a start is refused with 409 naming the bound, and allowed again once one
/// ends.
#[tokio::test]
async fn running_background_processes_are_bounded() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let mut first = None;
    for _ in 0..64 {
        let (status, body) = server
            .post(
                "sandbox.processStart",
                json!({"sandboxId": id(&sandbox), "cmd": "sleep 600"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        first.get_or_insert(body["processId"].as_str().unwrap().to_owned());
    }
    let (status, body) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox), "cmd": "sleep 600"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["message"].as_str().unwrap().contains("64"), "{body}");
    let (status, body) = server
        .post("sandbox.contextCreate", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    let first = first.unwrap();
    let (status, body) = server
        .post(
            "sandbox.processSignal",
            json!({"sandboxId": id(&sandbox), "processId": first, "signal": "KILL"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = server
        .post(
            "sandbox.processWait",
            json!({"sandboxId": id(&sandbox), "processId": first, "timeoutMs": 5000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox), "cmd": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// With the sandbox's pids limit reached, starting one more background process is
/// refused at once (409), never a request that hangs until its deadline.
#[tokio::test]
async fn a_start_past_the_pids_limit_is_refused_at_once() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "pidsLimit": 16}))
        .await;
    let mut refused = 0;
    for _ in 0..16 {
        let started = Instant::now();
        let (status, body) = server
            .post(
                "sandbox.processStart",
                json!({"sandboxId": id(&sandbox), "cmd": "sleep 600"}),
            )
            .await;
        assert!(started.elapsed() < Duration::from_secs(5), "{body}");
        match status {
            StatusCode::OK => {}
            StatusCode::CONFLICT | StatusCode::BAD_REQUEST => refused += 1,
            other => panic!("{other} {body}"),
        }
    }
    if refused == 0 {
        // What the engine and the sandbox say, to tell a limit not set from one not
        // counted.
        let inspected = server
            .docker()
            .inspect_container(container(&sandbox), None)
            .await
            .ok()
            .and_then(|c| c.host_config)
            .and_then(|h| h.pids_limit);
        let (_, listed) = server
            .get("sandbox.processList", &[("sandboxId", id(&sandbox))])
            .await;
        panic!("the pids limit was never reached: engine limit {inspected:?}, processes {listed}");
    }
    // The agent still serves what needs no new process.
    let (status, body) = server
        .get("sandbox.processList", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
