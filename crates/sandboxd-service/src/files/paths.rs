//! Paths of a sandbox one at a time: their metadata (owners, link targets), the
//! entries of a directory, renames and removals. Done by the sandbox's agent as the
//! sandbox user; the engine path does none of them.
//!
//! Directories made and watchers are here too, the agent's only.

use sandboxd_contracts::{ChannelError, PathEntry, RefusalKind, SandboxChannel, WatchEvent};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::limits::MAX_LISTING_BYTES;
use sandboxd_core::model::Principal;
use std::sync::Arc;

use super::{Files, outcome};
use crate::ServiceError;
use crate::executor::channel_failure;

impl Files {
    async fn agent(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        need: SandboxNeed,
    ) -> Result<Arc<dyn SandboxChannel>, ServiceError> {
        Ok(self.service.agent_for(caller, sandbox_id, need).await?.1)
    }

    /// A watcher call's failure: an unknown watcher is not found.
    async fn watcher_failed(&self, sandbox_id: &str, error: ChannelError) -> ServiceError {
        match error {
            ChannelError::Refused(refusal) if refusal.kind == RefusalKind::NotFound => {
                ServiceError::NotFound("watcher")
            }
            error => self.failed(sandbox_id, error).await,
        }
    }

    async fn failed(&self, sandbox_id: &str, error: ChannelError) -> ServiceError {
        channel_failure(&self.service, sandbox_id, error, |refusal| {
            match refusal.kind {
                RefusalKind::NotFound => ServiceError::NotFound("path"),
                RefusalKind::PermissionDenied => ServiceError::Forbidden(refusal.message),
                _ => ServiceError::Refused(refusal.message),
            }
        })
        .await
    }

    /// A path's metadata, not following a final symbolic link.
    pub async fn stat(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        path: &str,
    ) -> Result<PathEntry, ServiceError> {
        let agent = self.agent(caller, sandbox_id, SandboxNeed::Read).await?;
        match agent.stat(path).await {
            Ok(entry) => Ok(entry),
            Err(error) => Err(self.failed(sandbox_id, error).await),
        }
    }

    /// A directory's entries.
    pub async fn entries(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        path: &str,
    ) -> Result<Vec<PathEntry>, ServiceError> {
        let agent = self.agent(caller, sandbox_id, SandboxNeed::Read).await?;
        match agent.entries(path, MAX_LISTING_BYTES).await {
            Ok(entries) => Ok(entries),
            Err(error) => Err(self.failed(sandbox_id, error).await),
        }
    }

    /// Renames a path.
    pub async fn rename(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        from: &str,
        to: &str,
    ) -> Result<(), ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let done = match agent.rename(from, to).await {
            Ok(()) => Ok(()),
            Err(error) => Err(self.failed(sandbox_id, error).await),
        };
        self.note(
            caller,
            &sandbox,
            "move",
            (from, Some(to)),
            outcome(&done, |_| None),
        )
        .await;
        done
    }

    /// Removes a path and everything under it.
    pub async fn remove(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        path: &str,
    ) -> Result<(), ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let done = match agent.remove(path).await {
            Ok(()) => Ok(()),
            Err(error) => Err(self.failed(sandbox_id, error).await),
        };
        self.note(
            caller,
            &sandbox,
            "remove",
            (path, None),
            outcome(&done, |_| None),
        )
        .await;
        done
    }

    /// Replaces a path's metadata.
    pub async fn set_metadata(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        path: &str,
        metadata: std::collections::BTreeMap<String, String>,
    ) -> Result<(), ServiceError> {
        let agent = self.agent(caller, sandbox_id, SandboxNeed::Use).await?;
        match agent.set_metadata(path, metadata).await {
            Ok(()) => Ok(()),
            Err(error) => Err(self.failed(sandbox_id, error).await),
        }
    }

    /// Starts watching a directory; the watcher's id.
    pub async fn add_watcher(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        path: &str,
        recursive: bool,
    ) -> Result<String, ServiceError> {
        let agent = self.agent(caller, sandbox_id, SandboxNeed::Read).await?;
        let id = format!("w_{}", &sandboxd_store::new_id()?[..12]);
        match agent.add_watcher(&id, path, recursive).await {
            Ok(()) => Ok(id),
            Err(error) => Err(self.failed(sandbox_id, error).await),
        }
    }

    /// The events of a watcher since the last read; with `wait`, a read that would find
    /// none waits up to that long (at most a second) for the first.
    pub async fn watcher_events(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        id: &str,
        wait: std::time::Duration,
    ) -> Result<Vec<WatchEvent>, ServiceError> {
        let agent = self.agent(caller, sandbox_id, SandboxNeed::Read).await?;
        match agent.watcher_events(id, wait).await {
            Ok(events) => Ok(events),
            Err(error) => Err(self.watcher_failed(sandbox_id, error).await),
        }
    }

    /// Stops a watcher.
    pub async fn remove_watcher(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        id: &str,
    ) -> Result<(), ServiceError> {
        let agent = self.agent(caller, sandbox_id, SandboxNeed::Read).await?;
        match agent.remove_watcher(id).await {
            Ok(()) => Ok(()),
            Err(error) => Err(self.watcher_failed(sandbox_id, error).await),
        }
    }

    /// Makes a directory and its parents (mode 0755).
    pub async fn make_dir(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        path: &str,
    ) -> Result<(), ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let done = match agent.make_dir(path, 0o755).await {
            Ok(()) => Ok(()),
            Err(error) => Err(self.failed(sandbox_id, error).await),
        };
        self.note(
            caller,
            &sandbox,
            "mkdir",
            (path, None),
            outcome(&done, |_| None),
        )
        .await;
        done
    }
}
