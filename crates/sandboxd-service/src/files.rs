//! `sandbox.writeFile`, `sandbox.readFile`, `sandbox.listFiles`.

use sandboxd_agent_protocol::{DirEntry, EntryKind, FailureKind};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::{FileEntry, FileType, ListFilesResult, ReadFileResult, WriteFileResult};
use sandboxd_core::limits::{MAX_FILE_BYTES, MAX_LISTING_BYTES};
use sandboxd_core::model::{Principal, Sandbox};
use sandboxd_core::validate::{ListFiles, ReadFile, WriteFile};
use sandboxd_core::{listing, paths, plan};
use sandboxd_ports::{EngineError, ReadFileError};

use super::{ServedBy, Service, ServiceError, internal_exec, now_ms};
use sandboxd_agent_host::{AgentError, FileOpError};
use sandboxd_core::rfc3339::format_millis as rfc3339;

const DEFAULT_FILE_MODE: u32 = 0o644;

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

impl Service {
    /// Writes a file (parents created) owned by the sandbox user.
    pub async fn write_file(
        &self,
        caller: &Principal,
        cmd: WriteFile,
    ) -> Result<WriteFileResult, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        let container = sandbox.running_container()?.to_owned();
        if cmd.content.len() > MAX_FILE_BYTES {
            return Err(ServiceError::TooLarge(format!(
                "file exceeds the {MAX_FILE_BYTES} byte limit"
            )));
        }
        self.while_touching(
            &sandbox.sandbox_id,
            self.write_content(&sandbox, &container, cmd),
        )
        .await
    }

    async fn write_content(
        &self,
        sandbox: &Sandbox,
        container: &str,
        cmd: WriteFile,
    ) -> Result<WriteFileResult, ServiceError> {
        let (dir, name) = paths::split_file(&cmd.path)
            .ok_or_else(|| ServiceError::Refused("path must point to a file".into()))?;
        let mode = cmd.mode.unwrap_or(DEFAULT_FILE_MODE);
        if let Some(agent) = self.agents().connection(&sandbox.sandbox_id) {
            match agent.write_file(&cmd.path, &cmd.content, mode).await {
                Err(FileOpError::Agent(AgentError::NotSent)) => {}
                outcome => {
                    self.served(&sandbox.sandbox_id, ServedBy::Agent);
                    let size = self
                        .settled(&sandbox.sandbox_id, outcome.map_err(file_error))
                        .await?;
                    return Ok(WriteFileResult {
                        path: cmd.path,
                        size,
                    });
                }
            }
        }
        self.served(&sandbox.sandbox_id, ServedBy::Engine);
        let owner = sandbox
            .user
            .as_deref()
            .and_then(plan::parse_user)
            .unwrap_or((0, 0));
        let engine = self.engine();
        // The common case (the directory exists) costs one archive upload; a missing
        // directory is created as the sandbox user, then the upload is retried.
        match engine
            .put_file(container, dir, name, &cmd.content, mode, owner)
            .await
        {
            Err(EngineError::NotFound { .. }) => {
                self.make_dirs(container, dir).await?;
                engine
                    .put_file(container, dir, name, &cmd.content, mode, owner)
                    .await?;
            }
            other => other?,
        }
        Ok(WriteFileResult {
            path: cmd.path,
            size: cmd.content.len() as u64,
        })
    }

    /// `mkdir -p` as the sandbox user, so it can only create what the user may.
    async fn make_dirs(&self, container: &str, dir: &str) -> Result<(), ServiceError> {
        let argv = vec!["mkdir".into(), "-p".into(), "--".into(), dir.into()];
        let mkdir = self
            .engine_exec(container, internal_exec(argv, 4096))
            .await?;
        if mkdir.exit_code == 0 {
            return Ok(());
        }
        let reason = first_line(&mkdir.stderr);
        Err(ServiceError::Refused(if reason.is_empty() {
            format!("unable to create directory {dir}")
        } else {
            reason
        }))
    }

    /// Reads a regular file of at most 10 MiB.
    pub async fn read_file(
        &self,
        caller: &Principal,
        cmd: ReadFile,
    ) -> Result<ReadFileResult, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Read)
            .await?;
        let container = sandbox.running_container()?.to_owned();
        self.while_touching(
            &sandbox.sandbox_id,
            self.read_content(&sandbox, &container, cmd),
        )
        .await
    }

    async fn read_content(
        &self,
        sandbox: &Sandbox,
        container: &str,
        cmd: ReadFile,
    ) -> Result<ReadFileResult, ServiceError> {
        if let Some(agent) = self.agents().connection(&sandbox.sandbox_id) {
            match agent.read_file(&cmd.path, MAX_FILE_BYTES).await {
                Err(FileOpError::Agent(AgentError::NotSent)) => {}
                outcome => {
                    self.served(&sandbox.sandbox_id, ServedBy::Agent);
                    let read = self
                        .settled(&sandbox.sandbox_id, outcome.map_err(file_error))
                        .await?;
                    return Ok(read_result(cmd, read));
                }
            }
        }
        self.served(&sandbox.sandbox_id, ServedBy::Engine);
        let content = self
            .engine()
            .read_file(container, &cmd.path, MAX_FILE_BYTES)
            .await
            .map_err(|error| match error {
                ReadFileError::NotFound => ServiceError::NotFound("file"),
                ReadFileError::NotRegularFile => {
                    ServiceError::Refused("path is not a regular file".into())
                }
                ReadFileError::TooLarge(max) => {
                    ServiceError::TooLarge(format!("file exceeds the {max} byte limit"))
                }
                ReadFileError::Malformed => {
                    ServiceError::Refused("the engine returned no file for this path".into())
                }
                ReadFileError::Engine(engine) => engine.into(),
            })?;
        Ok(read_result(cmd, content))
    }

    /// Lists a directory: GNU find with metadata, or names only where find has no `-printf`.
    pub async fn list_files(
        &self,
        caller: &Principal,
        cmd: ListFiles,
    ) -> Result<ListFilesResult, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Read)
            .await?;
        let container = sandbox.running_container()?.to_owned();
        self.store().touch(&sandbox.sandbox_id, now_ms()).await?;
        let target = cmd.path.unwrap_or_else(|| sandbox.workdir.clone());
        if let Some(agent) = self.agents().connection(&sandbox.sandbox_id) {
            match agent.list_dir(&target, MAX_LISTING_BYTES).await {
                Err(FileOpError::Agent(AgentError::NotSent)) => {}
                outcome => {
                    self.served(&sandbox.sandbox_id, ServedBy::Agent);
                    let mut entries: Vec<FileEntry> = self
                        .settled(&sandbox.sandbox_id, outcome.map_err(file_error))
                        .await?
                        .into_iter()
                        .map(file_entry)
                        .collect();
                    listing::sort(&mut entries);
                    return Ok(ListFilesResult {
                        path: target,
                        entries,
                    });
                }
            }
        }
        self.served(&sandbox.sandbox_id, ServedBy::Engine);
        let find = self
            .engine_exec(
                &container,
                internal_exec(listing::find_argv(&target), MAX_LISTING_BYTES),
            )
            .await?;
        if find.exit_code == 0 {
            return Ok(ListFilesResult {
                entries: listing::parse_find(&find.stdout, rfc3339),
                path: target,
            });
        }
        let ls = self
            .engine_exec(
                &container,
                internal_exec(listing::ls_argv(&target), MAX_LISTING_BYTES),
            )
            .await?;
        if ls.exit_code == 0 {
            return Ok(ListFilesResult {
                entries: listing::parse_ls(&ls.stdout),
                path: target,
            });
        }
        let reason = first_line(if ls.stderr.is_empty() {
            &find.stderr
        } else {
            &ls.stderr
        });
        if reason.contains("No such file") {
            return Err(ServiceError::NotFound("directory"));
        }
        Err(ServiceError::Refused(if reason.is_empty() {
            "unable to list files".into()
        } else {
            reason
        }))
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

/// The error of a file operation the agent refused or could not finish.
fn file_error(error: FileOpError) -> ServiceError {
    match error {
        FileOpError::Refused(failure) => match failure.kind {
            FailureKind::NotFound => ServiceError::NotFound("file"),
            FailureKind::TooLarge => {
                ServiceError::TooLarge(format!("file exceeds the {MAX_FILE_BYTES} byte limit"))
            }
            FailureKind::NotAFile => ServiceError::Refused("path is not a regular file".into()),
            FailureKind::NotADirectory
            | FailureKind::PermissionDenied
            | FailureKind::Invalid
            | FailureKind::Io
            | FailureKind::Limit => ServiceError::Refused(failure.message),
        },
        FileOpError::Agent(error) => ServiceError::Agent(error),
    }
}
