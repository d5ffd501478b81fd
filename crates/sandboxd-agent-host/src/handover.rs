//! How a sandbox's agent gets its key. Code in the sandbox runs as the agent's user, so
//! nothing the agent can read at any time may hold the key for long: not its
//! environment (gVisor serves `/proc/<pid>/environ` to the same user), not a file left in
//! place. So the key is put in a file of the sandbox's socket directory, `agent.key`,
//! only while no code of the sandbox runs: just before its container starts (created,
//! or started again). The agent's supervisor reads it as it starts and keeps it in
//! memory (the worker gets it over a pipe), and sandboxd takes the file away as soon as
//! an agent proved it holds the key, before any command is run.
//!
//! On a remote server the key file is put and taken away through the fleet's handover
//! (`KeyHandover`), over the server's SSH connection.

use std::path::PathBuf;

pub use sandboxd_agent_protocol::AGENT_KEY_FILE;

pub use sandboxd_contracts::KeyHandover;

/// The key file in a local socket directory.
#[derive(Debug)]
pub(crate) struct LocalHandover {
    pub(crate) dir: PathBuf,
}

#[async_trait::async_trait]
impl KeyHandover for LocalHandover {
    async fn offer(&self, key: &str) -> std::io::Result<()> {
        offer_in(&self.dir, key)
    }

    async fn withdraw(&self) -> std::io::Result<()> {
        match std::fs::remove_file(self.dir.join(AGENT_KEY_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Writes the key file in `dir` whole (a new file renamed over any old one), readable
/// by the sandbox's user whatever its uid; the directory's parent keeps it from the
/// host's other users.
pub(crate) fn offer_in(dir: &std::path::Path, key: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = dir.join(format!("{AGENT_KEY_FILE}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(&tmp)?;
    file.write_all(key.as_bytes())?;
    std::fs::rename(&tmp, dir.join(AGENT_KEY_FILE))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[tokio::test]
    async fn a_key_is_offered_readable_and_withdrawn() {
        let dir = tempfile::tempdir().unwrap();
        let handover = LocalHandover {
            dir: dir.path().to_owned(),
        };
        handover.offer("k1").await.unwrap();
        handover.offer("k2").await.unwrap();
        let file = dir.path().join(AGENT_KEY_FILE);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "k2");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o444);
        handover.withdraw().await.unwrap();
        assert!(!file.exists());
        handover.withdraw().await.unwrap();
    }
}
