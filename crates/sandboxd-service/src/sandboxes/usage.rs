//! `sandbox.stats`: a running sandbox's CPU, memory and processes, from its engine. CPU
//! use is the change of the CPU time counter between two readings: the previous one of
//! this replica when it is recent, else a second reading a quarter second after the
//! first.
//!
//! A reading is kept per sandbox for 5 s.
//!
//! `sandbox.metrics`: the readings over time that the usage pass
//! (`duties/usage.rs`) keeps for every running sandbox whose agent this replica holds
//! ([`Histories`], bounded per sandbox by `usage_history`); a sandbox with none yet
//! answers one taken now.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::{MetricReading, SandboxMetrics, SandboxStats};
use sandboxd_core::model::Principal;
use sandboxd_core::rfc3339::format_millis;
use sandboxd_core::usage::cpu_percent;
use sandboxd_core::usage_history::{SAMPLE_EVERY_MS, TimedSample, UsageHistory};
use sandboxd_core::validate::MetricsRange;

use super::Sandboxes;
use crate::{ServiceError, now_ms};

/// A previous reading older than this is not used: the figure would be an average over
/// too long a time.
const RECENT: Duration = Duration::from_secs(5);
/// Readings closer than this give the previous figure again, so a burst of calls does
/// not compute CPU use over microseconds.
const TOO_CLOSE: Duration = Duration::from_millis(100);
/// How far apart the two readings of a first call are.
const SPAN: Duration = Duration::from_millis(250);

/// The last CPU reading of each sandbox, and the figure it gave.
#[derive(Debug, Default)]
pub(crate) struct Readings(Mutex<HashMap<String, Reading>>);

#[derive(Debug, Clone, Copy)]
struct Reading {
    cpu_ns: u64,
    at: Instant,
    percent: f64,
}

impl Readings {
    fn last(&self, sandbox_id: &str) -> Option<Reading> {
        let readings = self.0.lock().unwrap_or_else(|e| e.into_inner());
        readings
            .get(sandbox_id)
            .copied()
            .filter(|r| r.at.elapsed() < RECENT)
    }

    fn keep(&self, sandbox_id: &str, reading: Reading) {
        let mut readings = self.0.lock().unwrap_or_else(|e| e.into_inner());
        readings.retain(|_, r| r.at.elapsed() < RECENT);
        readings.insert(sandbox_id.to_owned(), reading);
    }
}

/// The history of readings of each sandbox sampled here.
#[derive(Debug, Default)]
pub(crate) struct Histories(Mutex<HashMap<String, UsageHistory>>);

impl Histories {
    pub(crate) fn record(&self, sandbox_id: &str, sample: TimedSample) {
        let mut histories = self.0.lock().unwrap_or_else(|e| e.into_inner());
        histories
            .entry(sandbox_id.to_owned())
            .or_default()
            .record(sample);
    }

    /// Forgets every sandbox but these.
    pub(crate) fn keep_only(&self, sandbox_ids: &[String]) {
        let kept: std::collections::HashSet<&str> =
            sandbox_ids.iter().map(String::as_str).collect();
        let mut histories = self.0.lock().unwrap_or_else(|e| e.into_inner());
        histories.retain(|id, _| kept.contains(id.as_str()));
    }

    /// The readings of `sandbox_id` in the range, and whether it has any at all.
    fn between(&self, range: &MetricsRange) -> (Vec<MetricReading>, bool) {
        let histories = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(history) = histories.get(&range.sandbox_id) else {
            return (Vec::new(), false);
        };
        let readings = history
            .between(range.from_ms, range.to_ms)
            .map(|r| MetricReading {
                time: format_millis(r.at_ms),
                cpu_percent: f64::from(r.cpu_percent),
                memory_bytes: r.memory_bytes,
                pids: u64::from(r.pids),
            })
            .collect();
        (readings, !history.is_empty())
    }
}

impl Sandboxes {
    /// The sandbox's readings over time within `range`, oldest first. A running sandbox
    /// with none kept yet (just made, or its agent held by another replica that did not
    /// forward the call) answers one taken now, when now is in the range.
    pub async fn metrics(
        &self,
        caller: &Principal,
        range: MetricsRange,
    ) -> Result<SandboxMetrics, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, &range.sandbox_id, SandboxNeed::Read)
            .await?;
        sandbox.kept_container()?;
        let (mut readings, any) = self.service.inner.histories.between(&range);
        let now = now_ms();
        let now_in_range =
            range.from_ms.is_none_or(|from| from <= now) && range.to_ms.is_none_or(|to| now <= to);
        if !any && now_in_range && sandbox.status == sandboxd_core::model::SandboxStatus::Running {
            let stats = self.sandbox_stats(caller, &range.sandbox_id).await?;
            readings.push(MetricReading {
                time: stats.sampled_at,
                cpu_percent: stats.cpu_percent,
                memory_bytes: stats.memory_bytes,
                pids: stats.pids,
            });
        }
        Ok(SandboxMetrics {
            sandbox_id: sandbox.sandbox_id.clone(),
            interval_ms: SAMPLE_EVERY_MS,
            cpu_limit: sandbox.cpu,
            memory_limit_bytes: u64::try_from(sandbox.memory_mb).unwrap_or(0) * 1024 * 1024,
            pids_limit: sandbox.pids_limit,
            readings,
        })
    }

    /// What the running sandbox uses now, against its limits.
    pub async fn sandbox_stats(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<SandboxStats, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        // A paused sandbox's use is read as it is (no CPU): reading does not wake it.
        let container = sandbox.kept_container()?;
        let engine = self
            .service
            .fleet()
            .engine_of(sandbox.server_id.as_deref())
            .await?;
        let readings = &self.service.inner.readings;
        let mut before = readings.last(&sandbox.sandbox_id);
        if before.is_none() {
            let first = engine.usage(container).await?;
            before = Some(Reading {
                cpu_ns: first.cpu_ns,
                at: Instant::now(),
                percent: 0.0,
            });
            tokio::time::sleep(SPAN).await;
        }
        let sample = engine.usage(container).await?;
        let at = Instant::now();
        let percent = match before {
            Some(before) if at.duration_since(before.at) < TOO_CLOSE => before.percent,
            Some(before) => cpu_percent(
                before.cpu_ns,
                sample.cpu_ns,
                at.duration_since(before.at).as_nanos() as u64,
            )
            .unwrap_or(before.percent),
            None => 0.0,
        };
        if before.is_none_or(|b| at.duration_since(b.at) >= TOO_CLOSE) {
            readings.keep(
                &sandbox.sandbox_id,
                Reading {
                    cpu_ns: sample.cpu_ns,
                    at,
                    percent,
                },
            );
        }
        let memory_limit = u64::try_from(sandbox.memory_mb).unwrap_or(0) * 1024 * 1024;
        Ok(SandboxStats {
            sandbox_id: sandbox.sandbox_id.clone(),
            sampled_at: format_millis(now_ms()),
            cpu_percent: percent,
            cpu_limit: sandbox.cpu,
            cpu_time_ms: sample.cpu_ns / 1_000_000,
            memory_bytes: sample.memory_bytes,
            memory_limit_bytes: sample.memory_limit_bytes.unwrap_or(memory_limit),
            pids: sample.pids,
            pids_limit: sandbox.pids_limit,
        })
    }
}
