//! `sandboxd mcp`: an MCP server on standard input and output for MCP clients that
//! launch a command, forwarding every tool listing and call to a sandboxd server's
//! `/mcp` (URL and key from flags or `SANDBOXD_URL` / `SANDBOXD_KEY`).

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientConfig, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt as _};

/// Flags of `sandboxd mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The sandboxd server.
    #[arg(long, env = "SANDBOXD_URL", default_value = "http://127.0.0.1:3000")]
    url: String,
    /// API key [default: ./sandboxd-data/owner.key].
    #[arg(long, env = "SANDBOXD_KEY", hide_env_values = true)]
    key: Option<String>,
}

/// Forwards to the remote server's tools.
struct Forward {
    remote: RunningService<RoleClient, ClientConfig>,
}

fn upstream(error: rmcp::ServiceError) -> ErrorData {
    ErrorData::internal_error(format!("sandboxd server: {error}"), None)
}

impl ServerHandler for Forward {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(sandboxd_core::api::MCP_INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.remote.list_tools(request).await.map_err(upstream)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.remote
            .call_tool(request)
            .await
            .map(Into::into)
            .map_err(upstream)
    }
}

pub async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let key = crate::shell::key_or_default(args.key)?;
    let uri = format!("{}/mcp", args.url.trim_end_matches('/'));
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(uri).auth_header(key),
    );
    let remote = ClientConfig::default()
        .serve(transport)
        .await
        .with_context(|| format!("cannot open an MCP session with {}", args.url))?;
    let server = Forward { remote }.serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(ExitCode::SUCCESS)
}
