//! Background processes: `ps` lists a sandbox's, `logs` prints one's output (following
//! it with `-f` until it ends), and `exec --detach` starts one.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use super::client::{Client, Failure};
use super::table;
use super::table::cell as text;

pub async fn list(client: &Client, id: &str) -> Result<Value, Failure> {
    client
        .get("sandbox.processList", &[("sandboxId", id)])
        .await
}

pub fn list_table(processes: &Value) -> String {
    let rows: Vec<Vec<String>> = processes
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            vec![
                text(&p["processId"]),
                text(&p["pid"]),
                text(&p["status"]),
                text(&p["exitCode"]),
                text(&p["startedAt"]),
                text(&p["cmd"]),
            ]
        })
        .collect();
    table::render(
        &["PROCESS", "PID", "STATUS", "EXIT", "STARTED", "COMMAND"],
        &rows,
    )
}

/// Starts `cmd` in the background; its record.
pub async fn start(
    client: &Client,
    id: &str,
    cmd: &str,
    cwd: Option<&str>,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Value, Failure> {
    let mut body = json!({"sandboxId": id, "cmd": cmd});
    if let Some(cwd) = cwd {
        body["cwd"] = json!(cwd);
    }
    if !env.is_empty() {
        body["env"] = json!(env);
    }
    client.post("sandbox.processStart", &body).await
}

/// How often `logs -f` asks for more.
const FOLLOW_EVERY: Duration = Duration::from_millis(300);

/// Prints a process's output from the start of what is kept; with `follow`, until the
/// process has ended and everything was read.
pub async fn logs(
    client: &Client,
    id: &str,
    process: &str,
    stream: &str,
    follow: bool,
) -> Result<(), Failure> {
    let mut offset = 0u64;
    let mut out = tokio::io::stdout();
    loop {
        let offset_text = offset.to_string();
        let page = client
            .get(
                "sandbox.processOutput",
                &[
                    ("sandboxId", id),
                    ("processId", process),
                    ("stream", stream),
                    ("offset", &offset_text),
                ],
            )
            .await?;
        let start = page["start"].as_u64().unwrap_or(offset);
        if start > offset {
            eprintln!(
                "sandboxd: {} bytes of output were dropped before they were read (a process \
                 keeps its last MiB)",
                start - offset
            );
        }
        let data = page["data"].as_str().unwrap_or_default();
        let _ = out.write_all(data.as_bytes()).await;
        let _ = out.flush().await;
        let end = page["end"].as_u64().unwrap_or(offset);
        let exited = page["exited"].as_bool().unwrap_or(true);
        let moved = end != offset;
        offset = end;
        if !follow || (exited && !moved) {
            return Ok(());
        }
        if !moved {
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
    }
}
