//! The values that cross between the service and what it drives (an engine, the agent):
//! what a command is and did, what an engine reports, and why an engine operation
//! failed, and the [`Engine`] port itself: the service drives any engine through it.
//! Defined here, so that neither side depends on the other's crate.
#![forbid(unsafe_code)]

mod engine;
mod errors;
mod events;
mod exec;
mod remote;

pub use engine::{Chunks, Deaths, Engine, HostResources, UsageSample};
pub use errors::{EngineError, ReadFileError};
pub use events::ContainerDeath;
pub use exec::{ExecOutcome, ExecSpec, OutputStream, OutputTx};
pub use remote::{
    AgentConnections, ByteStream, ConnectError, Connector, Probe, Reachability, RemoteAgent,
    RemoteAgents, RemoteServer, RemoteSpec,
};
