//! Authentication: the `x-api-key` header (or `Authorization: Bearer`) names the caller;
//! in a browser, the dashboard's session cookie does, for requests from its own origin,
//! with a CSRF token on every mutation.
//!
//! `Caller` is the extractor.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use sandboxd_core::model::Principal;

use crate::AppState;
use crate::error::ApiError;
use crate::service::ServiceError;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

/// The header an API key comes in (else `Authorization: Bearer`).
pub const API_KEY_HEADER: &str = "x-api-key";

/// The API key of a request: `x-api-key`, else `Authorization: Bearer`.
pub fn token_from(headers: &axum::http::HeaderMap) -> Option<&str> {
    if let Some(key) = headers.get(API_KEY_HEADER) {
        return key.to_str().ok();
    }
    headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        match token_from(&parts.headers) {
            Some(token) => Ok(Self(principal(state, token).await?)),
            None => Ok(Self(
                session_principal(state, &parts.headers, &parts.method).await?,
            )),
        }
    }
}

/// The caller a key names, counted against the key's rate limit: 401 for an unknown,
/// revoked or expired key, 429 when the key is over its limit.
pub async fn principal(state: &AppState, key: &str) -> Result<Principal, ApiError> {
    let principal = state
        .service
        .store()
        .authenticate(key.trim())
        .await
        .map_err(|e| ApiError::Service(ServiceError::from(e)))?
        .ok_or(ApiError::Unauthorized)?;
    limited(state, principal)
}

/// The caller of key `key_id` (one a token was derived from: E2B's access tokens, an
/// upload's token), as the key stands now, on its user's rate limit; `None` when the
/// key is revoked or gone.
pub(crate) async fn key_holder(
    state: &AppState,
    key_id: &str,
) -> Result<Option<Principal>, ApiError> {
    let principal = state
        .service
        .store()
        .principal_of_key(key_id)
        .await
        .map_err(ServiceError::from)?;
    principal.map(|p| limited(state, p)).transpose()
}

/// Per user, not per key: more keys do not buy more requests.
pub(crate) fn limited(state: &AppState, principal: Principal) -> Result<Principal, ApiError> {
    state.limits.check(&principal.user_id).map_err(|wait| {
        metrics::counter!(crate::rate_limit::RATE_LIMITED).increment(1);
        ApiError::RateLimited(wait)
    })?;
    Ok(principal)
}

/// A preview's own bucket, for what comes through a link or a public port.
pub(crate) fn preview_limited(
    state: &AppState,
    sandbox_id: &str,
    port: u16,
) -> Result<(), ApiError> {
    state
        .limits
        .check_preview(sandbox_id, port)
        .map_err(|wait| {
            metrics::counter!(crate::rate_limit::RATE_LIMITED).increment(1);
            ApiError::RateLimited(wait)
        })
}

/// The cookie holding a dashboard session's secret.
pub const SESSION_COOKIE: &str = "sandboxd_session";
/// The header carrying the session's CSRF token on every mutation.
pub const CSRF_HEADER: &str = "x-sandboxd-csrf";

/// The dashboard session secret in the request's cookies.
pub fn session_from(headers: &HeaderMap) -> Option<&str> {
    cookie(headers, SESSION_COOKIE)
}

/// The value of the cookie `wanted` in the request, when it has one.
pub fn cookie<'a>(headers: &'a HeaderMap, wanted: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .find_map(|cookie| {
            let (name, value) = cookie.trim().split_once('=')?;
            (name == wanted && !value.is_empty()).then_some(value)
        })
}

/// Whether a browser's request comes from this server's own pages: its `Origin`, when
/// it sends one, names the host the request was sent to (`X-Forwarded-Host` when a proxy
/// or another replica passed it on, else `Host`). Browsers send `Origin` on every
/// cross-origin request and on every WebSocket.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let host = headers
        .get("x-forwarded-host")
        .or_else(|| headers.get(header::HOST))
        .and_then(|h| h.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, host)| host);
    matches!((origin_host, host), (Some(a), Some(b)) if a.eq_ignore_ascii_case(b))
}

/// The caller of a dashboard session: the key it was opened with, as that key stands
/// now. Refused: no session (401), a request from another origin, or a mutation without
/// the session's CSRF token (403).
pub async fn session_principal(
    state: &AppState,
    headers: &HeaderMap,
    method: &Method,
) -> Result<Principal, ApiError> {
    let secret = session_from(headers).ok_or(ApiError::Unauthorized)?;
    if !same_origin(headers) {
        return Err(forbidden("a request from another origin"));
    }
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    let csrf = headers
        .get(CSRF_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    let expected = sandboxd_store::dashboard_csrf(secret);
    if !safe && !bool::from(subtle::ConstantTimeEq::ct_eq(csrf, expected.as_bytes())) {
        return Err(forbidden("missing or wrong CSRF token"));
    }
    let principal = session_caller(state, secret)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    limited(state, principal)
}

/// The caller of the session with `secret`, if it is open and its key still valid.
pub async fn session_caller(state: &AppState, secret: &str) -> Result<Option<Principal>, ApiError> {
    let store = state.service.store();
    let unavailable = |e| ApiError::Service(ServiceError::from(e));
    let Some(key_id) = store
        .dashboard_session(secret, sandboxd_store::now_ms())
        .await
        .map_err(unavailable)?
    else {
        return Ok(None);
    };
    store.principal_of_key(&key_id).await.map_err(unavailable)
}

fn forbidden(what: &str) -> ApiError {
    ApiError::Service(ServiceError::Forbidden(format!(
        "{what} is refused for a dashboard session"
    )))
}
