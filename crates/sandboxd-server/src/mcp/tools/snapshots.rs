//! The snapshot tools: snapshot a sandbox, fork it, list, read and remove snapshots.

use axum::http::request::Parts;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::*;
use sandboxd_core::validate;

use super::{SandboxTools, ToolResult, caller, failed, ok};
use crate::time::rfc3339;

#[tool_router(router = snapshot_tools, vis = "pub(super)")]
impl SandboxTools {
    #[tool(
        name = "sandbox-snapshot",
        description = "Snapshot a sandbox's files (the sandbox is frozen for the moment it takes). Start new sandboxes from it with sandbox-create {snapshotId}: they get the files, the user and the working directory, not the processes, memory or environment variables. Optional name."
    )]
    async fn snapshot(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SnapshotRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let command = attempt!(validate::take_snapshot(req));
        let snapshot = attempt!(self.service.sandboxes().snapshot(&who, command).await);
        ok(&SnapshotView::from_snapshot(&snapshot, rfc3339))
    }

    #[tool(
        name = "sandbox-fork",
        description = "Fork a sandbox into count (1–20, default 1) new sandboxes that start with a copy of its files, its limits and network: use it to try several approaches from the same state. Processes, memory and environment variables are not carried (give envVars). Returns the snapshot taken and the new sandboxes."
    )]
    async fn fork(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ForkRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let command = attempt!(validate::fork(req));
        let (snapshot, sandboxes) = attempt!(self.service.sandboxes().fork(&who, command).await);
        ok(&ForkResult {
            snapshot: SnapshotView::from_snapshot(&snapshot, rfc3339),
            sandboxes: sandboxes
                .iter()
                .map(|sandbox| SandboxView::from_sandbox(sandbox, rfc3339))
                .collect(),
        })
    }

    #[tool(
        name = "snapshot-all",
        description = "Your snapshots, newest first, with their sizes and the sandboxes they were taken of."
    )]
    async fn snapshots(&self, Extension(parts): Extension<Parts>) -> ToolResult {
        let who = caller(&parts)?;
        let snapshots = attempt!(self.service.sandboxes().snapshots(&who).await);
        let views: Vec<SnapshotView> = snapshots
            .iter()
            .map(|snapshot| SnapshotView::from_snapshot(snapshot, rfc3339))
            .collect();
        ok(&views)
    }

    #[tool(name = "snapshot-one", description = "One snapshot, by snapshotId.")]
    async fn snapshot_one(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SnapshotIdQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let snapshot = attempt!(
            self.service
                .sandboxes()
                .snapshot_for(&who, &req.snapshot_id, SandboxNeed::Read.permission())
                .await
        );
        ok(&SnapshotView::from_snapshot(&snapshot, rfc3339))
    }

    #[tool(
        name = "snapshot-remove",
        description = "Remove a snapshot you no longer need (snapshots count against your organization's quota). Refused while sandboxes made from it are running or paused."
    )]
    async fn snapshot_remove(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SnapshotIdBody>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        attempt!(
            self.service
                .sandboxes()
                .remove_snapshot(&who, &req.snapshot_id)
                .await
        );
        ok(&true)
    }
}
