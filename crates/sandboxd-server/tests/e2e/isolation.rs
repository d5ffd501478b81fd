//! Isolation as asked on create: `"isolation": "gvisor"` runs the sandbox under gVisor
//! (the kernel it sees says so), with its agent serving it and the processes its pids
//! limit asks for; a server whose engine has no gVisor refuses it, as it refuses
//! `internet` under gVisor and any field it does not know. Needs `runsc` registered
//! with the engine (`scripts/gvisor.sh`).

use reqwest::StatusCode;
use serde_json::json;

use crate::harness::{TestServer, container, id};

/// Starts `sleep`s until one is refused; prints the refusal's errno and how many ran.
const FORK_BOMB: &str = "python3 -c \"\nimport subprocess\nps = []\ntry:\n    \
    for _ in range(500): ps.append(subprocess.Popen(['sleep', '30']))\n\
    except OSError as e: print('refused', e.errno)\nprint(len(ps))\n\
    [p.kill() for p in ps]\"";

#[tokio::test]
async fn a_gvisor_sandbox_runs_under_gvisor_and_its_agent_serves_it() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "isolation": "gvisor", "pidsLimit": 64}))
        .await;
    assert_eq!(
        (sandbox["isolation"].as_str(), sandbox["runtime"].as_str()),
        (Some("gvisor"), Some("runsc"))
    );
    let host = server
        .docker()
        .inspect_container(container(&sandbox), None)
        .await
        .unwrap()
        .host_config
        .unwrap();
    assert_eq!(host.runtime.as_deref(), Some("runsc"));
    assert_eq!(
        host.pids_limit,
        Some(3 * 64 + 128),
        "room for gVisor's own threads"
    );
    let nproc = host.ulimits.unwrap_or_default();
    assert_eq!(
        (nproc[0].name.as_deref(), nproc[0].hard),
        (Some("nproc"), Some(64)),
        "the tasks counted by the sandbox's own kernel"
    );

    // From inside: gVisor's kernel, and the sandbox's user.
    let inside = server.exec(&sandbox, "dmesg | head -1; id -u").await;
    assert_eq!(inside["exitCode"], 0, "{inside}");
    let stdout = inside["stdout"].as_str().unwrap();
    assert!(stdout.contains("Starting gVisor"), "{stdout}");
    assert!(stdout.ends_with("1000\n"), "{stdout}");

    // A fork bomb meets the limit as it does under runc (the limit counts every task
    // of the sandbox, its agent's among them), and the sandbox lives on.
    let plain = server
        .create(json!({"template": "base", "pidsLimit": 64}))
        .await;
    assert_eq!(plain["isolation"], "container");
    let mut spawned = Vec::new();
    for one in [&sandbox, &plain] {
        let bomb = server.exec(one, FORK_BOMB).await;
        let told = bomb["stdout"].as_str().unwrap_or_default().to_owned();
        assert!(told.starts_with("refused 11\n"), "{bomb}");
        spawned.push(told.lines().last().unwrap().parse::<i64>().unwrap());
        assert_eq!(server.exec(one, "echo alive").await["stdout"], "alive\n");
    }
    let (gvisor, runc) = (spawned[0], spawned[1]);
    println!("pids limit 64: {gvisor} sleeps under gVisor, {runc} under runc");
    assert!(
        (40..64).contains(&gvisor) && (gvisor - runc).abs() <= 8,
        "{gvisor} processes under gVisor, {runc} under runc, of 64"
    );

    // Files and processes go through its agent.
    let (status, body) = server
        .post(
            "sandbox.writeFile",
            json!({"sandboxId": id(&sandbox), "path": "/home/user/a.txt", "content": "under gVisor"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let read = server.exec(&sandbox, "cat /home/user/a.txt").await;
    assert_eq!(read["stdout"], "under gVisor");
    let (status, context) = server
        .post("sandbox.contextCreate", json!({"sandboxId": id(&sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    let (status, ran) = server
        .post(
            "sandbox.contextRun",
            json!({"sandboxId": id(&sandbox), "contextId": context["contextId"], "code": "6 * 7"}),
        )
        .await;
    assert_eq!(
        (status, &ran["result"]),
        (StatusCode::OK, &json!("42")),
        "{ran}"
    );

    // Beside it, a sandbox of the server's default runs on the host's kernel.
    let kernel = server.exec(&plain, "uname -r").await;
    assert_ne!(kernel["stdout"], "4.4.0\n", "gVisor's kernel says 4.4.0");
}

#[tokio::test]
async fn what_cannot_be_given_is_refused_by_name() {
    let server =
        TestServer::start_with(|config| config.gvisor_runtime = "runsc-absent".into()).await;
    let ask = |extra: serde_json::Value| {
        let mut body = json!({"environmentId": server.env_id, "template": "python"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for (extra, field) in [
        (json!({"isolation": "gvisor"}), "isolation"),
        (json!({"isolation": "microvm"}), "isolation"),
        (
            json!({"isolation": "gvisor", "networkMode": "internet"}),
            "networkMode",
        ),
        (json!({"isolaton": "gvisor"}), "isolaton"),
    ] {
        let (status, body) = server.post("sandbox.create", ask(extra.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{extra}: {body}");
        assert!(body.to_string().contains(field), "{extra}: {body}");
    }
    let (status, body) = server
        .post("sandbox.create", ask(json!({"isolation": "gvisor"})))
        .await;
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("runsc-absent")
            || body.to_string().contains("runsc-absent"),
        "{status}: {body}"
    );
    let (_, listed) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(0),
        "nothing was made: {listed}"
    );
    let made = server
        .create(json!({"template": "python", "isolation": "container"}))
        .await;
    assert_eq!(made["isolation"], "container");
}

#[tokio::test]
async fn a_templates_isolation_is_a_floor_its_creates_cannot_go_below() {
    let server = TestServer::start_with(|config| {
        config
            .templates
            .entry("python".into())
            .or_default()
            .isolation = Some(sandboxd_core::model::Isolation::Gvisor);
    })
    .await;
    let (status, templates) = server.get("sandbox.templates", &[]).await;
    assert_eq!(status, StatusCode::OK, "{templates}");
    let python = templates
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "python")
        .unwrap();
    assert_eq!(python["isolation"], "gvisor");
    let by_template = server.create(json!({"template": "python"})).await;
    assert_eq!(by_template["isolation"], "gvisor");
    let kernel = server.exec(&by_template, "uname -r").await;
    assert_eq!(kernel["stdout"], "4.4.0\n", "{kernel}");
    // The template's isolation is a floor: asking for a weaker one is refused.
    let (status, refused) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "python", "isolation": "container"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let told = refused.to_string();
    assert!(
        told.contains("isolation") && told.contains("gvisor") && told.contains("python"),
        "{told}"
    );
    let other = server.create(json!({"template": "base"})).await;
    assert_eq!(other["isolation"], "container");
}
