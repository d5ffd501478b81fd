//! A preview's request carried into the sandbox's app: its address made the app's
//! (`app_uri`), sandboxd's credentials taken off it, sent over a connection an earlier
//! request left open or a new one through the sandbox's agent (hyper's HTTP/1.1 client
//! connection; an upgrade joined end to end), and the answer made safe for where it is
//! served (headers that act on a whole origin dropped under a path, the app's cookies
//! kept to its prefix, the sandbox policy). A replica that does not hold the agent
//! passes the request on to the one that does (`to_holder`).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::Response;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use sandboxd_core::ports::LINK_COOKIE;

use super::place::{Place, SANDBOX_POLICY};
use crate::AppState;
use crate::auth::{self, API_KEY_HEADER, SESSION_COOKIE};
use crate::error::ApiError;
use crate::forward;
use crate::service::{Admitted, ServiceError};

pub(super) async fn to_app(
    state: &AppState,
    admitted: &Admitted,
    (sandbox_id, port): (&str, u16),
    place: &Place,
    query: Option<String>,
    mut request: Request,
) -> Result<Response, ApiError> {
    let prefix = place.prefix();
    let target = app_uri(request.uri().path(), query.as_deref(), prefix)?;
    *request.uri_mut() = target;
    strip_credentials(request.headers_mut());
    if let Place::Path(prefix) = place
        && let Ok(value) = HeaderValue::try_from(prefix.as_str())
    {
        request
            .headers_mut()
            .insert(HeaderName::from_static("x-forwarded-prefix"), value);
    }
    let mut response = over_kept(state, admitted, (sandbox_id, port), request).await?;
    match place {
        Place::Path(prefix) => {
            drop_origin_wide(response.headers_mut());
            keep_cookies(response.headers_mut(), Some(&format!("{prefix}/")));
            response.headers_mut().append(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(SANDBOX_POLICY),
            );
        }
        Place::Host => keep_cookies(response.headers_mut(), None),
    }
    Ok(response)
}

/// Response headers that act on a whole origin (clear its storage and cookies, report
/// its errors elsewhere, pin it to TLS, send it to another server): under a path, the
/// origin is sandboxd's own, which an app may not speak for.
const ORIGIN_WIDE: [&str; 7] = [
    "clear-site-data",
    "nel",
    "report-to",
    "reporting-endpoints",
    "strict-transport-security",
    "alt-svc",
    "accept-ch",
];

fn drop_origin_wide(headers: &mut HeaderMap) {
    for name in ORIGIN_WIDE {
        headers.remove(name);
    }
}

/// A request to the app over a connection an earlier request left open when there is
/// one, else over a new one (kept for later requests once its answer is read; an
/// upgrade's is the upgrade's alone).
async fn over_kept(
    state: &AppState,
    admitted: &Admitted,
    (sandbox_id, port): (&str, u16),
    mut request: Request,
) -> Result<Response, ApiError> {
    let ports = state.service.ports();
    let upgrade = wants_upgrade(request.headers());
    if !upgrade && let Some(mut sender) = state.app_connections.take(sandbox_id, port) {
        if let Err(error) = ports.may_reach(&admitted.principal, sandbox_id).await {
            state.app_connections.keep(sandbox_id, port, sender);
            return Err(error.into());
        }
        match sender.try_send_request(request).await {
            Ok(response) => {
                state.app_connections.keep(sandbox_id, port, sender);
                return Ok(response.map(Body::new));
            }
            // Closed before the request went out: it goes over a new connection.
            Err(mut error) => match error.take_message() {
                Some(unsent) => request = unsent,
                None => return Err(unreachable(error.into_error())),
            },
        }
    }
    let stream = ports.connect(&admitted.principal, sandbox_id, port).await?;
    let mut sender = open(TokioIo::new(stream)).await.map_err(unreachable)?;
    // A WebSocket ends with what let it in (an exposure, or the caller's key and its
    // access), and at a session's longest life whatever it entered by.
    let ends = upgrade.then(|| {
        let lifetime = state.sessions.max_lifetime;
        let withdrawn = ports.withdrawn(sandbox_id, port, admitted);
        Box::pin(async move {
            tokio::select! {
                () = withdrawn => {}
                () = tokio::time::sleep(lifetime) => {}
            }
        }) as Ends
    });
    let response = send(&mut sender, request, ends)
        .await
        .map_err(unreachable)?;
    if !upgrade {
        state.app_connections.keep(sandbox_id, port, sender);
    }
    Ok(response)
}

/// An HTTP/1.1 connection over `io` (to the app, or to the replica holding its agent),
/// driven on a task of its own until it ends. Header names go in title case
/// (`Content-Type`), as browsers and most proxies send them: some apps read them so.
async fn open<T>(io: T) -> Result<SendRequest<Body>, hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake(io)
        .await?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    Ok(sender)
}

/// What ends an upgraded connection before either side does.
type Ends = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// One request over a connection and its answer; an upgrade (a WebSocket) the answer
/// accepts is joined end to end on a task of its own, until either side ends it or
/// `ends` resolves.
async fn send(
    sender: &mut SendRequest<Body>,
    mut request: Request,
    ends: Option<Ends>,
) -> Result<Response, hyper::Error> {
    let upgrade = wants_upgrade(request.headers()).then(|| hyper::upgrade::on(&mut request));
    let mut response = sender.send_request(request).await?;
    if response.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client) = upgrade
    {
        let far = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            let (Ok(client), Ok(far)) = tokio::join!(client, far) else {
                return;
            };
            let (mut client, mut far) = (TokioIo::new(client), TokioIo::new(far));
            let joined = tokio::io::copy_bidirectional(&mut client, &mut far);
            let ends = ends.unwrap_or_else(|| Box::pin(std::future::pending()));
            tokio::select! {
                _ = joined => {}
                () = ends => {}
            }
        });
    }
    Ok(response.map(Body::new))
}

/// A preview's request passed on as it came (credentials, `Host`, body streamed,
/// upgrade joined) to the replica holding the sandbox's agent, with this replica's
/// mark; 503 when that replica cannot be reached.
pub(super) async fn to_holder(state: &AppState, holder: &str, mut request: Request) -> Response {
    let Some(address) = holder.strip_prefix("http://") else {
        return forward::previews::gone();
    };
    let address = address.trim_end_matches('/').to_owned();
    let connected = tokio::time::timeout(
        forward::previews::CONNECT,
        tokio::net::TcpStream::connect(address),
    )
    .await;
    let Ok(Ok(stream)) = connected else {
        return forward::previews::gone();
    };
    let _ = stream.set_nodelay(true);
    let target = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let mark = forward::previews::mark(&state.service, request.method().as_str(), &target);
    request
        .headers_mut()
        .insert(forward::previews::HEADER, mark);
    if let Ok(origin_form) = target.parse() {
        *request.uri_mut() = origin_form;
    }
    let exchanged = match open(TokioIo::new(stream)).await {
        Ok(mut sender) => send(&mut sender, request, None).await,
        Err(error) => Err(error),
    };
    match exchanged {
        Ok(response) => {
            forward::previews::sent();
            response
        }
        Err(_) => forward::previews::gone(),
    }
}

/// The request's path as the app sees it: the part after the prefix, with the query
/// (the link's token taken out).
fn app_uri(path: &str, query: Option<&str>, prefix: &str) -> Result<Uri, ApiError> {
    let rest = path.strip_prefix(prefix).unwrap_or("/");
    let rest = if rest.is_empty() { "/" } else { rest };
    let target = match query {
        Some(query) => format!("{rest}?{query}"),
        None => rest.to_owned(),
    };
    target
        .parse()
        .map_err(|_| ApiError::BadRequest("invalid preview path".into()))
}

pub(super) fn wants_upgrade(headers: &HeaderMap) -> bool {
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

/// Takes sandboxd's credentials off a request for the app: its key headers, a
/// replica's forwarding mark, its session and link cookies (the app's own cookies stay).
fn strip_credentials(headers: &mut HeaderMap) {
    let bearer_was_ours =
        headers.get(API_KEY_HEADER).is_none() && auth::token_from(headers).is_some();
    headers.remove(API_KEY_HEADER);
    headers.remove(forward::previews::HEADER);
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
            !cookie.is_empty() && name != SESSION_COOKIE && name != LINK_COOKIE
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

/// Every cookie the app sets is kept to its own host (`Domain` dropped) and, under a
/// path, to its prefix (`Path` set to it); one named like sandboxd's session or link
/// cookie is dropped.
fn keep_cookies(headers: &mut HeaderMap, path: Option<&str>) {
    let set: Vec<HeaderValue> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|cookie| {
            let mut parts = cookie.split(';').map(str::trim);
            let pair = parts.next()?;
            let name = pair.split_once('=').map_or(pair, |(name, _)| name).trim();
            if name.is_empty()
                || name.eq_ignore_ascii_case(SESSION_COOKIE)
                || name.eq_ignore_ascii_case(LINK_COOKIE)
            {
                return None;
            }
            let mut rewritten = vec![pair.to_owned()];
            rewritten.extend(
                parts
                    .filter(|attr| {
                        let key = attr.split_once('=').map_or(*attr, |(key, _)| key).trim();
                        let path_of_its_own = path.is_some() && key.eq_ignore_ascii_case("path");
                        !path_of_its_own && !key.eq_ignore_ascii_case("domain")
                    })
                    .map(str::to_owned),
            );
            if let Some(path) = path {
                rewritten.push(format!("Path={path}"));
            }
            HeaderValue::try_from(rewritten.join("; ")).ok()
        })
        .collect();
    headers.remove(header::SET_COOKIE);
    for value in set {
        headers.append(header::SET_COOKIE, value);
    }
}

fn unreachable(error: hyper::Error) -> ApiError {
    ApiError::Service(ServiceError::PortUnreachable(format!(
        "the app in the sandbox did not answer over HTTP: {error}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_app_sees_its_own_path_and_query() {
        assert_eq!(
            app_uri(
                "/preview/abc/8000/static/app.js",
                Some("v=2"),
                "/preview/abc/8000"
            )
            .unwrap(),
            "/static/app.js?v=2"
        );
        assert_eq!(
            app_uri("/preview/abc/8000/", None, "/preview/abc/8000").unwrap(),
            "/"
        );
    }

    #[test]
    fn sandboxds_credentials_are_taken_off_and_the_apps_cookies_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(API_KEY_HEADER, HeaderValue::from_static("sbx_secret"));
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static(
                "theme=dark; sandboxd_session=s3cret; cart=2; sandboxd_link=t",
            ),
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
        let mut on_host = headers.clone();
        keep_cookies(&mut headers, Some("/preview/abc/8000/"));
        let set: Vec<_> = headers.get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(set, ["id=1; HttpOnly; Path=/preview/abc/8000/"]);
        keep_cookies(&mut on_host, None);
        let set: Vec<_> = on_host.get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(
            set,
            ["id=1; Path=/; HttpOnly"],
            "a host's own, its path kept"
        );
    }
}
