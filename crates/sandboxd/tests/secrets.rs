//! Secrets — sandbox environment variables and API keys — never appear in a response,
//! in the server's log output (everything, at debug level), or in plaintext in the
//! database files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{KEY, RunningServer};
use serde_json::{Value, json};

const SECRET_ENV: &str = "sekrit-value-4f1c9e";

async fn call(server: &RunningServer, method: &str, procedure: &str, body: Value) -> String {
    let client = reqwest::Client::new();
    let url = format!("{}/api/{procedure}", server.url);
    let request = match method {
        "get" => client.get(url).query(
            &body
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect::<Vec<_>>(),
        ),
        _ => client.post(url).json(&body),
    };
    let response = request.header("x-api-key", KEY).send().await.unwrap();
    assert!(
        response.status().is_success(),
        "{procedure}: {}",
        response.status()
    );
    response.text().await.unwrap()
}

#[tokio::test]
async fn secrets_stay_out_of_responses_logs_and_the_database() {
    let server = RunningServer::start_logged().await;
    let mut responses = Vec::new();
    let created = call(
        &server,
        "post",
        "sandbox.create",
        json!({"environmentId": server.env_id, "template": "base",
               "envVars": format!("API_TOKEN={SECRET_ENV}\nOTHER=1")}),
    )
    .await;
    let sandbox: Value = serde_json::from_str(&created).unwrap();
    let sid = sandbox["sandboxId"].as_str().unwrap().to_owned();
    responses.push(created);
    // The variable is really there for the sandbox's own commands…
    let inside = call(
        &server,
        "post",
        "sandbox.exec",
        json!({"sandboxId": sid, "cmd": "test \"$API_TOKEN\" = sekrit-value-4f1c9e && echo set"}),
    )
    .await;
    assert!(inside.contains("\"stdout\":\"set\\n\""), "{inside}");
    // …and nowhere the API shows a sandbox.
    responses.push(call(&server, "get", "sandbox.one", json!({"sandboxId": sid})).await);
    responses.push(
        call(
            &server,
            "get",
            "sandbox.list",
            json!({"environmentId": server.env_id}),
        )
        .await,
    );
    let key = call(&server, "post", "apiKey.create", json!({"name": "ci"})).await;
    let key: Value = serde_json::from_str(&key).unwrap();
    let new_secret = key["secret"].as_str().unwrap().to_owned();
    // The new key works: its use goes through the log too.
    let listed = reqwest::Client::new()
        .get(format!("{}/api/apiKey.all", server.url))
        .header("x-api-key", &new_secret)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    responses.push(listed);
    responses.push(call(&server, "get", "audit.list", json!({})).await);
    responses.push(call(&server, "get", "member.all", json!({})).await);
    call(&server, "post", "sandbox.kill", json!({"sandboxId": sid})).await;

    for response in &responses {
        assert!(!response.contains(SECRET_ENV), "{response}");
        assert!(!response.contains(&new_secret), "{response}");
        assert!(!response.contains(KEY), "{response}");
    }
    let log = server.log();
    assert!(
        log.contains("sandbox running"),
        "the log was captured: {log}"
    );
    for secret in [SECRET_ENV, new_secret.as_str(), KEY] {
        let leaks: Vec<&str> = log.lines().filter(|l| l.contains(secret)).collect();
        assert!(leaks.is_empty(), "a secret is in the log: {leaks:#?}");
    }
    for file in ["sandboxd.db", "sandboxd.db-wal"] {
        let bytes = std::fs::read(server.data_dir().join(file)).unwrap_or_default();
        for secret in [SECRET_ENV, new_secret.as_str(), KEY] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret:?} in plaintext in {file}"
            );
        }
    }
}
