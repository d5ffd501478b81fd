//! Files: a one-entry tar in and the first entry of a tar out, read only as far as
//! needed and never past the size limit, both as the sandbox user (`as_user.rs`); and,
//! for the host's own set-up of a new sandbox (its workdir), the engine's archive API.
//!
//! A download refuses a directory or an oversized file from its header.

use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use bytes::Bytes;
use futures_util::StreamExt;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify, message_of, status_of};

const BLOCK: usize = 512;

pub use sandboxd_contracts::ReadFileError;

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

pub(crate) fn entry_tar(
    name: &str,
    kind: tar::EntryType,
    content: &[u8],
    mode: u32,
    owner: (u32, u32),
) -> std::io::Result<Vec<u8>> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_size(content.len() as u64);
    header.set_mode(mode);
    header.set_uid(u64::from(owner.0));
    header.set_gid(u64::from(owner.1));
    header.set_mtime(now_secs());
    let mut builder = tar::Builder::new(Vec::with_capacity(content.len() + 3 * BLOCK));
    builder.append_data(&mut header, name, content)?;
    builder.into_inner()
}

impl DockerEngine {
    async fn upload(&self, container: &str, dir: &str, tar: Vec<u8>) -> Result<(), EngineError> {
        let options = UploadToContainerOptionsBuilder::default().path(dir).build();
        bounded(
            "upload archive",
            self.docker.upload_to_container(
                container,
                Some(options),
                bollard::body_full(Bytes::from(tar)),
            ),
        )
        .await?
        .map_err(|e| match (status_of(&e), message_of(&e)) {
            // The engine reports an extraction point that is a file as a server error,
            // though the request is what is wrong.
            (Some(500), message) if message.contains("not a directory") => EngineError::Rejected {
                status: 400,
                message: format!("{dir} is not a directory"),
            },
            _ => classify("directory", e),
        })
    }

    /// Writes `content` to `dir/name` with `mode`, as `owner`.
    pub(crate) async fn put_file(
        &self,
        container: &str,
        dir: &str,
        name: &str,
        content: &[u8],
        mode: u32,
        owner: (u32, u32),
    ) -> Result<(), EngineError> {
        let tar = entry_tar(name, tar::EntryType::Regular, content, mode, owner).map_err(|e| {
            EngineError::Rejected {
                status: 400,
                message: format!("cannot archive {name}: {e}"),
            }
        })?;
        let tar: sandboxd_contracts::Chunks =
            Box::pin(futures_util::stream::once(
                async move { Ok(Bytes::from(tar)) },
            ));
        let user = format!("{}:{}", owner.0, owner.1);
        self.tar_in_as(container, dir, &user, tar).await
    }

    /// Creates (or re-owns) the directory `parent/name` owned by `owner`.
    pub(crate) async fn put_dir(
        &self,
        container: &str,
        parent: &str,
        name: &str,
        owner: (u32, u32),
    ) -> Result<(), EngineError> {
        let tar = entry_tar(name, tar::EntryType::Directory, &[], 0o755, owner).map_err(|e| {
            EngineError::Rejected {
                status: 400,
                message: format!("cannot archive {name}: {e}"),
            }
        })?;
        self.upload(container, parent, tar).await
    }

    /// Reads a regular file of at most `max` bytes, as `user`. Reading stops as soon as
    /// the outcome is known: a directory or an oversized file is refused from its header
    /// alone.
    pub(crate) async fn read_file(
        &self,
        container: &str,
        path: &str,
        max: usize,
        user: &str,
    ) -> Result<Vec<u8>, ReadFileError> {
        let mut stream = match self.tar_out_as(container, path, user).await {
            Ok(stream) => stream,
            Err(EngineError::NotFound { .. }) => return Err(ReadFileError::NotFound),
            Err(error) => return Err(error.into()),
        };
        let mut buf: Vec<u8> = Vec::new();
        let mut reader = FirstEntry::default();
        loop {
            if let Some(result) = reader.advance(&buf, max)? {
                return Ok(result);
            }
            match bounded("download archive", stream.next()).await? {
                Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    return Err(EngineError::Rejected {
                        status: 400,
                        message: e.to_string(),
                    }
                    .into());
                }
                None => return Err(ReadFileError::Malformed),
            }
        }
    }
}

impl DockerEngine {
    /// The tar stream of `path` in the container, read by the caller only as far as it
    /// needs.
    pub(crate) fn download(
        &self,
        container: &str,
        path: &str,
    ) -> impl futures_util::Stream<Item = Result<Bytes, bollard::errors::Error>> + use<> {
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(path)
            .build();
        self.docker
            .download_from_container(container, Some(options))
    }

    /// Whether `path` in the container is a directory with nothing in it: `None` when it
    /// does not exist. Reads the archive only as far as its second entry.
    pub(crate) async fn is_empty_dir(
        &self,
        container: &str,
        path: &str,
    ) -> Result<Option<bool>, EngineError> {
        let mut stream = self.download(container, path);
        let mut buf: Vec<u8> = Vec::new();
        loop {
            match empty_dir_archive(&buf) {
                Some(answer) => return Ok(Some(answer)),
                None if buf.len() > 64 * 1024 => return Ok(Some(false)),
                None => {}
            }
            match bounded("download archive", stream.next()).await? {
                Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                Some(Err(e)) if status_of(&e) == Some(404) => return Ok(None),
                Some(Err(e)) => return Err(classify("path", e)),
                // The archive ended: it held the directory alone.
                None => return Ok(Some(is_directory_header(&buf))),
            }
        }
    }
}

/// Whether the first block of `buf` is a directory's header.
fn is_directory_header(buf: &[u8]) -> bool {
    buf.get(..BLOCK)
        .is_some_and(|block| tar::Header::from_byte_slice(block).entry_type().is_dir())
}

/// Whether a (possibly partial) archive of one path is that of an empty directory:
/// `Some(true)` when a directory's header is followed by the end marker, `Some(false)`
/// when it is not a directory or another entry follows, `None` when more bytes are
/// needed. The engine writes a directory's entry without extension headers.
fn empty_dir_archive(buf: &[u8]) -> Option<bool> {
    let first = buf.get(..BLOCK)?;
    if !tar::Header::from_byte_slice(first).entry_type().is_dir() {
        return Some(false);
    }
    let next = buf.get(BLOCK..2 * BLOCK)?;
    Some(next.iter().all(|b| *b == 0))
}

/// Incremental reader of the first real entry of a tar held in a growing buffer.
#[derive(Debug, Default)]
struct FirstEntry {
    /// Offset of the next header to read.
    offset: usize,
    /// Offset and size of the content once the entry's header was read.
    content: Option<(usize, usize)>,
}

fn padded(size: usize) -> usize {
    size.div_ceil(BLOCK) * BLOCK
}

impl FirstEntry {
    /// `Some(content)` once it is complete, `None` when more bytes are needed.
    fn advance(&mut self, buf: &[u8], max: usize) -> Result<Option<Vec<u8>>, ReadFileError> {
        loop {
            if let Some((start, size)) = self.content {
                return Ok((buf.len() >= start + size).then(|| buf[start..start + size].to_vec()));
            }
            if buf.len() < self.offset + BLOCK {
                return Ok(None);
            }
            let block = &buf[self.offset..self.offset + BLOCK];
            if block.iter().all(|b| *b == 0) {
                return Err(ReadFileError::Malformed);
            }
            let header = tar::Header::from_byte_slice(block);
            let size = header.entry_size().map_err(|_| ReadFileError::Malformed)?;
            let size = usize::try_from(size).map_err(|_| ReadFileError::TooLarge(max))?;
            match header.entry_type() {
                // Extended headers (long names, PAX attributes) precede the real entry.
                kind if kind.is_pax_global_extensions()
                    || kind.is_pax_local_extensions()
                    || kind.is_gnu_longname()
                    || kind.is_gnu_longlink() =>
                {
                    if size > 1024 * 1024 {
                        return Err(ReadFileError::Malformed);
                    }
                    self.offset += BLOCK + padded(size);
                }
                kind if kind.is_file() => {
                    if size > max {
                        return Err(ReadFileError::TooLarge(max));
                    }
                    self.content = Some((self.offset + BLOCK, size));
                }
                _ => return Err(ReadFileError::NotRegularFile),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(tar: &[u8], max: usize) -> Result<Vec<u8>, ReadFileError> {
        let mut reader = FirstEntry::default();
        // Feed the buffer in small steps, as a stream would.
        for end in (0..=tar.len()).step_by(100).chain([tar.len()]) {
            if let Some(content) = reader.advance(&tar[..end], max)? {
                return Ok(content);
            }
        }
        Err(ReadFileError::Malformed)
    }

    #[test]
    fn reads_the_first_file_with_a_long_name() {
        let name = "n".repeat(150);
        let tar = entry_tar(
            &name,
            tar::EntryType::Regular,
            b"hello",
            0o644,
            (1000, 1000),
        )
        .unwrap();
        assert_eq!(read_all(&tar, 10).unwrap(), b"hello");
    }

    #[test]
    fn refuses_directories_and_oversized_files_from_the_header() {
        let dir = entry_tar("d", tar::EntryType::Directory, &[], 0o755, (0, 0)).unwrap();
        assert!(matches!(
            read_all(&dir, 10),
            Err(ReadFileError::NotRegularFile)
        ));
        let big = entry_tar("f", tar::EntryType::Regular, &[7u8; 2000], 0o644, (0, 0)).unwrap();
        let mut reader = FirstEntry::default();
        assert!(matches!(
            reader.advance(&big[..BLOCK], 1000),
            Err(ReadFileError::TooLarge(1000))
        ));
        let link = {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_size(0);
            let mut builder = tar::Builder::new(Vec::new());
            builder
                .append_link(&mut header, "l", "/etc/passwd")
                .unwrap();
            builder.into_inner().unwrap()
        };
        assert!(matches!(
            read_all(&link, 10),
            Err(ReadFileError::NotRegularFile)
        ));
    }

    #[test]
    fn empty_archive_is_malformed() {
        assert!(matches!(
            read_all(&[0u8; 1024], 10),
            Err(ReadFileError::Malformed)
        ));
    }

    #[test]
    fn an_empty_directory_is_told_from_a_full_one() {
        let dir = |entries: &[&str]| {
            let mut builder = tar::Builder::new(Vec::new());
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_size(0);
            builder.append_data(&mut header, "work/", &[][..]).unwrap();
            for name in entries {
                let mut header = tar::Header::new_gnu();
                header.set_size(1);
                builder.append_data(&mut header, name, &b"x"[..]).unwrap();
            }
            builder.into_inner().unwrap()
        };
        assert_eq!(empty_dir_archive(&dir(&[])), Some(true));
        assert_eq!(empty_dir_archive(&dir(&["work/passwd"])), Some(false));
        assert_eq!(
            empty_dir_archive(&dir(&[])[..BLOCK]),
            None,
            "more bytes needed"
        );
        let file = entry_tar("f", tar::EntryType::Regular, b"x", 0o644, (0, 0)).unwrap();
        assert_eq!(empty_dir_archive(&file), Some(false));
    }
}
