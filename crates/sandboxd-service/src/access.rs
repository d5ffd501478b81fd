//! Access checks shared by every operation, and the audit trail they leave.
//!
//! Order of checks: an id of another organization resolves to nothing (404, as a missing
//! one); within the organization a missing permission or access-list entry is 403.
//!
//! `Access::sandbox_for(caller, id, need)` is the single access check every sandbox
//! operation goes through: another organization's id is not found, as a missing one is;
//! then `sandboxd_core::access` decides (forbidden). Beside it `server_for` and
//! `server_listed` for servers, `project_listed`, `require`, and `record`, the audit
//! trail. It depends on the store only.

use sandboxd_core::access::{self, Denied, Permission, SandboxNeed};
use sandboxd_core::model::{Principal, Sandbox, Server};
use sandboxd_store::{AccessList, NewAuditEntry, Store};
use serde_json::Value;
use tracing::error;

use super::ServiceError;
use crate::activity::Timeline;
use std::sync::Arc;

impl From<Denied> for ServiceError {
    fn from(denied: Denied) -> Self {
        Self::Forbidden(denied.to_string())
    }
}

/// What an audit entry is about.
#[derive(Debug, Clone, Copy)]
pub struct Resource<'a> {
    pub kind: &'static str,
    pub id: &'a str,
    pub name: Option<&'a str>,
}

impl<'a> Resource<'a> {
    pub fn sandbox(sandbox: &'a Sandbox) -> Self {
        Self {
            kind: "sandbox",
            id: &sandbox.sandbox_id,
            name: Some(&sandbox.name),
        }
    }
}

/// Who may act on what, and the audit trail actions leave. Reads the store only; every
/// other part asks it before acting.
#[derive(Debug, Clone)]
pub struct Access {
    store: Store,
    /// Where audited actions on sandboxes are noted too.
    timeline: Arc<Timeline>,
}

impl Access {
    pub(crate) fn new(store: Store, timeline: Arc<Timeline>) -> Self {
        Self { store, timeline }
    }

    /// A sandbox of the caller's organization that the caller may act on as `need`
    /// says. Another organization's sandbox is reported exactly like a missing one, so
    /// ids cannot be probed.
    pub async fn sandbox_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        need: SandboxNeed,
    ) -> Result<Sandbox, ServiceError> {
        let id = sandboxd_core::validate::sandbox_id(sandbox_id)?;
        let sandbox = match self.store.sandbox(&id).await? {
            Some(sandbox) if sandbox.organization_id == caller.organization_id => sandbox,
            _ => return Err(ServiceError::NotFound("sandbox")),
        };
        access::check_sandbox(caller, need, self.sandbox_listed(caller, &id).await?)?;
        Ok(sandbox)
    }

    /// Whether the caller may read a sandbox's timeline: as `sandbox_for` with `Read`
    /// while its row is there; after it was removed, the timeline's organization must be
    /// the caller's and the sandbox on the caller's access list (administrators see
    /// every one).
    pub(crate) async fn timeline_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<(), ServiceError> {
        match self
            .sandbox_for(caller, sandbox_id, SandboxNeed::Read)
            .await
        {
            Err(ServiceError::NotFound(_)) => {}
            other => return other.map(drop),
        }
        let id = sandboxd_core::validate::sandbox_id(sandbox_id)?;
        if self.store.activity_organization(&id).await?.as_deref()
            != Some(caller.organization_id.as_str())
        {
            return Err(ServiceError::NotFound("sandbox"));
        }
        let listed = self.sandbox_listed(caller, &id).await?;
        Ok(access::check_sandbox(caller, SandboxNeed::Read, listed)?)
    }

    /// Whether a sandbox of the caller's organization is one the caller sees: every one
    /// for administrators, those on their access list for members.
    async fn sandbox_listed(&self, caller: &Principal, id: &str) -> Result<bool, ServiceError> {
        Ok(access::sees_everything(caller.role)
            || self
                .store
                .on_access_list(
                    AccessList::Sandboxes,
                    &caller.organization_id,
                    &caller.user_id,
                    id,
                )
                .await?)
    }

    /// Those of `sandbox_ids` (of the caller's organization) the caller may see: every
    /// one for administrators, those on their access list for members.
    pub(crate) async fn sandboxes_listed(
        &self,
        caller: &Principal,
        sandbox_ids: Vec<String>,
    ) -> Result<Vec<String>, ServiceError> {
        if access::sees_everything(caller.role) {
            return Ok(sandbox_ids);
        }
        let mut listed = Vec::new();
        for id in sandbox_ids {
            if self.sandbox_listed(caller, &id).await? {
                listed.push(id);
            }
        }
        Ok(listed)
    }

    /// Whether the caller may see a project of their organization (and list its
    /// sandboxes).
    pub(crate) async fn project_listed(
        &self,
        caller: &Principal,
        project_id: &str,
    ) -> Result<bool, ServiceError> {
        Ok(access::sees_everything(caller.role)
            || self
                .store
                .on_access_list(
                    AccessList::Projects,
                    &caller.organization_id,
                    &caller.user_id,
                    project_id,
                )
                .await?)
    }

    /// Checks that the caller may create sandboxes in a project of their organization.
    pub(crate) async fn check_create_in(
        &self,
        caller: &Principal,
        project_id: &str,
    ) -> Result<(), ServiceError> {
        let listed = self.project_listed(caller, project_id).await?;
        Ok(access::check_create_in_project(caller, listed)?)
    }

    /// A server of the caller's organization the caller may use: administrators every
    /// one, members those on their access list. Another organization's is not found.
    pub(crate) async fn server_for(
        &self,
        caller: &Principal,
        server_id: &str,
    ) -> Result<Server, ServiceError> {
        let id = sandboxd_core::validate::server_id(server_id)?;
        let server = self
            .store
            .server(&caller.organization_id, &id)
            .await?
            .ok_or(ServiceError::NotFound("server"))?;
        if !self.server_listed(caller, &id).await? {
            return Err(ServiceError::Forbidden(
                "you are not authorized to use this server".into(),
            ));
        }
        Ok(server)
    }

    /// Whether the caller may use a server of their organization: administrators every
    /// one, members those on their access list.
    pub(crate) async fn server_listed(
        &self,
        caller: &Principal,
        server_id: &str,
    ) -> Result<bool, ServiceError> {
        Ok(access::sees_everything(caller.role)
            || self
                .store
                .on_access_list(
                    AccessList::Servers,
                    &caller.organization_id,
                    &caller.user_id,
                    server_id,
                )
                .await?)
    }

    pub fn require(&self, caller: &Principal, permission: Permission) -> Result<(), ServiceError> {
        Ok(access::require(caller, permission)?)
    }

    /// Records an action in the audit log. `actor` is `None` for what sandboxd does by
    /// itself. A failure to record is logged and does not undo the action.
    pub(crate) async fn record(
        &self,
        organization_id: &str,
        actor: Option<&Principal>,
        action: &str,
        resource: Resource<'_>,
        metadata: Value,
    ) {
        if resource.kind == "sandbox" {
            self.timeline
                .note_audited((resource.id, organization_id), actor, action, &metadata);
        }
        let entry = audit_entry(organization_id, actor, action, resource, metadata);
        if let Err(failure) = self.store.audit(entry).await {
            error!(%action, resource_id = %resource.id, error = %failure, "could not record an audit entry");
        }
    }
}

/// The audit entry of an action (`actor`: `None` for what sandboxd does by itself).
pub(crate) fn audit_entry<'a>(
    organization_id: &'a str,
    actor: Option<&'a Principal>,
    action: &'a str,
    resource: Resource<'a>,
    metadata: Value,
) -> NewAuditEntry<'a> {
    NewAuditEntry {
        organization_id,
        actor_user_id: actor.map(|a| a.user_id.as_str()),
        actor_key_id: actor.map(|a| a.key_id.as_str()),
        action,
        resource_type: resource.kind,
        resource_id: resource.id,
        resource_name: resource.name,
        metadata,
    }
}
