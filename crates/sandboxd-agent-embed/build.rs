//! Builds `sandboxd-agent` as a static executable (glibc linked statically, for the
//! target being built) and hands it to `include_bytes!`, so that the ordinary build of
//! sandboxd carries a working agent with no extra script or flag.
//!
//! The agent is built by a nested `cargo build --release` into `<target-dir>/agent`, the
//! directory `scripts/build-agent.sh` uses too, so both share one incremental build.
//! `SANDBOXD_EMBED_AGENT=/path/to/static/agent` embeds a prebuilt agent instead;
//! `SANDBOXD_EMBED_AGENT=none` embeds nothing. When the build fails, nothing is
//! embedded, the build says why in a warning, and `sandboxd serve` says so at startup.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SANDBOXD_EMBED_AGENT");
    let out = PathBuf::from(env("OUT_DIR"));
    let embedded = out.join("sandboxd-agent");
    let outcome = match std::env::var_os("SANDBOXD_EMBED_AGENT") {
        Some(value) if value == "none" => Err("SANDBOXD_EMBED_AGENT=none".to_owned()),
        Some(path) => {
            let path = PathBuf::from(path);
            println!("cargo:rerun-if-changed={}", path.display());
            Ok(path)
        }
        None => build_agent(&out),
    };
    let (bytes, why) = match outcome.and_then(|path| {
        std::fs::read(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))
    }) {
        Ok(bytes) => (bytes, String::new()),
        Err(why) => {
            println!("cargo:warning=sandboxd is built without its agent: {why}");
            (Vec::new(), why)
        }
    };
    write(&embedded, &bytes);
    println!(
        "cargo:rustc-env=SANDBOXD_AGENT_DIGEST={:016x}",
        fnv1a(&bytes)
    );
    write(&out.join("why-missing.txt"), why.as_bytes());
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn write(path: &Path, bytes: &[u8]) {
    if let Err(error) = std::fs::write(path, bytes) {
        panic!("cannot write {}: {error}", path.display());
    }
}

/// Builds the agent for the target being built; returns the executable's path.
fn build_agent(out: &Path) -> Result<PathBuf, String> {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let agent_crate = manifest_dir.join("../sandboxd-agent");
    let protocol_crate = manifest_dir.join("../sandboxd-agent-protocol");
    for watched in [&agent_crate, &protocol_crate] {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    // The lock file pins the agent's dependencies; the workspace manifest holds its
    // release profile.
    for file in ["../../Cargo.lock", "../../Cargo.toml"] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest_dir.join(file).display()
        );
    }
    let target = env("TARGET");
    // OUT_DIR is <target-dir>[/<triple>]/<profile>/build/<crate>-<hash>/out.
    let target_dir = out
        .ancestors()
        .nth(4)
        .map(|dir| dir.join("agent"))
        .ok_or_else(|| format!("unexpected OUT_DIR {}", out.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--release")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(agent_crate.join("Cargo.toml"))
        .arg("--target")
        .arg(&target)
        .arg("--target-dir")
        .arg(&target_dir)
        // With `--target`, these flags reach the agent only, never build scripts or
        // procedural macros (which cannot be static).
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+crt-static")
        .env_remove("RUSTFLAGS")
        // `cargo clippy` wraps rustc for the outer build; the agent is built plainly.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        // Cargo reads `cargo:` lines on this script's standard output.
        .stdout(std::process::Stdio::from(std::io::stderr()));
    let status = command
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err(format!("`cargo build -p sandboxd-agent` failed ({status})"));
    }
    let binary = target_dir
        .join(&target)
        .join("release")
        .join("sandboxd-agent");
    if !binary.is_file() {
        return Err(format!("no agent at {}", binary.display()));
    }
    Ok(binary)
}

include!("src/digest.rs");
