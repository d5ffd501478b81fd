//! Background processes: started with a handle at once, outliving client connections,
//! each stream's last MiB readable from an offset.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::Encoding;

/// Body of `sandbox.processStart`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessStartRequest {
    pub sandbox_id: String,
    /// Command run through `sh -c` (≤ 64 KiB).
    #[schema(min_length = 1)]
    pub cmd: String,
    /// Absolute working directory (default: the sandbox workdir).
    pub cwd: Option<String>,
    pub env: Option<BTreeMap<String, String>>,
    /// Keep standard input open for `sandbox.processWrite` (default: no input).
    #[serde(default)]
    pub stdin: bool,
}

/// Query of `sandbox.processList`.
#[derive(
    Debug, Clone, Default, Deserialize, Serialize, ToSchema, IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ProcessListQuery {
    pub sandbox_id: String,
}

/// Body of `sandbox.processWait`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessWaitRequest {
    pub sandbox_id: String,
    pub process_id: String,
    /// How long to wait for the end, 0–600000 ms (default 30 s); the process keeps
    /// running when the wait ends first.
    pub timeout_ms: Option<u64>,
}

/// Body of `sandbox.processSignal`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessSignalRequest {
    pub sandbox_id: String,
    pub process_id: String,
    /// `TERM` (default), `KILL`, `INT`, `HUP`, `QUIT`, `USR1` or `USR2`; sent to the
    /// process's whole group.
    pub signal: Option<String>,
}

/// Body of `sandbox.processWrite`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessWriteRequest {
    pub sandbox_id: String,
    pub process_id: String,
    /// Written to the process's standard input (≤ 1 MiB once decoded).
    #[serde(default)]
    pub data: String,
    #[serde(default)]
    pub encoding: Encoding,
    /// Close standard input after writing (the process then reads end of file).
    #[serde(default)]
    pub close: bool,
}

/// Which output of a process.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum StreamName {
    #[default]
    Stdout,
    Stderr,
}

/// Query of `sandbox.processOutput`.
#[derive(
    Debug, Clone, Default, Deserialize, Serialize, ToSchema, IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ProcessOutputQuery {
    pub sandbox_id: String,
    pub process_id: String,
    #[serde(default)]
    #[param(inline)]
    pub stream: StreamName,
    /// Byte offset in the stream to read from (default 0); pass the previous `end` to
    /// continue where the last read stopped.
    #[serde(default)]
    pub offset: u64,
    #[serde(default)]
    #[param(inline)]
    pub encoding: Encoding,
}

/// A background process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessView {
    pub process_id: String,
    pub sandbox_id: String,
    pub cmd: String,
    pub pid: u32,
    /// `running` or `exited`.
    pub status: String,
    pub exit_code: Option<i64>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub stdin_open: bool,
    /// Bytes written to each stream since the start (the last MiB of each is kept).
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
}

/// Result of `sandbox.processOutput`: the bytes of `[start, end)` of the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessOutputResult {
    pub process_id: String,
    pub stream: StreamName,
    /// Where the data starts: later than the offset asked for when older output was
    /// dropped from the 1 MiB buffer.
    pub start: u64,
    /// Where the data ends: the offset of the next read.
    pub end: u64,
    pub encoding: Encoding,
    pub data: String,
    /// The process has ended: once `end` stops growing, all output was read.
    pub exited: bool,
}

/// Result of `sandbox.processWrite`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessWriteResult {
    pub written: u64,
}
