//! Absolute paths inside a sandbox, checked and normalized without touching a filesystem.
//!
//! A path is never passed to a shell.

use crate::error::Invalid;
use crate::limits::MAX_PATH_CHARS;

/// Checks that `raw` is an absolute path without NUL of at most 4096 characters and
/// returns it normalized lexically: `.` and empty segments dropped, `..` applied
/// (never above `/`). The result never reaches a shell; it is passed as an argument.
pub fn absolute(field: &str, raw: &str) -> Result<String, Invalid> {
    if raw.is_empty() || raw.chars().count() > MAX_PATH_CHARS {
        return Err(Invalid::one(field, "path must be 1 to 4096 characters"));
    }
    if !raw.starts_with('/') || raw.contains('\0') {
        return Err(Invalid::one(field, "path must be absolute"));
    }
    Ok(normalized(raw))
}

/// `path` normalized lexically as an absolute path: `.` and empty segments dropped,
/// `..` applied (never above `/`).
pub fn normalized(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    format!("/{}", segments.join("/"))
}

/// Splits a normalized absolute path into its parent directory and file name;
/// `None` for `/`, which names no file.
pub fn split_file(path: &str) -> Option<(&str, &str)> {
    let index = path.rfind('/')?;
    let name = &path[index + 1..];
    if name.is_empty() {
        return None;
    }
    let dir = if index == 0 { "/" } else { &path[..index] };
    Some((dir, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        let cases = [
            ("/", "/"),
            ("/home/user", "/home/user"),
            ("/home//user/", "/home/user"),
            ("/home/./user/../x", "/home/x"),
            ("/../../etc/passwd", "/etc/passwd"),
            ("/tmp/a b; rm -rf /", "/tmp/a b; rm -rf "),
            ("/tmp/$(id)/`id`", "/tmp/$(id)/`id`"),
            ("/tmp/line\nbreak", "/tmp/line\nbreak"),
        ];
        for (raw, expected) in cases {
            assert_eq!(absolute("path", raw).as_deref(), Ok(expected), "{raw:?}");
        }
    }

    #[test]
    fn rejects_relative_nul_and_long_paths() {
        for raw in ["", "relative", "./x", "/tmp/a\0b"] {
            assert!(absolute("path", raw).is_err(), "{raw:?}");
        }
        let long = format!("/{}", "a".repeat(MAX_PATH_CHARS));
        assert!(absolute("path", &long).is_err());
        let max = format!("/{}", "a".repeat(MAX_PATH_CHARS - 1));
        assert!(absolute("path", &max).is_ok());
    }

    #[test]
    fn splits_parent_and_name() {
        assert_eq!(split_file("/a/b/c.txt"), Some(("/a/b", "c.txt")));
        assert_eq!(split_file("/c.txt"), Some(("/", "c.txt")));
        assert_eq!(split_file("/"), None);
    }
}
