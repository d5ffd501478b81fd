//! The request log, as an operator reads it: one line per request at the edge, a refusal
//! of the caller's request below error level with its cause, an engine's refusal a
//! warning with the engine's reason (which the client does not see), and never a query
//! string (a WebSocket's token travels in one).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{KEY, RunningServer};
use serde_json::json;

fn lines_with<'a>(log: &'a str, needles: &[&str]) -> Vec<&'a str> {
    log.lines()
        .filter(|line| needles.iter().all(|needle| line.contains(needle)))
        .collect()
}

#[tokio::test]
async fn each_request_is_logged_once_at_its_level_and_without_its_query() {
    let server = RunningServer::start_logged().await;
    let token = "tok_thisMustNeverBeLogged0000000000";

    // A success: one debug line.
    let (status, _) = server.get(KEY, "sandbox.templates").await;
    assert_eq!(status, 200);
    // A refusal of the caller's request: information, with the cause.
    let (status, _) = server.get(KEY, "sandbox.one?sandboxId=nosuchsandbox").await;
    assert_eq!(status, 404);
    // An image no registry here can give: the engine refuses, the client is told so,
    // and the engine's own words are a warning in the log.
    let (status, answer) = server
        .post(
            KEY,
            "sandbox.create",
            json!({"environmentId": server.env_id, "image": "sandboxd-test/not-anywhere:1"}),
        )
        .await;
    assert!((400..500).contains(&status), "{status} {answer}");
    // A WebSocket's token in the query.
    let refused = reqwest::Client::new()
        .get(format!(
            "{}/sandbox-exec?sandboxId=nosuchsandbox&token={token}",
            server.url
        ))
        .send()
        .await
        .unwrap();
    assert!(refused.status().is_client_error());
    // A tool's failure over MCP (the MCP request itself answers 200).
    {
        use rmcp::ServiceExt as _;
        use rmcp::model::{CallToolRequestParams, ClientConfig};
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", server.url))
            .auth_header(KEY);
        let client = ClientConfig::default()
            .serve(StreamableHttpClientTransport::from_config(config))
            .await
            .unwrap();
        let arguments = json!({"sandboxId": "nosuchtoolsandbox"});
        let result = client
            .call_tool(
                CallToolRequestParams::new("sandbox-one")
                    .with_arguments(arguments.as_object().cloned().unwrap()),
            )
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true));
        client.cancel().await.unwrap();
    }

    let log = server.log();
    let templates = lines_with(&log, &["path=/api/sandbox.templates", "status=200"]);
    assert_eq!(templates.len(), 1, "{log}");
    assert!(templates[0].contains("DEBUG"), "{}", templates[0]);
    let missing = lines_with(&log, &["path=/api/sandbox.one", "status=404"]);
    assert_eq!(missing.len(), 1, "{log}");
    assert!(missing[0].contains(" INFO"), "{}", missing[0]);
    assert!(missing[0].contains("request refused"), "{}", missing[0]);
    assert!(
        missing[0].contains("not found"),
        "the cause: {}",
        missing[0]
    );
    let create = lines_with(
        &log,
        &["path=/api/sandbox.create", &format!("status={status}")],
    );
    assert_eq!(create.len(), 1, "{log}");
    assert!(create[0].contains(" WARN"), "{}", create[0]);
    assert!(create[0].contains("cause="), "{}", create[0]);
    assert!(
        lines_with(&log, &["path=/sandbox-exec"]).len() == 1,
        "the WebSocket's refusal is logged once: {log}"
    );
    assert!(!log.contains(token), "a query reached the log: {log}");
    assert!(!log.contains("sandboxId=nosuchsandbox"), "{log}");
    let tool = lines_with(&log, &["method=MCP", "status=404"]);
    assert_eq!(tool.len(), 1, "{log}");
    assert!(
        tool[0].contains(" INFO") && tool[0].contains("not found"),
        "{}",
        tool[0]
    );
    assert!(
        lines_with(&log, &[" ERROR"]).is_empty(),
        "nothing here is sandboxd's fault: {log}"
    );
}
