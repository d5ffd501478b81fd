//! The engine adapter of the sandbox channel contract: each operation through the engine
//! channel (`engine.rs`), transfers through its archive API (`engine_transfers.rs`). It
//! does no processes or terminals: those answer [`ChannelError::NeedsAgent`].
//!
//! Exec, `put_file`, listings (`find`, else `ls`) and the transfers.

use sandboxd_contracts::{
    ChannelError, Download, EngineError, ExecOutcome, ExecSpec, ReadFileError, RefusalKind,
    SandboxChannel, UploadShape, UploadSink, Via,
};
use sandboxd_core::api::{FileEntry, TransferFormat};
use sandboxd_core::{listing, paths};

use super::engine::{EngineChannel, first_line};
use super::engine_transfers::{EngineUpload, download};

#[async_trait::async_trait]
impl SandboxChannel for EngineChannel {
    fn via(&self) -> Via {
        Via::Engine
    }

    async fn exec(&self, spec: ExecSpec) -> Result<ExecOutcome, ChannelError> {
        Ok(self.engine.exec(&self.container, spec).await?)
    }

    /// The common case (the directory exists) costs one archive upload; a missing
    /// directory is created as the sandbox user, then the upload is retried.
    async fn write_file(&self, path: &str, content: &[u8], mode: u32) -> Result<u64, ChannelError> {
        let (dir, name) = paths::split_file(path).ok_or_else(|| {
            ChannelError::refused(RefusalKind::Invalid, "path must point to a file")
        })?;
        let put = || {
            self.engine
                .put_file(&self.container, dir, name, content, mode, self.owner)
        };
        match put().await {
            Err(EngineError::NotFound { .. }) => {
                self.make_dirs(dir).await?;
                put().await?;
            }
            other => other?,
        }
        Ok(content.len() as u64)
    }

    async fn read_file(&self, path: &str, max: usize) -> Result<Vec<u8>, ChannelError> {
        self.engine
            .read_file(&self.container, path, max, &self.user())
            .await
            .map_err(|error| match error {
                ReadFileError::NotFound => {
                    ChannelError::refused(RefusalKind::NotFound, "file not found")
                }
                ReadFileError::NotRegularFile => {
                    ChannelError::refused(RefusalKind::NotAFile, "path is not a regular file")
                }
                ReadFileError::TooLarge(max) => ChannelError::refused(
                    RefusalKind::TooLarge,
                    format!("file exceeds the {max} byte limit"),
                ),
                ReadFileError::Malformed => ChannelError::refused(
                    RefusalKind::Io,
                    "the engine returned no file for this path",
                ),
                ReadFileError::Engine(engine) => engine.into(),
            })
    }

    /// GNU find with metadata, or names only where find has no `-printf`.
    async fn list_dir(&self, target: &str, max: usize) -> Result<Vec<FileEntry>, ChannelError> {
        let find = self.internal(listing::find_argv(target), max).await?;
        if find.exit_code == 0 {
            return Ok(listing::parse_find(
                &find.stdout,
                sandboxd_core::rfc3339::format_millis,
            ));
        }
        let ls = self.internal(listing::ls_argv(target), max).await?;
        if ls.exit_code == 0 {
            return Ok(listing::parse_ls(&ls.stdout));
        }
        let reason = first_line(if ls.stderr.is_empty() {
            &find.stderr
        } else {
            &ls.stderr
        });
        if reason.contains("No such file") {
            return Err(ChannelError::refused(RefusalKind::NotFound, reason));
        }
        Err(ChannelError::refused(
            RefusalKind::Invalid,
            if reason.is_empty() {
                "unable to list files".into()
            } else {
                reason
            },
        ))
    }

    async fn make_dir(&self, path: &str, _mode: u32) -> Result<(), ChannelError> {
        self.make_dirs(path).await
    }

    async fn open_upload(
        &self,
        path: &str,
        shape: UploadShape,
    ) -> Result<Box<dyn UploadSink>, ChannelError> {
        Ok(Box::new(EngineUpload {
            channel: self.clone(),
            path: path.to_owned(),
            shape,
        }))
    }

    async fn download(
        &self,
        path: &str,
        format: Option<TransferFormat>,
        cap: u64,
    ) -> Result<Download, ChannelError> {
        download(self, path, format, cap).await
    }
}
