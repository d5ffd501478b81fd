//! Response bodies.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::Encoding;
use crate::error::Issue;
use crate::model::{Environment, NetworkMode, Project, Sandbox, SandboxStatus};

/// A sandbox as the API shows it. Environment variables are never part of it.
#[derive(Debug, Clone, Serialize, ToSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxView {
    pub sandbox_id: String,
    pub name: String,
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
    /// The engine runtime it runs under (`null`: the engine's default, runc).
    pub runtime: Option<String>,
    /// How it is isolated from the host kernel: `container` (runc: namespaces, cgroups,
    /// no capabilities, seccomp), `gvisor` (runsc) or `microvm` (Kata).
    pub isolation: String,
    /// RFC 3339 times.
    pub created_at: String,
    pub expires_at: Option<String>,
    pub last_activity_at: Option<String>,
    pub killed_at: Option<String>,
    /// The labels given at creation.
    pub labels: BTreeMap<String, String>,
    /// What an `allowlist` sandbox may reach; absent in the other modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressView>,
    /// Paused at the idle timeout instead of killed.
    #[serde(default)]
    pub auto_pause: bool,
    /// Where its memory goes when it is paused at the idle timeout (`ram` or `disk`);
    /// absent without `autoPause`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_pause_to: Option<crate::model::PauseMemory>,
    /// Ends `timeoutMs` after it was made or its timeout last set, whatever it does.
    #[serde(default)]
    pub fixed_timeout: bool,
    /// How long it may stay paused before it is killed.
    #[serde(default)]
    pub paused_timeout_ms: i64,
    /// When it was paused (RFC 3339), while it is; `expiresAt` is then when it is killed.
    #[serde(default)]
    pub paused_at: Option<String>,
    /// The volumes mounted into it.
    #[serde(default)]
    pub volumes: Vec<crate::volumes::VolumeMount>,
    /// Where a paused sandbox's memory is (`ram` or `disk`); absent while it is not
    /// paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_to: Option<crate::model::PauseMemory>,
    /// A sandbox paused to disk: the size of its saved memory, in bytes (the memory it
    /// held, as its engine measured it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hibernated_bytes: Option<i64>,
}

/// The egress list of an `allowlist` sandbox.
#[derive(Debug, Clone, Serialize, ToSchema, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EgressView {
    pub allow: Vec<String>,
}

impl SandboxView {
    /// The view of a row; `format_time` renders epoch milliseconds as RFC 3339.
    pub fn from_sandbox(sandbox: &Sandbox, format_time: impl Fn(i64) -> String) -> Self {
        let time = |value: Option<i64>| value.map(&format_time);
        Self {
            sandbox_id: sandbox.sandbox_id.clone(),
            name: sandbox.name.clone(),
            project_id: sandbox.project_id.clone(),
            environment_id: sandbox.environment_id.clone(),
            server_id: sandbox.server_id.clone(),
            image: sandbox.image.clone(),
            template: sandbox.template.clone(),
            container_id: sandbox.container_id.clone(),
            status: sandbox.status,
            cpu: sandbox.cpu,
            memory_mb: sandbox.memory_mb,
            pids_limit: sandbox.pids_limit,
            timeout_ms: sandbox.timeout_ms,
            network_mode: sandbox.network_mode,
            workdir: sandbox.workdir.clone(),
            user: sandbox.user.clone(),
            runtime: sandbox.runtime.clone(),
            isolation: crate::plan::isolation_tier(sandbox.runtime.as_deref()).to_owned(),
            created_at: format_time(sandbox.created_at),
            expires_at: time(sandbox.expires_at),
            last_activity_at: time(sandbox.last_activity_at),
            killed_at: time(sandbox.killed_at),
            labels: sandbox.labels.clone(),
            egress: (sandbox.network_mode == NetworkMode::Allowlist).then(|| EgressView {
                allow: sandbox.egress.clone(),
            }),
            auto_pause: sandbox.auto_pause.is_some(),
            auto_pause_to: sandbox.auto_pause,
            fixed_timeout: sandbox.fixed_timeout,
            paused_timeout_ms: sandbox.paused_timeout_ms,
            paused_at: time(sandbox.paused_at),
            volumes: sandbox.volumes.clone(),
            paused_to: sandbox.paused_to(),
            hibernated_bytes: sandbox.hibernated_bytes,
        }
    }
}

/// Result of `sandbox.exec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecResult {
    /// Up to 1 MiB of standard output.
    pub stdout: String,
    /// Up to 1 MiB of standard error.
    pub stderr: String,
    /// Exit status; 124 when the command timed out, 1 when none was reported.
    pub exit_code: i64,
    pub timed_out: bool,
    /// Whether stdout or stderr was cut at 1 MiB.
    pub truncated: bool,
    /// The command (or a process it started) was killed by the kernel for exceeding
    /// the sandbox's memory limit; the sandbox itself keeps running.
    pub oom_killed: bool,
}

/// Result of `sandbox.writeFile`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteFileResult {
    pub path: String,
    /// Bytes written.
    pub size: u64,
}

/// Result of `sandbox.readFile`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadFileResult {
    pub path: String,
    /// Size in bytes of the file.
    pub size: u64,
    pub encoding: Encoding,
    pub content: String,
}

/// Kind of a directory entry.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum FileType {
    Directory,
    File,
    Symlink,
    Other,
}

/// One entry of `sandbox.listFiles`; metadata is `null` on images without GNU find.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileEntry {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FileType,
    pub size: Option<u64>,
    /// Permission bits in octal, as `644`.
    pub mode: Option<String>,
    /// RFC 3339 modification time.
    pub modified_at: Option<String>,
}

/// Result of `sandbox.listFiles`: directories first, then by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListFilesResult {
    pub path: String,
    pub entries: Vec<FileEntry>,
}

/// A template sandboxes can be made from: configured by the operator, or built by
/// users (`template.build`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateView {
    pub name: String,
    /// `configured` (the operator's) or `built` (a project's, from a Dockerfile).
    pub kind: String,
    /// The project a built template belongs to; `null` for a configured one.
    pub project_id: Option<String>,
    pub image: String,
    pub user: Option<String>,
    pub workdir: String,
    pub description: String,
    /// The isolation of its sandboxes when their create asks for none (`null`: the
    /// server's).
    pub isolation: Option<crate::model::Isolation>,
}

/// An environment as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentView {
    pub environment_id: String,
    pub name: String,
    pub project_id: String,
    pub description: Option<String>,
    pub created_at: String,
}

impl EnvironmentView {
    pub fn from_environment(env: &Environment, format_time: impl Fn(i64) -> String) -> Self {
        Self {
            environment_id: env.environment_id.clone(),
            name: env.name.clone(),
            project_id: env.project_id.clone(),
            description: env.description.clone(),
            created_at: format_time(env.created_at),
        }
    }
}

/// A project with its environments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectView {
    pub project_id: String,
    pub name: String,
    pub description: Option<String>,
    pub organization_id: String,
    pub created_at: String,
    pub environments: Vec<EnvironmentView>,
}

impl ProjectView {
    pub fn from_project(
        project: &Project,
        environments: Vec<EnvironmentView>,
        format_time: impl Fn(i64) -> String,
    ) -> Self {
        Self {
            project_id: project.project_id.clone(),
            name: project.name.clone(),
            description: project.description.clone(),
            organization_id: project.organization_id.clone(),
            created_at: format_time(project.created_at),
            environments,
        }
    }
}

/// Every error response: a stable code (as the reference API's), a message, and for
/// validation errors the issues found.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// `BAD_REQUEST`, `UNAUTHORIZED`, `FORBIDDEN`, `NOT_FOUND`, `CONFLICT`,
    /// `PRECONDITION_FAILED`, `PAYLOAD_TOO_LARGE`, `INTERNAL_SERVER_ERROR` or `SERVICE_UNAVAILABLE`.
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<Issue>,
}

/// What `sandbox.upload` wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UploadResult {
    pub path: String,
    /// Entries written (1 for a raw file).
    pub entries: u64,
    /// Content bytes written, all files together.
    pub bytes: u64,
}
