//! Warm pools: per engine and shape (template or image, network mode), a number of
//! sandboxes made and started ahead of time, with their agent connected, and no row.
//! The local engine's template pools come from the configuration, a remote server's
//! from its record (`warmPools`); any other shape of create gets a pool while creates
//! of it keep coming, within the bounds of `[warm_on_demand]`
//! (`sandboxd_core::pool_demand`). A create that a pool of the engine it goes to can
//! serve (`sandboxd_core::pools::pool_for`) claims one: its row is written straight as
//! `running`, and the pool is refilled in the background. Pool members are not sandboxes: they are never listed, never reaped, and
//! kept by reconcile only while the pools know them; a server stop removes them, and
//! one that did not stop cleanly has them removed by the next start's reconcile (then
//! refilled).

mod fill;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use sandboxd_core::model::{Environment, NetworkMode, Principal, Sandbox, SandboxStatus, Server};
use sandboxd_core::pool_demand::{DemandBounds, DemandLog};
use sandboxd_core::pools::{Shape, pool_for};
use sandboxd_core::validate::CreateSandbox;
use sandboxd_ports::Engine;
use tracing::{info, warn};

use super::{Resource, Service, ServiceError, now_ms};

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

    /// The labels of its metrics: its template (`none` without one), server, network
    /// and whether its image is the template's. Never the image's name: the series
    /// stay as many as templates, servers and network modes, whatever images are asked
    /// for (pools of two other images of one template share theirs).
    pub fn labels(&self) -> PoolSeries {
        [
            (
                "pool",
                self.shape.template.clone().unwrap_or_else(|| "none".into()),
            ),
            ("server", self.server_label()),
            ("network", self.shape.network.as_str().to_owned()),
            (
                "image",
                if self.shape.image.is_some() {
                    "other"
                } else {
                    "template"
                }
                .to_owned(),
            ),
        ]
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

/// What a pool made of a create.
pub(super) enum Claimed {
    /// Served by a member.
    Warm(Box<Sandbox>),
    /// To be made cold; once it runs, a create of the pool kept for its shape's demand
    /// (none when its shape cannot be pooled, or has a configured pool).
    Cold(Option<PoolKey>),
}

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
    /// Recent creates of shapes without a configured pool.
    demand: DemandLog<PoolKey>,
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

    /// Serves `cmd` from a warm pool of the engine it goes to (`server`: a remote one)
    /// when one matches and has a member ready.
    pub(super) async fn claim(
        &self,
        caller: &Principal,
        cmd: &CreateSandbox,
        environment: &Environment,
        server: Option<&Server>,
    ) -> Result<Claimed, ServiceError> {
        let pools = &self.service.inner.pools;
        let Some(matched) = pool_for(cmd, self.service.templates()) else {
            return Ok(Claimed::Cold(None));
        };
        // Under gVisor the processes a sandbox may run are its kernel's limit, set as
        // it starts: a create with other limits than its pool's is made cold.
        let runtime = self
            .service
            .runtime_of(None, matched.shape.template.as_deref());
        if matched.update_limits && sandboxd_core::plan::under_gvisor(runtime.as_deref()) {
            return Ok(Claimed::Cold(None));
        }
        let configured = matched
            .shape
            .configured_template()
            .is_some_and(|template| match server {
                None => pools.local.contains_key(template),
                Some(server) => server
                    .warm_pools
                    .get(template)
                    .is_some_and(|size| *size > 0),
            });
        let key = PoolKey {
            server_id: server.map(|s| s.server_id.clone()),
            shape: matched.shape,
        };
        let (warm, agent) = loop {
            let (taken, in_force) = {
                let mut state = pools.state();
                let taken = state.ready.get_mut(&key).and_then(VecDeque::pop_front);
                (taken, state.sizes.contains_key(&key))
            };
            let Some(warm) = taken else {
                // Only pools in force are counted: a series per shape ever asked for
                // would grow without bound.
                if in_force {
                    key.count_claim("miss");
                }
                return Ok(Claimed::Cold((!configured).then_some(key)));
            };
            if let Some(agent) = self.service.agent_channel(&warm.sandbox_id) {
                break (warm, agent);
            }
            // Its agent went away: the member is unusable.
            warn!(sandbox_id = %warm.sandbox_id, "discarding a warm sandbox whose agent is gone");
            self.discard_member(warm, key.server_id.as_deref());
        };
        // Other limits than the pool's are written, and the sandbox's lease told to
        // its agent, while the row is (none waits for another); the sandbox is handed
        // out only once all are done, so its first command runs under its own limits,
        // and a server gone right after the claim leaves it its whole timeout and the
        // grace (a member's lease is the grace alone).
        let lease = std::time::Duration::from_millis(cmd.timeout_ms.max(0) as u64)
            + self.service.lease_grace();
        let prepared = async {
            let limits = async {
                if !matched.update_limits {
                    return Ok(());
                }
                warm.engine
                    .update_limits(
                        &warm.container_id,
                        (cmd.cpu * 1e9).round() as i64,
                        cmd.memory_mb * 1024 * 1024,
                        cmd.pids_limit,
                    )
                    .await
                    .map_err(|error| ("its limits could not be set", error.to_string()))
            };
            let leased = async {
                match agent.lease(lease).await {
                    Ok(()) | Err(sandboxd_ports::ChannelError::NeedsAgent) => Ok(()),
                    Err(error) => Err(("its lease could not be told", error.to_string())),
                }
            };
            let (limits, leased) = tokio::join!(limits, leased);
            limits.and(leased)
        };
        key.count_claim("hit");
        if !configured {
            self.note_demand(&key);
        }
        let templates = self.service.templates();
        let template = key.shape.template.as_deref().and_then(|t| templates.get(t));
        let now = now_ms();
        let row = Sandbox {
            name: cmd
                .name
                .clone()
                .unwrap_or_else(|| format!("sandbox-{}", &warm.sandbox_id[..8].to_lowercase())),
            sandbox_id: warm.sandbox_id.clone(),
            organization_id: caller.organization_id.clone(),
            project_id: environment.project_id.clone(),
            environment_id: environment.environment_id.clone(),
            server_id: key.server_id.clone(),
            image: key
                .shape
                .image
                .clone()
                .or_else(|| template.map(|t| t.image.clone()))
                .unwrap_or_default(),
            template: key.shape.template.clone(),
            container_id: Some(warm.container_id.clone()),
            status: SandboxStatus::Running,
            cpu: cmd.cpu,
            memory_mb: cmd.memory_mb,
            pids_limit: cmd.pids_limit,
            timeout_ms: cmd.timeout_ms,
            network_mode: cmd.network_mode,
            workdir: key.shape.workdir(templates).to_owned(),
            user: warm.user.clone(),
            runtime,
            created_at: now,
            expires_at: Some(now + cmd.timeout_ms),
            last_activity_at: Some(now),
            killed_at: None,
            env_per_exec: cmd.env_vars.is_some(),
            labels: cmd.labels.clone(),
            egress: cmd.egress.clone(),
            auto_pause: cmd.auto_pause,
            fixed_timeout: cmd.fixed_timeout,
            paused_timeout_ms: cmd.paused_timeout_ms,
            paused_at: None,
            volumes: Vec::new(),
        };
        // The row and its audit entry in one write.
        let entry = crate::access::audit_entry(
            &row.organization_id,
            Some(caller),
            "sandbox.create",
            Resource::sandbox(&row),
            crate::sandboxes::created_metadata(&row, true, Some(key.shape.label())),
        );
        let inserted = self.service.store().insert_sandbox_audited(
            &row,
            cmd.env_vars.as_deref(),
            &caller.user_id,
            &self.service.inner.options.quotas,
            entry,
        );
        let (prepared, inserted) = tokio::join!(prepared, inserted);
        pools.state().members.remove(&warm.sandbox_id);
        if let Err(error) = inserted {
            self.discard_member(warm, key.server_id.as_deref());
            return Err(error.into());
        }
        if let Err((reason, error)) = prepared {
            // Not servable warm: the row goes (with a note in the audit log), and the
            // create is made cold.
            warn!(sandbox_id = %warm.sandbox_id, reason, %error, "could not prepare a warm sandbox; creating cold");
            self.discard_member(warm, key.server_id.as_deref());
            self.service
                .access()
                .record(
                    &row.organization_id,
                    Some(caller),
                    "sandbox.remove",
                    Resource::sandbox(&row),
                    // The engine's or agent's own words stay in the server's log.
                    serde_json::json!({"reason": format!("{reason}; made again cold")}),
                )
                .await;
            self.service.store().delete_sandbox(&row.sandbox_id).await?;
            return Ok(Claimed::Cold(None));
        }
        if row.network_mode == NetworkMode::Allowlist {
            // Its agent connected before its row said what to serve it: its egress
            // proxy is looked up again now.
            self.service.agents().announce(&row.sandbox_id);
        }
        info!(sandbox_id = %row.sandbox_id, pool = key.shape.label(), network = row.network_mode.as_str(), server_id = key.server_label(), "sandbox claimed from a warm pool");
        Ok(Claimed::Warm(Box::new(row)))
    }

    /// Counts a create of `key`'s shape (served or made cold) for its pool's size.
    pub(super) fn note_demand(&self, key: &PoolKey) {
        self.service.inner.pools.state().demand.note(key, now_ms());
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
