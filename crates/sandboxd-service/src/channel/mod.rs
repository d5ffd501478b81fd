//! The service's own adapter of the sandbox channel port: the engine's exec and archive
//! API (`engine.rs`, its operations of the port in `port.rs`, transfers in
//! `engine_transfers.rs`), the path taken when a sandbox's agent is not connected. The
//! agent's adapter is `sandboxd-agent-host`'s.

mod engine;
mod engine_transfers;
mod port;

pub(crate) use engine::EngineChannel;
