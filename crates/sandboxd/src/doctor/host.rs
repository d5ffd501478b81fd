//! The checks of the server's host: the engine, its init and runtime, the sandbox
//! network, the templates' images, the data directory and its store, the agent, the
//! clock and free disk. They read; nothing is created or changed.
//!
//! The engine is asked through `sandboxd-docker`'s `diagnosis.rs`, the store through its
//! survey; each verdict is a small pure function.

use std::path::Path;
use std::time::{Duration, SystemTime};

use sandboxd_core::plan::INTERNET_NETWORK;
use sandboxd_core::templates::{TEMPLATE_NAMES, Templates};
use sandboxd_docker::{DockerEngine, EngineFacts, ImageAvailability, NetworkState};

use super::report::Check;
use crate::config::Config;

/// The oldest engine API sandboxd speaks.
const MIN_API: (u32, u32) = (1, 41);
/// A clock this far from the engine's makes expiry times and logs disagree.
const CLOCK_SKEW: Duration = Duration::from_secs(5);
/// Free space under which sandboxes and the store are about to fail.
const DISK_FAIL_BYTES: u64 = 1 << 30;
/// Free space under which a warning is due.
const DISK_WARN_BYTES: u64 = 5 << 30;
/// How long connecting to the engine may take.
const ENGINE_CONNECT: Duration = Duration::from_secs(15);

pub async fn checks(config: &Config) -> Vec<Check> {
    let mut checks = Vec::new();
    let engine = match tokio::time::timeout(ENGINE_CONNECT, DockerEngine::connect_local()).await {
        Ok(Ok(engine)) => Some(engine),
        Ok(Err(error)) => {
            checks.push(engine_unreachable(&format!("{error}")));
            None
        }
        Err(_) => {
            checks.push(engine_unreachable("no answer within 15s"));
            None
        }
    };
    if let Some(engine) = &engine {
        checks.extend(engine_checks(engine, config).await);
    }
    checks.push(data_dir(&config.data_dir));
    checks.push(store(config).await);
    checks.push(agent(config));
    checks.push(disk("disk", &config.data_dir));
    checks
}

fn engine_socket() -> String {
    std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into())
}

fn engine_unreachable(why: &str) -> Check {
    Check::fail(
        "engine",
        format!(
            "cannot reach the Docker engine at {}: {why}",
            engine_socket()
        ),
        "start it (`systemctl start docker`), point DOCKER_HOST at its socket, and make sure \
         this user may use that socket (the `docker` group)",
    )
}

async fn engine_checks(engine: &DockerEngine, config: &Config) -> Vec<Check> {
    let facts = match engine.facts().await {
        Ok(facts) => facts,
        Err(error) => return vec![engine_unreachable(&error.to_string())],
    };
    let mut checks = vec![
        engine_version(&facts),
        init(&facts, config.agent),
        live_restore(&facts),
    ];
    checks.push(runtime(&facts, config.runtime.as_deref()));
    checks.push(network(engine.network_state(INTERNET_NETWORK).await));
    let templates = Templates::with_images(&config.template_images());
    for name in TEMPLATE_NAMES {
        if let Some(template) = templates.get(name) {
            let found = engine.image_availability(&template.image).await;
            checks.push(image(name, &template.image, found));
        }
    }
    checks.push(clock(facts.system_time.as_deref(), SystemTime::now()));
    if let Some(root) = facts.root_dir.as_deref().filter(|r| Path::new(r).exists()) {
        checks.push(disk("engine-disk", Path::new(root)));
    }
    checks
}

fn parse_api(version: &str) -> Option<(u32, u32)> {
    let (major, minor) = version.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

fn engine_version(facts: &EngineFacts) -> Check {
    let detail = format!(
        "Docker {} on {} (API {}, spoken: {})",
        facts.version, facts.operating_system, facts.api_version, facts.negotiated_api_version
    );
    match parse_api(&facts.negotiated_api_version) {
        Some(api) if api >= MIN_API => Check::pass("engine", detail),
        _ => Check::fail(
            "engine",
            format!("{detail}: sandboxd needs API 1.41 or newer"),
            "upgrade the Docker engine (20.10 or newer)",
        ),
    }
}

fn init(facts: &EngineFacts, agent: bool) -> Check {
    match (&facts.init, agent) {
        (Some(init), _) => Check::pass("init", init.clone()),
        (None, true) => Check::warn(
            "init",
            "the engine has no init binary; unused while the agent runs as PID 1",
            "install docker-init (tini) for sandboxes run with agent = false",
        ),
        (None, false) => Check::fail(
            "init",
            "the engine has no init binary, and without the agent sandboxes need it to reap \
             orphaned processes",
            "install docker-init (tini), or turn the agent back on",
        ),
    }
}

fn live_restore(facts: &EngineFacts) -> Check {
    if facts.live_restore {
        Check::pass(
            "live-restore",
            "sandboxes keep running while the engine restarts",
        )
    } else {
        Check::warn(
            "live-restore",
            "off: an engine restart stops every sandbox (sandboxd starts them again, files \
             kept, but their processes are lost)",
            "set \"live-restore\": true in /etc/docker/daemon.json and reload the engine \
             (`systemctl reload docker`)",
        )
    }
}

fn runtime(facts: &EngineFacts, configured: Option<&str>) -> Check {
    let offered = facts.runtimes.join(", ");
    match configured {
        None => Check::pass(
            "runtime",
            format!("the engine's default ({})", facts.default_runtime),
        ),
        Some(name) if facts.runtimes.iter().any(|r| r == name) => {
            Check::pass("runtime", format!("{name} (offered: {offered})"))
        }
        Some(name) => Check::fail(
            "runtime",
            format!("runtime `{name}` is configured but the engine offers only: {offered}"),
            format!(
                "install {name} and register it in the engine's daemon.json, or remove \
                 `runtime` from the configuration"
            ),
        ),
    }
}

fn network(state: Result<NetworkState, sandboxd_docker::EngineError>) -> Check {
    match state {
        Ok(NetworkState::Absent) => Check::pass(
            "network",
            format!("{INTERNET_NETWORK} is made by the first sandbox with internet access"),
        ),
        Ok(NetworkState::Isolated) => Check::pass(
            "network",
            format!("{INTERNET_NETWORK}: traffic between sandboxes is off"),
        ),
        Ok(NetworkState::Open) => Check::warn(
            "network",
            format!("{INTERNET_NETWORK} lets containers reach each other"),
            format!(
                "sandboxd recreates it once no container uses it; or `docker network rm \
                 {INTERNET_NETWORK}` when it is unused"
            ),
        ),
        Err(error) => Check::fail(
            "network",
            format!("cannot inspect {INTERNET_NETWORK}: {error}"),
            "check the engine's log",
        ),
    }
}

fn image(
    template: &str,
    image: &str,
    found: Result<ImageAvailability, sandboxd_docker::EngineError>,
) -> Check {
    let name = format!("template {template}");
    match found {
        Ok(ImageAvailability::Present) => Check::pass(name, format!("{image} is present")),
        Ok(ImageAvailability::Pullable) => Check::pass(
            name,
            format!("{image} is pulled by the first sandbox that needs it"),
        ),
        Ok(ImageAvailability::Missing(why)) => Check::fail(
            name,
            format!("{image} is not on the engine and cannot be pulled: {why}"),
            format!(
                "`docker pull {image}` (or `docker load` it) on this engine, or point the \
                 template at an image it has: [templates.{template}] image = \"…\" \
                 (scripts/build-local-images.sh builds small local ones)"
            ),
        ),
        Err(error) => Check::fail(
            name,
            format!("cannot inspect {image}: {error}"),
            "check the engine's log",
        ),
    }
}

/// The engine's clock against this host's: both matter (expiry times, the audit log).
fn clock(engine_time: Option<&str>, now: SystemTime) -> Check {
    let since_2024 = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .is_ok_and(|d| d.as_secs() > 1_704_067_200);
    if !since_2024 {
        return Check::fail(
            "clock",
            "this host's clock is before 2024",
            "set the clock (enable NTP: `timedatectl set-ntp true`)",
        );
    }
    let Some(engine_time) = engine_time.and_then(parse_time) else {
        return Check::pass("clock", "the engine does not report its clock");
    };
    let skew = match engine_time.duration_since(now) {
        Ok(ahead) => ahead,
        Err(behind) => behind.duration(),
    };
    if skew <= CLOCK_SKEW {
        Check::pass("clock", format!("the engine's clock is within {skew:.1?}"))
    } else {
        Check::fail(
            "clock",
            format!("the engine's clock is {skew:.0?} away from this host's"),
            "synchronise both clocks (NTP)",
        )
    }
}

/// An RFC 3339 time, in UTC (`Z`) or with an offset (`+01:00`), as engines report it.
fn parse_time(text: &str) -> Option<SystemTime> {
    if let Ok(time) = humantime::parse_rfc3339(text) {
        return Some(time);
    }
    let cut = text.len().checked_sub(6)?;
    let (local, offset) = (text.get(..cut)?, text.get(cut..)?);
    let sign = match offset.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (hours, minutes) = offset[1..].split_once(':')?;
    let shift =
        Duration::from_secs(hours.parse::<u64>().ok()? * 3600 + minutes.parse::<u64>().ok()? * 60);
    let local = humantime::parse_rfc3339(&format!("{local}Z")).ok()?;
    if sign > 0 {
        local.checked_sub(shift)
    } else {
        local.checked_add(shift)
    }
}

fn data_dir(dir: &Path) -> Check {
    let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    if !dir.exists() {
        let parent = shown.parent().unwrap_or(Path::new("/"));
        return match writable(parent) {
            Ok(()) => Check::pass(
                "data-dir",
                format!("{} is made on first start", shown.display()),
            ),
            Err(error) => Check::fail(
                "data-dir",
                format!(
                    "{} does not exist and {} is not writable: {error}",
                    shown.display(),
                    parent.display()
                ),
                "create it for the user running sandboxd, or choose another with --data-dir",
            ),
        };
    }
    match writable(dir) {
        Ok(()) => Check::pass("data-dir", format!("{} is writable", shown.display())),
        Err(error) => Check::fail(
            "data-dir",
            format!("{} is not writable: {error}", shown.display()),
            "run sandboxd as the directory's owner, or choose another with --data-dir",
        ),
    }
}

/// Creates and removes a file in `dir`.
fn writable(dir: &Path) -> std::io::Result<()> {
    tempfile::Builder::new()
        .prefix(".sandboxd-doctor-")
        .tempfile_in(dir)
        .map(drop)
}

async fn store(config: &Config) -> Check {
    let database = match config.database() {
        Ok(database) => database,
        Err(error) => {
            return Check::fail(
                "store",
                error.to_string(),
                "give a postgres:// URL, or none",
            );
        }
    };
    let db = database.describe();
    let file = match &database {
        sandboxd_store::Database::Sqlite { data_dir } => Some(data_dir.join("sandboxd.db")),
        sandboxd_store::Database::Postgres { .. } => None,
    };
    match sandboxd_store::survey(&database).await {
        Ok(None) => Check::pass("store", "no database yet: it is made on first start"),
        Ok(Some(survey)) if survey.schema_version > survey.known_version => Check::fail(
            "store",
            format!(
                "{} was migrated by a newer sandboxd (schema {} > {})",
                db, survey.schema_version, survey.known_version
            ),
            "run the newer sandboxd, or restore a backup made before the upgrade",
        ),
        Ok(Some(survey)) => {
            let detail = format!(
                "{}: schema {}{}, {} sandbox record(s) on this engine",
                db,
                survey.schema_version,
                if survey.schema_version < survey.known_version {
                    format!(" (migrated to {} on next start)", survey.known_version)
                } else {
                    String::new()
                },
                survey.tracking.records.len()
            );
            let Some(file) = file else {
                return Check::pass("store", detail);
            };
            match std::fs::OpenOptions::new().write(true).open(&file) {
                Ok(_) => Check::pass("store", detail),
                Err(error) => Check::fail(
                    "store",
                    format!("{detail}, but it is not writable: {error}"),
                    "run sandboxd as the database file's owner",
                ),
            }
        }
        Err(error) => Check::fail(
            "store",
            format!("cannot read {db}: {error}"),
            "check the file's owner and mode, or restore it from a backup",
        ),
    }
}

fn agent(config: &Config) -> Check {
    match crate::agent::availability(config.agent, config.agent_binary.as_deref()) {
        Ok(detail) => Check::pass("agent", detail),
        Err(crate::agent::Unavailable::Invalid(why)) => Check::fail(
            "agent",
            why,
            "build one with scripts/build-agent.sh, or unset agent_binary",
        ),
        Err(crate::agent::Unavailable::Missing(why)) => Check::warn(
            "agent",
            format!("no agent ({why}): commands go through the engine, about 20 times slower"),
            "rebuild sandboxd with `cargo build`, or set agent_binary to a static agent",
        ),
    }
}

/// Free space on the file system of `path` (or of its nearest existing parent).
fn disk(name: &str, path: &Path) -> Check {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let Some(existing) = absolute.ancestors().find(|p| p.exists()) else {
        return Check::pass(name, "nothing to measure");
    };
    match rustix::fs::statvfs(existing) {
        Ok(stats) => {
            let free = stats.f_bavail.saturating_mul(stats.f_frsize);
            let detail = format!("{} free under {}", gib(free), existing.display());
            if free < DISK_FAIL_BYTES {
                Check::fail(
                    name,
                    detail,
                    "free space there (`docker system prune` for the engine's)",
                )
            } else if free < DISK_WARN_BYTES {
                Check::warn(name, detail, "free space there soon")
            } else {
                Check::pass(name, detail)
            }
        }
        Err(error) => Check::warn(
            name,
            format!("cannot measure {}: {error}", existing.display()),
            "check it by hand (`df -h`)",
        ),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::doctor::report::Outcome;

    fn facts() -> EngineFacts {
        EngineFacts {
            version: "28.2.2".into(),
            api_version: "1.50".into(),
            negotiated_api_version: "1.50".into(),
            runtimes: vec!["runc".into()],
            default_runtime: "runc".into(),
            ..EngineFacts::default()
        }
    }

    #[test]
    fn old_engines_and_missing_runtimes_fail_with_a_fix() {
        assert_eq!(engine_version(&facts()).outcome, Outcome::Pass);
        let mut old = facts();
        old.negotiated_api_version = "1.40".into();
        assert_eq!(engine_version(&old).outcome, Outcome::Fail);
        assert_eq!(runtime(&facts(), None).outcome, Outcome::Pass);
        assert_eq!(runtime(&facts(), Some("runc")).outcome, Outcome::Pass);
        let missing = runtime(&facts(), Some("runsc"));
        assert_eq!(missing.outcome, Outcome::Fail);
        assert!(missing.detail.contains("offers only: runc"), "{missing:?}");
    }

    #[test]
    fn init_matters_only_without_the_agent() {
        assert_eq!(init(&facts(), true).outcome, Outcome::Warn);
        assert_eq!(init(&facts(), false).outcome, Outcome::Fail);
        let mut with_init = facts();
        with_init.init = Some("docker-init (de40ad0)".into());
        assert_eq!(init(&with_init, false).outcome, Outcome::Pass);
    }

    #[test]
    fn live_restore_is_recommended() {
        let off = live_restore(&facts());
        assert_eq!(off.outcome, Outcome::Warn);
        assert!(off.fix.unwrap().contains("live-restore"));
        let on = EngineFacts {
            live_restore: true,
            ..facts()
        };
        assert_eq!(live_restore(&on).outcome, Outcome::Pass);
    }

    #[test]
    fn clocks_apart_fail() {
        let now = humantime::parse_rfc3339("2026-12-01T04:00:00Z").unwrap();
        let near = clock(Some("2026-12-01T04:00:01.5Z"), now);
        assert_eq!(near.outcome, Outcome::Pass, "{near:?}");
        let far = clock(Some("2026-12-01T03:59:00.000000001Z"), now);
        assert_eq!(far.outcome, Outcome::Fail, "{far:?}");
        assert_eq!(clock(None, now).outcome, Outcome::Pass);
        let offset = clock(Some("2026-12-01T05:00:00.25+01:00"), now);
        assert_eq!(offset.outcome, Outcome::Pass, "{offset:?}");
        assert_eq!(parse_time("2026-12-01T03:00:00-01:00"), Some(now));
        assert_eq!(clock(None, SystemTime::UNIX_EPOCH).outcome, Outcome::Fail);
    }
}
