//! End-to-end tests: the real server over HTTP, on the real Docker engine, with SQLite.
//! They need the local test images (scripts/build-local-images.sh) and fail loudly
//! without an engine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;
mod remote_host;

mod agent;
mod api;
mod attacks;
mod bad_data;
mod changes;
mod containers;
mod contexts;
mod dashboard_sessions;
mod e2b;
mod e2b_domain;
mod e2b_envd;
mod egress;
mod egress_bindings;
mod egress_credentials;
mod egress_proxy;
mod engine_restart;
mod exec;
mod exposed_ports;
mod files;
mod hostile_engine;
mod hygiene;
mod image_volumes;
mod images;
mod impostor;
mod isolation;
mod isolation_floor;
mod lifecycle;
mod main_process;
mod mcp;
mod pause;
mod pools;
mod ports;
mod preview;
mod preview_origin;
mod processes;
mod quotas;
mod reconcile;
mod remote_engine;
mod remote_servers;
mod secrets_at_rest;
mod sessions;
mod snapshots;
mod stream;
mod tenancy;
mod terminal;
mod transfers;
mod typed_client;
mod usage;
mod volumes;
mod widening;
