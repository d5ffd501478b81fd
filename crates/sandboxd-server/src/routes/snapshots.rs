//! `/api/sandbox.snapshot`, `/api/sandbox.fork` and `/api/snapshot.*`.

use axum::Json;
use axum::extract::State;
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::*;
use sandboxd_core::snapshots::Snapshot;
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::time::rfc3339;

type ApiResult<T> = Result<Json<T>, ApiError>;

fn view(snapshot: &Snapshot) -> SnapshotView {
    SnapshotView::from_snapshot(snapshot, rfc3339)
}

/// The snapshot procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(snapshot))
        .routes(routes!(fork))
        .routes(routes!(all))
        .routes(routes!(one))
        .routes(routes!(remove))
}

/// Snapshot a running or paused sandbox's filesystem: an image on the server it runs
/// on (the sandbox is frozen while it is read), counted against the organization's
/// snapshot quota. It keeps the files, the user and the workdir; none of the sandbox's
/// environment variables. `sandbox.create {snapshotId}` starts sandboxes from it.
#[utoipa::path(post, path = "/api/sandbox.snapshot", operation_id = "sandbox-snapshot", tag = "snapshot",
    request_body = SnapshotRequest,
    responses((status = 200, body = SnapshotView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 412, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn snapshot(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<SnapshotRequest>,
) -> ApiResult<SnapshotView> {
    let cmd = validate::take_snapshot(req)?;
    Ok(Json(view(
        &state.service.sandboxes().snapshot(&caller, cmd).await?,
    )))
}

/// Fork a running or paused sandbox into `count` new ones, from a fresh snapshot of
/// it: each has its files, its limits, network and labels, and an id and timeout of
/// its own. Processes and memory are not carried, nor environment variables (give
/// `envVars`) or egress credentials. All or nothing. The snapshot is kept and listed
/// like any other.
#[utoipa::path(post, path = "/api/sandbox.fork", operation_id = "sandbox-fork", tag = "snapshot",
    request_body = ForkRequest,
    responses((status = 200, body = ForkResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 412, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn fork(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ForkRequest>,
) -> ApiResult<ForkResult> {
    let cmd = validate::fork(req)?;
    let (snapshot, sandboxes) = state.service.sandboxes().fork(&caller, cmd).await?;
    Ok(Json(ForkResult {
        snapshot: view(&snapshot),
        sandboxes: sandboxes
            .iter()
            .map(|sandbox| SandboxView::from_sandbox(sandbox, rfc3339))
            .collect(),
    }))
}

/// The organization's snapshots in projects the caller sees, newest first.
#[utoipa::path(get, path = "/api/snapshot.all", operation_id = "snapshot-all", tag = "snapshot",
    responses((status = 200, body = Vec<SnapshotView>), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn all(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<Vec<SnapshotView>> {
    let snapshots = state.service.sandboxes().snapshots(&caller).await?;
    Ok(Json(snapshots.iter().map(view).collect()))
}

/// One snapshot.
#[utoipa::path(get, path = "/api/snapshot.one", operation_id = "snapshot-one", tag = "snapshot",
    params(SnapshotIdQuery),
    responses((status = 200, body = SnapshotView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn one(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<SnapshotIdQuery>,
) -> ApiResult<SnapshotView> {
    Ok(Json(view(
        &state
            .service
            .sandboxes()
            .snapshot_for(&caller, &req.snapshot_id, SandboxNeed::Read.permission())
            .await?,
    )))
}

/// Remove a snapshot and its image. Refused (409) while sandboxes made from it are
/// running or paused.
#[utoipa::path(post, path = "/api/snapshot.remove", operation_id = "snapshot-remove", tag = "snapshot",
    request_body = SnapshotIdBody,
    responses((status = 200, body = bool), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn remove(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<SnapshotIdBody>,
) -> ApiResult<bool> {
    state
        .service
        .sandboxes()
        .remove_snapshot(&caller, &req.snapshot_id)
        .await?;
    Ok(Json(true))
}
