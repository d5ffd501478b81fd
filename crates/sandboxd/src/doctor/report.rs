//! One line per check: what was found, and on a failure what to do about it.

use serde::Serialize;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    /// Works, but something deserves a look.
    Warn,
    Fail,
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub outcome: Outcome,
    /// What was found, or why it failed.
    pub detail: String,
    /// What to do, on a warning or a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn new(name: impl Into<String>, outcome: Outcome, detail: String, fix: Option<String>) -> Self {
        Self {
            name: name.into(),
            outcome,
            detail,
            fix,
        }
    }

    pub fn pass(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(name, Outcome::Pass, detail.into(), None)
    }

    pub fn warn(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self::new(name, Outcome::Warn, detail.into(), Some(fix.into()))
    }

    pub fn fail(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self::new(name, Outcome::Fail, detail.into(), Some(fix.into()))
    }
}

/// Whether every check passed or only warned.
pub fn healthy(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.outcome != Outcome::Fail)
}

/// The checks as a person reads them: `ok`, `warn` or `FAIL`, the check's name, what
/// was found, and the fix on the next line.
pub fn render(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for check in checks {
        let mark = match check.outcome {
            Outcome::Pass => "ok  ",
            Outcome::Warn => "warn",
            Outcome::Fail => "FAIL",
        };
        out.push_str(&format!(
            "{mark}  {:width$}  {}\n",
            check.name,
            single_line(&check.detail)
        ));
        if let Some(fix) = &check.fix {
            out.push_str(&format!("      {:width$}  fix: {}\n", "", single_line(fix)));
        }
    }
    let failed = checks.iter().filter(|c| c.outcome == Outcome::Fail).count();
    let warned = checks.iter().filter(|c| c.outcome == Outcome::Warn).count();
    out.push_str(&match (failed, warned) {
        (0, 0) => "all checks passed\n".to_owned(),
        (0, w) => format!("all checks passed, {w} warning(s)\n"),
        (f, _) => format!("{f} check(s) failed\n"),
    });
    out
}

/// Text from an engine or a server on one line, control characters made visible.
fn single_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_carry_their_fix_and_decide_the_verdict() {
        let checks = [
            Check::pass("engine", "Docker 28.2.2"),
            Check::warn("network", "open", "remove it"),
            Check::fail("key", "refused\n\u{1b}[31mred", "run `sandboxd login`"),
        ];
        assert!(!healthy(&checks));
        assert!(healthy(&checks[..2]));
        let text = render(&checks);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ok    engine   Docker 28.2.2");
        assert_eq!(lines[3], "FAIL  key      refused [31mred");
        assert_eq!(lines[4], "               fix: run `sandboxd login`");
        assert_eq!(lines[5], "1 check(s) failed");
        assert!(render(&checks[..2]).ends_with("all checks passed, 1 warning(s)\n"));
    }
}
