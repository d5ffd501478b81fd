//! A preview link's cookie, which a browser sends whoever made the request, opens a
//! WebSocket or makes a change (`POST`…) only from the preview's own origin: another
//! site, or another preview of the preview domain, cannot drive the app in the name of
//! whoever opened the link. A key, a link in the address and a public port are not
//! ambient, and are not checked. Under a path, the app's headers that act on the whole
//! origin (sandboxd's) are dropped; a `Host` with a trailing dot is the same host.

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::exposed_ports::{cookie_of, echo, expose, plain};
use crate::harness::{KEY, TestServer, id};
use crate::preview::{serving, serving_on};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a WebSocket at `url` with `headers`; its status when refused.
async fn socket(url: &str, headers: &[(&str, &str)]) -> Result<Socket, StatusCode> {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(WsError::Http(response)) => {
            Err(StatusCode::from_u16(response.status().as_u16()).unwrap())
        }
        Err(other) => panic!("{other}"),
    }
}

/// The link's cookie, as a browser keeps it after opening the link.
async fn opened_cookie(client: &reqwest::Client, url: &str) -> String {
    let opened = client
        .get(url)
        .header("sec-fetch-mode", "navigate")
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), StatusCode::SEE_OTHER);
    cookie_of(&opened).0
}

#[tokio::test]
async fn under_a_path_a_links_cookie_is_not_taken_from_another_origin() {
    let (server, sandbox, base) = serving().await;
    let exposed = expose(&server, &sandbox, json!({"port": 8000})).await;
    let url = exposed["url"].as_str().unwrap().to_owned();
    let cookie = opened_cookie(&plain(), &url).await;
    let ws = format!("{}/ws", base.replacen("http://", "ws://", 1));
    let own = server.url.clone();

    // Another site's page, a sandboxed (opaque) page and a request naming no origin
    // cannot open the app's WebSocket on the cookie.
    for origin in [Some("https://evil.example"), Some("null"), None] {
        let mut headers = vec![("cookie", cookie.as_str())];
        if let Some(origin) = origin {
            headers.push(("origin", origin));
        }
        let refused = socket(&ws, &headers).await.err();
        assert_eq!(refused, Some(StatusCode::FORBIDDEN), "origin {origin:?}");
    }
    let mut opened = socket(&ws, &[("cookie", &cookie), ("origin", &own)])
        .await
        .expect("the preview's own origin opens it");
    assert_eq!(
        echo(&mut opened, "mine").await.as_deref(),
        Some("echo: mine")
    );

    // Nor post to it; reading stays open to the cookie, as a page's images do.
    let post = |origin: &str| {
        plain()
            .post(format!("{base}/echo"))
            .header("cookie", &cookie)
            .header("origin", origin.to_owned())
            .body("posted")
            .send()
    };
    assert_eq!(
        post("https://evil.example").await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    let posted = post(&own).await.unwrap();
    assert_eq!(posted.status(), StatusCode::OK);
    assert_eq!(posted.text().await.unwrap(), "posted");
    let read = plain()
        .get(format!("{base}/"))
        .header("cookie", &cookie)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::OK);

    // A key is no ambient credential: it is not checked.
    let mut keyed = socket(
        &ws,
        &[("x-api-key", KEY), ("origin", "https://evil.example")],
    )
    .await
    .expect("a key opens it");
    assert_eq!(
        echo(&mut keyed, "keyed").await.as_deref(),
        Some("echo: keyed")
    );
}

#[tokio::test]
async fn on_a_preview_domain_a_links_cookie_is_taken_from_its_own_host_only() {
    let crate::exposed_ports::OnThePreviewDomain {
        server,
        sandbox,
        url,
        name,
        host,
        client,
    } = crate::exposed_ports::on_the_preview_domain().await;
    let listening = server.url.rsplit(':').next().unwrap().to_owned();
    let cookie = opened_cookie(&client, &url).await;
    let ws = format!("ws://127.0.0.1:{listening}/ws");
    // Another preview of the same domain is the same site, but not the same origin.
    let neighbour = format!(
        "http://{}:{listening}",
        sandboxd_core::ports::preview_host(id(&sandbox), 9000, "localhost")
    );
    let own = format!("http://{host}");
    for origin in [neighbour.as_str(), "https://evil.example"] {
        let refused = socket(
            &ws,
            &[("host", &host), ("cookie", &cookie), ("origin", origin)],
        )
        .await
        .err();
        assert_eq!(refused, Some(StatusCode::FORBIDDEN), "origin {origin}");
        let posted = client
            .post(format!("http://{host}/echo"))
            .header("cookie", &cookie)
            .header("origin", origin)
            .body("posted")
            .send()
            .await
            .unwrap();
        assert_eq!(posted.status(), StatusCode::FORBIDDEN, "origin {origin}");
    }
    let mut opened = socket(
        &ws,
        &[("host", &host), ("cookie", &cookie), ("origin", &own)],
    )
    .await
    .expect("its own host opens it");
    assert_eq!(
        echo(&mut opened, "mine").await.as_deref(),
        Some("echo: mine")
    );
    let posted = client
        .post(format!("http://{host}/echo"))
        .header("cookie", &cookie)
        .header("origin", &own)
        .body("posted")
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), StatusCode::OK);

    // A host with a trailing dot is the same preview host, never sandboxd's own routes.
    let dotted = client
        .get(format!("http://{host}/api/sandbox.templates"))
        .header("host", format!("{name}.:{listening}"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(dotted.status(), StatusCode::OK);
    assert_eq!(dotted.text().await.unwrap(), "hello from inside\n");
}

/// Headers that act on a whole origin are the app's to send on a host of its own, not
/// under a path of sandboxd's origin.
#[tokio::test]
async fn headers_that_act_on_a_whole_origin_are_dropped_under_a_path() {
    let (server, _sandbox, base) = serving().await;
    let answer = server
        .client
        .get(format!("{base}/origin-wide"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    for name in [
        "clear-site-data",
        "nel",
        "report-to",
        "reporting-endpoints",
        "strict-transport-security",
        "alt-svc",
    ] {
        assert!(!answer.headers().contains_key(name), "{name} passed");
    }
    let _: Value = answer.json().await.unwrap();
}

/// A key's own WebSocket to a preview is checked every second as `/sandbox-port`'s
/// are: it ends when the key is revoked; another key's goes on.
#[tokio::test]
async fn a_preview_websocket_opened_with_a_key_ends_when_the_key_is_revoked() {
    let (server, _sandbox, base) = serving().await;
    let (status, key) = server
        .post("apiKey.create", json!({"name": "preview"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{key}");
    let secret = key["secret"].as_str().unwrap();
    let ws = format!("{}/ws", base.replacen("http://", "ws://", 1));
    let mut revoked = socket(&ws, &[("x-api-key", secret)]).await.unwrap();
    let mut kept = socket(&ws, &[("x-api-key", KEY)]).await.unwrap();
    assert_eq!(echo(&mut revoked, "a").await.as_deref(), Some("echo: a"));
    let (status, body) = server
        .post("apiKey.revoke", json!({"keyId": key["keyId"]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while echo(&mut revoked, "b").await.is_some() {
        assert!(std::time::Instant::now() < deadline, "still open");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(echo(&mut kept, "c").await.as_deref(), Some("echo: c"));
}

/// No preview WebSocket outlives a session's longest life, whatever let it in.
#[tokio::test]
async fn a_preview_websocket_ends_at_a_sessions_longest_life() {
    let server = TestServer::start_with(|config| {
        config.session_max_lifetime_secs = 2;
    })
    .await;
    let (_server, _sandbox, base) = serving_on(server).await;
    let ws = format!("{}/ws", base.replacen("http://", "ws://", 1));
    let mut keyed = socket(&ws, &[("x-api-key", KEY)]).await.unwrap();
    assert_eq!(echo(&mut keyed, "a").await.as_deref(), Some("echo: a"));
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(echo(&mut keyed, "b").await, None, "ended at its lifetime");
}

/// Traffic through a public port counts against the preview's own bucket: a stranger
/// flooding it cannot get its exposer's keys refused.
#[tokio::test]
async fn a_public_previews_traffic_has_a_bucket_of_its_own() {
    let server = TestServer::start_with(|config| {
        config.rate_limit_per_second = 2;
        config.rate_limit_burst = 8;
    })
    .await;
    let sandbox = server.create(json!({"template": "base"})).await;
    crate::preview::start_app(&server, id(&sandbox)).await;
    let exposed = expose(&server, &sandbox, json!({"port": 8000, "public": true})).await;
    let url = exposed["url"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while plain().get(&url).send().await.unwrap().status() != StatusCode::OK {
        assert!(
            std::time::Instant::now() < deadline,
            "the app did not come up"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The exposer's bucket fills again.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let answers = futures_util::future::join_all((0..60).map(|_| plain().get(&url).send())).await;
    let limited = answers
        .iter()
        .filter(|a| {
            a.as_ref()
                .is_ok_and(|a| a.status() == StatusCode::TOO_MANY_REQUESTS)
        })
        .count();
    assert!(limited >= 10, "the preview is limited: {limited} of 60");
    let (status, body) = server.get("sandbox.templates", &[]).await;
    assert_eq!(status, StatusCode::OK, "the exposer's key is not: {body}");
}
