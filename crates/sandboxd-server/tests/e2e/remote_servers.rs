//! Remote servers through the API: registered with a private key that never comes back
//! out, their host key learned once and pinned, sandboxes created, used and killed on
//! them over one SSH connection; members see only the servers they were given; an
//! unreachable server fails its own requests fast and leaves everything else alone.
//!
//! Also: the sandboxes' agent, placement, revival, snapshots and forks kept on their
//! server, a volume made there taking its sandboxes there, and a sandbox's changes read
//! from its engine. Each test runs behind an sshd of its own (`remote_host.rs`).

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, container, id};
use crate::remote_host::{RemoteHost, remote_dir, remote_docker_host};

/// Where sandboxd keeps its files on the test's remote server.
const REMOTE_DIR: &str = "/tmp/sandboxd-remote/files";

/// Registers `host` on `server` and tests it (which pins its host key); returns its id.
pub(crate) async fn register(server: &TestServer, host: &RemoteHost, name: &str) -> String {
    let (status, created) = server
        .post(
            "server.create",
            json!({
                "name": name,
                "address": "127.0.0.1",
                "port": host.port,
                "user": "root",
                "privateKey": RemoteHost::client_key(),
                "remoteDir": REMOTE_DIR,
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let server_id = created["serverId"].as_str().unwrap().to_owned();
    let (status, tested) = server
        .post("server.test", json!({"serverId": server_id}))
        .await;
    assert_eq!(status, StatusCode::OK, "{tested}");
    assert_eq!(tested["reachable"], true, "{tested}");
    server_id
}

/// Whether a container exists on the remote engine.
pub(crate) fn on_remote(container_id: &str) -> bool {
    std::process::Command::new("docker")
        .args(["-H", &remote_docker_host(), "inspect", container_id])
        .output()
        .unwrap()
        .status
        .success()
}

fn on_local(container_id: &str) -> bool {
    std::process::Command::new("docker")
        .args(["inspect", container_id])
        .output()
        .unwrap()
        .status
        .success()
}

#[tokio::test]
async fn a_sandbox_runs_on_a_remote_server_through_the_api() {
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let (status, created) = server
        .post(
            "server.create",
            json!({
                "name": "edge-1",
                "address": "127.0.0.1",
                "port": host.port,
                "privateKey": RemoteHost::client_key(),
                "remoteDir": REMOTE_DIR,
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(created["hostKey"], Value::Null);
    assert_eq!(created["health"], "idle");
    let server_id = created["serverId"].as_str().unwrap().to_owned();

    // Nothing connects before the host key is pinned.
    let (status, refused) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "python", "serverId": server_id}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("server.test"));

    // The test learns the key and pins it.
    let (status, tested) = server
        .post("server.test", json!({"serverId": server_id}))
        .await;
    assert_eq!(status, StatusCode::OK, "{tested}");
    assert_eq!(tested["reachable"], true, "{tested}");
    assert_eq!(tested["hostKeyLearned"], true);
    assert_eq!(
        tested["hostKeyFingerprint"],
        RemoteHost::host_key().fingerprint()
    );
    assert!(tested["cpus"].as_i64().unwrap() > 0);
    let (_, again) = server
        .post("server.test", json!({"serverId": server_id}))
        .await;
    assert_eq!(again["hostKeyLearned"], false, "learned once");

    let sandbox = server
        .create(json!({"template": "python", "serverId": server_id}))
        .await;
    assert_eq!(sandbox["serverId"], server_id.as_str());
    let container_id = container(&sandbox).to_owned();
    assert!(
        on_remote(&container_id),
        "the container is on the remote engine"
    );
    assert!(!on_local(&container_id), "and not on the local one");

    // A streamed file goes in and out through the server's engine over SSH.
    let content = crate::transfers::noise(3 << 20, 9);
    let (status, done) = crate::transfers::upload(
        &server,
        &sandbox,
        &[("path", "/home/user/remote.bin")],
        content.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    let (status, _, back) =
        crate::transfers::download(&server, &sandbox, &[("path", "/home/user/remote.bin")]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(back == content, "the file came back changed");

    // Its agent connected back over the server's SSH connection and serves it.
    assert!(
        server.service.agents().hello(id(&sandbox)).is_some(),
        "the remote sandbox's agent is connected"
    );
    let agent_served = || {
        server
            .service
            .path_counts()
            .agent
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let before = agent_served();
    let out = server.exec(&sandbox, "echo remote $((6*7))").await;
    assert_eq!(out["stdout"], "remote 42\n", "{out}");
    assert_eq!(agent_served(), before + 1, "served by the agent");
    // What only the agent does works there too: a background process.
    let (status, process) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox), "cmd": "echo from the background"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{process}");
    let (status, waited) = server
        .post(
            "sandbox.processWait",
            json!({"sandboxId": id(&sandbox), "processId": process["processId"], "timeoutMs": 5000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{waited}");
    assert_eq!(waited["exitCode"], 0, "{waited}");
    // The agent's socket directory and binary are on the server, where sandboxd put them.
    let dir = std::path::Path::new(REMOTE_DIR);
    assert!(
        dir.join("agents")
            .join(id(&sandbox))
            .join("agent.sock")
            .exists()
    );
    // The agent is there under its digest, execute-only.
    let local_agent = std::fs::read_dir(server.data_dir().join("bin"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let digest = std::process::Command::new("sha256sum")
        .arg(&local_agent)
        .output()
        .unwrap();
    let digest = String::from_utf8_lossy(&digest.stdout)[..16].to_owned();
    let remote_agent = dir.join("bin").join(format!("sandboxd-agent-{digest}"));
    let mode = std::fs::metadata(&remote_agent).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o111,
        "{}",
        remote_agent.display()
    );
    let (status, _) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(&sandbox), "path": "/tmp/dir/note.txt", "content": "hello"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, read) = server
        .get(
            "sandbox.readFile",
            &[("sandboxId", id(&sandbox)), ("path", "/tmp/dir/note.txt")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["content"], "hello");
    let (status, listed) = server
        .get(
            "sandbox.listFiles",
            &[("sandboxId", id(&sandbox)), ("path", "/tmp/dir")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["entries"][0]["name"], "note.txt");

    let (_, one) = server.get("server.one", &[("serverId", &server_id)]).await;
    assert_eq!(one["health"], "reachable", "{one}");
    assert_eq!(one["capacitySource"], "engine");
    assert_eq!(one["reserved"]["cpu"], sandbox["cpu"]);

    // A server with sandboxes on it is not removed.
    let (status, _) = server
        .post("server.remove", json!({"serverId": server_id}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);

    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(15);
    while on_remote(&container_id) || dir.join("agents").join(id(&sandbox)).exists() {
        assert!(
            Instant::now() < deadline,
            "the remote container or the agent's directory was not removed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _) = server
        .post("server.remove", json!({"serverId": server_id}))
        .await;
    assert_eq!(status, StatusCode::OK);

    // The private key never comes back out: not in any answer, not in the audit log.
    let (_, all) = server.get("server.all", &[]).await;
    let (_, audit) = server.get("audit.list", &[]).await;
    for body in [&created, &tested, &one, &all, &audit] {
        assert!(!body.to_string().contains("PRIVATE KEY"), "{body}");
    }
    let logged = audit.to_string();
    for action in ["server.create", "server.test", "server.remove"] {
        assert!(logged.contains(action), "{action} audited");
    }
}

#[tokio::test]
async fn a_wrong_host_key_is_refused_and_members_use_only_their_servers() {
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let wrong = std::fs::read_to_string(remote_dir().join("client_key.pub")).unwrap();
    let (status, pinned_wrong) = server
        .post(
            "server.create",
            json!({
                "name": "impostor",
                "address": "127.0.0.1",
                "port": host.port,
                "privateKey": RemoteHost::client_key(),
                "hostKey": wrong.trim(),
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{pinned_wrong}");
    let wrong_id = pinned_wrong["serverId"].as_str().unwrap().to_owned();
    let (_, tested) = server
        .post("server.test", json!({"serverId": wrong_id}))
        .await;
    assert_eq!(tested["reachable"], false, "{tested}");
    assert!(
        tested["error"].as_str().unwrap().contains("host key"),
        "{tested}"
    );
    let (status, refused) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "python", "serverId": wrong_id}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");

    // Bad keys are refused on the way in, with the field named.
    let (status, bad) = server
        .post(
            "server.create",
            json!({"name": "bad", "address": "127.0.0.1", "privateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert_eq!(bad["issues"][0]["path"], "privateKey", "{bad}");

    let good_id = register(&server, &host, "good").await;
    let (_, member) = server
        .post(
            "member.create",
            json!({"name": "m", "permissions": ["service:create", "service:read", "deployment:create"], "projectIds": [server.project_id]}),
        )
        .await;
    let user_id = member["userId"].as_str().unwrap().to_owned();
    let (_, key) = server
        .post("apiKey.create", json!({"name": "m", "userId": user_id}))
        .await;
    let key = key["secret"].as_str().unwrap().to_owned();
    let (status, none) = server.get_with_key("server.all", &key, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        none,
        json!([]),
        "a member sees no server they were not given"
    );
    let create = json!({"environmentId": server.env_id, "template": "python", "serverId": good_id});
    let (status, _) = server
        .post_with_key("sandbox.create", Some(&key), create.clone())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = server
        .post_with_key(
            "server.create",
            Some(&key),
            json!({"name": "mine", "address": "127.0.0.1", "privateKey": RemoteHost::client_key()}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "members do not add servers");

    let (status, _) = server
        .post(
            "member.update",
            json!({"userId": user_id, "serverIds": [good_id]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, listed) = server.get_with_key("server.all", &key, &[]).await;
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["serverId"], good_id.as_str());
    let (status, sandbox) = server
        .post_with_key("sandbox.create", Some(&key), create)
        .await;
    assert_eq!(status, StatusCode::OK, "{sandbox}");
}

#[tokio::test]
async fn an_unreachable_server_fails_its_own_requests_fast_and_comes_back() {
    let server = TestServer::start().await;
    let mut host = RemoteHost::start();
    let server_id = register(&server, &host, "flaky").await;
    let remote = server
        .create(json!({"template": "python", "serverId": server_id}))
        .await;
    let local = server.create(json!({"template": "python"})).await;

    host.cut();
    let started = Instant::now();
    let (status, body) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&remote), "cmd": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("unreachable"),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // The local engine is not held up by the remote one.
    let started = Instant::now();
    let out = server.exec(&local, "echo still").await;
    assert_eq!(out["stdout"], "still\n");
    assert!(started.elapsed() < Duration::from_secs(2));

    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, one) = server.get("server.one", &[("serverId", &server_id)]).await;
        if one["health"] == "unreachable" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never reported unreachable: {one}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // /metrics reports it too.
    let metrics = server.metrics().await;
    let reported = metrics.lines().any(|line| {
        line.starts_with("sandboxd_server_health{")
            && line.contains(&format!("server=\"{server_id}\""))
            && line.contains("state=\"unreachable\"")
            && line.ends_with(" 1")
    });
    assert!(
        reported,
        "no unreachable health for {server_id} in {metrics}"
    );

    // Reconcile skips it: its sandbox is reported, not killed blindly.
    let report = server.service.duties().reconcile_once().await.unwrap();
    assert_eq!(report.unreachable_servers, std::slice::from_ref(&server_id));
    let (_, row) = server
        .get("sandbox.one", &[("sandboxId", id(&remote))])
        .await;
    assert_eq!(row["status"], "running", "{row}");

    host.resume();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, out) = server
            .post(
                "sandbox.exec",
                json!({"sandboxId": id(&remote), "cmd": "echo back"}),
            )
            .await;
        if status == StatusCode::OK {
            assert_eq!(out["stdout"], "back\n");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not come back: {out}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The agent's socket was forwarded again on the new connection: it reconnects.
    let deadline = Instant::now() + Duration::from_secs(15);
    while server.service.agents().hello(id(&remote)).is_none() {
        assert!(Instant::now() < deadline, "the agent did not reconnect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&remote), "cmd": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "the agent serves again");
    let report = server.service.duties().reconcile_once().await.unwrap();
    assert!(report.unreachable_servers.is_empty(), "{report:?}");
    assert!(report.marked_error.is_empty(), "{report:?}");
}

#[tokio::test]
async fn placement_spreads_sandboxes_by_room_and_names_the_shortfall() {
    let server = TestServer::start_with(|config| config.placement = true).await;
    let mut host = RemoteHost::start();
    let (status, created) = server
        .post(
            "server.create",
            json!({
                "name": "roomy",
                "address": "127.0.0.1",
                "port": host.port,
                "privateKey": RemoteHost::client_key(),
                "remoteDir": REMOTE_DIR,
                "cpu": 4,
                "memoryMb": 4096,
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let server_id = created["serverId"].as_str().unwrap().to_owned();
    let (_, tested) = server
        .post("server.test", json!({"serverId": server_id}))
        .await;
    assert_eq!(tested["reachable"], true, "{tested}");

    // Ten sandboxes, no server named: they go where the most room is left.
    let mut remote = 0;
    let mut local = 0;
    for _ in 0..10 {
        let sandbox = server
            .create(json!({"template": "python", "cpu": 0.5, "memoryMb": 256}))
            .await;
        match sandbox["serverId"].as_str() {
            Some(id) => {
                assert_eq!(id, server_id);
                remote += 1;
            }
            None => local += 1,
        }
    }
    assert!(
        remote > 0 && local > 0,
        "both engines used: {remote} remote, {local} local"
    );
    let (_, one) = server.get("server.one", &[("serverId", &server_id)]).await;
    assert!(one["reserved"]["cpu"].as_f64().unwrap() <= 4.0, "{one}");
    assert_eq!(
        one["reserved"]["cpu"].as_f64().unwrap(),
        0.5 * f64::from(remote)
    );

    // What fits nowhere is refused, the shortfall named.
    let (status, refused) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "python", "cpu": 0.5, "memoryMb": 250000}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("no server has room"), "{message}");
    assert!(message.contains("250000 MiB"), "{message}");

    // An unreachable server is left out: the next sandbox goes to the local engine.
    host.cut();
    let started = Instant::now();
    let sandbox = server
        .create(json!({"template": "python", "cpu": 0.1, "memoryMb": 64}))
        .await;
    assert_eq!(sandbox["serverId"], Value::Null, "{sandbox}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn streaming_exec_a_terminal_and_a_context_work_on_a_remote_server() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;

    use crate::harness::KEY;
    use crate::stream::{connect_to, next, send};

    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "interactive").await;
    let sandbox = server
        .create(json!({"template": "base", "serverId": server_id}))
        .await;

    // Streaming exec: output as it comes, then the exit.
    let query = format!("?sandboxId={}", id(&sandbox));
    let mut socket = connect_to(&server, "/sandbox-exec", &query, Some(KEY)).await;
    send(
        &mut socket,
        json!({"type": "exec", "cmd": "echo one; sleep 1; echo two"}),
    )
    .await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "ready");
    let started = Instant::now();
    assert_eq!(
        next(&mut socket).await.unwrap(),
        json!({"type": "stdout", "data": "one\n"})
    );
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "streamed, not buffered"
    );
    let mut rest = String::new();
    loop {
        let message = next(&mut socket).await.unwrap();
        match message["type"].as_str().unwrap() {
            "stdout" => rest.push_str(message["data"].as_str().unwrap()),
            "exit" => {
                assert_eq!(message["exitCode"], 0, "{message}");
                break;
            }
            other => panic!("unexpected {other}: {message}"),
        }
    }
    assert_eq!(rest, "two\n");
    drop(socket);

    // A terminal.
    let mut tty = connect_to(&server, "/sandbox-pty", &query, Some(KEY)).await;
    tty.send(Message::Binary(b"echo $((6*7))x\n".to_vec().into()))
        .await
        .unwrap();
    let mut output = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !output.windows(3).any(|w| w == b"42x") {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, tty.next()).await {
            Ok(Some(Ok(Message::Binary(bytes)))) => output.extend_from_slice(&bytes),
            Ok(Some(Ok(_))) => {}
            other => panic!(
                "terminal ended: {other:?} ({:?})",
                String::from_utf8_lossy(&output)
            ),
        }
    }
    drop(tty);

    // An interpreter context keeps its state between runs.
    let (status, context) = server
        .post(
            "sandbox.contextCreate",
            json!({"sandboxId": id(&sandbox), "language": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    for (code, expected) in [("x = 41", Value::Null), ("x + 1", json!("42"))] {
        let (status, ran) = server
            .post(
                "sandbox.contextRun",
                json!({"sandboxId": id(&sandbox), "contextId": context["contextId"], "code": code, "timeoutMs": 10000}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{ran}");
        assert_eq!(ran["result"], expected, "{ran}");
    }
}

#[tokio::test]
async fn a_preview_reaches_an_app_on_a_remote_server_over_its_agents_connection() {
    use crate::harness::KEY;

    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "previews").await;
    let sandbox = server
        .create(json!({"template": "base", "serverId": server_id}))
        .await;
    assert_eq!(sandbox["networkMode"], "isolated");
    server
        .exec(
            &sandbox,
            "mkdir -p /tmp/site && echo 'served remotely' > /tmp/site/index.html",
        )
        .await;
    let (status, started) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox), "cmd": "cd /tmp/site && exec python3 -m http.server 8000 --bind 127.0.0.1"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let url = format!(
        "{}{}",
        server.url,
        sandboxd_core::ports::preview_path(id(&sandbox), 8000)
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let page = loop {
        let answer = server
            .client
            .get(&url)
            .header("x-api-key", KEY)
            .send()
            .await
            .unwrap();
        if answer.status() == StatusCode::OK {
            break answer.text().await.unwrap();
        }
        assert_eq!(
            answer.status(),
            StatusCode::BAD_GATEWAY,
            "while the app starts"
        );
        assert!(Instant::now() < deadline, "the app did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(page, "served remotely\n");
}

/// What the remote engine's inspect of a container says in `format`.
fn remote_inspect(container: &str, format: &str) -> String {
    let out = std::process::Command::new("docker")
        .args([
            "-H",
            &remote_docker_host(),
            "inspect",
            "--format",
            format,
            container,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test]
async fn a_container_stopped_on_a_remote_server_is_started_again_before_any_request() {
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "revive").await;
    let sandbox = server
        .create(json!({"template": "python", "serverId": server_id}))
        .await;
    let container_id = container(&sandbox).to_owned();
    let state = || remote_inspect(&container_id, "{{.State.Running}} {{.State.StartedAt}}");
    let before = state();
    // The watch on the server's deaths starts within a couple of seconds of its
    // connection.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let killed = std::process::Command::new("docker")
        .args(["-H", &remote_docker_host(), "kill", &container_id])
        .output()
        .unwrap();
    assert!(killed.status.success(), "{killed:?}");

    // Started again (a new start time), with no request made meanwhile.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = state();
        if now.starts_with("true ") && now != before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the remote container was not started again: {now}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = server.exec(&sandbox, "echo alive").await;
    assert_eq!(out["stdout"], "alive\n");
}

#[tokio::test]
async fn a_sandbox_on_a_remote_server_pauses_at_its_idle_timeout_and_resumes_with_its_processes() {
    use crate::pause::{
        count, counted, one, process_running, start_counter, uses_no_cpu, wait_status,
    };
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "pauses").await;
    let sandbox = server
        .create(json!({"template": "base", "serverId": server_id, "timeoutMs": 10_000, "autoPause": true}))
        .await;
    let process = start_counter(&server, &sandbox).await;
    let before = counted(&server, &sandbox, 500_000).await;
    wait_status(&server, &sandbox, "paused", Duration::from_secs(30)).await;
    // The row moves first, then the engine freezes the container.
    let frozen = || remote_inspect(container(&sandbox), "{{.State.Paused}}") == "true";
    let deadline = Instant::now() + Duration::from_secs(10);
    while !frozen() {
        assert!(
            Instant::now() < deadline,
            "the remote container was never frozen"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    uses_no_cpu(&server, &sandbox).await;
    // A read resumes it; the same process counted on.
    let after = count(&server, &sandbox).await;
    assert!(after >= before, "{before} → {after}");
    assert_eq!(one(&server, &sandbox).await["status"], "running");
    assert!(process_running(&server, &sandbox, &process).await);
    // Paused and resumed by asking, on the remote engine.
    let (status, paused) = server
        .post("sandbox.pause", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(
        (status, &paused["status"]),
        (StatusCode::OK, &json!("paused")),
        "{paused}"
    );
    let (status, resumed) = server
        .post("sandbox.resume", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(
        (status, &resumed["status"]),
        (StatusCode::OK, &json!("running")),
        "{resumed}"
    );
    assert!(process_running(&server, &sandbox, &process).await);
    server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
}

/// Whether an image exists on the remote engine (`Some(host)`) or the local one.
pub(crate) fn image_on(host: Option<&str>, image: &str) -> bool {
    let mut docker = std::process::Command::new("docker");
    if let Some(host) = host {
        docker.args(["-H", host]);
    }
    docker
        .args(["image", "inspect", image])
        .output()
        .unwrap()
        .status
        .success()
}

#[tokio::test]
async fn a_snapshot_of_a_sandbox_on_a_remote_server_stays_there_and_so_do_its_sandboxes_and_its_changes_are_read_there()
 {
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "snapshots").await;
    let remote = remote_docker_host();
    let sandbox = server
        .create(
            json!({"template": "base", "serverId": server_id, "envVars": "TOKEN=remote-secret"}),
        )
        .await;
    let wrote = server
        .exec(&sandbox, "echo from-remote > /home/user/f && echo $TOKEN")
        .await;
    assert_eq!(wrote["stdout"], "remote-secret\n", "{wrote}");
    // What it changed, read from the remote engine.
    let (status, changed) = server
        .get("sandbox.changes", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    let entry = &changed["changes"][0];
    assert_eq!(changed["changes"].as_array().unwrap().len(), 1, "{changed}");
    assert_eq!(
        (
            &entry["path"],
            &entry["kind"],
            &entry["type"],
            &entry["size"]
        ),
        (
            &json!("/home/user/f"),
            &json!("added"),
            &json!("file"),
            &json!(12)
        ),
        "{changed}"
    );
    let (status, taken) = server
        .post("sandbox.snapshot", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{taken}");
    assert_eq!(taken["serverId"], json!(server_id));
    let image = format!(
        "sandboxd-snapshots:{}",
        taken["snapshotId"].as_str().unwrap()
    );
    assert!(image_on(Some(&remote), &image), "on the remote engine");
    assert!(!image_on(None, &image), "not on the local one");

    // A sandbox from it runs on that server without being told; elsewhere is refused.
    let made = server
        .create(json!({"snapshotId": taken["snapshotId"]}))
        .await;
    assert_eq!(made["serverId"], json!(server_id));
    assert!(on_remote(container(&made)));
    let read = server
        .exec(&made, "cat /home/user/f; echo ${TOKEN:-none}")
        .await;
    assert_eq!(read["stdout"], "from-remote\nnone\n", "{read}");
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "snapshotId": taken["snapshotId"], "serverId": "elsewhere000000000000"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // Forks run there too.
    let (status, forked) = server
        .post(
            "sandbox.fork",
            json!({"sandboxId": id(&sandbox), "count": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{forked}");
    for fork in forked["sandboxes"].as_array().unwrap() {
        assert_eq!(fork["serverId"], json!(server_id));
        let read = server.exec(fork, "cat /home/user/f").await;
        assert_eq!(read["stdout"], "from-remote\n", "{read}");
        server
            .post("sandbox.kill", json!({"sandboxId": id(fork)}))
            .await;
    }
    server
        .post("sandbox.kill", json!({"sandboxId": id(&made)}))
        .await;
    for snapshot in [&taken, &forked["snapshot"]] {
        let (status, body) = server
            .post(
                "snapshot.remove",
                json!({"snapshotId": snapshot["snapshotId"]}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    assert!(
        !image_on(Some(&remote), &image),
        "removed from the remote engine"
    );
    server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
}

#[tokio::test]
async fn a_changed_server_keeps_or_regains_its_sandboxes_agents() {
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "changing").await;
    let sandbox = server
        .create(json!({"template": "python", "serverId": server_id}))
        .await;
    assert!(server.service.agents().hello(id(&sandbox)).is_some());

    // A new name or capacity does not touch the connection.
    let (status, _) = server
        .post(
            "server.update",
            json!({"serverId": server_id, "name": "renamed", "cpu": 8}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(server.service.agents().hello(id(&sandbox)).is_some());

    // A new way in (the same key given again) makes the connection again: commands keep
    // working at once, and the agent is back within seconds, with no reconcile pass
    // (the harness runs one an hour).
    let (status, _) = server
        .post(
            "server.update",
            json!({"serverId": server_id, "hostKey": RemoteHost::host_key().to_openssh()}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let out = server.exec(&sandbox, "echo still").await;
    assert_eq!(out["stdout"], "still\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let back = server.service.agents().hello(id(&sandbox));
        if back.is_some() && server.service.agents().is_listening(id(&sandbox)) {
            break;
        }
        assert!(Instant::now() < deadline, "the agent did not come back");
    }
    let (status, _) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox), "cmd": "true"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "the agent serves");
}

/// Ready members of a server's pool as `server.one` reports them.
async fn warm_ready(server: &TestServer, server_id: &str, template: &str) -> u64 {
    let (status, view) = server.get("server.one", &[("serverId", server_id)]).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    view["warmReady"][template].as_u64().unwrap_or(0)
}

async fn wait_warm(server: &TestServer, server_id: &str, template: &str, ready: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while warm_ready(server, server_id, template).await != ready {
        assert!(
            Instant::now() < deadline,
            "the pool of {template} on {server_id} never had {ready} ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_remote_server_keeps_its_own_warm_pool() {
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "warm").await;
    let (status, bad) = server
        .post(
            "server.update",
            json!({"serverId": server_id, "warmPools": {"cobol": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    let (status, view) = server
        .post(
            "server.update",
            json!({"serverId": server_id, "warmPools": {"python": 2}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["warmPools"], json!({"python": 2}));
    wait_warm(&server, &server_id, "python", 2).await;

    // A create of that template on that server claims a member of the remote engine;
    // one on the local engine does not touch the remote pool (there is no local one).
    let started = Instant::now();
    let claimed = server
        .create(json!({"template": "python", "serverId": server_id, "envVars": "WHERE=remote"}))
        .await;
    let claim_ms = started.elapsed().as_millis();
    let container_id = claimed["containerId"].as_str().unwrap().to_owned();
    assert!(
        on_remote(&container_id),
        "the claimed member is on the remote engine"
    );
    assert_eq!(claimed["serverId"], json!(server_id));
    let out = server.exec(&claimed, "echo $WHERE; id -u").await;
    assert_eq!(out["stdout"], "remote\n1000\n", "{out}");
    assert!(
        server.service.agents().hello(id(&claimed)).is_some(),
        "a claimed member keeps its agent"
    );
    let local = server.create(json!({"template": "python"})).await;
    assert!(on_local(local["containerId"].as_str().unwrap()));
    // Refilled in the background.
    wait_warm(&server, &server_id, "python", 2).await;
    eprintln!("remote warm claim took {claim_ms} ms");

    // A smaller pool is trimmed; removing the server (once its sandboxes are killed)
    // removes the members left: nothing stays on the remote engine.
    let (status, _) = server
        .post(
            "server.update",
            json!({"serverId": server_id, "warmPools": {"python": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    wait_warm(&server, &server_id, "python", 1).await;
    for sandbox in [&claimed, &local] {
        let (status, _) = server
            .post("sandbox.kill", json!({"sandboxId": id(sandbox)}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, removed) = server
        .post("server.remove", json!({"serverId": server_id}))
        .await;
    assert_eq!(status, StatusCode::OK, "{removed}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left = std::process::Command::new("docker")
            .args([
                "-H",
                &remote_docker_host(),
                "ps",
                "-aq",
                "--filter",
                &format!("label=sandboxd.instance={}", server.instance()),
            ])
            .output()
            .unwrap();
        if left.stdout.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "containers left on the remote engine: {}",
            String::from_utf8_lossy(&left.stdout)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The operator's network is not a tenant's to probe: by default a server at a loopback
/// address is refused when it is registered, a name that resolves there is refused
/// before any connection is made, and what a tenant is told says nothing of what
/// answered; the operator's `allowed_networks` lets it through.
#[tokio::test]
async fn a_server_on_the_operators_network_is_refused_unless_the_operator_allows_it() {
    let server = TestServer::start_with(|config| {
        config.servers.allowed_networks.clear();
    })
    .await;
    let host = RemoteHost::start();
    let body = |address: &str, port: u16| {
        json!({
            "name": format!("probe-{address}-{port}"),
            "address": address,
            "port": port,
            "privateKey": RemoteHost::client_key(),
            "hostKey": RemoteHost::host_key().to_openssh(),
            "remoteDir": REMOTE_DIR,
        })
    };
    for address in ["127.0.0.1", "::1", "169.254.169.254", "10.0.0.1"] {
        let (status, refused) = server.post("server.create", body(address, host.port)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{address}: {refused}");
        assert!(
            refused["message"]
                .as_str()
                .unwrap()
                .contains("allowed_networks"),
            "{refused}"
        );
    }
    // A name is resolved when a connection is made, and refused then: sshd never sees
    // a connection, and an open port and a closed one give the same answer.
    let closed = crate::harness::free_port();
    let mut told = Vec::new();
    for port in [host.port, closed] {
        let (status, created) = server.post("server.create", body("localhost", port)).await;
        assert_eq!(status, StatusCode::OK, "{created}");
        let (status, tested) = server
            .post("server.test", json!({"serverId": created["serverId"]}))
            .await;
        assert_eq!(status, StatusCode::OK, "{tested}");
        assert_eq!(tested["reachable"], false, "{tested}");
        told.push(tested["error"].as_str().unwrap().to_owned());
        let (status, refused) = server
            .post(
                "sandbox.create",
                json!({"environmentId": server.env_id, "template": "python", "serverId": created["serverId"]}),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    }
    assert_eq!(told[0], told[1], "open and closed ports look alike");
    assert!(told[0].contains("allowed_networks"), "{told:?}");
    assert_eq!(host.sessions(), 0, "no connection was made");

    // Allowed by the operator (the harness's default: loopback), the same host works,
    // and a port with nothing behind it says only that it could not be reached.
    let allowed = TestServer::start().await;
    let id = register(&allowed, &host, "allowed").await;
    assert!(!id.is_empty());
    let (_, created) = allowed
        .post("server.create", body("127.0.0.1", closed))
        .await;
    let (_, tested) = allowed
        .post("server.test", json!({"serverId": created["serverId"]}))
        .await;
    assert_eq!(tested["reachable"], false, "{tested}");
    assert_eq!(
        tested["error"], "the server could not be reached",
        "{tested}"
    );
}

/// By default only the installation's first organization (the operator's) registers
/// servers; `[servers] registration = "admins"` lets every organization's admins.
#[tokio::test]
async fn only_the_operator_registers_servers_unless_every_organization_may() {
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let spec = json!({
        "name": "theirs",
        "address": "127.0.0.1",
        "port": host.port,
        "privateKey": RemoteHost::client_key(),
        "remoteDir": REMOTE_DIR,
    });
    let (status, other) = server
        .post("organization.create", json!({"name": "tenant"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let tenant = other["apiKey"]["secret"].as_str().unwrap().to_owned();
    let (status, refused) = server
        .post_with_key("server.create", Some(&tenant), spec.clone())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("registration"),
        "{refused}"
    );
    let (status, mine) = server.post("server.create", spec.clone()).await;
    assert_eq!(status, StatusCode::OK, "{mine}");

    let open = TestServer::start_with(|config| {
        config.servers.registration = "admins".into();
    })
    .await;
    let (_, other) = open
        .post("organization.create", json!({"name": "tenant"}))
        .await;
    let tenant = other["apiKey"]["secret"].as_str().unwrap().to_owned();
    let (status, theirs) = open
        .post_with_key("server.create", Some(&tenant), spec)
        .await;
    assert_eq!(status, StatusCode::OK, "{theirs}");
}

/// An `allowlist` sandbox on a remote server reaches its hosts from that server: the
/// connection to the host is made by the server's SSH daemon (a direct-tcpip channel
/// over the pooled connection), as `ss` shows of the connection's owner, never by
/// sandboxd's own process.
#[tokio::test]
async fn egress_of_a_sandbox_on_a_remote_server_leaves_from_that_server() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let far = tokio::net::TcpListener::bind(("127.0.0.2", 0))
        .await
        .unwrap();
    let port = far.local_addr().unwrap().port();
    let (peers, mut peer) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, from)) = far.accept().await {
            let _ = peers.send(from);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                // Half an answer, then the connection is held while the test looks.
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
                    .await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    let server = TestServer::start_with(|config| {
        config.egress.hosts = [("far.test".to_owned(), "127.0.0.2".to_owned())].into();
        config.egress.allowed_networks = vec!["127.0.0.2/32".into()];
    })
    .await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "egress").await;
    let sandbox = server
        .create(
            json!({"template": "base", "serverId": server_id, "networkMode": "allowlist",
            "egress": {"allow": [format!("far.test:{port}")]}}),
        )
        .await;
    let (status, started) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&sandbox),
                "cmd": format!("curl -sS -m 25 --proxytunnel http://far.test:{port}/remote")}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let from = tokio::time::timeout(Duration::from_secs(20), peer.recv())
        .await
        .expect("the host was reached")
        .unwrap();
    let owner = std::process::Command::new("ss")
        .args(["-Htnp", "state", "established", "src", &from.to_string()])
        .output()
        .expect("ss");
    let owner = String::from_utf8_lossy(&owner.stdout);
    assert!(
        owner.contains("\"sshd"),
        "the server's sshd connected: {owner}"
    );

    // The log says where it went.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, log) = server
            .get("sandbox.egressLog", &[("sandboxId", id(&sandbox))])
            .await;
        if log["entries"][0]["decision"] == "allowed" {
            assert_eq!(log["entries"][0]["address"], format!("127.0.0.2:{port}"));
            break;
        }
        assert!(Instant::now() < deadline, "{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn volume_on(host: Option<&str>, name: &str) -> bool {
    let mut docker = std::process::Command::new("docker");
    if let Some(host) = host {
        docker.args(["-H", host]);
    }
    docker
        .args(["volume", "inspect", name])
        .output()
        .unwrap()
        .status
        .success()
}

#[tokio::test]
async fn a_volume_on_a_remote_server_takes_its_sandboxes_there() {
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "volumes").await;
    let remote = remote_docker_host();
    let (status, volume) = server
        .post(
            "volume.create",
            json!({"name": "far", "serverId": server_id}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{volume}");
    let vid = volume["volumeId"].as_str().unwrap();
    let name = format!("sandboxd-vol-{vid}");
    assert!(volume_on(Some(&remote), &name), "on the remote engine");
    assert!(!volume_on(None, &name), "not on the local one");

    // A sandbox that mounts it runs on its server without being told.
    let writer = server
        .create(json!({"template": "base", "volumes": [{"volumeId": vid, "path": "/data"}]}))
        .await;
    assert_eq!(writer["serverId"], json!(server_id));
    assert!(on_remote(container(&writer)));
    let wrote = server
        .exec(&writer, "echo far > /data/f && stat -c %U /data")
        .await;
    assert_eq!(wrote["stdout"], "user\n", "{wrote}");
    server
        .post("sandbox.kill", json!({"sandboxId": id(&writer)}))
        .await;
    let reader = server
        .create(json!({"template": "base", "volumes": [{"volumeId": vid, "path": "/in", "readOnly": true}]}))
        .await;
    let read = server.exec(&reader, "cat /in/f").await;
    assert_eq!(read["stdout"], "far\n", "{read}");

    // Volumes of two servers cannot be mounted together; nor one elsewhere.
    let (status, local) = server.post("volume.create", json!({"name": "near"})).await;
    assert_eq!(status, StatusCode::OK, "{local}");
    for body in [
        json!({"environmentId": server.env_id, "template": "base", "volumes": [
            {"volumeId": vid, "path": "/a"}, {"volumeId": local["volumeId"], "path": "/b"}]}),
        json!({"environmentId": server.env_id, "template": "base", "serverId": server_id,
            "volumes": [{"volumeId": local["volumeId"], "path": "/b"}]}),
    ] {
        let (status, answer) = server.post("sandbox.create", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    }
    server
        .post("sandbox.kill", json!({"sandboxId": id(&reader)}))
        .await;
    // The server is not removed while a volume lives there.
    let (status, body) = server
        .post("server.remove", json!({"serverId": server_id}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("1 volumes"),
        "{body}"
    );
    for volume in [&volume, &local] {
        let (status, body) = server
            .post("volume.remove", json!({"volumeId": volume["volumeId"]}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    assert!(
        !volume_on(Some(&remote), &name),
        "removed from the remote engine"
    );
}

/// A gVisor sandbox on a remote server: its agent (the readable copy uploaded beside
/// the execute-only one) serves it there.
#[tokio::test]
async fn a_gvisor_sandbox_runs_on_a_remote_server() {
    let server = TestServer::start().await;
    let host = RemoteHost::start();
    let server_id = register(&server, &host, "gvisor").await;
    let sandbox = server
        .create(json!({"template": "base", "serverId": server_id, "isolation": "gvisor"}))
        .await;
    assert_eq!(sandbox["isolation"], "gvisor");
    let inside = server.exec(&sandbox, "dmesg | head -1").await;
    assert!(
        inside["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("Starting gVisor"),
        "{inside}"
    );
    let (status, body) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(&sandbox), "path": "/tmp/far.txt", "content": "far"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        server.exec(&sandbox, "cat /tmp/far.txt").await["stdout"],
        "far"
    );
    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK);
}
