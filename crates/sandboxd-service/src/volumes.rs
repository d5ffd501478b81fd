//! `volume.*`: an organization's named storage on one server, made, listed, read and
//! removed (never while a live sandbox mounts it); and the volumes a create mounts,
//! found and checked (same organization and project, one server, which the sandbox
//! then runs on). Who may see a volume is who may see its project.
//!
//! `Volumes` (`service.volumes()`): a volume is made in the project named or the caller's
//! only one; its row is kept in `creating` with the quota asked, then the volume is made
//! on its server's engine and marked ready, the row deleted when the engine refuses.
//! Audited. A removal waits up to 10 s for the containers of sandboxes just killed.
//! `mounts_server` finds a create's volumes as the caller may use them.

use std::time::Duration;

use sandboxd_contracts::EngineError;
use sandboxd_core::access::{Permission, SandboxNeed};
use sandboxd_core::error::Invalid;
use sandboxd_core::model::Principal;
use sandboxd_core::validate::{self, CreateVolume};
use sandboxd_core::volumes::{self, Volume, VolumeMount};
use sandboxd_store::new_id;
use serde_json::json;
use tracing::{info, warn};

use crate::{Resource, Service, ServiceError, now_ms};

/// How long a removal waits for the containers of killed sandboxes to let go.
const CONTAINERS_LEAVING: Duration = Duration::from_secs(10);
/// A volume still `creating` after this long was cut short (a crash): it may be removed.
const MAKING: Duration = Duration::from_secs(300);

fn resource(volume: &Volume) -> Resource<'_> {
    Resource {
        kind: "volume",
        id: &volume.volume_id,
        name: Some(&volume.name),
    }
}

/// The `volume.*` operations, and the server the volumes a create mounts are on.
#[derive(Debug, Clone)]
pub struct Volumes {
    service: Service,
}

impl Volumes {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }

    /// Makes a volume on its server (the local engine unless one is named).
    pub async fn create_volume(
        &self,
        caller: &Principal,
        cmd: CreateVolume,
    ) -> Result<Volume, ServiceError> {
        let project_id = self.project_of(caller, cmd.project_id.as_deref()).await?;
        self.service
            .access()
            .check_create_in(caller, &project_id)
            .await?;
        match &cmd.server_id {
            Some(server_id) => {
                self.service.access().server_for(caller, server_id).await?;
            }
            None if self.service.inner.options.remote_only => {
                return Err(Invalid::one(
                    "serverId",
                    "is required: sandboxes, and their volumes, live on remote servers only here",
                )
                .into());
            }
            None => {}
        }
        let engine = self
            .service
            .fleet()
            .engine_of(cmd.server_id.as_deref())
            .await?;
        let volume = Volume {
            volume_id: new_id()?,
            organization_id: caller.organization_id.clone(),
            project_id,
            name: cmd.name,
            server_id: cmd.server_id,
            size_mb: cmd.size_mb,
            status: "creating".into(),
            created_at: now_ms(),
        };
        let store = self.service.store();
        store
            .insert_volume(&volume, &caller.user_id, &self.service.inner.options.quotas)
            .await?;
        let labels = volumes::engine_labels(&volume, self.service.instance_id());
        if let Err(error) = engine
            .create_volume(&volumes::engine_name(&volume.volume_id), &labels)
            .await
        {
            warn!(volume_id = %volume.volume_id, error = %sandboxd_core::error::chain(&error), "the engine did not make a volume");
            store.delete_volume(&volume.volume_id).await?;
            return Err(error.into());
        }
        if !store.volume_made(&volume.volume_id).await? {
            // Removed while it was made: its engine volume goes too.
            let _ = engine
                .remove_volume(&volumes::engine_name(&volume.volume_id))
                .await;
            return Err(ServiceError::Conflict(
                "the volume was removed while it was made".into(),
            ));
        }
        let volume = Volume {
            status: "ready".into(),
            ..volume
        };
        self.service
            .access()
            .record(
                &volume.organization_id,
                Some(caller),
                "volume.create",
                resource(&volume),
                json!({"serverId": volume.server_id, "sizeMb": volume.size_mb}),
            )
            .await;
        info!(volume_id = %volume.volume_id, "volume made");
        Ok(volume)
    }

    /// The project a new volume (or template) goes to: the one named, or the caller's
    /// only one.
    pub(crate) async fn project_of(
        &self,
        caller: &Principal,
        named: Option<&str>,
    ) -> Result<String, ServiceError> {
        let store = self.service.store();
        if let Some(project_id) = named {
            return match store.project(&caller.organization_id, project_id).await? {
                Some(project) => Ok(project.project_id),
                None => Err(ServiceError::NotFound("project")),
            };
        }
        let mut seen = Vec::new();
        for (project, _) in store
            .projects_with_environments(&caller.organization_id)
            .await?
        {
            if self
                .service
                .access()
                .project_listed(caller, &project.project_id)
                .await?
            {
                seen.push(project.project_id);
            }
        }
        match seen.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(ServiceError::NotFound("project")),
            _ => Err(Invalid::one(
                "projectId",
                "is required: you see several projects (project.all lists them)",
            )
            .into()),
        }
    }

    /// The volumes of the caller's organization in projects the caller sees, each with
    /// the live sandboxes that mount it (those the caller sees).
    pub async fn volumes(
        &self,
        caller: &Principal,
    ) -> Result<Vec<(Volume, Vec<String>)>, ServiceError> {
        self.service
            .access()
            .require(caller, SandboxNeed::Read.permission())?;
        let store = self.service.store();
        // Who mounts what, read once for every volume.
        let mut mounted = store.volume_users_all(&caller.organization_id).await?;
        let mut seen = Vec::new();
        for volume in store.volumes(&caller.organization_id).await? {
            if self
                .service
                .access()
                .project_listed(caller, &volume.project_id)
                .await?
            {
                let users = mounted.remove(&volume.volume_id).unwrap_or_default();
                let users = self
                    .service
                    .access()
                    .sandboxes_listed(caller, users)
                    .await?;
                seen.push((volume, users));
            }
        }
        Ok(seen)
    }

    /// A volume the caller may see, with `permission`; one of another organization or of
    /// a project the caller does not see is not found.
    pub async fn volume_for(
        &self,
        caller: &Principal,
        volume_id: &str,
        permission: Permission,
    ) -> Result<Volume, ServiceError> {
        let id = validate::volume_id(volume_id)?;
        let volume = self
            .service
            .store()
            .volume(&caller.organization_id, &id)
            .await?
            .ok_or(ServiceError::NotFound("volume"))?;
        if !self
            .service
            .access()
            .project_listed(caller, &volume.project_id)
            .await?
        {
            return Err(ServiceError::NotFound("volume"));
        }
        self.service.access().require(caller, permission)?;
        Ok(volume)
    }

    /// The live sandboxes that mount a volume, of those the caller sees.
    pub async fn volume_users(
        &self,
        caller: &Principal,
        volume: &Volume,
    ) -> Result<Vec<String>, ServiceError> {
        let users = self
            .service
            .store()
            .volume_users(&volume.organization_id, &volume.volume_id)
            .await?;
        self.service.access().sandboxes_listed(caller, users).await
    }

    /// Removes a volume and everything in it; refused while a sandbox being created,
    /// running or paused mounts it.
    pub async fn remove_volume(
        &self,
        caller: &Principal,
        volume_id: &str,
    ) -> Result<Volume, ServiceError> {
        let volume = self
            .volume_for(caller, volume_id, SandboxNeed::Delete.permission())
            .await?;
        let store = self.service.store();
        let users = store
            .begin_volume_removal(
                &volume.organization_id,
                &volume.volume_id,
                now_ms() - MAKING.as_millis() as i64,
            )
            .await?;
        if !users.is_empty() {
            let all = users.len();
            let seen = self
                .service
                .access()
                .sandboxes_listed(caller, users)
                .await?;
            let named = match (seen.len(), all - seen.len()) {
                (_, 0) => seen.join(", "),
                (0, hidden) => format!("{hidden} sandboxes you do not see"),
                (_, hidden) => format!("{} and {hidden} sandboxes you do not see", seen.join(", ")),
            };
            return Err(ServiceError::Conflict(format!(
                "the volume is mounted by {named}; kill {} first",
                if all == 1 { "it" } else { "them" }
            )));
        }
        // A removal that fails leaves it `removing` (mounted by no one): asking again
        // finishes it.
        self.remove_engine_volume(&volume).await?;
        store.delete_volume(&volume.volume_id).await?;
        self.service
            .access()
            .record(
                &volume.organization_id,
                Some(caller),
                "volume.remove",
                resource(&volume),
                json!({"sizeMb": volume.size_mb}),
            )
            .await;
        Ok(volume)
    }

    /// Removes a volume's engine volume, waiting for the containers of sandboxes killed
    /// a moment ago to go (a kill answers before its container is removed).
    async fn remove_engine_volume(&self, volume: &Volume) -> Result<(), ServiceError> {
        let engine = self
            .service
            .fleet()
            .engine_of(volume.server_id.as_deref())
            .await?;
        let name = volumes::engine_name(&volume.volume_id);
        let deadline = tokio::time::Instant::now() + CONTAINERS_LEAVING;
        loop {
            match engine.remove_volume(&name).await {
                Ok(()) => return Ok(()),
                Err(EngineError::Rejected { status: 409, .. })
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(EngineError::Rejected { status: 409, .. }) => {
                    return Err(ServiceError::Conflict(
                        "a container still uses the volume; retry in a moment".into(),
                    ));
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// The server the volumes of a create live on (`None` when it mounts none;
    /// `Some(None)`: the local engine), each found as the caller may use it and of the
    /// sandbox's project.
    pub(crate) async fn mounts_server(
        &self,
        caller: &Principal,
        mounts: &[VolumeMount],
        project_id: &str,
    ) -> Result<Option<Option<String>>, ServiceError> {
        let mut found: Vec<Volume> = Vec::new();
        for (index, mount) in mounts.iter().enumerate() {
            if found.iter().any(|v| v.volume_id == mount.volume_id) {
                continue;
            }
            let volume = self
                .volume_for(caller, &mount.volume_id, SandboxNeed::Use.permission())
                .await?;
            if volume.project_id != project_id {
                return Err(Invalid::one(
                    format!("volumes[{index}].volumeId"),
                    format!(
                        "volume {} belongs to another project than the sandbox's environment",
                        volume.name
                    ),
                )
                .into());
            }
            found.push(volume);
        }
        volumes::common_server(&found).map_err(|(a, b)| {
            Invalid::one(
                "volumes",
                format!(
                    "the volumes live on two servers ({a} and {b}): a sandbox runs on one, so it can mount volumes of one only"
                ),
            )
            .into()
        })
    }
}
