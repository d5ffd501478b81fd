//! The typed client (`sandboxd-client`) against a real server: a sandbox's life through
//! its typed calls, and refusals as typed errors.

use sandboxd_core::api::{
    CreateSandboxRequest, Encoding, ListFilesQuery, ListSandboxesQuery, ReadFileQuery,
    WriteFileRequest,
};
use sandboxd_core::model::SandboxStatus;

use crate::harness::TestServer;

#[tokio::test]
async fn a_sandbox_lives_and_ends_through_the_typed_client() {
    let server = TestServer::start().await;
    let api = &server.api;
    let projects = api.projects().await.expect("projects");
    assert_eq!(projects[0].environments[0].environment_id, server.env_id);
    assert!(
        api.templates()
            .await
            .expect("templates")
            .iter()
            .any(|t| t.name == "base")
    );

    let sandbox = api
        .create(&CreateSandboxRequest {
            environment_id: server.env_id.clone(),
            template: Some("base".into()),
            ..Default::default()
        })
        .await
        .expect("create");
    assert_eq!(sandbox.status, SandboxStatus::Running);
    let id = sandbox.sandbox_id.clone();

    let out = api
        .run(&id, "echo hi; echo oops >&2; exit 3")
        .await
        .expect("exec");
    assert_eq!(
        (out.exit_code, out.stdout.as_str(), out.stderr.as_str()),
        (3, "hi\n", "oops\n")
    );

    let written = api
        .write_file(&WriteFileRequest {
            sandbox_id: id.clone(),
            path: "/tmp/typed/a.bin".into(),
            content: "AAEC/w==".into(),
            encoding: Encoding::Base64,
            mode: None,
        })
        .await
        .expect("write");
    assert_eq!(written.size, 4);
    let read = api
        .read_file(&ReadFileQuery {
            sandbox_id: id.clone(),
            path: "/tmp/typed/a.bin".into(),
            encoding: Encoding::Base64,
        })
        .await
        .expect("read");
    assert_eq!((read.size, read.content.as_str()), (4, "AAEC/w=="));
    let listed = api
        .list_files(&ListFilesQuery {
            sandbox_id: id.clone(),
            path: Some("/tmp/typed".into()),
        })
        .await
        .expect("list files");
    assert_eq!(listed.entries.len(), 1);
    assert_eq!(listed.entries[0].name, "a.bin");

    let extended = api.set_timeout(&id, 600_000).await.expect("set timeout");
    assert_eq!(extended.timeout_ms, 600_000);
    let all = api
        .list(&ListSandboxesQuery {
            environment_id: Some(server.env_id.clone()),
            project_id: None,
        })
        .await
        .expect("list");
    assert!(all.iter().any(|s| s.sandbox_id == id));
    assert_eq!(api.one(&id).await.expect("one").name, sandbox.name);

    let killed = api.kill(&id).await.expect("kill");
    assert_eq!(killed.status, SandboxStatus::Killed);
    let refused = api
        .run(&id, "true")
        .await
        .expect_err("a killed sandbox runs nothing");
    assert_eq!(refused.status(), Some(412), "{refused}");
    assert!(api.remove(&id).await.expect("remove"));

    let gone = api.one(&id).await.expect_err("removed");
    let refusal = gone.refusal().expect("a refusal");
    assert_eq!(refusal.status, 404);
    assert!(refusal.message.contains("not found"), "{}", refusal.message);
}

#[tokio::test]
async fn bad_input_and_a_bad_key_are_typed_refusals() {
    let server = TestServer::start().await;
    let bad = server
        .api
        .create(&CreateSandboxRequest {
            environment_id: server.env_id.clone(),
            template: Some("base".into()),
            cpu: Some(1000.0),
            ..Default::default()
        })
        .await
        .expect_err("too many CPUs");
    let refusal = bad.refusal().expect("a refusal");
    assert_eq!(refusal.status, 400);
    assert!(
        refusal.issues.iter().any(|(path, _)| path == "cpu"),
        "{refusal:?}"
    );

    let stranger = server
        .api
        .with_key("sbx_not_a_key_0123456789abcdefghijklmnopq");
    let denied = stranger.projects().await.expect_err("unknown key");
    assert_eq!(denied.status(), Some(401));
    let unknown = server
        .api
        .call::<_, serde_json::Value>("sandbox.nothing", &())
        .await
        .expect_err("not in the table");
    assert!(matches!(
        unknown,
        sandboxd_client::Error::UnknownProcedure(_)
    ));
}
