//! The web dashboard: plain HTML, CSS and ES modules embedded in the binary, served at
//! `/` and `/ui/assets/…` under a strict Content-Security-Policy (this origin only, no
//! inline scripts or styles, no frames). The pages call the API with the session cookie
//! of `/ui/session`.
//!
//! The files are under `crates/sandboxd-server/dashboard/`, embedded with
//! `include_bytes!` and served with ETags: `app.js` the router, `api.js` the API with the
//! session's CSRF token, `dom.js` elements built from text nodes only, then one module
//! per page or panel (`projects.js`, `sandboxes.js`, `sandbox.js`, `usage.js`,
//! `terminal.js`, `processes.js`, `ports.js`, `egress.js`, `files.js`, `audit.js`,
//! `snapshots.js`, `volumes.js`, `access.js`); `vendor/` holds xterm.js with its license.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

/// What a page of the dashboard may load and where it may connect: this origin only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; \
    base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One embedded file: its name under `/ui/assets/`, content type and bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            bytes: include_bytes!(concat!("../dashboard/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

const ASSETS: &[Asset] = &[
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("projects.js", JS),
    asset!("ports.js", JS),
    asset!("egress.js", JS),
    asset!("sandboxes.js", JS),
    asset!("sandbox.js", JS),
    asset!("terminal.js", JS),
    asset!("files.js", JS),
    asset!("processes.js", JS),
    asset!("audit.js", JS),
    asset!("snapshots.js", JS),
    asset!("volumes.js", JS),
    asset!("templates.js", JS),
    asset!("access.js", JS),
    asset!("usage.js", JS),
    asset!("vendor/xterm.js", JS),
    asset!("vendor/xterm-addon-fit.js", JS),
    asset!("vendor/xterm.css", "text/css; charset=utf-8"),
    asset!("vendor/LICENSE-xterm.txt", "text/plain; charset=utf-8"),
];

const INDEX: &[u8] = include_bytes!("../dashboard/index.html");

/// The headers every dashboard response carries.
fn hardened(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// A strong validator of an asset: they change only with the binary.
fn etag(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

fn file(headers: &HeaderMap, content_type: &'static str, bytes: &'static [u8]) -> Response {
    let tag = etag(bytes);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == tag);
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, content_type)], bytes).into_response()
    };
    if let Ok(tag) = HeaderValue::from_str(&tag) {
        response.headers_mut().insert(header::ETAG, tag);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    hardened(response)
}

/// `GET /`: the dashboard's page.
pub async fn index(headers: HeaderMap) -> Response {
    file(&headers, "text/html; charset=utf-8", INDEX)
}

/// `GET /ui/assets/{*name}`.
pub async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|asset| asset.name == name) {
        Some(asset) => file(&headers, asset.content_type, asset.bytes),
        None => hardened(StatusCode::NOT_FOUND.into_response()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_pages_import_is_served() {
        for asset in ASSETS
            .iter()
            .filter(|a| a.name.ends_with(".js") && !a.name.starts_with("vendor/"))
        {
            let text = std::str::from_utf8(asset.bytes).unwrap_or_default();
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let Some(from) = line.split("from \"./").nth(1) else {
                    continue;
                };
                let name = from.trim_end_matches(['"', ';']);
                assert!(
                    ASSETS.iter().any(|a| a.name == name),
                    "{} imports {name}, which is not served",
                    asset.name
                );
            }
        }
        // Every file a page loads by its path (scripts, styles) is served.
        for asset in ASSETS.iter().filter(|a| !a.name.starts_with("vendor/")) {
            let text = std::str::from_utf8(asset.bytes).unwrap_or_default();
            for path in text.split("\"/ui/assets/").skip(1) {
                let name = path.split('"').next().unwrap_or_default();
                assert!(
                    ASSETS.iter().any(|a| a.name == name),
                    "{} loads {name}, which is not served",
                    asset.name
                );
            }
        }
        let index = std::str::from_utf8(INDEX).unwrap_or_default();
        assert!(!index.contains("<script>"), "no inline script");
        assert!(!index.contains("style="), "no inline style");
        assert!(!index.contains("http://") && !index.contains("https://"));
    }

    #[test]
    fn an_unchanged_file_is_not_sent_again() {
        let mut headers = HeaderMap::new();
        let first = file(&headers, JS, b"x");
        let tag = first.headers()[header::ETAG].clone();
        headers.insert(header::IF_NONE_MATCH, tag);
        assert_eq!(file(&headers, JS, b"x").status(), StatusCode::NOT_MODIFIED);
        assert_eq!(file(&headers, JS, b"y").status(), StatusCode::OK);
    }
}
