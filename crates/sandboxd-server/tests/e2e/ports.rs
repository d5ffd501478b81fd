//! Connections to a sandbox's ports, carried by its agent: servers inside an `isolated`
//! sandbox (no interface but loopback) reached from the host, bytes both ways within
//! each side's credit, a half-close kept, many connections at once, and the refusals.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use sandboxd_core::model::Principal;
use sandboxd_service::ServiceError;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::harness::{KEY, TestServer, id};

/// An echo server on port 7000: echoes what it reads until the end, then says `bye`.
const ECHO: &str = r#"
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 7000)); s.listen(256)
def serve(c):
    while True:
        b = c.recv(65536)
        if not b: break
        c.sendall(b)
    c.sendall(b"bye"); c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

async fn owner(server: &TestServer) -> Principal {
    server
        .service
        .store()
        .authenticate(KEY)
        .await
        .expect("the store answers")
        .expect("the owner key")
}

async fn start(server: &TestServer, sandbox: &Value, cmd: &str) {
    let (status, process) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(sandbox), "cmd": cmd}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{process}");
}

/// A connection to `port`, once something listens there (within 15 s).
async fn connect(
    server: &TestServer,
    caller: &Principal,
    sandbox: &Value,
    port: u16,
) -> Box<dyn sandboxd_contracts::ByteStream> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match server
            .service
            .ports()
            .connect(caller, id(sandbox), port)
            .await
        {
            Ok(stream) => return stream,
            Err(ServiceError::PortUnreachable(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("port {port}: {error}"),
        }
    }
}

#[tokio::test]
async fn a_web_server_in_an_isolated_sandbox_is_reached_through_its_agent() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    assert_eq!(sandbox["networkMode"], "isolated");
    let caller = owner(&server).await;
    server
        .exec(
            &sandbox,
            "mkdir -p /tmp/site && echo 'hello from inside' > /tmp/site/hello.txt",
        )
        .await;
    start(
        &server,
        &sandbox,
        "cd /tmp/site && exec python3 -m http.server 8000 --bind 127.0.0.1",
    )
    .await;

    let mut stream = connect(&server, &caller, &sandbox, 8000).await;
    stream
        .write_all(b"GET /hello.txt HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the answer ends")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    assert!(answer.ends_with("hello from inside\n"), "{answer}");
}

#[tokio::test]
async fn bytes_go_both_ways_past_the_windows_and_a_half_close_is_kept() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let caller = owner(&server).await;
    server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(&sandbox), "path": "/tmp/echo.py", "content": ECHO}),
        )
        .await;
    start(&server, &sandbox, "exec python3 /tmp/echo.py").await;

    // 8 MiB each way: many times both windows, so credit has to keep coming back.
    let sent: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let stream = connect(&server, &caller, &sandbox, 7000).await;
    let (mut reader, mut writer) = tokio::io::split(stream);
    let sending = {
        let sent = sent.clone();
        tokio::spawn(async move {
            writer.write_all(&sent).await.unwrap();
            // The end of what goes in; the answer still comes back after it.
            writer.shutdown().await.unwrap();
            writer
        })
    };
    let mut received = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), reader.read_to_end(&mut received))
        .await
        .expect("the echo ends")
        .unwrap();
    let _writer = sending.await.unwrap();
    assert_eq!(received.len(), sent.len() + 3);
    assert_eq!(
        Sha256::digest(&received[..sent.len()]),
        Sha256::digest(&sent),
        "every byte came back, in order"
    );
    assert_eq!(&received[sent.len()..], b"bye");
}

#[tokio::test]
async fn a_hundred_connections_at_once_all_echo() {
    let server = TestServer::start().await;
    // Each connection is a thread of the echo server and two of the agent's.
    let sandbox = server
        .create(json!({"template": "base", "pidsLimit": 1024}))
        .await;
    let caller = owner(&server).await;
    server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(&sandbox), "path": "/tmp/echo.py", "content": ECHO}),
        )
        .await;
    start(&server, &sandbox, "exec python3 /tmp/echo.py").await;
    drop(connect(&server, &caller, &sandbox, 7000).await);

    let mut streams = Vec::new();
    for _ in 0..100 {
        streams.push(connect(&server, &caller, &sandbox, 7000).await);
    }
    let echoes = streams
        .into_iter()
        .enumerate()
        .map(|(n, mut stream)| async move {
            let message = format!("connection {n}");
            stream.write_all(message.as_bytes()).await.unwrap();
            stream.shutdown().await.unwrap();
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await.unwrap();
            assert_eq!(answer, format!("{message}bye").into_bytes());
        });
    tokio::time::timeout(
        Duration::from_secs(60),
        futures_util::future::join_all(echoes),
    )
    .await
    .expect("every echo ends");
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_another_organization_finds_no_sandbox() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let caller = owner(&server).await;

    let closed = server
        .service
        .ports()
        .connect(&caller, id(&sandbox), 9)
        .await;
    assert!(
        matches!(closed, Err(ServiceError::PortUnreachable(ref m)) if m.contains("port 9")),
        "{:?}",
        closed.err()
    );
    let zero = server
        .service
        .ports()
        .connect(&caller, id(&sandbox), 0)
        .await;
    assert!(matches!(zero, Err(ServiceError::Refused(_))));

    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let stranger = server
        .service
        .store()
        .authenticate(other["apiKey"]["secret"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    let foreign = server
        .service
        .ports()
        .connect(&stranger, id(&sandbox), 9)
        .await;
    assert!(
        matches!(foreign, Err(ServiceError::NotFound("sandbox"))),
        "{:?}",
        foreign.err()
    );
}

async fn serve_echo(server: &TestServer, sandbox: &Value) {
    let (status, written) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(sandbox), "path": "/tmp/echo.py", "content": ECHO}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{written}");
    start(server, sandbox, "exec python3 /tmp/echo.py").await;
}

/// Bytes through a connection every second for `seconds`, then the sandbox's record.
async fn talk_for(server: &TestServer, sandbox: &Value, seconds: u64) -> Value {
    let caller = owner(server).await;
    let mut stream = connect(server, &caller, sandbox, 7000).await;
    let mut echoed = [0u8; 4];
    for _ in 0..seconds {
        stream.write_all(b"ping").await.unwrap();
        stream.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (_, now) = server
        .get("sandbox.one", &[("sandboxId", id(sandbox))])
        .await;
    now
}

#[tokio::test]
async fn traffic_through_a_port_keeps_its_sandbox_alive_unless_the_operator_says_not() {
    let fast = |config: &mut sandboxd_server::Config| {
        config.reaper_interval_secs = 0.5;
    };
    let server = TestServer::start_with(fast).await;
    let sandbox = server
        .create(json!({"template": "base", "timeoutMs": 10_000}))
        .await;
    serve_echo(&server, &sandbox).await;
    let after = talk_for(&server, &sandbox, 14).await;
    assert_eq!(
        after["status"], "running",
        "14 s of traffic past a 10 s timeout: {after}"
    );

    let ignored = TestServer::start_with(|config| {
        fast(config);
        config.port_traffic_is_activity = false;
    })
    .await;
    let sandbox = ignored
        .create(json!({"template": "base", "timeoutMs": 10_000}))
        .await;
    serve_echo(&ignored, &sandbox).await;
    let caller = owner(&ignored).await;
    let mut stream = connect(&ignored, &caller, &sandbox, 7000).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let _ = stream.write_all(b"ping").await;
        let (_, now) = ignored
            .get("sandbox.one", &[("sandboxId", id(&sandbox))])
            .await;
        if now["status"] == "killed" {
            break;
        }
        assert!(Instant::now() < deadline, "still {now}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
