//! A transfer's content as a reader (an upload: Data frames from the host, credit granted
//! back as they are taken) and as a writer (a download: Data frames to the host, sent
//! only within the credit it granted). Both end at once when the host cancels, the
//! connection ends, or nothing comes for [`IDLE`].

use std::io::{self, Read, Write};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use sandboxd_agent_protocol::{Credit, Frame, Inflow, Kind, MAX_PAYLOAD, Outflow, UPLOAD_WINDOW};

use crate::input::Input;
use crate::outbox::Outbox;

/// Content goes to the host in frames of at most this size.
pub const CHUNK: usize = 256 * 1024;
/// The host gives up a transfer whose other end is idle for a minute and then cancels
/// it; this is only the agent's own bound should the cancel never come.
const IDLE: Duration = Duration::from_secs(300);

fn input_error(error: RecvTimeoutError) -> io::Error {
    match error {
        RecvTimeoutError::Timeout => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("nothing from sandboxd for {} s", IDLE.as_secs()),
        ),
        RecvTimeoutError::Disconnected => gone(),
    }
}

fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the connection to sandboxd ended",
    )
}

fn cancelled() -> io::Error {
    // Not `Interrupted`, which readers and writers retry.
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "sandboxd gave up the transfer",
    )
}

/// An upload's content, read as it arrives.
pub struct Incoming<'a> {
    outbox: &'a Outbox,
    channel: u32,
    input: &'a Input,
    inflow: Inflow,
    current: Vec<u8>,
    pos: usize,
    ended: bool,
    /// Content bytes received so far.
    pub received: u64,
}

impl<'a> Incoming<'a> {
    /// Grants the host its first window: the agent is ready for the content.
    pub fn start(outbox: &'a Outbox, channel: u32, input: &'a Input) -> io::Result<Self> {
        let (inflow, first) = Inflow::new(UPLOAD_WINDOW);
        let incoming = Self {
            outbox,
            channel,
            input,
            inflow,
            current: Vec::new(),
            pos: 0,
            ended: false,
            received: 0,
        };
        incoming.grant(first)?;
        Ok(incoming)
    }

    fn grant(&self, bytes: u64) -> io::Result<()> {
        let credit = Frame::json(self.channel, Kind::Credit, &Credit { bytes });
        self.outbox.send(&credit).then_some(()).ok_or_else(gone)
    }

    /// Takes the next Data frame; `false` at End.
    fn next_frame(&mut self) -> io::Result<bool> {
        loop {
            let frame = self.input.recv_timeout(IDLE).map_err(input_error)?;
            match frame.kind {
                Kind::Data => {
                    let len = frame.payload.len() as u64;
                    self.inflow
                        .received(len)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    self.received += len;
                    self.current = frame.payload;
                    self.pos = 0;
                    if !self.current.is_empty() {
                        return Ok(true);
                    }
                }
                Kind::End => {
                    self.ended = true;
                    return Ok(false);
                }
                Kind::Cancel => return Err(cancelled()),
                _ => {}
            }
        }
    }
}

impl Read for Incoming<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.current.len() {
            if !self.current.is_empty() {
                let taken = std::mem::take(&mut self.current).len() as u64;
                self.pos = 0;
                if let Some(grant) = self.inflow.consumed(taken) {
                    self.grant(grant)?;
                }
            }
            if self.ended || !self.next_frame()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.current.len() - self.pos);
        buf[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A download's content, sent within the host's credit.
pub struct Outgoing<'a> {
    outbox: &'a Outbox,
    channel: u32,
    input: &'a Input,
    outflow: Outflow,
    buf: Vec<u8>,
    /// Content bytes sent so far.
    pub sent: u64,
}

impl<'a> Outgoing<'a> {
    pub fn new(outbox: &'a Outbox, channel: u32, input: &'a Input) -> Self {
        Self {
            outbox,
            channel,
            input,
            outflow: Outflow::default(),
            buf: Vec::with_capacity(CHUNK),
            sent: 0,
        }
    }

    /// Takes in what the host sent (credit, or its cancel) without waiting, then waits
    /// for credit when there is none.
    fn take_input(&mut self) -> io::Result<()> {
        loop {
            match self.input.recv_timeout(Duration::ZERO) {
                Ok(frame) => self.take(frame)?,
                Err(RecvTimeoutError::Timeout) => break,
                Err(error) => return Err(input_error(error)),
            }
        }
        if self.outflow.available() == 0 {
            self.wait_for_credit()?;
        }
        Ok(())
    }

    /// Sends `message` as one Data frame, once the credit covers it whole (every Data
    /// frame of a download counts against its credit).
    pub fn send_whole(&mut self, message: &[u8]) -> io::Result<()> {
        while self.outflow.available() < message.len() as u64 {
            self.wait_for_credit()?;
        }
        if !self.outbox.send_bytes(self.channel, Kind::Data, message) {
            return Err(gone());
        }
        self.outflow.spend(message.len() as u64);
        Ok(())
    }

    /// Waits for more credit than there is now.
    fn wait_for_credit(&mut self) -> io::Result<()> {
        let before = self.outflow.available();
        while self.outflow.available() == before {
            let frame = self.input.recv_timeout(IDLE).map_err(input_error)?;
            self.take(frame)?;
        }
        Ok(())
    }

    fn take(&mut self, frame: Frame) -> io::Result<()> {
        match frame.kind {
            Kind::Credit => {
                let credit: Credit = frame
                    .parse()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                self.outflow.grant(credit.bytes);
                Ok(())
            }
            Kind::Cancel => Err(cancelled()),
            _ => Ok(()),
        }
    }

    /// Sends `bytes` as Data frames, each within the credit and the frame limit.
    fn send(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            self.take_input()?;
            let n = (self.outflow.available() as usize)
                .min(bytes.len())
                .min(MAX_PAYLOAD);
            if !self
                .outbox
                .send_bytes(self.channel, Kind::Data, &bytes[..n])
            {
                return Err(gone());
            }
            self.outflow.spend(n as u64);
            self.sent += n as u64;
            bytes = &bytes[n..];
        }
        Ok(())
    }
}

impl Write for Outgoing<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        // A large write with nothing buffered goes as it is, without a copy.
        if self.buf.is_empty() && data.len() >= CHUNK {
            self.send(&data[..CHUNK])?;
            return Ok(CHUNK);
        }
        let n = data.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK {
            self.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        let buf = std::mem::take(&mut self.buf);
        let sent = self.send(&buf);
        self.buf = buf;
        self.buf.clear();
        sent
    }
}
