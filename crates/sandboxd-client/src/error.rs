//! How a call failed: no answer, a refusal by the server, or an answer that is not
//! what the procedure returns.
//!
//! A redirect is never followed, so the key never travels on. A refusal is a `Refusal`:
//! status, message, issues and the body.

use serde_json::Value;

/// The server's refusal of a call: its status and error body.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub status: u16,
    /// `message` of the error body; the status' reason when the body has none.
    pub message: String,
    /// `issues` of the error body: the field and what is wrong with it.
    pub issues: Vec<(String, String)>,
    /// The whole error body (`null` when it was not JSON).
    pub body: Value,
}

impl Refusal {
    pub(crate) fn from_body(status: reqwest::StatusCode, body: Value) -> Self {
        let message = body["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| status.to_string());
        let issues = body["issues"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|issue| {
                Some((
                    issue["path"].as_str()?.to_owned(),
                    issue["message"].as_str()?.to_owned(),
                ))
            })
            .collect();
        Self {
            status: status.as_u16(),
            message,
            issues,
            body,
        }
    }

    /// The message with the issues it does not already say.
    pub fn explained(&self) -> String {
        let issues: Vec<String> = self
            .issues
            .iter()
            .map(|(path, message)| format!("{path}: {message}"))
            // The message often is the first issue already.
            .filter(|issue| !self.message.contains(issue.as_str()))
            .collect();
        if issues.is_empty() {
            self.message.clone()
        } else {
            format!("{} ({})", self.message, issues.join("; "))
        }
    }
}

/// Why a call did not return what its procedure returns.
#[derive(Debug)]
pub enum Error {
    /// No answer: the server is not reachable, or the connection failed.
    Unreachable(reqwest::Error),
    /// The server answered with a redirect, which is not followed (the key would go to
    /// another address).
    Redirected { status: u16, location: String },
    /// The server refused the call.
    Refused(Refusal),
    /// The answer was not the procedure's response.
    Undecodable(String),
    /// No procedure of that name in the table.
    UnknownProcedure(String),
}

impl Error {
    /// The refusal, when the server refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }

    /// The status the server answered with, when it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Refused(refusal) => Some(refusal.status),
            Self::Redirected { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreachable(error) => write!(f, "no answer: {error}"),
            Self::Redirected { status, location } => {
                write!(f, "redirected ({status}) to {location}")
            }
            Self::Refused(refusal) => write!(f, "{} ({})", refusal.explained(), refusal.status),
            Self::Undecodable(why) => write!(f, "unexpected answer: {why}"),
            Self::UnknownProcedure(name) => write!(f, "no procedure {name}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Unreachable(error) => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_issue_already_in_the_message_is_not_said_twice() {
        let refusal = Refusal::from_body(
            reqwest::StatusCode::BAD_REQUEST,
            json!({
                "message": "timeoutMs: must be at least 10 s",
                "issues": [
                    {"path": "timeoutMs", "message": "must be at least 10 s"},
                    {"path": "cpu", "message": "must be at most 64"},
                ],
            }),
        );
        assert_eq!(refusal.status, 400);
        assert_eq!(
            refusal.explained(),
            "timeoutMs: must be at least 10 s (cpu: must be at most 64)"
        );
    }

    #[test]
    fn a_body_without_a_message_says_the_status() {
        let refusal = Refusal::from_body(reqwest::StatusCode::BAD_GATEWAY, Value::Null);
        assert_eq!(refusal.message, "502 Bad Gateway");
        assert!(refusal.issues.is_empty());
    }
}
