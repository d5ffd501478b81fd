//! `sandbox.one`, `list`, `setTimeout`, `kill`, `remove`.
//!
//! A kill removes the container on the sandbox's server; an unreachable server keeps it
//! until reconcile.

use sandboxd_core::access::{self, Denied, Permission, SandboxNeed};
use sandboxd_core::egress_requests::{ListChange, check_list_change};
use sandboxd_core::model::{NetworkMode, Principal, Sandbox, SandboxStatus};
use sandboxd_core::validate::ListScope;
use sandboxd_store::AccessList;
use serde_json::json;
use tracing::{info, warn};

use super::Sandboxes;

/// What a change to a running sandbox records in the audit log.
struct Change {
    action: &'static str,
    metadata: serde_json::Value,
}
use crate::{Resource, ServiceError, now_ms};

impl Sandboxes {
    /// The sandboxes of an environment or project of the caller's organization.
    pub async fn list(
        &self,
        caller: &Principal,
        scope: ListScope,
    ) -> Result<Vec<Sandbox>, ServiceError> {
        let org = &caller.organization_id;
        let (project_id, sandboxes) = match scope {
            ListScope::Environment(id) => {
                let environment = self
                    .service
                    .store()
                    .environment(org, &id)
                    .await?
                    .ok_or(ServiceError::NotFound("environment"))?;
                (
                    environment.project_id,
                    self.service.store().sandboxes_in_environment(&id).await?,
                )
            }
            ListScope::Project(id) => {
                self.service
                    .store()
                    .project(org, &id)
                    .await?
                    .ok_or(ServiceError::NotFound("project"))?;
                let sandboxes = self.service.store().sandboxes_in_project(&id).await?;
                (id, sandboxes)
            }
        };
        self.service
            .access()
            .require(caller, Permission::ServiceRead)?;
        if access::sees_everything(caller.role) {
            return Ok(sandboxes);
        }
        if !self
            .service
            .access()
            .project_listed(caller, &project_id)
            .await?
        {
            return Err(Denied::NotListed("project").into());
        }
        // A member sees the sandboxes on their access list only.
        let listed = self
            .service
            .store()
            .access_list(AccessList::Sandboxes, org, &caller.user_id)
            .await?;
        Ok(sandboxes
            .into_iter()
            .filter(|s| listed.binary_search(&s.sandbox_id).is_ok())
            .collect())
    }

    /// Replaces the egress list of a running `allowlist` sandbox (`allow` as
    /// `validate::set_egress` gives it); new connections see it within a second.
    /// Removing entries is free; adding one needs `egress:decide` (`how`: whether it
    /// may add at all), as approving a request would.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn set_egress(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        allow: &[String],
        how: ListChange,
    ) -> Result<Sandbox, ServiceError> {
        let store = self.service.store();
        let change = Change {
            action: "sandbox.setEgress",
            metadata: json!({"allow": allow}),
        };
        self.change_running(caller, sandbox_id, change, |sandbox| async move {
            if sandbox.network_mode != NetworkMode::Allowlist {
                return Err(ServiceError::Refused(format!(
                    "the sandbox's network mode is {}: an egress list is only for `allowlist`",
                    sandbox.network_mode.as_str()
                )));
            }
            check_list_change(caller, &sandbox.egress, allow, how)?;
            Ok(store
                .set_egress(&sandbox.sandbox_id, &sandbox.egress, allow)
                .await?)
        })
        .await
    }

    /// Changes the idle timeout of a running sandbox and extends it from now.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn set_timeout(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        timeout_ms: i64,
    ) -> Result<Sandbox, ServiceError> {
        let store = self.service.store();
        let change = Change {
            action: "sandbox.setTimeout",
            metadata: json!({"timeoutMs": timeout_ms}),
        };
        self.change_running(caller, sandbox_id, change, |sandbox| async move {
            Ok(store
                .set_timeout(&sandbox.sandbox_id, timeout_ms, now_ms())
                .await?)
        })
        .await
    }

    /// Gives a sandbox the caller may use another name; a paused one stays paused.
    pub async fn rename(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        name: &str,
    ) -> Result<Sandbox, ServiceError> {
        let access = self.service.access();
        let sandbox = access
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let Some(renamed) = self
            .service
            .store()
            .rename(&sandbox.sandbox_id, name)
            .await?
        else {
            // Over (or it became so since it was read): say in which state.
            let now = access
                .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
                .await?;
            return Err(sandboxd_core::model::NotRunning(now.status).into());
        };
        access
            .record(
                &renamed.organization_id,
                Some(caller),
                "sandbox.rename",
                Resource::sandbox(&renamed),
                json!({"name": name}),
            )
            .await;
        Ok(renamed)
    }

    /// Changes a running sandbox the caller may use with `update` (the store's change,
    /// `None` when the sandbox stopped running meanwhile) and records it in the audit log.
    async fn change_running<F, Fut>(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        change: Change,
        update: F,
    ) -> Result<Sandbox, ServiceError>
    where
        F: FnOnce(Sandbox) -> Fut,
        Fut: std::future::Future<Output = Result<Option<Sandbox>, ServiceError>>,
    {
        let access = self.service.access();
        let sandbox = access
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        self.service.wake(&sandbox).await?;
        match update(sandbox).await? {
            Some(updated) => {
                access
                    .record(
                        &updated.organization_id,
                        Some(caller),
                        change.action,
                        Resource::sandbox(&updated),
                        change.metadata,
                    )
                    .await;
                Ok(updated)
            }
            // Killed between the read and the update: report its state now.
            None => {
                let current = access
                    .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
                    .await?;
                current.running_container()?;
                Err(ServiceError::Conflict(
                    "sandbox changed state, retry".into(),
                ))
            }
        }
    }

    /// Kills a sandbox of the caller's.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn kill_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<Sandbox, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let was = sandbox.status;
        let killed = self.kill(sandbox).await?;
        self.service
            .access()
            .record(
                &killed.organization_id,
                Some(caller),
                "sandbox.kill",
                Resource::sandbox(&killed),
                json!({"previousStatus": was.as_str()}),
            )
            .await;
        Ok(killed)
    }

    /// Marks the row `killed` and returns at once: from then on nothing reaches the
    /// sandbox through the API, and its container is stopped (2 s grace) and removed in
    /// the background. A removal that fails, or is cut by a server stop, is done by the
    /// next reconcile (the container of a killed row is an orphan).
    pub async fn kill(&self, sandbox: Sandbox) -> Result<Sandbox, ServiceError> {
        if sandbox.status == SandboxStatus::Killed {
            return Ok(sandbox);
        }
        let Some(killed) = self
            .service
            .store()
            .mark_killed(&sandbox.sandbox_id, now_ms())
            .await?
        else {
            // Killed meanwhile by another call (or removed): the row as it is now, and
            // its container is that call's to remove.
            return self
                .service
                .store()
                .sandbox(&sandbox.sandbox_id)
                .await?
                .ok_or(ServiceError::NotFound("sandbox"));
        };
        self.service
            .fleet()
            .release_agent(&sandbox.sandbox_id, sandbox.server_id.as_deref());
        self.service.forget(&sandbox.sandbox_id);
        info!(sandbox_id = %sandbox.sandbox_id, "sandbox killed");
        if let Some(container) = sandbox.container_id {
            // An unreachable server keeps the container until reconcile finds it there
            // (the container of a killed row is an orphan).
            let engine = match self
                .service
                .fleet()
                .engine_of(sandbox.server_id.as_deref())
                .await
            {
                Ok(engine) => engine,
                Err(error) => {
                    warn!(sandbox_id = %sandbox.sandbox_id, error = %sandboxd_core::error::chain(&error), "the sandbox's server is unreachable; its container is removed when it is back");
                    return Ok(killed);
                }
            };
            let id = sandbox.sandbox_id;
            self.service.inner.removals.spawn(async move {
                if let Err(error) = engine.destroy_container(&container).await {
                    warn!(sandbox_id = %id, error = %sandboxd_core::error::chain(&error), "could not remove the container of a killed sandbox; reconcile will");
                }
            });
        }
        Ok(killed)
    }

    /// Kills a sandbox if needed and deletes its row.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn remove_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<(), ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Delete)
            .await?;
        let id = sandbox.sandbox_id.clone();
        let killed = self.kill(sandbox).await?;
        self.service.store().delete_sandbox(&id).await?;
        self.service
            .access()
            .record(
                &killed.organization_id,
                Some(caller),
                "sandbox.remove",
                Resource::sandbox(&killed),
                json!({}),
            )
            .await;
        Ok(())
    }
}
