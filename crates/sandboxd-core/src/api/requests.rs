//! Request bodies (mutations) and query strings (queries).

use std::collections::BTreeMap;

use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::model::NetworkMode;

/// Content encoding of a file body.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Deserialize,
    serde::Serialize,
    ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    #[default]
    Utf8,
    Base64,
}

impl Encoding {
    /// `bytes` as text in this encoding; in `utf8`, invalid sequences become U+FFFD.
    pub fn encode(self, bytes: &[u8]) -> String {
        match self {
            Self::Utf8 => String::from_utf8_lossy(bytes).into_owned(),
            Self::Base64 => base64_simd::STANDARD.encode_to_string(bytes),
        }
    }

    /// The bytes `text` stands for; `None` when it is not valid base64. Base64 is read
    /// as browsers read it: whitespace (line breaks of `base64` output) ignored,
    /// padding optional.
    pub fn decode(self, text: String) -> Option<Vec<u8>> {
        match self {
            Self::Utf8 => Some(text.into_bytes()),
            Self::Base64 => base64_simd::forgiving_decode_to_vec(text.as_bytes()).ok(),
        }
    }
}

/// Body of `sandbox.create`. A field it does not know is refused, never ignored: a
/// sandbox is not made with less than was asked.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateSandboxRequest {
    /// Environment the sandbox belongs to.
    pub environment_id: String,
    /// Display name (1–64 characters); generated when absent.
    #[schema(min_length = 1, max_length = 64)]
    pub name: Option<String>,
    /// Built-in template (`base`, `python`, `node`); this, `image` or `snapshotId` is
    /// required.
    pub template: Option<String>,
    /// Custom image, run as the image's default user.
    pub image: Option<String>,
    /// A snapshot to start from (`snapshot.all` lists them), in place of `template` and
    /// `image`: its files, user and workdir, on the server it lives on. None of the
    /// environment of the sandbox it was taken of is carried.
    pub snapshot_id: Option<String>,
    /// The remote server to run on (`server.all` lists them); `null`: the local engine,
    /// or where the most room is when the server places sandboxes.
    pub server_id: Option<String>,
    /// CPUs, 0.1–64 (default 1).
    #[schema(minimum = 0.1, maximum = 64)]
    pub cpu: Option<f64>,
    /// Memory in MiB, 64–262144 (default 512); swap is disabled.
    #[schema(minimum = 64, maximum = 262144)]
    pub memory_mb: Option<i64>,
    /// Maximum number of processes, 16–65536 (default 256).
    #[schema(minimum = 16, maximum = 65536)]
    pub pids_limit: Option<i64>,
    /// Idle timeout in ms, 10 s–24 h (default 5 min).
    #[schema(minimum = 10000, maximum = 86400000)]
    pub timeout_ms: Option<i64>,
    /// `isolated` (default, no network), `internet`, or `allowlist` (no network but
    /// connections to the hosts in `egress.allow`, through sandboxd's proxy).
    pub network_mode: Option<NetworkMode>,
    /// What an `allowlist` sandbox may reach; only with that mode.
    pub egress: Option<EgressRequest>,
    /// `KEY=value` lines (≤ 64 KiB); stored encrypted, never returned.
    pub env_vars: Option<String>,
    /// Absolute working directory (default `/home/user`).
    #[schema(min_length = 1, max_length = 4096, pattern = "^/")]
    pub workdir: Option<String>,
    /// Labels kept with the sandbox and returned (at most 32; keys of 1–63 letters,
    /// digits, `.`, `_`, `-`, `/`; values of at most 256 characters).
    pub labels: Option<BTreeMap<String, String>>,
    /// At the idle timeout, pause the sandbox (processes and memory kept, no CPU)
    /// instead of killing it; any later call resumes it (default false). `true` or
    /// `"ram"` keeps its memory in memory; `"disk"` (a sandbox of the `gvisor` tier)
    /// saves it to the host's disk, as `sandbox.pause {memory: "disk"}`.
    pub auto_pause: Option<crate::model::AutoPause>,
    /// End the sandbox `timeoutMs` after it is made (or its timeout last set) whatever
    /// it does, instead of after its last activity (default false).
    pub fixed_timeout: Option<bool>,
    /// How long the sandbox may stay paused before it is killed, 10 s–30 days
    /// (default 24 h).
    #[schema(minimum = 10000, maximum = 2592000000_i64)]
    pub paused_timeout_ms: Option<i64>,
    /// Volumes to mount (at most 8, at distinct paths that do not nest), all of one
    /// server: the sandbox runs there. Mounted at every start of its container.
    pub volumes: Option<Vec<super::VolumeMountRequest>>,
    /// `container` (runc, namespaces on the host's kernel) or `gvisor` (runsc: a
    /// user-space kernel in between; `isolated` or `allowlist` networking only), where
    /// the server's engine offers it; default: the server's.
    pub isolation: Option<crate::model::Isolation>,
}

/// Body of `sandbox.exec`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecRequest {
    pub sandbox_id: String,
    /// Command run through `sh -c` (≤ 64 KiB).
    #[schema(min_length = 1)]
    pub cmd: String,
    /// Absolute working directory (default: the sandbox workdir).
    #[schema(min_length = 1, max_length = 4096, pattern = "^/")]
    pub cwd: Option<String>,
    /// Extra environment variables for this command.
    pub env: Option<BTreeMap<String, String>>,
    /// Timeout in ms, 1 s–10 min (default 60 s); on expiry exit code is 124.
    #[schema(minimum = 1000, maximum = 600000)]
    pub timeout_ms: Option<u64>,
}

/// Body of `sandbox.writeFile`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteFileRequest {
    pub sandbox_id: String,
    /// Absolute path of the file; parent directories are created.
    #[schema(min_length = 1, max_length = 4096, pattern = "^/")]
    pub path: String,
    /// File content (≤ 10 MiB once decoded).
    pub content: String,
    #[serde(default)]
    pub encoding: Encoding,
    /// Permission bits, 0–0o7777 (default 0o644).
    #[schema(minimum = 0, maximum = 4095)]
    pub mode: Option<u32>,
}

/// Query of `sandbox.readFile`.
#[derive(
    Debug, Clone, Default, Deserialize, serde::Serialize, ToSchema, IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ReadFileQuery {
    pub sandbox_id: String,
    /// Absolute path of a regular file (≤ 10 MiB).
    #[schema(min_length = 1, max_length = 4096, pattern = "^/")]
    #[param(min_length = 1, max_length = 4096, pattern = "^/")]
    pub path: String,
    #[serde(default)]
    #[param(inline)]
    pub encoding: Encoding,
}

/// How a streamed transfer is shaped.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, ToSchema, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TransferFormat {
    /// One file's bytes (`application/octet-stream`).
    Raw,
    /// A tar of a tree (`application/x-tar`).
    Tar,
}

/// Query of `sandbox.upload` (the body is the file's bytes, or a tar).
#[derive(Debug, Clone, Default, Deserialize, ToSchema, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct UploadQuery {
    pub sandbox_id: String,
    /// Absolute path: the file (`raw`), or the directory the tree is unpacked under
    /// (`tar`). Missing parent directories are created.
    #[param(min_length = 1, max_length = 4096, pattern = "^/")]
    pub path: String,
    /// `raw` (default) or `tar`.
    #[param(inline)]
    pub format: Option<TransferFormat>,
    /// A raw file's permission bits in octal, e.g. `755` (default 644).
    pub mode: Option<String>,
}

/// Query of `sandbox.download`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct DownloadQuery {
    pub sandbox_id: String,
    /// Absolute path of a file or a directory; required unless `changes`.
    #[param(min_length = 1, max_length = 4096, pattern = "^/")]
    #[serde(default)]
    pub path: Option<String>,
    /// `raw` (a file's bytes) or `tar`; absent: `raw` for a file, `tar` for a directory.
    #[param(inline)]
    pub format: Option<TransferFormat>,
    /// Instead of a path: a tar of what `sandbox.changes` lists (added and changed
    /// files, new directories, links, and a `.wh.<name>` entry for each removed path,
    /// as image layers mark removals), named from the root.
    pub changes: Option<bool>,
    /// With `changes`: every changed path, not only those under the user's areas.
    pub all: Option<bool>,
}

/// Query of `sandbox.listFiles`.
#[derive(
    Debug, Clone, Default, Deserialize, serde::Serialize, ToSchema, IntoParams, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListFilesQuery {
    pub sandbox_id: String,
    /// Absolute directory (default: the sandbox workdir).
    #[schema(min_length = 1, max_length = 4096, pattern = "^/")]
    #[param(min_length = 1, max_length = 4096, pattern = "^/")]
    pub path: Option<String>,
}

/// The egress of an `allowlist` sandbox.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressRequest {
    /// Host names (`api.example.com`), `*.` wildcards over one or more labels
    /// (`*.example.com`, not `example.com` itself), each with an optional `:port`
    /// (80 and 443 otherwise); at most 256. IP addresses are refused.
    #[schema(max_items = 256)]
    pub allow: Vec<String>,
    /// Headers sandboxd adds to the requests programs send to a host through the proxy
    /// in plain HTTP (`http://api.example.com/…`), while it speaks HTTPS to the host
    /// (port 443, or the port the URL names). Sealed at rest and never returned: the
    /// value never enters the sandbox. At most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 16)]
    pub credentials: Vec<EgressCredentialRequest>,
}

/// A header sandboxd adds to one host's requests for the sandbox.
#[derive(Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressCredentialRequest {
    /// An exact host name of the list (allowed on 443).
    pub host: String,
    /// e.g. `Authorization`, `X-Api-Key`.
    pub header: String,
    /// e.g. `Bearer …`; visible characters, spaces and tabs, at most 8192 bytes.
    pub value: String,
}

impl std::fmt::Debug for EgressCredentialRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressCredentialRequest")
            .field("host", &self.host)
            .field("header", &self.header)
            .field("value", &"<sealed>")
            .finish()
    }
}

/// Body of `sandbox.setEgress`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetEgressRequest {
    pub sandbox_id: String,
    /// The new list, replacing the old one (as `egress.allow` on create); new
    /// connections see it within a second.
    #[schema(max_items = 256)]
    pub allow: Vec<String>,
}

/// Body of `sandbox.setTimeout`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetTimeoutRequest {
    pub sandbox_id: String,
    /// New idle timeout in ms, 10 s–24 h; the sandbox expires this long from now.
    #[schema(minimum = 10000, maximum = 86400000)]
    pub timeout_ms: i64,
}

/// Body of `sandbox.rename`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RenameSandboxRequest {
    pub sandbox_id: String,
    /// Its new name: 1–64 characters, no control characters.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
}

/// Body of `sandbox.kill` and `sandbox.remove`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxIdBody {
    pub sandbox_id: String,
}

/// Body of `sandbox.pause`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxPauseBody {
    pub sandbox_id: String,
    /// Where its memory goes: `ram` (the default) keeps it frozen in the host's memory;
    /// `disk` saves every process to the host's disk and stops the container (a sandbox
    /// of the `gvisor` tier only), so the host gets its memory back and the sandbox
    /// outlives a restart of the server, the engine or the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::model::PauseMemory>,
}

/// Query of `sandbox.one`.
#[derive(
    Debug, Clone, Default, Deserialize, ToSchema, IntoParams, schemars::JsonSchema, serde::Serialize,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct SandboxIdQuery {
    pub sandbox_id: String,
}

/// Query of `sandbox.list`: one of the two ids is required.
#[derive(
    Debug, Clone, Default, Deserialize, ToSchema, IntoParams, schemars::JsonSchema, serde::Serialize,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListSandboxesQuery {
    pub environment_id: Option<String>,
    pub project_id: Option<String>,
}

/// Body of `project.create`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateProjectRequest {
    /// 1–64 characters.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    pub description: Option<String>,
}

/// Body of `environment.create`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateEnvironmentRequest {
    pub project_id: String,
    /// 1–64 characters, unique within the project.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    pub description: Option<String>,
}
