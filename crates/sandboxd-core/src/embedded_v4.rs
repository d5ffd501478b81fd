//! IPv4 addresses written as IPv6 ones: what egress and the host's own addresses see
//! through, so that no range is reached by writing its address another way.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The IPv4 address an IPv6 one carries: mapped (`::ffff:a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`) or 6to4 (`2002:aabb:ccdd::…`).
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let from = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    match s {
        [0x0064, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(from(hi, lo)),
        [0x2002, hi, lo, ..] => Some(from(hi, lo)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_nat64_and_6to4_carry_their_ipv4_address() {
        let v4 = Some(Ipv4Addr::new(93, 184, 216, 34));
        for written in [
            "::ffff:93.184.216.34",
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
        ] {
            assert_eq!(embedded_v4(written.parse().unwrap()), v4, "{written}");
        }
        assert_eq!(embedded_v4("2001:db8::1".parse().unwrap()), None);
    }
}
