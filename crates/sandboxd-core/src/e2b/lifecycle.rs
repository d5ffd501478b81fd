//! The rest of E2B's sandbox lifecycle in its wire format: pause, metrics, snapshots
//! and forks, mapped onto sandboxd's own pause, usage readings, snapshots and forks.
//!
//! `metric_of` turns a usage reading into E2B's metric; `names_snapshot` matches a
//! snapshot by id or by name, a tag left off.

use serde::{Deserialize, Serialize};

use super::{ErrorAnswer, SandboxAnswer};
use crate::api::SandboxStats;
use crate::snapshots::Snapshot;

/// Body of `POST /sandboxes/{id}/snapshots`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SnapshotBody {
    pub name: Option<String>,
}

/// A snapshot as E2B shows it: its id (what a create names as its template) and names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotAnswer {
    #[serde(rename = "snapshotID")]
    pub snapshot_id: String,
    pub names: Vec<String>,
}

/// The E2B view of a sandboxd snapshot.
pub fn snapshot_answer(snapshot: &Snapshot) -> SnapshotAnswer {
    SnapshotAnswer {
        snapshot_id: snapshot.snapshot_id.clone(),
        names: vec![snapshot.name.clone()],
    }
}

/// Whether a snapshot is one `wanted` names (its id or its name, a `:tag` left off).
pub fn names_snapshot(snapshot: &Snapshot, wanted: &str) -> bool {
    let wanted = wanted.rsplit('/').next().unwrap_or(wanted);
    let wanted = wanted.split(':').next().unwrap_or(wanted);
    snapshot.snapshot_id == wanted || snapshot.name == wanted
}

/// Body of `POST /sandboxes/{id}/fork`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ForkBody {
    /// Seconds the forks live (E2B's default 15).
    pub timeout: Option<i64>,
    /// How many forks, 1 to 20 here (E2B's limit is 100).
    pub count: Option<i64>,
}

/// One fork's outcome: the sandbox made, or why not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForkResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxAnswer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorAnswer>,
}

/// The seconds a fork lives by default.
pub const FORK_TIMEOUT_SECS: i64 = 15;

/// A usage reading as E2B's metrics show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    /// RFC 3339.
    pub timestamp: String,
    pub timestamp_unix: i64,
    pub cpu_count: i64,
    /// Percent of all the sandbox's CPUs.
    pub cpu_used_pct: f64,
    pub mem_used: u64,
    pub mem_total: u64,
    pub mem_cache: u64,
    pub disk_used: u64,
    pub disk_total: u64,
}

/// The metric of one reading, taken at `now_ms`.
pub fn metric_of(stats: &SandboxStats, now_ms: i64) -> Metric {
    let cpus = stats.cpu_limit.max(0.01);
    Metric {
        timestamp: stats.sampled_at.clone(),
        timestamp_unix: now_ms / 1000,
        cpu_count: stats.cpu_limit.ceil() as i64,
        cpu_used_pct: (stats.cpu_percent / cpus).clamp(0.0, 100.0),
        mem_used: stats.memory_bytes,
        mem_total: stats.memory_limit_bytes,
        mem_cache: 0,
        disk_used: 0,
        disk_total: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_percent_of_the_sandboxs_cpus() {
        let stats = SandboxStats {
            sandbox_id: "s".into(),
            sampled_at: "2026-01-01T00:00:00Z".into(),
            cpu_percent: 150.0,
            cpu_limit: 2.0,
            cpu_time_ms: 0,
            memory_bytes: 10,
            memory_limit_bytes: 20,
            pids: 1,
            pids_limit: 100,
        };
        let metric = metric_of(&stats, 5_000);
        assert_eq!((metric.cpu_count, metric.cpu_used_pct), (2, 75.0));
        assert_eq!(
            (metric.mem_used, metric.mem_total, metric.timestamp_unix),
            (10, 20, 5)
        );
        let json = serde_json::to_value(&metric).unwrap();
        assert!(json.get("timestampUnix").is_some() && json.get("cpuUsedPct").is_some());
    }
}
