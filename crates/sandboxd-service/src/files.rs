//! `sandbox.writeFile`, `sandbox.readFile`, `sandbox.listFiles`.

use sandboxd_agent_protocol::{DirEntry, EntryKind};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::{FileEntry, FileType, ListFilesResult, ReadFileResult, WriteFileResult};
use sandboxd_core::limits::{MAX_FILE_BYTES, MAX_LISTING_BYTES};
use sandboxd_core::model::Principal;
use sandboxd_core::validate::{ListFiles, ReadFile, WriteFile};
use sandboxd_core::{listing, paths};

use super::executor::{Executor, Listing};
use super::{Service, ServiceError, now_ms};
use sandboxd_core::rfc3339::format_millis as rfc3339;

const DEFAULT_FILE_MODE: u32 = 0o644;

impl Service {
    /// Writes a file (parents created) owned by the sandbox user.
    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id))]
    pub async fn write_file(
        &self,
        caller: &Principal,
        cmd: WriteFile,
    ) -> Result<WriteFileResult, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        let executor = self.executor(&sandbox).await?;
        if cmd.content.len() > MAX_FILE_BYTES {
            return Err(ServiceError::TooLarge(format!(
                "file exceeds the {MAX_FILE_BYTES} byte limit"
            )));
        }
        self.while_touching(&sandbox.sandbox_id, self.write_content(&executor, cmd))
            .await
    }

    async fn write_content(
        &self,
        executor: &Executor<'_>,
        cmd: WriteFile,
    ) -> Result<WriteFileResult, ServiceError> {
        let split = paths::split_file(&cmd.path)
            .ok_or_else(|| ServiceError::Refused("path must point to a file".into()))?;
        let mode = cmd.mode.unwrap_or(DEFAULT_FILE_MODE);
        let size = executor
            .write_file(&cmd.path, split, &cmd.content, mode)
            .await?;
        Ok(WriteFileResult {
            path: cmd.path,
            size,
        })
    }

    /// Reads a regular file of at most 10 MiB.
    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id))]
    pub async fn read_file(
        &self,
        caller: &Principal,
        cmd: ReadFile,
    ) -> Result<ReadFileResult, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Read)
            .await?;
        let executor = self.executor(&sandbox).await?;
        let content = self
            .while_touching(
                &sandbox.sandbox_id,
                executor.read_file(&cmd.path, MAX_FILE_BYTES),
            )
            .await?;
        Ok(read_result(cmd, content))
    }

    /// Lists a directory: GNU find with metadata, or names only where find has no `-printf`.
    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id))]
    pub async fn list_files(
        &self,
        caller: &Principal,
        cmd: ListFiles,
    ) -> Result<ListFilesResult, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Read)
            .await?;
        let executor = self.executor(&sandbox).await?;
        self.store().touch(&sandbox.sandbox_id, now_ms()).await?;
        let target = cmd.path.unwrap_or_else(|| sandbox.workdir.clone());
        let entries = match executor.list_dir(&target, MAX_LISTING_BYTES).await? {
            Listing::Agent(entries) => {
                let mut entries: Vec<FileEntry> = entries.into_iter().map(file_entry).collect();
                listing::sort(&mut entries);
                entries
            }
            Listing::Find(entries) => entries,
        };
        Ok(ListFilesResult {
            path: target,
            entries,
        })
    }
}

fn read_result(cmd: ReadFile, content: Vec<u8>) -> ReadFileResult {
    ReadFileResult {
        path: cmd.path,
        size: content.len() as u64,
        encoding: cmd.encoding,
        content: cmd.encoding.encode(&content),
    }
}

fn file_entry(entry: DirEntry) -> FileEntry {
    FileEntry {
        name: entry.name,
        kind: match entry.kind {
            EntryKind::Directory => FileType::Directory,
            EntryKind::File => FileType::File,
            EntryKind::Symlink => FileType::Symlink,
            EntryKind::Other => FileType::Other,
        },
        size: Some(entry.size),
        mode: Some(format!("{:o}", entry.mode)),
        modified_at: Some(rfc3339(entry.modified_ms)),
    }
}
