//! `/ui/session`: the dashboard's sign-in. `POST` with `{"key": …}` exchanges an API
//! key for a session cookie (HttpOnly, SameSite=Strict, Secure behind TLS) and answers
//! the session's CSRF token; the key itself is never stored by the browser. `GET`
//! answers who the session acts for; `DELETE` signs out. Only pages of this server's own
//! origin may do either.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::session::CookieSecure;
use crate::AppState;
use crate::auth::{self, SESSION_COOKIE};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::service::ServiceError;
use sandboxd_core::model::Principal;

/// Body of a sign-in.
#[derive(Debug, Deserialize)]
pub struct SignIn {
    key: String,
}

/// Whether the browser reached this server over TLS (a proxy in front says so).
fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}

fn cookie(
    state: &AppState,
    headers: &HeaderMap,
    value: &str,
    max_age_secs: u64,
) -> Option<HeaderValue> {
    let secure = match state.sessions.cookie_secure {
        CookieSecure::Always => true,
        CookieSecure::Never => false,
        CookieSecure::Auto => over_tls(headers),
    };
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_secs}{secure}"
    ))
    .ok()
}

fn who(principal: &Principal, csrf: String) -> serde_json::Value {
    json!({
        "csrf": csrf,
        "userId": principal.user_id,
        "organizationId": principal.organization_id,
        "role": principal.role.as_str(),
        "keyId": principal.key_id,
    })
}

fn cross_origin() -> ApiError {
    ApiError::Service(ServiceError::Forbidden(
        "sign-in is accepted only from this server's own pages".into(),
    ))
}

/// `POST /ui/session`.
pub async fn sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SignIn>,
) -> Result<Response, ApiError> {
    if !auth::same_origin(&headers) {
        return Err(cross_origin());
    }
    let principal = auth::principal(&state, &body.key).await?;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|_| ApiError::Service(ServiceError::Unavailable("no randomness".into())))?;
    let secret = base64_simd::URL_SAFE_NO_PAD.encode_to_string(bytes);
    let lifetime = state.sessions.max_lifetime;
    let now = sandboxd_store::now_ms();
    state
        .service
        .store()
        .open_dashboard_session(
            &secret,
            &principal.key_id,
            now,
            now + lifetime.as_millis() as i64,
        )
        .await
        .map_err(|e| ApiError::Service(ServiceError::from(e)))?;
    let mut response =
        Json(who(&principal, sandboxd_store::dashboard_csrf(&secret))).into_response();
    if let Some(cookie) = cookie(&state, &headers, &secret, lifetime.as_secs()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `GET /ui/session`.
pub async fn current(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let principal = auth::session_principal(&state, &headers, &Method::GET).await?;
    let secret = auth::session_from(&headers).unwrap_or_default();
    let mut response =
        Json(who(&principal, sandboxd_store::dashboard_csrf(secret))).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `DELETE /ui/session`: the session ends and its cookie is cleared.
pub async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    auth::session_principal(&state, &headers, &Method::DELETE).await?;
    if let Some(secret) = auth::session_from(&headers) {
        state
            .service
            .store()
            .close_dashboard_session(secret)
            .await
            .map_err(|e| ApiError::Service(ServiceError::from(e)))?;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Some(cookie) = cookie(&state, &headers, "", 0) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    Ok(response)
}
