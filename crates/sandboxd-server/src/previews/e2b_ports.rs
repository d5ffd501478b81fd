//! A sandbox's ports on the E2B domain, carried to its app as a preview on a host of its
//! own: `crate::e2b::hosts` marks the request (an extension no client can send), the
//! replica holding the sandbox's agent serves it, `crate::e2b::ports` lets it in by
//! E2B's rules, and the app gets it without the token or key, with the `Host` the
//! sandbox's mask names.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::Response;
use axum::routing::any;
use sandboxd_core::e2b::ports::TRAFFIC_TOKEN_HEADER;

use super::proxy::{elsewhere, to_app_on_host};
use crate::AppState;
use crate::e2b::hosts::{PORTS_PATH, PortRequest, unknown_path};
use crate::e2b::ports::{enter, refusal};

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(PORTS_PATH, any(call))
        .route(&format!("{PORTS_PATH}/"), any(call))
        .route(&format!("{PORTS_PATH}/{{*rest}}"), any(call))
}

async fn call(State(state): State<AppState>, mut request: Request) -> Response {
    let Some(PortRequest {
        sandbox_id,
        port,
        uri,
    }) = request.extensions_mut().remove::<PortRequest>()
    else {
        return unknown_path(request.uri().clone()).await;
    };
    *request.uri_mut() = uri;
    let mut request = match elsewhere(&state, &sandbox_id, request).await {
        Ok(request) => request,
        Err(answered) => return answered,
    };
    let entered = match enter(&state, &sandbox_id, port, request.headers()).await {
        Ok(entered) => entered,
        Err(refused) => return refused,
    };
    let headers = request.headers_mut();
    // The token is the sandbox's own: its app never sees it.
    headers.remove(TRAFFIC_TOKEN_HEADER);
    headers.remove("x-access-token");
    if let Some(host) = entered.host {
        headers.insert(header::HOST, host);
    }
    to_app_on_host(&state, &entered.admitted, (&sandbox_id, port), request)
        .await
        .unwrap_or_else(refusal)
}
