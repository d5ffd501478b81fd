//! Pools kept for demand: a shape of create no pool is configured for (another image,
//! `internet` or `allowlist`) gets a pool of its own while creates of it keep coming.
//! Its size is the number of its creates in a recent window, at most `per_pool`; all
//! such pools together hold at most `budget` members. The budget is shared between
//! tenants a member at a time: every tenant gets its first member before any tenant
//! its second, and so on, so that one tenant creating many shapes cannot push the
//! others' creates to cold. Without creates for a window a pool shrinks to nothing.
//!
//! `DemandLog` keeps each shape's recent creates by each tenant: at most `per_pool` per
//! pair, `MAX_PAIRS` pairs, and `MAX_SHAPES_PER_TENANT` shapes of one tenant.
//! `demand_sizes` hands the budget out a member at a time to each tenant in turn, each
//! tenant's most created shape first. `DemandBounds` is the configuration's
//! `[warm_on_demand]`.

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

/// At most this many pairs of a shape and a tenant are remembered at once; creates of
/// others while that many are recent are not counted.
pub const MAX_PAIRS: usize = 1024;

/// At most this many shapes are remembered per tenant, so that one tenant's many shapes
/// cannot fill the log and leave the others' creates uncounted.
pub const MAX_SHAPES_PER_TENANT: usize = 64;

/// The recent creates of each shape (`K`: a pool's key) by each tenant (`T`), as
/// milliseconds since the epoch; at most `per_pool` kept per pair (more would not make
/// its pool bigger).
#[derive(Debug, Clone)]
pub struct DemandLog<K, T> {
    bounds: DemandBounds,
    seen: BTreeMap<(K, T), VecDeque<i64>>,
}

impl<K: Ord + Clone, T: Ord + Clone> DemandLog<K, T> {
    pub fn new(bounds: DemandBounds) -> Self {
        Self {
            bounds,
            seen: BTreeMap::new(),
        }
    }

    /// Counts a create of `key`'s shape by `tenant` at `now`.
    pub fn note(&mut self, key: &K, tenant: &T, now: i64) {
        if self.bounds.is_off() {
            return;
        }
        self.expire(now);
        let pair = (key.clone(), tenant.clone());
        if !self.seen.contains_key(&pair)
            && (self.seen.len() >= MAX_PAIRS
                || self.seen.keys().filter(|(_, t)| t == tenant).count() >= MAX_SHAPES_PER_TENANT)
        {
            return;
        }
        let times = self.seen.entry(pair).or_default();
        times.push_back(now);
        while times.len() > self.bounds.per_pool {
            times.pop_front();
        }
    }

    /// Forgets `key`'s creates (its members cannot be made: no pool until it is asked
    /// for again).
    pub fn forget(&mut self, key: &K) {
        self.forget_where(|shape| shape == key);
    }

    /// Forgets the creates of every shape `gone` says is gone.
    pub fn forget_where(&mut self, gone: impl Fn(&K) -> bool) {
        self.seen.retain(|(shape, _), _| !gone(shape));
    }

    /// The size of every pool kept for demand at `now` (none of size 0).
    pub fn sizes(&mut self, now: i64) -> BTreeMap<K, usize> {
        self.expire(now);
        let mut by_tenant: BTreeMap<&T, Vec<Wanted<K>>> = BTreeMap::new();
        for ((key, tenant), times) in &self.seen {
            by_tenant.entry(tenant).or_default().push(Wanted {
                key: key.clone(),
                creates: times.len(),
                last: times.back().copied().unwrap_or_default(),
            });
        }
        demand_sizes(by_tenant.into_values().collect(), self.bounds)
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

/// A shape's demand by one tenant: its creates in the window and when the last came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted<K> {
    pub key: K,
    pub creates: usize,
    pub last: i64,
}

/// The most created first, then the most recently.
fn most_asked_for<K: Ord>(a: &Wanted<K>, b: &Wanted<K>) -> std::cmp::Ordering {
    b.creates
        .cmp(&a.creates)
        .then(b.last.cmp(&a.last))
        .then(a.key.cmp(&b.key))
}

/// A tenant's shapes in its order, each with the members it still wants.
type Wants<K> = VecDeque<(K, usize)>;

/// The pools' sizes, given each tenant's demand (`tenants`: one list per tenant). A
/// shape wants as many members as its creates, at most `per_pool` (a shape several
/// tenants ask for is one pool). The budget is handed out a member at a time, to each
/// tenant in turn: each turn goes to the tenant's most asked-for shape that can still
/// grow (most created, then most recent). Tenants take their turns in the order of
/// their most asked-for shape.
pub fn demand_sizes<K: Ord + Clone>(
    tenants: Vec<Vec<Wanted<K>>>,
    bounds: DemandBounds,
) -> BTreeMap<K, usize> {
    let mut sizes = BTreeMap::new();
    if bounds.is_off() {
        return sizes;
    }
    // Each tenant's shapes in its order, with the members each still wants.
    let mut queues: Vec<(Wanted<K>, Wants<K>)> = tenants
        .into_iter()
        .filter_map(|mut shapes| {
            shapes.sort_by(most_asked_for);
            let first = shapes.first()?.clone();
            let wants = shapes
                .into_iter()
                .map(|shape| (shape.key, shape.creates.min(bounds.per_pool)))
                .collect();
            Some((first, wants))
        })
        .collect();
    queues.sort_by(|a, b| most_asked_for(&a.0, &b.0));
    let mut left = bounds.budget;
    while left > 0 && !queues.is_empty() {
        queues.retain_mut(|(_, wants)| {
            if left == 0 {
                return true;
            }
            // This tenant's next want whose shape can still grow; none: it is done.
            while let Some((key, wanted)) = wants.front_mut() {
                let size = sizes.get(key).copied().unwrap_or(0);
                if *wanted == 0 || size >= bounds.per_pool {
                    wants.pop_front();
                    continue;
                }
                *wanted -= 1;
                sizes.insert(key.clone(), size + 1);
                left -= 1;
                return true;
            }
            false
        });
    }
    sizes.retain(|_, size| *size > 0);
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
        log.note(&"a", &"t", 1_000);
        assert_eq!(log.sizes(1_000), BTreeMap::from([("a", 1)]));
        log.note(&"a", &"t", 2_000);
        log.note(&"a", &"t", 3_000);
        assert_eq!(log.sizes(3_000), BTreeMap::from([("a", 2)]));
    }

    #[test]
    fn without_creates_for_a_window_a_pool_is_gone() {
        let mut log = DemandLog::new(BOUNDS);
        log.note(&"a", &"t", 0);
        log.note(&"a", &"t", 30_000);
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
            demand_sizes(vec![wanted], BOUNDS),
            BTreeMap::from([("busy", 2), ("two", 2), ("new", 1)])
        );
    }

    #[test]
    fn forgotten_or_off_means_no_pool() {
        let mut log = DemandLog::new(BOUNDS);
        log.note(&"a", &"t", 0);
        log.forget(&"a");
        assert!(log.sizes(0).is_empty());
        let mut off = DemandLog::new(DemandBounds::OFF);
        off.note(&"a", &"t", 0);
        assert!(off.sizes(0).is_empty());
    }

    #[test]
    fn the_shapes_remembered_are_bounded() {
        let mut log = DemandLog::new(DemandBounds {
            budget: usize::MAX,
            ..BOUNDS
        });
        for n in 0..MAX_PAIRS + 10 {
            log.note(&n, &n, 0);
        }
        assert_eq!(log.sizes(0).len(), MAX_PAIRS);
        // Once they are old, others count again.
        log.note(&(MAX_PAIRS + 20), &0, 61_000);
        assert_eq!(log.sizes(61_000).len(), 1);
    }

    #[test]
    fn one_tenants_many_shapes_do_not_take_the_budget_from_anothers_first() {
        let mut log = DemandLog::new(BOUNDS);
        // A busy tenant asks for four shapes, twice each, after the quiet tenant's one
        // create: by counts alone, its shapes would take the whole budget of 5.
        log.note(&"quiet", &"q", 0);
        for shape in ["a", "b", "c", "d"] {
            log.note(&shape, &"busy", 1_000);
            log.note(&shape, &"busy", 2_000);
        }
        let sizes = log.sizes(3_000);
        assert_eq!(sizes.get("quiet"), Some(&1), "{sizes:?}");
        assert_eq!(sizes.values().sum::<usize>(), BOUNDS.budget, "{sizes:?}");
        // The busy tenant's first of its equals (by key), then its next.
        assert_eq!(sizes.get("a"), Some(&2), "{sizes:?}");
    }

    #[test]
    fn a_budget_too_small_for_everyone_is_shared_a_member_at_a_time() {
        let bounds = DemandBounds {
            budget: 2,
            ..BOUNDS
        };
        let mut log = DemandLog::new(bounds);
        log.note(&"x", &"busy", 0);
        log.note(&"x", &"busy", 1);
        log.note(&"z", &"quiet", 2);
        assert_eq!(log.sizes(10), BTreeMap::from([("x", 1), ("z", 1)]));
        // One tenant alone takes its shape's whole want, as before.
        let mut alone = DemandLog::new(bounds);
        alone.note(&"x", &"busy", 0);
        alone.note(&"x", &"busy", 1);
        alone.note(&"y", &"busy", 2);
        assert_eq!(alone.sizes(10), BTreeMap::from([("x", 2)]));
    }

    #[test]
    fn a_shape_several_tenants_ask_for_is_one_pool_counting_all_their_creates() {
        let mut log = DemandLog::new(DemandBounds {
            budget: 3,
            ..BOUNDS
        });
        // "shared" is the second shape of each of two tenants, once each; "x" and "y"
        // are their firsts, twice each.
        for (tenant, first) in [("t1", "x"), ("t2", "y")] {
            log.note(&first, &tenant, 0);
            log.note(&first, &tenant, 1);
            log.note(&"shared", &tenant, 2);
        }
        assert_eq!(
            log.sizes(10),
            BTreeMap::from([("x", 2), ("y", 1)]),
            "a member for every tenant before a second for any"
        );
        let mut log = DemandLog::new(BOUNDS);
        log.note(&"shared", &"t1", 0);
        log.note(&"shared", &"t2", 1);
        log.note(&"shared", &"t3", 2);
        assert_eq!(log.sizes(10), BTreeMap::from([("shared", 2)]));
    }

    #[test]
    fn forgetting_a_shape_forgets_it_for_every_tenant() {
        let mut log = DemandLog::new(BOUNDS);
        log.note(&"a", &"t1", 0);
        log.note(&"a", &"t2", 0);
        log.note(&"b", &"t2", 0);
        log.forget(&"a");
        assert_eq!(log.sizes(0), BTreeMap::from([("b", 1)]));
    }

    #[test]
    fn one_tenants_many_shapes_cannot_fill_the_log() {
        let mut log = DemandLog::new(DemandBounds {
            budget: usize::MAX,
            ..BOUNDS
        });
        for n in 0..MAX_PAIRS {
            log.note(&n, &"busy", 0);
        }
        log.note(&usize::MAX, &"quiet", 0);
        let sizes = log.sizes(0);
        assert_eq!(sizes.len(), MAX_SHAPES_PER_TENANT + 1);
        assert_eq!(
            sizes.get(&usize::MAX),
            Some(&1),
            "the other tenant's create counts"
        );
    }
}
