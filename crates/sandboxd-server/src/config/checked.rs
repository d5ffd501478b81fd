//! What can be wrong in a configuration, found before anything starts, and the values
//! read out of it once checked.

use std::time::Duration;

use super::Config;

/// A configuration that cannot be served, with the key at fault named.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// The values of a configuration that are parsed out of it (the rest is used as it is).
#[derive(Debug, Clone)]
pub struct Checked {
    pub master_key: Option<[u8; 32]>,
    pub quotas: sandboxd_core::quotas::Quotas,
    pub cookie_secure: crate::CookieSecure,
    pub server_registration: sandboxd_core::access::ServerRegistration,
    pub server_networks: sandboxd_core::networks::AllowedNetworks,
    pub egress: sandboxd_core::egress::Operator,
}

/// The largest `builds.context_mb` and `builds.contexts_mb` taken (1 TiB).
const MAX_CONTEXT_MB: u64 = 1 << 20;

fn invalid(message: impl Into<String>) -> ConfigError {
    ConfigError(message.into())
}

impl Config {
    /// Checks every key, and parses those that need it.
    pub fn check(&self) -> Result<Checked, ConfigError> {
        self.check_addresses()?;
        if let Some(bootstrap) = &self.bootstrap_key
            && bootstrap.chars().count() < 32
        {
            return Err(invalid("the bootstrap key must be at least 32 characters"));
        }
        let master_key = match &self.master_key {
            Some(hex) => Some(
                parse_master_key(hex)
                    .ok_or_else(|| invalid("the master key must be 64 hex digits"))?,
            ),
            None => None,
        };
        if self.max_transfer_mb == 0 {
            return Err(invalid("max_transfer_mb must be at least 1"));
        }
        if self.session_max_lifetime_secs == 0 {
            return Err(invalid("session_max_lifetime_secs must be at least 1"));
        }
        let positive = |secs: f64| secs.is_finite() && secs > 0.0 && secs < 1e9;
        if !positive(self.reaper_interval_secs) || !positive(self.reconcile_interval_secs) {
            return Err(invalid(
                "reaper_interval_secs and reconcile_interval_secs must be more than 0",
            ));
        }
        if self.lease_grace_secs == 0 {
            return Err(invalid("lease_grace_secs must be at least 1"));
        }
        if self.agent_op_timeout_secs == 0 {
            return Err(invalid("agent_op_timeout_secs must be at least 1"));
        }
        if self.builds.timeout_secs == 0
            || self.builds.disk_mb < 1
            || self.builds.per_organization < 1
            || self.builds.at_once < 1
        {
            return Err(invalid(
                "builds.timeout_secs, builds.disk_mb, builds.per_organization and builds.at_once must be at least 1",
            ));
        }
        if !(1..=MAX_CONTEXT_MB).contains(&self.builds.context_mb)
            || !(1..=MAX_CONTEXT_MB as i64).contains(&self.builds.contexts_mb)
        {
            return Err(invalid(format!(
                "builds.context_mb and builds.contexts_mb must be between 1 and {MAX_CONTEXT_MB}"
            )));
        }
        if self.activity.max_entries < 1 || self.activity.max_mb < 1 {
            return Err(invalid(
                "activity.max_entries and activity.max_mb must be at least 1",
            ));
        }
        self.database()
            .map_err(|e| invalid(sandboxd_core::error::chain(&e)))?;
        Ok(Checked {
            master_key,
            quotas: self.quotas.checked().map_err(invalid)?,
            cookie_secure: self.cookie_secure.resolve().map_err(invalid)?,
            server_registration: self.servers.registration().map_err(invalid)?,
            server_networks: self.servers.allowed_networks().map_err(invalid)?,
            egress: self.egress.operator().map_err(invalid)?,
        })
    }

    fn check_addresses(&self) -> Result<(), ConfigError> {
        if let Some(url) = &self.advertise_url
            && !url.starts_with("http://")
        {
            return Err(invalid(format!(
                "advertise_url must be an http:// URL (replicas forward to each other in plain HTTP), not {url:?}"
            )));
        }
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid(format!(
                "public_url must be an http:// or https:// URL, not {url:?}"
            )));
        }
        if let Some(domain) = &self.preview_domain
            && !sandboxd_core::ports::valid_preview_domain(domain)
        {
            return Err(invalid(format!(
                "preview_domain must be a lower-case host name such as preview.example.com or localhost, not {domain:?}"
            )));
        }
        if let Some(domain) = &self.e2b_domain {
            if !sandboxd_core::e2b::host::valid_e2b_domain(domain) {
                return Err(invalid(format!(
                    "e2b_domain must be a lower-case host name such as e2b.example.com (with :port when its TLS proxy is not on 443), not {domain:?}"
                )));
            }
            if self.preview_domain.as_deref() == Some(sandboxd_core::e2b::host::domain_name(domain))
            {
                return Err(invalid(
                    "e2b_domain and preview_domain must differ: their hosts are named differently",
                ));
            }
        }
        Ok(())
    }

    /// `advertise_url` without a trailing `/`.
    pub fn advertise_url(&self) -> Option<String> {
        trimmed(self.advertise_url.as_deref())
    }

    /// `public_url` without a trailing `/`.
    pub fn public_url(&self) -> Option<String> {
        trimmed(self.public_url.as_deref())
    }

    pub fn reaper_interval(&self) -> Duration {
        seconds(self.reaper_interval_secs)
    }

    pub fn reconcile_interval(&self) -> Duration {
        seconds(self.reconcile_interval_secs)
    }

    pub fn session_max_lifetime(&self) -> Duration {
        Duration::from_secs(self.session_max_lifetime_secs)
    }

    pub fn lease_grace(&self) -> Duration {
        Duration::from_secs(self.lease_grace_secs)
    }

    pub fn agent_op_timeout(&self) -> Duration {
        Duration::from_secs(self.agent_op_timeout_secs)
    }

    pub fn max_transfer_bytes(&self) -> u64 {
        self.max_transfer_mb.saturating_mul(1024 * 1024)
    }

    /// The agent binary sandboxes get, when they get one.
    pub fn agent_binary(&self) -> Option<&std::path::Path> {
        self.agent_binary.as_deref().filter(|_| self.agent)
    }
}

fn trimmed(url: Option<&str>) -> Option<String> {
    url.map(|url| url.trim_end_matches('/').to_owned())
}

/// A checked number of seconds (finite, more than 0) as a duration.
fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::from_secs(1))
}

/// Decodes a master key given as 64 hex digits.
pub fn parse_master_key(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn master_keys_are_64_hex_digits() {
        let key = parse_master_key(&"0f".repeat(32)).unwrap();
        assert_eq!(key, [0x0f; 32]);
        assert!(parse_master_key("0f").is_none());
        assert!(parse_master_key(&"zz".repeat(32)).is_none());
        assert!(parse_master_key(&"é".repeat(32)).is_none());
    }

    #[test]
    fn the_defaults_pass_and_each_bad_key_is_named() {
        assert!(Config::default().check().is_ok());
        let bad = |change: fn(&mut Config), named: &str| {
            let mut config = Config::default();
            change(&mut config);
            let error = config.check().unwrap_err().to_string();
            assert!(error.contains(named), "{error} names {named}");
        };
        bad(|c| c.bootstrap_key = Some("short".into()), "bootstrap key");
        bad(|c| c.master_key = Some("0f".into()), "master key");
        bad(|c| c.max_transfer_mb = 0, "max_transfer_mb");
        bad(
            |c| c.reaper_interval_secs = f64::NAN,
            "reaper_interval_secs",
        );
        bad(
            |c| c.reconcile_interval_secs = -1.0,
            "reconcile_interval_secs",
        );
        bad(|c| c.lease_grace_secs = 0, "lease_grace_secs");
        bad(|c| c.agent_op_timeout_secs = 0, "agent_op_timeout_secs");
        bad(|c| c.builds.at_once = 0, "builds.at_once");
        bad(|c| c.activity.max_entries = 0, "activity.max_entries");
        bad(|c| c.activity.max_mb = 0, "activity.max_mb");
        bad(|c| c.builds.context_mb = 0, "builds.context_mb");
        bad(|c| c.builds.contexts_mb = 1 << 40, "builds.contexts_mb");
        bad(|c| c.builds.per_organization = 0, "builds.per_organization");
        bad(
            |c| c.quotas.running_sandboxes = 0,
            "quotas.running_sandboxes",
        );
        bad(
            |c| c.advertise_url = Some("https://x".into()),
            "advertise_url",
        );
        bad(|c| c.public_url = Some("x.example".into()), "public_url");
        bad(
            |c| c.preview_domain = Some("Bad Domain".into()),
            "preview_domain",
        );
        bad(
            |c| c.servers.registration = "everyone".into(),
            "servers.registration",
        );
        bad(
            |c| c.cookie_secure = super::super::CookieSecureSetting::Word("x".into()),
            "cookie_secure",
        );
        bad(|c| c.database_url = Some("mysql://x".into()), "postgres://");
    }

    #[test]
    fn half_a_second_is_a_reaper_interval() {
        let config = Config {
            reaper_interval_secs: 0.5,
            ..Config::default()
        };
        assert!(config.check().is_ok());
        assert_eq!(config.reaper_interval(), Duration::from_millis(500));
    }
}
