//! `sandbox.upload` and `sandbox.download`: streamed transfers of any size up to the
//! transfer cap, with constant memory. They go through the engine's archive API on the
//! sandbox's server, checked on the way (`sandboxd_core::transfer`): an upload is one
//! file (its length known up front) or a tar of a tree, every entry owned by the sandbox
//! user (`upload.rs`); a download is one file's bytes or a tar of a directory
//! (`download.rs`). A stream that stops flowing for a minute is cut.

mod download;
mod upload;

use futures_util::{StreamExt, stream};
use sandboxd_core::api::TransferFormat;
use sandboxd_core::limits::{DEFAULT_MAX_TRANSFER_BYTES, TRANSFER_IDLE_SECS};
use sandboxd_core::transfer::TransferRefused;
use sandboxd_ports::Chunks;
use std::time::Duration;

use super::{Service, ServiceError};

/// A download under way: its shape, a file's size, and its bytes.
pub struct Download {
    pub format: TransferFormat,
    /// A file's size (raw); a tar's is not known before it ends.
    pub size: Option<u64>,
    pub body: Chunks,
}

impl std::fmt::Debug for Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Download")
            .field("format", &self.format)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

fn refused(refusal: TransferRefused) -> ServiceError {
    match refusal {
        TransferRefused::OverCap { .. } | TransferRefused::TooManyEntries { .. } => {
            ServiceError::TooLarge(refusal.to_string())
        }
        other => ServiceError::Refused(other.to_string()),
    }
}

/// `stream`, cut with an error when no chunk comes for [`TRANSFER_IDLE_SECS`].
fn with_idle_deadline(stream: Chunks) -> Chunks {
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

/// `stream`, cut with an error past `cap` bytes.
fn capped(stream: Chunks, cap: u64) -> Chunks {
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

impl Service {
    /// The transfer cap in force.
    fn transfer_cap(&self) -> u64 {
        self.inner
            .options
            .max_transfer_bytes
            .unwrap_or(DEFAULT_MAX_TRANSFER_BYTES)
    }
}
