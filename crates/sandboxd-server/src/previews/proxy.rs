//! Previews: HTTP to a port inside a sandbox, on a host of its own under the operator's
//! preview domain (`<port>-<handle>.<domain>`, any path: `by_host`) or at
//! `/preview/<handle>/<port>/<path>` on sandboxd's own address (the handle is the
//! sandbox id in lower-case base32, `sandboxd_core::ports::handle_of`), carried by the
//! sandbox's agent (`Ports::connect`): bodies streamed both ways, server-sent events as
//! they come, WebSocket upgrades joined end to end. Who may enter is `Ports::admit`'s: a
//! key or a dashboard session that may use the sandbox (another organization's gets
//! 404), a signed link of the port's exposure (in the address once, then a cookie for
//! that preview only), or anyone when the port is exposed publicly.
//!
//! Under a path, the app's pages are served on sandboxd's own origin, so they are made
//! harmless to it: every response carries `Content-Security-Policy: sandbox` without
//! `allow-same-origin` (the page runs in an opaque origin: it cannot read sandboxd's
//! pages or call its API with the user's session) and the app's cookies are kept to its
//! own prefix (a cookie set for `/` would reach every other sandbox's previews). On
//! either, sandboxd's credentials are taken off the request (its key, its session and
//! link cookies, the link's token) and the app's cookies lose any `Domain`.
//!
//! `by_host` is a middleware ahead of every route, so nothing of sandboxd's is served on
//! preview hosts. A link's token in the address is moved into a cookie with a 303. A
//! request takes the connection an earlier one left open (`app_connections.rs`, after
//! `Ports::may_reach`) or a new one (`Ports::connect`), and speaks HTTP/1.1 over it with
//! hyper's client connection; an upgrade is joined with `copy_bidirectional` on a
//! connection of its own, until either side ends or `Ports::withdrawn` (the exposure, or
//! the caller's key and its access, and a session's longest life). Under a path, headers
//! that act on a whole origin are dropped. A cookie-admitted upgrade or change from
//! another origin is refused (`sandboxd_core::preview_origin`). A link's and a public
//! port's traffic is on the preview's own rate limit. A replica that does not hold the
//! agent passes the request on to the one that does, marked (`forward::previews`), over
//! the same HTTP/1.1 exchange.

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use sandboxd_core::model::Principal;
use sandboxd_core::ports::{
    LINK_COOKIE, LINK_PARAM, PREVIEW_PREFIX, parse_preview_host, sandbox_of, under_domain,
};
use sandboxd_core::preview_origin::{Served, from_own_origin, needs_own_origin};

use crate::AppState;
use crate::auth::{self, API_KEY_HEADER, SESSION_COOKIE};
use crate::error::ApiError;
use crate::forward;
use crate::service::{Admitted, Link, ServiceError};

/// Where previews are served.
pub const PREFIX: &str = PREVIEW_PREFIX;

/// The policy every preview response carries: scripts and forms work, in an opaque
/// origin of their own.
const SANDBOX_POLICY: &str =
    "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads";

/// `/preview/{handle}/{port}` without a path: the app's root, with the slash that
/// makes its relative links resolve under the prefix (the query kept).
pub async fn root(Path((handle, port)): Path<(String, String)>, uri: Uri) -> Response {
    let mut location = format!("{PREFIX}{handle}/{port}/");
    if let Some(query) = uri.query() {
        location.push('?');
        location.push_str(query);
    }
    match HeaderValue::try_from(location) {
        Ok(location) => (
            StatusCode::PERMANENT_REDIRECT,
            [(header::LOCATION, location)],
        )
            .into_response(),
        Err(_) => ApiError::BadRequest("invalid preview address".into()).into_response(),
    }
}

/// `/preview/{handle}/{port}/{*path}`.
pub async fn preview(
    State(state): State<AppState>,
    Path((handle, port, _)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let Ok(port) = port.parse::<u16>() else {
        return ApiError::BadRequest("port must be a number between 1 and 65535".into())
            .into_response();
    };
    // Not a handle: no sandbox, answered as one that is not there.
    let Some(sandbox_id) = sandbox_of(&handle) else {
        return ApiError::Service(ServiceError::NotFound("sandbox")).into_response();
    };
    let place = Place::Path(format!("{PREFIX}{handle}/{port}"));
    enter(&state, &sandbox_id, port, &place, request)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `/preview/{handle}/{port}/` with nothing after the slash.
pub async fn preview_root(
    state: State<AppState>,
    Path((handle, port)): Path<(String, String)>,
    request: Request,
) -> Response {
    preview(state, Path((handle, port, String::new())), request).await
}

/// Requests to a host under the preview domain (`<port>-<handle>.<domain>`) go to that
/// port's preview, whatever their path; a host there that names no preview is 404.
/// Every other request goes on to sandboxd's own routes.
pub async fn by_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(domain) = state.previews.domain.as_deref() else {
        return next.run(request).await;
    };
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().host())
        .unwrap_or_default()
        .to_owned();
    if !under_domain(&host, domain) {
        return next.run(request).await;
    }
    let Some((sandbox_id, port)) = parse_preview_host(&host, domain) else {
        return ApiError::Service(ServiceError::NotFound("preview")).into_response();
    };
    enter(&state, &sandbox_id, port, &Place::Host, request)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// Where a preview is served.
enum Place {
    /// Under a path of sandboxd's own address (no final slash): the app's pages share
    /// sandboxd's origin, so they run sandboxed and its cookies are kept to the prefix.
    Path(String),
    /// On a host of its own: an origin of its own.
    Host,
}

impl Place {
    fn prefix(&self) -> &str {
        match self {
            Self::Path(prefix) => prefix,
            Self::Host => "",
        }
    }

    fn cookie_path(&self) -> String {
        format!("{}/", self.prefix())
    }
}

async fn enter(
    state: &AppState,
    sandbox_id: &str,
    port: u16,
    place: &Place,
    request: Request,
) -> Result<Response, ApiError> {
    // The replica holding the sandbox's agent serves it; a request another replica
    // passed on is served here once its mark holds.
    match forward::previews::holds(state, &request) {
        Some(false) => return Ok(forward::previews::refused()),
        Some(true) => {}
        None => {
            if let Some(holder) = state.service.replicas().agent_holder(sandbox_id).await {
                return Ok(to_holder(state, &holder, request).await);
            }
        }
    }
    let caller = caller_of(state, request.headers(), request.method()).await?;
    let (opened, rest_of_query) = link_in_query(request.uri().query());
    let link = match &opened {
        Some(token) => Some(Link {
            token,
            opened: true,
        }),
        None => auth::cookie(request.headers(), LINK_COOKIE).map(|token| Link {
            token,
            opened: false,
        }),
    };
    let admitted = state
        .service
        .ports()
        .admit(sandbox_id, port, caller.as_ref(), link)
        .await?;
    if admitted.by_kept_link
        && needs_own_origin(request.method().as_str(), wants_upgrade(request.headers()))
        && !from_its_own_origin(state, request.headers(), place, (sandbox_id, port))
    {
        return Err(ApiError::Service(ServiceError::Forbidden(
            "a preview link's cookie opens no WebSocket and makes no change from another origin: open the link there, or use a key".into(),
        )));
    }
    if admitted.as_exposer {
        // Traffic through a link or a public port (anyone's) counts against the
        // preview's own limit, never its exposer's.
        auth::preview_limited(state, sandbox_id, port)?;
    }
    let set_link = admitted
        .link_until
        .zip(opened.as_deref())
        .and_then(|(until, token)| {
            link_cookie(token, place, over_tls(state, request.headers()), until)
        });
    if let Some(set_link) = &set_link
        && navigates(request.headers())
    {
        // A link opened in a browser: its token goes into a cookie and out of the
        // address (so the app's pages never see it in their location or referrers).
        // Other clients (curl, scripts, WebSockets) are served at once, the token
        // taken out of what the app sees: they may keep no cookies.
        let mut location = request.uri().path().to_owned();
        if let Some(rest) = &rest_of_query {
            location.push('?');
            location.push_str(rest);
        }
        let location = HeaderValue::try_from(location)
            .map_err(|_| ApiError::BadRequest("invalid preview address".into()))?;
        return Ok((
            StatusCode::SEE_OTHER,
            [
                (header::LOCATION, location),
                (header::SET_COOKIE, set_link.clone()),
            ],
        )
            .into_response());
    }
    let mut response = to_app(
        state,
        &admitted,
        (sandbox_id, port),
        place,
        rest_of_query,
        request,
    )
    .await?;
    if let Some(set_link) = set_link {
        response.headers_mut().append(header::SET_COOKIE, set_link);
    }
    Ok(response)
}

/// Whether a request comes from the preview's own pages (`sandboxd_core::preview_origin`).
fn from_its_own_origin(
    state: &AppState,
    headers: &HeaderMap,
    place: &Place,
    (sandbox_id, port): (&str, u16),
) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // An `Origin` that is not text is there, and names no origin of the preview's.
    let origin = headers
        .get("origin")
        .map(|value| value.to_str().unwrap_or("null"));
    let served = match (place, state.previews.domain.as_deref()) {
        (Place::Host, Some(domain)) => Served::Host {
            domain,
            sandbox_id,
            port,
        },
        _ => Served::Path {
            host: text("x-forwarded-host").or_else(|| text("host")),
        },
    };
    from_own_origin(
        origin,
        text("sec-fetch-site"),
        served,
        over_tls(state, headers),
    )
}

/// Whether the request came over TLS: the operator's address is `https://`, or a proxy
/// in front says so.
fn over_tls(state: &AppState, headers: &HeaderMap) -> bool {
    state
        .previews
        .public_url
        .as_deref()
        .is_some_and(|url| url.starts_with("https://"))
        || headers
            .get("x-forwarded-proto")
            .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"))
}

/// Whether a request is a browser's navigation (`Sec-Fetch-Mode: navigate`, which
/// browsers send and scripts cannot set from a page).
fn navigates(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-mode")
        .is_some_and(|mode| mode.as_bytes().eq_ignore_ascii_case(b"navigate"))
}

/// The caller a request names with a key (a wrong key: 401) or a dashboard session
/// (one that does not hold, such as a request from the app's own pages, names none).
async fn caller_of(
    state: &AppState,
    headers: &HeaderMap,
    method: &Method,
) -> Result<Option<Principal>, ApiError> {
    if let Some(key) = auth::token_from(headers) {
        return auth::principal(state, key).await.map(Some);
    }
    if auth::session_from(headers).is_some() {
        return Ok(auth::session_principal(state, headers, method).await.ok());
    }
    Ok(None)
}

/// The link's token in a query, and the rest of the query without it.
fn link_in_query(query: Option<&str>) -> (Option<String>, Option<String>) {
    let Some(query) = query else {
        return (None, None);
    };
    let mut token = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            if name == LINK_PARAM {
                token.get_or_insert_with(|| value.to_owned());
                false
            } else {
                true
            }
        })
        .collect();
    let rest = (!rest.is_empty()).then(|| rest.join("&"));
    (token, rest)
}

/// The cookie a link leaves, for this preview only, until the link expires. On a host
/// of its own it is that host's (`SameSite=Lax`, `Secure` over TLS). Under a path it is
/// sent on the app's own requests too: its pages run in an opaque origin, to which
/// every request is cross-site, hence `SameSite=None`, which browsers take only with
/// `Secure` (kept over plain HTTP from `localhost` alone), and which browsers that
/// block third-party cookies do not send for a page's scripts and styles: previews of
/// whole apps in a browser want a preview domain.
fn link_cookie(token: &str, place: &Place, tls: bool, until: i64) -> Option<HeaderValue> {
    let left = (until - crate::service::now_ms()).max(0) / 1000;
    let path = place.cookie_path();
    let attributes = match place {
        Place::Path(_) => "Secure; SameSite=None",
        Place::Host if tls => "Secure; SameSite=Lax",
        Place::Host => "SameSite=Lax",
    };
    HeaderValue::try_from(format!(
        "{LINK_COOKIE}={token}; Path={path}; Max-Age={left}; HttpOnly; {attributes}"
    ))
    .ok()
}

async fn to_app(
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
/// driven on a task of its own until it ends.
async fn open<T>(io: T) -> Result<SendRequest<Body>, hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(io).await?;
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
async fn to_holder(state: &AppState, holder: &str, mut request: Request) -> Response {
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
    fn the_links_token_is_taken_out_of_the_query() {
        assert_eq!(link_in_query(None), (None, None));
        assert_eq!(
            link_in_query(Some("a=1&sandboxd_link=t0k&b=2")),
            (Some("t0k".into()), Some("a=1&b=2".into()))
        );
        assert_eq!(
            link_in_query(Some("sandboxd_link=t0k")),
            (Some("t0k".into()), None)
        );
        assert_eq!(
            link_in_query(Some("x=sandboxd_link")),
            (None, Some("x=sandboxd_link".into()))
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
