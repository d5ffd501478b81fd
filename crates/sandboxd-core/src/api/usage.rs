//! A running sandbox's resource use, from its engine.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

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

/// Query of `sandbox.metrics`.
#[derive(
    Debug, Clone, Default, Deserialize, Serialize, ToSchema, IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct SandboxMetricsQuery {
    pub sandbox_id: String,
    /// RFC 3339, included; default: the oldest reading kept.
    pub from: Option<String>,
    /// RFC 3339, included; default: now.
    pub to: Option<String>,
}

/// A running sandbox's readings over time, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxMetrics {
    pub sandbox_id: String,
    /// How far apart the readings are taken, in milliseconds.
    pub interval_ms: i64,
    /// The CPUs the sandbox may use.
    pub cpu_limit: f64,
    /// The memory limit, in bytes.
    pub memory_limit_bytes: u64,
    /// The most processes and threads it may run.
    pub pids_limit: i64,
    pub readings: Vec<MetricReading>,
}

/// One reading of `sandbox.metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricReading {
    /// When it was taken (RFC 3339).
    pub time: String,
    /// CPU used since the reading before, in percent of one CPU: 200 is two CPUs busy.
    pub cpu_percent: f64,
    /// Memory in use, less the page cache the kernel can reclaim, in bytes.
    pub memory_bytes: u64,
    /// Processes and threads running.
    pub pids: u64,
}
