//! `sandboxd mcp`: rmcp's client launches it as a child process and talks MCP over its
//! stdio; every call is forwarded to the real server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{KEY, RunningServer};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

#[tokio::test]
async fn stdio_forwards_to_the_server() {
    let server = RunningServer::start().await;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_sandboxd"));
    command.args(["mcp", "--url", &server.url, "--key", KEY]);
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect("MCP over stdio");
    let tools = client.list_all_tools().await.unwrap();
    // Every tool of the procedure table, and the page reader MCP has of its own.
    let named = sandboxd_core::api::procedures::PROCEDURES
        .iter()
        .filter(|p| matches!(p.tool, sandboxd_core::api::procedures::Tool::Named(_)))
        .count();
    assert_eq!(tools.len(), named + 1);
    assert!(tools.iter().any(|t| t.name == "sandbox-exec"));

    let arguments = serde_json::json!({"environmentId": server.env_id, "template": "base"});
    let created = client
        .call_tool(
            CallToolRequestParams::new("sandbox-create")
                .with_arguments(arguments.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    let created = serde_json::to_value(&created).unwrap();
    let sandbox: serde_json::Value =
        serde_json::from_str(created["content"][0]["text"].as_str().unwrap()).unwrap();
    let arguments = serde_json::json!({"sandboxId": sandbox["sandboxId"], "cmd": "echo via stdio"});
    let out = client
        .call_tool(
            CallToolRequestParams::new("sandbox-exec")
                .with_arguments(arguments.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    let out = serde_json::to_value(&out).unwrap();
    let out: serde_json::Value =
        serde_json::from_str(out["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(out["stdout"], "via stdio\n");
    client.cancel().await.unwrap();
}
