//! Egress by name: which hosts a sandbox in `allowlist` mode may reach (exact names and
//! `*.` wildcards, each with an optional port; 80 and 443 when none is given), and which
//! addresses sandboxd may connect to for them once it has resolved a name itself (never
//! loopback, link-local, private, shared, metadata or other special ranges, unless the
//! operator allows a network). The sandbox's word is never taken for an address: a
//! request names a host, the policy says whether it may be reached, and sandboxd
//! resolves and checks what it will connect to.
//!
//! Validation keeps a list as `Policy::entries` gives it; `plan` gives an `allowlist`
//! container no network and the proxy's variables (`EGRESS_PROXY_PORT`). `name_of`
//! refuses names that are disguised IP addresses; `reachable` says which of a name's
//! addresses sandboxd may connect to (special ranges and its own host's addresses refused
//! unless `allowed_networks` permits them); `host_header_matches` binds a request's
//! `Host` to its URL.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Entries in one sandbox's list, at most.
pub const MAX_ALLOWED: usize = 256;
/// The ports an entry without one allows.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];
/// A host name's length, at most (RFC 1035, without the final dot).
const MAX_NAME: usize = 253;

/// One entry of an allow list: a host or every host below a domain, on a port or on
/// [`DEFAULT_PORTS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    host: HostPattern,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// This name only.
    Exact(String),
    /// Names with one or more labels before this one (`*.example.com`: `a.example.com`
    /// and `a.b.example.com`, not `example.com`).
    Below(String),
}

impl Allowed {
    /// An entry as written: `name`, `*.name`, either with `:port`. Names are taken in any
    /// case and kept in lower case; IP addresses are not names.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (host, port) = match text.rsplit_once(':') {
            Some((host, port)) => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("{text:?}: the port must be between 1 and 65535"))?;
                (host, Some(port))
            }
            None => (text, None),
        };
        let host = match host.strip_prefix("*.") {
            Some(domain) => {
                HostPattern::Below(name_of(domain).map_err(|why| format!("{text:?}: {why}"))?)
            }
            None if host.contains('*') => {
                return Err(format!(
                    "{text:?}: a wildcard is a whole first label (`*.example.com`)"
                ));
            }
            None => HostPattern::Exact(name_of(host).map_err(|why| format!("{text:?}: {why}"))?),
        };
        Ok(Self { host, port })
    }

    /// Whether a connection to `host` (a name as [`name_of`] gives it) on `port` is
    /// allowed by this entry.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(allowed) => allowed == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        port_ok
            && match &self.host {
                HostPattern::Exact(name) => host == name,
                HostPattern::Below(domain) => host
                    .strip_suffix(domain.as_str())
                    .and_then(|head| head.strip_suffix('.'))
                    .is_some_and(|head| !head.is_empty()),
            }
    }
}

impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Exact(name) => f.write_str(name)?,
            HostPattern::Below(domain) => write!(f, "*.{domain}")?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// A sandbox's allow list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    allowed: Vec<Allowed>,
}

impl Policy {
    /// A list as written; every bad entry named (by its place in the list).
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        if entries.len() > MAX_ALLOWED {
            problems.push(format!("at most {MAX_ALLOWED} entries"));
        }
        let mut allowed: Vec<Allowed> = Vec::new();
        for (at, entry) in entries.iter().enumerate() {
            match Allowed::parse(entry.as_ref()) {
                Ok(entry) if !allowed.contains(&entry) => allowed.push(entry),
                Ok(_) => {}
                Err(why) => problems.push(format!("[{at}] {why}")),
            }
        }
        if problems.is_empty() {
            Ok(Self { allowed })
        } else {
            Err(problems)
        }
    }

    /// Whether `host` (as [`name_of`] gives it) may be reached on `port`.
    pub fn permits(&self, host: &str, port: u16) -> bool {
        self.allowed.iter().any(|entry| entry.matches(host, port))
    }

    /// The entries, written as [`Allowed::parse`] reads them (lower case, no duplicates).
    pub fn entries(&self) -> Vec<String> {
        self.allowed.iter().map(ToString::to_string).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.allowed.is_empty()
    }
}

/// Why a connection is not made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// What was named is not a host name.
    NotAName,
    /// An IP address was named: only names are allowed, and checked after resolving.
    AddressNamed,
    /// The list does not allow this host on this port.
    NotAllowed,
    /// The name resolved to no address.
    Unresolved,
    /// Every address the name resolved to is in a range sandboxes may not reach.
    Forbidden(Range),
    /// The name resolved to an address of sandboxd's own host.
    OwnAddress,
    /// An HTTP request's `Host` names another host than its URL, or is repeated.
    HostMismatch,
    /// A TLS tunnel's ClientHello names another host than its CONNECT (or none).
    SniMismatch,
}

impl Refusal {
    /// A short fixed label of the kind of refusal (for metrics).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotAName => "not_a_name",
            Self::AddressNamed => "address_named",
            Self::NotAllowed => "not_allowed",
            Self::Unresolved => "unresolved",
            Self::Forbidden(_) => "forbidden_address",
            Self::OwnAddress => "own_address",
            Self::HostMismatch => "host_mismatch",
            Self::SniMismatch => "sni_mismatch",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAName => f.write_str("not a host name"),
            Self::AddressNamed => f.write_str("an IP address; only host names may be reached"),
            Self::NotAllowed => f.write_str("not in the sandbox's egress list"),
            Self::Unresolved => f.write_str("the name does not resolve"),
            Self::Forbidden(range) => write!(f, "it resolves to a {range} address"),
            Self::OwnAddress => f.write_str("it resolves to an address of sandboxd's own host"),
            Self::HostMismatch => f.write_str(
                "the request's Host header names another host than its URL, or is repeated",
            ),
            Self::SniMismatch => {
                f.write_str("the TLS handshake names another host than the tunnel's (or none)")
            }
        }
    }
}

/// A host name as a request names it, as the policy compares it: lower case, without a
/// final dot; an IP address (however written, even as a number browsers and resolvers
/// read as one, such as `2130706433` or `0x7f.1`) is [`Refusal::AddressNamed`].
pub fn name_of(text: &str) -> Result<String, Refusal> {
    let bare = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'));
    if bare.unwrap_or(text).parse::<IpAddr>().is_ok() {
        return Err(Refusal::AddressNamed);
    }
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(Refusal::NotAName);
    }
    let labels: Vec<&str> = name.split('.').collect();
    let label_ok = |label: &&str| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    };
    if !labels.iter().all(label_ok) {
        return Err(Refusal::NotAName);
    }
    // No top-level domain is a number: a name ending in one is an address in disguise.
    let last = labels.last().copied().unwrap_or_default();
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || last
            .strip_prefix("0x")
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()));
    if numeric {
        return Err(Refusal::AddressNamed);
    }
    Ok(name)
}

impl From<Refusal> for String {
    fn from(refusal: Refusal) -> Self {
        refusal.to_string()
    }
}

/// A range of addresses sandboxes may not reach unless the operator allows a network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    Unspecified,
    Loopback,
    Private,
    Shared,
    LinkLocal,
    Metadata,
    Multicast,
    Reserved,
    Documentation,
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::Shared => "shared (carrier-grade NAT)",
            Self::LinkLocal => "link-local",
            Self::Metadata => "cloud metadata",
            Self::Multicast => "multicast",
            Self::Reserved => "reserved",
            Self::Documentation => "documentation",
        })
    }
}

/// The special range `ip` is in, if any. IPv6 addresses that carry an IPv4 address
/// (mapped, NAT64, 6to4) are judged by it; Teredo, whose address hides one, is reserved.
pub fn range_of(ip: IpAddr) -> Option<Range> {
    match ip {
        IpAddr::V4(v4) => range_of_v4(v4),
        IpAddr::V6(v6) => range_of_v6(v6),
    }
}

fn range_of_v4(ip: Ipv4Addr) -> Option<Range> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => Range::Metadata,
        (0, _, _) => Range::Unspecified,
        (10, _, _) | (192, 168, _) => Range::Private,
        (172, 16..=31, _) => Range::Private,
        (100, 64..=127, _) => Range::Shared,
        (127, _, _) => Range::Loopback,
        (169, 254, _) => Range::LinkLocal,
        (192, 0, 0) | (198, 18..=19, _) => Range::Reserved,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Range::Documentation,
        (224..=239, _, _) => Range::Multicast,
        (240..=255, _, _) => Range::Reserved,
        _ => return None,
    })
}

fn range_of_v6(ip: Ipv6Addr) -> Option<Range> {
    if let Some(v4) = crate::embedded_v4::embedded_v4(ip) {
        return range_of_v4(v4);
    }
    let s = ip.segments();
    Some(match s {
        _ if ip.is_unspecified() => Range::Unspecified,
        _ if ip.is_loopback() => Range::Loopback,
        [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254] => Range::Metadata,
        [first, ..] if first & 0xfe00 == 0xfc00 => Range::Private,
        [first, ..] if first & 0xffc0 == 0xfe80 => Range::LinkLocal,
        [first, ..] if first & 0xff00 == 0xff00 => Range::Multicast,
        [0x2001, 0x0db8, ..] => Range::Documentation,
        [0x2001, 0x0000, ..] => Range::Reserved,
        // Other addresses under ::/8 (compatible, discard, …) are no hosts to reach.
        [0, ..] => Range::Reserved,
        _ => return None,
    })
}

/// Whether a request's `Host` header (`value`) names the host and port of its URL
/// (`host`, `port` as the URL gives them; a port left out is HTTP's 80 on both sides):
/// the same name, however cased, with or without a final dot.
pub fn host_header_matches(value: &str, host: &str, port: Option<u16>) -> bool {
    let value = value.trim();
    let (name, given) = match value.rsplit_once(':') {
        Some((name, digits)) if !name.contains(':') => match digits.parse::<u16>() {
            Ok(given) => (name, Some(given)),
            Err(_) => return false,
        },
        _ => (value, None),
    };
    let same_name = matches!((name_of(name), name_of(host)), (Ok(a), Ok(b)) if a == b);
    same_name && given.unwrap_or(80) == port.unwrap_or(80)
}

/// The networks an operator lets sandboxes reach although they are special
/// (`[egress] allowed_networks`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedNetworks(Vec<IpNet>);

impl AllowedNetworks {
    /// Networks as written (`10.1.0.0/16`, `fd00::/8`, or one address).
    pub fn parse<S: AsRef<str>>(networks: &[S]) -> Result<Self, String> {
        networks
            .iter()
            .map(|text| {
                let text = text.as_ref().trim();
                text.parse::<IpNet>()
                    .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("{text:?} is not a network (CIDR) or an address"))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// Whether `ip` is listed alone (`10.0.0.5`, `10.0.0.5/32`, `fd00::5/128`): what
    /// opens an address of sandboxd's own host to sandboxes.
    pub fn names(&self, ip: IpAddr) -> bool {
        self.0
            .iter()
            .any(|net| net.prefix_len() == net.max_prefix_len() && net.addr() == ip)
    }
}

/// Whether sandboxd may connect to `ip` for a sandbox: outside every special range, or
/// in a network the operator allows.
pub fn may_connect(ip: IpAddr, allowed: &AllowedNetworks) -> Result<(), Range> {
    match range_of(ip) {
        Some(range) if !allowed.contains(ip) => Err(range),
        _ => Ok(()),
    }
}

/// Of the addresses a name resolved to, those sandboxd may connect to, in order: none
/// of a special range the operator did not allow, none of sandboxd's own host
/// (`own`) the operator did not list alone. When there are none, why (the first
/// address's, or that there were none).
pub fn reachable(
    addresses: &[IpAddr],
    allowed: &AllowedNetworks,
    own: &crate::egress_own::OwnAddresses,
) -> Result<Vec<IpAddr>, Refusal> {
    let first = addresses.first().ok_or(Refusal::Unresolved)?;
    let hosts_own = |ip: IpAddr| own.contains(ip) && !allowed.names(ip);
    let kept: Vec<IpAddr> = addresses
        .iter()
        .copied()
        .filter(|ip| may_connect(*ip, allowed).is_ok() && !hosts_own(*ip))
        .collect();
    if kept.is_empty() {
        if may_connect(*first, allowed).is_ok() && hosts_own(*first) {
            return Err(Refusal::OwnAddress);
        }
        let range = range_of(*first).unwrap_or(Range::Reserved);
        return Err(Refusal::Forbidden(range));
    }
    Ok(kept)
}

/// The operator's egress settings (`[egress]`): names answered before DNS (private
/// services, a test's pretend internet) and the special networks sandboxes may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Operator {
    hosts: std::collections::BTreeMap<String, IpAddr>,
    pub allowed_networks: AllowedNetworks,
}

impl Operator {
    /// The settings as written: `hosts` maps a name to an IP address; every bad entry
    /// named.
    pub fn parse<S: AsRef<str>>(
        hosts: &std::collections::BTreeMap<String, String>,
        allowed_networks: &[S],
    ) -> Result<Self, String> {
        let mut problems = Vec::new();
        let mut parsed = std::collections::BTreeMap::new();
        for (name, address) in hosts {
            let Ok(key) = name_of(name) else {
                problems.push(format!("egress.hosts: {name:?} is not a host name"));
                continue;
            };
            match address.trim().parse::<IpAddr>() {
                Ok(ip) => {
                    parsed.insert(key, ip);
                }
                Err(_) => problems.push(format!(
                    "egress.hosts: {address:?} (for {name:?}) is not an IP address"
                )),
            }
        }
        let allowed_networks = AllowedNetworks::parse(allowed_networks)
            .map_err(|why| format!("egress.allowed_networks: {why}"))
            .unwrap_or_else(|why| {
                problems.push(why);
                AllowedNetworks::default()
            });
        if problems.is_empty() {
            Ok(Self {
                hosts: parsed,
                allowed_networks,
            })
        } else {
            Err(problems.join("; "))
        }
    }

    /// The address the operator gives `name` (as [`name_of`] gives it), if any.
    pub fn host(&self, name: &str) -> Option<IpAddr> {
        self.hosts.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(entries: &[&str]) -> Policy {
        Policy::parse(entries).unwrap()
    }

    #[test]
    fn exact_names_and_wildcards_on_the_default_ports_or_their_own() {
        let p = policy(&["Allowed.Test", "*.api.test", "pypi.test:8080"]);
        assert!(p.permits("allowed.test", 443));
        assert!(p.permits("allowed.test", 80));
        assert!(!p.permits("allowed.test", 8443), "not a default port");
        assert!(!p.permits("sub.allowed.test", 443), "an exact name only");
        assert!(p.permits("a.api.test", 443));
        assert!(p.permits("a.b.api.test", 80), "one or more labels");
        assert!(!p.permits("api.test", 443), "not the bare name");
        assert!(!p.permits("evilapi.test", 443), "a whole label");
        assert!(p.permits("pypi.test", 8080));
        assert!(!p.permits("pypi.test", 443), "its own port only");
        assert_eq!(
            p.entries(),
            ["allowed.test", "*.api.test", "pypi.test:8080"],
            "written back in lower case"
        );
        assert!(!Policy::default().permits("allowed.test", 443));
    }

    #[test]
    fn bad_entries_are_named() {
        let problems = Policy::parse(&[
            "ok.test",
            "*",
            "a.*.test",
            "1.2.3.4",
            "[::1]",
            "x.test:0",
            "x.test:99999",
            "-a.test",
            "a..test",
            "*.10",
        ])
        .unwrap_err();
        assert_eq!(problems.len(), 9, "{problems:?}");
        assert!(problems[0].starts_with("[1]"), "{problems:?}");
        let many: Vec<String> = (0..=MAX_ALLOWED).map(|n| format!("h{n}.test")).collect();
        assert!(Policy::parse(&many).is_err());
        assert_eq!(
            policy(&["a.test", "A.test"]).entries(),
            ["a.test"],
            "duplicates kept once"
        );
    }

    #[test]
    fn addresses_in_disguise_are_not_names() {
        for address in [
            "127.0.0.1",
            "::1",
            "[::1]",
            "2130706433",
            "0x7f.1",
            "127.1",
            "10.0.0.1.",
        ] {
            assert_eq!(name_of(address), Err(Refusal::AddressNamed), "{address}");
        }
        for bad in ["", "a b", "ex ample.test", "a/b", "a@b", &"x".repeat(254)] {
            assert_eq!(name_of(bad), Err(Refusal::NotAName), "{bad:?}");
        }
        assert_eq!(name_of("Example.COM.").unwrap(), "example.com");
        assert_eq!(name_of("1e100.net").unwrap(), "1e100.net");
    }

    #[test]
    fn special_ranges_are_refused_unless_the_operator_allows_a_network() {
        let none = AllowedNetworks::default();
        let refused = [
            ("127.0.0.1", Range::Loopback),
            ("0.0.0.0", Range::Unspecified),
            ("10.1.2.3", Range::Private),
            ("172.20.0.1", Range::Private),
            ("192.168.1.1", Range::Private),
            ("100.100.0.1", Range::Shared),
            ("169.254.169.254", Range::Metadata),
            ("169.254.1.1", Range::LinkLocal),
            ("224.0.0.1", Range::Multicast),
            ("255.255.255.255", Range::Reserved),
            ("::1", Range::Loopback),
            ("::", Range::Unspecified),
            ("::ffff:127.0.0.1", Range::Loopback),
            ("64:ff9b::a9fe:a9fe", Range::Metadata),
            ("2002:7f00:1::1", Range::Loopback),
            ("fd00:ec2::254", Range::Metadata),
            ("fd12::1", Range::Private),
            ("fe80::1", Range::LinkLocal),
            ("ff02::1", Range::Multicast),
            ("2001::1", Range::Reserved),
        ];
        for (ip, range) in refused {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(may_connect(ip, &none), Err(range), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "172.32.0.1",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(may_connect(ip.parse().unwrap(), &none), Ok(()), "{ip}");
        }
        let lab = AllowedNetworks::parse(&["10.9.0.0/16", "fd12::5"]).unwrap();
        assert_eq!(may_connect("10.9.3.4".parse().unwrap(), &lab), Ok(()));
        assert_eq!(may_connect("fd12::5".parse().unwrap(), &lab), Ok(()));
        assert!(may_connect("10.8.0.1".parse().unwrap(), &lab).is_err());
        assert!(AllowedNetworks::parse(&["10.0.0.0/33"]).is_err());
    }

    #[test]
    fn of_what_a_name_resolves_to_only_the_reachable_addresses_are_kept() {
        let none = AllowedNetworks::default();
        let mixed: Vec<IpAddr> = vec![
            "127.0.0.1".parse().unwrap(),
            "93.184.216.34".parse().unwrap(),
        ];
        let nobody = crate::egress_own::OwnAddresses::default();
        assert_eq!(reachable(&mixed, &none, &nobody).unwrap(), vec![mixed[1]]);
        assert_eq!(
            reachable(&mixed[..1], &none, &nobody),
            Err(Refusal::Forbidden(Range::Loopback))
        );
        assert_eq!(reachable(&[], &none, &nobody), Err(Refusal::Unresolved));
    }

    #[test]
    fn a_host_header_names_the_urls_host_or_is_refused() {
        assert!(host_header_matches("allowed.test", "allowed.test", None));
        assert!(host_header_matches("Allowed.Test.", "allowed.test", None));
        assert!(host_header_matches(
            "allowed.test:8080",
            "allowed.test",
            Some(8080)
        ));
        assert!(host_header_matches("allowed.test:80", "allowed.test", None));
        assert!(host_header_matches(
            "allowed.test",
            "allowed.test",
            Some(80)
        ));
        for (value, port) in [
            ("blocked.test", None),
            ("allowed.test.blocked.test", None),
            ("allowed.test:8081", Some(8080)),
            ("allowed.test", Some(8080)),
            ("allowed.test:x", None),
            ("127.0.0.1", None),
            ("", None),
        ] {
            assert!(!host_header_matches(value, "allowed.test", port), "{value}");
        }
    }

    #[test]
    fn the_hosts_own_addresses_are_refused_unless_listed_alone() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let own = crate::egress_own::OwnAddresses::new(
            vec!["10.1.2.3/32".parse().unwrap()],
            [ip("93.184.216.34")],
        );
        let none = AllowedNetworks::default();
        assert_eq!(
            reachable(&[ip("93.184.216.34")], &none, &own),
            Err(Refusal::OwnAddress)
        );
        assert_eq!(
            reachable(&[ip("::ffff:93.184.216.34")], &none, &own),
            Err(Refusal::OwnAddress)
        );
        // Another address of the name is still reached.
        assert_eq!(
            reachable(&[ip("93.184.216.34"), ip("93.184.216.35")], &none, &own).unwrap(),
            vec![ip("93.184.216.35")]
        );
        // A network that contains the host's private address does not open it; the
        // address listed alone does.
        let lab = AllowedNetworks::parse(&["10.0.0.0/8"]).unwrap();
        assert_eq!(
            reachable(&[ip("10.1.2.3")], &lab, &own),
            Err(Refusal::OwnAddress)
        );
        assert_eq!(
            reachable(&[ip("10.1.2.4")], &lab, &own).unwrap(),
            [ip("10.1.2.4")]
        );
        let named = AllowedNetworks::parse(&["10.0.0.0/8", "10.1.2.3/32"]).unwrap();
        assert_eq!(
            reachable(&[ip("10.1.2.3")], &named, &own).unwrap(),
            [ip("10.1.2.3")]
        );
        let public = AllowedNetworks::parse(&["93.184.216.34"]).unwrap();
        assert!(reachable(&[ip("93.184.216.34")], &public, &own).is_ok());
    }

    #[test]
    fn the_operator_names_hosts_by_address_and_bad_settings_are_named() {
        let hosts = [("Allowed.Test".to_owned(), "127.0.0.1".to_owned())].into();
        let operator = Operator::parse(&hosts, &["127.0.0.1/32"]).unwrap();
        assert_eq!(operator.host("allowed.test"), "127.0.0.1".parse().ok());
        assert_eq!(operator.host("other.test"), None);
        assert!(
            operator
                .allowed_networks
                .contains("127.0.0.1".parse().unwrap())
        );
        let bad = [
            ("1.2.3.4".to_owned(), "127.0.0.1".to_owned()),
            ("ok.test".to_owned(), "here".to_owned()),
        ]
        .into();
        let why = Operator::parse(&bad, &["nope"]).unwrap_err();
        assert!(why.contains("\"1.2.3.4\" is not a host name"), "{why}");
        assert!(why.contains("\"here\""), "{why}");
        assert!(why.contains("allowed_networks"), "{why}");
    }
}
