//! A container's memory saved to its engine's host and restored: the engine's checkpoint
//! API, which Docker serves only with its experimental setting on (`scripts/gvisor.sh`
//! sets it) and through a runtime that can checkpoint (gVisor's `runsc`). The engine
//! keeps a checkpoint in the container's own directory, readable by root only, and
//! removes it with the container.
//!
//! bollard has the checkpoint calls but not the start from one: that start is its start
//! call on a clone of the client whose request modifier adds `checkpoint=<name>` to the
//! query. Both take as long as the memory to write or read, so they are bounded by
//! [`CHECKPOINT_TIMEOUT`] rather than the usual call's bound.

use std::time::Duration;

use bollard::container::{CreateCheckpointOptions, DeleteCheckpointOptions};

use crate::engine::DockerEngine;
use crate::error::{EngineError, classify, message_of, status_of};

/// The longest a checkpoint or a restore may take.
const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(600);
/// How many times a restore is tried when the engine lost a race of its own.
const RESTORE_ATTEMPTS: u32 = 4;
/// The longest the engine may take to record a checkpointed container as stopped.
const STOP_RECORDED: Duration = Duration::from_secs(30);

impl DockerEngine {
    /// Whether the engine's checkpoint API is on (its experimental setting).
    pub(crate) async fn checkpoints(&self) -> bool {
        matches!(
            crate::engine::bounded("info", self.docker.info()).await,
            Ok(Ok(info)) if info.experimental_build == Some(true)
        )
    }

    /// Saves a running container's processes and memory as the checkpoint `name` and
    /// stops it. The engine's refusal (the runtime cannot save a process, the disk is
    /// full) comes back with its message; the container then runs on.
    pub(crate) async fn checkpoint_container(
        &self,
        id: &str,
        name: &str,
    ) -> Result<(), EngineError> {
        let options = CreateCheckpointOptions {
            checkpoint_id: name.to_owned(),
            checkpoint_dir: None,
            exit: true,
        };
        let docker = self.docker.clone().with_timeout(CHECKPOINT_TIMEOUT);
        match timed(
            "checkpoint container",
            docker.create_checkpoint(id, options),
        )
        .await?
        {
            Ok(()) => self.stopped(id).await,
            Err(e) => Err(refusal(e)),
        }
    }

    /// Saves a running or frozen container's processes and memory as the checkpoint
    /// `name`, leaving it as it was: the runtime freezes a running one for the save only,
    /// and one frozen already stays so.
    pub(crate) async fn checkpoint_running(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let options = CreateCheckpointOptions {
            checkpoint_id: name.to_owned(),
            checkpoint_dir: None,
            exit: false,
        };
        let docker = self.docker.clone().with_timeout(CHECKPOINT_TIMEOUT);
        timed(
            "checkpoint container",
            docker.create_checkpoint(id, options),
        )
        .await?
        .map_err(refusal)
    }

    /// Waits for the engine to record a checkpointed container as stopped: it answers
    /// the checkpoint before its own record of the container's exit is made.
    async fn stopped(&self, id: &str) -> Result<(), EngineError> {
        let deadline = tokio::time::Instant::now() + STOP_RECORDED;
        while self.is_running(id).await? {
            if tokio::time::Instant::now() >= deadline {
                return Err(EngineError::Timeout {
                    call: "checkpoint container",
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Starts a stopped container from its checkpoint `name`. One running already is
    /// fine (its processes were never saved).
    pub(crate) async fn restore_container(&self, id: &str, name: &str) -> Result<(), EngineError> {
        self.check_mount_paths(id).await?;
        let query = format!("checkpoint={name}");
        let docker = self
            .docker
            .clone()
            .with_timeout(CHECKPOINT_TIMEOUT)
            .with_request_modifier(move |mut request| {
                let uri = request.uri().to_string();
                let joined = if uri.contains('?') { '&' } else { '?' };
                if let Ok(with_query) = format!("{uri}{joined}{query}").parse() {
                    *request.uri_mut() = with_query;
                }
                request
            });
        let mut attempt = 0;
        loop {
            attempt += 1;
            match timed("restore container", docker.start_container(id, None)).await? {
                Ok(()) => return Ok(()),
                Err(e) if status_of(&e) == Some(304) => return Ok(()),
                Err(e) if attempt < RESTORE_ATTEMPTS && lost_a_race(&e) => {
                    tokio::time::sleep(Duration::from_millis(100) * attempt).await;
                }
                Err(e) => return Err(refusal(e)),
            }
        }
    }

    /// Removes the container's checkpoint `name`; none there is fine.
    pub(crate) async fn remove_checkpoint(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let removed = crate::engine::bounded(
            "remove checkpoint",
            self.docker
                .delete_checkpoint(id, name, None::<DeleteCheckpointOptions>),
        )
        .await?;
        match removed {
            Ok(()) => Ok(()),
            Err(e) if status_of(&e) == Some(404) => Ok(()),
            Err(e) => Err(classify("checkpoint", e)),
        }
    }
}

async fn timed<T>(
    call: &'static str,
    future: impl std::future::Future<Output = T>,
) -> Result<T, EngineError> {
    tokio::time::timeout(CHECKPOINT_TIMEOUT, future)
        .await
        .map_err(|_| EngineError::Timeout { call })
}

/// Whether the engine refused a restore for a race of its own: two restores at once
/// putting the same small file of their checkpoints in containerd's content store, one
/// of them refused as it commits (Docker 20.10: "commit failed: content …: already
/// exists"). Tried again, it passes.
fn lost_a_race(error: &bollard::errors::Error) -> bool {
    let message = message_of(error);
    message.contains("content") && message.contains("already exists")
}

/// The engine's refusal of a checkpoint or a restore, with its message: a container
/// gone is not found; the runtime's own failures (500) are told as they are.
fn refusal(error: bollard::errors::Error) -> EngineError {
    match status_of(&error) {
        Some(404) => EngineError::NotFound { what: "container" },
        Some(status) => EngineError::Rejected {
            status,
            message: message_of(&error),
        },
        None => crate::error::fault(error),
    }
}
