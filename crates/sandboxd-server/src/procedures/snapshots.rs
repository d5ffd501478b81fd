//! `sandbox.snapshot`, `sandbox.fork` and `snapshot.*`.

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::snapshots::Snapshot;
use sandboxd_core::validate;

use super::{Context, Serve};
use crate::error::ApiError;
use crate::time::rfc3339;

fn view(snapshot: &Snapshot) -> SnapshotView {
    SnapshotView::from_snapshot(snapshot, rfc3339)
}

impl Serve for procedures::SandboxSnapshot {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SnapshotRequest,
    ) -> Result<SnapshotView, ApiError> {
        let cmd = validate::take_snapshot(request)?;
        Ok(view(&cx.service.sandboxes().snapshot(&caller, cmd).await?))
    }
}

impl Serve for procedures::SandboxFork {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ForkRequest,
    ) -> Result<ForkResult, ApiError> {
        let cmd = validate::fork(request)?;
        let (snapshot, sandboxes) = cx.service.sandboxes().fork(&caller, cmd).await?;
        Ok(ForkResult {
            snapshot: view(&snapshot),
            sandboxes: sandboxes
                .iter()
                .map(|sandbox| SandboxView::from_sandbox(sandbox, rfc3339))
                .collect(),
        })
    }
}

impl Serve for procedures::SnapshotAll {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<Vec<SnapshotView>, ApiError> {
        let snapshots = cx.service.sandboxes().snapshots(&caller).await?;
        Ok(snapshots.iter().map(view).collect())
    }
}

impl Serve for procedures::SnapshotOne {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SnapshotIdQuery,
    ) -> Result<SnapshotView, ApiError> {
        Ok(view(
            &cx.service
                .sandboxes()
                .snapshot_for(
                    &caller,
                    &request.snapshot_id,
                    SandboxNeed::Read.permission(),
                )
                .await?,
        ))
    }
}

impl Serve for procedures::SnapshotRemove {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SnapshotIdBody,
    ) -> Result<bool, ApiError> {
        cx.service
            .sandboxes()
            .remove_snapshot(&caller, &request.snapshot_id)
            .await?;
        Ok(true)
    }
}
