//! Checks of `server.*` requests. Paths on a server are used in commands sandboxd runs
//! there, so they are held to a strict alphabet.

use crate::api::{CreateServerRequest, UpdateServerRequest};
use crate::error::{Invalid, Issues};
use crate::limits::*;
use crate::model::ServerChanges;
use crate::templates::TEMPLATE_NAMES;
use std::collections::BTreeMap;

use super::{display_name, required_id};

/// A checked `server.create` (host key and private key checked for shape; the SSH
/// layer parses them).
#[derive(Debug, Clone, PartialEq)]
pub struct NewServerSpec {
    pub name: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    pub private_key: String,
    pub host_key: Option<String>,
    pub docker_socket: String,
    pub remote_dir: String,
    pub cpu: Option<f64>,
    pub memory_mb: Option<i64>,
    pub warm_pools: BTreeMap<String, usize>,
}

fn address(issues: &mut Issues, value: &str) {
    let ok = !value.is_empty()
        && value.len() <= MAX_ADDRESS_CHARS
        && !value.starts_with('-')
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    if !ok {
        issues.push(
            "address",
            "must be a host name or an IP address (letters, digits, `.`, `-`, `:`)",
        );
    }
}

fn port(issues: &mut Issues, value: u16) {
    if value == 0 {
        issues.push("port", "must be 1 to 65535");
    }
}

fn user(issues: &mut Issues, value: &str) {
    let mut chars = value.chars();
    let ok = value.len() <= 32
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'));
    if !ok {
        issues.push(
            "user",
            "must be a user name (lower-case letters, digits, `_`, `-`, `.`)",
        );
    }
}

fn private_key(issues: &mut Issues, value: &str) {
    if value.len() > MAX_PRIVATE_KEY_BYTES {
        issues.push(
            "privateKey",
            format!("must be at most {MAX_PRIVATE_KEY_BYTES} bytes"),
        );
    } else if !value.contains("PRIVATE KEY-----") {
        issues.push("privateKey", "must be a private key in OpenSSH format");
    }
}

fn host_key(issues: &mut Issues, value: &str) {
    let words: Vec<&str> = value.split_whitespace().collect();
    if value.len() > MAX_HOST_KEY_BYTES || words.len() < 2 {
        issues.push(
            "hostKey",
            "must be `<algorithm> <base64 key>`, a line of the server's .pub host key file",
        );
    }
}

/// A path on the server: absolute, at most 64 characters of `[A-Za-z0-9/._-]`, no `..`.
fn remote_path(issues: &mut Issues, field: &str, value: &str) {
    let ok = value.starts_with('/')
        && value.len() <= MAX_REMOTE_PATH_CHARS
        && !value.split('/').any(|part| part == "..")
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'));
    if !ok {
        issues.push(
            field,
            format!(
                "must be an absolute path of at most {MAX_REMOTE_PATH_CHARS} characters \
                 (letters, digits, `/`, `.`, `_`, `-`; no `..`)"
            ),
        );
    }
}

fn cpu(issues: &mut Issues, value: f64) {
    if !(value.is_finite() && (MIN_CPU..=MAX_SERVER_CPU).contains(&value)) {
        issues.push("cpu", format!("must be {MIN_CPU} to {MAX_SERVER_CPU}"));
    }
}

fn memory(issues: &mut Issues, value: i64) {
    if !(MIN_MEMORY_MB..=MAX_SERVER_MEMORY_MB).contains(&value) {
        issues.push(
            "memoryMb",
            format!("must be {MIN_MEMORY_MB} to {MAX_SERVER_MEMORY_MB}"),
        );
    }
}

/// Warm pools: templates by name, at most [`MAX_SERVER_WARM_MEMBERS`] members in all.
fn warm_pools(issues: &mut Issues, pools: &BTreeMap<String, usize>) {
    for name in pools.keys() {
        if !TEMPLATE_NAMES.contains(&name.as_str()) {
            issues.push(
                "warmPools",
                format!(
                    "names a template that does not exist ({}); templates: {}",
                    name.chars().take(64).collect::<String>(),
                    TEMPLATE_NAMES.join(", ")
                ),
            );
            return;
        }
    }
    let members = pools
        .values()
        .fold(0usize, |sum, size| sum.saturating_add(*size));
    if members > MAX_SERVER_WARM_MEMBERS {
        issues.push(
            "warmPools",
            format!("must keep at most {MAX_SERVER_WARM_MEMBERS} members in all"),
        );
    }
}

/// Checks `server.create`, filling in the defaults.
pub fn create_server(req: CreateServerRequest) -> Result<NewServerSpec, Invalid> {
    let mut issues = Issues::default();
    display_name(&mut issues, "name", &req.name);
    address(&mut issues, &req.address);
    let port_value = req.port.unwrap_or(DEFAULT_SSH_PORT);
    port(&mut issues, port_value);
    let user_value = req.user.unwrap_or_else(|| DEFAULT_SSH_USER.into());
    user(&mut issues, &user_value);
    private_key(&mut issues, &req.private_key);
    if let Some(key) = &req.host_key {
        host_key(&mut issues, key);
    }
    let docker_socket = req
        .docker_socket
        .unwrap_or_else(|| DEFAULT_DOCKER_SOCKET.into());
    remote_path(&mut issues, "dockerSocket", &docker_socket);
    let remote_dir = req.remote_dir.unwrap_or_else(|| DEFAULT_REMOTE_DIR.into());
    remote_path(&mut issues, "remoteDir", &remote_dir);
    if let Some(value) = req.cpu {
        cpu(&mut issues, value);
    }
    if let Some(value) = req.memory_mb {
        memory(&mut issues, value);
    }
    let pools = req.warm_pools.unwrap_or_default();
    warm_pools(&mut issues, &pools);
    issues.finish(NewServerSpec {
        name: req.name,
        address: req.address,
        port: port_value,
        user: user_value,
        private_key: req.private_key,
        host_key: req.host_key.map(|k| k.trim().to_owned()),
        docker_socket,
        remote_dir,
        cpu: req.cpu,
        memory_mb: req.memory_mb,
        warm_pools: pools.into_iter().filter(|(_, size)| *size > 0).collect(),
    })
}

/// Checks `server.update`.
pub fn update_server(req: UpdateServerRequest) -> Result<(String, ServerChanges), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "serverId", &req.server_id);
    if let Some(name) = &req.name {
        display_name(&mut issues, "name", name);
    }
    if let Some(value) = &req.address {
        address(&mut issues, value);
    }
    if let Some(value) = req.port {
        port(&mut issues, value);
    }
    if let Some(value) = &req.user {
        user(&mut issues, value);
    }
    if let Some(value) = &req.private_key {
        private_key(&mut issues, value);
    }
    if let Some(Some(value)) = &req.host_key {
        host_key(&mut issues, value);
    }
    if let Some(value) = &req.docker_socket {
        remote_path(&mut issues, "dockerSocket", value);
    }
    if let Some(value) = &req.remote_dir {
        remote_path(&mut issues, "remoteDir", value);
    }
    if let Some(Some(value)) = req.cpu {
        cpu(&mut issues, value);
    }
    if let Some(Some(value)) = req.memory_mb {
        memory(&mut issues, value);
    }
    if let Some(pools) = &req.warm_pools {
        warm_pools(&mut issues, pools);
    }
    issues.finish((
        req.server_id,
        ServerChanges {
            name: req.name,
            address: req.address,
            port: req.port,
            user: req.user,
            private_key: req.private_key,
            host_key: req.host_key.map(|k| k.map(|k| k.trim().to_owned())),
            docker_socket: req.docker_socket,
            remote_dir: req.remote_dir,
            cpu_capacity: req.cpu,
            memory_mb_capacity: req.memory_mb,
            warm_pools: req
                .warm_pools
                .map(|pools| pools.into_iter().filter(|(_, size)| *size > 0).collect()),
        },
    ))
}

/// Checks a server id alone.
pub fn server_id(value: &str) -> Result<String, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "serverId", value);
    issues.finish(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> CreateServerRequest {
        CreateServerRequest {
            name: "build-1".into(),
            address: "10.0.0.7".into(),
            private_key:
                "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n".into(),
            ..CreateServerRequest::default()
        }
    }

    #[test]
    fn defaults_are_filled_in() {
        let spec = create_server(request()).unwrap();
        assert_eq!(spec.port, 22);
        assert_eq!(spec.user, "root");
        assert_eq!(spec.docker_socket, "/var/run/docker.sock");
        assert_eq!(spec.remote_dir, "/var/lib/sandboxd");
    }

    #[test]
    fn each_bad_field_is_named() {
        type Change = Box<dyn Fn(&mut CreateServerRequest)>;
        let cases: Vec<(&str, Change)> = vec![
            ("address", Box::new(|r| r.address = "a b".into())),
            (
                "address",
                Box::new(|r| r.address = "-oProxyCommand=x".into()),
            ),
            ("port", Box::new(|r| r.port = Some(0))),
            ("user", Box::new(|r| r.user = Some("Root;rm".into()))),
            ("privateKey", Box::new(|r| r.private_key = "hunter2".into())),
            ("hostKey", Box::new(|r| r.host_key = Some("AAAA".into()))),
            (
                "remoteDir",
                Box::new(|r| r.remote_dir = Some("/var/../etc".into())),
            ),
            (
                "remoteDir",
                Box::new(|r| r.remote_dir = Some("relative".into())),
            ),
            (
                "remoteDir",
                Box::new(|r| r.remote_dir = Some("/tmp/$(id)".into())),
            ),
            (
                "dockerSocket",
                Box::new(|r| r.docker_socket = Some("/run/d ocker".into())),
            ),
            ("cpu", Box::new(|r| r.cpu = Some(f64::NAN))),
            ("memoryMb", Box::new(|r| r.memory_mb = Some(1))),
            (
                "warmPools",
                Box::new(|r| r.warm_pools = Some(BTreeMap::from([("ruby".into(), 1)]))),
            ),
            (
                "warmPools",
                Box::new(|r| {
                    r.warm_pools = Some(BTreeMap::from([
                        ("python".into(), usize::MAX),
                        ("base".into(), 2),
                    ]))
                }),
            ),
        ];
        for (field, change) in cases {
            let mut req = request();
            change(&mut req);
            let invalid = create_server(req).unwrap_err();
            assert_eq!(invalid.issues[0].path, field, "{invalid:?}");
        }
    }

    #[test]
    fn an_update_tells_null_from_absent() {
        let req: UpdateServerRequest =
            serde_json::from_str(r#"{"serverId":"srv_1","hostKey":null,"cpu":2}"#).unwrap();
        let (_, changes) = update_server(req).unwrap();
        assert_eq!(changes.host_key, Some(None));
        assert_eq!(changes.cpu_capacity, Some(Some(2.0)));
        assert_eq!(changes.memory_mb_capacity, None);
        assert_eq!(changes.warm_pools, None);
    }

    #[test]
    fn empty_pools_are_dropped() {
        let mut req = request();
        req.warm_pools = Some(BTreeMap::from([("python".into(), 2), ("node".into(), 0)]));
        let spec = create_server(req).unwrap();
        assert_eq!(spec.warm_pools, BTreeMap::from([("python".into(), 2)]));
    }
}
