//! Transfers through the sandbox's agent, when it is connected and speaks them: the
//! agent writes and reads with the sandbox user's own permissions, and sees the
//! sandbox's filesystem however the runtime keeps it (the engine's archive API does not
//! always: gVisor keeps a sandbox's writes in its own memory). A request the agent did
//! not take hands the body back for the engine's path.

use sandboxd_agent_host::{AgentError, FileOpError, TransferError, UploadShape};
use sandboxd_agent_protocol::{Failure, FailureKind, TransferShape};
use sandboxd_core::api::TransferFormat;
use sandboxd_ports::Chunks;

use super::{Cut, Download};
use crate::executor::Executor;
use crate::{ServedBy, ServiceError};

/// What became of a transfer offered to the agent.
pub(super) enum ThroughAgent<T> {
    Served(T),
    /// The agent did not take it (not connected, an older agent, or busy): the body,
    /// untouched, for the engine's path.
    Declined(Chunks),
}

fn shape(format: TransferFormat) -> TransferShape {
    match format {
        TransferFormat::Raw => TransferShape::Raw,
        TransferFormat::Tar => TransferShape::Tar,
    }
}

fn format_of(shape: TransferShape) -> TransferFormat {
    match shape {
        TransferShape::Raw => TransferFormat::Raw,
        TransferShape::Tar => TransferFormat::Tar,
    }
}

/// The agent's refusal as the caller's error.
fn refusal(failure: Failure, missing: &'static str) -> ServiceError {
    match failure.kind {
        FailureKind::NotFound => ServiceError::NotFound(missing),
        FailureKind::TooLarge => ServiceError::TooLarge(failure.message),
        FailureKind::NotAFile
        | FailureKind::NotADirectory
        | FailureKind::PermissionDenied
        | FailureKind::Invalid
        | FailureKind::Io
        | FailureKind::Limit => ServiceError::Refused(failure.message),
    }
}

/// Streams `body` into `path` through the agent: the bytes it took.
pub(super) async fn upload(
    executor: &Executor<'_>,
    path: &str,
    what: UploadShape,
    body: Chunks,
    cut: &Cut,
) -> Result<ThroughAgent<u64>, ServiceError> {
    let Some(agent) = executor.transfer_agent() else {
        return Ok(ThroughAgent::Declined(body));
    };
    let upload = match agent.open_upload(path, what).await {
        Ok(upload) => upload,
        Err(AgentError::NotSent) => return Ok(ThroughAgent::Declined(body)),
        Err(error) => return Err(executor.agent_failure(error).await),
    };
    executor.served(ServedBy::Agent);
    match upload.send(body).await {
        Ok(bytes) => Ok(ThroughAgent::Served(bytes)),
        Err(TransferError::Refused(failure)) => Err(refusal(failure, "directory")),
        Err(TransferError::Body(error)) => {
            Err(cut.or(ServiceError::Refused(format!("the upload failed: {error}"))))
        }
        Err(TransferError::Agent(error)) => Err(executor.agent_failure(error).await),
    }
}

/// Streams `path` out through the agent; `None` when the agent did not take it.
pub(super) async fn download(
    executor: &Executor<'_>,
    path: &str,
    format: Option<TransferFormat>,
    cap: u64,
) -> Result<Option<Download>, ServiceError> {
    let Some(agent) = executor.transfer_agent() else {
        return Ok(None);
    };
    let download = match agent.download(path, format.map(shape), cap).await {
        Ok(download) => download,
        Err(FileOpError::Agent(AgentError::NotSent)) => return Ok(None),
        Err(FileOpError::Refused(failure)) => {
            executor.served(ServedBy::Agent);
            return Err(refusal(failure, "path"));
        }
        Err(FileOpError::Agent(error)) => return Err(executor.agent_failure(error).await),
    };
    executor.served(ServedBy::Agent);
    Ok(Some(Download {
        format: format_of(download.shape),
        size: download.size,
        body: download.body,
    }))
}
