//! `sandbox.create`: a row in `creating`, then image, network, container, user and
//! workdir; the row ends `running`, or `error` with no container left behind.
//!
//! The server's engine is resolved and connected before the row is written. A create from
//! a snapshot runs on the snapshot's server, with its image, user, workdir and template;
//! a create with volumes runs on their server, and the root of each read-write mount is
//! made the sandbox user's through the engine's archive (`prepare_volumes`). Neither is
//! placed nor served by a pool. A create claims a warm member when a pool matches;
//! `start_container` also makes pool members. What is made inside a new container
//! (its user, volumes' roots and workdir) is `inside.rs`'s.

use sandboxd_contracts::{Engine, EngineError};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::Resources;
use sandboxd_core::error::Invalid;
use sandboxd_core::images;
use sandboxd_core::limits::DEFAULT_WORKDIR;
use sandboxd_core::model::{NetworkMode, NotRunning, Principal, Sandbox, SandboxStatus};
use sandboxd_core::plan::{self, NetworkPlan};
use sandboxd_core::validate::CreateSandbox;
use sandboxd_core::volumes;
use sandboxd_store::new_sandbox_id;
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

use super::Sandboxes;
use super::inside::WorkdirBy;
use crate::pools::Claimed;
use crate::{Resource, ServiceError, now_ms};
use serde_json::{Value, json};

/// What the audit log records of a create (never `envVars`).
pub(crate) fn created_metadata(row: &Sandbox, started: bool, pool: Option<&str>) -> Value {
    json!({
        "image": row.image,
        "template": row.template,
        "environmentId": row.environment_id,
        "networkMode": row.network_mode.as_str(),
        "cpu": row.cpu,
        "memoryMb": row.memory_mb,
        "started": started,
        "pool": pool,
    })
}

/// Where a new sandbox's egress list comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EgressList {
    /// The create's own: adding hosts, which needs `egress:decide`.
    Given,
    /// A sandbox's the caller may use already (a fork carries its source's).
    Copied,
}

/// How long a create waits for the new sandbox's agent to connect.
const AGENT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

impl Sandboxes {
    /// Creates and starts a sandbox for `caller`. An egress list it gives needs
    /// `egress:decide`, as adding to one later would.
    pub async fn create(
        &self,
        caller: &Principal,
        cmd: CreateSandbox,
    ) -> Result<Sandbox, ServiceError> {
        self.make(caller, cmd, EgressList::Given).await
    }

    /// Creates and starts a sandbox for `caller`; `list`: whether its egress list is
    /// the caller's own or one a sandbox the caller may use already holds (a fork's).
    #[tracing::instrument(skip_all, fields(environment_id = %cmd.environment_id))]
    pub(crate) async fn make(
        &self,
        caller: &Principal,
        cmd: CreateSandbox,
        list: EgressList,
    ) -> Result<Sandbox, ServiceError> {
        let environment = self
            .service
            .tenancy()
            .environment(&caller.organization_id, &cmd.environment_id)
            .await?
            .ok_or(ServiceError::NotFound("environment"))?;
        self.service
            .access()
            .check_create_in(caller, &environment.project_id)
            .await?;
        if list == EgressList::Given && cmd.network_mode == NetworkMode::Allowlist {
            sandboxd_core::egress_requests::check_list_given(caller, &cmd.egress)?;
        }
        // The server is checked first, and its engine connected before any row is
        // written: an unreachable server leaves nothing behind. Without one, placement
        // (when on) picks where the most room is. A warm pool of that engine serves the
        // create when it can.
        let mut cmd = cmd;
        // A snapshot lives on one server: the sandbox runs there.
        let snapshot = match cmd.image.snapshot.as_deref() {
            Some(snapshot_id) => {
                let snapshot = self
                    .snapshot_for(caller, snapshot_id, SandboxNeed::Read.permission())
                    .await?;
                if cmd.server_id.is_some() && cmd.server_id != snapshot.server_id {
                    return Err(Invalid::one(
                        "serverId",
                        format!(
                            "the snapshot lives on {}: a sandbox made from it runs there",
                            snapshot
                                .server_id
                                .as_deref()
                                .map_or("the local engine".to_owned(), |id| format!("server {id}"))
                        ),
                    )
                    .into());
                }
                cmd.server_id = snapshot.server_id.clone();
                Some(snapshot)
            }
            None => None,
        };
        // A template built in the project: its newest ready version (or the build
        // named), under its isolation unless the create names one, on any server (its
        // image is carried there).
        let built = match cmd.image.template.as_deref() {
            Some(name) if self.service.templates().get(name).is_none() => {
                let builds = self.service.builds();
                let (org, project) = (&caller.organization_id, &environment.project_id);
                let built = match cmd.image.template_build.as_deref() {
                    Some(build_id) => builds.ready_build(org, project, name, build_id).await?,
                    None => builds.ready_for_create(org, project, name).await?,
                }
                .ok_or(ServiceError::NotFound("template"))?;
                let floor = built
                    .isolation
                    .as_deref()
                    .and_then(sandboxd_core::model::Isolation::parse);
                if floor == Some(sandboxd_core::model::Isolation::Gvisor)
                    && cmd.isolation == Some(sandboxd_core::model::Isolation::Container)
                {
                    return Err(Invalid::one(
                        "isolation",
                        format!("the template {name} runs under gvisor, and so do its sandboxes"),
                    )
                    .into());
                }
                if cmd.isolation.is_none() {
                    cmd.isolation = built
                        .isolation
                        .as_deref()
                        .and_then(sandboxd_core::model::Isolation::parse);
                }
                Some(built)
            }
            _ => None,
        };
        // Volumes live on one server too: the sandbox runs where they are.
        let volumes_server = self
            .service
            .volumes()
            .mounts_server(caller, &cmd.volumes, &environment.project_id)
            .await?;
        if let Some(server) = &volumes_server {
            if (snapshot.is_some() || cmd.server_id.is_some()) && cmd.server_id != *server {
                let show = |s: &Option<String>| {
                    s.as_deref()
                        .map_or("the local engine".to_owned(), |id| format!("server {id}"))
                };
                return Err(Invalid::one(
                    if snapshot.is_some() { "snapshotId" } else { "serverId" },
                    format!(
                        "the volumes live on {}, the sandbox would run on {}: a sandbox runs where its volumes are",
                        show(server),
                        show(&cmd.server_id)
                    ),
                )
                .into());
            }
            cmd.server_id = server.clone();
        }
        if snapshot.is_none()
            && volumes_server.is_none()
            && cmd.server_id.is_none()
            && self.service.inner.options.placement
        {
            let want = Resources {
                cpu: cmd.cpu,
                memory_mb: cmd.memory_mb,
            };
            cmd.server_id = self.service.fleet().place(caller, want).await?;
        }
        let server = match &cmd.server_id {
            Some(server_id) => Some(self.service.access().server_for(caller, server_id).await?),
            None if self.service.inner.options.remote_only => {
                return Err(Invalid::one(
                    "serverId",
                    "is required: sandboxes run on remote servers only here",
                )
                .into());
            }
            None => None,
        };
        if let Some(host) = self.service.inner.options.host_cpus
            && cmd.server_id.is_none()
            && cmd.cpu > host as f64
        {
            return Err(Invalid::one(
                "cpu",
                format!("must be at most {host}: the engine's host has {host} CPUs"),
            )
            .into());
        }
        if let Some(image) = &cmd.image.image
            && !images::allowed(&self.service.inner.options.allowed_images, image)
        {
            return Err(Invalid::one(
                "image",
                format!(
                    "{} is not among the images this server allows ({})",
                    images::normalize(image),
                    self.service.inner.options.allowed_images.join(", ")
                ),
            )
            .into());
        }
        // A sandbox made from a snapshot is held to its template's isolation and to its
        // source sandbox's, as a fork is; none runs below the server's floor.
        let template = cmd
            .image
            .template
            .clone()
            .or_else(|| snapshot.as_ref().and_then(|s| s.template.clone()));
        let source = match &snapshot {
            Some(snapshot) => self
                .service
                .store()
                .sandbox(&snapshot.sandbox_id)
                .await?
                .and_then(|source| plan::isolation_of(source.runtime.as_deref())),
            None => None,
        };
        if cmd.isolation.is_none()
            && let Some(source) = source
            && !sandboxd_core::isolation_floor::meets(
                self.service
                    .runtime_of(None, template.as_deref())
                    .as_deref(),
                source.as_str(),
            )
        {
            cmd.isolation = Some(source);
        }
        let runtime = self.service.runtime_of(cmd.isolation, template.as_deref());
        self.service
            .check_isolation(runtime.as_deref(), template.as_deref(), source)?;
        if cmd.auto_pause == Some(sandboxd_core::model::PauseMemory::Disk)
            && (!plan::under_gvisor(runtime.as_deref()) || cmd.server_id.is_some())
        {
            return Err(Invalid::one(
                "autoPause",
                "\"disk\" needs a sandbox of the gvisor tier on the local engine (its runtime saves its processes): ask for \"isolation\": \"gvisor\", or pause in memory (true)",
            )
            .into());
        }
        if let Some(snapshot) = &snapshot
            && snapshot.memory.is_some()
        {
            if !plan::under_gvisor(runtime.as_deref()) {
                return Err(Invalid::one(
                    "isolation",
                    "a snapshot with memory starts under gvisor, whose runtime saved its processes",
                )
                .into());
            }
            if !cmd.volumes.is_empty() {
                return Err(Invalid::one(
                    "volumes",
                    "a sandbox started from a snapshot with memory takes no volume: its processes were saved without one",
                )
                .into());
            }
        }
        if plan::under_gvisor(runtime.as_deref()) && cmd.network_mode == NetworkMode::Internet {
            return Err(Invalid::one(
                "networkMode",
                "`internet` is not available under gVisor, which has no network interface but loopback here: use `isolated`, or `allowlist` for the hosts it may reach",
            )
            .into());
        }
        // A sandbox with credentials is made for them (they are kept before it starts);
        // a pool's members run under its template's runtime.
        // A built template's pool is its version's, under its isolation.
        let built_shape = built.as_ref().and_then(sandboxd_core::pools::Built::of);
        let pool_runtime = self.service.runtime_of(
            built_shape
                .as_ref()
                .and_then(|b| b.isolation.as_deref())
                .and_then(sandboxd_core::model::Isolation::parse),
            cmd.image.template.as_deref(),
        );
        let mut demand = None;
        if cmd.egress_credentials.is_empty()
            && runtime == pool_runtime
            && snapshot.is_none()
            && built.is_none() == built_shape.is_none()
        {
            match self
                .service
                .pools()
                .claim(
                    caller,
                    &cmd,
                    built_shape.as_ref(),
                    &environment,
                    server.as_ref(),
                )
                .await?
            {
                Claimed::Warm(warm) => {
                    if let Some(build) = &built {
                        self.service
                            .builds()
                            .begin(caller, &warm.sandbox_id, build)
                            .await;
                    }
                    return Ok(*warm);
                }
                Claimed::Cold(pool) => demand = pool,
            }
        }
        let engine = self
            .service
            .fleet()
            .engine_of(cmd.server_id.as_deref())
            .await?;
        if let Some(wanted) = runtime.as_deref()
            && runtime.as_deref() != self.service.runtime()
        {
            // Named by the create or its template; the server's own was checked at start.
            if let Some(offered) = self
                .service
                .fleet()
                .offered_runtimes(cmd.server_id.as_deref(), &engine, wanted)
                .await?
            {
                let isolation = plan::isolation_tier(Some(wanted));
                return Err(Invalid::one(
                    "isolation",
                    format!(
                        "{isolation} is not available on this server: its engine has no `{wanted}` runtime (it offers {}); scripts/gvisor.sh installs and registers gVisor's",
                        offered.join(", ")
                    ),
                )
                .into());
            }
        }
        let template = cmd
            .image
            .template
            .as_deref()
            .and_then(|name| self.service.templates().get(name));
        let image = match &snapshot {
            Some(snapshot) => snapshot.image.clone(),
            None => cmd
                .image
                .image
                .clone()
                .or_else(|| template.map(|t| t.image.clone()))
                .or_else(|| built.as_ref().and_then(|b| b.image.clone()))
                .ok_or(ServiceError::NotFound("template"))?,
        };
        let now = now_ms();
        let sandbox_id = new_sandbox_id()?;
        let row = Sandbox {
            name: cmd
                .name
                .clone()
                .unwrap_or_else(|| format!("sandbox-{}", &sandbox_id[..8].to_lowercase())),
            sandbox_id,
            organization_id: caller.organization_id.clone(),
            project_id: environment.project_id.clone(),
            environment_id: environment.environment_id.clone(),
            server_id: cmd.server_id.clone(),
            image,
            template: match &snapshot {
                Some(snapshot) => snapshot.template.clone(),
                None => cmd.image.template.clone(),
            },
            container_id: None,
            status: SandboxStatus::Creating,
            cpu: cmd.cpu,
            memory_mb: cmd.memory_mb,
            pids_limit: cmd.pids_limit,
            timeout_ms: cmd.timeout_ms,
            network_mode: cmd.network_mode,
            workdir: cmd
                .workdir
                .clone()
                .or_else(|| snapshot.as_ref().map(|s| s.workdir.clone()))
                .or_else(|| template.map(|t| t.workdir.clone()))
                .or_else(|| built.as_ref().and_then(|b| b.workdir.clone()))
                .unwrap_or_else(|| DEFAULT_WORKDIR.into()),
            user: match &snapshot {
                Some(snapshot) => snapshot.user.clone(),
                None => template.and_then(|t| t.user.clone()),
            },
            runtime,
            created_at: now,
            expires_at: None,
            last_activity_at: None,
            killed_at: None,
            // The variables (secrets, often) are given to every command, never kept in
            // the container's configuration: the engine writes that to its disk in
            // plain text, and a commit (a snapshot) copies it into the image.
            env_per_exec: cmd.env_vars.is_some(),
            labels: cmd.labels.clone(),
            egress: cmd.egress.clone(),
            auto_pause: cmd.auto_pause,
            fixed_timeout: cmd.fixed_timeout,
            paused_timeout_ms: cmd.paused_timeout_ms,
            paused_at: None,
            hibernated_bytes: None,
            volumes: cmd.volumes.clone(),
        };
        self.service
            .store()
            .insert_sandbox(
                &row,
                cmd.env_vars.as_deref(),
                &caller.user_id,
                &self.service.inner.options.quotas,
            )
            .await?;
        if !cmd.egress_credentials.is_empty() {
            self.service
                .store()
                .set_egress_credentials(&row.sandbox_id, &cmd.egress_credentials)
                .await?;
        }
        let restored = snapshot
            .as_ref()
            .and_then(|snapshot| snapshot.memory.as_ref().map(|memory| (snapshot, memory)));
        let outcome = match restored {
            Some((snapshot, memory)) => self.start_restored(&engine, &row, snapshot, memory).await,
            None => self
                .start_container(&engine, &row, None)
                .await
                .map_err(ServiceError::from),
        };
        self.service
            .access()
            .record(
                &row.organization_id,
                Some(caller),
                "sandbox.create",
                Resource::sandbox(&row),
                created_metadata(&row, outcome.is_ok(), None),
            )
            .await;
        match outcome {
            Ok((container_id, user)) => {
                let now = self
                    .service
                    .store()
                    .mark_running(&row.sandbox_id, &container_id, user.as_deref(), now_ms())
                    .await?
                    .ok_or(ServiceError::NotFound("sandbox"))?;
                if now.status != SandboxStatus::Running {
                    // Killed (or given up on by reconcile) while it was made: it stays so,
                    // and the container made for it goes.
                    info!(sandbox_id = %row.sandbox_id, status = now.status.as_str(), "sandbox ended while it was created");
                    self.service
                        .fleet()
                        .release_agent(&row.sandbox_id, row.server_id.as_deref());
                    if let Err(error) = engine.destroy_container(&container_id).await {
                        warn!(sandbox_id = %row.sandbox_id, error = %sandboxd_core::error::chain(&error), "could not remove the container of a sandbox ended while it was created; reconcile will");
                    }
                    return Err(ServiceError::NotRunning(NotRunning(now.status)));
                }
                info!(sandbox_id = %row.sandbox_id, image = %row.image, "sandbox running");
                if let Some(build) = &built {
                    self.service
                        .builds()
                        .begin(caller, &row.sandbox_id, build)
                        .await;
                }
                // Only a create that ran counts for its shape's pool: one of an image
                // that cannot be made never has a pool.
                if let Some(pool) = demand {
                    self.service
                        .pools()
                        .note_demand(&pool, &row.organization_id);
                }
                Ok(now)
            }
            Err(error) => {
                warn!(sandbox_id = %row.sandbox_id, error = %sandboxd_core::error::chain(&error), "sandbox creation failed");
                self.service
                    .store()
                    .set_status(&row.sandbox_id, SandboxStatus::Error)
                    .await?;
                Err(error)
            }
        }
    }

    /// Image, network, container; on any failure after the container exists, the
    /// container is removed. Returns the container id and the resolved `uid:gid`. The
    /// sandbox's variables are not in the container's environment (see `env_per_exec`).
    pub(crate) async fn start_container(
        &self,
        engine: &Arc<dyn Engine>,
        row: &Sandbox,
        pool: Option<&str>,
    ) -> Result<(String, Option<String>), EngineError> {
        // A built template's image is carried to a server that lacks it.
        if let Some(server_id) = &row.server_id
            && crate::builds::carry::is_built_image(&row.image)
        {
            self.service
                .builds()
                .carry(server_id, engine, &row.image)
                .await?;
        }
        let ensured = engine.ensure_image(&row.image).await?;
        let mut preparation = self.preparation(row, &ensured);
        // The agent's socket is a local one: sandboxes of remote servers are served
        // through their engine.
        let agent = match &row.server_id {
            None => match self.service.agents().listen(&row.sandbox_id) {
                Ok(agent) => agent,
                Err(error) => {
                    warn!(sandbox_id = %row.sandbox_id, error = %sandboxd_core::error::chain(&error), "sandbox runs without its agent");
                    None
                }
            },
            Some(server_id) => {
                self.service
                    .fleet()
                    .listen_remote(&row.sandbox_id, server_id, true)
                    .await
            }
        };
        let mut plan = plan::plan_container(row, None, self.service.instance_id(), agent.as_ref());
        if let Some(preparation) = &preparation {
            plan.image = preparation.image(row).to_owned();
        }
        if agent.is_some() {
            // The first lease of its dead-man's switch: its timeout and the grace, until
            // the lease pass renews it.
            let first = Duration::from_millis(row.timeout_ms.max(0) as u64)
                + self.service.duties().lease_grace();
            plan.env.push(format!(
                "{}={}",
                sandboxd_agent_protocol::LEASE_VAR,
                first.as_millis()
            ));
        }
        if let Some(pool) = pool {
            plan.labels
                .insert(plan::LABEL_POOL.to_owned(), pool.to_owned());
        }
        if let NetworkPlan::Bridge(name) = &plan.network {
            engine.ensure_bridge(name).await?;
        }
        let mut made = engine.create_container(&plan).await;
        if let (Err(EngineError::NotFound { what: "image" }), Some(preparation)) =
            (&made, &mut preparation)
            && preparation.ready
        {
            self.prepared_gone(preparation);
            preparation.ready = false;
            plan.image = row.image.clone();
            made = engine.create_container(&plan).await;
        }
        let container_id = match made {
            Ok(id) => id,
            Err(error) => {
                self.service
                    .fleet()
                    .release_agent(&row.sandbox_id, row.server_id.as_deref());
                return Err(error);
            }
        };
        let prepared = async {
            engine.start_container(&container_id).await?;
            let hello = match agent {
                Some(_) => {
                    self.service
                        .agents()
                        .wait_connected(&row.sandbox_id, AGENT_CONNECT_TIMEOUT)
                        .await
                }
                None => None,
            };
            if agent.is_some() && hello.is_none() {
                warn!(sandbox_id = %row.sandbox_id, "agent did not connect; the engine's exec serves this sandbox");
            }
            let user = match (row.user.clone(), hello) {
                (Some(user), _) => Some(user),
                (None, Some(hello)) => Some(format!("{}:{}", hello.uid, hello.gid)),
                (None, None) => self.image_user(engine, &container_id, &ensured.user).await,
            };
            self.prepare_volumes(engine, &container_id, row, user.as_deref())
                .await?;
            // A workdir in a read-only volume is as the volume has it.
            let read_only_workdir = row
                .volumes
                .iter()
                .any(|m| m.read_only && volumes::is_under(&row.workdir, &m.path));
            if !read_only_workdir
                && self
                    .prepare_workdir(
                        engine,
                        &row.sandbox_id,
                        &container_id,
                        &row.workdir,
                        user.as_deref(),
                    )
                    .await?
                    == WorkdirBy::Engine
                && let Some(preparation) = &preparation
            {
                self.prepare_later(engine, row, preparation);
            }
            Ok::<_, EngineError>(user)
        };
        match prepared.await {
            Ok(user) => Ok((container_id, user)),
            Err(error) => {
                self.service
                    .fleet()
                    .release_agent(&row.sandbox_id, row.server_id.as_deref());
                if let Err(cleanup) = engine.remove_container(&container_id).await {
                    warn!(%container_id, error = %cleanup, "could not remove the container of a failed sandbox");
                }
                Err(error)
            }
        }
    }
}
