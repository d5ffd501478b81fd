//! Configuration: defaults, then a TOML file, then `SANDBOXD_*` environment variables,
//! then command-line flags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format as _, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// The image of one template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateConfig {
    /// The image in place of the built-in one.
    #[serde(default)]
    pub image: Option<String>,
    /// `container` or `gvisor`: the isolation of the template's sandboxes when their
    /// create asks for none.
    #[serde(default)]
    pub isolation: Option<sandboxd_core::model::Isolation>,
}

/// Everything `sandboxd serve` can be configured with.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Address to listen on.
    pub listen: String,
    /// Where the database and keys live.
    pub data_dir: PathBuf,
    /// Owner key to create on first start (32+ characters).
    pub bootstrap_key: Option<String>,
    /// Master key sealing secrets at rest, 64 hex digits; `<data_dir>/master.key` when unset.
    pub master_key: Option<String>,
    /// The database: a `postgres://` URL (shared by replicas); SQLite in the data
    /// directory when unset.
    pub database_url: Option<String>,
    /// Whether sandboxes get the in-sandbox agent (`false`: every operation goes through
    /// the engine's exec and archive API).
    pub agent: bool,
    /// The static agent binary mounted into sandboxes; the one built into sandboxd when
    /// unset.
    pub agent_binary: Option<PathBuf>,
    /// Image overrides of the built-in templates, e.g. `[templates.base] image = "..."`.
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
    /// Engine runtime of sandboxes (`runsc`, `kata-runtime`…); the engine's default when unset.
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
    /// `allowlist`) gets a pool while it is asked for, e.g.
    /// `[warm_on_demand] budget = 8` (the default; 0 turns them off).
    pub warm_on_demand: WarmOnDemandConfig,
    /// Patterns of the images callers may name (`docker.io/library/*`); empty: any.
    pub allowed_images: Vec<String>,
    /// The cap of one streamed transfer (`sandbox.upload`, `sandbox.download`, `cp`),
    /// in MiB.
    pub max_transfer_mb: u64,
    /// Seconds a WebSocket session (streaming exec, terminal) may stay open.
    pub session_max_lifetime_secs: u64,
    /// An address serving `/metrics` without a key (for a scraper on the operator's
    /// network); on the API's address `/metrics` needs an administrator's key.
    pub metrics_listen: Option<String>,
    /// What each organization may hold at once, e.g. `[quotas] running_sandboxes = 20`.
    pub quotas: QuotasConfig,
    /// Sandboxes run on remote servers only: `sandbox.create` needs a `serverId`.
    pub remote_only: bool,
    /// A `sandbox.create` without `serverId` goes where the most room is.
    pub placement: bool,
    /// Seconds between passes of the reaper (expired sandboxes are killed).
    pub reaper_interval_secs: u64,
    /// Seconds between reconcile passes (containers and records brought back in line).
    pub reconcile_interval_secs: u64,
    /// Where the other replicas reach this one (`http://10.0.0.5:3000`), to forward
    /// requests on the sandboxes whose agent it holds; the listen address when unset.
    pub advertise_url: Option<String>,
    /// The address users reach sandboxd at (`https://sandboxd.example.com`), which the
    /// URLs of previews are built on; the address each request was sent to when unset.
    pub public_url: Option<String>,
    /// The domain whose hosts serve previews, one per port (`<port>-<handle>.<domain>`:
    /// a wildcard DNS name such as `preview.example.com`, or `localhost` for a server
    /// used from the same machine); previews are paths on sandboxd's own address
    /// (`/preview/<handle>/<port>/`) when unset.
    pub preview_domain: Option<String>,
    /// The domain E2B's SDKs are pointed at with `E2B_DOMAIN` (`e2b.example.com`, a
    /// wildcard DNS name behind a TLS proxy): `api.<domain>` serves E2B's control plane
    /// and `<port>-<sandbox id>.<domain>` a sandbox's daemon (port 49983) and its
    /// ports, including the signed file URLs the SDKs make; `:<port>` after it when
    /// the TLS proxy is not on 443 (the SDKs are then given the same). Unset: E2B's SDKs use
    /// `E2B_API_URL` and `E2B_SANDBOX_URL` (`/e2b`, `/e2b/envd`) only.
    pub e2b_domain: Option<String>,
    /// Whether connections to a sandbox's ports (previews, `port-forward`) and their
    /// traffic keep it alive: count as activity for its idle timeout.
    pub port_traffic_is_activity: bool,
    /// Whether the dashboard's session cookie is marked `Secure`: `true` (a server
    /// reached over HTTPS only), `false`, or `"auto"` (when the request says it came
    /// over HTTPS through `X-Forwarded-Proto`, which a client can also send).
    pub cookie_secure: CookieSecureSetting,
    /// Remote servers: who may register them and which networks they may be in.
    pub servers: ServersConfig,
    /// Egress of `allowlist` sandboxes: `hosts` answered before DNS and the special
    /// networks they may reach.
    pub egress: EgressConfig,
    /// Seconds a sandbox outlives its idle timeout when nothing more is heard from
    /// sandboxd (stopped, crashed, cut off): its main process then ends it.
    pub lease_grace_secs: u64,
}

/// `[servers]`: `registration = "operator" | "admins"` (only the installation's first
/// organization, or every organization's administrators, may register servers) and
/// `allowed_networks = ["CIDR", …]` (private ranges servers may be in; public addresses
/// always may).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServersConfig {
    pub registration: String,
    pub allowed_networks: Vec<String>,
}

impl Default for ServersConfig {
    fn default() -> Self {
        Self {
            registration: "operator".into(),
            allowed_networks: Vec::new(),
        }
    }
}

impl ServersConfig {
    /// The policy as the server takes it; a bad value is named.
    pub fn resolve(
        &self,
    ) -> Result<
        (
            sandboxd_core::access::ServerRegistration,
            sandboxd_core::networks::AllowedNetworks,
        ),
        String,
    > {
        let registration = sandboxd_core::access::ServerRegistration::parse(&self.registration)
            .ok_or_else(|| {
                format!(
                    "servers.registration must be \"operator\" or \"admins\", not {:?}",
                    self.registration
                )
            })?;
        let allowed = sandboxd_core::networks::AllowedNetworks::parse(&self.allowed_networks)?;
        Ok((registration, allowed))
    }
}

/// `[egress]`: `hosts = { "name" = "address" }` (names answered before DNS: private
/// services, or a test's pretend internet) and `allowed_networks = ["CIDR", …]` (the
/// loopback, private and other special ranges `allowlist` sandboxes may reach; none by
/// default) and `trusted_ca` (a PEM file of CAs trusted, besides the system's, by the
/// HTTPS sandboxd speaks for sandboxes' credentials).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EgressConfig {
    pub hosts: BTreeMap<String, String>,
    pub allowed_networks: Vec<String>,
    pub trusted_ca: Option<PathBuf>,
}

impl EgressConfig {
    /// The settings as the server takes them; every bad entry named.
    pub fn resolve(&self) -> Result<sandboxd_core::egress::Operator, String> {
        sandboxd_core::egress::Operator::parse(&self.hosts, &self.allowed_networks)
    }
}

/// `cookie_secure = true | false | "auto"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CookieSecureSetting {
    Fixed(bool),
    Word(String),
}

impl CookieSecureSetting {
    /// The setting as the server takes it; an unknown word is an error.
    pub fn resolve(&self) -> Result<sandboxd_server::CookieSecure, String> {
        use sandboxd_server::CookieSecure as C;
        match self {
            Self::Fixed(true) => Ok(C::Always),
            Self::Fixed(false) => Ok(C::Never),
            Self::Word(word) => match word.to_ascii_lowercase().as_str() {
                "auto" => Ok(C::Auto),
                "true" => Ok(C::Always),
                "false" => Ok(C::Never),
                _ => Err(format!(
                    "cookie_secure must be true, false or \"auto\", not {word:?}"
                )),
            },
        }
    }
}

impl Config {
    /// The database this configuration names (its URL is never printed whole).
    pub fn database(&self) -> Result<sandboxd_store::Database, sandboxd_store::StoreError> {
        sandboxd_store::Database::from_config(self.database_url.as_deref(), &self.data_dir)
    }
}

/// Per-organization quotas (`sandboxd_core::quotas`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QuotasConfig {
    /// Sandboxes being created or running.
    pub running_sandboxes: u32,
    /// CPUs reserved by those sandboxes, in all.
    pub cpu: f64,
    /// Memory reserved by those sandboxes, in all (MiB).
    pub memory_mb: i64,
    /// Usable API keys per user.
    pub keys_per_user: u32,
    /// Snapshots kept.
    pub snapshots: u32,
    /// What those snapshots add to their images, in all (MiB).
    pub snapshot_mb: i64,
    /// Volumes kept.
    pub volumes: u32,
    /// The sizes those volumes reserve, in all (MiB).
    pub volume_mb: i64,
}

impl Default for QuotasConfig {
    fn default() -> Self {
        let quotas = sandboxd_core::quotas::Quotas::default();
        Self {
            running_sandboxes: quotas.running_sandboxes,
            cpu: quotas.cpu,
            memory_mb: quotas.memory_mb,
            keys_per_user: quotas.keys_per_user,
            snapshots: quotas.snapshots,
            snapshot_mb: quotas.snapshot_mb,
            volumes: quotas.volumes,
            volume_mb: quotas.volume_mb,
        }
    }
}

impl QuotasConfig {
    /// The quotas, or what is wrong with them.
    pub fn quotas(&self) -> Result<sandboxd_core::quotas::Quotas, &'static str> {
        if self.running_sandboxes == 0 || self.keys_per_user == 0 {
            return Err("quotas.running_sandboxes and quotas.keys_per_user must be at least 1");
        }
        if !(self.cpu.is_finite() && self.cpu >= 0.1) || self.memory_mb < 64 {
            return Err("quotas.cpu must be at least 0.1 and quotas.memory_mb at least 64");
        }
        Ok(sandboxd_core::quotas::Quotas {
            running_sandboxes: self.running_sandboxes,
            cpu: self.cpu,
            memory_mb: self.memory_mb,
            keys_per_user: self.keys_per_user,
            snapshots: self.snapshots,
            snapshot_mb: self.snapshot_mb.max(0),
            volumes: self.volumes,
            volume_mb: self.volume_mb.max(0),
        })
    }
}

/// `[warm_on_demand]`: how far pools kept for demand may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WarmOnDemandConfig {
    /// Members of all of them together; 0 turns them off.
    pub budget: usize,
    /// Members of one of them.
    pub per_pool: usize,
    /// Seconds back creates count: a pool holds as many members as its shape had
    /// creates in that time (at most `per_pool`), and none after that long without.
    pub window_secs: u64,
}

impl Default for WarmOnDemandConfig {
    fn default() -> Self {
        let bounds = sandboxd_core::pool_demand::DemandBounds::default();
        Self {
            budget: bounds.budget,
            per_pool: bounds.per_pool,
            window_secs: bounds.window.as_secs(),
        }
    }
}

impl WarmOnDemandConfig {
    pub fn bounds(&self) -> sandboxd_core::pool_demand::DemandBounds {
        sandboxd_core::pool_demand::DemandBounds {
            budget: self.budget,
            per_pool: self.per_pool,
            window: std::time::Duration::from_secs(self.window_secs),
        }
    }
}

/// A warm pool of a template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolConfig {
    /// Started sandboxes kept ready to be claimed.
    pub size: usize,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("data_dir", &self.data_dir)
            .field("bootstrap_key", &self.bootstrap_key.as_ref().map(|_| "***"))
            .field("master_key", &self.master_key.as_ref().map(|_| "***"))
            .field("database", &self.database().ok())
            .field("agent", &self.agent)
            .field("agent_binary", &self.agent_binary)
            .field("templates", &self.templates)
            .field("log", &self.log)
            .field("mcp_allowed_hosts", &self.mcp_allowed_hosts)
            .field("mcp_allowed_origins", &self.mcp_allowed_origins)
            .field("audit_exec", &self.audit_exec)
            .field("rate_limit_per_second", &self.rate_limit_per_second)
            .field("rate_limit_burst", &self.rate_limit_burst)
            .field("runtime", &self.runtime)
            .field("gvisor_runtime", &self.gvisor_runtime)
            .field("min_isolation", &self.min_isolation)
            .field("pools", &self.pools)
            .field("warm_on_demand", &self.warm_on_demand)
            .field("allowed_images", &self.allowed_images)
            .field("max_transfer_mb", &self.max_transfer_mb)
            .field("session_max_lifetime_secs", &self.session_max_lifetime_secs)
            .field("metrics_listen", &self.metrics_listen)
            .field("quotas", &self.quotas)
            .field("remote_only", &self.remote_only)
            .field("placement", &self.placement)
            .field("reaper_interval_secs", &self.reaper_interval_secs)
            .field("reconcile_interval_secs", &self.reconcile_interval_secs)
            .field("advertise_url", &self.advertise_url)
            .field("public_url", &self.public_url)
            .field("preview_domain", &self.preview_domain)
            .field("e2b_domain", &self.e2b_domain)
            .field("port_traffic_is_activity", &self.port_traffic_is_activity)
            .field("cookie_secure", &self.cookie_secure)
            .field("servers", &self.servers)
            .field("egress", &self.egress)
            .field("lease_grace_secs", &self.lease_grace_secs)
            .finish()
    }
}

impl Config {
    /// The templates' images set in place of the built-in ones, by template name.
    pub fn template_images(&self) -> BTreeMap<String, String> {
        self.templates
            .iter()
            .filter_map(|(name, t)| Some((name.clone(), t.image.clone()?)))
            .collect()
    }
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
            allowed_images: Vec::new(),
            max_transfer_mb: sandboxd_core::limits::DEFAULT_MAX_TRANSFER_BYTES / (1024 * 1024),
            session_max_lifetime_secs: sandboxd_server::DEFAULT_SESSION_LIFETIME_SECS,
            metrics_listen: None,
            quotas: QuotasConfig::default(),
            remote_only: false,
            placement: false,
            reaper_interval_secs: sandboxd_core::limits::REAPER_INTERVAL_MS / 1000,
            reconcile_interval_secs: sandboxd_core::limits::RECONCILE_INTERVAL_MS / 1000,
            advertise_url: None,
            public_url: None,
            preview_domain: None,
            e2b_domain: None,
            port_traffic_is_activity: true,
            cookie_secure: CookieSecureSetting::Word("auto".into()),
            servers: ServersConfig::default(),
            egress: EgressConfig::default(),
            lease_grace_secs: sandboxd_server::service::DEFAULT_LEASE_GRACE.as_secs(),
        }
    }
}

impl Config {
    /// Loads the configuration from the file (when given) and the environment.
    pub fn load(file: Option<&Path>) -> Result<Self, Box<figment::Error>> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            figment = figment.merge(Toml::file_exact(file));
        }
        figment
            .merge(Env::prefixed("SANDBOXD_").split("__"))
            .extract()
            .map_err(Box::new)
    }
}

/// Decodes a master key given as 64 hex digits.
pub fn parse_master_key(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    #[test]
    fn pools_kept_for_demand_are_on_by_default_and_bounded_as_configured() {
        figment::Jail::expect_with(|jail| {
            let config = Config::load(None).map_err(|e| e.to_string())?;
            assert_eq!(
                config.warm_on_demand.bounds(),
                sandboxd_core::pool_demand::DemandBounds::default()
            );
            jail.create_file(
                "sandboxd.toml",
                "[warm_on_demand]\nper_pool = 3\nwindow_secs = 10\n",
            )?;
            jail.set_env("SANDBOXD_WARM_ON_DEMAND__BUDGET", "0");
            let config =
                Config::load(Some(Path::new("sandboxd.toml"))).map_err(|e| e.to_string())?;
            let bounds = config.warm_on_demand.bounds();
            assert_eq!(
                (bounds.budget, bounds.per_pool, bounds.window.as_secs()),
                (0, 3, 10)
            );
            assert!(bounds.is_off());
            Ok(())
        });
    }

    #[test]
    fn file_then_environment() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "sandboxd.toml",
                "listen = \"0.0.0.0:8080\"\n[templates.base]\nimage = \"local/base:1\"\n",
            )?;
            jail.set_env("SANDBOXD_DATA_DIR", "/var/lib/sandboxd");
            jail.set_env("SANDBOXD_BOOTSTRAP_KEY", "k".repeat(32));
            let config =
                Config::load(Some(Path::new("sandboxd.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(config.listen, "0.0.0.0:8080");
            assert_eq!(config.data_dir, PathBuf::from("/var/lib/sandboxd"));
            assert_eq!(
                config.templates["base"].image.as_deref(),
                Some("local/base:1")
            );
            assert!(!format!("{config:?}").contains("kkkk"));
            Ok(())
        });
    }

    #[test]
    fn cookie_secure_is_true_false_or_auto() {
        use sandboxd_server::CookieSecure as C;
        figment::Jail::expect_with(|jail| {
            assert_eq!(
                Config::load(None).map_err(|e| *e)?.cookie_secure.resolve(),
                Ok(C::Auto)
            );
            jail.create_file("a.toml", "cookie_secure = true\n")?;
            let config = Config::load(Some(Path::new("a.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(config.cookie_secure.resolve(), Ok(C::Always));
            jail.set_env("SANDBOXD_COOKIE_SECURE", "false");
            assert_eq!(
                Config::load(None).map_err(|e| *e)?.cookie_secure.resolve(),
                Ok(C::Never)
            );
            jail.set_env("SANDBOXD_COOKIE_SECURE", "sometimes");
            assert!(
                Config::load(None)
                    .map_err(|e| *e)?
                    .cookie_secure
                    .resolve()
                    .is_err()
            );
            Ok(())
        });
    }

    #[test]
    fn servers_are_the_operators_and_public_unless_configured() {
        use sandboxd_core::access::ServerRegistration as R;
        figment::Jail::expect_with(|jail| {
            let (registration, allowed) = Config::load(None)
                .map_err(|e| *e)?
                .servers
                .resolve()
                .map_err(figment::Error::from)?;
            assert_eq!(registration, R::Operator);
            assert!(!allowed.permits("127.0.0.1".parse().unwrap()));
            jail.create_file(
                "s.toml",
                "[servers]\nregistration = \"admins\"\nallowed_networks = [\"127.0.0.0/8\"]\n",
            )?;
            let config = Config::load(Some(Path::new("s.toml"))).map_err(|e| *e)?;
            let (registration, allowed) = config.servers.resolve().map_err(figment::Error::from)?;
            assert_eq!(registration, R::Admins);
            assert!(allowed.permits("127.0.0.1".parse().unwrap()));
            jail.set_env("SANDBOXD_SERVERS__REGISTRATION", "everyone");
            let config = Config::load(Some(Path::new("s.toml"))).map_err(|e| *e)?;
            assert!(config.servers.resolve().is_err());
            Ok(())
        });
    }

    #[test]
    fn egress_names_hosts_and_networks_in_a_table() {
        figment::Jail::expect_with(|jail| {
            let none = Config::load(None).map_err(|e| *e)?.egress.resolve();
            assert_eq!(none, Ok(sandboxd_core::egress::Operator::default()));
            jail.create_file(
                "e.toml",
                "[egress]\nallowed_networks = [\"127.0.0.2/32\"]\n[egress.hosts]\n\"allowed.test\" = \"127.0.0.2\"\n",
            )?;
            let config = Config::load(Some(Path::new("e.toml"))).map_err(|e| *e)?;
            let operator = config.egress.resolve().map_err(figment::Error::from)?;
            assert_eq!(operator.host("allowed.test"), "127.0.0.2".parse().ok());
            assert!(
                operator
                    .allowed_networks
                    .contains("127.0.0.2".parse().unwrap())
            );
            jail.create_file("bad.toml", "[egress.hosts]\n\"x.test\" = \"somewhere\"\n")?;
            let config = Config::load(Some(Path::new("bad.toml"))).map_err(|e| *e)?;
            assert!(config.egress.resolve().is_err());
            // In the environment, as docs/configuration.md shows it.
            jail.set_env("SANDBOXD_EGRESS__HOSTS", r#"{"pypi.internal"="10.0.0.7"}"#);
            jail.set_env("SANDBOXD_EGRESS__TRUSTED_CA", "/etc/sandboxd/egress-ca.pem");
            let config = Config::load(None).map_err(|e| *e)?;
            let operator = config.egress.resolve().map_err(figment::Error::from)?;
            assert_eq!(operator.host("pypi.internal"), "10.0.0.7".parse().ok());
            assert_eq!(
                config.egress.trusted_ca.as_deref(),
                Some(Path::new("/etc/sandboxd/egress-ca.pem"))
            );
            Ok(())
        });
    }

    #[test]
    fn master_keys_are_64_hex_digits() {
        let key = parse_master_key(&"0f".repeat(32)).unwrap();
        assert_eq!(key, [0x0f; 32]);
        assert!(parse_master_key("0f").is_none());
        assert!(parse_master_key(&"zz".repeat(32)).is_none());
        assert!(parse_master_key(&"é".repeat(32)).is_none());
    }

    #[test]
    fn defaults() {
        figment::Jail::expect_with(|_| {
            let config = Config::load(None).map_err(|e| e.to_string())?;
            assert_eq!(config.listen, "127.0.0.1:3000");
            assert_eq!(config.data_dir, PathBuf::from("./sandboxd-data"));
            Ok(())
        });
    }
}
