//! Credentials that never enter the sandbox: a header sandboxd adds to the requests a
//! program sends to one host through the proxy, in plain HTTP, while sandboxd speaks
//! HTTPS to the host. What a credential may be, and how one is checked.
//!
//! An `EgressCredential` is a host, a header and a value; its `Debug` never shows the
//! value. `check`: an exact host the sandbox's list allows on 443, a request header, a
//! plain value.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::egress::Policy;

/// Credentials one sandbox may have, at most.
pub const MAX_CREDENTIALS: usize = 16;
/// The longest value, in bytes.
pub const MAX_VALUE: usize = 8192;

/// Headers sandboxd never sets for a program: they describe the connection or the
/// message framing, not the request.
const RESERVED: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// One credential. Its value is a secret: `Debug` never shows it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressCredential {
    /// The exact host name (lower case) whose requests get the header.
    pub host: String,
    /// The header's name, lower case.
    pub header: String,
    pub value: String,
}

impl fmt::Debug for EgressCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressCredential")
            .field("host", &self.host)
            .field("header", &self.header)
            .field("value", &"<sealed>")
            .finish()
    }
}

/// Checks one credential against the sandbox's list (`policy`): an exact host name the
/// list allows on 443 (where sandboxd takes its requests), a header name that is a
/// token and not one of the connection's, a value of visible characters, spaces and
/// tabs. The problems, each as a sentence.
pub fn check(
    host: &str,
    header: &str,
    value: &str,
    policy: &Policy,
) -> Result<EgressCredential, Vec<String>> {
    let mut problems = Vec::new();
    let host = match crate::egress::name_of(host) {
        Ok(name) if host.contains('*') || host.contains(':') => {
            problems.push(format!(
                "host {name:?}: an exact host name, without `*.` or a port"
            ));
            name
        }
        Ok(name) => {
            if !policy.permits(&name, 443) {
                problems.push(format!(
                    "host {name:?} is not in the sandbox's egress list on port 443"
                ));
            }
            name
        }
        Err(why) => {
            problems.push(format!("host {host:?}: {why}"));
            String::new()
        }
    };
    let header = header.to_ascii_lowercase();
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if header.is_empty() || header.len() > 128 || !header.bytes().all(token) {
        problems.push(format!("header {header:?}: not a header name"));
    } else if RESERVED.contains(&header.as_str()) {
        problems.push(format!(
            "header {header:?}: describes the connection, not the request"
        ));
    }
    if value.is_empty() || value.len() > MAX_VALUE {
        problems.push(format!("value: 1 to {MAX_VALUE} bytes"));
    } else if !value
        .bytes()
        .all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
    {
        problems.push("value: visible characters, spaces and tabs only".to_owned());
    }
    if problems.is_empty() {
        Ok(EgressCredential {
            host,
            header,
            value: value.to_owned(),
        })
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::parse(&["api.example.com", "*.example.org", "plain.example.com:80"]).unwrap()
    }

    #[test]
    fn a_credential_names_an_allowed_host_a_request_header_and_a_plain_value() {
        let made = check("API.example.com", "Authorization", "Bearer abc", &policy()).unwrap();
        assert_eq!(
            (made.host.as_str(), made.header.as_str()),
            ("api.example.com", "authorization")
        );
        assert!(
            check("x.example.org", "x-api-key", "k", &policy()).is_ok(),
            "a wildcard covers it"
        );
        for (host, header, value) in [
            ("other.example.com", "authorization", "v"),
            ("plain.example.com", "authorization", "v"),
            ("*.example.org", "authorization", "v"),
            ("api.example.com:443", "authorization", "v"),
            ("10.0.0.1", "authorization", "v"),
            ("api.example.com", "Host", "v"),
            ("api.example.com", "Transfer-Encoding", "v"),
            ("api.example.com", "bad header", "v"),
            ("api.example.com", "authorization", "line\r\nInjected: yes"),
            ("api.example.com", "authorization", ""),
        ] {
            assert!(
                check(host, header, value, &policy()).is_err(),
                "{host} {header} {value:?}"
            );
        }
        assert!(
            check(
                "api.example.com",
                "a",
                &"v".repeat(MAX_VALUE + 1),
                &policy()
            )
            .is_err()
        );
    }

    #[test]
    fn the_value_never_shows_in_debug() {
        let made = check(
            "api.example.com",
            "authorization",
            "Bearer s3cret",
            &policy(),
        )
        .unwrap();
        assert!(!format!("{made:?}").contains("s3cret"));
    }
}
