//! Pools kept for demand: a shape of create no pool is configured for (another image,
//! `internet` or `allowlist`) gets a pool of its own while creates of it keep coming.
//! Its size is the number of its creates in a recent window, at most `per_pool`; all
//! such pools together hold at most `budget` members, given to the most asked-for
//! first. Without creates for a window a pool shrinks to nothing.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// How far pools kept for demand may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemandBounds {
    /// Members of all pools kept for demand together; 0 turns them off.
    pub budget: usize,
    /// Members of one such pool.
    pub per_pool: usize,
    /// How far back creates count.
    pub window: Duration,
}

impl DemandBounds {
    /// No pool is kept for demand.
    pub const OFF: Self = Self {
        budget: 0,
        per_pool: 0,
        window: Duration::ZERO,
    };

    pub fn is_off(&self) -> bool {
        self.budget == 0 || self.per_pool == 0 || self.window.is_zero()
    }
}

impl Default for DemandBounds {
    fn default() -> Self {
        Self {
            budget: 8,
            per_pool: 2,
            window: Duration::from_secs(60),
        }
    }
}

/// At most this many shapes are remembered at once; creates of others while that many
/// are recent are not counted.
pub const MAX_SHAPES: usize = 1024;

/// The recent creates of each shape (`K`: a pool's key), as milliseconds since the
/// epoch; at most `per_pool` kept per shape (more would not make its pool bigger).
#[derive(Debug, Clone)]
pub struct DemandLog<K> {
    bounds: DemandBounds,
    seen: BTreeMap<K, VecDeque<i64>>,
}

impl<K: Ord + Clone> DemandLog<K> {
    pub fn new(bounds: DemandBounds) -> Self {
        Self {
            bounds,
            seen: BTreeMap::new(),
        }
    }

    /// Counts a create of `key`'s shape at `now`.
    pub fn note(&mut self, key: &K, now: i64) {
        if self.bounds.is_off() {
            return;
        }
        self.expire(now);
        if !self.seen.contains_key(key) && self.seen.len() >= MAX_SHAPES {
            return;
        }
        let times = self.seen.entry(key.clone()).or_default();
        times.push_back(now);
        while times.len() > self.bounds.per_pool {
            times.pop_front();
        }
    }

    /// Forgets `key`'s creates (its members cannot be made: no pool until it is asked
    /// for again).
    pub fn forget(&mut self, key: &K) {
        self.seen.remove(key);
    }

    /// The size of every pool kept for demand at `now` (none of size 0).
    pub fn sizes(&mut self, now: i64) -> BTreeMap<K, usize> {
        self.expire(now);
        let wanted = self
            .seen
            .iter()
            .map(|(key, times)| Wanted {
                key: key.clone(),
                creates: times.len(),
                last: times.back().copied().unwrap_or_default(),
            })
            .collect();
        demand_sizes(wanted, self.bounds)
    }

    fn expire(&mut self, now: i64) {
        let oldest = now.saturating_sub(self.bounds.window.as_millis() as i64);
        for times in self.seen.values_mut() {
            while times.front().is_some_and(|t| *t < oldest) {
                times.pop_front();
            }
        }
        self.seen.retain(|_, times| !times.is_empty());
    }
}

/// A shape's demand: its creates in the window and when the last came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted<K> {
    pub key: K,
    pub creates: usize,
    pub last: i64,
}

/// The pools' sizes: each as many members as it had creates, at most `per_pool`; the
/// budget goes to the most created first, then the most recently.
pub fn demand_sizes<K: Ord>(
    mut wanted: Vec<Wanted<K>>,
    bounds: DemandBounds,
) -> BTreeMap<K, usize> {
    if bounds.is_off() {
        return BTreeMap::new();
    }
    wanted.sort_by(|a, b| {
        b.creates
            .cmp(&a.creates)
            .then(b.last.cmp(&a.last))
            .then(a.key.cmp(&b.key))
    });
    let mut left = bounds.budget;
    let mut sizes = BTreeMap::new();
    for shape in wanted {
        let size = shape.creates.min(bounds.per_pool).min(left);
        if size == 0 {
            continue;
        }
        left -= size;
        sizes.insert(shape.key, size);
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: DemandBounds = DemandBounds {
        budget: 5,
        per_pool: 2,
        window: Duration::from_secs(60),
    };

    #[test]
    fn a_pool_is_as_big_as_its_recent_creates_up_to_its_bound() {
        let mut log = DemandLog::new(BOUNDS);
        log.note(&"a", 1_000);
        assert_eq!(log.sizes(1_000), BTreeMap::from([("a", 1)]));
        log.note(&"a", 2_000);
        log.note(&"a", 3_000);
        assert_eq!(log.sizes(3_000), BTreeMap::from([("a", 2)]));
    }

    #[test]
    fn without_creates_for_a_window_a_pool_is_gone() {
        let mut log = DemandLog::new(BOUNDS);
        log.note(&"a", 0);
        log.note(&"a", 30_000);
        assert_eq!(log.sizes(60_001), BTreeMap::from([("a", 1)]));
        assert_eq!(log.sizes(90_001), BTreeMap::new());
    }

    #[test]
    fn the_budget_goes_to_the_most_asked_for_then_the_latest() {
        let wanted = vec![
            Wanted {
                key: "old",
                creates: 1,
                last: 1,
            },
            Wanted {
                key: "busy",
                creates: 9,
                last: 0,
            },
            Wanted {
                key: "new",
                creates: 1,
                last: 5,
            },
            Wanted {
                key: "two",
                creates: 2,
                last: 0,
            },
        ];
        assert_eq!(
            demand_sizes(wanted, BOUNDS),
            BTreeMap::from([("busy", 2), ("two", 2), ("new", 1)])
        );
    }

    #[test]
    fn forgotten_or_off_means_no_pool() {
        let mut log = DemandLog::new(BOUNDS);
        log.note(&"a", 0);
        log.forget(&"a");
        assert!(log.sizes(0).is_empty());
        let mut off = DemandLog::new(DemandBounds::OFF);
        off.note(&"a", 0);
        assert!(off.sizes(0).is_empty());
    }

    #[test]
    fn the_shapes_remembered_are_bounded() {
        let mut log = DemandLog::new(DemandBounds {
            budget: usize::MAX,
            ..BOUNDS
        });
        for n in 0..MAX_SHAPES + 10 {
            log.note(&n, 0);
        }
        assert_eq!(log.sizes(0).len(), MAX_SHAPES);
        // Once they are old, others count again.
        log.note(&(MAX_SHAPES + 20), 61_000);
        assert_eq!(log.sizes(61_000).len(), 1);
    }
}
