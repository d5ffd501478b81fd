//! File operations through the executor: the agent's, or the engine's exec running
//! `tar`, `find`, `ls` and `mkdir` as the sandbox user.

use sandboxd_agent_host::{AgentError, FileOpError};
use sandboxd_agent_protocol::FailureKind;
use sandboxd_core::limits::MAX_FILE_BYTES;
use sandboxd_core::listing;
use sandboxd_ports::{EngineError, ReadFileError};

use super::{Executor, Listing};
use crate::{ServedBy, ServiceError, internal_exec};

impl Executor<'_> {
    /// Writes `content` to `path` (`dir`/`name`) with `mode`, parents created, owned by
    /// the sandbox user; returns the size written.
    pub(crate) async fn write_file(
        &self,
        path: &str,
        (dir, name): (&str, &str),
        content: &[u8],
        mode: u32,
    ) -> Result<u64, ServiceError> {
        if let Some(agent) = &self.agent {
            match agent.write_file(path, content, mode).await {
                Err(FileOpError::Agent(AgentError::NotSent)) => {}
                outcome => {
                    self.served(ServedBy::Agent);
                    return self.settled(outcome).await;
                }
            }
        }
        self.served(ServedBy::Engine);
        let engine = &self.engine;
        // The common case (the directory exists) costs one archive upload; a missing
        // directory is created as the sandbox user, then the upload is retried.
        match engine
            .put_file(self.container, dir, name, content, mode, self.owner)
            .await
        {
            Err(EngineError::NotFound { .. }) => {
                self.make_dirs(dir).await?;
                engine
                    .put_file(self.container, dir, name, content, mode, self.owner)
                    .await?;
            }
            other => other?,
        }
        Ok(content.len() as u64)
    }

    /// Reads a regular file of at most `max` bytes.
    pub(crate) async fn read_file(&self, path: &str, max: usize) -> Result<Vec<u8>, ServiceError> {
        if let Some(agent) = &self.agent {
            match agent.read_file(path, max).await {
                Err(FileOpError::Agent(AgentError::NotSent)) => {}
                outcome => {
                    self.served(ServedBy::Agent);
                    return self.settled(outcome).await;
                }
            }
        }
        self.served(ServedBy::Engine);
        self.engine
            .read_file(self.container, path, max, &self.user())
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
            })
    }

    /// Lists a directory, its answer at most `max` bytes: the agent's entries, or GNU
    /// find with metadata, or names only where find has no `-printf`.
    pub(crate) async fn list_dir(&self, target: &str, max: usize) -> Result<Listing, ServiceError> {
        if let Some(agent) = &self.agent {
            match agent.list_dir(target, max).await {
                Err(FileOpError::Agent(AgentError::NotSent)) => {}
                outcome => {
                    self.served(ServedBy::Agent);
                    return self.settled(outcome).await.map(Listing::Agent);
                }
            }
        }
        self.served(ServedBy::Engine);
        let service = self.service;
        let find = service
            .engine_exec(
                &self.engine,
                self.container,
                self.as_user(internal_exec(listing::find_argv(target), max)),
            )
            .await?;
        if find.exit_code == 0 {
            return Ok(Listing::Find(listing::parse_find(
                &find.stdout,
                sandboxd_core::rfc3339::format_millis,
            )));
        }
        let ls = service
            .engine_exec(
                &self.engine,
                self.container,
                self.as_user(internal_exec(listing::ls_argv(target), max)),
            )
            .await?;
        if ls.exit_code == 0 {
            return Ok(Listing::Find(listing::parse_ls(&ls.stdout)));
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

    /// The agent's answer to a file operation, a failure of the agent explained as
    /// [`Service::unavailable`] does.
    async fn settled<T>(&self, outcome: Result<T, FileOpError>) -> Result<T, ServiceError> {
        self.service
            .settled(self.sandbox_id, outcome.map_err(file_error))
            .await
    }

    /// Makes sure `dir` exists (`mkdir -p` as the sandbox user).
    pub(crate) async fn ensure_dir(&self, dir: &str) -> Result<(), ServiceError> {
        self.make_dirs(dir).await
    }

    /// `mkdir -p` as the sandbox user, so it can only create what the user may.
    async fn make_dirs(&self, dir: &str) -> Result<(), ServiceError> {
        let argv = vec!["mkdir".into(), "-p".into(), "--".into(), dir.into()];
        let mkdir = self
            .service
            .engine_exec(
                &self.engine,
                self.container,
                self.as_user(internal_exec(argv, 4096)),
            )
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

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}
