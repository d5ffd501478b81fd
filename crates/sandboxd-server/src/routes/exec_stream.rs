//! `/sandbox-exec?sandboxId=…`: streaming exec over a WebSocket, the reference protocol.
//! Authorized by the `x-api-key` header (or `Authorization: Bearer`), or by a single-use
//! `?token=` from `sandbox.execToken` for browsers. Messages sent before `ready` wait
//! unread in the socket; one command at a time; a client that goes away kills its
//! command.
//!
//! Authorization happens on the socket, so that failures carry close codes. The running
//! command is a future owned by the session: a client that goes away drops it, and
//! dropping an exec kills its command (`SendOnDrop` in the agent channel, `KillOnDrop` in
//! the engine adapter).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use sandboxd_contracts::OutputStream;
use sandboxd_core::api::ExecRequest;
use sandboxd_core::api::stream::{ClientMessage, ServerMessage};
use sandboxd_core::utf8_stream::Utf8Stream;
use sandboxd_core::validate;
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::AppState;
use crate::routes::session::{self, RECHECK_EVERY, close};
use crate::service::ServiceError;

/// Query of the WebSocket.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamQuery {
    sandbox_id: Option<String>,
    token: Option<String>,
}

/// Upgrades, then authorizes on the socket so failures can carry their close codes.
pub async fn sandbox_exec(
    ws: WebSocketUpgrade,
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<StreamQuery>,
) -> Response {
    let credentials = session::Credentials::of(&headers);
    ws.on_upgrade(move |socket| session(socket, state, query, credentials))
}

/// Sends one JSON message within [`SEND_TIMEOUT`]; whether it went.
pub(super) async fn send(socket: &mut WebSocket, message: &impl serde::Serialize) -> bool {
    let Ok(text) = serde_json::to_string(message) else {
        return false;
    };
    matches!(
        tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Text(text.into()))).await,
        Ok(Ok(()))
    )
}

/// The running command, on a task of its own so that it is driven (and its timeout
/// fires) even while a slow client holds the session in a send; dropping it (the
/// client went away) aborts the task, which kills the command.
struct Running(tokio::task::JoinHandle<Result<sandboxd_core::api::ExecResult, ServiceError>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A send to the client that has not completed after this long ends the session: a
/// client that stops reading cannot hold it open.
const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

async fn session(
    socket: WebSocket,
    state: AppState,
    query: StreamQuery,
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
    if !send(
        &mut socket,
        &ServerMessage::Ready {
            sandbox_id: sandbox_id.clone(),
        },
    )
    .await
    {
        return;
    }
    let mut recheck = tokio::time::interval(RECHECK_EVERY);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The running command and its output; dropping the command kills it.
    let mut running: Option<Running> = None;
    let mut output: Option<mpsc::Receiver<(OutputStream, Bytes)>> = None;
    let mut decoders = [Utf8Stream::default(), Utf8Stream::default()];
    loop {
        tokio::select! {
            _ = recheck.tick() => {
                // Ending the session drops the running command, which kills it.
                if let Err(ended) = auth.check(&state).await {
                    return close(socket, ended.code, ended.reason).await;
                }
            }
            incoming = socket.recv() => {
                let text = match incoming {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Binary(_))) => {
                        send(&mut socket, &ServerMessage::Error { message: "messages are JSON text".into() }).await;
                        continue;
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    // Gone: dropping the running command kills it.
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                };
                let message = match serde_json::from_str::<ClientMessage>(&text) {
                    Ok(message) => message,
                    Err(error) => {
                        send(&mut socket, &ServerMessage::Error { message: format!("invalid message: {error}") }).await;
                        continue;
                    }
                };
                if running.is_some() {
                    send(&mut socket, &ServerMessage::Error { message: "a command is already running on this connection".into() }).await;
                    continue;
                }
                let who = match auth.check(&state).await {
                    Ok(caller) => caller.clone(),
                    Err(ended) => return close(socket, ended.code, ended.reason).await,
                };
                let ClientMessage::Exec { cmd, cwd, env, timeout_ms } = message;
                let request = ExecRequest { sandbox_id: sandbox_id.clone(), cmd, cwd, env, timeout_ms };
                let command = match validate::exec(request) {
                    Ok(command) => command,
                    Err(invalid) => {
                        send(&mut socket, &ServerMessage::Error { message: invalid.to_string() }).await;
                        continue;
                    }
                };
                let (tx, rx) = mpsc::channel(64);
                let service = state.service.clone();
                let task = tokio::spawn(async move { service.commands().exec_streaming(&who, command, Some(tx)).await });
                running = Some(Running(task));
                output = Some(rx);
                decoders = [Utf8Stream::default(), Utf8Stream::default()];
            }
            Some((which, chunk)) = recv(&mut output) => {
                if !forward(&mut socket, &mut decoders, which, &chunk).await {
                    return;
                }
            }
            result = finish(&mut running) => {
                running = None;
                // Every chunk was queued before the command completed.
                if let Some(mut rx) = output.take() {
                    while let Ok((which, bytes)) = rx.try_recv() {
                        if !forward(&mut socket, &mut decoders, which, &bytes).await {
                            return;
                        }
                    }
                }
                for (index, decoder) in decoders.iter_mut().enumerate() {
                    let rest = decoder.finish();
                    if !rest.is_empty() {
                        let message = if index == 0 { ServerMessage::Stdout { data: rest } } else { ServerMessage::Stderr { data: rest } };
                        send(&mut socket, &message).await;
                    }
                }
                let message = match result {
                    Ok(result) => ServerMessage::Exit { exit_code: result.exit_code, timed_out: result.timed_out },
                    Err(error) => ServerMessage::Error { message: public_message(&error) },
                };
                if !send(&mut socket, &message).await {
                    return;
                }
            }
        }
    }
}

/// The next chunk of the running command, or never when none runs.
async fn recv(
    output: &mut Option<mpsc::Receiver<(OutputStream, Bytes)>>,
) -> Option<(OutputStream, Bytes)> {
    match output.as_mut() {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The result of the running command, or never when none runs.
async fn finish(
    running: &mut Option<Running>,
) -> Result<sandboxd_core::api::ExecResult, ServiceError> {
    match running.as_mut() {
        Some(task) => match (&mut task.0).await {
            Ok(result) => result,
            Err(_) => Err(ServiceError::Unavailable(
                "the command was interrupted".into(),
            )),
        },
        None => std::future::pending().await,
    }
}

async fn forward(
    socket: &mut WebSocket,
    decoders: &mut [Utf8Stream; 2],
    which: OutputStream,
    bytes: &[u8],
) -> bool {
    let (index, wrap): (usize, fn(String) -> ServerMessage) = match which {
        OutputStream::Stdout => (0, |data| ServerMessage::Stdout { data }),
        OutputStream::Stderr => (1, |data| ServerMessage::Stderr { data }),
    };
    let text = decoders[index].push(bytes);
    text.is_empty() || send(socket, &wrap(text)).await
}

/// What a client may see of a failure: internal causes stay in the log.
pub(super) fn public_message(error: &ServiceError) -> String {
    match error {
        ServiceError::Store(_) | ServiceError::Engine(_) => {
            tracing::error!(error = %sandboxd_core::error::chain(&error), "a streaming session failed");
            "internal error".into()
        }
        other => other.to_string(),
    }
}
