//! The one place where failures become HTTP statuses and stable error codes. Nothing is
//! logged here: a failed response carries its [`Failure`], which the request log
//! (`request_log.rs`) writes once, at the edge, at the failure's level.
//!
//! An engine that did not answer in time is a 503 with `Retry-After`, not a fault.

use axum::Json;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sandboxd_core::api::ErrorBody;
use sandboxd_core::error::{Issue, chain};
use tracing::Level;

use crate::service::ServiceError;

/// What a 503 asks a client to wait before it retries.
const UNAVAILABLE_RETRY_SECS: u64 = 2;

/// A failed request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("missing or invalid API key")]
    Unauthorized,
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("too many requests with this key; retry later")]
    RateLimited(std::time::Duration),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<sandboxd_core::error::Invalid> for ApiError {
    fn from(invalid: sandboxd_core::error::Invalid) -> Self {
        Self::Service(ServiceError::Invalid(invalid))
    }
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str, String, Vec<Issue>) {
        use ServiceError as S;
        match self {
            Self::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "UNAUTHORIZED",
                self.to_string(),
                vec![],
            ),
            Self::BadRequest(message) => (
                StatusCode::BAD_REQUEST,
                "BAD_REQUEST",
                message.clone(),
                vec![],
            ),
            Self::TooLarge(message) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                message.clone(),
                vec![],
            ),
            Self::RateLimited(_) => (
                StatusCode::TOO_MANY_REQUESTS,
                "TOO_MANY_REQUESTS",
                self.to_string(),
                vec![],
            ),
            Self::Service(service) => match service {
                S::Invalid(invalid) => (
                    StatusCode::BAD_REQUEST,
                    "BAD_REQUEST",
                    invalid.to_string(),
                    invalid.issues.clone(),
                ),
                S::Refused(message) => (
                    StatusCode::BAD_REQUEST,
                    "BAD_REQUEST",
                    message.clone(),
                    vec![],
                ),
                S::NotFound(_) => (
                    StatusCode::NOT_FOUND,
                    "NOT_FOUND",
                    service.to_string(),
                    vec![],
                ),
                S::Forbidden(message) => {
                    (StatusCode::FORBIDDEN, "FORBIDDEN", message.clone(), vec![])
                }
                S::NotRunning(_) => (
                    StatusCode::PRECONDITION_FAILED,
                    "PRECONDITION_FAILED",
                    service.to_string(),
                    vec![],
                ),
                S::TooLarge(message) => (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "PAYLOAD_TOO_LARGE",
                    message.clone(),
                    vec![],
                ),
                S::Conflict(message) => (StatusCode::CONFLICT, "CONFLICT", message.clone(), vec![]),
                S::QuotaExceeded(_) => (
                    StatusCode::TOO_MANY_REQUESTS,
                    "TOO_MANY_REQUESTS",
                    service.to_string(),
                    vec![],
                ),
                S::EngineRefused(_) => (
                    StatusCode::BAD_REQUEST,
                    "BAD_REQUEST",
                    service.to_string(),
                    vec![],
                ),
                S::Unavailable(message) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "SERVICE_UNAVAILABLE",
                    message.clone(),
                    vec![],
                ),
                S::Unauthenticated(message) => (
                    StatusCode::UNAUTHORIZED,
                    "UNAUTHORIZED",
                    message.clone(),
                    vec![],
                ),
                S::PortUnreachable(message) => (
                    StatusCode::BAD_GATEWAY,
                    "BAD_GATEWAY",
                    message.clone(),
                    vec![],
                ),
                S::Agent(_) | S::ServerUnreachable(_) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "SERVICE_UNAVAILABLE",
                    service.to_string(),
                    vec![],
                ),
                // The database is down or out of connections: retry later.
                S::Store(store) if store.is_unavailable() => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "SERVICE_UNAVAILABLE",
                    "the store is unavailable; retry later".into(),
                    vec![],
                ),
                // The engine is there but did not answer in time (a host under load):
                // the request may be tried again.
                S::Engine(sandboxd_contracts::EngineError::Timeout { .. }) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "SERVICE_UNAVAILABLE",
                    "the container engine did not answer in time (it is busy); retry later".into(),
                    vec![],
                ),
                // Internal faults: the cause goes to the log, never to the client.
                S::Store(_) | S::Engine(_) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "INTERNAL_SERVER_ERROR",
                    "internal error".into(),
                    vec![],
                ),
            },
        }
    }
}

/// What the log says of a failed request: how loud, and the whole cause (which the
/// client never sees for an internal fault).
#[derive(Debug, Clone)]
pub struct Failure {
    pub level: Level,
    pub cause: String,
}

impl ApiError {
    /// How loud a failure is: a fault of sandboxd's is an error; an outage it expects
    /// (an engine, a server, a replica, the store away: 503) and an engine's refusal,
    /// whose reason the client never sees, are warnings; a refusal of the caller's
    /// request is information.
    pub fn failure(&self) -> Failure {
        let (status, ..) = self.parts();
        let level = match self {
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Level::WARN,
            _ if status.is_server_error() => Level::ERROR,
            Self::Service(ServiceError::EngineRefused(_)) => Level::WARN,
            _ => Level::INFO,
        };
        Failure {
            level,
            cause: chain(self),
        }
    }

    /// The status and the body a client sees.
    pub fn status_and_body(&self) -> (StatusCode, ErrorBody) {
        let (status, code, message, issues) = self.parts();
        let body = ErrorBody {
            code: code.into(),
            message,
            issues,
        };
        (status, body)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = self.status_and_body();
        let mut response = (status, Json(body)).into_response();
        response.extensions_mut().insert(self.failure());
        if let Self::RateLimited(wait) = self {
            // Whole seconds, rounded up: a client that waits this long gets through.
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        } else if status == StatusCode::SERVICE_UNAVAILABLE {
            // An outage (an engine, a server, the store): worth retrying shortly.
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(UNAVAILABLE_RETRY_SECS));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_that_does_not_answer_in_time_is_unavailable_not_a_fault() {
        let timeout = ApiError::Service(ServiceError::Engine(
            sandboxd_contracts::EngineError::Timeout { call: "info" },
        ));
        let (status, body) = timeout.status_and_body();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.message.contains("retry later"), "{}", body.message);
        let other = ApiError::Service(ServiceError::Engine(
            sandboxd_contracts::EngineError::NotFound { what: "network" },
        ));
        assert_eq!(other.status_and_body().0, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
