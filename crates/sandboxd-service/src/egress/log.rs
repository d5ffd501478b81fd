//! Writing the egress log: gates hand their entries to one writer per process, which
//! writes them to the store in order, in batches, and keeps each sandbox's log to its
//! newest entries. Handing over never waits: when the writer is behind by a full queue,
//! or by its organization's share of it, the entry is dropped and counted, so a flood
//! of connections slows nothing and one organization's flood drops no other's.
//!
//! `Recorder` is that writer: a bounded queue shared between organizations by
//! `QueueShares`, each batch written in one transaction.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use sandboxd_core::egress_log::{EgressRecord, KEPT_PER_SANDBOX, QueueShares};
use sandboxd_store::Store;
use tokio::sync::mpsc;

/// Counter of log entries dropped because the writer was behind.
pub const EGRESS_LOG_DROPPED: &str = "sandboxd_egress_log_dropped_total";

/// Entries waiting for the writer, at most.
const QUEUE: usize = 4096;
/// Entries written in one transaction, at most.
const BATCH: usize = 256;
/// Writes of one sandbox between trims of its log.
const TRIM_EVERY: u32 = 1000;
/// Sandboxes whose writes are counted toward their next trim; past that the counts
/// start again (a sandbox then waits a little longer for its trim).
const COUNTED_SANDBOXES: usize = 4096;

/// The process's egress log writer, started by the first entry.
#[derive(Debug)]
pub(crate) struct Recorder {
    store: Store,
    queue: OnceLock<mpsc::Sender<Queued>>,
    shares: Arc<Mutex<QueueShares>>,
}

/// An entry waiting for the writer, and the organization whose share it holds.
type Queued = (String, EgressRecord);

impl Recorder {
    pub(crate) fn new(store: Store) -> Self {
        Self {
            store,
            queue: OnceLock::new(),
            shares: Arc::default(),
        }
    }

    /// Hands an entry of a sandbox of `organization_id` to the writer (called within
    /// the runtime).
    pub(crate) fn record(&self, organization_id: &str, record: EgressRecord) {
        let queue = self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            tokio::spawn(write(self.store.clone(), receiver, self.shares.clone()));
            sender
        });
        let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
        if !shares.take(organization_id) {
            metrics::counter!(EGRESS_LOG_DROPPED).increment(1);
            return;
        }
        if queue
            .try_send((organization_id.to_owned(), record))
            .is_err()
        {
            shares.give_back(organization_id);
            metrics::counter!(EGRESS_LOG_DROPPED).increment(1);
        }
    }
}

async fn write(store: Store, mut queue: mpsc::Receiver<Queued>, shares: Arc<Mutex<QueueShares>>) {
    let mut since_trim: HashMap<String, u32> = HashMap::new();
    let mut batch = Vec::with_capacity(BATCH);
    let mut queued: Vec<Queued> = Vec::with_capacity(BATCH);
    while queue.recv_many(&mut queued, BATCH).await > 0 {
        // An organization's share is held until its entries are written: a slow store
        // counts against whoever floods it.
        let organizations: Vec<String> = queued
            .drain(..)
            .map(|(organization_id, record)| {
                batch.push(record);
                organization_id
            })
            .collect();
        let written = store.write_egress_log(&batch).await;
        {
            let mut shares = shares.lock().unwrap_or_else(|e| e.into_inner());
            for organization_id in &organizations {
                shares.give_back(organization_id);
            }
        }
        if let Err(error) = written {
            tracing::warn!(error = %sandboxd_core::error::chain(&error), entries = batch.len(), "could not write egress log entries");
            metrics::counter!(EGRESS_LOG_DROPPED).increment(batch.len() as u64);
        }
        if since_trim.len() > COUNTED_SANDBOXES {
            since_trim.clear();
        }
        for record in batch.drain(..) {
            let count = since_trim.entry(record.sandbox_id.clone()).or_default();
            *count += 1;
            if *count < TRIM_EVERY {
                continue;
            }
            *count = 0;
            if let Err(error) = store
                .trim_egress_log(&record.sandbox_id, KEPT_PER_SANDBOX)
                .await
            {
                tracing::warn!(error = %sandboxd_core::error::chain(&error), "could not trim an egress log");
            }
        }
    }
}
