//! The callers of recently seen API keys, kept in memory so a request's key check does
//! not read the database each time. Every change that can narrow what a key may do
//! (a key revoked, a member's role or grants changed, a member removed) goes through
//! this store and empties the cache after it is committed, so it takes effect at once;
//! an entry is also dropped after [`TTL`], and a key's own expiry is checked at each use.
//! Unknown keys are never cached: a key made a moment ago works at once, and guessing
//! keys fills no memory.
//!
//! An answer read before such a change is never cached after it: each carries the count
//! of changes seen when its read began.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use sandboxd_core::model::Principal;

/// How long a cached caller is trusted without reading the database again.
pub const TTL: Duration = Duration::from_secs(2);
/// Entries kept at most; the cache is emptied when it is full.
const MAX_ENTRIES: usize = 4096;

/// Callers by key hash.
#[derive(Debug, Default)]
pub struct AuthCache {
    /// Counts the changes that emptied the cache. A lookup notes it before reading the
    /// database and caches its answer under that count, so an answer read before a
    /// change committed is never served after it.
    generation: AtomicU64,
    /// Set while changes made elsewhere (another replica) could go unseen: nothing is
    /// served from the cache or put into it.
    suspended: AtomicBool,
    entries: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug)]
struct Entry {
    principal: Principal,
    /// The key's own expiry, milliseconds since the epoch.
    expires_at: Option<i64>,
    generation: u64,
    fetched: Instant,
}

impl AuthCache {
    /// The count to pass to [`AuthCache::insert`] for a database read starting now.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The cached caller of a key hash, when still valid at `now_ms`.
    pub fn get(&self, key_hash: &str, now_ms: i64) -> Option<Principal> {
        if self.suspended.load(Ordering::Acquire) {
            return None;
        }
        let current = self.generation();
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = entries.get(key_hash)?;
        let valid = entry.generation == current
            && entry.fetched.elapsed() < TTL
            && entry.expires_at.is_none_or(|at| at > now_ms);
        valid.then(|| entry.principal.clone())
    }

    /// Remembers the caller a database read that started at `generation` found.
    pub fn insert(
        &self,
        key_hash: String,
        principal: Principal,
        expires_at: Option<i64>,
        generation: u64,
    ) {
        if self.suspended.load(Ordering::Acquire) {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            key_hash,
            Entry {
                principal,
                expires_at,
                generation,
                fetched: Instant::now(),
            },
        );
    }

    /// Forgets every caller; called after a change to keys or members is committed.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    pub fn is_suspended(&self) -> bool {
        self.suspended.load(Ordering::Acquire)
    }

    /// Stops serving and caching callers until [`AuthCache::resume`].
    pub fn suspend(&self) {
        self.suspended.store(true, Ordering::Release);
        self.invalidate();
    }

    /// Serves and caches again, starting empty.
    pub fn resume(&self) {
        self.invalidate();
        self.suspended.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandboxd_core::access::Permissions;
    use sandboxd_core::model::Role;

    fn principal() -> Principal {
        Principal {
            user_id: "u".into(),
            organization_id: "o".into(),
            role: Role::Owner,
            key_id: "k".into(),
            permissions: Permissions::from_text(""),
            key_scopes: None,
            key_expires_at: None,
        }
    }

    #[test]
    fn an_entry_serves_until_invalidated() {
        let cache = AuthCache::default();
        let generation = cache.generation();
        cache.insert("h".into(), principal(), None, generation);
        assert_eq!(cache.get("h", 0), Some(principal()));
        assert_eq!(cache.get("other", 0), None);
        cache.invalidate();
        assert_eq!(cache.get("h", 0), None);
    }

    #[test]
    fn an_answer_read_before_a_change_is_not_served_after_it() {
        let cache = AuthCache::default();
        let generation = cache.generation();
        // The change commits while the read is under way...
        cache.invalidate();
        // ...and the read's answer arrives after it.
        cache.insert("h".into(), principal(), None, generation);
        assert_eq!(cache.get("h", 0), None);
    }

    #[test]
    fn an_expired_key_is_not_served() {
        let cache = AuthCache::default();
        cache.insert("h".into(), principal(), Some(1_000), cache.generation());
        assert!(cache.get("h", 999).is_some());
        assert_eq!(cache.get("h", 1_000), None);
    }

    #[test]
    fn a_suspended_cache_neither_serves_nor_keeps() {
        let cache = AuthCache::default();
        cache.insert("h".into(), principal(), None, cache.generation());
        cache.suspend();
        assert_eq!(cache.get("h", 0), None);
        let generation = cache.generation();
        cache.insert("h".into(), principal(), None, generation);
        cache.resume();
        assert_eq!(cache.get("h", 0), None, "kept while suspended");
        cache.insert("h".into(), principal(), None, cache.generation());
        assert_eq!(cache.get("h", 0), Some(principal()));
    }

    #[test]
    fn the_cache_stays_bounded() {
        let cache = AuthCache::default();
        for i in 0..MAX_ENTRIES + 10 {
            cache.insert(format!("h{i}"), principal(), None, cache.generation());
        }
        let len = cache.entries.lock().unwrap().len();
        assert!(len <= MAX_ENTRIES, "{len}");
    }
}
