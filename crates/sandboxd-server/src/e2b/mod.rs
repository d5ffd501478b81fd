//! E2B's API on sandboxd's listener, so that code written for E2B's SDKs runs here by
//! changing its settings: the control plane under `/e2b` (`control`) and the
//! in-sandbox daemon ("envd") under `/e2b/envd` (`envd`), and the template builder
//! (`templates`); a sandbox's other ports on the E2B domain (`ports`). The wire format
//! and its mapping are `sandboxd_core::e2b`'s.

mod calls;
mod control;
pub(crate) mod envd;
pub mod hosts;
mod lifecycle;
mod network;
pub(crate) mod ports;
pub(crate) mod templates;

use axum::Router;

use crate::AppState;

pub(crate) use envd::admitted;

/// Both halves.
pub fn router() -> Router<AppState> {
    control::router()
        .merge(lifecycle::router())
        .merge(network::router())
        .merge(templates::router())
        .merge(envd::router())
        .route("/e2b", axum::routing::any(hosts::unknown_path))
        .route("/e2b/{*rest}", axum::routing::any(hosts::unknown_path))
}
