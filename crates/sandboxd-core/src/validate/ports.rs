//! Checks of `sandbox.exposePort` and `sandbox.unexposePort`.

use crate::api::{ExposePortRequest, PortRequest};
use crate::error::{Invalid, Issues};
use crate::limits::*;

use super::required_id;

/// A checked `sandbox.exposePort`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExposePort {
    pub sandbox_id: String,
    pub port: u16,
    pub public: bool,
    pub ttl_ms: i64,
}

fn port_of(issues: &mut Issues, port: i64) -> u16 {
    match u16::try_from(port) {
        Ok(port) if port > 0 => port,
        _ => {
            issues.push("port", "must be between 1 and 65535");
            0
        }
    }
}

/// Checks `sandbox.exposePort`.
pub fn expose_port(req: ExposePortRequest) -> Result<ExposePort, Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let port = port_of(&mut issues, req.port);
    let ttl = req.ttl_seconds.unwrap_or(DEFAULT_EXPOSE_TTL_SECONDS);
    if !(MIN_EXPOSE_TTL_SECONDS..=MAX_EXPOSE_TTL_SECONDS).contains(&ttl) {
        issues.push("ttlSeconds", "must be between 1 and 604800 (7 days)");
    }
    issues.finish(ExposePort {
        sandbox_id: req.sandbox_id,
        port,
        public: req.public,
        ttl_ms: i64::try_from(ttl.saturating_mul(1000)).unwrap_or(i64::MAX),
    })
}

/// Checks `sandbox.unexposePort`; the sandbox id and the port.
pub fn unexpose_port(req: PortRequest) -> Result<(String, u16), Invalid> {
    let mut issues = Issues::default();
    required_id(&mut issues, "sandboxId", &req.sandbox_id);
    let port = port_of(&mut issues, req.port);
    issues.finish((req.sandbox_id, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_and_a_lifetime_in_bounds_with_an_hour_by_default() {
        let ok = expose_port(ExposePortRequest {
            sandbox_id: "s".into(),
            port: 8000,
            public: false,
            ttl_seconds: None,
        })
        .unwrap();
        assert_eq!((ok.port, ok.ttl_ms, ok.public), (8000, 3_600_000, false));
        let bad = expose_port(ExposePortRequest {
            sandbox_id: String::new(),
            port: 70_000,
            public: true,
            ttl_seconds: Some(0),
        })
        .unwrap_err();
        let fields: Vec<_> = bad.issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(fields, ["sandboxId", "port", "ttlSeconds"]);
        for port in [0, -1, 65_536] {
            assert!(
                unexpose_port(PortRequest {
                    sandbox_id: "s".into(),
                    port
                })
                .is_err()
            );
        }
    }
}
