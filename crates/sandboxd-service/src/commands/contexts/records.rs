//! The records a context's driver writes to its standard output: each one an ASCII
//! record separator, one line of JSON and a newline. During a run the driver writes
//! its output as it is printed (`{"id", "stream", "text"}`), then the run's reply
//! (`{"id", "result", "error", "count"}`). Everything here comes from inside the
//! sandbox: lines are bounded, and what does not parse is passed over.

use sandboxd_core::api::ContextError;
use serde::Deserialize;

const RECORD: u8 = 0x1e;
/// The longest line kept; the driver's own are far shorter (its output comes in
/// pieces of at most 4096 characters, its results are cut at 1 MiB).
const MAX_LINE: usize = 8 * 1024 * 1024;

/// A piece of a run's output, in the order printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutput {
    Stdout(String),
    Stderr(String),
}

/// How a run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub(super) struct Reply {
    pub result: Option<String>,
    pub error: Option<ContextError>,
    #[serde(default)]
    pub count: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Record {
    Output(RunOutput),
    Reply(Reply),
}

#[derive(Deserialize)]
struct Line {
    id: u64,
    stream: Option<String>,
    text: Option<String>,
    #[serde(flatten)]
    reply: Reply,
}

/// Reads the records of one run from the driver's output, in pieces as they come.
#[derive(Debug)]
pub(super) struct Records {
    run: u64,
    line: Vec<u8>,
    /// The line being read passed `MAX_LINE`: the rest of it is dropped.
    overlong: bool,
}

impl Records {
    pub fn of_run(run: u64) -> Self {
        Self {
            run,
            line: Vec::new(),
            overlong: false,
        }
    }

    /// The records of this run that `bytes` completes.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<Record> {
        let mut records = Vec::new();
        while let Some(end) = bytes.iter().position(|b| *b == b'\n') {
            self.take(&bytes[..end]);
            if !std::mem::take(&mut self.overlong) {
                records.extend(self.parse());
            }
            self.line.clear();
            bytes = &bytes[end + 1..];
        }
        self.take(bytes);
        records
    }

    fn take(&mut self, bytes: &[u8]) {
        if self.overlong || self.line.len() + bytes.len() > MAX_LINE {
            self.overlong = true;
            self.line.clear();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    /// The record of the line read, when it is one of this run's. A record starts at
    /// the line's last separator (JSON escapes any inside it): what a program wrote
    /// without a newline before it is not part of it.
    fn parse(&self) -> Option<Record> {
        let start = self.line.iter().rposition(|b| *b == RECORD)? + 1;
        let line: Line = serde_json::from_slice(&self.line[start..]).ok()?;
        if line.id != self.run {
            return None;
        }
        Some(match (line.stream.as_deref(), line.text) {
            (Some("stdout"), Some(text)) => Record::Output(RunOutput::Stdout(text)),
            (Some("stderr"), Some(text)) => Record::Output(RunOutput::Stderr(text)),
            (Some(_), _) => return None,
            (None, _) => Record::Reply(line.reply),
        })
    }
}

/// A run's output gathered for one answer, each stream up to `max` bytes: once a
/// stream is cut, nothing more of it is kept.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    pub stdout: String,
    pub stderr: String,
    pub truncated: bool,
    cut: [bool; 2],
}

impl Gathered {
    pub fn add(&mut self, output: RunOutput, max: usize) {
        let (into, cut, text) = match output {
            RunOutput::Stdout(text) => (&mut self.stdout, &mut self.cut[0], text),
            RunOutput::Stderr(text) => (&mut self.stderr, &mut self.cut[1], text),
        };
        if *cut {
            return;
        }
        let room = max.saturating_sub(into.len());
        if text.len() <= room {
            into.push_str(&text);
            return;
        }
        let mut end = room;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        into.push_str(&text[..end]);
        *cut = true;
        self.truncated = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(text: &str) -> Record {
        Record::Output(RunOutput::Stdout(text.into()))
    }

    #[test]
    fn reads_a_runs_output_then_its_reply_in_pieces() {
        let mut records = Records::of_run(7);
        assert!(records.push(b"\x1e{\"id\":7,\"stream\":\"std").is_empty());
        assert_eq!(
            records.push(
                b"out\",\"text\":\"a\\n\"}\n\x1e{\"id\":7,\"stream\":\"stderr\",\"text\":\"b\"}\n"
            ),
            [out("a\n"), Record::Output(RunOutput::Stderr("b".into()))]
        );
        assert_eq!(
            records.push(b"\x1e{\"id\":7,\"result\":\"42\",\"error\":null,\"count\":3}\n"),
            [Record::Reply(Reply {
                result: Some("42".into()),
                error: None,
                count: 3
            })]
        );
    }

    #[test]
    fn passes_over_other_runs_and_what_is_not_a_record() {
        let mut records = Records::of_run(2);
        let read = records.push(
            b"noise\n\x1e{\"id\":1,\"stream\":\"stdout\",\"text\":\"old\"}\n\
              raw \x1e{\"id\":2,\"stream\":\"stdout\",\"text\":\"x\"}\n\
              \x1e{\"id\":2,\"stream\":\"fd9\",\"text\":\"x\"}\n\
              \x1e{\"id\":2,\"stre\n\x1e not json\n",
        );
        assert_eq!(read, [out("x")], "a record after raw output on its line");
    }

    #[test]
    fn an_overlong_line_is_dropped_and_reading_goes_on() {
        let mut records = Records::of_run(1);
        let chunk = vec![b'y'; 1024 * 1024];
        for _ in 0..9 {
            assert!(records.push(&chunk).is_empty());
        }
        assert!(records.line.len() <= MAX_LINE);
        assert_eq!(
            records.push(b"\x1e{\"id\":1,\"stream\":\"stdout\",\"text\":\"z\"}\n\x1e{\"id\":1,\"stream\":\"stdout\",\"text\":\"w\"}\n"),
            [out("w")],
            "the rest of the overlong line is dropped, the next one read"
        );
    }

    #[test]
    fn gathers_each_stream_up_to_its_bound_on_a_character() {
        let mut gathered = Gathered::default();
        gathered.add(RunOutput::Stdout("ab".into()), 4);
        gathered.add(RunOutput::Stderr("e".into()), 4);
        assert!(!gathered.truncated);
        gathered.add(RunOutput::Stdout("cé".into()), 4);
        assert_eq!(
            (gathered.stdout.as_str(), gathered.truncated),
            ("abc", true)
        );
        gathered.add(RunOutput::Stdout("d".into()), 4);
        assert_eq!(gathered.stdout, "abc");
        assert_eq!(gathered.stderr, "e");
    }
}
