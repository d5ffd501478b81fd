//! bollard over an SSH link: every HTTP connection to the engine is a channel to the
//! server's engine socket on the one SSH connection, kept open and reused by hyper's
//! connection pool, so a request costs no new session and usually no new channel.

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

/// How long an idle channel to the engine is kept for the next request.
const IDLE_CHANNEL: Duration = Duration::from_secs(60);

/// A bollard client whose requests go over the server's connection to the engine
/// socket at `socket`; a lost connection is made again by the next request.
pub(crate) fn docker_over(
    session: Arc<SshSession>,
    socket: &str,
    timeout_secs: u64,
    version: &ClientVersion,
) -> Result<Docker, bollard::errors::Error> {
    let connector = ChannelConnector {
        session,
        socket: socket.into(),
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
        Box::pin(async move {
            let stream = session.open_socket(&socket).await?;
            Ok(ChannelIo(TokioIo::new(stream)))
        })
    }
}

/// One channel as hyper's connection.
struct ChannelIo(TokioIo<SshStream>);

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
