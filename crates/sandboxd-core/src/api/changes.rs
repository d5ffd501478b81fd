//! `sandbox.changes`: the files a sandbox added, changed and removed since its image or
//! the snapshot it started from.
//!
//! `ChangesQuery`, `ChangeKind`, `ChangeEntry`, `ChangesResult`. A download takes
//! `changes` and `all` in place of `path` (`DownloadQuery`) for the changes as a tar.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::FileType;

/// Query of `sandbox.changes`.
#[derive(
    Debug, Clone, Default, Deserialize, ToSchema, IntoParams, schemars::JsonSchema, Serialize,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ChangesQuery {
    pub sandbox_id: String,
    /// Every changed path of its filesystem, not only those under its user's areas
    /// (its workdir, `/tmp`, `/var/tmp`). Default false.
    pub all: Option<bool>,
}

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Changed,
    Removed,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeEntry {
    pub path: String,
    pub kind: ChangeKind,
    /// What it is now (`null` when removed, or on images without GNU find).
    #[serde(rename = "type")]
    pub file_type: Option<FileType>,
    /// Its size in bytes now (files and links; `null` for directories and removed
    /// paths).
    pub size: Option<u64>,
    /// Its permission bits in octal, as `644`.
    #[serde(default)]
    pub mode: Option<String>,
    /// Where a link points.
    #[serde(default)]
    pub link_target: Option<String>,
}

/// Result of `sandbox.changes`, by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangesResult {
    /// The areas looked at (`["/"]` with `all`).
    pub areas: Vec<String>,
    pub changes: Vec<ChangeEntry>,
    /// At most 10,000 entries are listed; true when there were more.
    pub truncated: bool,
    /// The sizes of the files listed, added up.
    pub total_bytes: u64,
}
