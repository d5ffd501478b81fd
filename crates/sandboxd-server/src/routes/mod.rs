//! HTTP routes, grouped by resource.
//!
//! The handlers that are not a procedure's `Serve` function: the seven handwritten
//! procedures (`sandbox.rs`: `sandbox.readFile`; `transfers.rs`: upload and download;
//! `build_context.rs`: `template.context`, a build context streamed as a tar;
//! `health.rs`: `/health` and `/ready`; `build_log_stream.rs`: a build's log as
//! server-sent events), the WebSockets (`exec_stream.rs`, `terminal.rs`,
//! `port_socket.rs`, `watch_stream.rs`, with `session.rs`) and the dashboard's session (`sign_in.rs`).
//! Previews are a module of their own (`crate::previews`).

pub mod build_context;
pub mod build_log_stream;
pub mod exec_stream;
pub mod health;
pub mod port_socket;
pub mod sandbox;
pub mod session;
pub mod sign_in;
pub mod terminal;
pub mod transfers;
pub mod watch_stream;
