//! File operations, done with the sandbox user's own permissions: no tar, no shell, no
//! external tools.

use std::fs;
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::time::UNIX_EPOCH;

use sandboxd_agent_protocol::{
    DirEntry, Done, EntryKind, Failure, FailureKind, Frame, Kind, MAX_PAYLOAD,
};

use crate::input::Input;
use crate::names::Names;
use crate::outbox::Outbox;

const CHUNK: usize = 256 * 1024;

pub fn fail(outbox: &Outbox, channel: u32, kind: FailureKind, message: &str) {
    let failure = Failure {
        kind,
        message: message.to_owned(),
    };
    outbox.send(&Frame::json(channel, Kind::Error, &failure));
}

pub(crate) fn fail_io(outbox: &Outbox, channel: u32, path: &str, error: &std::io::Error) {
    let kind = match error.kind() {
        ErrorKind::NotFound => FailureKind::NotFound,
        ErrorKind::PermissionDenied => FailureKind::PermissionDenied,
        ErrorKind::NotADirectory => FailureKind::NotADirectory,
        ErrorKind::IsADirectory => FailureKind::NotAFile,
        _ => FailureKind::Io,
    };
    fail(outbox, channel, kind, &format!("{path}: {error}"));
}

pub(crate) fn done(outbox: &Outbox, channel: u32, size: u64) {
    outbox.send(&Frame::json(channel, Kind::Done, &Done { size }));
}

/// Writes the Data frames up to End into `path` through a temporary file renamed into
/// place, so a reader never sees half a file.
pub fn write(outbox: &Outbox, channel: u32, path: &str, mode: u32, rx: &Input) {
    let target = Path::new(path);
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        fail(
            outbox,
            channel,
            FailureKind::Invalid,
            "path must point to a file",
        );
        return;
    };
    if let Err(error) = fs::create_dir_all(dir) {
        fail_io(outbox, channel, &dir.display().to_string(), &error);
        // Drain the content so the connection stays in step.
        while let Some(frame) = rx.recv() {
            if frame.kind == Kind::End {
                break;
            }
        }
        return;
    }
    let temp = dir.join(format!(
        ".{}.sandboxd-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> std::io::Result<u64> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        let mut size = 0u64;
        while let Some(frame) = rx.recv() {
            if frame.kind == Kind::End {
                break;
            }
            file.write_all(&frame.payload)?;
            size += frame.payload.len() as u64;
        }
        file.set_permissions(fs::Permissions::from_mode(mode & 0o7777))?;
        drop(file);
        // A directory in the way makes the rename fail (EISDIR): nothing is replaced.
        fs::rename(&temp, target)?;
        Ok(size)
    })();
    match result {
        Ok(size) => done(outbox, channel, size),
        Err(error) => {
            let _ = fs::remove_file(&temp);
            fail_io(outbox, channel, path, &error);
        }
    }
}

/// Streams a regular file of at most `max` bytes.
pub fn read(outbox: &Outbox, channel: u32, path: &str, max: u64) {
    let mut file = match fs::File::open(path) {
        Ok(file) => file,
        Err(error) => return fail_io(outbox, channel, path, &error),
    };
    match file.metadata() {
        Ok(meta) if !meta.is_file() => {
            return fail(
                outbox,
                channel,
                FailureKind::NotAFile,
                "path is not a regular file",
            );
        }
        Ok(meta) if meta.len() > max => {
            return fail(
                outbox,
                channel,
                FailureKind::TooLarge,
                "file exceeds the size limit",
            );
        }
        Ok(_) => {}
        Err(error) => return fail_io(outbox, channel, path, &error),
    }
    let mut buf = vec![0u8; CHUNK];
    let mut size = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) => return fail_io(outbox, channel, path, &error),
        };
        size += n as u64;
        // The file grew while being read.
        if size > max {
            return fail(
                outbox,
                channel,
                FailureKind::TooLarge,
                "file exceeds the size limit",
            );
        }
        if !outbox.send_bytes(channel, Kind::Data, &buf[..n]) {
            return;
        }
    }
    done(outbox, channel, size);
}

fn entry(dir: &Path, name: &std::ffi::OsStr, names: &Names, metadata: bool) -> Option<DirEntry> {
    let path = dir.join(name);
    let mut entry = entry_of(&path, name, names).ok()?;
    if metadata {
        entry.metadata = crate::xattrs::read(&path);
    }
    Some(entry)
}

/// The entry of `path` (not following a final link), named `name`.
fn entry_of(path: &Path, name: &std::ffi::OsStr, names: &Names) -> std::io::Result<DirEntry> {
    let meta = fs::symlink_metadata(path)?;
    let kind = if meta.is_dir() {
        EntryKind::Directory
    } else if meta.is_file() {
        EntryKind::File
    } else if meta.file_type().is_symlink() {
        EntryKind::Symlink
    } else {
        EntryKind::Other
    };
    let modified_ms = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or_else(|| meta.mtime() * 1000);
    // Where a link leads, resolved to an absolute path; as written when it dangles.
    let link_target = (kind == EntryKind::Symlink)
        .then(|| fs::canonicalize(path).or_else(|_| fs::read_link(path)).ok())
        .flatten()
        .map(|target| target.to_string_lossy().into_owned());
    Ok(DirEntry {
        name: name.to_string_lossy().into_owned(),
        kind,
        size: meta.len(),
        mode: meta.mode() & 0o7777,
        modified_ms,
        uid: meta.uid(),
        gid: meta.gid(),
        link_target,
        owner: names.user(meta.uid()),
        group: names.group(meta.gid()),
        metadata: None,
    })
}

/// The entry of one path.
pub fn stat(outbox: &Outbox, channel: u32, path: &str) {
    let target = Path::new(path);
    let name = target.file_name().unwrap_or(target.as_os_str());
    match entry_of(target, name, &Names::load()) {
        Ok(mut entry) => {
            entry.metadata = crate::xattrs::read(target);
            outbox.send(&Frame::json(channel, Kind::Data, &entry));
            done(outbox, channel, 0);
        }
        Err(error) => fail_io(outbox, channel, path, &error),
    }
}

/// Renames a path.
pub fn rename(outbox: &Outbox, channel: u32, from: &str, to: &str) {
    match fs::rename(from, to) {
        Ok(()) => done(outbox, channel, 0),
        Err(error) => fail_io(outbox, channel, &format!("{from} -> {to}"), &error),
    }
}

/// Removes a file or link, or a directory with everything under it (never following
/// a link out of it).
pub fn remove(outbox: &Outbox, channel: u32, path: &str) {
    let removed = fs::symlink_metadata(path).and_then(|meta| {
        if meta.is_dir() {
            fs::remove_dir_all(path)
        } else {
            fs::remove_file(path)
        }
    });
    match removed {
        Ok(()) => done(outbox, channel, 0),
        Err(error) => fail_io(outbox, channel, path, &error),
    }
}

/// Replaces a path's metadata.
pub fn set_metadata(
    outbox: &Outbox,
    channel: u32,
    path: &str,
    metadata: &std::collections::BTreeMap<String, String>,
) {
    match crate::xattrs::replace(Path::new(path), metadata) {
        Ok(()) => done(outbox, channel, 0),
        Err(error) => fail_io(outbox, channel, path, &error),
    }
}

/// Lists a directory in Data frames of JSON arrays, each under the frame limit; with
/// `metadata`, each entry's metadata too.
pub fn list(outbox: &Outbox, channel: u32, path: &str, metadata: bool) {
    let dir = Path::new(path);
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => return fail_io(outbox, channel, path, &error),
    };
    let names = Names::load();
    let mut batch: Vec<DirEntry> = Vec::new();
    let mut batch_bytes = 0usize;
    for item in entries.flatten() {
        let Some(entry) = entry(dir, &item.file_name(), &names, metadata) else {
            continue;
        };
        batch_bytes += entry.name.len()
            + entry.link_target.as_ref().map_or(0, String::len)
            + entry.owner.as_ref().map_or(0, String::len)
            + entry.group.as_ref().map_or(0, String::len)
            + entry
                .metadata
                .as_ref()
                .map_or(0, |m| m.iter().map(|(k, v)| k.len() + v.len() + 8).sum())
            + 160;
        batch.push(entry);
        if batch_bytes > MAX_PAYLOAD / 2 {
            outbox.send(&Frame::json(channel, Kind::Data, &batch));
            batch.clear();
            batch_bytes = 0;
        }
    }
    if !batch.is_empty() {
        outbox.send(&Frame::json(channel, Kind::Data, &batch));
    }
    done(outbox, channel, 0);
}

/// Creates a directory and its parents.
pub fn mkdir(outbox: &Outbox, channel: u32, path: &str, mode: u32) {
    match fs::create_dir_all(path)
        .and_then(|()| fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o7777)))
    {
        Ok(()) => done(outbox, channel, 0),
        Err(error) => fail_io(outbox, channel, path, &error),
    }
}
