//! `sandbox.writeFile`, `sandbox.readFile`, `sandbox.listFiles`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sandboxd_core::api::{Encoding, ListFilesResult, ReadFileResult, WriteFileResult};
use sandboxd_core::limits::{MAX_FILE_BYTES, MAX_LISTING_BYTES};
use sandboxd_core::model::Principal;
use sandboxd_core::validate::{ListFiles, ReadFile, WriteFile};
use sandboxd_core::{listing, paths, plan};
use sandboxd_docker::{EngineError, ReadFileError};

use super::{Service, ServiceError, internal_exec, now_ms};
use crate::time::rfc3339;

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
        let sandbox = self.sandbox_for(caller, &cmd.sandbox_id).await?;
        let container = sandbox.running_container()?.to_owned();
        if cmd.content.len() > MAX_FILE_BYTES {
            return Err(ServiceError::TooLarge(format!(
                "file exceeds the {MAX_FILE_BYTES} byte limit"
            )));
        }
        let (dir, name) = paths::split_file(&cmd.path)
            .ok_or_else(|| ServiceError::Refused("path must point to a file".into()))?;
        self.store().touch(&sandbox.sandbox_id, now_ms()).await?;
        let owner = sandbox
            .user
            .as_deref()
            .and_then(plan::parse_user)
            .unwrap_or((0, 0));
        let mode = cmd.mode.unwrap_or(DEFAULT_FILE_MODE);
        let engine = self.engine();
        // The common case (the directory exists) costs one archive upload; a missing
        // directory is created as the sandbox user, then the upload is retried.
        match engine
            .put_file(&container, dir, name, &cmd.content, mode, owner)
            .await
        {
            Err(EngineError::NotFound { .. }) => {
                self.make_dirs(&container, dir).await?;
                engine
                    .put_file(&container, dir, name, &cmd.content, mode, owner)
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
            .engine()
            .exec(container, internal_exec(argv, 4096))
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
        let sandbox = self.sandbox_for(caller, &cmd.sandbox_id).await?;
        let container = sandbox.running_container()?.to_owned();
        self.store().touch(&sandbox.sandbox_id, now_ms()).await?;
        let content = self
            .engine()
            .read_file(&container, &cmd.path, MAX_FILE_BYTES)
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
        let size = content.len() as u64;
        let content = match cmd.encoding {
            Encoding::Utf8 => String::from_utf8_lossy(&content).into_owned(),
            Encoding::Base64 => STANDARD.encode(&content),
        };
        Ok(ReadFileResult {
            path: cmd.path,
            size,
            encoding: cmd.encoding,
            content,
        })
    }

    /// Lists a directory: GNU find with metadata, or names only where find has no `-printf`.
    pub async fn list_files(
        &self,
        caller: &Principal,
        cmd: ListFiles,
    ) -> Result<ListFilesResult, ServiceError> {
        let sandbox = self.sandbox_for(caller, &cmd.sandbox_id).await?;
        let container = sandbox.running_container()?.to_owned();
        self.store().touch(&sandbox.sandbox_id, now_ms()).await?;
        let target = cmd.path.unwrap_or_else(|| sandbox.workdir.clone());
        let find = self
            .engine()
            .exec(
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
            .engine()
            .exec(
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
