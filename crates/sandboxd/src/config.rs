//! Reading the configuration with figment: defaults, then a TOML file, then `SANDBOXD_*` environment
//! variables (named after the keys, `sandboxd_server::config::env_name`), then the
//! flags (which the commands apply). The type is the server's own,
//! `sandboxd_server::Config`, handed to it whole.

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format as _, Serialized, Toml};
pub use sandboxd_server::Config;
use sandboxd_server::config::{ENV_NESTING, ENV_PREFIX};

/// Loads the configuration from the file (when given) and the environment.
pub fn load(file: Option<&Path>) -> Result<Config, Box<figment::Error>> {
    let mut figment = Figment::from(Serialized::defaults(Config::default()));
    if let Some(file) = file {
        figment = figment.merge(Toml::file_exact(file));
    }
    figment
        .merge(Env::prefixed(ENV_PREFIX).split(ENV_NESTING))
        .extract()
        .map_err(Box::new)
}

#[cfg(test)]
#[allow(clippy::result_large_err)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn pools_kept_for_demand_are_on_by_default_and_bounded_as_configured() {
        figment::Jail::expect_with(|jail| {
            let config = load(None).map_err(|e| e.to_string())?;
            assert_eq!(
                config.warm_on_demand.bounds(),
                sandboxd_core::pool_demand::DemandBounds::default()
            );
            jail.create_file(
                "sandboxd.toml",
                "[warm_on_demand]\nper_pool = 3\nwindow_secs = 10\n",
            )?;
            jail.set_env("SANDBOXD_WARM_ON_DEMAND__BUDGET", "0");
            let config = load(Some(Path::new("sandboxd.toml"))).map_err(|e| e.to_string())?;
            let bounds = config.warm_on_demand.bounds();
            assert_eq!(
                (bounds.budget, bounds.per_pool, bounds.window.as_secs()),
                (0, 3, 10)
            );
            assert!(bounds.is_off());
            Ok(())
        });
    }

    #[test]
    fn file_then_environment() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "sandboxd.toml",
                "listen = \"0.0.0.0:8080\"\n[templates.base]\nimage = \"local/base:1\"\n",
            )?;
            jail.set_env("SANDBOXD_DATA_DIR", "/var/lib/sandboxd");
            jail.set_env("SANDBOXD_BOOTSTRAP_KEY", "k".repeat(32));
            let config = load(Some(Path::new("sandboxd.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(config.listen, "0.0.0.0:8080");
            assert_eq!(config.data_dir, PathBuf::from("/var/lib/sandboxd"));
            assert_eq!(
                config.templates["base"].image.as_deref(),
                Some("local/base:1")
            );
            assert!(!format!("{config:?}").contains("kkkk"));
            Ok(())
        });
    }

    #[test]
    fn cookie_secure_is_true_false_or_auto() {
        use sandboxd_server::CookieSecure as C;
        figment::Jail::expect_with(|jail| {
            assert_eq!(
                load(None).map_err(|e| *e)?.cookie_secure.resolve(),
                Ok(C::Auto)
            );
            jail.create_file("a.toml", "cookie_secure = true\n")?;
            let config = load(Some(Path::new("a.toml"))).map_err(|e| e.to_string())?;
            assert_eq!(config.cookie_secure.resolve(), Ok(C::Always));
            jail.set_env("SANDBOXD_COOKIE_SECURE", "false");
            assert_eq!(
                load(None).map_err(|e| *e)?.cookie_secure.resolve(),
                Ok(C::Never)
            );
            jail.set_env("SANDBOXD_COOKIE_SECURE", "sometimes");
            assert!(load(None).map_err(|e| *e)?.cookie_secure.resolve().is_err());
            Ok(())
        });
    }

    #[test]
    fn servers_are_the_operators_and_public_unless_configured() {
        use sandboxd_core::access::ServerRegistration as R;
        figment::Jail::expect_with(|jail| {
            let servers = load(None).map_err(|e| *e)?.servers;
            let registration = servers.registration().map_err(figment::Error::from)?;
            let allowed = servers.allowed_networks().map_err(figment::Error::from)?;
            assert_eq!(registration, R::Operator);
            assert!(!allowed.permits("127.0.0.1".parse().unwrap()));
            jail.create_file(
                "s.toml",
                "[servers]\nregistration = \"admins\"\nallowed_networks = [\"127.0.0.0/8\"]\n",
            )?;
            let config = load(Some(Path::new("s.toml"))).map_err(|e| *e)?;
            let registration = config
                .servers
                .registration()
                .map_err(figment::Error::from)?;
            let allowed = config
                .servers
                .allowed_networks()
                .map_err(figment::Error::from)?;
            assert_eq!(registration, R::Admins);
            assert!(allowed.permits("127.0.0.1".parse().unwrap()));
            jail.set_env("SANDBOXD_SERVERS__REGISTRATION", "everyone");
            let config = load(Some(Path::new("s.toml"))).map_err(|e| *e)?;
            assert!(config.check().is_err());
            Ok(())
        });
    }

    #[test]
    fn egress_names_hosts_and_networks_in_a_table() {
        figment::Jail::expect_with(|jail| {
            let none = load(None).map_err(|e| *e)?.egress.operator();
            assert_eq!(none, Ok(sandboxd_core::egress::Operator::default()));
            jail.create_file(
                "e.toml",
                "[egress]\nallowed_networks = [\"127.0.0.2/32\"]\n[egress.hosts]\n\"allowed.test\" = \"127.0.0.2\"\n",
            )?;
            let config = load(Some(Path::new("e.toml"))).map_err(|e| *e)?;
            let operator = config.egress.operator().map_err(figment::Error::from)?;
            assert_eq!(operator.host("allowed.test"), "127.0.0.2".parse().ok());
            assert!(
                operator
                    .allowed_networks
                    .contains("127.0.0.2".parse().unwrap())
            );
            jail.create_file("bad.toml", "[egress.hosts]\n\"x.test\" = \"somewhere\"\n")?;
            let config = load(Some(Path::new("bad.toml"))).map_err(|e| *e)?;
            assert!(config.egress.operator().is_err());
            // In the environment, as docs/configuration.md shows it.
            jail.set_env("SANDBOXD_EGRESS__HOSTS", r#"{"pypi.internal"="10.0.0.7"}"#);
            jail.set_env("SANDBOXD_EGRESS__TRUSTED_CA", "/etc/sandboxd/egress-ca.pem");
            let config = load(None).map_err(|e| *e)?;
            let operator = config.egress.operator().map_err(figment::Error::from)?;
            assert_eq!(operator.host("pypi.internal"), "10.0.0.7".parse().ok());
            assert_eq!(
                config.egress.trusted_ca.as_deref(),
                Some(Path::new("/etc/sandboxd/egress-ca.pem"))
            );
            Ok(())
        });
    }

    #[test]
    fn defaults() {
        figment::Jail::expect_with(|_| {
            let config = load(None).map_err(|e| e.to_string())?;
            assert_eq!(config.listen, "127.0.0.1:3000");
            assert_eq!(config.data_dir, PathBuf::from("./sandboxd-data"));
            Ok(())
        });
    }

    /// Every key of the configuration is a row of the table in docs/configuration.md,
    /// with the environment variable derived from it, and every row names a key.
    #[test]
    fn the_documented_table_is_the_configuration() {
        let doc = include_str!("../../../docs/configuration.md");
        let keys = Config::keys();
        let mut documented = Vec::new();
        for row in doc.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let (named, env) = (cells[1], cells[2]);
            for key in named.split('`').skip(1).step_by(2) {
                // `templates.<name>.image` is a key of the table `templates`.
                let table = key.split(".<").next().unwrap_or(key);
                assert!(
                    keys.iter().any(|k| k == table),
                    "docs/configuration.md documents {key}, which is no key"
                );
                if !key.contains('<') {
                    let expected = sandboxd_server::config::env_name(key);
                    assert!(
                        env.contains(&expected),
                        "docs/configuration.md gives {key} the variable {env}, not {expected}"
                    );
                }
                documented.push(table.to_owned());
            }
        }
        for key in &keys {
            assert!(
                documented.contains(key),
                "docs/configuration.md has no row for {key} ({})",
                sandboxd_server::config::env_name(key)
            );
        }
    }
}
