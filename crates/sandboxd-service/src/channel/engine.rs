//! The engine adapter of the sandbox channel port: a running container reached through
//! its engine's exec and archive API, everything done as the sandbox user (`tar`,
//! `find`, `ls`, `mkdir` and `mv` run as that user, archives are unpacked as that
//! user). It does no processes or terminals: those answer
//! [`ChannelError::NeedsAgent`].

use std::sync::Arc;

use sandboxd_core::api::{FileEntry, TransferFormat};
use sandboxd_core::{listing, paths};
use sandboxd_ports::{
    ChannelError, Download, Engine, EngineError, ExecOutcome, ExecSpec, ReadFileError, RefusalKind,
    SandboxChannel, UploadShape, UploadSink, Via,
};

use super::engine_transfers::{EngineUpload, download};
use crate::internal_exec;
use crate::recovery::restart_after_failed_kill;

/// One container on one engine, and the user its files belong to.
#[derive(Debug, Clone)]
pub(crate) struct EngineChannel {
    pub(super) engine: Arc<dyn Engine>,
    pub(super) container: String,
    pub(super) owner: (u32, u32),
}

impl EngineChannel {
    pub(crate) fn new(engine: Arc<dyn Engine>, container: &str, owner: (u32, u32)) -> Self {
        Self {
            engine,
            container: container.to_owned(),
            owner,
        }
    }

    pub(crate) fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    pub(crate) fn container(&self) -> &str {
        &self.container
    }

    /// The `uid:gid` files written for the sandbox belong to.
    pub(crate) fn owner(&self) -> (u32, u32) {
        self.owner
    }

    /// The sandbox user as the engine's exec takes it.
    pub(super) fn user(&self) -> String {
        format!("{}:{}", self.owner.0, self.owner.1)
    }

    /// Runs one of sandboxd's own commands as the sandbox user; a timed-out one whose
    /// kill did not take gets the container restarted, as any command does.
    pub(super) async fn internal(
        &self,
        argv: Vec<String>,
        max_output: usize,
    ) -> Result<ExecOutcome, EngineError> {
        let spec = ExecSpec {
            user: Some(self.user()),
            ..internal_exec(argv, max_output)
        };
        let mut outcome = self.engine.exec(&self.container, spec).await?;
        if outcome.kill_incomplete {
            restart_after_failed_kill(&self.engine, &self.container, &mut outcome).await;
        }
        Ok(outcome)
    }

    /// `argv` as the sandbox user: `Ok` when it exited 0, else its first line of error.
    pub(super) async fn as_user(&self, argv: &[&str]) -> Result<(), String> {
        let argv = argv.iter().map(|a| (*a).to_owned()).collect();
        match self.internal(argv, 4096).await {
            Ok(out) if out.exit_code == 0 => Ok(()),
            Ok(out) => Err(first_line(&out.stderr)),
            Err(error) => Err(error.to_string()),
        }
    }

    /// `mkdir -p` as the sandbox user, so it can only create what the user may.
    pub(super) async fn make_dirs(&self, dir: &str) -> Result<(), ChannelError> {
        let argv = vec!["mkdir".into(), "-p".into(), "--".into(), dir.into()];
        let mkdir = self.internal(argv, 4096).await?;
        if mkdir.exit_code == 0 {
            return Ok(());
        }
        let reason = first_line(&mkdir.stderr);
        Err(ChannelError::refused(
            RefusalKind::Invalid,
            if reason.is_empty() {
                format!("unable to create directory {dir}")
            } else {
                reason
            },
        ))
    }
}

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

pub(super) fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}
