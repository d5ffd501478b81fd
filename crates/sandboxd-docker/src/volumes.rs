//! Volumes: the engine's named volumes (local driver) that sandboxd's volumes are,
//! made labelled, checked before a container mounts one, and removed.
//!
//! `volume_exists`: a volume missing from the engine is `NotFound`, never made again
//! empty by a container's mount. A volume a container still uses is `Rejected` (409) on
//! removal.

use std::collections::BTreeMap;

use bollard::models::{MountType, VolumeCreateRequest};
use bollard::query_parameters::{ContainerArchiveInfoOptionsBuilder, RemoveVolumeOptionsBuilder};
use sandboxd_core::volumes::LABEL_VOLUME;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify, status_of};

impl DockerEngine {
    pub(crate) async fn create_volume(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        let request = VolumeCreateRequest {
            name: Some(name.to_owned()),
            driver: Some("local".into()),
            labels: Some(labels.clone().into_iter().collect()),
            ..Default::default()
        };
        bounded("create volume", self.docker.create_volume(request))
            .await?
            .map_err(|e| classify("volume", e))?;
        Ok(())
    }

    pub(crate) async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        let options = RemoveVolumeOptionsBuilder::default().force(false).build();
        match bounded(
            "remove volume",
            self.docker.remove_volume(name, Some(options)),
        )
        .await?
        {
            Ok(()) => Ok(()),
            Err(e) if status_of(&e) == Some(404) => Ok(()),
            Err(e) if status_of(&e) == Some(409) => Err(EngineError::Rejected {
                status: 409,
                message: "the volume is in use by a container".into(),
            }),
            Err(e) => Err(classify("volume", e)),
        }
    }
}

/// Go's `os.ModeSymlink`, as the engine reports a path's mode.
const MODE_SYMLINK: u32 = 1 << 27;

impl DockerEngine {
    /// Whether the volume of that name is one sandboxd made (labelled with its id).
    pub(crate) async fn volume_is_ours(&self, name: &str) -> Result<bool, EngineError> {
        let Some(id) = name.strip_prefix("sandboxd-vol-") else {
            return Ok(false);
        };
        match bounded("inspect volume", self.docker.inspect_volume(name)).await? {
            Ok(volume) => Ok(volume.labels.get(LABEL_VOLUME).map(String::as_str) == Some(id)),
            Err(e) if status_of(&e) == Some(404) => Ok(false),
            Err(e) => Err(classify("volume", e)),
        }
    }

    /// Refuses a container with volumes when a path one of its mounts (the agent's
    /// included) goes through is a symbolic link in its filesystem: the engine would
    /// follow it, and a volume could land on the agent's binary or on `/dev`. Every
    /// prefix of every mount target is looked at (the engine reports the last part of a
    /// path as it is, without following it). A container without volumes is left alone.
    pub(crate) async fn check_mount_paths(&self, id: &str) -> Result<(), EngineError> {
        let container = self.inspect(id).await?;
        let mounts = container
            .host_config
            .and_then(|config| config.mounts)
            .unwrap_or_default();
        if !mounts.iter().any(|m| m.typ == Some(MountType::VOLUME)) {
            return Ok(());
        }
        // Every prefix at once: a stopped container's filesystem is mounted for each
        // look (about 10 ms).
        let wanted: std::collections::BTreeSet<String> = mounts
            .iter()
            .filter_map(|m| m.target.as_deref())
            .flat_map(prefixes)
            .collect();
        let looks = futures_util::future::join_all(wanted.iter().map(|prefix| async move {
            let options = ContainerArchiveInfoOptionsBuilder::default()
                .path(prefix)
                .build();
            let stat = bounded(
                "stat path",
                self.docker.get_container_archive_info(id, Some(options)),
            )
            .await;
            (prefix, stat)
        }))
        .await;
        for (prefix, stat) in looks {
            match stat? {
                Ok(stat) if stat.file_mode & MODE_SYMLINK != 0 => {
                    return Err(EngineError::Unsafe(format!(
                        "{prefix} is a symbolic link in the sandbox's filesystem: a volume is never mounted through one (mount it at the link's target, or elsewhere)"
                    )));
                }
                Ok(_) => {}
                // Nothing there (nor under it): the engine makes it a directory.
                Err(e) if status_of(&e) == Some(404) => {}
                Err(e) => return Err(classify("path", e)),
            }
        }
        Ok(())
    }
}

/// `/a`, `/a/b`, `/a/b/c` of `/a/b/c`.
fn prefixes(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        current.push('/');
        current.push_str(part);
        out.push(current.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_prefix_of_a_path_is_looked_at() {
        assert_eq!(
            super::prefixes("/w/x//y"),
            ["/w", "/w/x", "/w/x/y"].map(String::from)
        );
        assert!(super::prefixes("/").is_empty());
    }
}
