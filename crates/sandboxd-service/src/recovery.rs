//! What the service does when a sandbox does not behave under an operation: a
//! timed-out command whose kill did not take, a container found stopped, an agent
//! that went away mid-operation.
//!
//! The policies are the same whichever channel ran the command. A timed-out command
//! whose kill did not take gets its container killed and started again
//! (`restart_after_failed_kill`; both adapters only report `kill_incomplete`). A
//! container found stopped is started again (`restart_stopped`) or the sandbox is marked
//! `error`. An operation cut by a concurrent kill is answered with the sandbox's state
//! (`unavailable`).

use sandboxd_core::model::{NotRunning, SandboxStatus};
use std::sync::Arc;

use sandboxd_contracts::{Engine, ExecOutcome, Reachability};
use tracing::{debug, warn};

use crate::{Service, ServiceError, Via};

/// The one policy for a timed-out command whose kill did not take (whichever path ran
/// it): the container is killed and started again, which ends every process and keeps
/// the files. Its agent starts anew, and is offered its key once no process is left.
pub(crate) async fn restart_after_failed_kill(
    engine: &Arc<dyn Engine>,
    agents: &dyn sandboxd_contracts::AgentHost,
    sandbox_id: &str,
    container: &str,
    outcome: &mut ExecOutcome,
) {
    warn!(
        container,
        "the command's kill did not end it; restarting the container"
    );
    outcome.container_killed = engine.kill_container(container).await.is_ok();
    if outcome.container_killed {
        agents.offer_again(sandbox_id).await;
        outcome.container_restarted = engine.start_container(container).await.is_ok();
    }
}

impl Service {
    /// The sandbox's container stopped under it (its main process ended): it is started
    /// again, files kept, and the agent reconnects; when the engine cannot start it, the
    /// row becomes `error` and the caller gets a precondition failure naming that state,
    /// never the engine's text.
    pub(crate) async fn restart_stopped(
        &self,
        engine: &Arc<dyn Engine>,
        sandbox_id: &str,
        container: &str,
    ) -> Result<(), ServiceError> {
        // A sandbox made before the isolation floor was raised is not started again
        // below it.
        if let Some(row) = self.store().sandbox(sandbox_id).await?
            && let Err(refused) =
                self.check_isolation(row.runtime.as_deref(), row.template.as_deref(), None)
        {
            warn!(%sandbox_id, reason = %refused, "the sandbox's container had stopped and runs below the isolation floor: not started again; the sandbox is in error");
            self.store()
                .set_status(sandbox_id, SandboxStatus::Error)
                .await?;
            return Err(ServiceError::NotRunning(NotRunning(SandboxStatus::Error)));
        }
        warn!(%sandbox_id, "the sandbox's container had stopped; starting it again");
        // Nothing of the sandbox runs: its agent, started anew, is offered its key.
        self.agents().offer_again(sandbox_id).await;
        match engine.start_container(container).await {
            Ok(()) => Ok(()),
            Err(error) => {
                warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "cannot start the stopped container; the sandbox is in error");
                self.store()
                    .set_status(sandbox_id, SandboxStatus::Error)
                    .await?;
                Err(ServiceError::NotRunning(NotRunning(SandboxStatus::Error)))
            }
        }
    }

    /// A command found the sandbox's container stopped: decided under the sandbox's pause
    /// lock (a pause to disk and its resume stop and start the container themselves), on
    /// the row as it is then. Started again only while the row still says running and
    /// the container is still stopped; otherwise the sandbox's state is the answer.
    pub(crate) async fn restart_found_stopped(
        &self,
        engine: &Arc<dyn Engine>,
        sandbox_id: &str,
        container: &str,
    ) -> Result<(), ServiceError> {
        let _held = self.inner.freezes.hold(sandbox_id).await;
        match self.store().sandbox(sandbox_id).await? {
            Some(row)
                if row.status == SandboxStatus::Running
                    && row.container_id.as_deref() == Some(container) => {}
            Some(row) => return Err(NotRunning(row.status).into()),
            None => return Err(ServiceError::NotFound("sandbox")),
        }
        if engine.is_running(container).await? {
            return Ok(());
        }
        self.restart_stopped(engine, sandbox_id, container).await
    }

    /// The sandbox's container is gone from its engine (removed behind the server's
    /// back): the row becomes `error` and the caller gets a precondition failure naming
    /// that state, never an engine fault.
    pub(crate) async fn container_lost(&self, sandbox_id: &str) -> ServiceError {
        warn!(%sandbox_id, "the sandbox's container is gone from its engine; the sandbox is in error");
        if let Err(error) = self
            .store()
            .set_status(sandbox_id, SandboxStatus::Error)
            .await
        {
            return error.into();
        }
        ServiceError::NotRunning(NotRunning(SandboxStatus::Error))
    }

    /// The error to answer when the agent went away during an operation: a sandbox
    /// killed (or gone wrong) meanwhile by another request is named in its state (a 412),
    /// not reported as the server being unavailable.
    pub(crate) async fn unavailable(&self, sandbox_id: &str, error: ServiceError) -> ServiceError {
        match self.store().sandbox(sandbox_id).await {
            Ok(Some(row)) if row.status != SandboxStatus::Running => {
                ServiceError::NotRunning(NotRunning(row.status))
            }
            Ok(None) => ServiceError::NotFound("sandbox"),
            // The agent of a sandbox on a remote server is reached over the server's SSH
            // connection: when that is down, the server is what is unreachable.
            Ok(Some(row)) => match (row.server_id.as_deref(), error) {
                (Some(server_id), ServiceError::Agent(cause))
                    if self.server_unreachable(server_id).await =>
                {
                    ServiceError::ServerUnreachable(cause)
                }
                (_, error) => error,
            },
            Err(_) => error,
        }
    }

    /// Whether the sandbox's row says it is paused now.
    pub(crate) async fn is_paused(&self, sandbox_id: &str) -> bool {
        matches!(
            self.store().sandbox(sandbox_id).await,
            Ok(Some(row)) if row.status == SandboxStatus::Paused
        )
    }

    /// Whether a remote server's connection is down now.
    async fn server_unreachable(&self, server_id: &str) -> bool {
        match self.fleet().made().engine(server_id) {
            Some(engine) => engine.reachability().await.0 == Reachability::Unreachable,
            None => true,
        }
    }

    pub(crate) fn served(&self, sandbox_id: &str, path: Via) {
        self.count(path);
        debug!(%sandbox_id, path = path.as_str(), "served");
    }
}
