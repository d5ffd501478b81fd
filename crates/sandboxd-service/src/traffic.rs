//! A connection to a sandbox's port whose traffic is the sandbox's activity: bytes moved
//! either way refresh its idle timeout, at most once per quarter of that timeout (so a
//! sandbox in use never reaches it), recorded off the connection's path.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use sandboxd_contracts::ByteStream;
use sandboxd_store::Store;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::now_ms;

/// How often traffic on a connection records activity, for a sandbox with `timeout_ms`.
pub(crate) fn every(timeout_ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(timeout_ms / 4).unwrap_or(0)).max(Duration::from_secs(1))
}

/// A port's connection, its traffic recorded as its sandbox's activity.
pub(crate) struct Traffic {
    inner: Box<dyn ByteStream>,
    store: Store,
    sandbox_id: String,
    every: Duration,
    last: Instant,
}

impl Traffic {
    /// `inner`, whose opening was just recorded.
    pub(crate) fn new(
        inner: Box<dyn ByteStream>,
        store: Store,
        sandbox_id: &str,
        every: Duration,
    ) -> Self {
        Self {
            inner,
            store,
            sandbox_id: sandbox_id.to_owned(),
            every,
            last: Instant::now(),
        }
    }

    fn moved(&mut self, bytes: usize) {
        if bytes == 0 || self.last.elapsed() < self.every {
            return;
        }
        self.last = Instant::now();
        let (store, sandbox_id) = (self.store.clone(), self.sandbox_id.clone());
        tokio::spawn(async move {
            if let Err(error) = store.touch(&sandbox_id, now_ms()).await {
                tracing::warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "could not record the sandbox's activity");
            }
        });
    }
}

impl AsyncRead for Traffic {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let read = buf.filled().len() - before;
            self.moved(read);
        }
        polled
    }
}

impl AsyncWrite for Traffic {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = polled {
            self.moved(written);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_is_recorded_four_times_per_timeout_and_at_most_every_second() {
        assert_eq!(every(300_000), Duration::from_secs(75));
        assert_eq!(every(10_000), Duration::from_millis(2_500));
        assert_eq!(every(2_000), Duration::from_secs(1));
        assert_eq!(every(-5), Duration::from_secs(1));
    }
}
