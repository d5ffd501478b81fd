//! Previews: HTTP to a port inside a sandbox at `/preview/<sandboxId>/<port>/<path>` on
//! sandboxd's own listener, carried by the sandbox's agent (`Ports::connect`): bodies
//! streamed both ways, server-sent events as they come, WebSocket upgrades joined end to
//! end. The caller needs an API key (or a dashboard session) that may use the sandbox;
//! another organization's gets 404.
//!
//! The app's pages are served on sandboxd's own origin, so they are made harmless to it:
//! every response carries `Content-Security-Policy: sandbox` without `allow-same-origin`
//! (the page runs in an opaque origin: it cannot read sandboxd's pages or call its API
//! with the user's session), sandboxd's credentials are taken off the request (its key,
//! its session cookie) and the app's cookies are kept to its own prefix (a cookie set
//! for `/` would reach every other sandbox's previews).

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;

use crate::AppState;
use crate::auth::{self, API_KEY_HEADER, Caller, SESSION_COOKIE};
use crate::error::ApiError;

/// Where previews are served.
pub const PREFIX: &str = "/preview/";

/// The policy every preview response carries: scripts and forms work, in an opaque
/// origin of their own.
const SANDBOX_POLICY: &str =
    "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads";

/// `/preview/{sandboxId}/{port}` without a path: the app's root, with the slash that
/// makes its relative links resolve under the prefix.
pub async fn root(Path((sandbox_id, port)): Path<(String, String)>) -> Response {
    let location = format!("{PREFIX}{sandbox_id}/{port}/");
    match HeaderValue::try_from(location) {
        Ok(location) => (
            StatusCode::PERMANENT_REDIRECT,
            [(header::LOCATION, location)],
        )
            .into_response(),
        Err(_) => ApiError::BadRequest("invalid sandbox id".into()).into_response(),
    }
}

/// `/preview/{sandboxId}/{port}/{*path}`.
pub async fn preview(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Path((sandbox_id, port, _)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let Ok(port) = port.parse::<u16>() else {
        return ApiError::BadRequest("port must be a number between 1 and 65535".into())
            .into_response();
    };
    match forward(&state, &caller, &sandbox_id, port, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

/// `/preview/{sandboxId}/{port}/` with nothing after the slash.
pub async fn preview_root(
    state: State<AppState>,
    caller: Caller,
    Path((sandbox_id, port)): Path<(String, String)>,
    request: Request,
) -> Response {
    preview(
        state,
        caller,
        Path((sandbox_id, port, String::new())),
        request,
    )
    .await
}

async fn forward(
    state: &AppState,
    caller: &sandboxd_core::model::Principal,
    sandbox_id: &str,
    port: u16,
    mut request: Request,
) -> Result<Response, ApiError> {
    let prefix = format!("{PREFIX}{sandbox_id}/{port}");
    let target = app_uri(request.uri(), &prefix)?;
    let stream = state
        .service
        .ports()
        .connect(caller, sandbox_id, port)
        .await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(unreachable)?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let upgrade = wants_upgrade(request.headers()).then(|| hyper::upgrade::on(&mut request));
    *request.uri_mut() = target;
    strip_credentials(request.headers_mut());
    if let Ok(value) = HeaderValue::try_from(prefix.as_str()) {
        request
            .headers_mut()
            .insert(HeaderName::from_static("x-forwarded-prefix"), value);
    }
    let mut response = sender.send_request(request).await.map_err(unreachable)?;
    keep_cookies_under(response.headers_mut(), &format!("{prefix}/"));
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SANDBOX_POLICY),
    );
    if response.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client) = upgrade
    {
        let app = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            if let (Ok(client), Ok(app)) = tokio::join!(client, app) {
                let _ = tokio::io::copy_bidirectional(
                    &mut TokioIo::new(client),
                    &mut TokioIo::new(app),
                )
                .await;
            }
        });
    }
    Ok(response.map(Body::new))
}

/// The request's path as the app sees it: the part after the prefix, with its query.
fn app_uri(uri: &Uri, prefix: &str) -> Result<Uri, ApiError> {
    let rest = uri.path().strip_prefix(prefix).unwrap_or("/");
    let rest = if rest.is_empty() { "/" } else { rest };
    let target = match uri.query() {
        Some(query) => format!("{rest}?{query}"),
        None => rest.to_owned(),
    };
    target
        .parse()
        .map_err(|_| ApiError::BadRequest("invalid preview path".into()))
}

fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
}

/// Takes sandboxd's credentials off a request for the app: its key headers and its
/// session cookie (the app's own cookies stay).
fn strip_credentials(headers: &mut HeaderMap) {
    let bearer_was_ours =
        headers.get(API_KEY_HEADER).is_none() && auth::token_from(headers).is_some();
    headers.remove(API_KEY_HEADER);
    if bearer_was_ours {
        headers.remove(header::AUTHORIZATION);
    }
    let kept: Vec<String> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .map(str::trim)
        .filter(|cookie| {
            let name = cookie.split_once('=').map_or(*cookie, |(name, _)| name);
            !cookie.is_empty() && name != SESSION_COOKIE
        })
        .map(str::to_owned)
        .collect();
    headers.remove(header::COOKIE);
    if !kept.is_empty()
        && let Ok(value) = HeaderValue::try_from(kept.join("; "))
    {
        headers.insert(header::COOKIE, value);
    }
}

/// Every cookie the app sets is kept to its own prefix: `Path` is set to it and
/// `Domain` dropped; one named like sandboxd's session is dropped.
fn keep_cookies_under(headers: &mut HeaderMap, path: &str) {
    let set: Vec<HeaderValue> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|cookie| {
            let mut parts = cookie.split(';').map(str::trim);
            let pair = parts.next()?;
            let name = pair.split_once('=').map_or(pair, |(name, _)| name).trim();
            if name.is_empty() || name.eq_ignore_ascii_case(SESSION_COOKIE) {
                return None;
            }
            let mut rewritten = vec![pair.to_owned()];
            rewritten.extend(
                parts
                    .filter(|attr| {
                        let key = attr.split_once('=').map_or(*attr, |(key, _)| key).trim();
                        !key.eq_ignore_ascii_case("path") && !key.eq_ignore_ascii_case("domain")
                    })
                    .map(str::to_owned),
            );
            rewritten.push(format!("Path={path}"));
            HeaderValue::try_from(rewritten.join("; ")).ok()
        })
        .collect();
    headers.remove(header::SET_COOKIE);
    for value in set {
        headers.append(header::SET_COOKIE, value);
    }
}

fn unreachable(error: hyper::Error) -> ApiError {
    ApiError::Service(crate::service::ServiceError::PortUnreachable(format!(
        "the app in the sandbox did not answer over HTTP: {error}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_app_sees_its_own_path_and_query() {
        let uri: Uri = "/preview/abc/8000/static/app.js?v=2".parse().unwrap();
        assert_eq!(
            app_uri(&uri, "/preview/abc/8000").unwrap(),
            "/static/app.js?v=2"
        );
        let uri: Uri = "/preview/abc/8000/".parse().unwrap();
        assert_eq!(app_uri(&uri, "/preview/abc/8000").unwrap(), "/");
    }

    #[test]
    fn sandboxds_credentials_are_taken_off_and_the_apps_cookies_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(API_KEY_HEADER, HeaderValue::from_static("sbx_secret"));
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("theme=dark; sandboxd_session=s3cret; cart=2"),
        );
        strip_credentials(&mut headers);
        assert!(headers.get(API_KEY_HEADER).is_none());
        assert_eq!(headers[header::COOKIE], "theme=dark; cart=2");

        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer sbx_secret"),
        );
        strip_credentials(&mut headers);
        assert!(
            headers.get(header::AUTHORIZATION).is_none(),
            "a bearer key is sandboxd's"
        );
    }

    #[test]
    fn the_apps_cookies_are_kept_to_its_prefix() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::SET_COOKIE,
            HeaderValue::from_static("id=1; Path=/; Domain=example.com; HttpOnly"),
        );
        headers.append(
            header::SET_COOKIE,
            HeaderValue::from_static("sandboxd_session=x; Path=/"),
        );
        keep_cookies_under(&mut headers, "/preview/abc/8000/");
        let set: Vec<_> = headers.get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(set, ["id=1; HttpOnly; Path=/preview/abc/8000/"]);
    }
}
