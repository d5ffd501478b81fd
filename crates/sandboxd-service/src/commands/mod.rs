//! Commands in a sandbox: one-shot and streamed exec, background processes, code
//! contexts, terminals, and the short-lived tokens of exec WebSockets. A part of the
//! sandbox service: it resolves the sandbox and its channel through the service and
//! runs everything over that channel.
//!
//! Every sandbox made with `envVars` (cold or claimed from a pool) gets them per command
//! (`Service::command_env`): they are never in its container's configuration.

mod contexts;
mod exec;
mod launched;
mod processes;
mod terminal;
mod tokens;

pub use contexts::{ContextRun, NewContext, RunOutput};
pub use launched::Launch;

use sandboxd_core::model::{Principal, Sandbox};

use crate::Service;

/// The `sandbox.exec`, `sandbox.process*`, `sandbox.context*` and terminal operations.
#[derive(Debug, Clone)]
pub struct Commands {
    service: Service,
}

impl Commands {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }
}

impl Commands {
    /// Notes a process started in the background: its command line, masked and cut,
    /// and its id (its end is not written here).
    pub(crate) async fn note_started(
        &self,
        caller: &Principal,
        sandbox: &Sandbox,
        command_and_cwd: (&str, &str),
        process_id: &str,
        env: &[(String, String)],
    ) {
        self.service
            .activity()
            .command(sandbox, caller, "process", command_and_cwd, env)
            .await
            .started(process_id);
    }
}
