//! `sandbox.activity`: what was done in a sandbox, in order.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::activity::{ActivityEntry, ActivityKind, ActivityRecord};

/// Query of `sandbox.activity`.
#[derive(
    Debug, Clone, Default, Deserialize, Serialize, ToSchema, IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ActivityQuery {
    pub sandbox_id: String,
    /// The `nextCursor` of the previous read: the entries written after it (from the
    /// oldest kept when absent).
    pub cursor: Option<String>,
    /// 1–500 (default 100).
    pub limit: Option<u32>,
    /// Only these kinds, comma-separated: `command`, `file`, `terminal`, `network`,
    /// `lifecycle` (default: all).
    pub kinds: Option<String>,
    /// The newest `limit` entries instead of the oldest (still newest last); with no
    /// `cursor` only.
    pub latest: Option<bool>,
}

/// One entry of a sandbox's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivityEntryView {
    pub entry_id: String,
    /// When it happened (a command: when it started).
    pub at: String,
    pub kind: ActivityKind,
    #[serde(flatten)]
    pub entry: ActivityEntry,
}

/// Result of `sandbox.activity`: entries in the order they were written, newest last. A
/// command is written when it starts and again when it ends, so it appears again then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivityView {
    pub entries: Vec<ActivityEntryView>,
    /// Pass as `cursor` to read what is written after these entries (the cursor given
    /// when there are none yet), so the timeline can be followed.
    pub next_cursor: Option<String>,
    /// Whether more entries were already written after these.
    pub more: bool,
    /// Entries of this timeline trimmed to its bounds (oldest first) or never written
    /// (written faster than they could be kept).
    pub dropped: u64,
}

impl ActivityView {
    /// The view of a read; `format_time` renders epoch milliseconds as RFC 3339.
    pub fn new(
        records: Vec<ActivityRecord>,
        next_cursor: Option<String>,
        more: bool,
        dropped: u64,
        format_time: impl Fn(i64) -> String,
    ) -> Self {
        Self {
            entries: records
                .into_iter()
                .map(|record| ActivityEntryView {
                    entry_id: record.entry_id,
                    at: format_time(record.at),
                    kind: record.entry.kind(),
                    entry: record.entry,
                })
                .collect(),
            next_cursor,
            more,
            dropped,
        }
    }
}

/// Query of `sandbox.recording`.
#[derive(
    Debug, Clone, Default, Deserialize, Serialize, ToSchema, IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct RecordingQuery {
    pub sandbox_id: String,
    /// The `terminalId` of the session's `terminal` entry.
    pub terminal_id: String,
}

/// Result of `sandbox.recording`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordingView {
    pub sandbox_id: String,
    pub terminal_id: String,
    /// The session as asciicast v2 (newline-separated JSON: the header, then
    /// `[seconds, "o" | "i" | "r" | "m", data]` events).
    pub cast: String,
}
