//! The contents of a build's files: given whole (`template.build`'s `files`, E2B's
//! archives), or stored in a build context (`template.context`) as a place in the
//! context's blob, with the digest taken as it was stored. And how many files and bytes
//! a build may be given each way.

use std::collections::BTreeMap;
use std::io::{Read, Seek};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::{MAX_FILES, MAX_FILES_BYTES};

/// Lower-case hex of a digest.
pub(super) fn hex(digest: impl AsRef<[u8]>) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The hex SHA-256 of a file's contents: what a copy's cache key holds of it.
pub fn content_digest(content: &[u8]) -> String {
    hex(Sha256::digest(content))
}

/// One file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileBody {
    Bytes(Vec<u8>),
    Stored(StoredFile),
}

/// A file kept in a context's blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    pub offset: u64,
    pub size: u64,
    /// `content_digest` of its content.
    pub digest: String,
}

impl FileBody {
    pub fn len(&self) -> u64 {
        match self {
            Self::Bytes(bytes) => bytes.len() as u64,
            Self::Stored(stored) => stored.size,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `content_digest` of the content: taken now of bytes, as it was stored of a
    /// stored file.
    pub fn digest(&self) -> String {
        match self {
            Self::Bytes(bytes) => content_digest(bytes),
            Self::Stored(stored) => stored.digest.clone(),
        }
    }
}

/// What a context holds: its files' places in the blob, the modes that are not `0644`,
/// and its links; serialized as the store keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextIndex {
    pub files: BTreeMap<String, StoredFile>,
    #[serde(default)]
    pub modes: BTreeMap<String, u32>,
    #[serde(default)]
    pub links: BTreeMap<String, String>,
}

/// The blob a context's stored files are read from.
pub trait Blob: Read + Seek {}
impl<T: Read + Seek> Blob for T {}

/// The most files and bytes a build may be given; its copies may put in place as many
/// files, and four times the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileBounds {
    pub files: usize,
    pub bytes: u64,
}

/// The most files and links a build context may hold.
pub const MAX_CONTEXT_FILES: usize = 100_000;

impl FileBounds {
    /// Files given in the request (`files`, E2B's archives).
    pub const GIVEN: Self = Self {
        files: MAX_FILES,
        bytes: MAX_FILES_BYTES,
    };

    /// A context streamed as a tar, of at most `bytes`.
    pub fn context(bytes: u64) -> Self {
        Self {
            files: MAX_CONTEXT_FILES,
            bytes,
        }
    }

    /// The most bytes a build's copies put in place together.
    pub fn copied_bytes(&self) -> u64 {
        self.bytes.saturating_mul(4)
    }
}
