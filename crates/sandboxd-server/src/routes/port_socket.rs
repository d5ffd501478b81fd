//! `/sandbox-port?sandboxId=…&port=N`: one TCP connection to `127.0.0.1:<port>` inside a
//! sandbox, carried over a WebSocket (what `sandboxd port-forward` opens for each local
//! connection). Binary messages carry the bytes each way; either side closing ends it.
//! Authorized like `/sandbox-exec` (same close codes), its caller proven again every
//! second; the server sends `{"type":"ready"}` once the port accepted, or
//! `{"type":"error","message":…}` and closes with 1011. Its traffic is the sandbox's
//! activity as any port connection's is (`Ports::connect`).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::session::{self, RECHECK_EVERY, close, send_json as text};
use crate::AppState;

/// The most one message carries from the port (the agent's window is 64 KiB).
const CHUNK: usize = 64 * 1024;

/// Query of the port WebSocket.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortQuery {
    sandbox_id: Option<String>,
    token: Option<String>,
    port: Option<String>,
}

pub async fn sandbox_port(
    ws: WebSocketUpgrade,
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<PortQuery>,
) -> Response {
    let credentials = session::Credentials::of(&headers);
    ws.on_upgrade(move |socket| carry(socket, state, query, credentials))
}

async fn carry(
    socket: WebSocket,
    state: AppState,
    query: PortQuery,
    credentials: session::Credentials,
) {
    let Some((mut socket, sandbox_id, mut auth)) = session::accept(
        socket,
        &state,
        query.sandbox_id,
        &credentials,
        query.token.as_deref(),
    )
    .await
    else {
        return;
    };
    let Some(port) = query
        .port
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p > 0)
    else {
        text(
            &mut socket,
            json!({"type": "error", "message": "port must be a number between 1 and 65535"}),
        )
        .await;
        return close(socket, 1008, "bad port").await;
    };
    let caller = auth.caller().clone();
    let stream = match state
        .service
        .ports()
        .connect(&caller, &sandbox_id, port)
        .await
    {
        Ok(stream) => stream,
        Err(error) => {
            text(
                &mut socket,
                json!({"type": "error", "message": error.to_string()}),
            )
            .await;
            return close(socket, 1011, "port unreachable").await;
        }
    };
    if !text(&mut socket, json!({"type": "ready", "port": port})).await {
        return;
    }
    let (mut from_port, mut to_port) = tokio::io::split(stream);
    let mut buffer = vec![0u8; CHUNK];
    let mut recheck = tokio::time::interval(RECHECK_EVERY);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = recheck.tick() => {
                if let Err(ended) = auth.check(&state).await {
                    return close(socket, ended.code, ended.reason).await;
                }
            }
            read = from_port.read(&mut buffer) => match read {
                Ok(0) | Err(_) => return close(socket, 1000, "the port closed").await,
                Ok(n) => {
                    let chunk = bytes::Bytes::copy_from_slice(&buffer[..n]);
                    if socket.send(Message::Binary(chunk)).await.is_err() {
                        return;
                    }
                }
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Binary(bytes))) => {
                    if to_port.write_all(&bytes).await.is_err() {
                        return close(socket, 1011, "the port closed").await;
                    }
                }
                Some(Ok(Message::Text(_))) => {
                    text(&mut socket, json!({"type": "error", "message": "send the port's bytes as binary messages"})).await;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                    let _ = to_port.shutdown().await;
                    return;
                }
            },
        }
    }
}
