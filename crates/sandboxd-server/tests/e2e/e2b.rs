//! E2B's control plane under `/e2b`, spoken as E2B's SDKs speak it: create (v1 and v2),
//! read, list with metadata and state filters, extend, connect (resuming a paused
//! sandbox, never shortening), kill; errors as `{code, message}`; another
//! organization's sandbox is not found.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer};

/// A call of E2B's API under `/e2b` with `key`: its status and JSON answer (null when
/// it is none).
pub(crate) async fn call(
    server: &TestServer,
    method: Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = server
        .client
        .request(method, format!("{}/e2b{path}", server.url))
        .header("X-API-Key", key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn e2b_sdks_drive_the_lifecycle() {
    let server = TestServer::start().await;
    let (status, made) = call(
        &server,
        Method::POST,
        "/v2/sandboxes",
        KEY,
        // Without internet access: E2B's default (internet) is the unit tests', and the
        // `internet` bridge is one test's of its own (containers.rs).
        Some(
            json!({"templateID": "base", "timeout": 120, "metadata": {"sandbox_test_id": "t1"},
                    "envVars": {"GREETING": "hi from e2b"}, "secure": true,
                    "allow_internet_access": false}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["sandboxID"].as_str().unwrap().to_owned();
    assert_eq!(made["templateID"], "base");
    assert_eq!(made["envdVersion"], "0.6.4");
    assert!(made["clientID"].is_string());
    // It is a sandboxd sandbox: its variables reach its commands.
    let run = server
        .exec(&json!({"sandboxId": id}), "echo $GREETING")
        .await;
    assert_eq!(run["stdout"], "hi from e2b\n");
    let (_, own) = server.get("sandbox.one", &[("sandboxId", &id)]).await;
    assert_eq!(own["networkMode"], "isolated");
    assert_eq!(own["labels"]["sandbox_test_id"], "t1");

    let (status, detail) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["state"], "running");
    assert_eq!(detail["metadata"]["sandbox_test_id"], "t1");
    assert_eq!(detail["memoryMB"], 512);
    assert_eq!(detail["cpuCount"], 1);
    let end = detail["endAt"].as_str().unwrap().to_owned();

    // Listed, filtered by metadata (a query string of its own) and by state.
    let (status, listed) = call(
        &server,
        Method::GET,
        "/v2/sandboxes?metadata=sandbox_test_id%3Dt1&state=running",
        KEY,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["sandboxID"], json!(id));
    let (_, none) = call(
        &server,
        Method::GET,
        "/v2/sandboxes?metadata=sandbox_test_id%3Dother",
        KEY,
        None,
    )
    .await;
    assert_eq!(none, json!([]));
    let (_, paused_only) = call(
        &server,
        Method::GET,
        "/v2/sandboxes?state=paused",
        KEY,
        None,
    )
    .await;
    assert_eq!(paused_only, json!([]));

    // A timeout moves the end; a connect with a shorter one does not shorten it.
    let (status, _) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/timeout"),
        KEY,
        Some(json!({"timeout": 3600})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, detail) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    let extended = detail["endAt"].as_str().unwrap().to_owned();
    assert!(extended > end, "{extended} after {end}");
    let (status, connected) = call(
        &server,
        Method::POST,
        &format!("/v2/sandboxes/{id}/connect"),
        KEY,
        Some(json!({"timeout": 60})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{connected}");
    assert_eq!(connected["sandboxID"], json!(id));
    let (_, detail) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert!(
        detail["endAt"].as_str().unwrap() >= extended.as_str(),
        "{detail}"
    );

    // A paused sandbox is listed as paused and resumed by a connect.
    let (status, _) = server.post("sandbox.pause", json!({"sandboxId": id})).await;
    assert_eq!(status, StatusCode::OK);
    let (_, detail) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(detail["state"], "paused");
    let (status, _) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/connect"),
        KEY,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, detail) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(detail["state"], "running");

    // Killed: gone for E2B (404 on read and on a second kill).
    let (status, _) = call(
        &server,
        Method::DELETE,
        &format!("/sandboxes/{id}"),
        KEY,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for method in [Method::GET, Method::DELETE] {
        let (status, body) = call(&server, method, &format!("/sandboxes/{id}"), KEY, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(body["code"], 404, "{body}");
        assert!(body["message"].is_string());
    }

    // The v1 create.
    let (status, made) = call(
        &server,
        Method::POST,
        "/sandboxes",
        KEY,
        Some(json!({"templateID": "base", "allow_internet_access": false})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let (_, own) = server
        .get(
            "sandbox.one",
            &[("sandboxId", made["sandboxID"].as_str().unwrap())],
        )
        .await;
    assert_eq!(own["networkMode"], "isolated");
}

#[tokio::test]
async fn e2b_errors_are_e2bs_and_tenants_stay_apart() {
    let server = TestServer::start().await;
    let (status, body) = call(&server, Method::GET, "/v2/sandboxes", "sbx_wrong", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], 401, "{body}");
    for (path, body) in [
        ("/sandboxes", json!({"templateID": ""})),
        ("/sandboxes", json!({"templateID": "base", "timeout": 0})),
        ("/sandboxes", json!({"templateID": "No such template!"})),
        ("/sandboxes", json!({"template": 3})),
    ] {
        let (status, answer) = call(&server, Method::POST, path, KEY, Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["code"], 400, "{answer}");
    }
    // A template's name that no template has (configured or built) is not found.
    let body = json!({"templateID": "no-such-template"});
    let (status, answer) = call(&server, Method::POST, "/sandboxes", KEY, Some(body)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(answer["code"], 404, "{answer}");
    let (status, made) = call(
        &server,
        Method::POST,
        "/v2/sandboxes",
        KEY,
        Some(json!({"templateID": "base", "allow_internet_access": false})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["sandboxID"].as_str().unwrap();
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let key = other["apiKey"]["secret"].as_str().unwrap();
    let (_, listed) = call(&server, Method::GET, "/v2/sandboxes", key, None).await;
    assert_eq!(listed, json!([]));
    for (method, path) in [
        (Method::GET, format!("/sandboxes/{id}")),
        (Method::DELETE, format!("/sandboxes/{id}")),
        (Method::POST, format!("/sandboxes/{id}/connect")),
    ] {
        let (status, body) = call(&server, method, &path, key, Some(json!({}))).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }
    let (status, _) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "still there for its own organization"
    );
}

/// E2B's `on_timeout: pause` (`autoPause`): at its end the sandbox is paused, and seen
/// paused at once (not at the reaper's pass); a connect resumes it with its processes.
/// A timeout of 0 ends one now: paused when it pauses at its end, else killed.
#[tokio::test]
async fn an_e2b_sandbox_made_to_pause_at_its_end_is_paused_then() {
    let server = TestServer::start().await;
    let make = |auto_pause: bool, timeout: i64| {
        let server = &server;
        async move {
            let (status, made) = call(
                server,
                Method::POST,
                "/v2/sandboxes",
                KEY,
                Some(
                    json!({"templateID": "base", "timeout": timeout, "autoPause": auto_pause,
                            "allow_internet_access": false}),
                ),
            )
            .await;
            assert_eq!(status, StatusCode::CREATED, "{made}");
            made["sandboxID"].as_str().unwrap().to_owned()
        }
    };
    let id = make(true, 2).await;
    let (status, started) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id, "cmd": "echo $$ > /tmp/pid; sleep 600"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let pid = server
        .exec(&json!({"sandboxId": id}), "sleep 0.5; cat /tmp/pid")
        .await["stdout"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let (status, info) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(info["state"], "paused", "{info}");
    let (status, connected) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/connect"),
        KEY,
        Some(json!({"timeout": 60})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{connected}");
    let (_, info) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(info["state"], "running", "{info}");
    let again = server
        .exec(
            &json!({"sandboxId": id}),
            "cat /tmp/pid; kill -0 $(cat /tmp/pid) && echo alive",
        )
        .await["stdout"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        again.contains(pid.trim()) && again.contains("alive"),
        "{again}"
    );

    // A timeout of 0: its end is now.
    let (status, _) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/timeout"),
        KEY,
        Some(json!({"timeout": 0})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, info) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(info["state"], "paused", "{info}");
    let other = make(false, 60).await;
    let (status, _) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{other}/timeout"),
        KEY,
        Some(json!({"timeout": 0})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(
        &server,
        Method::GET,
        &format!("/sandboxes/{other}"),
        KEY,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "killed");
    // Each ended as its caller's own pause or kill, in the audit log with the caller.
    for (sandbox, action) in [(&id, "sandbox.pause"), (&other, "sandbox.kill")] {
        let (status, audit) = server
            .get(
                "audit.list",
                &[("resourceId", sandbox.as_str()), ("action", action)],
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{audit}");
        assert!(
            audit["entries"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["actorId"].is_string()),
            "{action} of {sandbox} by its caller: {audit}"
        );
    }
}

#[tokio::test]
async fn an_e2b_sandbox_ends_at_its_end_whatever_it_does() {
    let server = TestServer::start().await;
    let (status, made) = call(
        &server,
        Method::POST,
        "/v2/sandboxes",
        KEY,
        Some(json!({"templateID": "base", "timeout": 3, "allow_internet_access": false})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["sandboxID"].as_str().unwrap().to_owned();
    let (_, before) = server.get("sandbox.one", &[("sandboxId", &id)]).await;
    assert_eq!(before["fixedTimeout"], true, "{before}");
    assert_eq!(
        before["timeoutMs"], 3000,
        "shorter than sandboxd's own 10 s"
    );
    // Activity does not move its end.
    server.exec(&json!({"sandboxId": id}), "true").await;
    let (_, after) = server.get("sandbox.one", &[("sandboxId", &id)]).await;
    assert_eq!(after["expiresAt"], before["expiresAt"]);
    // Past it, E2B sees it gone at once (the reaper runs every 15 s), and it is killed.
    tokio::time::sleep(std::time::Duration::from_millis(3300)).await;
    let (status, _) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let mut status_now = String::new();
    for _ in 0..50 {
        let (_, now) = server.get("sandbox.one", &[("sandboxId", &id)]).await;
        status_now = now["status"].as_str().unwrap_or_default().to_owned();
        if status_now == "killed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status_now, "killed");
    // A timeout set moves the end of another one, from now.
    let (_, made) = call(
        &server,
        Method::POST,
        "/v2/sandboxes",
        KEY,
        Some(json!({"templateID": "base", "timeout": 60, "allow_internet_access": false})),
    )
    .await;
    let id = made["sandboxID"].as_str().unwrap().to_owned();
    let (status, _) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/timeout"),
        KEY,
        Some(json!({"timeout": 2})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    tokio::time::sleep(std::time::Duration::from_millis(2300)).await;
    let (status, _) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "shortened, and over");
}

#[tokio::test]
async fn e2b_pause_metrics_snapshots_and_forks_are_sandboxds() {
    let server = TestServer::start().await;
    let (_, made) = call(
        &server,
        Method::POST,
        "/v2/sandboxes",
        KEY,
        Some(json!({"templateID": "base", "timeout": 120, "allow_internet_access": false})),
    )
    .await;
    let id = made["sandboxID"].as_str().unwrap().to_owned();
    server
        .exec(&json!({"sandboxId": id}), "echo kept > /home/user/mark")
        .await;

    let (status, metrics) = call(
        &server,
        Method::GET,
        &format!("/sandboxes/{id}/metrics"),
        KEY,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{metrics}");
    assert_eq!(metrics[0]["memTotal"], 512 * 1024 * 1024, "{metrics}");
    assert!(metrics[0]["timestampUnix"].as_i64().unwrap() > 0);
    let (_, past) = call(
        &server,
        Method::GET,
        &format!("/sandboxes/{id}/metrics?start=1&end=2"),
        KEY,
        None,
    )
    .await;
    assert_eq!(past, json!([]), "no reading in that interval");

    let (status, snapshot) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/snapshots"),
        KEY,
        Some(json!({"name": "golden"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{snapshot}");
    assert_eq!(snapshot["names"], json!(["golden"]));
    let (_, listed) = call(
        &server,
        Method::GET,
        &format!("/snapshots?sandboxID={id}"),
        KEY,
        None,
    )
    .await;
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    // A create names a snapshot as its template, by name or id.
    let (status, from) = call(
        &server,
        Method::POST,
        "/v2/sandboxes",
        KEY,
        Some(json!({"templateID": "golden", "allow_internet_access": false})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{from}");
    let from_id = from["sandboxID"].as_str().unwrap();
    let run = server
        .exec(&json!({"sandboxId": from_id}), "cat /home/user/mark")
        .await;
    assert_eq!(run["stdout"], "kept\n");

    let (status, forks) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/fork"),
        KEY,
        Some(json!({"count": 2, "timeout": 60})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{forks}");
    let forks = forks.as_array().unwrap();
    assert_eq!(forks.len(), 2);
    for fork in forks {
        let fork_id = fork["sandbox"]["sandboxID"].as_str().unwrap();
        assert!(fork["sandbox"]["envdAccessToken"].is_string());
        let run = server
            .exec(&json!({"sandboxId": fork_id}), "cat /home/user/mark")
            .await;
        assert_eq!(run["stdout"], "kept\n");
    }

    let (status, _) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/pause"),
        KEY,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, again) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/pause"),
        KEY,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "paused already: {again}");
    let (_, detail) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(detail["state"], "paused");
    let (status, resumed) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/resume"),
        KEY,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{resumed}");

    let snapshot_id = snapshot["snapshotID"].as_str().unwrap();
    // The sandbox made from it is killed first: a snapshot in use is kept.
    for sandbox in [from_id.to_owned()].into_iter().chain(
        forks
            .iter()
            .map(|f| f["sandbox"]["sandboxID"].as_str().unwrap().to_owned()),
    ) {
        call(
            &server,
            Method::DELETE,
            &format!("/sandboxes/{sandbox}"),
            KEY,
            None,
        )
        .await;
    }
    let (status, removed) = call(
        &server,
        Method::DELETE,
        &format!("/templates/{snapshot_id}"),
        KEY,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{removed}");
    let (status, _) = call(
        &server,
        Method::DELETE,
        &format!("/templates/{snapshot_id}"),
        KEY,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn e2b_listings_come_a_page_at_a_time() {
    let server = TestServer::start().await;
    let mut made = Vec::new();
    for _ in 0..3 {
        let (status, sandbox) = call(
            &server,
            Method::POST,
            "/v2/sandboxes",
            KEY,
            Some(json!({"templateID": "base", "allow_internet_access": false,
                        "metadata": {"batch": "paged"}})),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{sandbox}");
        made.push(sandbox["sandboxID"].as_str().unwrap().to_owned());
    }
    let page = |query: String| {
        let server = &server;
        async move {
            let response = server
                .client
                .get(format!(
                    "{}/e2b/v2/sandboxes?metadata=batch%3Dpaged&{query}",
                    server.url
                ))
                .header("X-API-Key", KEY)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let next = response
                .headers()
                .get("x-next-token")
                .map(|v| v.to_str().unwrap().to_owned());
            let ids: Vec<String> = response
                .json::<Value>()
                .await
                .unwrap()
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["sandboxID"].as_str().unwrap().to_owned())
                .collect();
            (ids, next)
        }
    };
    let (first, next) = page("limit=2".into()).await;
    assert_eq!(first.len(), 2);
    let next = next.expect("a next page");
    let (second, last) = page(format!("limit=2&nextToken={next}")).await;
    assert_eq!(second.len(), 1);
    assert_eq!(last, None, "no page after the last");
    let newest_first: Vec<String> = first.iter().chain(&second).cloned().collect();
    // Oldest first, a page at a time, is the same list the other way round.
    let (first_asc, next) = page("limit=2&order=asc".into()).await;
    let (second_asc, _) = page(format!("limit=2&order=asc&nextToken={}", next.unwrap())).await;
    let oldest_first: Vec<String> = first_asc.into_iter().chain(second_asc).collect();
    assert_eq!(
        oldest_first,
        newest_first.iter().rev().cloned().collect::<Vec<_>>()
    );
    assert_eq!(oldest_first, made, "in the order they were made");
    // Made at or after a time; of a template.
    let (_, newest) = call(
        &server,
        Method::GET,
        &format!("/sandboxes/{}", made[2]),
        KEY,
        None,
    )
    .await;
    let started = newest["startedAt"].as_str().unwrap().replace('+', "%2B");
    let (after, _) = page(format!("startedAfter={started}")).await;
    assert_eq!(after, [made[2].clone()], "{started}");
    let (base, _) = page("template=base".into()).await;
    assert_eq!(base.len(), 3);
    let (none, _) = page("template=unknown-template".into()).await;
    assert!(none.is_empty());
    let mut all = newest_first;
    all.sort();
    made.sort();
    assert_eq!(all, made, "every sandbox once");
    for bad in [
        "limit=0",
        "limit=101",
        "nextToken=nonsense",
        "order=sideways",
        "startedAfter=yesterday",
    ] {
        let (status, body) = call(
            &server,
            Method::GET,
            &format!("/v2/sandboxes?{bad}"),
            KEY,
            None,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
}

/// E2B's `pause(keep_memory=False)`: the sandbox's processes end and its files stay; a
/// connect starts it afresh from them. A bad body makes nothing.
#[tokio::test]
async fn an_e2b_pause_without_memory_keeps_the_files_alone() {
    let server = TestServer::start().await;
    let (id, _) = crate::e2b_envd::e2b_sandbox(&server, KEY).await;
    let sandbox = json!({"sandboxId": id});
    server.exec(&sandbox, "echo kept > /home/user/mark").await;
    let (status, started) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id, "cmd": "exec sleep 600"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let sleeping = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 600' || true";
    // The process runs once the agent started it (it may take a moment).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let running = server.exec(&sandbox, sleeping).await;
        if running["stdout"] == "1\n" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{running}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    let (status, refused) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/pause"),
        KEY,
        Some(json!("memory")),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let (status, _) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/pause"),
        KEY,
        Some(json!({"memory": false})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, detail) = call(&server, Method::GET, &format!("/sandboxes/{id}"), KEY, None).await;
    assert_eq!(detail["state"], "paused", "{detail}");

    let (status, _) = call(
        &server,
        Method::POST,
        &format!("/sandboxes/{id}/connect"),
        KEY,
        Some(json!({"timeout": 120})),
    )
    .await;
    assert!(status.is_success(), "{status}");
    let kept = server.exec(&sandbox, "cat /home/user/mark").await;
    assert_eq!(kept["stdout"], "kept\n", "{kept}");
    let after = server.exec(&sandbox, sleeping).await;
    assert_eq!(after["stdout"], "0\n", "the processes ended: {after}");
}
