//! `sandbox.upload` and `sandbox.download`: streamed transfers of any size up to the
//! transfer cap, with constant memory, through the sandbox's channel (its agent when it
//! is connected, else the engine's archive API on the sandbox's server); checked on the way (`sandboxd_core::transfer`): an upload is one
//! file (its length known up front) or a tar of a tree, every entry owned by the sandbox
//! user (`upload.rs`); a download is one file's bytes or a tar of a directory
//! (`download.rs`). A stream that stops flowing for a minute is cut.
//!
//! Here: `Executor::upload`, which tells the body's own failure from the sandbox's; the
//! source's idle deadline, the consumer's deadline (a download not read for a while is
//! let go, with an error after what it took) and the cap.

mod changes;
mod download;
mod upload;

use futures_util::{StreamExt, TryStreamExt as _, stream};
use sandboxd_contracts::{ChannelError, Chunks, EngineError, UploadShape};
use sandboxd_core::limits::{DEFAULT_MAX_TRANSFER_BYTES, TRANSFER_IDLE_SECS};
use sandboxd_core::transfer::TransferRefused;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::ServiceError;
use crate::executor::{Executor, refusal_error, through};
use crate::files::Files;

fn refused(refusal: TransferRefused) -> ServiceError {
    match refusal {
        TransferRefused::OverCap { .. } | TransferRefused::TooManyEntries { .. } => {
            ServiceError::TooLarge(refusal.to_string())
        }
        other => ServiceError::Refused(other.to_string()),
    }
}

/// The first failure of an upload's body (the client went away, or sent nothing for a
/// minute), kept to tell it from the engine's own.
#[derive(Clone, Default)]
pub(super) struct Cut(Arc<Mutex<Option<String>>>);

impl Cut {
    pub(super) fn watch(&self, body: Chunks) -> Chunks {
        let seen = self.clone();
        Box::pin(body.inspect_err(move |error| {
            let mut first = seen.0.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| error.to_string());
        }))
    }

    /// The cut, when there was one, else `error`.
    pub(super) fn or(&self, error: ServiceError) -> ServiceError {
        match self.0.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            Some(reason) => ServiceError::Refused(format!("the upload was cut: {reason}")),
            None => error,
        }
    }
}

/// `stream`, cut with an error when no chunk comes for [`TRANSFER_IDLE_SECS`].
pub(crate) fn with_idle_deadline(stream: Chunks) -> Chunks {
    let idle = Duration::from_secs(TRANSFER_IDLE_SECS);
    Box::pin(stream::unfold(stream, move |mut stream| async move {
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(item)) => Some((item, stream)),
            Ok(None) => None,
            Err(_) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no bytes for {TRANSFER_IDLE_SECS} s"),
                )),
                stream,
            )),
        }
    }))
}

/// `stream` handed on through a task that lets go of it when its consumer takes nothing
/// for [`TRANSFER_IDLE_SECS`]: a client that stops reading a download frees its source
/// (an engine connection, or the agent's side of it) instead of holding it as long as
/// its own connection stays open. What it took before then is followed by an error, so
/// the cut is never taken for the end.
fn consumer_deadline(mut stream: Chunks) -> Chunks {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(1);
    let gave_up = Arc::new(AtomicBool::new(false));
    let giving_up = gave_up.clone();
    tokio::spawn(async move {
        let idle = Duration::from_secs(TRANSFER_IDLE_SECS);
        while let Some(item) = stream.next().await {
            let failed = item.is_err();
            match tokio::time::timeout(idle, tx.send(item)).await {
                Ok(Ok(())) if !failed => {}
                Ok(_) => return,
                Err(_) => {
                    giving_up.store(true, Ordering::Release);
                    return;
                }
            }
        }
    });
    Box::pin(stream::unfold(Some(rx), move |rx| {
        let gave_up = gave_up.clone();
        async move {
            let mut rx = rx?;
            match rx.recv().await {
                Some(item) => Some((item, Some(rx))),
                None if gave_up.load(Ordering::Acquire) => Some((
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the download was not read for {TRANSFER_IDLE_SECS} s"),
                    )),
                    None,
                )),
                None => None,
            }
        }
    }))
}

/// `stream`, cut with an error once it has taken longer than `limit` in all.
fn overall_deadline(stream: Chunks, limit: Duration) -> Chunks {
    let ends = tokio::time::Instant::now() + limit;
    Box::pin(stream::unfold(Some(stream), move |stream| async move {
        let mut stream = stream?;
        match tokio::time::timeout_at(ends, stream.next()).await {
            Ok(Some(item)) => Some((item, Some(stream))),
            Ok(None) => None,
            Err(_) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the transfer took longer than its {} s in all",
                        limit.as_secs()
                    ),
                )),
                None,
            )),
        }
    }))
}

/// `stream`, cut with an error past `cap` bytes.
pub(crate) fn capped(stream: Chunks, cap: u64) -> Chunks {
    let mut seen = 0u64;
    Box::pin(stream.map(move |chunk| {
        let chunk = chunk?;
        seen += chunk.len() as u64;
        if seen > cap {
            return Err(std::io::Error::other(format!(
                "the transfer is larger than the limit of {cap} bytes"
            )));
        }
        Ok(chunk)
    }))
}

impl Executor<'_> {
    /// Streams `body` into `path` through the sandbox's channel: the bytes it took. A
    /// failure of the body (the cut, when there was one) is told from the sandbox's.
    pub(super) async fn upload(
        &self,
        path: &str,
        shape: UploadShape,
        body: Chunks,
        cut: &Cut,
    ) -> Result<u64, ServiceError> {
        let (_, opened) = through!(self, |channel| channel.open_upload(path, shape));
        let sink = self
            .settled(opened, |refusal| refusal_error(refusal, "directory"))
            .await?;
        match sink.send(body).await {
            Ok(bytes) => Ok(bytes),
            Err(ChannelError::Body(error)) => {
                Err(cut.or(ServiceError::Refused(format!("the upload failed: {error}"))))
            }
            Err(ChannelError::Engine(EngineError::NotFound { .. })) => {
                Err(cut.or(ServiceError::NotFound("directory")))
            }
            Err(ChannelError::Engine(error)) => Err(cut.or(error.into())),
            Err(error) => {
                self.settled(Err(error), |refusal| refusal_error(refusal, "directory"))
                    .await
            }
        }
    }
}

impl Files {
    /// The transfer cap in force: the most bytes one upload or download moves.
    pub fn transfer_cap(&self) -> u64 {
        self.service
            .inner
            .options
            .max_transfer_bytes
            .unwrap_or(DEFAULT_MAX_TRANSFER_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_source_that_trickles_forever_is_cut_at_the_overall_deadline() {
        let trickle: Chunks = Box::pin(stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Some((Ok(bytes::Bytes::from_static(b"x")), ()))
        }));
        let started = std::time::Instant::now();
        let items: Vec<_> = overall_deadline(trickle, Duration::from_millis(300))
            .collect()
            .await;
        let (last, taken) = items.split_last().unwrap_or_else(|| unreachable!());
        assert!(taken.len() >= 5 && taken.iter().all(Result::is_ok));
        assert_eq!(
            last.as_ref().map_err(std::io::Error::kind).err(),
            Some(std::io::ErrorKind::TimedOut)
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(
            sandboxd_core::limits::transfer_deadline_secs(4 << 30),
            3600 + 16384
        );
    }
}
