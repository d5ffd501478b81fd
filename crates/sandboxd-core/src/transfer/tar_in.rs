//! An upload's tar stream, checked and rewritten as it passes: each entry's header is
//! read whole before any of its content goes on, so a cap or a refused entry stops the
//! stream before a byte of that entry is written.
//!
//! `TarIn` is a push state machine over chunks: the cap and the entry count are checked
//! at each header, entries re-owned, set-id bits cleared, devices refused. `raw_entry` is
//! the header of a one-file archive; `dir_entry` and `link_entry`, those of a directory
//! and of a link, make up the changes' tar.

use std::collections::HashSet;

use bytes::Bytes;

use super::{BLOCK, MAX_EXTENSION_BYTES, TransferRefused, gather, padded, pax};

/// What an upload may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TarPolicy {
    /// Every entry is owned by this `uid:gid`.
    pub owner: (u32, u32),
    /// Most content bytes, all files together.
    pub max_bytes: u64,
    pub max_entries: u64,
}

/// What went through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TarSummary {
    pub entries: u64,
    pub bytes: u64,
}

/// The directories an upload is known to hold, all names together, at most.
const MAX_DIRECTORY_NAME_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug)]
enum State {
    /// Gathering a header block in `pending`.
    Header,
    /// Passing `left` bytes of content and padding through.
    Content { left: u64 },
    /// Gathering an extended header's data (padded) in `pending`.
    Extension { header: Box<[u8; BLOCK]>, size: u64 },
    /// The end marker was written; anything after it is ignored.
    End,
}

/// The rewriter (see the module's text).
#[derive(Debug)]
pub struct TarIn {
    policy: TarPolicy,
    state: State,
    pending: Vec<u8>,
    /// The next entry's size and name, set by a PAX record or a GNU long name.
    next_size: Option<u64>,
    next_path: Option<String>,
    /// How many extended headers named the next entry, and its link: one at most,
    /// since readers disagree on which of two wins (the engine's prefers a GNU long
    /// name to a PAX `path`, whatever their order).
    next_names: u8,
    next_links: u8,
    /// The next entry's extended headers, written just before it.
    held: Vec<Bytes>,
    /// Directories the archive held or was given, so each implied one is made once,
    /// owned by the sandbox user (the engine would make it root's).
    directories: HashSet<String>,
    directory_bytes: usize,
    summary: TarSummary,
}

fn kind_name(kind: tar::EntryType) -> Option<&'static str> {
    use tar::EntryType as K;
    match kind {
        K::Regular | K::Continuous | K::Directory | K::Symlink | K::Link => None,
        K::Char => Some("character device"),
        K::Block => Some("block device"),
        K::Fifo => Some("fifo"),
        K::GNUSparse => Some("sparse file"),
        _ => Some("special entry"),
    }
}

fn is_extension(kind: tar::EntryType) -> bool {
    kind.is_pax_global_extensions()
        || kind.is_pax_local_extensions()
        || kind.is_gnu_longname()
        || kind.is_gnu_longlink()
}

fn header_of(block: &[u8]) -> Result<tar::Header, TransferRefused> {
    let header = tar::Header::from_byte_slice(block).clone();
    let mut checked = header.clone();
    checked.set_cksum();
    if header.cksum().ok() != checked.cksum().ok() {
        return Err(TransferRefused::Malformed("a header's checksum"));
    }
    Ok(header)
}

fn name_of(header: &tar::Header) -> String {
    String::from_utf8_lossy(&header.path_bytes())
        .chars()
        .take(100)
        .collect()
}

impl TarIn {
    pub fn new(policy: TarPolicy) -> Self {
        Self {
            policy,
            state: State::Header,
            pending: Vec::with_capacity(BLOCK),
            next_size: None,
            next_path: None,
            next_names: 0,
            next_links: 0,
            held: Vec::new(),
            directories: HashSet::new(),
            directory_bytes: 0,
            summary: TarSummary::default(),
        }
    }

    /// What went through so far.
    pub fn summary(&self) -> TarSummary {
        self.summary
    }

    /// Takes the next chunk of the archive; appends what goes on to `out`.
    pub fn push(&mut self, mut chunk: Bytes, out: &mut Vec<Bytes>) -> Result<(), TransferRefused> {
        while !chunk.is_empty() {
            match &mut self.state {
                State::End => return Ok(()),
                State::Content { left } => {
                    let take = (*left).min(chunk.len() as u64) as usize;
                    out.push(chunk.split_to(take));
                    *left -= take as u64;
                    if *left == 0 {
                        self.state = State::Header;
                    }
                }
                State::Header => {
                    if gather(&mut self.pending, BLOCK, &mut chunk) {
                        let block = std::mem::take(&mut self.pending);
                        self.header(&block, out)?;
                    }
                }
                State::Extension { size, .. } => {
                    let want = padded(*size) as usize;
                    if gather(&mut self.pending, want, &mut chunk) {
                        self.extension(out)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The end of the archive: the end marker when it was missing; refused inside an
    /// entry.
    pub fn finish(&mut self, out: &mut Vec<Bytes>) -> Result<TarSummary, TransferRefused> {
        match self.state {
            State::End => {}
            State::Header if self.pending.is_empty() => {
                out.push(Bytes::from_static(&[0; 2 * BLOCK]));
                self.state = State::End;
            }
            _ => return Err(TransferRefused::Malformed("it ends inside an entry")),
        }
        Ok(self.summary)
    }

    fn header(&mut self, block: &[u8], out: &mut Vec<Bytes>) -> Result<(), TransferRefused> {
        if block.iter().all(|b| *b == 0) {
            out.push(Bytes::from_static(&[0; 2 * BLOCK]));
            self.state = State::End;
            return Ok(());
        }
        let mut header = header_of(block)?;
        let kind = header.entry_type();
        let declared = header
            .entry_size()
            .map_err(|_| TransferRefused::Malformed("an entry's size"))?;
        if is_extension(kind) {
            if declared > MAX_EXTENSION_BYTES {
                return Err(TransferRefused::Malformed("an extended header is too long"));
            }
            let mut kept = Box::new([0u8; BLOCK]);
            kept.copy_from_slice(block);
            self.pending = Vec::with_capacity(padded(declared) as usize);
            self.state = State::Extension {
                header: kept,
                size: declared,
            };
            if declared == 0 {
                self.extension(out)?;
            }
            return Ok(());
        }
        if let Some(kind) = kind_name(kind) {
            return Err(TransferRefused::EntryType {
                name: name_of(&header),
                kind,
            });
        }
        self.next_names = 0;
        self.next_links = 0;
        let size = self.next_size.take().unwrap_or(declared);
        let path = match self.next_path.take() {
            Some(path) => path,
            None => String::from_utf8_lossy(&header.path_bytes()).into_owned(),
        };
        let parts = relative_parts(&path)?;
        self.summary.entries += 1;
        if self.summary.entries > self.policy.max_entries {
            return Err(TransferRefused::TooManyEntries {
                max: self.policy.max_entries,
            });
        }
        if kind.is_file() || kind == tar::EntryType::Continuous {
            self.summary.bytes = self.summary.bytes.saturating_add(size);
            if self.summary.bytes > self.policy.max_bytes {
                return Err(TransferRefused::OverCap {
                    max: self.policy.max_bytes,
                });
            }
        }
        header.set_uid(u64::from(self.policy.owner.0));
        header.set_gid(u64::from(self.policy.owner.1));
        // Names only fit ustar and GNU headers; an old-style header has none to clear.
        let _ = header.set_username("");
        let _ = header.set_groupname("");
        if let Ok(mode) = header.mode() {
            // No set-user or set-group id bits.
            header.set_mode(mode & 0o1777);
        }
        header.set_cksum();
        let mtime = header.mtime().unwrap_or(0);
        let last = if kind.is_dir() {
            parts.len()
        } else {
            parts.len().saturating_sub(1)
        };
        for end in 1..=last {
            let directory = parts[..end].join("/");
            if self.directories.contains(&directory) {
                continue;
            }
            self.directory_bytes += directory.len();
            if self.directory_bytes > MAX_DIRECTORY_NAME_BYTES {
                return Err(TransferRefused::TooManyEntries {
                    max: self.policy.max_entries,
                });
            }
            // The archive's own entry for it comes now: it is not made twice.
            if end < parts.len() || !kind.is_dir() {
                out.push(Bytes::from(entry_header(
                    &directory,
                    tar::EntryType::Directory,
                    0,
                    0o755,
                    self.policy.owner,
                    mtime,
                )));
            }
            self.directories.insert(directory);
        }
        out.append(&mut self.held);
        out.push(Bytes::copy_from_slice(header.as_bytes()));
        let left = padded(size);
        self.state = if left == 0 {
            State::Header
        } else {
            State::Content { left }
        };
        Ok(())
    }

    fn extension(&mut self, out: &mut Vec<Bytes>) -> Result<(), TransferRefused> {
        let State::Extension { header, size } = std::mem::replace(&mut self.state, State::Header)
        else {
            return Ok(());
        };
        let data = std::mem::take(&mut self.pending);
        let data = &data[..size as usize];
        let mut header = tar::Header::from_byte_slice(&header[..]).clone();
        let kind = header.entry_type();
        let kept = if kind.is_pax_local_extensions() || kind.is_pax_global_extensions() {
            let (kept, size) = pax::filter(data)?;
            if kind.is_pax_local_extensions() {
                self.next_size = size;
                if let Some(path) = pax::value(&kept, "path") {
                    self.named()?;
                    self.next_path = Some(path);
                }
                if pax::value(&kept, "linkpath").is_some() {
                    self.linked()?;
                }
            }
            kept
        } else {
            if kind.is_gnu_longname() {
                self.named()?;
                let name = data.split(|b| *b == 0).next().unwrap_or_default();
                self.next_path = Some(String::from_utf8_lossy(name).into_owned());
            }
            if kind.is_gnu_longlink() {
                self.linked()?;
            }
            data.to_vec()
        };
        if kept.is_empty() {
            return Ok(());
        }
        header.set_size(kept.len() as u64);
        header.set_cksum();
        let mut bytes = Vec::with_capacity(BLOCK + padded(kept.len() as u64) as usize);
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&kept);
        bytes.resize(BLOCK + padded(kept.len() as u64) as usize, 0);
        if kind.is_pax_global_extensions() {
            out.push(Bytes::from(bytes));
        } else {
            self.held.push(Bytes::from(bytes));
        }
        Ok(())
    }
}

impl TarIn {
    fn named(&mut self) -> Result<(), TransferRefused> {
        self.next_names += 1;
        if self.next_names > 1 {
            return Err(TransferRefused::Malformed("an entry carries two names"));
        }
        Ok(())
    }

    fn linked(&mut self) -> Result<(), TransferRefused> {
        self.next_links += 1;
        if self.next_links > 1 {
            return Err(TransferRefused::Malformed(
                "an entry carries two link names",
            ));
        }
        Ok(())
    }
}

/// The parts of an entry's path below the upload's directory; `..` is refused.
fn relative_parts(path: &str) -> Result<Vec<&str>, TransferRefused> {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    if parts.contains(&"..") {
        return Err(TransferRefused::Malformed("an entry's path goes up (..)"));
    }
    Ok(parts)
}

/// The header (and the PAX record of a long name) of a one-file archive: `size` bytes of
/// content follow, then [`padded`] zeros and the end marker.
pub fn raw_entry(name: &str, size: u64, mode: u32, owner: (u32, u32), mtime: u64) -> Vec<u8> {
    entry_header(name, tar::EntryType::Regular, size, mode, owner, mtime)
}

/// The header of a directory entry.
pub fn dir_entry(name: &str, mode: u32, owner: (u32, u32), mtime: u64) -> Vec<u8> {
    entry_header(name, tar::EntryType::Directory, 0, mode, owner, mtime)
}

/// The header of a symbolic link to `target` (after a PAX record of its name and
/// target when either is long).
pub fn link_entry(name: &str, target: &str, owner: (u32, u32), mtime: u64) -> Vec<u8> {
    header_with_link(
        name,
        tar::EntryType::Symlink,
        0,
        0o777,
        owner,
        mtime,
        Some(target),
    )
}

/// The header of an entry (after the PAX record of its name when it is long).
fn entry_header(
    name: &str,
    kind: tar::EntryType,
    size: u64,
    mode: u32,
    owner: (u32, u32),
    mtime: u64,
) -> Vec<u8> {
    header_with_link(name, kind, size, mode, owner, mtime, None)
}

/// The header of an entry and, when its name or link target does not fit the header,
/// the PAX extended header holding them (the name in the header then a placeholder).
fn header_with_link(
    name: &str,
    kind: tar::EntryType,
    size: u64,
    mode: u32,
    owner: (u32, u32),
    mtime: u64,
    link: Option<&str>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 * BLOCK);
    let mut header = tar::Header::new_ustar();
    let mut records = Vec::new();
    if header.set_path(name).is_err() {
        records.extend(pax::record("path", name));
        let short: String = name.chars().take(90).collect();
        let _ = header.set_path(short.replace('/', "_"));
    }
    if let Some(target) = link
        && header.set_link_name(target).is_err()
    {
        records.extend(pax::record("linkpath", target));
    }
    if !records.is_empty() {
        let mut ext = tar::Header::new_ustar();
        ext.set_entry_type(tar::EntryType::XHeader);
        let _ = ext.set_path("PaxHeader");
        ext.set_size(records.len() as u64);
        ext.set_mode(0o644);
        ext.set_cksum();
        out.extend_from_slice(ext.as_bytes());
        out.extend_from_slice(&records);
        out.resize(
            out.len() + (padded(records.len() as u64) as usize - records.len()),
            0,
        );
    }
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(mode & 0o1777);
    header.set_uid(u64::from(owner.0));
    header.set_gid(u64::from(owner.1));
    header.set_mtime(mtime);
    header.set_cksum();
    out.extend_from_slice(header.as_bytes());
    out
}
