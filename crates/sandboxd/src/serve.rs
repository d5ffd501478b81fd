//! `sandboxd serve`: the configuration read and checked, tracing to stderr, paths made
//! absolute and logged once, the first start's key, signals. The wiring: the local
//! Docker engine and Docker over SSH for remote servers, handed to `Server::start` as
//! `Engines`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use sandboxd_docker::DockerEngine;
use sandboxd_server::{Engines, Server};
use tracing::info;
use tracing_subscriber::EnvFilter;

use crate::config::load;

/// Flags of `sandboxd serve`; each overrides the file and the environment.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sandboxd serve\n  sandboxd serve --config examples/local.toml --listen 0.0.0.0:3000"
)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:3000].
    #[arg(long)]
    listen: Option<String>,
    /// Directory of the database and keys [default: ./sandboxd-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The database: a postgres:// URL shared by replicas [default: SQLite in the data
    /// directory; env: SANDBOXD_DATABASE_URL].
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// Where the other replicas reach this one, http://host:port [default: the listen
    /// address; env: SANDBOXD_ADVERTISE_URL].
    #[arg(long, value_name = "URL")]
    advertise_url: Option<String>,
    /// TOML configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Libraries that log request and message bodies at debug level: the engine client
/// logs container create bodies (with the sandbox's environment variables), the MCP
/// and HTTP stacks log messages (with tool arguments). They are capped whatever the
/// configured filter says, so secrets never reach the log.
const BODY_LOGGING_CRATES: [&str; 7] = [
    "bollard=info",
    "rmcp=info",
    "hyper=info",
    "hyper_util=info",
    "h2=info",
    "reqwest=info",
    "sqlx=warn",
];

/// The configured log filter (`info` when invalid), with [`BODY_LOGGING_CRATES`] capped.
fn log_filter(configured: &str) -> EnvFilter {
    let mut filter = EnvFilter::try_new(configured).unwrap_or_else(|_| EnvFilter::new("info"));
    for directive in BODY_LOGGING_CRATES {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = load(args.config.as_deref()).context("invalid configuration")?;
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(dir) = args.data_dir {
        config.data_dir = dir;
    }
    if let Some(url) = args.database_url {
        config.database_url = Some(url);
    }
    if let Some(url) = args.advertise_url {
        config.advertise_url = Some(url);
    }
    // Every key is checked before the log or anything else starts.
    let checked = config.check()?;
    tracing_subscriber::fmt()
        .with_env_filter(log_filter(&config.log))
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal, never in a file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();

    // Every path is made absolute once, here: the engine takes only absolute host paths.
    config.data_dir = sandboxd_server::data_dir::prepare(&config.data_dir)?;
    let agent = crate::agent::choose(
        config.agent,
        config.agent_binary.as_deref(),
        &config.data_dir,
    )?;
    let database = config.database()?;
    info!(
        data_dir = %config.data_dir.display(),
        database = %database.describe(),
        config = %args.config.as_deref().map(absolute).unwrap_or_default(),
        agent = %agent.as_ref().map(|(path, _)| path.display().to_string()).unwrap_or_default(),
        agent_source = agent.as_ref().map(|(_, source)| source.as_str()).unwrap_or("none"),
        "paths"
    );
    config.agent_binary = agent.map(|(path, _)| path);

    // The wiring: the local Docker engine, and Docker over SSH for remote servers.
    let engine = DockerEngine::connect_local().await.context(
        "cannot connect to the Docker engine (is it running, and may this user use its socket?)",
    )?;
    let connector = sandboxd_docker::SshConnector::new(config.agent_binary())
        .context("cannot read the agent binary")?
        .allowing(checked.server_networks);
    let engines =
        Engines::local(std::sync::Arc::new(engine)).with_remote(std::sync::Arc::new(connector));
    let listen = config.listen.clone();
    let metrics_listen = config.metrics_listen.clone();
    let data_dir = config.data_dir.clone();
    let server = Server::start(config, engines)
        .await
        .context("sandboxd could not start")?;
    if let Some(boot) = &server.bootstrap {
        info!(
            project_id = %boot.project_id,
            environment_id = %boot.environment_id,
            "first start: created organization, project `default` and environment `production`"
        );
        if let Some(key) = &boot.generated_key {
            let path = data_dir.join("owner.key");
            write_private(&path, key)
                .with_context(|| format!("cannot write {}", path.display()))?;
            // Shown once, on standard output only: never through the log.
            println!("owner API key (also written to {}): {key}", path.display());
        }
    }
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    info!(address = %listener.local_addr()?, "sandboxd listening");
    let server = match &metrics_listen {
        Some(address) => {
            let metrics = tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address} (metrics_listen)"))?;
            info!(address = %metrics.local_addr()?, "metrics served without a key");
            server.with_metrics_listener(metrics)
        }
        None => server,
    };
    server.serve(listener, shutdown_signal()).await?;
    info!("sandboxd stopped");
    Ok(())
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_owned())
        .display()
        .to_string()
}

/// Writes `key` to a new file only its owner reads. Whatever stood at `path` (a file
/// of an earlier install, or a link planted to redirect the key) is removed first, and
/// the file is created exclusively, so a link put back in between makes this fail
/// rather than write through it.
fn write_private(path: &Path, key: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    writeln!(file, "{key}")
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
    info!("shutting down");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_key_is_never_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "untouched").unwrap();
        let path = dir.path().join("owner.key");
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        write_private(&path, "sbx_secret").unwrap();
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "untouched");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "sbx_secret\n");
        use std::os::unix::fs::PermissionsExt as _;
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
}
