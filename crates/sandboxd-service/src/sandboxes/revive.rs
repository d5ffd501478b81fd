//! A sandbox's container that stops while its row says `running` (its main process was
//! killed from the host, by the OOM killer, or the engine restarted) is noticed from the
//! engine's events at once and started again, files kept; the agent reconnects. A
//! container that keeps dying is given up on: its row becomes `error`.
//!
//! The deaths come from `sandboxd-docker`'s `events.rs`, followed by the server's
//! `loops.rs`. A restart is counted against a budget and recorded (`sandbox.restart`);
//! the sandbox's processes are lost. Reconcile calls it for every stopped container of a
//! running sandbox, and the server runs a reconcile pass of an engine as soon as its
//! event stream is back. It decides under the sandbox's pause lock, so a pause to disk
//! or its resume (which stop and start the container themselves) is done first.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sandboxd_contracts::ContainerDeath;
use sandboxd_core::model::SandboxStatus;
use tracing::warn;

use super::Sandboxes;
use crate::ServiceError;

/// At most this many restarts of one sandbox within [`RESTART_WINDOW`].
const MAX_RESTARTS: usize = 3;
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// What became of a container's death.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revival {
    /// Not a running sandbox's container (killed on purpose, replaced, or unknown), or
    /// running again already.
    Ignored,
    Restarted,
    /// Restarted too often, or the engine could not start it: the row is `error`.
    GaveUp,
}

/// The restarts of each sandbox within the window (pure bookkeeping).
#[derive(Debug, Default)]
pub(crate) struct RestartBudget {
    recent: HashMap<String, Vec<Instant>>,
}

impl RestartBudget {
    /// Records a restart of `sandbox_id` at `now` if the budget allows it.
    pub(crate) fn take(&mut self, sandbox_id: &str, now: Instant) -> bool {
        self.recent.retain(|_, times| {
            times
                .iter()
                .any(|t| now.duration_since(*t) < RESTART_WINDOW)
        });
        let times = self.recent.entry(sandbox_id.to_owned()).or_default();
        times.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
        if times.len() >= MAX_RESTARTS {
            return false;
        }
        times.push(now);
        true
    }
}

impl Sandboxes {
    /// Acts on a container's death reported by the engine.
    pub async fn revive(&self, death: &ContainerDeath) -> Result<Revival, ServiceError> {
        // Decided under the sandbox's pause lock: a pause to disk stops the container
        // on purpose, and its resume starts it from the checkpoint with the row already
        // running; read before that is done, the row would have this start it afresh.
        let _held = self.service.inner.freezes.hold(&death.sandbox_id).await;
        let Some(row) = self.service.store().sandbox(&death.sandbox_id).await? else {
            return Ok(Revival::Ignored);
        };
        let ours = row.container_id.as_deref() == Some(death.container_id.as_str());
        if row.status != SandboxStatus::Running || !ours {
            return Ok(Revival::Ignored);
        }
        let engine = self
            .service
            .fleet()
            .engine_of(row.server_id.as_deref())
            .await?;
        // A deliberate restart (a command whose kill did not take) starts it itself.
        if engine.is_running(&death.container_id).await? {
            return Ok(Revival::Ignored);
        }
        let allowed = self
            .service
            .inner
            .restarts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(&death.sandbox_id, Instant::now());
        if !allowed {
            warn!(sandbox_id = %death.sandbox_id, "the sandbox's container keeps stopping; the sandbox is in error");
            self.service
                .store()
                .set_status(&death.sandbox_id, SandboxStatus::Error)
                .await?;
            return Ok(Revival::GaveUp);
        }
        match self
            .service
            .restart_stopped(&engine, &death.sandbox_id, &death.container_id)
            .await
        {
            Ok(()) => {
                // Its files are kept; what ran in it is gone, and the record says so.
                self.service
                    .access()
                    .record(
                        &row.organization_id,
                        None,
                        "sandbox.restart",
                        crate::Resource::sandbox(&row),
                        serde_json::json!({
                            "reason": "its container had stopped",
                            "processesLost": true,
                        }),
                    )
                    .await;
                Ok(Revival::Restarted)
            }
            Err(ServiceError::NotRunning(_)) => Ok(Revival::GaveUp),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_is_restarted_at_most_three_times_a_minute() {
        let mut budget = RestartBudget::default();
        let start = Instant::now();
        for i in 0..3 {
            assert!(budget.take("a", start + Duration::from_secs(i)));
        }
        assert!(!budget.take("a", start + Duration::from_secs(10)));
        // Another sandbox has its own budget.
        assert!(budget.take("b", start + Duration::from_secs(10)));
        // A minute after the first two, two more are allowed.
        assert!(budget.take("a", start + Duration::from_secs(61)));
        assert!(budget.take("a", start + Duration::from_secs(61)));
        assert!(!budget.take("a", start + Duration::from_secs(61)));
    }
}
