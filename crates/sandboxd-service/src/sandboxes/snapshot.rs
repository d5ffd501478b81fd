//! `sandbox.snapshot` and `snapshot.*`: a sandbox's filesystem kept as an image on the
//! server that runs it, listed, read and removed; who may see a snapshot is who may
//! see its project.
//!
//! Order: the quota is asked first (a full one costs no commit), the engine makes the
//! image (the sandbox frozen meanwhile; a pause or resume of it is refused until the
//! commit is done), then the row is kept with the quota checked again, now with the
//! size; an image the quota has no room for is removed.
//!
//! With `memory`, the sandbox's processes are saved at the instant of the image
//! (`memory.rs`).
//!
//! A snapshot runs in a task of its own, so it ends whatever its caller does; the
//! sandbox's stripe is held only to mark it as being snapshotted. Audited. A removal is
//! refused while the image is in use or another snapshot is built on it, waiting up to 10
//! s for the containers of sandboxes just killed.

use std::time::Duration;

use sandboxd_contracts::{Commit, EngineError};
use sandboxd_core::access::{Permission, SandboxNeed};
use sandboxd_core::model::Principal;
use sandboxd_core::snapshots::{self, Snapshot};
use sandboxd_core::validate::{self, TakeSnapshot};
use sandboxd_store::new_id;
use serde_json::json;
use tracing::{info, warn};

use super::Sandboxes;
use crate::{Resource, ServiceError, now_ms};

/// How long a removal waits for the containers of killed sandboxes to go.
const CONTAINERS_LEAVING: Duration = Duration::from_secs(10);

/// What an audit entry about a snapshot names.
fn resource(snapshot: &Snapshot) -> Resource<'_> {
    Resource {
        kind: "snapshot",
        id: &snapshot.snapshot_id,
        name: Some(&snapshot.name),
    }
}

impl Sandboxes {
    /// Takes a snapshot of a running or paused sandbox of the caller's. It goes on to
    /// its end when the caller goes away, so no image is left without its row.
    pub async fn snapshot(
        &self,
        caller: &Principal,
        cmd: TakeSnapshot,
    ) -> Result<Snapshot, ServiceError> {
        let (this, caller) = (self.clone(), caller.clone());
        tokio::spawn(async move { this.take_snapshot(&caller, cmd).await })
            .await
            .map_err(|_| ServiceError::Unavailable("the snapshot failed; retry".into()))?
    }

    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id))]
    pub(super) async fn take_snapshot(
        &self,
        caller: &Principal,
        cmd: TakeSnapshot,
    ) -> Result<Snapshot, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        let quotas = &self.service.inner.options.quotas;
        self.service
            .store()
            .admit_snapshot(&caller.organization_id, quotas)
            .await?;
        let engine = self
            .service
            .fleet()
            .engine_of(sandbox.server_id.as_deref())
            .await?;
        let snapshot_id = new_id()?;
        let image = snapshots::image_of(&snapshot_id);
        let commit = Commit {
            image: image.clone(),
            source_image: sandbox.image.clone(),
            snapshot_id: snapshot_id.clone(),
            instance_id: self.service.instance_id().to_owned(),
        };
        let freezes = &self.service.inner.freezes;
        let (size_bytes, memory) = {
            // Under the sandbox's stripe only while its state is read and the snapshot
            // marked: pauses and resumes of it are refused until the commit is done.
            let (row, container, _snapshotting) = {
                let _held = freezes.hold(&sandbox.sandbox_id).await;
                let row = self
                    .service
                    .store()
                    .sandbox(&sandbox.sandbox_id)
                    .await?
                    .ok_or(ServiceError::NotFound("sandbox"))?;
                let container = row.kept_container()?.to_owned();
                if cmd.memory {
                    super::memory::may_keep_memory(&row)?;
                }
                let marked = freezes.begin_snapshot(&sandbox.sandbox_id).ok_or_else(|| {
                    ServiceError::Conflict(
                        "a snapshot of this sandbox is being taken already; retry when it is done"
                            .into(),
                    )
                })?;
                (row, container, marked)
            };
            let taken = if cmd.memory {
                self.service
                    .commit_with_memory(&engine, &row, &container, &commit)
                    .await
                    .map(|(size, memory)| (size, Some(memory)))
            } else {
                engine
                    .commit_container(&container, &commit)
                    .await
                    .map(|size| (size, None))
                    .map_err(ServiceError::from)
            };
            match taken {
                Ok(taken) => taken,
                Err(ServiceError::Engine(EngineError::NotFound { .. })) => {
                    return Err(ServiceError::Conflict(
                        "the sandbox's container is gone; nothing to snapshot".into(),
                    ));
                }
                Err(error) => return Err(error),
            }
        };
        let snapshot = Snapshot {
            name: cmd.name.unwrap_or_else(|| {
                format!("{}-{}", sandbox.name, &snapshot_id[..6].to_lowercase())
            }),
            snapshot_id,
            organization_id: sandbox.organization_id.clone(),
            project_id: sandbox.project_id.clone(),
            sandbox_id: sandbox.sandbox_id.clone(),
            server_id: sandbox.server_id.clone(),
            image,
            source_image: sandbox.image.clone(),
            template: sandbox.template.clone(),
            user: sandbox.user.clone(),
            workdir: sandbox.workdir.clone(),
            size_bytes,
            created_at: now_ms(),
            memory,
        };
        if let Err(error) = self
            .service
            .store()
            .insert_snapshot(&snapshot, &caller.user_id, quotas)
            .await
        {
            if let Err(cleanup) = engine.remove_image(&snapshot.image).await {
                warn!(image = %snapshot.image, error = %cleanup, "could not remove the image of a snapshot that was not kept");
            }
            if snapshot.memory.is_some()
                && let Err(cleanup) = engine.drop_memory(&snapshot.snapshot_id).await
            {
                warn!(snapshot_id = %snapshot.snapshot_id, error = %cleanup, "could not remove the memory of a snapshot that was not kept");
            }
            return Err(error.into());
        }
        let memory_bytes = snapshot.memory.as_ref().map(|m| m.bytes);
        info!(snapshot_id = %snapshot.snapshot_id, size_bytes, memory_bytes, "snapshot taken");
        self.service
            .access()
            .record(
                &snapshot.organization_id,
                Some(caller),
                "sandbox.snapshot",
                Resource::sandbox(&sandbox),
                json!({"snapshotId": snapshot.snapshot_id, "sizeBytes": size_bytes, "memoryBytes": memory_bytes}),
            )
            .await;
        Ok(snapshot)
    }

    /// The snapshots of the caller's organization in projects the caller sees.
    pub async fn snapshots(&self, caller: &Principal) -> Result<Vec<Snapshot>, ServiceError> {
        self.service
            .access()
            .require(caller, SandboxNeed::Read.permission())?;
        let mut seen = Vec::new();
        for snapshot in self
            .service
            .store()
            .snapshots(&caller.organization_id)
            .await?
        {
            if self
                .service
                .access()
                .project_listed(caller, &snapshot.project_id)
                .await?
            {
                seen.push(snapshot);
            }
        }
        Ok(seen)
    }

    /// A snapshot the caller may see, with `permission`; one of another organization or
    /// of a project the caller does not see is not found.
    pub async fn snapshot_for(
        &self,
        caller: &Principal,
        snapshot_id: &str,
        permission: Permission,
    ) -> Result<Snapshot, ServiceError> {
        let id = validate::snapshot_id(snapshot_id)?;
        let snapshot = self
            .service
            .store()
            .snapshot(&caller.organization_id, &id)
            .await?
            .ok_or(ServiceError::NotFound("snapshot"))?;
        if !self
            .service
            .access()
            .project_listed(caller, &snapshot.project_id)
            .await?
        {
            return Err(ServiceError::NotFound("snapshot"));
        }
        self.service.access().require(caller, permission)?;
        Ok(snapshot)
    }

    /// Removes a snapshot and its image; refused while a sandbox made from it has its
    /// container.
    pub async fn remove_snapshot(
        &self,
        caller: &Principal,
        snapshot_id: &str,
    ) -> Result<Snapshot, ServiceError> {
        let snapshot = self
            .snapshot_for(caller, snapshot_id, SandboxNeed::Delete.permission())
            .await?;
        self.discard_snapshot(&snapshot).await?;
        self.service
            .access()
            .record(
                &snapshot.organization_id,
                Some(caller),
                "snapshot.remove",
                resource(&snapshot),
                json!({"sizeBytes": snapshot.size_bytes}),
            )
            .await;
        Ok(snapshot)
    }

    /// Removes a snapshot's image and row.
    pub(super) async fn discard_snapshot(&self, snapshot: &Snapshot) -> Result<(), ServiceError> {
        let engine = self
            .service
            .fleet()
            .engine_of(snapshot.server_id.as_deref())
            .await?;
        let in_use = || {
            ServiceError::Conflict(
                "sandboxes made from this snapshot are still running or paused; kill them first"
                    .into(),
            )
        };
        if self.service.store().image_in_use(&snapshot.image).await? {
            return Err(in_use());
        }
        if self
            .service
            .store()
            .image_under_snapshot(&snapshot.image)
            .await?
        {
            return Err(ServiceError::Conflict(
                "snapshots were taken of sandboxes made from this one, and are built on it; remove them first"
                    .into(),
            ));
        }
        // The containers of sandboxes killed a moment ago may still be on their way out
        // (a kill answers before its container is removed).
        let deadline = tokio::time::Instant::now() + CONTAINERS_LEAVING;
        loop {
            match engine.remove_image(&snapshot.image).await {
                Ok(()) => break,
                Err(EngineError::Rejected { status: 409, .. })
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(EngineError::Rejected { status: 409, .. }) => return Err(in_use()),
                Err(error) => return Err(error.into()),
            }
        }
        if snapshot.memory.is_some()
            && let Err(error) = engine.drop_memory(&snapshot.snapshot_id).await
        {
            warn!(snapshot_id = %snapshot.snapshot_id, error = %sandboxd_core::error::chain(&error), "could not remove a snapshot's memory from its engine's host");
        }
        self.service
            .store()
            .delete_snapshot(&snapshot.snapshot_id)
            .await?;
        Ok(())
    }
}
