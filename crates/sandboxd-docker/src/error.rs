//! Errors of the engine adapter.

/// A failed engine operation. The engine's own error is kept as the source.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{what} not found")]
    NotFound { what: &'static str },
    #[error("image {image} is not present and could not be pulled: {reason}")]
    Pull { image: String, reason: String },
    #[error("engine rejected the request: {message}")]
    Rejected { status: u16, message: String },
    /// The container exists but is not running (its main process ended).
    #[error("the container is not running")]
    NotRunning,
    #[error("engine call {call} timed out")]
    Timeout { call: &'static str },
    #[error("engine call failed")]
    Engine(#[source] bollard::errors::Error),
}

impl EngineError {
    /// The engine's error, classified by status code: 404 as not found, other client
    /// errors as rejected requests, the rest kept as engine faults.
    pub(crate) fn from_engine(what: &'static str, error: bollard::errors::Error) -> Self {
        match status_of(&error) {
            Some(404) => Self::NotFound { what },
            Some(status @ 400..=499) => Self::Rejected {
                status,
                message: message_of(&error),
            },
            _ => Self::Engine(error),
        }
    }
}

/// The status code of an engine error response, if it was one.
pub(crate) fn status_of(error: &bollard::errors::Error) -> Option<u16> {
    match error {
        bollard::errors::Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

pub(crate) fn message_of(error: &bollard::errors::Error) -> String {
    match error {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
