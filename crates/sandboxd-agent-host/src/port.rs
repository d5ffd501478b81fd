//! Connections to ports inside a sandbox, carried over its agent connection: the agent
//! dials `127.0.0.1:<port>` and each direction moves within the credit its receiver
//! grants. The caller gets a [`PortStream`], a byte stream that reads the port's bytes
//! straight out of the channel's frames and writes its own as frames, with no task or
//! buffer between. The agent is untrusted: it may send only within the credit the host
//! granted (the connection's reader cuts a channel past it, and the stream checks it
//! again), and at most [`PORTS`] connections share one agent connection, so together
//! they hold at most `PORTS × PORT_WINDOW_OUT` of the server's memory, plus what their
//! windows were widened by (a window doubles while its agent waits for credit, up to
//! [`WIDEST`], out of one pool per agent connection), however slowly their callers read.
//!
//! The stream polls its metered channel itself. `accept_egress` is the next connection a
//! program made to the egress proxy's address, awaited without a deadline.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use sandboxd_agent_protocol::{
    Credit, EGRESS_VERSION, Failure, Frame, Inflow, Kind, Outflow, PORT_WINDOW_OUT, PORTS_VERSION,
    Request,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::PollSender;

pub use super::conn::PORTS;
use super::conn::{AgentConn, AgentError, Channel, SendOnDrop};
use super::ops::{parse, unexpected};

/// What goes toward a port is sent in frames of this size at most.
const CHUNK: usize = 64 * 1024;

/// Why a connection to a port could not be made.
#[derive(Debug)]
pub enum PortError {
    /// The agent could not connect (nothing listens there).
    Refused(Failure),
    /// As many connections as one agent connection carries are open.
    Busy,
    Agent(AgentError),
}

impl From<AgentError> for PortError {
    fn from(error: AgentError) -> Self {
        Self::Agent(error)
    }
}

impl AgentConn {
    /// Whether the agent opens connections to the sandbox's ports.
    pub fn speaks_ports(&self) -> bool {
        self.hello.version >= PORTS_VERSION
    }

    /// A connection to `127.0.0.1:<port>` inside the sandbox, as a byte stream. Making
    /// it takes at most the operation timeout; once made it lasts as long as both ends
    /// keep it (dropping the stream drops the connection in the sandbox).
    pub async fn open_port(&self, port: u16) -> Result<PortStream, PortError> {
        if !self.speaks_ports() {
            return Err(PortError::Agent(AgentError::NotSent));
        }
        let slot = self
            .ports
            .clone()
            .try_acquire_owned()
            .map_err(|_| PortError::Busy)?;
        let mut channel = self.open_metered(&Request::OpenPort { port }).await?;
        let cancel = channel.cancel_on_drop();
        let first = tokio::time::timeout(self.op_timeout, channel.recv())
            .await
            .map_err(|_| AgentError::Timeout)??;
        self.carried(channel, cancel, &first, slot).await
    }

    /// Whether the agent hands over the egress proxy's connections.
    pub fn speaks_egress(&self) -> bool {
        self.hello.version >= EGRESS_VERSION
    }

    /// The next connection a program in the sandbox makes to the egress proxy's address,
    /// as a byte stream, once one arrives (there is no deadline: it waits for the
    /// sandbox's programs; dropping the future withdraws the request). Waits first
    /// while `EGRESS_CONNECTIONS` connections are open or awaited.
    pub async fn accept_egress(&self) -> Result<PortStream, PortError> {
        if !self.speaks_egress() {
            return Err(PortError::Agent(AgentError::NotSent));
        }
        let slot = self
            .egress
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| PortError::Agent(AgentError::Disconnected))?;
        let mut channel = self.open_metered(&Request::AcceptEgress {}).await?;
        let cancel = channel.cancel_on_drop();
        let first = channel.recv().await?;
        self.carried(channel, cancel, &first, slot).await
    }

    /// The stream of a connection the agent carries on `channel`, from the agent's
    /// first answer: its credit, or why there is no connection.
    async fn carried(
        &self,
        channel: Channel,
        cancel: SendOnDrop,
        first: &Frame,
        slot: OwnedSemaphorePermit,
    ) -> Result<PortStream, PortError> {
        let credit = match first.kind {
            Kind::Credit => parse::<Credit>(first)?.bytes,
            Kind::Error => return Err(PortError::Refused(parse(first)?)),
            _ => return Err(unexpected(first).into()),
        };
        let mut outflow = Outflow::default();
        outflow.grant(credit);
        let (inflow, window) = Inflow::new(PORT_WINDOW_OUT);
        channel.grant(window).await?;
        let growth = Growth {
            pool: self.port_growth.clone(),
            held: None,
        };
        let wakers = Arc::<Wakers>::default();
        Ok(PortStream {
            sender: channel.poll_sender(),
            channel,
            cancel,
            inflow,
            outflow,
            growth,
            _slot: slot,
            received: VecDeque::new(),
            offset: 0,
            port_ended: false,
            gone: false,
            caller_ended: false,
            waker: Waker::from(wakers.clone()),
            wakers,
        })
    }
}

/// What a connection's window toward the host may grow to: a fast download moves a
/// few windows per wake-up of the agent instead of one small one.
const WIDEST: u64 = 1024 * 1024;

/// The part of the agent connection's growth pool a port's window holds.
struct Growth {
    pool: Arc<tokio::sync::Semaphore>,
    held: Option<OwnedSemaphorePermit>,
}

impl Growth {
    /// Doubles the window of a connection whose agent waited for credit while its
    /// consumer kept up, as far as [`WIDEST`] and the pool allow; the bytes added.
    fn widen(&mut self, inflow: &mut Inflow) -> u64 {
        let step = inflow.window().min(WIDEST.saturating_sub(inflow.window()));
        let Ok(permits) = u32::try_from(step) else {
            return 0;
        };
        if permits == 0 {
            return 0;
        }
        let Ok(taken) = self.pool.clone().try_acquire_many_owned(permits) else {
            return 0;
        };
        match &mut self.held {
            Some(held) => held.merge(taken),
            None => self.held = Some(taken),
        }
        inflow.widen(step)
    }
}

/// Who waits on a stream: its reader and its writer may be different tasks, and the
/// channel's frames (the port's bytes for one, credit for the other) wake both.
#[derive(Default)]
struct Wakers {
    reader: AtomicWaker,
    writer: AtomicWaker,
}

impl Wake for Wakers {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.reader.wake();
        self.writer.wake();
    }
}

/// One connection to a port inside the sandbox. Reading takes the port's bytes as their
/// frames arrive, granting the agent more as the caller takes them; writing sends the
/// caller's bytes within the credit the agent granted; shutting down ends the caller's
/// direction (half-close). Dropped before the agent ended the connection, it cancels it.
pub struct PortStream {
    channel: Channel,
    cancel: SendOnDrop,
    /// The caller's bytes and its End toward the agent, in order.
    sender: PollSender<Frame>,
    inflow: Inflow,
    outflow: Outflow,
    growth: Growth,
    _slot: OwnedSemaphorePermit,
    /// The port's bytes received and not read yet, in order: within the window granted.
    received: VecDeque<Vec<u8>>,
    /// How much of the first of them was read.
    offset: usize,
    /// The port's direction ended (its End).
    port_ended: bool,
    /// The connection ended: the agent's Done or Error, a broken frame, the agent gone.
    gone: bool,
    /// The caller's direction ended (End sent).
    caller_ended: bool,
    wakers: Arc<Wakers>,
    /// `wakers` as the waker the channel is polled with, made once.
    waker: Waker,
}

impl std::fmt::Debug for PortStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortStream")
            .field("channel", &self.channel.id)
            .field("port_ended", &self.port_ended)
            .field("caller_ended", &self.caller_ended)
            .field("gone", &self.gone)
            .finish_non_exhaustive()
    }
}

impl PortStream {
    /// Takes every frame that arrived, waking whoever waits on the stream when more do.
    fn pump(&mut self) {
        let mut cx = Context::from_waker(&self.waker);
        while !self.gone {
            let frame = match self.channel.poll_recv(&mut cx) {
                Poll::Pending => return,
                Poll::Ready(Err(_)) => {
                    self.gone = true;
                    return;
                }
                Poll::Ready(Ok(frame)) => frame,
            };
            match frame.kind {
                Kind::Data => {
                    if self.inflow.received(frame.payload.len() as u64).is_err() {
                        self.gone = true;
                    } else if !frame.payload.is_empty() {
                        self.received.push_back(frame.payload);
                    }
                }
                Kind::End => self.port_ended = true,
                Kind::Credit => match parse::<Credit>(&frame) {
                    Ok(credit) => self.outflow.grant(credit.bytes),
                    Err(_) => self.gone = true,
                },
                Kind::Done | Kind::Error => {
                    self.cancel.disarm();
                    self.gone = true;
                }
                _ => self.gone = true,
            }
        }
    }

    /// The caller took `bytes`: the agent may send that much more once it is worth a
    /// frame, and more still while the caller keeps up with it.
    fn consumed(&mut self, bytes: usize) {
        let starved = self.inflow.drained();
        if let Some(more) = self.inflow.consumed(bytes as u64) {
            let wider = if starved {
                self.growth.widen(&mut self.inflow)
            } else {
                0
            };
            self.channel.grant_soon(more + wider);
        }
    }
}

impl AsyncRead for PortStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        this.wakers.reader.register(cx.waker());
        this.pump();
        let mut taken = 0;
        while buf.remaining() > 0
            && let Some(front) = this.received.front()
        {
            let n = buf.remaining().min(front.len() - this.offset);
            buf.put_slice(&front[this.offset..this.offset + n]);
            this.offset += n;
            taken += n;
            if this.offset == front.len() {
                this.received.pop_front();
                this.offset = 0;
            }
        }
        if taken > 0 {
            this.consumed(taken);
        } else if !this.port_ended && !this.gone && buf.remaining() > 0 {
            return Poll::Pending;
        }
        this.wakers.reader.take();
        Poll::Ready(Ok(()))
    }
}

fn broken() -> std::io::Error {
    std::io::ErrorKind::BrokenPipe.into()
}

impl AsyncWrite for PortStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if this.caller_ended {
            return Poll::Ready(Err(broken()));
        }
        if bytes.is_empty() {
            return Poll::Ready(Ok(0));
        }
        this.wakers.writer.register(cx.waker());
        this.pump();
        if this.gone {
            return Poll::Ready(Err(broken()));
        }
        let available = usize::try_from(this.outflow.available()).unwrap_or(usize::MAX);
        if available == 0 {
            return Poll::Pending;
        }
        if std::task::ready!(this.sender.poll_reserve(cx)).is_err() {
            return Poll::Ready(Err(broken()));
        }
        let n = bytes.len().min(available).min(CHUNK);
        let frame = Frame::new(this.channel.id, Kind::Data, bytes[..n].to_vec());
        if this.sender.send_item(frame).is_err() {
            return Poll::Ready(Err(broken()));
        }
        this.outflow.spend(n as u64);
        this.wakers.writer.take();
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Ends the caller's direction; the port's goes on until it ends too.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.caller_ended || this.gone {
            return Poll::Ready(Ok(()));
        }
        if std::task::ready!(this.sender.poll_reserve(cx)).is_err() {
            return Poll::Ready(Err(broken()));
        }
        let end = Frame::new(this.channel.id, Kind::End, Vec::new());
        if this.sender.send_item(end).is_err() {
            return Poll::Ready(Err(broken()));
        }
        this.caller_ended = true;
        Poll::Ready(Ok(()))
    }
}
