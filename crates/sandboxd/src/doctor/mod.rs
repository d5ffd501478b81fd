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

/// The URL a client on this machine reaches a server listening on `listen` with.
fn local_url(listen: &str) -> String {
    match listen.rsplit_once(':') {
        Some(("0.0.0.0", port)) => format!("http://127.0.0.1:{port}"),
        Some(("[::]", port)) => format!("http://[::1]:{port}"),
        _ => format!("http://{listen}"),
    }
}

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
    let mut target = args.target.clone();
    if !args.client {
        let mut config =
            crate::config::load(args.config.as_deref()).context("invalid configuration")?;
        if let Some(dir) = &args.data_dir {
            config.data_dir = dir.clone();
        }
        checks.extend(host::checks(&config).await);
        // Told where the server's configuration or data is, the client checks go to
        // that server with its owner key, unless a server or key was given.
        if args.config.is_some() || args.data_dir.is_some() {
            target.url.get_or_insert_with(|| local_url(&config.listen));
            if target.key.is_none() {
                target.key = std::fs::read_to_string(config.data_dir.join("owner.key"))
                    .ok()
                    .map(|key| key.trim().to_owned());
            }
        }
    }
    if !args.host {
        checks.extend(client::checks(&target).await);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_listen_address_is_reached_on_loopback() {
        assert_eq!(local_url("0.0.0.0:8080"), "http://127.0.0.1:8080");
        assert_eq!(local_url("[::]:3000"), "http://[::1]:3000");
        assert_eq!(local_url("127.0.0.1:3000"), "http://127.0.0.1:3000");
    }
}
