//! The request log: one line per request, written at the edge once its response is
//! known — method, path (never the query, which may carry a WebSocket's token), status
//! and duration, and for a failure its cause, at the failure's level (`error.rs` says
//! which). Successes are debug lines; an MCP tool's failure, inside a 200 answer, is
//! logged by the tool (`mcp/tools.rs`) the same way.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use tracing::{Level, debug, error, info, warn};

use crate::error::Failure;

/// The middleware, outermost: it sees what every other layer answered.
pub async fn log(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let status = response.status().as_u16();
    match response.extensions().get::<Failure>() {
        Some(failure) => failed(failure, method.as_str(), &path, status, ms),
        None if response.status().is_server_error() => {
            error!(%method, %path, status, ms, "request failed");
        }
        None if response.status().is_client_error() => {
            info!(%method, %path, status, ms, "request refused");
        }
        None => debug!(%method, %path, status, ms, "request"),
    }
    response
}

/// One failure, at its level.
pub fn failed(failure: &Failure, method: &str, path: &str, status: u16, ms: u64) {
    let cause = failure.cause.as_str();
    match failure.level {
        Level::ERROR => error!(%method, %path, status, ms, %cause, "request failed"),
        Level::WARN => warn!(%method, %path, status, ms, %cause, "request failed"),
        Level::INFO => info!(%method, %path, status, ms, %cause, "request refused"),
        _ => debug!(%method, %path, status, ms, %cause, "request refused"),
    }
}
