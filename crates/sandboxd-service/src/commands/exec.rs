//! `sandbox.exec`: `sh -c` in the sandbox with capped output and a timeout.
//!
//! The sandbox's OOM-kill count is read after a command ends by SIGKILL.

use sandboxd_core::access::SandboxNeed;
use std::time::{Duration, Instant};

/// A command running longer than this refreshes the sandbox's activity again at its end.
const LONG_COMMAND: Duration = Duration::from_secs(1);

use sandboxd_contracts::{ExecSpec, OutputTx};
use sandboxd_core::api::ExecResult;
use sandboxd_core::limits::MAX_EXEC_OUTPUT_BYTES;
use sandboxd_core::model::{Principal, SandboxStatus};
use sandboxd_core::oom;
use sandboxd_core::validate::ExecCommand;
use tracing::{info, warn};

use super::Commands;
use crate::executor::Executor;
use crate::{Resource, ServiceError, now_ms};
use sandboxd_core::activity::OutputSummary;

impl Commands {
    /// Runs a command in a running sandbox of the caller's.
    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id))]
    pub async fn exec(
        &self,
        caller: &Principal,
        cmd: ExecCommand,
    ) -> Result<ExecResult, ServiceError> {
        self.exec_streaming(caller, cmd, None).await
    }

    /// Runs a command, sending its output to `stream` as it arrives when given. Dropping
    /// the returned future kills the command.
    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id))]
    pub async fn exec_streaming(
        &self,
        caller: &Principal,
        cmd: ExecCommand,
        stream: Option<OutputTx>,
    ) -> Result<ExecResult, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        let executor = self.service.executor(&sandbox).await?;
        let started = Instant::now();
        let command_hash = self
            .service
            .audits_exec()
            .then(|| self.service.store().secrets().command_hash(&cmd.cmd));
        let action = if stream.is_some() { "stream" } else { "exec" };
        let pending = self
            .service
            .activity()
            .command(
                &sandbox,
                caller,
                action,
                (&cmd.cmd, cmd.cwd.as_deref().unwrap_or(&sandbox.workdir)),
                &cmd.env,
            )
            .await;
        let spec = ExecSpec {
            argv: vec!["sh".into(), "-c".into(), cmd.cmd],
            cwd: Some(cmd.cwd.unwrap_or_else(|| sandbox.workdir.clone())),
            env: self.service.command_env(&sandbox, cmd.env).await?,
            user: None,
            timeout: Duration::from_millis(cmd.timeout_ms),
            max_output: MAX_EXEC_OUTPUT_BYTES,
            stream,
        };
        let outcome = match self
            .service
            .while_touching(&sandbox.sandbox_id, executor.exec(spec))
            .await
        {
            Ok(outcome) => outcome,
            Err(error) => {
                pending.fail(&error);
                return Err(error);
            }
        };
        if outcome.timed_out {
            info!(
                sandbox_id = %sandbox.sandbox_id,
                container_restarted = outcome.container_restarted,
                "command timed out and was killed"
            );
        }
        if outcome.container_killed && !outcome.container_restarted {
            warn!(sandbox_id = %sandbox.sandbox_id, "container could not be restarted after a timeout kill");
            self.service
                .store()
                .set_status(&sandbox.sandbox_id, SandboxStatus::Error)
                .await?;
        }
        // A long command is activity too: the sandbox expires counting from its end.
        if started.elapsed() > LONG_COMMAND {
            self.service
                .store()
                .touch(&sandbox.sandbox_id, now_ms())
                .await?;
        }
        if let Some(hash) = command_hash {
            self.service
                .access()
                .record(
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
            && self.oom_killed(&executor, &sandbox.sandbox_id).await;
        pending.finish(|command, masker| {
            command.exit_code = Some(outcome.exit_code);
            command.timed_out = outcome.timed_out;
            command.oom_killed = oom_killed;
            command.stdout = Some(OutputSummary::of(
                &outcome.stdout,
                outcome.stdout.len() as u64,
                masker,
            ));
            command.stderr = Some(OutputSummary::of(
                &outcome.stderr,
                outcome.stderr.len() as u64,
                masker,
            ));
        });
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

impl Commands {
    /// Whether the sandbox's cgroup counted an OOM kill since the last look.
    async fn oom_killed(&self, executor: &Executor<'_>, sandbox_id: &str) -> bool {
        let mut argv = vec!["cat".to_owned()];
        argv.extend(oom::OOM_COUNTER_FILES.map(String::from));
        let spec = ExecSpec {
            argv,
            cwd: Some("/".into()),
            env: Vec::new(),
            user: None,
            timeout: Duration::from_secs(10),
            max_output: 4096,
            stream: None,
        };
        let Ok(outcome) = executor.exec(spec).await else {
            return false;
        };
        let Some(now) = oom::oom_kills(&String::from_utf8_lossy(&outcome.stdout)) else {
            return false;
        };
        let mut seen = self
            .service
            .inner
            .oom_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let before = seen.insert(sandbox_id.to_owned(), now).unwrap_or(0);
        oom::killed_since(before, now)
    }
}
