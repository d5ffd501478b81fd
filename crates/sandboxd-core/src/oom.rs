//! Whether a command was killed for memory: the sandbox's cgroup counts OOM kills
//! (`oom_kill` in `memory.events` on cgroup v2, in `memory.oom_control` on v1), read
//! inside the sandbox after a command ends by SIGKILL.

/// Files holding the count, v2 first; reading both with one `cat` is fine (one exists).
pub const OOM_COUNTER_FILES: [&str; 2] = [
    "/sys/fs/cgroup/memory.events",
    "/sys/fs/cgroup/memory/memory.oom_control",
];

/// Exit code of a command killed by SIGKILL.
pub const SIGKILL_EXIT: i64 = 137;

/// The `oom_kill` count in the text of those files.
pub fn oom_kills(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("oom_kill"))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

/// Whether the count went up since `before` (a count lower than `before` means the
/// container's cgroup was recreated, by a restart: any kill counts).
pub fn killed_since(before: u64, now: u64) -> bool {
    if now < before { now > 0 } else { now > before }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_cgroup_versions() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(oom_kills(v1), Some(2));
        let v2 = "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(oom_kills(v2), Some(1));
        assert_eq!(oom_kills("oom_kill_disable 0\n"), None);
        assert_eq!(oom_kills(""), None);
    }

    #[test]
    fn a_higher_count_is_a_kill() {
        assert!(killed_since(0, 1));
        assert!(!killed_since(1, 1));
        assert!(killed_since(3, 1), "cgroup recreated");
        assert!(!killed_since(3, 0));
    }
}
