//! One file cut out of the engine's tar of its path, as it streams: extended headers
//! (read for a PAX `size`) are skipped, the file's header gives its size before any
//! content goes on, and the rest of the archive is ignored. The archive comes from the
//! sandbox's side: every length in it is bounded.
//!
//! `FileOut`, a push state machine over chunks.

use bytes::Bytes;

use super::{BLOCK, MAX_EXTENSION_BYTES, TransferRefused, gather, padded, pax};

#[derive(Debug)]
enum State {
    Header,
    Extension { size: u64, pax: bool },
    Content { left: u64 },
    Done,
}

/// The reader (see the module's text).
#[derive(Debug)]
pub struct FileOut {
    max: u64,
    state: State,
    pending: Vec<u8>,
    next_size: Option<u64>,
    size: Option<u64>,
}

impl FileOut {
    /// A reader refusing files larger than `max`.
    pub fn new(max: u64) -> Self {
        Self {
            max,
            state: State::Header,
            pending: Vec::with_capacity(BLOCK),
            next_size: None,
            size: None,
        }
    }

    /// The file's size, once its header was read.
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// Whether the whole file went by.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Takes the next chunk; appends the file's content found in it to `out`.
    pub fn push(&mut self, mut chunk: Bytes, out: &mut Vec<Bytes>) -> Result<(), TransferRefused> {
        while !chunk.is_empty() {
            match &mut self.state {
                State::Done => return Ok(()),
                State::Content { left } => {
                    let take = (*left).min(chunk.len() as u64) as usize;
                    out.push(chunk.split_to(take));
                    *left -= take as u64;
                    if *left == 0 {
                        self.state = State::Done;
                    }
                }
                State::Header => {
                    if gather(&mut self.pending, BLOCK, &mut chunk) {
                        let block = std::mem::take(&mut self.pending);
                        if let Some(size) = self.header(&block)? {
                            self.size = Some(size);
                            if size == 0 {
                                self.state = State::Done;
                            }
                        }
                    }
                }
                State::Extension { size, pax } => {
                    let want = padded(*size) as usize;
                    if gather(&mut self.pending, want, &mut chunk) {
                        if *pax {
                            let data = &self.pending[..*size as usize];
                            self.next_size = pax::filter(data)?.1;
                        }
                        self.pending.clear();
                        self.state = State::Header;
                    }
                }
            }
        }
        Ok(())
    }

    /// `Some(size)` when `block` is the file's header.
    fn header(&mut self, block: &[u8]) -> Result<Option<u64>, TransferRefused> {
        if block.iter().all(|b| *b == 0) {
            return Err(TransferRefused::Malformed("it holds no file"));
        }
        let header = tar::Header::from_byte_slice(block);
        let kind = header.entry_type();
        let declared = header
            .entry_size()
            .map_err(|_| TransferRefused::Malformed("an entry's size"))?;
        if kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname()
            || kind.is_gnu_longlink()
        {
            if declared > MAX_EXTENSION_BYTES {
                return Err(TransferRefused::Malformed("an extended header is too long"));
            }
            self.state = if declared == 0 {
                State::Header
            } else {
                State::Extension {
                    size: declared,
                    pax: kind.is_pax_local_extensions(),
                }
            };
            return Ok(None);
        }
        if !(kind.is_file() || kind == tar::EntryType::Continuous) {
            let name = String::from_utf8_lossy(&header.path_bytes())
                .chars()
                .take(100)
                .collect();
            return Err(TransferRefused::NotAFile(name));
        }
        let size = self.next_size.take().unwrap_or(declared);
        if size > self.max {
            return Err(TransferRefused::OverCap { max: self.max });
        }
        self.state = State::Content { left: size };
        Ok(Some(size))
    }
}
