//! Long tool output held back and read page by page (MCP): what a tool says it held, and
//! the query and result of `sandbox-outputPage`.

use serde::{Deserialize, Serialize};

/// Which held text to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HeldStream {
    Stdout,
    Stderr,
    Content,
}

/// Input of `sandbox-outputPage`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputPageQuery {
    pub sandbox_id: String,
    /// The `more.outputId` of an earlier `sandbox-exec` or `sandbox-readFile`.
    pub output_id: String,
    /// `stdout` or `stderr` of a command, `content` of a file.
    pub stream: HeldStream,
    /// Byte offset to read from: the `shown` of the first reply, then the `end` of the
    /// previous page.
    #[serde(default)]
    pub offset: u64,
    /// Page size in bytes, 1024–262144 (default 65536).
    pub limit: Option<u64>,
}

/// How much of one held text there is and how much the first reply showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldText {
    pub bytes: u64,
    pub shown: u64,
}

/// Said by a tool whose output was longer than it returns inline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MoreOutput {
    pub output_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<HeldText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<HeldText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<HeldText>,
    pub next: &'static str,
}

/// What the `next` of [`MoreOutput`] tells a model.
pub const MORE_OUTPUT_NEXT: &str = "Only the first `shown` bytes are above. Read the rest with \
sandbox-outputPage (outputId, stream, offset = shown, then offset = the previous page's end) \
until done is true. Held for 10 minutes.";

/// A tool result whose long texts were cut to their first page (`sandbox-exec`: each
/// stream; `sandbox-readFile`: the content), with what was held back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Paged<T> {
    #[serde(flatten)]
    pub result: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<MoreOutput>,
}

/// Result of `sandbox-outputPage`: the bytes `[start, end)` of a held text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputPage {
    pub output_id: String,
    pub stream: HeldStream,
    pub start: u64,
    /// The offset of the next page.
    pub end: u64,
    pub total_bytes: u64,
    pub data: String,
    /// Nothing follows this page.
    pub done: bool,
}
