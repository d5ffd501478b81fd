//! `sandbox.writeFile`, `sandbox.readFile`, `sandbox.listFiles`.

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::{ListFilesResult, ReadFileResult, WriteFileResult};
use sandboxd_core::limits::{MAX_FILE_BYTES, MAX_LISTING_BYTES};
use sandboxd_core::model::Principal;
use sandboxd_core::paths;
use sandboxd_core::validate::{ListFiles, ReadFile, WriteFile};

use super::{Files, outcome};
use crate::executor::Executor;
use crate::{ServiceError, now_ms};

const DEFAULT_FILE_MODE: u32 = 0o644;

impl Files {
    /// Writes a file (parents created) owned by the sandbox user.
    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id))]
    pub async fn write_file(
        &self,
        caller: &Principal,
        cmd: WriteFile,
    ) -> Result<WriteFileResult, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        let executor = self.service.executor(&sandbox).await?;
        if cmd.content.len() > MAX_FILE_BYTES {
            return Err(ServiceError::TooLarge(format!(
                "file exceeds the {MAX_FILE_BYTES} byte limit"
            )));
        }
        let path = cmd.path.clone();
        let done = self
            .service
            .while_touching(&sandbox.sandbox_id, self.write_content(&executor, cmd))
            .await;
        self.note(
            caller,
            &sandbox,
            "write",
            (&path, None),
            outcome(&done, |written| Some(written.size)),
        )
        .await;
        done
    }

    async fn write_content(
        &self,
        executor: &Executor<'_>,
        cmd: WriteFile,
    ) -> Result<WriteFileResult, ServiceError> {
        if paths::split_file(&cmd.path).is_none() {
            return Err(ServiceError::Refused("path must point to a file".into()));
        }
        let mode = cmd.mode.unwrap_or(DEFAULT_FILE_MODE);
        let size = executor.write_file(&cmd.path, &cmd.content, mode).await?;
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
            .service
            .access()
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Read)
            .await?;
        let executor = self.service.executor(&sandbox).await?;
        let content = self
            .service
            .while_touching(
                &sandbox.sandbox_id,
                executor.read_file(&cmd.path, MAX_FILE_BYTES),
            )
            .await;
        self.note(
            caller,
            &sandbox,
            "read",
            (&cmd.path, None),
            outcome(&content, |content| Some(content.len() as u64)),
        )
        .await;
        Ok(read_result(cmd, content?))
    }

    /// Lists a directory: GNU find with metadata, or names only where find has no `-printf`.
    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id))]
    pub async fn list_files(
        &self,
        caller: &Principal,
        cmd: ListFiles,
    ) -> Result<ListFilesResult, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Read)
            .await?;
        let executor = self.service.executor(&sandbox).await?;
        self.service
            .store()
            .touch(&sandbox.sandbox_id, now_ms())
            .await?;
        let target = cmd.path.unwrap_or_else(|| sandbox.workdir.clone());
        let entries = executor.list_dir(&target, MAX_LISTING_BYTES).await?;
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
