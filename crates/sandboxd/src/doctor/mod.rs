//! `sandboxd doctor`: whether this host can run sandboxd (the engine and what it needs)
//! and whether this client can use a server (it answers, the key works), one line per
//! check with a fix on each failure; exits 1 when any check fails.

mod client;
mod host;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

use crate::cli::TargetArgs;
use crate::config::Config;

/// Flags of `sandboxd doctor`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sandboxd doctor                      (this host and the server it runs)\n  \
    sandboxd doctor --client --url https://sandboxd.example.com\n  \
    sandboxd doctor --host --config /etc/sandboxd.toml --json"
)]
pub struct DoctorArgs {
    /// Only the server host's checks (engine, images, data dir, store, agent, clock, disk).
    #[arg(long, conflicts_with = "client")]
    host: bool,
    /// Only the client's checks (the server answers, the key works, its scopes).
    #[arg(long)]
    client: bool,
    /// The server's TOML configuration file, as given to `sandboxd serve`.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The server's data directory [default: ./sandboxd-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    target: TargetArgs,
    /// Print the checks as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let mut checks = Vec::new();
    if !args.client {
        let mut config = Config::load(args.config.as_deref()).context("invalid configuration")?;
        if let Some(dir) = args.data_dir {
            config.data_dir = dir;
        }
        checks.extend(host::checks(&config).await);
    }
    if !args.host {
        checks.extend(client::checks(&args.target).await);
    }
    let healthy = report::healthy(&checks);
    if args.json {
        let value = serde_json::json!({ "healthy": healthy, "checks": checks });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", report::render(&checks));
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
