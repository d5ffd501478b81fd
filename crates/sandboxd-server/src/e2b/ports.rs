//! A sandbox's other ports on the E2B domain (`<port>-<sandbox id>.<domain>`, any port
//! but the daemon's and the interpreter's): E2B's `get_host(port)`. `enter` decides a
//! request by E2B's rules (`Service::ports().admit_e2b`): with the sandbox's traffic
//! access token (or a sandboxd key that may use it), or by anyone when the sandbox was
//! created through E2B's API with public ports (E2B's default); a sandbox past its
//! fixed end is ended first, so that the request resumes it. The previews carry the
//! request to the app (`crate::previews::e2b_ports`), the credentials taken off and the
//! `Host` the sandbox's settings mask put in.

use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::e2b::ports::TRAFFIC_TOKEN_HEADER;
use sandboxd_core::model::Principal;

use super::calls::{E2bError, E2bResult, live_sandbox};
use crate::AppState;
use crate::auth::{self, token_from};
use crate::error::ApiError;
use crate::service::{Admitted, ServiceError};

/// A request let in to a sandbox's port.
pub(crate) struct Entered {
    pub admitted: Admitted,
    /// The `Host` the app is to see, when the sandbox's settings mask it.
    pub host: Option<HeaderValue>,
}

/// How a request to `port` of a sandbox enters, or E2B's answer refusing it.
pub(crate) async fn enter(
    state: &AppState,
    sandbox_id: &str,
    port: u16,
    headers: &HeaderMap,
) -> Result<Entered, Response> {
    decide(state, sandbox_id, port, headers)
        .await
        .map_err(IntoResponse::into_response)
}

/// A failure carrying the request on, in E2B's shape.
pub(crate) fn refusal(error: ApiError) -> Response {
    E2bError::from(error).into_response()
}

async fn decide(
    state: &AppState,
    sandbox_id: &str,
    port: u16,
    headers: &HeaderMap,
) -> E2bResult<Entered> {
    let caller = caller_of(state, sandbox_id, headers).await?;
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
    let host = mask
        .map(HeaderValue::try_from)
        .transpose()
        .map_err(|_| ApiError::BadRequest("the sandbox's host mask is not a host".into()))?;
    Ok(Entered { admitted, host })
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
