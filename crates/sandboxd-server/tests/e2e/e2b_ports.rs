//! A sandbox's other ports on the E2B domain (`<port>-<id>.<domain>`, E2B's
//! `get_host`): open to anyone for a sandbox created through E2B's API (E2B's
//! default), only with its traffic access token when it was made with
//! `allowPublicTraffic: false`, never to anyone for a sandbox of sandboxd's own API; the
//! app sees the host its mask names and never the token; a paused sandbox is resumed
//! by a request; a killed one's ports are gone.

use std::time::{Duration, Instant};

use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer};
use crate::pause::one;
use crate::preview::start_app;

const DOMAIN: &str = "e2b.localhost";

fn at(server: &TestServer, method: Method, host: &str, path: &str) -> RequestBuilder {
    server
        .client
        .request(method, format!("{}{path}", server.url))
        .header("host", format!("{host}.{DOMAIN}"))
}

/// A sandbox made through E2B's API with `network`: its id and traffic token.
async fn made(server: &TestServer, network: Value) -> (String, String) {
    made_with(server, json!({"network": network})).await
}

/// A sandbox made through E2B's API with `fields` besides the template and timeout.
async fn made_with(server: &TestServer, fields: Value) -> (String, String) {
    let mut body = json!({"templateID": "base", "timeout": 120});
    body.as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    let answer = at(server, Method::POST, "api", "/sandboxes")
        .header("X-API-Key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::CREATED);
    let answer: Value = answer.json().await.unwrap();
    (
        answer["sandboxID"].as_str().unwrap().to_owned(),
        answer["trafficAccessToken"].as_str().unwrap().to_owned(),
    )
}

/// Starts the preview tests' app on port 8000 and waits until it answers a key.
async fn serve_app(server: &TestServer, id: &str) {
    start_app(server, id).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let answer = at(server, Method::GET, &format!("8000-{id}"), "/headers")
            .header("X-API-Key", KEY)
            .send()
            .await
            .unwrap();
        if answer.status() == StatusCode::OK {
            return;
        }
        assert_eq!(
            answer.status(),
            StatusCode::BAD_GATEWAY,
            "while the app starts"
        );
        assert!(Instant::now() < deadline, "the app did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the app saw of a request: its headers, lower-cased names.
async fn seen(answer: reqwest::Response) -> Value {
    assert_eq!(answer.status(), StatusCode::OK);
    answer.json::<Value>().await.unwrap()["headers"].clone()
}

#[tokio::test]
async fn ports_are_public_private_with_the_token_or_closed_as_e2b_says() {
    let server = TestServer::start_with(|config| config.e2b_domain = Some(DOMAIN.into())).await;

    // E2B's default: anyone reaches the port, as the request's own host.
    let (public, _) = made(&server, json!({})).await;
    serve_app(&server, &public).await;
    let headers = seen(
        at(
            &server,
            Method::GET,
            &format!("8000-{public}"),
            "/headers?a=1",
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(headers["host"], format!("8000-{public}.{DOMAIN}"));
    // The root too.
    let root = at(&server, Method::GET, &format!("8000-{public}"), "/")
        .send()
        .await
        .unwrap();
    assert_eq!(root.status(), StatusCode::OK);
    assert_eq!(root.text().await.unwrap(), "hello from inside\n");

    // Private: nothing, a made-up token or another sandbox's is refused (403, E2B's
    // shape); its own token enters, and the app sees the mask, never the token.
    let (private, token) = made(
        &server,
        json!({"allowPublicTraffic": false, "maskRequestHost": "custom-host.example.com:${PORT}"}),
    )
    .await;
    serve_app(&server, &private).await;
    let (_, other_token) = made(&server, json!({"allowPublicTraffic": false})).await;
    let host = format!("8000-{private}");
    for token in [None, Some("made-up"), Some(other_token.as_str())] {
        let mut request = at(&server, Method::GET, &host, "/headers");
        if let Some(token) = token {
            request = request.header("e2b-traffic-access-token", token);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN, "{token:?}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["code"], 403, "{body}");
    }
    let headers = seen(
        at(&server, Method::GET, &host, "/headers")
            .header("e2b-traffic-access-token", &token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(headers["host"], "custom-host.example.com:8000");
    assert!(
        headers.get("e2b-traffic-access-token").is_none(),
        "{headers}"
    );
    assert!(headers.get("x-api-key").is_none(), "{headers}");

    // A sandbox of sandboxd's own API has no public ports on the domain.
    let own = server.create(json!({"template": "base"})).await;
    let own_id = own["sandboxId"].as_str().unwrap();
    serve_app(&server, own_id).await;
    let answer = at(&server, Method::GET, &format!("8000-{own_id}"), "/headers")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);

    // A bad mask makes nothing.
    let refused = at(&server, Method::POST, "api", "/sandboxes")
        .header("X-API-Key", KEY)
        .json(&json!({"templateID": "base", "network": {"maskRequestHost": "a b\r\nx: y"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("maskRequestHost"),
        "{body}"
    );

    // The path a client names on sandboxd's own host serves no port.
    let direct = server
        .client
        .get(format!("{}/e2b/ports/headers", server.url))
        .header("X-API-Key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_request_resumes_a_paused_sandbox_and_a_killed_ones_ports_are_gone() {
    let server = TestServer::start_with(|config| config.e2b_domain = Some(DOMAIN.into())).await;
    let (id, _) = made_with(&server, json!({"autoPause": true})).await;
    serve_app(&server, &id).await;
    let paused = at(
        &server,
        Method::POST,
        "api",
        &format!("/sandboxes/{id}/pause"),
    )
    .header("X-API-Key", KEY)
    .send()
    .await
    .unwrap();
    assert_eq!(paused.status(), StatusCode::NO_CONTENT);
    let sandbox = json!({"sandboxId": id});
    assert_eq!(one(&server, &sandbox).await["status"], "paused");

    let _ = seen(
        at(&server, Method::GET, &format!("8000-{id}"), "/headers")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(one(&server, &sandbox).await["status"], "running");

    // Past its fixed end (E2B's `on_timeout: pause`): the request finds it paused at its
    // end, resumes it, and it runs on with its timeout anew.
    let answer = at(
        &server,
        Method::POST,
        "api",
        &format!("/sandboxes/{id}/timeout"),
    )
    .header("X-API-Key", KEY)
    .json(&json!({"timeout": 1}))
    .send()
    .await
    .unwrap();
    assert_eq!(answer.status(), StatusCode::NO_CONTENT);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let _ = seen(
        at(&server, Method::GET, &format!("8000-{id}"), "/headers")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let shown: Value = at(&server, Method::GET, "api", &format!("/sandboxes/{id}"))
        .header("X-API-Key", KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["state"], "running", "{shown}");

    let killed = at(&server, Method::DELETE, "api", &format!("/sandboxes/{id}"))
        .header("X-API-Key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(killed.status(), StatusCode::NO_CONTENT);
    let answer = at(&server, Method::GET, &format!("8000-{id}"), "/headers")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn an_operator_can_open_no_port_to_anyone() {
    let server = TestServer::start_with(|config| {
        config.e2b_domain = Some(DOMAIN.into());
        config.e2b_public_ports = false;
    })
    .await;
    let (id, token) = made(&server, json!({"allowPublicTraffic": true})).await;
    let host = format!("8000-{id}");
    let answer = at(&server, Method::GET, &host, "/").send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    // The token still enters: nothing listens on the port yet, which the app's
    // absence answers.
    let answer = at(&server, Method::GET, &host, "/")
        .header("e2b-traffic-access-token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_GATEWAY);
}
