//! What a newcomer meets: the binary of the ordinary build, started from a working
//! directory with a relative data dir and no agent setting, serves sandboxes through the
//! agent it carries; a data dir it cannot use stops it with the path named.
//!
//! The relative data dir is deeper than a socket address holds; exec runs through the
//! agent, a terminal opens, `/health` answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{KEY, RunningServer};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest as _};

/// Deep enough that `<data dir>/agents/<id>/agent.sock` passes what a unix socket
/// address holds (107 bytes), as in a clone under a long home directory.
const RELATIVE_DATA_DIR: &str =
    "a-checkout-under-a-long-home-directory/with-a-nested-project-folder/sandboxd-data";

async fn call(server: &RunningServer, procedure: &str, body: Value) -> (u16, Value) {
    server
        .post(KEY, &format!("sandbox.{procedure}"), body)
        .await
}

async fn get(server: &RunningServer, path: &str) -> String {
    reqwest::get(format!("{}{path}", server.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_relative_data_dir_from_the_working_directory_serves_sandboxes() {
    let workdir = tempfile::tempdir().unwrap();
    let server = RunningServer::start_relative(workdir, Path::new(RELATIVE_DATA_DIR)).await;
    let data_dir = server.data_dir();
    assert!(data_dir.join("owner.key").is_file() || data_dir.join("sandboxd.db").is_file());
    let socket = data_dir.join("agents/123456789012345678901/agent.sock");
    assert!(socket.as_os_str().len() > 107, "{}", socket.display());

    let sandbox_id = server.create().await;
    let (status, exec) = call(
        &server,
        "exec",
        json!({"sandboxId": sandbox_id, "cmd": "echo from-a-relative-data-dir"}),
    )
    .await;
    assert_eq!(status, 200, "{exec}");
    assert_eq!(exec["stdout"], "from-a-relative-data-dir\n");
    assert!(server.served().await.0 > 0, "exec went through the agent");

    let (status, killed) = call(&server, "kill", json!({"sandboxId": sandbox_id})).await;
    assert_eq!(status, 200, "{killed}");
    assert_eq!(killed["status"], "killed");

    // The paths are logged once, absolute.
    let log = server.log();
    let absolute = format!("data_dir={}", data_dir.display());
    assert_eq!(log.matches(&absolute).count(), 1, "{log}");
    assert!(log.contains("agent_source=\"built-in\""), "{log}");
}

#[tokio::test]
async fn the_ordinary_build_serves_exec_through_its_agent_and_opens_a_terminal() {
    let server = RunningServer::start().await;
    let health: Value = serde_json::from_str(&get(&server, "/health").await).unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["execPath"], "agent", "{health}");

    let sandbox_id = server.create().await;
    let before = server.served().await.0;
    let (status, exec) = call(
        &server,
        "exec",
        json!({"sandboxId": sandbox_id, "cmd": "echo $((6*7))"}),
    )
    .await;
    assert_eq!(status, 200, "{exec}");
    assert_eq!(exec["stdout"], "42\n");
    assert!(
        server.served().await.0 > before,
        "exec went through the agent"
    );

    let ws_url = server.url.replace("http://", "ws://");
    let mut request = format!(
        "{ws_url}/sandbox-pty?sandboxId={sandbox_id}&cols=80&rows=24&cmd=echo%20terminal-$((6*7))"
    )
    .into_client_request()
    .unwrap();
    request
        .headers_mut()
        .insert("x-api-key", KEY.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut output = Vec::new();
    let mut exit = None;
    let read = async {
        while let Some(message) = socket.next().await {
            match message.unwrap() {
                Message::Binary(bytes) => output.extend_from_slice(&bytes),
                Message::Text(text) => {
                    let event: Value = serde_json::from_str(&text).unwrap();
                    if event["type"] == "exit" {
                        exit = Some(event["exitCode"].clone());
                        break;
                    }
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the terminal ended");
    let _ = socket.close(None).await;
    let text = String::from_utf8_lossy(&output);
    assert!(text.contains("terminal-42"), "{text}");
    assert_eq!(exit, Some(json!(0)));
}

#[tokio::test]
async fn without_the_agent_health_says_the_engine_serves() {
    let server = RunningServer::start_with_env(&[("SANDBOXD_AGENT", "false")]).await;
    let health: Value = serde_json::from_str(&get(&server, "/health").await).unwrap();
    assert_eq!(health["execPath"], "engine", "{health}");
}

#[test]
fn a_data_dir_that_cannot_be_created_stops_the_start_naming_it() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let data_dir = file.path().join("data");
    let output = Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data_dir)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "the data directory {} cannot be created",
            data_dir.display()
        )),
        "{stderr}"
    );
}
