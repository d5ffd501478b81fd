//! The tools of one MCP session: each validates with the REST request type, calls the
//! same service method as the REST handler, and returns its result or its error body.
//! A tool whose procedure is forwarded (the procedure table says) is passed to the
//! replica holding the sandbox's agent when another one does, as REST requests are.
//!
//! The three written by hand: `sandbox-exec` and `sandbox-readFile`, whose long output is
//! held (`held.rs`), and `sandbox-outputPage`.

use sandboxd_core::access::SandboxNeed;
use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, tool, tool_handler, tool_router};
use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::{paging, validate};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::held::{HeldOutputs, Owner};
use crate::error::ApiError;
use crate::service::{Service, ServiceError};

/// The MCP server of one session.
#[derive(Debug, Clone)]
pub struct SandboxTools {
    service: Service,
    held: Arc<HeldOutputs>,
    previews: crate::previews::PreviewSettings,
    tool_router: ToolRouter<Self>,
}

type ToolResult = Result<CallToolResult, ErrorData>;

fn ok(value: &impl Serialize) -> ToolResult {
    Ok(CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string_pretty(value).unwrap_or_default(),
    )]))
}

/// A tool's failure: its REST error body, and a line in the request log as a REST
/// request's failure would have (the MCP request itself answers 200).
fn failed(error: impl Into<ApiError>) -> ToolResult {
    let error = error.into();
    let (status, body) = error.status_and_body();
    crate::request_log::failed(&error.failure(), "MCP", "tool", status.as_u16(), 0);
    failed_with(&body)
}

/// The tool's answer as another replica gave it.
fn relayed<T: Serialize>(answer: Result<T, ErrorBody>) -> ToolResult {
    match answer {
        Ok(value) => ok(&value),
        Err(body) => failed_with(&body),
    }
}

fn failed_with(body: &ErrorBody) -> ToolResult {
    Ok(CallToolResult::error(vec![ContentBlock::text(
        serde_json::to_string(body).unwrap_or_default(),
    )]))
}

fn owner(who: &Principal, sandbox_id: &str) -> Owner {
    Owner {
        organization_id: who.organization_id.clone(),
        sandbox_id: sandbox_id.to_owned(),
    }
}

/// The caller, put in the request by [`super::authenticate`].
fn caller(parts: &Parts) -> Result<Principal, ErrorData> {
    parts
        .extensions
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| ErrorData::invalid_request("unauthenticated", None))
}

/// The holder's value, or its error as the tool's answer.
macro_rules! relay {
    ($answer:expr) => {
        match $answer {
            Ok(value) => value,
            Err(body) => return failed_with(&body),
        }
    };
}

macro_rules! attempt {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(error) => return failed(error),
        }
    };
}

mod defined;

impl SandboxTools {
    /// The answer of the replica holding `sandbox_id`'s agent to the procedure of `tool`,
    /// when another replica holds it; `None`: served here.
    async fn through_holder<T: DeserializeOwned>(
        &self,
        parts: &Parts,
        tool: &str,
        sandbox_id: &str,
        arguments: &impl Serialize,
    ) -> Option<Result<T, ErrorBody>> {
        let procedure = procedures::of_tool(tool)?;
        crate::forward::through_holder(
            &self.service,
            &parts.headers,
            procedure,
            sandbox_id,
            arguments,
        )
        .await
    }
}

#[tool_router]
impl SandboxTools {
    pub fn new(
        service: Service,
        held: Arc<HeldOutputs>,
        previews: crate::previews::PreviewSettings,
    ) -> Self {
        Self {
            service,
            held,
            previews,
            tool_router: Self::tool_router() + defined::router(),
        }
    }

    #[tool(
        name = "sandbox-exec",
        description = "Run a shell command (sh -c) in a running sandbox and wait for it. Returns stdout, stderr, exitCode, timedOut and truncated. The first 16 KiB of each stream are in the reply; when there is more, the reply's more.outputId lets you read the rest with sandbox-outputPage. The server keeps up to 1 MiB per stream (truncated: true when a stream was longer: redirect such output to a file, e.g. cmd > /tmp/out.txt, and read it with sandbox-readFile, which pages up to 10 MiB). timeoutMs 1 s–10 min (default 60 s); on timeout every process of the command is killed and exitCode is 124. Optional cwd (absolute) and env."
    )]
    async fn exec(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ExecRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let owner = owner(&who, &req.sandbox_id);
        let mut result = match self
            .through_holder::<ExecResult>(&parts, "sandbox-exec", &req.sandbox_id, &req)
            .await
        {
            Some(answer) => relay!(answer),
            None => {
                let command = attempt!(validate::exec(req));
                attempt!(self.service.commands().exec(&who, command).await)
            }
        };
        let more = attempt!(
            self.held
                .hold_long(
                    owner,
                    &mut [
                        (HeldStream::Stdout, &mut result.stdout),
                        (HeldStream::Stderr, &mut result.stderr),
                    ],
                )
                .map_err(ServiceError::from)
        );
        ok(&Paged { result, more })
    }

    #[tool(
        name = "sandbox-readFile",
        description = "Read a regular file of at most 10 MiB from a running sandbox (absolute path). encoding utf8 (default) or base64 for binary files. The first 16 KiB of the content are in the reply; when the file is longer, read the rest with sandbox-outputPage (stream content) using the reply's more.outputId."
    )]
    async fn read_file(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ReadFileQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let owner = owner(&who, &req.sandbox_id);
        let mut result = match self
            .through_holder::<ReadFileResult>(&parts, "sandbox-readFile", &req.sandbox_id, &req)
            .await
        {
            Some(answer) => relay!(answer),
            None => {
                let command = attempt!(validate::read_file(req));
                attempt!(self.service.files().read_file(&who, command).await)
            }
        };
        let more = attempt!(
            self.held
                .hold_long(owner, &mut [(HeldStream::Content, &mut result.content)])
                .map_err(ServiceError::from)
        );
        ok(&Paged { result, more })
    }

    #[tool(
        name = "sandbox-outputPage",
        description = "Read the rest of a long sandbox-exec output (stream stdout or stderr) or sandbox-readFile content (stream content) that did not fit in the reply: give the reply's more.outputId, and offset = more.<stream>.shown for the first page, then the previous page's end, until done is true. limit 1 KiB–256 KiB per page (default 64 KiB). Output is held for 10 minutes."
    )]
    async fn output_page(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<OutputPageQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        // The same access check as reading the sandbox itself.
        let sandbox = attempt!(
            self.service
                .access()
                .sandbox_for(&who, &req.sandbox_id, SandboxNeed::Read)
                .await
        );
        let page = self.held.page(
            &owner(&who, &sandbox.sandbox_id),
            &req.output_id,
            req.stream,
            req.offset,
            paging::page_limit(req.limit),
        );
        match page {
            Some(page) => ok(&page),
            None => failed(ServiceError::NotFound("held output")),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SandboxTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(sandboxd_core::api::MCP_INSTRUCTIONS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use procedures::{PROCEDURES, Tool};

    /// Tools of MCP's own, with no REST procedure: long output read page by page.
    const MCP_ONLY: [&str; 1] = ["sandbox-outputPage"];

    #[test]
    fn the_tools_are_those_of_the_procedure_table() {
        let tools: std::collections::BTreeSet<String> = (SandboxTools::tool_router()
            + defined::router())
        .list_all()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
        let table: std::collections::BTreeSet<String> = PROCEDURES
            .iter()
            .filter_map(|p| match p.tool {
                Tool::Named(name) => Some(name.to_owned()),
                Tool::Without(_) => None,
            })
            .chain(MCP_ONLY.map(String::from))
            .collect();
        assert_eq!(tools, table);
    }
}
