//! Turns wire requests into typed, checked commands. Every bound of the API lives here.
//!
//! A request becomes a typed command (`CreateSandbox`, `ExecCommand`, `WriteFile`, …) or
//! an `Invalid` listing every bad field. Each bound's number is in `limits.rs`; the
//! OpenAPI document states the same numbers, held to them by `api/schema_limits.rs`.
//! Bounds of the server's own resources (quotas, the agent channel's budgets) live with
//! the code that enforces them. A create takes `snapshotId` in place of `template` and
//! `image` (`ImageChoice::snapshot`), never with them; `download` answers whether a
//! download is of a path or of the sandbox's changes (`DownloadOf`), never both.

use std::collections::BTreeMap;

use crate::api::{
    CreateEnvironmentRequest, CreateProjectRequest, CreateSandboxRequest, DownloadQuery, Encoding,
    ExecRequest, ListFilesQuery, ListSandboxesQuery, ReadFileQuery, RenameSandboxRequest,
    SetEgressRequest, SetTimeoutRequest, TransferFormat, UploadQuery, WriteFileRequest,
};
use crate::env_vars;
use crate::error::{Invalid, Issues};
use crate::images;
use crate::limits::*;
use crate::model::NetworkMode;
use crate::paths;
use crate::templates::TEMPLATE_NAMES;

mod access;
mod ports;
mod servers;
mod snapshots;
mod templates;
mod volumes;
pub use access::*;
pub use ports::*;
pub use servers::*;
pub use snapshots::*;
pub use templates::*;
pub use volumes::*;

/// Where the image of a new sandbox comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageChoice {
    /// Built-in template; gives the user and default workdir.
    pub template: Option<String>,
    /// Custom image; overrides the template's image when both are given.
    pub image: Option<String>,
    /// A snapshot's id, in place of both.
    pub snapshot: Option<String>,
    /// One build of the template built in the project, in place of its newest ready
    /// one (E2B's `name:tag`); not offered by sandboxd's own API.
    pub template_build: Option<String>,
}

/// A checked `sandbox.create`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSandbox {
    pub environment_id: String,
    pub name: Option<String>,
    pub image: ImageChoice,
    pub server_id: Option<String>,
    pub cpu: f64,
    pub memory_mb: i64,
    pub pids_limit: i64,
    pub timeout_ms: i64,
    pub network_mode: NetworkMode,
    /// The egress list of an `allowlist` sandbox, as stored (`Policy::entries`).
    pub egress: Vec<String>,
    /// Headers sandboxd adds to its requests to their hosts (sealed at rest).
    pub egress_credentials: Vec<crate::egress_credentials::EgressCredential>,
    pub env_vars: Option<String>,
    pub workdir: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// Paused instead of killed at the idle timeout, its memory kept there.
    pub auto_pause: Option<crate::model::PauseMemory>,
    /// Activity does not extend its timeout.
    pub fixed_timeout: bool,
    /// Killed after this long paused.
    pub paused_timeout_ms: i64,
    /// The volumes to mount, checked (not yet found).
    pub volumes: Vec<crate::volumes::VolumeMount>,
    /// The isolation asked for; the server's when `None`.
    pub isolation: Option<crate::model::Isolation>,
}

/// A checked `sandbox.exec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecCommand {
    pub sandbox_id: String,
    pub cmd: String,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub timeout_ms: u64,
}

/// A checked `sandbox.writeFile`, content decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFile {
    pub sandbox_id: String,
    pub path: String,
    pub content: Vec<u8>,
    pub mode: Option<u32>,
}

/// A checked `sandbox.readFile`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFile {
    pub sandbox_id: String,
    pub path: String,
    pub encoding: Encoding,
}

/// A checked `sandbox.listFiles`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListFiles {
    pub sandbox_id: String,
    pub path: Option<String>,
}

/// Which sandboxes `sandbox.list` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListScope {
    Environment(String),
    Project(String),
}

fn required_id(issues: &mut Issues, field: &str, value: &str) {
    if value.is_empty() {
        issues.push(field, "is required");
    } else if value.len() > 128 || value.chars().any(char::is_control) {
        issues.push(field, "is not a valid id");
    }
}

/// Checks a sandbox id alone (queries and kill/remove bodies).
pub fn sandbox_id(value: &str) -> Result<String, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", value);
    issues.finish(value.to_owned())
}

fn display_name(issues: &mut Issues, field: &str, value: &str) {
    let chars = value.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS {
        issues.push(field, "must be 1 to 64 characters");
    } else if value.chars().any(char::is_control) {
        issues.push(field, "must not contain control characters");
    }
}

fn path_into(issues: &mut Issues, field: &str, raw: &str) -> Option<String> {
    match paths::absolute(field, raw) {
        Ok(path) => Some(path),
        Err(invalid) => {
            for issue in invalid.issues {
                issues.push(issue.path, issue.message);
            }
            None
        }
    }
}

/// Checks `sandbox.create`.
pub fn create_sandbox(req: CreateSandboxRequest) -> Result<CreateSandbox, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "environmentId", &req.environment_id);
    if let Some(name) = &req.name {
        display_name(&mut issues, "name", name);
    }
    if let Some(template) = &req.template
        && !TEMPLATE_NAMES.contains(&template.as_str())
        && !template_name_ok(template)
    {
        issues.push(
            "template",
            "must be base, python, node or a template built in the project (1 to 64 lower-case letters, digits, `.`, `_` or `-`)",
        );
    }
    if let Some(image) = &req.image
        && (image.is_empty()
            || image.len() > MAX_IMAGE_CHARS
            || !image.chars().all(images::reference_char))
    {
        issues.push(
            "image",
            "must be an image reference of 1 to 255 characters (letters, digits, `.`, `_`, `-`, `/`, `:`, `@`)",
        );
    } else if let Some(image) = &req.image
        && crate::snapshots::names_snapshot_image(image)
    {
        issues.push(
            "image",
            "names a snapshot's or a built template's image: give its snapshotId or template instead",
        );
    }
    match &req.snapshot_id {
        Some(snapshot) if req.template.is_some() || req.image.is_some() => {
            required_id(&mut issues, "snapshotId", snapshot);
            issues.push(
                "snapshotId",
                "takes the place of template and image: give only one of them",
            );
        }
        Some(snapshot) => required_id(&mut issues, "snapshotId", snapshot),
        None if req.template.is_none() && req.image.is_none() => {
            issues.push("image", "one of template, image or snapshotId is required");
        }
        None => {}
    }
    let cpu = req.cpu.unwrap_or(DEFAULT_CPU);
    if !(MIN_CPU..=MAX_CPU).contains(&cpu) {
        issues.push("cpu", "must be between 0.1 and 64");
    }
    let memory_mb = req.memory_mb.unwrap_or(DEFAULT_MEMORY_MB);
    if !(MIN_MEMORY_MB..=MAX_MEMORY_MB).contains(&memory_mb) {
        issues.push("memoryMb", "must be between 64 and 262144");
    }
    let pids_limit = req.pids_limit.unwrap_or(DEFAULT_PIDS_LIMIT);
    if !(MIN_PIDS_LIMIT..=MAX_PIDS_LIMIT).contains(&pids_limit) {
        issues.push("pidsLimit", "must be between 16 and 65536");
    }
    let timeout_ms = req.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    check_timeout(&mut issues, timeout_ms);
    let paused_timeout_ms = req
        .paused_timeout_ms
        .unwrap_or(crate::limits::DEFAULT_PAUSED_TIMEOUT_MS);
    if !(crate::limits::MIN_PAUSED_TIMEOUT_MS..=crate::limits::MAX_PAUSED_TIMEOUT_MS)
        .contains(&paused_timeout_ms)
    {
        issues.push(
            "pausedTimeoutMs",
            "must be between 10000 (10 s) and 2592000000 (30 days)",
        );
    }
    if let Some(env) = &req.env_vars {
        if env.len() > MAX_ENV_VARS_BYTES {
            issues.push("envVars", "must be at most 65536 bytes");
        } else if env.contains('\0') {
            issues.push("envVars", "must not contain NUL");
        }
    }
    let workdir = match &req.workdir {
        Some(raw) => path_into(&mut issues, "workdir", raw),
        None => None,
    };
    if let Some(server) = &req.server_id {
        required_id(&mut issues, "serverId", server);
    }
    let labels = req.labels.unwrap_or_default();
    check_labels(&mut issues, &labels);
    let network_mode = req.network_mode.unwrap_or_default();
    let (egress, egress_credentials) = match (network_mode, req.egress) {
        (NetworkMode::Allowlist, Some(egress)) => {
            let list = egress_list(&mut issues, "egress.allow", &egress.allow);
            let credentials = credentials(&mut issues, &list, &egress.credentials);
            (list, credentials)
        }
        (NetworkMode::Allowlist, None) => (Vec::new(), Vec::new()),
        (_, Some(_)) => {
            issues.push("egress", "is only for networkMode `allowlist`");
            (Vec::new(), Vec::new())
        }
        (_, None) => (Vec::new(), Vec::new()),
    };
    let volumes = volumes::mounts(&mut issues, req.volumes.as_deref().unwrap_or_default());
    let command = CreateSandbox {
        environment_id: req.environment_id,
        name: req.name,
        image: ImageChoice {
            template: req.template,
            image: req.image,
            snapshot: req.snapshot_id,
            template_build: None,
        },
        server_id: req.server_id,
        cpu,
        memory_mb,
        pids_limit,
        timeout_ms,
        network_mode,
        egress,
        egress_credentials,
        env_vars: req.env_vars,
        workdir,
        labels,
        auto_pause: req.auto_pause.and_then(crate::model::AutoPause::memory),
        fixed_timeout: req.fixed_timeout.unwrap_or(false),
        paused_timeout_ms,
        volumes,
        isolation: req.isolation,
    };
    issues.finish(command)
}

/// At most this many labels on a sandbox.
pub const MAX_LABELS: usize = 32;
const MAX_LABEL_KEY_CHARS: usize = 63;
const MAX_LABEL_VALUE_CHARS: usize = 256;

fn check_labels(issues: &mut Issues, labels: &BTreeMap<String, String>) {
    if labels.len() > MAX_LABELS {
        issues.push("labels", "must hold at most 32 labels");
    }
    for (key, value) in labels {
        let key_ok = (1..=MAX_LABEL_KEY_CHARS).contains(&key.chars().count())
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
        if !key_ok {
            issues.push(
                "labels",
                "keys must be 1 to 63 letters, digits, `.`, `_`, `-` or `/`",
            );
        }
        if value.chars().count() > MAX_LABEL_VALUE_CHARS || value.chars().any(char::is_control) {
            issues.push(
                "labels",
                "values must be at most 256 characters, without control characters",
            );
        }
    }
}

fn check_timeout(issues: &mut Issues, timeout_ms: i64) {
    if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
        issues.push(
            "timeoutMs",
            "must be between 10000 (10 s) and 86400000 (24 h)",
        );
    }
}

/// Checks `sandbox.exec`.
pub fn exec(req: ExecRequest) -> Result<ExecCommand, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    if req.cmd.is_empty() || req.cmd.len() > MAX_CMD_BYTES {
        issues.push("cmd", "must be 1 to 65536 bytes");
    } else if req.cmd.contains('\0') {
        issues.push("cmd", "must not contain NUL");
    }
    let cwd = match &req.cwd {
        Some(raw) => path_into(&mut issues, "cwd", raw),
        None => None,
    };
    let env: Vec<(String, String)> = req.env.unwrap_or_default().into_iter().collect();
    for (key, value) in &env {
        if !env_vars::is_valid_key(key) {
            issues.push(
                format!("env.{key}"),
                "key must match ^[A-Za-z_][A-Za-z0-9_]*$",
            );
        } else if value.contains('\0') {
            issues.push(format!("env.{key}"), "value must not contain NUL");
        }
    }
    let timeout_ms = req.timeout_ms.unwrap_or(DEFAULT_EXEC_TIMEOUT_MS);
    if !(MIN_EXEC_TIMEOUT_MS..=MAX_EXEC_TIMEOUT_MS).contains(&timeout_ms) {
        issues.push(
            "timeoutMs",
            "must be between 1000 (1 s) and 600000 (10 min)",
        );
    }
    issues.finish(ExecCommand {
        sandbox_id: req.sandbox_id,
        cmd: req.cmd,
        cwd,
        env,
        timeout_ms,
    })
}

/// Checks `sandbox.writeFile` and decodes its content. Size is not checked here: an
/// oversized file is a 413, not a validation error.
pub fn write_file(req: WriteFileRequest) -> Result<WriteFile, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let path = path_into(&mut issues, "path", &req.path);
    if let Some(path) = &path
        && paths::split_file(path).is_none()
    {
        issues.push("path", "must point to a file");
    }
    if let Some(mode) = req.mode
        && mode > MAX_FILE_MODE
    {
        issues.push("mode", "must be between 0 and 0o7777 (4095)");
    }
    let content = req.encoding.decode(req.content).unwrap_or_else(|| {
        issues.push("content", "is not valid base64");
        Vec::new()
    });
    issues.finish(WriteFile {
        sandbox_id: req.sandbox_id,
        path: path.unwrap_or_default(),
        content,
        mode: req.mode,
    })
}

/// Checks `sandbox.readFile`.
pub fn read_file(req: ReadFileQuery) -> Result<ReadFile, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let path = path_into(&mut issues, "path", &req.path);
    issues.finish(ReadFile {
        sandbox_id: req.sandbox_id,
        path: path.unwrap_or_default(),
        encoding: req.encoding,
    })
}

/// A checked `sandbox.upload`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub sandbox_id: String,
    pub path: String,
    pub format: TransferFormat,
    pub mode: Option<u32>,
    /// A raw file is written where it goes as it arrives (E2B's daemon does so: a
    /// watcher sees it made, then written), not aside and renamed into place once whole.
    pub in_place: bool,
}

/// Checks `sandbox.upload`.
pub fn upload(req: UploadQuery) -> Result<Upload, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let path = path_into(&mut issues, "path", &req.path);
    let format = req.format.unwrap_or(TransferFormat::Raw);
    if let Some(path) = &path
        && format == TransferFormat::Raw
        && paths::split_file(path).is_none()
    {
        issues.push("path", "must point to a file");
    }
    let mode = match &req.mode {
        None => None,
        Some(text) => match u32::from_str_radix(text, 8) {
            Ok(mode) if mode <= MAX_FILE_MODE => Some(mode),
            _ => {
                issues.push("mode", "must be octal permission bits, 0 to 7777");
                None
            }
        },
    };
    issues.finish(Upload {
        sandbox_id: req.sandbox_id,
        path: path.unwrap_or_default(),
        format,
        mode,
        in_place: false,
    })
}

/// Checks `sandbox.download`; returns the sandbox id and the path.
pub fn download(req: &DownloadQuery) -> Result<(String, DownloadOf), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let of = match (&req.path, req.changes.unwrap_or(false)) {
        (None, true) => DownloadOf::Changes {
            all: req.all.unwrap_or(false),
        },
        (Some(_), true) => {
            issues.push("changes", "takes the place of path: give only one of them");
            DownloadOf::Changes { all: false }
        }
        (Some(raw), false) => {
            DownloadOf::Path(path_into(&mut issues, "path", raw).unwrap_or_default())
        }
        (None, false) => {
            issues.push("path", "is required (or changes=true)");
            DownloadOf::Path(String::new())
        }
    };
    if req.changes.unwrap_or(false) && req.format == Some(crate::api::TransferFormat::Raw) {
        issues.push("format", "changes come as a tar");
    }
    issues.finish((req.sandbox_id.clone(), of))
}

/// What a checked `sandbox.download` streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownloadOf {
    /// A file or a directory.
    Path(String),
    /// The sandbox's changes (everywhere with `all`).
    Changes { all: bool },
}

/// Checks `sandbox.listFiles`.
pub fn list_files(req: ListFilesQuery) -> Result<ListFiles, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let path = match &req.path {
        Some(raw) => path_into(&mut issues, "path", raw),
        None => None,
    };
    issues.finish(ListFiles {
        sandbox_id: req.sandbox_id,
        path,
    })
}

/// Checks `sandbox.setTimeout`; returns the sandbox id and the timeout.
pub fn set_timeout(req: SetTimeoutRequest) -> Result<(String, i64), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    check_timeout(&mut issues, req.timeout_ms);
    issues.finish((req.sandbox_id, req.timeout_ms))
}

/// A checked `sandbox.metrics`: times in epoch ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsRange {
    pub sandbox_id: String,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
}

/// Checks `sandbox.metrics`; `parse_time` reads RFC 3339 into epoch ms.
pub fn metrics_range(
    req: crate::api::SandboxMetricsQuery,
    parse_time: impl Fn(&str) -> Option<i64>,
) -> Result<MetricsRange, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let mut time = |field: &str, value: Option<&str>| {
        let parsed = parse_time(value?);
        if parsed.is_none() {
            issues.push(field, "must be an RFC 3339 time, e.g. 2026-01-31T12:00:00Z");
        }
        parsed
    };
    let from_ms = time("from", req.from.as_deref());
    let to_ms = time("to", req.to.as_deref());
    if let (Some(from), Some(to)) = (from_ms, to_ms)
        && from > to
    {
        issues.push("to", "must not be before from");
    }
    issues.finish(MetricsRange {
        sandbox_id: req.sandbox_id,
        from_ms,
        to_ms,
    })
}

/// Checks `sandbox.rename`; returns the sandbox id and its new name.
pub fn rename(req: RenameSandboxRequest) -> Result<(String, String), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    display_name(&mut issues, "name", &req.name);
    issues.finish((req.sandbox_id, req.name))
}

/// Checks `sandbox.setEgress`; returns the sandbox id and the list as stored.
pub fn set_egress(req: SetEgressRequest) -> Result<(String, Vec<String>), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let allow = egress_list(&mut issues, "allow", &req.allow);
    issues.finish((req.sandbox_id, allow))
}

/// Entries of an egress log read at once, by default and at most.
pub const DEFAULT_EGRESS_LOG_PAGE: u32 = 100;
pub const MAX_EGRESS_LOG_PAGE: u32 = 500;

/// A checked `sandbox.egressLog`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressLogRead {
    pub sandbox_id: String,
    /// The position to read after.
    pub after: Option<String>,
    pub limit: u32,
}

/// Checks `sandbox.egressLog`.
pub fn egress_log(req: crate::api::EgressLogQuery) -> Result<EgressLogRead, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    if let Some(cursor) = &req.cursor
        && !crate::egress_log::is_position(cursor)
    {
        issues.push("cursor", "is not a cursor from a previous read");
    }
    let limit = req.limit.unwrap_or(DEFAULT_EGRESS_LOG_PAGE);
    if !(1..=MAX_EGRESS_LOG_PAGE).contains(&limit) {
        issues.push("limit", "must be between 1 and 500");
    }
    issues.finish(EgressLogRead {
        sandbox_id: req.sandbox_id,
        after: req.cursor,
        limit,
    })
}

/// Entries of a timeline read at once, by default and at most.
pub const DEFAULT_ACTIVITY_PAGE: u32 = 100;
pub const MAX_ACTIVITY_PAGE: u32 = 500;

/// A checked `sandbox.activity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityRead {
    pub sandbox_id: String,
    /// The position to read after.
    pub after: Option<String>,
    pub limit: u32,
    /// Only these kinds; empty: all.
    pub kinds: Vec<crate::activity::ActivityKind>,
    /// The newest `limit` entries (no `after`).
    pub latest: bool,
}

/// Checks `sandbox.activity`.
pub fn activity(req: crate::api::ActivityQuery) -> Result<ActivityRead, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    if let Some(cursor) = &req.cursor
        && !crate::egress_log::is_position(cursor)
    {
        issues.push("cursor", "is not a cursor from a previous read");
    }
    let limit = req.limit.unwrap_or(DEFAULT_ACTIVITY_PAGE);
    if !(1..=MAX_ACTIVITY_PAGE).contains(&limit) {
        issues.push("limit", "must be between 1 and 500");
    }
    let mut kinds = Vec::new();
    for word in req.kinds.as_deref().unwrap_or("").split(',').map(str::trim) {
        match crate::activity::ActivityKind::parse(word) {
            Some(kind) if !kinds.contains(&kind) => kinds.push(kind),
            Some(_) => {}
            None if word.is_empty() => {}
            None => {
                issues.push(
                    "kinds",
                    "must be kinds among command, file, terminal, network and lifecycle, comma-separated",
                );
                break;
            }
        }
    }
    let latest = req.latest.unwrap_or(false);
    if latest && req.cursor.is_some() {
        issues.push("latest", "cannot be given with a cursor");
    }
    issues.finish(ActivityRead {
        sandbox_id: req.sandbox_id,
        after: req.cursor,
        limit,
        kinds,
        latest,
    })
}

/// Checks `sandbox.recording`: the sandbox and the terminal's id (1–64 letters, digits,
/// `_` and `-`).
pub fn recording(req: crate::api::RecordingQuery) -> Result<(String, String), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    if !(1..=64).contains(&req.terminal_id.len())
        || !req
            .terminal_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        issues.push("terminalId", "is not a terminal's id");
    }
    issues.finish((req.sandbox_id, req.terminal_id))
}

/// A checked `sandbox.requestEgress`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressAsk {
    pub sandbox_id: String,
    /// The entry as the policy keeps it.
    pub host: String,
    pub reason: Option<String>,
}

/// Checks `sandbox.requestEgress`: one entry as in `egress.allow`, a reason of at most
/// 500 characters without control characters.
pub fn request_egress(req: crate::api::RequestEgressRequest) -> Result<EgressAsk, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let host = match crate::egress::Policy::parse(std::slice::from_ref(&req.host)) {
        Ok(policy) => policy.entries().into_iter().next().unwrap_or_default(),
        Err(problems) => {
            for problem in problems {
                let problem = problem.strip_prefix("[0] ").unwrap_or(&problem);
                issues.push("host", problem);
            }
            String::new()
        }
    };
    if let Some(reason) = &req.reason {
        if reason.chars().count() > crate::egress_requests::MAX_REASON {
            issues.push("reason", "must be at most 500 characters");
        }
        if reason.chars().any(char::is_control) {
            issues.push("reason", "must not hold control characters");
        }
    }
    issues.finish(EgressAsk {
        sandbox_id: req.sandbox_id,
        host,
        reason: req.reason.filter(|r| !r.trim().is_empty()),
    })
}

/// A checked `egress.requests`: pending ones only (default) or all.
pub fn egress_requests(
    req: crate::api::EgressRequestsQuery,
) -> Result<(bool, Option<String>), Invalid> {
    let mut issues = Issues::default();
    let pending_only = match req.status.as_deref() {
        None | Some("pending") => true,
        Some("all") => false,
        Some(_) => {
            issues.push("status", "must be `pending` or `all`");
            true
        }
    };
    if let Some(id) = &req.sandbox_id {
        required_id(&mut issues, "sandboxId", id);
    }
    issues.finish((pending_only, req.sandbox_id))
}

/// Checks `egress.decide`.
pub fn decide_egress(req: crate::api::DecideEgressRequest) -> Result<(String, bool), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "requestId", &req.request_id);
    issues.finish((req.request_id, req.approve))
}

/// The credentials of `egress.credentials`, each checked against the list `allow`
/// (every bad one named by its place); the same header twice for a host is refused.
fn credentials(
    issues: &mut Issues,
    allow: &[String],
    given: &[crate::api::EgressCredentialRequest],
) -> Vec<crate::egress_credentials::EgressCredential> {
    use crate::egress_credentials::{MAX_CREDENTIALS, check};
    if given.len() > MAX_CREDENTIALS {
        issues.push("egress.credentials", format!("at most {MAX_CREDENTIALS}"));
        return Vec::new();
    }
    let policy = crate::egress::Policy::parse(allow).unwrap_or_default();
    let mut made: Vec<crate::egress_credentials::EgressCredential> = Vec::new();
    for (at, credential) in given.iter().enumerate() {
        let field = format!("egress.credentials[{at}]");
        match check(
            &credential.host,
            &credential.header,
            &credential.value,
            &policy,
        ) {
            Ok(checked)
                if made
                    .iter()
                    .any(|m| m.host == checked.host && m.header == checked.header) =>
            {
                issues.push(&field, "the same header for the same host is given twice");
            }
            Ok(checked) => made.push(checked),
            Err(problems) => {
                for problem in problems {
                    issues.push(&field, &problem);
                }
            }
        }
    }
    made
}

/// An egress list as stored: each entry checked (every bad one named), lower-cased,
/// without duplicates.
fn egress_list(issues: &mut Issues, field: &str, entries: &[String]) -> Vec<String> {
    match crate::egress::Policy::parse(entries) {
        Ok(policy) => policy.entries(),
        Err(problems) => {
            for problem in problems {
                issues.push(field, &problem);
            }
            Vec::new()
        }
    }
}

/// Checks `sandbox.list`: the environment wins when both ids are given.
pub fn list_scope(req: ListSandboxesQuery) -> Result<ListScope, Invalid> {
    match (req.environment_id, req.project_id) {
        (Some(env), _) if !env.is_empty() => Ok(ListScope::Environment(sandbox_like_id(
            "environmentId",
            env,
        )?)),
        (_, Some(project)) if !project.is_empty() => {
            Ok(ListScope::Project(sandbox_like_id("projectId", project)?))
        }
        _ => Err(Invalid::one(
            "environmentId",
            "either environmentId or projectId is required",
        )),
    }
}

fn sandbox_like_id(field: &str, value: String) -> Result<String, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, field, &value);
    issues.finish(value)
}

/// Checks `project.create`; returns name and description.
pub fn create_project(req: CreateProjectRequest) -> Result<(String, Option<String>), Invalid> {
    let mut issues = Issues::default();
    display_name(&mut issues, "name", &req.name);
    check_description(&mut issues, req.description.as_deref());
    issues.finish((req.name, req.description))
}

/// Checks `environment.create`.
pub fn create_environment(
    req: CreateEnvironmentRequest,
) -> Result<(String, String, Option<String>), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "projectId", &req.project_id);
    display_name(&mut issues, "name", &req.name);
    check_description(&mut issues, req.description.as_deref());
    issues.finish((req.project_id, req.name, req.description))
}

fn check_description(issues: &mut Issues, description: Option<&str>) {
    if description.is_some_and(|d| d.len() > 1024) {
        issues.push("description", "must be at most 1024 bytes");
    }
}

/// A checked `sandbox.processStart`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartProcess {
    pub command: ExecCommand,
    pub stdin: bool,
}

/// Checks `sandbox.processStart` (the same rules as `sandbox.exec`).
pub fn process_start(req: crate::api::ProcessStartRequest) -> Result<StartProcess, Invalid> {
    let command = exec(ExecRequest {
        sandbox_id: req.sandbox_id,
        cmd: req.cmd,
        cwd: req.cwd,
        env: req.env,
        timeout_ms: None,
    })?;
    Ok(StartProcess {
        command,
        stdin: req.stdin,
    })
}

/// Checks a process id.
pub fn process_id(value: &str) -> Result<String, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "processId", value);
    issues.finish(value.to_owned())
}

pub use crate::limits::{DEFAULT_PROCESS_WAIT_MS, MAX_PROCESS_WAIT_MS, MAX_PROCESS_WRITE_BYTES};

/// Checks a wait's timeout.
pub fn process_wait_ms(value: Option<u64>) -> Result<u64, Invalid> {
    let ms = value.unwrap_or(DEFAULT_PROCESS_WAIT_MS);
    if ms > MAX_PROCESS_WAIT_MS {
        return Err(Invalid::one(
            "timeoutMs",
            "must be between 0 and 600000 (10 min)",
        ));
    }
    Ok(ms)
}

/// The number of a signal name (`TERM` by default).
pub fn signal_number(name: Option<&str>) -> Result<i32, Invalid> {
    let name = name.unwrap_or("TERM");
    let bare = name.strip_prefix("SIG").unwrap_or(name);
    Ok(match bare {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        _ => {
            return Err(Invalid::one(
                "signal",
                "must be one of TERM, KILL, INT, HUP, QUIT, USR1, USR2",
            ));
        }
    })
}

/// Decodes data for a process's standard input.
pub fn process_data(data: String, encoding: Encoding) -> Result<Vec<u8>, Invalid> {
    let bytes = encoding
        .decode(data)
        .ok_or_else(|| Invalid::one("data", "is not valid base64"))?;
    if bytes.len() > MAX_PROCESS_WRITE_BYTES {
        return Err(Invalid::one("data", "must be at most 1 MiB"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests;
