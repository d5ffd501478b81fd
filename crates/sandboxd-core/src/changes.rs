//! What changed in a sandbox since its image (or the snapshot it started from): the
//! engine's filesystem diff, narrowed to the sandbox user's areas, with each entry's
//! type and size read by one `find` per batch of paths. Everything here comes from the
//! sandbox (names are chosen by its code): paths are kept as bytes turned to text
//! lossily, passed as arguments, never through a shell, and the list is bounded.
//!
//! `user_areas`: the workdir, `/tmp` and `/var/tmp`, an area inside another folded into
//! it. `select`: the paths under the areas, never an area itself nor `/.sandboxd`,
//! sorted, at most `MAX_CHANGES` (10,000), and whether there were more. `stat_argv`:
//! `find -P PATH… -maxdepth 0 -printf` with the paths as arguments, `STAT_BATCH` at a
//! time. `whole_records` drops what a cut at the output's bound left incomplete;
//! `apply_stats` fills in type, size, mode and link target (a directory reported
//! `changed` is dropped). `archive_name` and `whiteout_name` name the entries of the
//! changes' tar, a removal as `.wh.<name>`.

use crate::api::{ChangeEntry, ChangeKind, FileType};
use crate::plan::AGENT_RUN_DIR;

/// A listing holds at most this many entries (`truncated` says when there were more).
pub const MAX_CHANGES: usize = 10_000;

/// Paths given to one `find`, at most.
pub const STAT_BATCH: usize = 500;
/// Bytes of paths given to one `find`, at most (well under the kernel's bound on a
/// command line).
pub const STAT_BATCH_BYTES: usize = 128 * 1024;

/// `paths` in batches for [`stat_argv`]: at most [`STAT_BATCH`] paths and
/// [`STAT_BATCH_BYTES`] bytes each (a longer path goes alone).
pub fn stat_batches(paths: &[String]) -> Vec<Vec<&str>> {
    let mut batches: Vec<Vec<&str>> = Vec::new();
    let mut bytes = 0;
    for path in paths {
        let fits = batches
            .last()
            .is_some_and(|batch| batch.len() < STAT_BATCH && bytes + path.len() < STAT_BATCH_BYTES);
        if !fits {
            batches.push(Vec::new());
            bytes = 0;
        }
        bytes += path.len() + 1;
        if let Some(batch) = batches.last_mut() {
            batch.push(path);
        }
    }
    batches
}

/// The areas a sandbox's user writes in: its working directory (its home) and the
/// temporary directories.
pub fn user_areas(workdir: &str) -> Vec<String> {
    let candidates = [workdir.trim_end_matches('/'), "/tmp", "/var/tmp"];
    let mut areas: Vec<String> = Vec::new();
    for area in candidates {
        let covered = candidates
            .iter()
            .any(|other| !other.is_empty() && under(area, other));
        if !area.is_empty() && !covered && !areas.iter().any(|kept| kept == area) {
            areas.push(area.to_owned());
        }
    }
    areas
}

/// Whether `path` is under `area` (the area itself is not: a workdir is sandboxd's to
/// make).
fn under(path: &str, area: &str) -> bool {
    path.strip_prefix(area.trim_end_matches('/'))
        .is_some_and(|rest| rest.len() > 1 && rest.starts_with('/'))
}

/// sandboxd's own mount points in every sandbox, never reported.
fn sandboxd_own(path: &str) -> bool {
    let root = AGENT_RUN_DIR.rsplit_once('/').map_or("", |(dir, _)| dir);
    path == root || under(path, root)
}

/// The engine's diff narrowed to what is under `areas` (every path when `None`), sandboxd's own
/// paths left out, sorted by path; at most [`MAX_CHANGES`] entries, and whether there
/// were more. A directory the engine reports changed only because something in it
/// changed is left out (its entries say what).
pub fn select(
    diff: Vec<(String, ChangeKind)>,
    areas: Option<&[String]>,
) -> (Vec<ChangeEntry>, bool) {
    let mut kept: Vec<ChangeEntry> = diff
        .into_iter()
        .filter(|(path, _)| path.starts_with('/') && !sandboxd_own(path))
        .filter(|(path, _)| areas.is_none_or(|areas| areas.iter().any(|area| under(path, area))))
        .map(|(path, kind)| ChangeEntry {
            path,
            kind,
            file_type: None,
            size: None,
            mode: None,
            link_target: None,
        })
        .collect();
    kept.sort_by(|a, b| a.path.cmp(&b.path));
    kept.dedup_by(|a, b| a.path == b.path);
    let truncated = kept.len() > MAX_CHANGES;
    kept.truncate(MAX_CHANGES);
    (kept, truncated)
}

/// GNU find printing the type, size, permission bits and path of each of `paths`
/// (absolute, so none is taken for an option), then its link target (empty for what is
/// not a link), each record and target NUL-terminated; links are not followed.
pub fn stat_argv(paths: &[&str]) -> Vec<String> {
    let mut argv = vec!["find".to_owned(), "-P".to_owned()];
    argv.extend(paths.iter().map(|p| (*p).to_owned()));
    argv.extend(
        ["-maxdepth", "0", "-printf", "%y\\t%s\\t%m\\t%p\\0%l\\0"]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    argv
}

/// The whole records of one `find`'s output: a record and its link target each end in
/// a NUL; what a cut at the output's bound left incomplete is dropped (its path could
/// name another entry).
pub fn whole_records(stdout: &[u8]) -> &[u8] {
    let ends: Vec<usize> = stdout
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == 0)
        .map(|(at, _)| at)
        .collect();
    match ends.len() / 2 {
        0 => &[],
        pairs => &stdout[..=ends[pairs * 2 - 1]],
    }
}

/// Fills in the type, size, mode and link target of `entries` from the output of
/// [`stat_argv`]; a changed directory that is not new is then left out (`changed` of a
/// directory only says something in it changed). Records that name no entry are
/// ignored.
pub fn apply_stats(entries: &mut Vec<ChangeEntry>, stdout: &[u8]) {
    let mut found = std::collections::BTreeMap::new();
    let mut fields = stdout.split(|b| *b == 0);
    while let (Some(record), Some(link)) = (fields.next(), fields.next()) {
        let text = String::from_utf8_lossy(record);
        let mut parts = text.splitn(4, '\t');
        let (Some(kind), Some(size), Some(mode), Some(path)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let kind = match kind {
            "d" => FileType::Directory,
            "f" => FileType::File,
            "l" => FileType::Symlink,
            _ => FileType::Other,
        };
        let link = (kind == FileType::Symlink).then(|| String::from_utf8_lossy(link).into_owned());
        found.insert(
            path.to_owned(),
            (kind, size.parse::<u64>().ok(), mode.to_owned(), link),
        );
    }
    for entry in entries.iter_mut() {
        if let Some((kind, size, mode, link)) = found.get(&entry.path) {
            entry.file_type = Some(*kind);
            entry.size = (*kind != FileType::Directory).then_some(*size).flatten();
            entry.mode = Some(mode.clone()).filter(|m| !m.is_empty());
            entry.link_target = link.clone();
        }
    }
    entries.retain(|entry| {
        !(entry.kind == ChangeKind::Changed && entry.file_type == Some(FileType::Directory))
    });
}

/// The name of `path` in an archive of changes: relative to the root.
pub fn archive_name(path: &str) -> String {
    path.trim_start_matches('/').to_owned()
}

/// Whether `path`'s name is one image layers read as a removal (`.wh.…`).
pub fn is_whiteout(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .is_some_and(|name| name.starts_with(".wh."))
}

/// The name of the entry that says `path` was removed, as image layers say it (OCI):
/// `.wh.` before its name, in its directory.
pub fn whiteout_name(path: &str) -> String {
    let relative = archive_name(path);
    match relative.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/.wh.{name}"),
        None => format!(".wh.{relative}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(items: &[(&str, ChangeKind)]) -> Vec<(String, ChangeKind)> {
        items.iter().map(|(p, k)| ((*p).to_owned(), *k)).collect()
    }

    #[test]
    fn the_users_areas_are_its_workdir_and_the_temporary_directories() {
        assert_eq!(user_areas("/home/user"), ["/home/user", "/tmp", "/var/tmp"]);
        assert_eq!(user_areas("/tmp/work"), ["/tmp", "/var/tmp"]);
        assert_eq!(
            user_areas("/home/user/"),
            ["/home/user", "/tmp", "/var/tmp"]
        );
        assert_eq!(user_areas("/"), ["/tmp", "/var/tmp"]);
    }

    #[test]
    fn only_the_areas_are_kept_and_never_sandboxds_own_paths() {
        use ChangeKind::*;
        let areas = user_areas("/home/user");
        let (kept, truncated) = select(
            diff(&[
                ("/home/user/b.txt", Added),
                ("/home/user", Changed),
                ("/home/userx/evil", Added),
                ("/etc/passwd", Changed),
                ("/tmp/t", Removed),
                ("/.sandboxd/run", Added),
                ("/.sandboxd", Added),
                ("relative", Added),
            ]),
            Some(&areas),
        );
        let paths: Vec<&str> = kept.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["/home/user/b.txt", "/tmp/t"]);
        assert!(!truncated);
        let (all, _) = select(
            diff(&[("/etc/passwd", Changed), ("/.sandboxd/bin", Added)]),
            None,
        );
        assert_eq!(all.len(), 1);
    }

    #[test]
    fn stat_batches_are_bounded_in_count_and_bytes() {
        let short: Vec<String> = (0..1200).map(|i| format!("/tmp/{i}")).collect();
        let sizes: Vec<usize> = stat_batches(&short).iter().map(Vec::len).collect();
        assert_eq!(sizes, [500, 500, 200]);
        let long: Vec<String> = (0..100)
            .map(|i| format!("/{i}{}", "x".repeat(4000)))
            .collect();
        for batch in stat_batches(&long) {
            assert!(batch.iter().map(|p| p.len() + 1).sum::<usize>() <= STAT_BATCH_BYTES);
        }
        assert_eq!(stat_batches(&long).iter().map(Vec::len).sum::<usize>(), 100);
    }

    #[test]
    fn listings_are_bounded() {
        let many: Vec<(String, ChangeKind)> = (0..MAX_CHANGES + 5)
            .map(|i| (format!("/tmp/f{i:06}"), ChangeKind::Added))
            .collect();
        let (kept, truncated) = select(many, None);
        assert_eq!(kept.len(), MAX_CHANGES);
        assert!(truncated);
    }

    #[test]
    fn stats_fill_in_types_and_sizes_and_drop_parents_that_only_changed() {
        use ChangeKind::*;
        let (mut entries, _) = select(
            diff(&[
                ("/home/user", Changed),
                ("/home/user/new", Added),
                ("/home/user/new/f", Added),
                ("/home/user/a\tb", Changed),
                ("/home/user/gone", Removed),
            ]),
            None,
        );
        let out = b"d\t4096\t755\t/home/user\0\0d\t4096\t700\t/home/user/new\0\0f\t12\t644\t/home/user/new/f\0\0f\t3\t600\t/home/user/a\tb\0\0garbage\0\0";
        apply_stats(&mut entries, out);
        let shown: Vec<(&str, Option<FileType>, Option<u64>)> = entries
            .iter()
            .map(|e| (e.path.as_str(), e.file_type, e.size))
            .collect();
        assert_eq!(
            shown,
            [
                ("/home/user/a\tb", Some(FileType::File), Some(3)),
                ("/home/user/gone", None, None),
                ("/home/user/new", Some(FileType::Directory), None),
                ("/home/user/new/f", Some(FileType::File), Some(12)),
            ]
        );
        assert_eq!(
            whole_records(b"f\t1\t644\t/a\0\0l\t2\t777\t/b\0/a"),
            b"f\t1\t644\t/a\0\0"
        );
        assert_eq!(whole_records(b"f\t1\t644\t/a\0"), b"");
        let mut links = vec![ChangeEntry {
            path: "/l".into(),
            kind: ChangeKind::Added,
            file_type: None,
            size: None,
            mode: None,
            link_target: None,
        }];
        apply_stats(&mut links, b"l\t6\t777\t/l\0target\0");
        assert_eq!(links[0].link_target.as_deref(), Some("target"));
        assert_eq!(links[0].mode.as_deref(), Some("777"));
        assert_eq!(whiteout_name("/home/user/gone"), "home/user/.wh.gone");
        assert_eq!(whiteout_name("/top"), ".wh.top");
        assert!(is_whiteout("/home/user/.wh.x") && is_whiteout("/.wh..wh..opq"));
        assert!(!is_whiteout("/home/user/a.wh.x"));
        assert_eq!(archive_name("/home/user/f"), "home/user/f");
        let argv = stat_argv(&["/a", "/b"]);
        assert_eq!(argv[..4], ["find", "-P", "/a", "/b"]);
        assert_eq!(argv.last().unwrap(), "%y\\t%s\\t%m\\t%p\\0%l\\0");
    }
}
