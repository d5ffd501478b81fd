//! The Docker engine adapter of sandboxd: implements the engine contract
//! (`sandboxd_contracts::Engine`) through bollard, turning core plans into engine calls.
//! One module per engine resource; every call has a timeout.
//!
//! `DockerEngine` wraps one bollard client (`engine.rs`) and implements the engine
//! contract in `contract.rs`, each method handing over to its resource module. The binary
//! connects the local engine and hands it to `Server::start` as an `Arc<dyn Engine>`,
//! shared by every request, with `SshConnector` (`remote.rs`) for remote servers: one
//! `DockerEngine` per server, made on first use. Two modules serve the operator's
//! commands outside the contract: `census.rs` (`reap`) and `diagnosis.rs` (`doctor`).
#![forbid(unsafe_code)]

mod answer_bounds;
mod archive;
mod as_user;
mod builds;
mod census;
mod cgroup_leftovers;
mod cgroup_limits;
mod changes;
mod checkpoints;
mod containers;
mod contract;
mod diagnosis;
mod engine;
mod error;
mod events;
mod exec;
mod freezer;
mod images;
mod images_carried;
mod kept_memory;
mod networks;
mod prepared;
mod progress;
mod remote;
mod remote_agents;
mod snapshots;
mod ssh_transport;
mod usage;
mod volumes;

pub use answer_bounds::AnswerCaps;
pub use archive::ReadFileError;
pub use diagnosis::{EngineFacts, ImageAvailability, NetworkState};
pub use engine::DockerEngine;
pub use error::EngineError;
pub use events::ContainerDeath;
pub use exec::{ExecOutcome, ExecSpec, OutputStream, OutputTx};
pub use remote::SshConnector;
