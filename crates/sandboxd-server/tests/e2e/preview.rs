//! Previews: an app inside an `isolated` sandbox (`preview/app.py`) reached over HTTP at
//! `/preview/<handle>/<port>/` on sandboxd's own listener, with a key; refused without
//! one and to another organization; bodies, server-sent events and WebSockets carried;
//! sandboxd's credentials never reach the app and its cookies stay under its prefix.

use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::harness::{KEY, TestServer, id};

pub(crate) const APP: &str = include_str!("preview/app.py");

/// A server with a sandbox running the app, once the app answers through its preview
/// (at the base address returned, without its final slash).
pub async fn serving() -> (TestServer, Value, String) {
    serving_on(TestServer::start().await).await
}

/// [`serving`] on a server of the caller's.
pub async fn serving_on(server: TestServer) -> (TestServer, Value, String) {
    let sandbox = server.create(json!({"template": "base"})).await;
    assert_eq!(sandbox["networkMode"], "isolated");
    start_app(&server, id(&sandbox)).await;
    let path = sandboxd_core::ports::preview_path(id(&sandbox), 8000);
    let base = format!("{}{}", server.url, path.trim_end_matches('/'));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let answer = server
            .client
            .get(format!("{base}/"))
            .header("x-api-key", KEY)
            .send()
            .await
            .unwrap();
        if answer.status() == StatusCode::OK {
            break;
        }
        assert_eq!(
            answer.status(),
            StatusCode::BAD_GATEWAY,
            "while the app starts"
        );
        assert!(Instant::now() < deadline, "the app did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (server, sandbox, base)
}

/// Starts [`APP`] in the sandbox, in the background (it listens on port 8000).
pub(crate) async fn start_app(server: &TestServer, sandbox_id: &str) {
    let (status, written) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": sandbox_id, "path": "/tmp/app.py", "content": APP}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{written}");
    let (status, started) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": sandbox_id, "cmd": "exec python3 /tmp/app.py"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
}

/// A GET with `key`.
async fn get_with(server: &TestServer, url: String, key: &str) -> reqwest::Response {
    server
        .client
        .get(url)
        .header("x-api-key", key)
        .send()
        .await
        .unwrap()
}

/// The first key of a new organization: one that may use none of the server's sandboxes.
async fn stranger_key(server: &TestServer) -> String {
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    other["apiKey"]["secret"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_isolated_sandboxs_app_is_served_with_a_key_and_to_nobody_else() {
    let (server, _sandbox, base) = serving().await;

    let page = server
        .client
        .get(format!("{base}/"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.starts_with("sandbox ") && !policy.contains("allow-same-origin"),
        "the app's pages run in an origin of their own: {policy}"
    );
    assert_eq!(page.text().await.unwrap(), "hello from inside\n");

    // Without a key; with another organization's.
    let bare = server.client.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(bare.status(), StatusCode::UNAUTHORIZED);
    let stranger = get_with(&server, format!("{base}/"), &stranger_key(&server).await).await;
    assert_eq!(stranger.status(), StatusCode::NOT_FOUND);

    // The bare prefix is the app's root; a port with nothing on it is a bad gateway.
    let redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&base)
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), StatusCode::PERMANENT_REDIRECT);
    assert!(
        redirect.headers()["location"]
            .to_str()
            .unwrap()
            .ends_with("/8000/")
    );
    let closed = server
        .client
        .get(base.replace("/8000", "/8001") + "/")
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), StatusCode::BAD_GATEWAY);
}

#[tokio::test]
async fn the_app_sees_its_own_path_and_never_sandboxds_credentials() {
    let (server, _sandbox, base) = serving().await;
    let seen: Value = server
        .client
        .get(format!("{base}/headers?x=1"))
        .header("x-api-key", KEY)
        .header("cookie", "theme=dark; sandboxd_session=not-for-the-app")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(seen["path"], "/headers?x=1");
    let headers = &seen["headers"];
    assert!(headers.get("x-api-key").is_none(), "{headers}");
    assert_eq!(headers["cookie"], "theme=dark");
    assert_eq!(
        headers["x-forwarded-prefix"],
        base.strip_prefix(&server.url).unwrap()
    );

    let cookie = server
        .client
        .get(format!("{base}/cookie"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    let set = cookie.headers()["set-cookie"].to_str().unwrap();
    let prefix = base.strip_prefix(&server.url).unwrap();
    assert_eq!(set, format!("app=1; HttpOnly; Path={prefix}/"));
}

#[tokio::test]
async fn bodies_and_events_stream_through() {
    let (server, _sandbox, base) = serving().await;

    let body: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    let echoed = server
        .client
        .post(format!("{base}/echo"))
        .header("x-api-key", KEY)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.status(), StatusCode::OK);
    assert_eq!(echoed.bytes().await.unwrap().as_ref(), body.as_slice());

    // The first event arrives while the app still waits to send the second.
    let started = Instant::now();
    let mut events = server
        .client
        .get(format!("{base}/events"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    let mut first = Vec::new();
    while !first.ends_with(b"\n\n") {
        first.extend_from_slice(&events.chunk().await.unwrap().expect("the first event"));
    }
    assert_eq!(first, b"data: 1\n\n");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "the first event came after {:?}",
        started.elapsed()
    );
    let mut rest = Vec::new();
    while let Some(chunk) = events.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert_eq!(rest, b"data: 2\n\n");

    let mut big = server
        .client
        .get(format!("{base}/big?mib=32"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), StatusCode::OK);
    let mut total = 0usize;
    while let Some(chunk) = big.chunk().await.unwrap() {
        assert!(
            chunk
                .iter()
                .enumerate()
                .all(|(i, b)| *b == ((total + i) % 256) as u8),
            "the bytes at {total} are the app's"
        );
        total += chunk.len();
    }
    assert_eq!(total, 32 << 20);
}

#[tokio::test]
async fn a_websocket_is_carried_end_to_end() {
    let (_server, _sandbox, base) = serving().await;
    let url = format!("{}/ws", base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("x-api-key", KEY.parse().unwrap());
    let (mut socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    for n in 0..20 {
        socket
            .send(Message::text(format!("message {n}")))
            .await
            .unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("an answer")
            .unwrap()
            .unwrap();
        assert_eq!(answer, Message::text(format!("echo: message {n}")));
    }
    socket.close(None).await.unwrap();
}

#[tokio::test]
async fn requests_after_the_first_go_over_the_connection_it_left_open() {
    let (server, _sandbox, base) = serving().await;
    let peer = async || {
        let answer = get_with(&server, format!("{base}/peer"), KEY).await;
        assert_eq!(answer.status(), StatusCode::OK);
        answer.text().await.unwrap()
    };
    let first = peer().await;
    assert_eq!(peer().await, first, "the app's connection was kept");
    assert_eq!(peer().await, first);

    // An answer that closes its connection leaves none to keep: the next request opens
    // another, and is served.
    let events = get_with(&server, format!("{base}/events"), KEY).await;
    assert_eq!(events.status(), StatusCode::OK);
    events.bytes().await.unwrap();
    let after = peer().await;
    assert!(!after.is_empty());

    // Another organization's key is still refused, however warm the connection.
    let refused = get_with(
        &server,
        format!("{base}/peer"),
        &stranger_key(&server).await,
    )
    .await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn files_the_sandbox_replaces_under_its_own_directories_give_it_nothing_on_the_host() {
    let (server, sandbox, base) = serving().await;
    // Everything the sandbox's code can write, turned into links to the host's engine
    // socket (the way into a host whose proxy opens a path the sandbox controls).
    let out = server
        .exec(
            &sandbox,
            "for d in /tmp \"$HOME\" \"$PWD\"; do \
               for n in agent.sock port.sock 8000 8001 sandboxd.sock; do \
                 rm -rf \"$d/$n\"; ln -s /var/run/docker.sock \"$d/$n\" || exit 1; \
               done; done; echo linked",
        )
        .await;
    assert_eq!(out["stdout"], "linked\n", "{out}");
    let get = async |url: String| get_with(&server, url, KEY).await;
    // The engine's API through a port: the app in the sandbox answers, never the engine.
    let engine = get(format!("{base}/v1.41/info")).await;
    assert_eq!(engine.status(), StatusCode::OK);
    assert_eq!(engine.text().await.unwrap(), "hello from inside\n");
    // A port with nothing behind it is nothing, whatever files are named after it.
    let nothing = get(base.replace("/8000", "/8001") + "/v1.41/info").await;
    assert_eq!(nothing.status(), StatusCode::BAD_GATEWAY);
    // The host's socket is untouched.
    let socket = std::fs::metadata("/var/run/docker.sock").unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_socket(
        &socket.file_type()
    ));
}
