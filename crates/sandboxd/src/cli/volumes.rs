//! `sandboxd volume …`: named storage that outlives sandboxes, and the `--volume`
//! mounts of `sandboxd create`.
//!
//! `volume create|ls|show|rm`, a volume named by id or name;
//! `create --volume VOL:PATH[:ro]` becomes the create's mounts.

use clap::Subcommand;
use serde_json::{Value, json};

use super::client::{Client, Failure};
use super::table;

/// `sandboxd volume …`.
#[derive(Debug, Subcommand)]
pub enum VolumeCommand {
    /// Make a volume and print its id (mount it with `sandboxd create --volume`).
    #[command(after_help = "Example:\n  VOL=$(sandboxd volume create cache --size-mb 2048)")]
    Create {
        name: String,
        /// What it reserves against the organization's quota, in MiB [default: 1024].
        #[arg(long)]
        size_mb: Option<i64>,
        /// The project whose members see it [default: your only project].
        #[arg(long)]
        project: Option<String>,
        /// The remote server it lives on [default: the local engine].
        #[arg(long)]
        server: Option<String>,
    },
    /// List volumes, by name, with the sandboxes that mount each.
    #[command(after_help = "Example:\n  sandboxd volume ls")]
    Ls,
    /// Show one volume (by id or name).
    #[command(after_help = "Example:\n  sandboxd volume show cache")]
    Show { volume: String },
    /// Remove volumes and what is in them, by id or name (refused while mounted).
    #[command(after_help = "Example:\n  sandboxd volume rm cache")]
    Rm {
        #[arg(required = true)]
        volumes: Vec<String>,
    },
}

/// The id of a volume given by id (looked up first, so that no name shadows an id) or
/// by a name only one volume the caller sees has.
async fn volume_id(client: &Client, given: &str) -> Result<String, Failure> {
    if client
        .get("volume.one", &[("volumeId", given)])
        .await
        .is_ok()
    {
        return Ok(given.to_owned());
    }
    let listed = client.get("volume.all", &[]).await?;
    let named: Vec<&str> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["name"] == given)
        .filter_map(|v| v["volumeId"].as_str())
        .collect();
    match named.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Err(Failure::Refused(format!(
            "no volume {given} (sandboxd volume ls)"
        ))),
        _ => Err(Failure::Refused(format!(
            "{} volumes are named {given} (in different projects): give the id",
            named.len()
        ))),
    }
}

/// The `volumes` of a create from `--volume VOLUME:PATH[:ro]` flags (a volume by id or
/// name).
pub async fn mounts(client: &Client, flags: &[String]) -> Result<Value, Failure> {
    let mut mounts = Vec::new();
    for flag in flags {
        let (volume, rest) = flag.split_once(':').ok_or_else(|| {
            Failure::Refused(format!(
                "--volume {flag}: expected VOLUME:PATH or VOLUME:PATH:ro"
            ))
        })?;
        let (path, read_only) = match rest.strip_suffix(":ro") {
            Some(path) => (path, true),
            None => (rest.strip_suffix(":rw").unwrap_or(rest), false),
        };
        let id = volume_id(client, volume).await?;
        mounts.push(json!({"volumeId": id, "path": path, "readOnly": read_only}));
    }
    Ok(Value::Array(mounts))
}

pub async fn volume(client: &Client, command: VolumeCommand) -> Result<Value, Failure> {
    match command {
        VolumeCommand::Create {
            name,
            size_mb,
            project,
            server,
        } => {
            let mut body = json!({"name": name});
            if let Some(size) = size_mb {
                body["sizeMb"] = json!(size);
            }
            if let Some(project) = project {
                body["projectId"] = json!(project);
            }
            if let Some(server) = server {
                body["serverId"] = json!(server);
            }
            client.post("volume.create", &body).await
        }
        VolumeCommand::Ls => client.get("volume.all", &[]).await,
        VolumeCommand::Show { volume } => {
            let id = volume_id(client, &volume).await?;
            client.get("volume.one", &[("volumeId", &id)]).await
        }
        VolumeCommand::Rm { volumes } => {
            let mut removed = Vec::new();
            for volume in &volumes {
                let id = volume_id(client, volume).await?;
                client
                    .post("volume.remove", &json!({"volumeId": id}))
                    .await?;
                removed.push(volume.clone());
            }
            Ok(json!({"removed": removed}))
        }
    }
}

/// What `volume` prints: the id of a new volume, a table, or what was removed.
pub fn volume_text(answer: &Value) -> String {
    if let Some(listed) = answer.as_array() {
        let rows: Vec<Vec<String>> = listed
            .iter()
            .map(|v| {
                vec![
                    table::cell(&v["volumeId"]),
                    table::cell(&v["name"]),
                    format!("{} MiB", v["sizeMb"].as_i64().unwrap_or_default()),
                    table::cell(&v["serverId"]),
                    mounted_by(v),
                    table::cell(&v["createdAt"]),
                ]
            })
            .collect();
        return table::render(
            &["ID", "NAME", "SIZE", "SERVER", "MOUNTED BY", "CREATED"],
            &rows,
        );
    }
    if let Some(removed) = answer["removed"].as_array() {
        return removed
            .iter()
            .map(|id| format!("{} removed\n", table::cell(id)))
            .collect();
    }
    format!("{}\n", table::cell(&answer["volumeId"]))
}

fn mounted_by(v: &Value) -> String {
    let ids: Vec<&str> = v["sandboxes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if ids.is_empty() {
        "-".into()
    } else {
        ids.join(",")
    }
}

/// The fields of one volume.
pub fn volume_fields(v: &Value) -> String {
    table::fields(&[
        ("id", table::cell(&v["volumeId"])),
        ("name", table::cell(&v["name"])),
        ("project", table::cell(&v["projectId"])),
        ("server", table::cell(&v["serverId"])),
        (
            "size",
            format!("{} MiB", v["sizeMb"].as_i64().unwrap_or_default()),
        ),
        ("mounted by", mounted_by(v)),
        ("created", table::cell(&v["createdAt"])),
    ])
}
