//! MCP over streamable HTTP at `/mcp`: the sandbox procedures as tools named as the
//! reference lists them. Input schemas are the REST request types; failures are tool
//! errors (`isError: true`) carrying the REST error body (stable code and message); long
//! output is held and read page by page instead of being cut.

mod held;
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
    StreamableHttpService::new(
        move || Ok(SandboxTools::new(service.clone(), held.clone())),
        Default::default(),
        config,
    )
}

/// Authenticates MCP requests like the REST API (`x-api-key` or `Authorization:
/// Bearer`): no key, no tools.
pub async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(key) = token_from(request.headers()) else {
        return ApiError::Unauthorized.into_response();
    };
    match principal(&state, key).await {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => error.into_response(),
    }
}
