//! Two `sandboxd serve` replicas on one PostgreSQL database and one engine, as an
//! operator runs them: any replica serves any sandbox, a key revoked through one is
//! refused by the other, a replica killed with SIGKILL leaves its duties to the other,
//! and racing creates and kills lose nothing and leak nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::postgres::TestDatabase;
use common::{KEY, RunningServer};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

/// Fast passes, so that the bounds below are seconds: the reaper every second,
/// reconcile every two.
const FAST: [(&str, &str); 2] = [
    ("SANDBOXD_REAPER_INTERVAL_SECS", "1"),
    ("SANDBOXD_RECONCILE_INTERVAL_SECS", "2"),
];

/// The series of requests a replica forwarded to the holder.
const FORWARDED: &str = "sandboxd_forwarded_requests_total{outcome=\"forwarded\"}";

async fn call(server: &RunningServer, key: &str, procedure: &str, body: Value) -> (u16, Value) {
    server.post(key, procedure, body).await
}

async fn get(server: &RunningServer, key: &str, path: &str) -> (u16, Value) {
    server.get(key, path).await
}

async fn ok(server: &RunningServer, procedure: &str, body: Value) -> Value {
    let (status, answer) = call(server, KEY, procedure, body).await;
    assert_eq!(status, 200, "{procedure}: {answer}");
    answer
}

async fn one(server: &RunningServer, id: &str) -> Value {
    let (status, sandbox) = get(server, KEY, &format!("sandbox.one?sandboxId={id}")).await;
    assert_eq!(status, 200, "{sandbox}");
    sandbox
}

async fn create(server: &RunningServer, extra: Value) -> String {
    let mut body = json!({"environmentId": server.env_id, "image": "sandboxd-local/busybox"});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    ok(server, "sandbox.create", body).await["sandboxId"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn containers_of(sandbox_id: &str) -> Vec<String> {
    let listed = std::process::Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=sandboxd.sandboxId={sandbox_id}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn containers_in(env_id: &str) -> usize {
    let listed = std::process::Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=sandboxd.environmentId={env_id}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .count()
}

async fn eventually(what: &str, within: Duration, mut done: impl AsyncFnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_made_through_one_replica_is_used_through_the_other() {
    let db = TestDatabase::create().await;
    let a = RunningServer::replica(&db, &FAST).await;
    let b = RunningServer::replica(&db, &FAST).await;
    assert_eq!(a.env_id, b.env_id, "one installation");

    let id = create(&a, json!({})).await;
    let ran = ok(
        &b,
        "sandbox.exec",
        json!({"sandboxId": id, "cmd": "echo hi from b"}),
    )
    .await;
    assert_eq!(ran["stdout"], "hi from b\n");
    assert_eq!(ran["exitCode"], 0);
    ok(
        &b,
        "sandbox.writeFile",
        json!({"sandboxId": id, "path": "/tmp/note", "content": "written through b"}),
    )
    .await;
    for server in [&a, &b] {
        let (status, read) = get(
            server,
            KEY,
            &format!("sandbox.readFile?sandboxId={id}&path=/tmp/note"),
        )
        .await;
        assert_eq!(status, 200, "{read}");
        assert_eq!(read["content"], "written through b");
    }
    // B forwarded each to A, which holds the agent connection: no engine path at all.
    let ((a_agent, a_engine), (b_agent, b_engine)) = (a.served().await, b.served().await);
    assert!(a_agent >= 3, "A served through its agent ({a_agent})");
    assert_eq!((a_engine, b_agent, b_engine), (0, 0, 0));
    assert!(b.metric(FORWARDED).await >= 3, "B forwarded");

    let killed = ok(&b, "sandbox.kill", json!({"sandboxId": id})).await;
    assert_eq!(killed["status"], "killed");
    assert_eq!(one(&a, &id).await["status"], "killed");
    eventually(
        "the container removed",
        Duration::from_secs(15),
        async || containers_of(&id).is_empty(),
    )
    .await;
    let (status, _) = call(
        &a,
        KEY,
        "sandbox.exec",
        json!({"sandboxId": id, "cmd": "true"}),
    )
    .await;
    assert_eq!(status, 412, "A knows it is killed");
}

/// Only a replica can mark a request as forwarded: a client's mark, on either replica,
/// is refused before anything is served (it would put the request on the engine path,
/// which reads as root), and nothing is passed on before the caller is known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_forwarding_mark_is_refused_by_both_replicas() {
    let db = TestDatabase::create().await;
    let a = RunningServer::replica(&db, &FAST).await;
    let b = RunningServer::replica(&db, &FAST).await;
    let id = create(&a, json!({})).await;
    let client = reqwest::Client::new();
    let forged = [
        "1",
        "v1 replica 0 0000",
        &format!("v1 replica {} {}", common::now_ms(), "ab".repeat(32)),
    ];
    for server in [&a, &b] {
        for mark in forged {
            let download = client
                .get(format!(
                    "{}/api/sandbox.download?sandboxId={id}&path=/etc/shadow",
                    server.url
                ))
                .header("x-api-key", KEY)
                .header("x-sandboxd-forwarded", mark)
                .send()
                .await
                .unwrap();
            assert_eq!(download.status(), 403, "{mark}");
            let body = download.text().await.unwrap();
            assert!(!body.contains("root:"), "{body}");
            let upload = client
                .post(format!(
                    "{}/api/sandbox.upload?sandboxId={id}&path=/etc/evil",
                    server.url
                ))
                .header("x-api-key", KEY)
                .header("x-sandboxd-forwarded", mark)
                .body("x")
                .send()
                .await
                .unwrap();
            assert_eq!(upload.status(), 403, "{mark}");
            let exec = client
                .post(format!("{}/api/sandbox.exec", server.url))
                .header("x-api-key", KEY)
                .header("x-sandboxd-forwarded", mark)
                .json(&json!({"sandboxId": id, "cmd": "true"}))
                .send()
                .await
                .unwrap();
            assert_eq!(exec.status(), 403, "{mark}");
        }
    }
    // Through B without a valid key: refused by B, nothing reaches A.
    let before = a.served().await;
    let forwarded_before = b.metric(FORWARDED).await;
    for key in ["", "sbx_not_a_key_0123456789abcdefghijklmnopq"] {
        let (status, _) = call(
            &b,
            key,
            "sandbox.exec",
            json!({"sandboxId": id, "cmd": "true"}),
        )
        .await;
        assert_eq!(status, 401);
    }
    assert_eq!(b.metric(FORWARDED).await, forwarded_before);
    assert_eq!(a.served().await, before);
    // And the real thing still works through B.
    let ran = ok(
        &b,
        "sandbox.exec",
        json!({"sandboxId": id, "cmd": "echo through"}),
    )
    .await;
    assert_eq!(ran["stdout"], "through\n");
    assert_eq!(b.metric(FORWARDED).await, forwarded_before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_through_one_replica_is_refused_by_the_other_at_once() {
    let db = TestDatabase::create().await;
    let a = RunningServer::replica(&db, &[]).await;
    let b = RunningServer::replica(&db, &[]).await;
    let mut refused_at_first = 0;
    let rounds = 10;
    for round in 0..rounds {
        let made = ok(&a, "apiKey.create", json!({"name": format!("k{round}")})).await;
        let (key, key_id) = (
            made["secret"].as_str().unwrap().to_owned(),
            made["keyId"].as_str().unwrap().to_owned(),
        );
        // B has seen the key (and keeps it in its cache).
        for _ in 0..3 {
            let (status, _) = get(&b, &key, "apiKey.current").await;
            assert_eq!(status, 200);
        }
        ok(&a, "apiKey.revoke", json!({"keyId": key_id})).await;
        let started = Instant::now();
        let mut first = true;
        loop {
            let (status, _) = get(&b, &key, "apiKey.current").await;
            if status == 401 {
                refused_at_first += usize::from(first);
                break;
            }
            first = false;
            assert!(
                started.elapsed() < Duration::from_millis(300),
                "B still took the revoked key after {:?}",
                started.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    println!(
        "revoked keys refused by the other replica's first request: {refused_at_first}/{rounds}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_leader_is_killed_the_other_replica_reaps_and_reconciles() {
    let db = TestDatabase::create().await;
    let mut a = RunningServer::replica(&db, &FAST).await;
    // A started first and holds both duties before B starts.
    eventually("A leads", Duration::from_secs(10), async || {
        let log = a.log();
        log.contains("duty=\"engines\"") && log.contains("duty=\"reaper\"")
    })
    .await;
    let b = RunningServer::replica(&db, &FAST).await;

    let expiring = create(&b, json!({"timeoutMs": 10_000})).await;
    let orphaned = create(&a, json!({})).await;
    let orphan_containers = containers_of(&orphaned);
    assert_eq!(orphan_containers.len(), 1);

    a.stop(); // SIGKILL
    let killed_at = Instant::now();
    // The orphan: a container whose record is gone (as after a restore from an older
    // backup).
    assert_eq!(
        db.execute(&format!(
            "DELETE FROM sandboxes WHERE sandbox_id = '{orphaned}'"
        ))
        .await,
        1
    );

    // Bound: the takeover is at B's next try (a pass of each loop), then one pass.
    let reconciled = eventually("the orphan removed", Duration::from_secs(10), async || {
        containers_of(&orphaned).is_empty()
    })
    .await;
    let reaped = eventually(
        "the expired sandbox reaped",
        Duration::from_secs(20),
        async || one(&b, &expiring).await["status"] == "killed",
    )
    .await;
    println!(
        "after SIGKILL of the leader: orphan removed {reconciled:?} after it was made; the \
         sandbox expiring 10 s after its creation reaped {:?} after the kill",
        killed_at.elapsed()
    );
    let _ = reaped;
    assert!(
        b.log().contains("this replica now runs the duty"),
        "{}",
        b.log()
    );
    eventually(
        "its container removed",
        Duration::from_secs(10),
        async || containers_of(&expiring).is_empty(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creates_and_kills_on_two_replicas_lose_nothing_and_leak_nothing() {
    let db = TestDatabase::create().await;
    let a = std::sync::Arc::new(RunningServer::replica(&db, &[]).await);
    let b = std::sync::Arc::new(RunningServer::replica(&db, &[]).await);
    let per_replica = 50;
    let in_flight = 6;
    let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(in_flight * 2));
    let mut tasks = Vec::new();
    for i in 0..per_replica * 2 {
        // Made through one replica, killed through the other.
        let (maker, killer) = if i % 2 == 0 {
            (a.clone(), b.clone())
        } else {
            (b.clone(), a.clone())
        };
        let permit = semaphore.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = permit.acquire_owned().await.unwrap();
            let id = create(&maker, json!({"name": format!("race-{i}")})).await;
            // Both kill it at once: one kill, no failure.
            let (one, two) = tokio::join!(
                call(&killer, KEY, "sandbox.kill", json!({"sandboxId": id})),
                call(&maker, KEY, "sandbox.kill", json!({"sandboxId": id})),
            );
            for (status, answer) in [&one, &two] {
                assert!(*status == 200 || *status == 412, "kill: {status} {answer}");
            }
            assert!(one.0 == 200 || two.0 == 200, "one kill took");
            id
        }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap());
    }
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), per_replica * 2, "no duplicate id");
    assert_eq!(
        db.count("SELECT sandbox_id FROM sandboxes").await,
        i64::try_from(per_replica * 2).unwrap(),
        "one row per create, none lost, none doubled"
    );
    assert_eq!(
        db.count("SELECT sandbox_id FROM sandboxes WHERE status <> 'killed'")
            .await,
        0,
        "every row killed"
    );
    for server in [&a, &b] {
        let (status, listed) = get(
            server,
            KEY,
            &format!("sandbox.list?environmentId={}", server.env_id),
        )
        .await;
        assert_eq!(status, 200, "{listed}");
        assert_eq!(
            listed.as_array().map(Vec::len),
            Some(per_replica * 2),
            "both list them all"
        );
    }
    let env = a.env_id.clone();
    eventually(
        "every container removed",
        Duration::from_secs(30),
        async || containers_in(&env) == 0,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_reports_the_store_and_the_engine_apart() {
    let ready = async |server: &RunningServer| -> (u16, Value) {
        let response = reqwest::get(format!("{}/ready", server.url)).await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    };
    let sqlite = RunningServer::start().await;
    let (status, body) = ready(&sqlite).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["store"]["backend"], "sqlite");
    assert_eq!(body["store"]["caches"], true);
    assert_eq!(body["engine"]["status"], "ok");

    let db = TestDatabase::create().await;
    let replica = RunningServer::replica(&db, &[]).await;
    let (status, body) = ready(&replica).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            &body["status"],
            &body["store"]["status"],
            &body["store"]["backend"]
        ),
        (&json!("ready"), &json!("ok"), &json!("postgres"))
    );
    eventually(
        "the change feed listens",
        Duration::from_secs(10),
        async || ready(&replica).await.1["store"]["caches"] == true,
    )
    .await;

    // The database stops taking connections and drops the replica's: the store fails,
    // the engine does not, and nothing of the error is in the answer.
    let name = db.url.rsplit('/').next().unwrap().to_owned();
    let admin = TestDatabase::admin_of(&db);
    admin
        .run(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
        .await;
    admin
        .run(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        ))
        .await;
    let (status, body) = ready(&replica).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "unready");
    assert_ne!(body["store"]["status"], "ok", "{body}");
    assert_eq!(body["engine"]["status"], "ok", "{body}");
    assert!(
        !body.to_string().contains("sandboxd_e2e"),
        "no detail: {body}"
    );
    // A request that needs the store is told to retry (within the key cache's 2 s, which
    // is the bound should the change feed not have seen its connection go).
    let mut last = (0, Value::Null);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) && last.0 != 503 {
        last = get(&replica, KEY, "apiKey.current").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last.0, 503, "{} {}", last.1, replica.log());

    admin
        .run(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
        .await;
    eventually("ready again", Duration::from_secs(15), async || {
        let (status, body) = ready(&replica).await;
        status == 200 && body["store"]["caches"] == true
    })
    .await;
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn terminal(server: &RunningServer, id: &str) -> Socket {
    terminal_with(server, id, None).await
}

/// A terminal opened with the key, or with a single-use token (as a browser does).
async fn terminal_with(server: &RunningServer, id: &str, token: Option<&str>) -> Socket {
    let mut url = format!(
        "{}/sandbox-pty?sandboxId={id}&cols=80&rows=24",
        server.url.replacen("http", "ws", 1)
    );
    if let Some(token) = token {
        url.push_str(&format!("&token={token}"));
    }
    let mut request = url.into_client_request().unwrap();
    if token.is_none() {
        request
            .headers_mut()
            .insert("x-api-key", KEY.parse().unwrap());
    }
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// The next text message of a terminal (`ready`, `error`, `exit`), skipping output.
async fn next_text(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("a message within 20 s");
        match message {
            Some(Ok(Message::Text(text))) => return serde_json::from_str(text.as_str()).unwrap(),
            Some(Ok(Message::Binary(_) | Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("the terminal ended: {other:?}"),
        }
    }
}

/// Reads terminal output until it holds `needle`.
async fn read_until(socket: &mut Socket, needle: &str) -> String {
    let mut output = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&output).contains(needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, socket.next()).await {
            Ok(Some(Ok(Message::Binary(bytes)))) => output.extend_from_slice(&bytes),
            Ok(Some(Ok(_))) => {}
            other => panic!(
                "no {needle:?} in {:?}: {other:?}",
                String::from_utf8_lossy(&output)
            ),
        }
    }
    String::from_utf8_lossy(&output).into_owned()
}

/// What needs the agent works through the replica without its connection: B forwards
/// terminals, processes and their output to A, which made the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminals_and_processes_work_through_the_replica_without_the_agent() {
    let db = TestDatabase::create().await;
    let a = RunningServer::replica(&db, &FAST).await;
    let b = RunningServer::replica(&db, &FAST).await;
    let id = create(&a, json!({})).await;

    let mut socket = terminal(&b, &id).await;
    assert_eq!(next_text(&mut socket).await["type"], "ready");
    socket
        .send(Message::Binary(
            "echo $((6*7))x\n".as_bytes().to_vec().into(),
        ))
        .await
        .unwrap();
    read_until(&mut socket, "42x").await;
    socket
        .send(Message::text(
            json!({"type": "resize", "cols": 100, "rows": 30}).to_string(),
        ))
        .await
        .unwrap();
    socket
        .send(Message::Binary(
            "stty size; exit 3\n".as_bytes().to_vec().into(),
        ))
        .await
        .unwrap();
    read_until(&mut socket, "30 100").await;
    let exit = next_text(&mut socket).await;
    assert_eq!(
        (exit["type"].as_str(), exit["exitCode"].as_i64()),
        (Some("exit"), Some(3))
    );

    // A browser's single-use token, issued by B, opens a terminal through either
    // replica: the store keeps it, and A redeems it.
    for server in [&b, &a] {
        let issued = ok(&b, "sandbox.execToken", json!({"sandboxId": id})).await;
        let token = issued["token"].as_str().unwrap();
        let mut socket = terminal_with(server, &id, Some(token)).await;
        assert_eq!(next_text(&mut socket).await["type"], "ready");
        socket
            .send(Message::Binary(
                "echo tok$((1+1))en\n".as_bytes().to_vec().into(),
            ))
            .await
            .unwrap();
        read_until(&mut socket, "tok2en").await;
        let mut again = terminal_with(server, &id, Some(token)).await;
        let refused = again.next().await;
        assert!(
            matches!(&refused, Some(Ok(Message::Close(Some(frame)))) if u16::from(frame.code) == 4001),
            "a token is used once: {refused:?}"
        );
    }

    let started = ok(
        &b,
        "sandbox.processStart",
        json!({"sandboxId": id, "cmd": "read line; echo got $line; exit 4", "stdin": true}),
    )
    .await;
    let process = started["processId"].as_str().unwrap().to_owned();
    ok(
        &b,
        "sandbox.processWrite",
        json!({"sandboxId": id, "processId": process, "data": "it\n", "close": true}),
    )
    .await;
    let ended = ok(
        &b,
        "sandbox.processWait",
        json!({"sandboxId": id, "processId": process, "timeoutMs": 10000}),
    )
    .await;
    assert_eq!(ended["exitCode"], 4, "{ended}");
    let (status, listed) = get(&b, KEY, &format!("sandbox.processList?sandboxId={id}")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    let (status, output) = get(
        &b,
        KEY,
        &format!("sandbox.processOutput?sandboxId={id}&processId={process}&stream=stdout"),
    )
    .await;
    assert_eq!(status, 200, "{output}");
    assert!(output.to_string().contains("got it"), "{output}");
    // An interpreter context, in an image with python3, keeps its state through B.
    let python = create(&a, json!({"template": "base", "image": null})).await;
    let context = ok(
        &b,
        "sandbox.contextCreate",
        json!({"sandboxId": python, "language": "python"}),
    )
    .await;
    let context_id = context["contextId"].as_str().unwrap().to_owned();
    let run = json!({"sandboxId": python, "contextId": context_id, "code": "x = 41"});
    ok(&b, "sandbox.contextRun", run).await;
    let run = json!({"sandboxId": python, "contextId": context_id, "code": "x + 1"});
    assert_eq!(ok(&b, "sandbox.contextRun", run).await["result"], "42");
    ok(
        &b,
        "sandbox.contextRemove",
        json!({"sandboxId": python, "contextId": context_id}),
    )
    .await;
    // Every call reached A's agent; B served none itself.
    assert_eq!(b.served().await, (0, 0));
    assert!(b.metric(FORWARDED).await >= 9);

    // The holder still checks the caller: a key that is not valid is refused there.
    let (status, _) = call(
        &b,
        "not-a-key-of-this-installation-0000000000",
        "sandbox.processStart",
        json!({"sandboxId": id, "cmd": "true"}),
    )
    .await;
    assert_eq!(status, 401);
}

/// MCP tool calls on a replica that does not hold the sandbox's agent are passed to the
/// one that does, like REST requests: processes and contexts work through either, and
/// the holder still checks the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_work_through_the_replica_without_the_agent() {
    use rmcp::ServiceExt as _;
    use rmcp::model::{CallToolRequestParams, ClientConfig};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let db = TestDatabase::create().await;
    let a = RunningServer::replica(&db, &FAST).await;
    let b = RunningServer::replica(&db, &FAST).await;
    let id = create(&a, json!({"template": "base", "image": null})).await;
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", b.url)).auth_header(KEY);
    let client = ClientConfig::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("MCP session");
    let call = async |tool: &'static str, arguments: Value| -> (bool, Value) {
        let arguments = arguments.as_object().cloned().unwrap_or_default();
        let result = client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
            .await
            .expect("tool call");
        let result = serde_json::to_value(&result).unwrap();
        let text = result["content"][0]["text"].as_str().unwrap_or("null");
        (
            result["isError"] == json!(true),
            serde_json::from_str(text).unwrap(),
        )
    };
    let before = b.metric(FORWARDED).await;

    let (failed, started) = call(
        "sandbox-processStart",
        json!({"sandboxId": id, "cmd": "echo started; exit 5"}),
    )
    .await;
    assert!(!failed, "{started}");
    let process = started["processId"].as_str().unwrap().to_owned();
    let (failed, ended) = call(
        "sandbox-processWait",
        json!({"sandboxId": id, "processId": process, "timeoutMs": 10000}),
    )
    .await;
    assert!(!failed, "{ended}");
    assert_eq!(ended["exitCode"], 5, "{ended}");
    let (failed, output) = call(
        "sandbox-processOutput",
        json!({"sandboxId": id, "processId": process, "stream": "stdout"}),
    )
    .await;
    assert!(
        !failed && output.to_string().contains("started"),
        "{output}"
    );
    // A process the holder does not know: its error, as the holder wrote it.
    let (failed, missing) = call(
        "sandbox-processWait",
        json!({"sandboxId": id, "processId": "proc_nothere", "timeoutMs": 1000}),
    )
    .await;
    assert!(failed);
    assert_eq!(missing["code"], "NOT_FOUND", "{missing}");

    let (failed, context) = call(
        "sandbox-contextCreate",
        json!({"sandboxId": id, "language": "python"}),
    )
    .await;
    assert!(!failed, "{context}");
    let context_id = context["contextId"].as_str().unwrap().to_owned();
    let run = json!({"sandboxId": id, "contextId": context_id, "code": "x = 41"});
    assert!(!call("sandbox-contextRun", run).await.0);
    let run = json!({"sandboxId": id, "contextId": context_id, "code": "x + 1"});
    assert_eq!(call("sandbox-contextRun", run).await.1["result"], "42");
    let removed = json!({"sandboxId": id, "contextId": context_id});
    let (failed, answer) = call("sandbox-contextRemove", removed).await;
    assert!(!failed, "{answer}");
    let run = json!({"sandboxId": id, "contextId": context_id, "code": "x"});
    let (failed, gone) = call("sandbox-contextRun", run).await;
    assert!(failed, "a removed context is gone: {gone}");

    // Commands and files go to the holder too, and long output is still held here.
    let (failed, out) = call(
        "sandbox-exec",
        json!({"sandboxId": id, "cmd": "yes a | head -c 40000"}),
    )
    .await;
    assert!(!failed, "{out}");
    let output_id = out["more"]["outputId"].as_str().unwrap().to_owned();
    let (failed, page) = call(
        "sandbox-outputPage",
        json!({"sandboxId": id, "outputId": output_id, "stream": "stdout",
            "offset": out["more"]["stdout"]["shown"]}),
    )
    .await;
    assert!(!failed, "{page}");
    let (failed, _) = call(
        "sandbox-writeFile",
        json!({"sandboxId": id, "path": "/tmp/m.txt", "content": "through b"}),
    )
    .await;
    assert!(!failed);
    let (failed, read) = call(
        "sandbox-readFile",
        json!({"sandboxId": id, "path": "/tmp/m.txt"}),
    )
    .await;
    assert!(!failed, "{read}");
    assert_eq!(read["content"], "through b", "{read}");

    // B served none of these itself; every one reached A's agent.
    assert_eq!(b.served().await, (0, 0));
    assert!(b.metric(FORWARDED).await >= before + 12);
    client.cancel().await.unwrap();
}

/// When the replica holding the agent dies, the other serves what it can: commands
/// through the engine at once, and 503 for what needs the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_holder_dies_commands_go_through_the_engine_and_the_rest_answers_503() {
    let db = TestDatabase::create().await;
    let mut a = RunningServer::replica(&db, &FAST).await;
    let b = RunningServer::replica(&db, &FAST).await;
    let id = create(&a, json!({})).await;
    let ran = ok(
        &b,
        "sandbox.exec",
        json!({"sandboxId": id, "cmd": "echo before"}),
    )
    .await;
    assert_eq!(ran["stdout"], "before\n");
    assert_eq!(b.served().await, (0, 0), "forwarded while A lives");

    a.stop();
    let ran = ok(
        &b,
        "sandbox.exec",
        json!({"sandboxId": id, "cmd": "echo after"}),
    )
    .await;
    assert_eq!(ran["stdout"], "after\n");
    assert_eq!(b.served().await.1, 1, "B ran it through the engine");
    let (status, body) = call(
        &b,
        KEY,
        "sandbox.processStart",
        json!({"sandboxId": id, "cmd": "true"}),
    )
    .await;
    assert_eq!(status, 503, "{body}");
    let mut socket = terminal(&b, &id).await;
    assert_eq!(next_text(&mut socket).await["type"], "error");
    assert!(
        b.metric("sandboxd_forwarded_requests_total{outcome=\"unreachable\"}")
            .await
            >= 2
    );
    ok(&b, "sandbox.kill", json!({"sandboxId": id})).await;
}

/// A browser signed in through A uses its session through B, forwarded calls and
/// terminals included: sessions live in the database, and the holder checks the
/// page's origin against the host the browser reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dashboard_session_works_through_every_replica() {
    let db = TestDatabase::create().await;
    let a = RunningServer::replica(&db, &FAST).await;
    let b = RunningServer::replica(&db, &FAST).await;
    let id = create(&a, json!({})).await;
    let client = reqwest::Client::new();
    let signed = client
        .post(format!("{}/ui/session", a.url))
        .header("origin", &a.url)
        .json(&json!({"key": KEY}))
        .send()
        .await
        .unwrap();
    assert_eq!(signed.status(), 200);
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let csrf = signed.json::<Value>().await.unwrap()["csrf"]
        .as_str()
        .unwrap()
        .to_owned();

    let started = client
        .post(format!("{}/api/sandbox.processStart", b.url))
        .header("cookie", &cookie)
        .header("origin", &b.url)
        .header("x-sandboxd-csrf", &csrf)
        .json(&json!({"sandboxId": id, "cmd": "echo from the page"}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 200, "{:?}", started.text().await);
    assert_eq!(b.served().await, (0, 0), "B forwarded it to A");

    let url = format!(
        "{}/sandbox-pty?sandboxId={id}",
        b.url.replacen("http", "ws", 1)
    );
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("cookie", cookie.parse().unwrap());
    request
        .headers_mut()
        .insert("origin", b.url.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(next_text(&mut socket).await["type"], "ready");
    socket
        .send(Message::Binary(
            "echo page$((2+3))\n".as_bytes().to_vec().into(),
        ))
        .await
        .unwrap();
    read_until(&mut socket, "page5").await;
}

/// A preview reached through the replica that does not hold the sandbox's agent is
/// passed on to the one that does, as it came: with a key under a path, with a signed
/// link, and on a preview host; a forged mark on a preview is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_is_served_through_the_replica_without_the_agent() {
    let db = TestDatabase::create().await;
    let mut env = FAST.to_vec();
    env.push(("SANDBOXD_PREVIEW_DOMAIN", "localhost"));
    let a = RunningServer::replica(&db, &env).await;
    let b = RunningServer::replica(&db, &env).await;
    let id = create(&a, json!({"image": "sandboxd-local/debian:bookworm"})).await;
    ok(
        &a,
        "sandbox.processStart",
        json!({"sandboxId": id, "cmd": "mkdir -p /tmp/www && echo held by a > /tmp/www/index.html \
               && exec python3 -m http.server 8000 --bind 127.0.0.1 -d /tmp/www"}),
    )
    .await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let path = sandboxd_core::ports::preview_path(&id, 8000);
    let keyed = format!("{}{path}", b.url);
    let mut page = String::new();
    for _ in 0..100 {
        let answer = http
            .get(&keyed)
            .header("x-api-key", KEY)
            .send()
            .await
            .unwrap();
        if answer.status() == 200 {
            page = answer.text().await.unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(page, "held by a\n", "through b, with a key");
    let forwarded = b.metric(FORWARDED).await;
    assert!(forwarded >= 1, "b passed it on");

    // A link made through b, opened through b; and the preview's own host.
    let exposed = ok(
        &b,
        "sandbox.exposePort",
        json!({"sandboxId": id, "port": 8000}),
    )
    .await;
    let link = exposed["url"].as_str().unwrap().to_owned();
    let listening = b.url.rsplit(':').next().unwrap().to_owned();
    let host = sandboxd_core::ports::preview_host(&id, 8000, "localhost");
    assert!(
        link.starts_with(&format!("http://{host}:{listening}/")),
        "{link}"
    );
    let address: std::net::SocketAddr = format!("127.0.0.1:{listening}").parse().unwrap();
    let on_host = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .resolve(&host, address)
        .build()
        .unwrap();
    let opened = on_host.get(&link).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    assert_eq!(opened.text().await.unwrap(), "held by a\n");
    assert!(b.metric(FORWARDED).await > forwarded);

    // Only a replica marks a request as forwarded.
    let forged = http
        .get(&keyed)
        .header("x-api-key", KEY)
        .header("x-sandboxd-forwarded", "v1 someone 0 0000")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    ok(&a, "sandbox.kill", json!({"sandboxId": id})).await;
}

/// E2B's calls to a sandbox's daemon, made through the replica that does not hold its
/// agent, are passed on to the one that does: a process listing, a file written and
/// read, a signed URL with no header, the code interpreter's streamed lines; a call
/// with a forged token goes no further than the replica it reached.
#[tokio::test]
async fn e2b_calls_work_through_the_replica_without_the_agent() {
    use sandboxd_core::e2b::signed::{FileOperation, file_signature};
    let db = TestDatabase::create().await;
    let a = RunningServer::replica(&db, &FAST).await;
    let b = RunningServer::replica(&db, &FAST).await;
    let http = reqwest::Client::new();
    let made: Value = http
        .post(format!("{}/e2b/sandboxes", a.url))
        .header("X-API-Key", KEY)
        .json(&json!({"templateID": "base", "timeout": 120}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = made["sandboxID"].as_str().expect("made").to_owned();
    let token = made["envdAccessToken"].as_str().unwrap().to_owned();
    let through_b = |method: reqwest::Method, path: &str, port: &str| {
        http.request(method, format!("{}/e2b/envd{path}", b.url))
            .header("E2b-Sandbox-Id", &id)
            .header("E2b-Sandbox-Port", port)
    };
    let before = b.metric(FORWARDED).await;

    let listed = through_b(reqwest::Method::POST, "/process.Process/List", "49983")
        .header("X-Access-Token", &token)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200, "{}", listed.text().await.unwrap());
    let written = through_b(reqwest::Method::POST, "/files", "49983")
        .query(&[("path", "/home/user/a.txt")])
        .header("X-Access-Token", &token)
        .header("content-type", "application/octet-stream")
        .body("held by a")
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), 200, "{}", written.text().await.unwrap());
    let signature = file_signature("/home/user/a.txt", FileOperation::Read, "", &token, None);
    let read = through_b(reqwest::Method::GET, "/files", "49983")
        .query(&[("path", "/home/user/a.txt"), ("signature", &signature)])
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(read.text().await.unwrap(), "held by a");
    let ran = through_b(reqwest::Method::POST, "/execute", "49999")
        .header("E2B-Traffic-Access-Token", &token)
        .json(&json!({"code": "print('from a'); 6 * 7"}))
        .send()
        .await
        .unwrap();
    assert_eq!(ran.status(), 200);
    let lines = ran.text().await.unwrap();
    assert!(
        lines.contains(r#""text":"from a\n""#) && lines.contains(r#""text":"42""#),
        "{lines}"
    );
    assert!(
        lines.trim_end().ends_with(r#"{"type":"end_of_execution"}"#),
        "{lines}"
    );
    assert!(
        b.metric(FORWARDED).await >= before + 4,
        "b passed each call on"
    );

    let forwarded = b.metric(FORWARDED).await;
    for forged in [
        through_b(reqwest::Method::POST, "/process.Process/List", "49983")
            .header("X-Access-Token", "key.forged")
            .header("content-type", "application/json")
            .body("{}"),
        through_b(reqwest::Method::GET, "/files", "49983")
            .query(&[("path", "/home/user/a.txt"), ("signature", "v1_forged")]),
        through_b(reqwest::Method::POST, "/execute", "49999").json(&json!({"code": "1"})),
    ] {
        let refused = forged.send().await.unwrap();
        assert_eq!(refused.status(), 401);
    }
    assert_eq!(
        b.metric(FORWARDED).await,
        forwarded,
        "nothing unauthenticated was passed on"
    );
    ok(&a, "sandbox.kill", json!({"sandboxId": id})).await;
}
