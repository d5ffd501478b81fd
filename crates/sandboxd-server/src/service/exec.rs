//! `sandbox.exec`: `sh -c` in the sandbox with capped output and a timeout.

use std::time::Duration;

use sandboxd_core::api::ExecResult;
use sandboxd_core::limits::MAX_EXEC_OUTPUT_BYTES;
use sandboxd_core::model::{Principal, SandboxStatus};
use sandboxd_core::validate::ExecCommand;
use sandboxd_docker::ExecSpec;
use tracing::{info, warn};

use super::{Service, ServiceError, now_ms};

impl Service {
    /// Runs a command in a running sandbox of the caller's.
    pub async fn exec(
        &self,
        caller: &Principal,
        cmd: ExecCommand,
    ) -> Result<ExecResult, ServiceError> {
        let sandbox = self.sandbox_for(caller, &cmd.sandbox_id).await?;
        let container = sandbox.running_container()?.to_owned();
        self.store().touch(&sandbox.sandbox_id, now_ms()).await?;
        let spec = ExecSpec {
            argv: vec!["sh".into(), "-c".into(), cmd.cmd],
            cwd: Some(cmd.cwd.unwrap_or_else(|| sandbox.workdir.clone())),
            env: cmd
                .env
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            user: None,
            timeout: Duration::from_millis(cmd.timeout_ms),
            max_output: MAX_EXEC_OUTPUT_BYTES,
        };
        let outcome = self.engine().exec(&container, spec).await?;
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
        self.store().touch(&sandbox.sandbox_id, now_ms()).await?;
        Ok(ExecResult {
            stdout: String::from_utf8_lossy(&outcome.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&outcome.stderr).into_owned(),
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            truncated: outcome.truncated,
        })
    }
}
