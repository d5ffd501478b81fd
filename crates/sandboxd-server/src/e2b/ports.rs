//! A sandbox's other ports on the E2B domain (`<port>-<sandbox id>.<domain>`, any port
//! but the daemon's and the interpreter's): E2B's `get_host(port)`. Entered by E2B's
//! rules (`Service::ports().admit_e2b`): with the sandbox's traffic access token (or a
//! sandboxd key that may use it), or by anyone when the sandbox was created through
//! E2B's API with public ports (E2B's default). Then carried to the app like a preview
//! on a host of its own (`crate::previews`): bodies streamed, WebSockets joined, a
//! paused sandbox resumed by the request, the credentials taken off, the `Host` the
//! sandbox's settings mask put in.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::e2b::ports::TRAFFIC_TOKEN_HEADER;
use sandboxd_core::model::Principal;

use super::calls::{E2bResult, live_sandbox};
use crate::AppState;
use crate::auth::{self, token_from};
use crate::error::ApiError;
use crate::previews::proxy::{elsewhere, to_app_on_host};
use crate::service::ServiceError;

/// Where `hosts.rs` sends a request to a sandbox's port, marked with a [`PortRequest`].
pub(super) const PATH: &str = "/e2b/ports";

/// A request to a sandbox's port as `hosts.rs` found it on the E2B domain: a request
/// extension, which no client can send (a request to [`PATH`] without it is 404).
#[derive(Debug, Clone)]
pub(super) struct PortRequest {
    pub sandbox_id: String,
    pub port: u16,
    /// The request's own address, which the app sees.
    pub uri: Uri,
}

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(PATH, any(call))
        .route(&format!("{PATH}/"), any(call))
        .route(&format!("{PATH}/{{*rest}}"), any(call))
}

/// Serves a request to a port of a sandbox on the E2B domain.
async fn call(State(state): State<AppState>, mut request: Request) -> Response {
    let Some(PortRequest {
        sandbox_id,
        port,
        uri,
    }) = request.extensions_mut().remove::<PortRequest>()
    else {
        return super::hosts::unknown_path(request.uri().clone()).await;
    };
    *request.uri_mut() = uri;
    let request = match elsewhere(&state, &sandbox_id, request).await {
        Ok(request) => request,
        Err(answered) => return answered,
    };
    enter(&state, &sandbox_id, port, request)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn enter(
    state: &AppState,
    sandbox_id: &str,
    port: u16,
    mut request: Request,
) -> E2bResult<Response> {
    let caller = caller_of(state, sandbox_id, request.headers()).await?;
    if caller.is_none() && !state.e2b_public_ports {
        return Err(ApiError::Service(ServiceError::Forbidden(format!(
            "this server opens no port to anyone: send the sandbox's traffic access token in {TRAFFIC_TOKEN_HEADER}"
        )))
        .into());
    }
    let (admitted, mask) = state
        .service
        .ports()
        .admit_e2b(sandbox_id, port, caller.as_ref())
        .await?;
    // As every E2B call: one past its fixed end is paused (or killed) first, so that
    // the request resumes it with its timeout anew, as E2B's auto-resume does.
    live_sandbox(state, &admitted.principal, sandbox_id, SandboxNeed::Use).await?;
    let headers = request.headers_mut();
    // The token is the sandbox's own: its app never sees it.
    headers.remove(TRAFFIC_TOKEN_HEADER);
    headers.remove("x-access-token");
    if let Some(mask) = mask {
        let host = HeaderValue::try_from(mask)
            .map_err(|_| ApiError::BadRequest("the sandbox's host mask is not a host".into()))?;
        headers.insert(header::HOST, host);
    }
    Ok(to_app_on_host(state, &admitted, (sandbox_id, port), request).await?)
}

/// The caller a request names: by the sandbox's traffic (or daemon) access token, or a
/// sandboxd key; `None` for neither. A token that is not the sandbox's is refused.
async fn caller_of(
    state: &AppState,
    sandbox_id: &str,
    headers: &HeaderMap,
) -> Result<Option<Principal>, ApiError> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(token) = text(TRAFFIC_TOKEN_HEADER).or_else(|| text("x-access-token")) {
        let store = state.service.store();
        let refused = || {
            ApiError::Service(ServiceError::Forbidden(
                "invalid traffic access token".into(),
            ))
        };
        let key_id = store
            .envd_token_key(sandbox_id, token)
            .ok_or_else(refused)?;
        return auth::key_holder(state, &key_id)
            .await?
            .ok_or_else(refused)
            .map(Some);
    }
    match token_from(headers) {
        Some(key) => auth::principal(state, key).await.map(Some),
        None => Ok(None),
    }
}
