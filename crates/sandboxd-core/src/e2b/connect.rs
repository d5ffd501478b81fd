//! The Connect protocol as E2B's in-sandbox daemon speaks it with the JSON codec:
//! error codes and their HTTP statuses, the envelopes of streams (one flag byte, a
//! four-byte big-endian length, the message), and the end-of-stream message.

use serde::{Deserialize, Serialize};

/// The content type of a unary call with the JSON codec.
pub const UNARY_JSON: &str = "application/json";
/// The content type of a streaming call with the JSON codec.
pub const STREAM_JSON: &str = "application/connect+json";
/// The flag of an envelope holding a message.
pub const FLAG_MESSAGE: u8 = 0;
/// The flag of the envelope that ends a stream.
pub const FLAG_END: u8 = 2;
/// A request message of at most this many bytes is read.
pub const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// A Connect error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    Canceled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
}

impl Code {
    /// The HTTP status of a unary error with this code.
    pub fn status(self) -> u16 {
        match self {
            Self::Canceled => 499,
            Self::InvalidArgument | Self::FailedPrecondition | Self::OutOfRange => 400,
            Self::Unauthenticated => 401,
            Self::PermissionDenied => 403,
            Self::NotFound => 404,
            Self::AlreadyExists | Self::Aborted => 409,
            Self::ResourceExhausted => 429,
            Self::Unimplemented => 501,
            Self::Unavailable => 503,
            Self::DeadlineExceeded => 504,
            Self::Unknown | Self::Internal | Self::DataLoss => 500,
        }
    }

    /// The code of an HTTP status of sandboxd's own errors.
    pub fn of_status(status: u16) -> Self {
        match status {
            400 | 413 | 422 => Self::InvalidArgument,
            401 => Self::Unauthenticated,
            403 => Self::PermissionDenied,
            404 => Self::NotFound,
            409 => Self::AlreadyExists,
            412 => Self::FailedPrecondition,
            429 => Self::ResourceExhausted,
            501 => Self::Unimplemented,
            502..=503 => Self::Unavailable,
            504 => Self::DeadlineExceeded,
            _ => Self::Internal,
        }
    }
}

/// An error as a unary answer's body and a stream's end carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Error {
    pub code: Code,
    pub message: String,
}

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// The message that ends a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndOfStream {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Error>,
}

/// One envelope: the flag, the length, the message.
pub fn envelope(flag: u8, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(flag);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// The envelope of a message.
pub fn message(value: &impl Serialize) -> Vec<u8> {
    envelope(
        FLAG_MESSAGE,
        &serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec()),
    )
}

/// The envelope that ends a stream, with its error if any.
pub fn end(error: Option<Error>) -> Vec<u8> {
    let body = serde_json::to_vec(&EndOfStream { error }).unwrap_or_else(|_| b"{}".to_vec());
    envelope(FLAG_END, &body)
}

/// Why a request's envelopes could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("a request message is cut short")]
    Truncated,
    #[error("a request message is larger than {MAX_MESSAGE} bytes")]
    TooLarge,
    #[error("a compressed request message is not supported")]
    Compressed,
}

/// One envelope split off: its flag, its message, and the bytes after it.
pub type Split<'a> = (u8, &'a [u8], &'a [u8]);

/// Splits the first envelope off `bytes`: its flag and message, and what follows; `None`
/// when `bytes` holds no whole envelope yet.
pub fn split_envelope(bytes: &[u8]) -> Result<Option<Split<'_>>, EnvelopeError> {
    let Some(header) = bytes.get(..5) else {
        return Ok(None);
    };
    let flag = header[0];
    if flag & 1 != 0 {
        return Err(EnvelopeError::Compressed);
    }
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_MESSAGE {
        return Err(EnvelopeError::TooLarge);
    }
    let Some(message) = bytes.get(5..5 + len) else {
        return Ok(None);
    };
    Ok(Some((flag, message, &bytes[5 + len..])))
}

/// The one message of a request body that must hold exactly one envelope.
pub fn only_message(body: &[u8]) -> Result<&[u8], EnvelopeError> {
    match split_envelope(body)? {
        Some((_, message, [])) => Ok(message),
        Some(_) | None => Err(EnvelopeError::Truncated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_frame_messages_and_the_end() {
        let framed = message(&serde_json::json!({"a": 1}));
        assert_eq!(framed[0], FLAG_MESSAGE);
        assert_eq!(&framed[1..5], &7u32.to_be_bytes());
        assert_eq!(&framed[5..], br#"{"a":1}"#);
        assert_eq!(end(None), [&[2u8, 0, 0, 0, 2][..], b"{}"].concat());
        let failed = end(Some(Error::new(Code::NotFound, "gone")));
        assert_eq!(
            &failed[5..],
            br#"{"error":{"code":"not_found","message":"gone"}}"#
        );
    }

    #[test]
    fn request_envelopes_are_split_and_bounded() {
        let framed = [message(&1), message(&2)].concat();
        let (flag, first, rest) = split_envelope(&framed).unwrap().unwrap();
        assert_eq!((flag, first), (0, &b"1"[..]));
        assert_eq!(only_message(rest).unwrap(), b"2");
        assert_eq!(split_envelope(&framed[..5]).unwrap(), None);
        assert_eq!(only_message(&framed[..5]), Err(EnvelopeError::Truncated));
        assert_eq!(only_message(&framed), Err(EnvelopeError::Truncated));
        let huge = [&[0u8][..], &(MAX_MESSAGE as u32 + 1).to_be_bytes()].concat();
        assert_eq!(split_envelope(&huge), Err(EnvelopeError::TooLarge));
        assert_eq!(
            split_envelope(&[1, 0, 0, 0, 0]),
            Err(EnvelopeError::Compressed)
        );
    }

    #[test]
    fn codes_have_connects_statuses() {
        assert_eq!(Code::NotFound.status(), 404);
        assert_eq!(Code::of_status(404), Code::NotFound);
        assert_eq!(Code::of_status(500), Code::Internal);
        assert_eq!(
            serde_json::to_string(&Code::InvalidArgument).unwrap(),
            "\"invalid_argument\""
        );
    }
}
