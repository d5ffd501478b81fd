//! The usage pass: every few seconds (`usage_history::SAMPLE_EVERY_MS`), a reading of
//! each running sandbox whose agent this replica holds (warm pool members left out),
//! kept in its bounded history for `sandbox.metrics`. At most [`AT_ONCE`] engine calls
//! are under way at a time; a sandbox whose reading fails is skipped this pass. The
//! histories of sandboxes this replica no longer holds go.

use futures_util::StreamExt as _;
use sandboxd_core::model::SandboxStatus;
use sandboxd_core::usage_history::TimedSample;

use super::Duties;
use crate::now_ms;

/// How many sandboxes are read at once.
const AT_ONCE: usize = 8;

impl Duties {
    /// One pass; how many sandboxes were read.
    pub async fn sample_usage_once(&self) -> usize {
        let members = self.service.pools().members();
        let held: Vec<String> = self
            .service
            .agents()
            .listened()
            .into_iter()
            .filter(|id| !members.contains(id))
            .collect();
        self.service.inner.histories.keep_only(&held);
        futures_util::stream::iter(held)
            .map(|sandbox_id| async move { self.sample(&sandbox_id).await })
            .buffer_unordered(AT_ONCE)
            .filter(|read| std::future::ready(*read))
            .count()
            .await
    }

    async fn sample(&self, sandbox_id: &str) -> bool {
        let Ok(Some(row)) = self.service.store().sandbox(sandbox_id).await else {
            return false;
        };
        let (SandboxStatus::Running, Some(container)) = (row.status, row.container_id.as_deref())
        else {
            return false;
        };
        let Ok(engine) = self
            .service
            .fleet()
            .engine_of(row.server_id.as_deref())
            .await
        else {
            return false;
        };
        let Ok(usage) = engine.usage(container).await else {
            return false;
        };
        self.service.inner.histories.record(
            sandbox_id,
            TimedSample {
                at_ms: now_ms(),
                cpu_ns: usage.cpu_ns,
                memory_bytes: usage.memory_bytes,
                pids: usage.pids,
            },
        );
        true
    }
}
