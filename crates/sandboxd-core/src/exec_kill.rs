//! The timeout kill: every process started by one exec carries a marker environment
//! variable, and a small script finds them through `/proc/*/environ` and kills them.
//! It needs only `sh`, `grep` and `kill` (with `tr` on busybox), and one extra process
//! per match, which matters when the command exhausted the pids limit.
//!
//! The marker is passed to the script as an argument, never interpolated into it.

/// Environment variable that marks the processes of one exec.
pub const MARKER_ENV: &str = "SANDBOXD_EXEC_ID";

/// The kill script; it takes the `NAME=value` marker as `$1`, so nothing is quoted.
/// GNU grep reads NUL-separated environ with `-z`; busybox grep has no `-z` (exit 2),
/// so it falls back to `tr`. It exits non-zero when a readable environ could not be
/// checked (typically: no pid left to fork `grep`), so the caller knows the kill may
/// have missed processes and falls back to restarting the container.
const KILL_SCRIPT: &str = r#"m="$1"
failed=0
kill_pid() { p="${1#/proc/}"; kill -9 "${p%/environ}" 2>/dev/null; }
settle() {
  if [ "$1" -eq 0 ]; then kill_pid "$2"; elif [ "$1" -gt 1 ] && [ -r "$2" ]; then failed=1; fi
}
if grep -qzF x /dev/null 2>/dev/null; [ $? -ne 2 ]; then
  for f in /proc/[0-9]*/environ; do grep -qzxF "$m" "$f" 2>/dev/null; settle $? "$f"; done
else
  for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null | grep -qxF "$m"; settle $? "$f"; done
fi
exit $failed"#;

/// `NAME=value` entry to add to the environment of an exec.
pub fn marker_entry(marker: &str) -> String {
    format!("{MARKER_ENV}={marker}")
}

/// The argv that kills every process of the exec marked with `marker`.
pub fn kill_argv(marker: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        KILL_SCRIPT.into(),
        "sandboxd-kill".into(),
        marker_entry(marker),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_is_passed_as_an_argument_not_in_the_script() {
        let argv = kill_argv("abc123");
        assert_eq!(argv[..2], ["sh", "-c"]);
        assert!(!argv[2].contains("abc123"));
        assert_eq!(argv[4], "SANDBOXD_EXEC_ID=abc123");
    }
}
