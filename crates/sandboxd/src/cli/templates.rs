//! `sandboxd template …`: templates users build from a Dockerfile.
//!
//! `template build -f Dockerfile [DIR] --name N` sends the Dockerfile and every file
//! under DIR (`.git` left out) and follows the build's log live (server-sent events) on
//! standard error: a line per step and the steps' output; it ends with the template, or
//! with the failed step's error (exit 1). `template ls|show|rm|log`, a template named by
//! id or name.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use super::client::{Client, Failure};
use super::table;

/// The most files and bytes a build sends (the server's own bounds).
const MAX_FILES: usize = sandboxd_core::template_build::MAX_FILES;
const MAX_BYTES: u64 = sandboxd_core::template_build::MAX_FILES_BYTES;

/// `sandboxd template …`.
#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// Build a template (a new version of NAME) and follow its log.
    #[command(
        after_help = "Example:\n  sandboxd template build -f Dockerfile . --name app\n  sandboxd create --template app"
    )]
    Build {
        /// The directory whose files COPY and ADD read [default: the Dockerfile's].
        dir: Option<PathBuf>,
        /// The Dockerfile.
        #[arg(short = 'f', long, default_value = "Dockerfile")]
        file: PathBuf,
        /// The template's name (a build of an existing name makes its next version).
        #[arg(long)]
        name: String,
        /// The project it belongs to [default: your only project].
        #[arg(long)]
        project: Option<String>,
        /// CPUs of the build's steps.
        #[arg(long)]
        cpu: Option<f64>,
        /// Memory of the build's steps, MiB.
        #[arg(long)]
        memory_mb: Option<i64>,
        /// `container` or `gvisor`.
        #[arg(long)]
        isolation: Option<String>,
        /// RUN steps reach the internet (default: no network).
        #[arg(long)]
        internet: bool,
        /// Answer with the build's id at once instead of following its log.
        #[arg(long)]
        detach: bool,
    },
    /// List built templates, with their newest ready version.
    #[command(after_help = "Example:\n  sandboxd template ls")]
    Ls,
    /// Show one template (by id or name) and its versions.
    #[command(after_help = "Example:\n  sandboxd template show app")]
    Show { template: String },
    /// A build's log (by build id), followed live with -f.
    #[command(after_help = "Example:\n  sandboxd template log $BUILD -f")]
    Log {
        build: String,
        #[arg(short, long)]
        follow: bool,
    },
    /// Remove templates and every version, by id or name (refused while in use).
    #[command(after_help = "Example:\n  sandboxd template rm app")]
    Rm {
        #[arg(required = true)]
        templates: Vec<String>,
    },
}

/// The id of a template given by id or by name.
async fn template_id(client: &Client, given: &str) -> Result<String, Failure> {
    let listed = client.get("template.all", &[]).await?;
    let found: Vec<&str> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["templateId"] == given || t["name"] == given)
        .filter_map(|t| t["templateId"].as_str())
        .collect();
    match found.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Err(Failure::NotFound(format!(
            "no template {given} (sandboxd template ls)"
        ))),
        _ => Err(Failure::Refused(format!(
            "{} templates are named {given} (in different projects): give the id",
            found.len()
        ))),
    }
}

/// What a build reads of a directory: its files.
struct Context {
    /// Every file as `relative path → base64`, `.git` left out.
    files: BTreeMap<String, String>,
    /// The mode of each file whose mode is not `0644`, in octal (an executable script
    /// stays one, as `docker build` keeps it).
    modes: BTreeMap<String, String>,
}

/// The files under `dir`, with their modes.
fn context(dir: &Path) -> Result<Context, Failure> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = BTreeMap::new();
    let mut modes = BTreeMap::new();
    let mut bytes = 0u64;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let entries = std::fs::read_dir(&at)
            .map_err(|e| Failure::Refused(format!("cannot read {}: {e}", at.display())))?;
        for entry in entries {
            let entry = entry
                .map_err(|e| Failure::Refused(format!("cannot read {}: {e}", at.display())))?;
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| Failure::Refused(format!("cannot read {}: {e}", path.display())))?;
            if entry.file_name() == ".git" {
                continue;
            }
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let relative = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                let content = std::fs::read(&path).map_err(|e| {
                    Failure::Refused(format!("cannot read {}: {e}", path.display()))
                })?;
                let mode = entry
                    .metadata()
                    .map(|m| m.permissions().mode() & 0o7777)
                    .unwrap_or(0o644);
                if mode != 0o644 {
                    modes.insert(relative.clone(), format!("{mode:04o}"));
                }
                bytes += content.len() as u64;
                if files.len() >= MAX_FILES || bytes > MAX_BYTES {
                    return Err(Failure::Refused(format!(
                        "{} holds more than {MAX_FILES} files or {} MiB: give a smaller directory",
                        dir.display(),
                        MAX_BYTES >> 20
                    )));
                }
                files.insert(relative, base64_simd::STANDARD.encode_to_string(&content));
            }
        }
    }
    Ok(Context { files, modes })
}

/// Follows a build's log to its end on standard error; answers the `end` event's data.
pub async fn follow(client: &Client, build_id: &str, offset: i64) -> Result<Value, Failure> {
    let request = client
        .request("template.buildLogStream")?
        .query(&[("buildId", build_id), ("offset", &offset.to_string())]);
    let response = client.answer(request).await?;
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    let mut stderr = std::io::stderr();
    while let Some(chunk) = body.next().await {
        let chunk =
            chunk.map_err(|e| Failure::Unavailable(format!("the log stream broke: {e}")))?;
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let mut name = "";
            let mut data = String::new();
            for line in event.lines() {
                if let Some(rest) = line.strip_prefix("event:") {
                    name = rest.trim();
                } else if let Some(rest) = line.strip_prefix("data:") {
                    data.push_str(rest.trim_start());
                }
            }
            let value: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
            match name {
                "entry" => {
                    let line = value["line"].as_str().unwrap_or_default();
                    let shown = if value["stream"] == "system" {
                        format!("{line}\n")
                    } else {
                        format!("  {line}\n")
                    };
                    let _ = stderr.write_all(shown.as_bytes());
                }
                "end" => return Ok(value),
                _ => {}
            }
        }
    }
    Err(Failure::Unavailable(
        "the log stream ended before the build did: follow it with `sandboxd template log BUILD -f`".into(),
    ))
}

/// What a build's end says, as the command's answer or failure.
fn ended(end: &Value) -> Result<(), Failure> {
    match end["status"].as_str() {
        Some("ready") => Ok(()),
        _ => Err(Failure::Refused(format!(
            "the build failed at step {}: {}",
            end["error"]["step"],
            end["error"]["message"]
                .as_str()
                .unwrap_or("no reason given")
        ))),
    }
}

pub async fn template(client: &Client, command: TemplateCommand) -> Result<Value, Failure> {
    match command {
        TemplateCommand::Build {
            dir,
            file,
            name,
            project,
            cpu,
            memory_mb,
            isolation,
            internet,
            detach,
        } => {
            let dockerfile = std::fs::read_to_string(&file)
                .map_err(|e| Failure::Refused(format!("cannot read {}: {e}", file.display())))?;
            let dir = dir.unwrap_or_else(|| {
                file.parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
            });
            let context = context(&dir)?;
            let mut body = json!({"name": name, "dockerfile": dockerfile, "files": context.files});
            if !context.modes.is_empty() {
                body["fileModes"] = json!(context.modes);
            }
            if let Some(project) = project {
                body["projectId"] = json!(project);
            }
            if let Some(cpu) = cpu {
                body["cpu"] = json!(cpu);
            }
            if let Some(memory) = memory_mb {
                body["memoryMb"] = json!(memory);
            }
            if let Some(isolation) = isolation {
                body["isolation"] = json!(isolation);
            }
            if internet {
                body["networkMode"] = json!("internet");
            }
            let started = client.post("template.build", &body).await?;
            if detach {
                return Ok(started);
            }
            let build_id = started["buildId"].as_str().unwrap_or_default().to_owned();
            ended(&follow(client, &build_id, 0).await?)?;
            let id = started["templateId"].as_str().unwrap_or_default();
            client.get("template.one", &[("templateId", id)]).await
        }
        TemplateCommand::Ls => client.get("template.all", &[]).await,
        TemplateCommand::Show { template } => {
            let id = template_id(client, &template).await?;
            client.get("template.one", &[("templateId", &id)]).await
        }
        TemplateCommand::Log {
            build,
            follow: live,
        } => {
            if live {
                let end = follow(client, &build, 0).await?;
                ended(&end)?;
                return Ok(json!({"logged": true}));
            }
            let log = client
                .get("template.buildLog", &[("buildId", &build)])
                .await?;
            Ok(log)
        }
        TemplateCommand::Rm { templates } => {
            let mut removed = Vec::new();
            for template in &templates {
                let id = template_id(client, template).await?;
                client
                    .post("template.remove", &json!({"templateId": id}))
                    .await?;
                removed.push(template.clone());
            }
            Ok(json!({"removed": removed}))
        }
    }
}

/// What `template` prints: a table, a build's log, the id of a detached build, or what
/// was removed.
pub fn template_text(answer: &Value) -> String {
    if let Some(listed) = answer.as_array() {
        let rows: Vec<Vec<String>> = listed
            .iter()
            .map(|t| {
                let newest = &t["versions"][0];
                vec![
                    table::cell(&t["templateId"]),
                    table::cell(&t["name"]),
                    table::cell(&t["version"]),
                    table::cell(&newest["status"]),
                    table::cell(&newest["createdAt"]),
                ]
            })
            .collect();
        return table::render(
            &["ID", "NAME", "READY VERSION", "NEWEST BUILD", "BUILT"],
            &rows,
        );
    }
    if let Some(removed) = answer["removed"].as_array() {
        return removed
            .iter()
            .map(|id| format!("{} removed\n", table::cell(id)))
            .collect();
    }
    if let Some(entries) = answer["entries"].as_array() {
        let mut text: String = entries
            .iter()
            .map(|e| format!("{}\n", e["line"].as_str().unwrap_or_default()))
            .collect();
        text.push_str(&format!("status: {}\n", table::cell(&answer["status"])));
        return text;
    }
    if answer["logged"] == true {
        return String::new();
    }
    if answer.get("versions").is_some() {
        return template_fields(answer);
    }
    format!("{}\n", table::cell(&answer["buildId"]))
}

/// The fields of one template.
pub fn template_fields(t: &Value) -> String {
    let versions: Vec<String> = t["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            format!(
                "{} {}",
                table::cell(&v["version"]),
                table::cell(&v["status"])
            )
        })
        .collect();
    table::fields(&[
        ("id", table::cell(&t["templateId"])),
        ("name", table::cell(&t["name"])),
        ("project", table::cell(&t["projectId"])),
        ("ready version", table::cell(&t["version"])),
        ("user", table::cell(&t["user"])),
        ("workdir", table::cell(&t["workdir"])),
        ("start", table::cell(&t["startCommand"])),
        ("ready when", table::cell(&t["readyCommand"])),
        ("versions", versions.join(", ")),
    ])
}
