//! Hibernation: a sandbox paused with its memory on disk (`sandbox.pause {memory:
//! "disk"}`), and the resume that restores it. Its container's every process is saved by
//! the engine's runtime (gVisor's checkpoint) on the host that runs it, and the container
//! stops: the host gets its memory back, and the sandbox outlives a restart of sandboxd,
//! of the engine or of the host. A resume starts the container from the checkpoint: the
//! same processes with the same pids go on where they were.
//!
//! Order, as for a pause in memory: the row moves first (a row paused on disk is what
//! makes a later call restore), then the container; a checkpoint the engine refuses
//! moves the row back, and the sandbox runs on as it was. A restore that fails leaves
//! the checkpoint and the row paused on disk, to be retried. A row paused on disk whose
//! container still runs (sandboxd stopped between the two) is resumed by the restore as
//! it is.
//!
//! The agent's connection is a host socket, which a checkpoint cannot hold: sandboxd
//! stops listening for the agent before the checkpoint (the agent's connection ends and
//! its attempts to connect again are refused, holding nothing open; reconcile does not
//! listen again meanwhile, `Freezes::hold_agent`) and listens again before the restore,
//! so the restored agent connects within its retry interval. Its
//! lease, given before the checkpoint, runs to the end of the paused timeout; it gets a
//! fresh one once it is back.

use std::time::Duration;

use sandboxd_contracts::EngineError;
use sandboxd_core::error::Invalid;
use sandboxd_core::model::{Principal, Sandbox, SandboxStatus};
use serde_json::json;
use tracing::{debug, info, warn};

use super::pause::Why;
use crate::duties::leases::lease_of;
use crate::{Resource, Service, ServiceError, now_ms};

/// The name of a hibernated sandbox's checkpoint (one per container).
pub(crate) const HIBERNATION: &str = "hibernation";

/// How long a resume waits for the restored agent to connect before the call goes on
/// (the engine's exec serves it meanwhile).
const AGENT_BACK: Duration = Duration::from_secs(3);

impl Service {
    /// Pauses a running or paused sandbox with its memory on disk (see the module's
    /// notes); one hibernated already is answered as it is.
    pub(crate) async fn hibernate(
        &self,
        sandbox: &Sandbox,
        caller: Option<&Principal>,
        why: Why,
    ) -> Result<Sandbox, ServiceError> {
        let id = sandbox.sandbox_id.as_str();
        let _held = self.inner.freezes.hold(id).await;
        let row = self.row_now(id).await?;
        if row.status == SandboxStatus::Paused && row.hibernated_bytes.is_some() {
            return Ok(row);
        }
        self.inner.freezes.busy(id)?;
        may_hibernate(&row)?;
        let container = row.kept_container()?.to_owned();
        let engine = self.fleet().engine_of(row.server_id.as_deref()).await?;
        checkpoints_on(&engine).await?;
        let in_memory = row.status == SandboxStatus::Paused;
        if in_memory {
            self.thaw_for_checkpoint(&engine, id, &container).await?;
        }
        let refreeze = async {
            if in_memory {
                let _ = engine.pause_container(&container).await;
            }
        };
        // A sandbox paused in memory was given its lease to the end of its paused
        // timeout when it was paused, and that end does not move.
        if !in_memory && let Err(error) = self.lease_for_pause(&row).await {
            return Err(error);
        }
        // Admitted with the most its checkpoint can hold, its memory limit (asking the
        // engine what it uses takes a second under gVisor); the checkpoint's own size
        // replaces it once written.
        let bytes = row.memory_mb.saturating_mul(1024 * 1024);
        let quotas = &self.inner.options.quotas;
        let hibernated = match self
            .store()
            .hibernate(id, now_ms(), bytes, Some(quotas))
            .await
        {
            Ok(Some(hibernated)) => hibernated,
            Ok(None) => {
                refreeze.await;
                return Err(self.changed_state(id).await);
            }
            Err(error) => {
                refreeze.await;
                return Err(error.into());
            }
        };
        // One of an earlier hibernation left behind (a removal that failed) would make the
        // engine refuse this one's name.
        let _ = engine.remove_checkpoint(&container, HIBERNATION).await;
        let agent_held = self.inner.freezes.hold_agent(id);
        self.agents().stop_listening(id);
        let saved = match engine.checkpoint_container(&container, HIBERNATION).await {
            // The engine took too long to record the stop of a container the runtime had
            // saved and stopped: the checkpoint stands, and so does the row.
            Err(error @ EngineError::Timeout { .. })
                if !engine.is_running(&container).await.unwrap_or(true) =>
            {
                warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "the engine failed a checkpoint after stopping the container; the sandbox stays paused on disk");
                Ok(())
            }
            saved => saved,
        };
        drop(agent_held);
        if let Err(error) = saved {
            warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "the engine could not save the sandbox's memory; it runs on");
            self.agents().restore(id);
            let back = if in_memory {
                refreeze.await;
                self.store().unhibernate(id).await?
            } else {
                self.store().resume(id, now_ms(), None).await?
            };
            if back.is_none() {
                // Killed meanwhile: that is its state.
                return Err(self.changed_state(id).await);
            }
            return Err(match error {
                EngineError::NotFound { .. } => self.gone(id).await,
                other => ServiceError::Conflict(format!(
                    "the sandbox's memory could not be saved ({}); it runs on as it was",
                    reason_of(&other)
                )),
            });
        }
        let (hibernated, bytes) = match engine.checkpoint_bytes(&container, HIBERNATION).await {
            Ok(written) => {
                let written = i64::try_from(written).unwrap_or(i64::MAX);
                match self.store().set_hibernated_bytes(id, written).await {
                    Ok(Some(measured)) => (measured, written),
                    Ok(None) => (hibernated, bytes),
                    Err(error) => {
                        warn!(sandbox_id = %id, %error, "cannot keep the size of a sandbox's checkpoint");
                        (hibernated, bytes)
                    }
                }
            }
            Err(error) => {
                debug!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "the checkpoint's size is not known here; its memory limit stands for it");
                (hibernated, bytes)
            }
        };
        info!(sandbox_id = %id, reason = why.as_str(), bytes, "sandbox hibernated");
        self.access()
            .record(
                &hibernated.organization_id,
                caller,
                "sandbox.pause",
                Resource::sandbox(&hibernated),
                json!({"reason": why.as_str(), "memory": "disk", "bytes": bytes}),
            )
            .await;
        Ok(hibernated)
    }

    /// Thaws a sandbox paused in memory so that its memory can be saved; a container
    /// that stopped meanwhile has nothing left to save.
    async fn thaw_for_checkpoint(
        &self,
        engine: &std::sync::Arc<dyn sandboxd_contracts::Engine>,
        id: &str,
        container: &str,
    ) -> Result<(), ServiceError> {
        match engine.unpause_container(container).await {
            Ok(()) => Ok(()),
            Err(EngineError::NotRunning) => Err(ServiceError::Conflict(
                "the sandbox's processes ended while it was paused (its engine restarted): \
                 there is no memory to save"
                    .into(),
            )),
            Err(EngineError::NotFound { .. }) => Err(self.gone(id).await),
            Err(error) => Err(error.into()),
        }
    }

    /// Starts a hibernated sandbox's container from its checkpoint, its row already
    /// running; on failure the row is paused on disk again and the checkpoint kept.
    pub(crate) async fn restore_hibernated(
        &self,
        engine: &std::sync::Arc<dyn sandboxd_contracts::Engine>,
        row: &Sandbox,
        container: &str,
    ) -> Result<(), ServiceError> {
        let id = row.sandbox_id.as_str();
        self.agents().restore(id);
        if let Err(error) = engine.restore_container(container, HIBERNATION).await {
            warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "the engine could not restore the sandbox's memory; it stays paused on disk");
            self.agents().stop_listening(id);
            if let EngineError::NotFound { .. } = error {
                return Err(self.gone(id).await);
            }
            let bytes = row.hibernated_bytes.unwrap_or(0);
            if self
                .store()
                .hibernate(id, now_ms(), bytes, None)
                .await?
                .is_none()
            {
                // Killed meanwhile: that is its state.
                return Err(self.changed_state(id).await);
            }
            return Err(ServiceError::Conflict(format!(
                "the sandbox's memory could not be restored ({}); it stays paused on disk: retry",
                reason_of(&error)
            )));
        }
        if self.agents().wait_connected(id, AGENT_BACK).await.is_some()
            && let Some(channel) = self.agent_channel(id)
            && let Ok(Some(now)) = self.store().sandbox(id).await
        {
            let lease = lease_of(now.expires_at, now_ms(), self.lease_grace());
            if let Err(error) = channel.lease(lease).await {
                warn!(sandbox_id = %id, %error, "the restored agent did not take its lease");
            }
        }
        if let Err(error) = engine.remove_checkpoint(container, HIBERNATION).await {
            warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "cannot remove a restored sandbox's checkpoint");
        }
        Ok(())
    }
}

impl Service {
    /// The answer for a container found gone during a save or a restore: the sandbox's
    /// state when a kill removed it meanwhile, else the container was lost.
    async fn gone(&self, id: &str) -> ServiceError {
        match self.store().sandbox(id).await {
            Ok(Some(row)) if row.status == SandboxStatus::Killed => {
                sandboxd_core::model::NotRunning(SandboxStatus::Killed).into()
            }
            _ => self.container_lost(id).await,
        }
    }
}

/// Refused unless the engine's checkpoint API is on.
pub(super) async fn checkpoints_on(
    engine: &std::sync::Arc<dyn sandboxd_contracts::Engine>,
) -> Result<(), ServiceError> {
    if engine.checkpoints().await {
        return Ok(());
    }
    Err(ServiceError::Conflict(
        "this server's engine cannot save a sandbox's memory: its checkpoint API is off (the \
         engine's experimental setting, which scripts/gvisor.sh turns on)"
            .into(),
    ))
}

/// Refused (400 naming `memory`) unless the sandbox is of the `gvisor` tier, whose
/// runtime saves its processes; `asked` is what asked for that.
pub(super) fn of_gvisor_tier(row: &Sandbox, asked: &str) -> Result<(), ServiceError> {
    let tier = sandboxd_core::plan::isolation_tier(row.runtime.as_deref());
    if tier == "gvisor" {
        return Ok(());
    }
    Err(Invalid::one(
        "memory",
        format!(
            "{asked} needs a sandbox of the gvisor tier (its runtime saves its processes); \
             this one is of the {tier} tier"
        ),
    )
    .into())
}

/// Only a sandbox of the `gvisor` tier on the local engine can be hibernated: its
/// runtime saves its processes, and sandboxd holds its agent's socket.
fn may_hibernate(row: &Sandbox) -> Result<(), ServiceError> {
    of_gvisor_tier(row, "\"disk\"")?;
    if row.server_id.is_some() {
        return Err(ServiceError::Conflict(
            "a sandbox on a remote server cannot be hibernated yet; pause it in memory".into(),
        ));
    }
    Ok(())
}

/// What the caller is told of an engine's refusal: a known cause, never the engine's
/// text (it can name the host's paths), which goes to the log.
pub(super) fn reason_of(error: &EngineError) -> &'static str {
    let text = sandboxd_core::error::chain(error).to_lowercase();
    if text.contains("no space left") {
        "the host's disk is full"
    } else if matches!(error, EngineError::Timeout { .. }) {
        "the engine took too long"
    } else if matches!(error, EngineError::Unreachable(_)) {
        "the engine cannot be reached"
    } else {
        "the runtime could not save or restore one of its processes or files; the server's log says which"
    }
}
