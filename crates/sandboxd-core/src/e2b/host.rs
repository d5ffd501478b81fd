//! The hosts of an `E2B_DOMAIN` deployment: E2B's SDKs, given only a domain, send the
//! control plane's calls to `api.<domain>` and every call for a sandbox's port to
//! `<port>-<sandbox id>.<domain>` (its daemon on port 49983, the user's servers on the
//! others). Host names reach the server lower-cased, which is why a sandbox's id is
//! made of lower-case letters and digits.
//!
//! `e2b_host` says where a host goes: the API, a sandbox's port, or nothing.

use crate::ports::{name_below, valid_preview_domain};

/// Whether an E2B domain setting is a lower-case host name, with the port its TLS
/// proxy listens on when that is not 443 (`e2b.example.com`, `e2b.localhost:8443`).
pub fn valid_e2b_domain(domain: &str) -> bool {
    let (name, port) = split_port(domain);
    valid_preview_domain(name) && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}

/// An E2B domain setting without its port.
pub fn domain_name(domain: &str) -> &str {
    split_port(domain).0
}

fn split_port(domain: &str) -> (&str, Option<&str>) {
    match domain.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (domain, None),
    }
}

/// Where a request to a host under the E2B domain goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum E2bHost {
    /// `api.<domain>`: the control plane.
    Api,
    /// `<port>-<sandbox id>.<domain>`: a port of a sandbox.
    Sandbox { port: u16, sandbox_id: String },
    /// Any other name under the domain: nothing is there.
    Unknown,
}

/// Where a `Host` goes on the E2B domain (a setting, its port ignored), or `None` when
/// it is not under the domain.
pub fn e2b_host(host: &str, domain: &str) -> Option<E2bHost> {
    let label = name_below(host, domain_name(domain))?;
    if label.eq_ignore_ascii_case("api") {
        return Some(E2bHost::Api);
    }
    let sandbox = || {
        let (port, id) = label.split_once('-')?;
        let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
        let id_ok = !id.is_empty()
            && id.len() <= 63
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        id_ok.then(|| E2bHost::Sandbox {
            port,
            sandbox_id: id.to_owned(),
        })
    };
    Some(sandbox().unwrap_or(E2bHost::Unknown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_is_a_host_name_with_or_without_a_port() {
        for good in ["e2b.example.com", "e2b.localhost:8443", "localhost"] {
            assert!(valid_e2b_domain(good), "{good}");
        }
        for bad in [
            "",
            "E2B.example.com",
            "e2b.example.com:",
            "e2b.example.com:0",
            "a:b",
            "a b",
            "x:70000",
        ] {
            assert!(!valid_e2b_domain(bad), "{bad}");
        }
        assert_eq!(domain_name("e2b.localhost:8443"), "e2b.localhost");
    }

    #[test]
    fn hosts_under_the_domain_name_the_api_or_a_sandboxs_port() {
        let domain = "e2b.example.com";
        assert_eq!(e2b_host("api.e2b.example.com", domain), Some(E2bHost::Api));
        assert_eq!(
            e2b_host("API.E2B.example.com:443", domain),
            Some(E2bHost::Api)
        );
        assert_eq!(
            e2b_host("49983-abc123.e2b.example.com:8443", domain),
            Some(E2bHost::Sandbox {
                port: 49983,
                sandbox_id: "abc123".into()
            })
        );
        // A fully qualified name (one trailing dot) is the same host.
        assert_eq!(e2b_host("api.e2b.example.com.", domain), Some(E2bHost::Api));
        assert_eq!(
            e2b_host("49983-abc123.e2b.example.com.:8443", domain),
            Some(E2bHost::Sandbox {
                port: 49983,
                sandbox_id: "abc123".into()
            })
        );
        assert_eq!(
            e2b_host("8000-abc123.e2b.example.com", domain),
            Some(E2bHost::Sandbox {
                port: 8000,
                sandbox_id: "abc123".into()
            })
        );
        for unknown in [
            "www.e2b.example.com",
            "0-abc.e2b.example.com",
            "70000-abc.e2b.example.com",
            "8000-.e2b.example.com",
            "8000-a.b.e2b.example.com",
            "8000-a%b.e2b.example.com",
        ] {
            assert_eq!(
                e2b_host(unknown, domain),
                Some(E2bHost::Unknown),
                "{unknown}"
            );
        }
        assert_eq!(
            e2b_host("api.e2b.localhost:8443", "e2b.localhost:8443"),
            Some(E2bHost::Api)
        );
        for elsewhere in [
            "e2b.example.com",
            "api.example.com",
            "localhost:3000",
            "api.e2b.example.com.evil.net",
            "",
        ] {
            assert_eq!(e2b_host(elsewhere, domain), None, "{elsewhere}");
        }
    }
}
