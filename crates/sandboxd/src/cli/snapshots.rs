//! `sandboxd snapshot …` and `sandboxd fork`: a sandbox's files (and with `--memory` its
//! processes) kept, and sandboxes started from them.
//!
//! `snapshot create|ls|show|rm`, and `fork`.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::client::{Client, Failure};
use super::table;

/// `sandboxd snapshot …`.
#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Snapshot a sandbox's files and print the snapshot's id (start sandboxes from it
    /// with `sandboxd create --snapshot`).
    #[command(
        after_help = "Examples:\n  SNAP=$(sandboxd snapshot create $ID --name after-setup)\n  SNAP=$(sandboxd snapshot create $ID --memory)"
    )]
    Create {
        id: String,
        #[arg(long)]
        name: Option<String>,
        /// Keep its processes and their memory too (a gvisor sandbox): sandboxes started
        /// from the snapshot continue them.
        #[arg(long)]
        memory: bool,
    },
    /// List snapshots, newest first.
    #[command(after_help = "Example:\n  sandboxd snapshot ls")]
    Ls,
    /// Show one snapshot.
    #[command(after_help = "Example:\n  sandboxd snapshot show $SNAP")]
    Show { snapshot: String },
    /// Remove snapshots (refused while sandboxes made from one run).
    #[command(after_help = "Example:\n  sandboxd snapshot rm $SNAP")]
    Rm {
        #[arg(required = true)]
        snapshots: Vec<String>,
    },
}

/// `sandboxd fork`.
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The sandbox to fork.
    id: String,
    /// How many sandboxes to make (1–20).
    #[arg(long, short = 'n', default_value_t = 1)]
    count: u32,
    /// An environment variable for every fork, KEY=VALUE (repeatable): the source's
    /// are not carried.
    #[arg(long = "env", short = 'e')]
    env: Vec<String>,
    /// Each fork's idle timeout, e.g. 30m [default: the source's].
    #[arg(long, value_parser = super::sandboxes::parse_duration)]
    timeout: Option<std::time::Duration>,
    /// Each fork continues the source's processes with their memory (a gvisor sandbox).
    #[arg(long)]
    memory: bool,
}

pub async fn snapshot(client: &Client, command: SnapshotCommand) -> Result<Value, Failure> {
    match command {
        SnapshotCommand::Create { id, name, memory } => {
            let mut body = json!({"sandboxId": id});
            if memory {
                body["memory"] = json!(true);
            }
            if let Some(name) = name {
                body["name"] = json!(name);
            }
            client.post("sandbox.snapshot", &body).await
        }
        SnapshotCommand::Ls => client.get("snapshot.all", &[]).await,
        SnapshotCommand::Show { snapshot } => {
            client
                .get("snapshot.one", &[("snapshotId", &snapshot)])
                .await
        }
        SnapshotCommand::Rm { snapshots } => {
            for snapshot in &snapshots {
                client
                    .post("snapshot.remove", &json!({"snapshotId": snapshot}))
                    .await?;
            }
            Ok(json!({"removed": snapshots}))
        }
    }
}

/// What `snapshot` prints: the id of a new snapshot, a table, one snapshot's fields, or
/// what was removed.
pub fn snapshot_text(answer: &Value) -> String {
    if let Some(listed) = answer.as_array() {
        let rows: Vec<Vec<String>> = listed
            .iter()
            .map(|s| {
                vec![
                    table::cell(&s["snapshotId"]),
                    table::cell(&s["name"]),
                    table::cell(&s["sandboxId"]),
                    table::size(s["sizeBytes"].as_u64().unwrap_or_default()),
                    table::cell(&s["serverId"]),
                    table::cell(&s["createdAt"]),
                ]
            })
            .collect();
        return table::render(
            &["ID", "NAME", "SANDBOX", "SIZE", "SERVER", "CREATED"],
            &rows,
        );
    }
    if let Some(removed) = answer["removed"].as_array() {
        return removed
            .iter()
            .map(|id| format!("{} removed\n", table::cell(id)))
            .collect();
    }
    format!("{}\n", table::cell(&answer["snapshotId"]))
}

/// The fields of one snapshot.
pub fn snapshot_fields(s: &Value) -> String {
    table::fields(&[
        ("id", table::cell(&s["snapshotId"])),
        ("name", table::cell(&s["name"])),
        ("sandbox", table::cell(&s["sandboxId"])),
        ("project", table::cell(&s["projectId"])),
        ("server", table::cell(&s["serverId"])),
        ("source image", table::cell(&s["sourceImage"])),
        ("template", table::cell(&s["template"])),
        ("user", table::cell(&s["user"])),
        ("workdir", table::cell(&s["workdir"])),
        (
            "size",
            table::size(s["sizeBytes"].as_u64().unwrap_or_default()),
        ),
        (
            "memory",
            s["memoryBytes"]
                .as_u64()
                .map_or_else(|| "-".to_owned(), table::size),
        ),
        ("created", table::cell(&s["createdAt"])),
    ])
}

pub async fn fork(client: &Client, args: ForkArgs) -> Result<Value, Failure> {
    let mut body = json!({"sandboxId": args.id, "count": args.count});
    if !args.env.is_empty() {
        body["envVars"] = json!(args.env.join("\n"));
    }
    if let Some(timeout) = args.timeout {
        body["timeoutMs"] = json!(timeout.as_millis() as u64);
    }
    if args.memory {
        body["memory"] = json!(true);
    }
    client.post("sandbox.fork", &body).await
}

/// What `fork` prints: the new sandboxes' ids, one per line.
pub fn fork_text(answer: &Value) -> String {
    answer["sandboxes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| format!("{}\n", table::cell(&s["sandboxId"])))
        .collect()
}
