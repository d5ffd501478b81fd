//! Which server a client command talks to, with which key and which CA: `--url` /
//! `--key` / `--ca-cert`, else `SANDBOXD_URL` / `SANDBOXD_KEY` / `SANDBOXD_CA_CERT`, else
//! the profile `sandboxd login` wrote, else the local defaults (`http://127.0.0.1:3000`
//! and `./sandboxd-data/owner.key`, what `sandboxd serve` makes on first start).
//!
//! `shell` and `mcp` resolve theirs here too.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use serde::{Deserialize, Serialize};

pub const DEFAULT_URL: &str = "http://127.0.0.1:3000";
const DEFAULT_KEY_FILE: &str = "sandboxd-data/owner.key";

/// Flags every client command takes.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// The sandboxd server [default: the profile's, else http://127.0.0.1:3000].
    #[arg(long, env = "SANDBOXD_URL", global = true)]
    pub url: Option<String>,
    /// API key [default: the profile's, else ./sandboxd-data/owner.key].
    #[arg(long, env = "SANDBOXD_KEY", hide_env_values = true, global = true)]
    pub key: Option<String>,
    /// A CA certificate (PEM) to trust for an https:// server, beside the system's
    /// [default: the profile's].
    #[arg(long, env = "SANDBOXD_CA_CERT", global = true)]
    pub ca_cert: Option<PathBuf>,
}

/// What `sandboxd login` keeps (mode 0600).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Profile {
    pub url: String,
    pub key: String,
    /// The CA certificate to trust for this server (an absolute path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
}

/// A server, a key, and how to trust the server's certificate.
#[derive(Clone)]
pub struct Target {
    pub url: String,
    pub key: String,
    pub ca_cert: Option<PathBuf>,
    pub tls: std::sync::Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Where the profile lives: `$XDG_CONFIG_HOME/sandboxd/profile.json`, else
/// `~/.config/sandboxd/profile.json`.
pub fn profile_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("sandboxd").join("profile.json"))
}

fn read_profile() -> anyhow::Result<Option<Profile>> {
    let Some(path) = profile_path() else {
        return Ok(None);
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{} is not a sandboxd profile", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes the profile (a new file each time, mode 0600).
pub fn write_profile(profile: &Profile) -> anyhow::Result<PathBuf> {
    let path = profile_path().context("no HOME or XDG_CONFIG_HOME to keep a profile in")?;
    let dir = path.parent().context("a profile path has a directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let temp = dir.join(".profile.json.tmp");
    let _ = std::fs::remove_file(&temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .with_context(|| format!("cannot write {}", temp.display()))?;
    file.write_all(serde_json::to_string_pretty(profile)?.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Whether `url` names this machine (`127.0.0.1`, `localhost`, `[::1]`).
fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

impl TargetArgs {
    /// The server and key in force (see the module's text).
    pub fn resolve(&self) -> anyhow::Result<Target> {
        let profile = read_profile()?;
        let url = self
            .url
            .clone()
            .or_else(|| profile.as_ref().map(|p| p.url.clone()))
            .unwrap_or_else(|| DEFAULT_URL.to_owned());
        let url = url.trim_end_matches('/').to_owned();
        // The profile speaks for its own server only: its key and CA never go to
        // another one named with --url.
        let profile = profile.filter(|p| p.url.trim_end_matches('/') == url);
        let ca_cert = match &self.ca_cert {
            Some(path) => Some(std::path::absolute(path)?),
            None => profile.as_ref().and_then(|p| p.ca_cert.clone()),
        };
        let key = match self.key.clone().or_else(|| profile.map(|p| p.key)) {
            Some(key) => key,
            // The key `sandboxd serve` wrote here is for the server on this machine.
            None if is_loopback(&url) => std::fs::read_to_string(DEFAULT_KEY_FILE)
                .map(|key| key.trim().to_owned())
                .with_context(|| {
                    format!(
                        "no key: pass --key, set SANDBOXD_KEY, run `sandboxd login`, or run \
                         this where `sandboxd serve` keeps {DEFAULT_KEY_FILE}"
                    )
                })?,
            None => anyhow::bail!(
                "no key for {url}: pass --key, set SANDBOXD_KEY, or run `sandboxd login --url \
                 {url} --key …`"
            ),
        };
        let tls = super::tls::config(ca_cert.as_deref())?;
        Ok(Target {
            url,
            key,
            ca_cert,
            tls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_gets_the_local_key() {
        for url in [
            "http://127.0.0.1:3000",
            "http://localhost",
            "https://[::1]:8443/",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "https://sandboxd.example.com",
            "http://127.0.0.1.evil.example:3000",
            "http://10.0.0.1:3000",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }
}
