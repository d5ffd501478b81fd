//! `/api/volume.*`.

use axum::Json;
use axum::extract::State;
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::*;
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::time::rfc3339;

type ApiResult<T> = Result<Json<T>, ApiError>;

/// The volume procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(all))
        .routes(routes!(one))
        .routes(routes!(remove))
}

/// Make a volume: named storage of the organization that outlives its sandboxes, on one
/// server (the local engine unless `serverId` names one). `sandbox.create {volumes}`
/// mounts it; a sandbox that does runs on its server. `sizeMb` is reserved against the
/// organization's volume quota (the local engine does not cap a volume at it).
#[utoipa::path(post, path = "/api/volume.create", operation_id = "volume-create", tag = "volume",
    request_body = CreateVolumeRequest,
    responses((status = 200, body = VolumeView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn create(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<CreateVolumeRequest>,
) -> ApiResult<VolumeView> {
    let cmd = validate::create_volume(req)?;
    let volume = state
        .service
        .sandboxes()
        .create_volume(&caller, cmd)
        .await?;
    Ok(Json(VolumeView::from_volume(&volume, Vec::new(), rfc3339)))
}

/// The organization's volumes in projects the caller sees, by name, each with the
/// sandboxes that mount it.
#[utoipa::path(get, path = "/api/volume.all", operation_id = "volume-all", tag = "volume",
    responses((status = 200, body = Vec<VolumeView>), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn all(State(state): State<AppState>, Caller(caller): Caller) -> ApiResult<Vec<VolumeView>> {
    let volumes = state.service.sandboxes().volumes(&caller).await?;
    Ok(Json(
        volumes
            .into_iter()
            .map(|(volume, users)| VolumeView::from_volume(&volume, users, rfc3339))
            .collect(),
    ))
}

/// One volume, with the sandboxes that mount it.
#[utoipa::path(get, path = "/api/volume.one", operation_id = "volume-one", tag = "volume",
    params(VolumeIdQuery),
    responses((status = 200, body = VolumeView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn one(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<VolumeIdQuery>,
) -> ApiResult<VolumeView> {
    let sandboxes = state.service.sandboxes();
    let volume = sandboxes
        .volume_for(&caller, &req.volume_id, SandboxNeed::Read.permission())
        .await?;
    let users = sandboxes.volume_users(&caller, &volume).await?;
    Ok(Json(VolumeView::from_volume(&volume, users, rfc3339)))
}

/// Remove a volume and everything in it. Refused (409) while a sandbox being created,
/// running or paused mounts it.
#[utoipa::path(post, path = "/api/volume.remove", operation_id = "volume-remove", tag = "volume",
    request_body = VolumeIdBody,
    responses((status = 200, body = bool), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn remove(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<VolumeIdBody>,
) -> ApiResult<bool> {
    state
        .service
        .sandboxes()
        .remove_volume(&caller, &req.volume_id)
        .await?;
    Ok(Json(true))
}
