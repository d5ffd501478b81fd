//! `sandboxd watch ID PATH [-r] [--json]`: what changes under a directory of a sandbox,
//! a line per change as it comes, over the watch WebSocket (`/sandbox-watch`), until
//! interrupted. Paths are made safe for a terminal; `--json` prints each message as the
//! server sent it.

use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

use super::client::{Client, Failure, percent_encode};
use super::table::printable;

/// The line a person reads of one message; `None` for one that is not shown.
pub fn line(message: &Value) -> Option<String> {
    match message["type"].as_str()? {
        "ready" => Some(format!(
            "watching {}",
            printable(message["path"].as_str().unwrap_or_default())
        )),
        "event" => Some(format!(
            "{:<6}  {}",
            message["change"].as_str().unwrap_or("?"),
            printable(message["path"].as_str().unwrap_or_default())
        )),
        "overflow" => Some("(some changes were lost: too many at once)".into()),
        _ => None,
    }
}

/// Follows the directory until the server ends the watch (an error) or the connection
/// goes.
pub async fn run(
    client: &Client,
    id: &str,
    path: &str,
    recursive: bool,
    json: bool,
) -> Result<(), Failure> {
    let mut socket = client
        .websocket(&format!(
            "/sandbox-watch?sandboxId={}&path={}&recursive={recursive}",
            percent_encode(id),
            percent_encode(path)
        ))
        .await?;
    let mut stdout = tokio::io::stdout();
    loop {
        let value = super::exec::next_message(&mut socket).await?;
        if value["type"] == "error" {
            return Err(Failure::Refused(
                value["message"]
                    .as_str()
                    .unwrap_or("the watch failed")
                    .to_owned(),
            ));
        }
        let shown = if json {
            Some(value.to_string())
        } else {
            line(&value)
        };
        if let Some(shown) = shown {
            let _ = stdout.write_all(format!("{shown}\n").as_bytes()).await;
            let _ = stdout.flush().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_lines_safe_for_a_terminal() {
        let event = serde_json::json!({"type": "event", "change": "write", "path": "/w/a\u{1b}[2Jb", "name": "a"});
        assert_eq!(line(&event).unwrap(), "write   /w/a?[2Jb");
        assert_eq!(
            line(&serde_json::json!({"type": "ready", "path": "/w"})).unwrap(),
            "watching /w"
        );
        assert!(line(&serde_json::json!({"type": "nonsense"})).is_none());
    }
}
