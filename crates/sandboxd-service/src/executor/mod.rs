//! How one sandbox's operations reach it: through a [`SandboxChannel`], its agent's when
//! it is connected, else the engine's ([`EngineChannel`]). The choice is made here once
//! per operation (`through!`): a request the agent's channel did not send goes to the
//! engine's; one that fails after it left is the operation's failure. What to do with
//! a timed-out command whose kill did not take, or a container found stopped, is the
//! same whichever channel ran it (`crate::recovery`).
//!
//! `Service::executor(&sandbox)` holds two channels of the sandbox channel contract: the
//! agent's and the engine it runs on, from one lookup (`Fleet::reach`; the agent's channel
//! comes from `AgentChannels`: the agent host, or a test's double given in
//! `Options::agent_channels`), and the engine's. It counts which path served each
//! operation, and turns a channel's failure into the operation's (`settled`: refusals by
//! kind, a lost channel as `unavailable` explains it). This file runs commands,
//! `files.rs` writes, reads and lists. Processes, contexts and terminals take the
//! executor's agent channel or answer that they need one.

mod files;

use std::sync::Arc;

use sandboxd_contracts::{
    ChannelError, EngineError, ExecOutcome, ExecSpec, Refusal, RefusalKind, SandboxChannel, Via,
};
use sandboxd_core::model::Sandbox;
use sandboxd_core::plan;

use crate::channel::EngineChannel;
use crate::recovery::restart_after_failed_kill;
use crate::{Service, ServiceError};

/// Why terminals, processes and contexts fail without the sandbox's agent.
pub(crate) const NEEDS_AGENT: &str =
    "this needs the sandbox agent (terminals, processes, contexts), which is not connected";

/// Runs `$call` on the agent's channel when there is one, else (or when the agent's did
/// not send it) on the engine's; counts the path that served it. `$channel` names the
/// channel in `$call`.
macro_rules! through {
    ($executor:expr, |$channel:ident| $call:expr) => {{
        let executor = $executor;
        let mut result = Err(::sandboxd_contracts::ChannelError::NotSent);
        let mut via = ::sandboxd_contracts::Via::Engine;
        if let Some($channel) = executor.agent() {
            via = ::sandboxd_contracts::Via::Agent;
            result = $call.await;
        }
        if matches!(result, Err(::sandboxd_contracts::ChannelError::NotSent)) {
            via = ::sandboxd_contracts::Via::Engine;
            let $channel: &dyn ::sandboxd_contracts::SandboxChannel = executor.engine_channel();
            result = $call.await;
        }
        executor.served(via);
        (via, result)
    }};
}
pub(crate) use through;

/// A running sandbox's way in, for one operation.
pub(crate) struct Executor<'s> {
    service: &'s Service,
    sandbox_id: &'s str,
    engine: EngineChannel,
    agent: Option<Arc<dyn SandboxChannel>>,
}

impl Service {
    /// The way into `sandbox` (which must be running, or paused: it is resumed) for
    /// one operation.
    pub(crate) async fn executor<'s>(
        &'s self,
        sandbox: &'s Sandbox,
    ) -> Result<Executor<'s>, ServiceError> {
        let container = self.wake(sandbox).await?;
        let reach = self.fleet().reach(sandbox).await?;
        let owner = sandbox
            .user
            .as_deref()
            .and_then(plan::parse_user)
            .unwrap_or((0, 0));
        Ok(Executor {
            service: self,
            sandbox_id: &sandbox.sandbox_id,
            engine: EngineChannel::new(
                reach.engine,
                container,
                owner,
                (self.agents().clone(), sandbox.sandbox_id.clone()),
            ),
            agent: reach.agent,
        })
    }
}

impl Executor<'_> {
    /// The agent's channel, when it is connected.
    pub(crate) fn agent(&self) -> Option<&dyn SandboxChannel> {
        self.agent.as_deref()
    }

    /// The agent's channel, for what only the agent does.
    pub(crate) fn agent_only(&self) -> Result<Arc<dyn SandboxChannel>, ServiceError> {
        self.agent
            .clone()
            .ok_or_else(|| ServiceError::Unavailable(NEEDS_AGENT.into()))
    }

    /// The `uid:gid` files written for the sandbox belong to.
    pub(crate) fn owner(&self) -> (u32, u32) {
        self.engine.owner()
    }

    /// The engine's channel: the fallback.
    pub(crate) fn engine_channel(&self) -> &EngineChannel {
        &self.engine
    }

    pub(crate) fn served(&self, path: Via) {
        self.service.served(self.sandbox_id, path);
    }

    /// Runs a command. A timed-out command whose kill did not take gets the container
    /// restarted; a container found stopped is started again first.
    pub(crate) async fn exec(&self, spec: ExecSpec) -> Result<ExecOutcome, ServiceError> {
        let (via, result) = through!(self, |channel| channel.exec(spec.clone()));
        let result = match (via, result) {
            (Via::Engine, Err(ChannelError::Engine(EngineError::NotRunning))) => {
                self.service
                    .restart_found_stopped(
                        self.engine.engine(),
                        self.sandbox_id,
                        self.engine.container(),
                    )
                    .await?;
                self.engine.exec(spec).await
            }
            (
                Via::Engine,
                Err(ChannelError::Engine(EngineError::NotFound { what: "container" })),
            ) => {
                return Err(self.service.container_lost(self.sandbox_id).await);
            }
            (_, result) => result,
        };
        let mut outcome = self
            .settled(result, |refusal| refusal_error(refusal, "file"))
            .await?;
        // A sandbox paused while the command ran could not be reached to kill it: its
        // processes are kept, as a pause promises.
        if outcome.kill_incomplete && !self.service.is_paused(self.sandbox_id).await {
            restart_after_failed_kill(
                self.engine.engine(),
                self.service.agents().as_ref(),
                self.sandbox_id,
                self.engine.container(),
                &mut outcome,
            )
            .await;
        }
        Ok(outcome)
    }

    /// A channel's answer as the operation's: a refusal as `refusal` says, a lost
    /// channel explained as [`Service::unavailable`] does.
    pub(crate) async fn settled<T>(
        &self,
        result: Result<T, ChannelError>,
        refusal: impl FnOnce(Refusal) -> ServiceError,
    ) -> Result<T, ServiceError> {
        match result {
            Ok(value) => Ok(value),
            Err(error) => Err(self.failure(error, refusal).await),
        }
    }

    async fn failure(
        &self,
        error: ChannelError,
        refusal: impl FnOnce(Refusal) -> ServiceError,
    ) -> ServiceError {
        channel_failure(self.service, self.sandbox_id, error, refusal).await
    }
}

impl Service {
    /// A channel's failure as the operation's, a refusal told as it is.
    pub(crate) async fn channel_failed(
        &self,
        sandbox_id: &str,
        error: ChannelError,
    ) -> ServiceError {
        channel_failure(self, sandbox_id, error, |refusal| {
            ServiceError::Refused(refusal.message)
        })
        .await
    }
}

/// A channel's failure as the operation's: a refusal as `refusal` says, a lost channel
/// explained as [`Service::unavailable`] does.
pub(crate) async fn channel_failure(
    service: &Service,
    sandbox_id: &str,
    error: ChannelError,
    refusal: impl FnOnce(Refusal) -> ServiceError,
) -> ServiceError {
    match error {
        ChannelError::Refused(failure) => refusal(failure),
        ChannelError::Lost(cause) => {
            service
                .unavailable(sandbox_id, ServiceError::Agent(cause))
                .await
        }
        ChannelError::NotSent | ChannelError::NeedsAgent => {
            ServiceError::Unavailable(NEEDS_AGENT.into())
        }
        ChannelError::Body(error) => ServiceError::Refused(format!("the upload failed: {error}")),
        ChannelError::Engine(error) => error.into(),
    }
}

/// A refusal as the caller's error, `missing` naming what was not found.
pub(crate) fn refusal_error(failure: Refusal, missing: &'static str) -> ServiceError {
    match failure.kind {
        RefusalKind::NotFound => ServiceError::NotFound(missing),
        RefusalKind::TooLarge => ServiceError::TooLarge(failure.message),
        RefusalKind::NotAFile
        | RefusalKind::NotADirectory
        | RefusalKind::PermissionDenied
        | RefusalKind::Invalid
        | RefusalKind::Io
        | RefusalKind::Limit => ServiceError::Refused(failure.message),
        RefusalKind::Unreachable => ServiceError::PortUnreachable(failure.message),
    }
}
