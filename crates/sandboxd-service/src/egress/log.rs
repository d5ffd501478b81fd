//! Writing the egress log: gates hand their entries to the process's journal
//! (`crate::journal`), which writes them in order, in batches, and keeps each sandbox's
//! log to its newest entries. An entry dropped there is counted; the sandbox's own
//! allowance already counts what it held back in the next entry (`unlogged`).
//!
//! `EgressBook` is the egress log's book; `Recorder` its journal.

use sandboxd_core::egress_log::{EgressRecord, KEPT_PER_SANDBOX};
use sandboxd_store::{Store, StoreError};

use crate::journal::{Book, Journal};

/// Counter of log entries dropped because the writer was behind.
pub const EGRESS_LOG_DROPPED: &str = "sandboxd_egress_log_dropped_total";

/// The process's egress log writer.
pub(crate) type Recorder = Journal<EgressBook>;

/// How the egress log's entries reach the store.
#[derive(Debug, Clone)]
pub(crate) struct EgressBook(pub(crate) Store);

impl Book for EgressBook {
    type Entry = EgressRecord;
    const DROPPED: &'static str = EGRESS_LOG_DROPPED;

    fn trim_every(&self) -> u32 {
        1000
    }

    fn sandbox_of(entry: &EgressRecord) -> &str {
        &entry.sandbox_id
    }

    async fn write(&self, batch: &[EgressRecord]) -> Result<(), StoreError> {
        self.0.write_egress_log(batch).await
    }

    async fn trim(&self, sandbox_id: &str) -> Result<(), StoreError> {
        self.0
            .trim_egress_log(sandbox_id, KEPT_PER_SANDBOX)
            .await
            .map(drop)
    }

    async fn count_dropped(&self, _: &str, _: &str, _: u64) -> Result<(), StoreError> {
        Ok(())
    }
}
