//! `sandbox.exec`: `sh -c` in the sandbox with capped output and a timeout.

use sandboxd_core::access::SandboxNeed;
use std::time::{Duration, Instant};

/// A command running longer than this refreshes the sandbox's activity again at its end.
const LONG_COMMAND: Duration = Duration::from_secs(1);

use sandboxd_core::api::ExecResult;
use sandboxd_core::limits::MAX_EXEC_OUTPUT_BYTES;
use sandboxd_core::model::{NotRunning, Principal, SandboxStatus};
use sandboxd_core::oom;
use sandboxd_core::validate::ExecCommand;
use sandboxd_ports::{EngineError, ExecOutcome, ExecSpec, OutputTx};
use tracing::{debug, info, warn};

use super::{Resource, ServedBy, Service, ServiceError, now_ms};
use sandboxd_agent_host::{AgentError, AgentExec};

impl Service {
    /// Runs a command in a running sandbox of the caller's.
    pub async fn exec(
        &self,
        caller: &Principal,
        cmd: ExecCommand,
    ) -> Result<ExecResult, ServiceError> {
        self.exec_streaming(caller, cmd, None).await
    }

    /// Runs a command, sending its output to `stream` as it arrives when given. Dropping
    /// the returned future kills the command.
    pub async fn exec_streaming(
        &self,
        caller: &Principal,
        cmd: ExecCommand,
        stream: Option<OutputTx>,
    ) -> Result<ExecResult, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        let container = sandbox.running_container()?.to_owned();
        let started = Instant::now();
        let command_hash = self
            .audits_exec()
            .then(|| self.store().secrets().command_hash(&cmd.cmd));
        let spec = AgentExec {
            argv: vec!["sh".into(), "-c".into(), cmd.cmd],
            cwd: Some(cmd.cwd.unwrap_or_else(|| sandbox.workdir.clone())),
            env: self.command_env(&sandbox, cmd.env).await?,
            timeout: Duration::from_millis(cmd.timeout_ms),
            max_output: MAX_EXEC_OUTPUT_BYTES,
            stream,
        };
        let outcome = self
            .while_touching(
                &sandbox.sandbox_id,
                self.run(&sandbox.sandbox_id, &container, spec),
            )
            .await?;
        if outcome.timed_out {
            info!(
                sandbox_id = %sandbox.sandbox_id,
                container_restarted = outcome.container_restarted,
                "command timed out and was killed"
            );
        }
        if outcome.container_killed && !outcome.container_restarted {
            warn!(sandbox_id = %sandbox.sandbox_id, "container could not be restarted after a timeout kill");
            self.store()
                .set_status(&sandbox.sandbox_id, SandboxStatus::Error)
                .await?;
        }
        // A long command is activity too: the sandbox expires counting from its end.
        if started.elapsed() > LONG_COMMAND {
            self.store().touch(&sandbox.sandbox_id, now_ms()).await?;
        }
        if let Some(hash) = command_hash {
            self.record(
                &sandbox.organization_id,
                Some(caller),
                "sandbox.exec",
                Resource::sandbox(&sandbox),
                serde_json::json!({
                    "commandHash": hash,
                    "exitCode": outcome.exit_code,
                    "timedOut": outcome.timed_out,
                    "durationMs": started.elapsed().as_millis() as u64,
                }),
            )
            .await;
        }
        let oom_killed = outcome.exit_code == oom::SIGKILL_EXIT
            && !outcome.timed_out
            && self.oom_killed(&sandbox.sandbox_id, &container).await;
        Ok(ExecResult {
            oom_killed,
            stdout: String::from_utf8_lossy(&outcome.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&outcome.stderr).into_owned(),
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            truncated: outcome.truncated,
        })
    }
}

impl Service {
    /// Whether the sandbox's cgroup counted an OOM kill since the last look.
    async fn oom_killed(&self, sandbox_id: &str, container: &str) -> bool {
        let mut argv = vec!["cat".to_owned()];
        argv.extend(oom::OOM_COUNTER_FILES.map(String::from));
        let spec = AgentExec {
            argv,
            cwd: Some("/".into()),
            env: Vec::new(),
            timeout: Duration::from_secs(10),
            max_output: 4096,
            stream: None,
        };
        let Ok(outcome) = self.run(sandbox_id, container, spec).await else {
            return false;
        };
        let Some(now) = oom::oom_kills(&String::from_utf8_lossy(&outcome.stdout)) else {
            return false;
        };
        let mut seen = self
            .inner
            .oom_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let before = seen.insert(sandbox_id.to_owned(), now).unwrap_or(0);
        oom::killed_since(before, now)
    }

    /// Runs a command through the sandbox's agent when it is connected, else through the
    /// engine's exec. A timed-out command whose kill did not take gets the container
    /// restarted, whichever path ran it.
    pub(crate) async fn run(
        &self,
        sandbox_id: &str,
        container: &str,
        spec: AgentExec,
    ) -> Result<ExecOutcome, ServiceError> {
        if let Some(agent) = self.agents().connection(sandbox_id) {
            match agent.exec(spec.clone()).await {
                Ok((outcome, true)) => {
                    self.served(sandbox_id, ServedBy::Agent);
                    return Ok(outcome);
                }
                Ok((mut outcome, false)) => {
                    self.served(sandbox_id, ServedBy::Agent);
                    outcome.kill_incomplete = true;
                    self.restart_after_failed_kill(container, &mut outcome)
                        .await;
                    return Ok(outcome);
                }
                Err(AgentError::NotSent) => {}
                Err(error) => {
                    return Err(self
                        .unavailable(sandbox_id, ServiceError::Agent(error))
                        .await);
                }
            }
        }
        self.served(sandbox_id, ServedBy::Engine);
        let engine_spec = ExecSpec {
            argv: spec.argv,
            cwd: spec.cwd,
            env: spec
                .env
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            user: None,
            timeout: spec.timeout,
            max_output: spec.max_output,
            stream: spec.stream,
        };
        match self.engine_exec(container, engine_spec.clone()).await {
            Err(EngineError::NotRunning) => {
                self.restart_stopped(sandbox_id, container).await?;
                Ok(self.engine_exec(container, engine_spec).await?)
            }
            outcome => Ok(outcome?),
        }
    }

    /// Runs a command through the engine's exec, with the same policy as the agent path
    /// for a kill that did not take.
    pub(crate) async fn engine_exec(
        &self,
        container: &str,
        spec: ExecSpec,
    ) -> Result<ExecOutcome, EngineError> {
        let mut outcome = self.engine().exec(container, spec).await?;
        if outcome.kill_incomplete {
            self.restart_after_failed_kill(container, &mut outcome)
                .await;
        }
        Ok(outcome)
    }

    /// The one policy for a timed-out command whose kill did not take (whichever path ran
    /// it): the container is killed and started again, which ends every process and keeps
    /// the files.
    async fn restart_after_failed_kill(&self, container: &str, outcome: &mut ExecOutcome) {
        warn!(
            container,
            "the command's kill did not end it; restarting the container"
        );
        outcome.container_killed = self.engine().kill_container(container).await.is_ok();
        if outcome.container_killed {
            outcome.container_restarted = self.engine().start_container(container).await.is_ok();
        }
    }

    /// The sandbox's container stopped under it (its main process ended): it is started
    /// again, files kept, and the agent reconnects; when the engine cannot start it, the
    /// row becomes `error` and the caller gets a precondition failure naming that state,
    /// never the engine's text.
    pub(super) async fn restart_stopped(
        &self,
        sandbox_id: &str,
        container: &str,
    ) -> Result<(), ServiceError> {
        warn!(%sandbox_id, "the sandbox's container had stopped; starting it again");
        match self.engine().start_container(container).await {
            Ok(()) => Ok(()),
            Err(error) => {
                warn!(%sandbox_id, %error, "cannot start the stopped container; the sandbox is in error");
                self.store()
                    .set_status(sandbox_id, SandboxStatus::Error)
                    .await?;
                Err(ServiceError::NotRunning(NotRunning(SandboxStatus::Error)))
            }
        }
    }

    /// The error to answer when the agent went away during an operation: a sandbox
    /// killed (or gone wrong) meanwhile by another request is named in its state (a 412),
    /// not reported as the server being unavailable.
    pub(super) async fn unavailable(&self, sandbox_id: &str, error: ServiceError) -> ServiceError {
        match self.store().sandbox(sandbox_id).await {
            Ok(Some(row)) if row.status != SandboxStatus::Running => {
                ServiceError::NotRunning(NotRunning(row.status))
            }
            Ok(None) => ServiceError::NotFound("sandbox"),
            _ => error,
        }
    }

    /// `result`, with an unavailable agent explained as [`Self::unavailable`] does.
    pub(super) async fn settled<T>(
        &self,
        sandbox_id: &str,
        result: Result<T, ServiceError>,
    ) -> Result<T, ServiceError> {
        match result {
            Err(error @ ServiceError::Agent(_)) => Err(self.unavailable(sandbox_id, error).await),
            other => other,
        }
    }

    pub(crate) fn served(&self, sandbox_id: &str, path: ServedBy) {
        self.count(path);
        debug!(%sandbox_id, path = path.as_str(), "served");
    }
}
