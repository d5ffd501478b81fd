//! `/sandbox-watch?sandboxId=…&path=…&recursive=…`: what changes under a directory of a
//! sandbox, as it changes, over a WebSocket. Authorized as the streaming exec is (the
//! key's header, or a browser's single-use `?token=`), checked again every second.
//!
//! The agent keeps the watcher (inotify, under gVisor too; at most 32 per sandbox); this
//! session reads it again and again, each read waiting in the agent up to [`WAIT`] for
//! a first change (so a change goes out as it comes), at most `MAX_EVENTS_PER_READ` a
//! read (past that, and for events the kernel lost, an `overflow`). A read under way
//! is never dropped for the client's messages or the key's recheck, so nothing read is
//! lost. The watcher is removed when the session ends, however it ends.

use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use sandboxd_contracts::{PathKind, WatchKind};
use sandboxd_core::api::watch::{
    Change, MAX_EVENTS_PER_READ, WatchMessage, WatchQuery, event_of, watch_target,
};
use sandboxd_core::model::Principal;

use crate::AppState;
use crate::routes::exec_stream::{public_message, send};
use crate::routes::session::{self, RECHECK_EVERY, close};
use crate::service::ServiceError;

/// How long one read waits in the agent for a first change.
const WAIT: Duration = Duration::from_millis(500);
/// How long after a read that found nothing the next one starts (what the kernel
/// queued meanwhile is in it).
const AFTER_NOTHING: Duration = Duration::from_millis(25);
/// Upgrades, then authorizes on the socket so failures can carry their close codes.
pub async fn sandbox_watch(
    ws: WebSocketUpgrade,
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<WatchQuery>,
) -> Response {
    let credentials = session::Credentials::of(&headers);
    ws.on_upgrade(move |socket| session(socket, state, query, credentials))
}

/// Starts the agent's watcher of `path`, a directory; its id.
async fn start(
    state: &AppState,
    who: &Principal,
    sandbox_id: &str,
    path: &str,
    recursive: bool,
) -> Result<String, String> {
    let files = state.service.files();
    let entry = files
        .stat(who, sandbox_id, path)
        .await
        .map_err(|e| match e {
            ServiceError::NotFound("path") => format!("{path} does not exist"),
            other => public_message(&other),
        })?;
    if entry.kind != PathKind::Directory {
        return Err(format!("{path} is not a directory"));
    }
    files
        .add_watcher(who, sandbox_id, path, recursive)
        .await
        .map_err(|e| public_message(&e))
}

async fn session(
    socket: WebSocket,
    state: AppState,
    query: WatchQuery,
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
    let who = auth.caller().clone();
    let started = match watch_target(query.path.as_deref()) {
        Ok(path) => start(&state, &who, &sandbox_id, &path, query.recursive)
            .await
            .map(|id| (path, id)),
        Err(invalid) => Err(invalid.to_string()),
    };
    let (path, watcher) = match started {
        Ok(started) => started,
        Err(message) => {
            send(&mut socket, &WatchMessage::Error { message }).await;
            return close(socket, 1000, "").await;
        }
    };
    let ready = WatchMessage::Ready {
        sandbox_id: sandbox_id.clone(),
        path,
    };
    if send(&mut socket, &ready).await {
        follow(&mut socket, &state, &mut auth, &sandbox_id, &watcher).await;
    }
    // However the session ended, the agent's watcher goes with it.
    let _ = state
        .service
        .files()
        .remove_watcher(&who, &sandbox_id, &watcher)
        .await;
}

/// Sends the watcher's changes until the client goes, its key stops working, or the
/// watcher fails.
async fn follow(
    socket: &mut WebSocket,
    state: &AppState,
    auth: &mut session::SessionAuth,
    sandbox_id: &str,
    watcher: &str,
) {
    let mut recheck = tokio::time::interval(RECHECK_EVERY);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let files = state.service.files();
    let who = auth.caller().clone();
    // After a read that found nothing (its wait ran out, or an agent that answers at
    // once), the next one starts a little later: no agent makes this loop spin.
    let read = |who: Principal, after: Duration| {
        let files = files.clone();
        let (sandbox_id, watcher) = (sandbox_id.to_owned(), watcher.to_owned());
        async move {
            tokio::time::sleep(after).await;
            files
                .watcher_events(&who, &sandbox_id, &watcher, WAIT)
                .await
        }
    };
    let mut reading = Box::pin(read(who, Duration::ZERO));
    loop {
        tokio::select! {
            _ = recheck.tick() => {
                if let Err(ended) = auth.check(state).await {
                    let _ = socket.send(Message::Close(Some(axum::extract::ws::CloseFrame {
                        code: ended.code,
                        reason: ended.reason.into(),
                    }))).await;
                    return;
                }
            }
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                // Nothing is asked of a watch; what a client sends is ignored.
                Some(Ok(_)) => {}
            },
            read_now = &mut reading => {
                let found = read_now.as_ref().is_ok_and(|events| !events.is_empty());
                let after = if found { Duration::ZERO } else { AFTER_NOTHING };
                reading = Box::pin(read(auth.caller().clone(), after));
                let events = match read_now {
                    Ok(events) => events,
                    Err(error) => {
                        send(socket, &WatchMessage::Error { message: public_message(&error) }).await;
                        return;
                    }
                };
                let mut lost = events.len() > MAX_EVENTS_PER_READ;
                for event in events.into_iter().take(MAX_EVENTS_PER_READ) {
                    let change = match event.kind {
                        WatchKind::Create => Change::Create,
                        WatchKind::Write => Change::Write,
                        WatchKind::Remove => Change::Remove,
                        WatchKind::Rename => Change::Rename,
                        WatchKind::Chmod => Change::Chmod,
                        WatchKind::Overflow => {
                            lost = true;
                            continue;
                        }
                    };
                    match event_of(change, event.path, event.name) {
                        Some(message) => {
                            if !send(socket, &message).await {
                                return;
                            }
                        }
                        None => lost = true,
                    }
                }
                if lost && !send(socket, &WatchMessage::Overflow {}).await {
                    return;
                }
            }
        }
    }
}
