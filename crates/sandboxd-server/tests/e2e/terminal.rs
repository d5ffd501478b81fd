//! Interactive terminals over a WebSocket, with a real client: typing, resizing,
//! binary-safe output, the exit code, and a client that goes away.

use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::harness::{KEY, TestServer, id};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub(crate) async fn open(server: &TestServer, sandbox: &Value, extra: &str) -> Socket {
    let url = format!(
        "{}/sandbox-pty?sandboxId={}{extra}",
        server.url.replacen("http", "ws", 1),
        id(sandbox)
    );
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("x-api-key", KEY.parse().unwrap());
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// Reads until the terminal output contains `needle`; returns the output so far.
pub(crate) async fn read_until(socket: &mut Socket, output: &mut Vec<u8>, needle: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !output.windows(needle.len()).any(|w| w == needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = tokio::time::timeout(left, socket.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no {:?} in {:?}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(output)
                )
            });
        match message {
            Some(Ok(Message::Binary(bytes))) => output.extend_from_slice(&bytes),
            Some(Ok(Message::Text(text))) => panic!(
                "unexpected {text} (output {:?})",
                String::from_utf8_lossy(output)
            ),
            other => panic!("connection ended: {other:?}"),
        }
    }
}

pub(crate) async fn expect_text(socket: &mut Socket) -> Value {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .unwrap()
        {
            Some(Ok(Message::Text(text))) => return serde_json::from_str(&text).unwrap(),
            Some(Ok(Message::Binary(_))) => continue,
            other => panic!("connection ended: {other:?}"),
        }
    }
}

pub(crate) async fn keys(socket: &mut Socket, keys: &str) {
    socket
        .send(Message::Binary(keys.as_bytes().to_vec().into()))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_shell_on_a_terminal_types_resizes_and_exits() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let mut socket = open(&server, &sandbox, "&cols=80&rows=24").await;
    assert_eq!(
        expect_text(&mut socket).await,
        json!({"type": "ready", "sandboxId": id(&sandbox)})
    );
    let mut output = Vec::new();
    keys(&mut socket, "echo $((6*7))\n").await;
    read_until(&mut socket, &mut output, b"42\r\n").await;
    keys(&mut socket, "stty size\n").await;
    read_until(&mut socket, &mut output, b"24 80").await;
    let resize = json!({"type": "resize", "cols": 100, "rows": 40}).to_string();
    socket.send(Message::Text(resize.into())).await.unwrap();
    keys(&mut socket, "stty size\n").await;
    read_until(&mut socket, &mut output, b"40 100").await;
    // Text input works as well as binary, and output is binary-safe.
    let input = json!({"type": "input", "data": "printf 'A\\000\\377B'\n"}).to_string();
    socket.send(Message::Text(input.into())).await.unwrap();
    read_until(&mut socket, &mut output, b"A\x00\xffB").await;
    keys(&mut socket, "tty; exit 7\n").await;
    read_until(&mut socket, &mut output, b"/dev/pts/").await;
    assert_eq!(
        expect_text(&mut socket).await,
        json!({"type": "exit", "exitCode": 7})
    );
}

#[tokio::test]
async fn a_command_on_a_terminal() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let mut socket = open(
        &server,
        &sandbox,
        "&cmd=test%20-t%201%20%26%26%20echo%20on-a-tty",
    )
    .await;
    assert_eq!(expect_text(&mut socket).await["type"], "ready");
    let mut output = Vec::new();
    read_until(&mut socket, &mut output, b"on-a-tty").await;
    assert_eq!(
        expect_text(&mut socket).await,
        json!({"type": "exit", "exitCode": 0})
    );
}

#[tokio::test]
async fn a_client_that_goes_away_ends_the_session() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let mut socket = open(&server, &sandbox, "").await;
    assert_eq!(expect_text(&mut socket).await["type"], "ready");
    let mut output = Vec::new();
    // A job started from the interactive shell gets its own process group.
    keys(&mut socket, "sleep 301 & sleep 302; echo never\n").await;
    keys(&mut socket, "").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    read_until(&mut socket, &mut output, b"sleep 301").await;
    drop(socket);
    server
        .wait_gone(&sandbox, |cmd| cmd.contains("sleep") || cmd == "sh")
        .await;
}

#[tokio::test]
async fn terminals_need_the_agent() {
    let server = TestServer::start_without_agent().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let mut socket = open(&server, &sandbox, "").await;
    let error = expect_text(&mut socket).await;
    assert_eq!(error["type"], "error");
    assert!(
        error["message"].as_str().unwrap().contains("agent"),
        "{error}"
    );
}
