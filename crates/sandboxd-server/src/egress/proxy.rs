//! The HTTP of the egress proxy, over one connection a program in the sandbox made to
//! it: `CONNECT host:port` (HTTPS and anything else over TCP: once the gate connected,
//! `200` and the bytes joined end to end) and requests in absolute form
//! (`GET http://host/path`: each sent on to the host over a connection of its own, in
//! origin form, without the hop-by-hop headers). The host is the gate's to decide: a
//! refusal is `403` with the reason in the body, a host that does not answer `502`.
//! Everything the program sends is untrusted: the request head is bounded in size and
//! in time, and nothing but what the gate allowed is reached.
//!
//! sandboxd's own answers (`403`, `502`, `400`) are marked `x-sandboxd-egress`. A
//! request's `Host` must be its URL's, and sandboxd writes it. A tunnel to 443 must open
//! with a ClientHello naming its host (`client_hello.rs`) before a byte goes on. A
//! request to a host the sandbox has credentials for goes over TLS (`tls.rs`) with their
//! headers added.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use sandboxd_contracts::ByteStream;
use sandboxd_service::{EgressError, Gate};
use tokio_rustls::TlsConnector;

use super::client_hello::{self, Hello};
use super::tls;
use sandboxd_core::egress::{Refusal, host_header_matches, name_of};
use tokio::io::AsyncWriteExt as _;

/// How long a program may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// A request's head, at most.
const MAX_HEAD: usize = 64 * 1024;
/// How long a host may take to answer a request's head.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);
/// The buffers bytes are joined through, each way, in a tunnel.
const TUNNEL_BUFFER: usize = 256 * 1024;
/// Marks sandboxd's own answers, so a program (or its user) tells them from the host's.
const MARK: &str = "x-sandboxd-egress";
/// The port whose tunnels must be TLS naming their host.
const HTTPS_PORT: u16 = 443;
/// A TLS alert record: fatal, `unrecognized_name` (what a server answers a name it does
/// not serve).
const UNRECOGNIZED_NAME_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70];

/// Whether a TLS server name is the tunnel's host (as the policy compares names).
fn same_host(name: &str, host: &str) -> bool {
    matches!((name_of(name), name_of(host)), (Ok(a), Ok(b)) if a == b)
}

/// Serves one proxy connection until the program or the connection ends it.
pub async fn serve(stream: Box<dyn ByteStream>, gate: Gate, tls: TlsConnector) {
    let service = hyper::service::service_fn(move |request| {
        let gate = gate.clone();
        let tls = tls.clone();
        async move { Ok::<_, Infallible>(answer(request, gate, tls).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    if let Err(error) = served {
        tracing::debug!(error = %sandboxd_core::error::chain(&error), "an egress proxy connection ended");
    }
}

async fn answer(request: Request<Incoming>, gate: Gate, tls: TlsConnector) -> Response<Body> {
    if request.method() == Method::CONNECT {
        return tunnel(request, gate).await;
    }
    let uri = request.uri();
    match (uri.scheme_str(), uri.authority()) {
        (Some("http"), Some(_)) => pass_on(request, gate, tls).await,
        (Some(_), Some(_)) => own(
            StatusCode::BAD_REQUEST,
            "only http:// URLs are sent on as requests; https and other protocols go through CONNECT",
        ),
        _ => own(
            StatusCode::BAD_REQUEST,
            "this is sandboxd's egress proxy: it takes CONNECT host:port or a request for an absolute http:// URL",
        ),
    }
}

/// `CONNECT host:port`: once connected, `200`, then the program's bytes and the
/// host's joined until either side ends.
async fn tunnel(mut request: Request<Incoming>, gate: Gate) -> Response<Body> {
    let Some(authority) = request.uri().authority().cloned() else {
        return own(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
    };
    let Some(port) = authority.port_u16() else {
        return own(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
    };
    let host = authority.host().to_owned();
    let upstream = match gate.connect(&host, port).await {
        Ok(upstream) => upstream,
        Err(error) => return refused(&host, port, &error),
    };
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else {
            return;
        };
        let mut program = TokioIo::new(upgraded);
        let mut far = upstream.stream;
        // HTTPS's port: the handshake must ask for the host the tunnel was allowed to
        // (a front end routes by that name), and nothing goes on before it is read.
        if port == HTTPS_PORT {
            match client_hello::read(&mut program).await {
                Hello::Tls {
                    bytes,
                    name: Some(name),
                } if same_host(&name, &host) => {
                    if far.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                _ => {
                    drop(far);
                    gate.refuse(&host, port, Refusal::SniMismatch).await;
                    let _ = program.write_all(&UNRECOGNIZED_NAME_ALERT).await;
                    return;
                }
            }
        }
        let _ = tokio::io::copy_bidirectional_with_sizes(
            &mut program,
            &mut far,
            TUNNEL_BUFFER,
            TUNNEL_BUFFER,
        )
        .await;
    });
    Response::new(Body::empty())
}

/// A request for an absolute `http://` URL, sent on to its host over a connection of
/// its own in origin form; the host's answer streamed back. To a host the sandbox has
/// credentials for, sandboxd speaks HTTPS (port 443 for a URL without a port) and adds
/// their headers, replacing any the program sent.
async fn pass_on(request: Request<Incoming>, gate: Gate, tls: TlsConnector) -> Response<Body> {
    let uri = request.uri().clone();
    let Some(authority) = uri.authority() else {
        return own(StatusCode::BAD_REQUEST, "the URL names no host");
    };
    let host = authority.host();
    let credentials = gate.credentials_for(host);
    let brokered = !credentials.is_empty();
    let port = match authority.port_u16() {
        Some(port) => port,
        None if brokered => HTTPS_PORT,
        None => 80,
    };
    // The request goes to the host its URL names, and says so: a `Host` naming another
    // (which a shared front end would route by, credentials and all) is refused, and
    // the one sent on is written here. (A URL naming no host name, an address, is the
    // gate's to refuse.)
    let hosts: Vec<&HeaderValue> = request.headers().get_all(header::HOST).iter().collect();
    let host_named = match hosts.as_slice() {
        [] => true,
        [one] => one
            .to_str()
            .is_ok_and(|value| host_header_matches(value, host, authority.port_u16())),
        _ => false,
    };
    if name_of(host).is_ok() && (!host_named || authority.as_str().contains('@')) {
        gate.refuse(host, port, Refusal::HostMismatch).await;
        return own(
            StatusCode::BAD_REQUEST,
            &format!(
                "{}; send the request to the host the URL names",
                Refusal::HostMismatch
            ),
        );
    }
    let upstream = match gate.connect(host, port).await {
        Ok(upstream) => upstream,
        Err(error) => return refused(host, port, &error),
    };
    let stream = if brokered {
        match tls::handshake(&tls, &host.to_ascii_lowercase(), upstream.stream).await {
            Ok(stream) => stream,
            Err(error) => return own(StatusCode::BAD_GATEWAY, &error),
        }
    } else {
        upstream.stream
    };
    let (mut parts, body) = request.into_parts();
    parts.uri = origin_form(&uri);
    strip_hop_by_hop(&mut parts.headers);
    for (name, value) in credentials {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            let mut value = value;
            value.set_sensitive(true);
            parts.headers.insert(name, value);
        }
    }
    let sent_host = match authority.port_u16() {
        Some(port) => format!("{}:{port}", host.to_ascii_lowercase()),
        None => host.to_ascii_lowercase(),
    };
    match HeaderValue::from_str(&sent_host) {
        Ok(value) => {
            parts.headers.insert(header::HOST, value);
        }
        Err(_) => return own(StatusCode::BAD_REQUEST, "the URL's host cannot be sent"),
    }
    let request = Request::from_parts(parts, body);
    let sent = async {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        sender.send_request(request).await
    };
    match tokio::time::timeout(ANSWER_TIMEOUT, sent).await {
        Err(_) => own(
            StatusCode::GATEWAY_TIMEOUT,
            &format!(
                "{host}:{port} did not answer within {} s",
                ANSWER_TIMEOUT.as_secs()
            ),
        ),
        Ok(Ok(response)) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, Body::new(body))
        }
        Ok(Err(error)) => own(
            StatusCode::BAD_GATEWAY,
            &format!("{host}:{port} did not answer the request: {error}"),
        ),
    }
}

fn origin_form(uri: &Uri) -> Uri {
    uri.path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap_or_else(|_| Uri::from_static("/"))
}

/// Removes the headers that describe one connection (and those `Connection` names),
/// not the request.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
}

/// sandboxd's answer when it makes no connection.
fn refused(host: &str, port: u16, error: &EgressError) -> Response<Body> {
    let status = match error {
        EgressError::Refused(_) => StatusCode::FORBIDDEN,
        EgressError::Unreachable(_) => StatusCode::BAD_GATEWAY,
        EgressError::Gone => StatusCode::SERVICE_UNAVAILABLE,
    };
    own(status, &format!("{host}:{port}: {error}"))
}

/// One of sandboxd's own answers: plain text, marked, closing the connection.
fn own(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(Body::from(format!("sandboxd egress proxy: {message}\n")));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(MARK, HeaderValue::from_static("refused"));
    response
}
