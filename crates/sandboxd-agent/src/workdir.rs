//! Whether a command can start in the agent's own working directory. The agent starts in
//! the sandbox's workdir (the container's), where most commands run; a process that
//! changes no directory is started by `posix_spawn`, which shares the agent's memory
//! until the exec instead of copying its page tables as a fork does (std changes the
//! directory only by forking in a statically linked program).
//!
//! The kernel answers `getcwd` from its own records of the agent's directory: no file
//! system is asked (in a container that can be a round trip to a FUSE daemon), and a
//! directory that was removed or renamed no longer has the path it was started in.

/// Whether `path` names the directory the agent is in, and that directory still exists
/// under that name.
pub fn is_current(path: &str) -> bool {
    match rustix::process::getcwd(Vec::new()) {
        Ok(here) => same_path(here.as_bytes(), path),
        Err(_) => false,
    }
}

/// `here` is what `getcwd` returned: absolute, without a trailing slash but for `/`.
fn same_path(here: &[u8], path: &str) -> bool {
    let trimmed = path.trim_end_matches('/');
    let path = if trimmed.is_empty() && path.starts_with('/') {
        "/"
    } else {
        trimmed
    };
    here == path.as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_directory_is_current_and_others_are_not() {
        let here = std::env::current_dir().unwrap();
        let here = here.to_str().unwrap();
        assert!(is_current(here));
        assert!(is_current(&format!("{here}/")));
        assert!(!is_current("/proc/self/fdinfo"));
        assert!(!is_current("/nonexistent/dir"));
        // A relative path is left to the directory change.
        assert!(!is_current("."));
    }

    #[test]
    fn paths_compare_as_getcwd_writes_them() {
        assert!(same_path(b"/", "/"));
        assert!(same_path(b"/", "//"));
        assert!(same_path(b"/home/user", "/home/user/"));
        assert!(!same_path(b"/home/user", "/home/user2"));
        assert!(!same_path(b"/home/user", "/home"));
        assert!(!same_path(b"/home/user", ""));
    }

    #[test]
    fn a_removed_directory_is_not_current() {
        let dir = std::env::temp_dir().join(format!("sandboxd-workdir-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let path = dir.to_str().unwrap().to_owned();
        // The check runs in a child process: a test must not change the test runner's
        // directory.
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "workdir::tests::removed_directory_child"])
            .env("SANDBOXD_WORKDIR_TEST_DIR", &path)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir(&dir);
        let report = String::from_utf8_lossy(&child.stdout);
        assert!(child.status.success(), "{report}");
        assert!(report.contains("1 passed"), "the check ran: {report}");
    }

    /// Run by `a_removed_directory_is_not_current` in a process of its own.
    #[test]
    fn removed_directory_child() {
        let Ok(path) = std::env::var("SANDBOXD_WORKDIR_TEST_DIR") else {
            return;
        };
        std::env::set_current_dir(&path).unwrap();
        assert!(is_current(&path));
        std::fs::remove_dir(&path).unwrap();
        assert!(!is_current(&path), "removed");
        std::fs::create_dir(&path).unwrap();
        assert!(!is_current(&path), "removed and made again");
    }
}
