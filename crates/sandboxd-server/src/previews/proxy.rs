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

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sandboxd_core::model::Principal;
use sandboxd_core::ports::{
    LINK_COOKIE, LINK_PARAM, PREVIEW_PREFIX, parse_preview_host, sandbox_of, under_domain,
};
use sandboxd_core::preview_origin::{Served, from_own_origin, needs_own_origin};

use crate::AppState;
use crate::auth;
use crate::error::ApiError;
use crate::forward;
use crate::service::{Link, ServiceError};

use super::place::Place;
use super::to_app::{to_app, to_holder, wants_upgrade};

/// Where previews are served.
pub const PREFIX: &str = PREVIEW_PREFIX;

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

/// The answer of the replica that holds the sandbox's agent, when it is another one
/// (the request passed on to it), or a refusal of a request passed on here that this
/// replica does not hold; `None`: this replica serves it.
pub(crate) async fn elsewhere(
    state: &AppState,
    sandbox_id: &str,
    request: Request,
) -> Result<Request, Response> {
    match forward::previews::holds(state, &request) {
        Some(false) => Err(forward::previews::refused()),
        Some(true) => Ok(request),
        None => match state.service.replicas().agent_holder(sandbox_id).await {
            Some(holder) => Err(to_holder(state, &holder, request).await),
            None => Ok(request),
        },
    }
}

/// A request already admitted (E2B's ports, `crate::e2b::ports`), carried to the
/// sandbox's app as on a preview host of its own.
pub(crate) async fn to_app_on_host(
    state: &AppState,
    admitted: &crate::service::Admitted,
    (sandbox_id, port): (&str, u16),
    request: Request,
) -> Result<Response, ApiError> {
    if admitted.as_exposer {
        auth::preview_limited(state, sandbox_id, port)?;
    }
    let query = request.uri().query().map(str::to_owned);
    to_app(
        state,
        admitted,
        (sandbox_id, port),
        &Place::Host,
        query,
        request,
    )
    .await
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
    let request = match elsewhere(state, sandbox_id, request).await {
        Ok(request) => request,
        Err(answered) => return Ok(answered),
    };
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
