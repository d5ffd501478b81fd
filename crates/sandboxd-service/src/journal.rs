//! A per-process writer of per-sandbox logs (the egress log, the activity timeline):
//! callers hand it entries, and it writes them to the store in order, in batches, and
//! trims each sandbox's log now and then. Handing over never waits: when the writer is
//! behind by a full queue, or by its organization's share of it, the entry is dropped
//! and counted, so a flood slows nothing and one organization's flood drops no other's.
//!
//! `Journal` is that writer, over a `Book` that says how its entries are written,
//! trimmed and counted when dropped. `page_of` makes a page of what a log's read gave.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use sandboxd_core::egress_log::QueueShares;
use sandboxd_store::StoreError;
use tokio::sync::mpsc;

/// Entries waiting for the writer, at most.
const QUEUE: usize = 4096;
/// Entries written in one transaction, at most.
const BATCH: usize = 256;
/// Sandboxes whose writes are counted toward their next trim; past that the counts
/// start again (a sandbox then waits a little longer for its trim).
const COUNTED_SANDBOXES: usize = 4096;

/// One kind of log: how its entries reach the store.
pub(crate) trait Book: Clone + Send + Sync + 'static {
    type Entry: Send + 'static;
    /// The counter of entries dropped because the writer was behind or failed.
    const DROPPED: &'static str;
    /// Writes of one sandbox between trims of its log.
    fn trim_every(&self) -> u32;

    fn sandbox_of(entry: &Self::Entry) -> &str;
    fn write(&self, batch: &[Self::Entry]) -> impl Future<Output = Result<(), StoreError>> + Send;
    fn trim(&self, sandbox_id: &str) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Counts `count` entries of a sandbox that were never written.
    fn count_dropped(
        &self,
        sandbox_id: &str,
        organization_id: &str,
        count: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// An entry waiting for the writer, and the organization whose share it holds.
type Queued<E> = (String, E);

/// Entries dropped before the writer took them: sandbox → (organization, count).
type Unwritten = Arc<Mutex<HashMap<String, (String, u64)>>>;

/// The process's writer of one book, started by its first entry.
#[derive(Debug)]
pub(crate) struct Journal<B: Book> {
    book: B,
    queue: OnceLock<mpsc::Sender<Queued<B::Entry>>>,
    shares: Arc<Mutex<QueueShares>>,
    unwritten: Unwritten,
}

impl<B: Book> Journal<B> {
    pub(crate) fn new(book: B) -> Self {
        Self {
            book,
            queue: OnceLock::new(),
            shares: Arc::default(),
            unwritten: Arc::default(),
        }
    }

    /// Hands an entry of a sandbox of `organization_id` to the writer (called within
    /// the runtime).
    pub(crate) fn record(&self, organization_id: &str, entry: B::Entry) {
        let queue = self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(QUEUE);
            tokio::spawn(write(
                self.book.clone(),
                receiver,
                self.shares.clone(),
                self.unwritten.clone(),
            ));
            sender
        });
        let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
        if !shares.take(organization_id) {
            drop(shares);
            self.dropped(organization_id, &entry);
            return;
        }
        if let Err(refused) = queue.try_send((organization_id.to_owned(), entry)) {
            shares.give_back(organization_id);
            drop(shares);
            let (_, entry) = refused.into_inner();
            self.dropped(organization_id, &entry);
        }
    }

    fn dropped(&self, organization_id: &str, entry: &B::Entry) {
        metrics::counter!(B::DROPPED).increment(1);
        let mut unwritten = self.unwritten.lock().unwrap_or_else(|e| e.into_inner());
        if unwritten.len() >= COUNTED_SANDBOXES {
            return;
        }
        unwritten
            .entry(B::sandbox_of(entry).to_owned())
            .or_insert_with(|| (organization_id.to_owned(), 0))
            .1 += 1;
    }
}

async fn write<B: Book>(
    book: B,
    mut queue: mpsc::Receiver<Queued<B::Entry>>,
    shares: Arc<Mutex<QueueShares>>,
    unwritten: Unwritten,
) {
    let mut since_trim: HashMap<String, u32> = HashMap::new();
    let mut batch = Vec::with_capacity(BATCH);
    let mut queued: Vec<Queued<B::Entry>> = Vec::with_capacity(BATCH);
    while queue.recv_many(&mut queued, BATCH).await > 0 {
        // An organization's share is held until its entries are written: a slow store
        // counts against whoever floods it.
        let organizations: Vec<String> = queued
            .drain(..)
            .map(|(organization_id, entry)| {
                batch.push(entry);
                organization_id
            })
            .collect();
        let written = book.write(&batch).await;
        {
            let mut shares = shares.lock().unwrap_or_else(|e| e.into_inner());
            for organization_id in &organizations {
                shares.give_back(organization_id);
            }
        }
        if let Err(error) = written {
            tracing::warn!(error = %sandboxd_core::error::chain(&error), entries = batch.len(), "could not write log entries");
            metrics::counter!(B::DROPPED).increment(batch.len() as u64);
        }
        let counts: Vec<(String, (String, u64))> = {
            let mut unwritten = unwritten.lock().unwrap_or_else(|e| e.into_inner());
            unwritten.drain().collect()
        };
        for (sandbox_id, (organization_id, count)) in counts {
            if let Err(error) = book
                .count_dropped(&sandbox_id, &organization_id, count)
                .await
            {
                tracing::warn!(error = %sandboxd_core::error::chain(&error), "could not count dropped log entries");
            }
        }
        if since_trim.len() > COUNTED_SANDBOXES {
            since_trim.clear();
        }
        for entry in batch.drain(..) {
            let count = since_trim
                .entry(B::sandbox_of(&entry).to_owned())
                .or_default();
            *count += 1;
            if *count < book.trim_every() {
                continue;
            }
            *count = 0;
            if let Err(error) = book.trim(B::sandbox_of(&entry)).await {
                tracing::warn!(error = %sandboxd_core::error::chain(&error), "could not trim a log");
            }
        }
    }
}

/// A page of a log read with one entry more than `limit` (that one tells whether more
/// follow): the entries, the cursor to read on from (`after` when there are none), and
/// whether more follow.
pub(crate) fn page_of<T>(
    mut entries: Vec<T>,
    limit: u32,
    after: Option<&String>,
    position: impl Fn(&T) -> &String,
) -> (Vec<T>, Option<String>, bool) {
    let more = entries.len() > limit as usize;
    entries.truncate(limit as usize);
    let next = entries.last().map(&position).or(after).cloned();
    (entries, next, more)
}
