//! Authentication, validation, errors, the OpenAPI document, projects and environments.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer};

#[tokio::test]
async fn missing_or_unknown_key_is_401_with_a_json_error() {
    let server = TestServer::start().await;
    for key in [None, Some("sbx_not_a_key"), Some("")] {
        let (status, body) = server.post_with_key("sandbox.create", key, json!({})).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["code"], "UNAUTHORIZED");
    }
    let bearer = server
        .client
        .get(format!("{}/api/sandbox.templates", server.url))
        .header("authorization", format!("Bearer {KEY}"))
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), StatusCode::OK);
}

#[tokio::test]
async fn validation_errors_are_400_with_issues_and_nothing_is_created() {
    let server = TestServer::start().await;
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "base", "cpu": 100, "memoryMb": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "BAD_REQUEST");
    let fields: Vec<&str> = body["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["cpu", "memoryMb"]);

    // More CPUs than the engine's host has: the field is named, with the host's count,
    // not the engine's refusal.
    let host = server.docker().info().await.unwrap().ncpu.unwrap();
    if host < 64 {
        let (status, body) = server
            .post(
                "sandbox.create",
                json!({"environmentId": server.env_id, "template": "base", "cpu": host + 1}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["issues"][0]["path"], "cpu", "{body}");
        let message = body["issues"][0]["message"].as_str().unwrap();
        assert!(message.contains(&format!("at most {host}")), "{body}");
    }

    // Wrong types and malformed JSON are 400 too, never 500.
    let (status, _) = server
        .post("sandbox.create", json!({"environmentId": 5}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let raw = server
        .client
        .post(format!("{}/api/sandbox.exec", server.url))
        .header("x-api-key", KEY)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), StatusCode::BAD_REQUEST);
    let body: Value = raw.json().await.unwrap();
    assert_eq!(body["code"], "BAD_REQUEST");

    let (status, body) = server.get("sandbox.list", &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, list) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list, json!([]));
}

/// Labels given at creation come back with the sandbox, in `one` and `list`; bad ones
/// are a 400 naming `labels`, and nothing is created.
#[tokio::test]
async fn labels_are_kept_with_the_sandbox() {
    let server = TestServer::start().await;
    let labels = json!({"tenant_id": "acme", "session_id": "s-1"});
    let sandbox = server
        .create(json!({"template": "base", "labels": labels}))
        .await;
    assert_eq!(sandbox["labels"], labels, "{sandbox}");
    let (_, one) = server
        .get(
            "sandbox.one",
            &[("sandboxId", sandbox["sandboxId"].as_str().unwrap())],
        )
        .await;
    assert_eq!(one["labels"], labels);
    let (_, list) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    assert_eq!(list[0]["labels"], labels);
    let plain = server.create(json!({"template": "base"})).await;
    assert_eq!(plain["labels"], json!({}));
    for bad in [json!({"has space": "v"}), json!({"k": 5}), json!(["k"])] {
        let (status, body) = server
            .post(
                "sandbox.create",
                json!({"environmentId": server.env_id, "template": "base", "labels": bad}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (_, list) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    assert_eq!(list.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn unknown_ids_are_404() {
    let server = TestServer::start().await;
    let (status, body) = server.get("sandbox.one", &[("sandboxId", "nope")]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "NOT_FOUND");
    let (status, _) = server
        .post("sandbox.exec", json!({"sandboxId": "nope", "cmd": "true"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post(
            "sandbox.create",
            json!({"environmentId": "nope", "template": "base"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server.get("sandbox.list", &[("projectId", "nope")]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn projects_and_environments() {
    let server = TestServer::start().await;
    let (status, project) = server
        .post("project.create", json!({"name": "agents"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{project}");
    assert_eq!(project["environments"][0]["name"], "production");
    let project_id = project["projectId"].as_str().unwrap();
    let (status, env) = server
        .post(
            "environment.create",
            json!({"projectId": project_id, "name": "staging"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{env}");
    assert_eq!(env["projectId"], project_id);
    let (status, _) = server
        .post(
            "environment.create",
            json!({"projectId": project_id, "name": "staging"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = server
        .post(
            "environment.create",
            json!({"projectId": "nope", "name": "x"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, all) = server.get("project.all", &[]).await;
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "agents"]);
    let envs: Vec<&str> = all[1]["environments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(envs, ["production", "staging"]);
}

#[tokio::test]
async fn openapi_document_describes_every_procedure() {
    let server = TestServer::start().await;
    let doc: Value = server
        .client
        .get(format!("{}/api/openapi.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert_eq!(doc["info"]["title"], "sandboxd");
    // The document served is the one committed (the table of its procedures is
    // checked against the server's routes by a unit test).
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/openapi.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert!(
        doc == committed,
        "the served document is not docs/openapi.json"
    );
    let paths = doc["paths"].as_object().unwrap();
    assert_eq!(
        paths.len(),
        sandboxd_core::api::procedures::PROCEDURES.len(),
        "{:?}",
        paths.keys().collect::<Vec<_>>()
    );
    let operations = paths.iter().flat_map(|(path, item)| {
        item.as_object()
            .unwrap()
            .keys()
            .map(move |method| (path.as_str(), method.as_str()))
    });
    for (path, method) in operations {
        // Each documented route answers (without a key: 401, never 404 or 405); only
        // the health and readiness checks need no key.
        let expected_status = if path == "/health" || path == "/ready" {
            StatusCode::OK
        } else {
            StatusCode::UNAUTHORIZED
        };
        let request = match method {
            "get" => server.client.get(format!("{}{path}", server.url)),
            _ => server
                .client
                .post(format!("{}{path}", server.url))
                .json(&json!({})),
        };
        assert_eq!(
            request.send().await.unwrap().status(),
            expected_status,
            "{path}"
        );
    }
    let create = &doc["components"]["schemas"]["CreateSandboxRequest"]["properties"];
    for field in [
        "environmentId",
        "template",
        "image",
        "cpu",
        "memoryMb",
        "pidsLimit",
        "timeoutMs",
        "networkMode",
        "envVars",
        "workdir",
    ] {
        assert!(create.get(field).is_some(), "CreateSandboxRequest.{field}");
    }
    assert!(
        doc["components"]["schemas"]["SandboxView"]["properties"]
            .get("envVars")
            .is_none()
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["apiKey"]["name"],
        "x-api-key"
    );
}

#[tokio::test]
async fn templates_list_the_configured_images() {
    let server = TestServer::start().await;
    let (status, templates) = server.get("sandbox.templates", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = templates
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["base", "python", "node", "code-interpreter-v1"]);
    assert_eq!(templates[0]["image"], crate::harness::DEBIAN);
    assert_eq!(templates[0]["user"], "1000:1000");
    assert_eq!(templates[2]["image"], "node:22-slim");
}

/// `/metrics` speaks the Prometheus text format with the latency of each procedure
/// (by route template, never by id), the path that served operations, the running
/// sandboxes and the background loops' durations.
#[tokio::test]
async fn metrics_describe_requests_paths_sandboxes_and_loops() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "python"})).await;
    server.exec(&sandbox, "true").await;
    let (status, _) = server.get("sandbox.one", &[("sandboxId", "missing")]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let metrics = || server.client.get(format!("{}/metrics", server.url));
    // The figures are the whole server's: an administrator's key reads them, no key
    // or a lesser key does not.
    assert_eq!(
        metrics().send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let (_, reader) = server
        .post(
            "apiKey.create",
            json!({"name": "r", "scopes": ["service:read"]}),
        )
        .await;
    let reader = reader["secret"].as_str().unwrap();
    let refused = metrics().header("x-api-key", reader).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let response = metrics()
        .header("x-api-key", crate::harness::KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = response.text().await.unwrap();
    for expected in [
        "sandboxd_http_request_duration_seconds_bucket{route=\"/api/sandbox.exec\",status=\"2xx\"",
        "sandboxd_http_request_duration_seconds_count{route=\"/api/sandbox.one\",status=\"4xx\"} 1",
        "sandboxd_operations_served_total{path=\"agent\"}",
        "sandboxd_sandboxes_running{server=\"local\"} 1",
        "sandboxd_reaper_duration_seconds_count",
        "sandboxd_container_removals_pending 0",
    ] {
        assert!(text.contains(expected), "{expected} missing in:\n{text}");
    }
    assert!(!text.contains(sandbox["sandboxId"].as_str().unwrap()));
}
