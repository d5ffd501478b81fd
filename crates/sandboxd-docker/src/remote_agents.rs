//! The in-sandbox agents of a remote server, over its SSH connection. sandboxd puts the
//! agent binary on the server itself (content-addressed, checked by SHA-256 after the
//! upload, execute-only), makes a socket directory per sandbox, and has the server's
//! sshd listen on the sandbox's socket and forward each connection back; the agent in
//! the sandbox connects to it as it would to a local one.
//!
//! The binary is uploaded once per server and digest, as
//! `<remoteDir>/bin/sandboxd-agent-<sha256>`; each sandbox gets a 0755 directory under a
//! 0700 one, and sshd listens on the sandbox's socket (mode 0666 inside that directory),
//! its connections relayed to the agent host.

use sandboxd_core::plan::AGENT_KEY_FILE;
use sandboxd_core::plan::READABLE_AGENT as READABLE;
use std::sync::Arc;

use sandboxd_contracts::{ByteStream, EngineError, RemoteAgent, RemoteAgents};
use sandboxd_ssh::{SshError, SshSession};
use tokio::sync::{OnceCell, mpsc};
use tracing::{info, warn};

/// The agent binary sandboxes get, and its SHA-256 (hex).
#[derive(Debug, Clone)]
pub(crate) struct AgentBinary {
    pub bytes: Arc<Vec<u8>>,
    pub sha256: String,
}

impl AgentBinary {
    pub fn read(path: &std::path::Path) -> std::io::Result<Self> {
        use sha2::Digest as _;
        let bytes = std::fs::read(path)?;
        let digest = sha2::Sha256::digest(&bytes);
        Ok(Self {
            sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
            bytes: Arc::new(bytes),
        })
    }
}

/// The key file's mode: readable by the sandbox's user whatever its uid (the
/// directory's parent keeps it from the server's other users).
const KEY_MODE: u32 = 0o444;

/// Connections waiting to be taken per sandbox.
const BACKLOG: usize = 16;

#[derive(Debug)]
pub(crate) struct SshAgents {
    pub session: Arc<SshSession>,
    /// Where sandboxd keeps its files on the server (a plain absolute path, checked).
    pub remote_dir: String,
    pub binary: AgentBinary,
    /// The binary's path on the server, once it is there.
    installed: OnceCell<String>,
}

fn unreachable(error: SshError) -> EngineError {
    EngineError::Unreachable(Box::new(error))
}

/// A file operation on the server that failed.
fn file_failed(what: &str, error: SshError) -> EngineError {
    match error {
        SshError::Refused { what: why } => EngineError::Rejected {
            status: 500,
            message: format!("{what} failed on the server: {why}"),
        },
        other => unreachable(other),
    }
}

/// A command that failed on the server.
fn failed(what: &str, output: &sandboxd_ssh::CommandOutput) -> EngineError {
    EngineError::Rejected {
        status: 500,
        message: format!(
            "{what} failed on the server: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    }
}

impl SshAgents {
    pub fn new(session: Arc<SshSession>, remote_dir: String, binary: AgentBinary) -> Self {
        Self {
            session,
            remote_dir,
            binary,
            installed: OnceCell::new(),
        }
    }

    fn dir(&self, sandbox_id: &str) -> String {
        format!("{}/agents/{sandbox_id}", self.remote_dir)
    }

    /// The agent binary's path on the server, uploading it when it is not there (or not
    /// what it should be).
    async fn install(&self) -> Result<String, EngineError> {
        let digest = &self.binary.sha256;
        let path = format!("{}/bin/sandboxd-agent-{}", self.remote_dir, &digest[..16]);
        let present = self
            .session
            .run(
                &format!("test -f '{path}{READABLE}' && sha256sum '{path}' 2>/dev/null"),
                b"",
                256,
            )
            .await
            .map_err(unreachable)?;
        if String::from_utf8_lossy(&present.stdout).starts_with(digest.as_str()) {
            return Ok(path);
        }
        let bin = format!("{}/bin", self.remote_dir);
        // A name of its own: another sandboxd may be uploading the same agent.
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| EngineError::Engine(Box::new(e)))?;
        let tmp = format!("{path}.{:016x}.tmp", u64::from_le_bytes(nonce));
        let uploaded = self
            .session
            .run(
                &format!("umask 077 && mkdir -p '{bin}' && cat > '{tmp}' && sha256sum '{tmp}'"),
                &self.binary.bytes,
                256,
            )
            .await
            .map_err(unreachable)?;
        if !String::from_utf8_lossy(&uploaded.stdout).starts_with(digest.as_str()) {
            return Err(failed("the agent's upload (checksum)", &uploaded));
        }
        // Execute-only, as locally: the kernel starts it non-dumpable. Beside it the
        // readable copy that gVisor's sandboxes run.
        let placed = self
            .session
            .run(
                &format!(
                    "cp '{tmp}' '{tmp}.r' && chmod 0555 '{tmp}.r' && mv -f '{tmp}.r' '{path}{READABLE}' \
                     && chmod 0111 '{tmp}' && mv -f '{tmp}' '{path}'"
                ),
                b"",
                256,
            )
            .await
            .map_err(unreachable)?;
        if placed.exit_code != Some(0) {
            return Err(failed("placing the agent", &placed));
        }
        info!(%path, "agent binary installed on the server");
        Ok(path)
    }
}

#[async_trait::async_trait]
impl RemoteAgents for SshAgents {
    async fn listen(
        &self,
        sandbox_id: &str,
        key: Option<&str>,
    ) -> Result<RemoteAgent, EngineError> {
        let binary = self
            .installed
            .get_or_try_init(|| self.install())
            .await?
            .clone();
        let dir = self.dir(sandbox_id);
        // The directory, and the key when the container is to be created: requests on
        // the connection's file channel, no process on the server.
        self.session
            .make_dir(&format!("{}/agents", self.remote_dir), 0o700)
            .await
            .map_err(|e| file_failed("making the agents' directory", e))?;
        self.session
            .make_dir(&dir, 0o755)
            .await
            .map_err(|e| file_failed("making the agent's directory", e))?;
        if let Some(key) = key {
            self.offer_key(sandbox_id, key).await?;
        }
        // The sandbox user (any uid) must be able to connect; only this sandbox sees it.
        let mut forwarded = self
            .session
            .forward(&format!("{dir}/agent.sock"), Some(0o666))
            .await
            .map_err(unreachable)?;
        let (tx, connections) = mpsc::channel::<Box<dyn ByteStream>>(BACKLOG);
        tokio::spawn(async move {
            while let Some(stream) = forwarded.recv().await {
                if tx.send(Box::new(stream)).await.is_err() {
                    break;
                }
            }
        });
        Ok(RemoteAgent {
            binary,
            run_dir: dir,
            connections,
        })
    }

    async fn offer_key(&self, sandbox_id: &str, key: &str) -> Result<(), EngineError> {
        let file = format!("{}/{AGENT_KEY_FILE}", self.dir(sandbox_id));
        self.session
            .put_file(&file, key.as_bytes(), KEY_MODE)
            .await
            .map_err(|e| file_failed("offering the agent its key", e))
    }

    async fn withdraw_key(&self, sandbox_id: &str) -> Result<(), EngineError> {
        let file = format!("{}/{AGENT_KEY_FILE}", self.dir(sandbox_id));
        self.session
            .remove_file(&file)
            .await
            .map_err(|e| file_failed("taking the agent's key file away", e))
    }

    async fn release(&self, sandbox_id: &str) {
        let dir = self.dir(sandbox_id);
        self.session.unforward(&format!("{dir}/agent.sock")).await;
        if let Err(error) = self
            .session
            .run(&format!("rm -rf '{dir}'"), b"", 1024)
            .await
        {
            warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "the agent's directory on the server was not removed");
        }
    }
}
