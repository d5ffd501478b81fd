//! The service's own adapter of the sandbox channel contract: the engine's exec and archive
//! API (`engine.rs`, its operations of the contract in `contract.rs`, transfers in
//! `engine_transfers.rs`), the path taken when a sandbox's agent is not connected. The
//! agent's adapter is `sandboxd-agent-host`'s.

mod contract;
mod engine;
mod engine_transfers;

pub(crate) use engine::EngineChannel;
