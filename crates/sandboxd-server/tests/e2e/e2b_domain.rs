//! E2B's API on an `E2B_DOMAIN` (`e2b_domain`): `api.<domain>` is the control plane,
//! `49983-<sandbox id>.<domain>` the sandbox's daemon (the host, not a header, names
//! the sandbox), signed file URLs work without any header and only as signed, and
//! nothing of sandboxd's own is served on those hosts. (E2B's own SDK drives the same
//! over TLS: scripts/test-e2b-python.sh.)

use reqwest::{Method, RequestBuilder, StatusCode};
use sandboxd_core::e2b::signed::{FileOperation, file_signature};
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer};

const DOMAIN: &str = "e2b.localhost";

/// A request to `host` (under the domain) at the test server.
fn at(server: &TestServer, method: Method, host: &str, path: &str) -> RequestBuilder {
    server
        .client
        .request(method, format!("{}{path}", server.url))
        .header("host", format!("{host}.{DOMAIN}"))
}

async fn made(server: &TestServer) -> (String, String) {
    let answer = at(server, Method::POST, "api", "/v2/sandboxes")
        .header("X-API-Key", KEY)
        .json(&json!({"templateID": "base", "timeout": 120, "allow_internet_access": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::CREATED);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["domain"], DOMAIN, "{answer}");
    let id = answer["sandboxID"].as_str().unwrap().to_owned();
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
        "a host name carries the id as it is: {id}"
    );
    (id, answer["envdAccessToken"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn the_domains_hosts_are_the_control_plane_and_each_sandboxs_daemon() {
    let server = TestServer::start_with(|config| config.e2b_domain = Some(DOMAIN.into())).await;
    let (id, token) = made(&server).await;
    let (other, _) = made(&server).await;
    let shown: Value = at(&server, Method::GET, "api", &format!("/sandboxes/{id}"))
        .header("X-API-Key", KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["sandboxID"], id.as_str());
    assert_eq!(shown["domain"], DOMAIN);
    // A fully qualified host (a trailing dot) is the same host, not sandboxd's routes.
    let dotted = server
        .client
        .get(format!("{}/sandboxes/{id}", server.url))
        .header("host", format!("api.{DOMAIN}."))
        .header("X-API-Key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(dotted.status(), StatusCode::OK);
    let dotted: Value = dotted.json().await.unwrap();
    assert_eq!(dotted["sandboxID"], id.as_str(), "{dotted}");

    // The daemon's host names the sandbox: a header naming another is not heeded.
    let daemon = format!("49983-{id}");
    let written = at(&server, Method::POST, &daemon, "/files?path=/tmp/a.txt")
        .header("X-Access-Token", &token)
        .header("E2b-Sandbox-Id", &other)
        .body("from the domain")
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), StatusCode::OK);
    let read = at(&server, Method::GET, &daemon, "/files?path=/tmp/a.txt")
        .header("X-Access-Token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    assert_eq!(read.text().await.unwrap(), "from the domain");
    let health = at(&server, Method::GET, &daemon, "/health")
        .header("X-Access-Token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::NO_CONTENT);
    // The token of one sandbox does not open another's host.
    let elsewhere = at(&server, Method::GET, &format!("49983-{other}"), "/health")
        .header("X-Access-Token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), StatusCode::UNAUTHORIZED);

    // Nothing of sandboxd's own on these hosts; other names under the domain are 404.
    for (host, path) in [
        ("api", "/api/sandbox.templates"),
        (daemon.as_str(), "/api/sandbox.templates"),
        ("www", "/sandboxes"),
    ] {
        let answer = at(&server, Method::GET, host, path)
            .header("X-API-Key", KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NOT_FOUND, "{host}{path}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["code"], 404, "{body}");
    }
    // Other hosts are sandboxd's as ever.
    let (status, _) = server.get("sandbox.templates", &[]).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_signed_file_url_works_without_headers_and_only_as_signed() {
    let server = TestServer::start_with(|config| config.e2b_domain = Some(DOMAIN.into())).await;
    let (id, token) = made(&server).await;
    let daemon = format!("49983-{id}");
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let url = |path: &str, operation, expires: Option<i64>, token: &str| {
        let signature = file_signature(path, operation, "user", token, expires);
        let mut query = format!(
            "/files?path={path}&username=user&signature={}",
            urlencode(&signature)
        );
        if let Some(at) = expires {
            query.push_str(&format!("&signature_expiration={at}"));
        }
        query
    };

    let write = url(
        "/tmp/signed.txt",
        FileOperation::Write,
        Some(now_s + 60),
        &token,
    );
    let written = at(&server, Method::POST, &daemon, &write)
        .body("signed bytes")
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), StatusCode::OK);
    let read = url("/tmp/signed.txt", FileOperation::Read, None, &token);
    let got = at(&server, Method::GET, &daemon, &read)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(got.text().await.unwrap(), "signed bytes");

    let refused = |answer: reqwest::Response| async move {
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
        answer.json::<Value>().await.unwrap()
    };
    // Expired: E2B's exact answer.
    let expired = url(
        "/tmp/signed.txt",
        FileOperation::Read,
        Some(now_s - 120),
        &token,
    );
    let body = refused(
        at(&server, Method::GET, &daemon, &expired)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        body,
        json!({"code": 401, "message": "signature is already expired"})
    );
    // A read URL does not write; a URL for one path does not read another; a URL for
    // one sandbox does not open another; a made-up token signs nothing.
    let _ = refused(
        at(&server, Method::POST, &daemon, &read)
            .body("overwritten")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let other_path = read.replace("path=/tmp/signed.txt", "path=/etc/passwd");
    let _ = refused(
        at(&server, Method::GET, &daemon, &other_path)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let (other, _) = made(&server).await;
    let _ = refused(
        at(&server, Method::GET, &format!("49983-{other}"), &read)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let forged = url("/tmp/signed.txt", FileOperation::Read, None, "key.madeup");
    let _ = refused(
        at(&server, Method::GET, &daemon, &forged)
            .send()
            .await
            .unwrap(),
    )
    .await;
    // A read URL of a path holding `:` is no write URL of a shorter path for a user
    // that holds the rest (the same bytes signed), even with a header naming a user.
    let colons = file_signature(
        "/tmp/signed.txt:write:b",
        FileOperation::Read,
        "",
        &token,
        None,
    );
    let as_write = format!(
        "/files?path=/tmp/signed.txt&username={}&signature={}",
        urlencode("b:read:"),
        urlencode(&colons)
    );
    let _ = refused(
        at(&server, Method::POST, &daemon, &as_write)
            .header("authorization", "Basic dXNlcjo=")
            .body("forged")
            .send()
            .await
            .unwrap(),
    )
    .await;
    // The file is as the signed write left it.
    let got = at(&server, Method::GET, &daemon, &read)
        .send()
        .await
        .unwrap();
    assert_eq!(got.text().await.unwrap(), "signed bytes");

    // A revoked key's URLs end with it.
    let (status, key) = server
        .post("apiKey.create", json!({"name": "signer"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{key}");
    let connected: Value = at(
        &server,
        Method::POST,
        "api",
        &format!("/sandboxes/{id}/connect"),
    )
    .header("X-API-Key", key["secret"].as_str().unwrap())
    .json(&json!({"timeout": 120}))
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let theirs = url(
        "/tmp/signed.txt",
        FileOperation::Read,
        None,
        connected["envdAccessToken"].as_str().unwrap(),
    );
    let got = at(&server, Method::GET, &daemon, &theirs)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    let (status, _) = server
        .post("apiKey.revoke", json!({"keyId": key["keyId"]}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let _ = refused(
        at(&server, Method::GET, &daemon, &theirs)
            .send()
            .await
            .unwrap(),
    )
    .await;
}

/// A signature in a query: base64's `+`, `/` and `=` escaped.
fn urlencode(text: &str) -> String {
    text.replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D")
}
