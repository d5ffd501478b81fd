//! Where a `COPY` or `ADD` puts each file it reads, as the engine's builder does: a file
//! named goes to the destination (or into it, when it ends in `/` or several sources
//! are named), a directory's contents go into it, `.` is every file, a pattern's
//! matches go in by name (a matched directory by its contents); and the tar stream that
//! puts them there with their directories, owned as `--chown` says.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, SeekFrom, Write};

use super::bodies::{Blob, FileBody};
use super::recipe::pattern_names;

/// One file of the build put at one absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyTarget {
    /// Its name among the files given.
    pub file: String,
    /// Where it goes in the image.
    pub path: String,
    /// The directory it is copied under (made by the copy's owner when missing are only
    /// the directories between this and the file).
    pub base: String,
}

/// The targets of one source, with `dest` absolute.
pub(super) fn copy_targets(
    source: &str,
    dest: &str,
    into_dir: bool,
    files: &BTreeSet<String>,
) -> Result<Vec<CopyTarget>, String> {
    let mut name = source;
    while let Some(rest) = name.strip_prefix("./") {
        name = rest;
    }
    let name = name.trim_end_matches('/');
    if name.starts_with('/') || name.split('/').any(|part| part == "..") {
        return Err("a source is a path among the files given".into());
    }
    let under = |rel: &str| {
        if dest == "/" {
            format!("/{rel}")
        } else {
            format!("{dest}/{rel}")
        }
    };
    let targets: Vec<CopyTarget> = if name.is_empty() || name == "." {
        files
            .iter()
            .map(|file| CopyTarget {
                file: file.clone(),
                path: under(file),
                base: dest.to_owned(),
            })
            .collect()
    } else if name.contains(['*', '?']) {
        let depth = name.split('/').count();
        files
            .iter()
            .filter(|file| pattern_names(name, file))
            .map(|file| {
                let parts: Vec<&str> = file.split('/').collect();
                let rel = if parts.len() == depth {
                    parts[depth - 1..].join("/")
                } else {
                    parts[depth..].join("/")
                };
                CopyTarget {
                    file: file.clone(),
                    path: under(&rel),
                    base: dest.to_owned(),
                }
            })
            .collect()
    } else if files.contains(name) {
        let base = name.rsplit('/').next().unwrap_or(name);
        let path = if into_dir {
            under(base)
        } else {
            dest.to_owned()
        };
        vec![CopyTarget {
            file: name.to_owned(),
            base: parent_of(&path),
            path,
        }]
    } else {
        let prefix = format!("{name}/");
        files
            .iter()
            .filter_map(|file| {
                file.strip_prefix(&prefix).map(|rel| CopyTarget {
                    file: file.clone(),
                    path: under(rel),
                    base: dest.to_owned(),
                })
            })
            .collect()
    };
    if targets.is_empty() {
        return Err("names none of the files given".into());
    }
    Ok(targets)
}

fn parent_of(path: &str) -> String {
    match path.rsplit_once('/') {
        Some(("", _)) | None => "/".into(),
        Some((parent, _)) => parent.to_owned(),
    }
}

/// How the files of a copy are written.
#[derive(Debug, Clone, Copy)]
pub struct CopyMode<'a> {
    /// Their owner (`uid`, `gid`).
    pub owner: (u64, u64),
    /// The mode `--chmod` gives every file.
    pub chmod: Option<u32>,
    /// Each file's own mode, where it was given (`0644` where not).
    pub modes: &'a BTreeMap<String, u32>,
    /// The files that are links, with what each points to.
    pub links: &'a BTreeMap<String, String>,
    pub mtime: u64,
}

/// The tar stream, to unpack at `/`, that puts `targets` in place with the contents in
/// `contents` (a stored one read from `blob`), files with the mode of `how` and the
/// directories between each target's base and its file `0755`, all owned by its owner.
/// The base and what is above it are not in the stream, so an existing directory there
/// keeps its owner and mode (the engine makes a missing one). Written to `out`.
pub fn copy_archive<W: Write>(
    targets: &[CopyTarget],
    contents: &BTreeMap<String, FileBody>,
    how: CopyMode<'_>,
    mut blob: Option<&mut dyn Blob>,
    out: W,
) -> std::io::Result<W> {
    let CopyMode { owner, mtime, .. } = how;
    let mut builder = tar::Builder::new(out);
    let mut made = BTreeSet::new();
    for target in targets {
        let relative = target.path.trim_start_matches('/');
        let base = target.base.trim_matches('/');
        let mut parent = base.to_owned();
        let below = relative
            .strip_prefix(base)
            .unwrap_or(relative)
            .trim_start_matches('/');
        let parts: Vec<&str> = below.split('/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(part);
            if made.insert(parent.clone()) {
                let mut header = tar::Header::new_gnu();
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                header.set_mode(0o755);
                header.set_uid(owner.0);
                header.set_gid(owner.1);
                header.set_mtime(mtime);
                builder.append_data(&mut header, format!("{parent}/"), std::io::empty())?;
            }
        }
        if let Some(points_to) = how.links.get(&target.file) {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_size(0);
            header.set_mode(0o777);
            header.set_uid(owner.0);
            header.set_gid(owner.1);
            header.set_mtime(mtime);
            builder.append_link(&mut header, relative, points_to)?;
            continue;
        }
        let body = contents.get(&target.file);
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(body.map_or(0, FileBody::len));
        let mode = how
            .chmod
            .or_else(|| how.modes.get(&target.file).copied())
            .unwrap_or(0o644);
        header.set_mode(mode & 0o7777);
        header.set_uid(owner.0);
        header.set_gid(owner.1);
        header.set_mtime(mtime);
        match body {
            None => builder.append_data(&mut header, relative, std::io::empty())?,
            Some(FileBody::Bytes(bytes)) => {
                builder.append_data(&mut header, relative, bytes.as_slice())?;
            }
            Some(FileBody::Stored(stored)) => {
                let blob = blob.as_deref_mut().ok_or_else(|| {
                    std::io::Error::other("a stored file is copied without its context")
                })?;
                blob.seek(SeekFrom::Start(stored.offset))?;
                let mut content = blob.take(stored.size);
                builder.append_data(&mut header, relative, &mut content)?;
                if content.limit() > 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the context ends inside a file",
                    ));
                }
            }
        }
    }
    builder.into_inner()
}

/// The tar stream, to unpack at `/`, of the directories `paths` (absolute), `0755` and
/// owned by `owner`: the directories a `WORKDIR` makes for a user.
pub fn dirs_archive(paths: &[String], owner: (u64, u64), mtime: u64) -> std::io::Result<Vec<u8>> {
    let mut sorted: Vec<&String> = paths.iter().collect();
    sorted.sort_by_key(|p| p.matches('/').count());
    let mut builder = tar::Builder::new(Vec::new());
    for path in sorted {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        header.set_mode(0o755);
        header.set_uid(owner.0);
        header.set_gid(owner.1);
        header.set_mtime(mtime);
        builder.append_data(
            &mut header,
            format!("{}/", path.trim_matches('/')),
            std::io::empty(),
        )?;
    }
    builder.into_inner()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_workdir_s_directories_are_made_shallow_first() {
        let tar = dirs_archive(&["/a/b/c".into(), "/a/b".into()], (1000, 1001), 0).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let entries: Vec<(String, u64, u64)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    e.path().unwrap().display().to_string(),
                    h.uid().unwrap(),
                    h.gid().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("a/b/".to_owned(), 1000, 1001),
                ("a/b/c/".to_owned(), 1000, 1001)
            ]
        );
    }

    #[test]
    fn the_archive_holds_the_files_and_their_directories() {
        let targets = [CopyTarget {
            file: "a/b.txt".into(),
            path: "/srv/app/b.txt".into(),
            base: "/srv".into(),
        }];
        let contents = BTreeMap::from([("a/b.txt".to_owned(), FileBody::Bytes(b"hi".to_vec()))]);
        let modes = BTreeMap::from([("a/b.txt".to_owned(), 0o755)]);
        let links = BTreeMap::new();
        let how = CopyMode {
            owner: (1000, 1000),
            chmod: None,
            modes: &modes,
            links: &links,
            mtime: 0,
        };
        let tar = copy_archive(&targets, &contents, how, None, Vec::new()).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let entries: Vec<(String, u64, u32)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().display().to_string(),
                    e.header().uid().unwrap(),
                    e.header().mode().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            vec![
                ("srv/app/".to_owned(), 1000, 0o755),
                ("srv/app/b.txt".into(), 1000, 0o755)
            ]
        );
    }
}
