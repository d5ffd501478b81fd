//! A running sandbox's resource use, from its engine.

use serde::Serialize;
use utoipa::ToSchema;

/// What a running sandbox uses now, against its limits.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxStats {
    pub sandbox_id: String,
    /// When the figures were read (RFC 3339).
    pub sampled_at: String,
    /// CPU used since the previous reading (at most a few seconds back; else over the
    /// last quarter second), in percent of one CPU: 200 is two CPUs kept busy.
    pub cpu_percent: f64,
    /// The CPUs the sandbox may use.
    pub cpu_limit: f64,
    /// CPU time used since the sandbox started, in milliseconds.
    pub cpu_time_ms: u64,
    /// Memory in use, less the page cache the kernel can reclaim, in bytes.
    pub memory_bytes: u64,
    /// The memory limit, in bytes.
    pub memory_limit_bytes: u64,
    /// Processes and threads running.
    pub pids: u64,
    /// The most processes and threads it may run.
    pub pids_limit: i64,
}
