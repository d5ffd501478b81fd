//! The streaming exec WebSocket, with a real WebSocket client: every message type, the
//! queued-before-ready case, one command at a time, close codes, tokens, and a client
//! that goes away killing its command.

use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::harness::{KEY, TestServer, id};

pub(crate) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(server: &TestServer, query: &str, key: Option<&str>) -> Socket {
    connect_to(server, "/sandbox-exec", query, key).await
}

/// A WebSocket to `path` (`/sandbox-exec`, `/sandbox-pty`) with `query`.
pub(crate) async fn connect_to(
    server: &TestServer,
    path: &str,
    query: &str,
    key: Option<&str>,
) -> Socket {
    let url = format!("{}{path}{query}", server.url.replacen("http", "ws", 1));
    let mut request = url.into_client_request().unwrap();
    if let Some(key) = key {
        request
            .headers_mut()
            .insert("x-api-key", key.parse().unwrap());
    }
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// The next JSON message, or the close code when the server closes.
pub(crate) async fn next(socket: &mut Socket) -> Result<Value, Option<CloseCode>> {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("a message in time");
        match message {
            Some(Ok(Message::Text(text))) => return Ok(serde_json::from_str(&text).unwrap()),
            Some(Ok(Message::Close(frame))) => return Err(frame.map(|f| f.code)),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return Err(None),
        }
    }
}

pub(crate) async fn send(socket: &mut Socket, value: Value) {
    socket
        .send(Message::Text(value.to_string().into()))
        .await
        .unwrap();
}

/// Output and the final message of one command.
async fn collect(socket: &mut Socket) -> (String, String, Value) {
    let (mut stdout, mut stderr) = (String::new(), String::new());
    loop {
        let message = next(socket).await.expect("open");
        match message["type"].as_str().unwrap() {
            "stdout" => stdout.push_str(message["data"].as_str().unwrap()),
            "stderr" => stderr.push_str(message["data"].as_str().unwrap()),
            _ => return (stdout, stderr, message),
        }
    }
}

#[tokio::test]
async fn streams_output_as_it_comes_and_reports_the_exit() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let mut socket = connect(&server, &format!("?sandboxId={}", id(&sandbox)), Some(KEY)).await;
    // Sent before `ready`: queued, not dropped.
    send(
        &mut socket,
        json!({"type": "exec", "cmd": "echo one; sleep 1; echo two >&2; exit 3"}),
    )
    .await;
    assert_eq!(
        next(&mut socket).await.unwrap(),
        json!({"type": "ready", "sandboxId": id(&sandbox)})
    );
    let started = Instant::now();
    let first = next(&mut socket).await.unwrap();
    assert_eq!(first, json!({"type": "stdout", "data": "one\n"}));
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "first chunk came before the command ended"
    );
    let (stdout, stderr, end) = collect(&mut socket).await;
    assert_eq!((stdout.as_str(), stderr.as_str()), ("", "two\n"));
    assert_eq!(
        end,
        json!({"type": "exit", "exitCode": 3, "timedOut": false})
    );

    // Characters cut between chunks arrive whole.
    send(&mut socket, json!({"type": "exec", "cmd": "printf '\\303'; sleep 0.3; printf '\\251\\n'", "cwd": "/tmp", "env": {"A": "1"}})).await;
    let (stdout, _, end) = collect(&mut socket).await;
    assert_eq!(stdout, "é\n");
    assert_eq!(end["exitCode"], 0);

    // Timeouts report 124.
    send(
        &mut socket,
        json!({"type": "exec", "cmd": "sleep 30", "timeoutMs": 1000}),
    )
    .await;
    let (_, _, end) = collect(&mut socket).await;
    assert_eq!(
        end,
        json!({"type": "exit", "exitCode": 124, "timedOut": true})
    );
}

#[tokio::test]
async fn one_command_at_a_time_and_errors_keep_the_connection() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let mut socket = connect(&server, &format!("?sandboxId={}", id(&sandbox)), Some(KEY)).await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "ready");
    send(
        &mut socket,
        json!({"type": "exec", "timeoutMs": 5, "cmd": "true"}),
    )
    .await;
    let error = next(&mut socket).await.unwrap();
    assert_eq!(error["type"], "error");
    assert!(
        error["message"].as_str().unwrap().contains("timeoutMs"),
        "{error}"
    );
    send(&mut socket, json!({"type": "launch"})).await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "error");
    socket.send(Message::Text("not json".into())).await.unwrap();
    assert_eq!(next(&mut socket).await.unwrap()["type"], "error");

    send(
        &mut socket,
        json!({"type": "exec", "cmd": "sleep 1; echo first"}),
    )
    .await;
    send(&mut socket, json!({"type": "exec", "cmd": "echo second"})).await;
    let busy = next(&mut socket).await.unwrap();
    assert_eq!(busy["type"], "error");
    assert!(
        busy["message"]
            .as_str()
            .unwrap()
            .contains("already running")
    );
    let (stdout, _, end) = collect(&mut socket).await;
    assert_eq!(stdout, "first\n");
    assert_eq!(end["exitCode"], 0);
}

#[tokio::test]
async fn close_codes_and_tokens() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let sid = id(&sandbox);
    let mut socket = connect(&server, "", Some(KEY)).await;
    assert_eq!(
        next(&mut socket).await.unwrap_err(),
        Some(CloseCode::Library(4000))
    );
    let mut socket = connect(&server, &format!("?sandboxId={sid}"), None).await;
    assert_eq!(
        next(&mut socket).await.unwrap_err(),
        Some(CloseCode::Library(4001))
    );
    let mut socket = connect(&server, &format!("?sandboxId={sid}"), Some("sbx_wrong")).await;
    assert_eq!(
        next(&mut socket).await.unwrap_err(),
        Some(CloseCode::Library(4001))
    );
    let mut socket = connect(&server, "?sandboxId=someone-elses", Some(KEY)).await;
    assert_eq!(
        next(&mut socket).await.unwrap_err(),
        Some(CloseCode::Library(4003))
    );

    // A browser: a single-use token from the REST API instead of the header.
    let (status, grant) = server
        .post("sandbox.execToken", json!({"sandboxId": sid}))
        .await;
    assert_eq!(status, StatusCode::OK, "{grant}");
    let token = grant["token"].as_str().unwrap().to_owned();
    let mut socket = connect(&server, &format!("?sandboxId={sid}&token={token}"), None).await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "ready");
    send(
        &mut socket,
        json!({"type": "exec", "cmd": "echo via token"}),
    )
    .await;
    assert_eq!(collect(&mut socket).await.0, "via token\n");
    let mut again = connect(&server, &format!("?sandboxId={sid}&token={token}"), None).await;
    assert_eq!(
        next(&mut again).await.unwrap_err(),
        Some(CloseCode::Library(4001)),
        "tokens are single-use"
    );
}

async fn client_that_goes_away_kills_its_command(server: TestServer) {
    let sandbox = server.create(json!({"template": "base"})).await;
    let mut socket = connect(&server, &format!("?sandboxId={}", id(&sandbox)), Some(KEY)).await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "ready");
    send(
        &mut socket,
        json!({"type": "exec", "cmd": "echo started; sleep 300"}),
    )
    .await;
    assert_eq!(next(&mut socket).await.unwrap()["data"], "started\n");
    drop(socket);
    server
        .wait_gone(&sandbox, |cmd| cmd.contains("sleep"))
        .await;
}

#[tokio::test]
async fn a_client_that_goes_away_kills_its_command() {
    client_that_goes_away_kills_its_command(TestServer::start().await).await;
}

#[tokio::test]
async fn a_client_that_goes_away_kills_its_command_without_the_agent() {
    client_that_goes_away_kills_its_command(TestServer::start_without_agent().await).await;
}

/// Clients that go away right after asking leave nothing running either: a kill that
/// reaches the agent while the command is still being started is kept for it.
#[tokio::test]
async fn a_client_that_goes_away_at_once_leaves_no_command() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    for i in 0..20 {
        let mut socket = connect(&server, &format!("?sandboxId={}", id(&sandbox)), Some(KEY)).await;
        assert_eq!(next(&mut socket).await.unwrap()["type"], "ready");
        send(
            &mut socket,
            json!({"type": "exec", "cmd": format!("sleep 30{i:02}")}),
        )
        .await;
        // From at once to well after the request reached the agent.
        tokio::time::sleep(Duration::from_micros(250 * i)).await;
        drop(socket);
    }
    server
        .wait_gone(&sandbox, |cmd| cmd.contains("sleep 30"))
        .await;
}

/// Starts `yes` on a new sandbox through a WebSocket that, from then on, reads nothing.
async fn flood_unread(server: &TestServer, timeout_ms: u64) -> (Value, Socket) {
    let sandbox = server.create(json!({"template": "base"})).await;
    let mut socket = connect(server, &format!("?sandboxId={}", id(&sandbox)), Some(KEY)).await;
    assert_eq!(next(&mut socket).await.unwrap()["type"], "ready");
    send(
        &mut socket,
        json!({"type": "exec", "cmd": "yes flood-line", "timeoutMs": timeout_ms}),
    )
    .await;
    server.wait_running(&sandbox, "yes flood-line").await;
    (sandbox, socket)
}

/// A client that stops reading while its command floods output does not keep the
/// command past its timeout: the command is driven on its own and killed on time.
#[tokio::test]
async fn a_client_that_stops_reading_does_not_keep_its_command_past_the_timeout() {
    let server = TestServer::start().await;
    let (sandbox, socket) = flood_unread(&server, 2000).await;
    let started = Instant::now();
    server
        .wait_gone(&sandbox, |cmd| cmd.contains("yes flood-line"))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    drop(socket);
}

/// A client that stops reading holds up nothing else on its sandbox: while its command
/// floods output, commands on the same sandbox answer quickly, and the unread operation
/// is ended within its stall bound.
#[tokio::test]
async fn a_client_that_stops_reading_does_not_hold_the_sandboxs_other_operations() {
    let server = TestServer::start().await;
    let (sandbox, socket) = flood_unread(&server, 60000).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let started = Instant::now();
        let out = server.exec(&sandbox, "echo other").await;
        assert_eq!(out["stdout"], "other\n", "{out}");
        slowest = slowest.max(started.elapsed());
    }
    eprintln!("slowest command beside the unread one: {slowest:?}");
    assert!(slowest < Duration::from_secs(5), "{slowest:?}");
    // The unread command was ended (killed), not left running for its whole minute.
    let started = Instant::now();
    server
        .wait_gone(&sandbox, |cmd| cmd.contains("yes flood-line"))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    drop(socket);
}
