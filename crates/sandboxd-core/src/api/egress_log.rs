//! `sandbox.egressLog`: what the egress proxy decided for a sandbox's connections.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::egress_log::EgressRecord;

/// Query of `sandbox.egressLog`.
#[derive(
    Debug, Clone, Default, Deserialize, Serialize, ToSchema, IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct EgressLogQuery {
    pub sandbox_id: String,
    /// The `nextCursor` of the previous read: the entries written after it (from the
    /// oldest kept when absent).
    pub cursor: Option<String>,
    /// 1–500 (default 100).
    pub limit: Option<u32>,
}

/// One decision of the egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressEntryView {
    /// The same for both writes of an allowed connection's entry (when decided, and
    /// when it ended).
    pub entry_id: String,
    /// When it was decided.
    pub at: String,
    /// The host as the program named it.
    pub host: String,
    pub port: u16,
    /// `allowed`, `refused` (by the list or the address rules) or `failed` (allowed,
    /// but the host did not answer).
    pub decision: String,
    /// Why it was refused or failed.
    pub reason: Option<String>,
    /// The address connected to.
    pub address: Option<String>,
    /// Bytes sent to the host (known once the connection ended).
    pub bytes_out: u64,
    /// Bytes received from the host (known once the connection ended).
    pub bytes_in: u64,
    /// When the connection ended; `null` while it is open, and for refusals.
    pub ended_at: Option<String>,
    /// Decisions not written before this one because the sandbox asked for
    /// connections faster than its log takes them (50 a second after a burst of 200).
    pub unlogged: u64,
}

impl EgressEntryView {
    /// The view of a record; `format_time` renders epoch milliseconds as RFC 3339.
    pub fn from_record(record: &EgressRecord, format_time: impl Fn(i64) -> String) -> Self {
        Self {
            entry_id: record.entry_id.clone(),
            at: format_time(record.at),
            host: record.host.clone(),
            port: record.port,
            decision: record.decision.as_str().to_owned(),
            reason: record.reason.clone(),
            address: record.address.clone(),
            bytes_out: record.bytes_out,
            bytes_in: record.bytes_in,
            ended_at: record.ended_at.map(format_time),
            unlogged: record.unlogged,
        }
    }
}

/// Result of `sandbox.egressLog`: entries in the order they were written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressLogView {
    pub entries: Vec<EgressEntryView>,
    /// Pass as `cursor` to read what is written after these entries (the cursor given
    /// when there are none yet), so the log can be followed.
    pub next_cursor: Option<String>,
    /// Whether more entries were already written after these.
    pub more: bool,
}

impl EgressLogView {
    /// The view of a read; `format_time` renders epoch milliseconds as RFC 3339.
    pub fn new(
        entries: &[EgressRecord],
        next_cursor: Option<String>,
        more: bool,
        format_time: impl Fn(i64) -> String,
    ) -> Self {
        Self {
            entries: entries
                .iter()
                .map(|entry| EgressEntryView::from_record(entry, &format_time))
                .collect(),
            next_cursor,
            more,
        }
    }
}
