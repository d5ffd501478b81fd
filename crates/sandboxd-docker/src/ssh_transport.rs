//! bollard over an SSH link: every HTTP connection to the engine is a channel to the
//! server's engine socket on the one SSH connection, kept open and reused by hyper's
//! connection pool, so a request costs no new session and usually no new channel.
//! What comes back is bounded as it is read (`answer_bounds.rs`), and a server has at
//! most [`MAX_CHANNELS`] channels open at once, so one server can hold a bounded amount
//! of sandboxd's memory however its engine answers.
//!
//! It is hyper's pooled client whose connector opens a `direct-streamlocal` channel to
//! the engine socket on the server's one SSH connection (`SshSession`): a request reuses
//! an idle channel or opens one, never a session or a TCP connection.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bollard::{BollardRequest, ClientVersion, Docker};
use hyper::Uri;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo};
use sandboxd_ssh::{SshError, SshSession, SshStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::answer_bounds::{AnswerCaps, AnswerGuard};

/// How long an idle channel to the engine is kept for the next request.
const IDLE_CHANNEL: Duration = Duration::from_secs(60);

/// Channels to one server's engine open at once; a request past them waits for one.
pub const MAX_CHANNELS: usize = 16;

/// How long a request waits for a free channel before it fails.
const CHANNEL_WAIT: Duration = Duration::from_secs(30);

/// A bollard client whose requests go over the server's connection to the engine
/// socket at `socket`; a lost connection is made again by the next request.
pub(crate) fn docker_over(
    session: Arc<SshSession>,
    socket: &str,
    timeout_secs: u64,
    version: &ClientVersion,
    caps: AnswerCaps,
) -> Result<Docker, bollard::errors::Error> {
    let connector = ChannelConnector {
        session,
        socket: socket.into(),
        channels: Arc::new(Semaphore::new(MAX_CHANNELS)),
        caps,
    };
    let client = Arc::new(
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_CHANNEL)
            .build(connector),
    );
    Docker::connect_with_custom_transport(
        move |request: BollardRequest| {
            let client = client.clone();
            async move { Ok(client.request(request).await?) }
        },
        Some("http://engine"),
        timeout_secs,
        version,
    )
}

/// Opens a channel to the engine socket for each new HTTP connection.
#[derive(Clone)]
struct ChannelConnector {
    session: Arc<SshSession>,
    socket: Arc<str>,
    channels: Arc<Semaphore>,
    caps: AnswerCaps,
}

impl tower_service::Service<Uri> for ChannelConnector {
    type Response = ChannelIo;
    type Error = SshError;
    type Future = Pin<Box<dyn Future<Output = Result<ChannelIo, SshError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), SshError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let session = self.session.clone();
        let socket = self.socket.clone();
        let channels = self.channels.clone();
        let caps = self.caps;
        Box::pin(async move {
            let permit = tokio::time::timeout(CHANNEL_WAIT, channels.acquire_owned())
                .await
                .map_err(|_| SshError::Busy {
                    what: "the engine".into(),
                })?
                .map_err(|_| SshError::Closed)?;
            let stream = session.open_socket(&socket).await?;
            Ok(ChannelIo(TokioIo::new(Guarded {
                stream,
                guard: AnswerGuard::new(caps),
                _permit: permit,
            })))
        })
    }
}

/// One channel, its answers counted against their bounds, holding its place among the
/// server's channels until it is dropped.
struct Guarded {
    stream: SshStream,
    guard: AnswerGuard,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let fresh = &buf.filled()[before..];
                match this.guard.read(fresh) {
                    Ok(()) => Poll::Ready(Ok(())),
                    Err(over) => Poll::Ready(Err(std::io::Error::other(over))),
                }
            }
            other => other,
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        this.guard.wrote(buf);
        Pin::new(&mut this.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// One channel as hyper's connection.
struct ChannelIo(TokioIo<Guarded>);

impl Connection for ChannelIo {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for ChannelIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for ChannelIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
