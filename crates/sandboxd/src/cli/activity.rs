//! `sandboxd activity ID`: what was done in a sandbox, a line per entry (the API's JSON
//! with `--json`), oldest first or the newest with `--latest N`, and with `--follow`
//! what is done after, until interrupted.

use serde_json::Value;

use super::client::{Client, Failure};
use super::pages::{self, Log};

/// Prints a sandbox's timeline (see the module's text).
pub async fn run(
    client: &Client,
    id: &str,
    kinds: Option<&str>,
    latest: Option<u32>,
    (follow, json): (bool, bool),
) -> Result<(), Failure> {
    let mut query = vec![("sandboxId", id), ("limit", "500")];
    if let Some(kinds) = kinds {
        query.push(("kinds", kinds));
    }
    let mut cursor = None;
    if let Some(latest) = latest {
        let limit = latest.clamp(1, 500).to_string();
        let mut first = query.clone();
        first.retain(|(name, _)| *name != "limit");
        first.push(("limit", &limit));
        first.push(("latest", "true"));
        let page = client.get("sandbox.activity", &first).await?;
        let mut text = String::new();
        for entry in page["entries"].as_array().into_iter().flatten() {
            text.push_str(&if json {
                format!("{entry}\n")
            } else {
                entry_line(entry)
            });
        }
        let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
        if !follow {
            return Ok(());
        }
        cursor = page["nextCursor"].as_str().map(str::to_owned);
    }
    let log = Log {
        procedure: "sandbox.activity",
        query,
        line: entry_line,
    };
    pages::print(client, log, cursor, follow, json).await
}

/// One entry as a line: `TIME KIND ACTION [by KEY]: WHAT`, a failed command marked.
pub fn entry_line(entry: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or("-").to_owned();
    let mut line = format!(
        "{} {:9} {:8}",
        text(&entry["at"]),
        text(&entry["kind"]),
        text(&entry["action"])
    );
    let what = match entry["kind"].as_str() {
        Some("command") => command_text(&entry["command"]),
        Some("file") => {
            let file = &entry["file"];
            let mut what = text(&file["path"]);
            if let Some(to) = file["to"].as_str() {
                what.push_str(&format!(" -> {to}"));
            }
            if let Some(bytes) = file["bytes"].as_u64() {
                what.push_str(&format!(" ({bytes} bytes)"));
            }
            if let Some(error) = file["error"].as_str() {
                what.push_str(&format!(" FAILED: {error}"));
            }
            what
        }
        Some("terminal") => {
            let terminal = &entry["terminal"];
            let mut what = format!(
                "{} {}x{}",
                text(&terminal["terminalId"]),
                terminal["cols"],
                terminal["rows"]
            );
            if let Some(ms) = terminal["durationMs"].as_u64() {
                what.push_str(&format!(" open {ms} ms"));
            }
            what
        }
        Some("network") => {
            let network = &entry["network"];
            [
                network["host"].as_str().map(str::to_owned),
                network["port"].as_u64().map(|port| format!("port {port}")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ")
        }
        _ => {
            let life = &entry["lifecycle"];
            [
                life["from"].as_str().map(|from| format!("from {from}")),
                life["made"].as_str().map(|made| format!("made {made}")),
                life["timeoutMs"].as_u64().map(|ms| format!("{ms} ms")),
                life["reason"].as_str().map(|why| format!("({why})")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ")
        }
    };
    if !what.is_empty() {
        line.push(' ');
        line.push_str(&what);
    }
    if let Some(key) = entry["by"]["keyId"].as_str() {
        line.push_str(&format!(" [by {key}]"));
    }
    line.push('\n');
    line
}

/// A command as its line says it: `$ CMD -> exit N, T ms`, or `running`.
fn command_text(command: &Value) -> String {
    let mut what = format!("$ {}", command["command"].as_str().unwrap_or(""));
    let failed = command["exitCode"].as_i64().is_some_and(|code| code != 0)
        || command["timedOut"] == true
        || command["oomKilled"] == true
        || command["error"].is_string();
    match (command["exitCode"].as_i64(), command["durationMs"].as_u64()) {
        (Some(code), Some(ms)) => what.push_str(&format!(" -> exit {code}, {ms} ms")),
        (None, Some(ms)) => what.push_str(&format!(" -> {ms} ms")),
        _ => what.push_str(" -> running"),
    }
    if command["timedOut"] == true {
        what.push_str(", timed out");
    }
    if command["oomKilled"] == true {
        what.push_str(", out of memory");
    }
    if let Some(error) = command["error"].as_str() {
        what.push_str(&format!(": {error}"));
    }
    if failed {
        what.push_str("  FAILED");
    }
    what
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_read_as_lines() {
        let failed = json!({
            "at": "2026-12-08T00:00:00.000Z", "kind": "command", "action": "exec",
            "by": {"keyId": "key_1", "userId": "u"},
            "command": {"command": "false", "exitCode": 1, "durationMs": 3, "timedOut": false, "oomKilled": false},
        });
        assert_eq!(
            entry_line(&failed),
            "2026-12-08T00:00:00.000Z command   exec     $ false -> exit 1, 3 ms  FAILED [by key_1]\n"
        );
        let killed = json!({
            "at": "t", "kind": "lifecycle", "action": "kill", "by": null,
            "lifecycle": {"reason": "expired"},
        });
        assert_eq!(entry_line(&killed), "t lifecycle kill     (expired)\n");
        let moved = json!({
            "at": "t", "kind": "file", "action": "move", "by": null,
            "file": {"path": "/a", "to": "/b"},
        });
        assert_eq!(entry_line(&moved), "t file      move     /a -> /b\n");
    }
}
