//! Bounds on what a remote server's engine may send back. Whatever answers on a remote
//! server's engine socket is the tenant's to choose, and bollard reads a JSON answer
//! whole and a stream a line or a frame at a time before anything sandboxd wrote sees
//! it; so the bytes of each answer are counted as they arrive on the channel, below
//! bollard, and the channel fails once an answer passes its bound:
//! - a JSON answer: [`AnswerCaps::json`] bytes in all;
//! - the event stream and a pull's progress: [`AnswerCaps::stream`] bytes per call (the
//!   event stream is subscribed to again, after a pause, when it is cut);
//! - an attached exec's output: frames of [`AnswerCaps::frame`] bytes at most (what
//!   sandboxd keeps of it is bounded where it is read);
//! - an archive: streamed, capped and deadlined by its reader (the transfer cap).
//!
//! The requests on a channel are seen as they are written: HTTP/1.1 without pipelining,
//! so a request line written after an answer was read starts the next request.

/// The bounds of one remote engine's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerCaps {
    pub json: u64,
    pub stream: u64,
    pub frame: u32,
}

impl Default for AnswerCaps {
    fn default() -> Self {
        Self {
            json: 4 << 20,
            stream: 16 << 20,
            frame: 1 << 20,
        }
    }
}

/// What kind of answer a request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Json,
    Stream,
    Attached,
    Archive,
}

/// The kind of the request whose first bytes are `written`, when they are a request
/// line (`METHOD /path HTTP/1.1`).
fn request_kind(written: &[u8]) -> Option<Kind> {
    let line = written.split(|b| *b == b'\r').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    let method = parts.next()?;
    let target = parts.next()?;
    if !parts.next()?.starts_with("HTTP/1.") || !target.starts_with('/') {
        return None;
    }
    if !method.bytes().all(|b| b.is_ascii_uppercase()) || method.is_empty() {
        return None;
    }
    let path = target.split('?').next().unwrap_or_default();
    // `/v1.41/containers/json` → `/containers/json`.
    let path = match path.strip_prefix("/v") {
        Some(rest) => rest.find('/').map_or(path, |at| &rest[at..]),
        None => path,
    };
    let kind = match (method, path) {
        ("GET", "/events") | ("POST", "/images/create") => Kind::Stream,
        ("POST", p) if p.starts_with("/exec/") && p.ends_with("/start") => Kind::Attached,
        ("POST", p) if p.starts_with("/containers/") && p.ends_with("/attach") => Kind::Attached,
        ("GET", p) if p.starts_with("/containers/") && p.ends_with("/logs") => Kind::Attached,
        ("GET" | "HEAD", p) if p.starts_with("/containers/") && p.ends_with("/archive") => {
            Kind::Archive
        }
        _ => Kind::Json,
    };
    Some(kind)
}

/// An answer past its bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the remote engine's answer passed its bound ({what})")]
pub struct OverBound {
    pub what: &'static str,
}

/// Where the reader of an attached stream is: in the HTTP head (how many bytes of the
/// blank line that ends it were seen), in a frame's 8-byte header, or in its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frames {
    Head { matched: u8, seen: u64 },
    Header { have: u8, size: [u8; 4] },
    Content { left: u64 },
}

/// Counts one channel's answers against the bounds of their requests.
#[derive(Debug)]
pub struct AnswerGuard {
    caps: AnswerCaps,
    kind: Kind,
    read: u64,
    reading: bool,
    frames: Frames,
    /// The first bytes of the answer, until its status code is known.
    status_line: Vec<u8>,
    status: Option<u16>,
    /// The connection became a raw stream (an attached exec): nothing written on it
    /// from now on is a request, whatever it looks like (a command's input).
    upgraded: bool,
}

/// Bytes of `HTTP/1.1 200`.
const STATUS_LINE: usize = 12;

/// The status code of an answer's first bytes (`HTTP/1.1 101 …`).
fn status_of(line: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(line.get(..STATUS_LINE)?).ok()?;
    let code = text.strip_prefix("HTTP/1.")?.get(2..5)?;
    code.parse().ok()
}

impl AnswerGuard {
    pub fn new(caps: AnswerCaps) -> Self {
        Self {
            caps,
            kind: Kind::Json,
            read: 0,
            reading: true,
            frames: Frames::Head {
                matched: 0,
                seen: 0,
            },
            status_line: Vec::with_capacity(STATUS_LINE),
            status: None,
            upgraded: false,
        }
    }

    /// Bytes about to be written on the channel.
    pub fn wrote(&mut self, bytes: &[u8]) {
        if !self.reading || self.upgraded {
            return;
        }
        if let Some(kind) = request_kind(bytes) {
            self.kind = kind;
            self.read = 0;
            self.reading = false;
            self.frames = Frames::Head {
                matched: 0,
                seen: 0,
            };
            self.status_line.clear();
            self.status = None;
        }
    }

    /// Learns the answer's status from its first bytes: only a successful answer is
    /// streamed (bollard reads any other whole, as an error's text), so any other is
    /// held to the bound of a JSON answer.
    fn learn_status(&mut self, bytes: &[u8]) {
        if self.status.is_some() || self.upgraded {
            return;
        }
        let room = STATUS_LINE - self.status_line.len();
        self.status_line
            .extend_from_slice(&bytes[..room.min(bytes.len())]);
        if self.status_line.len() < STATUS_LINE {
            return;
        }
        let status = status_of(&self.status_line);
        self.status = Some(status.unwrap_or(0));
        match (self.kind, status) {
            (Kind::Attached, Some(101 | 200)) => self.upgraded = true,
            (Kind::Stream | Kind::Archive, Some(200)) | (Kind::Json, _) => {}
            _ => self.kind = Kind::Json,
        }
    }

    /// Bytes read from the channel; an error once the answer passes its bound.
    pub fn read(&mut self, bytes: &[u8]) -> Result<(), OverBound> {
        self.reading = true;
        self.read = self.read.saturating_add(bytes.len() as u64);
        self.learn_status(bytes);
        match self.kind {
            Kind::Json if self.read > self.caps.json => Err(OverBound {
                what: "a JSON answer",
            }),
            Kind::Stream if self.read > self.caps.stream => Err(OverBound { what: "a stream" }),
            Kind::Attached => self.frames(bytes),
            _ => Ok(()),
        }
    }

    fn frames(&mut self, mut bytes: &[u8]) -> Result<(), OverBound> {
        const END: &[u8; 4] = b"\r\n\r\n";
        while !bytes.is_empty() {
            match &mut self.frames {
                Frames::Head { matched, seen } => {
                    let byte = bytes[0];
                    bytes = &bytes[1..];
                    *seen += 1;
                    // A head longer than a JSON answer is not one an engine sends.
                    if *seen > self.caps.json {
                        return Err(OverBound {
                            what: "a stream's head",
                        });
                    }
                    *matched = if byte == END[*matched as usize] {
                        *matched + 1
                    } else if byte == b'\r' {
                        1
                    } else {
                        0
                    };
                    if *matched == 4 {
                        self.frames = Frames::Header {
                            have: 0,
                            size: [0; 4],
                        };
                    }
                }
                Frames::Header { have, size } => {
                    if *have >= 4 {
                        size[*have as usize - 4] = bytes[0];
                    }
                    *have += 1;
                    bytes = &bytes[1..];
                    if *have == 8 {
                        let length = u32::from_be_bytes(*size);
                        if length > self.caps.frame {
                            return Err(OverBound {
                                what: "an output frame",
                            });
                        }
                        self.frames = Frames::Content {
                            left: u64::from(length),
                        };
                        if length == 0 {
                            self.frames = Frames::Header {
                                have: 0,
                                size: [0; 4],
                            };
                        }
                    }
                }
                Frames::Content { left } => {
                    let take = (*left).min(bytes.len() as u64);
                    *left -= take;
                    bytes = &bytes[take as usize..];
                    if *left == 0 {
                        self.frames = Frames::Header {
                            have: 0,
                            size: [0; 4],
                        };
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> AnswerCaps {
        AnswerCaps {
            json: 100,
            stream: 1000,
            frame: 16,
        }
    }

    #[test]
    fn requests_are_told_apart_by_their_line() {
        let kind = |line: &str| request_kind(line.as_bytes());
        assert_eq!(
            kind("GET /v1.41/containers/json?all=1 HTTP/1.1\r\n"),
            Some(Kind::Json)
        );
        assert_eq!(kind("GET /version HTTP/1.1\r\nHost: x"), Some(Kind::Json));
        assert_eq!(
            kind("GET /v1.41/events?filters=x HTTP/1.1\r\n"),
            Some(Kind::Stream)
        );
        assert_eq!(
            kind("POST /v1.41/images/create?fromImage=a HTTP/1.1\r\n"),
            Some(Kind::Stream)
        );
        assert_eq!(
            kind("POST /v1.41/exec/abc/start HTTP/1.1\r\n"),
            Some(Kind::Attached)
        );
        assert_eq!(
            kind("GET /v1.41/containers/c/archive?path=/x HTTP/1.1\r\n"),
            Some(Kind::Archive)
        );
        assert_eq!(
            kind("PUT /v1.41/containers/c/archive?path=/x HTTP/1.1\r\n"),
            Some(Kind::Json)
        );
        assert_eq!(kind("ustar\0\0 GET / HTTP/1.1"), None);
        assert_eq!(kind("{\"Tty\":false}"), None);
        assert_eq!(kind(""), None);
    }

    #[test]
    fn a_json_answer_is_cut_past_its_bound_and_the_next_request_starts_afresh() {
        let mut guard = AnswerGuard::new(caps());
        guard.wrote(b"GET /v1.41/info HTTP/1.1\r\n\r\n");
        assert!(guard.read(&[b'x'; 60]).is_ok());
        assert!(guard.read(&[b'x'; 40]).is_ok());
        assert!(guard.read(b"x").is_err());
        let mut guard = AnswerGuard::new(caps());
        guard.wrote(b"GET /v1.41/info HTTP/1.1\r\n\r\n");
        guard.read(&[b'x'; 90]).unwrap();
        guard.wrote(b"GET /v1.41/version HTTP/1.1\r\n\r\n");
        guard.read(&[b'x'; 90]).unwrap();
        // A body written after part of the answer was read is not a new request.
        guard.wrote(b"more of the body");
        assert!(guard.read(&[b'x'; 20]).is_err());
    }

    #[test]
    fn streams_have_a_larger_bound_and_archives_their_readers() {
        let ok = b"HTTP/1.1 200 OK\r\n\r\n";
        let mut guard = AnswerGuard::new(caps());
        guard.wrote(b"GET /v1.41/events HTTP/1.1\r\n\r\n");
        guard.read(ok).unwrap();
        assert!(guard.read(&[b'x'; 1000 - 19]).is_ok());
        assert!(guard.read(b"x").is_err());
        let mut guard = AnswerGuard::new(caps());
        guard.wrote(b"GET /v1.41/containers/c/archive?path=/a HTTP/1.1\r\n\r\n");
        guard.read(ok).unwrap();
        for _ in 0..100 {
            guard.read(&[b'x'; 1000]).unwrap();
        }
    }

    #[test]
    fn an_attached_stream_is_held_to_its_frame_size_in_any_chunking() {
        let mut stream = b"HTTP/1.1 101 UPGRADED\r\nContent-Type: x\r\n\r\n".to_vec();
        for _ in 0..50 {
            stream.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 16]);
            stream.extend_from_slice(&[b'o'; 16]);
            stream.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0]);
        }
        for step in [1, 3, 8, 100, 10_000] {
            let mut guard = AnswerGuard::new(caps());
            guard.wrote(b"POST /v1.41/exec/e/start HTTP/1.1\r\n\r\n");
            for chunk in stream.chunks(step) {
                guard.read(chunk).unwrap();
            }
            let mut big = stream.clone();
            big.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 17]);
            let mut guard = AnswerGuard::new(caps());
            guard.wrote(b"POST /v1.41/exec/e/start HTTP/1.1\r\n\r\n");
            let failed = big.chunks(step).map(|c| guard.read(c)).find(Result::is_err);
            assert_eq!(
                failed,
                Some(Err(OverBound {
                    what: "an output frame"
                })),
                "step {step}"
            );
        }
    }

    #[test]
    fn an_error_answer_is_held_to_the_json_bound_whatever_was_asked() {
        for request in [
            &b"GET /v1.41/containers/c/archive?path=/a HTTP/1.1\r\n\r\n"[..],
            b"POST /v1.41/exec/e/start HTTP/1.1\r\n\r\n",
            b"GET /v1.41/events HTTP/1.1\r\n\r\n",
        ] {
            let mut guard = AnswerGuard::new(caps());
            guard.wrote(request);
            guard
                .read(b"HTTP/1.1 500 Internal Server Error\r\n")
                .unwrap();
            let flood = guard.read(&[b'x'; 100]);
            assert!(flood.is_err(), "{}", String::from_utf8_lossy(request));
        }
    }

    #[test]
    fn what_is_written_on_an_upgraded_stream_is_never_a_request() {
        let mut guard = AnswerGuard::new(caps());
        guard.wrote(b"POST /v1.41/exec/e/start HTTP/1.1\r\n\r\n");
        guard.read(b"HTTP/1.1 101 UPGRADED\r\n\r\n").unwrap();
        // A command's input that looks like a request of an unbounded kind.
        guard.wrote(b"GET /v1.41/containers/x/archive HTTP/1.1\r\n\r\n");
        let big = guard.read(&[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xf0]);
        assert!(big.is_err(), "still held to its frames");
    }

    #[test]
    fn an_attached_head_that_never_ends_is_cut() {
        let mut guard = AnswerGuard::new(caps());
        guard.wrote(b"POST /v1.41/exec/e/start HTTP/1.1\r\n\r\n");
        assert!(guard.read(&[b'h'; 100]).is_ok());
        assert!(guard.read(b"h").is_err());
    }
}
