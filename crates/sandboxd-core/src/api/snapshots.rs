//! `sandbox.snapshot`, `sandbox.fork` and `snapshot.*`: a sandbox's filesystem kept as
//! an image, and sandboxes started from it.
//!
//! `SnapshotView`, and `ForkResult`: the snapshot and the sandboxes made from it.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::SandboxView;
use crate::snapshots::Snapshot;

/// Body of `sandbox.snapshot`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRequest {
    pub sandbox_id: String,
    /// Display name (1–64 characters); generated when absent.
    #[schema(min_length = 1, max_length = 64)]
    pub name: Option<String>,
    /// Keep the sandbox's processes and memory too (a sandbox of the gvisor tier on the
    /// local engine): a sandbox made from the snapshot continues them. Default false:
    /// files only.
    #[serde(default)]
    pub memory: Option<bool>,
}

/// Body of `snapshot.remove`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotIdBody {
    pub snapshot_id: String,
}

/// Query of `snapshot.one`.
#[derive(
    Debug, Clone, Default, Deserialize, ToSchema, IntoParams, schemars::JsonSchema, Serialize,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct SnapshotIdQuery {
    pub snapshot_id: String,
}

/// Body of `sandbox.fork`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkRequest {
    pub sandbox_id: String,
    /// How many sandboxes to make, 1–20 (default 1).
    #[schema(minimum = 1, maximum = 20)]
    pub count: Option<i64>,
    /// `KEY=value` lines given to every fork (≤ 64 KiB): the source's variables are
    /// not carried.
    pub env_vars: Option<String>,
    /// Idle timeout of each fork in ms, 10 s–24 h (default: the source's).
    #[schema(minimum = 10000, maximum = 86400000)]
    pub timeout_ms: Option<i64>,
    /// Each fork continues the source's processes from one instant, with their memory
    /// (a sandbox of the gvisor tier on the local engine). Default false: files only.
    #[serde(default)]
    pub memory: Option<bool>,
}

/// A snapshot as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotView {
    pub snapshot_id: String,
    pub name: String,
    pub project_id: String,
    /// The sandbox it was taken of.
    pub sandbox_id: String,
    /// The remote server it lives on (sandboxes made from it run there); `null`: the
    /// local engine.
    pub server_id: Option<String>,
    /// The image the sandbox was started from.
    pub source_image: String,
    pub template: Option<String>,
    /// `uid:gid` sandboxes made from it run as (unless the create says otherwise).
    pub user: Option<String>,
    /// Their working directory, unless the create gives one.
    pub workdir: String,
    /// What it adds to the image under it.
    pub size_bytes: i64,
    /// The bytes of the processes' memory it keeps; `null`: files only.
    #[serde(default)]
    pub memory_bytes: Option<i64>,
    /// RFC 3339.
    pub created_at: String,
}

impl SnapshotView {
    /// The view of a snapshot; `format_time` renders epoch milliseconds as RFC 3339.
    pub fn from_snapshot(snapshot: &Snapshot, format_time: impl Fn(i64) -> String) -> Self {
        Self {
            snapshot_id: snapshot.snapshot_id.clone(),
            name: snapshot.name.clone(),
            project_id: snapshot.project_id.clone(),
            sandbox_id: snapshot.sandbox_id.clone(),
            server_id: snapshot.server_id.clone(),
            source_image: snapshot.source_image.clone(),
            template: snapshot.template.clone(),
            user: snapshot.user.clone(),
            workdir: snapshot.workdir.clone(),
            size_bytes: snapshot.size_bytes,
            memory_bytes: snapshot.memory.as_ref().map(|m| m.bytes),
            created_at: format_time(snapshot.created_at),
        }
    }
}

/// Result of `sandbox.fork`: the snapshot taken and the sandboxes made from it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForkResult {
    /// Kept like any snapshot (remove it once the forks are gone).
    pub snapshot: SnapshotView,
    pub sandboxes: Vec<SandboxView>,
}
