//! `volume.*`: an organization's named storage, mounted into sandboxes by
//! `sandbox.create {volumes}`.
//!
//! `CreateVolumeRequest`, `VolumeIdBody`, `VolumeIdQuery`, `VolumeView` (with the live
//! sandboxes that mount it), and `VolumeMountRequest`, one of `sandbox.create {volumes}`.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::volumes::Volume;

/// Body of `volume.create`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateVolumeRequest {
    /// 1–64 letters, digits, `.`, `_` or `-`, unique in its project.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    /// The project whose members see and mount it (default: the caller's only project,
    /// required when the caller sees several).
    pub project_id: Option<String>,
    /// The remote server it lives on (`null`: the local engine); sandboxes that mount it
    /// run there.
    pub server_id: Option<String>,
    /// What it reserves against the organization's volume quota, in MiB, 1–1048576
    /// (default 1024). The local engine's volumes are not capped at this size.
    #[schema(minimum = 1, maximum = 1048576)]
    pub size_mb: Option<i64>,
}

/// Body of `volume.remove`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeIdBody {
    pub volume_id: String,
}

/// Query of `volume.one`.
#[derive(
    Debug, Clone, Default, Deserialize, ToSchema, IntoParams, schemars::JsonSchema, Serialize,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct VolumeIdQuery {
    pub volume_id: String,
}

/// One volume of `sandbox.create {volumes}`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMountRequest {
    pub volume_id: String,
    /// Absolute path inside the sandbox (not `/`, nor under /proc, /sys, /dev or
    /// /.sandboxd); made the sandbox user's unless read-only.
    #[schema(min_length = 1, max_length = 4096, pattern = "^/")]
    pub path: String,
    /// Nothing in the sandbox can write it (default false).
    pub read_only: Option<bool>,
}

/// A volume as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeView {
    pub volume_id: String,
    pub name: String,
    pub project_id: String,
    /// The remote server it lives on; `null`: the local engine.
    pub server_id: Option<String>,
    /// What it reserves against the organization's quota (MiB).
    pub size_mb: i64,
    /// `ready` (mountable), `creating` (being made) or `removing` (on its way out; a
    /// removal asked again finishes it).
    pub status: String,
    /// RFC 3339.
    pub created_at: String,
    /// The sandboxes being created, running or paused that mount it (a volume is
    /// removed only when there are none).
    pub sandboxes: Vec<String>,
}

impl VolumeView {
    /// The view of a volume mounted by `sandboxes`; `format_time` renders epoch
    /// milliseconds as RFC 3339.
    pub fn from_volume(
        volume: &Volume,
        sandboxes: Vec<String>,
        format_time: impl Fn(i64) -> String,
    ) -> Self {
        Self {
            volume_id: volume.volume_id.clone(),
            name: volume.name.clone(),
            project_id: volume.project_id.clone(),
            server_id: volume.server_id.clone(),
            size_mb: volume.size_mb,
            status: volume.status.clone(),
            created_at: format_time(volume.created_at),
            sandboxes,
        }
    }
}
