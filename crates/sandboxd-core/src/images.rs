//! Which images callers may ask for. An operator can list patterns; a caller's image is
//! matched in its normalized form, `registry/repository:tag` (`python:3.12` is
//! `docker.io/library/python:3.12`), so a short name cannot slip past a pattern that
//! names its registry. `*` in a pattern matches any run of characters. No patterns: any
//! image.

/// Whether `c` may appear in an image reference (`registry:port/name:tag@algo:hex`).
pub fn reference_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@')
}

/// The fully qualified form of an image reference: registry, repository and tag (or
/// digest), with Docker's defaults filled in.
pub fn normalize(reference: &str) -> String {
    let (name, suffix) = match reference.split_once('@') {
        Some((name, digest)) => (name, format!("@{digest}")),
        None => {
            let last = reference.rsplit('/').next().unwrap_or(reference);
            if last.contains(':') {
                let cut = reference.len() - (last.len() - last.find(':').unwrap_or(0));
                (&reference[..cut], reference[cut..].to_owned())
            } else {
                (reference, ":latest".to_owned())
            }
        }
    };
    let (first, rest) = name.split_once('/').unwrap_or(("", name));
    let is_registry = first.contains('.') || first.contains(':') || first == "localhost";
    let qualified = if is_registry {
        name.to_owned()
    } else if first.is_empty() {
        format!("docker.io/library/{rest}")
    } else {
        format!("docker.io/{first}/{rest}")
    };
    format!("{qualified}{suffix}")
}

/// Whether `reference` may be used: no patterns, or one matching its normalized form.
pub fn allowed(patterns: &[String], reference: &str) -> bool {
    if patterns.is_empty() {
        return true;
    }
    let normalized = normalize(reference);
    patterns.iter().any(|pattern| glob(pattern, &normalized))
}

/// `*` matches any run of characters; everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_qualified_as_docker_does() {
        let cases = [
            ("python", "docker.io/library/python:latest"),
            ("python:3.12-slim", "docker.io/library/python:3.12-slim"),
            (
                "sandboxd-local/busybox",
                "docker.io/sandboxd-local/busybox:latest",
            ),
            ("ghcr.io/org/app:1", "ghcr.io/org/app:1"),
            ("localhost:5000/app", "localhost:5000/app:latest"),
            ("10.0.0.5:5000/app:v2", "10.0.0.5:5000/app:v2"),
            ("localhost/app", "localhost/app:latest"),
            ("app@sha256:abc", "docker.io/library/app@sha256:abc"),
            ("registry.internal/a/b/c", "registry.internal/a/b/c:latest"),
        ];
        for (reference, normalized) in cases {
            assert_eq!(normalize(reference), normalized, "{reference}");
        }
    }

    #[test]
    fn patterns_match_the_normalized_reference() {
        let patterns = vec![
            "docker.io/library/*".to_owned(),
            "ghcr.io/acme/*:stable".to_owned(),
        ];
        assert!(allowed(&patterns, "python:3.12"));
        assert!(allowed(&patterns, "docker.io/library/node"));
        assert!(allowed(&patterns, "ghcr.io/acme/tool:stable"));
        assert!(!allowed(&patterns, "ghcr.io/acme/tool:edge"));
        assert!(!allowed(&patterns, "evil/python"));
        // A registry on the operator's network cannot be named past the list.
        assert!(!allowed(&patterns, "10.0.0.5:5000/library/python"));
        assert!(!allowed(&patterns, "registry.internal/library/python:3"));
        assert!(allowed(&[], "anything.example/x"));
    }

    #[test]
    fn globs_anchor_both_ends() {
        assert!(glob("a*c", "abc"));
        assert!(glob("a*c", "ac"));
        assert!(!glob("a*c", "abcd"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXcYb"));
        assert!(glob("exact", "exact"));
        assert!(!glob("exact", "exact2"));
        assert!(!glob("ab*ba", "aba"));
    }
}
