//! The rest of E2B's sandbox lifecycle in its wire format: pause, metrics, snapshots
//! and forks, mapped onto sandboxd's own pause, usage readings, snapshots and forks.
//!
//! `metrics_range` reads E2B's interval (seconds) and `metrics_of` turns sandboxd's
//! readings into E2B's metrics; `names_snapshot` matches a snapshot by id or by name, a
//! tag left off.

use serde::{Deserialize, Serialize};

use super::{ErrorAnswer, SandboxAnswer};
use crate::api::SandboxMetrics;
use crate::error::Invalid;
use crate::snapshots::Snapshot;
use crate::validate::MetricsRange;

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

/// The readings asked for by E2B's `start` and `end` (epoch seconds, both included).
pub fn metrics_range(
    sandbox_id: String,
    start: Option<i64>,
    end: Option<i64>,
) -> Result<MetricsRange, Invalid> {
    let from_ms = start.map(|s| s.saturating_mul(1000));
    let to_ms = end.map(|e| e.saturating_mul(1000).saturating_add(999));
    if let (Some(from), Some(to)) = (from_ms, to_ms)
        && from > to
    {
        return Err(Invalid::one("end", "must not be before start"));
    }
    Ok(MetricsRange {
        sandbox_id,
        from_ms,
        to_ms,
    })
}

/// E2B's metrics of sandboxd's readings; `parse_time` reads a reading's RFC 3339 time.
pub fn metrics_of(
    metrics: &SandboxMetrics,
    parse_time: impl Fn(&str) -> Option<i64>,
) -> Vec<Metric> {
    let cpus = metrics.cpu_limit.max(0.01);
    metrics
        .readings
        .iter()
        .map(|reading| Metric {
            timestamp: reading.time.clone(),
            timestamp_unix: parse_time(&reading.time).unwrap_or(0) / 1000,
            cpu_count: metrics.cpu_limit.ceil() as i64,
            cpu_used_pct: (reading.cpu_percent / cpus).clamp(0.0, 100.0),
            mem_used: reading.memory_bytes,
            mem_total: metrics.memory_limit_bytes,
            mem_cache: 0,
            disk_used: 0,
            disk_total: 0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_percent_of_the_sandboxs_cpus() {
        let metrics = SandboxMetrics {
            sandbox_id: "s".into(),
            interval_ms: 5_000,
            cpu_limit: 2.0,
            memory_limit_bytes: 20,
            pids_limit: 100,
            readings: vec![crate::api::MetricReading {
                time: "5000".into(),
                cpu_percent: 150.0,
                memory_bytes: 10,
                pids: 1,
            }],
        };
        let [metric] = metrics_of(&metrics, |t| t.parse().ok()).try_into().unwrap();
        assert_eq!((metric.cpu_count, metric.cpu_used_pct), (2, 75.0));
        assert_eq!(
            (metric.mem_used, metric.mem_total, metric.timestamp_unix),
            (10, 20, 5)
        );
        let json = serde_json::to_value(&metric).unwrap();
        assert!(json.get("timestampUnix").is_some() && json.get("cpuUsedPct").is_some());
    }

    #[test]
    fn an_interval_of_seconds_takes_both_ends_whole() {
        let range = metrics_range("s".into(), Some(10), Some(12)).unwrap();
        assert_eq!((range.from_ms, range.to_ms), (Some(10_000), Some(12_999)));
        assert_eq!(metrics_range("s".into(), None, None).unwrap().to_ms, None);
        assert!(metrics_range("s".into(), Some(12), Some(10)).is_err());
    }
}
