//! Warm pools: per engine and shape (template or image, network mode), a number of
//! sandboxes made and started ahead of time, with their agent connected, and no row.
//! The local engine's template pools come from the configuration, a remote server's
//! from its record (`warmPools`); any other shape of create gets a pool while creates
//! of it keep coming, within the bounds of `[warm_on_demand]`
//! (`sandboxd_core::pool_demand`). A create that a pool of the engine it goes to can
//! serve (`sandboxd_core::pools::pool_for`) claims one (`claim.rs`): its row is written
//! straight as `running`, and the pool is refilled in the background (`fill.rs`). Pool
//! members are not sandboxes: they are never listed, never reaped, and kept by
//! reconcile only while the pools know them; a server stop removes them, and
//! one that did not stop cleanly has them removed by the next start's reconcile (then
//! refilled).
//!
//! A pool is named by its `PoolKey` (engine and shape); `Stock` holds the sizes, the
//! `DemandLog` and the members, each member holding the engine it was made on. Members
//! are made with `start_container` and labelled `sandboxd.pool`. A pool's metric series
//! (`PoolSeries`) never names an image. Reconcile keeps the members on every engine
//! through `members`.

mod claim;
mod fill;

pub(crate) use claim::Claimed;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use sandboxd_contracts::Engine;
use sandboxd_core::pool_demand::{DemandBounds, DemandLog};
use sandboxd_core::pools::Shape;

use super::Service;

pub const POOL_READY: &str = "sandboxd_pool_ready";
pub const POOL_CLAIMS: &str = "sandboxd_pool_claims_total";
pub const POOL_REFILLS: &str = "sandboxd_pool_refills_total";

/// A pool: the engine it is kept on and the shape of its members.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PoolKey {
    /// `None`: the local engine.
    pub server_id: Option<String>,
    pub shape: Shape,
}

impl PoolKey {
    /// A configured pool of the local engine: the template's, `isolated`.
    pub fn local(template: &str) -> Self {
        Self {
            server_id: None,
            shape: Shape::of_template(template),
        }
    }

    /// A configured pool of a remote server.
    pub fn on(server_id: &str, template: &str) -> Self {
        Self {
            server_id: Some(server_id.to_owned()),
            shape: Shape::of_template(template),
        }
    }

    /// The `server` label of its metrics.
    fn server_label(&self) -> String {
        self.server_id.clone().unwrap_or_else(|| "local".into())
    }

    /// The labels of its metrics: its template (`none` without one, `built` for a
    /// template users built), server, network and whether its image is the template's.
    /// Never the image's name nor a built template's: the series stay as many as
    /// configured templates, servers and network modes, whatever images are asked for
    /// or built (pools of two other images of one template share theirs).
    pub fn labels(&self) -> PoolSeries {
        let (pool, image) = match (&self.shape.built, &self.shape.image) {
            (Some(_), _) => ("built".to_owned(), "built"),
            (None, image) => (
                self.shape.template.clone().unwrap_or_else(|| "none".into()),
                if image.is_some() { "other" } else { "template" },
            ),
        };
        [
            ("pool", pool),
            ("server", self.server_label()),
            ("network", self.shape.network.as_str().to_owned()),
            ("image", image.to_owned()),
        ]
    }

    /// The runtime its members run under: a built template's isolation, or its
    /// template's.
    fn runtime(&self, service: &Service) -> Option<String> {
        let built = self
            .shape
            .built
            .as_ref()
            .and_then(|b| b.isolation.as_deref())
            .and_then(sandboxd_core::model::Isolation::parse);
        service.runtime_of(built, self.shape.template.as_deref())
    }

    fn count_claim(&self, outcome: &'static str) {
        let [pool, server, network, image] = self.labels();
        metrics::counter!(
            POOL_CLAIMS,
            &[
                pool,
                server,
                network,
                image,
                ("outcome", outcome.to_owned())
            ]
        )
        .increment(1);
    }
}

/// The labels of a pool's metrics.
pub type PoolSeries = [(&'static str, String); 4];

/// A started pool member, with the engine it was made on (kept even when the fleet
/// forgets its server, so the member can always be removed).
#[derive(Debug, Clone)]
struct Warm {
    sandbox_id: String,
    container_id: String,
    user: Option<String>,
    engine: Arc<dyn Engine>,
}

/// The pools of a sandboxd: their target sizes and their members.
#[derive(Debug)]
pub(crate) struct Stock {
    /// The local engine's pools, as configured.
    local: BTreeMap<String, usize>,
    state: Mutex<PoolState>,
}

#[derive(Debug)]
struct PoolState {
    /// Sizes in force: the configured ones (local, and each server's as read by the
    /// last fill pass) and those of demand.
    sizes: BTreeMap<PoolKey, usize>,
    /// Recent creates of shapes without a configured pool, by organization.
    demand: DemandLog<PoolKey, String>,
    /// Started members ready to be claimed, oldest first, per pool.
    ready: HashMap<PoolKey, VecDeque<Warm>>,
    /// Every sandbox id the pools own: ready, being made, or being claimed. Reconcile
    /// keeps their containers.
    members: HashSet<String>,
    /// The metric series of every pool that was ever in force, so that one emptied
    /// reads 0 rather than its last count.
    series: BTreeSet<PoolSeries>,
}

impl PoolState {
    fn ready_in(&self, key: &PoolKey) -> usize {
        self.ready.get(key).map_or(0, VecDeque::len)
    }
}

impl Stock {
    /// The local engine's pools of `sizes` (template name → members to keep ready; 0
    /// means no pool), and pools for demand within `demand`.
    pub(crate) fn new(sizes: BTreeMap<String, usize>, demand: DemandBounds) -> Self {
        let local: BTreeMap<String, usize> =
            sizes.into_iter().filter(|(_, size)| *size > 0).collect();
        let state = PoolState {
            sizes: local
                .iter()
                .map(|(template, size)| (PoolKey::local(template), *size))
                .collect(),
            demand: DemandLog::new(demand),
            ready: HashMap::new(),
            members: HashSet::new(),
            series: local
                .keys()
                .map(|template| PoolKey::local(template).labels())
                .collect(),
        };
        Self {
            local,
            state: Mutex::new(state),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sandbox ids the pools own.
    pub fn members(&self) -> HashSet<String> {
        self.state().members.clone()
    }

    /// Ready members per pool in force.
    pub fn ready(&self) -> BTreeMap<PoolKey, usize> {
        let state = self.state();
        state
            .sizes
            .keys()
            .map(|key| (key.clone(), state.ready_in(key)))
            .collect()
    }

    /// Ready members per metric series of every pool ever in force (0 for those
    /// emptied or gone).
    fn ready_series(&self) -> BTreeMap<PoolSeries, usize> {
        let state = self.state();
        let mut series: BTreeMap<PoolSeries, usize> = state
            .series
            .iter()
            .map(|labels| (labels.clone(), 0))
            .collect();
        for (key, members) in &state.ready {
            *series.entry(key.labels()).or_default() += members.len();
        }
        series
    }

    /// Ready members of one server's configured pools, per template.
    fn ready_on(&self, server_id: &str) -> BTreeMap<String, usize> {
        let state = self.state();
        state
            .ready
            .iter()
            .filter(|(key, _)| key.server_id.as_deref() == Some(server_id))
            .filter_map(|(key, members)| {
                Some((key.shape.configured_template()?.to_owned(), members.len()))
            })
            .collect()
    }
}

/// The warm pools' operations: claims, fills, drains. A part of the sandbox service (a
/// member is made as a sandbox is), kept apart from it.
#[derive(Debug, Clone)]
pub struct Pools {
    service: Service,
}

impl Pools {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }

    /// Removes a member that will not be used, in the background, on the engine it was
    /// made on.
    fn discard_member(&self, warm: Warm, server_id: Option<&str>) {
        self.service
            .inner
            .pools
            .state()
            .members
            .remove(&warm.sandbox_id);
        self.service
            .fleet()
            .release_agent(&warm.sandbox_id, server_id);
        self.service.inner.removals.spawn(async move {
            let _ = warm.engine.remove_container(&warm.container_id).await;
        });
    }

    /// The sandbox ids the pools own (kept by reconcile).
    pub fn members(&self) -> HashSet<String> {
        self.service.inner.pools.members()
    }

    /// Ready members per pool in force.
    pub fn ready(&self) -> BTreeMap<PoolKey, usize> {
        self.service.inner.pools.ready()
    }

    /// Ready members per metric series (`sandboxd_pool_ready`) of every pool ever in
    /// force.
    pub fn ready_series(&self) -> BTreeMap<PoolSeries, usize> {
        self.service.inner.pools.ready_series()
    }

    /// Ready members of a server's pools, per template.
    pub(crate) fn ready_on(&self, server_id: &str) -> BTreeMap<String, usize> {
        self.service.inner.pools.ready_on(server_id)
    }
}
