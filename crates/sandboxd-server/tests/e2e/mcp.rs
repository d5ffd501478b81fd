//! MCP over streamable HTTP with rmcp's client: the tools and their names, a session of
//! create → exec → writeFile → readFile → kill, tool errors with the REST error codes,
//! and no tools without a key.
//!
//! The tool list is held to its snapshot, `docs/mcp-tools.json` (written again by
//! `scripts/snapshots.sh`). The official Python SDK drives the same server from
//! `tests/python/mcp_client.py` (`scripts/test-mcp-python.sh`).

use reqwest::StatusCode;
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer};

pub(crate) type Client = rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>;

pub(crate) async fn connect(server: &TestServer) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", server.url))
        .auth_header(KEY);
    ClientConfig::default()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("MCP session")
}

/// Calls a tool; returns whether it failed and its JSON payload.
pub(crate) async fn call(client: &Client, tool: &'static str, arguments: Value) -> (bool, Value) {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .expect("tool call");
    let result = serde_json::to_value(&result).unwrap();
    let text = result["content"][0]["text"].as_str().unwrap_or("null");
    (
        result["isError"] == json!(true),
        serde_json::from_str(text).unwrap(),
    )
}

#[tokio::test]
async fn tools_over_streamable_http() {
    let server = TestServer::start().await;
    let client = connect(&server).await;
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    // The tools are the committed list's (whose every field the snapshot test checks).
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/mcp-tools.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let listed: Vec<&str> = committed
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, listed);
    assert!(names.iter().any(|name| name == "sandbox-outputPage"));

    // The environment to create in, as an agent finds it.
    let (failed, projects) = call(&client, "project-all", json!({})).await;
    assert!(!failed, "{projects}");
    let environments = projects[0]["environments"].as_array().unwrap();
    assert!(
        environments
            .iter()
            .any(|e| e["environmentId"] == json!(server.env_id)),
        "{projects}"
    );
    let (failed, sandbox) = call(
        &client,
        "sandbox-create",
        json!({"environmentId": server.env_id, "template": "base"}),
    )
    .await;
    assert!(!failed, "{sandbox}");
    assert_eq!(sandbox["status"], "running");
    let sid = sandbox["sandboxId"].clone();
    let (failed, out) = call(
        &client,
        "sandbox-exec",
        json!({"sandboxId": sid, "cmd": "echo hi"}),
    )
    .await;
    assert!(!failed);
    assert_eq!(out["stdout"], "hi\n");
    let (failed, _) = call(
        &client,
        "sandbox-writeFile",
        json!({"sandboxId": sid, "path": "/tmp/a.txt", "content": "from mcp"}),
    )
    .await;
    assert!(!failed);
    let (failed, read) = call(
        &client,
        "sandbox-readFile",
        json!({"sandboxId": sid, "path": "/tmp/a.txt"}),
    )
    .await;
    assert!(!failed);
    assert_eq!(read["content"], "from mcp");
    // What sandboxd adds: a background process, paged output.
    let (failed, process) = call(
        &client,
        "sandbox-processStart",
        json!({"sandboxId": sid, "cmd": "echo bg; exit 3"}),
    )
    .await;
    assert!(!failed, "{process}");
    let (failed, ended) = call(
        &client,
        "sandbox-processWait",
        json!({"sandboxId": sid, "processId": process["processId"], "timeoutMs": 10_000}),
    )
    .await;
    assert!(!failed);
    assert_eq!(ended["exitCode"], 3);
    let (failed, page) = call(
        &client,
        "sandbox-processOutput",
        json!({"sandboxId": sid, "processId": process["processId"]}),
    )
    .await;
    assert!(!failed);
    assert_eq!(
        (page["data"].as_str(), page["end"].as_u64()),
        (Some("bg\n"), Some(3))
    );
    read_long_output_page_by_page(&client, &sid).await;
    // A port's preview URL, to hand to a person.
    let (failed, exposed) = call(
        &client,
        "sandbox-exposePort",
        json!({"sandboxId": sid, "port": 8000}),
    )
    .await;
    assert!(!failed, "{exposed}");
    let path = sandboxd_core::ports::preview_path(sid.as_str().unwrap(), 8000);
    let url = exposed["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}{path}?sandboxd_link=", server.url)),
        "{url}"
    );
    let (failed, listed) = call(&client, "sandbox-ports", json!({"sandboxId": sid})).await;
    assert!(!failed);
    assert_eq!(
        listed[0]["url"], exposed["url"],
        "the same link, derived again"
    );
    let (failed, removed) = call(
        &client,
        "sandbox-unexposePort",
        json!({"sandboxId": sid, "port": 8000}),
    )
    .await;
    assert!(!failed);
    assert_eq!(removed["removed"], true);
    let (failed, killed) = call(&client, "sandbox-kill", json!({"sandboxId": sid})).await;
    assert!(!failed);
    assert_eq!(killed["status"], "killed");

    // Failures are tool errors carrying the REST error body.
    let (failed, error) = call(
        &client,
        "sandbox-exec",
        json!({"sandboxId": sid, "cmd": "echo hi"}),
    )
    .await;
    assert!(failed);
    assert_eq!(error["code"], "PRECONDITION_FAILED");
    let (failed, error) = call(
        &client,
        "sandbox-exec",
        json!({"sandboxId": sid, "cmd": "x", "timeoutMs": 5}),
    )
    .await;
    assert!(failed);
    assert_eq!(error["code"], "BAD_REQUEST");
    assert_eq!(error["issues"][0]["path"], "timeoutMs");
    let (failed, error) = call(&client, "sandbox-one", json!({"sandboxId": "missing"})).await;
    assert!(failed);
    assert_eq!(error["code"], "NOT_FOUND");
    client.cancel().await.unwrap();
}

/// Reads every page of a held text after the first one, `shown` bytes in.
async fn rest_of(client: &Client, sid: &Value, more: &Value, stream: &str) -> String {
    let mut offset = more[stream]["shown"].as_u64().unwrap();
    let mut text = String::new();
    loop {
        let (failed, page) = call(
            client,
            "sandbox-outputPage",
            json!({"sandboxId": sid, "outputId": more["outputId"], "stream": stream,
                   "offset": offset, "limit": 30_000}),
        )
        .await;
        assert!(!failed, "{page}");
        assert_eq!(page["start"].as_u64(), Some(offset));
        text.push_str(page["data"].as_str().unwrap());
        offset = page["end"].as_u64().unwrap();
        if page["done"] == json!(true) {
            return text;
        }
    }
}

/// Long command output and long files come back as a first page plus an id to read the
/// rest with `sandbox-outputPage`; nothing is cut, no page splits a character.
async fn read_long_output_page_by_page(client: &Client, sid: &Value) {
    let (failed, out) = call(
        client,
        "sandbox-exec",
        json!({"sandboxId": sid,
               "cmd": "python3 -c \"print('\\u00e9' * 50000, end='')\"; echo short >&2"}),
    )
    .await;
    assert!(!failed, "{out}");
    let more = &out["more"];
    assert_eq!(more["stdout"]["bytes"], 100_000);
    assert_eq!(more["stderr"]["bytes"], 6);
    assert_eq!(out["stderr"], "short\n");
    let shown = out["stdout"].as_str().unwrap();
    assert_eq!(
        shown.len() as u64,
        more["stdout"]["shown"].as_u64().unwrap()
    );
    assert!(shown.len() <= 16 * 1024);
    let stdout = shown.to_owned() + &rest_of(client, sid, more, "stdout").await;
    assert_eq!(stdout, "\u{e9}".repeat(50_000));

    let (failed, _) = call(
        client,
        "sandbox-exec",
        json!({"sandboxId": sid, "cmd": "seq 1 20000 > /tmp/long.txt"}),
    )
    .await;
    assert!(!failed);
    let (failed, file) = call(
        client,
        "sandbox-readFile",
        json!({"sandboxId": sid, "path": "/tmp/long.txt"}),
    )
    .await;
    assert!(!failed);
    let content = file["content"].as_str().unwrap().to_owned()
        + &rest_of(client, sid, &file["more"], "content").await;
    let expected: String = (1..=20_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(content, expected);

    // Only for this sandbox; unknown ids look the same as expired ones.
    for (sandbox, output) in [
        (json!("missing"), more["outputId"].clone()),
        (sid.clone(), json!("out_nope")),
    ] {
        let (failed, error) = call(
            client,
            "sandbox-outputPage",
            json!({"sandboxId": sandbox, "outputId": output, "stream": "stdout"}),
        )
        .await;
        assert!(failed);
        assert_eq!(error["code"], "NOT_FOUND");
    }
}

/// The tool list as models see it (names, descriptions, input schemas) is kept in
/// `docs/mcp-tools.json`, so a change to it shows in review. `scripts/snapshots.sh`
/// writes it again after a deliberate change.
#[tokio::test]
async fn tool_list_matches_the_snapshot() {
    let server = TestServer::start().await;
    let client = connect(&server).await;
    let mut tools: Vec<Value> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| {
            let tool = serde_json::to_value(&tool).unwrap();
            json!({"name": tool["name"], "description": tool["description"], "inputSchema": tool["inputSchema"]})
        })
        .collect();
    tools.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let actual = serde_json::to_string_pretty(&tools).unwrap() + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/mcp-tools.json");
    if std::env::var_os("SANDBOXD_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "the MCP tool list changed; review it and run with SANDBOXD_UPDATE_SNAPSHOTS=1:\n{actual}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn no_key_no_tools() {
    let server = TestServer::start().await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    for key in [None, Some("sbx_wrong")] {
        let mut request = server
            .client
            .post(format!("{}/mcp", server.url))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "UNAUTHORIZED");
    }
    // A page on another site cannot reach a local sandboxd through DNS rebinding.
    let response = server
        .client
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .header("x-api-key", KEY)
        .header("host", "attacker.example")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
}

/// An MCP session belongs to the key that opened it: another key of the same
/// organization naming it is answered like an unknown session.
#[tokio::test]
async fn a_session_is_bound_to_the_key_that_opened_it() {
    let server = TestServer::start().await;
    let (_, other) = server.post("apiKey.create", json!({"name": "other"})).await;
    let other = other["secret"].as_str().unwrap().to_owned();
    let post = |key: &str, session: Option<&str>, body: Value| {
        let mut request = server
            .client
            .post(format!("{}/mcp", server.url))
            .header("accept", "application/json, text/event-stream")
            .header("x-api-key", key)
            .json(&body);
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-06-18");
        }
        request.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let opened = post(KEY, None, initialize).await.unwrap();
    assert_eq!(opened.status(), StatusCode::OK);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});

    let foreign = post(&other, Some(&session), initialized.clone())
        .await
        .unwrap();
    assert_eq!(foreign.status(), StatusCode::NOT_FOUND);
    let foreign = post(&other, Some(&session), list.clone()).await.unwrap();
    assert_eq!(foreign.status(), StatusCode::NOT_FOUND);
    let made_up = post(KEY, Some("not-a-session"), list.clone())
        .await
        .unwrap();
    assert_eq!(made_up.status(), StatusCode::NOT_FOUND);

    let own = post(KEY, Some(&session), initialized).await.unwrap();
    assert!(own.status().is_success(), "{}", own.status());
    let own = post(KEY, Some(&session), list).await.unwrap();
    assert_eq!(own.status(), StatusCode::OK);
    assert!(own.text().await.unwrap().contains("sandbox-exec"));
}

/// An agent's MCP tool narrows an egress list, never widens it, even with a key that
/// may decide: adding a host goes through `sandbox-requestEgress` and a person.
#[tokio::test]
async fn the_set_egress_tool_only_narrows() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "networkMode": "allowlist",
            "egress": {"allow": ["a.example", "b.example"]}}))
        .await;
    let sid = sandbox["sandboxId"].as_str().unwrap().to_owned();
    let client = connect(&server).await;
    let (failed, refused) = call(
        &client,
        "sandbox-setEgress",
        json!({"sandboxId": sid, "allow": ["a.example", "b.example", "c.example"]}),
    )
    .await;
    assert!(failed, "{refused}");
    assert_eq!(refused["code"], "FORBIDDEN", "{refused}");
    let (_, one) = server.get("sandbox.one", &[("sandboxId", &sid)]).await;
    assert_eq!(one["egress"]["allow"], json!(["a.example", "b.example"]));
    let (failed, narrowed) = call(
        &client,
        "sandbox-setEgress",
        json!({"sandboxId": sid, "allow": ["a.example"]}),
    )
    .await;
    assert!(!failed, "{narrowed}");
    assert_eq!(narrowed["egress"]["allow"], json!(["a.example"]));
    client.cancel().await.ok();
}
