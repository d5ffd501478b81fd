//! File operations through the sandbox's channel.

use sandboxd_contracts::{Refusal, RefusalKind};
use sandboxd_core::api::FileEntry;
use sandboxd_core::limits::MAX_FILE_BYTES;

use super::{Executor, refusal_error, through};
use crate::ServiceError;

/// A file operation's refusal as the caller's error.
fn file_refusal(failure: Refusal, missing: &'static str) -> ServiceError {
    match failure.kind {
        RefusalKind::TooLarge => {
            ServiceError::TooLarge(format!("file exceeds the {MAX_FILE_BYTES} byte limit"))
        }
        RefusalKind::NotAFile => ServiceError::Refused("path is not a regular file".into()),
        _ => refusal_error(failure, missing),
    }
}

impl Executor<'_> {
    /// Writes `content` to `path` with `mode`, parents created, owned by the sandbox
    /// user; returns the size written.
    pub(crate) async fn write_file(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
    ) -> Result<u64, ServiceError> {
        let (_, result) = through!(self, |channel| channel.write_file(path, content, mode));
        self.settled(result, |refusal| file_refusal(refusal, "file"))
            .await
    }

    /// Reads a regular file of at most `max` bytes.
    pub(crate) async fn read_file(&self, path: &str, max: usize) -> Result<Vec<u8>, ServiceError> {
        let (_, result) = through!(self, |channel| channel.read_file(path, max));
        self.settled(result, |refusal| file_refusal(refusal, "file"))
            .await
    }

    /// Lists a directory, its answer at most `max` bytes, directories first, then by name.
    pub(crate) async fn list_dir(
        &self,
        target: &str,
        max: usize,
    ) -> Result<Vec<FileEntry>, ServiceError> {
        let (_, result) = through!(self, |channel| channel.list_dir(target, max));
        let mut entries = self
            .settled(result, |refusal| file_refusal(refusal, "directory"))
            .await?;
        sandboxd_core::listing::sort(&mut entries);
        Ok(entries)
    }
}
