//! Interpreter contexts: a long-lived Python whose state persists between runs, as the
//! code interpreters of notebook-style tools.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `sandbox.contextCreate`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextCreateRequest {
    pub sandbox_id: String,
    /// Only `python` (the image needs `python3`).
    pub language: Option<String>,
}

/// Body of `sandbox.contextRun`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextRunRequest {
    pub sandbox_id: String,
    pub context_id: String,
    /// Code to run (≤ 64 KiB); the value of a final expression is the result.
    pub code: String,
    /// 1 s–10 min (default 60 s); at the timeout the run is interrupted
    /// (`KeyboardInterrupt`), the context and its state stay.
    #[schema(minimum = 1000, maximum = 600000)]
    pub timeout_ms: Option<u64>,
}

/// Body of `sandbox.contextRemove`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextIdBody {
    pub sandbox_id: String,
    pub context_id: String,
}

/// An interpreter context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextView {
    pub context_id: String,
    pub sandbox_id: String,
    pub language: String,
    /// `running` or `exited` (a context whose interpreter died cannot run code).
    pub status: String,
    pub started_at: String,
    /// The directory it runs in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// An exception raised by a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextError {
    pub name: String,
    pub value: String,
    pub traceback: String,
}

/// Result of `sandbox.contextRun`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextRunResult {
    pub stdout: String,
    pub stderr: String,
    /// `repr()` of the final expression's value, when there is one.
    pub result: Option<String>,
    pub error: Option<ContextError>,
    pub timed_out: bool,
    /// Whether stdout or stderr was cut at 1 MiB.
    pub truncated: bool,
    /// The run's number in its context: 1 for its first.
    pub execution_count: u64,
}
