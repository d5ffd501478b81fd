//! How the timeline's entries reach the store: the activity book of the process's
//! journal (`crate::journal`), writing in batches and trimming each sandbox's timeline
//! to `[activity]`'s bounds.

use sandboxd_core::activity::{ActivityRecord, Keeping};
use sandboxd_store::{Store, StoreError};

use crate::journal::Book;

/// Counter of timeline entries dropped because the writer was behind or failed.
pub const ACTIVITY_DROPPED: &str = "sandboxd_activity_dropped_total";

/// The activity timeline's book.
#[derive(Debug, Clone)]
pub(crate) struct ActivityBook {
    pub(crate) store: Store,
    pub(crate) keeping: Keeping,
}

impl Book for ActivityBook {
    type Entry = ActivityRecord;
    const DROPPED: &'static str = ACTIVITY_DROPPED;

    /// A tenth of the entries kept, at most 200: a timeline overshoots its bound by
    /// that much at most between trims.
    fn trim_every(&self) -> u32 {
        (self.keeping.entries / 10).clamp(1, 200)
    }

    fn sandbox_of(entry: &ActivityRecord) -> &str {
        &entry.sandbox_id
    }

    async fn write(&self, batch: &[ActivityRecord]) -> Result<(), StoreError> {
        self.store.write_activity(batch).await
    }

    async fn trim(&self, sandbox_id: &str) -> Result<(), StoreError> {
        self.store
            .trim_activity(sandbox_id, self.keeping.entries, self.keeping.bytes)
            .await
            .map(drop)
    }

    async fn count_dropped(
        &self,
        sandbox_id: &str,
        organization_id: &str,
        count: u64,
    ) -> Result<(), StoreError> {
        self.store
            .count_activity_dropped(sandbox_id, organization_id, count)
            .await
    }
}
