//! Streamed transfers in and out of a sandbox through tar streams, checked on the way:
//! uploads have every entry re-owned by the sandbox user, their size counted against the
//! transfer's cap before any of their bytes go on, and what a tar could smuggle (device
//! nodes, owners and extended attributes in PAX records) taken out; a download of one
//! file is cut out of the engine's tar of it, however large, without holding it.

mod pax;
mod tar_in;
mod tar_out;
#[cfg(test)]
mod tests;

pub use tar_in::{TarIn, TarPolicy, TarSummary, dir_entry, link_entry, raw_entry};
pub use tar_out::FileOut;

/// Size of a tar block.
pub const BLOCK: usize = 512;
/// Extended headers (PAX records, GNU long names) are at most this long.
const MAX_EXTENSION_BYTES: u64 = 1024 * 1024;

/// Moves bytes from the front of `chunk` into `pending` until it holds `want`; whether it
/// does.
fn gather(pending: &mut Vec<u8>, want: usize, chunk: &mut bytes::Bytes) -> bool {
    let take = want.saturating_sub(pending.len()).min(chunk.len());
    pending.extend_from_slice(&chunk.split_to(take));
    pending.len() == want
}

/// `size` rounded up to whole blocks.
pub fn padded(size: u64) -> u64 {
    size.div_ceil(BLOCK as u64) * BLOCK as u64
}

/// Why a transfer was refused or cut.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferRefused {
    #[error("the transfer is larger than the limit of {max} bytes")]
    OverCap { max: u64 },
    #[error("the archive has more than {max} entries")]
    TooManyEntries { max: u64 },
    #[error("the archive holds {name}, a {kind}; only files, directories and links are taken")]
    EntryType { name: String, kind: &'static str },
    #[error("the archive is malformed: {0}")]
    Malformed(&'static str),
    #[error("{0} is not a regular file")]
    NotAFile(String),
}
