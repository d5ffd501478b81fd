//! The ports of a sandbox as they are reached from outside: the handle that names a
//! sandbox in a preview's address, what exposing a port records, and who may enter it.
//!
//! The handle is the sandbox's id in lower-case base32 (a DNS-safe name read in either
//! case). An `Exposure` makes a port reachable without a key until it expires, for the
//! key that exposed it, never past that key's expiry. `admit`: anyone may enter a public
//! port, a valid link admits its holder, else the caller's own access decides.
//! `host_name` is the one place a `Host` loses its port and one trailing dot.

use data_encoding::BASE32_DNSSEC;

/// Where previews are served on sandboxd's own listener.
pub const PREVIEW_PREFIX: &str = "/preview/";

/// The query parameter a signed link carries its token in.
pub const LINK_PARAM: &str = "sandboxd_link";

/// The cookie a signed link leaves in a browser, scoped to its preview.
pub const LINK_COOKIE: &str = "sandboxd_link";

/// Ports one sandbox may have exposed at once.
pub const MAX_EXPOSED_PORTS: usize = 32;

/// The name of a sandbox in a preview's address: its id in lower-case base32 (RFC 5155's
/// alphabet), so that it survives a browser lower-casing a host name and fits one DNS
/// label beside the port (`65535-` and 34 characters for a 21-character id).
pub fn handle_of(sandbox_id: &str) -> String {
    BASE32_DNSSEC.encode(sandbox_id.as_bytes())
}

/// The sandbox id a handle names, in either case; `None` for anything that is not the
/// handle of an id (ids are 1 to 128 printable ASCII characters without spaces).
pub fn sandbox_of(handle: &str) -> Option<String> {
    if handle.is_empty() || handle.len() > 205 {
        return None;
    }
    let bytes = BASE32_DNSSEC.decode(handle.as_bytes()).ok()?;
    let id = String::from_utf8(bytes).ok()?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_graphic())).then_some(id)
}

/// The path of a port's preview: `/preview/<handle>/<port>/`.
pub fn preview_path(sandbox_id: &str, port: u16) -> String {
    format!("{PREVIEW_PREFIX}{}/{port}/", handle_of(sandbox_id))
}

/// The host name of a port's preview on the operator's preview domain:
/// `<port>-<handle>.<domain>`, one DNS label before the domain.
pub fn preview_host(sandbox_id: &str, port: u16, domain: &str) -> String {
    format!("{port}-{}.{domain}", handle_of(sandbox_id))
}

/// A `Host` without its port, if it names one, and without one trailing dot (`a.b.` is
/// the fully qualified `a.b`: the same host, which must be routed as it is).
pub fn host_name(host: &str) -> &str {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    name.strip_suffix('.').unwrap_or(name)
}

/// What a host names before `.<domain>` (its port left out; the domain compared
/// without regard to case), if it lies under the domain.
pub fn name_below<'a>(host: &'a str, domain: &str) -> Option<&'a str> {
    let name = host_name(host);
    let cut = name.len().checked_sub(domain.len() + 1)?;
    let (label, rest) = (name.get(..cut)?, name.get(cut..)?);
    (!label.is_empty() && rest.starts_with('.') && rest[1..].eq_ignore_ascii_case(domain))
        .then_some(label)
}

/// Whether a `Host` lies under the preview domain (the domain itself does not).
pub fn under_domain(host: &str, domain: &str) -> bool {
    name_below(host, domain).is_some()
}

/// The sandbox and port a `Host` names on the preview domain (its port, if any, left
/// out; compared without regard to case), or `None` for any other host.
pub fn parse_preview_host(host: &str, domain: &str) -> Option<(String, u16)> {
    let label = name_below(host, domain).filter(|label| !label.contains('.'))?;
    let (port, handle) = label.split_once('-')?;
    let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
    Some((sandbox_of(handle)?, port))
}

/// Whether a preview domain is a host name (lower-case labels of letters, digits and
/// `-`), such as `preview.example.com` or `localhost`.
pub fn valid_preview_domain(domain: &str) -> bool {
    !domain.is_empty()
        && domain.len() <= 200
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// A port of a sandbox made reachable without a key: by anyone when `public`, else by
/// whoever holds its signed link, until `expires_at`. It acts for the key that exposed
/// it, as that key stands at each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    pub sandbox_id: String,
    pub port: u16,
    pub public: bool,
    /// Random, new at every exposure: a link of an earlier one is not valid for it.
    pub nonce: String,
    /// The key that exposed the port.
    pub key_id: String,
    pub created_at: i64,
    pub expires_at: i64,
}

impl Exposure {
    pub fn live(&self, now: i64) -> bool {
        now < self.expires_at
    }
}

/// When an exposure made now for `ttl_ms` ends: never after the key that makes it.
pub fn expires_at(now: i64, ttl_ms: i64, key_expires_at: Option<i64>) -> i64 {
    let wanted = now.saturating_add(ttl_ms);
    key_expires_at.map_or(wanted, |key| wanted.min(key))
}

/// What a request to a preview brings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// An API key or a dashboard session (checked by the caller's own access).
    Caller,
    /// A signed link's token, from the query or the link's cookie; `valid` is whether it
    /// is the token of the port's live exposure.
    Link { valid: bool },
    /// Nothing.
    Nothing,
}

/// How a request enters a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// With the caller's own access to the sandbox.
    AsCaller,
    /// As the key that exposed the port (a public port or a valid link).
    AsExposer,
}

/// Why a request may not enter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Kept {
    #[error("this preview link has expired or was revoked")]
    StaleLink,
    #[error("a preview needs an API key, a dashboard session or a signed link")]
    NoCredential,
}

/// Who may enter a port: anyone when it is exposed publicly (whatever they bring), else
/// a valid link, else a caller with their own access; a link that is not valid (expired,
/// revoked, for another exposure) is refused even if the port is private and a key
/// would do.
pub fn admit(live_public: bool, credential: &Credential) -> Result<Entry, Kept> {
    match credential {
        _ if live_public => Ok(Entry::AsExposer),
        Credential::Link { valid: true } => Ok(Entry::AsExposer),
        Credential::Link { valid: false } => Err(Kept::StaleLink),
        Credential::Caller => Ok(Entry::AsCaller),
        Credential::Nothing => Err(Kept::NoCredential),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_is_a_lower_case_dns_label_read_back_in_any_case() {
        let id = "Ab3xZ0qPLmN7rsTUvW9yK";
        let handle = handle_of(id);
        assert_eq!(handle.len(), 34);
        assert!(
            handle
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
        );
        assert!(format!("65535-{handle}").len() <= 63);
        assert_eq!(sandbox_of(&handle).as_deref(), Some(id));
        assert_eq!(
            sandbox_of(&handle.to_ascii_uppercase()).as_deref(),
            Some(id)
        );
        assert_eq!(preview_path(id, 8000), format!("/preview/{handle}/8000/"));
    }

    #[test]
    fn a_preview_host_names_its_sandbox_and_port_and_nothing_else_does() {
        let id = "Ab3xZ0qPLmN7rsTUvW9yK";
        let host = preview_host(id, 8000, "preview.example.com");
        assert_eq!(
            parse_preview_host(&host, "preview.example.com"),
            Some((id.to_owned(), 8000))
        );
        let upper = format!("{}:3000", host.to_ascii_uppercase());
        assert_eq!(
            parse_preview_host(&upper, "preview.example.com"),
            Some((id.to_owned(), 8000))
        );
        // One trailing dot is the same host; two are no host.
        for dotted in [
            format!("{host}."),
            format!("{}.:3000", host.to_ascii_uppercase()),
        ] {
            assert_eq!(
                parse_preview_host(&dotted, "preview.example.com"),
                Some((id.to_owned(), 8000)),
                "{dotted}"
            );
        }
        assert!(under_domain(
            "a.preview.example.com.",
            "preview.example.com"
        ));
        assert!(!under_domain("preview.example.com.", "preview.example.com"));
        let handle = handle_of(id);
        for other in [
            format!("{host}.."),
            "preview.example.com".to_owned(),
            "example.com".to_owned(),
            format!("8000-{handle}.other.com"),
            format!("8000-{handle}.xpreview.example.com"),
            format!("a.8000-{handle}.preview.example.com"),
            format!("0-{handle}.preview.example.com"),
            format!("x-{handle}.preview.example.com"),
            "8000-nothandle.preview.example.com".to_owned(),
            "127.0.0.1:3000".to_owned(),
            String::new(),
        ] {
            assert_eq!(
                parse_preview_host(&other, "preview.example.com"),
                None,
                "{other}"
            );
        }
        assert!(under_domain(
            "a.b.preview.example.com:80",
            "preview.example.com"
        ));
        assert!(!under_domain(
            "preview.example.com:80",
            "preview.example.com"
        ));
        assert!(!under_domain("xpreview.example.com", "preview.example.com"));
        assert!(valid_preview_domain("localhost") && valid_preview_domain("p.example.com"));
        for bad in [
            "",
            "Example.com",
            "a..b",
            ".a",
            "a.",
            "-a.com",
            "a_b.com",
            "*.a.com",
        ] {
            assert!(!valid_preview_domain(bad), "{bad}");
        }
    }

    #[test]
    fn what_is_not_a_handle_names_no_sandbox() {
        for bad in ["", "not-base32!", "w", &"0".repeat(300), &handle_of("a b")] {
            assert_eq!(sandbox_of(bad), None, "{bad:?}");
        }
        // The raw id is not its own handle.
        assert_ne!(
            sandbox_of("Ab3xZ0qPLmN7rsTUvW9yK").as_deref(),
            Some("Ab3xZ0qPLmN7rsTUvW9yK")
        );
    }

    #[test]
    fn an_exposure_ends_no_later_than_the_key_that_made_it() {
        assert_eq!(expires_at(1_000, 500, None), 1_500);
        assert_eq!(expires_at(1_000, 500, Some(1_200)), 1_200);
        assert_eq!(expires_at(i64::MAX - 1, 500, None), i64::MAX);
    }

    #[test]
    fn public_ports_admit_anyone_links_must_be_valid_and_callers_use_their_own_access() {
        assert_eq!(admit(true, &Credential::Nothing), Ok(Entry::AsExposer));
        assert_eq!(
            admit(true, &Credential::Link { valid: false }),
            Ok(Entry::AsExposer)
        );
        assert_eq!(
            admit(false, &Credential::Link { valid: true }),
            Ok(Entry::AsExposer)
        );
        assert_eq!(
            admit(false, &Credential::Link { valid: false }),
            Err(Kept::StaleLink)
        );
        assert_eq!(admit(false, &Credential::Caller), Ok(Entry::AsCaller));
        assert_eq!(admit(false, &Credential::Nothing), Err(Kept::NoCredential));
    }
}
