//! A client of sandboxd's REST API. Every call goes by the procedure table
//! (`sandboxd_core::api::procedures`: its method and path), with the key in
//! `x-api-key`; requests and answers are `sandboxd_core::api`'s types, and a refusal is
//! a typed [`Error`] keeping the status, the message, the issues and the body. The CLI,
//! the benchmark and the test suites use it; `Client::raw_post` and `Client::raw_get` are
//! there for tests that send what a client never would, and return the status and body.

mod changes;
mod client;
mod error;
mod ports;
mod sandboxes;
mod snapshots;
mod volumes;

pub use client::Client;
pub use error::{Error, Refusal};
