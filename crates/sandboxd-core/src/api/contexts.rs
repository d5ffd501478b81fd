//! Interpreter contexts: a long-lived interpreter (Python, JavaScript or bash) whose
//! state persists between runs, as the code interpreters of notebook-style tools.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The languages a context runs, as `sandbox.contextCreate` names them.
pub const CONTEXT_LANGUAGES: [&str; 3] = ["python", "javascript", "bash"];

/// The language a name stands for (`py`, `js`, `node` and `sh` as well), if one served.
pub fn context_language(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "python" | "py" | "python3" => Some("python"),
        "javascript" | "js" | "node" | "nodejs" => Some("javascript"),
        "bash" | "sh" | "shell" => Some("bash"),
        _ => None,
    }
}

/// Body of `sandbox.contextCreate`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextCreateRequest {
    pub sandbox_id: String,
    /// `python` (the default; the image needs `python3`, and IPython for rich results),
    /// `javascript` (`node`) or `bash` (`bash` and `python3`).
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

/// A value a run showed: something displayed during it (`display()`, a figure shown)
/// or its final expression's value, in every format it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextResult {
    /// Each format by its MIME type: `text/plain`, `text/html`, `text/markdown`,
    /// `image/png` and `image/jpeg` (base64), `image/svg+xml`, `text/latex`,
    /// `application/json`, `application/vnd.sandboxd.data+json` (a data frame's
    /// columns), `application/vnd.sandboxd.chart+json` (what a figure draws, as data).
    #[schema(value_type = Object)]
    pub data: BTreeMap<String, serde_json::Value>,
    /// Whether this is the run's final value rather than something it displayed.
    pub is_main_result: bool,
}

/// Result of `sandbox.contextRun`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextRunResult {
    pub stdout: String,
    pub stderr: String,
    /// The text of the final expression's value (Python's `repr()`), when there is one.
    pub result: Option<String>,
    /// What the run displayed, in order, then its final value, each in every format it
    /// has (at most 100, and 32 MiB in all; `truncated` says when some were left out).
    pub results: Vec<ContextResult>,
    pub error: Option<ContextError>,
    pub timed_out: bool,
    /// Whether stdout or stderr was cut at 1 MiB, or results left out.
    pub truncated: bool,
    /// The run's number in its context: 1 for its first.
    pub execution_count: u64,
}
