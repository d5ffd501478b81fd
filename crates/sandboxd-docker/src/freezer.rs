//! Pausing and resuming a container: the engine's freezer (the cgroup freezer under
//! runc). Its processes keep their memory and get no CPU until thawed. Both calls are
//! idempotent: the engine's "already paused" or "not paused" refusal is settled by
//! reading the container's state (a refusal of a container that is not found stays
//! that). Engines differ in how they refuse: 409, or 500 for a container that exited.

use bollard::query_parameters::InspectContainerOptions;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify, fault, status_of};

/// What the engine says a container is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Frozen,
    Thawed,
    Stopped,
}

/// A refusal that the container's state settles: 409, or a 500 (Debian's engine
/// answers an unpause of an exited container so); not a 404.
fn refused(error: &bollard::errors::Error) -> bool {
    matches!(status_of(error), Some(409 | 500))
}

impl DockerEngine {
    /// Freezes a running container; one frozen already is fine; one that is not
    /// running is [`EngineError::NotRunning`].
    pub(crate) async fn pause_container(&self, id: &str) -> Result<(), EngineError> {
        match bounded("pause container", self.docker.pause_container(id)).await? {
            Ok(()) => Ok(()),
            Err(e) if refused(&e) => match self.run_state(id).await? {
                Run::Frozen => Ok(()),
                Run::Stopped => Err(EngineError::NotRunning),
                Run::Thawed => Err(classify("container", e)),
            },
            Err(e) => Err(classify("container", e)),
        }
    }

    /// Thaws a frozen container; one running unfrozen is fine; one that stopped
    /// meanwhile is [`EngineError::NotRunning`] (the caller starts it again).
    pub(crate) async fn unpause_container(&self, id: &str) -> Result<(), EngineError> {
        match bounded("unpause container", self.docker.unpause_container(id)).await? {
            Ok(()) => Ok(()),
            Err(e) if refused(&e) => match self.run_state(id).await? {
                Run::Thawed => Ok(()),
                Run::Stopped => Err(EngineError::NotRunning),
                Run::Frozen => Err(classify("container", e)),
            },
            Err(e) => Err(classify("container", e)),
        }
    }

    async fn run_state(&self, id: &str) -> Result<Run, EngineError> {
        let inspect = bounded(
            "inspect container",
            self.docker
                .inspect_container(id, None::<InspectContainerOptions>),
        )
        .await?
        .map_err(|e| match status_of(&e) {
            Some(404) => EngineError::NotFound { what: "container" },
            _ => fault(e),
        })?;
        let state = inspect.state.unwrap_or_default();
        Ok(match (state.running, state.paused) {
            (_, Some(true)) => Run::Frozen,
            (Some(true), _) => Run::Thawed,
            _ => Run::Stopped,
        })
    }
}
