//! `template.*`: templates users build from a Dockerfile, their versions and build logs.
//!
//! `BuildTemplateRequest` → `BuildStarted`; `ContextQuery` and a tar → `ContextUploaded`;
//! `BuildLogQuery` → `BuildLogView`;
//! `TemplateQuery` → `BuiltTemplateView`; `TemplateIdBody` for `template.remove`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::model::{Isolation, NetworkMode};

/// Body of `template.build`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BuildTemplateRequest {
    /// 1–64 lower-case letters, digits, `.`, `_` or `-`, starting with a letter or digit;
    /// not a configured template's name. A build of a name that exists in the project
    /// makes its next version.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    /// The Dockerfile (at most 1 MiB): FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, CMD,
    /// ENTRYPOINT and LABEL. `FROM` names a configured template, a built template of the
    /// project, or an image the operator allows that the engine holds (never pulled).
    #[schema(min_length = 1, max_length = 1048576)]
    pub dockerfile: String,
    /// What COPY and ADD read: a relative path → its content in base64 (at most 10,000
    /// files, 64 MiB decoded). A larger context is streamed as a tar to
    /// `template.context` and named by `contextId` instead.
    pub files: Option<BTreeMap<String, String>>,
    /// A context uploaded to `template.context` in the same project (instead of
    /// `files` and `fileModes`): what COPY and ADD read, each file with its mode.
    pub context_id: Option<String>,
    /// The mode of a file of `files`, in octal (`"0755"`), as COPY and ADD write it (as
    /// `docker build` keeps a file's mode); a file not named here is written `0644`.
    pub file_modes: Option<BTreeMap<String, String>>,
    /// The project the template belongs to (default: the caller's only project).
    pub project_id: Option<String>,
    /// The CPUs of the build's steps (default 1).
    #[schema(minimum = 0.1, maximum = 64)]
    pub cpu: Option<f64>,
    /// The memory of the build's steps, MiB (default 1024).
    #[schema(minimum = 64, maximum = 262144)]
    pub memory_mb: Option<i64>,
    /// The isolation of the build's steps and of its sandboxes (default: the base's, else
    /// the server's); never weaker than the base's.
    pub isolation: Option<Isolation>,
    /// The network RUN steps get: `isolated` (default) or `internet`.
    pub network_mode: Option<NetworkMode>,
}

/// Answer of `template.build` (202): the build runs on; `template.buildLog` follows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BuildStarted {
    pub template_id: String,
    pub build_id: String,
    pub version: i64,
    /// `building`.
    pub status: String,
}

/// Query of `template.context` (the body is a tar, gzipped or not).
#[derive(Debug, Clone, Default, Deserialize, ToSchema, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ContextQuery {
    /// The project whose builds may read it (default: the caller's only project).
    pub project_id: Option<String>,
}

/// Answer of `template.context`: a build context, usable by `template.build
/// {contextId}` in its project until it expires.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContextUploaded {
    pub context_id: String,
    pub project_id: String,
    /// Its files and links.
    pub files: i64,
    /// The bytes of its files.
    pub bytes: i64,
    /// RFC 3339.
    pub expires_at: String,
}

/// Query of `template.buildLog`.
#[derive(
    Debug, Clone, Default, Deserialize, ToSchema, IntoParams, schemars::JsonSchema, Serialize,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct BuildLogQuery {
    pub build_id: String,
    /// The first line wanted (default 0); `nextOffset` of the last answer.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// One line of a build's log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BuildLogEntry {
    /// RFC 3339.
    pub time: String,
    /// The step (1 is `FROM`; 0: the builder's lines before it).
    pub step: i64,
    /// `stdout`, `stderr` or `system` (the builder's own lines).
    pub stream: String,
    pub line: String,
}

/// Why a build failed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BuildError {
    pub step: i64,
    pub message: String,
}

/// Answer of `template.buildLog`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BuildLogView {
    /// `building`, `ready` or `error`.
    pub status: String,
    /// At most 1,000 lines from `offset` on.
    pub entries: Vec<BuildLogEntry>,
    /// The offset to ask next.
    pub next_offset: i64,
    pub error: Option<BuildError>,
}

/// Query of `template.one`: `templateId`, or `name` (in `projectId`, default the
/// caller's only project).
#[derive(
    Debug, Clone, Default, Deserialize, ToSchema, IntoParams, schemars::JsonSchema, Serialize,
)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct TemplateQuery {
    pub template_id: Option<String>,
    pub name: Option<String>,
    pub project_id: Option<String>,
}

/// Body of `template.remove`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, schemars::JsonSchema, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateIdBody {
    pub template_id: String,
}

/// One version of a built template.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BuiltTemplateVersion {
    pub build_id: String,
    pub version: i64,
    /// `building`, `ready` or `error`.
    pub status: String,
    /// RFC 3339.
    pub created_at: String,
    pub finished_at: Option<String>,
    pub error: Option<BuildError>,
}

/// A built template, its newest ready version first among what it says.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BuiltTemplateView {
    pub template_id: String,
    pub name: String,
    pub project_id: String,
    /// The version a create uses (the newest ready one); `null` while none is ready.
    pub version: Option<i64>,
    /// The user its sandboxes run as and their workdir; `null`: the image's.
    pub user: Option<String>,
    pub workdir: Option<String>,
    /// The command run in a sandbox after it is made (CMD and ENTRYPOINT).
    pub start_command: Option<Vec<String>>,
    /// The command run after it until it succeeds, before a create answers (a template
    /// built with E2B's builder and a ready command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_command: Option<Vec<String>>,
    pub cpu: Option<f64>,
    pub memory_mb: Option<i64>,
    pub isolation: Option<String>,
    /// Every version, newest first.
    pub versions: Vec<BuiltTemplateVersion>,
}
