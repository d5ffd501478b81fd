//! Unpacking a tree that came out of a sandbox. The archive is hostile input (the agent
//! that packed it runs beside the sandbox's code, and a remote engine may be anyone's):
//! it is unpacked into a fresh staging directory beside the destination, with modes
//! masked to 0777 (no set-id or sticky bits) and owners never kept; only regular files,
//! directories and links that stay inside the tree are accepted; then only the entry
//! that was asked for is moved into place, and never over something that is there.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use tar::EntryType;

/// Unpacks a directory's tar (its entries under `name`) as `local`, or as `local/name`
/// when `local` is an existing directory. What was written and the bytes of content.
pub fn unpack_tree(
    reader: impl Read,
    local: &Path,
    name: &std::ffi::OsStr,
) -> std::io::Result<(PathBuf, u64)> {
    let target = if local.is_dir() {
        local.join(name)
    } else {
        local.to_path_buf()
    };
    if target.symlink_metadata().is_ok() {
        return Err(refused(format!(
            "{} exists; remove it or copy to another place",
            target.display()
        )));
    }
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let staging = tempfile::Builder::new()
        .prefix(".sandboxd-cp-")
        .tempdir_in(parent)?;
    let bytes = unpack_checked(reader, staging.path())?;
    let staged = staging.path().join(name);
    let is_dir = staged
        .symlink_metadata()
        .map(|m| m.file_type().is_dir())
        .unwrap_or(false);
    if !is_dir {
        return Err(refused(format!(
            "the archive has no directory {}",
            Path::new(name).display()
        )));
    }
    std::fs::rename(&staged, &target)?;
    Ok((target, bytes))
}

/// Unpacks every entry of `reader` under `root` (a directory this process just made),
/// refusing what could reach outside it or carry privileges.
fn unpack_checked(reader: impl Read, root: &Path) -> std::io::Result<u64> {
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(false);
    archive.set_preserve_ownerships(false);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(true);
    let mut bytes = 0;
    let mut paths = Vec::new();
    let mut links = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let kind = entry.header().entry_type();
        match kind {
            EntryType::Regular | EntryType::Continuous | EntryType::Directory => {}
            EntryType::Symlink => {
                let target = entry.link_name()?.unwrap_or_default().into_owned();
                links.push((parts(&path), target.clone()));
                if !link_stays_inside(&path, &target) {
                    return Err(refused(format!(
                        "the link {} leads out of the tree",
                        path.display()
                    )));
                }
            }
            EntryType::Link => {
                let target = entry.link_name()?.unwrap_or_default().into_owned();
                if !plain_relative(&target) {
                    return Err(refused(format!(
                        "the hard link {} leads out of the tree",
                        path.display()
                    )));
                }
            }
            other => {
                return Err(refused(format!(
                    "{} is a {other:?} entry; only files, directories and links are unpacked",
                    path.display()
                )));
            }
        }
        if !plain_relative(&path) {
            return Err(refused(format!(
                "the entry {} leads out of the tree",
                path.display()
            )));
        }
        bytes += entry.size();
        paths.push(parts(&path));
        if !entry.unpack_in(root)? {
            return Err(refused(format!(
                "the entry {} leads out of the tree",
                path.display()
            )));
        }
    }
    // Each link was checked alone, lexically; that holds only if no path goes through
    // another of the archive's links (`s -> ..` then `t -> s/..`), whatever their order.
    if let Some(path) = through_a_link(&paths, &links) {
        return Err(refused(format!(
            "{} goes through a link of the archive",
            path.display()
        )));
    }
    Ok(bytes)
}

/// A path's normal components (`.` dropped).
fn parts(path: &Path) -> Vec<std::ffi::OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            _ => None,
        })
        .collect()
}

/// The first entry placed under one of the archive's links, or link whose target
/// passes through one; `None` when every path is what it says.
fn through_a_link(
    paths: &[Vec<std::ffi::OsString>],
    links: &[(Vec<std::ffi::OsString>, PathBuf)],
) -> Option<PathBuf> {
    let linked: std::collections::HashSet<&[std::ffi::OsString]> =
        links.iter().map(|(at, _)| at.as_slice()).collect();
    let shown = |parts: &[std::ffi::OsString]| parts.iter().collect::<PathBuf>();
    for path in paths {
        if (1..path.len()).any(|end| linked.contains(&path[..end])) {
            return Some(shown(path));
        }
    }
    for (at, target) in links {
        let mut at_now: Vec<std::ffi::OsString> = at[..at.len().saturating_sub(1)].to_vec();
        let steps: Vec<Component> = target.components().collect();
        for (n, step) in steps.iter().enumerate() {
            match step {
                Component::Normal(name) => {
                    at_now.push((*name).to_owned());
                    let last = n + 1 == steps.len();
                    if !last && linked.contains(at_now.as_slice()) {
                        return Some(shown(at));
                    }
                }
                Component::ParentDir => {
                    at_now.pop();
                }
                _ => {}
            }
        }
    }
    None
}

/// A path of normal components only (`.` allowed), never absolute, never `..`.
fn plain_relative(path: &Path) -> bool {
    !path.as_os_str().is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Whether a symlink at `at` (relative to the staging root) whose target is `target`
/// resolves, lexically, to a place inside the top directory it is under: only that
/// directory is moved into place, so a link that passes through the staging root would
/// lead elsewhere once it is.
fn link_stays_inside(at: &Path, target: &Path) -> bool {
    if target.as_os_str().is_empty() || target.is_absolute() {
        return false;
    }
    // The link's directory, as components below the root.
    let mut depth: Vec<&std::ffi::OsStr> = Vec::new();
    let parent = at.parent().unwrap_or(Path::new(""));
    for part in parent.components() {
        match part {
            Component::Normal(name) => depth.push(name),
            Component::CurDir => {}
            _ => return false,
        }
    }
    for part in target.components() {
        match part {
            Component::Normal(name) => depth.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                depth.pop();
                if depth.is_empty() {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

fn refused(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn header(kind: EntryType, path: &str, mode: u32, size: u64) -> tar::Header {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_path(path).unwrap();
        header.set_mode(mode);
        header.set_size(size);
        header.set_uid(0);
        header.set_gid(0);
        header.set_cksum();
        header
    }

    /// An entry of a test archive: kind, path, mode, content, link target.
    type Entry<'a> = (EntryType, &'a str, u32, &'a [u8], Option<&'a str>);

    fn archive(entries: &[Entry<'_>]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (kind, path, mode, data, link) in entries {
            let mut header = header(*kind, path, *mode, data.len() as u64);
            if let Some(link) = link {
                header.set_link_name(link).unwrap();
                header.set_cksum();
            }
            builder.append(&header, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn set_id_and_sticky_bits_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let tar = archive(&[
            (EntryType::Directory, "out", 0o3777, b"", None),
            (EntryType::Regular, "out/evil", 0o4755, b"#!/bin/sh\n", None),
            (EntryType::Directory, "out/sub", 0o2777, b"", None),
        ]);
        let (at, bytes) = unpack_tree(&tar[..], dir.path(), "out".as_ref()).unwrap();
        assert_eq!(at, dir.path().join("out"));
        assert_eq!(bytes, 10);
        assert_eq!(mode(&at.join("evil")), 0o755);
        assert_eq!(mode(&at.join("sub")), 0o777);
        assert_eq!(mode(&at), 0o777);
    }

    #[test]
    fn only_the_named_entry_lands() {
        let dir = tempfile::tempdir().unwrap();
        let tar = archive(&[
            (EntryType::Directory, "out", 0o755, b"", None),
            (EntryType::Regular, "out/a", 0o644, b"a", None),
            (EntryType::Regular, ".bashrc", 0o644, b"evil", None),
        ]);
        unpack_tree(&tar[..], dir.path(), "out".as_ref()).unwrap();
        assert!(!dir.path().join(".bashrc").exists());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "the staging directory is gone");
        assert_eq!(std::fs::read(dir.path().join("out/a")).unwrap(), b"a");
    }

    #[test]
    fn an_existing_target_is_never_written_over() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/keep"), "mine").unwrap();
        let tar = archive(&[
            (EntryType::Directory, "out", 0o755, b"", None),
            (EntryType::Regular, "out/keep", 0o644, b"theirs", None),
        ]);
        let error = unpack_tree(&tar[..], dir.path(), "out".as_ref()).unwrap_err();
        assert!(error.to_string().contains("exists"), "{error}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out/keep")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn links_that_lead_out_and_devices_are_refused() {
        for (kind, path, link) in [
            (EntryType::Symlink, "out/up", Some("../../etc/passwd")),
            (EntryType::Symlink, "out/abs", Some("/etc/passwd")),
            (EntryType::Link, "out/hard", Some("/etc/passwd")),
            (EntryType::Link, "out/hard", Some("out/../../x")),
            (EntryType::Char, "out/tty", None),
            (EntryType::Fifo, "out/fifo", None),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let tar = archive(&[
                (EntryType::Directory, "out", 0o755, b"", None),
                (kind, path, 0o644, b"", link),
            ]);
            let error =
                unpack_tree(&tar[..], &dir.path().join("dl"), "out".as_ref()).expect_err(path);
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");
            assert!(!dir.path().join("dl").exists());
        }
    }

    #[test]
    fn links_inside_the_tree_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let tar = archive(&[
            (EntryType::Directory, "out", 0o755, b"", None),
            (EntryType::Regular, "out/a", 0o644, b"a", None),
            (EntryType::Symlink, "out/b", 0o777, b"", Some("a")),
            (EntryType::Link, "out/c", 0o644, b"", Some("out/a")),
        ]);
        let (at, _) = unpack_tree(&tar[..], &dir.path().join("dl"), "out".as_ref()).unwrap();
        assert_eq!(std::fs::read(at.join("b")).unwrap(), b"a");
        assert_eq!(std::fs::read(at.join("c")).unwrap(), b"a");
    }

    #[test]
    fn a_top_entry_that_is_not_a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let tar = archive(&[(EntryType::Symlink, "out", 0o777, b"", Some("."))]);
        assert!(unpack_tree(&tar[..], &dir.path().join("dl"), "out".as_ref()).is_err());
        assert!(!dir.path().join("dl").exists());
    }

    #[test]
    fn links_that_lead_out_through_other_links_are_refused_in_any_order() {
        for entries in [
            [
                (EntryType::Symlink, "out/a/b/s", Some("../..")),
                (EntryType::Symlink, "out/a/b/t", Some("s/../..")),
            ],
            [
                (EntryType::Symlink, "out/a/b/t", Some("s/../..")),
                (EntryType::Symlink, "out/a/b/s", Some("../..")),
            ],
            [
                (EntryType::Symlink, "out/l", Some("a")),
                (EntryType::Regular, "out/l/x", None),
            ],
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut all = vec![
                (EntryType::Directory, "out", 0o755, &b""[..], None),
                (EntryType::Directory, "out/a", 0o755, b"", None),
                (EntryType::Directory, "out/a/b", 0o755, b"", None),
            ];
            all.extend(
                entries
                    .iter()
                    .map(|(k, p, l)| (*k, *p, 0o777, &b""[..], *l)),
            );
            let error = unpack_tree(&archive(&all)[..], &dir.path().join("dl"), "out".as_ref())
                .expect_err("refused");
            assert!(error.to_string().contains("goes through a link"), "{error}");
            assert!(!dir.path().join("dl").exists());
        }
    }

    #[test]
    fn link_checks_are_lexical() {
        assert!(link_stays_inside(Path::new("out/a/b"), Path::new("../c")));
        assert!(link_stays_inside(Path::new("out/b"), Path::new("./c/../d")));
        assert!(!link_stays_inside(Path::new("out/b"), Path::new("../out")));
        assert!(!link_stays_inside(Path::new("out/b"), Path::new("../../x")));
        assert!(!link_stays_inside(Path::new("b"), Path::new("..")));
    }
}
