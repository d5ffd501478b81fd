//! Volumes: an organization's named storage that outlives its sandboxes, on one server,
//! mounted into sandboxes at paths they choose (read-write or read-only). What a
//! volume's engine object is named and labelled, and which mount paths are allowed.
//!
//! A `VolumeMount` is kept with the sandbox, so a container made again for it mounts the
//! same. The engine's name of a volume is `sandboxd-vol-<id>` (`engine_name`), its labels
//! `sandboxd.volume` and the installation's (`engine_labels`). `mount_path_refusal`
//! refuses `/`, `/proc`, `/sys`, `/dev`, `/.sandboxd` and what is under them;
//! `overlapping` tells nesting paths; `common_server` is the one server a create's
//! volumes live on, or the two that differ. `MAX_MOUNTS` 8, `DEFAULT_SIZE_MB` 1024,
//! `MAX_SIZE_MB` 1 TiB.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::labels::{LABEL_INSTANCE, LABEL_PROJECT_ID};

/// Label of a volume's engine object: the volume's id.
pub const LABEL_VOLUME: &str = "sandboxd.volume";
/// A sandbox mounts at most this many volumes.
pub const MAX_MOUNTS: usize = 8;
/// The size a volume reserves against its organization's quota when none is given.
pub const DEFAULT_SIZE_MB: i64 = 1024;
/// The largest size a volume may reserve (1 TiB).
pub const MAX_SIZE_MB: i64 = 1024 * 1024;

/// Paths a volume may not be mounted at or under: the engine's and the kernel's, and
/// the agent's directory (whose binary and socket sandboxd mounts itself).
const RESERVED: [&str; 4] = ["/.sandboxd", "/proc", "/sys", "/dev"];

/// A volume of an organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub volume_id: String,
    pub organization_id: String,
    /// Who may see that project sees (and mounts) the volume.
    pub project_id: String,
    /// Unique in its project.
    pub name: String,
    /// The remote server it lives on; `None`: the local engine.
    pub server_id: Option<String>,
    /// What it reserves against the organization's quota (MiB).
    pub size_mb: i64,
    /// `creating` (its engine volume being made), `ready` (mountable) or `removing`
    /// (its engine volume on its way out; a removal asked again finishes it).
    pub status: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
}

/// A volume mounted into a sandbox: kept with the sandbox, so that a container made
/// again for it (a revival) mounts the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub volume_id: String,
    /// Absolute path inside the sandbox.
    pub path: String,
    /// Mounted read-only: nothing in the sandbox can write it.
    pub read_only: bool,
}

/// The name of a volume's object on its engine.
pub fn engine_name(volume_id: &str) -> String {
    format!("sandboxd-vol-{volume_id}")
}

/// The labels of a volume's engine object: its id, its project's and the
/// installation's.
pub fn engine_labels(volume: &Volume, instance_id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_VOLUME.to_owned(), volume.volume_id.clone()),
        (LABEL_PROJECT_ID.to_owned(), volume.project_id.clone()),
        (LABEL_INSTANCE.to_owned(), instance_id.to_owned()),
    ])
}

/// Why a (normalized, absolute) path cannot take a volume, if it cannot.
pub fn mount_path_refusal(path: &str) -> Option<&'static str> {
    if path == "/" {
        return Some("cannot be `/`");
    }
    RESERVED
        .iter()
        .any(|root| is_under(path, root))
        .then_some("cannot be /.sandboxd, /proc, /sys, /dev or under them")
}

/// Whether a (normalized) path is `root` or under it.
pub fn is_under(path: &str, root: &str) -> bool {
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether one of two (normalized) mount paths is the other or under it.
pub fn overlapping(a: &str, b: &str) -> bool {
    is_under(a, b) || is_under(b, a)
}

/// The ids of the volumes a sandbox's mounts name (each once).
pub fn mounted_ids(mounts: &[VolumeMount]) -> Vec<String> {
    let mut ids: Vec<String> = mounts.iter().map(|m| m.volume_id.clone()).collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The one server all these volumes live on, or the two that differ.
pub fn common_server(volumes: &[Volume]) -> Result<Option<Option<String>>, (String, String)> {
    let mut server: Option<&Option<String>> = None;
    for volume in volumes {
        match server {
            None => server = Some(&volume.server_id),
            Some(seen) if *seen != volume.server_id => {
                let show =
                    |s: &Option<String>| s.clone().unwrap_or_else(|| "the local engine".into());
                return Err((show(seen), show(&volume.server_id)));
            }
            Some(_) => {}
        }
    }
    Ok(server.cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_paths_take_no_volume() {
        for refused in [
            "/",
            "/proc",
            "/proc/1",
            "/sys",
            "/dev/shm",
            "/.sandboxd",
            "/.sandboxd/run",
        ] {
            assert!(mount_path_refusal(refused).is_some(), "{refused}");
        }
        for allowed in [
            "/data",
            "/home/user/work",
            "/process",
            "/devices",
            "/.sandboxdx",
            "/tmp",
        ] {
            assert!(mount_path_refusal(allowed).is_none(), "{allowed}");
        }
    }

    #[test]
    fn nested_paths_overlap() {
        assert!(overlapping("/data", "/data"));
        assert!(overlapping("/data", "/data/x"));
        assert!(overlapping("/data/x", "/data"));
        assert!(!overlapping("/data", "/database"));
        assert!(!overlapping("/a", "/b"));
    }

    #[test]
    fn volumes_on_two_servers_have_no_common_one() {
        let volume = |server: Option<&str>| Volume {
            volume_id: "v".into(),
            organization_id: "o".into(),
            project_id: "p".into(),
            name: "n".into(),
            server_id: server.map(str::to_owned),
            size_mb: 1,
            status: "ready".into(),
            created_at: 0,
        };
        assert_eq!(common_server(&[]), Ok(None));
        assert_eq!(
            common_server(&[volume(Some("s")), volume(Some("s"))]),
            Ok(Some(Some("s".into())))
        );
        assert_eq!(common_server(&[volume(None)]), Ok(Some(None)));
        assert_eq!(
            common_server(&[volume(None), volume(Some("s"))]),
            Err(("the local engine".into(), "s".into()))
        );
    }

    #[test]
    fn engine_objects_are_named_and_labelled_by_the_volume() {
        assert_eq!(engine_name("AbC"), "sandboxd-vol-AbC");
        let volume = Volume {
            volume_id: "AbC".into(),
            organization_id: "o".into(),
            project_id: "p".into(),
            name: "n".into(),
            server_id: None,
            size_mb: 1,
            status: "ready".into(),
            created_at: 0,
        };
        let labels = engine_labels(&volume, "inst");
        assert_eq!(labels[LABEL_VOLUME], "AbC");
        assert_eq!(labels[LABEL_PROJECT_ID], "p");
        assert_eq!(labels[LABEL_INSTANCE], "inst");
    }
}
