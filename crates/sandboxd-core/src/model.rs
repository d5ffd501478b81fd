//! Domain records and their state guards.
//!
//! `Sandbox`, `SandboxStatus`, `NetworkMode`, `Role`, `Principal`, `Organization`,
//! `Member`, `ApiKey`, `AuditRecord`, `Server`. The state guards:
//! `Sandbox::running_container` (and `kept_container`: running or paused); the status
//! machine `SandboxStatus::may_become` (the store writes a status only from the statuses
//! it allows, in the same statement; `paused` is reached only from `running` and leaves
//! only to `running`, `error` or `killed`); and `Sandbox::on_expiry` (`Expiry::Pause` for
//! an `autoPause` sandbox at its idle timeout, else `Expiry::Kill`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a sandbox is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxStatus {
    Creating,
    Running,
    /// Frozen by the engine: its processes and memory are kept, it uses no CPU. Any
    /// call that reaches inside it resumes it first.
    Paused,
    Killed,
    Error,
}

impl SandboxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Creating => "creating",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Killed => "killed",
            Self::Error => "error",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "creating" => Self::Creating,
            "running" => Self::Running,
            "paused" => Self::Paused,
            "killed" => Self::Killed,
            "error" => Self::Error,
            _ => return None,
        })
    }

    /// Every status.
    pub const ALL: [Self; 5] = [
        Self::Creating,
        Self::Running,
        Self::Paused,
        Self::Killed,
        Self::Error,
    ];

    /// The legal transitions: `creating` → `running` | `error` | `killed`; `running` →
    /// `paused` | `error` | `killed`; `paused` → `running` | `error` | `killed`; `error`
    /// → `killed`; `killed` is final. A revived container
    /// keeps its sandbox `running` (no transition), and nothing goes back to `creating`.
    /// The store writes a status only from the statuses this allows, in the same
    /// statement, so a kill is never undone by a failure reported after it.
    pub fn may_become(self, next: Self) -> bool {
        use SandboxStatus::{Creating, Error, Killed, Paused, Running};
        matches!(
            (self, next),
            (Creating, Running | Error | Killed)
                | (Running, Paused | Error | Killed)
                | (Paused, Running | Error | Killed)
                | (Error, Killed)
        )
    }

    /// The statuses a sandbox may be in to move to `next`.
    pub fn sources(next: Self) -> impl Iterator<Item = Self> {
        Self::ALL
            .into_iter()
            .filter(move |from| from.may_become(next))
    }
}

/// What a sandbox may reach on the network.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// No network at all: the container has only a loopback interface.
    #[default]
    Isolated,
    /// Egress through a dedicated bridge with inter-container traffic disabled.
    Internet,
    /// No interface but loopback; connections to the hosts of its egress list leave
    /// through sandboxd's proxy, nothing else leaves.
    Allowlist,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Isolated => "isolated",
            Self::Internet => "internet",
            Self::Allowlist => "allowlist",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "isolated" => Some(Self::Isolated),
            "internet" => Some(Self::Internet),
            "allowlist" => Some(Self::Allowlist),
            _ => None,
        }
    }
}

/// How a sandbox is isolated from the host's kernel, as asked on create.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// Namespaces and cgroups on the host's kernel (runc).
    Container,
    /// gVisor's user-space kernel between the sandbox and the host's (runsc): no
    /// network interface but loopback.
    Gvisor,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Container => "container",
            Self::Gvisor => "gvisor",
        }
    }

    /// The isolation named `value` (as `as_str` writes it).
    pub fn parse(value: &str) -> Option<Self> {
        [Self::Container, Self::Gvisor]
            .into_iter()
            .find(|isolation| isolation.as_str() == value)
    }
}

/// Role of a member in an organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Admin,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Owner => "owner",
            Self::Admin => "admin",
            Self::Member => "member",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "owner" => Some(Self::Owner),
            "admin" => Some(Self::Admin),
            "member" => Some(Self::Member),
            _ => None,
        }
    }
}

/// Who is calling: resolved from an API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user_id: String,
    pub organization_id: String,
    pub role: Role,
    pub key_id: String,
    /// What this key may do: the role's permissions (a member's grants) narrowed to
    /// the key's scopes.
    pub permissions: crate::permissions::Permissions,
    /// The key's own scopes (`None`: unscoped); a key it makes is never wider.
    pub key_scopes: Option<crate::permissions::Permissions>,
    /// When the key expires (epoch ms); a key it makes expires no later.
    pub key_expires_at: Option<i64>,
}

/// A sandbox row. Environment variables are not part of it: they are stored encrypted
/// and only ever read back by the engine adapter at creation.
#[derive(Debug, Clone, PartialEq)]
pub struct Sandbox {
    pub sandbox_id: String,
    pub name: String,
    pub organization_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub server_id: Option<String>,
    pub image: String,
    pub template: Option<String>,
    pub container_id: Option<String>,
    pub status: SandboxStatus,
    pub cpu: f64,
    pub memory_mb: i64,
    pub pids_limit: i64,
    pub timeout_ms: i64,
    pub network_mode: NetworkMode,
    pub workdir: String,
    pub user: Option<String>,
    pub runtime: Option<String>,
    /// Milliseconds since the Unix epoch, as every time below.
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_activity_at: Option<i64>,
    pub killed_at: Option<i64>,
    /// Its `envVars` are given to every command instead of being in its container's
    /// environment: every sandbox made with them (the engine keeps a container's
    /// configuration on its disk in plain text, and a commit copies it), and a warm
    /// one claimed (its container started before they were known).
    pub env_per_exec: bool,
    /// The caller's labels, as given at creation (who it is for, which session).
    pub labels: BTreeMap<String, String>,
    /// The hosts an `allowlist` sandbox may reach (`crate::egress::Policy::entries`:
    /// lower-cased, without duplicates); empty in the other modes.
    pub egress: Vec<String>,
    /// At its idle timeout it is paused instead of killed, its memory kept there.
    pub auto_pause: Option<PauseMemory>,
    /// It ends `timeout_ms` after it was made or its timeout last set, whatever it
    /// does (activity does not extend it).
    pub fixed_timeout: bool,
    /// How long it may stay paused before it is killed.
    pub paused_timeout_ms: i64,
    /// When it was paused (while it is).
    pub paused_at: Option<i64>,
    /// While it is paused with its memory on disk (hibernated): the size of what was
    /// saved, in bytes, as the engine measured the memory it held.
    pub hibernated_bytes: Option<i64>,
    /// The volumes mounted into it.
    pub volumes: Vec<crate::volumes::VolumeMount>,
}

/// Where a paused sandbox's memory is kept: frozen in the host's memory (`ram`), or
/// saved to the host's disk with its container stopped (`disk`, hibernated).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PauseMemory {
    #[default]
    Ram,
    Disk,
}

impl PauseMemory {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ram => "ram",
            Self::Disk => "disk",
        }
    }
}

/// `autoPause` on create: `true` (in memory), `false`, or where its memory goes at the
/// idle timeout (`"ram"` or `"disk"`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, schemars::JsonSchema,
)]
#[serde(untagged)]
pub enum AutoPause {
    Flag(bool),
    To(PauseMemory),
}

impl AutoPause {
    /// Where the memory goes at the idle timeout; `None`: the sandbox is killed then.
    pub fn memory(self) -> Option<PauseMemory> {
        match self {
            Self::Flag(false) => None,
            Self::Flag(true) => Some(PauseMemory::Ram),
            Self::To(memory) => Some(memory),
        }
    }
}

/// A sandbox that is not running cannot be used; this is the error a guard returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("sandbox is {}", .0.as_str())]
pub struct NotRunning(pub SandboxStatus);

impl Sandbox {
    /// The container of a running sandbox, or why it cannot be used.
    pub fn running_container(&self) -> Result<&str, NotRunning> {
        match (&self.status, &self.container_id) {
            (SandboxStatus::Running, Some(id)) => Ok(id),
            (status, _) => Err(NotRunning(*status)),
        }
    }

    /// The container of a running or paused sandbox (one whose processes are kept), or
    /// why there is none.
    pub fn kept_container(&self) -> Result<&str, NotRunning> {
        match (&self.status, &self.container_id) {
            (SandboxStatus::Running | SandboxStatus::Paused, Some(id)) => Ok(id),
            (status, _) => Err(NotRunning(*status)),
        }
    }

    /// Where a paused sandbox's memory is; `None` while it is not paused.
    pub fn paused_to(&self) -> Option<PauseMemory> {
        (self.status == SandboxStatus::Paused).then_some(if self.hibernated_bytes.is_some() {
            PauseMemory::Disk
        } else {
            PauseMemory::Ram
        })
    }

    /// Whether the reaper should act on this sandbox at `now`: a running one past its
    /// idle timeout (paused when it asked for that, else killed), a paused one past
    /// its paused timeout (killed).
    pub fn is_expired(&self, now: i64) -> bool {
        matches!(self.status, SandboxStatus::Running | SandboxStatus::Paused)
            && self.expires_at.is_some_and(|at| at <= now)
    }

    /// What the reaper does with this expired sandbox.
    pub fn on_expiry(&self) -> Expiry {
        if self.status == SandboxStatus::Running && self.auto_pause.is_some() {
            Expiry::Pause
        } else {
            Expiry::Kill
        }
    }
}

/// What becomes of a sandbox at the end of its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    Pause,
    Kill,
}

/// A project of an organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub project_id: String,
    pub organization_id: String,
    pub name: String,
    pub description: Option<String>,
    pub created_at: i64,
}

/// An environment of a project; sandboxes live in environments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    pub environment_id: String,
    pub project_id: String,
    pub organization_id: String,
    pub name: String,
    pub description: Option<String>,
    pub created_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_written_in_either_form_from_the_same_bytes() {
        let random: [u8; 32] = std::array::from_fn(|i| (i * 37 + 5) as u8);
        let ours = KeyFormat::Sandboxd.write(&random);
        assert!(ours.starts_with("sbx_"), "{ours}");
        assert_eq!(ours.len(), 4 + 43);
        let e2b = KeyFormat::E2b.write(&random);
        assert_eq!(e2b.len(), 4 + 64);
        // E2B's SDKs check `\Ae2b_[0-9a-f]+\Z`.
        assert!(e2b.starts_with("e2b_"));
        assert!(
            e2b[4..].chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
            "{e2b}"
        );
        assert_eq!(&e2b[4..8], "052a");
        assert_eq!(serde_json::to_value(KeyFormat::E2b).unwrap(), "e2b");
        assert_eq!(
            serde_json::from_value::<KeyFormat>("sandboxd".into()).unwrap(),
            KeyFormat::Sandboxd
        );
    }

    #[test]
    fn only_legal_transitions_are_allowed() {
        use SandboxStatus::{Creating, Error, Killed, Paused, Running};
        let legal = [
            (Creating, Running),
            (Creating, Error),
            (Creating, Killed),
            (Running, Paused),
            (Running, Error),
            (Running, Killed),
            (Paused, Running),
            (Paused, Error),
            (Paused, Killed),
            (Error, Killed),
        ];
        for from in SandboxStatus::ALL {
            for to in SandboxStatus::ALL {
                assert_eq!(
                    from.may_become(to),
                    legal.contains(&(from, to)),
                    "{from:?} → {to:?}"
                );
            }
        }
        assert_eq!(SandboxStatus::sources(Killed).count(), 4);
        assert_eq!(
            SandboxStatus::sources(Paused).collect::<Vec<_>>(),
            [Running]
        );
        assert_eq!(SandboxStatus::sources(Creating).count(), 0);
        assert!(SandboxStatus::sources(Error).all(|s| s != Killed));
    }

    #[test]
    fn status_and_mode_round_trip() {
        for status in SandboxStatus::ALL {
            assert_eq!(SandboxStatus::parse(status.as_str()), Some(status));
        }
        for mode in [
            NetworkMode::Isolated,
            NetworkMode::Internet,
            NetworkMode::Allowlist,
        ] {
            assert_eq!(NetworkMode::parse(mode.as_str()), Some(mode));
        }
        for role in [Role::Owner, Role::Admin, Role::Member] {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(SandboxStatus::parse("frozen"), None);
    }
}

/// An organization, as one of its members sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    pub organization_id: String,
    pub name: String,
    /// The role of the user who asked.
    pub role: Role,
    pub created_at: i64,
}

/// A user's membership of an organization, with what they were granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub user_id: String,
    pub organization_id: String,
    pub name: String,
    pub role: Role,
    /// Granted permissions (owners and admins hold every permission whatever this says).
    pub grants: crate::permissions::Permissions,
    pub project_ids: Vec<String>,
    pub sandbox_ids: Vec<String>,
    /// Remote servers the member may see and create sandboxes on.
    pub server_ids: Vec<String>,
    pub created_at: i64,
}

/// An API key's record; the key itself is never stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub key_id: String,
    pub organization_id: String,
    pub user_id: String,
    pub name: String,
    /// The first characters of the key, to recognise it.
    pub prefix: String,
    /// `None`: the key holds everything its user holds.
    pub scopes: Option<crate::permissions::Permissions>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// Prefix of every sandboxd key, so leaked keys are easy to recognise and scan for.
pub const KEY_PREFIX: &str = "sbx_";
/// Prefix of a key in E2B's form.
pub const E2B_KEY_PREFIX: &str = "e2b_";

/// How a new key's secret is written. Both carry 32 random bytes and work alike
/// everywhere; `E2b` is the form E2B's SDKs check a key against (`e2b_` and lowercase
/// hex), so their users need no setting to turn that check off.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum KeyFormat {
    /// `sbx_` and 43 characters of URL-safe base64.
    #[default]
    Sandboxd,
    /// `e2b_` and 64 lowercase hex digits.
    E2b,
}

impl KeyFormat {
    /// The key made of these random bytes.
    pub fn write(self, random: &[u8; 32]) -> String {
        match self {
            Self::Sandboxd => format!(
                "{KEY_PREFIX}{}",
                base64_simd::URL_SAFE_NO_PAD.encode_to_string(random)
            ),
            Self::E2b => {
                let mut key = String::with_capacity(E2B_KEY_PREFIX.len() + 64);
                key.push_str(E2B_KEY_PREFIX);
                for byte in random {
                    key.push_str(&format!("{byte:02x}"));
                }
                key
            }
        }
    }
}

/// One entry of the audit log.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    pub audit_id: String,
    pub organization_id: String,
    /// `None` for what sandboxd did by itself (the reaper).
    pub actor_user_id: Option<String>,
    pub actor_key_id: Option<String>,
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    pub resource_name: Option<String>,
    pub metadata: serde_json::Value,
    pub created_at: i64,
}

/// What a member is given on creation, or what replaces their grants on update
/// (`None`: unchanged, or the default on creation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberChanges {
    pub role: Option<Role>,
    pub permissions: Option<crate::permissions::Permissions>,
    pub project_ids: Option<Vec<String>>,
    pub sandbox_ids: Option<Vec<String>>,
    pub server_ids: Option<Vec<String>>,
}

/// A remote server sandboxes can run on: a Docker engine reached over SSH. Its private
/// key is kept sealed by the store and is not part of this record.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    pub server_id: String,
    pub organization_id: String,
    pub name: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    /// The pinned host key (`algorithm base64`); `None` until given or learned.
    pub host_key: Option<String>,
    /// The engine's socket on the server.
    pub docker_socket: String,
    /// Where sandboxd keeps its files on the server (the agent, its sockets).
    pub remote_dir: String,
    /// CPUs sandboxes may reserve; `None`: what the engine reports.
    pub cpu_capacity: Option<f64>,
    /// Memory (MiB) sandboxes may reserve; `None`: what the engine reports.
    pub memory_mb_capacity: Option<i64>,
    /// Warm pools kept on it: template name → members to keep ready.
    pub warm_pools: BTreeMap<String, usize>,
    pub created_at: i64,
}

/// A server's fields to change (`None`: unchanged).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerChanges {
    pub name: Option<String>,
    pub address: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub private_key: Option<String>,
    /// `Some(None)`: forget the pinned key (the next `server.test` learns it again).
    pub host_key: Option<Option<String>>,
    pub docker_socket: Option<String>,
    pub remote_dir: Option<String>,
    pub cpu_capacity: Option<Option<f64>>,
    pub memory_mb_capacity: Option<Option<i64>>,
    /// The whole table of warm pools (a template left out has none).
    pub warm_pools: Option<BTreeMap<String, usize>>,
}
