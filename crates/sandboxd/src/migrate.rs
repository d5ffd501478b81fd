//! `sandboxd migrate`: brings the database's schema up to date and exits, so an operator
//! upgrading several replicas migrates once, before starting the new ones (every start
//! migrates too; on PostgreSQL one replica at a time).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sandboxd migrate\n  SANDBOXD_DATABASE_URL=postgres://sandboxd@db/sandboxd sandboxd migrate"
)]
pub struct MigrateArgs {
    /// Directory of the database and keys [default: ./sandboxd-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The database: a postgres:// URL [default: SQLite in the data directory; env:
    /// SANDBOXD_DATABASE_URL].
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// TOML configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
}

pub async fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let mut config =
        crate::config::load(args.config.as_deref()).context("invalid configuration")?;
    if let Some(dir) = args.data_dir {
        config.data_dir = dir;
    }
    if let Some(url) = args.database_url {
        config.database_url = Some(url);
    }
    let database = config.database()?;
    if let sandboxd_store::Database::Sqlite { data_dir } = &database {
        sandboxd_server::data_dir::prepare(data_dir)?;
    }
    let described = database.describe();
    sandboxd_store::Store::migrate(&database)
        .await
        .with_context(|| format!("cannot migrate {described}"))?;
    let version = sandboxd_store::known_version(database.backend());
    println!("{described}: schema at version {version}");
    Ok(ExitCode::SUCCESS)
}
