//! A container's memory kept apart from it (a snapshot with memory), and given to other
//! containers to start from. The engine has no call for either: its checkpoints belong to
//! one container, and a start reads only the container's own. With sandboxd's runtime
//! wrapper (`scripts/runsc-in-place.sh`), a checkpoint the engine holds is one small file
//! naming the directory where the runtime wrote the memory; so here, on the engine's own
//! host, that directory is moved to `<data root>/sandboxd-memory/<kept>` (readable by root
//! only, removed with the snapshot), and a container to start from it gets a checkpoint
//! of its own naming it. The runtime reads the memory once, as the container starts.
//!
//! This needs the engine's data root on this host, writable: the local engine, with
//! sandboxd run as root. Anything else is refused with what it needs.

use std::path::{Path, PathBuf};

use crate::engine::DockerEngine;
use crate::error::EngineError;

/// The file of a checkpoint naming where its memory is (the wrapper's).
const MARKER: &str = "sandboxd-checkpoint";
/// What is said when the engine's data root is out of sandboxd's reach.
const NEEDS_ROOT: &str = "sandboxd cannot reach the engine's data root on this host: memory snapshots need sandboxd on the engine's host, run as root";
/// Where kept memory lives under the engine's data root.
const KEPT: &str = "sandboxd-memory";

impl DockerEngine {
    /// The engine's data root, when it is on this host and writable by sandboxd.
    async fn local_data_root(&self) -> Result<PathBuf, EngineError> {
        if self.session.is_some() {
            return Err(refused(
                "memory is kept on the local engine only; this is a remote server's",
            ));
        }
        let info = crate::engine::bounded("info", self.docker.info())
            .await?
            .map_err(crate::error::fault)?;
        let root = info
            .docker_root_dir
            .map(PathBuf::from)
            .ok_or_else(|| refused("the engine does not say where its data root is"))?;
        if !root.join("containers").is_dir() {
            return Err(refused(NEEDS_ROOT));
        }
        Ok(root)
    }

    /// See [`sandboxd_contracts::Engine::keep_memory`].
    pub(crate) async fn keep_memory(
        &self,
        id: &str,
        name: &str,
        kept: &str,
    ) -> Result<u64, EngineError> {
        for part in [id, name, kept] {
            plain(part)?;
        }
        let root = self.local_data_root().await?;
        let (id, name, kept) = (id.to_owned(), name.to_owned(), kept.to_owned());
        let moved = tokio::task::spawn_blocking(move || move_out(&root, &id, &name, &kept))
            .await
            .map_err(|e| EngineError::Engine(e.into()))?;
        moved.map_err(io_refusal)
    }

    /// See [`sandboxd_contracts::Engine::place_memory`].
    pub(crate) async fn place_memory(
        &self,
        kept: &str,
        id: &str,
        name: &str,
    ) -> Result<(), EngineError> {
        for part in [id, name, kept] {
            plain(part)?;
        }
        let root = self.local_data_root().await?;
        let (id, name, kept) = (id.to_owned(), name.to_owned(), kept.to_owned());
        tokio::task::spawn_blocking(move || place(&root, &kept, &id, &name))
            .await
            .map_err(|e| EngineError::Engine(e.into()))?
            .map_err(io_refusal)
    }

    /// See [`sandboxd_contracts::Engine::checkpoint_bytes`].
    pub(crate) async fn checkpoint_bytes(&self, id: &str, name: &str) -> Result<u64, EngineError> {
        for part in [id, name] {
            plain(part)?;
        }
        let root = self.local_data_root().await?;
        let (id, name) = (id.to_owned(), name.to_owned());
        tokio::task::spawn_blocking(move || {
            pages_of(&root.join("containers").join(&id), &name).map(|pages| bytes_under(&pages))
        })
        .await
        .map_err(|e| EngineError::Engine(e.into()))?
        .map_err(io_refusal)
    }

    /// See [`sandboxd_contracts::Engine::drop_memory`].
    pub(crate) async fn drop_memory(&self, kept: &str) -> Result<(), EngineError> {
        plain(kept)?;
        let root = self.local_data_root().await?;
        let dir = root.join(KEPT).join(kept);
        tokio::task::spawn_blocking(move || match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        })
        .await
        .map_err(|e| EngineError::Engine(e.into()))?
        .map_err(io_refusal)
    }
}

/// Moves the memory named by the container's checkpoint `name` to `<root>/KEPT/<kept>`;
/// returns its bytes. The checkpoint itself is left for the engine to remove.
fn move_out(root: &Path, id: &str, name: &str, kept: &str) -> std::io::Result<u64> {
    let pages = pages_of(&root.join("containers").join(id), name)?;
    let place = root.join(KEPT);
    std::fs::create_dir_all(&place)?;
    set_mode(&place, 0o700)?;
    let to = place.join(kept);
    std::fs::rename(&pages, &to)?;
    Ok(bytes_under(&to))
}

/// The directory of the memory the container's checkpoint `name` names, checked to be
/// the container's own.
fn pages_of(container: &Path, name: &str) -> std::io::Result<PathBuf> {
    let marker = container.join("checkpoints").join(name).join(MARKER);
    let named = std::fs::read_to_string(&marker).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "the checkpoint names no memory ({}): the engine's runtime is not registered by scripts/gvisor.sh",
                marker.display()
            ),
        )
    })?;
    let pages = PathBuf::from(named.lines().next().unwrap_or_default());
    let climbs = pages
        .components()
        .any(|c| c == std::path::Component::ParentDir);
    if climbs || !pages.starts_with(container.join("sandboxd-checkpoints")) || !pages.is_dir() {
        return Err(std::io::Error::other(format!(
            "the checkpoint names {}, not a directory of its container's",
            pages.display()
        )));
    }
    Ok(pages)
}

/// Gives the container `id` the checkpoint `name` naming the memory kept as `kept`.
fn place(root: &Path, kept: &str, id: &str, name: &str) -> std::io::Result<()> {
    let memory = root.join(KEPT).join(kept);
    if !memory.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no memory is kept as {kept}"),
        ));
    }
    let container = root.join("containers").join(id);
    if !container.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no container {id} on this host"),
        ));
    }
    let checkpoints = container.join("checkpoints");
    std::fs::create_dir_all(&checkpoints)?;
    set_mode(&checkpoints, 0o700)?;
    let dir = checkpoints.join(name);
    std::fs::create_dir(&dir)?;
    set_mode(&dir, 0o700)?;
    // The container's id makes each container's checkpoint differ from its siblings'
    // (the engine refuses two starts carrying the same bytes at once).
    std::fs::write(dir.join(MARKER), format!("{}\n{id}\n", memory.display()))
}

/// The bytes of the files under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => bytes_under(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// A part of a path that is a plain name (an id): letters, digits, `-` and `_`.
fn plain(part: &str) -> Result<(), EngineError> {
    let ok = !part.is_empty()
        && part.len() <= 128
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(EngineError::Unsafe(format!("{part:?} is not a plain name")))
    }
}

fn refused(message: &str) -> EngineError {
    EngineError::Rejected {
        status: 501,
        message: message.to_owned(),
    }
}

/// A failure on the host's files: what is missing is not found, the rest the engine's
/// refusal with the cause (for the log).
fn io_refusal(error: std::io::Error) -> EngineError {
    match error.kind() {
        std::io::ErrorKind::PermissionDenied => refused(NEEDS_ROOT),
        std::io::ErrorKind::NotFound => EngineError::Rejected {
            status: 404,
            message: error.to_string(),
        },
        _ => EngineError::Rejected {
            status: 500,
            message: error.to_string(),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_moved_out_of_a_container_and_named_by_each_container_started_from_it() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let source = root.join("containers/src");
        let pages = source.join("sandboxd-checkpoints/1-1");
        std::fs::create_dir_all(&pages).unwrap();
        std::fs::write(pages.join("pages.img"), vec![7u8; 1000]).unwrap();
        let checkpoint = source.join("checkpoints/memory");
        std::fs::create_dir_all(&checkpoint).unwrap();
        std::fs::write(checkpoint.join(MARKER), format!("{}\n", pages.display())).unwrap();
        assert_eq!(move_out(root, "src", "memory", "snap1").unwrap(), 1000);
        assert!(!pages.exists());
        for fork in ["f1", "f2"] {
            std::fs::create_dir_all(root.join("containers").join(fork)).unwrap();
            place(root, "snap1", fork, "memory").unwrap();
            let marker = std::fs::read_to_string(
                root.join("containers")
                    .join(fork)
                    .join("checkpoints/memory")
                    .join(MARKER),
            )
            .unwrap();
            let first = marker.lines().next().unwrap();
            assert_eq!(Path::new(first), root.join(KEPT).join("snap1"));
            assert!(marker.contains(fork));
        }
        assert!(place(root, "other", "f1", "again").is_err());
        assert!(place(root, "snap1", "nobody", "memory").is_err());
    }

    #[test]
    fn a_checkpoint_naming_memory_outside_its_container_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let checkpoint = root.join("containers/src/checkpoints/memory");
        std::fs::create_dir_all(&checkpoint).unwrap();
        std::fs::write(
            checkpoint.join(MARKER),
            format!("{}\n", elsewhere.display()),
        )
        .unwrap();
        assert!(move_out(root, "src", "memory", "snap1").is_err());
        assert!(elsewhere.exists());
        assert!(move_out(root, "src", "none", "snap1").is_err());
    }

    #[test]
    fn only_plain_names_make_paths() {
        assert!(plain("01HXYZ-ab_c").is_ok());
        for bad in ["", "..", "a/b", "a b", &"x".repeat(129)] {
            assert!(plain(bad).is_err(), "{bad}");
        }
    }
}
