//! A build of a template as it is kept: one version of one name in one project, its
//! status, what its sandboxes get once it is ready, and its log's lines.

/// `building`, `ready` or `error`.
pub const BUILDING: &str = "building";
pub const READY: &str = "ready";
pub const FAILED: &str = "error";

/// One build: one version of a template.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateBuild {
    pub build_id: String,
    /// The same for every build of one name in one project.
    pub template_id: String,
    pub organization_id: String,
    pub project_id: String,
    pub name: String,
    /// 1 for the first build of the name, then one more each time.
    pub version: i64,
    pub status: String,
    /// The template's image, once ready.
    pub image: Option<String>,
    /// The user and workdir its sandboxes run as and in.
    pub user: Option<String>,
    pub workdir: Option<String>,
    /// The command run in a sandbox after it is made (`CMD`/`ENTRYPOINT`).
    pub start: Option<Vec<String>>,
    /// The command that says a new sandbox is ready: run after the start command until
    /// it succeeds, before the create answers.
    pub ready: Option<Vec<String>>,
    /// Its sandboxes' defaults.
    pub cpu: Option<f64>,
    pub memory_mb: Option<i64>,
    pub isolation: Option<String>,
    /// The step that failed (0: before the first) and why.
    pub error_step: Option<i64>,
    pub error_message: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// One line of a build's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Milliseconds since the epoch.
    pub time: i64,
    /// The step it belongs to (0: the build's own lines before the first step).
    pub step: i64,
    /// `stdout`, `stderr` or `system` (the builder's own).
    pub stream: String,
    pub line: String,
}

/// The longest line kept, in bytes; a longer one is cut (at a character's boundary).
pub const MAX_LOG_LINE: usize = 4096;
/// The most lines a build's log keeps; the build goes on, and the rest of its output is
/// not kept.
pub const MAX_LOG_LINES: i64 = 20_000;

/// `line` cut to `MAX_LOG_LINE` bytes, its NUL bytes (which PostgreSQL's text does not
/// hold) replaced by U+FFFD.
pub fn bounded_line(line: &str) -> String {
    let line = line.replace('\0', "\u{FFFD}");
    if line.len() <= MAX_LOG_LINE {
        return line;
    }
    let mut end = MAX_LOG_LINE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_and_hold_no_nul() {
        assert_eq!(bounded_line("a\0b"), "a\u{FFFD}b");
        let long = "é".repeat(MAX_LOG_LINE);
        let cut = bounded_line(&long);
        assert!(cut.len() <= MAX_LOG_LINE + "…".len(), "{}", cut.len());
    }
}
