//! HTTP routes, grouped by resource.

pub mod exec_stream;
pub mod health;
pub mod port_socket;
pub mod preview;
pub mod sandbox;
pub mod session;
pub mod sign_in;
pub mod terminal;
pub mod transfers;
