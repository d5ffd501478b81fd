//! `sandbox.one`, `list`, `setTimeout`, `kill`, `remove`.

use sandboxd_core::model::{Principal, Sandbox, SandboxStatus};
use sandboxd_core::validate::ListScope;
use tracing::{info, warn};

use super::{Service, ServiceError, now_ms};

impl Service {
    /// The sandboxes of an environment or project of the caller's organization.
    pub async fn list(
        &self,
        caller: &Principal,
        scope: ListScope,
    ) -> Result<Vec<Sandbox>, ServiceError> {
        let org = &caller.organization_id;
        match scope {
            ListScope::Environment(id) => {
                self.store()
                    .environment(org, &id)
                    .await?
                    .ok_or(ServiceError::NotFound("environment"))?;
                Ok(self.store().sandboxes_in_environment(&id).await?)
            }
            ListScope::Project(id) => {
                self.store()
                    .project(org, &id)
                    .await?
                    .ok_or(ServiceError::NotFound("project"))?;
                Ok(self.store().sandboxes_in_project(&id).await?)
            }
        }
    }

    /// Changes the idle timeout of a running sandbox and extends it from now.
    pub async fn set_timeout(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        timeout_ms: i64,
    ) -> Result<Sandbox, ServiceError> {
        let sandbox = self.sandbox_for(caller, sandbox_id).await?;
        sandbox.running_container()?;
        match self
            .store()
            .set_timeout(&sandbox.sandbox_id, timeout_ms, now_ms())
            .await?
        {
            Some(updated) => Ok(updated),
            // Killed between the read and the update: report its state now.
            None => {
                let current = self.sandbox_for(caller, sandbox_id).await?;
                current.running_container()?;
                Err(ServiceError::Conflict(
                    "sandbox changed state, retry".into(),
                ))
            }
        }
    }

    /// Kills a sandbox of the caller's.
    pub async fn kill_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<Sandbox, ServiceError> {
        let sandbox = self.sandbox_for(caller, sandbox_id).await?;
        self.kill(sandbox).await
    }

    /// Stops and removes the container (failures are logged, not fatal) and keeps the row
    /// as `killed`.
    pub async fn kill(&self, sandbox: Sandbox) -> Result<Sandbox, ServiceError> {
        if sandbox.status == SandboxStatus::Killed {
            return Ok(sandbox);
        }
        if let Some(container) = &sandbox.container_id
            && let Err(error) = self.engine().destroy_container(container).await
        {
            warn!(sandbox_id = %sandbox.sandbox_id, %error, "could not remove the container of a killed sandbox");
        }
        self.agents().release(&sandbox.sandbox_id);
        info!(sandbox_id = %sandbox.sandbox_id, "sandbox killed");
        self.store()
            .mark_killed(&sandbox.sandbox_id, now_ms())
            .await?
            .ok_or(ServiceError::NotFound("sandbox"))
    }

    /// Kills a sandbox if needed and deletes its row.
    pub async fn remove_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<(), ServiceError> {
        let sandbox = self.sandbox_for(caller, sandbox_id).await?;
        let id = sandbox.sandbox_id.clone();
        self.kill(sandbox).await?;
        self.store().delete_sandbox(&id).await?;
        Ok(())
    }
}
