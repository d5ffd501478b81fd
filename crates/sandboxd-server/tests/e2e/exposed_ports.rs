//! Exposed ports: `sandbox.exposePort` gives a preview URL that works without a key —
//! a signed link (its token in the address once, then a cookie for that preview only),
//! or nothing at all for a public port — until it expires, is replaced, unexposed, its
//! sandbox killed or its key revoked; every step recorded in the audit log. On a preview
//! domain each port has a host of its own, where nothing of sandboxd's is served.

use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use reqwest::StatusCode;
use reqwest::redirect::Policy;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::harness::{KEY, TestServer, id};
use crate::preview::{serving, serving_on};

pub(crate) fn plain() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

pub(crate) async fn expose(server: &TestServer, sandbox: &Value, body: Value) -> Value {
    let mut body = body;
    body["sandboxId"] = json!(id(sandbox));
    let (status, exposed) = server.post("sandbox.exposePort", body).await;
    assert_eq!(status, StatusCode::OK, "{exposed}");
    exposed
}

/// The `name=value` of a `Set-Cookie` header and its attributes.
pub(crate) fn cookie_of(response: &reqwest::Response) -> (String, String) {
    let set = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    let (pair, attributes) = set.split_once(';').unwrap();
    (pair.to_owned(), attributes.to_owned())
}

async fn message(response: reqwest::Response) -> String {
    let body: Value = response.json().await.unwrap();
    body["message"].as_str().unwrap_or_default().to_owned()
}

/// What a WebSocket answers to `text`; `None` once it is closed.
pub(crate) async fn echo<S>(socket: &mut S, text: &str) -> Option<String>
where
    S: futures_util::Sink<Message> + futures_util::Stream<Item = Result<Message, WsError>> + Unpin,
{
    socket.send(Message::text(text)).await.ok()?;
    match tokio::time::timeout(Duration::from_secs(5), socket.next()).await {
        Ok(Some(Ok(Message::Text(answer)))) => Some(answer.to_string()),
        Ok(_) => None,
        Err(_) => panic!("no answer from the socket, and not closed"),
    }
}

#[tokio::test]
async fn a_signed_link_opens_a_private_port_once_then_its_cookie_keeps_it_open() {
    let (server, sandbox, base) = serving().await;
    let exposed = expose(&server, &sandbox, json!({"port": 8000})).await;
    assert_eq!(exposed["public"], false);
    let url = exposed["url"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("{base}/?sandboxd_link=")),
        "{url} under {base}"
    );

    // Opened by a script (which may keep no cookie): served at once, the cookie offered.
    let fetched = plain().get(&url).send().await.unwrap();
    assert_eq!(fetched.status(), StatusCode::OK);
    assert!(fetched.headers().contains_key("set-cookie"));
    assert_eq!(fetched.text().await.unwrap(), "hello from inside\n");

    // Opened in a browser: the token goes into a cookie for this preview and out of
    // the address.
    let opened = plain()
        .get(&url)
        .header("sec-fetch-mode", "navigate")
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), StatusCode::SEE_OTHER);
    let location = opened.headers()["location"].to_str().unwrap().to_owned();
    let prefix = base.strip_prefix(&server.url).unwrap();
    assert_eq!(location, format!("{prefix}/"));
    let (cookie, attributes) = cookie_of(&opened);
    assert!(cookie.starts_with("sandboxd_link="), "{cookie}");
    for attribute in [
        &format!("Path={prefix}/") as &str,
        "HttpOnly",
        "Secure",
        "SameSite=None",
        "Max-Age=",
    ] {
        assert!(
            attributes.contains(attribute),
            "{attribute} in {attributes}"
        );
    }
    let page = plain()
        .get(format!("{base}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.text().await.unwrap(), "hello from inside\n");

    // The app sees neither the link's cookie nor its token.
    let seen: Value = plain()
        .get(format!("{base}/headers?a=1"))
        .header("cookie", format!("{cookie}; theme=dark"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(seen["headers"]["cookie"], "theme=dark");
    let token = cookie.strip_prefix("sandboxd_link=").unwrap();
    let posted = plain()
        .post(format!("{base}/echo?sandboxd_link={token}&b=2"))
        .body("posted")
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), StatusCode::OK);
    assert!(posted.headers().contains_key("set-cookie"));
    assert_eq!(posted.text().await.unwrap(), "posted");
    let seen: Value = plain()
        .get(format!("{base}/headers?sandboxd_link={token}&b=2"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(seen["path"], "/headers?b=2", "the app never sees the token");
    let again = plain()
        .get(format!("{base}/headers?sandboxd_link={token}&b=2"))
        .header("sec-fetch-mode", "navigate")
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        again.headers()["location"],
        format!("{prefix}/headers?b=2").as_str(),
        "a GET with the token is sent on without it"
    );

    // A WebSocket client passes the token in its address; it is not redirected.
    let ws = format!(
        "{}/ws?sandboxd_link={token}",
        base.replacen("http://", "ws://", 1)
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(ws).await.unwrap();
    socket.send(Message::text("over a link")).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), socket.next())
        .await
        .expect("an answer")
        .unwrap()
        .unwrap();
    assert_eq!(answer, Message::text("echo: over a link"));
    let _ = socket.close(None).await;

    // Nothing, a wrong token, another port's cookie.
    let bare = plain().get(format!("{base}/")).send().await.unwrap();
    assert_eq!(bare.status(), StatusCode::UNAUTHORIZED);
    let forged = plain()
        .get(format!("{base}/?sandboxd_link={}", "0".repeat(64)))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    assert!(message(forged).await.contains("expired or was revoked"));
    let other_port = plain()
        .get(base.replace("/8000", "/8001") + "/")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(other_port.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_public_port_needs_nothing_until_it_is_unexposed() {
    let (server, sandbox, base) = serving().await;
    let ws = format!("{}/ws", base.replacen("http://", "ws://", 1));
    let mut keyed = ws.as_str().into_client_request().unwrap();
    keyed
        .headers_mut()
        .insert("x-api-key", KEY.parse().unwrap());
    let (mut keyed_socket, _) = tokio_tungstenite::connect_async(keyed).await.unwrap();
    let private = expose(&server, &sandbox, json!({"port": 8000})).await;
    let exposed = expose(&server, &sandbox, json!({"port": 8000, "public": true})).await;
    assert_eq!(exposed["public"], true);
    assert_eq!(
        exposed["url"],
        format!("{base}/"),
        "a public URL carries no token"
    );

    let page = plain().get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.text().await.unwrap(), "hello from inside\n");
    // A WebSocket opened through the public port (and one opened with a key while the
    // port was not exposed).
    let (mut public_socket, _) = tokio_tungstenite::connect_async(ws.as_str()).await.unwrap();
    for socket in [&mut public_socket, &mut keyed_socket] {
        assert_eq!(echo(socket, "before").await, Some("echo: before".into()));
    }

    // Exposing again replaced the private exposure: one port listed.
    let (status, listed) = server
        .get("sandbox.ports", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["public"], true);

    let (status, removed) = server
        .post(
            "sandbox.unexposePort",
            json!({"sandboxId": id(&sandbox), "port": 8000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{removed}");
    assert_eq!(removed, json!({"port": 8000, "removed": true}));
    let gone = plain().get(format!("{base}/")).send().await.unwrap();
    assert_eq!(gone.status(), StatusCode::UNAUTHORIZED);
    // The public socket ends with the exposure (within its recheck); the keyed one lives.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let Some(_) = echo(&mut public_socket, "after").await else {
            break;
        };
        assert!(
            Instant::now() < deadline,
            "the public socket outlived its exposure"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        echo(&mut keyed_socket, "after").await,
        Some("echo: after".into())
    );
    let old_link = plain()
        .get(private["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(old_link.status(), StatusCode::UNAUTHORIZED);
    let (_, again) = server
        .post(
            "sandbox.unexposePort",
            json!({"sandboxId": id(&sandbox), "port": 8000}),
        )
        .await;
    assert_eq!(again["removed"], false);
    // A key still reaches the port.
    let keyed = plain()
        .get(format!("{base}/"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(keyed.status(), StatusCode::OK);

    // Recorded, with the port and its access.
    let (_, audit) = server.get("audit.list", &[]).await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["resourceId"] == json!(id(&sandbox)))
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions
            .iter()
            .filter(|a| **a == "sandbox.exposePort")
            .count(),
        2,
        "{actions:?}"
    );
    assert_eq!(
        actions
            .iter()
            .filter(|a| **a == "sandbox.unexposePort")
            .count(),
        1,
        "{actions:?}"
    );
}

#[tokio::test]
async fn links_end_when_they_expire_when_the_sandbox_dies_and_with_their_key() {
    let (server, sandbox, base) = serving().await;

    // Expired.
    let brief = expose(&server, &sandbox, json!({"port": 8000, "ttlSeconds": 1})).await;
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let expired = plain()
        .get(brief["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(expired.status(), StatusCode::UNAUTHORIZED);
    let (_, listed) = server
        .get("sandbox.ports", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(listed, json!([]), "an expired exposure is not listed");

    // A key of its own exposes, then is revoked: its link ends with it. A key that
    // expires gives a link that ends no later.
    let (status, key) = server
        .post(
            "apiKey.create",
            json!({"name": "exposer", "expiresInMs": 600_000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{key}");
    let secret = key["secret"].as_str().unwrap();
    let (status, by_key) = server
        .post_with_key(
            "sandbox.exposePort",
            Some(secret),
            json!({"sandboxId": id(&sandbox), "port": 8000, "ttlSeconds": 604_800}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{by_key}");
    assert!(
        by_key["expiresAt"].as_str().unwrap() <= key["expiresAt"].as_str().unwrap(),
        "{by_key} outlives {key}"
    );
    let link = by_key["url"].as_str().unwrap().to_owned();
    assert_eq!(
        plain().get(&link).send().await.unwrap().status(),
        StatusCode::OK
    );
    let (status, revoked) = server
        .post("apiKey.revoke", json!({"keyId": key["keyId"]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    let after = plain().get(&link).send().await.unwrap();
    assert_eq!(after.status(), StatusCode::UNAUTHORIZED);
    assert!(message(after).await.contains("no longer valid"));

    // Killed: its ports go with it.
    let public = expose(&server, &sandbox, json!({"port": 8000, "public": true})).await;
    let (status, _) = server
        .post("sandbox.kill", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let dead = plain()
        .get(public["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(dead.status(), StatusCode::UNAUTHORIZED);
    let (_, listed) = server
        .get("sandbox.ports", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(listed, json!([]));
    let (status, refused) = server
        .post(
            "sandbox.exposePort",
            json!({"sandboxId": id(&sandbox), "port": 8000}),
        )
        .await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED, "{refused}");
    let _ = base;
}

#[tokio::test]
async fn exposing_is_bounded_and_kept_to_the_sandboxs_organization() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    for (body, field) in [
        (json!({"port": 0}), "port"),
        (json!({"port": 65_536}), "port"),
        (json!({"port": 80, "ttlSeconds": 0}), "ttlSeconds"),
        (json!({"port": 80, "ttlSeconds": 604_801}), "ttlSeconds"),
    ] {
        let mut body = body;
        body["sandboxId"] = json!(id(&sandbox));
        let (status, refused) = server.post("sandbox.exposePort", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        assert_eq!(refused["issues"][0]["path"], field, "{refused}");
    }
    for port in 1..=32 {
        expose(&server, &sandbox, json!({"port": port})).await;
    }
    let (status, refused) = server
        .post(
            "sandbox.exposePort",
            json!({"sandboxId": id(&sandbox), "port": 33}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    // Exposing one of the 32 again is a replacement, not a 33rd.
    expose(&server, &sandbox, json!({"port": 7, "public": true})).await;

    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let stranger = other["apiKey"]["secret"].as_str().unwrap();
    for (procedure, body) in [
        (
            "sandbox.exposePort",
            json!({"sandboxId": id(&sandbox), "port": 8000, "public": true}),
        ),
        (
            "sandbox.unexposePort",
            json!({"sandboxId": id(&sandbox), "port": 7}),
        ),
    ] {
        let (status, answer) = server.post_with_key(procedure, Some(stranger), body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{procedure}: {answer}");
    }
    let (status, _) = server
        .get_with_key("sandbox.ports", stranger, &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, listed) = server
        .get("sandbox.ports", &[("sandboxId", id(&sandbox))])
        .await;
    assert_eq!(listed.as_array().unwrap().len(), 32);

    // A handle that names nothing, a port that is not one.
    let nothing = plain()
        .get(format!("{}/preview/not-a-handle/8000/", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(nothing.status(), StatusCode::NOT_FOUND);
    let path = sandboxd_core::ports::preview_path(id(&sandbox), 7);
    let bad_port = plain()
        .get(format!("{}{}", server.url, path.replace("/7/", "/70000/")))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_port.status(), StatusCode::BAD_REQUEST);
}

/// A port 8000 of a sandbox serving the test app, on the preview domain `localhost`,
/// exposed with a link.
pub(crate) struct OnThePreviewDomain {
    pub server: TestServer,
    pub sandbox: Value,
    /// The link.
    pub url: String,
    /// The preview's host name, and with the server's port.
    pub name: String,
    pub host: String,
    /// A client that takes the preview's host to the server (`*.localhost` is
    /// loopback: browsers know it, this client is told), following no redirect.
    pub client: reqwest::Client,
}

pub(crate) async fn on_the_preview_domain() -> OnThePreviewDomain {
    let server =
        TestServer::start_with(|config| config.preview_domain = Some("localhost".into())).await;
    let (server, sandbox, _) = serving_on(server).await;
    let exposed = expose(&server, &sandbox, json!({"port": 8000})).await;
    let url = exposed["url"].as_str().unwrap().to_owned();
    let listening = server.url.rsplit(':').next().unwrap().to_owned();
    let name = sandboxd_core::ports::preview_host(id(&sandbox), 8000, "localhost");
    let host = format!("{name}:{listening}");
    let address: std::net::SocketAddr = format!("127.0.0.1:{listening}").parse().unwrap();
    let client = reqwest::Client::builder()
        .redirect(Policy::none())
        .resolve(&name, address)
        .build()
        .unwrap();
    OnThePreviewDomain {
        server,
        sandbox,
        url,
        name,
        host,
        client,
    }
}

#[tokio::test]
async fn on_a_preview_domain_a_port_is_a_host_of_its_own() {
    let OnThePreviewDomain {
        server,
        url,
        host,
        client,
        ..
    } = on_the_preview_domain().await;
    assert!(
        url.starts_with(&format!("http://{host}/?sandboxd_link=")),
        "{url}"
    );
    let listening = server.url.rsplit(':').next().unwrap().to_owned();

    let opened = client
        .get(&url)
        .header("sec-fetch-mode", "navigate")
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), StatusCode::SEE_OTHER);
    assert_eq!(opened.headers()["location"], "/");
    let (cookie, attributes) = cookie_of(&opened);
    assert!(
        attributes.contains("Path=/;") && attributes.contains("SameSite=Lax"),
        "{attributes}"
    );
    assert!(!attributes.contains("Secure"), "plain HTTP: {attributes}");

    // The app sees its own paths, unprefixed; its pages are not sandboxed (their origin
    // is their own).
    let page = client
        .get(format!("http://{host}/headers?x=1"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(!page.headers().contains_key("content-security-policy"));
    let seen: Value = page.json().await.unwrap();
    assert_eq!(seen["path"], "/headers?x=1");
    assert!(
        seen["headers"].get("x-forwarded-prefix").is_none(),
        "{seen}"
    );
    assert!(seen["headers"].get("cookie").is_none(), "{seen}");

    // Nothing of sandboxd's is served on a preview host: its API path is the app's.
    let api = client
        .get(format!("http://{host}/api/sandbox.templates"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::OK);
    assert_eq!(api.text().await.unwrap(), "hello from inside\n");
    let bare = client.get(format!("http://{host}/")).send().await.unwrap();
    assert_eq!(bare.status(), StatusCode::UNAUTHORIZED);
    let nothing = client
        .get(format!("http://{host}/"))
        .header("host", format!("8000-nothandle.localhost:{listening}"))
        .send()
        .await
        .unwrap();
    assert_eq!(nothing.status(), StatusCode::NOT_FOUND);
    // sandboxd itself still answers on its own address.
    let (status, _) = server.get("sandbox.templates", &[]).await;
    assert_eq!(status, StatusCode::OK);
}
