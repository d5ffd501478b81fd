//! Human output: aligned columns under a header, or `key  value` lines for one record.
//!
//! Sizes are written for people.

/// Text from a server, an engine or a sandbox made safe for a terminal: control
/// characters (escape sequences, carriage returns, newlines) become `?`.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Rows under `headers`, each column as wide as its widest cell, two spaces apart;
/// every cell made [`printable`].
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| printable(cell)).collect())
        .collect();
    let rows = &rows;
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = width - cell.chars().count() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// `key  value` lines, the keys aligned.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(key, value)| format!("{key:<width$}  {}\n", printable(value)))
        .collect()
}

/// A JSON value as a cell: strings as they are, `-` for null.
pub fn cell(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A size in bytes the way a person reads it.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A span of milliseconds in its largest whole unit: `45s`, `12m`, `3h`, `9d`.
pub fn age(ms: i64) -> String {
    let seconds = ms.max(0) / 1000;
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_on_the_widest_cell() {
        let out = render(
            &["ID", "STATUS"],
            &[
                vec!["a".into(), "running".into()],
                vec!["longer-id".into(), "killed".into()],
            ],
        );
        assert_eq!(
            out,
            "ID         STATUS\na          running\nlonger-id  killed\n"
        );
    }

    #[test]
    fn cells_cannot_drive_the_terminal() {
        let out = render(&["NAME"], &[vec!["evil\u{1b}]0;title\u{7}\r\nname".into()]]);
        assert_eq!(out, "NAME\nevil?]0;title???name\n");
        assert_eq!(fields(&[("name", "a\u{1b}[2Jb".into())]), "name  a?[2Jb\n");
    }

    #[test]
    fn sizes_read_as_a_person_would() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 << 30), "3.0 GiB");
    }

    #[test]
    fn ages_read_in_their_largest_unit() {
        assert_eq!(age(-5), "0s");
        assert_eq!(age(90_000), "90s");
        assert_eq!(age(30 * 60_000), "30m");
        assert_eq!(age(5 * 3_600_000), "5h");
        assert_eq!(age(3 * 86_400_000), "3d");
    }
}
