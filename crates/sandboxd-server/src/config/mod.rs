//! The configuration of sandboxd: one type, [`Config`], read by the binary (defaults,
//! then a TOML file, then `SANDBOXD_*` environment variables, then flags) and handed
//! whole to [`crate::Server::start`]. A key's environment variable is derived from its
//! path ([`env_name`]); `docs/configuration.md` is checked against [`Config::keys`].
//! What can be wrong in it is found by [`Config::check`] before anything starts.

mod checked;
mod sections;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use checked::{Checked, ConfigError};
pub use sections::{
    ActivityConfig, BuildsConfig, CookieSecureSetting, EgressConfig, PauseConfig, PoolConfig,
    ServersConfig, TemplateConfig, WarmOnDemandConfig,
};

/// The prefix of every environment variable of the configuration.
pub const ENV_PREFIX: &str = "SANDBOXD_";
/// What separates a nested key's parts in its environment variable
/// (`SANDBOXD_QUOTAS__CPU` is `quotas.cpu`).
pub const ENV_NESTING: &str = "__";

/// The environment variable of a key given as its dotted path (`quotas.cpu`).
pub fn env_name(key: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        key.split('.')
            .map(str::to_ascii_uppercase)
            .collect::<Vec<_>>()
            .join(ENV_NESTING)
    )
}

/// Everything sandboxd can be configured with; each field is one key of the file.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Address to listen on.
    pub listen: String,
    /// Where the database and keys live.
    pub data_dir: PathBuf,
    /// Owner key to create on first start (32+ characters).
    pub bootstrap_key: Option<String>,
    /// Master key sealing secrets at rest, 64 hex digits; `<data_dir>/master.key` when
    /// unset. Replicas on one database need the same one.
    pub master_key: Option<String>,
    /// The database: a `postgres://` URL (shared by replicas); SQLite in the data
    /// directory when unset.
    pub database_url: Option<String>,
    /// Whether sandboxes get the in-sandbox agent (`false`: every operation goes through
    /// the engine's exec and archive API).
    pub agent: bool,
    /// The static agent binary mounted into sandboxes. The binary puts the agent built
    /// into it here when unset; a server started without one runs sandboxes without
    /// the agent.
    pub agent_binary: Option<PathBuf>,
    /// Seconds one file or process operation through a sandbox's agent may take in all
    /// (every frame sent and received counts), however the agent behaves.
    pub agent_op_timeout_secs: u64,
    /// The templates' images and isolation, e.g. `[templates.base] image = "..."`.
    pub templates: BTreeMap<String, TemplateConfig>,
    /// Log filter, as `RUST_LOG` (`info`, `sandboxd=debug`).
    pub log: String,
    /// `Host` values `/mcp` accepts (default: loopback and the listen address).
    pub mcp_allowed_hosts: Vec<String>,
    /// Browser origins `/mcp` accepts (default: no `Origin` check).
    pub mcp_allowed_origins: Vec<String>,
    /// Record every command in the audit log (a keyed hash of it, never its text).
    pub audit_exec: bool,
    /// Requests per second each API key may make, sustained; 0 turns limits off.
    pub rate_limit_per_second: u32,
    /// Requests each API key may make at once above the sustained rate.
    pub rate_limit_burst: u32,
    /// Engine runtime of sandboxes (`runsc`, `kata-runtime`…); the engine's default when
    /// unset. Checked against the engine at start.
    pub runtime: Option<String>,
    /// The engine's name for gVisor's runtime, which `"isolation": "gvisor"` asks for
    /// (`scripts/gvisor.sh` registers it as `runsc`).
    pub gvisor_runtime: String,
    /// The weakest isolation any sandbox may run under (`container` or `gvisor`); a
    /// create, template, snapshot or pool below it is refused. `runtime = "runsc"`
    /// implies `gvisor`.
    pub min_isolation: Option<sandboxd_core::model::Isolation>,
    /// Warm pools by template, e.g. `[pools.python] size = 4`.
    pub pools: BTreeMap<String, PoolConfig>,
    /// Pools kept for demand: any other shape of create (an image, `internet`,
    /// `allowlist`) gets a pool while it is asked for.
    pub warm_on_demand: WarmOnDemandConfig,
    /// Patterns of the images callers may name (`docker.io/library/*`); empty: any.
    pub allowed_images: Vec<String>,
    /// What bounds the templates users build.
    pub builds: BuildsConfig,
    /// When paused sandboxes move to disk.
    pub pause: PauseConfig,
    /// The cap of one streamed transfer (`sandbox.upload`, `sandbox.download`, `cp`),
    /// in MiB.
    pub max_transfer_mb: u64,
    /// Seconds a WebSocket session (streaming exec, terminal) may stay open.
    pub session_max_lifetime_secs: u64,
    /// An address serving `/metrics` without a key (for a scraper on the operator's
    /// network); on the API's address `/metrics` needs an administrator's key.
    pub metrics_listen: Option<String>,
    /// What each organization may hold at once, e.g. `[quotas] running_sandboxes = 20`.
    pub quotas: sandboxd_core::quotas::Quotas,
    /// Sandboxes run on remote servers only: `sandbox.create` needs a `serverId`.
    pub remote_only: bool,
    /// A `sandbox.create` without `serverId` goes where the most room is.
    pub placement: bool,
    /// Seconds between passes of the reaper (expired sandboxes are killed).
    pub reaper_interval_secs: f64,
    /// Seconds between reconcile passes (containers and records brought back in line).
    pub reconcile_interval_secs: f64,
    /// Where the other replicas reach this one (`http://10.0.0.5:3000`), to forward
    /// requests on the sandboxes whose agent it holds; the listen address when unset.
    pub advertise_url: Option<String>,
    /// The address users reach sandboxd at (`https://sandboxd.example.com`), which the
    /// URLs of previews are built on; the address each request was sent to when unset.
    pub public_url: Option<String>,
    /// The domain whose hosts serve previews, one per port (`<port>-<handle>.<domain>`);
    /// previews are paths on sandboxd's own address when unset.
    pub preview_domain: Option<String>,
    /// The domain E2B's SDKs are pointed at with `E2B_DOMAIN` (`api.<domain>`,
    /// `<port>-<sandbox id>.<domain>`); E2B's calls come under `/e2b` only when unset.
    pub e2b_domain: Option<String>,
    /// Whether a sandbox created through E2B's API may have ports open to anyone on the
    /// E2B domain (E2B's default, `allow_public_traffic`); when false, every request to
    /// a port needs the sandbox's traffic token or a key.
    pub e2b_public_ports: bool,
    /// Whether connections to a sandbox's ports (previews, `port-forward`) and their
    /// traffic count as its activity for the idle timeout.
    pub port_traffic_is_activity: bool,
    /// Whether the dashboard's session cookie is marked `Secure`: `true`, `false`, or
    /// `"auto"` (when the request says it came over HTTPS through `X-Forwarded-Proto`).
    pub cookie_secure: CookieSecureSetting,
    /// Remote servers: who may register them and which networks they may be in.
    pub servers: ServersConfig,
    /// Egress of `allowlist` sandboxes: `hosts` answered before DNS, the special
    /// networks they may reach, the CAs trusted for credentials.
    pub egress: EgressConfig,
    /// Seconds a sandbox outlives its idle timeout when nothing more is heard from
    /// sandboxd (stopped, crashed, cut off): its main process then ends it.
    pub lease_grace_secs: u64,
    /// Each sandbox's activity timeline: whether it is kept, its bounds, its retention.
    pub activity: ActivityConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:3000".into(),
            data_dir: PathBuf::from("./sandboxd-data"),
            bootstrap_key: None,
            master_key: None,
            database_url: None,
            agent: true,
            agent_binary: None,
            agent_op_timeout_secs: 60,
            templates: BTreeMap::new(),
            log: "info".into(),
            mcp_allowed_hosts: Vec::new(),
            mcp_allowed_origins: Vec::new(),
            audit_exec: false,
            rate_limit_per_second: 100,
            rate_limit_burst: 200,
            runtime: None,
            gvisor_runtime: "runsc".into(),
            min_isolation: None,
            pools: BTreeMap::new(),
            warm_on_demand: WarmOnDemandConfig::default(),
            builds: BuildsConfig::default(),
            pause: PauseConfig::default(),
            allowed_images: Vec::new(),
            max_transfer_mb: sandboxd_core::limits::DEFAULT_MAX_TRANSFER_BYTES / (1024 * 1024),
            session_max_lifetime_secs: crate::DEFAULT_SESSION_LIFETIME_SECS,
            metrics_listen: None,
            quotas: sandboxd_core::quotas::Quotas::default(),
            remote_only: false,
            placement: false,
            reaper_interval_secs: sandboxd_core::limits::REAPER_INTERVAL_MS as f64 / 1000.0,
            reconcile_interval_secs: sandboxd_core::limits::RECONCILE_INTERVAL_MS as f64 / 1000.0,
            advertise_url: None,
            public_url: None,
            preview_domain: None,
            e2b_domain: None,
            e2b_public_ports: true,
            port_traffic_is_activity: true,
            cookie_secure: CookieSecureSetting::Word("auto".into()),
            servers: ServersConfig::default(),
            egress: EgressConfig::default(),
            lease_grace_secs: sandboxd_service::DEFAULT_LEASE_GRACE.as_secs(),
            activity: ActivityConfig::default(),
        }
    }
}

impl Config {
    /// The defaults, with the data directory given.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            ..Self::default()
        }
    }

    /// The database this configuration names (its URL is never printed whole).
    pub fn database(&self) -> Result<sandboxd_store::Database, sandboxd_store::StoreError> {
        sandboxd_store::Database::from_config(self.database_url.as_deref(), &self.data_dir)
    }

    /// The templates' images set in place of the built-in ones, by template name.
    pub fn template_images(&self) -> BTreeMap<String, String> {
        self.templates
            .iter()
            .filter_map(|(name, t)| Some((template_name(name), t.image.clone()?)))
            .collect()
    }

    /// The templates' isolation for creates that ask for none, by template name.
    pub fn template_isolation(&self) -> BTreeMap<String, sandboxd_core::model::Isolation> {
        self.templates
            .iter()
            .filter_map(|(name, t)| Some((template_name(name), t.isolation?)))
            .collect()
    }

    /// Every key of the configuration as a dotted path (`quotas.cpu`); a table whose
    /// keys are names (`templates`, `pools`, `egress.hosts`) is one key.
    pub fn keys() -> Vec<String> {
        let mut keys = Vec::new();
        if let Ok(value) = serde_json::to_value(Self::default()) {
            collect_keys("", &value, &mut keys);
        }
        keys
    }
}

/// The tables whose keys are names chosen by the operator, not fields.
const NAMED_TABLES: [&str; 3] = ["templates", "pools", "egress.hosts"];

fn collect_keys(prefix: &str, value: &serde_json::Value, keys: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(fields) if !NAMED_TABLES.contains(&prefix) => {
            for (name, value) in fields {
                let key = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                collect_keys(&key, value, keys);
            }
        }
        _ => keys.push(prefix.to_owned()),
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every key but the two secrets, which print as `***` when set.
        let mut shown = serde_json::to_value(self).unwrap_or_default();
        if let Some(fields) = shown.as_object_mut() {
            for secret in ["bootstrap_key", "master_key"] {
                if fields.get(secret).is_some_and(|v| !v.is_null()) {
                    fields.insert(secret.into(), "***".into());
                }
            }
            // The URL's user, password and parameters are left out.
            if let Ok(database) = self.database() {
                fields.insert("database_url".into(), database.describe().into());
            }
        }
        write!(f, "Config {shown}")
    }
}

/// A configured template's name: `_` stands for `-`, which the name of an environment
/// variable cannot hold (`SANDBOXD_TEMPLATES__CODE_INTERPRETER_V1__IMAGE`).
fn template_name(configured: &str) -> String {
    configured.replace('_', "-")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_template_named_with_underscores_is_the_one_with_hyphens() {
        let mut config = Config::new(std::path::PathBuf::from("/tmp/x"));
        config.templates.insert(
            "code_interpreter_v1".into(),
            TemplateConfig::image("local/interpreter"),
        );
        assert_eq!(
            config
                .template_images()
                .get("code-interpreter-v1")
                .map(String::as_str),
            Some("local/interpreter")
        );
    }

    #[test]
    fn environment_names_follow_the_keys() {
        assert_eq!(env_name("listen"), "SANDBOXD_LISTEN");
        assert_eq!(env_name("quotas.cpu"), "SANDBOXD_QUOTAS__CPU");
        assert_eq!(
            env_name("warm_on_demand.window_secs"),
            "SANDBOXD_WARM_ON_DEMAND__WINDOW_SECS"
        );
    }

    #[test]
    fn keys_are_the_fields_and_named_tables_are_one_key() {
        let keys = Config::keys();
        for key in [
            "listen",
            "quotas.cpu",
            "templates",
            "egress.hosts",
            "egress.trusted_ca",
        ] {
            assert!(keys.contains(&key.to_owned()), "{key} in {keys:?}");
        }
        assert!(!keys.iter().any(|k| k == "quotas" || k == "egress"));
    }

    #[test]
    fn secrets_are_never_printed() {
        let config = Config {
            bootstrap_key: Some("k".repeat(32)),
            master_key: Some("0f".repeat(32)),
            database_url: Some("postgres://app:s3cret@db:5432/x".into()),
            ..Config::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("kkkk") && !shown.contains("0f0f") && !shown.contains("s3cret"));
        assert!(shown.contains("***"));
    }
}
