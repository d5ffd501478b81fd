//! Messages of the watch WebSocket (`/sandbox-watch?sandboxId=…&path=…&recursive=…`):
//! what changes under a directory of a sandbox, as it changes. Its close codes are the
//! streaming exec's (`stream::close_code`).
//!
//! `watch_target` checks the query; `event_of` turns one of the agent's events into a
//! message, leaving out what no client should get (a path longer than a path may be).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Invalid;

/// The longest path an event carries; an event of a longer one is dropped (and the
/// client told events were lost).
pub const MAX_EVENT_PATH: usize = 4096;
/// The most events sent from one read of the watcher; past it the client is told events
/// were lost.
pub const MAX_EVENTS_PER_READ: usize = 1024;

/// Query of the watch WebSocket.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchQuery {
    pub sandbox_id: Option<String>,
    /// An absolute directory of the sandbox.
    pub path: Option<String>,
    /// Every directory under it too, and those made later.
    #[serde(default)]
    pub recursive: bool,
    /// A browser's single-use token (`sandbox.execToken`).
    pub token: Option<String>,
}

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    Create,
    Write,
    Remove,
    Rename,
    Chmod,
}

/// Server → client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum WatchMessage {
    /// Sent once the watcher runs: every change from now on follows.
    Ready { sandbox_id: String, path: String },
    /// One change: the absolute path, and the path under the watched directory.
    Event {
        change: Change,
        path: String,
        name: String,
    },
    /// Events were lost (the kernel's queue or a bound overflowed).
    Overflow {},
    /// The watcher failed; the connection closes after it.
    Error { message: String },
}

/// Checks the directory to watch: absolute, at most 4096 characters; normalized.
pub fn watch_target(path: Option<&str>) -> Result<String, Invalid> {
    match path {
        None | Some("") => Err(Invalid::one(
            "path",
            "is required: an absolute directory of the sandbox",
        )),
        Some(raw) => crate::paths::absolute("path", raw),
    }
}

/// The message of one change; `None` for one whose path is too long to send.
pub fn event_of(change: Change, path: String, name: String) -> Option<WatchMessage> {
    (path.len() <= MAX_EVENT_PATH && name.len() <= MAX_EVENT_PATH).then_some(WatchMessage::Event {
        change,
        path,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_an_absolute_normalized_directory() {
        assert_eq!(
            watch_target(Some("/home/user/./x/")).unwrap(),
            "/home/user/x"
        );
        assert_eq!(watch_target(Some("/../..")).unwrap(), "/");
        for bad in [None, Some(""), Some("relative"), Some("/a\0b")] {
            assert!(watch_target(bad).is_err(), "{bad:?}");
        }
        assert!(watch_target(Some(&format!("/{}", "a".repeat(4096)))).is_err());
    }

    #[test]
    fn events_are_json_with_their_type_and_long_paths_are_dropped() {
        let event = event_of(Change::Write, "/w/a.txt".into(), "a.txt".into()).unwrap();
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::json!({"type": "event", "change": "write", "path": "/w/a.txt", "name": "a.txt"})
        );
        assert!(event_of(Change::Create, "/".repeat(4097), "x".into()).is_none());
        assert_eq!(
            serde_json::to_value(WatchMessage::Overflow {}).unwrap(),
            serde_json::json!({"type": "overflow"})
        );
    }
}
