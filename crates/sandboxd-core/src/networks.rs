//! Which network addresses sandboxd may connect to on a tenant's behalf (a remote
//! server's SSH port): public addresses, and the private ranges the operator lists.
//! Loopback, private, link-local (with cloud metadata at 169.254.169.254), carrier-grade
//! NAT, unique-local, multicast, documentation and reserved ranges are the operator's
//! own network or nobody's, and are refused unless listed. The check is on the address
//! a name resolved to, and the connection is made to that address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// The operator's list of networks that may be reached besides public addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedNetworks {
    networks: Vec<IpNet>,
}

impl AllowedNetworks {
    /// Parses `CIDR` strings (`10.0.0.0/8`, `fd00::/8`, or one address); every bad one
    /// is named.
    pub fn parse(list: &[String]) -> Result<Self, String> {
        let mut networks = Vec::with_capacity(list.len());
        let mut bad = Vec::new();
        for item in list {
            let item = item.trim();
            match item
                .parse::<IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
            {
                Ok(net) => networks.push(net.trunc()),
                Err(_) => bad.push(format!("{item:?}")),
            }
        }
        if bad.is_empty() {
            Ok(Self { networks })
        } else {
            Err(format!(
                "allowed_networks: not a CIDR network: {}",
                bad.join(", ")
            ))
        }
    }

    /// Whether a connection to `ip` may be made.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        is_public(ip) || self.networks.iter().any(|net| net.contains(&ip))
    }
}

/// An IPv4 address carried in IPv6 (`::ffff:a.b.c.d`) is that IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Whether an address is on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 192 && b == 168)
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        // Unique local (fc00::/7), link-local (fe80::/10), multicast (ff00::/8).
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first & 0xff00) == 0xff00
        // Site-local (fec0::/10, deprecated but routed by some).
        || (first & 0xffc0) == 0xfec0
        // Documentation (2001:db8::/32), discard (100::/64), and the forms that carry
        // an IPv4 address, which could lead into an IPv4 range: NAT64 (64:ff9b::/96),
        // IPv4-compatible (::/96), IPv4-translated (::ffff:0:0:0/96), 6to4 (2002::/16)
        // and Teredo (2001::/32).
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)
        || first == 0x2002
        || (first == 0x2001 && ip.segments()[1] == 0)
        || ip.segments()[..5] == [0, 0, 0, 0, 0xffff]
        || (first == 0x0100 && ip.segments()[1..4] == [0, 0, 0])
        || (first == 0x0064 && ip.segments()[1] == 0xff9b)
        || ip.segments()[..6] == [0, 0, 0, 0, 0, 0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }

    #[test]
    fn only_public_addresses_are_reached_by_default() {
        let none = AllowedNetworks::default();
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
        ] {
            assert!(none.permits(ip(public)), "{public}");
        }
        for private in [
            "127.0.0.1",
            "127.8.9.10",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "198.18.0.1",
            "192.0.2.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "64:ff9b::a9fe:a9fe",
            "fec0::1",
            "::ffff:0:a00:1",
            "2002:a00:1::1",
            "2001:0:4136:e378::1",
        ] {
            assert!(!none.permits(ip(private)), "{private}");
        }
    }

    #[test]
    fn the_operator_lists_what_may_be_reached_besides() {
        let allowed = AllowedNetworks::parse(&[
            "127.0.0.0/8".into(),
            "10.1.0.0/16".into(),
            " fd12::/16 ".into(),
            "192.168.5.7".into(),
        ])
        .unwrap();
        for yes in [
            "127.0.0.1",
            "::ffff:127.0.0.2",
            "10.1.200.3",
            "fd12::9",
            "192.168.5.7",
        ] {
            assert!(allowed.permits(ip(yes)), "{yes}");
        }
        for no in ["10.2.0.1", "192.168.5.8", "169.254.169.254", "fd13::1"] {
            assert!(!allowed.permits(ip(no)), "{no}");
        }
        let bad = AllowedNetworks::parse(&["10.0.0.0/33".into(), "local".into()]).unwrap_err();
        assert!(
            bad.contains("\"10.0.0.0/33\"") && bad.contains("\"local\""),
            "{bad}"
        );
    }
}
