//! The in-sandbox agent: it serves commands and files, its channel cannot be abused
//! from inside the sandbox, it comes back when killed or when sandboxd restarts.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{BUSYBOX, TestServer, id};

fn counts(server: &TestServer) -> (u64, u64) {
    let paths = server.service.path_counts();
    (
        paths.agent.load(Ordering::Relaxed),
        paths.engine.load(Ordering::Relaxed),
    )
}

async fn wait_for_agent(server: &TestServer, sandbox: &Value, not_pid: Option<u32>) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(hello) = server.service.agents().hello(id(sandbox))
            && Some(hello.pid) != not_pid
        {
            return hello.pid;
        }
        assert!(Instant::now() < deadline, "agent did not connect");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn agent_serves_commands_and_files_on_any_image() {
    let server = TestServer::start().await;
    for image in [json!({"template": "base"}), json!({"image": BUSYBOX})] {
        let sandbox = server.create(image).await;
        let sid = id(&sandbox);
        let before = counts(&server);
        let out = server.exec(&sandbox, "echo hi; exit 4").await;
        assert_eq!(out["stdout"], "hi\n");
        assert_eq!(out["exitCode"], 4);
        let (status, _) = server
            .post("sandbox.writeFile", json!({"sandboxId": sid, "path": "/tmp/a/b/c.txt", "content": "abc", "mode": 0o600}))
            .await;
        assert_eq!(status, StatusCode::OK);
        let (_, read) = server
            .get(
                "sandbox.readFile",
                &[("sandboxId", sid), ("path", "/tmp/a/b/c.txt")],
            )
            .await;
        assert_eq!(read["content"], "abc");
        let (_, listing) = server
            .get(
                "sandbox.listFiles",
                &[("sandboxId", sid), ("path", "/tmp/a/b")],
            )
            .await;
        // Full metadata on busybox too: the agent does not need GNU find.
        assert_eq!(listing["entries"][0]["name"], "c.txt");
        assert_eq!(listing["entries"][0]["size"], 3);
        assert_eq!(listing["entries"][0]["mode"], "600");
        assert!(listing["entries"][0]["modifiedAt"].is_string());
        let after = counts(&server);
        assert_eq!(
            after.0 - before.0,
            4,
            "every operation went through the agent"
        );
        assert_eq!(after.1, before.1, "none through the engine");
    }
}

#[tokio::test]
async fn timeout_kills_processes_that_left_the_group() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let (status, out) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&sandbox), "cmd": "setsid sleep 305 & sleep 300", "timeoutMs": 1000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out["exitCode"], 124);
    let left = server.commands(&sandbox).await;
    assert!(left.iter().all(|cmd| !cmd.contains("sleep")), "{left:?}");
}

#[tokio::test]
async fn background_processes_do_not_hold_the_command() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let started = Instant::now();
    let out = server.exec(&sandbox, "sleep 30 & echo started").await;
    assert_eq!(out["stdout"], "started\n");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // The background process outlives the command.
    let ps = server.exec(&sandbox, "ls /proc | grep -c '^[0-9]'").await;
    assert!(
        ps["stdout"]
            .as_str()
            .unwrap()
            .trim()
            .parse::<u32>()
            .unwrap()
            >= 3
    );
}

#[tokio::test]
async fn output_written_just_after_the_command_ends_is_kept() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    // The command ends at once; its background child writes 50 ms later, well within
    // the 250 ms during which late output is still forwarded.
    let out = server
        .exec(
            &sandbox,
            "echo first; (sleep 0.05; echo late; echo oops >&2) &",
        )
        .await;
    assert_eq!(out["stdout"], "first\nlate\n");
    assert_eq!(out["stderr"], "oops\n");
    assert_eq!(out["exitCode"], 0);
}

/// Requests run on threads the agent started before: with the pids limit reached (no
/// thread or process can start in the sandbox), files are still served by the agent.
#[tokio::test]
async fn files_are_served_by_the_agent_with_the_pids_limit_reached() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "pidsLimit": 32}))
        .await;
    let sid = id(&sandbox);
    server
        .exec(&sandbox, "echo kept > /home/user/kept.txt")
        .await;
    let bomb = server.post(
        "sandbox.exec",
        json!({"sandboxId": sid, "cmd": crate::exec::FORK_BOMB, "timeoutMs": 8000}),
    );
    let files = async {
        wait_for_pids_exhausted(&server, &sandbox).await;
        let before = counts(&server);
        let (status, read) = server
            .get(
                "sandbox.readFile",
                &[("sandboxId", sid), ("path", "/home/user/kept.txt")],
            )
            .await;
        assert_eq!(
            (status, &read["content"]),
            (StatusCode::OK, &json!("kept\n"))
        );
        let (status, out) = server
            .post(
                "sandbox.writeFile",
                json!({"sandboxId": sid, "path": "/home/user/new.txt", "content": "new"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{out}");
        let (status, read) = server
            .get(
                "sandbox.readFile",
                &[("sandboxId", sid), ("path", "/home/user/new.txt")],
            )
            .await;
        assert_eq!((status, &read["content"]), (StatusCode::OK, &json!("new")));
        let after = counts(&server);
        assert_eq!(after.0 - before.0, 3, "all three served by the agent");
        assert_eq!(after.1, before.1, "none by the engine");
    };
    let ((status, out), ()) = tokio::join!(bomb, files);
    assert_eq!(
        (status, &out["exitCode"]),
        (StatusCode::OK, &json!(124)),
        "{out}"
    );
}

/// Waits until the sandbox's cgroup holds as many tasks as its pids limit allows.
async fn wait_for_pids_exhausted(server: &TestServer, sandbox: &Value) {
    use futures_util::StreamExt as _;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let options = bollard::query_parameters::StatsOptionsBuilder::new()
            .stream(false)
            .one_shot(true)
            .build();
        let stats = server
            .docker()
            .stats(crate::harness::container(sandbox), Some(options))
            .next()
            .await
            .expect("stats")
            .expect("stats");
        let pids = stats.pids_stats.expect("pids stats");
        if pids.current.is_some() && pids.current >= pids.limit {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pids never reached the limit: {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_channel_cannot_be_changed_or_abused_from_inside() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    for cmd in [
        "touch /.sandboxd/run/x",
        "rm -f /.sandboxd/run/agent.sock",
        "ln -sf /etc/passwd /.sandboxd/run/agent.sock",
        "mv /.sandboxd/run/agent.sock /.sandboxd/run/moved",
        "cp /bin/sh /.sandboxd/bin/sandboxd-agent",
        "chmod 777 /.sandboxd/run",
    ] {
        let out = server.exec(&sandbox, cmd).await;
        assert_ne!(out["exitCode"], 0, "{cmd} succeeded: {out}");
    }
    // A process in the sandbox connecting to the socket: while the agent is connected,
    // extra connections are closed at once; a connection announcing a huge frame is cut
    // without sandboxd buffering it.
    let probe = r#"python3 - <<'PY'
import socket, struct, time
results = []
for _ in range(6):
    s = socket.socket(socket.AF_UNIX)
    s.connect("/.sandboxd/run/agent.sock")
    s.settimeout(3)
    try:
        s.sendall(struct.pack(">IIB", 0xFFFFFFF0, 0, 0) + b"x" * 1000)
        data = s.recv(100)
        results.append("closed" if data == b"" else "data")
    except (ConnectionResetError, BrokenPipeError):
        results.append("closed")
    except socket.timeout:
        results.append("open")
print(" ".join(results))
PY"#;
    let out = server.exec(&sandbox, probe).await;
    assert_eq!(
        out["stdout"], "closed closed closed closed closed closed\n",
        "{out}"
    );
    // The agent is still the one serving.
    let before = counts(&server);
    assert_eq!(
        server.exec(&sandbox, "echo still").await["stdout"],
        "still\n"
    );
    assert_eq!(counts(&server).0, before.0 + 1);
}

#[tokio::test]
async fn a_killed_agent_restarts_and_commands_keep_working() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let pid = wait_for_agent(&server, &sandbox, None).await;
    // The command kills the agent serving it: the reply may be lost (503), never wrong.
    let (status, body) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&sandbox), "cmd": format!("kill -9 {pid}")}),
        )
        .await;
    assert!(
        status == StatusCode::OK || status == StatusCode::SERVICE_UNAVAILABLE,
        "{status} {body}"
    );
    // Commands keep working: through the engine while the agent is away, then through
    // the restarted agent.
    let out = server.exec(&sandbox, "echo alive").await;
    assert_eq!(out["stdout"], "alive\n");
    let new_pid = wait_for_agent(&server, &sandbox, Some(pid)).await;
    assert_ne!(new_pid, pid);
    let before = counts(&server);
    assert_eq!(server.exec(&sandbox, "echo back").await["stdout"], "back\n");
    assert_eq!(
        counts(&server).0,
        before.0 + 1,
        "served by the restarted agent"
    );
}

#[tokio::test]
async fn the_agent_reconnects_after_sandboxd_restarts() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"image": BUSYBOX})).await;
    let pid = wait_for_agent(&server, &sandbox, None).await;
    let data = server.stop().await;
    let restarted = TestServer::start_in(data).await;
    let again = wait_for_agent(&restarted, &sandbox, None).await;
    assert_eq!(again, pid, "the same agent process reconnected");
    let before = counts(&restarted);
    assert_eq!(
        restarted.exec(&sandbox, "echo after").await["stdout"],
        "after\n"
    );
    assert_eq!(counts(&restarted).0, before.0 + 1);
}
