//! What a command run in a sandbox is, and what it did: the values both ways of running
//! one (the engine's exec and the agent) speak, so that the service depends on neither.

use std::time::Duration;

/// Which stream a chunk of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// Where chunks of output go as they arrive, for streaming.
pub type OutputTx = tokio::sync::mpsc::Sender<(OutputStream, bytes::Bytes)>;

/// One command to run.
#[derive(Debug, Clone)]
pub struct ExecSpec {
    /// The argv; no shell unless the caller puts one there.
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    /// Variables added to the container's environment, as name and value.
    pub env: Vec<(String, String)>,
    /// Run as this user instead of the container's (the engine's exec; the agent runs
    /// everything as the sandbox user).
    pub user: Option<String>,
    pub timeout: Duration,
    /// Each stream is kept up to this many bytes; the rest is drained and dropped.
    pub max_output: usize,
    /// Every chunk is also sent here as it arrives (uncapped), when given.
    pub stream: Option<OutputTx>,
}

/// What a command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i64,
    pub timed_out: bool,
    pub truncated: bool,
    /// The command timed out and its kill could not run or missed processes (the pids
    /// limit exhausted, no `grep`): processes may be left. What to do about it is the
    /// caller's policy (sandboxd restarts the container).
    pub kill_incomplete: bool,
    /// The kill did not take, so the container was killed.
    pub container_killed: bool,
    /// ... and started again: every process is gone, the files are kept.
    pub container_restarted: bool,
}
