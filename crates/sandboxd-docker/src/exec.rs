//! Commands in a sandbox through the engine's exec: bounded output, and a timeout that
//! kills the whole process tree by marker, reporting a kill that could not run or missed
//! processes (what to do then is the service's policy).
//!
//! A kill that did not take is reported as `kill_incomplete`; restarting the container is
//! the service's decision.

use std::time::Duration;

use bollard::container::LogOutput;
use bollard::exec::StartExecResults;
use bollard::models::ExecConfig;
use futures_util::StreamExt;
use sandboxd_core::exec_kill;
use sandboxd_core::limits::{KILL_GRACE_MS, TIMEOUT_EXIT_CODE};
use sandboxd_core::plan::AGENT_KEY_VAR;
use tracing::warn;

pub use sandboxd_contracts::{ExecOutcome, ExecSpec, OutputStream, OutputTx};

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify, fault, status_of};

/// An attached exec's output, as bollard streams it.
pub(crate) type ExecOutput = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
>;
/// An attached exec's input.
pub(crate) type ExecInput = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// Kills a command's processes by marker if its exec is dropped before it ended (the
/// client went away).
struct KillOnDrop {
    engine: DockerEngine,
    container: String,
    marker: String,
    armed: bool,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let engine = self.engine.clone();
        let container = std::mem::take(&mut self.container);
        let marker = std::mem::take(&mut self.marker);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                engine
                    .run_quietly(&container, exec_kill::kill_argv(&marker))
                    .await;
            });
        }
    }
}

/// A capped buffer that records whether anything was cut.
struct Sink<'a> {
    buf: &'a mut Vec<u8>,
    max: usize,
    truncated: &'a mut bool,
}

impl Sink<'_> {
    fn push(&mut self, bytes: &[u8]) {
        let room = self.max.saturating_sub(self.buf.len());
        let take = room.min(bytes.len());
        self.buf.extend_from_slice(&bytes[..take]);
        if take < bytes.len() {
            *self.truncated = true;
        }
    }
}

fn random_marker() -> String {
    let mut bytes = [0u8; 16];
    // A marker only has to be unique among the running commands of one sandbox; if the
    // OS random source fails, the time still makes it so.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes = nanos.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl DockerEngine {
    /// Runs a command and collects its output.
    pub(crate) async fn exec(
        &self,
        container: &str,
        spec: ExecSpec,
    ) -> Result<ExecOutcome, EngineError> {
        let marker = random_marker();
        let mut env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        env.push(exec_kill::marker_entry(&marker));
        // The container's environment holds the agent key: commands never see it.
        env.push(format!("{AGENT_KEY_VAR}="));
        let config = ExecConfig {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            cmd: Some(spec.argv.clone()),
            working_dir: spec.cwd.clone(),
            env: Some(env),
            user: spec.user.clone(),
            ..Default::default()
        };
        let (exec_id, mut output, _) = self.start_attached(container, config).await?;

        let mut guard = KillOnDrop {
            engine: self.clone(),
            container: container.to_owned(),
            marker: marker.clone(),
            armed: true,
        };
        let mut outcome = ExecOutcome::default();
        let mut truncated_out = false;
        let mut truncated_err = false;
        {
            let mut stdout = Sink {
                buf: &mut outcome.stdout,
                max: spec.max_output,
                truncated: &mut truncated_out,
            };
            let mut stderr = Sink {
                buf: &mut outcome.stderr,
                max: spec.max_output,
                truncated: &mut truncated_err,
            };
            let stream = spec.stream.clone();
            let drain = async {
                while let Some(item) = output.next().await {
                    match item {
                        Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                            stdout.push(&message);
                            if let Some(tx) = &stream {
                                let _ = tx.send((OutputStream::Stdout, message)).await;
                            }
                        }
                        Ok(LogOutput::StdErr { message }) => {
                            stderr.push(&message);
                            if let Some(tx) = &stream {
                                let _ = tx.send((OutputStream::Stderr, message)).await;
                            }
                        }
                        Ok(LogOutput::StdIn { .. }) => {}
                        Err(error) => {
                            warn!(error = %sandboxd_core::error::chain(&error), "exec output stream failed");
                            break;
                        }
                    }
                }
            };
            tokio::pin!(drain);
            if tokio::time::timeout(spec.timeout, &mut drain)
                .await
                .is_err()
            {
                outcome.timed_out = true;
                let killed = self
                    .run_quietly(container, exec_kill::kill_argv(&marker))
                    .await
                    == Some(0);
                let grace = Duration::from_millis(KILL_GRACE_MS);
                if !killed || tokio::time::timeout(grace, &mut drain).await.is_err() {
                    outcome.kill_incomplete = true;
                }
            }
        }
        guard.armed = false;
        // Its channel goes before the question of its exit code needs one.
        drop(output);
        outcome.truncated = truncated_out || truncated_err;
        outcome.exit_code = if outcome.timed_out {
            TIMEOUT_EXIT_CODE
        } else {
            self.exit_code(&exec_id).await?
        };
        Ok(outcome)
    }

    /// Creates and starts an exec attached to its streams: its id, its output and its
    /// input.
    pub(crate) async fn start_attached(
        &self,
        container: &str,
        config: ExecConfig,
    ) -> Result<(String, ExecOutput, ExecInput), EngineError> {
        let created = bounded("create exec", self.docker.create_exec(container, config))
            .await?
            .map_err(|e| match status_of(&e) {
                // The engine's answer for an exec in a stopped container.
                Some(409) => EngineError::NotRunning,
                _ => classify("container", e),
            })?;
        let started = bounded("start exec", self.docker.start_exec(&created.id, None))
            .await?
            .map_err(fault)?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(EngineError::Rejected {
                status: 500,
                message: "exec started detached".into(),
            });
        };
        Ok((created.id, output, input))
    }

    /// The exit code of a finished exec; 1 when the engine reports none.
    pub(crate) async fn exit_code(&self, exec_id: &str) -> Result<i64, EngineError> {
        // The output stream can close a moment before the engine records the exit.
        for _ in 0..50 {
            let info = bounded("inspect exec", self.docker.inspect_exec(exec_id))
                .await?
                .map_err(fault)?;
            if info.running != Some(true) {
                return Ok(info.exit_code.unwrap_or(1));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(1)
    }

    /// Runs a short command to its end and returns its exit code; `None` when it could
    /// not start, failed, or did not finish within the kill grace period.
    pub(crate) async fn run_quietly(&self, container: &str, argv: Vec<String>) -> Option<i64> {
        let config = ExecConfig {
            cmd: Some(argv),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            env: Some(vec![format!("{AGENT_KEY_VAR}=")]),
            ..Default::default()
        };
        let grace = Duration::from_millis(KILL_GRACE_MS);
        let run = async {
            let created = self.docker.create_exec(container, config).await.ok()?;
            if let StartExecResults::Attached { mut output, .. } =
                self.docker.start_exec(&created.id, None).await.ok()?
            {
                while let Some(Ok(_)) = output.next().await {}
            }
            self.exit_code(&created.id).await.ok()
        };
        tokio::time::timeout(grace, run).await.ok().flatten()
    }
}
