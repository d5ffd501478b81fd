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
