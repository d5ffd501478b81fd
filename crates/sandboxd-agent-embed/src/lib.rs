//! The static in-sandbox agent, built with the workspace (see `build.rs`) and carried
//! inside the sandboxd binary. Installed into the data dir at startup, it is what the
//! engine bind-mounts into every sandbox.
#![forbid(unsafe_code)]

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

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

/// Writes the agent into `dir` as `sandboxd-agent-<digest>` (mode 0755) unless that file
/// already holds it, and returns the file's path. The file is written beside and renamed
/// into place, so a sandbox never sees half of it; files of other builds are left alone,
/// as running sandboxes of an earlier sandboxd still mount them.
pub fn install(dir: &Path) -> Result<PathBuf, InstallError> {
    if AGENT.is_empty() {
        return Err(InstallError::NotEmbedded(WHY_MISSING));
    }
    let path = dir.join(format!("sandboxd-agent-{DIGEST}"));
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| InstallError::Io { path, source }
    };
    if holds_agent(&path) {
        return Ok(path);
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io(dir))?;
    let partial = dir.join(format!(".sandboxd-agent-{DIGEST}.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o755)
        .open(&partial)
        .and_then(|mut file| {
            file.write_all(AGENT)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&partial, &path));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(io(&path)(source));
    }
    Ok(path)
}

/// `true` when `path` is an executable file with exactly the embedded agent's bytes.
fn holds_agent(path: &Path) -> bool {
    let executable = std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o777 == 0o755);
    executable && std::fs::read(path).is_ok_and(|bytes| bytes == AGENT)
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
        assert_eq!(mode & 0o777, 0o755);
        let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());

        // Installed already: the same file is kept.
        assert_eq!(install(&bin).unwrap(), path);
        let again = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
        assert_eq!(inode, again);

        // A file that differs (truncated, tampered with) is replaced.
        std::fs::write(&path, b"not the agent").unwrap();
        assert_eq!(install(&bin).unwrap(), path);
        assert_eq!(std::fs::read(&path).unwrap(), AGENT);
        assert_eq!(
            std::fs::read_dir(&bin).unwrap().count(),
            1,
            "no partial file left"
        );
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
