//! The sandbox commands: `create`, `ls`, `show`, `stats`, `timeout`, `kill`, `rm`,
//! `templates`, `files`.
//!
//! `create` takes `--snapshot` and `--volume`.

use clap::Args;
use sandboxd_core::api::RenameSandboxRequest;
use sandboxd_core::api::procedures;
use serde_json::{Value, json};

use super::client::{Client, Failure};
use super::table;
use super::table::cell as text;

/// Flags of `sandboxd create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// A template (`sandboxd templates`) [default: base, unless --image].
    #[arg(long, short)]
    template: Option<String>,
    /// An image instead of a template.
    #[arg(long, conflicts_with = "template")]
    image: Option<String>,
    /// A snapshot to start from (`sandboxd snapshot ls`): its files, user and workdir.
    #[arg(long, conflicts_with_all = ["template", "image"])]
    snapshot: Option<String>,
    #[arg(long)]
    name: Option<String>,
    /// CPUs, e.g. 0.5.
    #[arg(long)]
    cpu: Option<f64>,
    /// Memory in MiB.
    #[arg(long)]
    memory: Option<i64>,
    /// Idle time before it is reaped (or paused, with --auto-pause), e.g. 30m, 2h.
    #[arg(long, value_parser = parse_duration)]
    timeout: Option<std::time::Duration>,
    /// At the idle timeout, pause it (processes and memory kept) instead of killing it;
    /// the next call resumes it. `--auto-pause=disk` (gVisor sandboxes) saves its
    /// processes to the host's disk then.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "ram",
          value_parser = ["ram", "disk"])]
    auto_pause: Option<String>,
    /// How long it may stay paused before it is killed [default: 24h].
    #[arg(long, value_parser = parse_duration)]
    paused_timeout: Option<std::time::Duration>,
    /// End it --timeout after it is made (or its timeout last set) whatever it does,
    /// instead of after its last activity.
    #[arg(long)]
    fixed_timeout: bool,
    /// `isolated` (default), `internet`, or `allowlist` (only the hosts of --allow).
    #[arg(long)]
    network: Option<String>,
    /// `container` (runc) or `gvisor` (gVisor's user-space kernel, where the server
    /// offers it); the server's default when absent.
    #[arg(long)]
    isolation: Option<String>,
    /// A host an `allowlist` sandbox may reach (repeatable; implies --network allowlist):
    /// a name, a `*.` wildcard, either with `:port`.
    #[arg(long)]
    allow: Vec<String>,
    /// An environment variable, KEY=VALUE (repeatable).
    #[arg(long = "env", short = 'e')]
    env: Vec<String>,
    /// The environment to create it in [default: the first of the first project].
    #[arg(long)]
    env_id: Option<String>,
    /// A remote server to run it on.
    #[arg(long)]
    server: Option<String>,
    /// A volume to mount, VOLUME:PATH or VOLUME:PATH:ro, by id or name (repeatable);
    /// the sandbox runs on its server.
    #[arg(long = "volume")]
    volumes: Vec<String>,
}

/// A duration like `90s`, `5m`, `2h`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (e.g. 30s, 5m, 2h)"))
}

/// The first environment the caller can see.
async fn default_environment(client: &Client) -> Result<String, Failure> {
    let projects = client.get("project.all", &[]).await?;
    projects
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|project| project["environments"].as_array().into_iter().flatten())
        .find_map(|env| env["environmentId"].as_str().map(str::to_owned))
        .ok_or_else(|| Failure::Refused("no environment to create in: make a project first".into()))
}

pub async fn create(client: &Client, args: CreateArgs) -> Result<Value, Failure> {
    let environment = match args.env_id {
        Some(id) => id,
        None => default_environment(client).await?,
    };
    let mut body = json!({"environmentId": environment});
    match (&args.snapshot, &args.template, &args.image) {
        (Some(snapshot), _, _) => body["snapshotId"] = json!(snapshot),
        (None, _, Some(image)) => body["image"] = json!(image),
        (None, Some(template), None) => body["template"] = json!(template),
        (None, None, None) => body["template"] = json!("base"),
    }
    if let Some(name) = args.name {
        body["name"] = json!(name);
    }
    if let Some(cpu) = args.cpu {
        body["cpu"] = json!(cpu);
    }
    if let Some(memory) = args.memory {
        body["memoryMb"] = json!(memory);
    }
    if let Some(timeout) = args.timeout {
        body["timeoutMs"] = json!(timeout.as_millis() as u64);
    }
    match args.auto_pause.as_deref() {
        Some("disk") => body["autoPause"] = json!("disk"),
        Some(_) => body["autoPause"] = json!(true),
        None => {}
    }
    if args.fixed_timeout {
        body["fixedTimeout"] = json!(true);
    }
    if let Some(paused) = args.paused_timeout {
        body["pausedTimeoutMs"] = json!(paused.as_millis() as u64);
    }
    if let Some(network) = args.network {
        body["networkMode"] = json!(network);
    }
    if let Some(isolation) = args.isolation {
        body["isolation"] = json!(isolation);
    }
    if !args.allow.is_empty() {
        if body.get("networkMode").is_none() {
            body["networkMode"] = json!("allowlist");
        }
        body["egress"] = json!({"allow": args.allow});
    }
    if !args.env.is_empty() {
        body["envVars"] = json!(args.env.join("\n"));
    }
    if let Some(server) = args.server {
        body["serverId"] = json!(server);
    }
    if !args.volumes.is_empty() {
        body["volumes"] = super::volumes::mounts(client, &args.volumes).await?;
    }
    client.post("sandbox.create", &body).await
}

/// One line per sandbox of every project the caller sees, newest first.
pub async fn list(client: &Client, all: bool) -> Result<Value, Failure> {
    let projects = client.get("project.all", &[]).await?;
    let mut sandboxes = Vec::new();
    for project in projects.as_array().into_iter().flatten() {
        let Some(id) = project["projectId"].as_str() else {
            continue;
        };
        let listed = client.get("sandbox.list", &[("projectId", id)]).await?;
        sandboxes.extend(listed.as_array().cloned().unwrap_or_default());
    }
    if !all {
        sandboxes.retain(|s| {
            matches!(
                s["status"].as_str(),
                Some("running" | "creating" | "paused")
            )
        });
    }
    sandboxes.sort_by(|a, b| text(&b["createdAt"]).cmp(&text(&a["createdAt"])));
    Ok(Value::Array(sandboxes))
}

pub fn list_table(sandboxes: &Value) -> String {
    let rows: Vec<Vec<String>> = sandboxes
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            vec![
                text(&s["sandboxId"]),
                text(&s["name"]),
                text(&s["status"]),
                s["template"]
                    .as_str()
                    .map_or_else(|| text(&s["image"]), str::to_owned),
                format!("{} CPU, {} MiB", text(&s["cpu"]), text(&s["memoryMb"])),
                text(&s["expiresAt"]),
            ]
        })
        .collect();
    table::render(
        &["ID", "NAME", "STATUS", "TEMPLATE", "RESOURCES", "EXPIRES"],
        &rows,
    )
}

pub async fn show(client: &Client, id: &str) -> Result<Value, Failure> {
    client.get("sandbox.one", &[("sandboxId", id)]).await
}

pub fn show_fields(sandbox: &Value) -> String {
    let keys = [
        ("id", "sandboxId"),
        ("name", "name"),
        ("status", "status"),
        ("image", "image"),
        ("template", "template"),
        ("server", "serverId"),
        ("cpu", "cpu"),
        ("memory (MiB)", "memoryMb"),
        ("network", "networkMode"),
        ("workdir", "workdir"),
        ("user", "user"),
        ("created", "createdAt"),
        ("expires", "expiresAt"),
        ("paused", "pausedAt"),
    ];
    let pairs: Vec<(&str, String)> = keys
        .iter()
        .map(|(label, key)| (*label, text(&sandbox[*key])))
        .collect();
    table::fields(&pairs)
}

pub async fn stats(client: &Client, id: &str) -> Result<Value, Failure> {
    client.get("sandbox.stats", &[("sandboxId", id)]).await
}

pub fn stats_fields(stats: &Value) -> String {
    let of = |used: String, limit: String| format!("{used} of {limit}");
    let bytes = |key: &str| table::size(stats[key].as_u64().unwrap_or(0));
    table::fields(&[
        (
            "cpu",
            of(
                format!("{:.0}%", stats["cpuPercent"].as_f64().unwrap_or(0.0)),
                format!("{} CPU", text(&stats["cpuLimit"])),
            ),
        ),
        (
            "memory",
            of(bytes("memoryBytes"), bytes("memoryLimitBytes")),
        ),
        (
            "processes",
            of(text(&stats["pids"]), text(&stats["pidsLimit"])),
        ),
        ("read", text(&stats["sampledAt"])),
    ])
}

/// `sandbox.metrics`: the readings of the last `since`, or all those kept.
pub async fn metrics(
    client: &Client,
    id: &str,
    since: Option<std::time::Duration>,
) -> Result<Value, Failure> {
    let from = since.map(|since| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let from = now.saturating_sub(since).as_millis() as i64;
        sandboxd_core::rfc3339::format_millis(from)
    });
    let mut query = vec![("sandboxId", id)];
    if let Some(from) = &from {
        query.push(("from", from));
    }
    client.get("sandbox.metrics", &query).await
}

pub fn metrics_table(metrics: &Value) -> String {
    let rows: Vec<Vec<String>> = metrics["readings"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|r| {
            vec![
                text(&r["time"]),
                format!("{:.1}", r["cpuPercent"].as_f64().unwrap_or(0.0)),
                table::size(r["memoryBytes"].as_u64().unwrap_or(0)),
                text(&r["pids"]),
            ]
        })
        .collect();
    table::render(&["TIME", "CPU %", "MEMORY", "PROCESSES"], &rows)
}

pub async fn set_timeout(
    client: &Client,
    id: &str,
    timeout: std::time::Duration,
) -> Result<Value, Failure> {
    client
        .post(
            "sandbox.setTimeout",
            &json!({"sandboxId": id, "timeoutMs": timeout.as_millis() as u64}),
        )
        .await
}

pub async fn rename(client: &Client, id: &str, name: &str) -> Result<Value, Failure> {
    let request = RenameSandboxRequest {
        sandbox_id: id.to_owned(),
        name: name.to_owned(),
    };
    client.invoke::<procedures::SandboxRename>(&request).await
}

/// `sandbox.pause` or `sandbox.resume` (`procedure`).
/// `sandbox.pause` or `sandbox.resume` of `id`, with the body's other `fields`.
pub async fn freeze(
    client: &Client,
    procedure: &str,
    id: &str,
    fields: &Value,
) -> Result<Value, Failure> {
    let mut body = json!({"sandboxId": id});
    if let (Some(body), Some(fields)) = (body.as_object_mut(), fields.as_object()) {
        body.extend(fields.clone());
    }
    client.post(procedure, &body).await
}

pub async fn kill(client: &Client, id: &str) -> Result<Value, Failure> {
    client.post("sandbox.kill", &json!({"sandboxId": id})).await
}

pub async fn remove(client: &Client, id: &str) -> Result<Value, Failure> {
    client
        .post("sandbox.remove", &json!({"sandboxId": id}))
        .await?;
    Ok(json!({"sandboxId": id, "removed": true}))
}

pub async fn templates(client: &Client) -> Result<Value, Failure> {
    client.get("sandbox.templates", &[]).await
}

pub fn templates_table(templates: &Value) -> String {
    let rows: Vec<Vec<String>> = templates
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            vec![
                text(&t["name"]),
                text(&t["kind"]),
                text(&t["image"]),
                text(&t["description"]),
            ]
        })
        .collect();
    table::render(&["NAME", "KIND", "IMAGE", "DESCRIPTION"], &rows)
}

pub async fn files(client: &Client, id: &str, path: Option<&str>) -> Result<Value, Failure> {
    let mut query = vec![("sandboxId", id)];
    if let Some(path) = path {
        query.push(("path", path));
    }
    client.get("sandbox.listFiles", &query).await
}

pub fn files_table(listing: &Value) -> String {
    let rows: Vec<Vec<String>> = listing["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            vec![
                text(&e["type"]),
                e["size"].as_u64().map_or_else(|| "-".into(), table::size),
                text(&e["mode"]),
                text(&e["modifiedAt"]),
                text(&e["name"]),
            ]
        })
        .collect();
    table::render(&["TYPE", "SIZE", "MODE", "MODIFIED", "NAME"], &rows)
}
