//! The changes tool: what a sandbox added, changed and removed.

use axum::http::request::Parts;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use sandboxd_core::api::ChangesQuery;

use super::{SandboxTools, ToolResult, caller, failed, ok};

#[tool_router(router = changes_tools, vis = "pub(super)")]
impl SandboxTools {
    #[tool(
        name = "sandbox-changes",
        description = "List the files a sandbox added, changed and removed since it started from its template or snapshot: under its workdir, /tmp and /var/tmp (all: true for the whole filesystem), each with its type and size. Use it to see or hand back what work was done."
    )]
    async fn changes(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ChangesQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let changes = attempt!(
            self.service
                .files()
                .changes(&who, &req.sandbox_id, req.all.unwrap_or(false))
                .await
        );
        ok(&changes)
    }
}
