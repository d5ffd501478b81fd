//! MCP over streamable HTTP at `/mcp`: the sandbox procedures as tools named as the
//! reference lists them. Input schemas are the REST request types; failures are tool
//! errors (`isError: true`) carrying the REST error body (stable code and message); long
//! output is held and read page by page instead of being cut.
//!
//! Here: the endpoint, and an axum middleware that authenticates and puts the
//! caller in the request, which rmcp hands to the tool. Most tools are made from the
//! procedures' definitions (`tools/defined.rs`); three are written by hand (`tools.rs`).

mod held;
mod sessions;
mod tools;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::AppState;
use crate::auth::{principal, token_from};
use crate::error::ApiError;
use crate::service::Service;
use held::HeldOutputs;
pub use tools::SandboxTools;

/// Which `Host` and `Origin` values the MCP endpoint accepts.
#[derive(Debug, Clone, Default)]
pub struct McpSettings {
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    /// Which key opened each MCP session.
    pub sessions: Arc<sessions::SessionKeys>,
    /// How the preview URLs the tools answer with are addressed.
    pub previews: crate::previews::PreviewSettings,
}

/// The MCP endpoint, as a tower service to nest at `/mcp`.
pub fn service(
    service: Service,
    settings: &McpSettings,
) -> StreamableHttpService<SandboxTools, LocalSessionManager> {
    let mut config =
        StreamableHttpServerConfig::default().with_allowed_hosts(settings.allowed_hosts.clone());
    if !settings.allowed_origins.is_empty() {
        config = config.with_allowed_origins(settings.allowed_origins.clone());
    }
    let held = Arc::new(HeldOutputs::default());
    let previews = settings.previews.clone();
    StreamableHttpService::new(
        move || {
            Ok(SandboxTools::new(
                service.clone(),
                held.clone(),
                previews.clone(),
            ))
        },
        Default::default(),
        config,
    )
}

/// Authenticates MCP requests like the REST API (`x-api-key` or `Authorization:
/// Bearer`): no key, no tools. A session belongs to the key that opened it: a request
/// naming another key's session (or one this server did not open) is answered like an
/// unknown session, 404.
pub async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(key) = token_from(request.headers()) else {
        return ApiError::Unauthorized.into_response();
    };
    let principal = match principal(&state, key).await {
        Ok(principal) => principal,
        Err(error) => return error.into_response(),
    };
    let sessions = &state.mcp.sessions;
    let named = request
        .headers()
        .get(sessions::SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if let Some(session) = &named
        && !sessions.belongs_to(session, &principal.key_id)
    {
        return sessions::unknown_session();
    }
    let ending = named.is_some() && request.method() == axum::http::Method::DELETE;
    let key_id = principal.key_id.clone();
    request.extensions_mut().insert(principal);
    let response = next.run(request).await;
    match (&named, response.headers().get(sessions::SESSION_HEADER)) {
        (None, Some(opened)) => {
            if let Ok(opened) = opened.to_str() {
                sessions.bind(opened, &key_id);
            }
        }
        (Some(session), _) if ending && response.status().is_success() => sessions.end(session),
        _ => {}
    }
    response
}
