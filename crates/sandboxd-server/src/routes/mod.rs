//! HTTP routes, grouped by resource.

pub mod access;
pub mod changes;
pub mod contexts;
pub mod egress;
pub mod exec_stream;
pub mod health;
pub mod port_socket;
pub mod ports;
pub mod preview;
pub mod processes;
pub mod projects;
pub mod sandbox;
pub mod servers;
pub mod session;
pub mod sign_in;
pub mod snapshots;
pub mod terminal;
pub mod transfers;
pub mod volumes;
