//! The static in-sandbox agent, built with the workspace (see `build.rs`) and carried
//! inside the sandboxd binary. Installed into the data dir at startup, it is what the
//! engine bind-mounts into every sandbox.
//!
//! `install` writes the embedded agent into the data dir execute-only; `install_copy`
//! does the same for an operator's agent.
#![forbid(unsafe_code)]

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

mod digest;

static AGENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sandboxd-agent"));
const WHY_MISSING: &str = include_str!(concat!(env!("OUT_DIR"), "/why-missing.txt"));
const DIGEST: &str = env!("SANDBOXD_AGENT_DIGEST");

/// Why the embedded agent cannot be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("this sandboxd was built without its agent ({0})")]
    NotEmbedded(&'static str),
    #[error("cannot write the agent to {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Whether this build carries the agent.
pub fn is_embedded() -> bool {
    !AGENT.is_empty()
}

/// Mode of an installed agent: execute-only, for its owner too. A process that cannot
/// read the file it runs is started non-dumpable by the kernel, so code in the sandbox,
/// under the agent's uid, can neither trace the agent nor read its environment.
pub const MODE: u32 = 0o111;

/// The suffix of the readable copy written beside it (mode 0555), which gVisor's
/// sandboxes run: gVisor loads a program itself, so it must read it.
pub const READABLE_SUFFIX: &str = "-readable";

/// Writes the built-in agent into `dir` (see [`install_bytes`]).
pub fn install(dir: &Path) -> Result<PathBuf, InstallError> {
    if AGENT.is_empty() {
        return Err(InstallError::NotEmbedded(WHY_MISSING));
    }
    install_bytes(dir, DIGEST, AGENT)
}

/// Copies an operator's agent (configured, or beside the executable) into `dir` (see
/// [`install_bytes`]), so that it is mounted execute-only like the built-in one.
pub fn install_copy(dir: &Path, source: &Path) -> Result<PathBuf, InstallError> {
    let bytes = std::fs::read(source).map_err(|source_error| InstallError::Io {
        path: source.display().to_string(),
        source: source_error,
    })?;
    install_bytes(dir, &format!("{:016x}", digest::fnv1a(&bytes)), &bytes)
}

/// Writes an agent into `dir` as `sandboxd-agent-<digest>` (mode [`MODE`]) unless that
/// file already holds it, and returns the file's path. The file is written beside and
/// renamed into place, so a sandbox never sees half of it; files of other builds are
/// left alone, as running sandboxes of an earlier sandboxd still mount them.
fn install_bytes(dir: &Path, digest: &str, agent: &[u8]) -> Result<PathBuf, InstallError> {
    let path = dir.join(format!("sandboxd-agent-{digest}"));
    let readable = dir.join(format!("sandboxd-agent-{digest}{READABLE_SUFFIX}"));
    place(dir, &readable, agent, 0o555)?;
    place(dir, &path, agent, MODE)?;
    Ok(path)
}

/// Writes `agent` at `path` with `mode`, unless it is there already.
fn place(dir: &Path, path: &Path, agent: &[u8], mode: u32) -> Result<(), InstallError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| InstallError::Io { path, source }
    };
    if holds_agent(path, agent, mode) {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io(dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let partial = dir.join(format!(".{name}.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o700)
        .open(&partial)
        .and_then(|mut file| {
            file.write_all(agent)?;
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&partial, path));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(io(path)(source));
    }
    Ok(())
}

/// `true` when `path` is a file of `mode` with exactly `agent`'s bytes. Without the
/// right to read it (sandboxd not running as root), the file is written again.
fn holds_agent(path: &Path, agent: &[u8], mode: u32) -> bool {
    let installed = std::fs::metadata(path).is_ok_and(|meta| {
        meta.is_file()
            && meta.permissions().mode() & 0o777 == mode
            && meta.len() == agent.len() as u64
    });
    installed && std::fs::read(path).is_ok_and(|bytes| bytes == agent)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn installs_once_and_repairs_a_changed_file() {
        assert!(is_embedded(), "the workspace build embeds the agent");
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let path = install(&bin).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), AGENT);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, MODE);
        let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());

        // Installed already: the same file is kept.
        assert_eq!(install(&bin).unwrap(), path);
        let again = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
        assert_eq!(inode, again);

        // A file that differs (truncated, tampered with, readable) is replaced.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(&path, b"not the agent").unwrap();
        assert_eq!(install(&bin).unwrap(), path);
        assert_eq!(std::fs::read(&path).unwrap(), AGENT);
        let readable = bin.join(format!(
            "{}{READABLE_SUFFIX}",
            path.file_name().unwrap().to_string_lossy()
        ));
        assert_eq!(std::fs::read(&readable).unwrap(), AGENT);
        let mode = std::fs::metadata(&readable).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o555, "the copy gVisor runs");
        assert_eq!(
            std::fs::read_dir(&bin).unwrap().count(),
            2,
            "no partial file left"
        );
    }

    #[test]
    fn an_operators_agent_is_copied_execute_only() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("my-agent");
        std::fs::write(&source, b"an agent").unwrap();
        std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.path().join("bin");
        let path = install_copy(&bin, &source).unwrap();
        assert_ne!(path, source);
        assert_eq!(std::fs::read(&path).unwrap(), b"an agent");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, MODE);
        // Another file, another name.
        std::fs::write(&source, b"another agent").unwrap();
        assert_ne!(install_copy(&bin, &source).unwrap(), path);
    }

    #[test]
    fn an_unwritable_directory_is_an_error_naming_it() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let error = install(&file.path().join("bin")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains(&file.path().display().to_string()),
            "{error}"
        );
    }
}
