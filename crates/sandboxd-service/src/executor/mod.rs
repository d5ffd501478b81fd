//! How one sandbox's operations reach it. The path is chosen once per operation: the
//! sandbox's agent when it is connected, else the engine's exec and archive API. An
//! agent connection that went away before the request left falls back to the engine;
//! one that fails after is the operation's failure. The policy for a timed-out command
//! whose kill did not take, and for a container found stopped, lives here too, the
//! same whichever path ran the command (`recovery.rs`).

mod files;
mod recovery;

use sandboxd_agent_host::{AgentConn, AgentError, AgentExec};
use sandboxd_agent_protocol::DirEntry;
use sandboxd_core::model::Sandbox;
use sandboxd_core::plan;
use std::sync::Arc;

use sandboxd_ports::{Engine, EngineError, ExecOutcome, ExecSpec};

use super::{ServedBy, Service, ServiceError};

/// A running sandbox's way in, for one operation.
pub(crate) struct Executor<'s> {
    service: &'s Service,
    sandbox_id: &'s str,
    container: &'s str,
    /// The engine of the sandbox's server.
    engine: Arc<dyn Engine>,
    /// The owner of files written through the engine (the agent writes as the user).
    owner: (u32, u32),
    agent: Option<AgentConn>,
}

/// A directory as either path lists it.
pub(crate) enum Listing {
    /// The agent's entries, with full metadata.
    Agent(Vec<DirEntry>),
    /// `find -printf` (or `ls`) output, parsed by the caller.
    Find(Vec<sandboxd_core::api::FileEntry>),
}

impl Executor<'_> {
    /// The engine of the sandbox's server.
    pub(crate) fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    pub(crate) fn container(&self) -> &str {
        self.container
    }

    /// The `uid:gid` files written for the sandbox belong to.
    pub(crate) fn owner(&self) -> (u32, u32) {
        self.owner
    }

    /// The sandbox user as the engine's exec takes it: what the engine path does, it
    /// does as this user.
    pub(crate) fn user(&self) -> String {
        format!("{}:{}", self.owner.0, self.owner.1)
    }

    /// `spec` run as the sandbox user.
    pub(crate) fn as_user(&self, spec: ExecSpec) -> ExecSpec {
        ExecSpec {
            user: Some(self.user()),
            ..spec
        }
    }
}

impl Service {
    /// The way into `sandbox` (which must be running) for one operation.
    pub(crate) async fn executor<'s>(
        &'s self,
        sandbox: &'s Sandbox,
    ) -> Result<Executor<'s>, ServiceError> {
        let container = sandbox.running_container()?;
        let engine = self.engine_of(sandbox.server_id.as_deref()).await?;
        Ok(Executor {
            service: self,
            sandbox_id: &sandbox.sandbox_id,
            container,
            engine,
            owner: sandbox
                .user
                .as_deref()
                .and_then(plan::parse_user)
                .unwrap_or((0, 0)),
            agent: self.agents().connection(&sandbox.sandbox_id),
        })
    }
}

impl Executor<'_> {
    /// Whether the agent serves this operation.
    pub(crate) fn agent(&self) -> Option<&AgentConn> {
        self.agent.as_ref()
    }

    /// Runs a command. A timed-out command whose kill did not take gets the container
    /// restarted; a container found stopped is started again first.
    pub(crate) async fn exec(&self, spec: AgentExec) -> Result<ExecOutcome, ServiceError> {
        if let Some(agent) = &self.agent {
            match agent.exec(spec.clone()).await {
                Ok((outcome, true)) => {
                    self.served(ServedBy::Agent);
                    return Ok(outcome);
                }
                Ok((mut outcome, false)) => {
                    self.served(ServedBy::Agent);
                    outcome.kill_incomplete = true;
                    self.service
                        .restart_after_failed_kill(&self.engine, self.container, &mut outcome)
                        .await;
                    return Ok(outcome);
                }
                Err(AgentError::NotSent) => {}
                Err(error) => return Err(self.agent_failed(ServiceError::Agent(error)).await),
            }
        }
        self.served(ServedBy::Engine);
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
        let (service, engine) = (self.service, &self.engine);
        match service
            .engine_exec(engine, self.container, engine_spec.clone())
            .await
        {
            Err(EngineError::NotRunning) => {
                service
                    .restart_stopped(engine, self.sandbox_id, self.container)
                    .await?;
                Ok(service
                    .engine_exec(engine, self.container, engine_spec)
                    .await?)
            }
            Err(EngineError::NotFound { what: "container" }) => {
                Err(service.container_lost(self.sandbox_id).await)
            }
            outcome => Ok(outcome?),
        }
    }

    /// The agent, when it is connected and speaks the streamed transfers.
    pub(crate) fn transfer_agent(&self) -> Option<&AgentConn> {
        self.agent.as_ref().filter(|agent| agent.speaks_transfers())
    }

    /// An agent failure explained as [`Service::unavailable`] does.
    pub(crate) async fn agent_failure(&self, error: AgentError) -> ServiceError {
        self.agent_failed(ServiceError::Agent(error)).await
    }

    pub(crate) fn served(&self, path: ServedBy) {
        self.service.served(self.sandbox_id, path);
    }

    async fn agent_failed(&self, error: ServiceError) -> ServiceError {
        self.service.unavailable(self.sandbox_id, error).await
    }
}
