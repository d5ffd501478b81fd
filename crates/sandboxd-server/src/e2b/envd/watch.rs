//! Watching directories: `CreateWatcher`, `GetWatcherEvents` and `RemoveWatcher` are
//! the agent's watchers one call each; `WatchDir` streams a watcher's events, each
//! read waiting up to [`WAIT`] for the first (so an event goes out as it comes), and
//! removes it when the stream ends (its client gone, its timeout passed).

use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::response::Response;
use sandboxd_contracts::{PathKind, WatchEvent, WatchKind};
use sandboxd_core::e2b::connect::Code;
use sandboxd_core::e2b::filesystem::resolve;
use sandboxd_core::e2b::watch::{
    Change, EventsAnswer, FilesystemEvent, WatchMessage, WatchRequest, WatcherAnswer,
    WatcherRequest, agent_watcher, watcher_id,
};
use tokio::time::Instant;

use super::Envd;
use super::fs::Fs;
use super::rpc::{self, RpcError};
use crate::AppState;
use crate::error::ApiError;
use crate::service::ServiceError;

/// How long a `WatchDir` stream's read waits for a first event (the agent answers as
/// soon as one comes): how often the stream looks at its client, deadline and
/// keepalive while it is quiet.
const WAIT: Duration = Duration::from_millis(500);
/// How long after a read that found nothing the next one starts.
const AFTER_NOTHING: Duration = Duration::from_millis(25);

/// Checks the directory and starts a watcher of it; the agent's watcher id.
async fn start(fs: &Fs<'_>, request: &WatchRequest) -> Result<String, RpcError> {
    let path = resolve(&request.path, "path").map_err(ApiError::from)?;
    let entry = fs.stat(&path).await?;
    let is_dir = match (entry.kind, entry.link_target.as_deref()) {
        (PathKind::Directory, _) => true,
        (PathKind::Symlink, Some(target)) if target.starts_with('/') => fs
            .stat(target)
            .await
            .is_ok_and(|e| e.kind == PathKind::Directory),
        _ => false,
    };
    if !is_dir {
        return Err(RpcError::new(
            Code::InvalidArgument,
            format!("path '{path}' is not a directory"),
        ));
    }
    Ok(fs
        .files()
        .add_watcher(&fs.who.caller, &fs.who.sandbox_id, &path, request.recursive)
        .await?)
}

/// The events of the agent's watcher, as E2B shows them.
async fn read(
    fs: &Fs<'_>,
    id: &str,
    with_entries: bool,
    wait: Duration,
) -> Result<Vec<FilesystemEvent>, RpcError> {
    let events = match fs
        .files()
        .watcher_events(&fs.who.caller, &fs.who.sandbox_id, id, wait)
        .await
    {
        Err(ServiceError::NotFound("watcher")) => {
            return Err(RpcError::new(
                Code::NotFound,
                format!("watcher {id} not found"),
            ));
        }
        other => other?,
    };
    let mut shown = Vec::with_capacity(events.len());
    for WatchEvent { name, path, kind } in events {
        let change = match kind {
            WatchKind::Create => Change::Create,
            WatchKind::Write => Change::Write,
            WatchKind::Remove => Change::Remove,
            WatchKind::Rename => Change::Rename,
            WatchKind::Chmod => Change::Chmod,
            WatchKind::Overflow => {
                tracing::warn!(sandbox_id = %fs.who.sandbox_id, "a watcher's queue overflowed: events were lost");
                continue;
            }
        };
        let entry = if with_entries && !matches!(change, Change::Remove | Change::Rename) {
            fs.entry(&path).await.ok()
        } else {
            None
        };
        shown.push(FilesystemEvent {
            name,
            change,
            entry,
        });
    }
    Ok(shown)
}

pub(super) async fn create(fs: &Fs<'_>, body: &Bytes) -> Result<Response, RpcError> {
    let request: WatchRequest = rpc::unary_request(body)?;
    let id = start(fs, &request).await?;
    Ok(rpc::unary_answer(&WatcherAnswer {
        watcher_id: watcher_id(&id, request.include_entry),
    }))
}

pub(super) async fn events(fs: &Fs<'_>, body: &Bytes) -> Result<Response, RpcError> {
    let request: WatcherRequest = rpc::unary_request(body)?;
    let (id, with_entries) = agent_watcher(&request.watcher_id);
    let events = read(fs, id, with_entries, Duration::ZERO).await?;
    Ok(rpc::unary_answer(&EventsAnswer { events }))
}

pub(super) async fn remove(fs: &Fs<'_>, body: &Bytes) -> Result<Response, RpcError> {
    let request: WatcherRequest = rpc::unary_request(body)?;
    let (id, _) = agent_watcher(&request.watcher_id);
    match fs
        .files()
        .remove_watcher(&fs.who.caller, &fs.who.sandbox_id, id)
        .await
    {
        Ok(()) | Err(ServiceError::NotFound("watcher")) => {
            Ok(rpc::unary_answer(&serde_json::json!({})))
        }
        Err(error) => Err(error.into()),
    }
}

/// `WatchDir`: `start` once the watcher runs, then its events as they come, keepalives
/// while it is quiet; the watcher is removed when the stream ends.
pub(super) async fn watch_dir(fs: &Fs<'_>, headers: &HeaderMap, body: &Bytes) -> Response {
    let started = async {
        let request: WatchRequest = rpc::stream_request(body)?;
        let id = start(fs, &request).await?;
        Ok::<_, RpcError>((id, request.include_entry))
    };
    let (id, with_entries) = match started.await {
        Ok(started) => started,
        Err(error) => return rpc::stream_error(error),
    };
    let deadline = rpc::timeout(headers).map(|t| Instant::now() + t);
    let keepalive = rpc::keepalive(headers);
    let (out, response) = rpc::stream_answer();
    let state: AppState = fs.state.clone();
    let who: Envd = fs.who.clone();
    tokio::spawn(async move {
        let fs = Fs {
            state: &state,
            who: &who,
        };
        let mut ended = None;
        if out.send(&WatchMessage::Start {}).await {
            let mut quiet_since = Instant::now();
            loop {
                if out.is_closed() {
                    break;
                }
                if deadline.is_some_and(|at| Instant::now() >= at) {
                    ended = Some(RpcError::new(
                        Code::DeadlineExceeded,
                        "the watch's timeout passed",
                    ));
                    break;
                }
                match read(&fs, &id, with_entries, WAIT).await {
                    Ok(events) => {
                        if events.is_empty() {
                            // The wait ran out (or an agent answered at once): no
                            // agent makes this loop spin.
                            tokio::time::sleep(AFTER_NOTHING).await;
                        }
                        let mut gone = false;
                        for event in events {
                            quiet_since = Instant::now();
                            if !out.send(&WatchMessage::Filesystem(Box::new(event))).await {
                                gone = true;
                                break;
                            }
                        }
                        if gone {
                            break;
                        }
                    }
                    Err(error) => {
                        ended = Some(error);
                        break;
                    }
                }
                if keepalive.is_some_and(|k| quiet_since.elapsed() >= k) {
                    quiet_since = Instant::now();
                    if !out.send(&WatchMessage::Keepalive {}).await {
                        break;
                    }
                }
            }
        }
        let _ = fs
            .files()
            .remove_watcher(&who.caller, &who.sandbox_id, &id)
            .await;
        out.end(ended).await;
    });
    response
}
