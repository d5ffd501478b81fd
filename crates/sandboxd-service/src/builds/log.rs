//! A build's log as it is written: lines of the builder and of each step's output (split
//! at line ends, each cut to `MAX_LOG_LINE`), kept in the store in batches so any
//! replica reads them, and the last few kept at hand for the error of a failed step.

use std::collections::VecDeque;

use sandboxd_contracts::OutputStream;
use sandboxd_core::template_build::{LogLine, MAX_LOG_LINE, bounded_line};
use sandboxd_store::Store;
use tracing::warn;

use crate::now_ms;

/// The lines of a failed step its error repeats.
const TAIL: usize = 10;

pub(super) struct BuildLog {
    store: Store,
    written: tokio::sync::watch::Sender<u64>,
    build_id: String,
    seq: i64,
    pending: Vec<LogLine>,
    tail: VecDeque<String>,
    /// The unfinished last line of stdout and of stderr.
    partial: [Vec<u8>; 2],
}

impl BuildLog {
    pub(super) fn new(
        store: Store,
        written: tokio::sync::watch::Sender<u64>,
        build_id: String,
    ) -> Self {
        Self {
            store,
            written,
            build_id,
            seq: 0,
            pending: Vec::new(),
            tail: VecDeque::new(),
            partial: [Vec::new(), Vec::new()],
        }
    }

    /// A line of the builder's own, or of a step.
    pub(super) fn line(&mut self, step: i64, stream: &str, text: &str) {
        let line = bounded_line(text);
        if stream != "system" {
            if self.tail.len() == TAIL {
                self.tail.pop_front();
            }
            self.tail.push_back(line.clone());
        }
        self.pending.push(LogLine {
            time: now_ms(),
            step,
            stream: stream.into(),
            line,
        });
    }

    /// A chunk of a step's output: each finished line goes in.
    pub(super) fn output(&mut self, step: i64, stream: OutputStream, chunk: &[u8]) {
        let (index, name) = match stream {
            OutputStream::Stdout => (0, "stdout"),
            OutputStream::Stderr => (1, "stderr"),
        };
        let mut buffer = std::mem::take(&mut self.partial[index]);
        buffer.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(end) = buffer[start..].iter().position(|&b| b == b'\n') {
            let text = String::from_utf8_lossy(&buffer[start..start + end]);
            self.line(step, name, text.trim_end_matches('\r'));
            start += end + 1;
        }
        let mut rest = buffer.split_off(start);
        if rest.len() > MAX_LOG_LINE {
            // A line without an end is cut into lines of the most kept.
            let text = String::from_utf8_lossy(&rest).into_owned();
            self.line(step, name, &text);
            rest.clear();
        }
        self.partial[index] = rest;
    }

    /// The end of a step's output: unfinished lines go in.
    pub(super) fn end_output(&mut self, step: i64) {
        for (index, name) in [(0, "stdout"), (1, "stderr")] {
            let rest = std::mem::take(&mut self.partial[index]);
            if !rest.is_empty() {
                self.line(step, name, &String::from_utf8_lossy(&rest));
            }
        }
    }

    /// Forgets the last lines: a new step begins.
    pub(super) fn clear_tail(&mut self) {
        self.tail.clear();
    }

    /// The last lines of output, for a failed step's error.
    pub(super) fn tail(&mut self) -> Vec<String> {
        self.tail.drain(..).collect()
    }

    /// Writes what is pending to the store.
    pub(super) async fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let lines = std::mem::take(&mut self.pending);
        match self
            .store
            .append_build_log(&self.build_id, self.seq, &lines)
            .await
        {
            Ok(next) => {
                self.seq = next;
                self.written.send_modify(|n| *n = n.wrapping_add(1));
            }
            Err(error) => {
                warn!(build_id = %self.build_id, error = %sandboxd_core::error::chain(&error), "could not write a build's log")
            }
        }
    }
}
