//! `sandboxd changes`: what a sandbox added, changed and removed.
//!
//! The table, or with `--tar` the changes' tar streamed to a file under a temporary name,
//! or to standard output.

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use super::client::{Client, Failure};
use super::table;

/// Writes the tar of a sandbox's changes to `to` (`-`: standard output), streamed; a
/// file is written under a temporary name and renamed once whole.
pub async fn archive(client: &Client, id: &str, all: bool, to: &str) -> Result<Value, Failure> {
    let all = if all { "true" } else { "false" };
    let response = client
        .answer(client.request("sandbox.download")?.query(&[
            ("sandboxId", id),
            ("changes", "true"),
            ("all", all),
        ]))
        .await?;
    let local = |e: std::io::Error| Failure::Refused(format!("cannot write {to}: {e}"));
    let partial = format!("{to}.partial");
    let mut out: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = if to == "-" {
        Box::new(tokio::io::stdout())
    } else {
        Box::new(tokio::fs::File::create(&partial).await.map_err(local)?)
    };
    let mut body = response.bytes_stream();
    let mut bytes = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk =
            chunk.map_err(|e| Failure::Unavailable(format!("the download was cut: {e}")))?;
        bytes += chunk.len() as u64;
        out.write_all(&chunk).await.map_err(local)?;
    }
    out.flush().await.map_err(local)?;
    if to != "-" {
        tokio::fs::rename(&partial, to).await.map_err(local)?;
    }
    Ok(json!({"path": to, "bytes": bytes}))
}

pub async fn changes(client: &Client, id: &str, all: bool) -> Result<Value, Failure> {
    let all = if all { "true" } else { "false" };
    client
        .get("sandbox.changes", &[("sandboxId", id), ("all", all)])
        .await
}

/// What `changes` prints: one line per path, its kind and size, then the total.
pub fn changes_text(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = answer["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|change| {
            vec![
                table::cell(&change["kind"]),
                table::cell(&change["type"]),
                change["size"]
                    .as_u64()
                    .map_or_else(|| "-".to_owned(), table::size),
                table::printable(change["path"].as_str().unwrap_or_default()),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no changes\n".to_owned();
    }
    let mut text = table::render(&["KIND", "TYPE", "SIZE", "PATH"], &rows);
    if answer["truncated"].as_bool() == Some(true) {
        text.push_str("(more changes than listed)\n");
    }
    text
}
