//! Errors of the service layer: typed, with their causes kept. Only the API layer turns
//! them into status codes.
//!
//! `ServiceError` keeps its causes: an agent failure is the `AgentError` itself, an
//! engine refusal the `EngineError`. The server maps it to HTTP and logs internal causes
//! there, once.

use sandboxd_contracts::{ConnectError, EngineError};
use sandboxd_core::error::Invalid;
use sandboxd_core::model::{NotRunning, SandboxStatus};
use sandboxd_store::StoreError;

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The caller's organization owns it, but the caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    NotRunning(#[from] NotRunning),
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    Conflict(String),
    /// The request was well-formed but the sandbox or engine refused it (a path that
    /// cannot be created, an image that cannot be pulled).
    #[error("{0}")]
    Refused(String),
    /// The organization's quota does not allow it (until it frees something).
    #[error(transparent)]
    QuotaExceeded(#[from] sandboxd_core::quotas::QuotaExceeded),
    /// Something the operation needs is not there (the agent, for what only it does).
    #[error("{0}")]
    Unavailable(String),
    /// The request brings no credential that lets it in (a preview without a key, a
    /// session or a valid link).
    #[error("{0}")]
    Unauthenticated(String),
    /// Nothing in the sandbox accepts connections on the port asked for.
    #[error("{0}")]
    PortUnreachable(String),
    /// The sandbox's channel (its agent) failed the operation after the request left: it
    /// went away, did not answer in time or broke the protocol, or its consumer
    /// stalled. Retrying is safe.
    #[error("{0}")]
    Agent(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The engine refused what the request asked (an image it could not pull, a
    /// container it would not create). The client is told what, never the engine's own
    /// text (which can describe the operator's network); the cause goes to the log.
    #[error("{}", refused_message(.0))]
    EngineRefused(#[source] EngineError),
    /// A remote server (its SSH daemon or its engine) cannot be reached; retrying when
    /// it is back is safe. Its sandboxes are kept.
    #[error("the sandbox's engine or server is unreachable; retry when it is back")]
    ServerUnreachable(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("store failure")]
    Store(#[source] StoreError),
    #[error("engine failure")]
    Engine(#[source] EngineError),
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict(message) => Self::Conflict(message),
            StoreError::Unknown(what) => Self::Refused(format!("unknown {what}")),
            StoreError::Quota(exceeded) => Self::QuotaExceeded(exceeded),
            other => Self::Store(other),
        }
    }
}

impl From<EngineError> for ServiceError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::Pull { .. }
            | EngineError::Rejected { .. }
            | EngineError::CannotStart { .. } => Self::EngineRefused(error),
            EngineError::NotRunning => Self::NotRunning(NotRunning(SandboxStatus::Error)),
            EngineError::Unsafe(message) => Self::Refused(message),
            EngineError::NotFound { what: "volume" } => Self::Refused(
                "a volume of the sandbox is missing from its server's engine (removed there by hand?)"
                    .into(),
            ),
            EngineError::Unreachable(cause) => Self::ServerUnreachable(cause),
            other => Self::Engine(other),
        }
    }
}

impl From<ConnectError> for ServiceError {
    fn from(error: ConnectError) -> Self {
        match error {
            ConnectError::HostKey(message) => Invalid::one("hostKey", message).into(),
            ConnectError::PrivateKey(message) => Invalid::one("privateKey", message).into(),
            ConnectError::Unreachable(cause) => Self::ServerUnreachable(cause),
            refused @ ConnectError::Refused(_) => Self::ServerUnreachable(Box::new(refused)),
            ConnectError::NotAllowed(message) => Self::Forbidden(message),
            ConnectError::Engine(engine) => engine.into(),
        }
    }
}

/// What a client is told of an engine refusal.
fn refused_message(error: &EngineError) -> String {
    match error {
        EngineError::Pull { image, .. } => {
            format!("image {image} is not present and could not be pulled")
        }
        EngineError::CannotStart { .. } => {
            "the sandbox's container could not start: its runtime refused the image or the settings (the server's log holds the runtime's words)".to_owned()
        }
        _ => "the engine refused the request".to_owned(),
    }
}
