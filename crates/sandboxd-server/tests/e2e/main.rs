//! End-to-end tests: the real server over HTTP, on the real Docker engine, with SQLite.
//! They need the local test images (scripts/build-local-images.sh) and fail loudly
//! without an engine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

mod agent;
mod api;
mod attacks;
mod containers;
mod contexts;
mod exec;
mod files;
mod hygiene;
mod lifecycle;
mod mcp;
mod pools;
mod processes;
mod reconcile;
mod stream;
mod tenancy;
mod terminal;
