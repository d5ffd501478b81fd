//! Warm pools on the real engine: members are made in the background and never visible
//! as sandboxes; a matching create claims one (env vars given to every command), a
//! different one goes cold; reconcile keeps members and removes strangers; a stop
//! removes the unclaimed members and a restart keeps claimed sandboxes working. Pools
//! kept for demand: another image's shape gets one, the next such create is warm, and
//! the pool is emptied once creates stop (`internet` ones: `containers.rs`); their
//! budget is shared between organizations.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::query_parameters::ListContainersOptionsBuilder;
use reqwest::StatusCode;
use serde_json::json;

use crate::contexts::{create_context, run};
use crate::harness::{BUSYBOX, TestServer, id};
use sandboxd_server::config::{PoolConfig, WarmOnDemandConfig};
use sandboxd_server::service::PoolKey;

/// Pool containers of a server (label `sandboxd.pool`), by sandbox id.
pub(crate) async fn pool_containers(
    server: &TestServer,
    instance: &str,
) -> HashMap<String, String> {
    let filters = HashMap::from([(
        "label".to_owned(),
        vec![
            format!("sandboxd.instance={instance}"),
            "sandboxd.pool".to_owned(),
        ],
    )]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    server
        .docker()
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .map(|c| {
            let labels = c.labels.unwrap_or_default();
            (
                labels["sandboxd.sandboxId"].clone(),
                c.id.unwrap_or_default(),
            )
        })
        .collect()
}

/// Prints the sandbox's memory limit, CPU quota and period, and pids limit as its own
/// cgroup has them (v2, or v1's controllers).
const LIMITS_FROM_INSIDE: &str = "\
    if [ -f /sys/fs/cgroup/memory.max ]; then \
      cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max /sys/fs/cgroup/pids.max; \
    else \
      cat /sys/fs/cgroup/memory/memory.limit_in_bytes; \
      echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); \
      cat /sys/fs/cgroup/pids/pids.max; \
    fi";

pub(crate) async fn wait_ready(server: &TestServer, pool: &str, size: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let key = PoolKey::local(pool);
    while server.service.pools().ready().get(&key).copied() != Some(size) {
        assert!(
            Instant::now() < deadline,
            "pool {pool} never reached {size}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_warm_pool_serves_matching_creates_and_leaks_nothing() {
    let server = TestServer::start_with(|config| {
        config.pools.insert("python".into(), PoolConfig { size: 2 });
    })
    .await;
    let instance = server.instance().to_owned();
    wait_ready(&server, "python", 2).await;
    let members = pool_containers(&server, &instance).await;
    assert_eq!(members.len(), 2);
    // Not sandboxes: not listed, not found, kept by reconcile.
    let (_, listed) = server
        .get("sandbox.list", &[("projectId", &server.project_id)])
        .await;
    assert_eq!(listed, json!([]));
    for member in members.keys() {
        let (status, _) = server.get("sandbox.one", &[("sandboxId", member)]).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    server.service.duties().reconcile_once().await.unwrap();
    assert_eq!(pool_containers(&server, &instance).await.len(), 2);

    // A matching create claims a member: same container, variables in every command.
    let claimed = server
        .create(json!({"template": "python", "envVars": "GREETING=hello warm", "name": "w"}))
        .await;
    assert!(members.contains_key(id(&claimed)), "served by the pool");
    assert_eq!(claimed["status"], "running");
    assert_eq!(claimed["name"], "w");
    let out = server.exec(&claimed, "echo $GREETING; id -u").await;
    assert_eq!(out["stdout"], "hello warm\n1000\n");
    let (status, out) = server
        .post(
            "sandbox.exec",
            json!({"sandboxId": id(&claimed), "cmd": "echo $GREETING", "env": {"GREETING": "mine"}}),
        )
        .await;
    assert_eq!(
        (status, out["stdout"].as_str()),
        (StatusCode::OK, Some("mine\n")),
        "request env wins"
    );
    let (_, process) = server
        .post(
            "sandbox.processStart",
            json!({"sandboxId": id(&claimed), "cmd": "echo $GREETING"}),
        )
        .await;
    server
        .post(
            "sandbox.processWait",
            json!({"sandboxId": id(&claimed), "processId": process["processId"]}),
        )
        .await;
    let (_, output) = server
        .get(
            "sandbox.processOutput",
            &[
                ("sandboxId", id(&claimed)),
                ("processId", process["processId"].as_str().unwrap()),
            ],
        )
        .await;
    assert_eq!(output["data"], "hello warm\n");
    let (_, listed) = server
        .get("sandbox.list", &[("projectId", &server.project_id)])
        .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // The pool refills; other limits are set on the claimed container; another workdir
    // goes cold.
    wait_ready(&server, "python", 2).await;
    let members = pool_containers(&server, &instance).await;
    let limited = server
        .create(json!({"template": "python", "memoryMb": 256, "cpu": 0.5, "pidsLimit": 64}))
        .await;
    assert!(members.contains_key(id(&limited)), "served by the pool");
    // The first command already runs under them, as its own cgroup says.
    let seen = server.exec(&limited, LIMITS_FROM_INSIDE).await;
    assert_eq!(seen["stdout"], "268435456\n50000 100000\n64\n", "{seen}");
    // And the engine reports them (told off the claim's path when they were written to
    // the cgroup directly).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let host = server
            .docker()
            .inspect_container(&members[id(&limited)], None)
            .await
            .unwrap()
            .host_config
            .unwrap();
        let reported = (
            host.memory,
            host.memory_swap,
            host.nano_cpus,
            host.pids_limit,
        );
        let wanted = (
            Some(256 << 20),
            Some(256 << 20),
            Some(500_000_000),
            Some(64),
        );
        if reported == wanted {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{reported:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        (limited["memoryMb"].as_i64(), limited["pidsLimit"].as_i64()),
        (Some(256), Some(64))
    );
    wait_ready(&server, "python", 2).await;
    let cold = server
        .create(json!({"template": "python", "workdir": "/tmp/elsewhere"}))
        .await;
    assert!(
        !pool_containers(&server, &instance)
            .await
            .contains_key(id(&cold))
    );

    // A pool container nobody knows (a pool removed from the configuration, a crash)
    // is removed by reconcile.
    let stranger = std::process::Command::new("docker")
        .args([
            "run",
            "-d",
            "--label",
            &format!("sandboxd.instance={instance}"),
            "--label",
            "sandboxd.sandbox=true",
            "--label",
            "sandboxd.sandboxId=strangerAAAA",
            "--label",
            "sandboxd.pool=gone",
            BUSYBOX,
            "sleep",
            "300",
        ])
        .output()
        .unwrap();
    assert!(stranger.status.success());
    server.service.duties().reconcile_once().await.unwrap();
    let left = pool_containers(&server, &instance).await;
    assert!(!left.contains_key("strangerAAAA"), "{left:?}");
    assert_eq!(left.len(), 4, "two members and the two claimed sandboxes");

    // A stop removes the unclaimed members; the claimed sandbox survives a restart with
    // its variables.
    let stopped = server.stop().await;
    let server = TestServer::start_in(stopped).await;
    let left = pool_containers(&server, &instance).await;
    assert!(left.contains_key(id(&claimed)));
    assert_eq!(
        left.len(),
        2,
        "only the claimed sandboxes are left: {left:?}"
    );
    let out = server.exec(&claimed, "echo $GREETING").await;
    assert_eq!(out["stdout"], "hello warm\n");
}

/// A gVisor template's pool holds gVisor members; a create with other limits is made
/// cold, and one asking for a weaker isolation is refused (a gVisor sandbox's process limit is its
/// kernel's, set as it starts).
#[tokio::test]
async fn a_gvisor_templates_pool_serves_gvisor_sandboxes_of_its_limits() {
    let server = TestServer::start_with(|config| {
        config.pools.insert("python".into(), PoolConfig { size: 1 });
        config
            .templates
            .entry("python".into())
            .or_default()
            .isolation = Some(sandboxd_core::model::Isolation::Gvisor);
    })
    .await;
    let instance = server.instance().to_owned();
    wait_ready(&server, "python", 1).await;
    let members = pool_containers(&server, &instance).await;
    let claimed = server.create(json!({"template": "python"})).await;
    assert!(members.contains_key(id(&claimed)), "served by the pool");
    assert_eq!(claimed["isolation"], "gvisor");
    let kernel = server.exec(&claimed, "uname -r").await;
    assert_eq!(kernel["stdout"], "4.4.0\n", "{kernel}");
    wait_ready(&server, "python", 1).await;
    let members = pool_containers(&server, &instance).await;
    let asked = json!({"template": "python", "pidsLimit": 100});
    let made = server.create(asked.clone()).await;
    assert!(!members.contains_key(id(&made)), "made cold: {asked}");
    assert_eq!(made["isolation"], "gvisor", "{asked}");
    // The template's isolation is a floor: a weaker one is refused, never served.
    let (status, refused) = server
        .post(
            "sandbox.create",
            json!({"environmentId": server.env_id, "template": "python", "isolation": "container"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
}

/// A claimed sandbox's interpreter contexts run under the member's agent as under a
/// cold one's: state kept between runs, a run interrupted at its timeout, and the next
/// run served at once.
#[tokio::test]
async fn a_claimed_sandboxs_context_is_interrupted_at_its_timeout_and_keeps_its_state() {
    let server = TestServer::start_with(|config| {
        config.pools.insert("base".into(), PoolConfig { size: 1 });
    })
    .await;
    let instance = server.instance().to_owned();
    wait_ready(&server, "base", 1).await;
    let members = pool_containers(&server, &instance).await;
    let claimed = server.create(json!({"template": "base"})).await;
    assert!(members.contains_key(id(&claimed)), "served by the pool");
    let context = create_context(&server, &claimed).await;
    let run = |code, timeout_ms| run(&server, &claimed, &context, code, timeout_ms);
    assert_eq!(run("x = 41", 10_000).await["error"], json!(null));
    let slow = run("import time\ntime.sleep(30)", 1_000).await;
    assert_eq!(
        (&slow["timedOut"], &slow["error"]["name"]),
        (&json!(true), &json!("KeyboardInterrupt")),
        "{slow}"
    );
    let started = Instant::now();
    assert_eq!(run("x + 1", 10_000).await["result"], "42");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// Sandboxes of a shape no pool is configured for (here another image than the
/// template's; `internet` is in `containers.rs`, which owns the internet bridge) are warm
/// from the second on: the first one's create makes the server keep a member of that
/// shape, until creates of it stop.
#[tokio::test]
async fn another_images_shape_gets_a_pool_of_its_own_while_it_is_asked_for() {
    let server = TestServer::start_with(|config| {
        config.warm_on_demand = WarmOnDemandConfig {
            // Long enough for both creates to count on a loaded machine; short
            // enough to watch the pool emptied.
            window_secs: 8,
            ..Default::default()
        };
    })
    .await;
    let instance = server.instance().to_owned();
    let asked = json!({"template": "base", "image": BUSYBOX});
    let first = server.create(asked.clone()).await;
    assert_eq!(first["image"], BUSYBOX);
    let key = PoolKey {
        server_id: None,
        shape: sandboxd_core::pools::Shape {
            image: Some(BUSYBOX.into()),
            ..sandboxd_core::pools::Shape::of_template("base")
        },
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.service.pools().ready().get(&key).copied() != Some(1) {
        assert!(Instant::now() < deadline, "no member of the image's shape");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let members = pool_containers(&server, &instance).await;
    assert_eq!(members.len(), 1, "{members:?}");
    let member = members.values().next().unwrap().clone();
    let config = server
        .docker()
        .inspect_container(&member, None)
        .await
        .unwrap()
        .config
        .unwrap();
    assert_eq!(config.image.as_deref(), Some(BUSYBOX), "made of the image");

    let warm = server
        .create(json!({"template": "base", "image": BUSYBOX, "envVars": "WHO=warm"}))
        .await;
    assert!(members.contains_key(id(&warm)), "served by the pool");
    assert_eq!(
        (warm["image"].as_str(), warm["template"].as_str()),
        (Some(BUSYBOX), Some("base"))
    );
    let out = server.exec(&warm, "echo $WHO; pwd").await;
    assert_eq!(out["stdout"], "warm\n/home/user\n", "{out}");
    // Two creates of it in the window: two members kept.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.service.pools().ready().get(&key).copied() != Some(2) {
        assert!(Instant::now() < deadline, "the pool never grew to two");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pool_containers(&server, &instance).await.len(), 3);
    let series =
        r#"sandboxd_pool_ready{pool="base",server="local",network="isolated",image="other"}"#;
    let metrics = server.metrics().await;
    assert!(metrics.contains(&format!("{series} 2\n")), "{metrics}");
    // A create of the template's own image is another shape: made cold.
    let plain = server.create(json!({"template": "base"})).await;
    assert!(
        !pool_containers(&server, &instance)
            .await
            .contains_key(id(&plain))
    );

    // Without creates for its window the pool is emptied, and its members removed.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = pool_containers(&server, &instance).await;
        let pooled = server.service.pools().members();
        // What is left of the pool's containers is the claimed sandbox.
        if pooled.is_empty() && left.len() == 1 && left.contains_key(id(&warm)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left: {left:?}, members: {pooled:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = server.metrics().await;
    assert!(
        metrics.contains(&format!("{series} 0\n")),
        "emptied reads 0: {metrics}"
    );
}

/// The budget of pools kept for demand is shared between organizations a member at a
/// time: one organization's busy shape cannot keep another's from a warm member.
#[tokio::test]
async fn organizations_share_the_budget_of_pools_kept_for_demand() {
    let server = TestServer::start_with(|config| {
        config.warm_on_demand = WarmOnDemandConfig {
            budget: 2,
            per_pool: 2,
            window_secs: 120,
        };
    })
    .await;
    let busy = PoolKey {
        server_id: None,
        shape: sandboxd_core::pools::Shape {
            image: Some(BUSYBOX.into()),
            ..sandboxd_core::pools::Shape::of_template("base")
        },
    };
    let quiet = PoolKey {
        server_id: None,
        shape: sandboxd_core::pools::Shape::of_template("python"),
    };
    let ready = |key: &PoolKey| server.service.pools().ready().get(key).copied();
    // This organization asks for its shape twice: alone, it has the whole budget.
    for _ in 0..2 {
        server
            .create(json!({"template": "base", "image": BUSYBOX}))
            .await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while ready(&busy) != Some(2) {
        assert!(
            Instant::now() < deadline,
            "the busy shape's pool never grew to two"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Another organization asks for another shape once: a member of each.
    let (status, other) = server
        .post("organization.create", json!({"name": "other"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let key = other["apiKey"]["secret"].as_str().unwrap();
    let (status, project) = server
        .post_with_key("project.create", Some(key), json!({"name": "p"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{project}");
    let environment = &project["environments"][0]["environmentId"];
    let (status, made) = server
        .post_with_key(
            "sandbox.create",
            Some(key),
            json!({"environmentId": environment, "template": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while (ready(&busy), ready(&quiet)) != (Some(1), Some(1)) {
        assert!(
            Instant::now() < deadline,
            "busy: {:?}, quiet: {:?}",
            ready(&busy),
            ready(&quiet)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The other organization's next create of its shape is warm.
    let members = server.service.pools().members();
    let (status, warm) = server
        .post_with_key(
            "sandbox.create",
            Some(key),
            json!({"environmentId": environment, "template": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{warm}");
    assert!(members.contains(id(&warm)), "served by its pool: {warm}");
}
