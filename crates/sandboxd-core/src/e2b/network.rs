//! E2B's network settings (`network` on create, `PUT /sandboxes/{id}/network`) on
//! sandboxd's network modes. E2B filters addresses (`allowOut`, `denyOut`: CIDRs, IPs,
//! names, allowed entries first); sandboxd lets a sandbox reach the internet, nothing,
//! or only the hosts of its list by name, through its egress proxy. What maps is
//! taken as it is meant; what does not (a deny list of some addresses, addresses in an
//! allow list, an upstream proxy, header rules) is refused with why, never widened.

use serde::Deserialize;

use crate::egress::Allowed;
use crate::error::Invalid;
use crate::model::NetworkMode;

/// What denies all traffic in `denyOut` (the SDK's `all_traffic`).
const ALL_TRAFFIC: [&str; 2] = ["0.0.0.0/0", "::/0"];

/// E2B's network settings, as create's `network` and the update's body carry them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSettings {
    pub allow_out: Option<Vec<String>>,
    pub deny_out: Option<Vec<String>>,
    /// Whether the sandbox's ports on the E2B domain are open to anyone (the default)
    /// or need its traffic token (`super::ports`).
    pub allow_public_traffic: Option<bool>,
    /// The `Host` the sandbox's apps see on a request to a port (`super::ports`).
    pub mask_request_host: Option<String>,
    pub egress_proxy: Option<serde_json::Value>,
    pub rules: Option<serde_json::Value>,
    /// The update's own spelling of create's `allow_internet_access`.
    #[serde(alias = "allow_internet_access")]
    pub allow_internet_access: Option<bool>,
}

/// A sandbox's network as sandboxd sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    pub mode: NetworkMode,
    /// The hosts an `allowlist` sandbox may reach; empty otherwise.
    pub allow: Vec<String>,
}

fn is_address(entry: &str) -> bool {
    let host = entry.split('/').next().unwrap_or(entry);
    host.parse::<std::net::IpAddr>().is_ok()
}

fn present(value: Option<&serde_json::Value>) -> bool {
    value.is_some_and(|v| match v {
        serde_json::Value::Null => false,
        serde_json::Value::Object(map) => !map.is_empty(),
        serde_json::Value::Array(list) => !list.is_empty(),
        _ => true,
    })
}

/// The network of a sandbox given `allow_internet_access` (create's own field) and
/// E2B's `network`: everything, nothing, or the hosts `allowOut` names once all else is
/// denied (`denyOut` of all traffic, or no internet access).
pub fn egress_of(
    allow_internet_access: Option<bool>,
    network: Option<&NetworkSettings>,
) -> Result<Egress, Invalid> {
    let empty = NetworkSettings::default();
    let network = network.unwrap_or(&empty);
    if present(network.egress_proxy.as_ref()) {
        return Err(Invalid::one(
            "network.egressProxy",
            "an upstream proxy is not served: sandboxd's own egress proxy carries an allowlist sandbox's traffic",
        ));
    }
    if present(network.rules.as_ref()) {
        return Err(Invalid::one(
            "network.rules",
            "header rules are not served: sandboxd adds headers to a host's requests with its egress credentials",
        ));
    }
    let deny = network.deny_out.as_deref().unwrap_or_default();
    let deny_all = allow_internet_access == Some(false)
        || network.allow_internet_access == Some(false)
        || deny.iter().any(|entry| ALL_TRAFFIC.contains(&entry.trim()));
    if !deny_all && !deny.is_empty() {
        return Err(Invalid::one(
            "network.denyOut",
            "only all traffic (0.0.0.0/0) can be denied: sandboxd allows hosts by name and keeps no deny list of addresses",
        ));
    }
    if !deny_all {
        // Nothing is denied, so whatever is allowed is allowed anyway.
        return Ok(Egress {
            mode: NetworkMode::Internet,
            allow: Vec::new(),
        });
    }
    let allow = network.allow_out.as_deref().unwrap_or_default();
    if allow.is_empty() {
        return Ok(Egress {
            mode: NetworkMode::Isolated,
            allow: Vec::new(),
        });
    }
    let mut hosts = Vec::with_capacity(allow.len());
    for entry in allow {
        if is_address(entry.trim()) {
            return Err(Invalid::one(
                "network.allowOut",
                format!(
                    "{entry:?}: sandboxd allows hosts by name (through its egress proxy), not addresses"
                ),
            ));
        }
        Allowed::parse(entry).map_err(|why| Invalid::one("network.allowOut", why))?;
        hosts.push(entry.trim().to_owned());
    }
    Ok(Egress {
        mode: NetworkMode::Allowlist,
        allow: hosts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(allow: &[&str], deny: &[&str]) -> NetworkSettings {
        NetworkSettings {
            allow_out: Some(allow.iter().map(|s| (*s).to_owned()).collect()),
            deny_out: Some(deny.iter().map(|s| (*s).to_owned()).collect()),
            ..NetworkSettings::default()
        }
    }

    #[test]
    fn all_denied_but_names_is_an_allowlist_and_nothing_allowed_is_isolation() {
        let list = egress_of(
            None,
            Some(&settings(
                &["api.example.com", "*.pypi.org"],
                &["0.0.0.0/0"],
            )),
        )
        .unwrap();
        assert_eq!(list.mode, NetworkMode::Allowlist);
        assert_eq!(list.allow, ["api.example.com", "*.pypi.org"]);
        let by_flag = egress_of(Some(false), Some(&settings(&["example.com"], &[]))).unwrap();
        assert_eq!(by_flag.mode, NetworkMode::Allowlist);
        assert_eq!(
            egress_of(None, Some(&settings(&[], &["0.0.0.0/0"])))
                .unwrap()
                .mode,
            NetworkMode::Isolated
        );
        assert_eq!(
            egress_of(Some(false), None).unwrap().mode,
            NetworkMode::Isolated
        );
        let update: NetworkSettings =
            serde_json::from_value(serde_json::json!({"allow_internet_access": false})).unwrap();
        assert_eq!(
            egress_of(None, Some(&update)).unwrap().mode,
            NetworkMode::Isolated
        );
    }

    #[test]
    fn nothing_denied_is_the_internet_whatever_is_allowed() {
        for network in [None, Some(settings(&["1.1.1.1"], &[]))] {
            let egress = egress_of(None, network.as_ref()).unwrap();
            assert_eq!(egress.mode, NetworkMode::Internet);
            assert!(egress.allow.is_empty());
        }
    }

    #[test]
    fn what_sandboxd_cannot_honour_is_refused_never_widened() {
        let refused = [
            (settings(&[], &["8.8.8.8"]), "network.denyOut"),
            (settings(&["1.1.1.1"], &["0.0.0.0/0"]), "network.allowOut"),
            (
                settings(&["10.0.0.0/8"], &["0.0.0.0/0"]),
                "network.allowOut",
            ),
            (settings(&["bad name!"], &["0.0.0.0/0"]), "network.allowOut"),
            (
                NetworkSettings {
                    egress_proxy: Some(serde_json::json!({"address": "socks5://x:1080"})),
                    ..NetworkSettings::default()
                },
                "network.egressProxy",
            ),
            (
                NetworkSettings {
                    rules: Some(serde_json::json!({"api.example.com": [{"headers": {}}]})),
                    ..NetworkSettings::default()
                },
                "network.rules",
            ),
        ];
        for (network, field) in refused {
            let invalid = egress_of(None, Some(&network)).unwrap_err();
            assert_eq!(invalid.issues[0].path, field, "{network:?}");
        }
        let nulls = NetworkSettings {
            egress_proxy: Some(serde_json::Value::Null),
            rules: Some(serde_json::json!({})),
            ..NetworkSettings::default()
        };
        assert!(
            egress_of(None, Some(&nulls)).is_ok(),
            "empty settings are none"
        );
    }
}
