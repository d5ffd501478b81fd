//! Snapshots with memory (`sandbox.snapshot {memory: true}`, and `sandbox.fork {memory:
//! true}` through one) and the sandboxes started from them: the source's every process,
//! saved by its runtime (gVisor's checkpoint) at the instant of the snapshot's image,
//! continues in each sandbox made from it.
//!
//! The save: the agent lets its connection go (a checkpoint cannot hold a host socket),
//! the sandbox is frozen, its image made and its processes saved with the container left
//! running, then thawed; it was frozen for the image and the save only. The memory is
//! moved out of the container on the engine's host and kept with the snapshot, removed
//! with it, and counted against the organization's snapshot bytes.
//!
//! Identity: the saved agent holds its source's agent key. The source gets a new one as
//! soon as its agent is back, so the saved key works for no sandbox that runs. A sandbox
//! started from the snapshot takes that key from its restored agent once, and gives it
//! its own at once (`AgentHost::rekey`): no fork holds a key that works for its source or
//! a sibling, and each has only its own socket to reach.

use std::sync::Arc;
use std::time::Duration;

use sandboxd_contracts::{Commit, Engine, EngineError};
use sandboxd_core::error::Invalid;
use sandboxd_core::model::{Sandbox, SandboxStatus};
use sandboxd_core::plan;
use sandboxd_core::snapshots::{KeptMemory, MEMORY_CHECKPOINT, Snapshot};
use tracing::{info, warn};

use super::Sandboxes;
use super::hibernate::{checkpoints_on, of_gvisor_tier, reason_of};
use crate::{Service, ServiceError};

/// How long the agent is given to let its connection go before its sandbox is frozen.
const AGENT_LETS_GO: Duration = Duration::from_millis(50);
/// How long the agent of a source or of a restored sandbox is waited for.
const AGENT_BACK: Duration = Duration::from_secs(3);

/// Whether a sandbox's memory can be kept with a snapshot of it: a sandbox of the
/// `gvisor` tier on the local engine, with no volume, its processes in memory.
pub(super) fn may_keep_memory(row: &Sandbox) -> Result<(), ServiceError> {
    of_gvisor_tier(row, "memory: true")?;
    if row.server_id.is_some() {
        return Err(ServiceError::Conflict(
            "the memory of a sandbox on a remote server cannot be kept yet; snapshot its files"
                .into(),
        ));
    }
    if !row.volumes.is_empty() {
        return Err(Invalid::one(
            "memory",
            "a sandbox with volumes cannot be saved with its processes (their files live \
             outside it); snapshot its files",
        )
        .into());
    }
    if row.status == SandboxStatus::Paused && row.hibernated_bytes.is_some() {
        return Err(ServiceError::Conflict(
            "the sandbox is paused to disk: resume it first".into(),
        ));
    }
    Ok(())
}

impl Service {
    /// Makes the snapshot's image and saves the sandbox's processes at the same instant
    /// (see the module's notes); returns the image's bytes and the memory kept. The
    /// sandbox is left as it was, running or paused; on failure no image or memory stays.
    pub(crate) async fn commit_with_memory(
        &self,
        engine: &Arc<dyn Engine>,
        row: &Sandbox,
        container: &str,
        commit: &Commit,
    ) -> Result<(i64, KeptMemory), ServiceError> {
        checkpoints_on(engine).await?;
        let id = row.sandbox_id.as_str();
        let agent_key = if self.agents().enabled() {
            self.agents()
                .key_of(id)
                .map_err(|e| ServiceError::Unavailable(format!("the agent's key: {e}")))?
        } else {
            String::new()
        };
        let was_paused = row.status == SandboxStatus::Paused;
        if was_paused {
            engine.unpause_container(container).await?;
        }
        // An earlier save's leftover would make the engine refuse this one's name.
        let _ = engine.remove_checkpoint(container, MEMORY_CHECKPOINT).await;
        let agent_held = self.inner.freezes.hold_agent(id);
        self.agents().stop_listening(id);
        tokio::time::sleep(AGENT_LETS_GO).await;
        let saved = async {
            engine.pause_container(container).await?;
            let size = engine.commit_container(container, commit).await?;
            engine
                .checkpoint_running(container, MEMORY_CHECKPOINT)
                .await?;
            Ok::<_, EngineError>(size)
        }
        .await;
        let _ = engine.unpause_container(container).await;
        drop(agent_held);
        self.agents().restore(id);
        let kept = match saved {
            Ok(size) => engine
                .keep_memory(container, MEMORY_CHECKPOINT, &commit.snapshot_id)
                .await
                .map(|bytes| (size, bytes)),
            Err(error) => Err(error),
        };
        let _ = engine.remove_checkpoint(container, MEMORY_CHECKPOINT).await;
        let (size, bytes) = match kept {
            Ok(kept) => kept,
            Err(error) => {
                warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "the sandbox's memory could not be kept");
                if let Err(cleanup) = engine.remove_image(&commit.image).await {
                    warn!(image = %commit.image, error = %cleanup, "could not remove the image of a snapshot that was not kept");
                }
                if was_paused {
                    let _ = engine.pause_container(container).await;
                }
                return Err(match error {
                    error @ EngineError::NotFound { .. } => error.into(),
                    // sandboxd's own words (what the host lacks), never a path.
                    EngineError::Rejected {
                        status: 501,
                        message,
                    } => ServiceError::Conflict(message),
                    other => ServiceError::Conflict(format!(
                        "the sandbox's memory could not be saved ({}); it runs on as it was",
                        reason_of(&other)
                    )),
                });
            }
        };
        // The key the saved agent holds works for no running sandbox once the source has
        // its own again.
        if !agent_key.is_empty() {
            self.give_own_key(id).await;
        }
        if was_paused && let Err(error) = engine.pause_container(container).await {
            warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "could not pause the sandbox again after saving its memory");
        }
        info!(sandbox_id = %id, bytes, "sandbox's memory kept");
        Ok((
            size,
            KeptMemory {
                bytes: i64::try_from(bytes).unwrap_or(i64::MAX),
                agent_key,
            },
        ))
    }

    /// Waits for the sandbox's agent and gives it a key of its own; one that does not
    /// take it keeps the key it has (said in the log).
    async fn give_own_key(&self, id: &str) {
        if self.agents().wait_connected(id, AGENT_BACK).await.is_none() {
            warn!(sandbox_id = %id, "the sandbox's agent did not come back to take a new key");
            return;
        }
        if let Err(error) = self.agents().rekey(id).await {
            warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "the sandbox's agent did not take a new key");
        }
    }
}

impl Sandboxes {
    /// Creates the container of a sandbox made from a snapshot with memory and starts it
    /// from that memory: its processes go on where the snapshot saved them. Its agent is
    /// taken with the saved key once, then given its own, and a lease. Returns the
    /// container and the user, as `start_container`.
    pub(super) async fn start_restored(
        &self,
        engine: &Arc<dyn Engine>,
        row: &Sandbox,
        snapshot: &Snapshot,
        memory: &KeptMemory,
    ) -> Result<(String, Option<String>), ServiceError> {
        let service = &self.service;
        let id = row.sandbox_id.as_str();
        let agent = if service.agents().enabled() && !memory.agent_key.is_empty() {
            match service.agents().listen_restored(id, &memory.agent_key) {
                Ok(agent) => agent,
                Err(error) => {
                    warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "sandbox runs without its agent");
                    None
                }
            }
        } else {
            None
        };
        let plan = plan::plan_container(row, None, service.instance_id(), agent.as_ref());
        let container_id = match engine.create_container(&plan).await {
            Ok(container_id) => container_id,
            Err(error) => {
                service.fleet().release_agent(id, None);
                return Err(error.into());
            }
        };
        let started = async {
            if let Err(error) = engine
                .place_memory(&snapshot.snapshot_id, &container_id, MEMORY_CHECKPOINT)
                .await
            {
                warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "cannot give a container the snapshot's memory");
                return Err(match error {
                    EngineError::Rejected {
                        status: 501,
                        message,
                    } => ServiceError::Conflict(message),
                    _ => ServiceError::Conflict(
                        "the snapshot's memory is gone from its engine's host".into(),
                    ),
                });
            }
            if let Err(error) = engine
                .restore_container(&container_id, MEMORY_CHECKPOINT)
                .await
            {
                warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "the engine could not start a sandbox from a snapshot's memory");
                return Err(ServiceError::Conflict(format!(
                    "the snapshot's memory could not be restored ({})",
                    reason_of(&error)
                )));
            }
            if let Err(error) = engine
                .remove_checkpoint(&container_id, MEMORY_CHECKPOINT)
                .await
            {
                warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "cannot remove a restored sandbox's checkpoint");
            }
            Ok::<_, ServiceError>(())
        }
        .await;
        if let Err(error) = started {
            service.fleet().release_agent(id, None);
            if let Err(cleanup) = engine.remove_container(&container_id).await {
                warn!(%container_id, error = %cleanup, "could not remove the container of a failed sandbox");
            }
            return Err(error);
        }
        let hello = match agent {
            Some(_) => service.agents().wait_connected(id, AGENT_BACK).await,
            None => None,
        };
        if hello.is_some() {
            if let Err(error) = service.agents().rekey(id).await {
                warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "a restored agent did not take its own key; it keeps the saved one, which works for no other sandbox");
            }
            // The saved lease is its source's: this one lives by its own.
            let lease = Duration::from_millis(u64::try_from(row.timeout_ms).unwrap_or(0))
                + service.duties().lease_grace();
            if let Some(channel) = service.agent_channel(id)
                && let Err(error) = channel.lease(lease).await
            {
                warn!(sandbox_id = %id, %error, "the restored agent did not take its lease");
            }
        } else if agent.is_some() {
            warn!(sandbox_id = %id, "the restored agent did not connect; the engine's exec serves this sandbox");
        }
        let user = snapshot
            .user
            .clone()
            .or_else(|| hello.map(|hello| format!("{}:{}", hello.uid, hello.gid)));
        Ok((container_id, user))
    }
}
