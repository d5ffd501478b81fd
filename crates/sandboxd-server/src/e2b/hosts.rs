//! The hosts of an `E2B_DOMAIN` deployment (`e2b_domain`): E2B's SDKs given only a
//! domain call `api.<domain>` for the control plane and `49983-<sandbox id>.<domain>`
//! for a sandbox's daemon, over TLS (a proxy in front of sandboxd ends it). A request
//! to `api.<domain>` is served as the same request under `/e2b`, one to the daemon's
//! host as the same request under `/e2b/envd` naming the host's sandbox in
//! `E2b-Sandbox-Id` (whatever the request itself named), so both go through every
//! check the paths have. Nothing of sandboxd's own is served on these hosts.
//!
//! This wraps the whole router, because it changes the path that routing reads.
//!
//! `49999-<id>.<domain>` (the code interpreter) is served under `/e2b/envd` too. Any
//! other path under `/e2b` gets E2B's 404. A sandbox's other ports are its apps, served
//! as E2B serves them (`ports.rs` decides, `crate::previews::e2b_ports` carries).

use axum::extract::{Request, State};
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sandboxd_core::e2b::host::{E2bHost, e2b_host};
use sandboxd_core::e2b::interpreter::INTERPRETER_PORT;

use super::envd::ENVD_PORT;

/// Where a request to a sandbox's other port goes, marked with a [`PortRequest`]
/// (`crate::previews::e2b_ports` serves it).
pub(crate) const PORTS_PATH: &str = "/e2b/ports";

/// A request to a sandbox's port as found on the E2B domain: a request extension,
/// which no client can send (a request to [`PORTS_PATH`] without it is 404).
#[derive(Debug, Clone)]
pub(crate) struct PortRequest {
    pub sandbox_id: String,
    pub port: u16,
    /// The request's own address, which the app sees.
    pub uri: Uri,
}

/// Sends requests to the E2B domain's hosts to the routes under `/e2b`.
pub async fn by_host(State(domain): State<String>, mut request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or_default()
        .to_owned();
    let prefix = match e2b_host(&host, &domain) {
        None => return next.run(request).await,
        Some(E2bHost::Api) => "/e2b",
        Some(E2bHost::Sandbox { port, sandbox_id })
            if port == ENVD_PORT || port == INTERPRETER_PORT =>
        {
            let Ok(id) = HeaderValue::from_str(&sandbox_id) else {
                return not_found(format!("no sandbox at {host}"));
            };
            let headers = request.headers_mut();
            headers.insert("e2b-sandbox-id", id);
            headers.insert("e2b-sandbox-port", HeaderValue::from(port));
            "/e2b/envd"
        }
        Some(E2bHost::Sandbox { port, sandbox_id }) => {
            // Marked here, where no client can mark it, with the path the app is to see.
            let uri = request.uri().clone();
            request.extensions_mut().insert(PortRequest {
                sandbox_id,
                port,
                uri,
            });
            PORTS_PATH
        }
        Some(E2bHost::Unknown) => return not_found(format!("nothing is served at {host}")),
    };
    match under(request.uri(), prefix) {
        Some(uri) => {
            *request.uri_mut() = uri;
            next.run(request).await
        }
        None => not_found("not a path".into()),
    }
}

/// `uri` with its path under `prefix`.
fn under(uri: &Uri, prefix: &str) -> Option<Uri> {
    let path_and_query = uri
        .path_and_query()
        .map_or("/", PathAndQuery::as_str)
        .to_owned();
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(format!("{prefix}{path_and_query}").parse().ok()?);
    Uri::from_parts(parts).ok()
}

/// A path under `/e2b` that E2B's API does not have: E2B's 404.
pub(crate) async fn unknown_path(uri: Uri) -> Response {
    not_found(format!(
        "E2B's API has no {}",
        uri.path().trim_start_matches("/e2b")
    ))
}

/// E2B's 404: `{code, message}`.
fn not_found(message: String) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(sandboxd_core::e2b::ErrorAnswer { code: 404, message }),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_goes_under_the_prefix_with_its_query() {
        let uri: Uri = "/files?path=a%20b&username=user".parse().unwrap();
        assert_eq!(
            under(&uri, "/e2b/envd").unwrap().to_string(),
            "/e2b/envd/files?path=a%20b&username=user"
        );
        let absolute: Uri = "https://api.e2b.example.com/sandboxes".parse().unwrap();
        assert_eq!(
            under(&absolute, "/e2b").unwrap().to_string(),
            "https://api.e2b.example.com/e2b/sandboxes"
        );
    }
}
