//! The service's decisions, driven through its ports: a recording engine stands for the
//! engine and a recording agent for the sandboxes' agents (so each test scripts what
//! they answer and reads what the service asked of them), the store is a real SQLite
//! store in a temporary directory. The agent is disconnected unless a test connects it
//! (then operations take its channel, as in production). No engine is reached: the
//! real engine's and the real agent's behaviour is the end-to-end suite's
//! (`sandboxd-server/tests/e2e`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent;
mod channel_double;
mod connector_double;
mod create;
mod engine_double;
mod exec;
mod kill;
mod placement;
mod pools;
mod ports;
mod races;
mod reconcile;
mod revival;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sandboxd_agent_host::AgentHub;
use sandboxd_core::model::{Principal, Sandbox};
use sandboxd_core::templates::Templates;
use sandboxd_service::{Options, Service};
use sandboxd_store::Store;
use serde_json::json;
use tempfile::TempDir;

use channel_double::{RecordingAgent, RecordingAgents};
use engine_double::RecordingEngine;

const KEY: &str = "sbx_decisions_owner_key_0123456789abcdefghij";
const IMAGE: &str = "example/base:1";

/// What a command that timed out reports; `kill_took`: its kill ended every process.
fn timed_out(kill_took: bool) -> sandboxd_contracts::ExecOutcome {
    sandboxd_contracts::ExecOutcome {
        exit_code: 137,
        timed_out: true,
        kill_incomplete: !kill_took,
        ..Default::default()
    }
}

/// A service on a recording engine, with its owner.
struct World {
    service: Service,
    engine: Arc<RecordingEngine>,
    agent: Arc<RecordingAgent>,
    owner: Principal,
    environment_id: String,
    _data: TempDir,
}

impl World {
    async fn new() -> Self {
        Self::with_options(Options::default()).await
    }

    /// A world whose service runs with `options` (its agent channels are the world's).
    async fn with_options(options: Options) -> Self {
        let data = tempfile::tempdir().unwrap();
        let store = Store::open_with_key(data.path(), Some(&[7; 32]))
            .await
            .unwrap();
        let boot = store.bootstrap(Some(KEY)).await.unwrap().unwrap();
        let owner = store.authenticate(KEY).await.unwrap().unwrap();
        let instance_id = store.instance_id().await.unwrap();
        let engine = Arc::new(RecordingEngine::default());
        let agents = Arc::new(AgentHub::new(
            data.path().join("agents"),
            None,
            Duration::from_secs(5),
        ));
        let templates = Templates::with_images(&BTreeMap::from([("base".into(), IMAGE.into())]));
        let agent = Arc::new(RecordingAgent::default());
        let service = Service::new(
            store,
            engine.clone(),
            agents,
            templates,
            instance_id,
            Options {
                agent_channels: Some(Arc::new(RecordingAgents(agent.clone()))),
                ..options
            },
        );
        Self {
            service,
            engine,
            agent,
            owner,
            environment_id: boot.environment_id,
            _data: data,
        }
    }

    /// Creates a running sandbox of the base template, then forgets the calls that took.
    async fn running(&self) -> Sandbox {
        let sandbox = self.create(json!({})).await.unwrap();
        self.engine.clear();
        sandbox
    }

    /// `sandbox.create` with `extra` fields over the environment.
    async fn create(
        &self,
        extra: serde_json::Value,
    ) -> Result<Sandbox, sandboxd_service::ServiceError> {
        let mut request = json!({"environmentId": self.environment_id, "template": "base"});
        request
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let request = serde_json::from_value(request).unwrap();
        let cmd = sandboxd_core::validate::create_sandbox(request).unwrap();
        self.service.sandboxes().create(&self.owner, cmd).await
    }

    /// `sandbox.exec` of `cmd` with a timeout.
    async fn exec(
        &self,
        sandbox: &Sandbox,
        cmd: &str,
    ) -> Result<sandboxd_core::api::ExecResult, sandboxd_service::ServiceError> {
        let request = serde_json::from_value(json!({
            "sandboxId": sandbox.sandbox_id,
            "cmd": cmd,
            "timeoutMs": 1000,
        }))
        .unwrap();
        let cmd = sandboxd_core::validate::exec(request).unwrap();
        self.service.commands().exec(&self.owner, cmd).await
    }

    /// A running sandbox whose agent is connected, the calls that made it forgotten.
    async fn running_with_agent(&self) -> Sandbox {
        self.agent.script.lock().unwrap().connected = true;
        let sandbox = self.running().await;
        self.agent.clear();
        sandbox
    }

    /// Changes what the agent answers from now on.
    fn script_agent(&self, change: impl FnOnce(&mut channel_double::AgentScript)) {
        change(&mut self.agent.script.lock().unwrap());
    }

    /// Changes what the engine answers from now on.
    fn script(&self, change: impl FnOnce(&mut engine_double::Script)) {
        change(&mut self.engine.script.lock().unwrap());
    }

    /// Kills a sandbox as its owner, and waits for its container's removal.
    async fn kill(&self, sandbox: &Sandbox) -> Sandbox {
        let killed = self
            .service
            .sandboxes()
            .kill_for(&self.owner, &sandbox.sandbox_id)
            .await
            .unwrap();
        self.service.finish_removals(Duration::from_secs(5)).await;
        killed
    }

    /// The sandbox's row as stored now.
    async fn row(&self, sandbox: &Sandbox) -> Sandbox {
        self.service
            .store()
            .sandbox(&sandbox.sandbox_id)
            .await
            .unwrap()
            .unwrap()
    }
}
