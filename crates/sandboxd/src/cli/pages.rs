//! Reading a log the API pages with a cursor (`sandbox.egressLog`, `sandbox.activity`):
//! every page printed as it comes (a line per entry, or its JSON with `json`), then,
//! with `follow`, what is written after, until interrupted.

use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

use super::client::{Client, Failure};

/// How often a followed log is asked for new entries.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// A log to print: its procedure, the query of every read, and how an entry reads.
pub struct Log<'a> {
    pub procedure: &'a str,
    pub query: Vec<(&'a str, &'a str)>,
    pub line: fn(&Value) -> String,
}

/// Prints `log` page by page from `cursor` (from the start when `None`); with `follow`,
/// goes on with what is written after, until interrupted.
pub async fn print(
    client: &Client,
    log: Log<'_>,
    mut cursor: Option<String>,
    follow: bool,
    json: bool,
) -> Result<(), Failure> {
    let mut out = tokio::io::stdout();
    loop {
        let mut query = log.query.clone();
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor));
        }
        let page = client.get(log.procedure, &query).await?;
        let mut text = String::new();
        for entry in page["entries"].as_array().into_iter().flatten() {
            if json {
                text.push_str(&entry.to_string());
                text.push('\n');
            } else {
                text.push_str(&(log.line)(entry));
            }
        }
        let _ = out.write_all(text.as_bytes()).await;
        let _ = out.flush().await;
        if let Some(next) = page["nextCursor"].as_str() {
            cursor = Some(next.to_owned());
        }
        if page["more"].as_bool() == Some(true) {
            continue;
        }
        if !follow {
            return Ok(());
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}
