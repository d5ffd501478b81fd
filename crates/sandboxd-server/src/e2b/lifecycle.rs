//! The rest of E2B's sandbox lifecycle under `/e2b`: pause (and the deprecated resume),
//! metrics, snapshots (taken, listed, removed, named as a create's template) and forks,
//! on sandboxd's own (`sandboxd_core::e2b::lifecycle` maps the wire format).

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::e2b::lifecycle::{
    self as wire, ForkBody, ForkResult, Metric, SnapshotAnswer, SnapshotBody,
};
use sandboxd_core::e2b::{self, ErrorAnswer, SandboxAnswer};
use sandboxd_core::model::{Principal, SandboxStatus};
use sandboxd_core::snapshots::Snapshot;
use sandboxd_core::validate;
use serde::Deserialize;

use super::calls::{E2bResult, answer, caller, live_sandbox};
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::service::ServiceError;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/e2b/sandboxes/{id}/pause", post(pause))
        .route("/e2b/sandboxes/{id}/resume", post(resume))
        .route("/e2b/sandboxes/{id}/metrics", get(metrics))
        .route("/e2b/sandboxes/{id}/snapshots", post(snapshot))
        .route("/e2b/sandboxes/{id}/fork", post(fork))
        .route("/e2b/snapshots", get(snapshots))
        .route("/e2b/templates/{id}", delete(remove_snapshot))
}

/// The snapshot of the caller's a create's template names (its id or name), if any.
pub(super) async fn snapshot_named(
    state: &AppState,
    caller: &Principal,
    template: &str,
) -> E2bResult<Option<Snapshot>> {
    if template.is_empty() || sandboxd_core::templates::TEMPLATE_NAMES.contains(&template) {
        return Ok(None);
    }
    let snapshots = match state.service.sandboxes().snapshots(caller).await {
        Ok(snapshots) => snapshots,
        // A key that may not read sandboxes names templates only.
        Err(ServiceError::Forbidden(_)) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    Ok(snapshots
        .into_iter()
        .find(|snapshot| wire::names_snapshot(snapshot, template)))
}

/// Body of a pause: `memory: false` keeps the files alone (E2B's `keep_memory=False`).
#[derive(Debug, Default, Deserialize)]
struct PauseBody {
    memory: Option<bool>,
}

/// Pauses a running sandbox: 204; 409 when it is paused already. With `memory: false`
/// its processes end and its files are kept: its resume starts it afresh.
async fn pause(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> E2bResult<StatusCode> {
    let who = caller(who)?;
    let sandbox = live_sandbox(&state, &who, &id, SandboxNeed::Use).await?;
    if sandbox.status == SandboxStatus::Paused {
        return Err(ApiError::from(ServiceError::Conflict(format!(
            "sandbox {id} is already paused"
        )))
        .into());
    }
    let body: PauseBody = if body.iter().all(u8::is_ascii_whitespace) {
        PauseBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|error| ApiError::BadRequest(format!("invalid JSON body: {error}")))?
    };
    let sandboxes = state.service.sandboxes();
    if body.memory == Some(false) {
        sandboxes.pause_files_for(&who, &id).await?;
    } else {
        sandboxes
            .pause_for(&who, &id, sandboxd_core::model::PauseMemory::Ram)
            .await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Resumes a paused sandbox (E2B's deprecated call; connect does it too): 201.
async fn resume(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
) -> E2bResult<(StatusCode, Json<SandboxAnswer>)> {
    let who = caller(who)?;
    let sandbox = live_sandbox(&state, &who, &id, SandboxNeed::Use).await?;
    if sandbox.status != SandboxStatus::Paused {
        return Err(ApiError::from(ServiceError::Conflict(format!(
            "sandbox {id} is not paused"
        )))
        .into());
    }
    let sandbox = state.service.sandboxes().resume_for(&who, &id).await?;
    Ok((StatusCode::CREATED, Json(answer(&state, &who, &sandbox))))
}

/// Query of the metrics: an interval, in seconds since the epoch.
#[derive(Debug, Default, Deserialize)]
struct MetricsQuery {
    start: Option<i64>,
    end: Option<i64>,
}

/// The sandbox's readings within the interval (seconds, both included), from the
/// history kept while it runs (`sandbox.metrics`).
async fn metrics(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
    query: Result<Query<MetricsQuery>, axum::extract::rejection::QueryRejection>,
) -> E2bResult<Json<Vec<Metric>>> {
    let who = caller(who)?;
    let Query(query) = query.map_err(|rejection| {
        ApiError::BadRequest(format!("invalid query: {}", rejection.body_text()))
    })?;
    live_sandbox(&state, &who, &id, SandboxNeed::Read).await?;
    let range = wire::metrics_range(id, query.start, query.end)?;
    let metrics = state.service.sandboxes().metrics(&who, range).await?;
    Ok(Json(wire::metrics_of(&metrics, crate::time::parse_rfc3339)))
}

/// Takes a snapshot (of the files; a paused sandbox's memory is not kept): 201.
async fn snapshot(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
    asked: Option<Json<SnapshotBody>>,
) -> E2bResult<(StatusCode, Json<SnapshotAnswer>)> {
    let who = caller(who)?;
    let asked = asked.map(|Json(body)| body).unwrap_or_default();
    live_sandbox(&state, &who, &id, SandboxNeed::Use).await?;
    let cmd = validate::take_snapshot(sandboxd_core::api::SnapshotRequest {
        sandbox_id: id,
        name: asked.name,
        memory: None,
    })?;
    let snapshot = state.service.sandboxes().snapshot(&who, cmd).await?;
    Ok((StatusCode::CREATED, Json(wire::snapshot_answer(&snapshot))))
}

/// Query of the snapshot listing.
#[derive(Debug, Default, Deserialize)]
struct SnapshotsQuery {
    #[serde(rename = "sandboxID")]
    sandbox_id: Option<String>,
    name: Option<String>,
}

/// The snapshots the caller sees, newest first, filtered by sandbox and name.
async fn snapshots(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    query: Result<Query<SnapshotsQuery>, axum::extract::rejection::QueryRejection>,
) -> E2bResult<Json<Vec<SnapshotAnswer>>> {
    let who = caller(who)?;
    let Query(query) = query.map_err(|rejection| {
        ApiError::BadRequest(format!("invalid query: {}", rejection.body_text()))
    })?;
    let mut found = state.service.sandboxes().snapshots(&who).await?;
    found.sort_by_key(|s| std::cmp::Reverse(s.created_at));
    Ok(Json(
        found
            .iter()
            .filter(|s| {
                query
                    .sandbox_id
                    .as_ref()
                    .is_none_or(|id| &s.sandbox_id == id)
            })
            .filter(|s| {
                query
                    .name
                    .as_ref()
                    .is_none_or(|name| wire::names_snapshot(s, name))
            })
            .map(wire::snapshot_answer)
            .collect(),
    ))
}

/// Removes a snapshot (E2B removes snapshots as templates): 204, 404 when unknown.
async fn remove_snapshot(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
) -> E2bResult<StatusCode> {
    let who = caller(who)?;
    let Some(snapshot) = snapshot_named(&state, &who, &id).await? else {
        return Err(ApiError::from(ServiceError::NotFound("snapshot")).into());
    };
    state
        .service
        .sandboxes()
        .remove_snapshot(&who, &snapshot.snapshot_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Forks a sandbox into `count` new sandboxes, each living `timeout` seconds (E2B's
/// default 15; sandboxd's forks live 10 s at least): with its memory, as E2B's do, where
/// its tier allows (a gVisor sandbox on the local engine with no volume), else its
/// files.
async fn fork(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(id): Path<String>,
    asked: Option<Json<ForkBody>>,
) -> E2bResult<(StatusCode, Json<Vec<ForkResult>>)> {
    let who = caller(who)?;
    let asked = asked.map(|Json(body)| body).unwrap_or_default();
    let source = live_sandbox(&state, &who, &id, SandboxNeed::Use).await?;
    let memory = sandboxd_core::plan::isolation_tier(source.runtime.as_deref()) == "gvisor"
        && source.server_id.is_none()
        && source.volumes.is_empty();
    let seconds = asked.timeout.unwrap_or(wire::FORK_TIMEOUT_SECS);
    let timeout_ms = e2b::timeout_ms("timeout", seconds)?;
    let cmd = validate::fork(sandboxd_core::api::ForkRequest {
        sandbox_id: id,
        count: asked.count,
        env_vars: None,
        timeout_ms: Some(timeout_ms.max(sandboxd_core::limits::MIN_TIMEOUT_MS)),
        memory: Some(memory),
    })?;
    let (_, forks) = state.service.sandboxes().fork(&who, cmd).await?;
    let results = forks
        .iter()
        .map(|sandbox| ForkResult {
            sandbox: Some(answer(&state, &who, sandbox)),
            error: None::<ErrorAnswer>,
        })
        .collect();
    Ok((StatusCode::CREATED, Json(results)))
}
