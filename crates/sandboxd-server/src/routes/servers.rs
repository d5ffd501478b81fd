//! `/api/server.*`: remote servers (a Docker engine reached over SSH). Private keys go
//! in, never out.

use axum::Json;
use axum::extract::State;
use sandboxd_core::api::{
    CreateServerRequest, ErrorBody, ServerIdBody, ServerTestResult, ServerView, UpdateServerRequest,
};
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};

type ApiResult<T> = Result<Json<T>, ApiError>;

/// The server procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_server))
        .routes(routes!(all_servers))
        .routes(routes!(one_server))
        .routes(routes!(update_server))
        .routes(routes!(remove_server))
        .routes(routes!(test_server))
}

/// Add a remote server (administrators). Give its host key, or let `server.test` learn
/// and pin it; nothing connects to it before.
#[utoipa::path(post, path = "/api/server.create", operation_id = "server-create", tag = "remote-server",
    request_body = CreateServerRequest,
    responses((status = 200, body = ServerView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn create_server(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<CreateServerRequest>,
) -> ApiResult<ServerView> {
    let spec = validate::create_server(req)?;
    Ok(Json(state.service.servers().create(&caller, spec).await?))
}

/// The servers the caller may use, with their capacity and health.
#[utoipa::path(get, path = "/api/server.all", operation_id = "server-all", tag = "remote-server",
    responses((status = 200, body = Vec<ServerView>), (status = 401, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn all_servers(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<Vec<ServerView>> {
    Ok(Json(state.service.servers().list(&caller).await?))
}

/// One server.
#[utoipa::path(get, path = "/api/server.one", operation_id = "server-one", tag = "remote-server",
    params(ServerIdBody),
    responses((status = 200, body = ServerView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn one_server(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<ServerIdBody>,
) -> ApiResult<ServerView> {
    Ok(Json(
        state.service.servers().one(&caller, &req.server_id).await?,
    ))
}

/// Change a server (administrators); its connection is made again at its next use.
#[utoipa::path(post, path = "/api/server.update", operation_id = "server-update", tag = "remote-server",
    request_body = UpdateServerRequest,
    responses((status = 200, body = ServerView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn update_server(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<UpdateServerRequest>,
) -> ApiResult<ServerView> {
    let (server_id, changes) = validate::update_server(req)?;
    Ok(Json(
        state
            .service
            .servers()
            .update(&caller, &server_id, changes)
            .await?,
    ))
}

/// Remove a server (administrators); refused while sandboxes run on it.
#[utoipa::path(post, path = "/api/server.remove", operation_id = "server-remove", tag = "remote-server",
    request_body = ServerIdBody,
    responses((status = 200, body = bool), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn remove_server(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ServerIdBody>,
) -> ApiResult<bool> {
    let server_id = validate::server_id(&req.server_id)?;
    state.service.servers().remove(&caller, &server_id).await?;
    Ok(Json(true))
}

/// Connect to a server once (administrators): learns and pins its host key when none
/// is pinned, enforces it otherwise, and reports what its engine has. An unreachable
/// server is an answer with `reachable: false` and why.
#[utoipa::path(post, path = "/api/server.test", operation_id = "server-test", tag = "remote-server",
    request_body = ServerIdBody,
    responses((status = 200, body = ServerTestResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn test_server(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ServerIdBody>,
) -> ApiResult<ServerTestResult> {
    let server_id = validate::server_id(&req.server_id)?;
    Ok(Json(
        state.service.servers().test(&caller, &server_id).await?,
    ))
}
