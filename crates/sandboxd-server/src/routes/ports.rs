//! `sandbox.exposePort`, `sandbox.ports`, `sandbox.unexposePort`: ports made reachable
//! as preview URLs without a key, publicly or behind a signed link.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use sandboxd_core::api::*;
use sandboxd_core::validate;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};

/// The port procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(expose_port))
        .routes(routes!(ports))
        .routes(routes!(unexpose_port))
}

/// Expose a port of a running sandbox as a preview URL: private (the URL carries a
/// signed link that expires) or public (anyone with the URL). Exposing a port again
/// replaces its earlier exposure and ends that one's links. A key or a dashboard
/// session reaches any port of a sandbox it may use without exposing it.
#[utoipa::path(post, path = "/api/sandbox.exposePort", operation_id = "sandbox-exposePort", tag = "sandbox",
    request_body = ExposePortRequest,
    responses((status = 200, body = ExposedPortView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 412, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn expose_port(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    ApiJson(req): ApiJson<ExposePortRequest>,
) -> Result<Json<ExposedPortView>, ApiError> {
    let cmd = validate::expose_port(req)?;
    let exposed = state.service.ports().expose(&caller, cmd).await?;
    Ok(Json(state.previews.view(&headers, &exposed)))
}

/// The exposed ports of a sandbox, with their URLs.
#[utoipa::path(get, path = "/api/sandbox.ports", operation_id = "sandbox-ports", tag = "sandbox",
    params(SandboxIdQuery),
    responses((status = 200, body = Vec<ExposedPortView>), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn ports(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    ApiQuery(req): ApiQuery<SandboxIdQuery>,
) -> Result<Json<Vec<ExposedPortView>>, ApiError> {
    let id = validate::sandbox_id(&req.sandbox_id)?;
    let exposed = state.service.ports().exposed_ports(&caller, &id).await?;
    Ok(Json(
        exposed
            .iter()
            .map(|e| state.previews.view(&headers, e))
            .collect(),
    ))
}

/// End a port's exposure: its links and public access stop at once.
#[utoipa::path(post, path = "/api/sandbox.unexposePort", operation_id = "sandbox-unexposePort", tag = "sandbox",
    request_body = PortRequest,
    responses((status = 200, body = UnexposedView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn unexpose_port(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<PortRequest>,
) -> Result<Json<UnexposedView>, ApiError> {
    let (id, port) = validate::unexpose_port(req)?;
    let removed = state.service.ports().unexpose(&caller, &id, port).await?;
    Ok(Json(UnexposedView { port, removed }))
}
