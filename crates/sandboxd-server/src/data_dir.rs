//! The data directory: made absolute (the engine takes only absolute host paths, and the
//! agent sockets under it are bind-mounted into sandboxes), created, and proven writable
//! before anything is started.
//!
//! `Server::start` does it too, so a library caller cannot hand the engine a relative
//! path.

use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("the data directory {path} cannot be {what}")]
pub struct DataDirError {
    path: String,
    what: &'static str,
    #[source]
    source: std::io::Error,
}

/// Makes `dir` absolute (relative to the working directory), creates it and checks that
/// a file can be written in it; returns the absolute path.
pub fn prepare(dir: &Path) -> Result<PathBuf, DataDirError> {
    let fail = |path: &Path, what| {
        let path = path.display().to_string();
        move |source| DataDirError { path, what, source }
    };
    let dir = std::path::absolute(dir).map_err(fail(dir, "resolved"))?;
    // Created private: it holds the database, the keys and the agent sockets. A
    // directory that exists keeps its mode (it may be the operator's own).
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(fail(&dir, "created"))?;
    let probe = dir.join(format!(".write-check-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .and_then(|mut file| file.write_all(b"sandboxd"));
    let removed = std::fs::remove_file(&probe);
    written.and(removed).map_err(fail(&dir, "written"))?;
    Ok(dir)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_dir_becomes_absolute_and_is_created() {
        let root = tempfile::tempdir().unwrap();
        let nested = root.path().join("a/b");
        let prepared = prepare(&nested).unwrap();
        assert!(prepared.is_absolute());
        assert!(prepared.is_dir());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&prepared).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(
            std::fs::read_dir(&prepared).unwrap().count(),
            0,
            "no probe left"
        );

        let name = format!("relative-check-{}", std::process::id());
        let relative = prepare(&Path::new(".").join(&name)).unwrap();
        assert_eq!(relative, std::env::current_dir().unwrap().join(&name));
        std::fs::remove_dir(relative).unwrap();
    }

    #[test]
    fn a_dir_that_cannot_be_created_or_written_is_named() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let below_a_file = file.path().join("data");
        let error = prepare(&below_a_file).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "the data directory {} cannot be created",
                below_a_file.display()
            )
        );

        // Read-only for its owner; root writes anyway, so only check when refused.
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
        if std::fs::write(dir.path().join("x"), b"").is_err() {
            let error = prepare(dir.path()).unwrap_err();
            assert!(error.to_string().ends_with("cannot be written"), "{error}");
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}
