//! Times on the wire.

use std::time::UNIX_EPOCH;

/// Epoch milliseconds as an RFC 3339 UTC time with milliseconds; any value, clamped to
/// years 0000–9999 (times come from sandboxes too).
pub fn rfc3339(ms: i64) -> String {
    sandboxd_core::rfc3339::format_millis(ms)
}

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// An RFC 3339 time (`2026-01-31T12:00:00Z`, fractions allowed) as epoch milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let at = humantime::parse_rfc3339(text).ok()?;
    i64::try_from(at.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_what_it_formats() {
        let text = super::rfc3339(1_700_000_000_123);
        assert_eq!(super::parse_rfc3339(&text), Some(1_700_000_000_123));
        assert_eq!(super::parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn formats_milliseconds() {
        assert_eq!(
            super::rfc3339(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
    }
}
