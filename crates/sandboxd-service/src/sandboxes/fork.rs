//! `sandbox.fork`: a fresh snapshot of a sandbox, and sandboxes made from it, each with
//! its own id, limits and timeout (the source's unless the fork says otherwise). Files
//! are carried; processes and memory too with `memory` (every fork continues the
//! source's processes from the snapshot's instant, `memory.rs`); the source's
//! environment variables and egress credentials are not given to new commands. All or
//! nothing: when one cannot be made, those made go, with the snapshot.
//!
//! The creates run four at a time, with the source's limits, network, egress list and
//! labels, and none of its environment, egress credentials or volumes.

use futures_util::StreamExt as _;
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::model::{Principal, Sandbox};
use sandboxd_core::snapshots::Snapshot;
use sandboxd_core::validate::{CreateSandbox, Fork, ImageChoice, TakeSnapshot};
use tracing::warn;

use super::Sandboxes;
use crate::ServiceError;

/// How many forks are made at once.
const FORKS_AT_ONCE: usize = 4;

/// `text`, cut to at most `max` characters.
fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

impl Sandboxes {
    /// Forks a running or paused sandbox of the caller's into `cmd.count` sandboxes. It
    /// goes on to its end (all made, or none) when the caller goes away.
    pub async fn fork(
        &self,
        caller: &Principal,
        cmd: Fork,
    ) -> Result<(Snapshot, Vec<Sandbox>), ServiceError> {
        let (this, caller) = (self.clone(), caller.clone());
        tokio::spawn(async move { this.make_forks(&caller, cmd).await })
            .await
            .map_err(|_| ServiceError::Unavailable("the fork failed; retry".into()))?
    }

    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id, count = cmd.count))]
    async fn make_forks(
        &self,
        caller: &Principal,
        cmd: Fork,
    ) -> Result<(Snapshot, Vec<Sandbox>), ServiceError> {
        let source = self
            .service
            .access()
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        let snapshot = self
            .take_snapshot(
                caller,
                TakeSnapshot {
                    sandbox_id: source.sandbox_id.clone(),
                    name: Some(cut(&format!("fork of {}", source.name), 64)),
                    memory: cmd.memory,
                },
            )
            .await?;
        let create = |n: usize| CreateSandbox {
            environment_id: source.environment_id.clone(),
            name: Some(format!("{}-fork-{n}", cut(&source.name, 55))),
            image: ImageChoice {
                template: None,
                image: None,
                snapshot: Some(snapshot.snapshot_id.clone()),
                template_build: None,
            },
            server_id: None,
            cpu: source.cpu,
            memory_mb: source.memory_mb,
            pids_limit: source.pids_limit,
            timeout_ms: cmd.timeout_ms.unwrap_or(source.timeout_ms),
            network_mode: source.network_mode,
            egress: source.egress.clone(),
            egress_credentials: Vec::new(),
            env_vars: cmd.env_vars.clone(),
            workdir: None,
            labels: source.labels.clone(),
            auto_pause: source.auto_pause,
            fixed_timeout: source.fixed_timeout,
            paused_timeout_ms: source.paused_timeout_ms,
            // A fork gets the files, not the volumes (two sandboxes writing one volume
            // is for their creator to ask for).
            volumes: Vec::new(),
            // A fork runs as strongly isolated as its source.
            isolation: sandboxd_core::plan::isolation_of(source.runtime.as_deref()),
        };
        let outcomes: Vec<Result<Sandbox, ServiceError>> = futures_util::stream::iter(
            (1..=cmd.count)
                .map(|n| self.make(caller, create(n), super::create::EgressList::Copied)),
        )
        .buffered(FORKS_AT_ONCE)
        .collect()
        .await;
        let failure = outcomes.iter().position(Result::is_err);
        let mut made = Vec::new();
        let mut error = None;
        for outcome in outcomes {
            match outcome {
                Ok(sandbox) => made.push(sandbox),
                Err(e) if error.is_none() => error = Some(e),
                Err(_) => {}
            }
        }
        let Some(error) = error else {
            return Ok((snapshot, made));
        };
        warn!(failed = failure.unwrap_or_default() + 1, error = %sandboxd_core::error::chain(&error), "a fork could not be made; the others and the snapshot go");
        for sandbox in made {
            let id = sandbox.sandbox_id.clone();
            if let Err(cleanup) = self.kill(sandbox).await {
                warn!(sandbox_id = %id, error = %cleanup, "could not kill a fork");
            }
        }
        if let Err(cleanup) = self.discard_snapshot(&snapshot).await {
            warn!(snapshot_id = %snapshot.snapshot_id, error = %cleanup, "could not remove a fork's snapshot");
        }
        Err(error)
    }
}
