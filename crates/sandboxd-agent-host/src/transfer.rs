//! Streamed transfers over an agent connection, with flow control both ways: an upload
//! sends only what the agent granted (it queues no more than its window), a download
//! grants the agent a window and more only as the download's consumer takes what came,
//! so a slow client holds the agent back instead of filling the connection's queues
//! (and never gets its channel cut as a stalled consumer). An agent that sends past its
//! credit, more than it announced, or nothing for the operation timeout ends the
//! transfer. Dropping a transfer before its end cancels it in the agent.
//!
//! An upload's body failing is kept apart from the agent failing; a raw download is held
//! to its announced size.

use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt as _, stream};
use sandboxd_agent_protocol::{
    Credit, DOWNLOAD_WINDOW, Done, DownloadStart, Failure, Inflow, Kind, Outflow, Request,
    TransferShape,
};
use sandboxd_contracts::Chunks;
use tokio::sync::OwnedSemaphorePermit;

use super::conn::{AgentConn, AgentError, Channel, SendOnDrop};
use super::ops::{Deadline, FileOpError, parse, unexpected};

/// Content goes to the agent in frames of this size at most.
const CHUNK: usize = 256 * 1024;

pub use sandboxd_contracts::UploadShape;

/// How a transfer over the agent failed.
#[derive(Debug)]
pub enum TransferError {
    /// The agent could not do it (missing directory, permission, a short file, …).
    Refused(Failure),
    Agent(AgentError),
    /// The content being uploaded failed (the client went away, or sent nothing).
    Body(std::io::Error),
}

impl From<AgentError> for TransferError {
    fn from(error: AgentError) -> Self {
        Self::Agent(error)
    }
}

/// An upload whose request reached the agent: its content is sent with
/// [`Upload::send`]. Dropped before the end, it is cancelled.
#[derive(Debug)]
pub struct Upload {
    channel: Channel,
    cancel: SendOnDrop,
    op_timeout: Duration,
}

impl AgentConn {
    /// Opens an upload of `path`. `NotSent` means that no byte went: another path may
    /// serve it.
    pub async fn open_upload(&self, path: &str, shape: UploadShape) -> Result<Upload, AgentError> {
        let in_place = matches!(shape, UploadShape::FileInPlace { .. });
        if in_place && !self.speaks_daemon() {
            return Err(AgentError::NotSent);
        }
        let (shape, mode, size) = match shape {
            UploadShape::File { size, mode } | UploadShape::FileInPlace { size, mode } => {
                (TransferShape::Raw, mode, Some(size))
            }
            UploadShape::Tree => (TransferShape::Tar, 0, None),
        };
        let request = Request::Upload {
            path: path.to_owned(),
            shape,
            mode,
            size,
            in_place,
        };
        let channel = Deadline::after(self.op_timeout)
            .open(self, &request)
            .await?;
        let cancel = channel.cancel_on_drop();
        Ok(Upload {
            channel,
            cancel,
            op_timeout: self.op_timeout,
        })
    }
}

impl Upload {
    /// Sends `body` within the agent's credit, then End; the bytes the agent took.
    pub async fn send(mut self, mut body: Chunks) -> Result<u64, TransferError> {
        let mut window = Outflow::default();
        let mut pending = Bytes::new();
        let mut ended = false;
        loop {
            if !pending.is_empty() && window.available() > 0 {
                let n = pending
                    .len()
                    .min(CHUNK)
                    .min(usize::try_from(window.available()).unwrap_or(usize::MAX));
                let piece = pending.split_to(n);
                Deadline::after(self.op_timeout)
                    .send(&self.channel, Kind::Data, piece.to_vec())
                    .await?;
                window.spend(n as u64);
                continue;
            }
            // Waiting on the agent (for credit, or for its answer after End) is bounded;
            // waiting on the body is the body's own deadline.
            let waiting_on_agent = ended || !pending.is_empty();
            let limit = waiting_on_agent.then_some(self.op_timeout);
            tokio::select! {
                biased;
                frame = timeout(limit, self.channel.recv()) => {
                    let frame = frame?;
                    match frame.kind {
                        Kind::Credit => window.grant(parse::<Credit>(&frame)?.bytes),
                        Kind::Done if ended => {
                            self.cancel.disarm();
                            return Ok(parse::<Done>(&frame)?.size);
                        }
                        Kind::Error => {
                            self.cancel.disarm();
                            return Err(TransferError::Refused(parse(&frame)?));
                        }
                        _ => return Err(unexpected(&frame).into()),
                    }
                }
                chunk = body.next(), if pending.is_empty() && !ended => match chunk {
                    Some(Ok(chunk)) => pending = chunk,
                    Some(Err(error)) => {
                        self.cancel_and_settle().await;
                        return Err(TransferError::Body(error));
                    }
                    None => {
                        Deadline::after(self.op_timeout)
                            .send(&self.channel, Kind::End, Vec::new())
                            .await?;
                        ended = true;
                    }
                },
            }
        }
    }
}

impl Upload {
    /// Cancels the upload and waits (within the operation timeout) for the agent's
    /// answer, which comes once it removed what the upload wrote: the caller answers its
    /// own client only when nothing partial is left.
    async fn cancel_and_settle(&mut self) {
        self.cancel.disarm();
        let deadline = Deadline::after(self.op_timeout);
        if deadline
            .send(&self.channel, Kind::Cancel, Vec::new())
            .await
            .is_err()
        {
            return;
        }
        while let Ok(frame) = deadline.recv(&mut self.channel).await {
            if matches!(frame.kind, Kind::Done | Kind::Error) {
                return;
            }
        }
    }
}

/// `future` within `limit` (`None`: however long it takes).
async fn timeout<T>(
    limit: Option<Duration>,
    future: impl Future<Output = Result<T, AgentError>>,
) -> Result<T, AgentError> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, future)
            .await
            .map_err(|_| AgentError::Timeout)?,
        None => future.await,
    }
}

/// A download under way through the agent.
pub struct AgentDownload {
    pub shape: TransferShape,
    /// A raw file's size, as the agent announced it.
    pub size: Option<u64>,
    pub body: Chunks,
}

impl std::fmt::Debug for AgentDownload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentDownload")
            .field("shape", &self.shape)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl AgentConn {
    /// Downloads `path` (`shape` as asked, or by what it is), at most `max` bytes.
    /// `NotSent` when the request did not go (this connection serves as many downloads
    /// at once as it has room for): another path may serve it.
    pub async fn download(
        &self,
        path: &str,
        shape: Option<TransferShape>,
        max: u64,
    ) -> Result<AgentDownload, FileOpError> {
        let slot = self
            .downloads
            .clone()
            .try_acquire_owned()
            .map_err(|_| AgentError::NotSent)?;
        let request = Request::Download {
            path: path.to_owned(),
            shape,
            max,
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.bound(self.open_metered(&request)).await?;
        let cancel = channel.cancel_on_drop();
        let (mut inflow, first) = Inflow::new(DOWNLOAD_WINDOW);
        deadline.bound(channel.grant(first)).await?;
        // The first reply is content too, as far as credit goes.
        let frame = deadline.recv(&mut channel).await?;
        let start: DownloadStart = match frame.kind {
            Kind::Data => {
                inflow
                    .received(frame.payload.len() as u64)
                    .map_err(|e| AgentError::Protocol(e.to_string()))?;
                parse(&frame)?
            }
            Kind::Error => return Err(FileOpError::Refused(parse(&frame)?)),
            _ => return Err(unexpected(&frame).into()),
        };
        let fits = match (start.shape, start.size) {
            (TransferShape::Raw, Some(size)) => size <= max,
            (TransferShape::Tar, None) => true,
            _ => false,
        };
        if !fits || shape.is_some_and(|asked| asked != start.shape) {
            return Err(AgentError::Protocol(format!("a download announced as {start:?}")).into());
        }
        let state = Incoming {
            channel,
            inflow,
            cancel,
            _slot: slot,
            op_timeout: self.op_timeout,
            limit: start.size.unwrap_or(max),
            exact: start.size.is_some(),
            received: 0,
            taken: frame.payload.len() as u64,
        };
        Ok(AgentDownload {
            shape: start.shape,
            size: start.size,
            body: Box::pin(stream::unfold(Some(state), |state| async move {
                let mut state = state?;
                match state.next().await {
                    Ok(Some(chunk)) => Some((Ok(chunk), Some(state))),
                    Ok(None) => None,
                    Err(error) => Some((Err(error), None)),
                }
            })),
        })
    }
}

/// A download's receiving side.
struct Incoming {
    channel: Channel,
    inflow: Inflow,
    cancel: SendOnDrop,
    _slot: OwnedSemaphorePermit,
    op_timeout: Duration,
    /// A raw file's announced size, or the transfer's limit for a tar.
    limit: u64,
    /// Whether exactly `limit` bytes must come (a raw file).
    exact: bool,
    received: u64,
    /// Bytes of the last chunk handed on: asking for the next one means it was taken.
    taken: u64,
}

fn broken(reason: impl Into<String>) -> std::io::Error {
    std::io::Error::other(reason.into())
}

impl Incoming {
    /// The next chunk, `None` at the end.
    async fn next(&mut self) -> std::io::Result<Option<Bytes>> {
        if let Some(grant) = self.inflow.consumed(std::mem::take(&mut self.taken)) {
            Deadline::after(self.op_timeout)
                .bound(self.channel.grant(grant))
                .await
                .map_err(|e| broken(e.to_string()))?;
        }
        let frame = Deadline::after(self.op_timeout)
            .recv(&mut self.channel)
            .await
            .map_err(|e| broken(e.to_string()))?;
        match frame.kind {
            Kind::Data => {
                let len = frame.payload.len() as u64;
                self.inflow
                    .received(len)
                    .map_err(|e| broken(format!("the sandbox agent sent an invalid reply: {e}")))?;
                self.received += len;
                if self.received > self.limit {
                    return Err(broken(if self.exact {
                        "the sandbox agent sent more than the file's size".to_owned()
                    } else {
                        format!(
                            "the transfer is larger than the limit of {} bytes",
                            self.limit
                        )
                    }));
                }
                self.taken = len;
                Ok(Some(Bytes::from(frame.payload)))
            }
            Kind::Done if !self.exact || self.received == self.limit => {
                self.cancel.disarm();
                Ok(None)
            }
            Kind::Done => Err(broken(format!(
                "the download ended after {} of {} bytes",
                self.received, self.limit
            ))),
            Kind::Error => {
                self.cancel.disarm();
                let failure: Failure = parse(&frame).map_err(|e| broken(e.to_string()))?;
                Err(broken(failure.message))
            }
            _ => Err(broken(unexpected(&frame).to_string())),
        }
    }
}
