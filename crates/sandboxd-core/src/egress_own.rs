//! sandboxd's own host, as egress sees it: the addresses of its interfaces (read from
//! the kernel's tables) and those it listens, advertises and is reached on. A sandbox
//! never reaches them through a name that resolves to one (its metrics, a TCP Docker
//! API, the API with its limits bypassed), unless the operator lists that address
//! alone in `allowed_networks`: a network that merely contains it (`10.0.0.0/8` for an
//! internal mirror) does not open the host.
//!
//! `OwnAddresses` counts an IPv4 address written inside IPv6 as itself; `local_networks`
//! reads the kernel's `fib_trie` and `if_inet6` as text; `url_host`. `egress::reachable`
//! refuses these addresses unless `allowed_networks` names the address alone (`names`).

use std::net::IpAddr;

use ipnet::IpNet;

/// The networks and addresses of sandboxd's own host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnAddresses(Vec<IpNet>);

impl OwnAddresses {
    /// The host's local networks (as `local_networks` reads them) and single addresses.
    pub fn new(mut networks: Vec<IpNet>, addresses: impl IntoIterator<Item = IpAddr>) -> Self {
        networks.extend(
            addresses
                .into_iter()
                .filter(|ip| !ip.is_unspecified())
                .map(IpNet::from),
        );
        networks.sort();
        networks.dedup();
        Self(networks)
    }

    /// Whether `ip` is one of the host's, written any way (an IPv4 address inside an
    /// IPv6 one counts as itself).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let plain = match ip {
            IpAddr::V6(v6) => crate::embedded_v4::embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        self.0
            .iter()
            .any(|net| net.contains(&ip) || plain.is_some_and(|v4| net.contains(&v4)))
    }
}

/// The host a URL names (`https://[fd00::1]:8443/x` → `fd00::1`), without its port.
pub fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']')?.0,
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    (!host.is_empty()).then_some(host)
}

/// The host's local addresses from the kernel's tables: the `host LOCAL` entries of
/// `/proc/net/fib_trie` (each address of an interface, and loopback's whole network)
/// and every address of `/proc/net/if_inet6`. Lines that do not read are skipped.
pub fn local_networks(fib_trie: &str, if_inet6: &str) -> Vec<IpNet> {
    let mut found = Vec::new();
    let mut last: Option<IpAddr> = None;
    for line in fib_trie.lines() {
        let text = line.trim_start_matches([' ', '|', '+', '-']).trim();
        if let Some(rest) = text.strip_prefix('/') {
            let mut words = rest.split_whitespace();
            let prefix = words.next().and_then(|p| p.parse::<u8>().ok());
            let local = words.any(|w| w == "LOCAL");
            if let (Some(ip), Some(prefix), true) = (last, prefix, local)
                && let Ok(net) = IpNet::new(ip, prefix)
            {
                found.push(net.trunc());
            }
        } else {
            last = text
                .split_whitespace()
                .next()
                .and_then(|word| word.parse().ok());
        }
    }
    for line in if_inet6.lines() {
        let Some(hex) = line.split_whitespace().next().filter(|h| h.len() == 32) else {
            continue;
        };
        if let Ok(bits) = u128::from_str_radix(hex, 16) {
            found.push(IpNet::from(IpAddr::V6(bits.into())));
        }
    }
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIB_TRIE: &str = "Main:
  +-- 0.0.0.0/0 3 0 4
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 10.0.0.0/8 2 0 2
           |-- 10.1.2.0
              /24 link UNICAST
           |-- 10.1.2.3
              /32 host LOCAL
Local:
     +-- 127.0.0.0/8 2 0 2
           |-- 127.0.0.1
              /32 host LOCAL
";
    const IF_INET6: &str = "\
fe8000000000000000fc00fffe000001 04 40 20 80     eth0
00000000000000000000000000000001 01 80 10 80       lo
garbage
";

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_urls_host_is_read_without_its_port() {
        assert_eq!(
            url_host("https://replica-2.internal:8443/api"),
            Some("replica-2.internal")
        );
        assert_eq!(url_host("http://10.0.0.5"), Some("10.0.0.5"));
        assert_eq!(url_host("http://[fd00::1]:8080/"), Some("fd00::1"));
        assert_eq!(url_host("http://user:pw@10.0.0.5:1/"), Some("10.0.0.5"));
        assert_eq!(url_host("http://"), None);
    }

    #[test]
    fn local_networks_are_read_from_the_kernels_tables() {
        let found = local_networks(FIB_TRIE, IF_INET6);
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "10.1.2.3/32",
                "127.0.0.0/8",
                "127.0.0.1/32",
                "::1/128",
                "fe80::fc:ff:fe00:1/128"
            ]
        );
    }

    #[test]
    fn the_hosts_addresses_are_its_own_however_written() {
        let own = OwnAddresses::new(
            local_networks(FIB_TRIE, IF_INET6),
            [ip("93.184.216.34"), ip("0.0.0.0")],
        );
        for mine in [
            "10.1.2.3",
            "127.0.0.2",
            "93.184.216.34",
            "::ffff:93.184.216.34",
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
            "::1",
        ] {
            assert!(own.contains(ip(mine)), "{mine}");
        }
        for other in ["10.1.2.4", "93.184.216.35", "0.0.0.0", "2001:db8::1"] {
            assert!(!own.contains(ip(other)), "{other}");
        }
    }
}
