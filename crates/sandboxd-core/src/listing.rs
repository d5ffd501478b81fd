//! Directory listings: the commands that produce them and the parsers of their output.
//! Paths are passed as arguments, never through a shell.
//!
//! `find -printf` with NUL-separated records, and `ls -1Ap` as the fallback where there
//! is no GNU find.

use crate::api::{FileEntry, FileType};

/// GNU find with one NUL-terminated record per entry: type, size, mtime, mode, name.
pub fn find_argv(path: &str) -> Vec<String> {
    [
        "find",
        path,
        "-mindepth",
        "1",
        "-maxdepth",
        "1",
        "-printf",
        "%y\\t%s\\t%T@\\t%m\\t%f\\0",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// The name-only fallback for images whose find has no `-printf` (busybox).
pub fn ls_argv(path: &str) -> Vec<String> {
    ["ls", "-1Ap", "--", path]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// Directories first, then by name.
pub fn sort(entries: &mut [FileEntry]) {
    entries.sort_by(|a, b| {
        let dir = |e: &FileEntry| e.kind != FileType::Directory;
        dir(a).cmp(&dir(b)).then_with(|| a.name.cmp(&b.name))
    });
}

/// Parses the output of [`find_argv`]; `format_time` renders epoch milliseconds.
pub fn parse_find(stdout: &[u8], format_time: impl Fn(i64) -> String) -> Vec<FileEntry> {
    let mut entries: Vec<FileEntry> = stdout
        .split(|b| *b == 0)
        .filter(|record| !record.is_empty())
        .filter_map(|record| {
            let text = String::from_utf8_lossy(record);
            let mut fields = text.splitn(5, '\t');
            let kind = match fields.next()? {
                "d" => FileType::Directory,
                "f" => FileType::File,
                "l" => FileType::Symlink,
                _ => FileType::Other,
            };
            let size = fields.next()?.parse().ok();
            let modified_at = fields
                .next()?
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite())
                .map(|s| format_time((s * 1000.0).floor() as i64));
            let mode = Some(fields.next()?.to_owned()).filter(|m| !m.is_empty());
            let name = fields.next()?.to_owned();
            (!name.is_empty()).then_some(FileEntry {
                name,
                kind,
                size,
                mode,
                modified_at,
            })
        })
        .collect();
    sort(&mut entries);
    entries
}

/// Parses the output of [`ls_argv`]: a trailing `/` marks a directory.
pub fn parse_ls(stdout: &[u8]) -> Vec<FileEntry> {
    let text = String::from_utf8_lossy(stdout);
    let mut entries: Vec<FileEntry> = text
        .split('\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (name, kind) = match line.strip_suffix('/') {
                Some(dir) => (dir, FileType::Directory),
                None => (line, FileType::File),
            };
            FileEntry {
                name: name.to_owned(),
                kind,
                size: None,
                mode: None,
                modified_at: None,
            }
        })
        .collect();
    sort(&mut entries);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_find_records_with_odd_names() {
        let out = b"f\t12\t1700000000.5\t644\tmain.py\0d\t4096\t1700000000\t755\tsrc\0f\t1\t1700000000\t600\ta b\tc\xc3\xa9\0l\t4\t1\t777\tlink\0";
        let entries = parse_find(out, |ms| ms.to_string());
        let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["src", "a b\tcé", "link", "main.py"]);
        assert_eq!(entries[0].kind, FileType::Directory);
        assert_eq!(entries[3].size, Some(12));
        assert_eq!(entries[3].mode.as_deref(), Some("644"));
        assert_eq!(entries[3].modified_at.as_deref(), Some("1700000000500"));
        assert_eq!(entries[2].kind, FileType::Symlink);
    }

    #[test]
    fn parses_ls_names() {
        let entries = parse_ls(b"b.txt\nsub dir/\n.hidden\n");
        let names: Vec<_> = entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
        assert_eq!(
            names,
            [
                ("sub dir", FileType::Directory),
                (".hidden", FileType::File),
                ("b.txt", FileType::File)
            ]
        );
        assert!(entries.iter().all(|e| e.size.is_none() && e.mode.is_none()));
    }
}
