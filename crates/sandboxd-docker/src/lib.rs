//! The Docker engine adapter of sandboxd: implements the engine contract
//! (`sandboxd_contracts::Engine`) through bollard, turning core plans into engine calls.
//! One module per engine resource; every call has a timeout.
#![forbid(unsafe_code)]

mod answer_bounds;
mod archive;
mod as_user;
mod census;
mod cgroup_leftovers;
mod cgroup_limits;
mod changes;
mod containers;
mod diagnosis;
mod engine;
mod error;
mod events;
mod exec;
mod freezer;
mod images;
mod networks;
mod port;
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
