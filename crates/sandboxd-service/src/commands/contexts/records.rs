//! The records a context's driver writes to its standard output: each one an ASCII
//! record separator, one line of JSON and a newline. During a run the driver writes
//! its output as it is printed (`{"id", "stream", "text"}`) and what it displays
//! (`{"id", "display": {MIME type: value}}`), then the run's reply (`{"id", "result",
//! "bundle", "error", "count"}`). Everything here comes from inside the sandbox: lines
//! are bounded, results are bounded in number and bytes, and what does not parse is
//! passed over.

use std::collections::BTreeMap;

use sandboxd_core::api::{ContextError, ContextResult};
use serde::Deserialize;
use serde_json::Value;

const RECORD: u8 = 0x1e;
/// The longest line kept; the driver's own are far shorter (its output comes in
/// pieces of at most 4096 characters, its results are cut at 1 MiB).
const MAX_LINE: usize = 8 * 1024 * 1024;

/// At most this many results are kept of one run, and this many bytes of them.
const MAX_RESULTS: usize = 100;
const MAX_RESULT_BYTES: usize = 32 * 1024 * 1024;
/// The longest format name kept (a MIME type).
const MAX_FORMAT_NAME: usize = 128;

/// A value in each of its formats, by MIME type.
pub type Formats = BTreeMap<String, Value>;

/// A piece of a run's output, in the order printed or displayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutput {
    Stdout(String),
    Stderr(String),
    /// Something the run displayed (not its final value).
    Display(Formats),
}

/// How a run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub(super) struct Reply {
    pub result: Option<String>,
    /// The final value in each format it has.
    #[serde(default)]
    pub bundle: Option<Formats>,
    pub error: Option<ContextError>,
    #[serde(default)]
    pub count: u64,
}

/// Formats whose names are plausible MIME types; `None` when none is.
pub(super) fn formats(mut bundle: Formats) -> Option<Formats> {
    bundle.retain(|name, _| {
        !name.is_empty()
            && name.len() <= MAX_FORMAT_NAME
            && name.bytes().all(|b| b.is_ascii_graphic())
    });
    (!bundle.is_empty()).then_some(bundle)
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
    display: Option<Formats>,
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
        if let Some(display) = line.display {
            return formats(display).map(|shown| Record::Output(RunOutput::Display(shown)));
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
/// stream is cut, nothing more of it is kept. Results are kept up to
/// [`MAX_RESULTS`] and [`MAX_RESULT_BYTES`].
#[derive(Debug, Default)]
pub(super) struct Gathered {
    pub stdout: String,
    pub stderr: String,
    pub results: Vec<ContextResult>,
    pub truncated: bool,
    cut: [bool; 2],
    result_bytes: usize,
}

impl Gathered {
    /// Keeps a result within the bounds; says whether it was kept.
    pub fn add_result(&mut self, data: Formats, is_main_result: bool) -> bool {
        let bytes = serde_json::to_vec(&data).map_or(usize::MAX, |b| b.len());
        if self.results.len() >= MAX_RESULTS
            || bytes > MAX_RESULT_BYTES.saturating_sub(self.result_bytes)
        {
            self.truncated = true;
            return false;
        }
        self.result_bytes += bytes;
        self.results.push(ContextResult {
            data,
            is_main_result,
        });
        true
    }

    pub fn add(&mut self, output: RunOutput, max: usize) {
        let (into, cut, text) = match output {
            RunOutput::Display(data) => {
                self.add_result(data, false);
                return;
            }
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
                bundle: None,
                error: None,
                count: 3
            })]
        );
    }

    #[test]
    fn reads_what_a_run_displays_keeping_only_plausible_format_names() {
        let mut records = Records::of_run(4);
        let read = records.push(
            b"\x1e{\"id\":4,\"display\":{\"image/png\":\"iVBO\",\"bad name\":1,\"\":2}}\n\
              \x1e{\"id\":4,\"display\":{\"x y\":1}}\n\
              \x1e{\"id\":4,\"result\":\"1\",\"bundle\":{\"text/plain\":\"1\"},\"count\":1}\n",
        );
        assert_eq!(
            read.len(),
            2,
            "a display with no plausible format is passed over"
        );
        assert_eq!(
            read[0],
            Record::Output(RunOutput::Display(Formats::from([(
                "image/png".to_owned(),
                Value::from("iVBO")
            )])))
        );
        let Record::Reply(reply) = &read[1] else {
            panic!("a reply")
        };
        assert_eq!(reply.bundle.as_ref().map(Formats::len), Some(1));
    }

    #[test]
    fn results_are_kept_up_to_their_number_and_bytes() {
        let mut gathered = Gathered::default();
        let one =
            |size: usize| Formats::from([("text/plain".to_owned(), Value::from("x".repeat(size)))]);
        for _ in 0..MAX_RESULTS {
            assert!(gathered.add_result(one(1), false));
        }
        assert!(!gathered.add_result(one(1), true));
        assert!(gathered.truncated);
        let mut gathered = Gathered::default();
        assert!(gathered.add_result(one(MAX_RESULT_BYTES / 2), false));
        assert!(!gathered.add_result(one(MAX_RESULT_BYTES / 2), false));
        assert!(gathered.add_result(one(10), true));
        assert_eq!(gathered.results.len(), 2);
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
