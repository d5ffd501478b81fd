//! The write half of the agent's connection, shared by every request thread: one
//! mutex-guarded stream, a frame's header and payload leaving in one vectored write.

use std::io::{IoSlice, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use sandboxd_agent_protocol::{Frame, Kind, header};

/// The shared write half of the connection.
#[derive(Clone)]
pub struct Outbox(Arc<Mutex<UnixStream>>);

impl Outbox {
    /// The outbox of a connection's stream (a clone of its handle).
    pub fn new(stream: UnixStream) -> Self {
        Self(Arc::new(Mutex::new(stream)))
    }
}

impl Outbox {
    /// Sends a frame; `false` once the connection is gone.
    pub fn send(&self, frame: &Frame) -> bool {
        self.send_bytes(frame.channel, frame.kind, &frame.payload)
    }

    /// Sends a frame made of `payload` as it is: header and payload leave in one
    /// vectored write, without being copied into a buffer of their own.
    pub fn send_bytes(&self, channel: u32, kind: Kind, payload: &[u8]) -> bool {
        let Ok(header) = header(channel, kind, payload.len()) else {
            return false;
        };
        match self.0.lock() {
            Ok(mut stream) => write_parts(&mut *stream, &header, payload).is_ok(),
            Err(_) => false,
        }
    }
}

fn write_parts(out: &mut impl Write, header: &[u8], payload: &[u8]) -> std::io::Result<()> {
    let mut parts = [IoSlice::new(header), IoSlice::new(payload)];
    let mut parts = &mut parts[..];
    while !parts.is_empty() {
        match out.write_vectored(parts) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut parts, n),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
