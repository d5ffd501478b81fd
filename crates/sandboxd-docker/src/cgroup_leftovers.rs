//! The cgroup directories a removed container left on this host, one per controller.
//! The engine leaves them in two cases seen here: a container whose start failed under
//! gVisor (runsc made them; nothing removes them), and a container whose init was still
//! a zombie at its kill (a process of it stuck in the kernel): the engine's first removal
//! fails, and the one that later succeeds does not remove them. Once the container is gone,
//! what is left of them is removed: `rmdir` removes an empty cgroup only, so a
//! directory that still holds a process stays, and is tried again for a while.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cgroup_limits::{dirs_under, is_container_id};

/// How often, and how many times, directories still in use are tried again: runsc's
/// processes of a failed start end within a few seconds of the engine's removal.
const RETRY_EVERY: Duration = Duration::from_millis(500);
const TRIES: usize = 40;

/// The directories the engine's cgroup layouts (`cgroup_limits::dirs_under`: cgroupfs
/// and systemd drivers, cgroup v1 and v2) would give `container_id` under `root`, given
/// the hierarchies mounted there (`controllers`: the names of `root`'s entries). None
/// for anything but a container id, so that nothing else can be reached.
pub(crate) fn candidates(root: &Path, controllers: &[String], container_id: &str) -> Vec<PathBuf> {
    if !is_container_id(container_id) {
        return Vec::new();
    }
    let hierarchies = controllers
        .iter()
        .filter(|c| !c.is_empty() && !c.contains('/') && !c.starts_with('.'))
        .map(|c| root.join(c));
    std::iter::once(root.to_path_buf())
        .chain(hierarchies)
        .flat_map(|base| dirs_under(&base, container_id))
        .collect()
}

/// Removes what is left of a removed container's cgroup directories under `root`,
/// trying those still in use again for about 20 s. Blocking: run it off the runtime.
pub(crate) fn remove(root: &Path, container_id: &str) {
    remove_within(root, container_id, TRIES);
}

fn remove_within(root: &Path, container_id: &str, tries: usize) {
    let controllers: Vec<String> = std::fs::read_dir(root)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    let mut left: Vec<PathBuf> = candidates(root, &controllers, container_id)
        .into_iter()
        .filter(|dir| dir.is_dir())
        .collect();
    for attempt in 1..=tries {
        // A controller mounted twice (`cpu` and `cpuacct`) names one directory twice:
        // gone is gone.
        left.retain(|dir| std::fs::remove_dir(dir).is_err() && dir.is_dir());
        if left.is_empty() {
            return;
        }
        if attempt < tries {
            std::thread::sleep(RETRY_EVERY);
        }
    }
    tracing::warn!(
        container_id,
        left = ?left,
        "cgroup directories of a removed container are still in use"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0a8122bd3c1145c72768138d23987f1963253b4382296d32a3e0be6278b4c0af";

    #[test]
    fn every_layout_of_every_hierarchy_is_a_candidate() {
        let dirs = candidates(
            Path::new("/sys/fs/cgroup"),
            &["memory".into(), "pids".into()],
            ID,
        );
        let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        assert_eq!(
            shown,
            [
                format!("/sys/fs/cgroup/docker/{ID}"),
                format!("/sys/fs/cgroup/system.slice/docker-{ID}.scope"),
                format!("/sys/fs/cgroup/memory/docker/{ID}"),
                format!("/sys/fs/cgroup/memory/system.slice/docker-{ID}.scope"),
                format!("/sys/fs/cgroup/pids/docker/{ID}"),
                format!("/sys/fs/cgroup/pids/system.slice/docker-{ID}.scope"),
            ]
        );
    }

    #[test]
    fn nothing_but_a_container_id_reaches_a_path() {
        let root = Path::new("/sys/fs/cgroup");
        for id in ["", "..", "../../etc", &ID[1..], &format!("{}/", &ID[1..])] {
            assert!(candidates(root, &["memory".into()], id).is_empty(), "{id}");
        }
        let odd = candidates(root, &["..".into(), "a/b".into(), String::new()], ID);
        assert_eq!(odd.len(), 2, "only the root's own layouts: {odd:?}");
    }

    #[test]
    fn empty_directories_are_removed_and_others_left() {
        let root = tempfile::tempdir().unwrap();
        let empty = root.path().join("memory/docker").join(ID);
        let held = root.path().join("pids/docker").join(ID);
        std::fs::create_dir_all(&empty).unwrap();
        std::fs::create_dir_all(&held).unwrap();
        // A directory that cannot be removed (here: not empty) stands for one in use.
        std::fs::write(held.join("cgroup.procs"), "1\n").unwrap();
        let other = root.path().join("memory/docker").join(ID.replace('0', "1"));
        std::fs::create_dir_all(&other).unwrap();
        remove_within(root.path(), ID, 1);
        assert!(!empty.exists());
        assert!(held.exists());
        assert!(other.exists(), "another container's is not touched");
    }
}
