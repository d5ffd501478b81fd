//! Interactive terminals: a shell (or a command) on a terminal inside the sandbox,
//! through its agent.

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::model::Principal;

use super::Commands;
use crate::{ServiceError, now_ms};
use sandboxd_contracts::{Terminal, TerminalSpec};

impl Commands {
    /// Opens a terminal in a running sandbox of the caller's. `cmd` runs through `sh -c`;
    /// without it, `sh` itself is the session. Needs the sandbox's agent.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn open_terminal(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        cmd: Option<String>,
        cols: u16,
        rows: u16,
    ) -> Result<Box<dyn Terminal>, ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let argv = match cmd {
            Some(cmd) => vec!["sh".into(), "-c".into(), cmd],
            None => vec!["sh".into()],
        };
        let spec = TerminalSpec {
            argv,
            cwd: Some(sandbox.workdir.clone()),
            env: self.service.command_env(&sandbox, Vec::new()).await?,
            cols,
            rows,
        };
        match agent.open_terminal(spec).await {
            Ok(terminal) => Ok(terminal),
            Err(error) => Err(self
                .service
                .channel_failed(&sandbox.sandbox_id, error)
                .await),
        }
    }

    /// Refreshes a sandbox's activity (a terminal in use).
    pub async fn touch(&self, sandbox_id: &str) -> Result<(), ServiceError> {
        Ok(self.service.store().touch(sandbox_id, now_ms()).await?)
    }
}
