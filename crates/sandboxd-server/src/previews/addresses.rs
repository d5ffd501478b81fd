//! The addresses of previews: where a port's preview is reached from outside, as the
//! answers of `sandbox.exposePort` and `sandbox.ports` give it: a host of its own on the
//! operator's preview domain (`http://8000-<handle>.<domain>/`), else a path on
//! sandboxd's own address (`/preview/<handle>/8000/`).
//!
//! The address is made on `public_url`, else on the address the request was sent to.

use axum::http::{HeaderMap, header};
use sandboxd_core::api::ExposedPortView;
use sandboxd_core::ports::{LINK_PARAM, preview_host, preview_path};

use crate::service::Exposed;
use crate::time::rfc3339;

/// How previews are addressed.
#[derive(Debug, Clone, Default)]
pub struct PreviewSettings {
    /// The address users reach sandboxd at (`https://sandboxd.example.com`); when
    /// unset, the address the request itself was sent to.
    pub public_url: Option<String>,
    /// The domain whose hosts serve previews, one per port (`preview.example.com`, a
    /// wildcard DNS name; `localhost` on one machine); path-based previews when unset.
    pub domain: Option<String>,
}

impl PreviewSettings {
    /// The base of every preview address: the operator's, else the one the request
    /// names (`X-Forwarded-Proto` and `X-Forwarded-Host`, which a proxy in front sets,
    /// else `Host`); only the caller who asked is given it.
    pub(crate) fn base(&self, headers: &HeaderMap) -> String {
        if let Some(url) = &self.public_url {
            return url.trim_end_matches('/').to_owned();
        }
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let host = text("x-forwarded-host")
            .or_else(|| text(header::HOST.as_str()))
            .filter(|host| {
                !host.is_empty()
                    && host
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
            });
        let scheme = match text("x-forwarded-proto") {
            Some(proto) if proto.eq_ignore_ascii_case("https") => "https",
            _ => "http",
        };
        host.map_or_else(String::new, |host| format!("{scheme}://{host}"))
    }

    /// The address of a port's preview, without a link.
    pub fn address(&self, headers: &HeaderMap, sandbox_id: &str, port: u16) -> String {
        let base = self.base(headers);
        let Some(domain) = &self.domain else {
            return format!("{base}{}", preview_path(sandbox_id, port));
        };
        let (scheme, authority) = base.split_once("://").unwrap_or(("http", ""));
        // The port sandboxd is reached on, if the base names one.
        let listen_port = authority
            .rsplit_once(':')
            .filter(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .map_or(String::new(), |(_, p)| format!(":{p}"));
        format!(
            "{scheme}://{}{listen_port}/",
            preview_host(sandbox_id, port, domain)
        )
    }

    /// An exposed port as the API shows it, its URL with the link's token for a private
    /// one.
    pub fn view(&self, headers: &HeaderMap, exposed: &Exposed) -> ExposedPortView {
        let e = &exposed.exposure;
        let mut url = self.address(headers, &e.sandbox_id, e.port);
        if let Some(token) = &exposed.link {
            url.push_str(&format!("?{LINK_PARAM}={token}"));
        }
        ExposedPortView {
            port: e.port,
            public: e.public,
            url,
            expires_at: rfc3339(e.expires_at),
            created_at: rfc3339(e.created_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use sandboxd_core::ports::{Exposure, handle_of};

    fn exposed(public: bool) -> Exposed {
        Exposed {
            exposure: Exposure {
                sandbox_id: "Abc".into(),
                port: 8000,
                public,
                nonce: "n".into(),
                key_id: "k".into(),
                created_at: 0,
                expires_at: 1_000,
            },
            link: (!public).then(|| "t0ken".to_owned()),
        }
    }

    #[test]
    fn urls_are_built_on_the_operators_address_or_the_requests() {
        let handle = handle_of("Abc");
        let settings = PreviewSettings {
            public_url: Some("https://sb.example.com/".into()),
            domain: None,
        };
        assert_eq!(
            settings.view(&HeaderMap::new(), &exposed(false)).url,
            format!("https://sb.example.com/preview/{handle}/8000/?sandboxd_link=t0ken")
        );
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:3000"));
        let view = PreviewSettings::default().view(&headers, &exposed(true));
        assert_eq!(
            view.url,
            format!("http://127.0.0.1:3000/preview/{handle}/8000/")
        );
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        headers.insert("x-forwarded-host", HeaderValue::from_static("evil\"<x>"));
        let view = PreviewSettings::default().view(&headers, &exposed(true));
        assert_eq!(
            view.url,
            format!("/preview/{handle}/8000/"),
            "a host that is not one is not used"
        );
    }

    #[test]
    fn on_a_preview_domain_each_port_has_a_host_of_its_own() {
        let handle = handle_of("Abc");
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:3000"));
        let local = PreviewSettings {
            public_url: None,
            domain: Some("localhost".into()),
        };
        assert_eq!(
            local.view(&headers, &exposed(false)).url,
            format!("http://8000-{handle}.localhost:3000/?sandboxd_link=t0ken")
        );
        let behind_tls = PreviewSettings {
            public_url: Some("https://sandboxd.example.com".into()),
            domain: Some("preview.example.com".into()),
        };
        assert_eq!(
            behind_tls.view(&headers, &exposed(true)).url,
            format!("https://8000-{handle}.preview.example.com/")
        );
    }
}
