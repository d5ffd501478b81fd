//! The operator's isolation floor: the weakest isolation any sandbox of this server may
//! run under. A sandbox's runtime is what its create, template, snapshot or fork asks
//! for; the floor is what the operator allows, and a create below it is refused (never
//! quietly raised: the caller learns what it gets).
//!
//! `server_floor` (`min_isolation`, raised by the server's own runtime's tier), `raised`
//! (by a template's isolation or a source sandbox's), `meets`, and `refusal` (the 400's
//! words). The service checks the floor wherever a container is made, claimed or started
//! again (`Service::check_isolation`).

use crate::model::Isolation;
use crate::plan::isolation_tier;

/// The tiers from weakest to strongest (`plan::isolation_tier`'s names).
const TIERS: [&str; 3] = ["container", "gvisor", "microvm"];

/// The rank of a tier: the higher, the stronger (an unknown name ranks weakest).
fn rank(tier: &str) -> usize {
    TIERS.iter().position(|t| *t == tier).unwrap_or(0)
}

/// The floor of a server: its `min_isolation`, and its own runtime's tier (a server
/// whose sandboxes run under gVisor promises that none runs on the host's kernel).
pub fn server_floor(min_isolation: Option<Isolation>, runtime: Option<&str>) -> &'static str {
    let own = isolation_tier(runtime);
    match min_isolation {
        Some(min) if rank(min.as_str()) > rank(own) => min.as_str(),
        _ => own,
    }
}

/// The stronger of a floor and an isolation a template or a source sandbox holds to.
pub fn raised(floor: &'static str, by: Option<Isolation>) -> &'static str {
    match by {
        Some(isolation) if rank(isolation.as_str()) > rank(floor) => isolation.as_str(),
        _ => floor,
    }
}

/// Who set the floor a sandbox is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy<'a> {
    Server,
    Template(&'a str),
    /// The sandbox a snapshot or fork was taken of.
    Source,
}

impl SetBy<'_> {
    /// As a refusal names it.
    pub fn describe(&self) -> String {
        match self {
            Self::Server => "this server".to_owned(),
            Self::Template(name) => format!("the template {name}"),
            Self::Source => "the sandbox it was taken of".to_owned(),
        }
    }
}

/// The floor of one sandbox: the server's, raised by its template's isolation and by
/// its source's, and who set it (the last to raise it).
pub fn floor_of<'a>(
    server: &'static str,
    template: Option<(&'a str, Isolation)>,
    source: Option<Isolation>,
) -> (&'static str, SetBy<'a>) {
    let mut floor = (server, SetBy::Server);
    if let Some((name, isolation)) = template
        && raised(floor.0, Some(isolation)) != floor.0
    {
        floor = (raised(floor.0, Some(isolation)), SetBy::Template(name));
    }
    if raised(floor.0, source) != floor.0 {
        floor = (raised(floor.0, source), SetBy::Source);
    }
    floor
}

/// Whether a sandbox under `runtime` would be isolated at least as `floor` asks.
pub fn meets(runtime: Option<&str>, floor: &str) -> bool {
    rank(isolation_tier(runtime)) >= rank(floor)
}

/// Why a sandbox under `runtime` may not be made here (`None`: it may), named for the
/// caller: the tier it would get, the floor, and who set it.
pub fn refusal(runtime: Option<&str>, floor: &str, set_by: &str) -> Option<String> {
    (!meets(runtime, floor)).then(|| {
        format!(
            "{} isolation is below the floor of {set_by}: sandboxes run with {floor} isolation or stronger",
            isolation_tier(runtime)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Isolation::{Container, Gvisor};

    #[test]
    fn the_servers_floor_is_its_setting_or_its_own_runtimes_tier() {
        assert_eq!(server_floor(None, None), "container");
        assert_eq!(server_floor(None, Some("runc")), "container");
        assert_eq!(
            server_floor(None, Some("runsc")),
            "gvisor",
            "runsc implies it"
        );
        assert_eq!(server_floor(Some(Gvisor), None), "gvisor");
        assert_eq!(server_floor(Some(Container), Some("runsc")), "gvisor");
        assert_eq!(server_floor(Some(Gvisor), Some("kata-runtime")), "microvm");
    }

    #[test]
    fn a_template_or_a_source_only_raises_the_floor() {
        assert_eq!(raised("container", Some(Gvisor)), "gvisor");
        assert_eq!(raised("gvisor", Some(Container)), "gvisor");
        assert_eq!(raised("microvm", Some(Gvisor)), "microvm");
        assert_eq!(raised("gvisor", None), "gvisor");
    }

    #[test]
    fn a_sandboxs_floor_names_who_raised_it() {
        assert_eq!(
            floor_of("container", None, None),
            ("container", SetBy::Server)
        );
        assert_eq!(
            floor_of("container", Some(("python", Gvisor)), None),
            ("gvisor", SetBy::Template("python"))
        );
        assert_eq!(
            floor_of("container", None, Some(Gvisor)),
            ("gvisor", SetBy::Source)
        );
        assert_eq!(
            floor_of("gvisor", Some(("python", Gvisor)), Some(Gvisor)),
            ("gvisor", SetBy::Server)
        );
        assert_eq!(
            floor_of("container", Some(("base", Container)), None),
            ("container", SetBy::Server)
        );
        assert!(SetBy::Template("python").describe().contains("python"));
    }

    #[test]
    fn a_weaker_runtime_is_refused_by_name() {
        assert!(meets(Some("runsc"), "gvisor"));
        assert!(meets(Some("kata-runtime"), "gvisor"));
        assert!(meets(None, "container"));
        assert!(!meets(None, "gvisor"));
        assert!(!meets(Some("runc"), "gvisor"));
        assert!(!meets(Some("runsc"), "microvm"));
        assert_eq!(refusal(Some("runsc"), "gvisor", "this server"), None);
        let told = refusal(Some("runc"), "gvisor", "this server").unwrap();
        assert!(told.starts_with("container isolation is below"), "{told}");
        assert!(told.contains("gvisor"), "{told}");
    }
}
