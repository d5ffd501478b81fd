//! Request bodies are limited before they are read: a `Content-Length` over the route's
//! limit is refused at once (413, nothing read), and a body without one is cut off as
//! soon as it passes the limit.
//!
//! While reading, through `http_body_util::Limited`. `sandbox.upload` and
//! `template.context` are capped by the service as they stream instead.

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Largest body of most procedures (commands, env, process input of ≤ 1 MiB as text).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
/// Largest body of the routes that carry whole files (10 MiB base64-encoded, plus JSON).
pub const MAX_FILE_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Largest body of `template.build` (and of an E2B archive of a build's files).
pub use sandboxd_core::template_build::MAX_BUILD_BODY_BYTES;
/// The body limit of a path; `None` for a streamed upload, which the service caps
/// itself as the bytes flow (the transfer limit), and for a preview, whose body streams
/// to the app in the sandbox within the credit its agent grants (E2B's ports too).
pub fn limit_for(path: &str) -> Option<usize> {
    if path.starts_with(crate::previews::proxy::PREFIX)
        || path.starts_with(crate::e2b::hosts::PORTS_PATH)
    {
        return None;
    }
    if path.starts_with("/e2b/template-files/") {
        // An archive of a build's files: the same bytes as `template.build`'s.
        return Some(MAX_BUILD_BODY_BYTES);
    }
    match path {
        "/api/sandbox.upload" | "/api/template.context" | "/e2b/envd/files" => None,
        "/api/sandbox.writeFile" | "/mcp" => Some(MAX_FILE_BODY_BYTES),
        "/api/template.build" => Some(MAX_BUILD_BODY_BYTES),
        _ => Some(MAX_BODY_BYTES),
    }
}

/// The middleware.
pub async fn enforce(request: Request, next: Next) -> Response {
    let Some(limit) = limit_for(request.uri().path()) else {
        return next.run(request).await;
    };
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return ApiError::TooLarge(format!(
            "request body is over the limit of {limit} bytes for this route"
        ))
        .into_response();
    }
    let request = request.map(|body| Body::new(http_body_util::Limited::new(body, limit)));
    next.run(request).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn file_routes_take_files_and_the_rest_less() {
        assert_eq!(
            super::limit_for("/api/sandbox.writeFile"),
            Some(super::MAX_FILE_BODY_BYTES)
        );
        assert_eq!(super::limit_for("/mcp"), Some(super::MAX_FILE_BODY_BYTES));
        assert_eq!(
            super::limit_for("/api/sandbox.exec"),
            Some(super::MAX_BODY_BYTES)
        );
        assert_eq!(super::limit_for("/api/sandbox.upload"), None);
    }
}
