//! Sandbox rows kept in memory, so the requests that name a sandbox (a command, a file,
//! `sandbox.one`) find its row without reading the database each time. Every write to a
//! row goes through this store and, once committed, updates the cached row the way the
//! write changed the database (an activity touch) or drops it (everything else).
//!
//! A row read from the database is cached only when no write to any sandbox was
//! committed while it was being read: writes count themselves, a read notes the count
//! before it starts and caches its row only if the count is unchanged. A write that
//! commits during a read and counts itself after the row was cached finds that row and
//! updates or drops it. Rows are dropped after [`TTL`] as well.
//!
//! Rows are kept for one second.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sandboxd_core::model::{Sandbox, SandboxStatus};

/// How long a cached row is trusted without reading the database again.
pub const TTL: Duration = Duration::from_secs(1);
/// Rows kept at most; the cache is emptied when it is full.
const MAX_ROWS: usize = 4096;

#[derive(Debug, Default)]
pub struct RowCache(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// Writes committed so far.
    writes: u64,
    /// Set while changes made elsewhere (another replica) could go unseen.
    suspended: bool,
    rows: HashMap<String, (Sandbox, Instant)>,
}

/// Caches `row` as of now, unless the cache is suspended.
fn keep(state: &mut State, row: &Sandbox) {
    if state.suspended {
        return;
    }
    if state.rows.len() >= MAX_ROWS {
        state.rows.clear();
    }
    state
        .rows
        .insert(row.sandbox_id.clone(), (row.clone(), Instant::now()));
}

impl RowCache {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached row of a sandbox, while fresh.
    pub fn get(&self, sandbox_id: &str) -> Option<Sandbox> {
        let state = self.lock();
        if state.suspended {
            return None;
        }
        let (row, cached) = state.rows.get(sandbox_id)?;
        (cached.elapsed() < TTL).then(|| row.clone())
    }

    /// The count to pass to [`RowCache::insert`] for a database read starting now.
    pub fn writes(&self) -> u64 {
        self.lock().writes
    }

    /// Caches a row read from the database, unless a write committed since `writes`.
    pub fn insert(&self, row: &Sandbox, writes: u64) {
        let mut state = self.lock();
        if state.writes != writes {
            return;
        }
        keep(&mut state, row);
    }

    /// After a committed activity touch: what the database did to the row, done to the
    /// cached one.
    pub fn touched(&self, sandbox_id: &str, now: i64) {
        let mut state = self.lock();
        state.writes += 1;
        if let Some((row, _)) = state.rows.get_mut(sandbox_id)
            && row.status == SandboxStatus::Running
        {
            row.last_activity_at = Some(now);
            if !row.fixed_timeout {
                row.expires_at = Some(now + row.timeout_ms);
            }
        }
    }

    /// After a committed insert of a whole row: cached as written.
    pub fn written(&self, row: &Sandbox) {
        let mut state = self.lock();
        state.writes += 1;
        keep(&mut state, row);
    }

    /// After any other committed write to a sandbox's row.
    pub fn changed(&self, sandbox_id: &str) {
        let mut state = self.lock();
        state.writes += 1;
        state.rows.remove(sandbox_id);
    }

    pub fn is_suspended(&self) -> bool {
        self.lock().suspended
    }

    /// Stops serving and caching rows until [`RowCache::resume`].
    pub fn suspend(&self) {
        let mut state = self.lock();
        state.suspended = true;
        state.writes += 1;
        state.rows.clear();
    }

    /// Serves and caches again, starting empty.
    pub fn resume(&self) {
        let mut state = self.lock();
        state.suspended = false;
        state.writes += 1;
        state.rows.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandboxd_core::model::NetworkMode;

    fn row(status: SandboxStatus) -> Sandbox {
        Sandbox {
            sandbox_id: "s".into(),
            name: "n".into(),
            organization_id: "o".into(),
            project_id: "p".into(),
            environment_id: "e".into(),
            server_id: None,
            image: "i".into(),
            template: None,
            container_id: Some("c".into()),
            status,
            cpu: 1.0,
            memory_mb: 512,
            pids_limit: 256,
            timeout_ms: 1_000,
            network_mode: NetworkMode::Isolated,
            workdir: "/home/user".into(),
            user: None,
            runtime: None,
            created_at: 0,
            expires_at: Some(1_000),
            last_activity_at: Some(0),
            killed_at: None,
            env_per_exec: false,
            labels: Default::default(),
            egress: Vec::new(),
            auto_pause: None,
            fixed_timeout: false,
            paused_timeout_ms: sandboxd_core::limits::DEFAULT_PAUSED_TIMEOUT_MS,
            paused_at: None,
            hibernated_bytes: None,
            volumes: Vec::new(),
        }
    }

    #[test]
    fn a_row_is_served_until_changed() {
        let cache = RowCache::default();
        cache.insert(&row(SandboxStatus::Running), cache.writes());
        assert_eq!(cache.get("s"), Some(row(SandboxStatus::Running)));
        cache.changed("s");
        assert_eq!(cache.get("s"), None);
    }

    #[test]
    fn a_row_read_while_a_write_committed_is_not_cached() {
        let cache = RowCache::default();
        let writes = cache.writes();
        cache.changed("other");
        cache.insert(&row(SandboxStatus::Running), writes);
        assert_eq!(cache.get("s"), None);
    }

    #[test]
    fn a_touch_moves_the_expiry_of_a_running_row_only() {
        let cache = RowCache::default();
        cache.insert(&row(SandboxStatus::Running), cache.writes());
        cache.touched("s", 5_000);
        let touched = cache.get("s").unwrap();
        assert_eq!(
            (touched.last_activity_at, touched.expires_at),
            (Some(5_000), Some(6_000))
        );

        let cache = RowCache::default();
        cache.insert(&row(SandboxStatus::Killed), cache.writes());
        cache.touched("s", 5_000);
        assert_eq!(cache.get("s"), Some(row(SandboxStatus::Killed)));
    }

    #[test]
    fn a_suspended_cache_neither_serves_nor_keeps() {
        let cache = RowCache::default();
        cache.insert(&row(SandboxStatus::Running), cache.writes());
        cache.suspend();
        assert_eq!(cache.get("s"), None);
        cache.insert(&row(SandboxStatus::Running), cache.writes());
        cache.resume();
        assert_eq!(cache.get("s"), None, "kept while suspended");
        cache.insert(&row(SandboxStatus::Running), cache.writes());
        assert!(cache.get("s").is_some());
    }

    #[test]
    fn a_row_written_whole_is_served_and_ends_reads_begun_before() {
        let cache = RowCache::default();
        let before = cache.writes();
        cache.written(&row(SandboxStatus::Running));
        assert!(cache.get("s").is_some());
        // A read that began before the insert keeps nothing of its own.
        cache.changed("s");
        cache.insert(&row(SandboxStatus::Killed), before);
        assert_eq!(cache.get("s"), None);
        cache.suspend();
        cache.written(&row(SandboxStatus::Running));
        assert_eq!(cache.get("s"), None, "kept while suspended");
    }

    #[test]
    fn the_cache_stays_bounded() {
        let cache = RowCache::default();
        for i in 0..MAX_ROWS + 10 {
            let mut r = row(SandboxStatus::Running);
            r.sandbox_id = format!("s{i}");
            cache.insert(&r, cache.writes());
        }
        assert!(cache.lock().rows.len() <= MAX_ROWS);
    }
}
