//! A connection made for a sandbox, counting the bytes each way; when it is dropped
//! (the proxy is done with it, whichever way it ended) its log entry is written again
//! with the bytes and the time it ended.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use sandboxd_contracts::ByteStream;
use sandboxd_core::egress_log::EgressRecord;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::{Service, now_ms};

/// Counter of bytes through the proxy (`direction` = `out`, to hosts | `in`, from them).
pub const EGRESS_BYTES: &str = "sandboxd_egress_bytes_total";

pub(crate) struct Counted {
    stream: Box<dyn ByteStream>,
    service: Service,
    /// The organization of the sandbox it was made for.
    organization_id: String,
    /// The entry to complete; `None` when the decision was over the sandbox's
    /// allowance and not written.
    entry: Option<EgressRecord>,
    sent: u64,
    received: u64,
}

impl Counted {
    pub(crate) fn new(
        stream: Box<dyn ByteStream>,
        service: Service,
        organization_id: String,
        entry: Option<EgressRecord>,
    ) -> Self {
        Self {
            stream,
            service,
            organization_id,
            entry,
            sent: 0,
            received: 0,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        metrics::counter!(EGRESS_BYTES, "direction" => "out").increment(self.sent);
        metrics::counter!(EGRESS_BYTES, "direction" => "in").increment(self.received);
        if let Some(mut entry) = self.entry.take() {
            entry.bytes_out = self.sent;
            entry.bytes_in = self.received;
            entry.ended_at = Some(now_ms());
            self.service
                .inner
                .egress_log
                .record(&self.organization_id, entry);
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        let read = buf.filled().len().saturating_sub(before);
        self.received += read as u64;
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = &polled {
            self.sent += *written as u64;
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(written)) = &polled {
            self.sent += *written as u64;
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
