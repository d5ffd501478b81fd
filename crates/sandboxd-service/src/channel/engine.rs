//! The engine channel: a running container reached through its engine's exec and
//! archive API, everything done as the sandbox user (`tar`, `find`, `ls`, `mkdir` and
//! `mv` run as that user, archives are unpacked as that user); here, what it is and the
//! commands it runs itself. Its operations of the contract are `contract.rs`'s.

use std::sync::Arc;

use sandboxd_contracts::{ChannelError, Engine, EngineError, ExecOutcome, ExecSpec, RefusalKind};

use crate::internal_exec;
use crate::recovery::restart_after_failed_kill;

/// One container on one engine, and the user its files belong to.
#[derive(Debug, Clone)]
pub(crate) struct EngineChannel {
    pub(super) engine: Arc<dyn Engine>,
    pub(super) container: String,
    pub(super) owner: (u32, u32),
    /// The agents' hub and the sandbox's id: a restarted container's agent is offered
    /// its key.
    agent: (Arc<dyn sandboxd_contracts::AgentHost>, String),
}

impl EngineChannel {
    pub(crate) fn new(
        engine: Arc<dyn Engine>,
        container: &str,
        owner: (u32, u32),
        agent: (Arc<dyn sandboxd_contracts::AgentHost>, String),
    ) -> Self {
        Self {
            engine,
            container: container.to_owned(),
            owner,
            agent,
        }
    }

    pub(crate) fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    pub(crate) fn container(&self) -> &str {
        &self.container
    }

    /// The `uid:gid` files written for the sandbox belong to.
    pub(crate) fn owner(&self) -> (u32, u32) {
        self.owner
    }

    /// The sandbox user as the engine's exec takes it.
    pub(super) fn user(&self) -> String {
        format!("{}:{}", self.owner.0, self.owner.1)
    }

    /// Runs one of sandboxd's own commands as the sandbox user; a timed-out one whose
    /// kill did not take gets the container restarted, as any command does.
    pub(super) async fn internal(
        &self,
        argv: Vec<String>,
        max_output: usize,
    ) -> Result<ExecOutcome, EngineError> {
        let spec = ExecSpec {
            user: Some(self.user()),
            ..internal_exec(argv, max_output)
        };
        let mut outcome = self.engine.exec(&self.container, spec).await?;
        if outcome.kill_incomplete {
            let (agents, sandbox_id) = &self.agent;
            restart_after_failed_kill(
                &self.engine,
                agents.as_ref(),
                sandbox_id,
                &self.container,
                &mut outcome,
            )
            .await;
        }
        Ok(outcome)
    }

    /// `argv` as the sandbox user: `Ok` when it exited 0, else its first line of error.
    pub(super) async fn as_user(&self, argv: &[&str]) -> Result<(), String> {
        let argv = argv.iter().map(|a| (*a).to_owned()).collect();
        match self.internal(argv, 4096).await {
            Ok(out) if out.exit_code == 0 => Ok(()),
            Ok(out) => Err(first_line(&out.stderr)),
            Err(error) => Err(error.to_string()),
        }
    }

    /// `mkdir -p` as the sandbox user, so it can only create what the user may.
    pub(super) async fn make_dirs(&self, dir: &str) -> Result<(), ChannelError> {
        let argv = vec!["mkdir".into(), "-p".into(), "--".into(), dir.into()];
        let mkdir = self.internal(argv, 4096).await?;
        if mkdir.exit_code == 0 {
            return Ok(());
        }
        let reason = first_line(&mkdir.stderr);
        Err(ChannelError::refused(
            RefusalKind::Invalid,
            if reason.is_empty() {
                format!("unable to create directory {dir}")
            } else {
                reason
            },
        ))
    }
}

pub(super) fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}
