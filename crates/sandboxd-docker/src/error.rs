//! Engine errors as the adapter classifies them (the error types are the contracts').
//!
//! `classify` sorts the engine's failures into the contracts' `EngineError` by status
//! code: 404, other 4xx, the rest kept as the source. A failure whose cause is the SSH
//! connection, an answer past its bound, or an engine that is not there (its socket
//! missing or refusing, the connection cut) is `Unreachable`.

pub use sandboxd_contracts::EngineError;

/// The engine's error, classified by status code: 404 as not found, other client errors
/// as rejected requests, the rest kept as engine faults.
pub(crate) fn classify(what: &'static str, error: bollard::errors::Error) -> EngineError {
    match status_of(&error) {
        Some(404) => EngineError::NotFound { what },
        Some(status @ 400..=499) => EngineError::Rejected {
            status,
            message: message_of(&error),
        },
        _ => fault(error),
    }
}

/// An engine failure kept as it is, as the source; one whose cause is the SSH
/// connection to a remote server is the server being unreachable.
pub(crate) fn fault(error: bollard::errors::Error) -> EngineError {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    while let Some(current) = cause {
        if current.is::<sandboxd_ssh::SshError>() || is_over_bound(current) || is_down(current) {
            return EngineError::Unreachable(Box::new(error));
        }
        cause = current.source();
    }
    EngineError::Engine(Box::new(error))
}

/// Whether the engine is not there to answer: its socket missing or refusing, or the
/// connection to it cut (an engine stopped or restarting). A retryable outage, not a
/// fault of the request or of sandboxd.
fn is_down(error: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind as K;
    if let Some(legacy) = error.downcast_ref::<hyper_util::client::legacy::Error>()
        && legacy.is_connect()
    {
        return true;
    }
    error.downcast_ref::<std::io::Error>().is_some_and(|io| {
        matches!(
            io.kind(),
            K::NotFound
                | K::ConnectionRefused
                | K::ConnectionReset
                | K::ConnectionAborted
                | K::BrokenPipe
        )
    })
}

/// Whether a remote engine's answer was cut for passing its bound (an `io::Error`
/// hides the error it wraps from `source`).
fn is_over_bound(error: &(dyn std::error::Error + 'static)) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::get_ref)
        .is_some_and(|inner| inner.is::<crate::answer_bounds::OverBound>())
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
