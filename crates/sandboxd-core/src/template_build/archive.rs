//! A tar of a build's files read into `GivenFiles`: E2B's uploaded archives (kept in
//! memory) and build contexts streamed to `template.context` (kept in a blob as they
//! are read). Gzipped or not; regular files with their modes, symbolic links as links,
//! directories skipped (the copies make them); hard links, devices and fifos refused.
//! What it unpacks to is bounded whatever its headers claim, so a gzip bomb is cut at
//! the bound.

use std::io::{Read, Write};

use sha2::{Digest as _, Sha256};

use super::bodies::{FileBody, FileBounds, StoredFile, hex};
use crate::transfer::{TarIn, TarPolicy};
use crate::validate::MAX_LINK_TARGET;

/// The longest name of a file taken (as `check_file_names` says).
const MAX_NAME_BYTES: usize = 1024;
use crate::validate::GivenFiles;

/// Why a tar was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// It holds more files or bytes than its bounds.
    #[error("{0}")]
    TooLarge(String),
    /// It cannot be read, or holds what a build does not take.
    #[error("{0}")]
    Refused(String),
}

/// Where a file's content goes as it is read.
pub trait Keep {
    fn keep(&mut self, content: &mut dyn Read, size: u64) -> std::io::Result<FileBody>;
}

/// Keeps contents in memory.
#[derive(Debug)]
pub struct InMemory;

impl Keep for InMemory {
    fn keep(&mut self, content: &mut dyn Read, size: u64) -> std::io::Result<FileBody> {
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(1 << 20));
        content.read_to_end(&mut bytes)?;
        Ok(FileBody::Bytes(bytes))
    }
}

/// Appends contents to a blob, each digested as it goes.
#[derive(Debug)]
pub struct IntoBlob<W: Write> {
    out: W,
    offset: u64,
}

impl<W: Write> IntoBlob<W> {
    pub fn new(out: W) -> Self {
        Self { out, offset: 0 }
    }

    /// The blob and how many bytes it holds.
    pub fn finish(mut self) -> std::io::Result<(W, u64)> {
        self.out.flush()?;
        Ok((self.out, self.offset))
    }
}

impl<W: Write> Keep for IntoBlob<W> {
    fn keep(&mut self, content: &mut dyn Read, size: u64) -> std::io::Result<FileBody> {
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 64 * 1024];
        let mut written = 0u64;
        loop {
            let n = content.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            self.out.write_all(&buffer[..n])?;
            written += n as u64;
        }
        if written != size {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the archive ends inside a file",
            ));
        }
        let digest = hex(hasher.finalize());
        let stored = StoredFile {
            offset: self.offset,
            size,
            digest,
        };
        self.offset += size;
        Ok(FileBody::Stored(stored))
    }
}

/// A tar stream passed through `TarIn`'s checks as it is read (extended headers of at
/// most a MiB, no devices, fifos or names that go up); what it would pass on is dropped.
struct Checked<R> {
    inner: R,
    check: TarIn,
    passed: Vec<bytes::Bytes>,
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.check
                .push(bytes::Bytes::copy_from_slice(&buf[..n]), &mut self.passed)
                .map_err(|refused| std::io::Error::new(std::io::ErrorKind::InvalidData, refused))?;
            self.passed.clear();
        }
        Ok(n)
    }
}

/// Reads a tar (gzipped or not; paths relative to the build's context) into `given`,
/// within `bounds` counting what `given` already holds: a later entry of a name takes
/// the place of an earlier one. `hard_link` is what a refused hard link's error tells
/// the client to do.
pub fn read_tar(
    reader: impl Read,
    bounds: FileBounds,
    given: &mut GivenFiles,
    keep: &mut dyn Keep,
    hard_link: &str,
) -> Result<(), ArchiveError> {
    let refused = ArchiveError::Refused;
    let GivenFiles {
        contents: files,
        modes,
        links,
    } = given;
    let mut reader = std::io::BufReader::new(reader);
    let gzipped = std::io::BufRead::fill_buf(&mut reader)
        .map_err(|e| refused(format!("the archive cannot be read: {e}")))?
        .starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn Read + '_> = if gzipped {
        // Every member of a gzip stream (bgzip and `cat a.gz b.gz` write several).
        Box::new(flate2::read::MultiGzDecoder::new(reader))
    } else {
        Box::new(reader)
    };
    // What the stream unpacks to is bounded too (headers: 512 bytes each at most four
    // times, with long names), and its headers are checked before the tar crate reads
    // them (an extended header that claims a GiB is refused, not read into memory).
    let reader = Checked {
        inner: reader.take(bounds.bytes + (bounds.files as u64 + 16) * 2048),
        // (`most` below: the same bound, told when it cuts the stream.)
        check: TarIn::new(TarPolicy {
            owner: (0, 0),
            max_bytes: u64::MAX,
            max_entries: u64::MAX,
        }),
        passed: Vec::new(),
    };
    let most = bounds.bytes + (bounds.files as u64 + 16) * 2048;
    let mut tar = tar::Archive::new(reader);
    let entries = tar
        .entries()
        .map_err(|e| refused(format!("the archive cannot be read: {e}")))?;
    // Every byte kept counts, a replaced file's too (a blob keeps it).
    let mut total: u64 = files.values().map(FileBody::len).sum();
    for entry in entries {
        let mut entry = entry.map_err(|e| refused(format!("the archive cannot be read: {e}")))?;
        let path = entry
            .path()
            .map_err(|e| refused(format!("a name in the archive cannot be read: {e}")))?
            .to_string_lossy()
            .into_owned();
        let mut name = path.as_str();
        while let Some(rest) = name.strip_prefix("./") {
            name = rest;
        }
        let name = name.trim_end_matches('/').to_owned();
        if name.len() > MAX_NAME_BYTES {
            return Err(refused(format!(
                "a name in the archive is longer than {MAX_NAME_BYTES} bytes"
            )));
        }
        let kind = entry.header().entry_type();
        if kind != tar::EntryType::Directory
            && files.len() + links.len() >= bounds.files
            && !files.contains_key(&name)
            && !links.contains_key(&name)
        {
            return Err(ArchiveError::TooLarge(format!(
                "the files are more than {}",
                bounds.files
            )));
        }
        match kind {
            tar::EntryType::Directory => continue,
            tar::EntryType::Regular | tar::EntryType::Continuous => {}
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|e| refused(format!("the link `{name}` cannot be read: {e}")))?
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if target.len() > MAX_LINK_TARGET {
                    return Err(refused(format!(
                        "the link `{name}` points to more than {MAX_LINK_TARGET} bytes"
                    )));
                }
                files.remove(&name);
                modes.remove(&name);
                links.insert(name, target);
                continue;
            }
            tar::EntryType::Link => {
                return Err(refused(format!("`{name}` is a hard link: {hard_link}")));
            }
            // PAX and GNU headers are read by the tar crate; anything else is not a file.
            _ => return Err(refused(format!("`{name}` is not a regular file"))),
        }
        let size = entry.size();
        if total.saturating_add(size) > bounds.bytes {
            return Err(ArchiveError::TooLarge(format!(
                "the files hold more than {} MiB",
                bounds.bytes >> 20
            )));
        }
        total += size;
        let mode = entry.header().mode().unwrap_or(0o644) & 0o7777;
        let body = keep
            .keep(&mut entry, size)
            .map_err(|e| refused(format!("`{name}` cannot be read: {e}")))?;
        if mode == 0o644 {
            modes.remove(&name);
        } else {
            modes.insert(name.clone(), mode);
        }
        links.remove(&name);
        files.insert(name, body);
    }
    // A stream cut at the bound on a block's edge reads as an archive that ended.
    if tar.into_inner().inner.limit() == 0 {
        return Err(ArchiveError::TooLarge(format!(
            "the archive is more than {most} bytes (its files and their headers)"
        )));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Why `tar` is refused within `bounds`, a hard link told `hint`.
    fn refusal(tar: &[u8], bounds: FileBounds, hint: &str) -> ArchiveError {
        read_tar(tar, bounds, &mut GivenFiles::default(), &mut InMemory, hint).unwrap_err()
    }

    fn tar_of(entries: &[(&str, tar::EntryType, &[u8], u32)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, content, mode) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_size(content.len() as u64);
            header.set_mode(*mode);
            if *kind == tar::EntryType::Symlink || *kind == tar::EntryType::Link {
                builder
                    .append_link(&mut header, name, std::str::from_utf8(content).unwrap())
                    .unwrap();
            } else {
                builder.append_data(&mut header, name, *content).unwrap();
            }
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn a_blob_keeps_each_file_at_its_place_with_its_digest() {
        let tar = tar_of(&[
            ("./a.txt", tar::EntryType::Regular, b"hello", 0o644),
            ("dir/", tar::EntryType::Directory, b"", 0o755),
            ("dir/run.sh", tar::EntryType::Regular, b"#!/bin/sh\n", 0o755),
            ("link", tar::EntryType::Symlink, b"a.txt", 0o777),
        ]);
        let mut given = GivenFiles::default();
        let mut blob = IntoBlob::new(Vec::new());
        read_tar(
            tar.as_slice(),
            FileBounds::GIVEN,
            &mut given,
            &mut blob,
            "x",
        )
        .unwrap();
        let (bytes, len) = blob.finish().unwrap();
        assert_eq!(bytes, b"hello#!/bin/sh\n");
        assert_eq!(len, 15);
        let Some(FileBody::Stored(run)) = given.contents.get("dir/run.sh") else {
            panic!("not stored")
        };
        assert_eq!((run.offset, run.size), (5, 10));
        assert_eq!(run.digest, super::super::content_digest(b"#!/bin/sh\n"));
        assert_eq!(given.modes.get("dir/run.sh"), Some(&0o755));
        assert!(!given.modes.contains_key("a.txt"));
        assert_eq!(given.links.get("link").map(String::as_str), Some("a.txt"));
    }

    #[test]
    fn bounds_hard_links_and_devices_are_refused() {
        let big = vec![0u8; 2048];
        let tar = tar_of(&[("big", tar::EntryType::Regular, &big, 0o644)]);
        let bounds = FileBounds {
            files: 10,
            bytes: 1024,
        };
        let error = refusal(tar.as_slice(), bounds, "x").to_string();
        assert!(error.contains("more than"), "{error}");

        let many = tar_of(&[
            ("a", tar::EntryType::Regular, b"1", 0o644),
            ("b", tar::EntryType::Regular, b"2", 0o644),
        ]);
        let one = FileBounds {
            files: 1,
            bytes: 1024,
        };
        let error = refusal(many.as_slice(), one, "x").to_string();
        assert!(error.contains("more than 1"), "{error}");

        let hard = tar_of(&[("h", tar::EntryType::Link, b"a", 0o644)]);
        let error = refusal(hard.as_slice(), FileBounds::GIVEN, "send the file itself");
        assert_eq!(
            error,
            ArchiveError::Refused("`h` is a hard link: send the file itself".into())
        );

        let fifo = tar_of(&[("f", tar::EntryType::Fifo, b"", 0o644)]);
        let error = refusal(fifo.as_slice(), FileBounds::GIVEN, "x").to_string();
        assert!(error.contains("a fifo"), "{error}");
    }

    #[test]
    fn an_extended_header_that_claims_a_gib_is_refused_unread() {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::GNULongName);
        header.set_size(1 << 30);
        header.set_cksum();
        let mut tar = header.as_bytes().to_vec();
        tar.extend_from_slice(&[b'a'; 4096]);
        let error = refusal(tar.as_slice(), FileBounds::context(2 << 30), "x").to_string();
        assert!(error.contains("extended header is too long"), "{error}");
    }

    #[test]
    fn a_gzip_bomb_is_cut_at_the_bound() {
        let zeros = vec![0u8; 8 << 20];
        let tar = tar_of(&[("zeros", tar::EntryType::Regular, &zeros, 0o644)]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&tar).unwrap();
        let gz = gz.finish().unwrap();
        assert!(gz.len() < 64 * 1024);
        let bounds = FileBounds {
            files: 10,
            bytes: 1 << 20,
        };
        let error = refusal(gz.as_slice(), bounds, "x").to_string();
        assert!(error.contains("more than 1 MiB"), "{error}");
    }
}
