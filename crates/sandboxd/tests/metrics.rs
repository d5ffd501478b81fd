//! `/metrics` on the API's address needs an administrator's key; `metrics_listen` serves
//! it without one on an address of the operator's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{KEY, RunningServer, free_port};

#[tokio::test]
async fn metrics_need_a_key_on_the_api_and_none_on_their_own_address() {
    let metrics_address = format!("127.0.0.1:{}", free_port());
    let server =
        RunningServer::start_with_env(&[("SANDBOXD_METRICS_LISTEN", &metrics_address)]).await;
    let client = reqwest::Client::new();
    let on_api = format!("{}/metrics", server.url);
    let refused = client.get(&on_api).send().await.unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::UNAUTHORIZED);
    let allowed = client
        .get(&on_api)
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), reqwest::StatusCode::OK);

    let open = client
        .get(format!("http://{metrics_address}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status(), reqwest::StatusCode::OK);
    assert!(
        open.text()
            .await
            .unwrap()
            .contains("sandboxd_sandboxes_running")
    );
    // Only metrics there: the API is not served on the metrics address.
    let api = client
        .get(format!("http://{metrics_address}/api/project.all"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), reqwest::StatusCode::NOT_FOUND);
}
