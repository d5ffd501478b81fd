//! The volume tools: make, list, read and remove volumes (sandbox-create mounts them).

use axum::http::request::Parts;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::*;
use sandboxd_core::validate;

use super::{SandboxTools, ToolResult, caller, failed, ok};
use crate::time::rfc3339;

#[tool_router(router = volume_tools, vis = "pub(super)")]
impl SandboxTools {
    #[tool(
        name = "volume-create",
        description = "Make a volume: named storage that outlives sandboxes. Mount it with sandbox-create {volumes: [{volumeId, path, readOnly?}]}; what one sandbox writes there the next one reads. name: 1–64 letters, digits, `.`, `_`, `-`. Optional sizeMb (reserved against your quota), projectId, serverId."
    )]
    async fn volume_create(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<CreateVolumeRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let command = attempt!(validate::create_volume(req));
        let volume = attempt!(self.service.sandboxes().create_volume(&who, command).await);
        ok(&VolumeView::from_volume(&volume, Vec::new(), rfc3339))
    }

    #[tool(
        name = "volume-all",
        description = "Your volumes, by name, with the sandboxes that mount each."
    )]
    async fn volumes(&self, Extension(parts): Extension<Parts>) -> ToolResult {
        let who = caller(&parts)?;
        let volumes = attempt!(self.service.sandboxes().volumes(&who).await);
        let views: Vec<VolumeView> = volumes
            .into_iter()
            .map(|(volume, users)| VolumeView::from_volume(&volume, users, rfc3339))
            .collect();
        ok(&views)
    }

    #[tool(name = "volume-one", description = "One volume, by volumeId.")]
    async fn volume_one(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<VolumeIdQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let sandboxes = self.service.sandboxes();
        let volume = attempt!(
            sandboxes
                .volume_for(&who, &req.volume_id, SandboxNeed::Read.permission())
                .await
        );
        let users = attempt!(sandboxes.volume_users(&who, &volume).await);
        ok(&VolumeView::from_volume(&volume, users, rfc3339))
    }

    #[tool(
        name = "volume-remove",
        description = "Remove a volume and everything in it. Refused while a running or paused sandbox mounts it."
    )]
    async fn volume_remove(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<VolumeIdBody>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        attempt!(
            self.service
                .sandboxes()
                .remove_volume(&who, &req.volume_id)
                .await
        );
        ok(&true)
    }
}
