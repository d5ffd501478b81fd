//! `sandbox.pause` and `sandbox.resume`; the reaper's pause at the idle timeout of a
//! sandbox made with `autoPause`; and the resume that every call reaching inside a
//! paused sandbox does first ([`Service::wake`]).
//!
//! Order: the row moves first, then the container. A paused row is what makes any
//! later call resume, so a container is never frozen under a row that says `running`
//! (reconcile thaws one found so, a pause cut short). Pauses and resumes of one sandbox
//! never overlap in this process ([`Freezes`]).
//!
//! The agent's dead-man's switch counts time while the sandbox is frozen, so before
//! the freeze the agent is given a lease to the end of the paused timeout (plus the
//! grace): a sandbox resumed before then does not end itself on waking.
//!
//! `Freezes` is 64 striped mutexes and the set of sandboxes whose snapshot is under way,
//! which are neither paused, resumed nor thawed meanwhile. A row moved before the engine
//! refused is moved back. `pause_idle` is the reaper's.

use std::time::Duration;

use sandboxd_contracts::EngineError;
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::model::{NotRunning, PauseMemory, Principal, Sandbox, SandboxStatus};
use serde_json::json;
use tokio::sync::{Mutex, MutexGuard};
use tracing::{info, warn};

use super::Sandboxes;
use crate::{Resource, Service, ServiceError, now_ms};

/// How long a resume waits for the agent of a sandbox that lost its connection while
/// paused (sandboxd restarted meanwhile) before the call goes on without it.
const AGENT_RETURN: Duration = Duration::from_secs(3);

/// How long a pause waits for the agent to take its lease.
const LEASE_ANSWER: Duration = Duration::from_secs(5);

/// Locks that keep the pauses and resumes of one sandbox apart: a fixed set, one per
/// stripe of sandbox ids, so they cost nothing per sandbox. And the sandboxes whose
/// snapshot is being taken (the engine freezes and thaws them itself meanwhile): those
/// are neither paused, resumed nor thawed until it is done, without holding a stripe
/// (a commit can take minutes; the sandboxes sharing its stripe go on).
#[derive(Debug)]
pub(crate) struct Freezes {
    stripes: Vec<Mutex<()>>,
    snapshotting: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Sandboxes whose agent is not listened for while their memory is saved: reconcile
    /// does not listen for them again meanwhile.
    agent_held: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Default for Freezes {
    fn default() -> Self {
        Self {
            stripes: (0..64).map(|_| Mutex::new(())).collect(),
            snapshotting: Default::default(),
            agent_held: Default::default(),
        }
    }
}

/// A sandbox's agent not listened for while its memory is saved; listened for as usual
/// again when this goes.
pub(crate) struct AgentHeld<'f> {
    freezes: &'f Freezes,
    sandbox_id: String,
}

impl Drop for AgentHeld<'_> {
    fn drop(&mut self) {
        self.freezes
            .agent_held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.sandbox_id);
    }
}

/// A snapshot under way; its sandbox is released when this goes.
pub(crate) struct Snapshotting<'f> {
    freezes: &'f Freezes,
    sandbox_id: String,
}

impl Drop for Snapshotting<'_> {
    fn drop(&mut self) {
        self.freezes
            .snapshotting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.sandbox_id);
    }
}

impl Freezes {
    /// Marks a snapshot of `sandbox_id` as under way (call it holding the sandbox's
    /// stripe); `None` when one is already.
    pub(crate) fn begin_snapshot(&self, sandbox_id: &str) -> Option<Snapshotting<'_>> {
        let fresh = self
            .snapshotting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sandbox_id.to_owned());
        fresh.then(|| Snapshotting {
            freezes: self,
            sandbox_id: sandbox_id.to_owned(),
        })
    }

    /// Marks the agent of `sandbox_id` as not to be listened for until the guard goes.
    pub(crate) fn hold_agent(&self, sandbox_id: &str) -> AgentHeld<'_> {
        self.agent_held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sandbox_id.to_owned());
        AgentHeld {
            freezes: self,
            sandbox_id: sandbox_id.to_owned(),
        }
    }

    /// Whether the agent of `sandbox_id` is held (its memory is being saved).
    pub(crate) fn agent_held(&self, sandbox_id: &str) -> bool {
        self.agent_held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(sandbox_id)
    }

    /// Whether a snapshot of `sandbox_id` is under way.
    fn snapshotting(&self, sandbox_id: &str) -> bool {
        self.snapshotting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(sandbox_id)
    }

    /// The refusal of a pause or resume while a snapshot is taken.
    pub(super) fn busy(&self, sandbox_id: &str) -> Result<(), ServiceError> {
        if self.snapshotting(sandbox_id) {
            return Err(ServiceError::Conflict(
                "a snapshot of this sandbox is being taken; retry when it is done".into(),
            ));
        }
        Ok(())
    }

    pub(crate) async fn hold(&self, sandbox_id: &str) -> MutexGuard<'_, ()> {
        let hash = sandbox_id.bytes().fold(0usize, |h, b| {
            h.wrapping_mul(31).wrapping_add(usize::from(b))
        });
        self.stripes[hash % self.stripes.len()].lock().await
    }
}

/// Why a sandbox was paused or resumed, as its audit entry says.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Why {
    /// A caller asked (`sandbox.pause` / `sandbox.resume`).
    Asked,
    /// Its idle timeout passed and it was made with `autoPause`.
    Idle,
    /// A call reached inside it.
    Call,
    /// It stayed paused in memory longer than `[pause] to_disk_after_secs`.
    LongPaused,
}

impl Why {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Asked => "asked",
            Self::Idle => "idle timeout",
            Self::Call => "a call reached it",
            Self::LongPaused => "paused in memory longer than to_disk_after",
        }
    }
}

impl Sandboxes {
    /// Pauses a sandbox of the caller's with its memory where `memory` says: kept in
    /// memory (frozen), or saved to disk (hibernated, `hibernate.rs`). One paused there
    /// already is answered as it is; one paused in memory is moved to disk when asked.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn pause_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        memory: PauseMemory,
    ) -> Result<Sandbox, ServiceError> {
        let sandbox = self.usable(caller, sandbox_id).await?;
        match memory {
            PauseMemory::Ram => self.service.pause(&sandbox, Some(caller), Why::Asked).await,
            PauseMemory::Disk => {
                self.service
                    .hibernate(&sandbox, Some(caller), Why::Asked)
                    .await
            }
        }
    }

    /// A sandbox the caller may use.
    async fn usable(&self, caller: &Principal, sandbox_id: &str) -> Result<Sandbox, ServiceError> {
        self.service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await
    }

    /// Pauses a running sandbox of the caller's keeping its files alone (E2B's
    /// `keep_memory=False`): its processes end, its memory is freed, and its resume
    /// starts it afresh from its files.
    pub async fn pause_files_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<Sandbox, ServiceError> {
        let sandbox = self.usable(caller, sandbox_id).await?;
        self.service
            .pause_keeping(&sandbox, Some(caller), Why::Asked, Keeps::Files)
            .await
    }

    /// Resumes a paused sandbox of the caller's; one running is answered as it is.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn resume_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<Sandbox, ServiceError> {
        let sandbox = self.usable(caller, sandbox_id).await?;
        self.service
            .resume(&sandbox, Some(caller), Why::Asked)
            .await
    }

    /// The reaper's pause of a sandbox whose idle timeout passed, its memory where its
    /// `autoPause` said.
    pub(crate) async fn pause_idle(&self, sandbox: &Sandbox) -> Result<Sandbox, ServiceError> {
        match sandbox.auto_pause {
            // Placed on a remote server, where it cannot be hibernated yet: in memory.
            Some(PauseMemory::Disk) if sandbox.server_id.is_none() => {
                match self.service.hibernate(sandbox, None, Why::Idle).await {
                    Ok(paused) => Ok(paused),
                    // Memory that cannot go to disk now (no checkpoints on the engine,
                    // the quota, the runtime) is kept in memory: the sandbox is paused
                    // either way.
                    Err(error @ (ServiceError::NotRunning(_) | ServiceError::NotFound(_))) => {
                        Err(error)
                    }
                    Err(error) => {
                        warn!(sandbox_id = %sandbox.sandbox_id, error = %sandboxd_core::error::chain(&error), "an idle sandbox could not be paused to disk; it is paused in memory");
                        self.service.pause(sandbox, None, Why::Idle).await
                    }
                }
            }
            _ => self.service.pause(sandbox, None, Why::Idle).await,
        }
    }

    /// The pause of a sandbox whose end came (E2B's `on_timeout: pause` seen before the
    /// reaper's pass): as the reaper pauses it.
    pub async fn pause_at_end(&self, sandbox: &Sandbox) -> Result<Sandbox, ServiceError> {
        self.pause_idle(sandbox).await
    }

    /// The reaper's move to disk of a sandbox paused in memory for too long.
    pub(crate) async fn hibernate_long_paused(
        &self,
        sandbox: &Sandbox,
    ) -> Result<Sandbox, ServiceError> {
        self.service.hibernate(sandbox, None, Why::LongPaused).await
    }
}

/// What a pause keeps of a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keeps {
    /// Its processes, frozen with their memory.
    Memory,
    /// Its files alone: its processes end, and its resume starts it afresh.
    Files,
}

impl Service {
    /// The container of a sandbox that a call is about to reach inside: a running
    /// sandbox's, or a paused one's once it is resumed.
    pub(crate) async fn wake<'s>(&self, sandbox: &'s Sandbox) -> Result<&'s str, ServiceError> {
        if sandbox.status == SandboxStatus::Paused {
            self.resume(sandbox, None, Why::Call).await?;
            return Ok(sandbox.kept_container()?);
        }
        Ok(sandbox.running_container()?)
    }

    /// The sandbox's row as the store has it now (read under its freeze lock, so the
    /// status a pause or resume decides on is not stale).
    pub(super) async fn row_now(&self, id: &str) -> Result<Sandbox, ServiceError> {
        self.store()
            .sandbox(id)
            .await?
            .ok_or(ServiceError::NotFound("sandbox"))
    }

    /// Pauses a running sandbox (see the module's notes).
    pub(crate) async fn pause(
        &self,
        sandbox: &Sandbox,
        caller: Option<&Principal>,
        why: Why,
    ) -> Result<Sandbox, ServiceError> {
        self.pause_keeping(sandbox, caller, why, Keeps::Memory)
            .await
    }

    /// Pauses a running sandbox keeping `keeps`: frozen with its memory, or its
    /// processes ended and its files kept (its resume starts it afresh).
    pub(crate) async fn pause_keeping(
        &self,
        sandbox: &Sandbox,
        caller: Option<&Principal>,
        why: Why,
        keeps: Keeps,
    ) -> Result<Sandbox, ServiceError> {
        let id = sandbox.sandbox_id.as_str();
        let _held = self.inner.freezes.hold(id).await;
        let row = self.row_now(id).await?;
        if row.status == SandboxStatus::Paused {
            return Ok(row);
        }
        self.inner.freezes.busy(id)?;
        let container = row.running_container()?.to_owned();
        let engine = self.fleet().engine_of(row.server_id.as_deref()).await?;
        if keeps == Keeps::Memory {
            self.lease_for_pause(&row).await?;
        }
        let Some(paused) = self.store().pause(id, now_ms()).await? else {
            return Err(self.changed_state(id).await);
        };
        let stopped = match keeps {
            Keeps::Memory => engine.pause_container(&container).await,
            // Its processes end; the container's files stay, and the revival of a
            // dead container leaves a paused sandbox's alone.
            Keeps::Files => engine.kill_container(&container).await,
        };
        if let Err(error) = stopped {
            warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "the engine could not pause the sandbox; it runs on");
            self.store().resume(id, now_ms(), None).await?;
            return Err(match error {
                EngineError::NotFound { .. } => self.container_lost(id).await,
                other => other.into(),
            });
        }
        let memory = keeps == Keeps::Memory;
        info!(sandbox_id = %id, reason = why.as_str(), memory, "sandbox paused");
        self.access()
            .record(
                &paused.organization_id,
                caller,
                "sandbox.pause",
                Resource::sandbox(&paused),
                json!({"reason": why.as_str(), "memoryKept": memory}),
            )
            .await;
        Ok(paused)
    }

    /// Resumes a paused sandbox, within the organization's CPU quota (see the module's
    /// notes). A container that stopped while paused (the engine restarted) is started
    /// again: its files are kept, its processes are not.
    pub(crate) async fn resume(
        &self,
        sandbox: &Sandbox,
        caller: Option<&Principal>,
        why: Why,
    ) -> Result<Sandbox, ServiceError> {
        let id = sandbox.sandbox_id.as_str();
        let _held = self.inner.freezes.hold(id).await;
        let row = self.row_now(id).await?;
        match row.status {
            SandboxStatus::Running => return Ok(row),
            SandboxStatus::Paused => self.inner.freezes.busy(id)?,
            other => return Err(NotRunning(other).into()),
        }
        let container = row.kept_container()?.to_owned();
        let engine = self.fleet().engine_of(row.server_id.as_deref()).await?;
        let quotas = &self.inner.options.quotas;
        let Some(resumed) = self.store().resume(id, now_ms(), Some(quotas)).await? else {
            return Err(self.changed_state(id).await);
        };
        let thawed = if row.hibernated_bytes.is_some() {
            self.restore_hibernated(&engine, &row, &container).await?;
            Ok(())
        } else {
            engine.unpause_container(&container).await
        };
        let restarted = match thawed {
            Ok(()) => false,
            Err(EngineError::NotRunning) => {
                self.restart_stopped(&engine, id, &container).await?;
                true
            }
            Err(EngineError::NotFound { .. }) => return Err(self.container_lost(id).await),
            Err(error) => {
                warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "the engine could not resume the sandbox; it stays paused");
                self.store().pause(id, now_ms()).await?;
                return Err(error.into());
            }
        };
        // An agent that lost its connection while frozen (sandboxd restarted) comes
        // back now; the call that woke the sandbox waits for it a little.
        if self.agent_channel(id).is_none() && self.agents().is_listening(id) {
            self.agents().wait_connected(id, AGENT_RETURN).await;
        }
        info!(sandbox_id = %id, reason = why.as_str(), restarted, "sandbox resumed");
        self.access()
            .record(
                &resumed.organization_id,
                caller,
                "sandbox.resume",
                Resource::sandbox(&resumed),
                json!({"reason": why.as_str(), "processesLost": restarted, "fromDisk": row.hibernated_bytes.is_some()}),
            )
            .await;
        Ok(resumed)
    }

    /// Gives the sandbox's agent a lease that outlasts the pause: to the end of the
    /// paused timeout, plus the grace. A sandbox with an agent that cannot be told is
    /// not paused (it would end itself on waking).
    pub(super) async fn lease_for_pause(&self, row: &Sandbox) -> Result<(), ServiceError> {
        let id = row.sandbox_id.as_str();
        if !self.agents().is_listening(id) {
            return Ok(());
        }
        let lease = Duration::from_millis(row.paused_timeout_ms.max(0) as u64) + self.lease_grace();
        let channel = match self.agent_channel(id) {
            Some(channel) => Some(channel),
            None => self
                .agents()
                .wait_connected(id, AGENT_RETURN)
                .await
                .and_then(|_| self.agent_channel(id)),
        };
        let told = match channel {
            Some(channel) => tokio::time::timeout(LEASE_ANSWER, channel.lease(lease))
                .await
                .is_ok_and(|answer| answer.is_ok()),
            None => false,
        };
        if told {
            return Ok(());
        }
        Err(ServiceError::Unavailable(
            "the sandbox's agent is not answering, so it cannot be paused now; retry".into(),
        ))
    }

    /// Thaws the frozen container of a sandbox whose row says it runs (a pause cut
    /// short before its row was written, or the engine's own pause), unless a pause of
    /// it is under way; whether it did.
    pub(crate) async fn thaw_if_running(
        &self,
        engine: &std::sync::Arc<dyn sandboxd_contracts::Engine>,
        sandbox_id: &str,
        container_id: &str,
    ) -> bool {
        let _held = self.inner.freezes.hold(sandbox_id).await;
        // Frozen by the engine for a commit: it thaws it itself.
        if self.inner.freezes.snapshotting(sandbox_id) {
            return false;
        }
        match self.store().sandbox(sandbox_id).await {
            Ok(Some(row))
                if row.status == SandboxStatus::Running
                    && row.container_id.as_deref() == Some(container_id) => {}
            _ => return false,
        }
        match engine.unpause_container(container_id).await {
            Ok(()) => {
                warn!(%sandbox_id, "a running sandbox's container was frozen; thawed it");
                true
            }
            Err(error) => {
                warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "cannot thaw a running sandbox's frozen container");
                false
            }
        }
    }

    /// The error for a sandbox whose row left the expected state between the read and
    /// the write: its state now.
    pub(super) async fn changed_state(&self, sandbox_id: &str) -> ServiceError {
        match self.store().sandbox(sandbox_id).await {
            Ok(Some(row)) => NotRunning(row.status).into(),
            Ok(None) => ServiceError::NotFound("sandbox"),
            Err(error) => error.into(),
        }
    }
}
