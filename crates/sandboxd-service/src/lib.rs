//! The sandbox service: each operation checks its input, the caller's access and the
//! sandbox's state, then drives the store, the engine and the agent. It knows no HTTP:
//! the server's routes, WebSockets and MCP tools call it. One file per operation group.
//!
//! `Service` holds the shared state (store, agent hub and channels, templates, options,
//! the removals running in the background, per-sandbox caches) and hands out each part;
//! no part has more than about thirty methods. Leaf parts hold only what they name and
//! are built in `Service::new`: `Access`, `Tenancy`, `Fleet`, `Replicas`. Sandbox parts
//! are views on the service (`service.sandboxes()`, `.commands()`, …: a clone of its
//! `Arc`) and need the sandbox's row, engine and channel, which the service resolves.
//! `Service` itself has 48 methods: seventeen hand out a part, six read its options, the
//! rest are what every part shares (the pause lock and `wake`, restarting a stopped
//! container, the background removals). A sandbox's `envVars` are given per command
//! (`command_env`), never in its container's configuration; `check_isolation` checks the
//! isolation floor wherever a container is made, claimed or started again. Entry points
//! carry a `tracing` span with the sandbox id, so what the service logs beneath names
//! its sandbox.

mod access;
mod activity;
mod builds;
mod channel;
mod commands;
mod duties;
mod egress;
mod error;
mod executor;
mod files;
mod fleet;
mod journal;
mod pools;
mod ports;
mod recovery;
mod replicas;
mod sandboxes;
mod servers;
mod tenancy;
mod traffic;
mod volumes;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sandboxd_contracts::{AgentChannels, AgentHost, Engine, ExecSpec, SandboxChannel, Via};
use sandboxd_core::model::Sandbox;
use sandboxd_core::templates::Templates;
use sandboxd_store::Store;

pub use access::{Access, Resource};
pub use activity::{ACTIVITY_DROPPED, Activity, ActivityPage};
pub use builds::{BuildOptions, Builds, CONTEXT_KEPT_MS, LOG_PAGE, UploadPlace, UploadedContext};
pub use commands::{Commands, ContextRun, Launch, NewContext, RunOutput};
pub use duties::{DEFAULT_LEASE_GRACE, Duties, ReapReport, ReconcileReport};
pub use egress::{
    EGRESS_BYTES, EGRESS_DECISIONS, EGRESS_LOG_DROPPED, Egress, EgressError, EgressLogPage, Gate,
    Upstream,
};
pub use error::ServiceError;
pub use files::Files;
pub use fleet::Fleet;
pub use pools::{POOL_READY, PoolKey, PoolSeries, Pools};
pub use ports::{Admitted, Exposed, Link, Ports};
pub use replicas::{HEARTBEAT_EVERY, Replicas};
pub use servers::Servers;
pub use tenancy::Tenancy;

/// Counter of the operations each path served (`path` = `agent` | `engine`).
pub const SERVED: &str = "sandboxd_operations_served_total";
pub use sandboxd_contracts::Download;
pub use sandboxes::{Revival, Sandboxes};
pub use volumes::Volumes;

/// Everything the operations need, shared by every request.
#[derive(Debug, Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    access: Access,
    tenancy: Tenancy,
    agents: Arc<dyn AgentHost>,
    templates: Templates,
    instance_id: String,
    paths: PathCounts,
    options: Options,
    pools: pools::Stock,
    /// The environment variables of pooled sandboxes, given to each of their commands.
    exec_env: std::sync::Mutex<std::collections::HashMap<String, Arc<EnvPairs>>>,
    /// Removals of killed sandboxes' containers, running in the background.
    removals: tokio_util::task::TaskTracker,
    /// The OOM-kill count last read in each sandbox.
    oom_seen: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// Recent restarts of stopped containers.
    restarts: std::sync::Mutex<sandboxes::revive::RestartBudget>,
    /// The engines sandboxes run on, and placement.
    fleet: Fleet,
    /// Sandboxes this replica listens for whose row was missing at the last pass of
    /// `release_ended_agents_once`.
    agents_unrecorded: std::sync::Mutex<std::collections::HashSet<String>>,
    /// This replica's address and the others', for forwarding.
    replicas: Replicas,
    /// The last CPU reading of each sandbox, for `sandbox.stats`.
    readings: sandboxes::usage::Readings,
    /// The readings over time of each running sandbox whose agent this replica holds,
    /// for `sandbox.metrics`.
    histories: sandboxes::usage::Histories,
    /// The writer of the egress log.
    egress_log: egress::Recorder,
    /// The writer of the activity timelines.
    timeline: Arc<activity::Timeline>,
    /// sandboxd's own addresses, which egress never reaches.
    own_host: egress::OwnHost,
    /// Keeps the pauses and resumes of one sandbox apart.
    freezes: sandboxes::pause::Freezes,
    /// Moves on each time a build of this replica writes log lines, so live readers
    /// look again at once.
    build_logs: tokio::sync::watch::Sender<u64>,
    /// The images prepared for sandboxes on each engine.
    prepared: sandboxes::prepared::Prepared,
    /// Built templates' images being carried to servers.
    carries: builds::carry::Carries,
    /// The builds this server runs at once (`BuildOptions::at_once`), first come first
    /// served.
    build_slots: Arc<tokio::sync::Semaphore>,
    /// The build contexts being uploaded, per organization.
    context_uploads: builds::context::Uploads,
}

/// Environment variables as name and value.
type EnvPairs = Vec<(String, String)>;

/// How the service runs sandboxes and what it records.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Record every command in the audit log (as a keyed hash).
    pub audit_exec: bool,
    /// The engine runtime of new sandboxes; `None`: the engine's default.
    pub runtime: Option<String>,
    /// The engine's name for gVisor's runtime (`"isolation": "gvisor"`).
    pub gvisor_runtime: String,
    /// The weakest isolation a sandbox may run under (`runtime`'s own tier raises it).
    pub min_isolation: Option<sandboxd_core::model::Isolation>,
    /// Warm pools: template name → members kept ready.
    pub pools: std::collections::BTreeMap<String, usize>,
    /// How far pools kept for demand (shapes of create without a configured pool) may
    /// grow.
    pub warm_on_demand: sandboxd_core::pool_demand::DemandBounds,
    /// Patterns of the images callers may ask for (`sandboxd_core::images`); empty: any.
    pub allowed_images: Vec<String>,
    /// What each organization may hold at once.
    pub quotas: sandboxd_core::quotas::Quotas,
    /// CPUs of the engine's host: no sandbox gets more. `None`: unknown, unchecked.
    pub host_cpus: Option<i64>,
    /// The remote-server contract; `None`: local sandboxes only.
    pub remote: Option<Arc<dyn sandboxd_contracts::Connector>>,
    /// Sandboxes run on remote servers only: a create without `serverId` is refused.
    pub remote_only: bool,
    /// A create without `serverId` goes where the most room is (the local engine or a
    /// reachable server the caller may use) instead of to the local engine.
    pub placement: bool,
    /// Memory of the engine's host, in MiB (the local engine's capacity for placement).
    pub host_memory_mb: Option<i64>,
    /// The cap of one streamed transfer; `None`: 4 GiB.
    pub max_transfer_bytes: Option<u64>,
    /// Which organizations may register remote servers.
    pub server_registration: sandboxd_core::access::ServerRegistration,
    /// How long a sandbox outlives its expiry when nothing more is heard from sandboxd
    /// (its agent's dead-man's switch); `None`: a minute.
    pub lease_grace: Option<std::time::Duration>,
    /// A gVisor sandbox paused in memory longer than this is moved to disk by the
    /// reaper (`[pause] to_disk_after_secs`); `None`: never.
    pub pause_to_disk_after: Option<std::time::Duration>,
    /// Where agents' channels come from instead of the hub (a test's double).
    pub agent_channels: Option<Arc<dyn AgentChannels>>,
    /// Connections to a sandbox's ports and their traffic do not count as its activity
    /// (a public page polled from outside does not keep a sandbox alive).
    pub port_traffic_ignored: bool,
    /// The operator's egress settings: names answered before DNS, and the special
    /// networks `allowlist` sandboxes may reach.
    pub egress: sandboxd_core::egress::Operator,
    /// What bounds template builds.
    pub builds: BuildOptions,
    /// How much of each sandbox's activity timeline is kept, and for how long.
    pub activity: sandboxd_core::activity::Keeping,
    /// Keep no activity timelines (`[activity] enabled = false`).
    pub activity_off: bool,
}

/// How many operations each path served: the agent, or the engine's exec and archive
/// API (the fallback).
#[derive(Debug, Default)]
pub struct PathCounts {
    pub agent: AtomicU64,
    pub engine: AtomicU64,
}

impl Service {
    pub fn new(
        store: Store,
        engine: Arc<dyn Engine>,
        agents: Arc<dyn AgentHost>,
        templates: Templates,
        instance_id: String,
        options: Options,
    ) -> Self {
        let channels = options
            .agent_channels
            .clone()
            .unwrap_or_else(|| agents.clone() as Arc<dyn AgentChannels>);
        let timeline = Arc::new(activity::Timeline::new(
            store.clone(),
            options.activity,
            !options.activity_off,
        ));
        let access = Access::new(store.clone(), timeline.clone());
        let tenancy = Tenancy::new(store.clone(), access.clone(), options.quotas);
        let replicas = Replicas::new(store.clone(), agents.clone(), channels.clone());
        let removals = tokio_util::task::TaskTracker::new();
        let egress_log = egress::Recorder::new(egress::EgressBook(store.clone()));
        let build_slots = options.builds.at_once.max(1);
        let fleet = Fleet::new(
            store.clone(),
            access.clone(),
            engine,
            options.remote.clone(),
            fleet::Agents {
                host: agents.clone(),
                channels: channels.clone(),
            },
            removals.clone(),
            fleet::Room {
                remote_only: options.remote_only,
                host_cpus: options.host_cpus,
                host_memory_mb: options.host_memory_mb,
            },
        );
        Self {
            inner: Arc::new(Inner {
                access,
                tenancy,
                store,
                agents,
                templates,
                instance_id,
                paths: PathCounts::default(),
                pools: pools::Stock::new(options.pools.clone(), options.warm_on_demand),
                options,
                oom_seen: Default::default(),
                restarts: Default::default(),
                fleet,
                agents_unrecorded: Default::default(),
                replicas,
                readings: Default::default(),
                histories: Default::default(),
                egress_log,
                timeline,
                own_host: egress::OwnHost::default(),
                exec_env: Default::default(),
                removals,
                freezes: Default::default(),
                build_logs: tokio::sync::watch::Sender::new(0),
                prepared: Default::default(),
                carries: Default::default(),
                build_slots: Arc::new(tokio::sync::Semaphore::new(build_slots)),
                context_uploads: Default::default(),
            }),
        }
    }

    /// Whether every command is recorded in the audit log (as a keyed hash).
    pub fn audits_exec(&self) -> bool {
        self.inner.options.audit_exec
    }

    /// The engine runtime new sandboxes run under.
    pub fn runtime(&self) -> Option<&str> {
        self.inner.options.runtime.as_deref()
    }

    pub fn agents(&self) -> &Arc<dyn AgentHost> {
        &self.inner.agents
    }

    /// The channel of the sandbox's agent, when it is connected.
    pub(crate) fn agent_channel(&self, sandbox_id: &str) -> Option<Arc<dyn SandboxChannel>> {
        self.fleet().agent_channel(sandbox_id)
    }

    /// Operations served by each path since start.
    pub fn path_counts(&self) -> &PathCounts {
        &self.inner.paths
    }

    fn count(&self, path: Via) {
        let counter = match path {
            Via::Agent => &self.inner.paths.agent,
            Via::Engine => &self.inner.paths.engine,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(SERVED, "path" => path.as_str()).increment(1);
    }

    /// The environment a command in `sandbox` runs with besides its own `env`: the
    /// sandbox's variables (never in its container's configuration, see
    /// `Sandbox::env_per_exec`), nothing when it has none. `env` comes last and wins.
    /// A running sandbox of the caller's and its connected agent.
    pub(crate) async fn agent_for(
        &self,
        caller: &sandboxd_core::model::Principal,
        sandbox_id: &str,
        need: sandboxd_core::access::SandboxNeed,
    ) -> Result<(Sandbox, Arc<dyn SandboxChannel>), ServiceError> {
        let sandbox = self.access().sandbox_for(caller, sandbox_id, need).await?;
        let agent = self.executor(&sandbox).await?.agent_only()?;
        self.store().touch(&sandbox.sandbox_id, now_ms()).await?;
        self.served(&sandbox.sandbox_id, Via::Agent);
        Ok((sandbox, agent))
    }

    pub(crate) async fn command_env(
        &self,
        sandbox: &Sandbox,
        env: Vec<(String, String)>,
    ) -> Result<Vec<(String, String)>, ServiceError> {
        if !sandbox.env_per_exec {
            return Ok(env);
        }
        let vars = self.sandbox_vars(sandbox).await?;
        Ok(vars.iter().cloned().chain(env).collect())
    }

    /// A sandbox's own `envVars` (but those sandboxd reserves), read once and kept.
    pub(crate) async fn sandbox_vars(
        &self,
        sandbox: &Sandbox,
    ) -> Result<Arc<EnvPairs>, ServiceError> {
        let cached = self
            .inner
            .exec_env
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&sandbox.sandbox_id)
            .cloned();
        let vars = match cached {
            Some(vars) => vars,
            None => {
                let text = self
                    .store()
                    .sandbox_env_vars(&sandbox.sandbox_id)
                    .await?
                    .unwrap_or_default();
                let vars: Vec<(String, String)> = sandboxd_core::env_vars::parse(&text)
                    .into_iter()
                    .filter_map(|pair| {
                        let (key, value) = pair.split_once('=')?;
                        Some((key.to_owned(), value.to_owned()))
                    })
                    .filter(|(key, _)| {
                        !sandboxd_core::plan::reserved_var(key, sandbox.network_mode)
                    })
                    .collect();
                let vars = Arc::new(vars);
                self.inner
                    .exec_env
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(sandbox.sandbox_id.clone(), vars.clone());
                vars
            }
        };
        Ok(vars)
    }

    /// Runs `work` while the sandbox's activity is recorded, so the store's write does not
    /// add to the request's latency. The work has happened by the time a failed write is
    /// known, so its outcome is returned all the same (reporting a failure would invite
    /// a retry that runs the command twice); the failure is logged.
    pub(crate) async fn while_touching<T>(
        &self,
        sandbox_id: &str,
        work: impl Future<Output = T>,
    ) -> T {
        let (touched, output) = tokio::join!(self.store().touch(sandbox_id, now_ms()), work);
        if let Err(error) = touched {
            tracing::warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "could not record the sandbox's activity");
        }
        output
    }

    /// Forgets what is kept in memory for a sandbox that is gone.
    pub(crate) fn forget(&self, sandbox_id: &str) {
        self.inner
            .oom_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(sandbox_id);
        self.inner
            .exec_env
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(sandbox_id);
    }

    /// Container removals of killed sandboxes still running in the background.
    pub fn removals_pending(&self) -> usize {
        self.inner.removals.len()
    }

    /// Waits (up to `limit`) for the background removals to finish.
    pub async fn finish_removals(&self, limit: Duration) {
        self.inner.removals.close();
        if tokio::time::timeout(limit, self.inner.removals.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                pending = self.inner.removals.len(),
                "container removals still running at shutdown; reconcile removes them at the next start"
            );
        }
    }

    /// Who may act on what, and the audit trail.
    pub fn access(&self) -> &Access {
        &self.inner.access
    }

    /// Organizations, members, keys, projects, environments and the audit log.
    pub fn tenancy(&self) -> &Tenancy {
        &self.inner.tenancy
    }

    /// This replica among the others: where a request for another's agent goes.
    pub fn replicas(&self) -> &Replicas {
        &self.inner.replicas
    }

    /// The engines sandboxes run on: the local one and the remote servers'.
    pub fn fleet(&self) -> &Fleet {
        &self.inner.fleet
    }

    /// The passes sandboxd runs by itself: reaper, reconcile, leases.
    pub fn duties(&self) -> Duties {
        Duties::new(self.clone())
    }

    /// The warm pools.
    pub fn pools(&self) -> Pools {
        Pools::new(self.clone())
    }

    /// The remote servers of organizations.
    pub fn servers(&self) -> Servers {
        Servers::new(self.clone())
    }

    /// Commands, processes, contexts and terminals in sandboxes.
    pub fn commands(&self) -> Commands {
        Commands::new(self.clone())
    }

    /// Files of sandboxes and streamed transfers.
    pub fn files(&self) -> Files {
        Files::new(self.clone())
    }

    /// Connections to the ports of sandboxes.
    pub fn ports(&self) -> Ports {
        Ports::new(self.clone())
    }

    /// Sandboxes' activity timelines.
    pub fn activity(&self) -> Activity {
        Activity::new(self.clone())
    }

    /// The writer of the activity timelines.
    pub(crate) fn timeline(&self) -> &activity::Timeline {
        &self.inner.timeline
    }

    /// The egress of `allowlist` sandboxes.
    pub fn egress(&self) -> Egress {
        Egress::new(self.clone())
    }

    /// Creating, listing, extending and ending sandboxes.
    pub fn sandboxes(&self) -> Sandboxes {
        Sandboxes::new(self.clone())
    }

    /// The `volume.*` operations.
    pub fn builds(&self) -> Builds {
        Builds::new(self.clone())
    }

    pub fn volumes(&self) -> Volumes {
        Volumes::new(self.clone())
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The engine sandboxes run on.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        self.inner.fleet.local()
    }

    pub fn templates(&self) -> &Templates {
        &self.inner.templates
    }

    /// The runtime of a sandbox whose create asks for `asked` (else its template's
    /// isolation, else the server's).
    pub fn runtime_of(
        &self,
        asked: Option<sandboxd_core::model::Isolation>,
        template: Option<&str>,
    ) -> Option<String> {
        use sandboxd_core::model::Isolation;
        let isolation = asked
            .or_else(|| {
                template
                    .and_then(|name| self.templates().get(name))
                    .and_then(|t| t.isolation)
            })
            .or_else(|| {
                // A create that asks nothing gets the floor when the server's own
                // runtime is below it (`min_isolation = "gvisor"` over runc).
                let floor = self.isolation_floor();
                (floor == Isolation::Gvisor.as_str()
                    && !sandboxd_core::isolation_floor::meets(self.runtime(), floor))
                .then_some(Isolation::Gvisor)
            });
        sandboxd_core::plan::runtime_for(
            isolation,
            self.runtime(),
            &self.inner.options.gvisor_runtime,
        )
    }

    /// The server's isolation floor: `min_isolation`, raised by its own runtime's tier.
    pub fn isolation_floor(&self) -> &'static str {
        sandboxd_core::isolation_floor::server_floor(
            self.inner.options.min_isolation,
            self.runtime(),
        )
    }

    /// Refuses a sandbox under `runtime` that is less isolated than the server's floor,
    /// its template's isolation or its source's (`source`: the sandbox a snapshot or
    /// fork was taken of), naming `isolation` and the floor (a 400).
    pub fn check_isolation(
        &self,
        runtime: Option<&str>,
        template: Option<&str>,
        source: Option<sandboxd_core::model::Isolation>,
    ) -> Result<(), ServiceError> {
        use sandboxd_core::isolation_floor::{floor_of, refusal};
        let by_template = template.and_then(|name| {
            let isolation = self.templates().get(name)?.isolation?;
            Some((name, isolation))
        });
        let (floor, set_by) = floor_of(self.isolation_floor(), by_template, source);
        match refusal(runtime, floor, &set_by.describe()) {
            None => Ok(()),
            Some(why) => Err(sandboxd_core::error::Invalid::one("isolation", why).into()),
        }
    }

    /// The id containers of this installation are labelled with.
    pub fn instance_id(&self) -> &str {
        &self.inner.instance_id
    }
}

pub use sandboxd_store::now_ms;

/// Timeout of the small commands sandboxd runs itself (user lookup, mkdir, listing).
const INTERNAL_EXEC_TIMEOUT: Duration = Duration::from_secs(15);

/// A command sandboxd runs itself: argv without a shell, from `/`, as the sandbox user.
fn internal_exec(argv: Vec<String>, max_output: usize) -> ExecSpec {
    ExecSpec {
        argv,
        cwd: Some("/".into()),
        env: Vec::new(),
        user: None,
        timeout: INTERNAL_EXEC_TIMEOUT,
        max_output,
        stream: None,
    }
}
