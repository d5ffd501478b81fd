//! `sandboxd template …`: templates users build from a Dockerfile.
//!
//! `template build -f Dockerfile [DIR] --name N` sends the Dockerfile and every file
//! under DIR (`.git` left out): in the build's body, or, when they are more than it
//! takes (over 64 MiB or 10,000 files) or hold symbolic links, streamed as a tar to
//! `template.context` first. It follows the build's log live (server-sent events) on
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

/// The most files and bytes a build sends in its body (the server's own bounds), and
/// the most files of a context.
const MAX_FILES: usize = sandboxd_core::template_build::MAX_FILES;
const MAX_BYTES: u64 = sandboxd_core::template_build::MAX_FILES_BYTES;
const MAX_CONTEXT_FILES: usize = sandboxd_core::template_build::MAX_CONTEXT_FILES;
const MAX_BODY: u64 = sandboxd_core::template_build::MAX_BUILD_BODY_BYTES as u64;

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

/// A file or a symbolic link under the build's directory.
struct Found {
    /// Its path under the directory, with `/`.
    relative: String,
    path: PathBuf,
    /// Its mode (a link's is not used).
    mode: u32,
    size: u64,
    link: bool,
}

/// Every file and symbolic link under `dir` (`.git` left out), within what a context
/// may hold.
fn walk(dir: &Path) -> Result<Vec<Found>, Failure> {
    use std::os::unix::fs::PermissionsExt;
    let unreadable = |path: &Path, e: std::io::Error| {
        Failure::Refused(format!("cannot read {}: {e}", path.display()))
    };
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).map_err(|e| unreadable(&at, e))? {
            let entry = entry.map_err(|e| unreadable(&at, e))?;
            let path = entry.path();
            if entry.file_name() == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).map_err(|e| unreadable(&path, e))?;
            let kind = meta.file_type();
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            if !kind.is_file() && !kind.is_symlink() {
                continue;
            }
            if found.len() >= MAX_CONTEXT_FILES {
                return Err(Failure::Refused(format!(
                    "{} holds more than {MAX_CONTEXT_FILES} files: give a smaller directory",
                    dir.display()
                )));
            }
            found.push(Found {
                relative: path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/"),
                mode: meta.permissions().mode() & 0o7777,
                size: meta.len(),
                link: kind.is_symlink(),
                path,
            });
        }
    }
    found.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok(found)
}

/// Whether the files go in `template.build`'s `files`: none is a link, and they are
/// within its bounds, the body they make with the Dockerfile too (base64, each name
/// twice with its mode); otherwise they are streamed as a context.
fn fits_the_body(found: &[Found], dockerfile: &str) -> bool {
    let encoded: u64 = found
        .iter()
        .map(|f| f.size.div_ceil(3) * 4 + 2 * (f.relative.len() as u64 + 16))
        .sum();
    found.len() <= MAX_FILES
        && found.iter().all(|f| !f.link)
        && found.iter().map(|f| f.size).sum::<u64>() <= MAX_BYTES
        && encoded + 2 * dockerfile.len() as u64 + 4096 <= MAX_BODY
}

/// Names mapped to text: `files` (base64) and `fileModes` (octal).
type ByName = BTreeMap<String, String>;

/// The files as `template.build`'s `files` (`relative path → base64`) and `fileModes`
/// (the modes that are not `0644`: an executable script stays one, as `docker build`
/// keeps it).
fn inline(found: &[Found]) -> Result<(ByName, ByName), Failure> {
    let mut files = BTreeMap::new();
    let mut modes = BTreeMap::new();
    for file in found {
        let content = std::fs::read(&file.path)
            .map_err(|e| Failure::Refused(format!("cannot read {}: {e}", file.path.display())))?;
        if file.mode != 0o644 {
            modes.insert(file.relative.clone(), format!("{:04o}", file.mode));
        }
        files.insert(
            file.relative.clone(),
            base64_simd::STANDARD.encode_to_string(&content),
        );
    }
    Ok((files, modes))
}

/// Streams the files as a tar to `template.context` (links as links); answers the
/// context's id.
async fn upload_context(
    client: &Client,
    found: Vec<Found>,
    project: Option<&str>,
) -> Result<String, Failure> {
    let (stream, task) = super::copy::tar_stream_of(move |builder| {
        for file in &found {
            builder.append_path_with_name(&file.path, &file.relative)?;
        }
        Ok(())
    });
    let mut request = client.request("template.context")?;
    if let Some(project) = project {
        request = request.query(&[("projectId", project)]);
    }
    let answer = client
        .send(
            request
                .header("content-type", "application/x-tar")
                .body(reqwest::Body::wrap_stream(stream)),
        )
        .await;
    let packed = task.await;
    let answer = answer?;
    if let Ok(Err(error)) = packed {
        return Err(Failure::Refused(format!(
            "the files could not be sent: {error}"
        )));
    }
    answer["contextId"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Failure::Unavailable("the server answered no contextId".into()))
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
            let found = walk(&dir)?;
            let mut body = json!({"name": name, "dockerfile": dockerfile});
            if fits_the_body(&found, &dockerfile) {
                let (files, modes) = inline(&found)?;
                body["files"] = json!(files);
                if !modes.is_empty() {
                    body["fileModes"] = json!(modes);
                }
            } else {
                body["contextId"] = json!(upload_context(client, found, project.as_deref()).await?);
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
