//! `sandboxd`: the daemon (`sandboxd serve`) and its command line (`shell`, `mcp`, and
//! the client commands of `cli/`).
//!
//! The allocator is mimalloc (the agent keeps the C library's, which holds less while
//! idle). Besides `serve`: `migrate` (`migrate.rs`), `reap` (`reap.rs`), `doctor`
//! (`doctor/`), `shell`, `mcp`, and `completions SHELL`, which prints clap_complete's
//! script.
#![forbid(unsafe_code)]

mod agent;
mod cli;
mod config;
mod doctor;
mod mcp_stdio;
mod migrate;
mod reap;
mod serve;
mod shell;

use std::process::ExitCode;

/// File contents pass through buffers of megabytes; mimalloc reuses freed memory where
/// the system allocator hands it back to the kernel and faults it in again, page by
/// page, on the next request.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "sandboxd",
    version,
    about = "Self-hosted sandbox server for AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server.
    Serve(serve::ServeArgs),
    /// Open an interactive shell in a sandbox (this terminal, raw mode).
    Shell(shell::ShellArgs),
    /// Serve MCP on stdio, forwarding to a sandboxd server (for clients that launch a command).
    Mcp(mcp_stdio::McpArgs),
    #[command(flatten)]
    Client(Box<cli::ClientCommand>),
    /// Check this host (engine, images, store, agent, clock, disk) and the server and key
    /// in use; a fix for each failure.
    Doctor(doctor::DoctorArgs),
    /// List sandbox containers nobody looks after any more (remove them with --kill).
    Reap(reap::ReapArgs),
    /// Bring the database's schema up to date, then exit.
    Migrate(migrate::MigrateArgs),
    /// Print a completion script for a shell.
    #[command(
        after_help = "Examples:\n  sandboxd completions bash > ~/.local/share/bash-completion/completions/sandboxd\n  \
        sandboxd completions zsh > ~/.zfunc/_sandboxd\n  \
        sandboxd completions fish > ~/.config/fish/completions/sandboxd.fish"
    )]
    Completions { shell: clap_complete::Shell },
}

/// A command that could not run (bad configuration, no key, no engine): said on one
/// line, exit code 2, as the client commands do.
fn could_not_run(error: anyhow::Error) -> anyhow::Result<ExitCode> {
    eprintln!("error: {error:#}");
    Ok(ExitCode::from(2))
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await.map(|()| ExitCode::SUCCESS),
            Command::Shell(args) => shell::run(args).await.or_else(could_not_run),
            Command::Mcp(args) => mcp_stdio::run(args).await.or_else(could_not_run),
            Command::Client(command) => cli::run(*command).await,
            Command::Doctor(args) => doctor::run(args).await.or_else(could_not_run),
            Command::Reap(args) => reap::run(args).await.or_else(could_not_run),
            Command::Migrate(args) => migrate::run(args).await.or_else(could_not_run),
            Command::Completions { shell } => {
                use clap::CommandFactory as _;
                clap_complete::generate(
                    shell,
                    &mut Cli::command(),
                    "sandboxd",
                    &mut std::io::stdout(),
                );
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    // A read of the terminal may still be blocked in a worker thread; do not wait for it.
    runtime.shutdown_background();
    outcome
}
