//! The watchers of `filesystem.Filesystem` in ProtoJSON: requests, events, and the
//! watcher ids handed out (the agent's id, marked when events carry their entries, so
//! that any replica serves the next read without remembering anything).

use serde::{Deserialize, Serialize};

use super::filesystem::EntryInfo;

/// `CreateWatcher` and `WatchDir`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WatchRequest {
    pub path: String,
    pub recursive: bool,
    pub include_entry: bool,
    pub allow_network_mounts: bool,
}

/// `GetWatcherEvents` and `RemoveWatcher`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WatcherRequest {
    pub watcher_id: String,
}

/// `CreateWatcher`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatcherAnswer {
    pub watcher_id: String,
}

/// What changed, by E2B's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Create,
    Write,
    Remove,
    Rename,
    Chmod,
}

impl Serialize for Change {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Self::Create => "EVENT_TYPE_CREATE",
            Self::Write => "EVENT_TYPE_WRITE",
            Self::Remove => "EVENT_TYPE_REMOVE",
            Self::Rename => "EVENT_TYPE_RENAME",
            Self::Chmod => "EVENT_TYPE_CHMOD",
        })
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FilesystemEvent {
    pub name: String,
    #[serde(rename = "type")]
    pub change: Change,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<EntryInfo>,
}

/// `GetWatcherEvents`' answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventsAnswer {
    pub events: Vec<FilesystemEvent>,
}

/// A message of a `WatchDir` stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WatchMessage {
    Start {},
    Filesystem(Box<FilesystemEvent>),
    Keepalive {},
}

/// The suffix of the id of a watcher whose events carry their entries.
const WITH_ENTRIES: &str = ".entries";

/// The id handed out for the agent's watcher `id`.
pub fn watcher_id(id: &str, include_entry: bool) -> String {
    if include_entry {
        format!("{id}{WITH_ENTRIES}")
    } else {
        id.to_owned()
    }
}

/// The agent's watcher of an id handed out, and whether its events carry entries.
pub fn agent_watcher(watcher_id: &str) -> (&str, bool) {
    match watcher_id.strip_suffix(WITH_ENTRIES) {
        Some(id) => (id, true),
        None => (watcher_id, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_entry_choice() {
        assert_eq!(agent_watcher(&watcher_id("w_1", true)), ("w_1", true));
        assert_eq!(agent_watcher(&watcher_id("w_1", false)), ("w_1", false));
        let event = FilesystemEvent {
            name: "a/b".into(),
            change: Change::Write,
            entry: None,
        };
        assert_eq!(
            serde_json::to_string(&WatchMessage::Filesystem(Box::new(event))).unwrap(),
            r#"{"filesystem":{"name":"a/b","type":"EVENT_TYPE_WRITE"}}"#
        );
        assert_eq!(
            serde_json::to_string(&WatchMessage::Start {}).unwrap(),
            r#"{"start":{}}"#
        );
    }
}
