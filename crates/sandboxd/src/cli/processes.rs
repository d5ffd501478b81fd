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

/// One read of a process's output.
pub struct OutputPage {
    pub data: Vec<u8>,
    /// The offset to read from next.
    pub end: u64,
    pub exited: bool,
}

/// Reads a process's `stream` from `offset` (bytes, exact: base64 on the wire); output
/// that left the server's buffer before it was read is reported on stderr.
pub async fn read_output(
    client: &Client,
    sandbox: &str,
    process: &str,
    stream: &str,
    offset: u64,
) -> Result<OutputPage, Failure> {
    let offset_text = offset.to_string();
    let page = client
        .get(
            "sandbox.processOutput",
            &[
                ("sandboxId", sandbox),
                ("processId", process),
                ("stream", stream),
                ("offset", &offset_text),
                ("encoding", "base64"),
            ],
        )
        .await?;
    let data = base64_simd::STANDARD
        .decode_to_vec(page["data"].as_str().unwrap_or_default())
        .map_err(|_| Failure::Unavailable("the server sent invalid output".into()))?;
    let start = page["start"].as_u64().unwrap_or(offset);
    if start > offset {
        eprintln!(
            "sandboxd: {} bytes of {stream} were lost before they were read (a process \
             keeps its last MiB)",
            start - offset
        );
    }
    Ok(OutputPage {
        data,
        end: page["end"].as_u64().unwrap_or(offset),
        exited: page["exited"].as_bool().unwrap_or(true),
    })
}

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
        let page = read_output(client, id, process, stream, offset).await?;
        let _ = out.write_all(&page.data).await;
        let _ = out.flush().await;
        let moved = page.end != offset;
        offset = page.end;
        if !follow || (page.exited && !moved) {
            return Ok(());
        }
        if !moved {
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
    }
}
