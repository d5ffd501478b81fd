//! The HTTP server of sandboxd: the REST API and its OpenAPI document, authentication,
//! and the background loops (reaper, reconcile).
#![forbid(unsafe_code)]

mod app_connections;
mod auth;
mod body_limit;
pub mod config;
mod dashboard;
pub mod data_dir;
mod e2b;
mod egress;
mod error;
mod extract;
mod forward;
mod loops;
mod mcp;
mod metrics;
mod openapi;
mod panic;
pub mod previews;
mod procedures;
mod rate_limit;
mod request_log;
mod routes;
pub mod time;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get};
use axum::serve::ListenerExt as _;
use sandboxd_contracts::{Engine, EngineError};
use sandboxd_core::templates::Templates;
use sandboxd_store::{Bootstrap, Store};

use crate::agent::AgentHub;
use tokio::net::TcpListener;
use tracing::{info, warn};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;

pub use config::Config;
pub use routes::session::CookieSecure;
pub use sandboxd_agent_host as agent;
pub use sandboxd_contracts as contracts;
pub use sandboxd_service as service;
pub use service::Service;

/// How long a WebSocket session may stay open unless configured: a day, the longest a
/// sandbox can stay idle.
pub const DEFAULT_SESSION_LIFETIME_SECS: u64 = 24 * 60 * 60;

/// The engines sandboxes run on, as the caller connects them (the binary: the local
/// Docker engine and Docker over SSH for remote servers).
#[derive(Clone)]
pub struct Engines {
    /// The engine of this host.
    pub local: Arc<dyn Engine>,
    /// The contract that reaches remote servers; `None`: sandboxes run on the local
    /// engine only and `server.*` answers 503.
    pub remote: Option<Arc<dyn sandboxd_contracts::Connector>>,
}

impl Engines {
    /// The local engine only.
    pub fn local(engine: Arc<dyn Engine>) -> Self {
        Self {
            local: engine,
            remote: None,
        }
    }

    /// Remote servers reached through `connector` too.
    pub fn with_remote(self, connector: Arc<dyn sandboxd_contracts::Connector>) -> Self {
        Self {
            remote: Some(connector),
            ..self
        }
    }
}

impl std::fmt::Debug for Engines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engines")
            .field("remote", &self.remote.is_some())
            .finish_non_exhaustive()
    }
}

/// Shared state of the handlers.
#[derive(Debug, Clone)]
pub struct AppState {
    pub service: Service,
    pub mcp: mcp::McpSettings,
    pub limits: Arc<rate_limit::UserLimiter>,
    pub sessions: routes::session::SessionSettings,
    pub previews: previews::PreviewSettings,
    /// The domain of E2B's SDKs' `E2B_DOMAIN`, when the server has one.
    pub e2b_domain: Option<String>,
    /// Whether E2B's sandboxes may have ports open to anyone (`e2b_public_ports`).
    pub e2b_public_ports: bool,
    /// Connections to apps in sandboxes kept open between preview requests.
    pub app_connections: Arc<app_connections::AppConnections>,
    /// E2B's uploads under way, and what their temporary files hold.
    pub e2b_uploads: e2b::envd::uploads::UploadBounds,
}

/// A server that is ready to serve: store open, engine connected, first start done.
#[derive(Debug)]
pub struct Server {
    pub service: Service,
    /// What the first start created, when this start was the first.
    pub bootstrap: Option<Bootstrap>,
    config: Config,
    checked: config::Checked,
    metrics_listener: Option<TcpListener>,
}

/// Failure to start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration")]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    DataDir(#[from] data_dir::DataDirError),
    #[error("the agent binary {path} is not a statically linked executable")]
    AgentNotStatic { path: String },
    #[error("cannot open the store {path}")]
    Store {
        path: String,
        #[source]
        source: sandboxd_store::StoreError,
    },
    #[error("cannot set up the egress proxy's TLS: {0}")]
    EgressTls(String),
    #[error("first start failed")]
    Bootstrap(#[source] sandboxd_store::StoreError),
    #[error("the engine did not answer")]
    Engine(#[source] EngineError),
    #[error("cannot serve HTTP")]
    Serve(#[source] std::io::Error),
    #[error(
        "the configured runtime {wanted:?} is not offered by the Docker engine (it has: {offered})"
    )]
    UnknownRuntime { wanted: String, offered: String },
}

impl Server {
    /// Checks the configuration, opens the store (bootstrapping an empty one) and checks
    /// the engines sandboxes run on (the caller connects them: the Docker adapter in the
    /// binary).
    pub async fn start(mut config: Config, engines: Engines) -> Result<Self, StartError> {
        let checked = config.check()?;
        let engine = engines.local;
        // Every host path handed to the engine is absolute.
        config.data_dir = data_dir::prepare(&config.data_dir)?;
        let database = config.database().map_err(|source| StartError::Store {
            path: "database_url".into(),
            source,
        })?;
        let agent_binary = match config.agent_binary() {
            Some(binary) => {
                let binary = std::path::absolute(binary).unwrap_or_else(|_| binary.to_owned());
                if !agent::is_static_elf(&binary) {
                    return Err(StartError::AgentNotStatic {
                        path: binary.display().to_string(),
                    });
                }
                Some(binary)
            }
            None => None,
        };
        config.agent_binary = agent_binary.clone();
        let store_error = |source| StartError::Store {
            path: database.describe(),
            source,
        };
        // A configured master key is used as is: no `master.key` is read or written.
        let store = Store::connect(&database, &config.data_dir, checked.master_key.as_ref())
            .await
            .map_err(store_error)?;
        let bootstrap = store
            .bootstrap(config.bootstrap_key.as_deref())
            .await
            .map_err(store_error)?;
        let instance_id = store.instance_id().await.map_err(store_error)?;
        // A stronger runtime that is not there must stop the start, not silently
        // become runc.
        if let Some(wanted) = &config.runtime {
            let offered = engine.runtimes().await.map_err(StartError::Engine)?;
            if !offered.contains(wanted) {
                return Err(StartError::UnknownRuntime {
                    wanted: wanted.clone(),
                    offered: offered.join(", "),
                });
            }
        }
        // A sandbox may not be given more CPUs than the host has (the engine would refuse).
        let host = engine.host().await.ok();
        let host_cpus = host.map(|h| h.cpus).filter(|n| *n > 0);
        let host_memory_mb = host
            .map(|h| h.memory_bytes)
            .filter(|n| *n > 0)
            .map(|bytes| bytes / (1024 * 1024));
        info!(api_version = %engine.api_version(), %instance_id, ?host_cpus, "engine ready");
        let templates = Templates::with_images(&config.template_images())
            .with_isolation(&config.template_isolation());
        let agents = AgentHub::new(
            config.data_dir.join("agents"),
            agent_binary.clone(),
            config.agent_op_timeout(),
        );
        if let Some(binary) = &agent_binary {
            info!(agent = %binary.display(), "sandboxes run with the in-sandbox agent");
        }
        let service = Service::new(
            store,
            engine,
            Arc::new(agents),
            templates,
            instance_id,
            service::Options {
                audit_exec: config.audit_exec,
                runtime: config.runtime.clone(),
                gvisor_runtime: config.gvisor_runtime.clone(),
                min_isolation: config.min_isolation,
                pools: config
                    .pools
                    .iter()
                    .map(|(template, pool)| (template.clone(), pool.size))
                    .collect(),
                warm_on_demand: config.warm_on_demand.bounds(),
                allowed_images: config.allowed_images.clone(),
                quotas: checked.quotas,
                host_cpus,
                remote: engines.remote,
                remote_only: config.remote_only,
                placement: config.placement,
                host_memory_mb,
                max_transfer_bytes: Some(config.max_transfer_bytes()),
                server_registration: checked.server_registration,
                lease_grace: Some(config.lease_grace()),
                pause_to_disk_after: config.pause.to_disk_after(),
                agent_channels: None,
                port_traffic_ignored: !config.port_traffic_is_activity,
                egress: checked.egress.clone(),
                builds: config.builds.options(),
                activity: config.activity.keeping(),
                activity_off: !config.activity.enabled,
            },
        );
        Ok(Self {
            service,
            bootstrap,
            config,
            checked,
            metrics_listener: None,
        })
    }

    /// Serves `/metrics` without a key on `listener` too (an address of the operator's,
    /// for a scraper); on the API's address it needs an administrator's key.
    pub fn with_metrics_listener(mut self, listener: TcpListener) -> Self {
        self.metrics_listener = Some(listener);
        self
    }

    /// The router of the API, for a server listening on `local`.
    pub fn router(&self, local: Option<std::net::SocketAddr>) -> Router {
        metrics::handle();
        let mut hosts = self.config.mcp_allowed_hosts.clone();
        if hosts.is_empty() {
            hosts = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
            if let Some(ip) = local.map(|a| a.ip()).filter(|ip| !ip.is_unspecified()) {
                hosts.push(ip.to_string());
            }
        }
        let previews = previews::PreviewSettings {
            public_url: self.config.public_url(),
            domain: self.config.preview_domain.clone(),
        };
        app(AppState {
            limits: Arc::new(rate_limit::UserLimiter::new(
                self.config.rate_limit_per_second,
                self.config.rate_limit_burst,
            )),
            service: self.service.clone(),
            mcp: mcp::McpSettings {
                allowed_hosts: hosts,
                allowed_origins: self.config.mcp_allowed_origins.clone(),
                sessions: Default::default(),
                previews: previews.clone(),
            },
            sessions: routes::session::SessionSettings {
                max_lifetime: self.config.session_max_lifetime(),
                cookie_secure: self.checked.cookie_secure,
            },
            previews,
            e2b_domain: self.config.e2b_domain.clone(),
            e2b_public_ports: self.config.e2b_public_ports,
            app_connections: app_connections::AppConnections::new(),
            // Uploads of unknown length spool at most two whole transfers at once.
            e2b_uploads: e2b::envd::uploads::UploadBounds::new(
                self.service.files().transfer_cap().saturating_mul(2),
            ),
        })
    }

    /// Reconciles once, then serves until `shutdown` resolves; the background loops stop
    /// with the server.
    pub async fn serve(
        mut self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartError> {
        // Subscribed before the first reconcile listens again for agents.
        let holding = tokio::spawn(self.service.replicas().record_agent_connections());
        let tls = egress::tls::connector(self.config.egress.trusted_ca.as_deref())
            .map_err(StartError::EgressTls)?;
        // Egress never reaches this server itself: the addresses it listens and is
        // reached on are its own, beside its interfaces'.
        let listening = [
            listener.local_addr().ok(),
            self.metrics_listener
                .as_ref()
                .and_then(|metrics| metrics.local_addr().ok()),
        ]
        .into_iter()
        .flatten()
        .map(|address| address.ip())
        .collect();
        self.service
            .egress()
            .set_own_addresses(listening, self.config.advertise_url().as_deref())
            .await;
        let egress = tokio::spawn(egress::serve_gates(&self.service, tls));
        let address = self
            .config
            .advertise_url()
            .or_else(|| listener.local_addr().ok().map(advertised));
        if let Some(address) = address {
            self.service.replicas().register(address).await;
        }
        if let Err(error) = loops::reconcile_or_restore(&self.service).await {
            warn!(error = %sandboxd_core::error::chain(&error), "startup reconcile failed; the periodic pass will retry");
        }
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let metrics_task = self.metrics_listener.take().map(|listener| {
            let router = Router::new()
                .route("/metrics", get(metrics::render_open))
                .with_state(self.service.clone());
            let mut stop = stop_rx.clone();
            tokio::spawn(async move {
                let _ = axum::serve(listener, router)
                    .with_graceful_shutdown(async move {
                        let _ = stop.wait_for(|stopped| *stopped).await;
                    })
                    .await;
            })
        });
        let background = loops::spawn(self.service.clone(), &self.config, stop_rx);
        let router = self.router(listener.local_addr().ok());
        // Responses leave as soon as they are written: no waiting on Nagle's algorithm
        // for the ACK of a previous segment.
        let listener = listener.tap_io(|stream| {
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(error = %sandboxd_core::error::chain(&error), "could not set TCP_NODELAY");
            }
        });
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await;
        // Nothing is forwarded here any more.
        self.service.replicas().leave().await;
        let _ = stop_tx.send(true);
        for task in background.into_iter().chain(metrics_task) {
            let _ = task.await;
        }
        holding.abort();
        egress.abort();
        // Warm members are removed, and containers of sandboxes killed just before the
        // stop: nothing is leaked.
        self.service.pools().drain().await;
        self.service
            .finish_removals(std::time::Duration::from_secs(15))
            .await;
        self.service.agents().shutdown();
        self.service.store().close().await;
        served.map_err(StartError::Serve)
    }
}

/// The address other replicas reach a server listening on `local` at.
fn advertised(local: std::net::SocketAddr) -> String {
    let ip = match local.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}", std::net::SocketAddr::new(ip, local.port()))
}

/// The API's procedures, with their OpenAPI document.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(routes::sandbox::router())
        .merge(procedures::router())
        .merge(routes::transfers::router())
        .merge(routes::build_context::router())
        .merge(routes::build_log_stream::router())
        .merge(routes::health::router())
}

/// Builds the HTTP application around a state.
pub fn app(state: AppState) -> Router {
    let (router, api) = api_routes().split_for_parts();
    // Serialized once: the handler (cloned by the router for every request and
    // connection) then holds a reference-counted buffer, not the document itself.
    let document = bytes::Bytes::from(serde_json::to_vec(&api).unwrap_or_default());
    let app = router
        .route(
            "/api/openapi.json",
            get(move || async move {
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    document.clone(),
                )
            }),
        )
        .route("/metrics", get(metrics::render))
        .merge(e2b::router())
        .merge(previews::e2b_ports::router())
        .route("/sandbox-exec", get(routes::exec_stream::sandbox_exec))
        .route("/sandbox-pty", get(routes::terminal::sandbox_pty))
        .route("/sandbox-port", get(routes::port_socket::sandbox_port))
        .route("/sandbox-watch", get(routes::watch_stream::sandbox_watch))
        .route("/preview/{handle}/{port}", any(previews::proxy::root))
        .route(
            "/preview/{handle}/{port}/",
            any(previews::proxy::preview_root),
        )
        .route(
            "/preview/{handle}/{port}/{*path}",
            any(previews::proxy::preview),
        )
        .route("/", get(dashboard::index))
        .route("/ui/assets/{*name}", get(dashboard::asset))
        .route(
            "/ui/session",
            get(routes::sign_in::current)
                .post(routes::sign_in::sign_in)
                .delete(routes::sign_in::sign_out),
        )
        .merge(
            Router::new()
                .nest_service("/mcp", mcp::service(state.service.clone(), &state.mcp))
                .layer(axum::middleware::from_fn_with_state(
                    state.clone(),
                    mcp::authenticate,
                )),
        )
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            forward::forward,
        ))
        .layer(axum::middleware::from_fn(body_limit::enforce))
        // A request to a preview host goes to its preview whatever its path: nothing of
        // sandboxd's own is served on those hosts.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            previews::proxy::by_host,
        ))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic::respond,
        ))
        .route_layer(axum::middleware::from_fn(metrics::record))
        // The largest of the routes' limits; `body_limit::enforce` holds each route to
        // its own.
        .layer(DefaultBodyLimit::max(body_limit::MAX_BUILD_BODY_BYTES))
        .layer(axum::middleware::from_fn(request_log::log))
        .with_state(state.clone());
    match state.e2b_domain {
        // Outside the router: it changes the path that routing reads.
        Some(domain) => {
            Router::new()
                .fallback_service(app)
                .layer(axum::middleware::from_fn_with_state(
                    domain,
                    e2b::hosts::by_host,
                ))
        }
        None => app,
    }
}

#[cfg(test)]
mod tests {
    use sandboxd_core::api::procedures::PROCEDURES;

    /// The routes (and with them the OpenAPI document) are the procedure table's: each
    /// procedure is served at its path with its method and named for it, and nothing else.
    #[test]
    fn the_routes_are_those_of_the_procedure_table() {
        let (_, document) = super::api_routes().split_for_parts();
        let mut served = std::collections::BTreeSet::new();
        for (path, item) in &document.paths.paths {
            for (method, operation) in [("get", &item.get), ("post", &item.post)] {
                if let Some(operation) = operation {
                    served.insert((path.clone(), method, operation.operation_id.clone()));
                }
            }
            assert!(item.put.is_none() && item.delete.is_none() && item.patch.is_none());
        }
        let table: std::collections::BTreeSet<_> = PROCEDURES
            .iter()
            .map(|p| {
                let id = p.name.replacen('.', "-", 1);
                (p.path.to_owned(), p.method.as_str(), Some(id))
            })
            .collect();
        assert_eq!(served, table);
    }

    /// `docs/openapi.json` is the document served at `/api/openapi.json`:
    /// `scripts/snapshots.sh` writes it again after a deliberate change.
    #[test]
    fn the_committed_document_is_the_one_served() {
        let (_, document) = super::api_routes().split_for_parts();
        let served = serde_json::to_value(&document).expect("the document is JSON");
        let written = serde_json::to_string_pretty(&sorted(served)).expect("JSON") + "\n";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
        if std::env::var_os("SANDBOXD_UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(path, &written).expect("docs/openapi.json is writable");
            return;
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == written,
            "docs/openapi.json is not the document served; review the change and run \
             scripts/snapshots.sh"
        );
    }

    /// Objects' keys in order, so that the file changes only where the document does.
    fn sorted(value: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::Object(object) => {
                let mut entries: Vec<_> = object.into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
            }
            Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
            other => other,
        }
    }
}
