//! The snapshot procedures, typed: snapshot a sandbox, fork it, list, read and remove
//! snapshots.

use sandboxd_core::api::{
    ForkRequest, ForkResult, SnapshotIdBody, SnapshotIdQuery, SnapshotRequest, SnapshotView,
};

use sandboxd_core::api::procedures;

use crate::{Client, Error};

impl Client {
    /// `sandbox.snapshot`: the snapshot taken.
    pub async fn snapshot(&self, request: &SnapshotRequest) -> Result<SnapshotView, Error> {
        self.invoke::<procedures::SandboxSnapshot>(request).await
    }

    /// `sandbox.fork`: the snapshot taken and the sandboxes made from it.
    pub async fn fork(&self, request: &ForkRequest) -> Result<ForkResult, Error> {
        self.invoke::<procedures::SandboxFork>(request).await
    }

    /// `snapshot.all`.
    pub async fn snapshots(&self) -> Result<Vec<SnapshotView>, Error> {
        self.invoke::<procedures::SnapshotAll>(&procedures::NoArguments {})
            .await
    }

    /// `snapshot.one`.
    pub async fn snapshot_one(&self, snapshot_id: &str) -> Result<SnapshotView, Error> {
        let query = SnapshotIdQuery {
            snapshot_id: snapshot_id.to_owned(),
        };
        self.invoke::<procedures::SnapshotOne>(&query).await
    }

    /// `snapshot.remove`.
    pub async fn remove_snapshot(&self, snapshot_id: &str) -> Result<bool, Error> {
        let body = SnapshotIdBody {
            snapshot_id: snapshot_id.to_owned(),
        };
        self.invoke::<procedures::SnapshotRemove>(&body).await
    }
}
