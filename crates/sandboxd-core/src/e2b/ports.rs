//! A sandbox's ports on the E2B domain (`<port>-<sandbox id>.<domain>`), as E2B's
//! network settings make them for a sandbox created through E2B's API: open to anyone
//! unless `allowPublicTraffic` is false, when a request must carry the sandbox's traffic
//! access token (`E2B-Traffic-Access-Token`); and the `Host` the sandbox's app sees,
//! `maskRequestHost` with `${PORT}` put in, instead of the domain's name.
//!
//! `port_settings` reads them from create's `network`; `who_enters` decides a request.

use crate::error::Invalid;

use super::network::NetworkSettings;

/// The header that carries a sandbox's traffic access token.
pub const TRAFFIC_TOKEN_HEADER: &str = "e2b-traffic-access-token";

/// What `maskRequestHost` has put in for the port.
const PORT_PLACEHOLDER: &str = "${PORT}";

/// The longest `maskRequestHost` taken (a host name's own bound).
pub const MAX_MASK_BYTES: usize = 253;

/// How a sandbox's ports are served on the E2B domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSettings {
    /// Anyone may reach them (E2B's default); else only with the traffic token.
    pub public: bool,
    /// The `Host` the app sees (`${PORT}` still in it); else the request's own.
    pub mask_host: Option<String>,
}

/// The port settings of create's `network`: public unless `allowPublicTraffic` is
/// false; a mask must be a host name, with a port or `${PORT}` after a colon.
pub fn port_settings(network: Option<&NetworkSettings>) -> Result<PortSettings, Invalid> {
    let public = network.and_then(|n| n.allow_public_traffic).unwrap_or(true);
    let mask_host = match network.and_then(|n| n.mask_request_host.as_deref()) {
        None | Some("") => None,
        Some(mask) if valid_mask(mask) => Some(mask.to_owned()),
        Some(mask) => {
            return Err(Invalid::one(
                "network.maskRequestHost",
                format!(
                    "{:?} is not a host name with an optional port (`${{PORT}}` stands for the port)",
                    mask.chars().take(64).collect::<String>()
                ),
            ));
        }
    };
    Ok(PortSettings { public, mask_host })
}

fn valid_mask(mask: &str) -> bool {
    if mask.len() > MAX_MASK_BYTES {
        return false;
    }
    let filled = masked_host(mask, 1);
    let (name, port) = match filled.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (filled.as_str(), None),
    };
    let name_ok = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    name_ok && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}

/// The `Host` an app sees behind `mask` on `port`.
pub fn masked_host(mask: &str, port: u16) -> String {
    mask.replace(PORT_PLACEHOLDER, &port.to_string())
}

/// How a request to a sandbox's port on the E2B domain enters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// As the key its traffic token (or its own key) names.
    WithToken,
    /// As anyone: the port is public, and acts for the key that made the sandbox.
    AsPublic,
    /// Not at all (403): the sandbox's ports need its token, and none came.
    Refused,
}

/// How a request enters: `settings` is `None` for a sandbox not made through E2B's API
/// (its ports are never public there); `credential` whether it carries a token or key.
pub fn who_enters(settings: Option<&PortSettings>, credential: bool) -> Entry {
    match (credential, settings) {
        (true, _) => Entry::WithToken,
        (false, Some(settings)) if settings.public => Entry::AsPublic,
        (false, _) => Entry::Refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network(public: Option<bool>, mask: Option<&str>) -> NetworkSettings {
        NetworkSettings {
            allow_public_traffic: public,
            mask_request_host: mask.map(str::to_owned),
            ..NetworkSettings::default()
        }
    }

    #[test]
    fn ports_are_public_unless_told_otherwise() {
        assert!(port_settings(None).unwrap().public);
        assert!(port_settings(Some(&network(None, None))).unwrap().public);
        assert!(
            !port_settings(Some(&network(Some(false), None)))
                .unwrap()
                .public
        );
    }

    #[test]
    fn a_mask_is_a_host_with_the_port_put_in() {
        let settings = port_settings(Some(&network(
            None,
            Some("custom-host.example.com:${PORT}"),
        )))
        .unwrap();
        let mask = settings.mask_host.unwrap();
        assert_eq!(masked_host(&mask, 8080), "custom-host.example.com:8080");
        for good in ["example.com", "a.b:443", "${PORT}.example.com"] {
            assert!(
                port_settings(Some(&network(None, Some(good)))).is_ok(),
                "{good}"
            );
        }
        let long = format!("{}.com", "a".repeat(300));
        for bad in [
            "a b",
            "a\r\nX-Evil: 1",
            "host:port",
            "host:0",
            "host:70000",
            "..",
            "http://host",
            long.as_str(),
        ] {
            let refused = port_settings(Some(&network(None, Some(bad)))).unwrap_err();
            assert_eq!(refused.issues[0].path, "network.maskRequestHost", "{bad}");
        }
    }

    #[test]
    fn a_token_enters_a_public_port_anyone_and_else_nobody() {
        let public = PortSettings {
            public: true,
            mask_host: None,
        };
        let private = PortSettings {
            public: false,
            mask_host: None,
        };
        assert_eq!(who_enters(Some(&public), false), Entry::AsPublic);
        assert_eq!(who_enters(Some(&private), false), Entry::Refused);
        assert_eq!(who_enters(None, false), Entry::Refused);
        for settings in [Some(&public), Some(&private), None] {
            assert_eq!(who_enters(settings, true), Entry::WithToken);
        }
    }
}
