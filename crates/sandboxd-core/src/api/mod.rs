//! The wire format of the REST API: request and response bodies, camelCase as in the
//! reference API. Validation of requests lives in [`crate::validate`].
//!
//! The types carry `utoipa` schemas, so the OpenAPI document is derived from the types
//! the handlers use (`requests.rs`, `responses.rs`, and one module per resource).

mod access;
mod activity;
mod changes;
mod contexts;
pub mod definition;
mod egress_log;
mod egress_requests;
mod file_json;
mod pages;
mod ports;
pub mod procedures;
mod processes;
mod requests;
mod responses;
mod row;
mod servers;
mod snapshots;
pub mod stream;
mod templates;
mod usage;
mod volumes;
pub mod watch;

pub use access::*;
pub use activity::*;
pub use changes::*;
pub use contexts::*;
pub use egress_log::*;
pub use egress_requests::*;
pub use pages::*;
pub use ports::*;
pub use processes::*;
pub use requests::*;
pub use responses::*;
pub use servers::*;
pub use snapshots::*;
pub use templates::*;
pub use usage::*;
pub use volumes::*;

/// What an MCP client is told about sandboxd's tools (the HTTP endpoint and `sandboxd mcp`).
pub const MCP_INSTRUCTIONS: &str = "sandboxd runs isolated Linux sandboxes. Create one with sandbox-create, run \
commands with sandbox-exec, move files with sandbox-writeFile and sandbox-readFile, and kill it with \
sandbox-kill when done. Long output is not cut: a reply with `more` holds the rest, read it with \
sandbox-outputPage.";

#[cfg(test)]
mod schema_limits;
