//! Why an engine operation failed, classified for the service's decisions, the cause
//! kept as the source whatever the engine's own error type.

/// A failed engine operation.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{what} not found")]
    NotFound { what: &'static str },
    #[error("image {image} is not present and could not be pulled: {reason}")]
    Pull { image: String, reason: String },
    #[error("engine rejected the request: {message}")]
    Rejected { status: u16, message: String },
    /// The engine answered a container's start with a failure: its runtime could not
    /// start it (the image or the settings, or the runtime itself). The message is the
    /// engine's, for the log.
    #[error("the container could not start: {message}")]
    CannotStart { status: u16, message: String },
    /// sandboxd's own check refused what the engine was asked (the text is sandboxd's,
    /// never the engine's: it may be shown to the caller).
    #[error("{0}")]
    Unsafe(String),
    /// The container exists but is not running (its main process ended).
    #[error("the container is not running")]
    NotRunning,
    #[error("engine call {call} timed out")]
    Timeout { call: &'static str },
    /// The way to a remote server's engine is down (a cut or refused SSH connection);
    /// the cause is the source.
    #[error("the server's engine cannot be reached")]
    Unreachable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Any other failure of the engine or of the way to it; the cause is the source.
    #[error("engine call failed")]
    Engine(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadFileError {
    #[error("file not found")]
    NotFound,
    #[error("path is not a regular file")]
    NotRegularFile,
    #[error("file exceeds the {0} byte limit")]
    TooLarge(usize),
    #[error("engine returned a malformed archive")]
    Malformed,
    #[error(transparent)]
    Engine(#[from] EngineError),
}
