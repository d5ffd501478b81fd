//! Checks of `volume.*` and of the volumes `sandbox.create` mounts.
//!
//! `CreateVolume` (the name; `sizeMb` 1–1048576, default 1024) and a volume id; `mounts`
//! checks a create's `volumes` into `CreateSandbox::volumes`: at most 8, paths normalized
//! and allowed, none nesting another.

use crate::api::{CreateVolumeRequest, VolumeMountRequest};
use crate::error::{Invalid, Issues};
use crate::paths;
use crate::volumes::{self, DEFAULT_SIZE_MB, MAX_MOUNTS, MAX_SIZE_MB, VolumeMount};

use super::required_id;

/// A checked `volume.create`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateVolume {
    pub name: String,
    pub project_id: Option<String>,
    pub server_id: Option<String>,
    pub size_mb: i64,
}

/// Checks `volume.create`.
pub fn create_volume(req: CreateVolumeRequest) -> Result<CreateVolume, Invalid> {
    let mut issues = Issues::default();
    let name_ok = (1..=64).contains(&req.name.len())
        && req
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !req.name.starts_with(['.', '-']);
    if !name_ok {
        issues.push(
            "name",
            "must be 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.` or `-`",
        );
    }
    if let Some(project) = &req.project_id {
        required_id(&mut issues, "projectId", project);
    }
    if let Some(server) = &req.server_id {
        required_id(&mut issues, "serverId", server);
    }
    let size_mb = req.size_mb.unwrap_or(DEFAULT_SIZE_MB);
    if !(1..=MAX_SIZE_MB).contains(&size_mb) {
        issues.push("sizeMb", "must be between 1 and 1048576");
    }
    issues.finish(CreateVolume {
        name: req.name,
        project_id: req.project_id,
        server_id: req.server_id,
        size_mb,
    })
}

/// Checks a volume id alone.
pub fn volume_id(value: &str) -> Result<String, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "volumeId", value);
    issues.finish(value.to_owned())
}

/// Checks the volumes of a `sandbox.create` into `issues`: ids, paths normalized and
/// allowed, at most 8, no two at nesting paths.
pub(super) fn mounts(issues: &mut Issues, requested: &[VolumeMountRequest]) -> Vec<VolumeMount> {
    if requested.len() > MAX_MOUNTS {
        issues.push("volumes", "must hold at most 8 volumes");
        return Vec::new();
    }
    let mut mounts: Vec<VolumeMount> = Vec::new();
    for (index, mount) in requested.iter().enumerate() {
        let field = |name: &str| format!("volumes[{index}].{name}");
        required_id(issues, &field("volumeId"), &mount.volume_id);
        let path = match paths::absolute(&field("path"), &mount.path) {
            Ok(path) => path,
            Err(invalid) => {
                for issue in invalid.issues {
                    issues.push(issue.path, issue.message);
                }
                continue;
            }
        };
        if let Some(refusal) = volumes::mount_path_refusal(&path) {
            issues.push(field("path"), refusal);
            continue;
        }
        if mounts.iter().any(|m| m.volume_id == mount.volume_id) {
            issues.push(field("volumeId"), "is mounted once only");
            continue;
        }
        if mounts.iter().any(|m| volumes::overlapping(&m.path, &path)) {
            issues.push(field("path"), "is, or nests with, another volume's path");
            continue;
        }
        mounts.push(VolumeMount {
            volume_id: mount.volume_id.clone(),
            path,
            read_only: mount.read_only.unwrap_or(false),
        });
    }
    mounts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str, size_mb: Option<i64>) -> CreateVolumeRequest {
        CreateVolumeRequest {
            name: name.into(),
            size_mb,
            ..Default::default()
        }
    }

    #[test]
    fn names_and_sizes_are_bounded() {
        let ok = create_volume(request("data-1.v2_x", None)).unwrap();
        assert_eq!(ok.size_mb, DEFAULT_SIZE_MB);
        for bad in ["", ".hidden", "-x", "a b", "a/b", &"x".repeat(65)] {
            assert_eq!(
                create_volume(request(bad, None)).unwrap_err().issues[0].path,
                "name",
                "{bad}"
            );
        }
        for bad in [0, -1, MAX_SIZE_MB + 1] {
            assert_eq!(
                create_volume(request("v", Some(bad))).unwrap_err().issues[0].path,
                "sizeMb"
            );
        }
    }

    #[test]
    fn mounts_are_normalized_distinct_and_away_from_system_paths() {
        let mount = |id: &str, path: &str| VolumeMountRequest {
            volume_id: id.into(),
            path: path.into(),
            read_only: None,
        };
        let mut issues = Issues::default();
        let checked = mounts(
            &mut issues,
            &[mount("a", "/data/"), mount("b", "/x/./y/../z")],
        );
        assert!(issues.finish(()).is_ok());
        assert_eq!(checked[0].path, "/data");
        assert_eq!(checked[1].path, "/x/z");
        assert!(!checked[0].read_only);
        for bad in [
            vec![mount("a", "relative")],
            vec![mount("a", "/")],
            vec![mount("a", "/proc/x")],
            vec![mount("a", "/.sandboxd")],
            vec![mount("", "/data")],
            vec![mount("a", "/data"), mount("b", "/data/inner")],
            vec![mount("a", "/data"), mount("a", "/other")],
            (0..9).map(|i| mount("a", &format!("/d{i}"))).collect(),
        ] {
            let mut issues = Issues::default();
            mounts(&mut issues, &bad);
            assert!(issues.finish(()).is_err(), "{bad:?}");
        }
    }
}
