//! The hardening policy of a sandbox container as plain data. The engine adapter turns a
//! [`ContainerPlan`] into engine options; nothing here talks to an engine.
//!
//! `plan_container` gives the `ContainerPlan`: name, command, env, user, labels, limits,
//! network, runtime, and each volume the sandbox mounts (`VolumePlan`). `isolation_tier`
//! names a runtime's tier; `runtime_for` is the runtime a create's `isolation` asks for,
//! else the server's; under gVisor, `engine_pids_limit` leaves room for gVisor's own
//! threads and `nproc` has the sandbox's kernel hold its tasks to the limit, and the
//! agent is mounted from a readable copy. The network names live here too.

use std::collections::BTreeMap;

pub use sandboxd_agent_protocol::{AGENT_KEY_FILE, AGENT_KEY_VAR};

use crate::env_vars;
use crate::model::{NetworkMode, Sandbox};

pub use crate::labels::*;
/// The bridge network of `internet` sandboxes.
pub const INTERNET_NETWORK: &str = "sandboxd-internet";
/// Driver option that disables traffic between containers on a bridge.
pub const ICC_OPTION: &str = "com.docker.network.bridge.enable_icc";
/// The json-file log of a sandbox is capped at this size.
pub const LOG_MAX_SIZE: &str = "10m";
/// The command that keeps a sandbox alive as the main process under the engine's init,
/// when it runs without the agent (with it, the agent's supervisor is the main process
/// and PID 1).
pub const IDLE_COMMAND: [&str; 3] = ["tail", "-f", "/dev/null"];
/// The suffix of the agent binary's readable copy, beside the execute-only one: gVisor
/// loads a program itself and must read it (the agent makes itself non-dumpable at
/// once instead).
pub const READABLE_AGENT: &str = "-readable";

/// Where the agent binary is mounted (read-only) in a sandbox.
pub const AGENT_BINARY: &str = "/.sandboxd/bin/sandboxd-agent";
/// Where the agent's directory, holding the socket sandboxd listens on, is mounted
/// (read-only) in a sandbox.
pub const AGENT_RUN_DIR: &str = "/.sandboxd/run";
/// The socket the agent connects to, inside the sandbox.
pub const AGENT_SOCKET: &str = "/.sandboxd/run/agent.sock";

/// The port of the egress proxy the agent offers on an `allowlist` sandbox's loopback.
pub const EGRESS_PROXY_PORT: u16 = 49980;
/// The variables that point programs at a proxy, in both the cases programs read.
const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

/// The proxy variables of an `allowlist` sandbox: everything but its own loopback goes
/// through the agent's proxy.
fn proxy_env() -> Vec<String> {
    let proxy = format!("http://127.0.0.1:{EGRESS_PROXY_PORT}");
    PROXY_VARS
        .iter()
        .map(|name| match name.to_ascii_lowercase().as_str() {
            "no_proxy" => format!("{name}=localhost,127.0.0.1,::1"),
            _ => format!("{name}={proxy}"),
        })
        .collect()
}

/// Whether a sandbox's own variable may not be named `name`: the agent's key, and on an
/// `allowlist` sandbox the variables that point programs at a proxy (its traffic goes
/// through the agent's). Checked where the variables are given: the container's
/// environment and each command's.
pub fn reserved_var(name: &str, mode: NetworkMode) -> bool {
    name == AGENT_KEY_VAR || (mode == NetworkMode::Allowlist && PROXY_VARS.contains(&name))
}

/// Host paths of what the agent needs mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentMount {
    /// The static agent binary.
    pub binary: String,
    /// The per-sandbox directory holding the socket (and, while the container starts,
    /// the agent's key: never in the container's environment).
    pub run_dir: String,
}

/// A read-only bind mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    pub source: String,
    pub target: String,
}

/// A volume mounted into the container (the engine's named volume, never copied into
/// from the image: it holds what sandboxes wrote to it, nothing else).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumePlan {
    /// The engine's name of the volume.
    pub name: String,
    pub target: String,
    pub read_only: bool,
}

/// How the container is attached to the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkPlan {
    /// Networking disabled: no interface but loopback (faster to create than mode `none`).
    Disabled,
    /// Attached to this bridge network only.
    Bridge(String),
}

/// Everything the engine needs to create one sandbox container.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerPlan {
    pub name: String,
    pub image: String,
    /// Always run instead of the image's entrypoint and command.
    pub cmd: Vec<String>,
    pub workdir: String,
    /// `HOME` first, then the parsed `envVars`.
    pub env: Vec<String>,
    /// `uid:gid` for templates; `None` keeps the image's default user.
    pub user: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub nano_cpus: i64,
    /// Memory and memory+swap, equal so that there is no swap.
    pub memory_bytes: i64,
    pub pids_limit: i64,
    /// The most tasks (processes and threads, the agent's among them, as the pids
    /// limit counts under runc) the sandbox's user may run, counted by the sandbox's own
    /// kernel (`RLIMIT_NPROC`): under gVisor only, where the engine's pids limit counts
    /// gVisor's threads (under runc that count would be the host's, across sandboxes).
    pub nproc: Option<i64>,
    pub network: NetworkPlan,
    /// Read-only bind mounts (the agent and its socket directory).
    pub mounts: Vec<BindMount>,
    /// The sandbox's volumes.
    pub volumes: Vec<VolumePlan>,
    /// Whether the engine's init runs as PID 1 to reap orphans: only without the agent,
    /// whose supervisor is PID 1 itself (so no signal from inside the sandbox reaches
    /// it, and `kill -9 -1` cannot stop the container).
    pub engine_init: bool,
    /// The engine's OCI runtime (`runsc`, `kata-runtime`…); `None` is the engine's
    /// default (runc).
    pub runtime: Option<String>,
}

/// Security options applied to every sandbox, whatever its plan.
pub mod hardening {
    /// Every capability is dropped.
    pub const CAP_DROP: &[&str] = &["ALL"];
    /// Setuid binaries cannot raise privileges.
    pub const SECURITY_OPT: &[&str] = &["no-new-privileges"];
    /// The host's OOM killer picks sandboxes' processes first (the highest score).
    pub const OOM_SCORE_ADJ: i64 = 1000;
}

/// Name of the container of a sandbox.
pub fn container_name(sandbox_id: &str) -> String {
    format!("sandboxd-{sandbox_id}")
}

/// Builds the container plan of `sandbox` with its decrypted `env_vars` text; with an
/// agent, the agent is the main process and its binary and socket directory are mounted.
pub fn plan_container(
    sandbox: &Sandbox,
    env_vars: Option<&str>,
    instance_id: &str,
    agent: Option<&AgentMount>,
) -> ContainerPlan {
    let mut env = vec![format!("HOME={}", sandbox.workdir)];
    env.extend(env_vars.map(env_vars::parse).unwrap_or_default());
    // The sandbox's own variables cannot set or shadow the key, nor point an
    // `allowlist` sandbox's traffic elsewhere.
    env.retain(|entry| {
        !reserved_var(
            entry.split('=').next().unwrap_or_default(),
            sandbox.network_mode,
        )
    });
    if sandbox.network_mode == NetworkMode::Allowlist {
        env.extend(proxy_env());
    }
    let labels = BTreeMap::from([
        (LABEL_SANDBOX.to_owned(), "true".to_owned()),
        (LABEL_SANDBOX_ID.to_owned(), sandbox.sandbox_id.clone()),
        (LABEL_PROJECT_ID.to_owned(), sandbox.project_id.clone()),
        (
            LABEL_ENVIRONMENT_ID.to_owned(),
            sandbox.environment_id.clone(),
        ),
        (LABEL_INSTANCE.to_owned(), instance_id.to_owned()),
    ]);
    let memory_bytes = sandbox.memory_mb * 1024 * 1024;
    let gvisor = under_gvisor(sandbox.runtime.as_deref());
    ContainerPlan {
        name: container_name(&sandbox.sandbox_id),
        image: sandbox.image.clone(),
        cmd: match agent {
            Some(_) => vec![
                AGENT_BINARY.into(),
                "supervise".into(),
                "--socket".into(),
                AGENT_SOCKET.into(),
            ],
            None => IDLE_COMMAND.iter().map(|s| (*s).to_owned()).collect(),
        },
        workdir: sandbox.workdir.clone(),
        env,
        user: sandbox.user.clone(),
        labels,
        nano_cpus: (sandbox.cpu * 1e9).round() as i64,
        memory_bytes,
        pids_limit: engine_pids_limit(sandbox.pids_limit, sandbox.runtime.as_deref()),
        nproc: gvisor.then_some(sandbox.pids_limit),
        network: match sandbox.network_mode {
            NetworkMode::Isolated | NetworkMode::Allowlist => NetworkPlan::Disabled,
            NetworkMode::Internet => NetworkPlan::Bridge(INTERNET_NETWORK.to_owned()),
        },
        mounts: agent
            .map(|agent| {
                vec![
                    BindMount {
                        source: if gvisor {
                            format!("{}{READABLE_AGENT}", agent.binary)
                        } else {
                            agent.binary.clone()
                        },
                        target: AGENT_BINARY.into(),
                    },
                    BindMount {
                        source: agent.run_dir.clone(),
                        target: AGENT_RUN_DIR.into(),
                    },
                ]
            })
            .unwrap_or_default(),
        volumes: sandbox
            .volumes
            .iter()
            .map(|mount| VolumePlan {
                name: crate::volumes::engine_name(&mount.volume_id),
                target: mount.path.clone(),
                read_only: mount.read_only,
            })
            .collect(),
        engine_init: agent.is_none(),
        runtime: sandbox.runtime.clone(),
    }
}

/// How strongly a runtime isolates a sandbox from the host kernel: `container`
/// (namespaces and cgroups on the host kernel: runc, crun, or a runtime sandboxd does
/// not know, reported conservatively), `gvisor` (a user-space kernel intercepts system
/// calls: runsc) or `microvm` (a guest kernel in a lightweight VM: Kata, Firecracker).
pub fn isolation_tier(runtime: Option<&str>) -> &'static str {
    let name = runtime
        .unwrap_or("runc")
        .rsplit('/')
        .next()
        .unwrap_or_default();
    if name.starts_with("runsc") {
        "gvisor"
    } else if name.starts_with("kata") || name.contains("firecracker") {
        "microvm"
    } else {
        "container"
    }
}

/// The pids limit given the engine for a sandbox that may run `pids_limit` processes.
/// Under gVisor the engine counts gVisor's own host threads, not the sandbox's
/// processes: about 30 when idle and about two more per process the sandbox runs
/// (measured: 27 to 38 idle, 233 with 100 processes). Those threads running out kills
/// the whole sandbox, so they get ample room, and the sandbox's processes are held to
/// their number by its own kernel instead (`ContainerPlan::nproc`).
pub fn engine_pids_limit(pids_limit: i64, runtime: Option<&str>) -> i64 {
    if under_gvisor(runtime) {
        pids_limit.saturating_mul(3).saturating_add(128)
    } else {
        pids_limit
    }
}

/// The runtime a sandbox runs under: the one its isolation asks for (`gvisor`: the
/// engine's name for gVisor's), else the server's (`default`, `None` being the
/// engine's own, runc).
pub fn runtime_for(
    asked: Option<crate::model::Isolation>,
    default: Option<&str>,
    gvisor: &str,
) -> Option<String> {
    use crate::model::Isolation;
    match asked {
        None => default.map(str::to_owned),
        Some(isolation) if isolation_of(default) == Some(isolation) => default.map(str::to_owned),
        Some(Isolation::Gvisor) => Some(gvisor.to_owned()),
        Some(Isolation::Container) => Some("runc".into()),
    }
}

/// The isolation a runtime gives, as a create names it; `None` for a microVM's.
pub fn isolation_of(runtime: Option<&str>) -> Option<crate::model::Isolation> {
    match isolation_tier(runtime) {
        "gvisor" => Some(crate::model::Isolation::Gvisor),
        "container" => Some(crate::model::Isolation::Container),
        _ => None,
    }
}

/// Whether a runtime is gVisor's.
pub fn under_gvisor(runtime: Option<&str>) -> bool {
    isolation_of(runtime) == Some(crate::model::Isolation::Gvisor)
}

/// Parses `uid[:gid]` as the engine reports or the templates give it.
pub fn parse_user(user: &str) -> Option<(u32, u32)> {
    let mut parts = user.splitn(2, ':');
    let uid: u32 = parts.next()?.trim().parse().ok()?;
    let gid = match parts.next() {
        Some(gid) => gid.trim().parse().ok()?,
        None => uid,
    };
    Some((uid, gid))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::SandboxStatus;

    #[test]
    fn the_runtime_is_the_isolations_or_the_servers() {
        use crate::model::Isolation::{Container, Gvisor};
        assert_eq!(runtime_for(None, None, "runsc"), None);
        assert_eq!(
            runtime_for(None, Some("runsc"), "x").as_deref(),
            Some("runsc")
        );
        assert_eq!(
            runtime_for(Some(Gvisor), None, "runsc").as_deref(),
            Some("runsc")
        );
        assert_eq!(
            runtime_for(Some(Gvisor), Some("runsc-debug"), "runsc").as_deref(),
            Some("runsc-debug"),
            "the server's own gVisor runtime"
        );
        assert_eq!(runtime_for(Some(Container), None, "runsc"), None);
        assert_eq!(
            runtime_for(Some(Container), Some("crun"), "runsc").as_deref(),
            Some("crun")
        );
        assert_eq!(
            runtime_for(Some(Container), Some("runsc"), "runsc").as_deref(),
            Some("runc")
        );
    }

    #[test]
    fn isolation_tiers_of_known_runtimes() {
        assert_eq!(isolation_tier(None), "container");
        assert_eq!(isolation_tier(Some("runc")), "container");
        assert_eq!(isolation_tier(Some("crun")), "container");
        assert_eq!(isolation_tier(Some("runsc")), "gvisor");
        assert_eq!(isolation_tier(Some("runsc-kvm")), "gvisor");
        assert_eq!(isolation_tier(Some("kata-runtime")), "microvm");
        assert_eq!(isolation_tier(Some("/usr/bin/kata-fc")), "microvm");
        assert_eq!(isolation_tier(Some("my-runtime")), "container");
    }

    /// A sandbox row for tests.
    pub(crate) fn sandbox(mode: NetworkMode) -> Sandbox {
        Sandbox {
            sandbox_id: "sb_1".into(),
            name: "n".into(),
            organization_id: "org".into(),
            project_id: "proj_1".into(),
            environment_id: "env_1".into(),
            server_id: None,
            image: "python:3.12-slim".into(),
            template: Some("python".into()),
            container_id: None,
            status: SandboxStatus::Creating,
            cpu: 1.5,
            memory_mb: 512,
            pids_limit: 256,
            timeout_ms: 300_000,
            network_mode: mode,
            workdir: "/home/user".into(),
            user: Some("1000:1000".into()),
            runtime: None,
            created_at: 0,
            expires_at: None,
            last_activity_at: None,
            killed_at: None,
            env_per_exec: false,
            labels: Default::default(),
            egress: Vec::new(),
            auto_pause: None,
            fixed_timeout: false,
            paused_timeout_ms: crate::limits::DEFAULT_PAUSED_TIMEOUT_MS,
            paused_at: None,
            hibernated_bytes: None,
            volumes: Vec::new(),
        }
    }

    #[test]
    fn an_allowlist_sandbox_has_no_network_and_its_traffic_pointed_at_the_proxy() {
        let plan = plan_container(
            &sandbox(NetworkMode::Allowlist),
            Some("HTTPS_PROXY=http://elsewhere:8080\nno_proxy=*\nKEEP=1"),
            "inst",
            None,
        );
        assert_eq!(plan.network, NetworkPlan::Disabled);
        let proxy = format!("http://127.0.0.1:{EGRESS_PROXY_PORT}");
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            let set: Vec<_> = plan
                .env
                .iter()
                .filter(|e| e.starts_with(&format!("{name}=")))
                .collect();
            assert_eq!(
                set,
                [&format!("{name}={proxy}")],
                "{name}: the sandbox's own value is gone"
            );
        }
        for name in ["NO_PROXY", "no_proxy"] {
            let set: Vec<_> = plan
                .env
                .iter()
                .filter(|e| e.starts_with(&format!("{name}=")))
                .collect();
            assert_eq!(set, [&format!("{name}=localhost,127.0.0.1,::1")]);
        }
        assert!(plan.env.contains(&"KEEP=1".to_owned()));
        let internet = plan_container(
            &sandbox(NetworkMode::Internet),
            Some("HTTPS_PROXY=http://mine:1"),
            "inst",
            None,
        );
        assert!(
            internet
                .env
                .contains(&"HTTPS_PROXY=http://mine:1".to_owned()),
            "other modes keep the sandbox's own"
        );
    }

    #[test]
    fn plans_limits_labels_and_env() {
        let plan = plan_container(
            &sandbox(NetworkMode::Isolated),
            Some("FOO=bar\n# comment\n\nBAZ=qux=1\ninvalid"),
            "inst",
            None,
        );
        assert_eq!(plan.name, "sandboxd-sb_1");
        assert_eq!(plan.cmd, ["tail", "-f", "/dev/null"]);
        assert_eq!(plan.env, ["HOME=/home/user", "FOO=bar", "BAZ=qux=1"]);
        assert_eq!(plan.nano_cpus, 1_500_000_000);
        assert_eq!(plan.memory_bytes, 512 * 1024 * 1024);
        assert_eq!(plan.pids_limit, 256);
        assert_eq!(plan.user.as_deref(), Some("1000:1000"));
        assert_eq!(plan.network, NetworkPlan::Disabled);
        assert_eq!(plan.labels[LABEL_SANDBOX], "true");
        assert_eq!(plan.labels[LABEL_SANDBOX_ID], "sb_1");
        assert_eq!(plan.labels[LABEL_PROJECT_ID], "proj_1");
        assert_eq!(plan.labels[LABEL_ENVIRONMENT_ID], "env_1");
        assert_eq!(plan.labels[LABEL_INSTANCE], "inst");
    }

    #[test]
    fn internet_uses_the_dedicated_bridge() {
        let plan = plan_container(&sandbox(NetworkMode::Internet), None, "inst", None);
        assert_eq!(plan.network, NetworkPlan::Bridge(INTERNET_NETWORK.into()));
        assert_eq!(plan.env, ["HOME=/home/user"]);
        assert!(plan.mounts.is_empty());
    }

    #[test]
    fn the_agent_is_the_main_process_and_mounted_read_only() {
        let agent = AgentMount {
            binary: "/opt/agent".into(),
            run_dir: "/data/agents/sb_1".into(),
        };
        let sandbox = sandbox(NetworkMode::Isolated);
        let env_vars = format!("A=1\n{AGENT_KEY_VAR}=mine");
        let plan = plan_container(&sandbox, Some(&env_vars), "inst", Some(&agent));
        // The key is never in the container's environment, and the sandbox's own
        // variables cannot put one there (the agent of an older container reads it).
        assert!(!plan.env.iter().any(|e| e.starts_with(AGENT_KEY_VAR)));
        assert!(plan.env.contains(&"A=1".to_owned()));
        assert_eq!(
            plan.cmd,
            [AGENT_BINARY, "supervise", "--socket", AGENT_SOCKET]
        );
        assert_eq!(
            plan.mounts,
            [
                BindMount {
                    source: "/opt/agent".into(),
                    target: AGENT_BINARY.into()
                },
                BindMount {
                    source: "/data/agents/sb_1".into(),
                    target: AGENT_RUN_DIR.into()
                },
            ]
        );
    }

    #[test]
    fn parses_users() {
        assert_eq!(parse_user("1000:1000"), Some((1000, 1000)));
        assert_eq!(parse_user("1000"), Some((1000, 1000)));
        assert_eq!(parse_user("0:5"), Some((0, 5)));
        assert_eq!(parse_user("user"), None);
        assert_eq!(parse_user("1000:staff"), None);
    }
}
