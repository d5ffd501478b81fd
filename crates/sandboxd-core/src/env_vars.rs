//! Parsing of the `envVars` text given at creation and checks of per-command env.
//!
//! The text is parsed as the reference API parses it.

/// The `KEY=value` entries of an `envVars` text, as the reference parses it: lines are
/// trimmed, and blank lines, `#` comments and lines without `=` are skipped.
pub fn parse(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && line.contains('='))
        .map(str::to_owned)
        .collect()
}

/// Whether `key` matches `^[A-Za-z_][A-Za-z0-9_]*$`.
pub fn is_valid_key(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The first variable of `vars` that cannot be set: a name that is not a variable's,
/// or a value holding a NUL byte.
pub fn unsettable<'a>(vars: impl IntoIterator<Item = (&'a String, &'a String)>) -> Option<&'a str> {
    vars.into_iter()
        .find(|(name, value)| !is_valid_key(name) || value.contains('\0'))
        .map(|(name, _)| name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_the_reference() {
        let text = "FOO=bar\n# comment\n\nBAZ=qux=1\ninvalid\n  SPACED=1  \r\n";
        assert_eq!(parse(text), ["FOO=bar", "BAZ=qux=1", "SPACED=1"]);
        assert!(parse("").is_empty());
    }

    #[test]
    fn checks_keys() {
        for key in ["A", "_", "PATH", "a_1", "_X9"] {
            assert!(is_valid_key(key), "{key}");
        }
        for key in ["", "1A", "A-B", "A B", "A=B", "É"] {
            assert!(!is_valid_key(key), "{key}");
        }
    }
}
