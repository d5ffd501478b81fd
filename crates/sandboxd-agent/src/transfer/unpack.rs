//! An upload's tar unpacked under its directory as the sandbox user. sandboxd has
//! checked and rewritten the archive already (owners, set-id bits, devices, `..`); here
//! each file lands under a temporary name and is renamed into place once whole, so a
//! transfer cut inside a file leaves nothing of it, and no entry lands outside the
//! directory, even through a symlink an earlier entry made.

use std::fs;
use std::io::{self, BufWriter, Read};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use super::{FILE_BUFFER, temp_beside};

fn outside(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} leads outside the upload's directory", path.display()),
    )
}

/// The parts of an entry's path below the directory; `..` is refused.
fn relative(path: &Path) -> io::Result<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return Err(outside(path)),
        }
    }
    Ok(out)
}

/// The directory `root/parts`, made where missing, each step checked to stay under
/// `root` (a canonical path): a symlink on the way must lead to a directory under it.
fn directory(root: &Path, parts: &Path) -> io::Result<PathBuf> {
    let mut dir = root.to_path_buf();
    for part in parts.components() {
        let next = dir.join(part);
        match fs::symlink_metadata(&next) {
            Ok(meta) if meta.is_dir() => dir = next,
            Ok(meta) if meta.file_type().is_symlink() => {
                let real = next.canonicalize()?;
                if !real.starts_with(root) || !real.is_dir() {
                    return Err(outside(&next));
                }
                dir = real;
            }
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{} is in the way of a directory", next.display()),
                ));
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => match fs::create_dir(&next) {
                Err(error) if error.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(error);
                }
                _ => dir = next,
            },
            Err(error) => return Err(error),
        }
    }
    Ok(dir)
}

/// Unpacks `reader` under `root`; the content bytes of its files.
pub fn unpack(root: &Path, reader: impl Read, channel: u32) -> io::Result<u64> {
    let root = root.canonicalize()?;
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(true);
    archive.set_overwrite(true);
    archive.set_unpack_xattrs(false);
    // Directories get their modes last, so a read-only one still takes its entries.
    let mut modes = Vec::new();
    let mut bytes = 0u64;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let kind = entry.header().entry_type();
        let path = relative(&entry.path()?)?;
        if kind.is_dir() {
            let dir = directory(&root, &path)?;
            if dir != root {
                modes.push((dir, entry.header().mode()?));
            }
        } else if kind.is_file() || kind == tar::EntryType::Continuous {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a file without a name",
                ));
            };
            let dir = directory(&root, parent)?;
            let temp = temp_beside(&dir, name, channel);
            let placed =
                write_file(&mut entry, &temp).and_then(|()| fs::rename(&temp, dir.join(name)));
            if let Err(error) = placed {
                let _ = fs::remove_file(&temp);
                return Err(error);
            }
            bytes += entry.size();
        } else {
            // Links (checked by the tar reader to stay under the directory); extension
            // headers are taken by the reader itself.
            if let Some(parent) = path.parent() {
                directory(&root, parent)?;
            }
            entry.unpack_in(&root)?;
        }
    }
    for (dir, mode) in modes.into_iter().rev() {
        match fs::set_permissions(&dir, fs::Permissions::from_mode(mode & 0o7777)) {
            // A directory that was there before, someone else's: it keeps its mode.
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {}
            other => other?,
        }
    }
    Ok(bytes)
}

/// A file entry's content, mode and modification time, written to `path` in large
/// pieces (the tar reader's own unpacking writes 8 KiB at a time).
fn write_file(entry: &mut tar::Entry<'_, impl Read>, path: &Path) -> io::Result<()> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let mut out = BufWriter::with_capacity(FILE_BUFFER, file);
    let size = entry.size();
    let copied = io::copy(entry, &mut out)?;
    if copied != size {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the archive ended {copied} bytes into a file of {size}"),
        ));
    }
    let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.set_permissions(fs::Permissions::from_mode(entry.header().mode()? & 0o7777))?;
    if let Ok(mtime) = entry.header().mtime() {
        let modified = UNIX_EPOCH + Duration::from_secs(mtime);
        file.set_times(fs::FileTimes::new().set_modified(modified))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_below_the_directory() {
        assert_eq!(relative(Path::new("./a/b")).unwrap(), PathBuf::from("a/b"));
        assert_eq!(relative(Path::new("/a")).unwrap(), PathBuf::from("a"));
        assert!(relative(Path::new("a/../../b")).is_err());
    }

    fn archive(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        build(&mut builder);
        builder.into_inner().unwrap()
    }

    fn file(builder: &mut tar::Builder<Vec<u8>>, name: &str, content: &[u8], mode: u32) {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(mode);
        builder.append_data(&mut header, name, content).unwrap();
    }

    #[test]
    fn files_land_whole_and_directories_get_their_modes_last() {
        let dir = tempfile::tempdir().unwrap();
        let tar = archive(|b| {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_size(0);
            header.set_mode(0o555);
            b.append_data(&mut header, "ro", &[][..]).unwrap();
            file(b, "ro/inside.txt", b"in a read-only directory", 0o600);
            file(b, "deep/er/x.bin", &[7u8; 5000], 0o644);
        });
        let bytes = unpack(dir.path(), &tar[..], 1).unwrap();
        assert_eq!(bytes, 24 + 5000);
        let ro = dir.path().join("ro");
        assert_eq!(
            fs::read(ro.join("inside.txt")).unwrap(),
            b"in a read-only directory"
        );
        assert_eq!(
            fs::metadata(&ro).unwrap().permissions().mode() & 0o777,
            0o555
        );
        assert_eq!(
            fs::read(dir.path().join("deep/er/x.bin")).unwrap().len(),
            5000
        );
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_file_cut_short_leaves_nothing_and_a_symlink_does_not_lead_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut tar = archive(|b| {
            file(b, "whole.txt", b"whole", 0o644);
            file(b, "cut.bin", &[1u8; 4096], 0o644);
        });
        tar.truncate(512 + 512 + 512 + 1000);
        assert!(unpack(dir.path(), &tar[..], 1).is_err());
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["whole.txt"], "nothing of the cut file");

        let outside_dir = tempfile::tempdir().unwrap();
        let tar = archive(|b| {
            let mut link = tar::Header::new_gnu();
            link.set_entry_type(tar::EntryType::Symlink);
            link.set_size(0);
            b.append_link(&mut link, "out", outside_dir.path()).unwrap();
            file(b, "out/escaped.txt", b"no", 0o644);
        });
        let error = unpack(dir.path(), &tar[..], 2).unwrap_err();
        assert!(error.to_string().contains("outside"), "{error}");
        assert!(!outside_dir.path().join("escaped.txt").exists());
    }
}
