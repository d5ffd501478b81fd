//! `sandboxd mcp`: an MCP server on standard input and output for MCP clients that
//! launch a command, forwarding every tool listing and call to a sandboxd server's
//! `/mcp` (server and key as for every client command: flags, environment, profile).
//!
//! The forwarding goes through an rmcp client.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
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
#[command(
    after_help = "Example (an MCP client configuration):\n  {\"command\": \"sandboxd\", \"args\": [\"mcp\"], \"env\": {\"SANDBOXD_KEY\": \"sbx_...\"}}"
)]
pub struct McpArgs {
    #[command(flatten)]
    target: crate::cli::TargetArgs,
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
    let target = args.target.resolve()?;
    if !target.url.starts_with("http://") {
        bail!(
            "sandboxd mcp forwards over plain HTTP only: run it beside the server \
             (--url http://127.0.0.1:3000), or point the MCP client at {}/mcp directly",
            target.url
        );
    }
    let uri = format!("{}/mcp", target.url);
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(uri).auth_header(target.key.clone()),
    );
    let remote = ClientConfig::default()
        .serve(transport)
        .await
        .with_context(|| format!("cannot open an MCP session with {}", target.url))?;
    let server = Forward { remote }.serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(ExitCode::SUCCESS)
}
