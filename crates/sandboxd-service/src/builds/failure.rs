//! Why a build failed: the step and what happened, and an engine's failure at a step
//! told as what failed (its cause goes to the log).

use sandboxd_contracts::EngineError;
use tracing::warn;

/// Why a build failed: the step and what happened.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) step: i64,
    pub(super) message: String,
}

pub(super) fn failed(step: i64, message: impl Into<String>) -> Failure {
    Failure {
        step,
        message: message.into(),
    }
}

/// An engine failure at a step: the log gets its cause, the user what failed.
pub(super) fn engine_failed(build_id: &str, step: i64, what: &str, error: &EngineError) -> Failure {
    warn!(%build_id, step, error = %sandboxd_core::error::chain(error), "a build step failed in the engine");
    match error {
        EngineError::Rejected { message, .. } => failed(step, format!("{what}: {message}")),
        _ => failed(step, format!("{what}: the engine failed")),
    }
}
