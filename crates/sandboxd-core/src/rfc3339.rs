//! Epoch milliseconds as RFC 3339 text, for any `i64`: times come from sandboxes (file
//! modification times, which `touch` sets to anything), from the engine and from
//! clients, so none may make formatting fail. RFC 3339 holds years 0000 to 9999; a time
//! outside is shown as the nearest end of that range.

/// 0000-01-01T00:00:00.000Z.
pub const EARLIEST_MS: i64 = -62_167_219_200_000;
/// 9999-12-31T23:59:59.999Z.
pub const LATEST_MS: i64 = 253_402_300_799_999;

const MS_PER_DAY: i64 = 86_400_000;

/// `ms` after the Unix epoch (negative: before it) as `YYYY-MM-DDTHH:MM:SS.mmmZ`,
/// clamped to years 0000–9999.
pub fn format_millis(ms: i64) -> String {
    let ms = ms.clamp(EARLIEST_MS, LATEST_MS);
    let days = ms.div_euclid(MS_PER_DAY);
    let of_day = ms.rem_euclid(MS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let (secs, millis) = (of_day / 1000, of_day % 1000);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_times() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_700_000_000_123, "2023-11-14T22:13:20.123Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (-315_619_200_000, "1960-01-01T00:00:00.000Z"),
            (EARLIEST_MS, "0000-01-01T00:00:00.000Z"),
            (LATEST_MS, "9999-12-31T23:59:59.999Z"),
        ];
        for (ms, text) in cases {
            assert_eq!(format_millis(ms), text, "{ms}");
        }
    }

    #[test]
    fn times_outside_rfc_3339_are_clamped_never_a_panic() {
        // `touch -d @300000000000`: the year 11476.
        assert_eq!(
            format_millis(300_000_000_000_000),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(format_millis(i64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(format_millis(i64::MIN), "0000-01-01T00:00:00.000Z");
        assert_eq!(format_millis(LATEST_MS + 1), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn every_day_of_four_centuries_follows_the_previous() {
        // Days from 1900 to 2300 each format as the day after the one before.
        let mut previous = format_millis(-2_208_988_800_000);
        for day in 1..146_097 {
            let text = format_millis(-2_208_988_800_000 + day * MS_PER_DAY);
            assert!(text > previous, "{previous} then {text}");
            assert_eq!(&text[10..], "T00:00:00.000Z");
            previous = text;
        }
        assert_eq!(previous, "2299-12-31T00:00:00.000Z");
    }
}
