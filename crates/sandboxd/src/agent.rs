//! Which in-sandbox agent `sandboxd serve` mounts: the configured one, else the one
//! built into this binary (installed into the data dir), else a static `sandboxd-agent`
//! next to the executable. Whichever it is, sandboxes mount an execute-only copy under
//! `<data_dir>/bin`. Without any, sandboxes run without the agent, and the log says so
//! in one line.

use std::path::{Path, PathBuf};

use anyhow::bail;
use sandboxd_server::agent::is_static_elf;
use tracing::{info, warn};

/// Where the agent binary came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentSource {
    /// `agent_binary` in the configuration (`SANDBOXD_AGENT_BINARY`).
    Configured,
    /// Built into this sandboxd and installed under `<data_dir>/bin`.
    BuiltIn,
    /// A static `sandboxd-agent` next to this executable.
    BesideExecutable,
}

impl AgentSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Configured => "configured",
            Self::BuiltIn => "built-in",
            Self::BesideExecutable => "beside the executable",
        }
    }
}

/// The agent binary to mount and where it came from; `None` when turned off or there is
/// none (the reason is logged). A configured binary that is not a static executable is
/// an error.
pub fn choose(
    enabled: bool,
    configured: Option<&Path>,
    data_dir: &Path,
) -> anyhow::Result<Option<(PathBuf, AgentSource)>> {
    if !enabled {
        info!(
            "sandboxes run without the in-sandbox agent (agent = false): commands go through \
             the engine's exec, and terminals, background processes and interpreter contexts \
             answer 503"
        );
        return Ok(None);
    }
    if let Some(path) = configured {
        let path = std::path::absolute(path)?;
        if !is_static_elf(&path) {
            bail!(
                "agent_binary {} is not a statically linked executable (build one with \
                 scripts/build-agent.sh, or unset agent_binary to use the agent built into sandboxd)",
                path.display()
            );
        }
        let installed = sandboxd_agent_embed::install_copy(&data_dir.join("bin"), &path)?;
        return Ok(Some((installed, AgentSource::Configured)));
    }
    let missing = match sandboxd_agent_embed::install(&data_dir.join("bin")) {
        Ok(path) => return Ok(Some((path, AgentSource::BuiltIn))),
        Err(sandboxd_agent_embed::InstallError::NotEmbedded(why)) => why,
        Err(error) => return Err(error.into()),
    };
    if let Some(beside) = beside_executable().filter(|path| is_static_elf(path)) {
        let installed = sandboxd_agent_embed::install_copy(&data_dir.join("bin"), &beside)?;
        return Ok(Some((installed, AgentSource::BesideExecutable)));
    }
    warn!(
        "sandboxes run WITHOUT the in-sandbox agent ({missing}): commands go through the \
         engine's exec, about 20 times slower, and terminals, background processes and \
         interpreter contexts answer 503; rebuild sandboxd with `cargo build`, or set \
         agent_binary to a static agent"
    );
    Ok(None)
}

/// Why no agent can be mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// The configured binary cannot serve.
    Invalid(String),
    /// There is none to mount.
    Missing(&'static str),
}

/// Which agent `choose` would mount, said in words, without installing anything.
pub fn availability(enabled: bool, configured: Option<&Path>) -> Result<String, Unavailable> {
    if !enabled {
        return Ok("off (agent = false): commands go through the engine's exec".into());
    }
    if let Some(path) = configured {
        return if is_static_elf(path) {
            Ok(format!("{} (configured)", path.display()))
        } else {
            Err(Unavailable::Invalid(format!(
                "agent_binary {} is not a statically linked executable",
                path.display()
            )))
        };
    }
    if sandboxd_agent_embed::is_embedded() {
        return Ok("built into this sandboxd".into());
    }
    match beside_executable().filter(|path| is_static_elf(path)) {
        Some(path) => Ok(format!("{} (beside the executable)", path.display())),
        None => Err(Unavailable::Missing(
            "none is built in or beside the executable",
        )),
    }
}

fn beside_executable() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()?
        .parent()?
        .join("sandboxd-agent");
    beside.is_file().then_some(beside)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_agent_is_installed_into_the_data_dir() {
        let data = tempfile::tempdir().unwrap();
        let (path, source) = choose(true, None, data.path()).unwrap().unwrap();
        assert_eq!(source, AgentSource::BuiltIn);
        assert!(path.starts_with(data.path().join("bin")));
        assert!(is_static_elf(&path));
    }

    #[test]
    fn a_configured_agent_must_be_static() {
        let data = tempfile::tempdir().unwrap();
        let me = std::env::current_exe().unwrap();
        let error = choose(true, Some(&me), data.path()).unwrap_err();
        assert!(
            error.to_string().contains("not a statically linked"),
            "{error}"
        );

        let built_in = choose(true, None, data.path()).unwrap().unwrap().0;
        let (path, source) = choose(true, Some(&built_in), data.path()).unwrap().unwrap();
        assert_eq!((path, source), (built_in, AgentSource::Configured));
        assert_eq!(choose(false, None, data.path()).unwrap(), None);
        assert_eq!(
            availability(true, None).unwrap(),
            "built into this sandboxd"
        );
        assert!(matches!(
            availability(true, Some(&me)),
            Err(Unavailable::Invalid(_))
        ));
        assert!(availability(false, Some(&me)).unwrap().starts_with("off"));
    }
}
