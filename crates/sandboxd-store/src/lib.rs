//! Persistence of sandboxd: SQLite through sqlx's Any driver (so PostgreSQL can be added
//! with its own migrations and the same queries), migrations, and secrets at rest.
#![forbid(unsafe_code)]

mod audit;
mod auth_cache;
mod error;
mod ids;
mod keys;
mod members;
mod row_cache;
mod rows;
mod sandboxes;
mod secrets;
mod servers;
mod store;
mod survey;
mod tenancy;

pub use audit::{AuditPage, NewAuditEntry};
pub use error::StoreError;
pub use ids::new_id;
pub use keys::{Bootstrap, NewKey};
pub use members::AccessList;
pub use secrets::SecretBox;
pub use store::{Store, now_ms};
pub use survey::{Survey, survey};
