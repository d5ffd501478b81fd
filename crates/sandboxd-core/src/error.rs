//! Validation errors: what was wrong with a request, field by field.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One problem with one field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Issue {
    /// The field, as named on the wire (`timeoutMs`, `env.FOO`).
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

/// A request that failed validation, with every issue found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", summary(.issues))]
pub struct Invalid {
    pub issues: Vec<Issue>,
}

fn summary(issues: &[Issue]) -> String {
    issues
        .iter()
        .map(|issue| format!("{}: {}", issue.path, issue.message))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Invalid {
    /// A validation error with a single issue.
    pub fn one(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            issues: vec![Issue {
                path: path.into(),
                message: message.into(),
            }],
        }
    }
}

/// Collects issues while a request is checked field by field.
#[derive(Debug, Default)]
pub struct Issues(Vec<Issue>);

impl Issues {
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(Issue {
            path: path.into(),
            message: message.into(),
        });
    }

    /// Records every issue of `invalid`.
    pub fn extend(&mut self, invalid: Invalid) {
        self.0.extend(invalid.issues);
    }

    /// `Ok(value)` when no issue was recorded.
    pub fn finish<T>(self, value: T) -> Result<T, Invalid> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(Invalid { issues: self.0 })
        }
    }
}

/// An error and its causes on one line, `outer: cause: cause…` (for logs, and for what
/// an administrator is told of a failed connection test).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
