//! A sandbox's activity timeline, its pure parts: what one entry records (a command, a
//! file moved, a terminal, a network event, a change of the sandbox's life) and how
//! much of a timeline is kept.
//!
//! `ActivityEntry` is what is kept and shown; `ActivityRecord` is one entry as the store
//! holds it (the sandbox, its organization, its place in the timeline). `text.rs` cuts
//! and masks what comes from the sandbox (`Masker`, `OutputSummary`, `shown`);
//! `audited.rs` makes the entry of an audited action (`of_audited`).

mod audited;
mod text;

pub use audited::of_audited;
pub use text::*;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The kinds of entries, each its own field of the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ActivityKind {
    /// A command run: exec, streamed exec, a background process, an interpreter run.
    Command,
    /// A file written, read, uploaded, downloaded, removed or moved.
    File,
    /// A terminal opened and closed.
    Terminal,
    /// A port exposed or closed, a preview entered, an egress request.
    Network,
    /// The sandbox's life: created, paused, resumed, forked, snapshotted, its timeout
    /// changed, killed.
    Lifecycle,
}

impl ActivityKind {
    pub const ALL: [Self; 5] = [
        Self::Command,
        Self::File,
        Self::Terminal,
        Self::Network,
        Self::Lifecycle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Command => "command",
            Self::File => "file",
            Self::Terminal => "terminal",
            Self::Network => "network",
            Self::Lifecycle => "lifecycle",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

/// Who asked: the key (and its user) the request came with. Absent on entries
/// sandboxd made itself (a timeout's kill, a restart after an engine outage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivityBy {
    pub key_id: String,
    pub user_id: String,
}

/// A command run in the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandActivity {
    /// The command line (cut at 2048 characters, secret values masked).
    pub command: String,
    pub cwd: Option<String>,
    /// The user it ran as, when not the sandbox's.
    pub user: Option<String>,
    /// The background process or interpreter context it ran as.
    pub process_id: Option<String>,
    /// Milliseconds from its start to its end; absent while it runs.
    pub duration_ms: Option<u64>,
    /// Absent while it runs, or when it ended without one (killed by sandboxd).
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    pub oom_killed: bool,
    pub stdout: Option<OutputSummary>,
    pub stderr: Option<OutputSummary>,
    /// The server's answer when the command could not run at all.
    pub error: Option<String>,
}

impl CommandActivity {
    /// Whether it failed: a non-zero exit, a timeout, an OOM kill, or no run at all.
    pub fn failed(&self) -> bool {
        self.exit_code.is_some_and(|code| code != 0)
            || self.timed_out
            || self.oom_killed
            || self.error.is_some()
    }
}

/// A file or directory moved in or out of the sandbox, or changed there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileActivity {
    pub path: String,
    /// Where it went (a move).
    pub to: Option<String>,
    /// Bytes written or read, when known.
    pub bytes: Option<u64>,
    pub error: Option<String>,
}

/// A terminal (PTY) session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalActivity {
    pub terminal_id: String,
    pub cols: u16,
    pub rows: u16,
    /// Milliseconds it was open (on `close`).
    pub duration_ms: Option<u64>,
    /// Whether it is recorded (`sandbox.recording`).
    pub recorded: bool,
}

/// A port, a preview or an egress event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkActivity {
    pub port: Option<u16>,
    pub host: Option<String>,
    /// The egress log's entry, for an egress decision.
    pub egress_entry_id: Option<String>,
}

/// A change of the sandbox's life.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleActivity {
    /// What it was made from (a template, an image, a snapshot, the sandbox forked).
    pub from: Option<String>,
    /// Why, when sandboxd did it itself (`timeout`, `engine restart`, …).
    pub reason: Option<String>,
    /// The new timeout, in milliseconds (a timeout change).
    pub timeout_ms: Option<u64>,
    /// What it made (a snapshot's id, a fork's sandbox id).
    pub made: Option<String>,
}

/// One thing done in a sandbox. Exactly one of the kinds' fields is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivityEntry {
    /// What was done, in the kind's words: `exec`, `stream`, `process`, `code` (a
    /// command); `write`, `read`, `upload`, `download`, `remove`, `move`, `mkdir`
    /// (a file); `open`, `close` (a terminal); `expose`, `unexpose` (a port);
    /// `create`, `pause`, `resume`, `snapshot`, `fork`, `timeout`, `kill` (its life).
    pub action: String,
    /// Who asked; absent when sandboxd did it itself.
    pub by: Option<ActivityBy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandActivity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<FileActivity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<TerminalActivity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkActivity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<LifecycleActivity>,
}

impl ActivityEntry {
    fn of(action: &str, by: Option<ActivityBy>) -> Self {
        Self {
            action: action.to_owned(),
            by,
            command: None,
            file: None,
            terminal: None,
            network: None,
            lifecycle: None,
        }
    }

    pub fn command(action: &str, by: Option<ActivityBy>, command: CommandActivity) -> Self {
        Self {
            command: Some(command),
            ..Self::of(action, by)
        }
    }

    pub fn file(action: &str, by: Option<ActivityBy>, file: FileActivity) -> Self {
        Self {
            file: Some(file),
            ..Self::of(action, by)
        }
    }

    pub fn terminal(action: &str, by: Option<ActivityBy>, terminal: TerminalActivity) -> Self {
        Self {
            terminal: Some(terminal),
            ..Self::of(action, by)
        }
    }

    pub fn network(action: &str, by: Option<ActivityBy>, network: NetworkActivity) -> Self {
        Self {
            network: Some(network),
            ..Self::of(action, by)
        }
    }

    pub fn lifecycle(action: &str, by: Option<ActivityBy>, lifecycle: LifecycleActivity) -> Self {
        Self {
            lifecycle: Some(lifecycle),
            ..Self::of(action, by)
        }
    }

    /// Its kind: the field that is set.
    pub fn kind(&self) -> ActivityKind {
        if self.command.is_some() {
            ActivityKind::Command
        } else if self.file.is_some() {
            ActivityKind::File
        } else if self.terminal.is_some() {
            ActivityKind::Terminal
        } else if self.network.is_some() {
            ActivityKind::Network
        } else {
            ActivityKind::Lifecycle
        }
    }
}

/// One entry as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityRecord {
    pub entry_id: String,
    pub sandbox_id: String,
    pub organization_id: String,
    /// Where it stands in the timeline: set by the store on each write (an entry
    /// written again, as a command that ended, moves to the end).
    pub position: String,
    /// When it happened (a command: when it started), epoch ms.
    pub at: i64,
    pub entry: ActivityEntry,
}

/// How much of a sandbox's timeline is kept, and for how long after it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keeping {
    /// Entries per sandbox; older ones go first.
    pub entries: u32,
    /// Bytes of entries per sandbox; older ones go first.
    pub bytes: u64,
    /// How long a timeline outlives its sandbox's end, in milliseconds.
    pub retention_ms: i64,
    /// Bytes of one terminal session's recording; it stops there, with a marker.
    pub recording_bytes: u64,
    /// Bytes of recordings one sandbox keeps; a session past them is not recorded.
    pub recordings_bytes: u64,
    /// Whether what is typed into a terminal is recorded too.
    pub record_input: bool,
}

impl Default for Keeping {
    fn default() -> Self {
        Self {
            entries: 10_000,
            bytes: 8 * 1024 * 1024,
            retention_ms: 7 * 24 * 3600 * 1000,
            recording_bytes: 4 * 1024 * 1024,
            recordings_bytes: 32 * 1024 * 1024,
            record_input: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_has_the_kind_of_its_field_and_kinds_read_back() {
        let entry = ActivityEntry::file("write", None, FileActivity::default());
        assert_eq!(entry.kind(), ActivityKind::File);
        assert_eq!(
            ActivityEntry::lifecycle("kill", None, LifecycleActivity::default()).kind(),
            ActivityKind::Lifecycle
        );
        for kind in ActivityKind::ALL {
            assert_eq!(ActivityKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ActivityKind::parse("everything"), None);
        let json = serde_json::to_value(&entry).unwrap_or_default();
        assert!(json.get("command").is_none(), "{json}");
        assert_eq!(json["file"]["path"], "");
    }

    #[test]
    fn failed_commands_are_told_apart() {
        let ok = CommandActivity {
            exit_code: Some(0),
            ..CommandActivity::default()
        };
        assert!(!ok.failed());
        assert!(
            CommandActivity {
                exit_code: Some(2),
                ..CommandActivity::default()
            }
            .failed()
        );
        assert!(
            CommandActivity {
                timed_out: true,
                ..ok.clone()
            }
            .failed()
        );
        assert!(!CommandActivity::default().failed(), "still running");
    }
}
