//! A remote server whose "engine" is hostile: behind a real sshd, it answers the version
//! check and then every request with a body that never ends (a JSON string, an event
//! line, an output frame of 4 GiB). sandboxd's memory stays within a stated bound while
//! it floods, every call on that server fails as the server's, and the local engine's
//! sandboxes answer as fast as ever.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use reqwest::StatusCode;
use sandboxd_contracts::{Engine, EngineError};
use sandboxd_docker::DockerEngine;
use sandboxd_ssh::SshSession;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{UnixListener, UnixStream};

use crate::harness::{TestServer, peak_while, rss_kib};
use crate::remote_host::RemoteHost;

/// What sandboxd may hold because of one hostile server: its channels' answers at their
/// bounds (16 × 4 MiB), the event stream's (16 MiB), with room for the allocator.
const BOUND_KIB: u64 = 256 * 1024;

const VERSION: &str = r#"{"ApiVersion":"1.41","MinAPIVersion":"1.12","Version":"20.10.24","Os":"linux","Arch":"amd64"}"#;

/// Reads one request's head (and a body it gives the length of); its request line.
async fn request(stream: &mut UnixStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 || head.len() > 64 * 1024 {
            return None;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let length: usize = text
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.ok()?;
    text.lines().next().map(str::to_owned)
}

/// Serves one connection: the version check answered, anything else flooded.
async fn serve(mut stream: UnixStream) {
    while let Some(line) = request(&mut stream).await {
        let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
        if path.ends_with("/_ping") {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
                .await;
            continue;
        }
        if path.ends_with("/version") {
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{VERSION}",
                VERSION.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
            continue;
        }
        if path.contains("/containers/") && path.ends_with("/exec") {
            let body = r#"{"Id":"e1"}"#;
            let answer = format!(
                "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
            continue;
        }
        let chunk = vec![b'a'; 64 * 1024];
        if path.contains("/exec/") && path.ends_with("/start") {
            let head = "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n\
                        Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n";
            if stream.write_all(head.as_bytes()).await.is_err()
                || stream
                    .write_all(&[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xf0])
                    .await
                    .is_err()
            {
                return;
            }
            while stream.write_all(&chunk).await.is_ok() {}
            return;
        }
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(b"8\r\n[{\"Id\":\"\r\n").await.is_err()
        {
            return;
        }
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
        while stream.write_all(&framed).await.is_ok() {}
        return;
    }
}

/// The hostile engine on a unix socket of the test's own.
fn flooding_engine(dir: &Path) -> std::path::PathBuf {
    let socket = dir.join("engine.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    socket
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_engine_costs_a_bounded_amount_of_memory() {
    let dir = tempfile::tempdir().unwrap();
    let host = RemoteHost::start_for(flooding_engine(dir.path()));
    let session = Arc::new(SshSession::new(host.target()));
    let engine: Arc<dyn Engine> = Arc::new(
        DockerEngine::connect_ssh(session, "/var/run/docker.sock")
            .await
            .expect("the version check is answered"),
    );
    let before = rss_kib();
    let started = Instant::now();
    let (failures, peak) = peak_while(async {
        let lists = (0..32).map(|_| engine.list_sandbox_containers("x"));
        let lists = futures_util::future::join_all(lists).await;
        let mut deaths = engine.container_deaths("x");
        let death = tokio::time::timeout(Duration::from_secs(60), deaths.next()).await;
        let exec = engine
            .exec("c1", crate::remote_engine::spec(&["true"]))
            .await;
        (lists, death, exec)
    })
    .await;
    let (lists, death, exec) = failures;
    eprintln!(
        "memory: {before} KiB before, peak {peak} KiB while flooded ({} KiB more) for {:?}",
        peak.saturating_sub(before),
        started.elapsed()
    );
    for listed in lists {
        assert!(
            matches!(listed, Err(EngineError::Unreachable(_))),
            "{listed:?}"
        );
    }
    assert!(
        matches!(death, Ok(Some(Err(_)))),
        "the event stream is cut: {death:?}"
    );
    assert!(exec.is_err(), "an output frame of 4 GiB is refused");
    assert!(
        peak < before + BOUND_KIB,
        "the flood held {} KiB (bound {BOUND_KIB} KiB)",
        peak - before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_server_leaves_the_rest_of_sandboxd_fast() {
    let server = TestServer::start_with(|config| {
        config.reconcile_interval_secs = 1.0;
    })
    .await;
    let local = server
        .create(json!({"environmentId": server.env_id, "template": "python"}))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let host = RemoteHost::start_for(flooding_engine(dir.path()));
    let (status, created) = server
        .post(
            "server.create",
            json!({
                "name": "hostile",
                "address": "127.0.0.1",
                "port": host.port,
                "privateKey": RemoteHost::client_key(),
                "hostKey": RemoteHost::host_key().to_openssh(),
                "remoteDir": "/tmp/sandboxd-hostile",
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let server_id = created["serverId"].as_str().unwrap().to_owned();
    let before = rss_kib();

    let (latencies, peak) = peak_while(async {
        // Creates on the hostile server, and the background loops connecting on their
        // own, while the local sandbox is used.
        let creates = (0..8).map(|_| {
            server.post(
                "sandbox.create",
                json!({"environmentId": server.env_id, "template": "python", "serverId": server_id}),
            )
        });
        let creates = futures_util::future::join_all(creates);
        let locals = async {
            let mut latencies = Vec::new();
            let until = Instant::now() + Duration::from_secs(15);
            while Instant::now() < until {
                let start = Instant::now();
                let out = server.exec(&local, "echo ok").await;
                assert_eq!(out["stdout"], "ok\n", "{out}");
                latencies.push(start.elapsed());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            latencies
        };
        let (created, latencies) = tokio::join!(creates, locals);
        for (status, body) in created {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
            assert!(!body.to_string().contains("aaaa"), "{body}");
        }
        latencies
    })
    .await;
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    eprintln!(
        "memory: {before} KiB before, peak {peak} KiB while flooded; {} local commands, \
         the slowest in {slowest:?}",
        latencies.len()
    );
    assert!(
        peak < before + BOUND_KIB,
        "the flood held {} KiB (bound {BOUND_KIB} KiB)",
        peak - before
    );
    assert!(slowest < Duration::from_secs(2), "{latencies:?}");
}
