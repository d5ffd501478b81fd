//! An MCP tool's call on a sandbox whose agent another replica holds: passed to that
//! replica as the REST procedure the tool stands for, with the caller's credentials and
//! this replica's mark, as the middleware passes REST requests on. MCP sessions stay
//! where they were opened; only the call travels.

use axum::http::{HeaderMap, HeaderValue, Request, header};
use sandboxd_core::api::ErrorBody;
use sandboxd_core::api::procedures::{Method, Procedure};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::debug;

use super::{counted, send, signed};
use crate::auth::API_KEY_HEADER;
use crate::service::Service;

/// What the holder answered: the procedure's result, or its error body (as the holder
/// wrote it, so the tool shows the caller the holder's code and message).
pub type HolderAnswer<T> = Result<T, ErrorBody>;

/// The holder's answer to `procedure` on `sandbox_id` with `arguments`; `None` when the
/// call is served here: the procedure is not forwarded, this replica holds the agent, no
/// replica does, or the holder cannot be reached (then this replica answers as REST
/// would: through the engine, or 503).
pub async fn through_holder<T: DeserializeOwned>(
    service: &Service,
    credentials: &HeaderMap,
    procedure: &Procedure,
    sandbox_id: &str,
    arguments: &impl Serialize,
) -> Option<HolderAnswer<T>> {
    if !procedure.forwarded {
        return None;
    }
    let holder = service.replicas().agent_holder(sandbox_id).await?;
    let me = service.store().replica_id().to_owned();
    let (target, body, digest) = match procedure.method {
        Method::Get => {
            let query = serde_urlencoded::to_string(arguments).ok()?;
            let target = format!("{}?{query}", procedure.path);
            (target, Vec::new(), signed::STREAMED.to_owned())
        }
        Method::Post => {
            let body = serde_json::to_vec(arguments).ok()?;
            let digest = signed::body_digest(&body);
            (procedure.path.to_owned(), body, digest)
        }
    };
    let method = match procedure.method {
        Method::Get => axum::http::Method::GET,
        Method::Post => axum::http::Method::POST,
    };
    let (mut parts, ()) = Request::builder()
        .method(method)
        .uri(target)
        .body(())
        .ok()?
        .into_parts();
    for name in [API_KEY_HEADER, header::AUTHORIZATION.as_str()] {
        if let Some(value) = credentials.get(name) {
            parts.headers.insert(name, value.clone());
        }
    }
    if procedure.method == Method::Post {
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    match send(service, &parts, (body.into(), &digest), &holder, &me).await {
        Ok(answer) => Some(read(answer).await),
        Err(error) if error.is_connect() || error.is_timeout() => {
            debug!(error = %sandboxd_core::error::chain(&error), %holder, "cannot reach a replica; serving the tool here");
            counted("unreachable");
            None
        }
        Err(error) => {
            debug!(error = %sandboxd_core::error::chain(&error), %holder, "a forwarded tool call failed");
            counted("unreachable");
            Some(Err(holder_gone()))
        }
    }
}

/// The most of a holder's answer read: the largest a procedure can answer (a 10 MiB
/// file as JSON text, every byte escaped) with room to spare. A peer that sends more is
/// treated as gone.
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

async fn read<T: DeserializeOwned>(answer: reqwest::Response) -> HolderAnswer<T> {
    let status = answer.status();
    let Some(bytes) = capped(answer, MAX_ANSWER_BYTES).await else {
        return Err(holder_gone());
    };
    if status.is_success() {
        return serde_json::from_slice(&bytes).map_err(|_| holder_gone());
    }
    Err(error_body(&bytes).unwrap_or_else(holder_gone))
}

/// The answer's body, or `None` when it fails or runs past `cap` bytes.
async fn capped(mut answer: reqwest::Response, cap: usize) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    while let Some(chunk) = answer.chunk().await.ok()? {
        if bytes.len() + chunk.len() > cap {
            return None;
        }
        bytes.extend_from_slice(&chunk);
    }
    Some(bytes)
}

/// The holder's error body, when it wrote one.
fn error_body(bytes: &[u8]) -> Option<ErrorBody> {
    serde_json::from_slice(bytes).ok()
}

fn holder_gone() -> ErrorBody {
    ErrorBody {
        code: "SERVICE_UNAVAILABLE".into(),
        message: "the replica that holds this sandbox's agent did not answer; retry".into(),
        issues: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_keeps_the_holders_code_and_message() {
        let body = error_body(br#"{"code":"NOT_FOUND","message":"process not found"}"#);
        let body = body.unwrap();
        assert_eq!(
            (body.code.as_str(), body.message.as_str()),
            ("NOT_FOUND", "process not found")
        );
        assert!(error_body(b"<html>bad gateway</html>").is_none());
        assert!(error_body(br#"{"code":1}"#).is_none());
    }

    #[tokio::test]
    async fn an_answer_past_the_cap_is_not_read_on() {
        let answer = |body: &'static str| reqwest::Response::from(axum::http::Response::new(body));
        assert_eq!(
            capped(answer("0123456789"), 10).await.as_deref(),
            Some(&b"0123456789"[..])
        );
        assert_eq!(capped(answer("0123456789x"), 10).await, None);
        let read: HolderAnswer<serde_json::Value> = read(answer("[1, 2, 3]")).await;
        assert_eq!(read.ok(), Some(serde_json::json!([1, 2, 3])));
    }
}
