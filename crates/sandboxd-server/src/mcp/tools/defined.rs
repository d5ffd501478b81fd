//! The tools made from procedures' definitions: each validates and answers as its REST
//! route does (the same [`Serve`] function), and a forwarded one is passed to the replica
//! holding the sandbox's agent first.
//!
//! The tools are made at start (`ToolRoute::new_dyn`) for every defined procedure that
//! has one; `docs/mcp-tools.json` lists them. A tool's errors are tool errors carrying
//! the REST error body. `HANDWRITTEN` names the tools written by hand in `tools.rs`, and
//! why.

use axum::http::request::Parts;
use rmcp::ErrorData;
use rmcp::handler::server::common::{FromContextPart, schema_for_empty_input, schema_for_input};
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::Extension;
use rmcp::model::CallToolResponse;
use sandboxd_core::api::definition::Takes;
use sandboxd_core::api::procedures::Tool;
use serde::Deserialize as _;
use serde_json::Value;

use super::{SandboxTools, ToolResult, caller, failed, ok, relayed};
use crate::procedures::{Context, Serve, Surface};

/// Tools written by hand, and why.
pub(super) const HANDWRITTEN: &[(&str, &str)] = &[
    (
        "sandbox-exec",
        "long output is held, its first 16 KiB answered and the rest paged",
    ),
    (
        "sandbox-readFile",
        "long content is held, its first 16 KiB answered and the rest paged",
    ),
    (
        "sandbox-outputPage",
        "MCP's own, with no procedure: a page of what the two above held",
    ),
];

/// The tools of every procedure served from its definition that has one.
pub(super) fn router() -> ToolRouter<SandboxTools> {
    macro_rules! tools {
        ($($procedure:ty),* $(,)?) => {{
            let mut router = ToolRouter::new();
            $(if let Some(route) = tool::<$procedure>() {
                router.add_route(route);
            })*
            router
        }};
    }
    sandboxd_core::each_defined!(tools)
}

/// `D`'s tool, when it has one.
fn tool<D>() -> Option<ToolRoute<SandboxTools>>
where
    D: Serve,
    D::Request: rmcp::schemars::JsonSchema,
{
    let Tool::Named(name) = D::PROCEDURE.tool else {
        return None;
    };
    if HANDWRITTEN.iter().any(|(tool, _)| *tool == name) {
        return None;
    }
    let schema = match D::TAKES {
        Takes::Nothing => schema_for_empty_input(),
        Takes::Body | Takes::Query => schema_for_input::<D::Request>()
            .unwrap_or_else(|error| panic!("the input of {name} is not an object: {error}")),
    };
    let attributes = rmcp::model::Tool::new(name, D::TOOL_DESCRIPTION, schema);
    Some(ToolRoute::new_dyn(attributes, |mut context| {
        let parts = Extension::<Parts>::from_context_part(&mut context);
        let arguments = Value::Object(context.arguments.take().unwrap_or_default());
        let tools: &SandboxTools = context.service;
        Box::pin(async move {
            let Extension(parts) = parts?;
            // A forwarded call keeps its arguments to pass them on (its request is read
            // from them, not out of them); the others are read out of theirs, uncopied.
            let (request, arguments) = if D::PROCEDURE.forwarded {
                (D::Request::deserialize(&arguments), arguments)
            } else {
                (serde_json::from_value(arguments), Value::Null)
            };
            let request = request.map_err(|error| {
                ErrorData::invalid_params(
                    format!("failed to deserialize parameters: {error}"),
                    None,
                )
            })?;
            tools
                .call::<D>(&parts, &arguments, request)
                .await
                .map(CallToolResponse::from)
        })
    }))
}

impl SandboxTools {
    /// `D` for the caller of `parts`: by the replica holding the sandbox's agent when
    /// another one does, else here.
    async fn call<D: Serve>(
        &self,
        parts: &Parts,
        arguments: &Value,
        request: D::Request,
    ) -> ToolResult {
        let who = caller(parts)?;
        if D::PROCEDURE.forwarded
            && let Some(sandbox_id) = arguments.get("sandboxId").and_then(|id| id.as_str())
            && let Some(answer) = crate::forward::through_holder::<serde_json::Value>(
                &self.service,
                &parts.headers,
                &D::PROCEDURE,
                sandbox_id,
                arguments,
            )
            .await
        {
            return relayed(answer);
        }
        let cx = Context {
            service: &self.service,
            headers: &parts.headers,
            previews: &self.previews,
            surface: Surface::Mcp,
        };
        match D::serve(cx, who, request).await {
            Ok(answer) => ok(&answer),
            Err(error) => failed(error),
        }
    }
}
