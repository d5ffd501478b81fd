//! The egress proxy against a pretend internet: web servers on 127.0.0.2 (the host's
//! loopback, which the test's `[egress] allowed_networks` opens for that address only)
//! stand for `allowed.test`, `api.allowed.test` and `blocked.test`, named through
//! `[egress] hosts`. Programs in an `allowlist` sandbox reach what its list allows, by
//! CONNECT and by absolute-form requests, and nothing else.

use std::net::SocketAddr;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::harness::{TestServer, id};

/// The pretend internet's address.
pub(crate) const FAR: &str = "127.0.0.2";

/// A web server answering every request with `hello from the pretend internet`, then
/// the request's head as it arrived (so a test sees what the proxy sent on).
pub(crate) async fn pretend_internet() -> SocketAddr {
    let listener = TcpListener::bind((FAR, 0))
        .await
        .expect("127.0.0.2 is loopback");
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let body = format!(
                    "hello from the pretend internet\n{}",
                    String::from_utf8_lossy(&head)
                );
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    address
}

pub(crate) async fn server_with_pretend_names() -> TestServer {
    server_with_pretend_names_and(|_| {}).await
}

async fn server_with_pretend_names_and(
    tweak: impl FnOnce(&mut sandboxd_server::Config),
) -> TestServer {
    TestServer::start_with(|config| {
        tweak(config);
        let mut hosts: std::collections::BTreeMap<String, String> = [
            "allowed.test",
            "api.allowed.test",
            "deep.api.allowed.test",
            "blocked.test",
        ]
        .map(|name| (name.to_owned(), FAR.to_owned()))
        .into();
        // A name that resolves to the host's loopback, which no sandbox may reach.
        hosts.insert("loop.test".into(), "127.0.0.1".into());
        config.egress.hosts = hosts;
        config.egress.allowed_networks = vec![format!("{FAR}/32")];
    })
    .await
}

pub(crate) async fn sh(server: &TestServer, sandbox: &Value, cmd: &str) -> (i64, String) {
    let out = server.exec(sandbox, cmd).await;
    let text = format!(
        "{}{}",
        out["stdout"].as_str().unwrap_or_default(),
        out["stderr"].as_str().unwrap_or_default()
    );
    (out["exitCode"].as_i64().unwrap_or(-1), text)
}

#[tokio::test]
async fn programs_reach_the_allowed_hosts_through_the_proxy_and_nothing_else() {
    let far = pretend_internet().await;
    let port = far.port();
    let server = server_with_pretend_names().await;
    let sandbox = allowlisted(
        &server,
        json!([
            format!("allowed.test:{port}"),
            format!("*.api.allowed.test:{port}"),
            format!("loop.test:{port}")
        ]),
    )
    .await;

    // An absolute-form request, as curl sends plain HTTP through HTTP_PROXY.
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS http://allowed.test:{port}/plain"),
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("hello from the pretend internet\nGET /plain HTTP/1.1\r\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("host: allowed.test:{port}"))
            || out.contains(&format!("Host: allowed.test:{port}")),
        "{out}"
    );
    assert!(
        !out.to_ascii_lowercase().contains("proxy-connection"),
        "hop-by-hop headers stay: {out}"
    );

    // A tunnel (CONNECT), as HTTPS always goes.
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS --proxytunnel http://allowed.test:{port}/tunnelled"),
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("GET /tunnelled HTTP/1.1"), "{out}");

    // Python's standard library reads the same variables.
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("python3 -c \"import urllib.request; print(urllib.request.urlopen('http://deep.api.allowed.test:{port}/py').read().decode())\""),
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("GET /py HTTP/1.1"),
        "a wildcard covers names two labels below: {out}"
    );

    // Refusals: not listed, the bare name of a wildcard, an address, a name that
    // resolves to loopback, a port not listed.
    for (url, why) in [
        (
            format!("http://blocked.test:{port}/"),
            "not in the sandbox's egress list",
        ),
        (
            format!("http://api.allowed.test:{port}/"),
            "not in the sandbox's egress list",
        ),
        (format!("http://{FAR}:{port}/"), "an IP address"),
        (format!("http://loop.test:{port}/"), "loopback"),
        (
            format!("http://allowed.test:{}/", port.wrapping_add(1)),
            "not in the sandbox's egress list",
        ),
    ] {
        let (code, out) = sh(
            &server,
            &sandbox,
            &format!("curl -sS -w ' %{{http_code}}' {url}"),
        )
        .await;
        assert_eq!(code, 0, "{url}: {out}");
        assert!(out.ends_with(" 403"), "{url}: {out}");
        assert!(out.contains(why), "{url}: {out}");
    }
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS --proxytunnel http://blocked.test:{port}/"),
    )
    .await;
    assert_ne!(code, 0, "a refused tunnel fails: {out}");
    assert!(out.contains("403"), "{out}");

    // Without the proxy there is no way out: no name resolves and no interface leads
    // anywhere (127.0.0.2 inside is the sandbox's own loopback).
    for cmd in [
        format!("curl -sS --noproxy '*' --max-time 5 http://allowed.test:{port}/"),
        format!("curl -sS --noproxy '*' --max-time 5 http://{FAR}:{port}/"),
    ] {
        let (code, out) = sh(&server, &sandbox, &cmd).await;
        assert_ne!(code, 0, "{cmd}: {out}");
        assert!(!out.contains("pretend internet"), "{cmd}: {out}");
    }

    // A new list holds for the next connection.
    let (status, _) = server
        .post(
            "sandbox.setEgress",
            json!({"sandboxId": id(&sandbox), "allow": [format!("blocked.test:{port}")]}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK);
    let (_, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS -w ' %{{http_code}}' http://blocked.test:{port}/now"),
    )
    .await;
    assert!(
        out.contains("GET /now HTTP/1.1") && out.ends_with(" 200"),
        "{out}"
    );
    let (_, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS -w ' %{{http_code}}' http://allowed.test:{port}/"),
    )
    .await;
    assert!(out.ends_with(" 403"), "{out}");
}

#[tokio::test]
async fn an_internet_sandbox_has_no_proxy_and_an_isolated_one_no_way_out() {
    let far = pretend_internet().await;
    let server = server_with_pretend_names().await;
    let isolated = server.create(json!({"template": "base"})).await;
    let (code, out) = sh(
        &server,
        &isolated,
        &format!(
            "curl -sS --max-time 5 -x http://127.0.0.1:49980 http://allowed.test:{}/",
            far.port()
        ),
    )
    .await;
    assert_ne!(code, 0, "nothing listens where the proxy would: {out}");
    assert!(!out.contains("pretend internet"), "{out}");
}

/// A warm `allowlist` sandbox (from the pool kept for that shape's demand) serves its
/// proxy as soon as it is claimed, with its own list: the member started before any
/// list was known.
#[tokio::test]
async fn a_warm_allowlist_sandbox_reaches_its_own_list_through_the_proxy() {
    let far = pretend_internet().await;
    let port = far.port();
    let server = server_with_pretend_names_and(|config| {
        config.warm_on_demand = Default::default();
    })
    .await;
    let cold = allowlisted(&server, json!([format!("blocked.test:{port}")])).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let members = loop {
        let members = server.service.pools().members();
        let ready: usize = server.service.pools().ready().values().sum();
        if ready == 1 {
            break members;
        }
        assert!(std::time::Instant::now() < deadline, "no member made");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let warm = allowlisted(&server, json!([format!("allowed.test:{port}")])).await;
    assert!(members.contains(id(&warm)), "served by the pool");
    assert_eq!(warm["networkMode"], "allowlist");

    let (code, out) = sh(
        &server,
        &warm,
        &format!("curl -sS http://allowed.test:{port}/warm"),
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("hello from the pretend internet\nGET /warm"),
        "{out}"
    );
    // Its own list, not the one of the create that made the pool.
    let (code, out) = sh(
        &server,
        &warm,
        &format!("curl -sSf http://blocked.test:{port}/"),
    )
    .await;
    assert_ne!(code, 0, "{out}");
    assert!(!out.contains("pretend internet"), "{out}");
    let (code, out) = sh(
        &server,
        &cold,
        &format!("curl -sSf http://blocked.test:{port}/"),
    )
    .await;
    assert_eq!(code, 0, "the cold one keeps its own: {out}");
    // Its user's variables cannot point it elsewhere: the proxy is the container's.
    let (_, out) = sh(&server, &warm, "echo $HTTP_PROXY").await;
    assert_eq!(out.trim(), "http://127.0.0.1:49980");
}

/// An `allowlist` sandbox of the base template with the list `allow`.
pub(crate) async fn allowlisted(server: &TestServer, allow: Value) -> Value {
    server
        .create(json!({"template": "base", "networkMode": "allowlist", "egress": {"allow": allow}}))
        .await
}

/// The audit log's refusals of the sandbox's egress.
async fn refusals_audited(server: &TestServer, sandbox: &Value) -> Vec<Value> {
    let (_, audit) = server
        .get(
            "audit.list",
            &[
                ("resourceId", id(sandbox)),
                ("action", "sandbox.egressRefused"),
            ],
        )
        .await;
    audit["entries"].as_array().cloned().unwrap_or_default()
}

/// Reads the sandbox's egress log from `cursor` until `done` holds for what was read
/// (the log is written in the background), or ten seconds pass.
pub(crate) async fn log_until(
    server: &TestServer,
    sandbox: &Value,
    cursor: Option<&str>,
    done: impl Fn(&[Value]) -> bool,
) -> (Vec<Value>, Option<String>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut query = vec![("sandboxId", id(sandbox)), ("limit", "500")];
        if let Some(cursor) = cursor {
            query.push(("cursor", cursor));
        }
        let (status, page) = server.get("sandbox.egressLog", &query).await;
        assert_eq!(status, reqwest::StatusCode::OK, "{page}");
        let entries = page["entries"].as_array().cloned().unwrap_or_default();
        if done(&entries) || std::time::Instant::now() > deadline {
            let next = page["nextCursor"].as_str().map(str::to_owned);
            return (entries, next);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn every_decision_is_logged_with_its_bytes_and_refusals_are_audited_and_counted() {
    let far = pretend_internet().await;
    let port = far.port();
    let server = server_with_pretend_names().await;
    let sandbox = allowlisted(&server, json!([format!("allowed.test:{port}")])).await;
    let (code, plain) = sh(
        &server,
        &sandbox,
        &format!("curl -sS -o /dev/null -w '%{{size_download}}' http://allowed.test:{port}/plain"),
    )
    .await;
    assert_eq!(code, 0, "{plain}");
    let (code, out) = sh(
        &server,
        &sandbox,
        &format!("curl -sS -o /dev/null --proxytunnel http://Allowed.TEST:{port}/tunnelled"),
    )
    .await;
    assert_eq!(code, 0, "{out}");
    sh(
        &server,
        &sandbox,
        &format!("curl -sS http://blocked.test:{port}/"),
    )
    .await;

    // Both allowed connections, once ended, and the refusal.
    let complete = |entries: &[Value]| {
        entries.len() == 3
            && entries
                .iter()
                .all(|e| e["decision"] == "refused" || !e["endedAt"].is_null())
    };
    let (entries, cursor) = log_until(&server, &sandbox, None, complete).await;
    assert!(complete(&entries), "{entries:#?}");
    let allowed: Vec<&Value> = entries
        .iter()
        .filter(|e| e["decision"] == "allowed")
        .collect();
    assert_eq!(allowed.len(), 2, "{entries:#?}");
    let body: u64 = plain.trim().parse().expect("curl's size");
    for entry in &allowed {
        assert_eq!(
            entry["host"], "allowed.test",
            "names are kept as compared: {entry}"
        );
        assert_eq!(entry["port"], port);
        assert_eq!(entry["address"], format!("{FAR}:{port}"));
        assert!(
            entry["bytesOut"].as_u64().unwrap() > 40,
            "the request went out: {entry}"
        );
        assert!(
            entry["bytesIn"].as_u64().unwrap() > body,
            "the answer came in: {entry}"
        );
        assert!(entry["reason"].is_null(), "{entry}");
    }
    let refused = entries
        .iter()
        .find(|e| e["decision"] == "refused")
        .expect("the refusal");
    assert_eq!(refused["host"], "blocked.test");
    assert_eq!(refused["reason"], "not in the sandbox's egress list");
    assert!(
        refused["endedAt"].is_null() && refused["bytesIn"] == 0,
        "{refused}"
    );

    // Followed from the cursor: nothing new, then only what came after.
    let cursor = cursor.expect("a cursor");
    let (none, same) = log_until(&server, &sandbox, Some(&cursor), |_| true).await;
    assert!(none.is_empty(), "{none:#?}");
    assert_eq!(same.as_deref(), Some(cursor.as_str()));
    sh(&server, &sandbox, &format!("curl -sS http://{FAR}:{port}/")).await;
    let (after, _) = log_until(&server, &sandbox, Some(&cursor), |e| !e.is_empty()).await;
    assert_eq!(after.len(), 1, "{after:#?}");
    assert_eq!(after[0]["host"], FAR);
    assert!(
        after[0]["reason"]
            .as_str()
            .unwrap()
            .contains("an IP address")
    );

    // A cursor that is not one is refused.
    let (status, body) = server
        .get(
            "sandbox.egressLog",
            &[("sandboxId", id(&sandbox)), ("cursor", "' OR 1=1 --")],
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{body}");

    // Refusals are audited and counted.
    let audited = refusals_audited(&server, &sandbox).await;
    assert_eq!(audited.len(), 2, "{audited:#?}");
    assert!(
        audited.iter().all(|e| e["actorId"].is_null()),
        "{audited:#?}"
    );
    assert!(
        audited
            .iter()
            .any(|e| e["metadata"]["host"] == "blocked.test"
                && e["metadata"]["reason"] == "not in the sandbox's egress list"),
        "{audited:#?}"
    );
    let metrics = server.metrics().await;
    let decisions: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("sandboxd_egress_decisions_total{"))
        .collect();
    assert!(
        decisions
            .iter()
            .any(|l| l.contains("decision=\"refused\"") && l.contains("reason=\"not_allowed\"")),
        "{decisions:#?}"
    );
    assert!(
        decisions.iter().any(|l| l.contains("decision=\"allowed\"")),
        "{decisions:#?}"
    );
    assert!(
        metrics.contains("sandboxd_egress_bytes_total{direction=\"in\"}"),
        "{metrics}"
    );
}

/// A program that asks for refused hosts as fast as it can fills neither the log nor
/// the audit log: past a burst, what is over the allowance is counted, and the count
/// is written with the next entry that is.
#[tokio::test]
async fn a_flood_of_refusals_is_bounded_in_the_log_and_the_audit_log() {
    let server = server_with_pretend_names().await;
    let sandbox = allowlisted(&server, json!([])).await;
    // A thousand requests on one kept-alive connection to the proxy.
    let flood = r#"python3 - <<'PY'
import http.client
c = http.client.HTTPConnection("127.0.0.1", 49980)
for i in range(1000):
    c.request("GET", "http://flood.test/%d" % i)
    r = c.getresponse(); r.read()
    assert r.status == 403, r.status
print("done")
PY"#;
    let (code, out) = sh(&server, &sandbox, flood).await;
    assert_eq!((code, out.trim()), (0, "done"));
    let (entries, _) = log_until(&server, &sandbox, None, |e| e.len() >= 200).await;
    assert!(
        (200..600).contains(&entries.len()),
        "a burst and what the allowance refilled: {}",
        entries.len()
    );
    // One more after a pause carries the count of those left out.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    sh(&server, &sandbox, "curl -sS http://flood.test/last").await;
    let total = |entries: &[Value]| {
        entries
            .iter()
            .map(|e| 1 + e["unlogged"].as_u64().unwrap())
            .sum::<u64>()
    };
    let (entries, _) = log_until(&server, &sandbox, None, |e| total(e) == 1001).await;
    assert_eq!(total(&entries), 1001, "every decision is logged or counted");
    let audited = refusals_audited(&server, &sandbox).await;
    assert!(
        (3..=5).contains(&audited.len()),
        "a few at once, then one every ten seconds: {}",
        audited.len()
    );
}

/// An agent's key (narrowed: it may use sandboxes, not decide) asks for a host; the
/// owner's key approves it and the sandbox reaches the host at once; a denial leaves
/// the list as it was; nobody decides with the key that asked.
#[tokio::test]
async fn a_request_approved_by_another_key_opens_the_host_at_once() {
    use reqwest::StatusCode;
    let far = pretend_internet().await;
    let port = far.port();
    let server = server_with_pretend_names().await;
    let sandbox = allowlisted(&server, json!([])).await;
    let sid = id(&sandbox).to_owned();
    let (status, agent) = server
        .post(
            "apiKey.create",
            json!({"name": "agent", "scopes": ["service:read", "deployment:create"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{agent}");
    let agent = agent["secret"].as_str().unwrap().to_owned();
    let fetch = format!("curl -sS -w ' %{{http_code}}' http://allowed.test:{port}/asked");
    assert!(sh(&server, &sandbox, &fetch).await.1.ends_with(" 403"));

    // The agent asks; asking again while it waits is the same request.
    let host = format!("Allowed.test:{port}");
    let ask = json!({"sandboxId": sid, "host": host, "reason": "to fetch the test data"});
    let (status, asked) = server
        .post_with_key("sandbox.requestEgress", Some(&agent), ask.clone())
        .await;
    assert_eq!(status, StatusCode::OK, "{asked}");
    assert_eq!(asked["status"], "pending");
    assert_eq!(asked["host"], format!("allowed.test:{port}"));
    let request_id = asked["requestId"].as_str().unwrap().to_owned();
    let (_, again) = server
        .post_with_key("sandbox.requestEgress", Some(&agent), ask)
        .await;
    assert_eq!(again["requestId"], request_id);
    let (status, bad) = server
        .post_with_key(
            "sandbox.requestEgress",
            Some(&agent),
            json!({"sandboxId": sid, "host": "10.0.0.1"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");

    // The agent's key cannot decide; nor can a key decide its own request.
    let approve = json!({"requestId": request_id, "approve": true});
    let (status, refused) = server
        .post_with_key("egress.decide", Some(&agent), approve.clone())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("egress:decide")
    );
    let (_, own) = server
        .post(
            "sandbox.requestEgress",
            json!({"sandboxId": sid, "host": format!("api.allowed.test:{port}")}),
        )
        .await;
    let (status, refused) = server
        .post(
            "egress.decide",
            json!({"requestId": own["requestId"], "approve": true}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("another key"));

    // Waiting requests are listed for both keys.
    let (_, pending) = server
        .get_with_key("egress.requests", &agent, &[("sandboxId", &sid)])
        .await;
    assert_eq!(pending.as_array().unwrap().len(), 2, "{pending}");

    // The owner approves: the next connection goes through.
    let (status, approved) = server.post("egress.decide", approve.clone()).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["status"], "approved");
    assert!(approved["decidedBy"].is_string());
    let (code, out) = sh(&server, &sandbox, &fetch).await;
    assert!(code == 0 && out.ends_with(" 200"), "{out}");
    let (_, one) = server.get("sandbox.one", &[("sandboxId", &sid)]).await;
    assert_eq!(
        one["egress"]["allow"],
        json!([format!("allowed.test:{port}")])
    );
    let (status, twice) = server.post("egress.decide", approve).await;
    assert_eq!(status, StatusCode::CONFLICT, "{twice}");

    // A denial changes nothing but the request.
    let (status, asked) = server
        .post_with_key(
            "sandbox.requestEgress",
            Some(&agent),
            json!({"sandboxId": sid, "host": format!("blocked.test:{port}")}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{asked}");
    let (status, denied) = server
        .post(
            "egress.decide",
            json!({"requestId": asked["requestId"], "approve": false}),
        )
        .await;
    assert_eq!(
        (status, denied["status"].as_str()),
        (StatusCode::OK, Some("denied"))
    );
    let (_, one) = server.get("sandbox.one", &[("sandboxId", &sid)]).await;
    assert_eq!(
        one["egress"]["allow"],
        json!([format!("allowed.test:{port}")])
    );
    let blocked = format!("curl -sS -w ' %{{http_code}}' http://blocked.test:{port}/");
    assert!(sh(&server, &sandbox, &blocked).await.1.ends_with(" 403"));

    // What is left waiting, and everything with status=all.
    let (_, pending) = server.get("egress.requests", &[]).await;
    let hosts: Vec<&str> = pending
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, [format!("api.allowed.test:{port}")]);
    let (_, all) = server.get("egress.requests", &[("status", "all")]).await;
    assert_eq!(all.as_array().unwrap().len(), 3, "{all}");

    // The asking and the deciding are audited.
    let (_, audit) = server.get("audit.list", &[("resourceId", &sid)]).await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for action in [
        "sandbox.requestEgress",
        "egress.decide",
        "sandbox.setEgress",
    ] {
        assert!(actions.contains(&action), "{action}: {actions:?}");
    }

    // Once the sandbox is killed, nothing of it waits.
    server.post("sandbox.kill", json!({"sandboxId": sid})).await;
    let (_, pending) = server.get("egress.requests", &[]).await;
    assert_eq!(pending, json!([]));
}

/// A package index on the pretend internet (Python's `http.server` over a directory
/// holding one wheel, the layout pip reads as a simple index), stopped when dropped.
struct PackageIndex {
    server: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl PackageIndex {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let make = r#"
import sys, zipfile, os
root = sys.argv[1]
os.makedirs(f"{root}/simple/sandboxd-probe")
wheel = f"{root}/simple/sandboxd-probe/sandboxd_probe-1.0-py3-none-any.whl"
with zipfile.ZipFile(wheel, "w") as z:
    z.writestr("sandboxd_probe/__init__.py", "VALUE = 42\n")
    z.writestr("sandboxd_probe-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: sandboxd-probe\nVersion: 1.0\n")
    z.writestr("sandboxd_probe-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("sandboxd_probe-1.0.dist-info/RECORD", "")
"#;
        let made = std::process::Command::new("python3")
            .args(["-c", make, dir.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(made.success());
        let port = std::net::TcpListener::bind((FAR, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = std::process::Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                FAR,
                "--directory",
            ])
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect((FAR, port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the index did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Self {
            server,
            port,
            _dir: dir,
        }
    }
}

impl Drop for PackageIndex {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

#[tokio::test]
async fn pip_downloads_from_an_allowed_index_and_not_from_another() {
    let index = PackageIndex::start();
    let port = index.port;
    let server = server_with_pretend_names().await;
    let sandbox = allowlisted(&server, json!([format!("allowed.test:{port}")])).await;
    let pip = |host: &str| {
        format!(
            "python3 -m pip download --no-deps --disable-pip-version-check --retries 0 --timeout 10 \
             --index-url http://{host}:{port}/simple/ --trusted-host {host} -d /tmp/dl sandboxd-probe 2>&1; \
             ls /tmp/dl 2>&1"
        )
    };
    let (code, out) = sh(&server, &sandbox, &pip("allowed.test")).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("sandboxd_probe-1.0-py3-none-any.whl"), "{out}");
    let (_, out) = sh(
        &server,
        &sandbox,
        &format!("rm -rf /tmp/dl; {}", pip("blocked.test")),
    )
    .await;
    assert!(
        !out.contains("sandboxd_probe-1.0-py3-none-any.whl\n"),
        "{out}"
    );
    assert!(out.contains("No matching distribution"), "{out}");
    let refused = |entries: &[Value]| {
        entries
            .iter()
            .any(|e| e["host"] == "blocked.test" && e["decision"] == "refused")
    };
    let (entries, _) = log_until(&server, &sandbox, None, refused).await;
    assert!(
        refused(&entries),
        "the proxy refused the index: {entries:#?}"
    );
}
