//! A TCP connection inside the sandbox carried for sandboxd: one the agent dials to
//! `127.0.0.1:<port>` (`openPort`), or one a program made to the egress proxy's address
//! (`egress.rs`). The agent carries its bytes both ways, each way within the credit its
//! receiver grants, so neither side queues more than a window of it. The thread serving
//! the request takes the host's frames (bytes toward the port, its credit, its End or
//! Cancel); a second thread reads the port and sends what it reads.
//!
//! `Carriage` carries one connection over a channel: credit each way, End, Cancel.

use std::io::{self, Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use sandboxd_agent_protocol::{
    Credit, FailureKind, Frame, Inflow, Kind, MAX_PAYLOAD, Outflow, PORT_WINDOW_IN,
};

use crate::files::{done, fail};
use crate::input::{Input, Inputs};
use crate::outbox::Outbox;
use crate::workers::Workers;

/// How long making the connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// What the port sends is read in pieces of at most this size (and sent in frames
/// within the host's credit): large enough that a fast download costs few wake-ups.
const CHUNK: usize = 256 * 1024;

/// What both directions of one connection share.
#[derive(Default)]
struct State {
    /// What the host still lets the agent send.
    outflow: Outflow,
    /// The host cancelled, or the connection to it ended.
    dropped: bool,
    /// Directions ended so far (2: the request is done).
    ended: u8,
}

struct Shared {
    state: Mutex<State>,
    credit: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One direction ended; whether it was the last.
    fn end_one(&self) -> bool {
        let mut state = self.lock();
        state.ended += 1;
        state.ended == 2 && !state.dropped
    }
}

/// Serves `openPort`: its input is routed from now on (so a Cancel sent while the
/// connection is being made is seen), its Credit frames straight to the thread that
/// sends the port's bytes; the rest runs on the pool.
pub fn serve(outbox: Outbox, channel: u32, port: u16, inputs: Inputs, workers: &Workers) {
    let carriage = Carriage::open(outbox, channel, &inputs);
    let pool = workers.clone();
    workers.run(move || {
        match dial(port) {
            Ok(stream) => carriage.carry(stream, &pool),
            Err(message) => fail(
                &carriage.outbox,
                channel,
                FailureKind::Unreachable,
                &message,
            ),
        }
        inputs.close(channel);
    });
}

fn dial(port: u16) -> Result<TcpStream, String> {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&address, CONNECT_TIMEOUT)
        .map_err(|error| format!("nothing accepts connections on port {port}: {error}"))
}

/// One channel carrying a TCP connection in the sandbox: its input, routed from when
/// the request arrived, and what both directions share.
pub struct Carriage {
    outbox: Outbox,
    channel: u32,
    input: Input,
    shared: Arc<Shared>,
}

impl Carriage {
    /// Routes the channel's input: Credit frames straight to the direction that sends,
    /// the rest to [`Carriage::carry`].
    pub fn open(outbox: Outbox, channel: u32, inputs: &Inputs) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            credit: Condvar::new(),
        });
        let input = {
            let shared = shared.clone();
            inputs.open_with_credit(channel, Arc::new(move |frame| give_credit(frame, &shared)))
        };
        Self {
            outbox,
            channel,
            input,
            shared,
        }
    }

    /// Whether the host withdrew the request (Cancel) or is gone, before any connection
    /// was carried.
    pub fn withdrawn(&self) -> bool {
        match self.input.try_recv() {
            Ok(frame) => frame.kind == Kind::Cancel,
            Err(std::sync::mpsc::TryRecvError::Empty) => false,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => true,
        }
    }

    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    pub fn channel(&self) -> u32 {
        self.channel
    }

    /// Credit, the bytes both ways, Done once both directions ended; on this thread and
    /// one more of the pool.
    pub fn carry(&self, stream: TcpStream, workers: &Workers) {
        let Self {
            outbox,
            channel,
            input,
            shared,
        } = self;
        let channel = *channel;
        let _ = stream.set_nodelay(true);
        let Ok(reader) = stream.try_clone() else {
            return fail(
                outbox,
                channel,
                FailureKind::Io,
                "the connection cannot be shared",
            );
        };
        let (mut inflow, first) = Inflow::new(PORT_WINDOW_IN);
        if !grant(outbox, channel, first) {
            return;
        }
        {
            let outbox = outbox.clone();
            let shared = shared.clone();
            workers.run(move || send_what_the_port_sends(&outbox, channel, reader, &shared));
        }
        let mut stream = stream;
        let finished =
            take_what_the_host_sends(outbox, channel, &mut stream, input, &mut inflow, shared);
        if !finished {
            // Cancelled, or the host went away: the port's reader ends with the socket.
            shared.lock().dropped = true;
            shared.credit.notify_all();
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        if shared.end_one() {
            done(outbox, channel, 0);
        }
    }
}

fn grant(outbox: &Outbox, channel: u32, bytes: u64) -> bool {
    outbox.send(&Frame::json(channel, Kind::Credit, &Credit { bytes }))
}

/// The host's frames until its End (`true`), or its Cancel, the connection's end or
/// a frame past the credit (`false`). Writing to the port may block: the host's credit
/// for the other direction does not wait behind it (`serve`).
fn take_what_the_host_sends(
    outbox: &Outbox,
    channel: u32,
    stream: &mut TcpStream,
    input: &Input,
    inflow: &mut Inflow,
    shared: &Shared,
) -> bool {
    let mut writable = true;
    loop {
        let Some(frame) = input.recv() else {
            return false;
        };
        match frame.kind {
            Kind::Data => {
                let len = frame.payload.len() as u64;
                if inflow.received(len).is_err() {
                    return false;
                }
                // A port that stopped taking bytes has them dropped; the host learns of
                // it when the port's side ends.
                if writable && stream.write_all(&frame.payload).is_err() {
                    writable = false;
                }
                if let Some(more) = inflow.consumed(len)
                    && !grant(outbox, channel, more)
                {
                    return false;
                }
            }
            Kind::End => {
                let _ = stream.shutdown(Shutdown::Write);
                // Credit for the other direction keeps coming until it ends too.
                return wait_for_the_port_to_end(input, shared);
            }
            Kind::Cancel => return false,
            _ => {}
        }
    }
}

/// After the host's End: waits until the port's side ends too (`true`) or the host
/// cancels (`false`).
fn wait_for_the_port_to_end(input: &Input, shared: &Shared) -> bool {
    loop {
        if shared.lock().ended >= 1 {
            return true;
        }
        match input.recv_timeout(Duration::from_millis(200)) {
            Ok(frame) if frame.kind == Kind::Cancel => return false,
            Ok(_) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return false,
        }
    }
}

fn give_credit(frame: &Frame, shared: &Shared) {
    if let Ok(credit) = frame.parse::<Credit>() {
        shared.lock().outflow.grant(credit.bytes);
        shared.credit.notify_all();
    }
}

/// Reads the port and sends what it reads within the host's credit; End at its end.
fn send_what_the_port_sends(outbox: &Outbox, channel: u32, mut reader: TcpStream, shared: &Shared) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        if n == 0 {
            break;
        }
        let mut piece = &buf[..n];
        while !piece.is_empty() {
            let Some(allowed) = wait_for_credit(shared) else {
                return;
            };
            let take = piece.len().min(allowed).min(MAX_PAYLOAD);
            if !outbox.send_bytes(channel, Kind::Data, &piece[..take]) {
                return;
            }
            shared.lock().outflow.spend(take as u64);
            piece = &piece[take..];
        }
    }
    if shared.lock().dropped {
        return;
    }
    if !outbox.send_bytes(channel, Kind::End, &[]) {
        return;
    }
    if shared.end_one() {
        done(outbox, channel, 0);
    }
}

/// The bytes the host lets the agent send now, once there are any; `None` once the
/// host dropped the connection.
fn wait_for_credit(shared: &Shared) -> Option<usize> {
    let mut state = shared.lock();
    loop {
        if state.dropped {
            return None;
        }
        let available = state.outflow.available();
        if available > 0 {
            return Some(usize::try_from(available).unwrap_or(usize::MAX));
        }
        state = shared
            .credit
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
    }
}
