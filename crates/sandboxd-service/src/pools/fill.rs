//! Keeping the pools full: each pass reads the sizes in force (the local ones, every
//! server's and those of demand), trims pools that shrank, and makes members where pools are short; each
//! engine's pools are filled beside the others', so a slow or unreachable server never
//! holds the local pools back. A server that is removed or reached otherwise has its
//! members removed first.
//!
//! A demand pool whose member cannot be made is dropped. A new member runs `sh -c true`
//! once, so that its claimer's first command finds the shell read in. `drop_server`
//! removes a server's members, `drop_built` a removed built template's; members are
//! removed at stop.

use std::collections::{BTreeMap, HashSet};

use futures_util::future::join_all;
use sandboxd_core::limits::{DEFAULT_CPU, DEFAULT_MEMORY_MB, DEFAULT_PIDS_LIMIT};
use sandboxd_core::model::{Sandbox, SandboxStatus};
use sandboxd_store::new_sandbox_id;
use tracing::warn;

use super::{POOL_REFILLS, PoolKey, Pools, Warm};
use crate::{ServiceError, now_ms};

impl Pools {
    /// The sizes of every pool: the local ones, those of each server whose host key is
    /// pinned, and those of demand. `None` when the servers could not be read (nothing
    /// is trimmed then).
    async fn pool_sizes(&self) -> Option<BTreeMap<PoolKey, usize>> {
        let servers = match self.service.store().all_servers().await {
            Ok(servers) => servers,
            Err(error) => {
                warn!(error = %sandboxd_core::error::chain(&error), "could not read the servers' warm pools; keeping them as they are");
                return None;
            }
        };
        let local = self
            .service
            .inner
            .pools
            .local
            .iter()
            .map(|(template, size)| (PoolKey::local(template), *size));
        let remote = servers
            .iter()
            .filter(|server| server.host_key.is_some())
            .flat_map(|server| {
                server
                    .warm_pools
                    .iter()
                    .filter(|(_, size)| **size > 0)
                    .map(|(template, size)| (PoolKey::on(&server.server_id, template), *size))
            });
        // A configured size wins over demand's for the same pool.
        let mut sizes = self.service.inner.pools.state().demand.sizes(now_ms());
        sizes.extend(local.chain(remote));
        Some(sizes)
    }

    /// Makes members until every pool is full again; returns how many were made. Pools
    /// of one engine are filled one member at a time, engines side by side. A failure
    /// is logged and retried at the next pass.
    pub async fn fill_once(&self) -> usize {
        let Some(sizes) = self.pool_sizes().await else {
            return 0;
        };
        let extra = self.set_pool_sizes(sizes.clone());
        for (key, warm) in extra {
            self.discard_member(warm, key.server_id.as_deref());
        }
        let mut engines: BTreeMap<Option<String>, Vec<(PoolKey, usize)>> = BTreeMap::new();
        for (key, size) in sizes {
            engines
                .entry(key.server_id.clone())
                .or_default()
                .push((key, size));
        }
        let passes = engines.into_iter().map(|(server_id, pools)| async move {
            if server_id
                .as_deref()
                .is_some_and(|id| self.service.fleet().made().failed_recently(id))
            {
                return 0;
            }
            let mut made = 0;
            for (key, size) in pools {
                made += self.fill_pool(&key, size).await;
            }
            made
        });
        join_all(passes).await.into_iter().sum()
    }

    /// Puts `sizes` in force; returns the ready members beyond them (pools that shrank
    /// or are gone), taken out of the pools.
    fn set_pool_sizes(&self, sizes: BTreeMap<PoolKey, usize>) -> Vec<(PoolKey, Warm)> {
        let mut state = self.service.inner.pools.state();
        let mut extra = Vec::new();
        for (key, members) in state.ready.iter_mut() {
            let keep = sizes.get(key).copied().unwrap_or(0);
            while members.len() > keep {
                if let Some(warm) = members.pop_back() {
                    extra.push((key.clone(), warm));
                }
            }
        }
        state.ready.retain(|_, members| !members.is_empty());
        let series: Vec<_> = sizes.keys().map(PoolKey::labels).collect();
        state.series.extend(series);
        state.sizes = sizes;
        extra
    }

    async fn fill_pool(&self, key: &PoolKey, size: usize) -> usize {
        let pools = &self.service.inner.pools;
        let labels = || key.labels();
        let mut made = 0;
        while pools.state().ready_in(key) < size {
            match self.make_member(key).await {
                Ok(warm) => {
                    let mut state = pools.state();
                    // The pool may have been dropped meanwhile (its server removed).
                    if state
                        .sizes
                        .get(key)
                        .is_some_and(|size| state.ready_in(key) < *size)
                    {
                        state.ready.entry(key.clone()).or_default().push_back(warm);
                        drop(state);
                        made += 1;
                        metrics::counter!(POOL_REFILLS, &labels()).increment(1);
                    } else {
                        drop(state);
                        self.discard_member(warm, key.server_id.as_deref());
                        break;
                    }
                }
                Err(error) => {
                    // A pool kept for demand is dropped until its shape is created
                    // again (a cold create of it then says whether it can be made);
                    // a configured one is tried again at the next pass.
                    pools.state().demand.forget(key);
                    warn!(pool = key.shape.label(), network = key.shape.network.as_str(), server_id = key.server_label(), error = %sandboxd_core::error::chain(&error), "could not make a warm sandbox; retrying later");
                    break;
                }
            }
        }
        made
    }

    async fn make_member(&self, key: &PoolKey) -> Result<Warm, ServiceError> {
        let templates = self.service.templates();
        let template = match &key.shape.template {
            Some(_) if key.shape.built.is_some() => None,
            Some(name) => Some(
                templates
                    .get(name)
                    .ok_or(ServiceError::NotFound("template"))?,
            ),
            None => None,
        };
        let image = key
            .shape
            .own_image()
            .map(str::to_owned)
            .or_else(|| template.map(|t| t.image.clone()))
            .ok_or(ServiceError::NotFound("template"))?;
        let engine = self
            .service
            .fleet()
            .engine_of(key.server_id.as_deref())
            .await?;
        let sandbox_id = new_sandbox_id()?;
        // Owned by the pool before its container exists, so reconcile keeps it.
        self.service
            .inner
            .pools
            .state()
            .members
            .insert(sandbox_id.clone());
        let row = Sandbox {
            sandbox_id: sandbox_id.clone(),
            name: String::new(),
            organization_id: String::new(),
            project_id: String::new(),
            environment_id: String::new(),
            server_id: key.server_id.clone(),
            image,
            template: key.shape.template.clone(),
            container_id: None,
            status: SandboxStatus::Creating,
            cpu: DEFAULT_CPU,
            memory_mb: DEFAULT_MEMORY_MB,
            pids_limit: DEFAULT_PIDS_LIMIT,
            timeout_ms: 0,
            network_mode: key.shape.network,
            workdir: key.shape.workdir(templates).to_owned(),
            user: template.and_then(|t| t.user.clone()),
            runtime: key.runtime(&self.service),
            created_at: now_ms(),
            expires_at: None,
            last_activity_at: None,
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
        };
        if let Err(refused) = self.service.check_isolation(
            row.runtime.as_deref(),
            key.shape.template.as_deref(),
            None,
        ) {
            self.service.inner.pools.state().members.remove(&sandbox_id);
            return Err(refused);
        }
        match self
            .service
            .sandboxes()
            .start_container(&engine, &row, Some(key.shape.label()))
            .await
        {
            Ok((container_id, user)) => {
                let warm = Warm {
                    sandbox_id,
                    container_id,
                    user,
                    engine,
                };
                if let Some(agent) = self.service.agent_channel(&warm.sandbox_id) {
                    warm_up(agent.as_ref(), &row.workdir).await;
                    return Ok(warm);
                }
                // Without its agent a member would not be warm: do not keep it.
                self.discard_member(warm, key.server_id.as_deref());
                Err(ServiceError::Unavailable(
                    "the warm sandbox's agent did not connect".into(),
                ))
            }
            Err(error) => {
                self.service.inner.pools.state().members.remove(&sandbox_id);
                Err(error.into())
            }
        }
    }

    /// Removes every ready member (a server stop).
    pub async fn drain(&self) {
        let ready: Vec<(PoolKey, Warm)> = {
            let mut state = self.service.inner.pools.state();
            state
                .ready
                .drain()
                .flat_map(|(key, members)| members.into_iter().map(move |warm| (key.clone(), warm)))
                .collect()
        };
        for (key, warm) in ready {
            self.discard_member(warm, key.server_id.as_deref());
        }
    }

    /// Drops a server's pools (it is removed, or reached otherwise from now on) and
    /// removes their members, waiting for the removals; the next fill pass makes them
    /// again when the server still has pools.
    pub(crate) async fn drop_server(&self, server_id: &str) {
        self.drop_pools(|key| key.server_id.as_deref() == Some(server_id))
            .await;
    }

    /// Drops the pools of the versions of a built template (it is removed) and removes
    /// their members, waiting for the removals, so that its images are free to go; no
    /// pool of them is made again, its creates forgotten.
    pub(crate) async fn drop_built(&self, build_ids: &HashSet<String>) {
        let gone = |key: &PoolKey| {
            key.shape
                .built
                .as_ref()
                .is_some_and(|b| build_ids.contains(&b.build_id))
        };
        self.service.inner.pools.state().demand.forget_where(gone);
        self.drop_pools(gone).await;
    }

    /// Drops the pools `gone` names and removes their members, waiting for the
    /// removals.
    async fn drop_pools(&self, gone: impl Fn(&PoolKey) -> bool) {
        let members: Vec<(Option<String>, Warm)> = {
            let mut state = self.service.inner.pools.state();
            state.sizes.retain(|key, _| !gone(key));
            let keys: Vec<PoolKey> = state
                .ready
                .keys()
                .filter(|key| gone(key))
                .cloned()
                .collect();
            keys.into_iter()
                .filter_map(|key| Some((key.server_id.clone(), state.ready.remove(&key)?)))
                .flat_map(|(server_id, members)| {
                    members
                        .into_iter()
                        .map(move |warm| (server_id.clone(), warm))
                })
                .collect()
        };
        for (server_id, warm) in members {
            self.service
                .inner
                .pools
                .state()
                .members
                .remove(&warm.sandbox_id);
            self.service
                .fleet()
                .release_agent(&warm.sandbox_id, server_id.as_deref());
            if let Err(error) = warm.engine.remove_container(&warm.container_id).await {
                warn!(container_id = %warm.container_id, error = %sandboxd_core::error::chain(&error), "could not remove a warm sandbox of a dropped pool");
            }
        }
    }
}

/// How long a member's warm-up command may take.
const WARM_UP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs what a first command runs (`sh -c`, as the sandbox user, in its workdir) once in
/// a new member, so that its claimer's first command does not pay for the container's
/// first program start (on this engine's fuse-overlayfs, about 5 ms of reading the shell
/// and its libraries into the new container's cache). Its outcome does not matter.
async fn warm_up(agent: &dyn sandboxd_contracts::SandboxChannel, workdir: &str) {
    let spec = sandboxd_contracts::ExecSpec {
        argv: vec!["sh".into(), "-c".into(), "true".into()],
        cwd: Some(workdir.to_owned()),
        env: Vec::new(),
        user: None,
        timeout: WARM_UP_TIMEOUT,
        max_output: 1024,
        stream: None,
    };
    let _ = agent.exec(spec).await;
}
