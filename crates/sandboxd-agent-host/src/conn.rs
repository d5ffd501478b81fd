//! One agent connection: a reader task that routes frames to channels, a writer task,
//! and channels opened by requests.
//!
//! The connection runs over any byte stream (a local socket is split without a lock):
//! Hello and its key first, then the reader and writer tasks. The reader reads a large
//! payload straight into the frame's own buffer once its header arrived
//! (`Decoder::take_partial`). `SendOnDrop` signals a command, or cancels a transfer,
//! whose caller gave up on it. Per connection: `PORTS` (128) port connections,
//! `EGRESS_CONNECTIONS` (32) egress ones apart from those, four downloads at once
//! (`NotSent` past that).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use sandboxd_agent_protocol::{Decoder, Frame, Hello, Kind, Request, header};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::handover::KeyHandover;
use super::routes::{CutFor, Delivered, Delivery, ROUTE_STALL, Routes};

/// The agent must introduce itself this quickly after connecting.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Frames queued for the agent before a sender waits.
const OUTGOING_DEPTH: usize = 64;
/// Bytes of frames read from one agent and not yet taken by their consumers, at most:
/// past it, the connection's reader waits. Whatever the agent sends, one connection
/// holds no more than this in the server's memory (each consumer keeps only what its
/// operation allows: capped output, a file no larger than asked).
const BUFFERED_BYTES: usize = 24 * 1024 * 1024;

/// Why an operation over the agent failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// The request never reached the agent: another path may safely serve it.
    #[error("the sandbox agent is not connected")]
    NotSent,
    #[error("the sandbox agent disconnected")]
    Disconnected,
    #[error("the sandbox agent sent an invalid reply: {0}")]
    Protocol(String),
    #[error("the sandbox agent did not answer in time")]
    Timeout,
    /// A connection that did not present the sandbox's agent key.
    #[error("a connection without the sandbox's agent key was refused")]
    Impostor,
    /// This operation's output was not taken for a while: it was cut so that the
    /// sandbox's other operations keep moving.
    #[error("the output was not read for {}s; the operation was ended", ROUTE_STALL.as_secs())]
    ConsumerStalled,
}

/// The agent sent past a transfer's credit.
const OVERDRAWN: &str = "the sandbox agent sent past the credit it was given";

/// A live connection to one sandbox's agent. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AgentConn {
    pub hello: Hello,
    /// How long one file or process operation may take in all.
    pub op_timeout: Duration,
    outgoing: mpsc::Sender<Frame>,
    routes: Routes,
    next_channel: Arc<AtomicU32>,
    /// Downloads under way at most at once (`transfer.rs`): each may hold its window of
    /// the connection's budget for as long as its consumer is slow.
    pub(crate) downloads: Arc<tokio::sync::Semaphore>,
    /// Connections to the sandbox's ports open at once, at most (`port.rs`).
    pub(crate) ports: Arc<tokio::sync::Semaphore>,
    /// Connections to the egress proxy open or awaited at once, at most (`port.rs`).
    pub(crate) egress: Arc<tokio::sync::Semaphore>,
    /// Bytes the ports' windows may still be widened by, together (`port.rs`).
    pub(crate) port_growth: Arc<tokio::sync::Semaphore>,
}

/// Connections to the sandbox's ports one agent connection carries at once, at most
/// (`port.rs`): each holds its first window of the connection's budget, and what it was
/// widened by from [`PORT_GROWTH`].
pub const PORTS: usize = 128;
/// Connections of the sandbox's programs to the egress proxy one agent connection
/// carries (or waits for) at once, at most; each holds a window as a port's does.
pub const EGRESS_CONNECTIONS: usize = 32;
/// What the windows of one agent connection's ports may be widened by, together.
pub(crate) const PORT_GROWTH: u64 = 6 * 1024 * 1024;

/// Downloads through one connection at once, at most.
const DOWNLOADS: usize = 4;
// The windows of the ports and the egress proxy's connections (first and widened) and
// the downloads' together fit in the connection's budget: a third each.
const _: () = assert!(
    (PORTS + EGRESS_CONNECTIONS) as u64 * sandboxd_agent_protocol::PORT_WINDOW_OUT
        + PORT_GROWTH
        + DOWNLOADS as u64 * sandboxd_agent_protocol::DOWNLOAD_WINDOW
        <= BUFFERED_BYTES as u64
);

/// A request in flight: frames for it arrive on `rx`.
#[derive(Debug)]
pub struct Channel {
    pub id: u32,
    rx: mpsc::UnboundedReceiver<Delivered>,
    conn: AgentConn,
    /// A transfer's credit, counted down by the connection's reader.
    credit: Option<Arc<AtomicU64>>,
}

impl Channel {
    /// Sends a frame on this channel.
    pub async fn send(&self, kind: Kind, payload: Vec<u8>) -> Result<(), AgentError> {
        self.conn
            .outgoing
            .send(Frame::new(self.id, kind, payload))
            .await
            .map_err(|_| AgentError::Disconnected)
    }

    /// The next frame; `Disconnected` when the connection ended.
    pub async fn recv(&mut self) -> Result<Frame, AgentError> {
        match self.rx.recv().await {
            Some(delivered) => Ok(delivered.frame),
            None => Err(self.ended()),
        }
    }

    /// The next frame, polled: `Disconnected` when the connection ended.
    pub fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<Frame, AgentError>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(delivered)) => Poll::Ready(Ok(delivered.frame)),
            Poll::Ready(None) => Poll::Ready(Err(self.ended())),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Why the channel's frames stopped coming.
    fn ended(&self) -> AgentError {
        match self.conn.routes.cut_for(self.id) {
            Some(CutFor::Stalled) => AgentError::ConsumerStalled,
            Some(CutFor::Overdrawn) => AgentError::Protocol(OVERDRAWN.into()),
            None => AgentError::Disconnected,
        }
    }

    /// A sender of this channel's frames for code that polls (it waits for room in
    /// the connection's queue with the poller's waker).
    pub(crate) fn poll_sender(&self) -> tokio_util::sync::PollSender<Frame> {
        tokio_util::sync::PollSender::new(self.conn.outgoing.clone())
    }

    /// Grants the agent `bytes` more without waiting: counted at once, sent at once
    /// when the connection's queue has room, else as soon as it has.
    pub(crate) fn grant_soon(&self, bytes: u64) {
        if let Some(credit) = &self.credit {
            credit.fetch_add(bytes, Ordering::AcqRel);
        }
        let frame = Frame::json(
            self.id,
            Kind::Credit,
            &sandboxd_agent_protocol::Credit { bytes },
        );
        send_soon(&self.conn.outgoing, frame);
    }

    /// Grants the agent `bytes` more of a transfer's content: counted first, so the
    /// reader never meets data sent for a grant it does not know of yet.
    pub async fn grant(&self, bytes: u64) -> Result<(), AgentError> {
        if let Some(credit) = &self.credit {
            credit.fetch_add(bytes, Ordering::AcqRel);
        }
        let credit = sandboxd_agent_protocol::Credit { bytes };
        self.send(
            Kind::Credit,
            Frame::json(self.id, Kind::Credit, &credit).payload,
        )
        .await
    }
}

/// Sends a frame on a channel when dropped, unless disarmed: a signal to its command,
/// or the cancel of its transfer, for a caller that gives up on it.
#[derive(Debug)]
pub struct SendOnDrop {
    outgoing: mpsc::Sender<Frame>,
    frame: Option<Frame>,
}

impl SendOnDrop {
    pub fn disarm(&mut self) {
        self.frame = None;
    }
}

impl Drop for SendOnDrop {
    fn drop(&mut self) {
        let Some(frame) = self.frame.take() else {
            return;
        };
        send_soon(&self.outgoing, frame);
    }
}

/// Sends `frame` without waiting: a full queue must not lose it, so it is sent once
/// there is room.
fn send_soon(outgoing: &mpsc::Sender<Frame>, frame: Frame) {
    if let Err(mpsc::error::TrySendError::Full(frame)) = outgoing.try_send(frame)
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        let outgoing = outgoing.clone();
        runtime.spawn(async move { outgoing.send(frame).await });
    }
}

impl Channel {
    /// A guard that signals the command on this channel if the caller gives up on it.
    pub fn kill_on_drop(&self, signal: i32) -> SendOnDrop {
        let signal = sandboxd_agent_protocol::Signal { signal };
        SendOnDrop {
            outgoing: self.conn.outgoing.clone(),
            frame: Some(Frame::json(self.id, Kind::Signal, &signal)),
        }
    }

    /// A guard that cancels the transfer on this channel if the caller gives up on it.
    pub fn cancel_on_drop(&self) -> SendOnDrop {
        SendOnDrop {
            outgoing: self.conn.outgoing.clone(),
            frame: Some(Frame::new(self.id, Kind::Cancel, Vec::new())),
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.conn.routes.close(self.id);
    }
}

impl AgentConn {
    /// Opens a channel with `request`.
    pub async fn open(&self, request: &Request) -> Result<Channel, AgentError> {
        self.open_channel(request, false).await
    }

    /// Opens a channel with `request` whose Data frames the agent sends only within the
    /// credit granted with [`Channel::grant`] (none yet).
    pub async fn open_metered(&self, request: &Request) -> Result<Channel, AgentError> {
        self.open_channel(request, true).await
    }

    async fn open_channel(&self, request: &Request, metered: bool) -> Result<Channel, AgentError> {
        let id = self.next_channel.fetch_add(1, Ordering::Relaxed).max(1);
        let credit = metered.then(|| Arc::new(AtomicU64::new(0)));
        let rx = self
            .routes
            .open(id, credit.clone())
            .ok_or(AgentError::NotSent)?;
        let channel = Channel {
            id,
            rx,
            conn: self.clone(),
            credit,
        };
        self.outgoing
            .send(Frame::json(id, Kind::Request, request))
            .await
            .map_err(|_| AgentError::NotSent)?;
        Ok(channel)
    }

    /// Whether the agent speaks the streamed transfers (an operator's older agent may
    /// not; the host never sends it their frames).
    pub fn speaks_transfers(&self) -> bool {
        self.hello.version >= sandboxd_agent_protocol::TRANSFERS_VERSION
    }

    /// Whether the agent does what E2B's in-sandbox daemon does.
    pub fn speaks_daemon(&self) -> bool {
        self.hello.version >= sandboxd_agent_protocol::DAEMON_VERSION
    }

    /// Whether the connection is still up.
    pub fn is_open(&self) -> bool {
        !self.outgoing.is_closed()
    }

    /// Whether both handles are the same connection.
    pub fn same(&self, other: &AgentConn) -> bool {
        Arc::ptr_eq(&self.next_channel, &other.next_channel)
    }
}

/// Frames read from the agent's side of the connection.
struct FrameReader<R> {
    reader: R,
    decoder: Decoder,
    buf: Vec<u8>,
}

/// Payloads of at least this size are read into themselves once their header arrived,
/// not through the reader's buffer.
const READ_IN_PLACE: usize = 16 * 1024;

impl<R: tokio::io::AsyncRead + Unpin> FrameReader<R> {
    /// The next frame; a malformed stream or a closed socket ends the connection.
    async fn next(&mut self) -> Result<Frame, AgentError> {
        let broken = |e: sandboxd_agent_protocol::FrameError| AgentError::Protocol(e.to_string());
        loop {
            if let Some(frame) = self.decoder.next_frame().map_err(broken)? {
                return Ok(frame);
            }
            if let Some(mut partial) = self.decoder.take_partial(READ_IN_PLACE).map_err(broken)? {
                while partial.missing() > 0 {
                    let mut rest = (&mut self.reader).take(partial.missing() as u64);
                    let n = rest
                        .read_buf(&mut partial.payload)
                        .await
                        .map_err(|_| AgentError::Disconnected)?;
                    if n == 0 {
                        return Err(AgentError::Disconnected);
                    }
                }
                return Ok(partial.into_frame());
            }
            let n = self
                .reader
                .read(&mut self.buf)
                .await
                .map_err(|_| AgentError::Disconnected)?;
            if n == 0 {
                return Err(AgentError::Disconnected);
            }
            self.decoder.feed(&self.buf[..n]);
        }
    }
}

/// Compares keys in time independent of where they differ.
fn same_key(given: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    !expected.is_empty() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// Reads the agent's Hello, then runs the connection until it ends. `on_ready` receives
/// the connection once the agent introduced itself and says whether it is wanted; the
/// returned future ends with the connection. The connection is any byte stream: a local
/// unix socket, or a channel of a remote server's SSH connection.
pub async fn serve(
    stream: AgentStream,
    sandbox_id: String,
    key: &str,
    handover: &dyn KeyHandover,
    op_timeout: Duration,
    on_ready: impl FnOnce(AgentConn) -> bool,
) -> Result<(), AgentError> {
    match stream {
        AgentStream::Local(stream) => {
            let (reader, writer) = stream.into_split();
            serve_halves(
                reader, writer, sandbox_id, key, handover, op_timeout, on_ready,
            )
            .await
        }
        AgentStream::Other(stream) => {
            let (reader, writer) = tokio::io::split(stream);
            serve_halves(
                reader, writer, sandbox_id, key, handover, op_timeout, on_ready,
            )
            .await
        }
    }
}

/// A connection from an agent.
pub enum AgentStream {
    /// A local unix socket (split without a lock between its halves).
    Local(UnixStream),
    /// Any other byte stream.
    Other(Box<dyn ByteStream>),
}

impl std::fmt::Debug for AgentStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Local(_) => "AgentStream::Local",
            Self::Other(_) => "AgentStream::Other",
        })
    }
}

pub use sandboxd_contracts::ByteStream;

async fn serve_halves<R, W>(
    reader: R,
    mut writer: W,
    sandbox_id: String,
    key: &str,
    handover: &dyn KeyHandover,
    op_timeout: Duration,
    on_ready: impl FnOnce(AgentConn) -> bool,
) -> Result<(), AgentError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut frames = FrameReader {
        reader,
        decoder: Decoder::default(),
        buf: vec![0u8; 64 * 1024],
    };
    let hello = tokio::time::timeout(HELLO_TIMEOUT, async {
        let frame = frames.next().await?;
        if frame.kind != Kind::Hello || frame.channel != 0 {
            return Err(AgentError::Protocol("expected hello".into()));
        }
        frame
            .parse::<Hello>()
            .map_err(|e| AgentError::Protocol(e.to_string()))
    })
    .await
    .map_err(|_| AgentError::Timeout)??;
    let mut hello = hello;
    if !same_key(&hello.key, key) {
        return Err(AgentError::Impostor);
    }
    hello.key.clear();
    // The agent holds the key now: the file that handed it over goes before the
    // connection serves anything (no command runs while it is there).
    if let Err(error) = handover.withdraw().await {
        warn!(%sandbox_id, %error, "cannot take the agent's key file away; the agent is not used");
        return Err(AgentError::Protocol(
            "the key file could not be taken away".into(),
        ));
    }
    debug!(%sandbox_id, pid = hello.pid, uid = hello.uid, "agent connected");

    let (outgoing, mut queue) = mpsc::channel::<Frame>(OUTGOING_DEPTH);
    let routes = Routes::default();
    let signals = outgoing.clone();
    let conn = AgentConn {
        hello,
        op_timeout,
        outgoing,
        routes: routes.clone(),
        next_channel: Arc::new(AtomicU32::new(1)),
        downloads: Arc::new(tokio::sync::Semaphore::new(DOWNLOADS)),
        ports: Arc::new(tokio::sync::Semaphore::new(PORTS)),
        egress: Arc::new(tokio::sync::Semaphore::new(EGRESS_CONNECTIONS)),
        port_growth: Arc::new(tokio::sync::Semaphore::new(PORT_GROWTH as usize)),
    };
    if !on_ready(conn) {
        return Ok(());
    }

    let write = async move {
        while let Some(frame) = queue.recv().await {
            if write_frame(&mut writer, &frame).await.is_err() {
                break;
            }
        }
    };
    let budget = Arc::new(tokio::sync::Semaphore::new(BUFFERED_BYTES));
    let read = async {
        loop {
            let frame = frames.next().await?;
            let channel = frame.channel;
            match routes.deliver(frame, &budget).await {
                Delivery::Delivered => {}
                Delivery::NoRoute if channel == 0 => {
                    return Err(AgentError::Protocol("unexpected frame on channel 0".into()));
                }
                Delivery::NoRoute => {}
                Delivery::Cut => {
                    warn!(%sandbox_id, channel, "an operation's output was not read; it was ended so the sandbox's other operations keep moving");
                    let kill = sandboxd_agent_protocol::Signal { signal: 9 };
                    let _ = signals.try_send(Frame::json(channel, Kind::Signal, &kill));
                }
                Delivery::Overdrawn => {
                    warn!(%sandbox_id, channel, "{OVERDRAWN}; the transfer was ended");
                    let _ = signals.try_send(Frame::new(channel, Kind::Cancel, Vec::new()));
                }
                Delivery::Closed => return Err(AgentError::Disconnected),
            }
        }
    };
    // However the connection ends — the agent goes, or the sandbox is released and this
    // future dropped — every channel still waiting ends with it, at once.
    let _ends_channels = EndChannels(routes.clone());
    let outcome = tokio::select! {
        outcome = read => outcome,
        () = write => Err(AgentError::Disconnected),
    };
    if let Err(AgentError::Protocol(reason)) = &outcome {
        warn!(%sandbox_id, %reason, "agent connection dropped");
    }
    outcome
}

/// Drops the routes of a connection, which ends every channel still waiting on it.
struct EndChannels(Routes);

impl Drop for EndChannels {
    fn drop(&mut self) {
        self.0.clear();
    }
}

/// Payloads up to this size leave in one write with their header (one wake-up of the
/// agent's reader); larger ones are written after the header as they are, not copied.
const COALESCE_MAX: usize = 64 * 1024;

async fn write_frame(
    writer: &mut (impl tokio::io::AsyncWrite + Unpin),
    frame: &Frame,
) -> std::io::Result<()> {
    // An oversized frame is this side's bug: it is dropped, not sent to be refused.
    let Ok(head) = header(frame.channel, frame.kind, frame.payload.len()) else {
        warn!(
            len = frame.payload.len(),
            "an oversized frame for the agent was dropped"
        );
        return Ok(());
    };
    if frame.payload.len() <= COALESCE_MAX {
        return writer
            .write_all(&[&head[..], &frame.payload].concat())
            .await;
    }
    writer.write_all(&head).await?;
    writer.write_all(&frame.payload).await
}
