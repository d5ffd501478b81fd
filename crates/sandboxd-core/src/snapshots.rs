//! Snapshots: a sandbox's filesystem kept as an image on the server that ran it, and
//! the sandboxes started from one. What a snapshot's image is named and labelled, what
//! of its sandbox it keeps (files, the user and workdir) and what it never keeps (the
//! values of the sandbox's environment: its secrets and its agent key).
//!
//! A snapshot's image is `sandboxd-snapshots:<id>` (`image_of`). `names_snapshot_image`:
//! an `image` a create names that is a snapshot's, however written, is refused; only
//! `snapshotId` reaches one. `scrubbed_env` keeps the image's own environment entries,
//! then only the names of the variables only the container had: no value of the
//! container's reaches the image's configuration (a sandbox's `envVars` are given per
//! command and are never in it). `snapshot_labels` are the source image's labels,
//! `sandboxd.snapshot`, the installation's, and the pool label emptied, so a claimed warm
//! sandbox's pool is not copied onto the sandboxes started from it; `in_pool` is what
//! `reap.rs` asks. `MAX_FORK` is 20.

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::{LABEL_INSTANCE, LABEL_POOL};

/// Label of a snapshot's image: the snapshot's id.
pub const LABEL_SNAPSHOT: &str = "sandboxd.snapshot";

/// The repository of snapshot images; each snapshot is a tag of it.
pub const SNAPSHOT_REPOSITORY: &str = "sandboxd-snapshots";

/// A fork makes at most this many sandboxes at once.
pub const MAX_FORK: i64 = 20;

/// A snapshot of a sandbox's filesystem.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub snapshot_id: String,
    pub organization_id: String,
    /// The project of the sandbox it was taken of; who may see that project sees it.
    pub project_id: String,
    pub name: String,
    /// The sandbox it was taken of.
    pub sandbox_id: String,
    /// The remote server its image lives on; `None`: the local engine.
    pub server_id: Option<String>,
    /// The snapshot's image on that server.
    pub image: String,
    /// The image the sandbox was started from (a template's, or another snapshot's).
    pub source_image: String,
    pub template: Option<String>,
    /// `uid:gid` the sandbox ran as; sandboxes started from it run so.
    pub user: Option<String>,
    pub workdir: String,
    /// What the snapshot adds to the image under it, in bytes.
    pub size_bytes: i64,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// The sandbox's processes and memory, when it was taken with them.
    pub memory: Option<KeptMemory>,
}

/// The memory of a snapshot taken with it: the sandbox's processes saved at the instant
/// of the image, kept on its engine's host.
#[derive(Clone, PartialEq, Eq)]
pub struct KeptMemory {
    /// Bytes kept on the engine's host.
    pub bytes: i64,
    /// The agent key the saved agent holds (its sandbox's at that instant, replaced there
    /// since): a sandbox started from the snapshot takes it once, then gives its agent
    /// its own. Never shown.
    pub agent_key: String,
}

/// Never prints the key.
impl std::fmt::Debug for KeptMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptMemory")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

/// The name of the checkpoint that carries a snapshot's memory into a container.
pub const MEMORY_CHECKPOINT: &str = "memory";

/// The image reference of a snapshot.
pub fn image_of(snapshot_id: &str) -> String {
    format!("{SNAPSHOT_REPOSITORY}:{snapshot_id}")
}

/// Whether an image reference names a snapshot's image (which only `snapshotId`
/// reaches, with its access checked), or a built template's or a build step's (which
/// only `template` reaches, in the caller's project).
pub fn names_snapshot_image(reference: &str) -> bool {
    let normalized = crate::images::normalize(reference);
    [
        SNAPSHOT_REPOSITORY,
        crate::template_build::TEMPLATE_REPOSITORY,
        crate::template_build::CACHE_REPOSITORY,
    ]
    .iter()
    .any(|repository| {
        normalized
            .strip_prefix(&format!("docker.io/library/{repository}"))
            .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('@'))
    })
}

/// The environment a snapshot's image is given: the image's own entries as they are,
/// then every name only the container had, without a value. The engine keeps each
/// variable of the container the image does not name, value and all; naming it
/// without a value is the only way to leave the value out (a name alone sets nothing
/// in a process started from the image).
pub fn scrubbed_env(image_env: &[String], container_env: &[String]) -> Vec<String> {
    let name = |entry: &str| entry.split('=').next().unwrap_or_default().to_owned();
    let named: BTreeSet<String> = image_env.iter().map(|e| name(e)).collect();
    let mut env = image_env.to_vec();
    let mut added = BTreeSet::new();
    for entry in container_env {
        let key = name(entry);
        if !key.is_empty() && !named.contains(&key) && added.insert(key.clone()) {
            env.push(key);
        }
    }
    env
}

/// The labels of a snapshot's image: the image's own, the snapshot's id and the
/// installation's, and the pool label emptied (a claimed warm sandbox's container
/// carries its pool's name, which the engine would otherwise copy onto the image and
/// from it onto every sandbox started from it).
pub fn snapshot_labels(
    image_labels: &BTreeMap<String, String>,
    snapshot_id: &str,
    instance_id: &str,
) -> BTreeMap<String, String> {
    let mut labels = image_labels.clone();
    labels.insert(LABEL_POOL.to_owned(), String::new());
    labels.insert(LABEL_SNAPSHOT.to_owned(), snapshot_id.to_owned());
    labels.insert(LABEL_INSTANCE.to_owned(), instance_id.to_owned());
    labels
}

/// Whether a container's pool label names a pool (an emptied one does not).
pub fn in_pool(labels: &BTreeMap<String, String>) -> bool {
    labels.get(LABEL_POOL).is_some_and(|pool| !pool.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_environment_keeps_the_images_values_and_only_the_names_of_the_rest() {
        let image = strings(&["PATH=/usr/bin:/bin", "LANG=C.UTF-8"]);
        let container = strings(&[
            "PATH=/usr/bin:/bin",
            "LANG=C.UTF-8",
            "HOME=/home/user",
            "API_TOKEN=hunter2",
            "SANDBOXD_AGENT_KEY=secret",
            "API_TOKEN=again",
        ]);
        let env = scrubbed_env(&image, &container);
        assert_eq!(
            env,
            strings(&[
                "PATH=/usr/bin:/bin",
                "LANG=C.UTF-8",
                "HOME",
                "API_TOKEN",
                "SANDBOXD_AGENT_KEY"
            ])
        );
        assert!(
            env.iter()
                .all(|e| !e.contains("hunter2") && !e.contains("secret"))
        );
    }

    #[test]
    fn a_variable_the_image_names_keeps_the_images_value() {
        let env = scrubbed_env(&strings(&["LANG=C"]), &strings(&["LANG=secret"]));
        assert_eq!(env, strings(&["LANG=C"]));
    }

    #[test]
    fn labels_name_the_snapshot_and_empty_the_pool() {
        let image = BTreeMap::from([
            ("maintainer".to_owned(), "x".to_owned()),
            (LABEL_POOL.to_owned(), "python".to_owned()),
        ]);
        let labels = snapshot_labels(&image, "S1", "inst");
        assert_eq!(labels[LABEL_SNAPSHOT], "S1");
        assert_eq!(labels[LABEL_INSTANCE], "inst");
        assert_eq!(labels["maintainer"], "x");
        assert!(!in_pool(&labels));
        assert!(in_pool(&image));
        assert_eq!(image_of("AbC"), "sandboxd-snapshots:AbC");
    }

    #[test]
    fn snapshot_images_are_recognised_however_they_are_written() {
        for named in [
            "sandboxd-snapshots:AbC",
            "sandboxd-snapshots",
            "library/sandboxd-snapshots:x",
            "docker.io/library/sandboxd-snapshots:x",
            "sandboxd-snapshots@sha256:00",
            "sandboxd-templates:abc",
            "sandboxd-build-cache:0f",
        ] {
            assert!(names_snapshot_image(named), "{named}");
        }
        for other in [
            "sandboxd-snapshots2:x",
            "me/sandboxd-snapshots:x",
            "busybox",
        ] {
            assert!(!names_snapshot_image(other), "{other}");
        }
    }
}
