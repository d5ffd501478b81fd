//! The dashboard's sessions: an API key exchanged once for an HttpOnly, SameSite=Strict
//! cookie; requests from other origins and mutations without the CSRF token refused;
//! the session follows its key (revoked: signed out) and ends at sign-out, WebSockets
//! included.

use futures_util::StreamExt as _;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::harness::{KEY, TestServer, id};

struct Browser<'a> {
    server: &'a TestServer,
    origin: String,
    cookie: String,
    csrf: String,
}

async fn sign_in<'a>(server: &'a TestServer, key: &str) -> Browser<'a> {
    let response = server
        .client
        .post(format!("{}/ui/session", server.url))
        .header("origin", &server.url)
        .json(&json!({"key": key}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let set_cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(flag), "{set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "not over TLS: {set_cookie}");
    assert_eq!(response.headers()["cache-control"], "no-store");
    let body: Value = response.json().await.unwrap();
    assert!(!body.to_string().contains(key), "the key is not echoed");
    Browser {
        server,
        origin: server.url.clone(),
        cookie: set_cookie.split(';').next().unwrap().to_owned(),
        csrf: body["csrf"].as_str().unwrap().to_owned(),
    }
}

impl Browser<'_> {
    async fn send(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let response = request
            .header("cookie", &self.cookie)
            .header("origin", &self.origin)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let url = format!("{}{path}", self.server.url);
        self.send(self.server.client.get(url)).await
    }

    async fn post(&self, procedure: &str, body: Value, csrf: Option<&str>) -> (StatusCode, Value) {
        let url = format!("{}/api/{procedure}", self.server.url);
        let mut request = self.server.client.post(url).json(&body);
        if let Some(csrf) = csrf {
            request = request.header("x-sandboxd-csrf", csrf);
        }
        self.send(request).await
    }

    async fn terminal(&self, sandbox_id: &str, origin: &str) -> Option<Message> {
        let url = format!(
            "{}/sandbox-pty?sandboxId={sandbox_id}",
            self.server.url.replacen("http", "ws", 1)
        );
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("cookie", self.cookie.parse().unwrap());
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
        let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        socket.next().await.and_then(Result::ok)
    }
}

#[tokio::test]
async fn a_key_is_exchanged_for_a_session_that_follows_the_key() {
    let server = TestServer::start().await;
    let (status, made) = server
        .post("apiKey.create", json!({"name": "browser"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let key = made["secret"].as_str().unwrap().to_owned();

    // A wrong key, and a sign-in from another site's page, get no cookie.
    let wrong = server
        .client
        .post(format!("{}/ui/session", server.url))
        .header("origin", &server.url)
        .json(&json!({"key": "sbx_not_a_key_of_this_server_000000000000"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.headers().get("set-cookie").is_none());
    let elsewhere = server
        .client
        .post(format!("{}/ui/session", server.url))
        .header("origin", "http://attacker.example")
        .json(&json!({"key": key}))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), StatusCode::FORBIDDEN);
    assert!(elsewhere.headers().get("set-cookie").is_none());

    let browser = sign_in(&server, &key).await;
    let (status, me) = browser.get("/ui/session").await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["keyId"], made["keyId"]);
    let (status, listed) = browser
        .get(&format!(
            "/api/sandbox.list?environmentId={}",
            server.env_id
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");

    // Mutations need the CSRF token, and the page's own origin.
    let create = json!({"environmentId": server.env_id, "template": "python"});
    let (status, body) = browser.post("sandbox.create", create.clone(), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = browser
        .post("sandbox.create", create.clone(), Some("wrong"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let csrf = browser.csrf.clone();
    let forged = Browser {
        origin: "http://attacker.example".into(),
        csrf: csrf.clone(),
        cookie: browser.cookie.clone(),
        server: &server,
    };
    let (status, _) = forged
        .post("sandbox.create", create.clone(), Some(&csrf))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "another origin");
    let (status, sandbox) = browser.post("sandbox.create", create, Some(&csrf)).await;
    assert_eq!(status, StatusCode::OK, "{sandbox}");

    // The terminal opens from the page's origin only.
    let ready = browser.terminal(id(&sandbox), &server.url).await;
    assert!(
        matches!(&ready, Some(Message::Text(text)) if text.contains("ready")),
        "{ready:?}"
    );
    let refused = browser
        .terminal(id(&sandbox), "http://attacker.example")
        .await;
    assert!(
        matches!(&refused, Some(Message::Close(Some(frame))) if u16::from(frame.code) == 4001),
        "{refused:?}"
    );

    // Revoking the key signs its sessions out.
    let (status, _) = server
        .post("apiKey.revoke", json!({"keyId": made["keyId"]}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = browser.get("/ui/session").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = browser
        .get(&format!("/api/sandbox.one?sandboxId={}", id(&sandbox)))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn signing_out_ends_the_session() {
    let server = TestServer::start().await;
    let browser = sign_in(&server, KEY).await;
    let sign_out = |csrf: Option<String>| {
        let mut request = server.client.delete(format!("{}/ui/session", server.url));
        if let Some(csrf) = csrf {
            request = request.header("x-sandboxd-csrf", csrf);
        }
        request
            .header("cookie", &browser.cookie)
            .header("origin", &browser.origin)
            .send()
    };
    assert_eq!(
        sign_out(None).await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    let out = sign_out(Some(browser.csrf.clone())).await.unwrap();
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    assert!(
        out.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let (status, _) = browser.get("/ui/session").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Behind a TLS proxy the cookie is Secure.
    let response = server
        .client
        .post(format!("{}/ui/session", server.url))
        .header("x-forwarded-proto", "https")
        .json(&json!({"key": KEY}))
        .send()
        .await
        .unwrap();
    assert!(
        response.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("; Secure")
    );
}

#[tokio::test]
async fn the_dashboard_is_served_under_a_strict_content_security_policy() {
    let server = TestServer::start().await;
    let page = server
        .client
        .get(format!("{}/", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    assert!(page.text().await.unwrap().contains("/ui/assets/app.js"));
    let script = server
        .client
        .get(format!("{}/ui/assets/app.js", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), StatusCode::OK);
    assert!(
        script.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    let tag = script.headers()["etag"].clone();
    let again = server
        .client
        .get(format!("{}/ui/assets/app.js", server.url))
        .header("if-none-match", tag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    for missing in ["/ui/assets/nothing.js", "/ui/assets/..%2F..%2FCargo.toml"] {
        let answer = server
            .client
            .get(format!("{}{missing}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NOT_FOUND, "{missing}");
    }
}
