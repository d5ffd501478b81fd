//! `/api/sandbox.context*`: interpreter contexts.

use axum::Json;
use axum::extract::State;
use sandboxd_core::api::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::service::{ContextRun, NewContext};

type ApiResult<T> = Result<Json<T>, ApiError>;

/// The context procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(context_create))
        .routes(routes!(context_run))
        .routes(routes!(context_remove))
}

/// Start a Python interpreter context in a sandbox (the image needs `python3`). Its
/// state persists between `sandbox.contextRun` calls.
#[utoipa::path(post, path = "/api/sandbox.contextCreate", operation_id = "sandbox-contextCreate", tag = "context",
    request_body = ContextCreateRequest,
    responses((status = 200, body = ContextView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 412, body = ErrorBody), (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn context_create(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ContextCreateRequest>,
) -> ApiResult<ContextView> {
    Ok(Json(
        state
            .service
            .commands()
            .create_context(&caller, &req.sandbox_id, NewContext::from(&req))
            .await?,
    ))
}

/// Run code in a context: captured stdout and stderr, the final expression's value, or
/// the exception; at the timeout the run is interrupted and the context kept.
#[utoipa::path(post, path = "/api/sandbox.contextRun", operation_id = "sandbox-contextRun", tag = "context",
    request_body = ContextRunRequest,
    responses((status = 200, body = ContextRunResult), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 412, body = ErrorBody),
        (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn context_run(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ContextRunRequest>,
) -> ApiResult<ContextRunResult> {
    let result = state
        .service
        .commands()
        .run_in_context(
            &caller,
            &req.sandbox_id,
            &req.context_id,
            &ContextRun::from(&req),
        )
        .await?;
    Ok(Json(result))
}

/// End a context.
#[utoipa::path(post, path = "/api/sandbox.contextRemove", operation_id = "sandbox-contextRemove", tag = "context",
    request_body = ContextIdBody,
    responses((status = 200, body = bool), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn context_remove(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<ContextIdBody>,
) -> ApiResult<bool> {
    state
        .service
        .commands()
        .remove_context(&caller, &req.sandbox_id, &req.context_id)
        .await?;
    Ok(Json(true))
}
