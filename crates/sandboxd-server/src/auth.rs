//! Authentication: the `x-api-key` header (or `Authorization: Bearer`) names the caller.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use sandboxd_core::model::Principal;

use crate::AppState;
use crate::error::ApiError;
use crate::service::ServiceError;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

/// The API key of a request: `x-api-key`, else `Authorization: Bearer`.
pub fn token_from(headers: &axum::http::HeaderMap) -> Option<&str> {
    if let Some(key) = headers.get("x-api-key") {
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
        let token = token_from(&parts.headers).ok_or(ApiError::Unauthorized)?;
        Ok(Self(principal(state, token).await?))
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
    // Per user, not per key: more keys do not buy more requests.
    state.limits.check(&principal.user_id).map_err(|wait| {
        metrics::counter!(crate::rate_limit::RATE_LIMITED).increment(1);
        ApiError::RateLimited(wait)
    })?;
    Ok(principal)
}
