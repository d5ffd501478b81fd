//! Code inside a sandbox attacking it: privileges that must stay dropped, limits that
//! must hold, and a server that keeps its memory bounded and its state true.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{DEBIAN, TestServer, id, rss_kib};

async fn exec_with(server: &TestServer, sandbox: &Value, cmd: &str, timeout_ms: u64) -> Value {
    let (status, result) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(sandbox), "cmd": cmd, "timeoutMs": timeout_ms}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    result
}

pub(crate) async fn still_running(server: &TestServer, sandbox: &Value) {
    let (_, one) = server
        .get("sandbox.one", &[("sandboxId", id(sandbox))])
        .await;
    assert_eq!(one["status"], "running", "{one}");
    assert_eq!(
        server.exec(sandbox, "echo alive").await["stdout"],
        "alive\n"
    );
}

#[tokio::test]
async fn root_without_capabilities_cannot_mount_chown_or_open_raw_sockets() {
    let server = TestServer::start().await;
    // A custom image runs as its default user: root, but without any capability.
    let root = server.create(json!({"image": DEBIAN})).await;
    assert_eq!(root["user"], "0:0");
    let status = server
        .exec(
            &root,
            "grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status",
        )
        .await;
    assert_eq!(
        status["stdout"],
        "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n"
    );
    for (what, cmd) in [
        ("mount", "mkdir -p /mnt/x && mount -t tmpfs none /mnt/x"),
        ("chown", "touch /tmp/f && chown 1234:1234 /tmp/f"),
        (
            "raw socket",
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'",
        ),
        ("mknod", "mknod /tmp/disk b 8 0"),
        ("sysrq", "echo b > /proc/sysrq-trigger"),
        ("hostname", "hostname attacker"),
    ] {
        let out = server.exec(&root, cmd).await;
        assert_ne!(out["exitCode"], 0, "{what} succeeded: {out}");
    }

    // A setuid-root binary run by the template user grants nothing.
    let user = server.create(json!({"template": "base"})).await;
    let out = server
        .exec(&user, "ls -l /usr/local/bin/suid-id; suid-id")
        .await;
    assert!(
        out["stdout"]
            .as_str()
            .unwrap()
            .starts_with("-rwsr-xr-x 1 root root"),
        "{out}"
    );
    assert!(
        out["stdout"].as_str().unwrap().contains("uid=1000(user)"),
        "{out}"
    );
    assert!(!out["stdout"].as_str().unwrap().contains("euid=0"), "{out}");
}

#[tokio::test]
async fn a_memory_hog_is_oom_killed_and_reported_while_the_sandbox_lives() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "memoryMb": 128}))
        .await;
    let out = exec_with(
        &server,
        &sandbox,
        "python3 -c 'x = bytearray(512 * 1024 * 1024)'",
        30_000,
    )
    .await;
    assert_eq!(
        (out["exitCode"].as_i64(), out["oomKilled"].as_bool()),
        (Some(137), Some(true)),
        "{out}"
    );
    assert_eq!(out["timedOut"], false);
    still_running(&server, &sandbox).await;
    // A SIGKILL that is not about memory is not reported as one.
    let out = server.exec(&sandbox, "kill -9 $$").await;
    assert_eq!(
        (out["exitCode"].as_i64(), out["oomKilled"].as_bool()),
        (Some(137), Some(false))
    );
}

#[tokio::test]
async fn a_fork_bomb_stops_at_the_pid_limit() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "python", "pidsLimit": 32}))
        .await;
    let out = exec_with(
        &server,
        &sandbox,
        "bomb() { bomb | bomb & }; bomb; sleep 30",
        3_000,
    )
    .await;
    assert_eq!(out["timedOut"], true, "{out}");
    still_running(&server, &sandbox).await;
    let count = server.exec(&sandbox, "ls -d /proc/[0-9]* | wc -l").await;
    let processes: u32 = count["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert!(processes < 10, "the bomb's processes are gone: {processes}");
}

#[tokio::test]
async fn an_output_flood_and_oversized_files_leave_the_server_bounded() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "python"})).await;
    server.exec(&sandbox, "true").await;
    let before = rss_kib();
    // 256 MiB on each stream: the reply keeps 1 MiB of each.
    let out = exec_with(
        &server,
        &sandbox,
        "head -c 268435456 /dev/zero | tr '\\0' a & head -c 268435456 /dev/zero | tr '\\0' b >&2; wait",
        120_000,
    )
    .await;
    assert_eq!(out["truncated"], true);
    assert_eq!(out["stdout"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(out["stderr"].as_str().unwrap().len(), 1024 * 1024);
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 64,
        "the server grew by {grown_mib} MiB during a 512 MiB flood"
    );

    // Files past 10 MiB neither go in nor come out.
    let (status, _) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(&sandbox), "path": "/tmp/big",
                   "content": "a".repeat(10 * 1024 * 1024 + 1)}),
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    server
        .exec(&sandbox, "head -c 104857600 /dev/zero > /tmp/huge")
        .await;
    let (status, body) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", id(&sandbox)), ("path", "/tmp/huge")],
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("PAYLOAD_TOO_LARGE"))
    );
    still_running(&server, &sandbox).await;
}

#[tokio::test]
async fn hostile_paths_and_working_directories_are_literal_or_refused() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let sid = id(&sandbox);
    // Each path is written and read back as exactly that file, never run by a shell.
    for name in [
        "a b; rm -rf ~",
        "$(touch pwned)",
        "`touch pwned`",
        "x\nnewline",
        "'quoted'\"",
        "../../tmp/up",
    ] {
        let path = format!("/tmp/hostile/{name}");
        let (status, written) = server
            .post(
                "sandbox.writeFile",
                json!({"sandboxId": sid, "path": path, "content": "z"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{name:?}: {written}");
        let (status, read) = server
            .get("sandbox.readFile", &[("sandboxId", sid), ("path", &path)])
            .await;
        assert_eq!(
            (status, read["content"].as_str()),
            (StatusCode::OK, Some("z")),
            "{name:?}"
        );
    }
    let (_, listed) = server
        .get(
            "sandbox.listFiles",
            &[("sandboxId", sid), ("path", "/tmp/hostile")],
        )
        .await;
    assert_eq!(listed["entries"].as_array().unwrap().len(), 5, "{listed}");
    // `..` is resolved lexically: /tmp/hostile/../../tmp/up is /tmp/up.
    assert_eq!(server.exec(&sandbox, "cat /tmp/up").await["stdout"], "z");
    // Nothing was executed: no file named pwned anywhere the shell would have made it.
    let out = server
        .exec(&sandbox, "find / -name pwned -xdev 2>/dev/null | wc -l")
        .await;
    assert_eq!(out["stdout"], "0\n");
    // A cwd with metacharacters is a directory name, not a command.
    let cwd = "/tmp/a b; touch /tmp/pwned2";
    server.exec(&sandbox, &format!("mkdir -p '{cwd}'")).await;
    let (status, out) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": sid, "cmd": "pwd", "cwd": cwd}),
        )
        .await;
    assert_eq!(
        (status, out["stdout"].as_str()),
        (StatusCode::OK, Some("/tmp/a b; touch /tmp/pwned2\n"))
    );
    assert_ne!(
        server.exec(&sandbox, "test -e /tmp/pwned2").await["exitCode"],
        0
    );
    // NUL and relative paths are refused with the field named.
    for (path, field) in [("/tmp/a\u{0}b", "path"), ("relative", "path")] {
        let (status, body) = server
            .post(
                "sandbox.writeFile",
                json!({"sandboxId": sid, "path": path, "content": "z"}),
            )
            .await;
        assert_eq!(
            (status, body["issues"][0]["path"].as_str()),
            (StatusCode::BAD_REQUEST, Some(field))
        );
    }
    let (status, _) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": sid, "cmd": "pwd", "cwd": "/tmp/\u{0}"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_isolated_sandbox_has_only_loopback() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let out = server.exec(&sandbox, "ls /sys/class/net").await;
    assert_eq!(out["stdout"], "lo\n");
    // No route at all: nothing can leave, not even towards the host.
    let out = server
        .exec(&sandbox, "tail -n +2 /proc/net/route | wc -l")
        .await;
    assert_eq!(out["stdout"], "0\n");
}

/// A client that marks its request as forwarded by a replica is refused, on a single
/// server too: the mark would decide where the request is served.
#[tokio::test]
async fn a_forged_forwarding_mark_is_refused_on_a_single_server() {
    let server = TestServer::start_without_agent().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let sid = id(&sandbox);
    for mark in ["1", "v1 r 0 00"] {
        let download = server
            .client
            .get(format!("{}/api/sandbox.download", server.url))
            .query(&[("sandboxId", sid), ("path", "/etc/shadow")])
            .header("x-api-key", crate::harness::KEY)
            .header("x-sandboxd-forwarded", mark)
            .send()
            .await
            .unwrap();
        assert_eq!(download.status(), StatusCode::FORBIDDEN);
        let exec = server
            .client
            .post(format!("{}/api/sandbox.exec", server.url))
            .header("x-api-key", crate::harness::KEY)
            .header("x-sandboxd-forwarded", mark)
            .json(&json!({"sandboxId": sid, "cmd": "true"}))
            .send()
            .await
            .unwrap();
        assert_eq!(exec.status(), StatusCode::FORBIDDEN);
    }
    // Without the mark the same call is served as always.
    let (status, _) = server
        .post("sandbox.exec", json!({"sandboxId": sid, "cmd": "true"}))
        .await;
    assert_eq!(status, StatusCode::OK);
}
