//! Whether a command can start in the agent's own working directory. The agent starts in
//! the sandbox's workdir (the container's), where most commands run; a process that
//! changes no directory is started by `posix_spawn`, which shares the agent's memory
//! until the exec instead of copying its page tables as a fork does (std changes the
//! directory only by forking in a statically linked program).

use rustix::fs::{Stat, stat};

/// Whether `path` is the directory the agent is in, and that directory still exists.
pub fn is_current(path: &str) -> bool {
    let (Ok(here), Ok(there)) = (stat("."), stat(path)) else {
        return false;
    };
    same_live_directory(&here, &there)
}

/// A removed directory keeps its inode while a process is in it, with no links left.
fn same_live_directory(here: &Stat, there: &Stat) -> bool {
    here.st_nlink > 0 && here.st_dev == there.st_dev && here.st_ino == there.st_ino
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_directory_is_current_and_others_are_not() {
        let here = std::env::current_dir().unwrap();
        assert!(is_current(here.to_str().unwrap()));
        assert!(is_current("."));
        assert!(!is_current("/proc/self/fdinfo"));
        assert!(!is_current("/nonexistent/dir"));
    }
}
