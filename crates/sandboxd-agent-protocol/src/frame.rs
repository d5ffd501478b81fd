//! Frames: `u32 payload length | u32 channel | u8 kind | payload`, big-endian.
//!
//! Headers are written here and frames decoded incrementally, an oversized or unknown
//! frame refused from its header.

/// Bytes before the payload.
pub const HEADER_LEN: usize = 9;
/// Largest payload accepted; a peer that announces more is cut off.
pub const MAX_PAYLOAD: usize = 1024 * 1024;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Agent → host, channel 0, once per connection: [`crate::Hello`].
    Hello = 0,
    /// Host → agent: a [`crate::Request`] opening the channel.
    Request = 1,
    /// Agent → host: a chunk of a command's standard output.
    Stdout = 2,
    /// Agent → host: a chunk of a command's standard error.
    Stderr = 3,
    /// Agent → host: a command ended: [`crate::Exit`]. Closes the channel.
    Exit = 4,
    /// Agent → host: the request failed: [`crate::Failure`]. Closes the channel.
    Error = 5,
    /// Either way: a chunk of file content or listing.
    Data = 6,
    /// Host → agent: the content of a write is complete.
    End = 7,
    /// Host → agent: kill a running command: [`crate::Signal`].
    Signal = 8,
    /// Agent → host: the request succeeded: [`crate::Done`]. Closes the channel.
    Done = 9,
    /// Host → agent: new size of a terminal: [`crate::Resize`].
    Resize = 10,
    /// Either way, on a transfer: the receiver lets the sender send this many more bytes
    /// of content: [`crate::Credit`].
    Credit = 11,
    /// Host → agent: give up the transfer on this channel (its other end went away).
    Cancel = 12,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            0 => Self::Hello,
            1 => Self::Request,
            2 => Self::Stdout,
            3 => Self::Stderr,
            4 => Self::Exit,
            5 => Self::Error,
            6 => Self::Data,
            7 => Self::End,
            8 => Self::Signal,
            9 => Self::Done,
            10 => Self::Resize,
            11 => Self::Credit,
            12 => Self::Cancel,
            _ => return None,
        })
    }
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub channel: u32,
    pub kind: Kind,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn new(channel: u32, kind: Kind, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            channel,
            kind,
            payload: payload.into(),
        }
    }

    /// A frame whose payload is `message` as JSON.
    pub fn json(channel: u32, kind: Kind, message: &impl serde::Serialize) -> Self {
        // Serializing plain data structs to a Vec cannot fail.
        Self::new(
            channel,
            kind,
            serde_json::to_vec(message).unwrap_or_default(),
        )
    }

    /// The payload parsed as JSON of type `T`.
    pub fn parse<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, FrameError> {
        serde_json::from_slice(&self.payload).map_err(|e| FrameError::BadMessage(e.to_string()))
    }
}

/// A broken stream: the connection must be dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame payload of {0} bytes exceeds the limit")]
    TooLarge(usize),
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("malformed message: {0}")]
    BadMessage(String),
}

/// The header of a frame of `len` payload bytes. Payloads over [`MAX_PAYLOAD`] are the
/// caller's bug; they are refused here rather than sent to be refused by the peer.
pub fn header(channel: u32, kind: Kind, len: usize) -> Result<[u8; HEADER_LEN], FrameError> {
    if len > MAX_PAYLOAD {
        return Err(FrameError::TooLarge(len));
    }
    let mut out = [0u8; HEADER_LEN];
    out[..4].copy_from_slice(&(len as u32).to_be_bytes());
    out[4..8].copy_from_slice(&channel.to_be_bytes());
    out[8] = kind as u8;
    Ok(out)
}

/// Incremental decoder: feed bytes as they arrive, take frames as they complete.
/// Consumed bytes are dropped when the buffer runs empty or is mostly consumed, not
/// after every frame, so a burst of frames is not moved once per frame.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Start of the bytes not yet decoded.
    start: usize,
}

impl Decoder {
    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The channel, kind and payload length of the next frame once its header arrived;
    /// an oversized or unknown frame is an error.
    fn head(&self) -> Result<Option<(u32, Kind, usize)>, FrameError> {
        let pending = &self.buf[self.start..];
        if pending.len() < HEADER_LEN {
            return Ok(None);
        }
        let len = u32::from_be_bytes([pending[0], pending[1], pending[2], pending[3]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(FrameError::TooLarge(len));
        }
        let kind = Kind::from_byte(pending[8]).ok_or(FrameError::UnknownKind(pending[8]))?;
        let channel = u32::from_be_bytes([pending[4], pending[5], pending[6], pending[7]]);
        Ok(Some((channel, kind, len)))
    }

    /// The next complete frame, `Ok(None)` when more bytes are needed, or an error that
    /// ends the connection (checked from the header, before the payload is buffered).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        let Some((channel, kind, len)) = self.head()? else {
            return Ok(None);
        };
        let pending = &self.buf[self.start..];
        if pending.len() < HEADER_LEN + len {
            return Ok(None);
        }
        let payload = pending[HEADER_LEN..HEADER_LEN + len].to_vec();
        self.start += HEADER_LEN + len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(Frame {
            channel,
            kind,
            payload,
        }))
    }
}

/// A frame whose header arrived before all of its payload: what arrived so far, in a
/// payload the size the header gave, for the rest to be read into it directly.
#[derive(Debug)]
pub struct Partial {
    pub channel: u32,
    pub kind: Kind,
    /// The payload's bytes so far; its capacity is the whole payload's length.
    pub payload: Vec<u8>,
    /// The payload's length.
    pub len: usize,
}

impl Partial {
    /// The bytes still to come.
    pub fn missing(&self) -> usize {
        self.len - self.payload.len()
    }

    /// The frame, once its payload is complete.
    pub fn into_frame(self) -> Frame {
        Frame {
            channel: self.channel,
            kind: self.kind,
            payload: self.payload,
        }
    }
}

impl Decoder {
    /// When the buffer holds only the start of a frame whose payload is at least `large`
    /// bytes: that frame, taken out of the buffer (which is left empty), so the rest of
    /// its payload can be read into it without passing through the buffer. Errors as
    /// [`Decoder::next_frame`].
    pub fn take_partial(&mut self, large: usize) -> Result<Option<Partial>, FrameError> {
        let Some((channel, kind, len)) = self.head()? else {
            return Ok(None);
        };
        let pending = &self.buf[self.start..];
        if len < large || pending.len() >= HEADER_LEN + len {
            return Ok(None);
        }
        let mut payload = Vec::with_capacity(len);
        payload.extend_from_slice(&pending[HEADER_LEN..]);
        self.buf.clear();
        self.start = 0;
        Ok(Some(Partial {
            channel,
            kind,
            payload,
            len,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of a frame as a sender writes them.
    fn encode(frame: &Frame) -> Result<Vec<u8>, FrameError> {
        let header = header(frame.channel, frame.kind, frame.payload.len())?;
        Ok([&header[..], &frame.payload].concat())
    }

    #[test]
    fn round_trips_in_pieces() {
        let frames = [
            Frame::new(0, Kind::Hello, b"{}".to_vec()),
            Frame::new(7, Kind::Stdout, vec![1u8; 70_000]),
            Frame::new(u32::MAX, Kind::Done, Vec::new()),
        ];
        let bytes: Vec<u8> = frames.iter().flat_map(|f| encode(f).unwrap()).collect();
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        for chunk in bytes.chunks(1000) {
            decoder.feed(chunk);
            while let Some(frame) = decoder.next_frame().unwrap() {
                out.push(frame);
            }
        }
        assert_eq!(out, frames);
    }

    #[test]
    fn decodes_a_burst_fed_at_once_and_a_header_before_its_payload() {
        let frames: Vec<Frame> = (0..5)
            .map(|i| Frame::new(i, Kind::Data, vec![i as u8; 300 * (i as usize + 1)]))
            .collect();
        let mut bytes: Vec<u8> = frames.iter().flat_map(|f| encode(f).unwrap()).collect();
        let last = Frame::new(9, Kind::End, b"tail".to_vec());
        let split = HEADER_LEN + 1;
        let mut tail = header(last.channel, last.kind, last.payload.len())
            .unwrap()
            .to_vec();
        tail.extend_from_slice(&last.payload);
        bytes.extend_from_slice(&tail[..split]);
        let mut decoder = Decoder::default();
        decoder.feed(&bytes);
        let mut out = Vec::new();
        while let Some(frame) = decoder.next_frame().unwrap() {
            out.push(frame);
        }
        assert_eq!(out, frames);
        decoder.feed(&tail[split..]);
        assert_eq!(decoder.next_frame().unwrap(), Some(last));
        assert_eq!(decoder.next_frame().unwrap(), None);
    }

    #[test]
    fn a_large_frame_begun_is_taken_out_for_its_rest_to_be_read_into_it() {
        let frame = Frame::new(
            3,
            Kind::Data,
            (0..100_000u32).map(|i| i as u8).collect::<Vec<_>>(),
        );
        let bytes = encode(&frame).unwrap();
        let mut decoder = Decoder::default();
        decoder.feed(&bytes[..HEADER_LEN - 1]);
        assert!(
            decoder.take_partial(1024).unwrap().is_none(),
            "no header yet"
        );
        decoder.feed(&bytes[HEADER_LEN - 1..5000]);
        assert!(
            decoder.take_partial(200_000).unwrap().is_none(),
            "not a large frame"
        );
        let mut partial = decoder.take_partial(1024).unwrap().unwrap();
        assert_eq!(
            (partial.channel, partial.kind, partial.len),
            (3, Kind::Data, 100_000)
        );
        assert_eq!(partial.missing(), 100_000 - (5000 - HEADER_LEN));
        partial.payload.extend_from_slice(&bytes[5000..]);
        assert_eq!(partial.missing(), 0);
        assert_eq!(partial.into_frame(), frame);
        // The buffer was left empty: the next frame decodes on its own.
        let next = Frame::new(4, Kind::End, Vec::new());
        decoder.feed(&encode(&next).unwrap());
        assert_eq!(decoder.next_frame().unwrap(), Some(next));
        // A complete frame is not taken out.
        decoder.feed(&bytes);
        assert!(decoder.take_partial(1024).unwrap().is_none());
        assert_eq!(decoder.next_frame().unwrap(), Some(frame));
    }

    #[test]
    fn refuses_oversized_and_unknown_frames_from_the_header() {
        let mut decoder = Decoder::default();
        let mut header = ((MAX_PAYLOAD + 1) as u32).to_be_bytes().to_vec();
        header.extend_from_slice(&[0, 0, 0, 1, 2]);
        decoder.feed(&header);
        assert_eq!(
            decoder.next_frame(),
            Err(FrameError::TooLarge(MAX_PAYLOAD + 1))
        );
        let mut decoder = Decoder::default();
        decoder.feed(&[0, 0, 0, 0, 0, 0, 0, 1, 200]);
        assert_eq!(decoder.next_frame(), Err(FrameError::UnknownKind(200)));
        assert!(encode(&Frame::new(1, Kind::Data, vec![0u8; MAX_PAYLOAD + 1])).is_err());
    }
}
