//! Where a program named without a slash is found: the first executable file of that
//! name in the directories of PATH (the command's PATH when it sets one, else the
//! agent's), as `execvp` finds it. A lookup walks every PATH directory before the one
//! that holds the program, and on the engine's FUSE-backed root filesystems each step
//! of a walk is a round trip to the filesystem daemon; so the answer is remembered per
//! PATH and name, and forgotten as soon as starting the remembered file fails because
//! it is gone. (A program of the same name installed later in an earlier directory is
//! found once the remembered one is gone.) A PATH with an empty or relative directory
//! depends on the command's working directory and is left to `execvp`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rustix::fs::Access;

/// `execvp`'s PATH when none is set.
const DEFAULT_PATH: &str = "/bin:/usr/bin";

type Found = HashMap<(OsString, String), PathBuf>;

fn found() -> &'static Mutex<Found> {
    static FOUND: OnceLock<Mutex<Found>> = OnceLock::new();
    FOUND.get_or_init(Mutex::default)
}

fn search_path(env: &[(String, String)]) -> OsString {
    env.iter()
        .rev()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| OsString::from(value))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| DEFAULT_PATH.into())
}

/// The file `program` names, when it names one through PATH; `None` leaves the search
/// (or the failure) to the process start itself.
pub fn resolve(program: &str, env: &[(String, String)]) -> Option<PathBuf> {
    if program.is_empty() || program.contains('/') {
        return None;
    }
    let path = search_path(env);
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    if dirs.iter().any(|dir| !dir.is_absolute()) {
        return None;
    }
    let key = (path, program.to_owned());
    if let Some(known) = found().lock().ok()?.get(&key) {
        return Some(known.clone());
    }
    let hit = dirs
        .iter()
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable_file(candidate))?;
    if let Ok(mut known) = found().lock() {
        known.insert(key, hit.clone());
    }
    Some(hit)
}

/// Forgets what `program` resolved to; `true` when something was remembered.
pub fn forget(program: &str, env: &[(String, String)]) -> bool {
    let key = (search_path(env), program.to_owned());
    found()
        .lock()
        .is_ok_and(|mut known| known.remove(&key).is_some())
}

fn is_executable_file(path: &Path) -> bool {
    rustix::fs::access(path, Access::EXEC_OK).is_ok() && path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(path: &str) -> Vec<(String, String)> {
        vec![("PATH".to_owned(), path.to_owned())]
    }

    #[test]
    fn finds_the_first_executable_on_the_commands_path_and_remembers_it() {
        let dir = std::env::temp_dir().join(format!("lookup-{}", std::process::id()));
        let (first, second) = (dir.join("a"), dir.join("b"));
        std::fs::create_dir_all(&first).unwrap();
        std::fs::create_dir_all(&second).unwrap();
        let tool = second.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Not executable: skipped, as execvp skips it.
        std::fs::write(first.join("tool"), "").unwrap();
        let path = format!("{}:{}", first.display(), second.display());
        assert_eq!(resolve("tool", &env(&path)), Some(tool.clone()));
        std::fs::remove_file(&tool).unwrap();
        // Remembered until told it is gone.
        assert_eq!(resolve("tool", &env(&path)), Some(tool.clone()));
        assert!(forget("tool", &env(&path)));
        assert_eq!(resolve("tool", &env(&path)), None);
        assert!(!forget("tool", &env(&path)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn leaves_paths_and_relative_search_directories_to_execvp() {
        assert_eq!(resolve("./run", &env("/bin")), None);
        assert_eq!(resolve("/bin/sh", &env("/bin")), None);
        assert_eq!(resolve("sh", &env("bin:/usr/bin")), None);
        assert_eq!(resolve("sh", &env(":/usr/bin")), None);
    }
}
