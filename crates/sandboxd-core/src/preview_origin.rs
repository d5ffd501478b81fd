//! Whether a request a preview link's cookie admits comes from the preview's own pages.
//! A browser sends the cookie whoever made the request, so a WebSocket or a request
//! that changes something (not `GET`, `HEAD`, `OPTIONS`) is served on the cookie only
//! from the preview's own origin: another site, or another preview of the same domain
//! (all are one site), cannot drive the app in the victim's name.
//!
//! `needs_own_origin` (an upgrade, or a method that may change something) and
//! `from_own_origin` (that preview host alone on a preview domain; sandboxd's own origin
//! for a preview under a path).

use crate::ports::{host_name, parse_preview_host};

/// Where the preview is served.
#[derive(Debug, Clone, Copy)]
pub enum Served<'a> {
    /// Under a path of sandboxd's own address: its origin is the host the request was
    /// sent to (`X-Forwarded-Host` when a proxy passed it on, else `Host`).
    Path { host: Option<&'a str> },
    /// On a host of its own under the preview domain.
    Host {
        domain: &'a str,
        sandbox_id: &'a str,
        port: u16,
    },
}

/// Whether a request needs its origin checked: it opens a WebSocket, or its method may
/// change something.
pub fn needs_own_origin(method: &str, upgrade: bool) -> bool {
    upgrade || !matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// Whether a request whose `Origin` is `origin` (and `Sec-Fetch-Site` is `fetch_site`)
/// comes from the preview's own origin; `tls`: the preview is served over TLS, so an
/// `http` origin is another. Without `Origin`, only a browser's word that the request
/// is same-origin counts (`null` is no origin: a sandboxed page's or a redirect's).
pub fn from_own_origin(
    origin: Option<&str>,
    fetch_site: Option<&str>,
    served: Served<'_>,
    tls: bool,
) -> bool {
    let Some(origin) = origin.map(str::trim) else {
        return fetch_site.is_some_and(|site| site.eq_ignore_ascii_case("same-origin"));
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let scheme_ok =
        scheme.eq_ignore_ascii_case("https") || (!tls && scheme.eq_ignore_ascii_case("http"));
    if !scheme_ok || authority.contains(['/', '@']) {
        return false;
    }
    match served {
        Served::Path { host } => host.is_some_and(|host| {
            host_name(host).eq_ignore_ascii_case(host_name(authority))
                && port_of(host) == port_of(authority)
        }),
        Served::Host {
            domain,
            sandbox_id,
            port,
        } => parse_preview_host(authority, domain)
            .is_some_and(|(id, p)| id == sandbox_id && p == port),
    }
}

/// The port an authority names, if any.
fn port_of(authority: &str) -> Option<&str> {
    authority
        .rsplit_once(':')
        .map(|(_, port)| port)
        .filter(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::preview_host;

    #[test]
    fn only_changes_and_websockets_are_checked() {
        assert!(!needs_own_origin("GET", false));
        assert!(!needs_own_origin("HEAD", false));
        assert!(!needs_own_origin("OPTIONS", false));
        assert!(needs_own_origin("GET", true));
        for method in ["POST", "PUT", "PATCH", "DELETE", "PROPFIND"] {
            assert!(needs_own_origin(method, false), "{method}");
        }
    }

    #[test]
    fn under_a_path_the_origin_is_sandboxds_own() {
        let served = Served::Path {
            host: Some("sandboxd.example:8080"),
        };
        assert!(from_own_origin(
            Some("http://sandboxd.example:8080"),
            None,
            served,
            false
        ));
        assert!(from_own_origin(
            Some("https://SANDBOXD.example.:8080"),
            None,
            served,
            true
        ));
        for other in [
            "https://evil.example",
            "http://sandboxd.example",
            "http://sandboxd.example:8081",
            "http://sandboxd.example.evil.example:8080",
            "null",
            "sandboxd.example:8080",
        ] {
            assert!(
                !from_own_origin(Some(other), None, served, false),
                "{other}"
            );
        }
        assert!(!from_own_origin(
            Some("http://sandboxd.example:8080"),
            None,
            served,
            true
        ));
        assert!(!from_own_origin(None, None, served, false));
        assert!(!from_own_origin(None, Some("cross-site"), served, false));
        assert!(from_own_origin(None, Some("same-origin"), served, false));
        // An empty `Origin` is there, and names nothing.
        assert!(!from_own_origin(
            Some(""),
            Some("same-origin"),
            served,
            false
        ));
        let nowhere = Served::Path { host: None };
        assert!(!from_own_origin(
            Some("http://sandboxd.example:8080"),
            None,
            nowhere,
            false
        ));
    }

    #[test]
    fn on_a_preview_domain_the_origin_is_that_previews_host_alone() {
        let id = "Ab3xZ0qPLmN7rsTUvW9yK";
        let host = preview_host(id, 8000, "preview.example.com");
        let served = Served::Host {
            domain: "preview.example.com",
            sandbox_id: id,
            port: 8000,
        };
        assert!(from_own_origin(
            Some(&format!("https://{host}")),
            None,
            served,
            true
        ));
        assert!(from_own_origin(
            Some(&format!("http://{host}:3000")),
            None,
            served,
            false
        ));
        let another_port = preview_host(id, 9000, "preview.example.com");
        let another_sandbox = preview_host("Zz3xZ0qPLmN7rsTUvW9yK", 8000, "preview.example.com");
        for other in [
            format!("https://{another_port}"),
            format!("https://{another_sandbox}"),
            "https://preview.example.com".to_owned(),
            "https://evil.example".to_owned(),
            format!("http://{host}"),
            "null".to_owned(),
        ] {
            assert!(
                !from_own_origin(Some(&other), None, served, true),
                "{other}"
            );
        }
    }
}
