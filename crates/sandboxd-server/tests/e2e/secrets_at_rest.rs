//! Secrets at rest and in listings: a master key given by configuration seals secrets
//! instead of a `master.key` file, which is then neither read nor written; a bootstrap
//! key given by configuration shows none of its characters in key listings.

use serde_json::json;

use crate::harness::{KEY, TestServer};

#[tokio::test]
async fn a_configured_master_key_is_used_and_no_key_file_is_written() {
    let server = TestServer::start_with(|config| config.master_key = Some("07".repeat(32))).await;
    let sandbox = server
        .create(json!({"template": "base", "envVars": "SEALED_VALUE=opened"}))
        .await;
    let exec = server.exec(&sandbox, "echo $SEALED_VALUE").await;
    assert_eq!(exec["stdout"], "opened\n", "{exec}");
    let stopped = server.stop().await;
    assert!(stopped.path().join("sandboxd.db").is_file());
    assert!(
        !stopped.path().join("master.key").exists(),
        "the configured key is the only one"
    );
}

#[tokio::test]
async fn a_configured_bootstrap_key_lists_none_of_its_characters() {
    let server = TestServer::start().await;
    let (_, keys) = server.get("apiKey.all", &[]).await;
    let owner = &keys[0];
    assert_eq!(owner["prefix"], "(configured)", "{keys}");
    assert!(!keys.to_string().contains(&KEY[..6]), "{keys}");
}
