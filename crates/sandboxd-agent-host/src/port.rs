//! Connections to ports inside a sandbox, carried over its agent connection: the agent
//! dials `127.0.0.1:<port>` and each direction moves within the credit its receiver
//! grants. The caller gets a byte stream; a task between it and the agent's channel
//! moves the bytes. The agent is untrusted: it may send only within the credit the host
//! granted (the connection's reader cuts a channel past it), and at most [`PORTS`]
//! connections share one agent connection, so together they hold at most
//! `PORTS × PORT_WINDOW_OUT` of the server's memory, plus what their windows were
//! widened by (a window doubles while its agent waits for credit, up to [`WIDEST`],
//! out of one pool per agent connection), however slowly their clients read.

use std::time::Duration;

use sandboxd_agent_protocol::{
    Credit, Failure, Inflow, Kind, Outflow, PORT_WINDOW_OUT, PORTS_VERSION, Request,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, DuplexStream};
use tokio::sync::OwnedSemaphorePermit;

pub use super::conn::PORTS;
use super::conn::{AgentConn, AgentError, Channel, SendOnDrop};
use super::ops::{parse, unexpected};

/// What goes toward a port is sent in frames of this size at most.
const CHUNK: usize = 64 * 1024;
/// Bytes buffered between the caller's stream and the task that moves them.
const STREAM_BUFFER: usize = 64 * 1024;
/// Once the caller's side ended (or the caller went away: a stream cannot tell), the
/// port has this long without sending anything before the connection is dropped.
const LINGER: Duration = Duration::from_secs(30);

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
    pub async fn open_port(&self, port: u16) -> Result<DuplexStream, PortError> {
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
        let credit = match first.kind {
            Kind::Credit => parse::<Credit>(&first)?.bytes,
            Kind::Error => return Err(PortError::Refused(parse(&first)?)),
            _ => return Err(unexpected(&first).into()),
        };
        let (caller, ours) = tokio::io::duplex(STREAM_BUFFER);
        let growth = Growth {
            pool: self.port_growth.clone(),
            held: None,
        };
        tokio::spawn(carry(channel, cancel, ours, credit, (slot, growth)));
        Ok(caller)
    }
}

/// What a connection's window toward the host may grow to: a fast download moves a
/// few windows per wake-up of the agent instead of one small one.
const WIDEST: u64 = 1024 * 1024;

/// The part of the agent connection's growth pool a port's window holds.
struct Growth {
    pool: std::sync::Arc<tokio::sync::Semaphore>,
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

/// Moves bytes between the caller's stream and the agent's channel until both
/// directions ended (the agent's Done), either side failed or the caller went away.
async fn carry(
    mut channel: Channel,
    mut cancel: SendOnDrop,
    stream: DuplexStream,
    credit: u64,
    (_slot, mut growth): (OwnedSemaphorePermit, Growth),
) {
    let (mut from_caller, mut to_caller) = tokio::io::split(stream);
    let mut outflow = Outflow::default();
    outflow.grant(credit);
    let (mut inflow, first) = Inflow::new(PORT_WINDOW_OUT);
    if channel.grant(first).await.is_err() {
        return;
    }
    let mut buf = vec![0u8; CHUNK];
    let mut caller_ended = false;
    let linger = tokio::time::sleep(LINGER);
    tokio::pin!(linger);
    loop {
        let may_send = !caller_ended && outflow.available() > 0;
        let room = buf
            .len()
            .min(usize::try_from(outflow.available()).unwrap_or(usize::MAX));
        tokio::select! {
            frame = channel.recv() => {
                let Ok(frame) = frame else { return };
                match frame.kind {
                    Kind::Data => {
                        let len = frame.payload.len() as u64;
                        if inflow.received(len).is_err()
                            || to_caller.write_all(&frame.payload).await.is_err()
                        {
                            return;
                        }
                        let starved = inflow.drained();
                        if let Some(more) = inflow.consumed(len) {
                            let wider = if starved { growth.widen(&mut inflow) } else { 0 };
                            if channel.grant(more + wider).await.is_err() {
                                return;
                            }
                        }
                        if caller_ended {
                            linger.as_mut().reset(tokio::time::Instant::now() + LINGER);
                        }
                    }
                    Kind::End => {
                        let _ = to_caller.shutdown().await;
                    }
                    Kind::Credit => match parse::<Credit>(&frame) {
                        Ok(credit) => outflow.grant(credit.bytes),
                        Err(_) => return,
                    },
                    Kind::Done | Kind::Error => {
                        cancel.disarm();
                        return;
                    }
                    _ => return,
                }
            }
            read = from_caller.read(&mut buf[..room]), if may_send => match read {
                Ok(0) | Err(_) => {
                    caller_ended = true;
                    linger.as_mut().reset(tokio::time::Instant::now() + LINGER);
                    if channel.send(Kind::End, Vec::new()).await.is_err() {
                        return;
                    }
                }
                Ok(n) => {
                    if channel.send(Kind::Data, buf[..n].to_vec()).await.is_err() {
                        return;
                    }
                    outflow.spend(n as u64);
                }
            },
            () = &mut linger, if caller_ended => return,
        }
    }
}
