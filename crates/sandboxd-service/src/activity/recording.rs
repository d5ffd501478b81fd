//! Recording a terminal session: its events become asciicast lines
//! (`sandboxd_core::recording::CastWriter`: masked, bounded), gathered and appended to
//! the store in chunks by tasks of their own, so a terminal that prints fast never
//! waits for the database. A chunk goes when 64 KiB are gathered, when two seconds
//! passed since the last, and at the session's end.

use std::time::{Duration, Instant};

use sandboxd_core::recording::CastWriter;
use sandboxd_store::Store;

/// Gathered lines are appended once they reach this size.
const FLUSH_AT: usize = 64 * 1024;
/// ... or once this long passed since the last chunk.
const FLUSH_EVERY: Duration = Duration::from_secs(2);

/// One session's recording.
#[derive(Debug)]
pub(crate) struct Recording {
    store: Store,
    /// The sandbox's id and the terminal's.
    key: (String, String),
    cast: CastWriter,
    gathered: String,
    seq: u32,
    started: Instant,
    flushed: Instant,
    record_input: bool,
}

impl Recording {
    pub(crate) fn start(
        store: Store,
        key: (String, String),
        mut cast: CastWriter,
        (cols, rows): (u16, u16),
        record_input: bool,
    ) -> Self {
        let header = cast.header(cols, rows, crate::now_ms() / 1000);
        let mut recording = Self {
            store,
            key,
            cast,
            gathered: String::new(),
            seq: 0,
            started: Instant::now(),
            flushed: Instant::now(),
            record_input,
        };
        recording.add(header);
        recording
    }

    fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    pub(crate) fn output(&mut self, bytes: &[u8]) {
        let line = self.cast.output(self.seconds(), bytes);
        self.add(line);
    }

    pub(crate) fn input(&mut self, bytes: &[u8]) {
        if self.record_input {
            let line = self.cast.input(self.seconds(), bytes);
            self.add(line);
        }
    }

    pub(crate) fn resize(&mut self, cols: u16, rows: u16) {
        let line = self.cast.resize(self.seconds(), cols, rows);
        self.add(line);
    }

    /// Writes what is left: the session ended.
    pub(crate) fn finish(&mut self) {
        let line = self.cast.finish(self.seconds());
        self.gathered.push_str(&line);
        self.flush();
    }

    fn add(&mut self, line: String) {
        if line.is_empty() {
            return;
        }
        self.gathered.push_str(&line);
        if self.gathered.len() >= FLUSH_AT || self.flushed.elapsed() >= FLUSH_EVERY {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.flushed = Instant::now();
        if self.gathered.is_empty() || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let body = std::mem::take(&mut self.gathered);
        let seq = self.seq;
        self.seq += 1;
        let (store, key) = (self.store.clone(), self.key.clone());
        tokio::spawn(async move {
            if let Err(error) = store.append_recording((&key.0, &key.1), seq, &body).await {
                tracing::warn!(sandbox_id = %key.0, error = %sandboxd_core::error::chain(&error), "could not write a part of a terminal's recording");
            }
        });
    }
}
