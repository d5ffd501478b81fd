//! Warm pools: per template, a number of sandboxes made and started ahead of time, with
//! their agent connected, and no row. A create that a pool can serve
//! (`sandboxd_core::pools::pool_for`) claims one: its row is written straight as
//! `running`, and the pool is refilled in the background. Pool members are not
//! sandboxes: they are never listed, never reaped, and kept by reconcile only while the
//! pool knows them; a server stop removes them, and one that did not stop cleanly has
//! them removed by the next start's reconcile (then refilled).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use sandboxd_core::limits::{DEFAULT_CPU, DEFAULT_MEMORY_MB, DEFAULT_PIDS_LIMIT};
use sandboxd_core::model::{Environment, NetworkMode, Principal, Sandbox, SandboxStatus};
use sandboxd_core::pools::pool_for;
use sandboxd_core::validate::CreateSandbox;
use sandboxd_store::new_id;
use tracing::{info, warn};

use super::{Resource, Service, ServiceError, now_ms};

pub const POOL_READY: &str = "sandboxd_pool_ready";
pub const POOL_CLAIMS: &str = "sandboxd_pool_claims_total";
pub const POOL_REFILLS: &str = "sandboxd_pool_refills_total";

/// A started pool member.
#[derive(Debug, Clone)]
struct Warm {
    sandbox_id: String,
    container_id: String,
    user: Option<String>,
}

/// The pools of a server: their target sizes and their members.
#[derive(Debug, Default)]
pub struct Pools {
    sizes: BTreeMap<String, usize>,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    /// Started members ready to be claimed, oldest first, per template.
    ready: HashMap<String, VecDeque<Warm>>,
    /// Every sandbox id the pools own: ready, being made, or being claimed. Reconcile
    /// keeps their containers.
    members: HashSet<String>,
}

impl Pools {
    /// Pools of `sizes` (template name → members to keep ready; 0 means no pool).
    pub fn new(sizes: BTreeMap<String, usize>) -> Self {
        Self {
            sizes: sizes.into_iter().filter(|(_, size)| *size > 0).collect(),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sandbox ids the pools own.
    pub fn members(&self) -> HashSet<String> {
        self.state().members.clone()
    }

    /// Ready members per pool.
    pub fn ready(&self) -> BTreeMap<String, usize> {
        let state = self.state();
        self.sizes
            .keys()
            .map(|name| (name.clone(), state.ready.get(name).map_or(0, VecDeque::len)))
            .collect()
    }
}

impl Service {
    /// Serves `cmd` from a warm pool when one matches and has a member ready.
    pub(super) async fn claim_warm(
        &self,
        caller: &Principal,
        cmd: &CreateSandbox,
        environment: &Environment,
    ) -> Result<Option<Sandbox>, ServiceError> {
        let pools = &self.inner.pools;
        let Some(matched) = pool_for(
            cmd,
            self.templates(),
            pools.sizes.keys().map(String::as_str),
        ) else {
            return Ok(None);
        };
        let pool = matched.pool;
        let warm = loop {
            let taken = pools
                .state()
                .ready
                .get_mut(pool)
                .and_then(VecDeque::pop_front);
            let Some(warm) = taken else {
                metrics::counter!(POOL_CLAIMS, "pool" => pool.to_owned(), "outcome" => "miss")
                    .increment(1);
                return Ok(None);
            };
            if self.agents().connection(&warm.sandbox_id).is_some() {
                break warm;
            }
            // Its agent went away: the member is unusable.
            warn!(sandbox_id = %warm.sandbox_id, "discarding a warm sandbox whose agent is gone");
            self.discard_member(warm);
        };
        if matched.update_limits {
            let updated = self
                .engine()
                .update_limits(
                    &warm.container_id,
                    (cmd.cpu * 1e9).round() as i64,
                    cmd.memory_mb * 1024 * 1024,
                    cmd.pids_limit,
                )
                .await;
            if let Err(error) = updated {
                // Not servable warm (e.g. less memory than the member uses): cold.
                warn!(sandbox_id = %warm.sandbox_id, %error, "could not set the limits of a warm sandbox; creating cold");
                self.discard_member(warm);
                return Ok(None);
            }
        }
        metrics::counter!(POOL_CLAIMS, "pool" => pool.to_owned(), "outcome" => "hit").increment(1);
        let template = self.templates().get(pool);
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
            server_id: None,
            image: template.map(|t| t.image.clone()).unwrap_or_default(),
            template: Some(pool.to_owned()),
            container_id: Some(warm.container_id.clone()),
            status: SandboxStatus::Running,
            cpu: cmd.cpu,
            memory_mb: cmd.memory_mb,
            pids_limit: cmd.pids_limit,
            timeout_ms: cmd.timeout_ms,
            network_mode: cmd.network_mode,
            workdir: template.map(|t| t.workdir.clone()).unwrap_or_default(),
            user: warm.user.clone(),
            runtime: self.runtime().map(str::to_owned),
            created_at: now,
            expires_at: Some(now + cmd.timeout_ms),
            last_activity_at: Some(now),
            killed_at: None,
            env_per_exec: cmd.env_vars.is_some(),
        };
        let inserted = self
            .store()
            .insert_sandbox(
                &row,
                cmd.env_vars.as_deref(),
                &caller.user_id,
                &self.inner.options.quotas,
            )
            .await;
        pools.state().members.remove(&warm.sandbox_id);
        if let Err(error) = inserted {
            self.discard_member(warm);
            return Err(error.into());
        }
        self.record(
            &row.organization_id,
            Some(caller),
            "sandbox.create",
            Resource::sandbox(&row),
            super::create::created_metadata(&row, true, Some(pool)),
        )
        .await;
        info!(sandbox_id = %row.sandbox_id, pool, "sandbox claimed from a warm pool");
        Ok(Some(row))
    }

    /// Removes a member that will not be used, in the background.
    fn discard_member(&self, warm: Warm) {
        self.inner.pools.state().members.remove(&warm.sandbox_id);
        self.agents().release(&warm.sandbox_id);
        let engine = self.engine().clone();
        self.inner.removals.spawn(async move {
            let _ = engine.remove_container(&warm.container_id).await;
        });
    }

    /// Makes members until every pool is full again, one at a time; returns how many
    /// were made. A failure is logged and retried at the next pass.
    pub async fn fill_pools_once(&self) -> usize {
        let pools = &self.inner.pools;
        let mut made = 0;
        for (pool, size) in &pools.sizes {
            while pools.state().ready.get(pool).map_or(0, VecDeque::len) < *size {
                match self.make_member(pool).await {
                    Ok(warm) => {
                        pools
                            .state()
                            .ready
                            .entry(pool.clone())
                            .or_default()
                            .push_back(warm);
                        made += 1;
                        metrics::counter!(POOL_REFILLS, "pool" => pool.clone()).increment(1);
                    }
                    Err(error) => {
                        warn!(pool, %error, "could not make a warm sandbox; retrying later");
                        break;
                    }
                }
            }
            let ready = pools.state().ready.get(pool).map_or(0, VecDeque::len);
            metrics::gauge!(POOL_READY, "pool" => pool.clone()).set(ready as f64);
        }
        made
    }

    async fn make_member(&self, pool: &str) -> Result<Warm, ServiceError> {
        let template = self
            .templates()
            .get(pool)
            .ok_or(ServiceError::NotFound("template"))?;
        let sandbox_id = new_id()?;
        // Owned by the pool before its container exists, so reconcile keeps it.
        self.inner.pools.state().members.insert(sandbox_id.clone());
        let row = Sandbox {
            sandbox_id: sandbox_id.clone(),
            name: String::new(),
            organization_id: String::new(),
            project_id: String::new(),
            environment_id: String::new(),
            server_id: None,
            image: template.image.clone(),
            template: Some(pool.to_owned()),
            container_id: None,
            status: SandboxStatus::Creating,
            cpu: DEFAULT_CPU,
            memory_mb: DEFAULT_MEMORY_MB,
            pids_limit: DEFAULT_PIDS_LIMIT,
            timeout_ms: 0,
            network_mode: NetworkMode::Isolated,
            workdir: template.workdir.clone(),
            user: template.user.clone(),
            runtime: self.runtime().map(str::to_owned),
            created_at: now_ms(),
            expires_at: None,
            last_activity_at: None,
            killed_at: None,
            env_per_exec: false,
        };
        // Warm pools are kept on the local engine.
        match self
            .start_container(self.engine(), &row, None, Some(pool))
            .await
        {
            Ok((container_id, user)) if self.agents().connection(&sandbox_id).is_some() => {
                Ok(Warm {
                    sandbox_id,
                    container_id,
                    user,
                })
            }
            Ok((container_id, user)) => {
                // Without its agent a member would not be warm: do not keep it.
                self.discard_member(Warm {
                    sandbox_id,
                    container_id,
                    user,
                });
                Err(ServiceError::Unavailable(
                    "the warm sandbox's agent did not connect".into(),
                ))
            }
            Err(error) => {
                self.inner.pools.state().members.remove(&sandbox_id);
                Err(error.into())
            }
        }
    }

    /// Removes every ready member (a server stop).
    pub async fn drain_pools(&self) {
        let ready: Vec<Warm> = {
            let mut state = self.inner.pools.state();
            state
                .ready
                .drain()
                .flat_map(|(_, members)| members)
                .collect()
        };
        for warm in ready {
            self.discard_member(warm);
        }
    }

    /// The sandbox ids the pools own (kept by reconcile).
    pub fn pool_members(&self) -> HashSet<String> {
        self.inner.pools.members()
    }

    /// Ready members per pool.
    pub fn pools_ready(&self) -> BTreeMap<String, usize> {
        self.inner.pools.ready()
    }
}
