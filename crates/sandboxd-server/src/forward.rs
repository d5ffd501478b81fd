//! Requests on a sandbox whose agent connection another replica holds, forwarded to that
//! replica: terminals, processes and contexts (which need the agent), commands and
//! files (which would otherwise take the slower engine path), and every call to E2B's
//! in-sandbox daemon. The request goes as it
//! came, with the caller's credentials, and the holder checks them and the caller's
//! access again; its answer comes back as it left. The caller is authenticated here
//! first, before any of its body is read or passed on. A request is forwarded once at
//! most: it carries [`FORWARDED`], a mark only a replica can make (`signed.rs`); a
//! request with a mark that does not hold is refused. When the holder cannot be
//! reached, the request is served here: commands and files through the engine, the
//! rest with 503.
//!
//! Whether to forward is the service's decision (`Replicas::agent_holder`); which paths
//! are forwarded, and where they name the sandbox, is the procedure table's. E2B's daemon
//! calls, named by `E2b-Sandbox-Id`, are admitted first (`e2b::envd::admitted`).
//! `socket.rs` relays WebSockets, `for_tools.rs` MCP tool calls, and `previews` preview
//! requests.

mod for_tools;
mod signed;
mod socket;

pub use for_tools::through_holder;

use std::sync::LazyLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sandboxd_core::api::procedures::{self, Names};
use serde::Deserialize;
use tracing::{debug, warn};

use crate::AppState;
use crate::auth::{same_origin, session_caller, session_from, token_from};
use crate::error::ApiError;
use crate::service::{Service, ServiceError};

/// The header of a forwarded request: the id of the replica that forwarded it.
pub const FORWARDED: &str = "x-sandboxd-forwarded";

/// Counter of forwarded requests (`outcome` = `forwarded` | `unreachable`).
pub const FORWARDS: &str = "sandboxd_forwarded_requests_total";

/// How long reaching the holder may take before the request is served here.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Where a forwardable request names its sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    /// `?sandboxId=` of a plain request; its body (a file) is streamed on.
    Query,
    /// `"sandboxId"` in the JSON body, read before deciding.
    Body,
    /// `?sandboxId=` of a WebSocket.
    Socket,
    /// `E2b-Sandbox-Id` of a call to E2B's daemon; its body is streamed on.
    E2bHeader,
}

/// Whether requests on `path` are forwarded, and where they name the sandbox: the
/// procedure table says, and the WebSockets.
fn named(path: &str) -> Option<Named> {
    if matches!(
        path,
        "/sandbox-pty" | "/sandbox-exec" | "/sandbox-port" | "/sandbox-watch"
    ) {
        return Some(Named::Socket);
    }
    // Every call to E2B's daemon but its health, which the store answers anywhere.
    if path.starts_with("/e2b/envd/") && path != "/e2b/envd/health" {
        return Some(Named::E2bHeader);
    }
    let procedure = procedures::at_path(path).filter(|p| p.forwarded)?;
    match procedure.names {
        Names::InQuery => Some(Named::Query),
        Names::InBody => Some(Named::Body),
        Names::Nothing => None,
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SandboxRef {
    sandbox_id: Option<String>,
}

fn sandbox_in_query(uri: &Uri) -> Option<String> {
    Query::<SandboxRef>::try_from_uri(uri).ok()?.0.sandbox_id
}

fn sandbox_in_header(headers: &HeaderMap) -> Option<String> {
    headers
        .get("e2b-sandbox-id")
        .and_then(|value| value.to_str().ok())
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

fn sandbox_in_body(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<SandboxRef>(body).ok()?.sandbox_id
}

/// Hop-by-hop headers: they describe one connection, not the request.
fn hop_by_hop(name: &header::HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::HOST
        || name == header::TRANSFER_ENCODING
        || name == header::TE
        || name == header::TRAILER
        || name == header::UPGRADE
        || name == header::PROXY_AUTHORIZATION
        || name.as_str() == "keep-alive"
}

fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    headers
        .iter()
        .filter(|(name, _)| !hop_by_hop(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// One client for every forward: connections to the other replicas are kept and reused.
static CLIENT: LazyLock<reqwest::Client> = LazyLock::new(|| {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .unwrap_or_default()
});

fn counted(outcome: &'static str) {
    metrics::counter!(FORWARDS, "outcome" => outcome).increment(1);
}

fn holder_gone() -> Response {
    ApiError::Service(ServiceError::Unavailable(
        "the replica that holds this sandbox's agent did not answer; retry".into(),
    ))
    .into_response()
}

fn forged() -> Response {
    ApiError::Service(ServiceError::Forbidden(
        "a request marked as forwarded must come from a replica".into(),
    ))
    .into_response()
}

/// A request another replica says it forwarded: served here once its mark holds.
async fn arrived(state: &AppState, request: Request, named: Named, next: Next) -> Response {
    let mark = request
        .headers()
        .get(FORWARDED)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let method = request.method().as_str().to_owned();
    let target = target_of(request.uri()).to_owned();
    let (request, body) = if named == Named::Body {
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
            return too_large();
        };
        let digest = signed::body_digest(&bytes);
        (Request::from_parts(parts, Body::from(bytes)), digest)
    } else {
        (request, signed::STREAMED.to_owned())
    };
    let secrets = state.service.store().secrets();
    match signed::verify(
        secrets,
        &mark,
        sandboxd_store::now_ms(),
        &method,
        &target,
        &body,
    ) {
        Ok(_) => next.run(request).await,
        Err(refused) => {
            warn!(?refused, %target, "refused a request with a forged forwarding mark");
            forged()
        }
    }
}

fn target_of(uri: &Uri) -> &str {
    uri.path_and_query().map_or("/", |p| p.as_str())
}

fn too_large() -> Response {
    ApiError::TooLarge("request body is over the limit for this route".into()).into_response()
}

/// Whether the request's credentials name a caller, checked before anything of it is
/// passed on (the holder checks them again, with the caller's access and rate limit).
async fn authenticated(
    state: &AppState,
    parts: &axum::http::request::Parts,
    named: Named,
) -> Result<(), Response> {
    let (headers, uri) = (&parts.headers, &parts.uri);
    if named == Named::E2bHeader {
        return crate::e2b::admitted(state, parts).await;
    }
    let refused = |error: ApiError| error.into_response();
    if let Some(key) = token_from(headers) {
        return match state.service.store().authenticate(key.trim()).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(refused(ApiError::Unauthorized)),
            Err(e) => Err(refused(ApiError::Service(ServiceError::from(e)))),
        };
    }
    if let Some(secret) = session_from(headers) {
        if !same_origin(headers) {
            return Err(refused(ApiError::Service(ServiceError::Forbidden(
                "a request from another origin".into(),
            ))));
        }
        return match session_caller(state, secret).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(refused(ApiError::Unauthorized)),
            Err(error) => Err(refused(error)),
        };
    }
    // A WebSocket's single-use token is spent by the replica that serves it.
    if named == Named::Socket && socket::has_token(uri) {
        return Ok(());
    }
    Err(refused(ApiError::Unauthorized))
}

/// The middleware.
pub async fn forward(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(named) = named(request.uri().path()) else {
        return next.run(request).await;
    };
    if request.headers().contains_key(FORWARDED) {
        return arrived(&state, request, named, next).await;
    }
    if !state.service.replicas().replicated() {
        return next.run(request).await;
    }
    let me = state.service.store().replica_id().to_owned();
    match named {
        Named::Query | Named::Socket | Named::E2bHeader => {
            let sandbox_id = if named == Named::E2bHeader {
                sandbox_in_header(request.headers())
            } else {
                sandbox_in_query(request.uri())
            };
            let Some(sandbox_id) = sandbox_id else {
                return next.run(request).await;
            };
            let Some(holder) = state.service.replicas().agent_holder(&sandbox_id).await else {
                return next.run(request).await;
            };
            let (parts, body) = request.into_parts();
            if let Err(refused) = authenticated(&state, &parts, named).await {
                return refused;
            }
            let request = Request::from_parts(parts, body);
            if named == Named::Socket {
                return socket::forward(&state, request, &holder, &me, next).await;
            }
            let (parts, body) = request.into_parts();
            let body = reqwest::Body::wrap_stream(body.into_data_stream());
            match send(
                &state.service,
                &parts,
                (body, signed::STREAMED),
                &holder,
                &me,
            )
            .await
            {
                Ok(answer) => relay(answer),
                // The body went with the attempt: it cannot be served here instead.
                Err(error) => {
                    debug!(error = %sandboxd_core::error::chain(&error), %holder, "cannot forward a request");
                    counted("unreachable");
                    holder_gone()
                }
            }
        }
        Named::Body => {
            let (parts, body) = request.into_parts();
            if let Err(refused) = authenticated(&state, &parts, named).await {
                return refused;
            }
            let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
                return too_large();
            };
            let holder = match sandbox_in_body(&bytes) {
                Some(sandbox_id) => state.service.replicas().agent_holder(&sandbox_id).await,
                None => None,
            };
            if let Some(holder) = holder {
                let digest = signed::body_digest(&bytes);
                match send(
                    &state.service,
                    &parts,
                    (bytes.clone().into(), &digest),
                    &holder,
                    &me,
                )
                .await
                {
                    Ok(answer) => return relay(answer),
                    Err(error) if error.is_connect() || error.is_timeout() => {
                        debug!(error = %sandboxd_core::error::chain(&error), %holder, "cannot reach a replica; serving here");
                        counted("unreachable");
                    }
                    Err(error) => {
                        debug!(error = %sandboxd_core::error::chain(&error), %holder, "a forwarded request failed");
                        counted("unreachable");
                        return holder_gone();
                    }
                }
            }
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

/// A preview's request, forwarded as it is (its body streamed on, its upgrade joined)
/// by the preview itself, which serves hosts this middleware does not see.
pub(crate) mod previews {
    use super::*;

    /// The mark for a preview's request that this replica sends to the holder.
    pub(crate) fn mark(service: &Service, method: &str, target: &str) -> HeaderValue {
        let mark = mark_for(
            service,
            service.store().replica_id(),
            method,
            target,
            signed::STREAMED,
        );
        HeaderValue::try_from(mark).unwrap_or_else(|_| HeaderValue::from_static("v1"))
    }

    /// Whether a request that says another replica forwarded it carries a mark that
    /// holds; `None` for a request that does not say so.
    pub(crate) fn holds(state: &AppState, request: &Request) -> Option<bool> {
        let mark = request.headers().get(FORWARDED)?;
        let held = signed::verify(
            state.service.store().secrets(),
            mark.to_str().unwrap_or_default(),
            sandboxd_store::now_ms(),
            request.method().as_str(),
            target_of(request.uri()),
            signed::STREAMED,
        );
        if let Err(refused) = held {
            warn!(?refused, target = %target_of(request.uri()), "refused a preview request with a forged forwarding mark");
        }
        Some(held.is_ok())
    }

    /// What answers a forwarded request whose holder cannot be reached, and one whose
    /// mark does not hold.
    pub(crate) fn gone() -> Response {
        counted("unreachable");
        holder_gone()
    }

    pub(crate) fn refused() -> Response {
        forged()
    }

    pub(crate) fn sent() {
        counted("forwarded");
    }

    pub(crate) const CONNECT: Duration = CONNECT_TIMEOUT;
    pub(crate) const HEADER: &str = FORWARDED;
}

/// The mark this replica puts on a request it forwards.
fn mark_for(service: &Service, me: &str, method: &str, target: &str, body: &str) -> String {
    signed::mark(
        service.store().secrets(),
        me,
        sandboxd_store::now_ms(),
        method,
        target,
        body,
    )
}

async fn send(
    service: &Service,
    parts: &axum::http::request::Parts,
    (body, digest): (reqwest::Body, &str),
    holder: &str,
    me: &str,
) -> Result<reqwest::Response, reqwest::Error> {
    let target = target_of(&parts.uri);
    let address = format!("{holder}{target}");
    // The mark covers the target as it goes out: the URL parser may encode what the
    // caller sent raw (`'`, non-ASCII), and the holder checks what it receives.
    let url = reqwest::Url::parse(&address).ok();
    let sent = url.as_ref().map_or_else(
        || target.to_owned(),
        |url| match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        },
    );
    let mut headers = end_to_end(&parts.headers);
    let mark = mark_for(service, me, parts.method.as_str(), &sent, digest);
    if let Ok(mark) = HeaderValue::from_str(&mark) {
        headers.insert(FORWARDED, mark);
    }
    // The host the caller reached, which the holder checks a browser's origin against.
    if !headers.contains_key("x-forwarded-host")
        && let Some(host) = parts.headers.get(header::HOST)
    {
        headers.insert("x-forwarded-host", host.clone());
    }
    let request = match url {
        Some(url) => CLIENT.request(parts.method.clone(), url),
        // Not a URL: the client says so, as a failed request.
        None => CLIENT.request(parts.method.clone(), address),
    };
    let answer = request.headers(headers).body(body).send().await?;
    counted("forwarded");
    Ok(answer)
}

/// The holder's answer, as the caller's: status, headers and a streamed body.
fn relay(answer: reqwest::Response) -> Response {
    let status = answer.status();
    let headers = end_to_end(answer.headers());
    let mut response = Body::from_stream(answer.bytes_stream()).into_response();
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_forwarded_path_is_a_route_of_the_api() {
        let (_, document) = crate::api_routes().split_for_parts();
        let query = [
            "/api/sandbox.processList",
            "/api/sandbox.processOutput",
            "/api/sandbox.readFile",
            "/api/sandbox.listFiles",
            "/api/sandbox.upload",
            "/api/sandbox.download",
        ];
        let body = [
            "/api/sandbox.exec",
            "/api/sandbox.writeFile",
            "/api/sandbox.processStart",
            "/api/sandbox.processWait",
            "/api/sandbox.processSignal",
            "/api/sandbox.processWrite",
            "/api/sandbox.contextCreate",
            "/api/sandbox.contextRun",
            "/api/sandbox.contextRemove",
        ];
        let paths = query.map(|p| (p, Named::Query)).into_iter();
        for (path, named_in) in paths.chain(body.map(|p| (p, Named::Body))) {
            assert_eq!(named(path), Some(named_in), "{path}");
            assert!(document.paths.paths.contains_key(path), "{path}");
        }
        assert_eq!(named("/sandbox-pty"), Some(Named::Socket));
        for e2b in [
            "/e2b/envd/files",
            "/e2b/envd/execute",
            "/e2b/envd/process.Process/Start",
        ] {
            assert_eq!(named(e2b), Some(Named::E2bHeader), "{e2b}");
        }
        assert_eq!(
            named("/e2b/envd/health"),
            None,
            "the store answers it anywhere"
        );
        assert_eq!(
            named("/e2b/sandboxes"),
            None,
            "the control plane is served here"
        );
        assert_eq!(
            named("/api/sandbox.kill"),
            None,
            "control calls are served here"
        );
        assert_eq!(named("/api/sandbox.one"), None);
    }

    #[test]
    fn the_sandbox_is_found_in_the_query_or_the_body() {
        let uri: Uri = "/sandbox-pty?cols=80&sandboxId=sb_1"
            .parse()
            .unwrap_or_default();
        assert_eq!(sandbox_in_query(&uri).as_deref(), Some("sb_1"));
        assert_eq!(
            sandbox_in_query(&"/x?cols=1".parse().unwrap_or_default()),
            None
        );
        assert_eq!(
            sandbox_in_body(br#"{"cmd":"true","sandboxId":"sb_2"}"#).as_deref(),
            Some("sb_2")
        );
        assert_eq!(sandbox_in_body(b"not json"), None);
        assert_eq!(sandbox_in_body(br#"{"sandboxId":7}"#), None);
    }

    #[test]
    fn connection_headers_are_not_passed_on() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
        headers.insert(header::HOST, HeaderValue::from_static("a:1"));
        headers.insert("x-api-key", HeaderValue::from_static("k"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let kept = end_to_end(&headers);
        assert_eq!(kept.len(), 2);
        assert!(kept.contains_key("x-api-key"));
    }
}
