//! Persistence of sandboxd through sqlx's Any driver: one set of queries on two
//! backends, embedded SQLite (the default) and PostgreSQL (shared by replicas), each
//! with its migrations; the caches kept correct across replicas, the duties each replica
//! holds, and secrets at rest.
//!
//! `Store` (`store.rs`) is one type over one pool and one cache of rows; the queries of
//! each table are in a file of their own (`sandboxes.rs`, `keys.rs`, `volumes.rs`, …).
//! Every query is written once for both backends, with `$N` placeholders and types both
//! carry: TEXT ids, BIGINT milliseconds, BIGINT 0/1 booleans, BLOB or BYTEA secrets, and
//! sums cast to BIGINT or DOUBLE PRECISION. The backends differ only in how they connect
//! (`sqlite.rs`, `postgres.rs`, chosen by `database.rs`), migrate, serialize writes and
//! learn of other replicas' changes (`changes.rs`); both pass one story suite
//! (`tests/store_story.rs`). On PostgreSQL, `changes.rs`, `leases.rs` and `replicas.rs`
//! are what several replicas share; `docs/scale-out.md` tells how.
#![forbid(unsafe_code)]

mod activity;
mod audit;
mod auth_cache;
mod changes;
mod dashboard_sessions;
mod database;
mod e2b_builds;
mod e2b_ports;
mod e2b_tags;
mod egress_credentials;
mod egress_log;
mod egress_requests;
mod envd_tokens;
mod error;
mod ids;
mod keys;
mod leases;
mod members;
mod migrations;
mod ports;
mod postgres;
mod replicas;
mod row_cache;
mod rows;
mod sandboxes;
mod secrets;
mod servers;
mod session_tokens;
mod snapshots;
mod sqlite;
mod store;
mod survey;
mod template_builds;
mod template_contexts;
mod tenancy;
mod volumes;

pub use audit::{AuditPage, NewAuditEntry};
pub use changes::ServerChange;
pub use dashboard_sessions::{MAX_SESSIONS_PER_KEY, dashboard_csrf};
pub use database::{Backend, Database};
pub use e2b_builds::{E2B_BUILD_WAITS_MS, E2bBuild, MAX_E2B_FILES_BYTES};
pub use egress_requests::Asked;
pub use error::StoreError;
pub use ids::{new_id, new_sandbox_id, new_uuid};
pub use keys::{Bootstrap, KeySpec, NewKey};
pub use leases::Leases;
pub use members::AccessList;
pub use migrations::known_version;
pub use secrets::SecretBox;
pub use session_tokens::MAX_TOKENS_PER_ORG;
pub use store::{Store, now_ms};
pub use survey::{Survey, survey};
pub use template_contexts::{ContextContents, NewTemplateContext, TemplateContext};
