//! The engine stopped and started again under a running sandboxd (no `live-restore`:
//! every container stops with it). An engine of the test's own (its own dockerd, data
//! root, socket, and a network namespace of its own, so that nothing it does to
//! networks reaches the host's), so the machine's engine and the other tests are
//! untouched.
//! During the outage calls answer 503 with `Retry-After` and `/ready` says the engine is
//! down; once it is back, every sandbox runs again within seconds with no request
//! needed, its files kept, and the audit log says its processes were lost.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use sandboxd_docker::DockerEngine;
use serde_json::{Value, json};

use crate::harness::{BUSYBOX, TestServer, id};

/// A dockerd of the test's own, in a network namespace of its own.
pub(crate) struct PrivateEngine {
    dir: tempfile::TempDir,
    netns: String,
    daemon: Option<Child>,
}

impl PrivateEngine {
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.path().join("docker.sock")
    }

    fn host(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    fn docker(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .arg("-H")
            .arg(self.host())
            .args(args)
            .output()
            .expect("the docker client")
    }

    fn start() -> Self {
        Self::start_with_config("{}")
    }

    /// An engine of the test's own with this `daemon.json`.
    pub(crate) fn start_with_config(config: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("sbx-engine-")
            .tempdir_in("/tmp")
            .expect("a directory");
        std::fs::write(dir.path().join("daemon.json"), config).expect("config");
        let netns = format!("sbx-engine-{}", std::process::id());
        let made = Command::new("ip")
            .args(["netns", "add", &netns])
            .status()
            .expect("ip netns");
        assert!(made.success(), "a network namespace for the test's engine");
        let _ = Command::new("ip")
            .args(["netns", "exec", &netns, "ip", "link", "set", "lo", "up"])
            .status();
        let mut engine = Self {
            dir,
            netns,
            daemon: None,
        };
        engine.resume();
        // The test image, from the machine's engine.
        let mut saved = Command::new("docker")
            .args(["save", BUSYBOX])
            .stdout(Stdio::piped())
            .spawn()
            .expect("docker save");
        let loaded = Command::new("docker")
            .args(["-H", &engine.host(), "load", "-q"])
            .stdin(saved.stdout.take().expect("its output"))
            .output()
            .expect("docker load");
        assert!(saved.wait().expect("docker save ends").success());
        assert!(loaded.status.success(), "{loaded:?}");
        engine
    }

    /// Starts dockerd (again) on the same directories.
    pub(crate) fn resume(&mut self) {
        let path = |name: &str| self.dir.path().join(name);
        let log = std::fs::File::create(path("dockerd.log")).expect("log");
        // `ip netns exec` remounts /sys, which dockerd cannot run under: nsenter enters
        // only the network namespace.
        let daemon = Command::new("nsenter")
            .arg(format!("--net=/var/run/netns/{}", self.netns))
            .arg("dockerd")
            .arg("--config-file")
            .arg(path("daemon.json"))
            .arg("--data-root")
            .arg(path("data"))
            .arg("--exec-root")
            .arg(path("exec"))
            .arg("--pidfile")
            .arg(path("docker.pid"))
            .arg("-H")
            .arg(self.host())
            .args(["--bridge=none", "--iptables=false"])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("dockerd");
        self.daemon = Some(daemon);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.docker(&["info"]).status.success() {
            assert!(
                Instant::now() < deadline,
                "the test's engine did not start: {}",
                std::fs::read_to_string(path("dockerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops dockerd as an operator would (SIGTERM): its containers stop with it.
    pub(crate) fn stop(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &daemon.id().to_string()])
                .status();
            let _ = daemon.wait();
        }
    }

    pub(crate) fn running(&self, container: &str) -> bool {
        let out = self.docker(&["inspect", "-f", "{{.State.Running}}", container]);
        String::from_utf8_lossy(&out.stdout).trim() == "true"
    }
}

impl Drop for PrivateEngine {
    fn drop(&mut self) {
        if self.daemon.is_some() {
            let listed = self.docker(&["ps", "-aq"]);
            for container in String::from_utf8_lossy(&listed.stdout).split_whitespace() {
                let _ = self.docker(&["rm", "-fv", container]);
            }
        }
        self.stop();
        // The engine's data root holds mounts of its own until it is gone.
        let _ = Command::new("rm").arg("-rf").arg(self.dir.path()).status();
        // Its last processes may take a moment to leave the namespace.
        for _ in 0..50 {
            let deleted = Command::new("ip")
                .args(["netns", "delete", &self.netns])
                .output();
            if deleted.is_ok_and(|out| out.status.success()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_restart_is_an_outage_and_every_sandbox_runs_again_after_it() {
    let mut engine = PrivateEngine::start();
    let docker = DockerEngine::connect_unix(&engine.socket().display().to_string())
        .await
        .expect("the test's engine answers");
    let server = TestServer::start_with_engine(docker, |config| {
        // Only the return of the engine's events may bring the sandboxes back here.
        config.reconcile_interval_secs = 3600.0;
    })
    .await;
    let mut sandboxes: Vec<Value> = Vec::new();
    for n in 0..2 {
        let sandbox = server.create(json!({"template": "python"})).await;
        let out = server
            .exec(
                &sandbox,
                &format!("echo kept-{n} > /home/user/keep && echo ok"),
            )
            .await;
        assert_eq!(out["stdout"], "ok\n", "{out}");
        sandboxes.push(sandbox);
    }

    engine.stop();
    assert!(!engine.socket().exists() || !engine.docker(&["info"]).status.success());
    let response = server
        .client
        .post(format!("{}/api/sandbox.exec", server.url))
        .header("x-api-key", crate::harness::KEY)
        .json(&json!({"sandboxId": id(&sandboxes[0]), "cmd": "true"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("unreachable"),
        "{body}"
    );
    let ready = server
        .client
        .get(format!("{}/ready", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let ready: Value = ready.json().await.unwrap();
    assert_ne!(ready["engine"]["status"], "ok", "{ready}");

    engine.resume();
    let back = Instant::now();
    let containers: Vec<String> = sandboxes
        .iter()
        .map(|s| s["containerId"].as_str().unwrap().to_owned())
        .collect();
    while !containers.iter().all(|c| engine.running(c)) {
        assert!(
            back.elapsed() < Duration::from_secs(20),
            "the sandboxes were not started again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "every sandbox ran again {:?} after the engine was back",
        back.elapsed()
    );
    for (n, sandbox) in sandboxes.iter().enumerate() {
        let (_, one) = server
            .get("sandbox.one", &[("sandboxId", id(sandbox))])
            .await;
        assert_eq!(one["status"], "running", "{one}");
        let out = server.exec(sandbox, "cat /home/user/keep").await;
        assert_eq!(out["stdout"], format!("kept-{n}\n"), "{out}");
    }
    let (_, audit) = server.get("audit.list", &[]).await;
    let restarts = audit.to_string().matches("\"sandbox.restart\"").count();
    assert!(restarts >= 2, "{audit}");
    assert!(audit.to_string().contains("processesLost"), "{audit}");
}
