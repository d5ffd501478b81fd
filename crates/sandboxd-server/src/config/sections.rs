//! The tables of the configuration (`[templates.<name>]`, `[pools.<name>]`,
//! `[warm_on_demand]`, `[pause]`, `[servers]`, `[egress]`) and `cookie_secure`, each with the
//! conversion to what the server takes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[templates.<name>]`: the image and isolation of one template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TemplateConfig {
    /// The image in place of the built-in one.
    pub image: Option<String>,
    /// `container` or `gvisor`: the isolation of the template's sandboxes when their
    /// create asks for none.
    pub isolation: Option<sandboxd_core::model::Isolation>,
}

impl TemplateConfig {
    /// A template of this image.
    pub fn image(image: impl Into<String>) -> Self {
        Self {
            image: Some(image.into()),
            isolation: None,
        }
    }
}

/// `[pools.<template>]`: a warm pool of a template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolConfig {
    /// Started sandboxes kept ready to be claimed.
    pub size: usize,
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

impl WarmOnDemandConfig {
    /// No pool is kept for demand.
    pub const OFF: Self = Self {
        budget: 0,
        per_pool: 0,
        window_secs: 0,
    };

    pub fn bounds(&self) -> sandboxd_core::pool_demand::DemandBounds {
        sandboxd_core::pool_demand::DemandBounds {
            budget: self.budget,
            per_pool: self.per_pool,
            window: std::time::Duration::from_secs(self.window_secs),
        }
    }
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

/// `[activity]`: each sandbox's activity timeline (`sandbox.activity`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ActivityConfig {
    /// Keep a timeline of what is done in each sandbox.
    pub enabled: bool,
    /// Entries kept per sandbox; older ones go first.
    pub max_entries: u32,
    /// MiB of entries kept per sandbox; older ones go first.
    pub max_mb: u64,
    /// Hours a timeline is kept after its sandbox ended (killed, failed or removed).
    pub retention_hours: u64,
    /// MiB of one terminal session's recording; it stops there, with a marker.
    pub recording_max_mb: u64,
    /// MiB of terminal recordings one sandbox keeps; later sessions are not recorded.
    pub recordings_max_mb: u64,
    /// Record what is typed into terminals too (passwords typed at a prompt included).
    pub record_input: bool,
}

impl Default for ActivityConfig {
    fn default() -> Self {
        let keeping = sandboxd_core::activity::Keeping::default();
        Self {
            enabled: true,
            max_entries: keeping.entries,
            max_mb: keeping.bytes / (1024 * 1024),
            retention_hours: u64::try_from(keeping.retention_ms / 3_600_000).unwrap_or(168),
            recording_max_mb: keeping.recording_bytes / (1024 * 1024),
            recordings_max_mb: keeping.recordings_bytes / (1024 * 1024),
            record_input: keeping.record_input,
        }
    }
}

impl ActivityConfig {
    /// The service's bounds.
    pub fn keeping(&self) -> sandboxd_core::activity::Keeping {
        sandboxd_core::activity::Keeping {
            entries: self.max_entries,
            bytes: self.max_mb.saturating_mul(1024 * 1024),
            retention_ms: i64::try_from(self.retention_hours.saturating_mul(3_600_000))
                .unwrap_or(i64::MAX),
            recording_bytes: self.recording_max_mb.saturating_mul(1024 * 1024),
            recordings_bytes: self.recordings_max_mb.saturating_mul(1024 * 1024),
            record_input: self.record_input,
        }
    }
}

/// `[builds]`: what bounds the templates users build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BuildsConfig {
    /// Patterns of the images a build's `FROM` may name besides templates and
    /// snapshots (`docker.io/library/python:*`); empty: the configured templates' images.
    pub base_images: Vec<String>,
    /// Seconds one build may run.
    pub timeout_secs: u64,
    /// MiB one build may add to its base image.
    pub disk_mb: i64,
    /// Builds one organization runs at once.
    pub per_organization: i64,
    /// Builds this server runs at once, of every organization (the others wait).
    pub at_once: usize,
    /// Hours the build cache's images and prepared images are kept after they were
    /// made.
    pub keep_images_hours: u64,
    /// MiB of files one build context streamed as a tar (`template.context`) may hold.
    pub context_mb: u64,
    /// MiB of build contexts one organization keeps (each for an hour).
    pub contexts_mb: i64,
}

impl Default for BuildsConfig {
    fn default() -> Self {
        let options = sandboxd_service::BuildOptions::default();
        Self {
            base_images: options.base_images,
            timeout_secs: options.timeout.as_secs(),
            disk_mb: options.disk_mb,
            per_organization: options.per_organization,
            at_once: options.at_once,
            keep_images_hours: options.keep_images.as_secs() / 3600,
            context_mb: options.context_bytes >> 20,
            contexts_mb: options.contexts_bytes >> 20,
        }
    }
}

impl BuildsConfig {
    pub fn options(&self) -> sandboxd_service::BuildOptions {
        sandboxd_service::BuildOptions {
            base_images: self.base_images.clone(),
            timeout: std::time::Duration::from_secs(self.timeout_secs),
            disk_mb: self.disk_mb,
            per_organization: self.per_organization,
            at_once: self.at_once,
            keep_images: std::time::Duration::from_secs(self.keep_images_hours * 3600),
            context_bytes: self.context_mb << 20,
            contexts_bytes: self.contexts_mb << 20,
        }
    }
}

/// `[pause]`: a sandbox of the `gvisor` tier on the local engine paused in memory for
/// longer than `to_disk_after_secs` (default 600) is moved to disk by the reaper, when
/// the engine can save memory; 0: never.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PauseConfig {
    pub to_disk_after_secs: u64,
}

impl Default for PauseConfig {
    fn default() -> Self {
        Self {
            to_disk_after_secs: 600,
        }
    }
}

impl PauseConfig {
    /// How long a sandbox stays paused in memory before it moves to disk; `None`: for
    /// as long as it is paused.
    pub fn to_disk_after(&self) -> Option<std::time::Duration> {
        (self.to_disk_after_secs > 0)
            .then(|| std::time::Duration::from_secs(self.to_disk_after_secs))
    }
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
    /// Who may register servers; a bad value is named.
    pub fn registration(&self) -> Result<sandboxd_core::access::ServerRegistration, String> {
        sandboxd_core::access::ServerRegistration::parse(&self.registration).ok_or_else(|| {
            format!(
                "servers.registration must be \"operator\" or \"admins\", not {:?}",
                self.registration
            )
        })
    }

    /// The private networks servers may be in; every bad entry named.
    pub fn allowed_networks(&self) -> Result<sandboxd_core::networks::AllowedNetworks, String> {
        sandboxd_core::networks::AllowedNetworks::parse(&self.allowed_networks)
    }
}

/// `[egress]`: `hosts = { "name" = "address" }` (names answered before DNS: private
/// services, or a test's pretend internet), `allowed_networks = ["CIDR", …]` (the
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
    /// The settings as the egress proxy takes them; every bad entry named.
    pub fn operator(&self) -> Result<sandboxd_core::egress::Operator, String> {
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
    /// The setting as the dashboard's sessions take it; an unknown word is an error.
    pub fn resolve(&self) -> Result<crate::CookieSecure, String> {
        use crate::CookieSecure as C;
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
