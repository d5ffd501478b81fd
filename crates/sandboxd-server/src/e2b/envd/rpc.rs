//! Connect RPC over axum for the daemon's services: a unary call's JSON in and out, a
//! streaming call's one request envelope in and envelopes out (flushed as they are
//! made, always closed by the end-of-stream envelope), and errors with Connect's codes.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sandboxd_core::e2b::connect::{self, Code};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::error::ApiError;

/// A failed call: a Connect code and what to tell the caller; the failure behind it,
/// when there is one, goes to the request log.
#[derive(Debug)]
pub(super) struct RpcError {
    pub code: Code,
    pub message: String,
    cause: Option<ApiError>,
}

impl RpcError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            cause: None,
        }
    }

    /// The error as a stream's end carries it.
    pub fn wire(&self) -> connect::Error {
        connect::Error::new(self.code, self.message.clone())
    }

    /// The HTTP status of sandboxd's own failure behind it, else the code's.
    pub fn status(&self) -> StatusCode {
        match &self.cause {
            Some(cause) => cause.status_and_body().0,
            None => StatusCode::from_u16(self.code.status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }

    /// The answer with `status`, and the failure for the request log.
    pub fn respond(
        self,
        status: StatusCode,
        body: Vec<u8>,
        content_type: &'static str,
    ) -> Response {
        let mut response = (status, [(header::CONTENT_TYPE, content_type)], body).into_response();
        if let Some(cause) = self.cause {
            let (parts, _) = cause.into_response().into_parts();
            response.extensions_mut().extend(parts.extensions);
        }
        response
    }
}

impl<E: Into<ApiError>> From<E> for RpcError {
    fn from(error: E) -> Self {
        let error = error.into();
        let (status, body) = error.status_and_body();
        Self {
            code: Code::of_status(status.as_u16()),
            message: body.message,
            cause: Some(error),
        }
    }
}

/// A unary call's error: Connect's status for the code, `{code, message}`.
impl IntoResponse for RpcError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.wire()).unwrap_or_default();
        self.respond(status, body, connect::UNARY_JSON)
    }
}

/// A unary call's request: JSON (an empty body is the empty message).
pub(super) fn unary_request<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, RpcError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body)
        .map_err(|error| RpcError::new(Code::InvalidArgument, format!("invalid request: {error}")))
}

/// A unary call's answer.
pub(super) fn unary_answer(message: &impl Serialize) -> Response {
    let body = serde_json::to_vec(message).unwrap_or_else(|_| b"{}".to_vec());
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, connect::UNARY_JSON)],
        body,
    )
        .into_response()
}

/// A streaming call's request: its one envelope's JSON.
pub(super) fn stream_request<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, RpcError> {
    let message = connect::only_message(body)
        .map_err(|error| RpcError::new(Code::InvalidArgument, error.to_string()))?;
    unary_request(&Bytes::copy_from_slice(message))
}

/// How long a call may take, from `Connect-Timeout-Ms` (none when absent or 0).
pub(super) fn timeout(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get("connect-timeout-ms")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// How often a quiet stream sends a keepalive, from `Keepalive-Ping-Interval` (seconds;
/// 1 s to 10 min).
pub(super) fn keepalive(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get("keepalive-ping-interval")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .filter(|seconds| *seconds > 0)
        .map(|seconds| Duration::from_secs(seconds.clamp(1, 600)))
}

/// Envelopes a stream's writer sends at most before the client takes them.
const STREAM_QUEUE: usize = 16;

/// The writing end of a streaming answer. Dropped, the stream ends: with the
/// end-of-stream envelope when [`StreamOut::end`] was called, else cut.
pub(super) struct StreamOut(mpsc::Sender<Bytes>);

impl StreamOut {
    /// Sends a message; `false` once the client is gone.
    pub async fn send(&self, message: &impl Serialize) -> bool {
        self.0.send(connect::message(message).into()).await.is_ok()
    }

    /// Whether the client is gone.
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// Once the client is gone.
    pub async fn closed(&self) {
        self.0.closed().await;
    }

    /// Ends the stream, with an error if any.
    pub async fn end(self, error: Option<RpcError>) {
        let _ = self
            .0
            .send(connect::end(error.map(|e| e.wire())).into())
            .await;
    }
}

/// A streaming answer and its writer.
pub(super) fn stream_answer() -> (StreamOut, Response) {
    let (tx, rx) = mpsc::channel::<Bytes>(STREAM_QUEUE);
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, std::convert::Infallible>(bytes), rx))
    });
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(connect::STREAM_JSON),
    );
    (StreamOut(tx), response)
}

/// A streaming call's error before anything was sent: 200 and the end-of-stream
/// envelope with the error, as Connect streams fail.
pub(super) fn stream_error(error: RpcError) -> Response {
    let body = connect::end(Some(error.wire()));
    error.respond(StatusCode::OK, body, connect::STREAM_JSON)
}
