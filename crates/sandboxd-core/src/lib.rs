//! The pure core of sandboxd: domain types, request validation, the container hardening
//! policy as plain data, and the planners the background loops execute. No I/O lives here.
#![forbid(unsafe_code)]

pub mod access;
pub mod api;
pub mod changes;
pub mod e2b;
pub mod egress;
pub mod egress_credentials;
pub mod egress_log;
pub mod egress_own;
pub mod egress_requests;
pub mod embedded_v4;
pub mod env_vars;
pub mod error;
pub mod exec_kill;
pub mod images;
pub mod isolation_floor;
pub mod labels;
pub mod limits;
pub mod listing;
pub mod model;
pub mod networks;
pub mod oom;
pub mod paging;
pub mod paths;
pub mod permissions;
pub mod placement;
pub mod plan;
pub mod pool_demand;
pub mod pools;
pub mod ports;
pub mod prepared_images;
pub mod preview_origin;
pub mod quotas;
pub mod reap;
pub mod reconcile;
pub mod rfc3339;
pub mod snapshots;
pub mod template_build;
pub mod templates;
pub mod transfer;
pub mod usage;
pub mod usage_history;
pub mod utf8_stream;
pub mod validate;
pub mod volumes;
