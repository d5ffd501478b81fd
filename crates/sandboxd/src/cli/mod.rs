//! The client commands: the API from a terminal. Each resolves its server and key
//! (`target.rs`), calls the API (`client.rs`) and prints a table or, with `--json`, the
//! API's own JSON. Exit codes: 0 done, 1 refused by the server (bad input, conflict,
//! limit), 2 bad usage, 3 key refused or not allowed, 4 not found, 5 server unreachable
//! or failing; `exec` exits with the remote command's code once it ran.

mod access;
mod activity;
mod changes;
mod client;
mod copy;
mod egress;
mod exec;
mod exec_stdin;
mod pages;
mod port_forward;
mod ports;
mod processes;
mod sandboxes;
mod snapshots;
pub mod table;
mod target;
mod templates;
pub mod tls;
mod unpack;
mod volumes;
mod watch;

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

pub use client::percent_encode;
pub use client::{Client, Failure};
pub use sandboxes::parse_duration;
pub use target::TargetArgs;

/// Flags every client command takes.
#[derive(Debug, Args)]
pub struct Common {
    #[command(flatten)]
    target: TargetArgs,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

/// The client commands.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Check a server and key, and keep them as this user's profile (mode 0600).
    #[command(
        after_help = "Example:\n  sandboxd login --url https://sandboxd.example.com --key sbx_..."
    )]
    Login {
        #[command(flatten)]
        common: Common,
    },
    /// Create a sandbox and print its id.
    #[command(
        after_help = "Examples:\n  sandboxd create -t python --timeout 30m -e API_TOKEN=...\n  ID=$(sandboxd create)"
    )]
    Create {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: sandboxes::CreateArgs,
    },
    /// List sandboxes (running ones; --all for every one).
    #[command(after_help = "Examples:\n  sandboxd ls\n  sandboxd ls --all --json")]
    Ls {
        #[command(flatten)]
        common: Common,
        /// Killed and failed ones too.
        #[arg(long, short)]
        all: bool,
    },
    /// Run a command in a sandbox, its output streamed; exits with the command's code.
    #[command(
        after_help = "Examples:\n  sandboxd exec $ID -- python3 -c 'print(6*7)'\n  \
        sandboxd exec $ID --timeout 5m --cwd /home/user/project -- make test\n  \
        sandboxd exec $ID -- 'ls | wc -l'      (one argument: a shell line)\n  \
        gzip -c data.csv | sandboxd exec -i $ID -- 'gunzip > data.csv'"
    )]
    Exec {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: exec::ExecArgs,
    },
    /// List a sandbox's background processes.
    #[command(after_help = "Example:\n  sandboxd ps $ID")]
    Ps {
        #[command(flatten)]
        common: Common,
        id: String,
    },
    /// Print a background process's output (what is kept: its last MiB).
    #[command(
        after_help = "Example:\n  P=$(sandboxd exec -d $ID -- python3 -m http.server)\n  sandboxd logs -f $ID $P"
    )]
    Logs {
        #[command(flatten)]
        common: Common,
        id: String,
        process: String,
        /// Its standard error instead.
        #[arg(long)]
        stderr: bool,
        /// Keep printing until the process ends.
        #[arg(long, short)]
        follow: bool,
    },
    /// Follow what changes under a directory of a sandbox, a line per change, until
    /// interrupted.
    #[command(
        after_help = "Examples:\n  sandboxd watch $ID /home/user\n  sandboxd watch -r $ID /home/user/project --json"
    )]
    Watch {
        #[command(flatten)]
        common: Common,
        id: String,
        /// An absolute directory of the sandbox.
        path: String,
        /// Every directory under it too, and those made later.
        #[arg(long, short)]
        recursive: bool,
    },
    /// What was done in a sandbox, a line per entry, oldest first: commands with their
    /// exit codes (failed ones marked), files, terminals, ports and its life, with who
    /// asked; kept after it ended, for the retention the operator set.
    #[command(
        after_help = "Examples:\n  sandboxd activity $ID\n  sandboxd activity $ID --latest 20 --follow\n  \
        sandboxd activity $ID --kinds command --json"
    )]
    Activity {
        #[command(flatten)]
        common: Common,
        id: String,
        /// Keep printing new entries as they are written, until interrupted.
        #[arg(long, short)]
        follow: bool,
        /// Only these kinds, comma-separated: command, file, terminal, network, lifecycle.
        #[arg(long)]
        kinds: Option<String>,
        /// Only the newest N entries (at most 500).
        #[arg(long)]
        latest: Option<u32>,
    },
    /// Write a terminal session's recording (asciicast v2) to standard output: the
    /// TERMINAL id is in the session's `terminal` entry of `sandboxd activity`.
    #[command(
        after_help = "Examples:\n  sandboxd recording $ID t_0123abcd4567 > session.cast\n  asciinema play session.cast"
    )]
    Recording {
        #[command(flatten)]
        common: Common,
        id: String,
        terminal: String,
    },
    /// Show one sandbox.
    #[command(after_help = "Examples:\n  sandboxd show $ID\n  sandboxd show $ID --json")]
    Show {
        #[command(flatten)]
        common: Common,
        id: String,
    },
    /// What a running sandbox uses now (CPU, memory, processes against its limits), or
    /// with --history its readings every 5 s over the last hour.
    #[command(
        after_help = "Examples:\n  sandboxd stats $ID\n  sandboxd stats $ID --history\n  sandboxd stats $ID --history --since 10m --json"
    )]
    Stats {
        #[command(flatten)]
        common: Common,
        id: String,
        /// The readings over time instead of one now.
        #[arg(long)]
        history: bool,
        /// With --history: only the readings of this last span (e.g. 90s, 10m).
        #[arg(long, value_parser = sandboxes::parse_duration, requires = "history")]
        since: Option<std::time::Duration>,
    },
    /// Give a sandbox a new idle timeout, counted from now.
    #[command(after_help = "Example:\n  sandboxd timeout $ID 2h")]
    Timeout {
        #[command(flatten)]
        common: Common,
        id: String,
        /// e.g. 90s, 30m, 2h.
        #[arg(value_parser = sandboxes::parse_duration)]
        duration: std::time::Duration,
    },
    /// Give a sandbox another name.
    #[command(after_help = "Example:\n  sandboxd rename $ID build-42")]
    Rename {
        #[command(flatten)]
        common: Common,
        id: String,
        /// 1–64 characters.
        name: String,
    },
    /// Pause sandboxes: processes and memory kept, no CPU, until resumed (any call on a
    /// paused sandbox resumes it).
    #[command(after_help = "Examples:\n  sandboxd pause $ID\n  sandboxd pause --to-disk $ID")]
    Pause {
        #[command(flatten)]
        common: Common,
        /// Save the processes and their memory to the host's disk and stop the
        /// container (sandboxes of the gvisor tier): it holds no memory while paused and
        /// outlives a restart of the server or the host.
        #[arg(long)]
        to_disk: bool,
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Resume paused sandboxes.
    #[command(after_help = "Example:\n  sandboxd resume $ID")]
    Resume {
        #[command(flatten)]
        common: Common,
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// List the files a sandbox added, changed and removed since its template or
    /// snapshot (under its workdir, /tmp and /var/tmp; --all: everywhere).
    #[command(
        after_help = "Examples:\n  sandboxd changes $ID\n  sandboxd changes $ID --all --json\n  sandboxd changes $ID --tar work.tar"
    )]
    Changes {
        #[command(flatten)]
        common: Common,
        id: String,
        /// The whole filesystem, not only the user's areas.
        #[arg(long)]
        all: bool,
        /// Write them as one tar (contents, links, `.wh.` entries for removals) to this
        /// file (`-`: standard output) instead of listing them.
        #[arg(long, value_name = "FILE")]
        tar: Option<String>,
    },
    /// Snapshots of sandboxes' files: create, ls, show, rm.
    #[command(
        after_help = "Examples:\n  SNAP=$(sandboxd snapshot create $ID)\n  sandboxd create --snapshot $SNAP\n  sandboxd snapshot ls\n  sandboxd snapshot rm $SNAP"
    )]
    Snapshot {
        #[command(flatten)]
        common: Common,
        #[command(subcommand)]
        command: snapshots::SnapshotCommand,
    },
    /// Templates built from a Dockerfile (build, ls, show, log, rm).
    #[command(
        after_help = "Examples:\n  sandboxd template build -f Dockerfile . --name app\n  sandboxd create --template app\n  sandboxd template ls\n  sandboxd template rm app"
    )]
    Template {
        #[command(flatten)]
        common: Common,
        #[command(subcommand)]
        command: templates::TemplateCommand,
    },
    /// Volumes: named storage that outlives sandboxes (create, ls, show, rm).
    #[command(
        after_help = "Examples:\n  sandboxd volume create cache\n  sandboxd create --volume cache:/data\n  sandboxd volume ls\n  sandboxd volume rm cache"
    )]
    Volume {
        #[command(flatten)]
        common: Common,
        #[command(subcommand)]
        command: volumes::VolumeCommand,
    },
    /// Fork a sandbox into new ones that start with its files (with --memory, its
    /// processes too, from one instant; never its environment variables); prints
    /// their ids.
    #[command(
        after_help = "Examples:\n  sandboxd fork $ID -n 3\n  sandboxd fork $ID -n 3 --memory"
    )]
    Fork {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        args: snapshots::ForkArgs,
    },
    /// Kill sandboxes (their records stay).
    #[command(after_help = "Example:\n  sandboxd kill $ID")]
    Kill {
        #[command(flatten)]
        common: Common,
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Kill sandboxes if needed and delete their records.
    #[command(after_help = "Example:\n  sandboxd rm $ID $ID2")]
    Rm {
        #[command(flatten)]
        common: Common,
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// List the templates.
    #[command(after_help = "Example:\n  sandboxd templates --json")]
    Templates {
        #[command(flatten)]
        common: Common,
    },
    /// List a directory of a sandbox (default: its workdir).
    #[command(
        after_help = "Examples:\n  sandboxd files $ID\n  sandboxd files $ID /home/user/project --json"
    )]
    Files {
        #[command(flatten)]
        common: Common,
        id: String,
        path: Option<String>,
    },
    /// API keys: list, create, revoke.
    #[command(
        after_help = "Examples:\n  sandboxd keys ls\n  KEY=$(sandboxd keys create ci --scope service:read)\n  sandboxd keys revoke key_…"
    )]
    Keys {
        #[command(flatten)]
        common: Common,
        #[command(subcommand)]
        command: access::KeysCommand,
    },
    /// The organization's members (administrators): list, add, update, remove.
    #[command(
        after_help = "Examples:\n  sandboxd members ls\n  sandboxd members add alice --permission service:read"
    )]
    Members {
        #[command(flatten)]
        common: Common,
        #[command(subcommand)]
        command: access::MembersCommand,
    },
    /// A sandbox's ports as preview URLs: expose, list, unexpose.
    #[command(
        after_help = "Examples:\n  sandboxd port expose $ID 8000\n  sandboxd port ls $ID\n  sandboxd port rm $ID 8000"
    )]
    Port {
        #[command(flatten)]
        common: Common,
        #[command(subcommand)]
        command: ports::PortCommand,
    },
    /// What an `allowlist` sandbox may reach, and what it met: ls, set, log.
    Egress {
        #[command(flatten)]
        common: Common,
        #[command(subcommand)]
        command: egress::EgressCommand,
    },
    /// Reach a port inside a sandbox from a local one (PORT[:LOCAL]: the sandbox's port,
    /// then the local one, by default the same; 0 picks a free one), until interrupted.
    #[command(
        name = "port-forward",
        after_help = "Examples:\n  sandboxd port-forward $ID 8000          (127.0.0.1:8000 here reaches 8000 there)\n  \
        sandboxd port-forward $ID 5432:15432     (127.0.0.1:15432 here reaches 5432 there)"
    )]
    PortForward {
        #[command(flatten)]
        common: Common,
        id: String,
        /// PORT[:LOCAL].
        #[arg(value_parser = port_forward::parse_ports)]
        ports: (u16, u16),
    },
    /// Copy files and trees between here and a sandbox, streamed.
    #[command(
        after_help = "Examples:\n  sandboxd cp ./project $ID:/home/user/project\n  \
        sandboxd cp data.csv $ID:/home/user/\n  sandboxd cp $ID:/home/user/out ./out"
    )]
    Cp {
        #[command(flatten)]
        common: Common,
        /// A local path, or SANDBOX_ID:/path.
        from: String,
        /// A local path, or SANDBOX_ID:/path.
        to: String,
    },
}

fn print(common: &Common, value: &Value, human: impl FnOnce(&Value) -> String) {
    if common.json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
    } else {
        print!("{}", human(value));
    }
}

/// Runs a client command.
pub async fn run(command: ClientCommand) -> anyhow::Result<ExitCode> {
    match execute(command).await {
        Ok(code) => Ok(code),
        Err(CommandError::Failure(failure)) => {
            eprintln!("error: {failure}");
            Ok(failure.exit_code())
        }
        Err(CommandError::Setup(error)) => {
            eprintln!("error: {error:#}");
            Ok(ExitCode::from(2))
        }
    }
}

enum CommandError {
    Failure(Failure),
    Setup(anyhow::Error),
}

impl From<Failure> for CommandError {
    fn from(failure: Failure) -> Self {
        Self::Failure(failure)
    }
}

impl From<anyhow::Error> for CommandError {
    fn from(error: anyhow::Error) -> Self {
        Self::Setup(error)
    }
}

/// Pauses or resumes (`procedure`) each sandbox, printing its status.
async fn freeze(
    common: &Common,
    procedure: &str,
    fields: Value,
    ids: Vec<String>,
) -> Result<(), CommandError> {
    let client = client(common)?;
    for id in ids {
        let sandbox = sandboxes::freeze(&client, procedure, &id, &fields).await?;
        print(common, &sandbox, |s| {
            let status = s["status"].as_str().unwrap_or("-");
            match (s["pausedTo"].as_str(), s["hibernatedBytes"].as_i64()) {
                (Some("disk"), Some(bytes)) => {
                    format!("{id} {status} to disk ({} MiB)\n", bytes / (1024 * 1024))
                }
                _ => format!("{id} {status}\n"),
            }
        });
    }
    Ok(())
}

fn client(common: &Common) -> Result<Client, CommandError> {
    Ok(Client::new(common.target.resolve()?)?)
}

async fn execute(command: ClientCommand) -> Result<ExitCode, CommandError> {
    match command {
        ClientCommand::Exec { common, args } if args.detach => {
            let env = exec::environment(&args.env)?;
            let cmd = exec::command_line(&args.cmd)?;
            let started =
                processes::start(&client(&common)?, &args.id, &cmd, args.cwd.as_deref(), &env)
                    .await?;
            print(&common, &started, |p| {
                format!("{}\n", p["processId"].as_str().unwrap_or_default())
            });
        }
        ClientCommand::Exec { common, args } => {
            let client = client(&common)?;
            let outcome = if args.interactive {
                exec_stdin::run(&client, &args, common.json).await?
            } else {
                exec::run(&client, &args, common.json).await?
            };
            if common.json {
                let value = serde_json::json!({
                    "exitCode": outcome.exit_code,
                    "timedOut": outcome.timed_out,
                    "stdout": outcome.stdout,
                    "stderr": outcome.stderr,
                });
                print(&common, &value, |_| String::new());
            }
            return Ok(ExitCode::from(u8::try_from(outcome.exit_code).unwrap_or(1)));
        }
        ClientCommand::Login { common } => {
            let client = client(&common)?;
            let organizations = client.get("organization.all", &[]).await?;
            let profile = target::Profile {
                url: client.target.url.clone(),
                key: client.target.key.clone(),
                ca_cert: client.target.ca_cert.clone(),
            };
            let path = target::write_profile(&profile)?;
            let count = organizations.as_array().map_or(0, Vec::len);
            eprintln!(
                "signed in to {} ({count} organization{}); profile kept in {}",
                profile.url,
                if count == 1 { "" } else { "s" },
                path.display()
            );
        }
        ClientCommand::Create { common, args } => {
            let created = sandboxes::create(&client(&common)?, args).await?;
            print(&common, &created, |s| {
                format!("{}\n", s["sandboxId"].as_str().unwrap_or_default())
            });
        }
        ClientCommand::Ls { common, all } => {
            let listed = sandboxes::list(&client(&common)?, all).await?;
            print(&common, &listed, sandboxes::list_table);
        }
        ClientCommand::Show { common, id } => {
            let sandbox = sandboxes::show(&client(&common)?, &id).await?;
            print(&common, &sandbox, sandboxes::show_fields);
        }
        ClientCommand::Timeout {
            common,
            id,
            duration,
        } => {
            let sandbox = sandboxes::set_timeout(&client(&common)?, &id, duration).await?;
            print(&common, &sandbox, |s| {
                format!("expires at {}\n", s["expiresAt"].as_str().unwrap_or("-"))
            });
        }
        ClientCommand::Stats {
            common,
            id,
            history,
            since,
        } => {
            let client = client(&common)?;
            if history {
                let readings = sandboxes::metrics(&client, &id, since).await?;
                print(&common, &readings, sandboxes::metrics_table);
            } else {
                let stats = sandboxes::stats(&client, &id).await?;
                print(&common, &stats, sandboxes::stats_fields);
            }
        }
        ClientCommand::Rename { common, id, name } => {
            let sandbox = sandboxes::rename(&client(&common)?, &id, &name).await?;
            print(&common, &sandbox, sandboxes::show_fields);
        }
        ClientCommand::Pause {
            common,
            to_disk,
            ids,
        } => {
            let memory = if to_disk { "disk" } else { "ram" };
            freeze(&common, "sandbox.pause", json!({"memory": memory}), ids).await?
        }
        ClientCommand::Resume { common, ids } => {
            freeze(&common, "sandbox.resume", json!({}), ids).await?
        }
        ClientCommand::Changes {
            common,
            id,
            all,
            tar: Some(to),
        } => {
            let written = changes::archive(&client(&common)?, &id, all, &to).await?;
            if to != "-" {
                print(&common, &written, |w| {
                    format!("{} bytes written to {to}\n", w["bytes"])
                });
            }
        }
        ClientCommand::Changes {
            common,
            id,
            all,
            tar: None,
        } => {
            let answer = changes::changes(&client(&common)?, &id, all).await?;
            print(&common, &answer, changes::changes_text);
        }
        ClientCommand::Snapshot { common, command } => {
            let show = matches!(command, snapshots::SnapshotCommand::Show { .. });
            let answer = snapshots::snapshot(&client(&common)?, command).await?;
            if show {
                print(&common, &answer, snapshots::snapshot_fields);
            } else {
                print(&common, &answer, snapshots::snapshot_text);
            }
        }
        ClientCommand::Template { common, command } => {
            let show = matches!(command, templates::TemplateCommand::Show { .. });
            let answer = templates::template(&client(&common)?, command).await?;
            if show {
                print(&common, &answer, templates::template_fields);
            } else {
                print(&common, &answer, templates::template_text);
            }
        }
        ClientCommand::Volume { common, command } => {
            let show = matches!(command, volumes::VolumeCommand::Show { .. });
            let answer = volumes::volume(&client(&common)?, command).await?;
            if show {
                print(&common, &answer, volumes::volume_fields);
            } else {
                print(&common, &answer, volumes::volume_text);
            }
        }
        ClientCommand::Fork { common, args } => {
            let answer = snapshots::fork(&client(&common)?, args).await?;
            print(&common, &answer, snapshots::fork_text);
        }
        ClientCommand::Kill { common, ids } => {
            let client = client(&common)?;
            for id in ids {
                let killed = sandboxes::kill(&client, &id).await?;
                print(&common, &killed, |s| {
                    format!("{id} {}\n", s["status"].as_str().unwrap_or("killed"))
                });
            }
        }
        ClientCommand::Rm { common, ids } => {
            let client = client(&common)?;
            for id in ids {
                let removed = sandboxes::remove(&client, &id).await?;
                print(&common, &removed, |_| format!("{id} removed\n"));
            }
        }
        ClientCommand::Ps { common, id } => {
            let listed = processes::list(&client(&common)?, &id).await?;
            print(&common, &listed, processes::list_table);
        }
        ClientCommand::Logs {
            common,
            id,
            process,
            stderr,
            follow,
        } => {
            let stream = if stderr { "stderr" } else { "stdout" };
            processes::logs(&client(&common)?, &id, &process, stream, follow).await?;
        }
        ClientCommand::Recording {
            common,
            id,
            terminal,
        } => {
            let answer = client(&common)?
                .get(
                    "sandbox.recording",
                    &[("sandboxId", &id), ("terminalId", &terminal)],
                )
                .await?;
            let cast = answer["cast"].as_str().unwrap_or_default();
            let _ = std::io::Write::write_all(&mut std::io::stdout(), cast.as_bytes());
        }
        ClientCommand::Activity {
            common,
            id,
            follow,
            kinds,
            latest,
        } => {
            activity::run(
                &client(&common)?,
                &id,
                kinds.as_deref(),
                latest,
                (follow, common.json),
            )
            .await?;
        }
        ClientCommand::Watch {
            common,
            id,
            path,
            recursive,
        } => {
            watch::run(&client(&common)?, &id, &path, recursive, common.json).await?;
        }
        ClientCommand::Templates { common } => {
            let templates = sandboxes::templates(&client(&common)?).await?;
            print(&common, &templates, sandboxes::templates_table);
        }
        ClientCommand::Files { common, id, path } => {
            let listing = sandboxes::files(&client(&common)?, &id, path.as_deref()).await?;
            print(&common, &listing, sandboxes::files_table);
        }
        ClientCommand::Keys { common, command } => {
            let answer = access::keys(&client(&common)?, command).await?;
            print(&common, &answer, access::keys_text);
        }
        ClientCommand::Members { common, command } => {
            let answer = access::members(&client(&common)?, command).await?;
            print(&common, &answer, access::members_text);
        }
        ClientCommand::Port { common, command } => {
            let answer = ports::port(&client(&common)?, command).await?;
            print(&common, &answer, ports::port_text);
        }
        ClientCommand::Egress { common, command } => {
            if let Some(answer) = egress::egress(&client(&common)?, command, common.json).await? {
                print(&common, &answer, egress::egress_text);
            }
        }
        ClientCommand::PortForward { common, id, ports } => {
            port_forward::forward(&client(&common)?, &id, ports.0, ports.1).await?;
        }
        ClientCommand::Cp { common, from, to } => {
            let copied = copy::copy(&client(&common)?, &from, &to).await?;
            if common.json {
                print(&common, &copied, |_| String::new());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
