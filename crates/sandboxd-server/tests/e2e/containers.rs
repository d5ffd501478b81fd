//! Containers as the engine sees them: hardening, limits, labels, network, images.

use reqwest::StatusCode;
use serde_json::json;

use crate::harness::{BUSYBOX, TestServer, container, id};

#[tokio::test]
async fn container_is_hardened_and_limited_as_planned() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "base", "cpu": 0.5, "memoryMb": 128, "pidsLimit": 64, "envVars": "FOO=bar\n# c\nBAD\nBAZ=q=1"}))
        .await;
    let info = server
        .docker()
        .inspect_container(container(&sandbox), None)
        .await
        .unwrap();
    let config = info.config.unwrap();
    let host = info.host_config.unwrap();
    assert_eq!(
        info.name.as_deref(),
        Some(format!("/sandboxd-{}", id(&sandbox)).as_str())
    );
    assert_eq!(config.user.as_deref(), Some("1000:1000"));
    let agent_cmd = [
        "/.sandboxd/bin/sandboxd-agent",
        "supervise",
        "--socket",
        "/.sandboxd/run/agent.sock",
    ];
    assert_eq!(config.cmd, Some(agent_cmd.map(String::from).to_vec()));
    assert!(
        config
            .entrypoint
            .unwrap_or_default()
            .iter()
            .all(String::is_empty)
    );
    assert_eq!(config.working_dir.as_deref(), Some("/home/user"));
    assert_eq!(config.network_disabled, Some(true));
    // The sandbox's variables are given to each command, never written into the
    // container's configuration (which the engine keeps on disk in plain text).
    let env = config.env.unwrap();
    assert!(env.contains(&"HOME=/home/user".to_owned()));
    assert!(
        !env.iter()
            .any(|e| e.starts_with("FOO") || e.starts_with("BAZ")),
        "{env:?}"
    );
    let seen = server
        .exec(&sandbox, "echo $FOO $BAZ; env | grep -c '^BAD' || true")
        .await;
    assert_eq!(seen["stdout"], "bar q=1\n0\n", "{seen}");
    let labels = config.labels.unwrap();
    assert_eq!(labels["sandboxd.sandbox"], "true");
    assert_eq!(labels["sandboxd.sandboxId"], id(&sandbox));
    assert_eq!(labels["sandboxd.projectId"], server.project_id);
    assert_eq!(labels["sandboxd.environmentId"], server.env_id);
    assert_eq!(labels["sandboxd.instance"], server.instance());
    // The agent's supervisor is PID 1 (it reaps orphans), not the engine's init.
    assert_eq!(host.init, Some(false));
    // The host's OOM killer takes sandboxes before sandboxd or the engine.
    assert_eq!(host.oom_score_adj, Some(1000));
    assert_eq!(host.nano_cpus, Some(500_000_000));
    assert_eq!(host.memory, Some(128 * 1024 * 1024));
    assert_eq!(host.memory_swap, Some(128 * 1024 * 1024));
    assert_eq!(host.pids_limit, Some(64));
    assert_eq!(host.cap_drop, Some(vec!["ALL".into()]));
    assert_eq!(host.security_opt, Some(vec!["no-new-privileges".into()]));
    assert_eq!(
        host.restart_policy
            .unwrap()
            .name
            .map(|n| n.to_string())
            .as_deref(),
        Some("no")
    );
    // The agent and its socket directory are bind-mounted read-only, from absolute paths.
    let mounts = host.mounts.unwrap();
    assert_eq!(mounts.len(), 2, "{mounts:?}");
    for mount in &mounts {
        assert_eq!(
            mount.typ,
            Some(bollard::models::MountType::BIND),
            "{mount:?}"
        );
        assert_eq!(mount.read_only, Some(true), "{mount:?}");
        assert!(
            mount.source.as_deref().is_some_and(|s| s.starts_with('/')),
            "{mount:?}"
        );
    }
    let targets: Vec<_> = mounts.iter().filter_map(|m| m.target.as_deref()).collect();
    assert_eq!(targets, ["/.sandboxd/bin/sandboxd-agent", "/.sandboxd/run"]);
    let log = host.log_config.unwrap();
    assert_eq!(log.typ.as_deref(), Some("json-file"));
    assert_eq!(log.config.unwrap()["max-size"], "10m");

    // The workdir belongs to the sandbox user; HOME is the workdir.
    let out = server
        .exec(&sandbox, "id -u; id -g; stat -c %u:%g .; echo $HOME")
        .await;
    assert_eq!(out["stdout"], "1000\n1000\n1000:1000\n/home/user\n");
}

#[tokio::test]
async fn without_the_agent_the_main_process_is_tail() {
    let server = TestServer::start_without_agent().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let info = server
        .docker()
        .inspect_container(container(&sandbox), None)
        .await
        .unwrap();
    assert_eq!(
        info.config.unwrap().cmd,
        Some(vec!["tail".into(), "-f".into(), "/dev/null".into()])
    );
    assert!(
        info.host_config
            .unwrap()
            .binds
            .unwrap_or_default()
            .is_empty()
    );
    let out = server.exec(&sandbox, "id -u; pwd").await;
    assert_eq!(out["stdout"], "1000\n/home/user\n");
}

#[tokio::test]
async fn isolated_sandbox_has_only_loopback() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    assert_eq!(sandbox["networkMode"], "isolated");
    let out = server
        .exec(
            &sandbox,
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
        )
        .await;
    assert_eq!(out["stdout"], "lo\n");
    let info = server
        .docker()
        .inspect_container(container(&sandbox), None)
        .await
        .unwrap();
    let networks = info
        .network_settings
        .and_then(|n| n.networks)
        .unwrap_or_default();
    assert!(networks.keys().all(|name| name != "bridge"), "{networks:?}");
}

/// Removes the `internet` network when the test ends, even after a failure. Only this
/// test uses `internet` mode, so it owns the network while it runs (the pools kept for
/// demand are tested with `internet` here for that reason).
struct NetworkGuard;

impl Drop for NetworkGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["network", "rm", "sandboxd-internet"])
            .output();
    }
}

#[tokio::test]
async fn internet_sandbox_is_on_a_dedicated_bridge_without_inter_container_traffic() {
    let _network = NetworkGuard;
    let server = TestServer::start_with(|config| {
        config.warm_on_demand = Default::default();
    })
    .await;
    // A network left by an older build that allows inter-container traffic, unused: it
    // must be recreated.
    let _ = std::process::Command::new("docker")
        .args(["network", "rm", "sandboxd-internet"])
        .output();
    let planted = std::process::Command::new("docker")
        .args([
            "network",
            "create",
            "--label",
            "sandboxd.sandbox=true",
            "sandboxd-internet",
        ])
        .output()
        .unwrap();
    assert!(planted.status.success());
    let sandbox = server
        .create(json!({"template": "base", "networkMode": "internet"}))
        .await;
    let info = server
        .docker()
        .inspect_container(container(&sandbox), None)
        .await
        .unwrap();
    let networks = info
        .network_settings
        .and_then(|n| n.networks)
        .unwrap_or_default();
    assert_eq!(networks.keys().collect::<Vec<_>>(), ["sandboxd-internet"]);
    let network = server
        .docker()
        .inspect_network("sandboxd-internet", None)
        .await
        .unwrap();
    assert_eq!(
        network.options.unwrap()["com.docker.network.bridge.enable_icc"],
        "false"
    );
    assert_eq!(network.internal, Some(false));
    let out = server
        .exec(
            &sandbox,
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort",
        )
        .await;
    assert_eq!(out["stdout"], "eth0\nlo\n");

    // A second sandbox reuses the correct network. It is served by the pool kept for the
    // shape's demand, whose member was made on that network.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.service.pools().ready().values().sum::<usize>() != 1 {
        assert!(std::time::Instant::now() < deadline, "no member made");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let members = server.service.pools().members();
    let second = server
        .create(json!({"template": "base", "networkMode": "internet"}))
        .await;
    assert!(members.contains(id(&second)), "served warm");
    assert_eq!(second["networkMode"], "internet");
    let again = server
        .docker()
        .inspect_network("sandboxd-internet", None)
        .await
        .unwrap();
    assert_eq!(again.id, network.id);

    // A listener in one is reachable from itself and not from the other.
    let (status, _) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&second), "cmd": "exec python3 -m http.server 8080"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let address = server
        .docker()
        .inspect_container(container(&second), None)
        .await
        .unwrap()
        .network_settings
        .and_then(|n| n.networks)
        .and_then(|n| n.get("sandboxd-internet").cloned())
        .and_then(|n| n.ip_address)
        .unwrap();
    let connect = format!(
        "python3 -c \"import socket,time\nfor _ in range(50):\n  try:\n    socket.create_connection(('{address}', 8080), timeout=2); print('open'); break\n  except ConnectionRefusedError: time.sleep(0.1)\n  except OSError as e: print(type(e).__name__); break\""
    );
    let own = server.exec(&second, &connect).await;
    assert_eq!(own["stdout"], "open\n", "{own}");
    let other = server.exec(&sandbox, &connect).await;
    assert_ne!(other["stdout"], "open\n", "{other}");
    for sandbox in [&sandbox, &second] {
        let (status, _) = server
            .post("sandbox.kill", json!({"sandboxId": id(sandbox)}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
}

#[tokio::test]
async fn a_workdir_the_user_may_not_create_is_made_for_the_user() {
    let server = TestServer::start().await;
    // The agent (the sandbox user) cannot create it under root's /opt: the engine does,
    // with the parent as root and the workdir as the user.
    let sandbox = server
        .create(json!({"template": "base", "workdir": "/opt/project/app"}))
        .await;
    let out = server
        .exec(&sandbox, "pwd; stat -c %u:%g .; stat -c %u ..")
        .await;
    assert_eq!(out["stdout"], "/opt/project/app\n1000:1000\n0\n");
}

#[tokio::test]
async fn custom_image_runs_as_its_default_user() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"image": BUSYBOX, "workdir": "/work/dir"}))
        .await;
    assert_eq!(sandbox["user"], "0:0");
    assert_eq!(sandbox["template"], serde_json::Value::Null);
    let out = server.exec(&sandbox, "pwd; id -u").await;
    assert_eq!(out["stdout"], "/work/dir\n0\n");
}

#[tokio::test]
async fn failed_pull_names_the_image_and_leaves_no_container() {
    let server = TestServer::start().await;
    let image = "sandboxd-local/does-not-exist:missing";
    let (status, body) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "image": image}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["message"].as_str().unwrap().contains(image), "{body}");
    let (_, list) = server
        .get("sandbox.list", &[("environmentId", &server.env_id)])
        .await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["status"], "error");
    assert_eq!(list[0]["containerId"], serde_json::Value::Null);
    let containers = server
        .service
        .engine()
        .list_sandbox_containers(server.instance())
        .await
        .unwrap();
    assert!(containers.is_empty(), "{containers:?}");
}

/// Sandboxes report their isolation tier; a configured runtime is used, and one the
/// engine does not offer stops the start instead of silently becoming runc.
#[tokio::test]
async fn the_runtime_is_configured_reported_and_checked() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "python"})).await;
    assert_eq!(sandbox["isolation"], "container");
    assert_eq!(sandbox["runtime"], serde_json::Value::Null);
    drop(server);

    let server = TestServer::start_with(|config| config.runtime = Some("runc".into())).await;
    let sandbox = server.create(json!({"template": "python"})).await;
    assert_eq!(
        (sandbox["runtime"].as_str(), sandbox["isolation"].as_str()),
        (Some("runc"), Some("container"))
    );
    let info = server
        .docker()
        .inspect_container(container(&sandbox), None)
        .await
        .unwrap();
    assert_eq!(info.host_config.unwrap().runtime.as_deref(), Some("runc"));

    let dir = tempfile::tempdir().unwrap();
    let mut config = sandboxd_server::Config::new(dir.path().to_path_buf());
    config.runtime = Some("runsc-absent".into());
    let engine =
        sandboxd_server::Engines::local(std::sync::Arc::new(crate::harness::local_engine().await));
    let error = sandboxd_server::Server::start(config, engine)
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("\"runsc-absent\" is not offered"),
        "{error}"
    );
}

/// Networks of `name` on the local engine (the engine's name filter matches parts).
async fn networks_named(docker: &bollard::Docker, name: &str) -> Vec<String> {
    let filters = std::collections::HashMap::from([("name", vec![name.to_owned()])]);
    let options = bollard::query_parameters::ListNetworksOptionsBuilder::default()
        .filters(&filters)
        .build();
    docker
        .list_networks(Some(options))
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.name.as_deref() == Some(name))
        .filter_map(|n| n.id)
        .collect()
}

#[tokio::test]
async fn two_bridges_of_one_name_are_made_one() {
    use sandboxd_contracts::Engine as _;
    // Concurrent creates on a fresh engine (two processes, or two replicas) can leave
    // two networks of one name, which no container can name.
    let engine = crate::harness::local_engine().await;
    let docker = engine.client().clone();
    let name = format!("sandboxd-test-bridge-{}", std::process::id());
    for _ in 0..2 {
        docker
            .create_network(bollard::models::NetworkCreateRequest {
                name: name.clone(),
                driver: Some("bridge".into()),
                labels: Some([("sandboxd.test".to_owned(), "bridge".to_owned())].into()),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    assert_eq!(networks_named(&docker, &name).await.len(), 2);
    let outcome = engine.ensure_bridge(&name).await;
    let left = networks_named(&docker, &name).await;
    for id in &left {
        let _ = docker.remove_network(id).await;
    }
    outcome.expect("the bridge ensured");
    assert_eq!(left.len(), 1, "{left:?}");
}
