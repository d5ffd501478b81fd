//! One sample of a container's resource use from the engine's stats (`one-shot`: the
//! engine reads the container's cgroup once, without waiting for a second sample).
//!
//! CPU time, memory less reclaimable cache, and processes.

use bollard::models::ContainerStatsResponse;
use bollard::query_parameters::StatsOptions;
use futures_util::StreamExt as _;
use sandboxd_contracts::UsageSample;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, fault, status_of};

/// What the engine's stats say, narrowed to a [`UsageSample`].
fn sample(stats: &ContainerStatsResponse) -> UsageSample {
    let cpu_ns = stats
        .cpu_stats
        .as_ref()
        .and_then(|cpu| cpu.cpu_usage.as_ref())
        .and_then(|usage| usage.total_usage)
        .unwrap_or(0);
    let memory = stats.memory_stats.as_ref();
    let usage = memory.and_then(|m| m.usage).unwrap_or(0);
    // The page cache the kernel can take back is not the sandbox's to answer for, as
    // `docker stats` counts it: `inactive_file` on cgroup v2, `total_inactive_file` on v1.
    let reclaimable = memory
        .and_then(|m| m.stats.as_ref())
        .and_then(|s| {
            s.get("inactive_file")
                .or_else(|| s.get("total_inactive_file"))
        })
        .copied()
        .unwrap_or(0);
    let limit = memory.and_then(|m| m.limit).filter(|&limit| limit > 0);
    UsageSample {
        cpu_ns,
        memory_bytes: usage.saturating_sub(reclaimable),
        memory_limit_bytes: limit,
        pids: stats
            .pids_stats
            .as_ref()
            .and_then(|p| p.current)
            .unwrap_or(0),
    }
}

impl DockerEngine {
    /// The container's resource use now.
    pub(crate) async fn usage(&self, id: &str) -> Result<UsageSample, EngineError> {
        let options = StatsOptions {
            stream: false,
            one_shot: true,
        };
        let mut stats = self.docker.stats(id, Some(options));
        match bounded("container stats", stats.next()).await? {
            Some(Ok(stats)) => Ok(sample(&stats)),
            Some(Err(e)) if status_of(&e) == Some(404) => {
                Err(EngineError::NotFound { what: "container" })
            }
            Some(Err(e)) => Err(fault(e)),
            None => Err(EngineError::NotRunning),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{
        ContainerCpuStats, ContainerCpuUsage, ContainerMemoryStats, ContainerPidsStats,
    };

    #[test]
    fn the_page_cache_is_left_out_and_missing_figures_are_zero() {
        let stats = ContainerStatsResponse {
            cpu_stats: Some(ContainerCpuStats {
                cpu_usage: Some(ContainerCpuUsage {
                    total_usage: Some(5_000_000),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            memory_stats: Some(ContainerMemoryStats {
                usage: Some(10_000),
                limit: Some(1 << 30),
                stats: Some([("inactive_file".to_owned(), 4_000)].into()),
                ..Default::default()
            }),
            pids_stats: Some(ContainerPidsStats {
                current: Some(3),
                limit: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            sample(&stats),
            UsageSample {
                cpu_ns: 5_000_000,
                memory_bytes: 6_000,
                memory_limit_bytes: Some(1 << 30),
                pids: 3,
            }
        );
        assert_eq!(
            sample(&ContainerStatsResponse::default()),
            UsageSample::default()
        );
    }
}
