//! A WebSocket (terminal or streaming exec) forwarded to the replica that holds the
//! sandbox's agent: this replica opens the same WebSocket there with the caller's
//! credentials, then accepts the caller's and relays messages both ways until either
//! side ends, close codes included. A single-use token in the query goes on with it:
//! the holder redeems it from the shared store.

use std::time::Duration;

use axum::extract::ws::{self, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts as _, Request};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt as _, StreamExt as _};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, frame::coding::CloseCode};
use tokio_tungstenite::tungstenite::{self as tung};
use tracing::debug;

use super::{CONNECT_TIMEOUT, FORWARDED, counted};
use crate::AppState;
use crate::auth::{same_origin, session_from, token_from};

/// How long the other direction may finish (a close handshake) once one side ended.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

#[derive(serde::Deserialize)]
struct TokenRef {
    token: Option<String>,
}

/// Whether the query carries a single-use token.
pub(super) fn has_token(uri: &axum::http::Uri) -> bool {
    axum::extract::Query::<TokenRef>::try_from_uri(uri).is_ok_and(|q| q.0.token.is_some())
}

/// The holder's WebSocket address for the same path and query.
fn socket_url(holder: &str, target: &str) -> Option<String> {
    let rest = if let Some(rest) = holder.strip_prefix("http://") {
        format!("ws://{rest}")
    } else if let Some(rest) = holder.strip_prefix("https://") {
        format!("wss://{rest}")
    } else {
        return None;
    };
    Some(format!("{rest}{target}"))
}

pub(super) async fn forward(
    state: &AppState,
    request: Request,
    holder: &str,
    me: &str,
    next: Next,
) -> Response {
    let headers = request.headers();
    let key = token_from(headers).map(str::to_owned);
    let dashboard = session_from(headers).is_some() && same_origin(headers);
    if key.is_none() && !dashboard && !has_token(request.uri()) {
        return next.run(request).await;
    }
    // A dashboard session's cookie goes on with what the holder checks its origin by.
    let mut passed = Vec::new();
    if dashboard {
        for name in [header::COOKIE, header::ORIGIN] {
            passed.extend(
                headers
                    .get_all(&name)
                    .iter()
                    .map(|v| (name.clone(), v.clone())),
            );
        }
        let host = headers
            .get("x-forwarded-host")
            .or_else(|| headers.get(header::HOST));
        if let Some(host) = host {
            passed.push((
                header::HeaderName::from_static("x-forwarded-host"),
                host.clone(),
            ));
        }
    }
    let target = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let Some(url) = socket_url(holder, target) else {
        return next.run(request).await;
    };
    let upstream = match url.into_client_request() {
        Ok(mut upstream) => {
            if let Some(key) = key.as_deref().and_then(|k| HeaderValue::from_str(k).ok()) {
                upstream.headers_mut().insert("x-api-key", key);
            }
            let mark = super::mark_for(&state.service, me, "GET", target, super::signed::STREAMED);
            if let Ok(mark) = HeaderValue::from_str(&mark) {
                upstream.headers_mut().insert(FORWARDED, mark);
            }
            for (name, value) in passed {
                upstream.headers_mut().append(name, value);
            }
            tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(upstream))
                .await
                .ok()
                .and_then(Result::ok)
        }
        Err(_) => None,
    };
    let Some((upstream, _)) = upstream else {
        debug!(%holder, "cannot reach a replica for a WebSocket; serving here");
        counted("unreachable");
        return next.run(request).await;
    };
    counted("forwarded");
    let (mut parts, _) = request.into_parts();
    match WebSocketUpgrade::from_request_parts(&mut parts, state).await {
        Ok(upgrade) => upgrade.on_upgrade(move |socket| relay(socket, upstream)),
        Err(rejection) => rejection.into_response(),
    }
}

type Upstream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Relays until either side ends; then the other gets [`CLOSE_GRACE`] to finish.
async fn relay(caller: WebSocket, upstream: Upstream) {
    let (mut to_caller, mut from_caller) = caller.split();
    let (mut to_holder, mut from_holder) = upstream.split();
    let up = async move {
        while let Some(Ok(message)) = from_caller.next().await {
            let Some(message) = to_holder_message(message) else {
                continue;
            };
            let closing = matches!(message, tung::Message::Close(_));
            if to_holder.send(message).await.is_err() || closing {
                break;
            }
        }
        let _ = to_holder.close().await;
    };
    let down = async move {
        while let Some(Ok(message)) = from_holder.next().await {
            let Some(message) = to_caller_message(message) else {
                continue;
            };
            let closing = matches!(message, ws::Message::Close(_));
            if to_caller.send(message).await.is_err() || closing {
                break;
            }
        }
        let _ = to_caller.close().await;
    };
    tokio::pin!(up, down);
    tokio::select! {
        () = &mut up => { let _ = tokio::time::timeout(CLOSE_GRACE, down).await; }
        () = &mut down => { let _ = tokio::time::timeout(CLOSE_GRACE, up).await; }
    }
}

/// Pings and pongs are answered by each connection itself, not relayed.
fn to_holder_message(message: ws::Message) -> Option<tung::Message> {
    Some(match message {
        ws::Message::Text(text) => tung::Message::text(text.as_str()),
        ws::Message::Binary(bytes) => tung::Message::Binary(bytes),
        ws::Message::Close(frame) => tung::Message::Close(frame.map(|frame| CloseFrame {
            code: CloseCode::from(frame.code),
            reason: frame.reason.as_str().into(),
        })),
        ws::Message::Ping(_) | ws::Message::Pong(_) => return None,
    })
}

fn to_caller_message(message: tung::Message) -> Option<ws::Message> {
    Some(match message {
        tung::Message::Text(text) => ws::Message::Text(text.as_str().into()),
        tung::Message::Binary(bytes) => ws::Message::Binary(bytes),
        tung::Message::Close(frame) => ws::Message::Close(frame.map(|frame| ws::CloseFrame {
            code: u16::from(frame.code),
            reason: frame.reason.as_str().into(),
        })),
        tung::Message::Ping(_) | tung::Message::Pong(_) | tung::Message::Frame(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holders_socket_address_keeps_the_path_and_query() {
        assert_eq!(
            socket_url("http://127.0.0.1:7001", "/sandbox-pty?sandboxId=s&cols=80").as_deref(),
            Some("ws://127.0.0.1:7001/sandbox-pty?sandboxId=s&cols=80")
        );
        assert_eq!(
            socket_url("https://a.example", "/sandbox-exec?sandboxId=s").as_deref(),
            Some("wss://a.example/sandbox-exec?sandboxId=s")
        );
        assert_eq!(socket_url("ftp://a", "/x"), None);
    }

    #[test]
    fn close_codes_cross_both_ways() {
        let frame = ws::CloseFrame {
            code: 4401,
            reason: "the key is no longer valid".into(),
        };
        let Some(tung::Message::Close(Some(there))) =
            to_holder_message(ws::Message::Close(Some(frame)))
        else {
            panic!("a close frame");
        };
        assert_eq!(u16::from(there.code), 4401);
        let Some(ws::Message::Close(Some(back))) =
            to_caller_message(tung::Message::Close(Some(there)))
        else {
            panic!("a close frame");
        };
        assert_eq!(
            (back.code, back.reason.as_str()),
            (4401, "the key is no longer valid")
        );
        assert!(to_caller_message(tung::Message::Ping(Default::default())).is_none());
    }
}
