//! Organizations, members, permissions, scoped and expiring keys, and the audit log,
//! through the REST API against the real engine: each check is one a wrong
//! implementation would fail.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{KEY, TestServer, id};

/// A key for a new member of the owner's organization, created by the owner.
pub(crate) async fn member_with_key(server: &TestServer, grants: Value) -> (String, String) {
    let mut body = json!({"name": "member"});
    body.as_object_mut()
        .unwrap()
        .extend(grants.as_object().unwrap().clone());
    let (status, member) = server.post("member.create", body).await;
    assert_eq!(status, StatusCode::OK, "{member}");
    let user_id = member["userId"].as_str().unwrap().to_owned();
    let (status, key) = server
        .post("apiKey.create", json!({"name": "agent", "userId": user_id}))
        .await;
    assert_eq!(status, StatusCode::OK, "{key}");
    (user_id, key["secret"].as_str().unwrap().to_owned())
}

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn members_do_exactly_what_they_were_granted() {
    let server = TestServer::start().await;
    let owners = server.create(json!({"template": "python"})).await;
    let (user_id, secret) = member_with_key(&server, json!({})).await;
    let key = Some(secret.as_str());

    // Default grants: service:read, no project: nothing to see, nothing to create.
    let (status, body) = server
        .get_with_key(
            "sandbox.list",
            &secret,
            &[("projectId", &server.project_id)],
        )
        .await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    let (_, projects) = server.get_with_key("project.all", &secret, &[]).await;
    assert_eq!(projects, json!([]));
    let create = json!({"environmentId": server.env_id, "template": "python"});
    let (status, _) = server
        .post_with_key("sandbox.create", key, create.clone())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Granted create and read on the project: creates, sees only their own sandbox.
    let (status, _) = server
        .post(
            "member.update",
            json!({"userId": user_id, "projectIds": [server.project_id],
                   "permissions": ["service:create", "service:read"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, mine) = server.post_with_key("sandbox.create", key, create).await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    let (_, listed) = server
        .get_with_key(
            "sandbox.list",
            &secret,
            &[("projectId", &server.project_id)],
        )
        .await;
    let listed: Vec<&str> = listed.as_array().unwrap().iter().map(id).collect();
    assert_eq!(listed, [id(&mine)]);
    let (status, body) = server
        .get_with_key("sandbox.one", &secret, &[("sandboxId", id(&owners))])
        .await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    // Reading is not using: exec needs deployment:create.
    let exec = json!({"sandboxId": id(&mine), "cmd": "echo hi"});
    let (status, body) = server
        .post_with_key("sandbox.exec", key, exec.clone())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("deployment:create")
    );

    server
        .post(
            "member.update",
            json!({"userId": user_id,
                   "permissions": ["service:create", "service:read", "deployment:create"]}),
        )
        .await;
    let (status, out) = server.post_with_key("sandbox.exec", key, exec).await;
    assert_eq!(
        (status, out["stdout"].as_str()),
        (StatusCode::OK, Some("hi\n"))
    );
    let gone = json!({"sandboxId": id(&mine)});
    let (status, _) = server
        .post_with_key("sandbox.remove", key, gone.clone())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "remove needs service:delete");
    let (status, _) = server
        .post_with_key("sandbox.kill", key, gone.clone())
        .await;
    assert_eq!(status, StatusCode::OK);

    // Member management is for admins; a member sees only themselves.
    let (status, _) = server
        .post_with_key("member.create", key, json!({"name": "x"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, members) = server.get_with_key("member.all", &secret, &[]).await;
    assert_eq!(members.as_array().unwrap().len(), 1);
    let (status, _) = server.get_with_key("audit.list", &secret, &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Removing the member ends their keys at once.
    let (status, _) = server
        .post("member.remove", json!({"userId": user_id}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server.post_with_key("sandbox.kill", key, gone).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn keys_are_scoped_revocable_and_expire() {
    let server = TestServer::start().await;
    let (status, scoped) = server
        .post(
            "apiKey.create",
            json!({"name": "reader", "scopes": ["service:read"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{scoped}");
    let secret = scoped["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("sbx_"));
    let key = Some(secret.as_str());
    let (status, _) = server
        .get_with_key(
            "sandbox.list",
            &secret,
            &[("projectId", &server.project_id)],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let create = json!({"environmentId": server.env_id, "template": "python"});
    let (status, _) = server.post_with_key("sandbox.create", key, create).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "an owner's key narrowed to reading"
    );
    let (status, _) = server
        .post_with_key("member.create", key, json!({"name": "x"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = server
        .post_with_key(
            "apiKey.create",
            key,
            json!({"name": "wider", "scopes": ["service:read", "service:delete"]}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "no wider than its creator: {body}"
    );

    // A key tells what it is and what it may do, and nothing of its secret.
    let (status, current) = server.get_with_key("apiKey.current", &secret, &[]).await;
    assert_eq!(status, StatusCode::OK, "{current}");
    assert_eq!(current["key"]["keyId"], scoped["keyId"]);
    assert_eq!(current["role"], "owner");
    assert_eq!(current["permissions"], json!(["service:read"]));
    assert!(!current.to_string().contains(&secret));

    // Listed without secrets; revoked keys stop at once.
    let (_, keys) = server.get("apiKey.all", &[]).await;
    let text = keys.to_string();
    assert!(!text.contains(&secret) && !text.contains(KEY));
    assert_eq!(keys.as_array().unwrap().len(), 2);
    let (status, revoked) = server
        .post("apiKey.revoke", json!({"keyId": scoped["keyId"]}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(revoked["revokedAt"].is_string());
    let (status, _) = server.get_with_key("sandbox.templates", &secret, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (_, short) = server
        .post(
            "apiKey.create",
            json!({"name": "short", "expiresInMs": 1000}),
        )
        .await;
    let short = short["secret"].as_str().unwrap().to_owned();
    let (status, _) = server.get_with_key("sandbox.templates", &short, &[]).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, body) = server.get_with_key("sandbox.templates", &short, &[]).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNAUTHORIZED, "UNAUTHORIZED")
    );
}

#[tokio::test]
async fn another_organization_cannot_tell_what_exists() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "python"})).await;
    let sid = id(&sandbox).to_owned();
    let (user_id, _) = member_with_key(&server, json!({})).await;
    let (_, keys) = server.get("apiKey.all", &[]).await;
    let key_id = keys[0]["keyId"].as_str().unwrap().to_owned();
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let other_key = other["apiKey"]["secret"].as_str().unwrap().to_owned();
    let key = Some(other_key.as_str());

    // Every sandbox procedure with this organization's sandbox: the same 404 as an id
    // that never existed.
    let missing = "doesNotExist0000000000";
    for target in [sid.as_str(), missing] {
        for (procedure, body) in [
            ("sandbox.exec", json!({"sandboxId": target, "cmd": "id"})),
            (
                "sandbox.writeFile",
                json!({"sandboxId": target, "path": "/tmp/x", "content": "x"}),
            ),
            (
                "sandbox.setTimeout",
                json!({"sandboxId": target, "timeoutMs": 60_000}),
            ),
            (
                "sandbox.setEgress",
                json!({"sandboxId": target, "allow": ["example.com"]}),
            ),
            (
                "sandbox.requestEgress",
                json!({"sandboxId": target, "host": "example.com"}),
            ),
            ("sandbox.pause", json!({"sandboxId": target})),
            ("sandbox.resume", json!({"sandboxId": target})),
            ("sandbox.snapshot", json!({"sandboxId": target})),
            ("sandbox.fork", json!({"sandboxId": target})),
            ("sandbox.kill", json!({"sandboxId": target})),
            ("sandbox.remove", json!({"sandboxId": target})),
            ("sandbox.execToken", json!({"sandboxId": target})),
            (
                "sandbox.processStart",
                json!({"sandboxId": target, "cmd": "id"}),
            ),
            ("sandbox.contextCreate", json!({"sandboxId": target})),
        ] {
            let (status, body) = server.post_with_key(procedure, key, body).await;
            assert_eq!(
                (status, body["message"].as_str()),
                (StatusCode::NOT_FOUND, Some("sandbox not found")),
                "{procedure} {target}"
            );
        }
        for (procedure, query) in [
            ("sandbox.one", vec![("sandboxId", target)]),
            ("sandbox.stats", vec![("sandboxId", target)]),
            ("sandbox.egressLog", vec![("sandboxId", target)]),
            (
                "sandbox.readFile",
                vec![("sandboxId", target), ("path", "/etc/hostname")],
            ),
            ("sandbox.listFiles", vec![("sandboxId", target)]),
            ("sandbox.processList", vec![("sandboxId", target)]),
        ] {
            let (status, body) = server.get_with_key(procedure, &other_key, &query).await;
            assert_eq!(
                (status, body["message"].as_str()),
                (StatusCode::NOT_FOUND, Some("sandbox not found")),
                "{procedure} {target}"
            );
        }
    }
    for (procedure, query) in [
        (
            "sandbox.list",
            vec![("projectId", server.project_id.as_str())],
        ),
        (
            "sandbox.list",
            vec![("environmentId", server.env_id.as_str())],
        ),
    ] {
        let (status, _) = server.get_with_key(procedure, &other_key, &query).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{procedure}");
    }
    let create = json!({"environmentId": server.env_id, "template": "python"});
    let (status, _) = server.post_with_key("sandbox.create", key, create).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post_with_key(
            "member.update",
            key,
            json!({"userId": user_id, "role": "owner"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post_with_key("member.remove", key, json!({"userId": user_id}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post_with_key("apiKey.revoke", key, json!({"keyId": key_id}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post_with_key(
            "environment.create",
            key,
            json!({"projectId": server.project_id, "name": "stolen"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post_with_key(
            "apiKey.create",
            key,
            json!({"name": "x", "userId": user_id}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Granting another organization's sandbox or project is refused like a typo.
    let (status, body) = server
        .post_with_key(
            "member.create",
            key,
            json!({"name": "x", "sandboxIds": [sid]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Its own view: its projects, its audit log, nothing of the first organization.
    let (_, projects) = server.get_with_key("project.all", &other_key, &[]).await;
    assert!(!projects.to_string().contains(&server.project_id));
    let (_, audit) = server.get_with_key("audit.list", &other_key, &[]).await;
    let text = audit.to_string();
    assert!(!text.contains(&sid) && !text.contains(&user_id), "{text}");
    // The sandbox is untouched.
    let (_, one) = server.get("sandbox.one", &[("sandboxId", &sid)]).await;
    assert_eq!(one["status"], "running");
}

#[tokio::test]
async fn the_audit_log_records_who_did_what_and_pages() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "python"})).await;
    let sid = id(&sandbox).to_owned();
    server.exec(&sandbox, "echo private-words-123").await;
    server
        .post(
            "sandbox.setTimeout",
            json!({"sandboxId": sid, "timeoutMs": 60_000}),
        )
        .await;
    server.post("sandbox.kill", json!({"sandboxId": sid})).await;
    server
        .post("sandbox.remove", json!({"sandboxId": sid}))
        .await;
    let (user_id, _) = member_with_key(&server, json!({"permissions": ["service:read"]})).await;
    let (_, keys) = server.get("apiKey.all", &[]).await;
    let member_key = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["userId"] == json!(user_id))
        .unwrap()["keyId"]
        .clone();
    server
        .post("apiKey.revoke", json!({"keyId": member_key}))
        .await;

    let (status, page) = server.get("audit.list", &[("resourceId", &sid)]).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let actions: Vec<&str> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "sandbox.remove",
            "sandbox.kill",
            "sandbox.setTimeout",
            "sandbox.exec",
            "sandbox.create"
        ]
    );
    // Commands are recorded (config) as a keyed hash, never as text.
    let exec = &page["entries"][3];
    assert_eq!(exec["metadata"]["commandHash"].as_str().unwrap().len(), 64);
    assert_eq!(exec["metadata"]["exitCode"], 0);
    assert!(!page.to_string().contains("private-words"));
    let create = &page["entries"][4];
    assert_eq!(create["resourceType"], "sandbox");
    assert_eq!(create["resourceName"], sandbox["name"]);
    assert!(create["actorId"].is_string() && create["actorKeyId"].is_string());
    assert_eq!(create["metadata"]["networkMode"], "isolated");

    let (_, revokes) = server
        .get("audit.list", &[("action", "apiKey.revoke")])
        .await;
    assert_eq!(revokes["entries"][0]["resourceId"], member_key);

    // Pages of two cover everything once, newest first.
    let (_, all) = server.get("audit.list", &[]).await;
    let all: Vec<Value> = all["entries"].as_array().unwrap().clone();
    assert_eq!(all.len(), 8, "{all:?}");
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", "2".to_owned())];
        if let Some(c) = &cursor {
            query.push(("cursor", c.clone()));
        }
        let query: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (_, page) = server.get("audit.list", &query).await;
        paged.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, all);
    // A time window in the future holds nothing; a bad time is a 400 naming the field.
    let (_, empty) = server
        .get("audit.list", &[("from", "2999-01-01T00:00:00Z")])
        .await;
    assert_eq!(empty["entries"], json!([]));
    let (status, body) = server.get("audit.list", &[("to", "soon")]).await;
    assert_eq!(
        (status, body["issues"][0]["path"].as_str()),
        (StatusCode::BAD_REQUEST, Some("to"))
    );
}
