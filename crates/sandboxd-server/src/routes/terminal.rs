//! `/sandbox-pty?sandboxId=…&cols=80&rows=24[&cmd=…]`: an interactive terminal over a
//! WebSocket. Authorized like `/sandbox-exec` (same close codes). The server sends
//! `{"type":"ready"}`, then the terminal's output as binary messages, and
//! `{"type":"exit","exitCode":N}` when the session ends. The client sends keys as binary
//! messages (or `{"type":"input","data":"…"}`) and `{"type":"resize","cols":…,"rows":…}`.
//!
//! The session it drives is the service's `commands/terminal.rs` over the agent host's
//! `PtySession`.

use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::session::{self, RECHECK_EVERY, close, send_json as text};
use crate::AppState;
use sandboxd_contracts::TerminalEvent as PtyEvent;

/// A terminal in use refreshes its sandbox's activity at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(10);
/// Largest terminal accepted, in either direction.
const MAX_DIMENSION: u16 = 1000;

/// Query of the terminal WebSocket.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalQuery {
    sandbox_id: Option<String>,
    token: Option<String>,
    cols: Option<u16>,
    rows: Option<u16>,
    cmd: Option<String>,
}

/// Client messages sent as text.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum ClientText {
    Input { data: String },
    Resize { cols: u16, rows: u16 },
}

pub async fn sandbox_pty(
    ws: WebSocketUpgrade,
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<TerminalQuery>,
) -> Response {
    let credentials = session::Credentials::of(&headers);
    ws.on_upgrade(move |socket| session(socket, state, query, credentials))
}

fn dimension(value: Option<u16>, default: u16) -> u16 {
    value.unwrap_or(default).clamp(1, MAX_DIMENSION)
}

async fn session(
    socket: WebSocket,
    state: AppState,
    query: TerminalQuery,
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
    let caller = auth.caller().clone();
    let (cols, rows) = (dimension(query.cols, 80), dimension(query.rows, 24));
    let mut terminal = match state
        .service
        .commands()
        .open_terminal(&caller, &sandbox_id, query.cmd, cols, rows)
        .await
    {
        Ok(terminal) => terminal,
        Err(error) => {
            text(
                &mut socket,
                json!({"type": "error", "message": error.to_string()}),
            )
            .await;
            return close(socket, 1011, "no terminal").await;
        }
    };
    if !text(
        &mut socket,
        json!({"type": "ready", "sandboxId": sandbox_id}),
    )
    .await
    {
        return;
    }
    let mut touched = Instant::now();
    let mut recheck = tokio::time::interval(RECHECK_EVERY);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = recheck.tick() => {
                // Ending the session drops the terminal, which ends what runs on it.
                if let Err(ended) = auth.check(&state).await {
                    return close(socket, ended.code, ended.reason).await;
                }
            }
            event = terminal.next() => match event {
                Ok(PtyEvent::Output(bytes)) => {
                    if socket.send(Message::Binary(bytes.into())).await.is_err() {
                        return;
                    }
                }
                Ok(PtyEvent::Exit(code)) => {
                    text(&mut socket, json!({"type": "exit", "exitCode": code})).await;
                    return close(socket, 1000, "exited").await;
                }
                Err(error) => {
                    text(&mut socket, json!({"type": "error", "message": error.to_string()})).await;
                    return close(socket, 1011, "terminal lost").await;
                }
            },
            incoming = socket.recv() => {
                let sent = match incoming {
                    Some(Ok(Message::Binary(keys))) => terminal.input(&keys).await,
                    Some(Ok(Message::Text(raw))) => match serde_json::from_str::<ClientText>(&raw) {
                        Ok(ClientText::Input { data }) => terminal.input(data.as_bytes()).await,
                        Ok(ClientText::Resize { cols, rows }) => {
                            terminal.resize(dimension(Some(cols), 80), dimension(Some(rows), 24)).await
                        }
                        Err(error) => {
                            text(&mut socket, json!({"type": "error", "message": format!("invalid message: {error}")})).await;
                            Ok(())
                        }
                    },
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => Ok(()),
                    // Gone: dropping the session kills what runs on the terminal.
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                };
                if sent.is_err() {
                    return close(socket, 1011, "terminal lost").await;
                }
                if touched.elapsed() > TOUCH_EVERY {
                    touched = Instant::now();
                    let _ = state.service.commands().touch(&sandbox_id).await;
                }
            }
        }
    }
}
