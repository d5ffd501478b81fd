//! A terminal session recorded as an asciicast v2 stream: a header line, then one JSON
//! array a line per event, `[seconds, "o" | "i" | "r" | "m", data]` (output, input,
//! a resize as `"COLSxROWS"`, a marker). What the terminal prints is the sandbox's: it
//! is decoded as UTF-8 across chunks, the values of the sandbox's secrets are masked
//! even when a value comes split over several chunks, and the recording stops at its
//! bound with a marker saying so.
//!
//! `CastWriter` turns the session's events into the lines to append; `SecretCarry` is
//! the masking that holds back what could be the start of a secret.

use serde_json::json;

use crate::activity::Masker;
use crate::utf8_stream::Utf8Stream;

/// The marker written where a recording stops at its bound.
pub const CUT_MARKER: &str = "recording cut: the session's bound was reached";

/// Masks a stream of text whose secret values may come split between pieces: what
/// could be the start of a secret is held back until the next piece tells.
#[derive(Debug, Default)]
pub struct SecretCarry {
    masker: Masker,
    carry: String,
}

impl SecretCarry {
    pub fn new(masker: Masker) -> Self {
        Self {
            masker,
            carry: String::new(),
        }
    }

    /// The masked text that can be let out once `piece` came.
    pub fn push(&mut self, piece: &str) -> String {
        if self.masker.is_empty() {
            return piece.to_owned();
        }
        let mut text = std::mem::take(&mut self.carry);
        text.push_str(piece);
        let mut cut = text.len() - self.masker.partial_suffix(&text);
        // A whole secret across the cut goes with what is held back.
        while let Some(start) = self.masker.straddling(&text, cut) {
            cut = start;
        }
        self.carry = text.split_off(cut);
        self.masker.mask(&text)
    }

    /// What was held back, masked: the stream ended.
    pub fn finish(&mut self) -> String {
        let text = std::mem::take(&mut self.carry);
        self.masker.mask(&text)
    }
}

/// The lines of one session's recording, within `max_bytes`.
#[derive(Debug)]
pub struct CastWriter {
    output: Utf8Stream,
    masked: SecretCarry,
    written: u64,
    max_bytes: u64,
    cut: bool,
}

impl CastWriter {
    pub fn new(masker: Masker, max_bytes: u64) -> Self {
        Self {
            output: Utf8Stream::default(),
            masked: SecretCarry::new(masker),
            written: 0,
            max_bytes,
            cut: false,
        }
    }

    /// The header line of a session of `cols`×`rows` started at `timestamp` (epoch
    /// seconds).
    pub fn header(&mut self, cols: u16, rows: u16, timestamp: i64) -> String {
        let line = format!(
            "{}\n",
            json!({"version": 2, "width": cols, "height": rows, "timestamp": timestamp})
        );
        self.written += line.len() as u64;
        line
    }

    /// Whether it stopped at its bound.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// The line of what the terminal printed at `seconds`, if any is let out now.
    pub fn output(&mut self, seconds: f64, bytes: &[u8]) -> String {
        if self.cut {
            return String::new();
        }
        let text = self.output.push(bytes);
        let shown = self.masked.push(&text);
        self.event(seconds, "o", &shown)
    }

    /// The line of what was typed at `seconds` (masked, not held back).
    pub fn input(&mut self, seconds: f64, bytes: &[u8]) -> String {
        if self.cut {
            return String::new();
        }
        let text = self.masked.masker.mask(&String::from_utf8_lossy(bytes));
        self.event(seconds, "i", &text)
    }

    /// The line of a resize at `seconds`.
    pub fn resize(&mut self, seconds: f64, cols: u16, rows: u16) -> String {
        if self.cut {
            return String::new();
        }
        self.event(seconds, "r", &format!("{cols}x{rows}"))
    }

    /// The line of what was held back, at the session's end.
    pub fn finish(&mut self, seconds: f64) -> String {
        if self.cut {
            return String::new();
        }
        let mut rest = self.output.finish();
        rest = self.masked.push(&rest);
        rest.push_str(&self.masked.finish());
        self.event(seconds, "o", &rest)
    }

    fn event(&mut self, seconds: f64, kind: &str, data: &str) -> String {
        if data.is_empty() {
            return String::new();
        }
        let seconds = (seconds.max(0.0) * 1_000_000.0).round() / 1_000_000.0;
        let line = format!("{}\n", json!([seconds, kind, data]));
        if self.written + line.len() as u64 > self.max_bytes {
            self.cut = true;
            return format!("{}\n", json!([seconds, "m", CUT_MARKER]));
        }
        self.written += line.len() as u64;
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masker() -> Masker {
        Masker::new(["hunter2-secret", "cdxy1234"])
    }

    #[test]
    fn a_secret_split_over_pieces_is_masked_whole() {
        let mut carry = SecretCarry::new(masker());
        let mut out = carry.push("login: hun");
        out.push_str(&carry.push("ter2-sec"));
        out.push_str(&carry.push("ret ok\n"));
        out.push_str(&carry.finish());
        assert_eq!(out, "login: *** ok\n");
        assert!(!out.contains("hun"), "no piece of it is let out early");
        // Text that only looks like a start is let out once it is known not to be one.
        let mut carry = SecretCarry::new(masker());
        assert_eq!(carry.push("a hunt"), "a ");
        assert_eq!(carry.push("ing party"), "hunting party");
        assert_eq!(carry.finish(), "");
    }

    #[test]
    fn a_whole_secret_across_the_hold_is_held_with_it() {
        // The end "cd" could start "cdxy", and the cut before it would fall inside the
        // whole "abcd": that is held back too, and masked with what comes next.
        let mut carry = SecretCarry::new(Masker::new(["abcd", "cdxy"]));
        assert_eq!(carry.push("x abcd"), "x ");
        assert_eq!(carry.push("zz"), "***zz");
        assert_eq!(carry.finish(), "");
    }

    #[test]
    fn a_cast_has_its_header_events_and_stops_at_its_bound() {
        let mut cast = CastWriter::new(masker(), 200);
        let header: serde_json::Value =
            serde_json::from_str(&cast.header(80, 24, 1_765_000_000)).unwrap_or_default();
        assert_eq!(
            header,
            json!({"version": 2, "width": 80, "height": 24, "timestamp": 1_765_000_000})
        );
        assert_eq!(
            cast.output(0.5, b"$ echo \xc3"),
            "[0.5,\"o\",\"$ echo \"]\n"
        );
        assert_eq!(
            cast.output(0.75, b"\xa9\r\n"),
            "[0.75,\"o\",\"\u{e9}\\r\\n\"]\n"
        );
        assert_eq!(cast.resize(1.0, 100, 30), "[1.0,\"r\",\"100x30\"]\n");
        assert_eq!(
            cast.input(1.5, b"hunter2-secret\r"),
            "[1.5,\"i\",\"***\\r\"]\n"
        );
        let marker = cast.output(2.0, &[b'x'; 200]);
        assert_eq!(marker, format!("[2.0,\"m\",\"{CUT_MARKER}\"]\n"));
        assert!(cast.is_cut());
        assert_eq!(cast.output(3.0, b"more"), "");
        assert_eq!(cast.finish(4.0), "");
    }

    #[test]
    fn what_is_held_back_comes_out_at_the_end() {
        let mut cast = CastWriter::new(masker(), 1 << 20);
        assert_eq!(
            cast.output(0.1, b"ends with hunter"),
            "[0.1,\"o\",\"ends with \"]\n"
        );
        assert_eq!(cast.finish(0.2), "[0.2,\"o\",\"hunter\"]\n");
    }
}
